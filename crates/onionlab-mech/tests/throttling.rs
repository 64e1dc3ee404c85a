//! Guard throttling against hand-worked cases from the paper, and end to end in the model.

mod common;

use common::*;
use onionlab_core::{SimDuration, SimTime};
use onionlab_mech::throttling::conn_ewma::steady_state;
use onionlab_mech::*;
use onionlab_net::LatencyModel;
use onionlab_tor::*;

fn conn(chan: u32, written: u64) -> ClientConnection {
    ClientConnection {
        chan,
        client: chan,
        bytes_read: 0,
        bytes_written: written,
        throttle: None,
        bucket_empty_intervals: 0,
        circuit_throttle: None,
    }
}

fn state(now: SimTime, b: u64, n: usize, clients: &[ClientConnection]) -> GuardState<'_> {
    GuardState { now, bandwidth_rate: b, or_connections: n, clients }
}

// ---------------------------------------------------------------- bit-splitting

#[test]
fn bit_splitting_four_connections_on_a_1_mib_guard_get_256_kib_each() {
    let mut p = BitSplitting::new(DEFAULT_BURST, SplitDenominator::AllOrConnections).unwrap();
    let clients: Vec<_> = (0..4).map(|c| conn(c, 0)).collect();
    let d = p.tick(&state(t(1), MIB, 4, &clients));
    assert_eq!(d.len(), 4);
    assert!(d.iter().all(|&(_, th)| th == Some((256 * KIB, 2 * MIB))), "{d:?}");
    assert_eq!(p.threshold_rate(), Some(256 * KIB));
    // Two relay connections join: N = 6, the clients' share shrinks (code-faithful N).
    // Every client connection, active or not, is throttled at the split.
    let every = |rate: u64| (0..4).map(|c| (c, Some((rate, 2 * MIB)))).collect::<Vec<ThrottleDecision>>();
    assert_eq!(p.tick(&state(t(2), MIB, 6, &clients)), every(MIB / 6));
    assert_eq!(p.threshold_rate(), Some(MIB / 6));
    // The prose's readings: only client connections; only the active ones.
    let mut p = BitSplitting::new(DEFAULT_BURST, SplitDenominator::ClientConnections).unwrap();
    assert_eq!(p.tick(&state(t(1), MIB, 6, &clients)), every(256 * KIB));
    let mut p = BitSplitting::new(DEFAULT_BURST, SplitDenominator::ActiveClientConnections).unwrap();
    let busy = [conn(0, 5000), conn(1, 0), conn(2, 7000), conn(3, 0)];
    assert_eq!(p.tick(&state(t(1), MIB, 6, &busy)), every(512 * KIB), "two active: N = 2, the idle two throttled too");
    assert_eq!(p.tick(&state(t(2), MIB, 6, &busy)), every(MIB), "nobody active: N = 1");
}

#[test]
fn bit_splitting_with_no_connections_does_nothing() {
    let mut p = BitSplitting::new(DEFAULT_BURST, SplitDenominator::AllOrConnections).unwrap();
    assert!(p.tick(&state(t(1), MIB, 0, &[])).is_empty());
    assert_eq!(p.threshold_rate(), None);
}

// ---------------------------------------------------------------- static

#[test]
fn static_throttles_every_client_connection_at_its_rate() {
    let mut p = StaticThrottle::new(5 * KIB, 2 * MIB).unwrap();
    let clients = [conn(3, 0), conn(8, 99)];
    assert_eq!(p.tick(&state(t(1), MIB, 10, &clients)), vec![(3, Some((5 * KIB, 2 * MIB))), (8, Some((5 * KIB, 2 * MIB)))]);
    assert!(StaticThrottle::new(0, 1).is_err());
}

// ---------------------------------------------------------------- flagging

fn flag_params(penalty: f64) -> FlagParams {
    FlagParams {
        flag_rate: 20 * KIB,
        penalty,
        halflife: SimDuration::from_secs(30),
        burst: DEFAULT_BURST,
        freeze_penalty_at_flag: false,
        denominator: SplitDenominator::AllOrConnections,
        meta_ewma_tick_quirk: false,
    }
}

