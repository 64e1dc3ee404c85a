//! Tortoise against hand-worked cases: who is exempt, and the limit's long-run rate.

mod common;

use common::*;
use onionlab_core::SimDuration;
use onionlab_mech::tortoise::{Directions, LimitUnit, Tortoise, DEFAULT_CHECK_INTERVAL};
use onionlab_net::LatencyModel;
use onionlab_tor::kist::KistParams;
use onionlab_tor::*;

const KB: u64 = 1000;

fn tortoise(rate: u64) -> Tortoise {
    Tortoise::new(rate, rate, Directions::Both, DEFAULT_CHECK_INTERVAL).unwrap()
}

/// guard (Stable+Fast) -> middle (flags given) -> exit (Stable+Fast), `clients` clients,
/// one server; every relay runs Tortoise at `rate`. 1 s refills as in tor 0.2.1.
fn network(middle_flags: RelayFlags, clients: usize, rate: u64) -> (TorSim, [NodeId; 3], Vec<NodeId>, NodeId) {
    network_with(middle_flags, clients, || tortoise(rate))
}

/// [`network`] with every relay running the Tortoise `hook` makes.
fn network_with(middle_flags: RelayFlags, clients: usize, hook: impl Fn() -> Tortoise) -> (TorSim, [NodeId; 3], Vec<NodeId>, NodeId) {
    let cfg = TorConfig { refill_interval: SimDuration::from_secs(1), ..TorConfig::default() };
    let mut tor = TorNetwork::new(cfg, LatencyModel::constant(SimDuration::from_millis(5)), BandwidthWeights::uniform(), 1);
    let sf = RelayFlags::STABLE | RelayFlags::FAST;
    let g = tor.add_relay(relay("guard", 20 * MIB, RelayFlags::GUARD | sf)).unwrap();
    let m = tor.add_relay(relay("middle", 20 * MIB, middle_flags | RelayFlags::FAST)).unwrap();
    let e = tor.add_relay(relay("exit", 20 * MIB, RelayFlags::EXIT | sf)).unwrap();
    let cs = (0..clients).map(|i| tor.add_client(endpoint(&format!("client{i}"))).unwrap()).collect();
    let s = tor.add_server(endpoint("server")).unwrap();
    let mut sim = TorSim::new(tor);
    for r in [g, m, e] {
        sim.tor.set_relay_hook(&mut sim.q, r, Box::new(hook())).unwrap();
    }
    (sim, [g, m, e], cs, s)
}

#[test]
fn a_plain_clients_long_run_rate_never_exceeds_the_limit() {
    let rate = 100 * KB;
    let (mut sim, [g, ..], c, s) = network(RelayFlags::STABLE, 1, rate);
    sim.start_stream(c[0], s, 100 * MIB, 0).unwrap();
    let mut written = vec![];
    for sec in 1..=60 {
        sim.run_until(t(sec), |_| {});
        written.push(sim.tor.client_connections(g)[0].bytes_written);
    }
    // Over any window of w seconds: at most rate * w plus one burst (the circuit is still
    // being built when the limit lands at the first 100 ms check).
    for w in [5usize, 10, 30] {
        for i in 0..written.len() - w {
            let moved = written[i + w] - written[i];
            assert!(moved as f64 <= rate as f64 * w as f64 * 1.0 + rate as f64 * 1.1, "{moved} B in {w} s from {i}");
        }
    }
    let long = (written[59] - written[9]) as f64 / 50.0;
    assert!(long <= rate as f64 * 1.01 && long >= rate as f64 * 0.9, "long-run {long} B/s against a limit of {rate}");
    let conns = sim.tor.connections(g);
    let client_conn = conns.iter().find(|x| x.peer == c[0]).unwrap();
    assert_eq!(client_conn.write_limit, Some((rate, rate)));
    assert_eq!(client_conn.read_limit, Some((rate, rate)));
    // The relay reports the universal rate as the rate it throttles clients at (the
    // relays table's throttle_rate): the one value every limited connection gets.
    assert_eq!(sim.tor.hook_throttle_threshold(g), Some(rate));
    sim.tor.check_invariants().unwrap();
}

