//! Config fields reaching the model: every `[tor]` field lands in the network's
//! `TorConfig` under its own name and unit, and relay, client and server fields that no
//! whole-run plausibility check would notice being dropped or swapped change the network.

mod common;

use common::load;
use onionlab_config::model::ExperimentConfig;
use onionlab_core::SimDuration;
use onionlab_sim::build::{build, tor_config};
use onionlab_sim::run;
use onionlab_sim::SimError;
use onionlab_tor::directory::{compute_flags, RelayHistory};
use onionlab_tor::{CongestionControlKind, TorConfig};
use onionlab_tor::{Position, RelayFlags, TorError};

/// Three relays (guard, middle, exit) of 1 MiB/s, a bulk workload of 1 GiB, and `rest`.
fn three_relays(rest: &str) -> String {
    common::three_relays(&format!("[workloads.bulk]\ntype = \"bulk\"\nsize = \"1 GiB\"\n{rest}"))
}

#[test]
fn the_largest_request_without_optimistic_data_is_one_stream_window() {
    // The config check cannot see the Tor model's constants; this keeps the two in step.
    use onionlab_tor::cell::RELAY_PAYLOAD_SIZE;
    use onionlab_tor::flow_control::STREAMWINDOW_START;
    assert_eq!(onionlab_config::parse::MAX_UNWINDOWED_REQUEST, STREAMWINDOW_START * RELAY_PAYLOAD_SIZE);
}

#[test]
fn every_tor_field_reaches_the_networks_config() {
    // Each value differs from the model's default, and paired fields (client/relay idle
    // timeouts, send/receive buffers, alpha/beta) differ from each other, so that a field
    // dropped or swapped shows.
    let cfg = load(&three_relays(
        r#"
[experiment]
duration = "10 s"
seeds = [1]
wire_waits = true
[[clients]]
name = "bulk"
workload = "bulk"
count = 1
[servers]
count = 1
[tor]
refill_interval = "50 ms"
refill_phase = "random"
link_handshake_rtts = 3
max_circuit_dirtiness = "7 min"
idle_channel_timeout = { client = "100 s", relay = "2000 s" }
predicted_circuits = true
cbt_learning = { test_frequency = "30 s", max_clean = 7 }
circuit_idle_timeout = "20 min"
circ_max_cell_queue = 1234
num_entry_guards = 2
use_entry_guards = false
path_order = "guard-first"
num_primary_guards = 4
distinct_guard_subnets = false
channel_per_circuit = true
request_size = "2 KiB"
optimistic_data = false
circ_window = 800
circ_window_increment = 80
congestion_control = { kind = "vegas", cwnd_init = 200, cwnd_min = 40, alpha = 100, beta = 300 }
cellq_high = 300
cellq_low = 20
sndbuf = "300 KiB"
rcvbuf = "500 KiB"
"#,
    ));
    let t = tor_config(&cfg);
    let d = TorConfig::default();
    assert_eq!((t.refill_interval, t.refill_phase), (SimDuration::from_millis(50), onionlab_tor::RefillPhase::Random));
    assert_eq!(t.link_handshake_rtts, 3);
    assert_eq!(t.max_circuit_dirtiness, SimDuration::from_secs(7 * 60));
    let idle = t.idle_channel_timeout.expect("idle timeouts set");
    assert_eq!(idle.client.0, SimDuration::from_secs(100), "{idle:?}");
    assert_eq!(idle.relay.0, SimDuration::from_secs(2000), "{idle:?}");
    assert!(t.predicted_circuits);
    let cbt = t.cbt_learning.expect("cbt learning set");
    assert_eq!((cbt.test_frequency, cbt.max_clean), (SimDuration::from_secs(30), 7));
    assert_eq!(t.circuit_idle_timeout, SimDuration::from_secs(20 * 60));
    assert_eq!(t.circ_max_cell_queue, 1234);
    assert_eq!((t.num_entry_guards, t.use_entry_guards, t.channel_per_circuit, t.wire_waits), (2, false, true, true));
    assert_eq!((t.path_order, t.num_primary_guards, t.distinct_guard_subnets), (onionlab_tor::PathOrder::GuardFirst, 4, false));
    assert_eq!((t.request_bytes, t.circ_window, t.circ_window_increment), (2048, 800, 80));
    assert!(!t.optimistic_data);
    assert_eq!(t.cell_queue_watermarks, Some((300, 20)));
    assert_eq!((t.transport.sndbuf_bytes, t.transport.rcvbuf_bytes), (300 << 10, 500 << 10));
    match &t.congestion_control {
        CongestionControlKind::Vegas(v) => assert_eq!((v.cwnd_init, v.cwnd_min, v.alpha, v.beta), (200, 40, 100, 300)),
        other => panic!("{other:?}"),
    }
    // Not one of them is the default: the assertions above say something.
    assert!(d.refill_phase != t.refill_phase);
    assert!(d.refill_interval != t.refill_interval && d.link_handshake_rtts != 3 && d.max_circuit_dirtiness != t.max_circuit_dirtiness);
    assert!(!d.predicted_circuits && d.circuit_idle_timeout != t.circuit_idle_timeout && d.circ_max_cell_queue != 1234);
    assert!(d.num_entry_guards != 2 && d.use_entry_guards && !d.channel_per_circuit && d.request_bytes != 2048 && d.optimistic_data);
    assert!(d.path_order != t.path_order && d.num_primary_guards != 4 && d.distinct_guard_subnets);
    assert!(d.circ_window != 800 && d.circ_window_increment != 80 && d.cell_queue_watermarks != Some((300, 20)));
    assert!(d.transport.sndbuf_bytes != 300 << 10 && d.transport.rcvbuf_bytes != 500 << 10);
}