/// Two client connections on a 1 MiB/s guard with 4 OR connections (fair share 256 KiB/s):
/// one bulk at 400 KiB/s, one web at 20 KiB/s, for `secs` seconds; returns the policy and
/// the byte counters reached.
fn run_flagging(p: &mut Flagging, from: u64, secs: u64, written: &mut [u64; 2], rates: [u64; 2]) -> Vec<Vec<ThrottleDecision>> {
    let mut out = Vec::new();
    for s in from..from + secs {
        written[0] += rates[0];
        written[1] += rates[1];
        let clients = [conn(1, written[0]), conn(2, written[1])];
        out.push(p.tick(&state(t(s), MIB, 4, &clients)));
    }
    out
}

#[test]
fn flagging_flags_the_connection_faster_than_the_fair_share_and_unflags_it_below_p_times_m() {
    let mut p = Flagging::new(flag_params(0.5)).unwrap();
    let mut w = [0u64; 2];
    let d = run_flagging(&mut p, 1, 600, &mut w, [400 * KIB, 20 * KIB]);
    assert!(p.is_flagged(1), "bulk is flagged");
    assert!(!p.is_flagged(2), "web is not");
    assert!(d.iter().flatten().all(|&(chan, _)| chan == 1), "only the bulk connection is ever touched");
    assert_eq!(d.iter().flatten().next(), Some(&(1, Some((20 * KIB, DEFAULT_BURST)))));
    // M converged to the fair share's steady state; E(bulk) to its own.
    let m = steady_state((MIB / 4) as f64, SimDuration::from_secs(30));
    assert!((p.meta_ewma() - m).abs() / m < 1e-6);
    assert!((p.conn_ewma(1) - steady_state((400 * KIB) as f64, SimDuration::from_secs(30))).abs() / m < 1e-3);
    // Throttled to a trickle (5 KiB/s sent): E decays; it is unflagged the first tick
    // E < 0.5 M, and not before.
    let d = run_flagging(&mut p, 601, 300, &mut w, [5 * KIB, 20 * KIB]);
    let at = d.iter().position(|x| x.contains(&(1, None))).expect("unflagged");
    // Hand-worked: E(n) = E0 2^(-n/30) + s (1 - 2^(-n/30)) with s = steady state of 5 KiB/s;
    // solve E(n) < M/2.
    let (e0, s) =
        (steady_state((400 * KIB) as f64, SimDuration::from_secs(30)), steady_state((5 * KIB) as f64, SimDuration::from_secs(30)));
    let n = (1..).find(|&n: &i32| e0 * 0.5f64.powf(n as f64 / 30.0) + s * (1.0 - 0.5f64.powf(n as f64 / 30.0)) < m / 2.0).unwrap();
    assert_eq!(at as i32 + 1, n, "unflagged after exactly the hand-worked number of ticks");
    assert!(!p.is_flagged(1));
}

#[test]
fn flagging_flags_above_m_itself_not_above_p_times_m() {
    // Fair share 256 KiB/s (1 MiB/s, N = 4). E and M both start at 0 and grow alike under
    // constant rates, so E/M = rate / share from the first tick: only the connection just
    // above the share is flagged. 255 KiB/s is just below it, and 200 KiB/s is below M
    // but above P*M (P = 0.5): neither is flagged, ever.
    let mut p = Flagging::new(flag_params(0.5)).unwrap();
    let rates = [257 * KIB, 255 * KIB, 200 * KIB];
    let mut w = [0u64; 3];
    for s in 1..=600u64 {
        for (wi, r) in w.iter_mut().zip(rates) {
            *wi += r;
        }
        let c = [conn(1, w[0]), conn(2, w[1]), conn(3, w[2])];
        let d = p.tick(&state(t(s), MIB, 4, &c));
        if s == 1 {
            assert_eq!(d, vec![(1, Some((20 * KIB, DEFAULT_BURST)))]);
        }
        assert!(!d.iter().any(|&(chan, _)| chan != 1), "tick {s}: {d:?}");
    }
    assert!(p.is_flagged(1) && !p.is_flagged(2) && !p.is_flagged(3));
}