#[test]
fn an_exempt_relays_connections_are_never_limited_and_a_non_stable_relays_are() {
    let (mut sim, [g, m, e], c, s) = network(RelayFlags::default(), 2, 100 * KB);
    for &cl in &c {
        sim.start_stream(cl, s, 20 * MIB, 0).unwrap();
    }
    for sec in 1..=30 {
        sim.run_until(t(sec), |_| {});
        // The exit's connection to the guard never exists; every connection between the
        // guard and the exit side is checked at every second.
        for r in [g, m, e] {
            for conn in sim.tor.connections(r) {
                let exempt_peer = conn.peer_flags.is_some_and(|f| f.contains(RelayFlags::STABLE | RelayFlags::FAST));
                if exempt_peer || !conn.inbound {
                    assert_eq!((conn.read_limit, conn.write_limit), (None, None), "relay {r} limits exempt peer {}", conn.peer);
                } else if sec >= 1 && conn.peer_kind != NodeKind::Server {
                    assert!(conn.write_limit.is_some(), "relay {r} does not limit non-exempt peer {} at {sec} s", conn.peer);
                }
            }
        }
    }
    // The middle is not Stable: the exit limits the connection the middle opened to it;
    // the guard opened its own connection to the middle, which the limit never touches.
    assert!(sim.tor.connections(e).iter().any(|c| c.peer == m && c.inbound && c.write_limit.is_some()));
    assert!(sim.tor.connections(g).iter().any(|c| c.peer == m && !c.inbound && c.write_limit.is_none()));
    sim.tor.check_invariants().unwrap();
}

#[test]
fn a_client_relay_enters_through_its_own_relay_and_is_exempt() {
    let rate = 100 * KB;
    let (mut sim, [g, ..], c, s) = network(RelayFlags::STABLE, 1, rate);
    // Add a client-relay: its relay is Stable+Fast, runs Tortoise with its operator exempt,
    // and every circuit of the client enters through it.
    let own = sim.tor.add_relay(relay("own", 5 * MIB, RelayFlags::STABLE | RelayFlags::FAST)).unwrap();
    let op = sim.tor.add_client(endpoint("operator")).unwrap();
    sim.tor.use_bridge(op, own).unwrap();
    sim.tor.set_relay_hook(&mut sim.q, own, Box::new(tortoise(rate).with_operator(op))).unwrap();
    sim.start_stream(c[0], s, 50 * MIB, 0).unwrap();
    sim.start_stream(op, s, 50 * MIB, 1).unwrap();
    sim.run_until(t(5), |_| {});
    let plain_before = sim.tor.client_connections(g)[0].bytes_written;
    let op_before = sim.tor.client_connections(own)[0].bytes_written;
    sim.run_until(t(25), |_| {});
    let plain = (sim.tor.client_connections(g)[0].bytes_written - plain_before) as f64 / 20.0;
    let opc = sim.tor.client_connections(own);
    assert_eq!(opc.len(), 1, "the operator's only connection is to its own relay");
    assert_eq!(opc[0].throttle, None, "the operator is exempt at its own relay");
    let mine = (opc[0].bytes_written - op_before) as f64 / 20.0;
    assert!(plain <= rate as f64 * 1.05, "plain client at {plain} B/s");
    assert!(mine > 5.0 * rate as f64, "client-relay at {mine} B/s, not limited");
    assert!(sim.tor.client_connections(g).iter().all(|cc| cc.client != op), "it never uses the guard");
    sim.tor.check_invariants().unwrap();
}

#[test]
fn bad_parameters_name_the_field() {
    let e = Tortoise::new(0, 1, Directions::Both, DEFAULT_CHECK_INTERVAL).err().unwrap();
    assert!(e.to_string().starts_with("rate:"));
    // A bucket that can never hold a cell would stop the connection, not limit it.
    let e = Tortoise::new(1, 0, Directions::Both, DEFAULT_CHECK_INTERVAL).err().unwrap();
    assert!(e.to_string().starts_with("burst:"), "{e}");
    let e = Tortoise::new(1, 1, Directions::Both, SimDuration::ZERO).err().unwrap();
    assert!(e.to_string().starts_with("check_interval:"));
}