/// Bytes the one bulk client of `text` had received when the 10 s run ended.
fn bulk_received(text: &str) -> u64 {
    let out = run(&load(text), 1, None).unwrap();
    out.downloads.iter().filter(|d| &*d.class == "bulk").map(|d| d.received).sum()
}

fn one_bulk_client(client: &str, servers: &str, extra: &str) -> String {
    three_relays(&format!(
        "[experiment]\nduration = \"10 s\"\nseeds = [1]\n[[clients]]\nname = \"bulk\"\nworkload = \"bulk\"\ncount = 1\nstart_spread = \"1 ns\"\n{client}\n\
         [servers]\ncount = 1\n{servers}\n{extra}"
    ))
}

#[test]
fn a_downloads_bytes_come_down_the_clients_downlink_and_up_the_servers_uplink() {
    // A 1 Mbit/s link (125 kB/s) on the side the response crosses caps 10 s of download
    // at 1.25 MB; the same link the other way (requests only) leaves the relays' 1 MiB/s.
    let capped = 1_250_000;
    let slow_down = bulk_received(&one_bulk_client("link_up = \"100 Mbit\"\nlink_down = \"1 Mbit\"", "", ""));
    let slow_up = bulk_received(&one_bulk_client("link_up = \"1 Mbit\"\nlink_down = \"100 Mbit\"", "", ""));
    assert!(slow_down <= capped && slow_up > 4 * capped, "client: down-limited {slow_down} B, up-limited {slow_up} B");
    let server_up = bulk_received(&one_bulk_client("", "link_up = \"1 Mbit\"\nlink_down = \"1 Gbit\"", ""));
    let server_down = bulk_received(&one_bulk_client("", "link_up = \"1 Gbit\"\nlink_down = \"1 Mbit\"", ""));
    assert!(server_up <= capped && server_down > 4 * capped, "server: up-limited {server_up} B, down-limited {server_down} B");
}

#[test]
fn a_guards_perconn_limit_and_static_throttling_hold_its_client_connection() {
    // PerConnBWRate 50 KiB/s with a 50 KiB burst: 10 s bring at most 50 KiB + 10 x 50 KiB
    // (and a refill's worth at the edge), against about 9 MiB unlimited.
    let perconn = one_bulk_client("", "", "").replace(
        "flags = [\"Guard\", \"Fast\", \"Stable\"]",
        "flags = [\"Guard\", \"Fast\", \"Stable\"]\nperconn = { rate = \"50 KiB/s\", burst = \"50 KiB\" }",
    );
    let limited = bulk_received(&perconn);
    assert!(limited <= 12 * 50 * 1024, "{limited} B through a 50 KiB/s connection");
    assert!(bulk_received(&one_bulk_client("", "", "")) > 4_000_000);
    // Static throttling at every relay: every client connection is throttled, and the
    // relay rows count it.
    let out =
        run(&load(&one_bulk_client("", "", "[mechanisms]\nthrottling = { kind = \"static\", rate = \"50 KiB/s\" }")), 1, None).unwrap();
    let guard: Vec<_> = out.relays.iter().filter(|r| &*r.relay == "guard" && r.client_connections > 0).collect();
    assert!(!guard.is_empty());
    assert!(guard.iter().all(|r| r.throttled_connections == r.client_connections && r.throttle_rate == Some(50 << 10)), "{guard:?}");
    // Static throttling is PerConnBWRate: the connection is held from the moment it opens,
    // byte for byte as by the relay's own limit, not left free until the policy's first
    // tick and then handed a fresh burst.
    let static_small = one_bulk_client("", "", "[mechanisms]\nthrottling = { kind = \"static\", rate = \"50 KiB/s\", burst = \"50 KiB\" }");
    assert_eq!(bulk_received(&static_small), limited);
}