#[test]
fn flagging_splits_with_the_denominator_it_is_given() {
    // Four client connections, two of them active, on a 1 MiB/s guard with 6 OR
    // connections: N = 6, 4 and 2 under the three readings, as in bit-splitting.
    let busy = [conn(0, 5000), conn(1, 0), conn(2, 7000), conn(3, 0)];
    for (denominator, split) in [
        (SplitDenominator::AllOrConnections, MIB / 6),
        (SplitDenominator::ClientConnections, 256 * KIB),
        (SplitDenominator::ActiveClientConnections, 512 * KIB),
    ] {
        let mut p = Flagging::new(FlagParams { denominator, ..flag_params(0.5) }).unwrap();
        p.tick(&state(t(1), MIB, 6, &busy));
        assert_eq!(p.threshold_rate(), Some(split), "{denominator:?}");
        // The split is what M averages (algorithm 2, line 7): the connections that were
        // busy keep writing, so N stays the same, and M converges to the split's steady state.
        let mut w = [5000u64, 7000];
        for s in 2..=1000 {
            w[0] += KIB;
            w[1] += KIB;
            p.tick(&state(t(s), MIB, 6, &[conn(0, w[0]), conn(1, 0), conn(2, w[1]), conn(3, 0)]));
        }
        let m = steady_state(split as f64, SimDuration::from_secs(30));
        assert!((p.meta_ewma() - m).abs() / m < 1e-9, "{denominator:?}: M {} against {m}", p.meta_ewma());
    }
    // "Active" is since the last tick: nobody wrote since, so N is 1.
    let mut p = Flagging::new(FlagParams { denominator: SplitDenominator::ActiveClientConnections, ..flag_params(0.5) }).unwrap();
    p.tick(&state(t(1), MIB, 6, &busy));
    p.tick(&state(t(2), MIB, 6, &busy));
    assert_eq!(p.threshold_rate(), Some(MIB));
}

#[test]
fn flagging_with_p_zero_never_unflags() {
    let mut p = Flagging::new(flag_params(0.0)).unwrap();
    let mut w = [0u64; 2];
    run_flagging(&mut p, 1, 300, &mut w, [400 * KIB, 20 * KIB]);
    assert!(p.is_flagged(1));
    let d = run_flagging(&mut p, 301, 3000, &mut w, [0, 20 * KIB]);
    assert!(p.is_flagged(1), "P = 0 never unflags");
    assert!(!d.iter().flatten().any(|&(_, th)| th.is_none()));
}

#[test]
fn flagging_frozen_penalty_is_the_codes_behaviour() {
    // With a frozen threshold P*M(t_flag) and M growing afterwards (more connections
    // leave: N drops, the fair share rises), the paper's current P*M unflags sooner.
    let mut paper = Flagging::new(flag_params(0.5)).unwrap();
    let mut code = Flagging::new(FlagParams { freeze_penalty_at_flag: true, ..flag_params(0.5) }).unwrap();
    let mut w = [0u64; 2];
    for s in 1..400 {
        w[0] += 400 * KIB;
        let c = [conn(1, w[0])];
        paper.tick(&state(t(s), MIB, 4, &c));
        code.tick(&state(t(s), MIB, 4, &c));
    }
    assert!(paper.is_flagged(1) && code.is_flagged(1));
    // N drops from 4 to 2: M rises toward twice its value; the bulk slows to 150 KiB/s.
    let (mut paper_off, mut code_off) = (None, None);
    for s in 400..1400 {
        w[0] += 150 * KIB;
        let c = [conn(1, w[0])];
        if paper.tick(&state(t(s), MIB, 2, &c)).contains(&(1, None)) {
            paper_off.get_or_insert(s);
        }
        if code.tick(&state(t(s), MIB, 2, &c)).contains(&(1, None)) {
            code_off.get_or_insert(s);
        }
    }
    let paper_off = paper_off.expect("paper semantics unflags: 150 KiB/s is below half of the new share");
    assert!(code_off.is_none_or(|c| c > paper_off), "frozen threshold unflags later: {code_off:?} vs {paper_off}");
}