/// An inbound connection from `peer_kind` with `peer_flags` (`None`: not in the consensus).
fn inbound(peer: NodeId, peer_kind: NodeKind, peer_flags: Option<RelayFlags>) -> PeerConnection {
    PeerConnection {
        chan: 0,
        peer,
        peer_kind,
        peer_flags,
        inbound: true,
        bytes_read: 0,
        bytes_written: 0,
        read_limit: None,
        write_limit: None,
        circuit_limits: (None, None),
    }
}

#[test]
fn only_stable_and_fast_relays_and_the_operator_are_exempt() {
    // Paper 4.1: "relays that are marked as STABLE and FAST are exempt from the universal
    // rate limit"; "connections from all other routers are subject to the universal rate
    // limit". Spec 1.3: exempt iff the consensus lists the peer with flags >= {Stable, Fast}.
    let (rate, burst) = (100 * KB, 300 * KB);
    let h = Tortoise::new(rate, burst, Directions::Both, DEFAULT_CHECK_INTERVAL).unwrap().with_operator(7);
    let limited = (Some((rate, burst)), Some((rate, burst)));
    let (s, f) = (RelayFlags::STABLE, RelayFlags::FAST);
    let cases = [
        ("Stable+Fast relay", inbound(1, NodeKind::Relay, Some(s | f)), (None, None)),
        ("Stable+Fast guard", inbound(1, NodeKind::Relay, Some(s | f | RelayFlags::GUARD)), (None, None)),
        ("Stable, not Fast", inbound(1, NodeKind::Relay, Some(s | RelayFlags::GUARD)), limited),
        ("Fast, not Stable", inbound(1, NodeKind::Relay, Some(f | RelayFlags::EXIT)), limited),
        ("relay with no flags", inbound(1, NodeKind::Relay, Some(RelayFlags::default())), limited),
        ("relay not in the consensus", inbound(1, NodeKind::Relay, None), limited),
        ("plain client", inbound(5, NodeKind::Client, None), limited),
        ("the relay's operator", inbound(7, NodeKind::Client, None), (None, None)),
        ("own outbound connection", PeerConnection { inbound: false, ..inbound(1, NodeKind::Relay, None) }, (None, None)),
    ];
    for (what, conn, want) in cases {
        assert_eq!(h.limits_for(&conn), want, "{what}");
        assert_eq!(h.is_exempt(&conn), want == (None, None), "{what}");
    }
}

/// Runs one plain client's bulk download through guard -> middle -> exit, each running
/// `hook`: the guard's connection to the client, and the client's download rate (B/s)
/// from 10 s to 40 s.
fn one_download(hook: impl Fn() -> Tortoise) -> (PeerConnection, f64) {
    let (mut sim, [g, ..], c, s) = network_with(RelayFlags::STABLE, 1, hook);
    sim.start_stream(c[0], s, 100 * MIB, 0).unwrap();
    sim.run_until(t(10), |_| {});
    let before = sim.tor.client_connections(g)[0].bytes_written;
    sim.run_until(t(40), |_| {});
    let rate = (sim.tor.client_connections(g)[0].bytes_written - before) as f64 / 30.0;
    sim.tor.check_invariants().unwrap();
    (sim.tor.connections(g).into_iter().find(|x| x.peer == c[0]).unwrap(), rate)
}

#[test]
fn the_limit_has_the_configured_burst_and_only_its_directions() {
    // Spec 1.2: each direction has its own bucket of rate R and burst B (1.5: B is a
    // parameter); the download is the relay -> client (write) direction.
    let (rate, burst) = (100 * KB, 250 * KB);
    let make = |d| move || Tortoise::new(rate, burst, d, DEFAULT_CHECK_INTERVAL).unwrap();
    let (both, down) = one_download(make(Directions::Both));
    assert_eq!((both.read_limit, both.write_limit), (Some((rate, burst)), Some((rate, burst))));
    assert!(down <= rate as f64 * 1.01, "both directions limited: download at {down} B/s");
    let (write, down) = one_download(make(Directions::Write));
    assert_eq!((write.read_limit, write.write_limit), (None, Some((rate, burst))));
    assert!(down <= rate as f64 * 1.01, "writes limited: download at {down} B/s");
    // Limiting only what the relay reads from the client (its uploads) leaves the
    // download alone: it runs at the network's pace, far above the limit.
    let (read, down) = one_download(make(Directions::Read));
    assert_eq!((read.read_limit, read.write_limit), (Some((rate, burst)), None));
    assert!(down > 5.0 * rate as f64, "only reads limited: download at {down} B/s");
}