#[test]
fn relays_in_one_16_network_are_never_on_one_path() {
    // Tor puts no two relays of one /16 on a circuit: with the middle and the exit in
    // 10.0/16 there is no path, with the exit elsewhere there is.
    let with = |exit: &str| {
        one_bulk_client("", "", "")
            .replace("name = \"middle\"", "name = \"middle\"\naddress = \"10.0.0.1\"")
            .replace("name = \"exit\"", &format!("name = \"exit\"\naddress = \"{exit}\""))
    };
    assert!(matches!(run(&load(&with("10.0.0.2")), 1, None), Err(SimError::Tor { source: TorError::NoPath(_), .. })));
    assert!(run(&load(&with("10.1.0.2")), 1, None).is_ok());
}

/// Bandwidth weights that zero a whole position leave no path whatever the draw: the
/// error names the position as unweighted, not as a draw that ran out of distinct relays.
#[test]
fn bandwidth_weights_that_zero_a_position_are_named_by_the_path_error() {
    let with = |zero: &[&str]| {
        let w: Vec<String> = ["Wgg", "Wgm", "Wgd", "Wmg", "Wmm", "Wme", "Wmd", "Weg", "Wem", "Wee", "Wed"]
            .iter()
            .map(|k| format!("{k} = {}", if zero.contains(k) { 0 } else { 10000 }))
            .collect();
        let text = one_bulk_client("", "", "").replace(
            "latency = { constant = \"20 ms\" }",
            &format!("latency = {{ constant = \"20 ms\" }}\nbandwidth_weights = {{ {} }}", w.join(", ")),
        );
        assert!(text.contains("bandwidth_weights"), "{text}");
        run(&load(&text), 1, None)
    };
    // The guard is Guard-only (Wgg), the exit Exit-only (Wee); as middles the guard weighs
    // Wmg, the middle Wmm, the exit Wme.
    for (zero, pos) in [(&["Wgg"][..], Position::Guard), (&["Wee"][..], Position::Exit), (&["Wmg", "Wmm", "Wme"][..], Position::Middle)] {
        match with(zero) {
            Err(SimError::Tor { source: TorError::NoWeightedRelay(p), .. }) => assert_eq!(p, pos, "{zero:?}"),
            other => panic!("{zero:?}: {:?}", other.map(|_| "a finished run")),
        }
    }
    // Only the middle relay's own weight zeroed: the guard and the exit could still be
    // middles, but not on a path they already hold, so it is the draw that fails, at the
    // middle.
    assert!(matches!(with(&["Wmm"]), Err(SimError::Tor { source: TorError::NoPath(Position::Middle), .. })));
    assert!(with(&[]).is_ok());
}

#[test]
fn operators_relays_run_the_mechanisms_throttling() {
    let text =
        one_bulk_client("relay_operators = { count = 1 }", "", "[mechanisms]\nthrottling = { kind = \"static\", rate = \"50 KiB/s\" }");
    let out = run(&load(&text), 1, None).unwrap();
    let rows: Vec<_> = out.relays.iter().filter(|r| &*r.relay == "bulk0-relay").collect();
    assert!(!rows.is_empty() && rows.iter().all(|r| r.throttle_rate == Some(50 << 10)), "{rows:?}");
}