#[test]
fn flagging_frozen_penalty_unflags_below_p_times_m_at_flag_time() {
    // The code's frozen threshold, on a path where it does unflag. 600 s at 200 KiB/s,
    // below the 256 KiB/s share: M converges and nobody is flagged. Then 400 KiB/s until
    // flagged (M(t_flag) then frozen at P*M), then N drops from 4 to 2 (M rises) and the
    // connection slows to 100 KiB/s. Hand-worked: E(n) = E0 2^(-n/H) + s (1 - 2^(-n/H)),
    // s the steady state of 100 KiB/s; the code unflags at the first n with E(n) < P
    // M(t_flag), and the paper's moving P*M sooner.
    let h = SimDuration::from_secs(30);
    let mut paper = Flagging::new(flag_params(0.5)).unwrap();
    let mut code = Flagging::new(FlagParams { freeze_penalty_at_flag: true, ..flag_params(0.5) }).unwrap();
    let mut w = 0u64;
    let mut m_at_flag = None;
    for s in 1..=700u64 {
        w += if s <= 600 { 200 * KIB } else { 400 * KIB };
        let c = [conn(1, w)];
        paper.tick(&state(t(s), MIB, 4, &c));
        code.tick(&state(t(s), MIB, 4, &c));
        assert!(s > 600 || !code.is_flagged(1), "flagged at {s} s below the share");
        if m_at_flag.is_none() && code.is_flagged(1) {
            m_at_flag = Some(code.meta_ewma());
        }
    }
    let m_at_flag = m_at_flag.expect("400 KiB/s is flagged");
    assert!(paper.is_flagged(1) && code.is_flagged(1));
    let e0 = code.conn_ewma(1);
    let s100 = steady_state((100 * KIB) as f64, h);
    let decay = |n: u64| 0.5f64.powf(n as f64 / h.as_secs_f64());
    let n = (1..).find(|&n| e0 * decay(n) + s100 * (1.0 - decay(n)) < 0.5 * m_at_flag).unwrap();
    let (mut paper_off, mut code_off) = (None, None);
    for s in 701..1500u64 {
        w += 100 * KIB;
        let c = [conn(1, w)];
        if paper.tick(&state(t(s), MIB, 2, &c)).contains(&(1, None)) {
            paper_off.get_or_insert(s);
        }
        if code.tick(&state(t(s), MIB, 2, &c)).contains(&(1, None)) {
            code_off.get_or_insert(s);
        }
    }
    assert_eq!(code_off, Some(700 + n), "the frozen threshold unflags after exactly the hand-worked number of ticks");
    assert!(paper_off.expect("the paper's P*M unflags too") < 700 + n);
}

#[test]
fn the_codes_meta_ewma_quirk_understates_m_by_at_most_2_to_the_10_over_h() {
    let h = SimDuration::from_secs(30);
    let mut paper = Flagging::new(flag_params(0.5)).unwrap();
    let mut code = Flagging::new(FlagParams { meta_ewma_tick_quirk: true, ..flag_params(0.5) }).unwrap();
    for s in 1..=1000 {
        let c = [conn(1, 0)];
        paper.tick(&state(t(s), MIB, 4, &c));
        code.tick(&state(t(s), MIB, 4, &c));
    }
    let ratio = paper.meta_ewma() / code.meta_ewma();
    let bound = 2f64.powf(10.0 / h.as_secs_f64());
    assert!(ratio > 1.0 && ratio < bound, "M understated by {ratio}, at most {bound}");
}

// ---------------------------------------------------------------- threshold

fn thresh_params(fraction: f64, floor: u64) -> ThresholdParams {
    ThresholdParams {
        fraction,
        refresh: SimDuration::from_secs(10),
        floor,
        halflife: SimDuration::from_secs(30),
        burst: DEFAULT_BURST,
        semantics: ThresholdSemantics::Paper,
        throughput: ThresholdThroughput::Transferred,
    }
}

/// Ten connections; connection i receives (i+1) * 10 KiB/s from the guard (written; so 9
/// is the loudest) and sends a tenth of that upstream (read), like a downloading client.
fn run_threshold(p: &mut Threshold, secs: u64) -> Vec<ThrottleDecision> {
    let mut last = Vec::new();
    for s in 0..=secs {
        let clients: Vec<_> = (0..10u32)
            .map(|i| ClientConnection {
                chan: i,
                client: i,
                bytes_read: (i as u64 + 1) * KIB * s,
                bytes_written: (i as u64 + 1) * 10 * KIB * s,
                throttle: None,
                bucket_empty_intervals: 0,
                circuit_throttle: None,
            })
            .collect();
        let d = p.tick(&state(t(s + 1), MIB, 12, &clients));
        if !d.is_empty() {
            last = d;
        }
    }
    last
}

