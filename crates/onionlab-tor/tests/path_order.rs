//! The order a client draws a path in (`TorConfig::path_order`) and how it keeps its
//! guards (`num_primary_guards`, `distinct_guard_subnets`), against hand-worked
//! distributions on a toy network (the path-selection audit's `guards16.toml` and
//! `noexit.toml`).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use onionlab_core::SimDuration;
use onionlab_tor::*;

/// (name, consensus weight, flags, address): guards gA and gB share 10.1/16 with exit e1.
const TOY: [(&str, u64, RelayFlags, [u8; 4]); 6] = [
    ("gA", 3000, RelayFlags::GUARD, [10, 1, 0, 1]),
    ("gB", 3000, RelayFlags::GUARD, [10, 1, 0, 2]),
    ("gC", 1000, RelayFlags::GUARD, [10, 9, 0, 1]),
    ("m1", 3000, RelayFlags::EMPTY, [10, 3, 0, 1]),
    ("e1", 3000, RelayFlags::EXIT, [10, 1, 0, 3]),
    ("e2", 1000, RelayFlags::EXIT, [10, 6, 0, 1]),
];

/// `clients` clients on the relays of `TOY` named in `names`, each building `rounds`
/// circuits (one 1000-byte stream each, circuits dirty after 1 s, a round every 30 s). Returns each
/// download's (client, guard name, exit name), or the first error a stream met.
fn paths(cfg: TorConfig, names: &[&str], clients: usize, rounds: usize, seed: u64) -> Result<Vec<(NodeId, String, String)>, TorError> {
    let cfg = TorConfig { max_circuit_dirtiness: SimDuration::from_secs(1), ..cfg };
    let mut tor =
        TorNetwork::new(cfg, onionlab_net::LatencyModel::constant(SimDuration::from_millis(5)), BandwidthWeights::uniform(), seed);
    let mut name_of = BTreeMap::new();
    for &(name, weight, flags, [a, b, c, d]) in TOY.iter().filter(|r| names.contains(&r.0)) {
        let spec = RelaySpec { address: Some(std::net::Ipv4Addr::new(a, b, c, d)), ..relay(name, weight * 1024, flags) };
        name_of.insert(tor.add_relay(spec).unwrap(), name.to_string());
    }
    let c: Vec<NodeId> = (0..clients).map(|i| tor.add_client(endpoint(&format!("c{i}"))).unwrap()).collect();
    let s = tor.add_server(endpoint("s")).unwrap();
    let mut sim = TorSim::new(tor);
    for round in 0..rounds {
        for &cl in &c {
            sim.start_stream(cl, s, 1000, round as u64)?;
        }
        sim.run_until(secs(30.0 * (round + 1) as f64), |_| {});
    }
    let recs = sim.tor.take_records();
    assert_eq!(recs.len(), clients * rounds);
    assert!(recs.iter().all(|r| r.error.is_none()));
    Ok(recs.iter().map(|r| (r.client, name_of[&r.path[0]].clone(), name_of[&r.path[2]].clone())).collect())
}

/// Pearson's chi-square of the observed (guard, exit) pairs against `expected`
/// probabilities (which must cover every pair observed).
fn chi_square(observed: &[(NodeId, String, String)], expected: &[((&str, &str), f64)]) -> f64 {
    let n = observed.len() as f64;
    let mut count: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for (_, g, e) in observed {
        let key = expected.iter().find(|((eg, ee), _)| eg == g && ee == e).unwrap_or_else(|| panic!("unexpected path {g} {e}")).0;
        *count.entry(key).or_default() += 1.0;
    }
    let chi: f64 = expected.iter().map(|(k, p)| (count.get(k).copied().unwrap_or(0.0) - n * p).powi(2) / (n * p)).sum();
    let shares: Vec<String> =
        expected.iter().map(|(k, p)| format!("{k:?} {:.4} (want {p:.4})", count.get(k).copied().unwrap_or(0.0) / n)).collect();
    eprintln!("chi-square {chi:.2} over {n} circuits: {}", shares.join(", "));
    chi
}

/// The 99.9th percentile of chi-square with 3 degrees of freedom.
const CHI2_3DOF_999: f64 = 16.27;