#[test]
fn a_new_client_connection_is_limited_within_one_check_interval() {
    // Module docs: a new connection can be unlimited for at most the check interval,
    // 100 ms by default (the config's default too), before its bucket applies.
    let rate = 100 * KB;
    let (mut sim, [g, ..], c, s) = network(RelayFlags::STABLE, 1, rate);
    sim.start_stream(c[0], s, 100 * MIB, 0).unwrap();
    let ms = |m| onionlab_core::SimTime::ZERO + SimDuration::from_millis(m);
    let mut opened = None;
    let mut now = 0;
    while opened.is_none() {
        now += 1;
        sim.run_until(ms(now), |_| {});
        opened = sim.tor.connections(g).into_iter().find(|x| x.peer == c[0]).map(|_| now);
    }
    sim.run_until(ms(now + 101), |_| {});
    let conn = sim.tor.connections(g).into_iter().find(|x| x.peer == c[0]).unwrap();
    assert_eq!(conn.write_limit, Some((rate, rate)), "opened at {now} ms, still unlimited 100 ms later");
}

// ---------------------------------------------------------------- limit_unit = "circuit"

/// guard -> middle -> exit (20 MiB/s each, all Stable+Fast), one client on that fixed path
/// and one server, with `cfg`'s 1 s refills (tor 0.2.1's); the guard runs `guard_sched`
/// (or the relays' default). Returns the relays, the client and the server.
fn fixed_line(cfg: TorConfig, guard_sched: Option<SchedulerKind>) -> (TorSim, [NodeId; 3], NodeId, NodeId) {
    let cfg = TorConfig { refill_interval: SimDuration::from_secs(1), ..cfg };
    let mut tor = TorNetwork::new(cfg, LatencyModel::constant(SimDuration::from_millis(5)), BandwidthWeights::uniform(), 1);
    let sf = RelayFlags::STABLE | RelayFlags::FAST;
    let guard = relay("guard", 20 * MIB, RelayFlags::GUARD | sf);
    let g = tor.add_relay(RelaySpec { scheduler: guard_sched.unwrap_or(guard.scheduler), ..guard }).unwrap();
    let m = tor.add_relay(relay("middle", 20 * MIB, sf)).unwrap();
    let e = tor.add_relay(relay("exit", 20 * MIB, RelayFlags::EXIT | sf)).unwrap();
    let c = tor.add_client(endpoint("client")).unwrap();
    let s = tor.add_server(endpoint("server")).unwrap();
    tor.use_fixed_path(c, [g, m, e]).unwrap();
    (TorSim::new(tor), [g, m, e], c, s)
}

/// guard -> middle -> exit, all Stable+Fast and running Tortoise at `rate` (burst one
/// second) with `unit`; the guard runs `sched`. One plain client whose `streams` bulk
/// downloads of `bytes` each take one circuit apiece over its one connection to the guard
/// (MaxCircuitDirtiness 1 ms: a stream started later takes a new circuit; the fixed path
/// keeps every circuit on the same connections). 1 s refills, as in tor 0.2.1. `base` gives
/// the rest of the Tor settings (the congestion control).
fn circuits_network(
    base: TorConfig,
    rate: u64,
    unit: LimitUnit,
    sched: SchedulerKind,
    streams: usize,
    bytes: u64,
) -> (TorSim, [NodeId; 3], NodeId) {
    let cfg = TorConfig { max_circuit_dirtiness: SimDuration::from_millis(1), ..base };
    let (mut sim, [g, m, e], c, s) = fixed_line(cfg, Some(sched));
    for r in [g, m, e] {
        let h = Tortoise::new(rate, rate, Directions::Both, DEFAULT_CHECK_INTERVAL).unwrap().with_limit_unit(unit);
        sim.tor.set_relay_hook(&mut sim.q, r, Box::new(h)).unwrap();
    }
    for i in 0..streams {
        sim.run_until(onionlab_core::SimTime::ZERO + SimDuration::from_millis(10 * i as u64 + 1), |_| {});
        sim.start_stream(c, s, bytes, i as u64).unwrap();
    }
    (sim, [g, m, e], c)
}