#[test]
fn threshold_throttles_the_loudest_fraction_at_the_kth_loudest_mean_throughput() {
    // T = 0.2, N = 10: the two loudest (9 and 8) at connection 8's throughput, the bytes
    // it transferred per second: 90 KiB/s down + 9 KiB/s up = 99 KiB/s.
    let mut p = Threshold::new(thresh_params(0.2, 5 * KIB)).unwrap();
    let mut d = run_threshold(&mut p, 30);
    d.sort();
    let mut want: Vec<ThrottleDecision> = (0..8).map(|c| (c, None)).collect();
    want.push((8, Some((99 * KIB, DEFAULT_BURST))));
    want.push((9, Some((99 * KIB, DEFAULT_BURST))));
    assert_eq!(d, want);
    assert_eq!(p.rate(), Some(99 * KIB));
}

#[test]
fn threshold_rate_of_a_throttled_kth_connection_creeps_holds_or_halves_by_what_it_counts() {
    // Two connections, T = 0.5: connection 1 is the loudest and sets the rate. It first
    // receives 100 KiB/s; once throttled it receives exactly its rate (a bulk download with
    // an empty bucket), and it sends a fiftieth of that upstream (SENDMEs). Every R = 10 s:
    // - the paper's "bytes transferred" (read + written): 102 KiB/s, then 104448 + 2088 B/s
    //   = 104.04 KiB/s, and so on: up a fiftieth each time;
    // - the larger direction: the 100 KiB/s it was held at;
    // - the code's (read + written) / 2: about half each time, down to the floor.
    let rates = |semantics, throughput| {
        let params = ThresholdParams { fraction: 0.5, semantics, throughput, ..thresh_params(0.5, 5 * KIB) };
        let mut p = Threshold::new(params).unwrap();
        let (mut written, mut read, mut rate, mut out) = (0u64, 0u64, 100 * KIB, Vec::new());
        for s in 0..=40u64 {
            let clients = [
                ClientConnection {
                    chan: 0,
                    client: 0,
                    bytes_read: 0,
                    bytes_written: 0,
                    throttle: None,
                    bucket_empty_intervals: 0,
                    circuit_throttle: None,
                },
                ClientConnection {
                    chan: 1,
                    client: 1,
                    bytes_read: read,
                    bytes_written: written,
                    throttle: None,
                    bucket_empty_intervals: 0,
                    circuit_throttle: None,
                },
            ];
            for (chan, th) in p.tick(&state(t(s + 1), MIB, 2, &clients)) {
                if chan == 1 {
                    rate = th.expect("the loudest is throttled").0;
                    out.push(rate);
                }
            }
            written += rate;
            read += rate / 50;
        }
        out
    };
    use ThresholdSemantics::{Code, Paper};
    use ThresholdThroughput::{LargerDirection, Transferred};
    assert_eq!(rates(Paper, Transferred), vec![104_448, 106_536, 108_666, 110_839]);
    assert_eq!(rates(Paper, LargerDirection), vec![102_400; 4]);
    assert_eq!(rates(Code, Transferred), vec![52_224, 26_634, 13_583, 6_927]);
    // The code's semantics have their own measure.
    assert!(Threshold::new(ThresholdParams { semantics: Code, throughput: LargerDirection, ..thresh_params(0.5, 5 * KIB) }).is_err());
}