const ALL: [&str; 6] = ["gA", "gB", "gC", "m1", "e1", "e2"];

fn exit_first(num_entry_guards: usize, distinct: bool) -> TorConfig {
    TorConfig { path_order: PathOrder::ExitFirst, num_entry_guards, distinct_guard_subnets: distinct, ..TorConfig::default() }
}

#[test]
fn exit_first_draws_the_exit_from_every_exit_and_a_primary_guard_that_obeys_it() {
    // Tor 0.4.8 (no /16 rule among guards), 2 guards in use of 3 primaries: every client's
    // primaries are gA, gB, gC in a weighted order. The exit is e1 with 3/4 whatever the
    // guards; e1 shares 10.1/16 with gA and gB, so its circuits enter at gC. An e2 circuit
    // enters at one of the first two primaries, uniformly: gA is among them with
    // P = 3/7 + 3/7 * 3/4 + 1/7 * 1/2 = 23/28, as is gB; gC with 10/28. One circuit per
    // client, so circuits are independent.
    let got = paths(exit_first(2, false), &ALL, 2000, 1, 7).unwrap();
    let want = [(("gC", "e1"), 168.0 / 224.0), (("gA", "e2"), 23.0 / 224.0), (("gB", "e2"), 23.0 / 224.0), (("gC", "e2"), 10.0 / 224.0)];
    assert!(chi_square(&got, &want) < CHI2_3DOF_999);
    // Tor 0.2.2's guards, in distinct /16s: gC and one of gA, gB (each with 1/2).
    let got = paths(exit_first(2, true), &ALL, 2000, 1, 8).unwrap();
    let want = [(("gC", "e1"), 0.75), (("gA", "e2"), 1.0 / 16.0), (("gB", "e2"), 1.0 / 16.0), (("gC", "e2"), 0.125)];
    assert!(chi_square(&got, &want) < CHI2_3DOF_999);
}

#[test]
fn guard_first_biases_exits_away_from_the_guards_subnet() {
    // The model's earlier order, for contrast: a guard, then the exit outside its /16. A
    // client holding gA or gB (half of its circuits) can only exit at e2: e1 carries 3/8
    // of the circuits, not tor's 3/4.
    let cfg = TorConfig { path_order: PathOrder::GuardFirst, num_entry_guards: 2, ..TorConfig::default() };
    let got = paths(cfg, &ALL, 2000, 1, 9).unwrap();
    let want = [(("gC", "e1"), 3.0 / 8.0), (("gA", "e2"), 0.25), (("gB", "e2"), 0.25), (("gC", "e2"), 0.125)];
    assert!(chi_square(&got, &want) < CHI2_3DOF_999);
}

#[test]
fn exit_first_uses_another_guard_where_guard_first_finds_no_exit() {
    // noexit.toml: one exit, e1, in gA's /16. Guard-first, a client holding gA has no
    // exit (NoPath); exit-first, it enters at its other primary guard, gC.
    let relays = ["gA", "gC", "m1", "e1"];
    let cfg = TorConfig { path_order: PathOrder::GuardFirst, num_entry_guards: 1, ..TorConfig::default() };
    assert!(matches!(paths(cfg.clone(), &relays, 200, 1, 3), Err(TorError::NoPath(Position::Exit))));
    let got = paths(TorConfig { path_order: PathOrder::ExitFirst, ..cfg.clone() }, &relays, 200, 3, 3).unwrap();
    assert!(got.iter().all(|(_, g, e)| g == "gC" && e == "e1"), "{got:?}");
    // One primary guard: a client whose primary is gA samples another guard, gC, and
    // keeps it (tor's select_filtered_guard_for_circuit); every circuit completes.
    let one = TorConfig { path_order: PathOrder::ExitFirst, num_primary_guards: 1, ..cfg };
    let got = paths(one, &relays, 200, 3, 4).unwrap();
    assert!(got.iter().all(|(_, g, e)| g == "gC" && e == "e1"), "{got:?}");
}