#[test]
fn computed_flags_are_the_directory_rules() {
    // Bandwidths 1, 2, 3 and 200 MiB/s and MTBFs falling as bandwidth rises: the fastest
    // relays are the least stable, so Fast and Stable disagree, and a configured Stable
    // flag is dropped where the history does not earn it.
    let text = r#"
[experiment]
duration = "10 s"
[network]
latency = { constant = "20 ms" }
compute_flags = true
[[relays]]
name = "r1"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast"]
mtbf = "40 days"
[[relays]]
name = "r2"
bandwidth = "2 MiB/s"
flags = ["Guard", "Fast"]
mtbf = "30 days"
[[relays]]
name = "r3"
bandwidth = "3 MiB/s"
flags = ["Exit", "Fast", "Stable"]
mtbf = "2 days"
[[relays]]
name = "r4"
bandwidth = "200 MiB/s"
flags = ["Exit", "Fast", "Stable"]
mtbf = "1 day"
[[clients]]
name = "web"
workload = "web"
count = 1
[servers]
count = 1
[workloads.web]
type = "web"
size = "1 KiB"
"#;
    let cfg = load(text);
    let built = build(&cfg, 1).unwrap();
    let hist: Vec<RelayHistory> =
        cfg.relays.iter().map(|r| RelayHistory { bandwidth: r.bandwidth_rate, mtbf: r.mtbf.unwrap_or(SimDuration::ZERO) }).collect();
    let want = compute_flags(&hist);
    assert!(want.iter().any(|&(f, s)| f != s), "the case tells Fast from Stable: {want:?}");
    assert!(want.iter().zip(&cfg.relays).any(|(&(_, s), r)| !s && r.flags.iter().any(|f| f == "Stable")), "{want:?}");
    for ((&node, &(fast, stable)), r) in built.tor.relays().iter().zip(&want).zip(&cfg.relays) {
        let flags = built.tor.relay_flags(node).unwrap();
        assert_eq!((flags.contains(RelayFlags::FAST), flags.contains(RelayFlags::STABLE)), (fast, stable), "{}", r.name);
    }
}

/// Two relays for each position (g1, g2; m1, m2; e1, e2), four servers, `clients` groups
/// of web clients fetching 20 KiB pages one second apart, for 20 s.
fn six_relays(clients: &str) -> ExperimentConfig {
    let mut text = String::from("[experiment]\nduration = \"20 s\"\nseeds = [1]\n[network]\nlatency = { constant = \"10 ms\" }\n");
    for (name, flags) in [("g1", "Guard"), ("g2", "Guard"), ("m1", "Valid"), ("m2", "Valid"), ("e1", "Exit"), ("e2", "Exit")] {
        text += &format!("[[relays]]\nname = \"{name}\"\nbandwidth = \"1 MiB/s\"\nflags = [\"{flags}\", \"Fast\"]\n");
    }
    text += &format!("{clients}\n[servers]\ncount = 4\n[workloads.page]\ntype = \"web\"\nsize = \"20 KiB\"\nthink = \"1 s\"\n");
    load(&text)
}

#[test]
fn a_groups_fixed_path_is_the_one_its_circuits_take() {
    let cfg = six_relays(
        "[[clients]]\nname = \"pinned\"\nworkload = \"page\"\ncount = 4\npath = [\"g2\", \"m1\", \"e2\"]\n\
         [[clients]]\nname = \"free\"\nworkload = \"page\"\ncount = 4\n",
    );
    let out = run(&cfg, 1, None).unwrap();
    let paths = |class: &str| -> std::collections::BTreeSet<&str> {
        out.downloads.iter().filter(|d| &*d.class == class).map(|d| d.path.as_str()).collect()
    };
    assert_eq!(paths("pinned"), ["g2,m1,e2"].into());
    assert!(paths("free").len() > 1, "clients without a path choose among the relays: {:?}", paths("free"));
}

#[test]
fn each_seed_reaches_the_workloads_and_the_path_choice() {
    // Paths are drawn from the network's random streams and start-up times from the
    // workloads' streams: a second seed changes both.
    let cfg = six_relays("[[clients]]\nname = \"web\"\nworkload = \"page\"\ncount = 8\n");
    let (a, b) = (run(&cfg, 1, None).unwrap(), run(&cfg, 2, None).unwrap());
    let firsts = |o: &onionlab_sim::RunOutput| {
        let mut m = std::collections::BTreeMap::new();
        for d in &o.downloads {
            m.entry(d.client.to_string()).or_insert((d.start, d.path.clone()));
        }
        m
    };
    let (fa, fb) = (firsts(&a), firsts(&b));
    assert_eq!(fa.len(), 8);
    assert!(fa.iter().all(|(c, (start, _))| fb[c].0 != *start), "start-up times repeat across seeds: {fa:?} {fb:?}");
    assert!(fa.iter().any(|(c, (_, path))| fb[c].1 != *path), "first paths repeat across seeds: {fa:?} {fb:?}");
}

#[test]
fn downloads_go_to_every_server() {
    // Each download picks one of the four servers uniformly: 8 clients fetching for 20 s
    // reach all four. The bytes the servers' uplinks carried show it.
    let cfg = six_relays("[[clients]]\nname = \"web\"\nworkload = \"page\"\ncount = 8\n");
    let mut sent = vec![];
    let mut last = |tor: &onionlab_tor::TorNetwork| {
        sent = (0..tor.net.num_hosts() as u32)
            .map(onionlab_net::HostId)
            .filter(|&h| tor.net.host_spec(h).name.starts_with("server"))
            .map(|h| tor.net.link_bytes(h, true))
            .collect();
    };
    onionlab_sim::run_inspected(&cfg, 1, None, Some(&mut last)).unwrap();
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|&b| b > 20 << 10), "bytes each server sent: {sent:?}");
}