/// Bytes each stream of the run has received, by tag.
fn received(sim: &TorSim) -> Vec<u64> {
    let mut r: Vec<(u64, u64)> = sim.tor.unfinished_records().iter().map(|r| (r.tag, r.received)).collect();
    r.sort();
    r.into_iter().map(|(_, b)| b).collect()
}

/// Runs [`circuits_network`] with two bulk circuits from 10 s to 40 s, checking the
/// invariants (cells conserved, held circuits exactly those behind an empty bucket) every
/// second: the guard's rate to the client and each circuit's (B/s).
fn two_circuits(rate: u64, unit: LimitUnit, sched: SchedulerKind) -> (f64, Vec<f64>, TorSim, [NodeId; 3], NodeId) {
    two_circuits_with(TorConfig::default(), rate, unit, sched)
}

fn two_circuits_with(base: TorConfig, rate: u64, unit: LimitUnit, sched: SchedulerKind) -> (f64, Vec<f64>, TorSim, [NodeId; 3], NodeId) {
    let (mut sim, relays, c) = circuits_network(base, rate, unit, sched, 2, 100 * MIB);
    assert_eq!(sim.tor.client_circuits(c).len(), 2, "two circuits");
    let mut at10 = (0, vec![]);
    for sec in 1..=40 {
        sim.run_until(t(sec), |_| {});
        sim.tor.check_invariants().unwrap_or_else(|e| panic!("{unit:?} {sched:?} at {sec} s: {e}"));
        if sec == 10 {
            at10 = (sim.tor.client_connections(relays[0])[0].bytes_written, received(&sim));
        }
    }
    let total = (sim.tor.client_connections(relays[0])[0].bytes_written - at10.0) as f64 / 30.0;
    let per: Vec<f64> = received(&sim).iter().zip(&at10.1).map(|(b, a)| (b - a) as f64 / 30.0).collect();
    (total, per, sim, relays, c)
}

/// Checks [`two_circuits`]' rates under the circuit unit: the connection at 2R (within
/// -5 %/+1 %), each circuit at R on the wire (its received payload is 498 of every 543
/// bytes), from `floor` times R up to 1 % above it.
fn assert_two_circuits_at_rate(label: &str, rate: u64, total: f64, per: &[f64], floor: f64) {
    let r = rate as f64;
    assert!(total <= 2.0 * r * 1.01 && total >= 2.0 * r * 0.95, "{label}: {total} B/s");
    for (i, p) in per.iter().enumerate() {
        let wire = p * 543.0 / 498.0;
        assert!(wire <= r * 1.01 && wire >= r * floor, "{label} circuit {i}: {wire} B/s on the wire");
    }
}

