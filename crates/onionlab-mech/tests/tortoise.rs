//! Tortoise against hand-worked cases: who is exempt, and the limit's long-run rate.

mod common;

use common::*;
use onionlab_core::SimDuration;
use onionlab_mech::tortoise::{Directions, Tortoise, DEFAULT_CHECK_INTERVAL};
use onionlab_net::LatencyModel;
use onionlab_tor::*;

const KB: u64 = 1000;

fn tortoise(rate: u64) -> Tortoise {
    Tortoise::new(rate, rate, Directions::Both, DEFAULT_CHECK_INTERVAL).unwrap()
}

/// guard (Stable+Fast) -> middle (flags given) -> exit (Stable+Fast), `clients` clients,
/// one server; every relay runs Tortoise at `rate`. 1 s refills as in tor 0.2.1.
fn network(middle_flags: RelayFlags, clients: usize, rate: u64) -> (TorSim, [NodeId; 3], Vec<NodeId>, NodeId) {
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
        sim.tor.set_relay_hook(&mut sim.q, r, Box::new(tortoise(rate))).unwrap();
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
    let e = Tortoise::new(1, 1, Directions::Both, SimDuration::ZERO).err().unwrap();
    assert!(e.to_string().starts_with("check_interval:"));
}