#[test]
fn load_counts_what_a_run_builds() {
    // Three relays and one operated by a client, 3 + 2 clients, 4 servers.
    let text = r#"
[experiment]
duration = "10 s"
[network]
latency = { constant = "10 ms" }
[[relays]]
name = "g"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast"]
[[relays]]
name = "m"
bandwidth = "1 MiB/s"
flags = ["Fast"]
[[relays]]
name = "e"
bandwidth = "1 MiB/s"
flags = ["Exit", "Fast"]
[[clients]]
name = "web"
workload = "page"
count = 3
[[clients]]
name = "op"
workload = "page"
count = 2
relay_operators = { count = 1 }
[servers]
count = 4
[workloads.page]
type = "web"
size = "20 KiB"
"#;
    let s = onionlab_sim::load::load(&load(text), 1).unwrap();
    assert_eq!((s.relays, s.clients, s.servers, s.nodes), (4, 5, 4, 13));
}

#[test]
fn round_robin_placement_puts_clients_and_servers_at_successive_locations() {
    // Two locations 200 ms apart (5 ms within one), every relay at location 0. Round robin
    // puts web0 and server0 at 0, web1 and server1 at 1. A first byte crosses the client's
    // hop to its guard twice (the BEGIN and the data) and the exit's hop to the server at
    // least twice (the request and the response): over 0.4 s for web1 always, and for
    // web0 whenever it fetches from server1; within location 0 it takes about ten 5 ms hops.
    use onionlab_config::model::{LatencyConfig, Placement};
    let mut cfg = six_relays("[[clients]]\nname = \"web\"\nworkload = \"page\"\ncount = 2\n");
    let (near, far) = (SimDuration::from_millis(5), SimDuration::from_millis(200));
    cfg.network.latency = LatencyConfig::Matrix { path: "two.csv".into(), one_way: vec![vec![near, far], vec![far, near]] };
    cfg.clients[0].placement = Placement::RoundRobin;
    cfg.servers.placement = Placement::RoundRobin;
    cfg.servers.count = 2;
    let out = run(&cfg, 1, None).unwrap();
    let ttfb = |client: &str| -> Vec<f64> { out.downloads.iter().filter(|d| &*d.client == client).filter_map(|d| d.ttfb).collect() };
    let (web0, web1) = (ttfb("web0"), ttfb("web1"));
    assert!(web0.len() > 3 && web1.len() > 3, "{web0:?} {web1:?}");
    assert!(web1.iter().all(|&t| t > 0.4), "web1 is far from every relay: {web1:?}");
    assert!(web0.iter().any(|&t| t < 0.2) && web0.iter().any(|&t| t > 0.4), "web0 near server0, far from server1: {web0:?}");
}

#[test]
fn listed_placement_cycles_over_the_listed_locations_only() {
    // As above, but the servers placed by the list [1]: both at the far location, so every
    // first byte of web0 (at 0, with every relay) crosses the 200 ms hop at least twice.
    // Round robin would have put server0 beside it.
    use onionlab_config::model::{LatencyConfig, Placement};
    let mut cfg = six_relays("[[clients]]\nname = \"web\"\nworkload = \"page\"\ncount = 1\n");
    let (near, far) = (SimDuration::from_millis(5), SimDuration::from_millis(200));
    cfg.network.latency = LatencyConfig::Matrix { path: "two.csv".into(), one_way: vec![vec![near, far], vec![far, near]] };
    cfg.servers.placement = Placement::Cycle(vec![1]);
    cfg.servers.count = 2;
    let out = run(&cfg, 1, None).unwrap();
    let ttfb: Vec<f64> = out.downloads.iter().filter_map(|d| d.ttfb).collect();
    assert!(ttfb.len() > 3, "{ttfb:?}");
    assert!(ttfb.iter().all(|&t| t > 0.4), "both servers are far: {ttfb:?}");
    cfg.servers.placement = Placement::Cycle(vec![0, 1]);
    let out = run(&cfg, 1, None).unwrap();
    let ttfb: Vec<f64> = out.downloads.iter().filter_map(|d| d.ttfb).collect();
    assert!(ttfb.iter().any(|&t| t < 0.2) && ttfb.iter().any(|&t| t > 0.4), "server0 near, server1 far: {ttfb:?}");
}