#[test]
fn threshold_applies_the_floor_and_throttles_nobody_when_t_n_rounds_to_zero() {
    let mut p = Threshold::new(thresh_params(0.2, 200 * KIB)).unwrap();
    let d = run_threshold(&mut p, 30);
    assert!(d.contains(&(9, Some((200 * KIB, DEFAULT_BURST)))), "raised to the floor F: {d:?}");
    let mut p = Threshold::new(thresh_params(0.05, 5 * KIB)).unwrap();
    let d = run_threshold(&mut p, 30);
    assert_eq!(d.len(), 10);
    assert!(d.iter().all(|&(_, th)| th.is_none()), "floor(0.05 * 10) = 0: nobody");
    // N falls from 10 to 4 with T = 0.2: floor(0.8) = 0, and the connections throttled
    // before are released (the paper's lines 13-14: infinity), not left as they were.
    let mut p = Threshold::new(thresh_params(0.2, 5 * KIB)).unwrap();
    assert_eq!(run_threshold(&mut p, 10).iter().filter(|x| x.1.is_some()).count(), 2);
    let four: Vec<_> = (6..10u32).map(|i| conn(i, 0)).collect();
    let mut released = (12..=21u64).map(|s| p.tick(&state(t(s), MIB, 4, &four))).find(|d| !d.is_empty()).unwrap();
    released.sort();
    assert_eq!(released, vec![(6, None), (7, None), (8, None), (9, None)]);
}

#[test]
fn threshold_ranks_connections_by_their_ewma_not_by_the_last_r_seconds() {
    // T = 0.5, R = 10 s, two connections. A sends 100 KiB/s for 60 s, then 10 KiB/s; B
    // 10 KiB/s, then 50 KiB/s. At the refresh at t = 71 B sent more over the last R, but A
    // is still the louder by EWMA (half-life 30 s): A is throttled at its own 10 KiB/s.
    let mut p = Threshold::new(ThresholdParams { fraction: 0.5, ..thresh_params(0.5, 5 * KIB) }).unwrap();
    let (mut a, mut b) = (0u64, 0u64);
    let mut last = Vec::new();
    for s in 1..=71u64 {
        let d = p.tick(&state(t(s), MIB, 2, &[conn(1, a), conn(2, b)]));
        if !d.is_empty() {
            last = d;
        }
        if s < 61 {
            a += 100 * KIB;
            b += 10 * KIB;
        } else {
            a += 10 * KIB;
            b += 50 * KIB;
        }
    }
    last.sort();
    assert_eq!(last, vec![(1, Some((10 * KIB, DEFAULT_BURST))), (2, None)]);
}

#[test]
fn threshold_code_semantics_throttle_all_but_the_quietest_fraction() {
    let mut p = Threshold::new(ThresholdParams { semantics: ThresholdSemantics::Code, ..thresh_params(0.2, 5 * KIB) }).unwrap();
    let d = run_threshold(&mut p, 30);
    // Ascending index floor(0.2 * 10) = 2 is connection 2 ((30 + 3) / 2 KiB/s): 2..=9
    // throttled.
    let throttled: Vec<u32> = d.iter().filter(|x| x.1.is_some()).map(|x| x.0).collect();
    assert_eq!(throttled.len(), 8);
    assert!(d.contains(&(9, Some((33 * KIB / 2, DEFAULT_BURST)))));
}

#[test]
fn threshold_acts_only_every_r_seconds() {
    let mut p = Threshold::new(thresh_params(0.2, 5 * KIB)).unwrap();
    let clients: Vec<_> = (0..10u32).map(|i| conn(i, 0)).collect();
    let mut acted = Vec::new();
    for s in 1..=35u64 {
        let d = p.tick(&state(t(s), MIB, 10, &clients));
        if !d.is_empty() {
            acted.push(s);
            // Nobody sent anything: the k-th loudest's rate is 0, lifted to the floor F
            // (the paper's rule "rate < F -> F"; the code leaves 0 at 0).
            assert_eq!(d.len(), 10);
            assert_eq!(d.iter().filter(|x| x.1 == Some((5 * KIB, DEFAULT_BURST))).count(), 2, "{d:?}");
            assert_eq!(p.rate(), Some(5 * KIB));
        }
    }
    assert_eq!(acted, vec![11, 21, 31]);
}

#[test]
fn bad_parameters_name_the_field() {
    let e = Flagging::new(flag_params(1.5)).err().unwrap();
    assert!(e.to_string().starts_with("penalty:"), "{e}");
    let e = Threshold::new(thresh_params(-0.1, 1)).err().unwrap();
    assert!(e.to_string().starts_with("fraction:"), "{e}");
    let e = Threshold::new(thresh_params(0.1, 0)).err().unwrap();
    assert!(e.to_string().starts_with("floor:"), "{e}");
}

// ---------------------------------------------------------------- end to end

