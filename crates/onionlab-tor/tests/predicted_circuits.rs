//! Predicted circuits (tor's `circuit_predict_and_launch_new`) against hand-worked cases.
//!
//! Every case uses a line of three relays, so every circuit has the same path and builds
//! in the same time (10 ms one way: under 0.2 s); the clock times below follow from
//! tor's rules alone.

mod common;

use common::*;
use onionlab_core::SimDuration;
use onionlab_tor::*;
use proptest::prelude::*;

fn predicting(idle_timeout_s: u64) -> TorConfig {
    TorConfig { predicted_circuits: true, circuit_idle_timeout: SimDuration::from_secs(idle_timeout_s), ..TorConfig::default() }
}

fn states(sim: &TorSim, client: NodeId) -> Vec<(u32, CircuitState)> {
    sim.tor.client_circuits(client).iter().map(|&c| (c, sim.tor.circuit_state(c))).collect()
}

#[test]
fn a_client_keeps_two_circuits_ready_and_streams_prefer_the_dirty_one() {
    let (mut sim, _, c, s) = line(predicting(3600), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    // t = 0: the client's tor starts with its first stream. Its first check launches a
    // circuit (no circuit can take a stream yet), which the stream then takes.
    let a = sim.start_stream(c[0], s, 10_000, 0).unwrap();
    let circ_a = sim.tor.stream_circuit(a);
    assert_eq!(sim.tor.client_circuits(c[0]), &[circ_a]);
    assert_eq!(sim.tor.circuit_state(circ_a), CircuitState::Building);
    // t = 1 s: the next check finds one circuit (dirty, but younger than
    // MaxCircuitDirtiness) against MIN_CIRCUITS_HANDLING_STREAM = 2, so it launches a
    // clean one; after that, two are ready and nothing more is launched.
    sim.run_until(secs(0.99), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 1);
    assert_eq!(sim.tor.client_circuits(c[0]).len(), 1);
    sim.run_until(secs(1.5), |t| t.check_invariants().unwrap());
    let circs = states(&sim, c[0]);
    assert_eq!(circs.len(), 2, "{circs:?}");
    let circ_b = circs[1].0;
    assert!(circs.iter().all(|&(_, st)| st == CircuitState::Open), "{circs:?}");
    // A later stream takes the dirty circuit, not the clean one (`circuit_is_better`).
    let b = sim.start_stream(c[0], s, 10_000, 1).unwrap();
    assert_eq!(sim.tor.stream_circuit(b), circ_a);
    sim.run_until(secs(599.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 2, "two ready: no more launched");
    // t = 600 s: the dirty circuit has no stream and has been dirty for 10 minutes, so it
    // closes; one circuit is left ready, and the check at the next whole second (601 s)
    // launches another.
    sim.run_until(secs(600.5), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.circuit_state(circ_a), CircuitState::Closed);
    assert_eq!(sim.tor.client_circuits(c[0]), &[circ_b]);
    sim.run_until(secs(602.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 3);
    let circs = states(&sim, c[0]);
    let circ_c = circs[1].0;
    assert_eq!(circs.len(), 2);
    // Both clean now: a stream takes the more recently created one, and pays no build
    // time: its first byte comes a round trip to the server after it starts.
    let d = sim.start_stream(c[0], s, 10_000, 2).unwrap();
    assert_eq!(sim.tor.stream_circuit(d), circ_c);
    sim.run_until(secs(610.0), |t| t.check_invariants().unwrap());
    let recs = sim.tor.take_records();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.error.is_none()), "{recs:?}");
    let ttfb = |r: &StreamRecord| r.ttfb.unwrap().as_secs_f64();
    // Circuit build (the first stream waited for it) against none (the third): both pay
    // the exit's TCP handshake and the request, 6 + 2 + 2 one-way trips of 10 ms or so.
    assert!(ttfb(&recs[0]) > 0.15, "{recs:?}");
    assert!(ttfb(&recs[2]) < 0.15, "{recs:?}");
    assert!(ttfb(&recs[0]) - ttfb(&recs[2]) > 0.1, "{recs:?}");
}

#[test]
fn clean_circuits_close_after_the_idle_timeout_and_are_replaced() {
    // CircuitIdleTimeout 100 s: the clean circuit launched at 1 s closes at 101 s, and the
    // next whole second (102 s) launches its replacement, which closes at 202 s...
    let (mut sim, _, c, s) = line(predicting(100), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    let a = sim.start_stream(c[0], s, 10_000, 0).unwrap();
    let circ_a = sim.tor.stream_circuit(a);
    sim.run_until(secs(100.9), |t| t.check_invariants().unwrap());
    assert_eq!((sim.tor.counters.circuits_built, sim.tor.counters.circuits_closed_idle), (2, 0));
    sim.run_until(secs(101.5), |t| t.check_invariants().unwrap());
    assert_eq!((sim.tor.counters.circuits_built, sim.tor.counters.circuits_closed_idle), (2, 1));
    assert_eq!(sim.tor.client_circuits(c[0]), &[circ_a], "the used circuit is not idle");
    sim.run_until(secs(102.5), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 3);
    sim.run_until(secs(250.0), |t| t.check_invariants().unwrap());
    assert_eq!((sim.tor.counters.circuits_built, sim.tor.counters.circuits_closed_idle), (4, 2));
    assert_eq!(sim.tor.client_circuits(c[0]).len(), 2);
}

#[test]
fn a_port_unused_for_an_hour_is_no_longer_predicted() {
    // One stream at t = 0: the port is predicted until 3600 s. The first circuit expires
    // at 600 s and is replaced at 601 s; the clean circuits of 1 s and 601 s close after
    // CircuitIdleTimeout (3601 s and 4201 s) and, the port no longer predicted, are not
    // replaced. A stream at 5000 s builds its circuit on demand and predicts again.
    let (mut sim, _, c, s) = line(predicting(3600), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    sim.start_stream(c[0], s, 10_000, 0).unwrap();
    sim.run_until(secs(3600.5), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 3);
    assert_eq!(sim.tor.counters.circuits_closed_idle, 0);
    sim.run_until(secs(5000.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 3);
    assert_eq!((sim.tor.counters.circuits_expired, sim.tor.counters.circuits_closed_idle), (1, 2));
    assert!(sim.tor.client_circuits(c[0]).is_empty());
    let b = sim.start_stream(c[0], s, 10_000, 1).unwrap();
    assert_eq!(sim.tor.circuit_state(sim.tor.stream_circuit(b)), CircuitState::Building);
    sim.run_until(secs(5002.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 5);
    assert_eq!(sim.tor.take_records().len(), 2);
}

#[test]
fn without_prediction_circuits_are_built_only_for_streams() {
    let (mut sim, _, c, s) = line(TorConfig::default(), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    sim.start_stream(c[0], s, 10_000, 0).unwrap();
    sim.run_until(secs(599.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 1);
    sim.run_until(secs(5000.0), |t| t.check_invariants().unwrap());
    assert_eq!((sim.tor.counters.circuits_built, sim.tor.counters.circuits_expired), (1, 1));
    assert!(sim.tor.client_circuits(c[0]).is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// With prediction on, cells are conserved and SENDMEs accounted as without it, every
    /// stream finishes, and a client never holds more than its streams' circuits plus
    /// MIN_CIRCUITS_HANDLING_STREAM clean ones.
    #[test]
    fn predicted_circuits_keep_the_invariants(
        rates in prop::array::uniform3(20u64..2000),
        starts in prop::collection::vec((0usize..3, 0u64..1500), 1..12),
        idle_s in 1u64..1000,
        one_way_ms in 1u64..60,
        seed in 0u64..1000,
    ) {
        let (mut sim, _, c, s) = line(predicting(idle_s), SimDuration::from_millis(one_way_ms), rates.map(|r| r * KIB), 3, seed);
        let mut starts = starts;
        starts.sort_by_key(|&(_, t)| t);
        let mut violation = None;
        for (i, &(client, t)) in starts.iter().enumerate() {
            sim.run_until(secs(t as f64), |t| {
                if violation.is_none() { violation = t.check_invariants().err(); }
            });
            sim.start_stream(c[client], s, 200 * KIB, i as u64).unwrap();
        }
        sim.run_until(secs(8000.0), |t| {
            if violation.is_none() { violation = t.check_invariants().err(); }
            for &cl in &c {
                let clean = t.client_circuits(cl).iter().filter(|&&x| t.circuit_state(x) != CircuitState::Closed).count();
                if violation.is_none() && clean > 2 + starts.len() {
                    violation = Some(format!("client {cl} holds {clean} circuits"));
                }
            }
        });
        prop_assert!(violation.is_none(), "{:?}", violation);
        let recs = sim.tor.take_records();
        prop_assert_eq!(recs.len(), starts.len());
        prop_assert!(recs.iter().all(|r| r.error.is_none()));
        let k = &sim.tor.counters;
        let accounting = quiet_accounting(k);
        prop_assert!(accounting.is_ok(), "{:?}", accounting);
        // An hour after the last stream nothing is predicted; every circuit has closed.
        prop_assert_eq!(k.circuits_built, k.circuits_expired + k.circuits_closed_idle);
        prop_assert!(c.iter().all(|&cl| sim.tor.client_circuits(cl).is_empty()));
        prop_assert_eq!(sim.tor.cells_in_flight(), 0);
    }
}

#[test]
fn a_launch_without_a_path_is_tried_again_a_second_later() {
    // Two guards: A (also the only exit) and B. A circuit entering through A has no exit
    // left (NoPath); one through B exits at A. A predicted launch that draws A fails, is
    // counted, and the client tries again at its next check, as tor does. A stream that
    // finds no circuit and draws A itself fails the run's way: a clean NoPath error.
    // Guard-first (exit-first would take the other guard instead: tests/path_order.rs).
    let cfg = TorConfig { num_entry_guards: 2, path_order: PathOrder::GuardFirst, ..predicting(3600) };
    let (mut failures, mut ok_runs) = (0, 0);
    for seed in 0..24 {
        let mut tor = TorNetwork::new(
            cfg.clone(),
            onionlab_net::LatencyModel::constant(SimDuration::from_millis(10)),
            BandwidthWeights::uniform(),
            seed,
        );
        tor.add_relay(relay("a", 100 * MIB, RelayFlags::GUARD | RelayFlags::EXIT)).unwrap();
        tor.add_relay(relay("b", 100 * MIB, RelayFlags::GUARD)).unwrap();
        tor.add_relay(relay("m", 100 * MIB, RelayFlags::default())).unwrap();
        let c = tor.add_client(endpoint("c")).unwrap();
        let s = tor.add_server(endpoint("s")).unwrap();
        let mut sim = TorSim::new(tor);
        match sim.start_stream(c, s, 10_000, 0) {
            Err(TorError::NoPath(Position::Exit)) => continue,
            Err(e) => panic!("seed {seed}: {e}"),
            Ok(_) => {}
        }
        sim.run_until(secs(30.0), |t| t.check_invariants().unwrap());
        let k = &sim.tor.counters;
        assert_eq!(sim.tor.client_circuits(c).len(), 2, "seed {seed}: two circuits ready within 30 s");
        assert_eq!(k.circuits_built, 2, "seed {seed}");
        failures += k.predicted_launches_failed;
        ok_runs += 1;
        assert_eq!(sim.tor.take_records().len(), 1);
    }
    assert!(ok_runs > 5 && failures > 5, "{ok_runs} runs, {failures} failed launches");
}

fn learning(idle_timeout_s: u64) -> TorConfig {
    TorConfig { cbt_learning: Some(CbtLearning::TOR_0_2_2), ..predicting(idle_timeout_s) }
}

/// Runs one client with build-time learning `cbt`, whose only stream starts at t = 0, and
/// checks the circuits built by each of `built_by` (seconds, circuits), then that
/// `clean_at_end` circuits, all open, are left at 3000 s.
fn check_test_circuit_schedule(cbt: CbtLearning, built_by: &[(f64, u64)], clean_at_end: usize) {
    let cfg = TorConfig { cbt_learning: Some(cbt), ..predicting(3600) };
    let (mut sim, _, c, s) = line(cfg, SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    sim.start_stream(c[0], s, 10_000, 0).unwrap();
    for &(t, n) in built_by {
        sim.run_until(secs(t), |t| t.check_invariants().unwrap());
        assert_eq!(sim.tor.counters.circuits_built, n, "circuits built by {t} s");
    }
    let open = sim.tor.client_circuits(c[0]);
    assert_eq!(open.len(), clean_at_end);
    assert!(open.iter().all(|&x| sim.tor.circuit_state(x) == CircuitState::Open));
}

#[test]
fn build_time_learning_launches_a_test_circuit_a_minute_up_to_twelve_clean() {
    // Streams at t = 0 only. Circuits A (0 s, the stream's) and B (1 s, predicted) leave
    // no port need; the last launch was at 1 s, so a test circuit is due once more than
    // 60 s have passed: the check at 62 s launches C, then 123 s, 184 s, ... each 61 s
    // after the last. A expires at 600 s (no stream left); the test circuits go on until
    // 12 are clean (MAX_UNUSED_OPEN_CIRCUITS - 2): B and 10 tests by 611 s, the 11th test
    // at 672 s. Then none, while all 12 stay clean (CircuitIdleTimeout 1 h).
    let schedule = [(61.9, 2), (62.5, 3), (122.9, 3), (123.5, 4), (671.9, 12), (672.5, 13), (3000.0, 13)];
    check_test_circuit_schedule(CbtLearning::TOR_0_2_2, &schedule, 12);
}

#[test]
fn todays_build_time_learning_tests_every_ten_seconds_up_to_ten_clean() {
    // Tor 0.4.8 (cbttestfreq 10 s, cbtmaxopencircs 10), the same streams as above: A at
    // 0 s, B at 1 s; a test is due once more than 10 s have passed since the last
    // launch, so the checks at 12, 23, 34, ..., 100 s (11 s apart) launch nine tests.
    // Then B and the nine are 10 clean circuits and testing pauses; A expires at 600 s.
    assert_eq!(CbtLearning::default(), CbtLearning::TOR_0_4_8);
    let schedule = [(11.9, 2), (12.5, 3), (22.9, 3), (23.5, 4), (99.9, 10), (100.5, 11), (3000.0, 11)];
    check_test_circuit_schedule(CbtLearning::TOR_0_4_8, &schedule, 10);
}

#[test]
fn build_time_learning_stops_after_100_circuits() {
    // CircuitIdleTimeout 100 s keeps the clean count low, so test circuits go on a
    // minute apart until the client has completed CBT_MIN_CIRCUITS_TO_OBSERVE (100);
    // the port stops being predicted at 3600 s, so nothing else launches after that.
    let (mut sim, _, c, s) = line(learning(100), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    sim.start_stream(c[0], s, 10_000, 0).unwrap();
    sim.run_until(secs(12_000.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 100);
    sim.run_until(secs(20_000.0), |t| t.check_invariants().unwrap());
    assert_eq!(sim.tor.counters.circuits_built, 100);
    assert!(sim.tor.client_circuits(c[0]).is_empty(), "every clean circuit timed out");
}