#[test]
fn per_circuit_limits_give_each_circuit_the_rate_and_the_connection_the_sum() {
    // Spec 1.2's switch. Connection unit: the client's two circuits share one bucket pair
    // at the guard, R in all. Circuit unit: each circuit has its own, R each, 2R in all
    // (section 6: "each circuit may be individually rate limited"). Hand-worked: R =
    // 100,000 B/s, 543 B a cell on the wire: 184 whole cells a second a circuit (99,912 B;
    // the 88 B left are lost at the cap of a one-second burst), so 0.999 R at most; the
    // client's payload (498 B a cell) is 91.7 % of that.
    let rate = 100 * KB;
    let (conn, conn_per, ..) = two_circuits(rate, LimitUnit::Connection, SchedulerKind::RoundRobin);
    assert!(conn <= rate as f64 * 1.01 && conn >= rate as f64 * 0.95, "connection unit: {conn} B/s");
    let (circ, per, sim, [g, m, e], c) = two_circuits(rate, LimitUnit::Circuit, SchedulerKind::RoundRobin);
    assert_two_circuits_at_rate("circuit unit", rate, circ, &per, 0.9);
    let conn_sum: f64 = conn_per.iter().sum::<f64>() * 543.0 / 498.0;
    assert!(conn_sum <= rate as f64 * 1.01, "connection unit, the circuits together: {conn_sum} B/s");
    // The connection itself has no buckets under the circuit unit; its circuits do.
    let cc = sim.tor.connections(g).into_iter().find(|x| x.peer == c).unwrap();
    assert_eq!((cc.read_limit, cc.write_limit), (None, None));
    assert_eq!(cc.circuit_limits, (Some((rate, rate)), Some((rate, rate))));
    // Exempt peers (Stable+Fast relays) are left alone, connection and circuits.
    for (r, peer) in [(m, g), (e, m), (g, m), (m, e)] {
        let x = sim.tor.connections(r).into_iter().find(|x| x.peer == peer).unwrap();
        assert_eq!((x.read_limit, x.write_limit, x.circuit_limits), (None, None, (None, None)), "relay {r} to {peer}");
    }
}

#[test]
fn every_scheduler_holds_a_circuit_whose_bucket_is_empty() {
    // The bucket gates cells where the guard's scheduler picks circuits, so it must work
    // under each: round robin (its whole-refill fill), EWMA, KIST's runs, HPD's relay-wide
    // runs. Each circuit at about R, none above.
    let rate = 100 * KB;
    let h = SimDuration::from_secs(30);
    let tick = SimDuration::from_secs(10);
    for sched in [
        SchedulerKind::RoundRobin,
        SchedulerKind::Ewma { halflife: h, tick },
        SchedulerKind::EwmaExact { halflife: h },
        SchedulerKind::Kist { params: KistParams::default(), halflife: h, tick },
        SchedulerKind::Hpd(HpdParams::default()),
    ] {
        let (total, per, ..) = two_circuits(rate, LimitUnit::Circuit, sched);
        assert_two_circuits_at_rate(&format!("{sched:?}"), rate, total, &per, 0.9);
    }
}

#[test]
fn per_circuit_limits_hold_under_vegas_congestion_control() {
    // Proposal 324's Vegas sizes each circuit's window from its RTT; a circuit held at the
    // guard by its own bucket sees its queue there as delay and backs off, but the bucket,
    // not the window, sets the rate: each circuit at about R, never above, the connection
    // at 2R, no cell lost (the invariants, every second).
    let rate = 100 * KB;
    let vegas = TorConfig { congestion_control: CongestionControlKind::Vegas(VegasParams::default().into()), ..TorConfig::default() };
    for sched in [SchedulerKind::RoundRobin, SchedulerKind::Hpd(HpdParams::default())] {
        let (total, per, ..) = two_circuits_with(vegas.clone(), rate, LimitUnit::Circuit, sched);
        assert_two_circuits_at_rate(&format!("Vegas, {sched:?}"), rate, total, &per, 0.95);
    }
}

#[test]
fn per_circuit_limits_lose_no_cell_and_finish_every_download() {
    // Three 1 MiB downloads on three circuits, limited one by one at 100 KB/s: each takes
    // about 10.5 s (1 MiB = 2,106 cells of payload at 184 cells/s, one burst ahead), so by 20 s
    // all are complete, every byte delivered, and every cell emitted is accounted for.
    let rate = 100 * KB;
    for sched in [SchedulerKind::RoundRobin, SchedulerKind::Hpd(HpdParams::default())] {
        let (mut sim, ..) = circuits_network(TorConfig::default(), rate, LimitUnit::Circuit, sched, 3, MIB);
        for sec in 1..=20 {
            sim.run_until(t(sec), |_| {});
            sim.tor.check_invariants().unwrap_or_else(|e| panic!("{sched:?} at {sec} s: {e}"));
        }
        let recs = sim.tor.take_records();
        assert_eq!(recs.len(), 3, "{sched:?}: every download finished");
        for r in &recs {
            assert_eq!((r.error, r.received), (None, MIB), "{sched:?}");
            let ttlb = r.ttlb.unwrap().as_secs_f64();
            // Slower than 1 MiB in a burst plus 9.5 s at R; as fast as R allows.
            assert!((8.0..=12.5).contains(&ttlb), "{sched:?}: 1 MiB in {ttlb} s at {rate} B/s per circuit");
        }
        // The only cells dropped are the client's last SENDMEs, which meet their circuit
        // closed (it closes with its stream: MaxCircuitDirtiness is over); no DATA cell.
        let k = &sim.tor.counters;
        assert_eq!(k.cells_dropped, k.circuit_sendmes_dropped + k.stream_sendmes_dropped, "{sched:?}");
    }
}