/// guard -> middle -> exit, `clients` clients, one server; 1 s refills as in the paper.
fn line(guard_rate: u64, clients: usize) -> (TorSim, NodeId, Vec<NodeId>, NodeId) {
    let cfg = TorConfig { refill_interval: SimDuration::from_secs(1), ..TorConfig::default() };
    let mut tor = TorNetwork::new(cfg, LatencyModel::constant(SimDuration::from_millis(10)), BandwidthWeights::uniform(), 1);
    let g = tor.add_relay(relay("guard", guard_rate, RelayFlags::GUARD | RelayFlags::FAST)).unwrap();
    tor.add_relay(relay("middle", 50 * MIB, RelayFlags::FAST)).unwrap();
    tor.add_relay(relay("exit", 50 * MIB, RelayFlags::EXIT | RelayFlags::FAST)).unwrap();
    let cs = (0..clients).map(|i| tor.add_client(endpoint(&format!("client{i}"))).unwrap()).collect();
    let s = tor.add_server(endpoint("server")).unwrap();
    (TorSim::new(tor), g, cs, s)
}

#[test]
fn a_statically_throttled_client_never_exceeds_rate_plus_burst() {
    // Figure 4a's configuration: 5 KiB/s with a 2 MiB burst, probed with a 10 MiB download.
    let (mut sim, g, c, s) = line(10 * MIB, 1);
    sim.tor.set_relay_hook(&mut sim.q, g, Box::new(ThrottleHook::new(StaticThrottle::new(5 * KIB, 2 * MIB).unwrap()))).unwrap();
    sim.start_stream(c[0], s, 10 * MIB, 0).unwrap();
    let mut samples = Vec::new();
    for sec in 1..=120u64 {
        sim.run_until(t(sec), |_| {});
        let written: u64 = sim.tor.client_connections(g).iter().map(|cc| cc.bytes_written).sum();
        samples.push(written);
    }
    // Until the throttle lands at the first tick (1 s) the connection is unlimited: at
    // most a second of the guard's bandwidth.
    assert!(samples[0] <= 10 * MIB + 10 * MIB / 100, "{} bytes in the first second", samples[0]);
    // From then on the bucket (2 MiB, refilled at 5 KiB/s) bounds it: at most the burst
    // plus the rate times the time since.
    for (i, &w) in samples.iter().enumerate().skip(1) {
        let since = i as u64;
        assert!(w - samples[0] <= 2 * MIB + 5 * KIB * since, "{} bytes in the {since} s after the throttle landed", w - samples[0]);
    }
    // And the burst is spent: within a few seconds it has carried nearly all of it.
    assert!(samples[10] - samples[0] >= 2 * MIB - 64 * KIB, "{} bytes of the 2 MiB burst by 11 s", samples[10] - samples[0]);
    // Long run: after the burst is spent, the rate is the throttle rate.
    let late = (samples[119] - samples[59]) as f64 / 60.0;
    assert!((5.0 * 1024.0 * 0.9..=5.0 * 1024.0 * 1.02).contains(&late), "late rate {late} B/s");
    sim.tor.check_invariants().unwrap();
}

#[test]
fn flagging_end_to_end_throttles_bulk_not_web() {
    // A 1 MiB/s guard; one bulk client downloading back to back and one web-like client
    // fetching 100 KiB every 10 s.
    let (mut sim, g, c, s) = line(MIB, 2);
    let p = Flagging::new(FlagParams { flag_rate: 20 * KIB, penalty: 0.5, ..flag_params(0.5) }).unwrap();
    sim.tor.set_relay_hook(&mut sim.q, g, Box::new(ThrottleHook::new(p))).unwrap();
    sim.start_stream(c[0], s, 1 << 30, 0).unwrap();
    let mut next_web = 0u64;
    let mut web_flagged = false;
    let mut bulk_flagged_secs = 0;
    for sec in 1..=300u64 {
        if sec >= next_web {
            sim.start_stream(c[1], s, 100 * KIB, 1).unwrap();
            next_web = sec + 10;
        }
        sim.run_until(t(sec), |_| {});
        let conns = sim.tor.client_connections(g);
        let web = conns.iter().find(|cc| cc.client == c[1]).unwrap();
        web_flagged |= web.throttle.is_some();
        let bulk = conns.iter().find(|cc| cc.client == c[0]).unwrap();
        if bulk.throttle.is_some() {
            assert_eq!(bulk.throttle, Some((20 * KIB, DEFAULT_BURST)));
            bulk_flagged_secs += 1;
        }
    }
    // Flagged, it is throttled until its EWMA decays below P*M, unflagged, bursts, and is
    // flagged again: most of the time it is flagged.
    assert!(bulk_flagged_secs > 150, "bulk flagged {bulk_flagged_secs} of 300 s");
    assert!(!web_flagged, "the web connection is never flagged");
    // Guard's OR connections: two clients and the middle: fair share MiB/3.
    assert_eq!(sim.tor.hook_throttle_threshold(g), Some(MIB / 3));
    sim.tor.check_invariants().unwrap();
}