#[test]
fn guards_in_one_subnet_only_without_distinct_guard_subnets() {
    // Guard-first, 2 guards in use, 8 circuits each. Tor 0.2.2's rule (the default): no
    // client holds both gA and gB (one /16). Tor 0.4.8 samples them freely: a client
    // holds both with P = 2 * 3/7 * 3/4 = 9/14.
    let both = |distinct: bool| {
        let cfg =
            TorConfig { path_order: PathOrder::GuardFirst, num_entry_guards: 2, distinct_guard_subnets: distinct, ..TorConfig::default() };
        let mut held: BTreeMap<NodeId, BTreeSet<String>> = BTreeMap::new();
        for (c, g, _) in paths(cfg, &ALL, 200, 8, 5).unwrap() {
            held.entry(c).or_default().insert(g);
        }
        held.values().filter(|g| g.contains("gA") && g.contains("gB")).count()
    };
    assert_eq!(both(true), 0);
    let n = both(false);
    eprintln!("{n} of 200 clients hold gA and gB (expected about {:.0})", 200.0 * 9.0 / 14.0);
    assert!((100..160).contains(&n), "{n}");
}

/// Guard-first draws, pinned: 60 clients with 2 guards each, 4 circuits each, on `TOY`:
/// every path as guard/middle/exit names, client by client, and an FNV-1a hash of them.
fn guard_first_golden(cfg: TorConfig) -> (String, u64) {
    let cfg = TorConfig { num_entry_guards: 2, max_circuit_dirtiness: SimDuration::from_secs(1), ..cfg };
    let mut tor = TorNetwork::new(cfg, onionlab_net::LatencyModel::constant(SimDuration::from_millis(5)), BandwidthWeights::uniform(), 11);
    let mut name_of = BTreeMap::new();
    for &(name, weight, flags, [a, b, c, d]) in TOY.iter() {
        let spec = RelaySpec { address: Some(std::net::Ipv4Addr::new(a, b, c, d)), ..relay(name, weight * 1024, flags) };
        name_of.insert(tor.add_relay(spec).unwrap(), name.to_string());
    }
    let c: Vec<NodeId> = (0..60).map(|i| tor.add_client(endpoint(&format!("c{i}"))).unwrap()).collect();
    let s = tor.add_server(endpoint("s")).unwrap();
    let mut sim = TorSim::new(tor);
    for round in 0..4u64 {
        for &cl in &c {
            sim.start_stream(cl, s, 1000, round).unwrap();
        }
        sim.run_until(secs(30.0 * (round + 1) as f64), |_| {});
    }
    let mut recs = sim.tor.take_records();
    recs.sort_by_key(|r| (r.client, r.tag));
    let text: Vec<String> = recs.iter().map(|r| r.path.iter().map(|n| name_of[n].as_str()).collect::<Vec<_>>().join("/")).collect();
    let text = text.join(" ");
    let hash = text.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    (text, hash)
}

#[test]
fn guard_first_draws_as_before() {
    // The hash of the paths the model drew before path_order existed (commit c7a1dbd), when
    // guard-first was the only order: guard-first, with any number of primary guards
    // (unused guard-first), draws every path as before, RNG draw for draw.
    const BEFORE: u64 = 0x44fd1be80bf0e4b3;
    let (text, hash) = guard_first_golden(TorConfig { path_order: PathOrder::GuardFirst, ..TorConfig::default() });
    assert_eq!(hash, BEFORE, "{text}");
    assert!(text.starts_with("gC/e2/e1 gA/gC/e2 gA/m1/e2 gA/m1/e2 gA/m1/e2 gA/m1/e2 gA/m1/e2 gC/m1/e1"), "{text}");
    for primaries in [1, 3, 5] {
        let cfg = TorConfig {
            path_order: PathOrder::GuardFirst,
            num_primary_guards: primaries,
            distinct_guard_subnets: true,
            ..TorConfig::default()
        };
        assert_eq!(guard_first_golden(cfg).1, BEFORE);
    }
    // Exit-first, now the default (tor's), draws differently from the same seed.
    assert_eq!(TorConfig::default().path_order, PathOrder::ExitFirst);
    assert_ne!(guard_first_golden(TorConfig::default()).1, BEFORE);
}