#[test]
fn a_per_circuit_read_limit_holds_back_the_clients_sendmes() {
    // Only the read direction, per circuit, at 1,000 B/s with a 1,000 B burst: one 543-byte
    // cell a second leaves the guard towards the exit. The client sends only SENDMEs (3
    // cells per 100 delivered), so after the first window the download runs at about 100
    // cells (49,800 B of payload) per 3 s.
    let (mut sim, [g, ..], c, s) = fixed_line(TorConfig::default(), None);
    let h = Tortoise::new(1000, 1000, Directions::Read, DEFAULT_CHECK_INTERVAL).unwrap().with_limit_unit(LimitUnit::Circuit);
    sim.tor.set_relay_hook(&mut sim.q, g, Box::new(h)).unwrap();
    sim.start_stream(c, s, 100 * MIB, 0).unwrap();
    let mut got = vec![];
    for sec in 1..=60 {
        sim.run_until(t(sec), |_| {});
        sim.tor.check_invariants().unwrap_or_else(|e| panic!("at {sec} s: {e}"));
        got.push(received(&sim)[0]);
    }
    let rate = (got[59] - got[9]) as f64 / 50.0;
    assert!((14_000.0..=18_000.0).contains(&rate), "download at {rate} B/s behind one SENDME cell a second");
}

#[test]
fn a_cell_that_comes_to_an_empty_queue_behind_an_empty_bucket_waits_for_the_refill() {
    // Write direction, per circuit, one cell a second (rate = burst = 543 B). A second
    // circuit joins the client's limited connection at 2 s and gets its buckets at once:
    // the guard's CREATED empties its bucket, and the EXTENDED the middle sends back
    // ~20 ms later comes to an empty queue behind an empty bucket. It must wait, held, for
    // the refill at 3 s, never offered to the scheduler meanwhile (HPD's run, finding a
    // head it may not send, would stop serving the whole channel end; under debug
    // assertions it panics). Then one cell a second: the second EXTENDED at 4 s, the
    // CONNECTED at 5 s, the first DATA cell at 6 s.
    for sched in [SchedulerKind::RoundRobin, SchedulerKind::Hpd(HpdParams::default())] {
        let (mut sim, [g, ..], c) = circuits_network(TorConfig::default(), 543, LimitUnit::Circuit, sched, 1, 100 * MIB);
        sim.run_until(t(2), |_| {});
        let limits = sim.tor.connections(g).into_iter().find(|x| x.peer == c).unwrap().circuit_limits;
        assert_eq!(limits, (Some((543, 543)), Some((543, 543))));
        let server = sim.tor.num_nodes() as NodeId - 1;
        sim.start_stream(c, server, 100 * MIB, 1).unwrap();
        assert_eq!(sim.tor.client_circuits(c).len(), 2);
        for sec in 3..=15 {
            sim.run_until(t(sec), |_| {});
            sim.tor.check_invariants().unwrap_or_else(|e| panic!("{sched:?} at {sec} s: {e}"));
        }
        let second = sim.tor.unfinished_records().into_iter().find(|r| r.tag == 1).unwrap();
        let ttfb = second.ttfb.expect("the second circuit was built and its stream started").as_secs_f64();
        assert!((3.9..=4.2).contains(&ttfb), "{sched:?}: first byte {ttfb} s after the stream started at 2 s");
    }
}