/// Flagging end to end on a 1 MiB/s guard with one bulk client (penalty 0.5, so it is
/// flagged and unflagged in turn), for 300 s: the bytes the guard wrote to it in the
/// second after each tick at which it was flagged again, and the write buckets seen at the
/// ticks it was unflagged.
fn flagging_lifted(unthrottled: Unthrottled) -> (Vec<u64>, Vec<Option<(u64, u64)>>) {
    let (mut sim, g, c, s) = line(MIB, 1);
    let p = Flagging::new(FlagParams { flag_rate: 20 * KIB, penalty: 0.5, ..flag_params(0.5) }).unwrap();
    sim.tor.set_relay_hook(&mut sim.q, g, Box::new(ThrottleHook::with_unthrottled(p, unthrottled))).unwrap();
    sim.start_stream(c[0], s, 1 << 30, 0).unwrap();
    let (mut reflagged, mut lifted) = (Vec::new(), Vec::new());
    let (mut was_flagged, mut ever_flagged, mut at_reflag) = (false, false, None);
    for sec in 1..=300u64 {
        sim.run_until(t(sec), |_| {});
        let bulk = &sim.tor.client_connections(g)[0];
        if let Some(before) = at_reflag.take() {
            reflagged.push(bulk.bytes_written - before);
        }
        let flagged = bulk.throttle.is_some();
        if flagged && !was_flagged && ever_flagged {
            at_reflag = Some(bulk.bytes_written);
        }
        if !flagged && ever_flagged {
            lifted.push(sim.tor.connections(g).iter().find(|pc| pc.chan == bulk.chan).unwrap().write_limit);
        }
        ever_flagged |= flagged;
        was_flagged = flagged;
    }
    sim.tor.check_invariants().unwrap();
    (reflagged, lifted)
}

#[test]
fn unflagging_as_the_code_does_keeps_the_bucket_at_the_guards_rate() {
    // The paper's rate of infinity: unflagged, the bulk connection has no bucket, so each
    // time it is flagged again a new, full 2 MiB bucket lets it through at the guard's
    // 1 MiB/s (2,000 cells of 543 B) for the next second. The authors' code: unflagged, its
    // buckets stay at the guard's BandwidthRate with the 2 MiB burst and keep only what it
    // leaves unused (it runs at about 97 % of the rate, so some 15-30 KB a second); flagged
    // again, it has those plus one 20 KiB refill: more than the refill alone, far less
    // than the paper's second (measured: 96-470 KB over seven re-flags, growing with the
    // time spent unflagged, 6 to 40 s).
    let (paper, paper_lifted) = flagging_lifted(Unthrottled::Paper);
    let (code, code_lifted) = flagging_lifted(Unthrottled::Code { burst: DEFAULT_BURST });
    assert!(!paper.is_empty() && !code.is_empty(), "flagged again at least once");
    assert!(paper_lifted.iter().all(Option::is_none), "the paper's unflagged connection has no bucket");
    assert!(code_lifted.iter().all(|b| *b == Some((MIB, DEFAULT_BURST))), "{code_lifted:?}");
    assert!(paper.iter().all(|&b| b >= MIB), "paper: {paper:?} B in the second after re-flagging");
    assert!(code.iter().all(|&b| b > 60 * KIB && b < MIB / 2), "code: {code:?} B in the second after re-flagging");
}
