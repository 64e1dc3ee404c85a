//! Loading, defaults, the round trip through `to_toml`, and one test per validation rule
//! (each asserting the field path and that the message says what is wrong).

use std::path::{Path, PathBuf};

use onionlab_config::model::*;
use onionlab_config::parse::parse_config_with;
use onionlab_config::{load_file, load_str, to_toml, ConfigError, ConfigErrors, Override};
use onionlab_core::SimDuration;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A small valid config; tests break it one edit at a time.
const MINIMAL: &str = r#"
[experiment]
duration = "2 min"

[network]
latency = { constant = "20 ms" }

[[relays]]
name = "guard"
bandwidth = "2 MiB/s"
flags = ["Guard", "Fast"]

[[relays]]
name = "exit"
bandwidth = "512 KiB/s"
flags = ["Exit", "Fast"]

[[clients]]
name = "web"
workload = "web"
count = 20

[workloads.web]
type = "web"
size = "320 KiB"
"#;

/// MINIMAL without its relays.
fn no_relays() -> String {
    let (head, tail) = MINIMAL.split_once("[[relays]]").unwrap();
    let (_, clients) = tail.split_once("[[clients]]").unwrap();
    format!("{head}[[clients]]{clients}")
}

fn load(text: &str) -> Result<ExperimentConfig, ConfigErrors> {
    load_str(text, &fixtures())
}

fn edit(from: &str, to: &str) -> String {
    assert!(MINIMAL.contains(from), "MINIMAL has no {from:?}");
    MINIMAL.replacen(from, to, 1)
}

fn errors(text: &str) -> ConfigErrors {
    match load(text) {
        Ok(_) => panic!("config should be invalid:\n{text}"),
        Err(e) => e,
    }
}

/// The error at `path`, whose message must contain every one of `words`.
fn err_at(text: &str, path: &str, words: &[&str]) -> ConfigError {
    let errs = errors(text);
    let Some(e) = errs.at(path) else { panic!("no error at {path:?}; got:\n{errs}") };
    for w in words {
        assert!(e.message.contains(w), "message at {path} lacks {w:?}: {e}");
    }
    e.clone()
}

fn hint(e: &ConfigError) -> &str {
    e.hint.as_deref().unwrap_or_else(|| panic!("no hint in {e}"))
}

#[test]
fn minimal_config_gets_the_documented_defaults() {
    let c = load(MINIMAL).unwrap();
    assert_eq!(c.experiment.name, "experiment");
    assert_eq!(c.experiment.duration, SimDuration::from_secs(120));
    assert_eq!(c.experiment.warmup, SimDuration::ZERO);
    assert_eq!(c.experiment.seeds, vec![1]);
    assert_eq!(c.experiment.metrics_interval, SimDuration::from_secs(1));
    assert_eq!(c.tor, onionlab_config::parse::default_tor_params());
    assert_eq!(c.tor.refill_interval, SimDuration::from_millis(100));
    assert_eq!(c.tor.request_bytes, 500);
    assert_eq!(c.tor.sndbuf_bytes, 4 << 20);
    assert_eq!(c.tor.rcvbuf_bytes, 6 << 20);
    assert_eq!(c.network.latency, LatencyConfig::Constant { one_way: SimDuration::from_millis(20) });
    assert_eq!(c.network.bandwidth_weights, None);
    let g = &c.relays[0];
    assert_eq!(g.bandwidth_rate, 2 << 20);
    assert_eq!(g.bandwidth_burst, 2 << 20, "burst defaults to one second of bandwidth");
    assert_eq!(g.link_up, (2 << 20) * 16, "link defaults to twice the relay rate");
    assert_eq!(g.link_down, g.link_up);
    assert_eq!(g.consensus_weight, 2048);
    assert_eq!(g.location, 0);
    assert_eq!(g.perconn, None);
    let e = &c.relays[1];
    assert_eq!(e.link_up, 10_000_000, "at least 10 Mbit");
    assert_eq!(e.consensus_weight, 512);
    let cl = &c.clients[0];
    assert_eq!((cl.link_up, cl.link_down), (10_000_000, 20_000_000));
    assert_eq!(cl.placement, Placement::At(0));
    assert_eq!(c.servers, ServerGroup { count: 10, link_up: 1_000_000_000, link_down: 1_000_000_000, placement: Placement::RoundRobin });
    assert_eq!(
        c.workloads["web"],
        Workload::Web { size: SizeDist::Fixed { bytes: 320 * 1024 }, think: onionlab_config::parse::default_think_time(), session: None }
    );
    assert_eq!(c.mechanisms.scheduler, SchedulerConfig::RoundRobin);
    assert!(c.relays.iter().all(|r| r.scheduler == SchedulerConfig::RoundRobin));
}

#[test]
fn full_config_loads_with_every_feature() {
    let c = load_file(&fixtures().join("full.toml")).unwrap();
    assert_eq!(c.experiment.name, "full");
    assert_eq!(c.experiment.seeds, vec![1, 2, 3]);
    assert_eq!(c.experiment.metrics_interval, SimDuration::from_millis(500));
    assert_eq!(c.tor.request_bytes, 1024);
    assert_eq!(c.tor.num_entry_guards, 3);
    assert_eq!(c.tor.idle_channel_timeout, None);
    let LatencyConfig::Matrix { path, one_way } = &c.network.latency else { panic!("{:?}", c.network.latency) };
    assert_eq!(path, "latency.csv");
    assert_eq!(one_way.len(), 3);
    assert_eq!(one_way[0][2], SimDuration::from_micros(35_500));
    let Some(BandwidthWeightsConfig::Given(w)) = &c.network.bandwidth_weights else { panic!("{:?}", c.network.bandwidth_weights) };
    assert_eq!(w["Wgg"], 5806);
    // Inline relays first, then the file's.
    let names: Vec<&str> = c.relays.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["guard1", "middle1", "exit1", "fileguard", "fileexit"]);
    let g = &c.relays[0];
    assert_eq!((g.bandwidth_rate, g.bandwidth_burst), (5 << 20, 10 << 20));
    assert_eq!((g.link_up, g.link_down), (100_000_000, 100_000_000));
    assert_eq!(g.perconn, Some((50 * 1024, 2 << 20)));
    let m = &c.relays[1];
    assert_eq!(m.link_up, 50_000_000);
    assert_eq!(m.link_down, 1536 * 1024 * 16);
    let fe = &c.relays[4];
    assert_eq!(fe.bandwidth_rate, 12_500_000, "100 Mbit = 12.5 MB/s");
    assert_eq!(fe.consensus_weight, 9000);
    assert_eq!(c.relays[3].location, 2);
    assert_eq!(c.clients[1].placement, Placement::At(2));
    assert_eq!((c.clients[1].link_up, c.clients[1].link_down), (100_000_000, 100_000_000));
    assert_eq!(c.clients[0].placement, Placement::RoundRobin);
    assert_eq!(
        c.workloads["perf"],
        Workload::Perf {
            size: onionlab_config::parse::default_perf_sizes(),
            pause: TimeDist::Exponential { mean: SimDuration::from_secs(60) }
        }
    );
    let Workload::Web { size, think: TimeDist::Empirical { points, .. }, .. } = &c.workloads["trace"] else { panic!() };
    assert_eq!(size, &SizeDist::Choice { sizes: vec![50 * 1024, 1 << 20], weights: vec![12.0, 2.5] });
    assert_eq!(points.first(), Some(&(0.0, 0.0)));
    assert_eq!(points.last(), Some(&(120.0, 1.0)));
    assert_eq!(
        c.workloads["pareto"],
        Workload::Web {
            size: SizeDist::Fixed { bytes: 87_000 },
            think: TimeDist::Pareto { scale: SimDuration::from_secs(1), alpha: 1.5 },
            session: None,
        }
    );
    assert_eq!(
        c.workloads["fixedpause"],
        Workload::Perf {
            size: onionlab_config::parse::default_perf_sizes(),
            pause: TimeDist::Fixed { value: SimDuration::from_millis(1500) }
        }
    );
}

#[test]
fn full_config_round_trips_through_to_toml() {
    let c = load_file(&fixtures().join("full.toml")).unwrap();
    let text = to_toml(&c);
    let again = load(&text).unwrap_or_else(|e| panic!("{e}\n---\n{text}"));
    assert_eq!(c, again, "\n{text}");
    // And the rendering is stable.
    assert_eq!(text, to_toml(&again));
}

#[test]
fn gml_latency_round_trips() {
    let text = edit("latency = { constant = \"20 ms\" }", "latency = { gml = \"topology.gml\" }");
    let c = load(&text).unwrap();
    let LatencyConfig::Gml { path, text: gml } = &c.network.latency else { panic!() };
    assert_eq!(path, "topology.gml");
    assert!(gml.contains("graph"));
    assert_eq!(load(&to_toml(&c)).unwrap(), c);
}

#[test]
fn example_configs_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["tiny.toml", "throttling-medium.toml"] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let c = load_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = load_str(&to_toml(&c), &dir).unwrap_or_else(|e| panic!("{name} rendered: {e}"));
        assert_eq!(c, again);
    }
}

#[test]
fn name_defaults_to_file_stem() {
    let dir = std::env::temp_dir().join(format!("onionlab-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("my-run.toml");
    std::fs::write(&path, MINIMAL).unwrap();
    let c = load_file(&path).unwrap();
    assert_eq!(c.experiment.name, "my-run");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_config_file() {
    let errs = load_file(Path::new("/nonexistent/dir/x.toml")).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs.0[0].path, "");
    assert!(errs.0[0].message.contains("x.toml"), "{errs}");
}

#[test]
fn display_lists_every_problem_with_a_count() {
    let text = edit("duration = \"2 min\"", "duration = 5\nwarmup = \"nope\"");
    let s = errors(&text).to_string();
    let mut lines = s.lines();
    assert_eq!(lines.next(), Some("2 problems in the config:"));
    assert!(lines.next().unwrap().starts_with("experiment.duration: "));
    assert!(lines.next().unwrap().starts_with("experiment.warmup: "));
    assert!(s.contains("(hint: "));
}

#[test]
fn five_problems_are_all_reported() {
    let text = MINIMAL
        .replace("duration = \"2 min\"", "durration = \"2 min\"") // unknown key + missing duration
        .replace("bandwidth = \"512 KiB/s\"", "bandwidth = \"-3 MiB/s\"")
        .replace("workload = \"web\"", "workload = \"wbe\"")
        .replace("size = \"320 KiB\"", "size = \"320 KiB\"\nthink = { dist = \"lognormal\", median = \"5 s\", sigma = 0 }");
    let errs = errors(&text);
    let paths: Vec<&str> = errs.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(errs.len(), 5, "{errs}");
    for p in ["experiment.durration", "experiment.duration", "relays[1].bandwidth", "clients[0].workload", "workloads.web.think.sigma"] {
        assert!(paths.contains(&p), "{p} missing from\n{errs}");
    }
}

// ---- syntax and unknown keys ----

#[test]
fn syntax_error_has_line_and_column() {
    let text = "[experiment]\nduration = 5 min\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1);
    let e = &errs.0[0];
    assert_eq!(e.path, "");
    assert!(e.message.contains("line 2"), "{e}");
    assert!(e.message.contains("column"), "{e}");
}

#[test]
fn unknown_key_suggests_closest() {
    let e = err_at(&edit("duration =", "durration ="), "experiment.durration", &["unknown key", "durration"]);
    assert!(hint(&e).contains("`duration`"), "{e}");
    let e = err_at(&edit("count = 20", "count = 20\nworkloda = \"x\""), "clients[0].workloda", &["unknown key"]);
    assert!(hint(&e).contains("`workload`"));
    let e = err_at(&format!("[experimnt]\nx = 1\n{MINIMAL}"), "experimnt", &["unknown key"]);
    assert!(hint(&e).contains("`experiment`"));
    // Nothing close: list the known keys.
    let e = err_at(&edit("[experiment]", "[experiment]\nzzzzzzzzzzzz = 1"), "experiment.zzzzzzzzzzzz", &["unknown key"]);
    assert!(hint(&e).contains("duration") && hint(&e).contains("seeds"), "{e}");
}

// ---- [experiment] ----

#[test]
fn duration_missing_zero_bare_and_malformed() {
    let e = err_at(&edit("duration = \"2 min\"", ""), "experiment.duration", &["missing"]);
    assert!(hint(&e).contains("duration = "));
    err_at(&edit("\"2 min\"", "\"0 s\""), "experiment.duration", &["longer than 0"]);
    let e = err_at(&edit("\"2 min\"", "120"), "experiment.duration", &["bare number", "120"]);
    assert!(hint(&e).contains("\"120 s\""), "{e}");
    // A negative bare number is not sent off to be written "-1 s" and refused again.
    let e = err_at(&edit("\"2 min\"", "-1"), "experiment.duration", &["cannot be negative", "-1"]);
    assert!(!hint(&e).contains("-1"), "{e}");
    err_at(&edit("\"2 min\"", "-0.5"), "experiment.duration", &["cannot be negative"]);
    err_at(&edit("\"2 min\"", "\"2 fortnights\""), "experiment.duration", &["bad duration", "2 fortnights"]);
    err_at(&edit("\"2 min\"", "true"), "experiment.duration", &["boolean"]);
}

#[test]
fn warmup_must_be_shorter_than_duration() {
    let e = err_at(&edit("duration = \"2 min\"", "duration = \"2 min\"\nwarmup = \"2 min\""), "experiment.warmup", &["shorter", "2 min"]);
    assert!(e.hint.is_some());
}

#[test]
fn seeds_must_be_non_negative_integers() {
    let base = |s: &str| edit("duration = \"2 min\"", &format!("duration = \"2 min\"\nseeds = {s}"));
    err_at(&base("[1, \"two\"]"), "experiment.seeds[1]", &["integer", "\"two\""]);
    err_at(&base("[1, 2.5]"), "experiment.seeds[1]", &["integer", "2.5"]);
    err_at(&base("[-1]"), "experiment.seeds[0]", &["non-negative", "-1"]);
    err_at(&base("[]"), "experiment.seeds", &["at least one"]);
    err_at(&base("3"), "experiment.seeds", &["array"]);
    err_at(&base("[3, 3]"), "experiment.seeds[1]", &["twice"]);
}

#[test]
fn metrics_interval_positive_and_name_nonempty() {
    err_at(
        &edit("duration = \"2 min\"", "duration = \"2 min\"\nmetrics_interval = \"0 ms\""),
        "experiment.metrics_interval",
        &["longer than 0"],
    );
    err_at(&edit("duration = \"2 min\"", "duration = \"2 min\"\nname = \"\""), "experiment.name", &["empty"]);
}

#[test]
fn metrics_intervals_divide_the_run() {
    let with = |d: &str, extra: &str| edit("duration = \"2 min\"", &format!("duration = \"{d}\"\n{extra}"));
    // Whole intervals: accepted, however written.
    load(&with("90 s", "connection_metrics_interval = \"30 s\"\nmetrics_interval = \"0.5 s\"")).unwrap();
    load(&with("0.3 s", "metrics_interval = \"100 ms\"")).unwrap();
    // The last 30 s would have no row: refused, naming the field, the rest and a fit.
    let e = err_at(
        &with("90 s", "connection_metrics_interval = \"1 min\""),
        "experiment.connection_metrics_interval",
        &["does not divide", "(90 s)", "last 30 s"],
    );
    assert!(e.hint.as_deref().is_some_and(|h| h.contains("connection_metrics_interval = \"30 s\"")), "{e}");
    // Longer than the run: the table would be empty.
    err_at(
        &with("90 s", "channel_metrics_interval = \"2 min\""),
        "experiment.channel_metrics_interval",
        &["longer than the duration", "no row"],
    );
    err_at(&with("90 s", "circuit_metrics_interval = \"7 s\""), "experiment.circuit_metrics_interval", &["does not divide"]);
    // A bad interval is one error, its own: not also "the default does not divide".
    let bad = errors(&with("2500 ms", "metrics_interval = \"abc\""));
    assert_eq!(bad.0.len(), 1, "{bad}");
    assert_eq!(errors(&with("2500 ms", "metrics_interval = \"0 s\"")).0.len(), 1);
    // The default 1 s is named as the default.
    let e = err_at(&with("2500 ms", ""), "experiment.metrics_interval", &["(the default)", "500 ms"]);
    assert!(e.hint.as_deref().is_some_and(|h| h.contains("metrics_interval = \"500 ms\"")), "{e}");
}

// ---- [tor] ----

#[test]
fn refill_phase_key() {
    let tor = |s: &str| format!("{MINIMAL}\n[tor]\n{s}\n");
    // Default aligned, and not written then, so resolved configs made before the key match.
    let d = load(&tor("")).unwrap();
    assert_eq!(d.tor.refill_phase, RefillPhaseConfig::Aligned);
    assert!(!to_toml(&d).contains("refill_phase"));
    assert_eq!(to_toml(&load(&tor("refill_phase = \"aligned\"")).unwrap()), to_toml(&d));
    let c = load(&tor("refill_phase = \"random\"")).unwrap();
    assert_eq!(c.tor.refill_phase, RefillPhaseConfig::Random);
    let text = to_toml(&c);
    assert!(text.contains("refill_phase = \"random\""), "{text}");
    assert_eq!(load(&text).unwrap(), c);
    err_at(&tor("refill_phase = \"staggered\""), "tor.refill_phase", &["unknown value \"staggered\""]);
    err_at(&tor("refill_phase = true"), "tor.refill_phase", &["expected a string"]);
}

#[test]
fn path_order_keys() {
    let tor = |s: &str| format!("{MINIMAL}\n[tor]\n{s}\n");
    // Defaults: exit-first (tor's), tor 0.4.8's 3 primary guards (or every guard in use),
    // /16s apart.
    let d = load(&tor("")).unwrap().tor;
    assert_eq!((d.path_order, d.num_primary_guards, d.distinct_guard_subnets), (PathOrderConfig::ExitFirst, 3, true));
    assert_eq!(load(&tor("num_entry_guards = 5")).unwrap().tor.num_primary_guards, 5);
    let t = load(&tor("path_order = \"guard-first\"\nnum_entry_guards = 2\nnum_primary_guards = 4\ndistinct_guard_subnets = false"))
        .unwrap()
        .tor;
    assert_eq!(
        (t.path_order, t.num_entry_guards, t.num_primary_guards, t.distinct_guard_subnets),
        (PathOrderConfig::GuardFirst, 2, 4, false)
    );
    // Written by to_toml (the primary guards and subnets only where they differ from their
    // defaults; the order always, as its default changed), and read back.
    let c = load(&tor("path_order = \"guard-first\"\nnum_primary_guards = 4\ndistinct_guard_subnets = false")).unwrap();
    let text = to_toml(&c);
    assert!(
        text.contains("path_order = \"guard-first\"")
            && text.contains("num_primary_guards = 4")
            && text.contains("distinct_guard_subnets = false"),
        "{text}"
    );
    assert_eq!(load(&text).unwrap(), c);
    let plain = to_toml(&load(&tor("path_order = \"exit-first\"\nnum_primary_guards = 3\ndistinct_guard_subnets = true")).unwrap());
    assert!(
        plain.contains("path_order = \"exit-first\"") && !plain.contains("num_primary_guards") && !plain.contains("distinct_guard"),
        "{plain}"
    );
    assert_eq!(plain, to_toml(&load(&tor("")).unwrap()));
    // Bad values name the key.
    err_at(&tor("path_order = \"exit_first\""), "tor.path_order", &["unknown value \"exit_first\""]);
    err_at(&tor("path_order = 1"), "tor.path_order", &["expected a string"]);
    err_at(&tor("num_primary_guards = 0"), "tor.num_primary_guards", &["at least 1"]);
    err_at(&tor("num_primary_guards = -1"), "tor.num_primary_guards", &["negative"]);
    let e = err_at(&tor("num_entry_guards = 3\nnum_primary_guards = 2"), "tor.num_primary_guards", &["fewer than num_entry_guards (3)"]);
    assert!(hint(&e).contains("NumPrimaryGuards"));
    err_at(&tor("distinct_guard_subnets = \"yes\""), "tor.distinct_guard_subnets", &["expected true or false"]);
}

#[test]
fn tor_parameters() {
    let tor = |s: &str| format!("{MINIMAL}\n[tor]\n{s}\n");
    err_at(&tor("circ_window = 100\ncirc_window_increment = 200"), "tor.circ_window_increment", &["larger than circ_window"]);
    err_at(&tor("circ_window = 0"), "tor.circ_window", &["at least 1"]);
    err_at(&tor("num_entry_guards = 0"), "tor.num_entry_guards", &["at least 1"]);
    err_at(&tor("link_handshake_rtts = -2"), "tor.link_handshake_rtts", &["negative"]);
    err_at(&tor("circ_max_cell_queue = \"2500\""), "tor.circ_max_cell_queue", &["integer"]);
    err_at(&tor("request_size = \"0 B\""), "tor.request_size", &["at least 1 byte"]);
    // Without optimistic data the request is DATA cells, at most one stream window of them.
    err_at(&tor("optimistic_data = \"no\""), "tor.optimistic_data", &["true or false"]);
    let e = err_at(
        &tor("optimistic_data = false\nrequest_size = \"249001 B\""),
        "tor.request_size",
        &["more than 249000 B", "optimistic_data = false"],
    );
    assert!(hint(&e).contains("500 cells"), "{}", hint(&e));
    let c = load(&tor("optimistic_data = false\nrequest_size = \"249000 B\"")).unwrap();
    assert_eq!((c.tor.optimistic_data, c.tor.request_bytes), (false, 249_000));
    assert!(load(&tor("request_size = \"1 MiB\"")).unwrap().tor.optimistic_data, "tor's default since 0.2.3.3-alpha");
    err_at(&tor("sndbuf = 4096"), "tor.sndbuf", &["bare number"]);
    // Linux's floors (SOCK_MIN_SNDBUF, SOCK_MIN_RCVBUF), named in the hint.
    let e = err_at(&tor("sndbuf = \"2 B\""), "tor.sndbuf", &["at least 4608 B", "found 2 B"]);
    assert!(hint(&e).contains("SOCK_MIN_SNDBUF"));
    err_at(&tor("rcvbuf = \"2303 B\""), "tor.rcvbuf", &["at least 2304 B"]);
    let c = load(&tor("sndbuf = \"4608 B\"\nrcvbuf = \"2304 B\"")).unwrap();
    assert_eq!((c.tor.sndbuf_bytes, c.tor.rcvbuf_bytes), (4608, 2304));
    err_at(&tor("refill_interval = \"0 s\""), "tor.refill_interval", &["longer than 0"]);
    let e = err_at(&tor("refil_interval = \"1 s\""), "tor.refil_interval", &["unknown key"]);
    assert!(hint(&e).contains("refill_interval"));
    let c = load(&tor("refill_interval = \"1 s\"\nrcvbuf = \"1 MiB\"")).unwrap();
    assert_eq!(c.tor.refill_interval, SimDuration::from_secs(1));
    assert_eq!(c.tor.rcvbuf_bytes, 1 << 20);
    let s = SimDuration::from_secs;
    assert_eq!(c.tor.idle_channel_timeout, Some(IdleChannelTimeoutConfig::fixed(s(180))), "tor 0.2.2's IDLE_OR_CONN_TIMEOUT");
    err_at(&tor("idle_channel_timeout = \"0 s\""), "tor.idle_channel_timeout", &["longer than 0"]);
    err_at(&tor("idle_channel_timeout = \"soon\""), "tor.idle_channel_timeout", &["duration"]);
    let c = load(&tor("idle_channel_timeout = \"never\"")).unwrap();
    assert_eq!(c.tor.idle_channel_timeout, None);
    let c = load(&tor("idle_channel_timeout = \"4.5 min\"")).unwrap();
    assert_eq!(c.tor.idle_channel_timeout, Some(IdleChannelTimeoutConfig::fixed(s(270))));
    // Per class: a range or one duration each; a missing class is tor 0.4.8's range. A
    // table prints back as a table, one duration as one.
    let today = IdleChannelTimeoutConfig::tor_0_4_8();
    let c = load(&tor("idle_channel_timeout = { client = [\"180 s\", \"270 s\"], relay = [\"45 min\", \"75 min\"] }")).unwrap();
    assert_eq!(c.tor.idle_channel_timeout, Some(today));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap().tor.idle_channel_timeout, Some(today));
    let c = load(&tor("idle_channel_timeout = { relay = \"15 min\" }")).unwrap();
    assert_eq!(c.tor.idle_channel_timeout, Some(IdleChannelTimeoutConfig { relay: (s(900), s(900)), ..today }));
    let c = load(&tor("idle_channel_timeout = { client = \"3 min\", relay = \"3 min\" }")).unwrap();
    assert!(to_toml(&c).contains("idle_channel_timeout = \"3 min\""), "{}", to_toml(&c));
    err_at(
        &tor("idle_channel_timeout = { client = [\"270 s\", \"180 s\"] }"),
        "tor.idle_channel_timeout.client",
        &["low no more than high"],
    );
    err_at(&tor("idle_channel_timeout = { relay = [\"45 min\"] }"), "tor.idle_channel_timeout.relay", &["two durations"]);
    err_at(&tor("idle_channel_timeout = { relay = [\"45 min\", \"later\"] }"), "tor.idle_channel_timeout.relay", &["duration"]);
    err_at(&tor("idle_channel_timeout = { client = \"0 s\" }"), "tor.idle_channel_timeout.client", &["longer than 0"]);
    err_at(&tor("idle_channel_timeout = { guard = \"1 min\" }"), "tor.idle_channel_timeout.guard", &["unknown"]);
    // Predicted circuits: off unless asked for; CircuitIdleTimeout tor 0.2.2's hour.
    assert!(!c.tor.predicted_circuits);
    assert_eq!(c.tor.circuit_idle_timeout, SimDuration::from_secs(3600));
    err_at(&tor("predicted_circuits = \"yes\""), "tor.predicted_circuits", &["true or false"]);
    err_at(&tor("circuit_idle_timeout = \"0 s\""), "tor.circuit_idle_timeout", &["longer than 0"]);
    let c = load(&tor("predicted_circuits = true\ncircuit_idle_timeout = \"30 min\"")).unwrap();
    assert!(c.tor.predicted_circuits);
    assert_eq!(c.tor.circuit_idle_timeout, SimDuration::from_secs(1800));
    assert_eq!(c.tor.cbt_learning, None);
    // Build-time learning: `true` is tor 0.4.8's (10 s, 10 clean); a table sets either
    // parameter, the other staying tor 0.4.8's; it prints back as the table.
    let today = CbtLearningConfig { test_frequency: SimDuration::from_secs(10), max_clean: 10 };
    let c = load(&tor("predicted_circuits = true\ncbt_learning = true")).unwrap();
    assert_eq!(c.tor.cbt_learning, Some(today));
    assert_eq!(load(&tor("predicted_circuits = true\ncbt_learning = false")).unwrap().tor.cbt_learning, None);
    let c = load(&tor("predicted_circuits = true\ncbt_learning = { test_frequency = \"60 s\", max_clean = 12 }")).unwrap();
    let old = CbtLearningConfig { test_frequency: SimDuration::from_secs(60), max_clean: 12 };
    assert_eq!(c.tor.cbt_learning, Some(old));
    assert_eq!(load_str(&to_toml(&c), Path::new("again.toml")).unwrap().tor.cbt_learning, Some(old));
    let c = load(&tor("predicted_circuits = true\ncbt_learning = { max_clean = 3 }")).unwrap();
    assert_eq!(c.tor.cbt_learning, Some(CbtLearningConfig { max_clean: 3, ..today }));
    err_at(&tor("cbt_learning = true"), "tor.cbt_learning", &["needs predicted_circuits"]);
    err_at(&tor("cbt_learning = { max_clean = 3 }"), "tor.cbt_learning", &["needs predicted_circuits"]);
    err_at(&tor("predicted_circuits = true\ncbt_learning = \"yes\""), "tor.cbt_learning", &["true, false or a table"]);
    err_at(&tor("predicted_circuits = true\ncbt_learning = { max_clean = 15 }"), "tor.cbt_learning.max_clean", &["range 0..=14"]);
    err_at(
        &tor("predicted_circuits = true\ncbt_learning = { test_frequency = \"0 s\" }"),
        "tor.cbt_learning.test_frequency",
        &["longer than 0"],
    );
    err_at(&tor("predicted_circuits = true\ncbt_learning = { every = \"10 s\" }"), "tor.cbt_learning.every", &["unknown"]);
    let c = load(&tor("predicted_circuits = true\ncircuit_idle_timeout = \"30 min\"")).unwrap();
    // Congestion control: tor's fixed windows unless asked for Vegas.
    assert_eq!(c.tor.congestion_control, CongestionControlConfig::FixedWindow);
    let e = err_at(&tor("congestion_control = \"vegass\""), "tor.congestion_control", &["unknown value"]);
    assert!(hint(&e).contains("vegas"), "{e}");
    let c = load(&tor("congestion_control = \"vegas\"")).unwrap();
    assert_eq!(c.tor.congestion_control, CongestionControlConfig::Vegas(VegasConfig::default()));
    // A table sets some parameters (the 2022 consensus's exit values here) and keeps
    // tor's code defaults for the rest; the resolved config writes it back in full.
    let c = load(&tor("congestion_control = { kind = \"vegas\", alpha = 155, delta = 310, cwnd_inc = 1, cwnd_inc_rate = 31 }")).unwrap();
    let want = VegasConfig { alpha: 155, delta: 310, cwnd_inc: 1, cwnd_inc_rate: 31, ..VegasConfig::default() };
    assert_eq!(c.tor.congestion_control, CongestionControlConfig::Vegas(want));
    let again = load_str(&to_toml(&c), Path::new(".")).unwrap();
    assert_eq!(again.tor.congestion_control, c.tor.congestion_control);
    err_at(
        &tor("congestion_control = { kind = \"vegas\", sendme_inc = 0 }"),
        "tor.congestion_control.sendme_inc",
        &["outside tor's range"],
    );
    let errs = errors(&tor("congestion_control = { kind = \"vegas\", sendme_inc = 0, ss_max = 3 }"));
    assert!(errs.at("tor.congestion_control.sendme_inc").is_some() && errs.at("tor.congestion_control.ss_max").is_some(), "{errs}");
    err_at(&tor("congestion_control = { kind = \"vegas\", alpah = 3 }"), "tor.congestion_control.alpah", &["unknown key"]);
    err_at(&tor("congestion_control = { kind = \"fixed-window\" }"), "tor.congestion_control.kind", &["unknown kind"]);
    err_at(&tor("congestion_control = 2"), "tor.congestion_control", &["a name or a table"]);
    // Edge blocking on a full circuit queue: off unless both watermarks are given.
    assert_eq!(c.tor.cell_queue_watermarks, None);
    let c = load(&tor("cellq_high = 256\ncellq_low = 10")).unwrap();
    assert_eq!(c.tor.cell_queue_watermarks, Some((256, 10)));
    let again = load_str(&to_toml(&c), Path::new(".")).unwrap();
    assert_eq!(again.tor.cell_queue_watermarks, Some((256, 10)));
    err_at(&tor("cellq_high = 256"), "tor.cellq_low", &["go together"]);
    err_at(&tor("cellq_high = 10\ncellq_low = 10"), "tor.cellq_low", &["below cellq_high"]);
    err_at(&tor("cellq_high = \"256\"\ncellq_low = 10"), "tor.cellq_high", &["integer"]);
}

// ---- [network] ----

#[test]
fn latency_model_choice() {
    let lat = |s: &str| edit("latency = { constant = \"20 ms\" }", s);
    err_at(&lat(""), "network.latency", &["missing"]);
    err_at(&lat("latency = {}"), "network.latency", &["one of"]);
    err_at(&lat("latency = { constant = \"20 ms\", gml = \"topology.gml\" }"), "network.latency", &["exactly one"]);
    err_at(&lat("latency = \"20 ms\""), "network.latency", &["expected a table"]);
    let e = err_at(&lat("latency = { constnat = \"20 ms\" }"), "network.latency.constnat", &["unknown key"]);
    assert!(hint(&e).contains("`constant`"));
}

#[test]
fn latency_files() {
    let lat = |s: &str| edit("latency = { constant = \"20 ms\" }", s);
    let e = err_at(&lat("latency = { matrix = \"nope.csv\" }"), "network.latency.matrix", &["cannot read", "nope.csv"]);
    assert!(hint(&e).contains("relative"));
    err_at(&lat("latency = { matrix = \"latency_ragged.csv\" }"), "network.latency.matrix", &["latency_ragged.csv line 2", "square"]);
    err_at(&lat("latency = { matrix = \"latency_bad.csv\" }"), "network.latency.matrix", &["latency_bad.csv line 2", "-3"]);
    err_at(&lat("latency = { gml = \"empty.gml\" }"), "network.latency.gml", &["empty"]);
    err_at(&lat("latency = { gml = \"missing.gml\" }"), "network.latency.gml", &["cannot read"]);
}

#[test]
fn locations_must_exist_in_the_matrix() {
    let text = edit("latency = { constant = \"20 ms\" }", "latency = { matrix = \"latency.csv\" }")
        .replace("flags = [\"Guard\", \"Fast\"]", "flags = [\"Guard\", \"Fast\"]\nlocation = 3")
        .replace("count = 20", "count = 20\nplacement = 7");
    let e = err_at(&text, "relays[0].location", &["location 3", "3 locations"]);
    assert!(hint(&e).contains("from 0 to 2"), "{e}");
    err_at(&text, "clients[0].placement", &["location 7"]);
    // A list of locations: each checked, the bad one named by its index.
    let listed = text.replace("placement = 7", "placement = [0, 2]").replace("location = 3", "location = 1");
    assert_eq!(load(&listed).unwrap().clients[0].placement, Placement::Cycle(vec![0, 2]));
    let e = err_at(
        &text.replace("placement = 7", "placement = [0, 5]").replace("location = 3", "location = 1"),
        "clients[0].placement[1]",
        &["location 5"],
    );
    assert!(hint(&e).contains("from 0 to 2"), "{e}");
}

#[test]
fn bandwidth_weights() {
    let bw =
        |s: &str| edit("latency = { constant = \"20 ms\" }", &format!("latency = {{ constant = \"20 ms\" }}\nbandwidth_weights = {s}"));
    let e = err_at(&bw("{ Wggg = 1 }"), "network.bandwidth_weights.Wggg", &["unknown bandwidth weight"]);
    assert!(hint(&e).contains("Wgg"));
    err_at(&bw("{ Wgg = \"half\" }"), "network.bandwidth_weights.Wgg", &["integer"]);
    err_at(&bw("{ Wgg = 1.5 }"), "network.bandwidth_weights.Wgg", &["integer"]);
    // A run builds them as a consensus line: every required weight, each at most 10000.
    let e = err_at(&bw("{ Wgg = 7000 }"), "network.bandwidth_weights", &["missing Wgm, Wgd,", "Wed"]);
    assert!(!e.message.contains("Wgg"), "{e}");
    let full =
        "Wgg = 7000, Wgm = 7000, Wgd = 0, Wmg = 3000, Wmm = 10000, Wme = 0, Wmd = 0, Weg = 10000, Wem = 10000, Wee = 10000, Wed = 10000";
    let Some(BandwidthWeightsConfig::Given(w)) = load(&bw(&format!("{{ {full} }}"))).unwrap().network.bandwidth_weights else { panic!() };
    assert_eq!(w["Wgg"], 7000);
    err_at(&bw(&format!("{{ {} }}", full.replace("Wee = 10000", "Wee = 10001"))), "network.bandwidth_weights.Wee", &["at most 10000"]);
    // What tor's directory authorities would compute for the relays.
    assert_eq!(load(&bw("\"computed\"")).unwrap().network.bandwidth_weights, Some(BandwidthWeightsConfig::Computed));
    assert_eq!(load(&bw("\"computed-v9\"")).unwrap().network.bandwidth_weights, Some(BandwidthWeightsConfig::ComputedV9));
    let e = err_at(&bw("\"uniform\""), "network.bandwidth_weights", &["unknown value \"uniform\""]);
    assert!(hint(&e).contains("computed") && hint(&e).contains("computed-v9"), "{e}");
    err_at(&bw("7"), "network.bandwidth_weights", &["table"]);
}

// ---- relays ----

#[test]
fn relays_required() {
    let e = err_at(&no_relays(), "relays", &["at least one"]);
    assert!(hint(&e).contains("relays_file"));
}

#[test]
fn relay_fields() {
    err_at(&edit("bandwidth = \"2 MiB/s\"", ""), "relays[0].bandwidth", &["missing"]);
    let e = err_at(&edit("\"2 MiB/s\"", "2048"), "relays[0].bandwidth", &["bare number"]);
    assert!(hint(&e).contains("\"2048 KiB/s\""), "{e}");
    err_at(&edit("\"2 MiB/s\"", "\"0 MiB/s\""), "relays[0].bandwidth", &["at least 1 byte/s"]);
    err_at(&edit("\"2 MiB/s\"", "\"2 MiB/fortnight\""), "relays[0].bandwidth", &["bad rate"]);
    err_at(&edit("name = \"exit\"", "name = \"guard\""), "relays[1].name", &["duplicate", "relays[0]"]);
    err_at(&edit("name = \"exit\"", ""), "relays[1].name", &["missing"]);
    let after_guard = |s: &str| edit("flags = [\"Guard\", \"Fast\"]", &format!("flags = [\"Guard\", \"Fast\"]\n{s}"));
    err_at(&after_guard("burst = \"0 B\""), "relays[0].burst", &["at least 1 byte"]);
    err_at(&after_guard("link = \"0 Mbit\""), "relays[0].link", &["positive"]);
    err_at(&after_guard("link_down = \"fast\""), "relays[0].link_down", &["bad rate"]);
    err_at(&after_guard("consensus_weight = -5"), "relays[0].consensus_weight", &["negative"]);
    err_at(&after_guard("location = \"here\""), "relays[0].location", &["integer"]);
    err_at(&after_guard("perconn = { rate = \"50 KiB/s\" }"), "relays[0].perconn.burst", &["missing"]);
    err_at(&after_guard("perconn = { rate = \"50 KiB/s\", burst = \"1 MiB\", ratee = 1 }"), "relays[0].perconn.ratee", &["unknown key"]);
    err_at(&format!("relays = 5\n{}", no_relays()), "relays", &["array"]);
    // IPv4 addresses, for tor's same-/16 path restriction.
    let e = err_at(&after_guard("address = \"10.0.0.256\""), "relays[0].address", &["not an IPv4 address"]);
    assert!(hint(&e).contains("192.0.2.7"), "{e}");
    err_at(&after_guard("address = 10"), "relays[0].address", &["string"]);
    let c = load(&after_guard("address = \"10.1.2.3\"")).unwrap();
    assert_eq!(c.relays[0].address, Some("10.1.2.3".parse().unwrap()));
    assert_eq!(c.relays[1].address, None);
}

#[test]
fn relay_flags() {
    let e = err_at(&edit("[\"Guard\", \"Fast\"]", "[\"guard\", \"Fast\"]"), "relays[0].flags[0]", &["unknown flag", "guard"]);
    assert!(hint(&e).contains("`Guard`") && hint(&e).contains("HSDir"), "{e}");
    let e = err_at(&edit("[\"Guard\", \"Fast\"]", "[\"Guard\", \"Fast\", \"Speedy\"]"), "relays[0].flags[2]", &["unknown flag"]);
    assert!(hint(&e).contains("Authority") && hint(&e).contains("Valid"));
    err_at(&edit("[\"Guard\", \"Fast\"]", "[\"Guard\", \"Fast\", \"Fast\"]"), "relays[0].flags[2]", &["twice"]);
    err_at(&edit("[\"Guard\", \"Fast\"]", "\"Guard\""), "relays[0].flags", &["array"]);
}

#[test]
fn relay_set_needs_a_guard_and_an_exit() {
    let e = err_at(&edit("[\"Guard\", \"Fast\"]", "[\"Guard\"]"), "relays", &["Guard and Fast"]);
    assert!(hint(&e).contains("\"Guard\", \"Fast\""));
    let e = err_at(&edit("[\"Exit\", \"Fast\"]", "[\"Exit\", \"Stable\"]"), "relays", &["Exit and Fast"]);
    assert!(hint(&e).contains("\"Exit\", \"Fast\""));
}

#[test]
fn a_position_whose_relays_all_weigh_zero_is_an_error() {
    let guard0 = |text: &str| text.replacen("flags = [\"Guard\", \"Fast\"]", "flags = [\"Guard\", \"Fast\"]\nconsensus_weight = 0", 1);
    let exit0 = |text: &str| text.replacen("flags = [\"Exit\", \"Fast\"]", "flags = [\"Exit\", \"Fast\"]\nconsensus_weight = 0", 1);
    let guard_words: &[&str] = &["Guard and Fast flags", "consensus_weight = 0", "an entry"];
    let e = err_at(&guard0(MINIMAL), "relays", guard_words);
    assert!(hint(&e).contains("positive consensus_weight"), "{e}");
    assert_eq!(errors(&guard0(MINIMAL)).len(), 1, "{}", errors(&guard0(MINIMAL)));
    err_at(&exit0(MINIMAL), "relays", &["Exit and Fast flags", "consensus_weight = 0", "an exit"]);
    // Both at 0: each position is reported once.
    let all = errors(&exit0(&guard0(MINIMAL)));
    let messages: Vec<&str> = all.0.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{all}");
    assert!(messages[0].contains("an entry") && messages[1].contains("an exit"), "{all}");
    // One zero-weight guard beside a weighted one is a valid network (tor has such relays).
    let second = MINIMAL.replacen(
        "[[relays]]",
        "[[relays]]\nname = \"guard0\"\nbandwidth = \"1 MiB/s\"\nflags = [\"Guard\", \"Fast\"]\nconsensus_weight = 0\n\n[[relays]]",
        1,
    );
    let cfg = load(&second).expect("a zero-weight relay beside weighted ones is valid");
    assert_eq!(cfg.relays[0].consensus_weight, 0);
}

#[test]
fn relays_file() {
    let with_file = |f: &str| format!("relays_file = \"{f}\"\n{MINIMAL}");
    let c = load(&with_file("relays.toml")).unwrap();
    assert_eq!(c.relays.len(), 4);
    assert_eq!(c.relays[2].name, "fileguard");
    err_at(&with_file("nope.toml"), "relays_file", &["cannot read", "nope.toml"]);
    let errs = errors(&with_file("relays_bad.toml"));
    let e = errs.at("relays_file:relays[0].bandwidth").unwrap_or_else(|| panic!("{errs}"));
    assert!(e.message.contains("bare number"));
    let e = errs.at("relays_file:relays[0].colour").unwrap_or_else(|| panic!("{errs}"));
    assert!(e.message.contains("unknown key"));
    // A top-level key of the file is named after the file, with no stray dot.
    let e = errs.at("relays_file:colour").unwrap_or_else(|| panic!("{errs}"));
    assert!(e.message.contains("unknown key"));
    err_at(&with_file("latency.csv"), "relays_file", &["latency.csv", "TOML syntax error", "line"]);
    err_at(&with_file("topology.gml"), "relays_file", &["TOML syntax error"]);
    // Names are unique across the config and the file.
    let dup = with_file("relays.toml").replacen("name = \"guard\"", "name = \"fileexit\"", 1);
    err_at(&dup, "relays_file:relays[1].name", &["duplicate", "relays[0]"]);
    // Relays only from the file.
    let only_file = format!("relays_file = \"relays.toml\"\n{}", no_relays());
    assert_eq!(load(&only_file).unwrap().relays.len(), 2);
}

// ---- clients and servers ----

#[test]
fn clients_required() {
    let text = MINIMAL.replace("[[clients]]\nname = \"web\"\nworkload = \"web\"\ncount = 20\n", "");
    err_at(&text, "clients", &["at least one"]);
    err_at(&format!("clients = []\n{text}"), "clients", &["at least one"]);
}

#[test]
fn client_fields() {
    let e = err_at(&edit("workload = \"web\"", "workload = \"webb\""), "clients[0].workload", &["not defined", "webb"]);
    assert!(hint(&e).contains("`web`"), "{e}");
    let e = err_at(&edit("workload = \"web\"", "workload = \"torrent\""), "clients[0].workload", &["not defined"]);
    assert!(hint(&e).contains("Defined workloads: web"), "{e}");
    err_at(&edit("workload = \"web\"", ""), "clients[0].workload", &["missing"]);
    err_at(&edit("name = \"web\"", ""), "clients[0].name", &["missing"]);
    err_at(&edit("count = 20", "count = 0"), "clients[0].count", &["at least 1"]);
    err_at(&edit("count = 20", "count = 2.5"), "clients[0].count", &["integer"]);
    err_at(&edit("count = 20", ""), "clients[0].count", &["missing"]);
    err_at(&edit("count = 20", "count = 20\nplacement = \"everywhere\""), "clients[0].placement", &["unknown placement"]);
    err_at(&edit("count = 20", "count = 20\nplacement = -1"), "clients[0].placement", &["negative"]);
    err_at(&edit("count = 20", "count = 20\nlink_up = \"10\""), "clients[0].link_up", &["bad rate"]);
    let dup = format!("{MINIMAL}\n[[clients]]\nname = \"web\"\nworkload = \"web\"\ncount = 1\n");
    err_at(&dup, "clients[1].name", &["duplicate", "clients[0]"]);
    let c = load(&edit("count = 20", "count = 20\nlink = \"1 Gbit\"\nlink_down = \"2 Gbit\"")).unwrap();
    assert_eq!((c.clients[0].link_up, c.clients[0].link_down), (1_000_000_000, 2_000_000_000));
}

#[test]
fn servers() {
    let srv = |s: &str| format!("{MINIMAL}\n[servers]\n{s}\n");
    err_at(&srv("count = 0"), "servers.count", &["at least 1"]);
    err_at(&srv("link = 1000"), "servers.link", &["bare number"]);
    err_at(&srv("placement = true"), "servers.placement", &["round_robin"]);
    err_at(&srv("placement = []"), "servers.placement", &["empty list"]);
    err_at(&srv("placement = [0, -1]"), "servers.placement[1]", &["negative"]);
    err_at(&srv("placement = [0, \"near\"]"), "servers.placement[1]", &["integer"]);
    let c = load(&srv("placement = [0]")).unwrap();
    assert_eq!(c.servers.placement, Placement::Cycle(vec![0]));
    let c = load(&srv("count = 3\nlink_up = \"100 Mbit\"\nplacement = 0")).unwrap();
    assert_eq!(c.servers, ServerGroup { count: 3, link_up: 100_000_000, link_down: 1_000_000_000, placement: Placement::At(0) });
}

// ---- workloads ----

#[test]
fn workload_types() {
    let e = err_at(&edit("type = \"web\"", "type = \"wbe\""), "workloads.web.type", &["unknown workload type"]);
    assert!(hint(&e).contains("`web`"));
    err_at(&edit("type = \"web\"", ""), "workloads.web.type", &["missing"]);
    err_at(&edit("size = \"320 KiB\"", ""), "workloads.web.size", &["missing"]);
    err_at(&edit("size = \"320 KiB\"", "size = \"320 KiB\"\npause = \"1 s\""), "workloads.web.pause", &["unknown key"]);
    let perf = format!("{MINIMAL}\n[workloads.p]\ntype = \"perf\"\n");
    err_at(&perf, "workloads.p.pause", &["missing"]);
    let bulk = format!("{MINIMAL}\n[workloads.b]\ntype = \"bulk\"\nsize = \"1 MiB\"\nthink = \"1 s\"\n");
    err_at(&bulk, "workloads.b.think", &["unknown key"]);
    err_at(&format!("{MINIMAL}\n[workloads]\nx = 1\n").replace("[workloads.web]", "[workloads.web]"), "workloads.x", &["table"]);
    // An unused workload is fine.
    assert!(load(&format!("{MINIMAL}\n[workloads.b]\ntype = \"bulk\"\nsize = \"1 MiB\"\n")).is_ok());
}

#[test]
fn size_distributions() {
    let size = |s: &str| edit("size = \"320 KiB\"", &format!("size = {s}"));
    err_at(&size("\"0 KiB\""), "workloads.web.size", &["at least 1 byte"]);
    err_at(&size("320"), "workloads.web.size", &["bare number"]);
    err_at(&size("{ dist = \"uniform\", min = \"2 MiB\", max = \"1 MiB\" }"), "workloads.web.size.min", &["larger than max"]);
    err_at(&size("{ dist = \"uniform\", min = \"2 MiB\" }"), "workloads.web.size.max", &["missing"]);
    err_at(
        &size("{ dist = \"choice\", sizes = [\"1 KiB\", \"2 KiB\"], weights = [1] }"),
        "workloads.web.size.weights",
        &["1 weights for 2 sizes"],
    );
    err_at(&size("{ dist = \"choice\", sizes = [\"1 KiB\"], weights = [0] }"), "workloads.web.size.weights[0]", &["positive"]);
    err_at(&size("{ dist = \"choice\", sizes = [\"1 KiB\", 5], weights = [1, 1] }"), "workloads.web.size.sizes[1]", &["bare number"]);
    err_at(&size("{ dist = \"choice\", sizes = [], weights = [] }"), "workloads.web.size.sizes", &["at least one"]);
    let e = err_at(&size("{ dist = \"unifrom\", min = \"1 KiB\", max = \"2 KiB\" }"), "workloads.web.size.dist", &["unknown distribution"]);
    assert!(hint(&e).contains("`uniform`"));
    err_at(&size("{ min = \"1 KiB\" }"), "workloads.web.size.dist", &["missing"]);
    err_at(&size("{ dist = \"fixed\", bytes = \"1 KiB\" }"), "workloads.web.size.bytes", &["unknown key"]);
    err_at(&size("{ dist = \"fixed\", bytes = \"1 KiB\" }"), "workloads.web.size.value", &["missing"]);
}

#[test]
fn time_distributions() {
    let think = |s: &str| edit("size = \"320 KiB\"", &format!("size = \"320 KiB\"\nthink = {s}"));
    err_at(&think("5"), "workloads.web.think", &["bare number"]);
    err_at(&think("{ dist = \"lognormal\", median = \"5 s\", sigma = -1 }"), "workloads.web.think.sigma", &["positive"]);
    err_at(&think("{ dist = \"lognormal\", median = \"0 s\", sigma = 1 }"), "workloads.web.think.median", &["longer than 0"]);
    err_at(&think("{ dist = \"lognormal\", median = \"5 s\", sigma = \"big\" }"), "workloads.web.think.sigma", &["number"]);
    err_at(&think("{ dist = \"pareto\", scale = \"1 s\", alpha = 0 }"), "workloads.web.think.alpha", &["positive"]);
    err_at(&think("{ dist = \"exponential\", mean = \"0 s\" }"), "workloads.web.think.mean", &["longer than 0"]);
    err_at(&think("{ dist = \"exponential\" }"), "workloads.web.think.mean", &["missing"]);
    err_at(&think("{ dist = \"uniform\", min = \"5 s\", max = \"1 s\" }"), "workloads.web.think.min", &["larger than max"]);
    let e = err_at(&think("{ dist = \"log-normal\", median = \"5 s\", sigma = 1 }"), "workloads.web.think.dist", &["unknown distribution"]);
    assert!(hint(&e).contains("`lognormal`"));
    err_at(&think("{ dist = \"empirical\", file = \"nope.csv\" }"), "workloads.web.think.file", &["cannot read"]);
    err_at(&think("{ dist = \"empirical\", file = \"think_bad.csv\" }"), "workloads.web.think.file", &["think_bad.csv line 3", "seconds"]);
    err_at(
        &think("{ dist = \"empirical\", file = \"think_short.csv\" }"),
        "workloads.web.think.file",
        &["think_short.csv line 2", "must be 1"],
    );
    err_at(&think("{ dist = \"empirical\", file = \"latency.csv\" }"), "workloads.web.think.file", &["latency.csv line 2"]);
    let c = load(&think("\"20 s\"")).unwrap();
    assert_eq!(
        c.workloads["web"],
        Workload::Web {
            size: SizeDist::Fixed { bytes: 320 * 1024 },
            think: TimeDist::Fixed { value: SimDuration::from_secs(20) },
            session: None
        }
    );
}

// ---- [mechanisms] ----

#[test]
fn scheduler() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    let c = load(&with("scheduler = \"ewma\"")).unwrap();
    let tor_ewma = SchedulerConfig::Ewma { halflife: SimDuration::from_secs(30), tick: SimDuration::from_secs(10) };
    assert_eq!(c.mechanisms.scheduler, tor_ewma, "tor's CircuitPriorityHalflife and tick by default");
    assert!(c.relays.iter().all(|r| r.scheduler == tor_ewma), "relays inherit mechanisms.scheduler");
    let c = load(&with("scheduler = { kind = \"ewma-exact\", halflife = \"4.5 s\" }")).unwrap();
    assert_eq!(c.mechanisms.scheduler, SchedulerConfig::EwmaExact { halflife: SimDuration::from_millis(4500) });

    let e = err_at(&with("scheduler = \"ewmaa\""), "mechanisms.scheduler", &["unknown scheduler", "ewmaa"]);
    assert!(hint(&e).contains("ewma"));
    err_at(&with("schedular = \"round-robin\""), "mechanisms.schedular", &["unknown key"]);
    err_at(&with("scheduler = { kind = \"ewma\", halflife = \"0 s\" }"), "mechanisms.scheduler.halflife", &["longer than 0"]);
    err_at(&with("scheduler = { kind = \"ewma\", halflife = 30 }"), "mechanisms.scheduler.halflife", &["bare number"]);
    err_at(&with("scheduler = { kind = \"round-robin\", tick = \"1 s\" }"), "mechanisms.scheduler.tick", &["unknown key"]);
    err_at(&with("scheduler = { kind = \"nope\" }"), "mechanisms.scheduler.kind", &["unknown scheduler"]);
    err_at(&with("scheduler = { halflife = \"3 s\" }"), "mechanisms.scheduler.kind", &["missing"]);
    err_at(&with("scheduler = 3"), "mechanisms.scheduler", &["expected a scheduler"]);
}

#[test]
fn kist_schedulers() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    let (h, l) = (SimDuration::from_secs(30), SimDuration::from_secs(10));
    let c = load(&with("scheduler = \"kist\"")).unwrap();
    assert_eq!(
        c.mechanisms.scheduler,
        SchedulerConfig::Kist { run_interval: SimDuration::from_millis(10), sock_buf_size_factor: 1.0, halflife: h, tick: l },
        "tor's KISTSchedRunInterval and KISTSockBufSizeFactor by default"
    );
    let c =
        load(&with("scheduler = { kind = \"kist\", run_interval = \"2 ms\", sock_buf_size_factor = 0.5, halflife = \"10 s\" }")).unwrap();
    assert_eq!(
        c.mechanisms.scheduler,
        SchedulerConfig::Kist {
            run_interval: SimDuration::from_millis(2),
            sock_buf_size_factor: 0.5,
            halflife: SimDuration::from_secs(10),
            tick: l
        }
    );
    let c = load(&with("scheduler = { kind = \"kist-lite\", run_interval = \"5 ms\" }")).unwrap();
    assert_eq!(c.mechanisms.scheduler, SchedulerConfig::KistLite { run_interval: SimDuration::from_millis(5), halflife: h, tick: l });
    // The resolved TOML reads back the same.
    assert_eq!(load_str(&onionlab_config::to_toml(&c), &fixtures()).unwrap(), c);

    let e =
        err_at(&with("scheduler = { kind = \"kist\", run_interval = \"1 s\" }"), "mechanisms.scheduler.run_interval", &["at most 100 ms"]);
    assert!(hint(&e).contains("10 ms"));
    err_at(&with("scheduler = { kind = \"kist\", run_interval = \"0 ms\" }"), "mechanisms.scheduler.run_interval", &["longer than 0"]);
    err_at(&with("scheduler = { kind = \"kist\", run_interval = 10 }"), "mechanisms.scheduler.run_interval", &["bare number"]);
    let e = err_at(
        &with("scheduler = { kind = \"kist\", sock_buf_size_factor = -1 }"),
        "mechanisms.scheduler.sock_buf_size_factor",
        &["at least 0"],
    );
    assert!(hint(&e).contains("KISTSockBufSizeFactor"));
    err_at(
        &with("scheduler = { kind = \"kist\", sock_buf_size_factor = \"big\" }"),
        "mechanisms.scheduler.sock_buf_size_factor",
        &["expected a number"],
    );
    err_at(
        &with("scheduler = { kind = \"kist-lite\", sock_buf_size_factor = 1.0 }"),
        "mechanisms.scheduler.sock_buf_size_factor",
        &["unknown key"],
    );
    // Tick-based EWMA overflows past 512 half-lives per tick; the exact form has no tick.
    let e = err_at(
        &with("scheduler = { kind = \"ewma\", halflife = \"5 ms\" }"),
        "mechanisms.scheduler.halflife",
        &["at least tick / 512", "19532 us"],
    );
    assert!(hint(&e).contains("overflow"));
    err_at(
        &with("scheduler = { kind = \"kist-lite\", halflife = \"1 ms\", tick = \"1 s\" }"),
        "mechanisms.scheduler.halflife",
        &["at least tick / 512"],
    );
    load(&with("scheduler = { kind = \"ewma\", halflife = \"20 ms\" }")).expect("10 s is 500 half-lives of 20 ms");
    load(&with("scheduler = { kind = \"ewma-exact\", halflife = \"1 ms\" }")).expect("no tick to overflow");
    let e = err_at(&with("scheduler = \"kits\""), "mechanisms.scheduler", &["unknown scheduler"]);
    assert!(hint(&e).contains("kist"));
}

#[test]
fn per_relay_scheduler_overrides_the_default() {
    let text = edit("name = \"exit\"\n", "name = \"exit\"\nscheduler = { kind = \"ewma\", halflife = \"3 s\", tick = \"1 s\" }\n");
    let c = load(&text).unwrap();
    assert_eq!(c.relays[0].scheduler, SchedulerConfig::RoundRobin);
    assert_eq!(c.relays[1].scheduler, SchedulerConfig::Ewma { halflife: SimDuration::from_secs(3), tick: SimDuration::from_secs(1) });
    // The resolved TOML keeps the override.
    let again = load_str(&onionlab_config::to_toml(&c), &fixtures()).unwrap();
    assert_eq!(again, c);
    err_at(&edit("name = \"exit\"\n", "name = \"exit\"\nscheduler = \"kist2\"\n"), "relays[1].scheduler", &["unknown scheduler"]);
    let c = load(&edit("name = \"exit\"\n", "name = \"exit\"\nscheduler = { kind = \"kist\", run_interval = \"2 ms\" }\n")).unwrap();
    assert!(matches!(c.relays[1].scheduler, SchedulerConfig::Kist { run_interval, .. } if run_interval == SimDuration::from_millis(2)));
    err_at(
        &edit("name = \"exit\"\n", "name = \"exit\"\nscheduler = { kind = \"kist\", sock_buf_size_factor = -0.5 }\n"),
        "relays[1].scheduler.sock_buf_size_factor",
        &["at least 0"],
    );
}

#[test]
fn throttling() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    assert_eq!(load(MINIMAL).unwrap().mechanisms.throttling, ThrottlingConfig::None);
    let c = load(&with("throttling = { kind = \"flag\", flag_rate = \"20 KiB/s\", penalty = 0.25 }")).unwrap();
    let flag = ThrottlingConfig::Flag {
        flag_rate: 20 * 1024,
        penalty: 0.25,
        halflife: SimDuration::from_secs(30),
        burst: 2 << 20,
        freeze_penalty_at_flag: false,
        denominator: "all-or-connections",
        meta_ewma_tick_quirk: false,
        unthrottled: "paper",
    };
    assert_eq!(c.mechanisms.throttling, flag, "the paper's 2 MiB burst and the code's 30 s half-life by default");
    assert!(c.relays.iter().all(|r| r.throttling == flag));
    let again = load_str(&to_toml(&c), &fixtures()).unwrap();
    assert_eq!(again, c, "round trip through the resolved TOML");
    let c = load(&with(
        "throttling = { kind = \"threshold\", fraction = 0.1, refresh = \"30 s\", floor = \"20 KiB/s\", semantics = \"code\" }",
    ))
    .unwrap();
    assert!(matches!(c.mechanisms.throttling, ThrottlingConfig::Threshold { semantics: "code", throughput: "transferred", .. }));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    // The default measure is not written: configs resolved before the option are unchanged.
    assert!(!to_toml(&c).contains("throughput"));
    let thresh = |extra: &str| {
        with(&format!("throttling = {{ kind = \"threshold\", fraction = 0.1, refresh = \"30 s\", floor = \"20 KiB/s\"{extra} }}"))
    };
    let c = load(&thresh(", throughput = \"larger-direction\"")).unwrap();
    assert!(matches!(c.mechanisms.throttling, ThrottlingConfig::Threshold { semantics: "paper", throughput: "larger-direction", .. }));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    assert!(to_toml(&c).contains("throughput = \"larger-direction\""));
    err_at(&thresh(", throughput = \"sum\""), "mechanisms.throttling.throughput", &["\"sum\""]);
    err_at(&thresh(", throughput = \"larger-direction\", semantics = \"code\""), "mechanisms.throttling.throughput", &["paper\" only"]);
    // What lifting a throttle leaves: the code's bucket at BandwidthRate, written only when
    // asked for (resolved configs from before the option keep their text).
    assert!(!to_toml(&load(&thresh("")).unwrap()).contains("unthrottled"));
    let c = load(&thresh(", unthrottled = \"code\"")).unwrap();
    assert!(matches!(c.mechanisms.throttling, ThrottlingConfig::Threshold { unthrottled: "code", .. }));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    let e = err_at(&thresh(", unthrottled = \"infinite\""), "mechanisms.throttling.unthrottled", &["\"infinite\""]);
    assert!(hint(&e).contains("paper, code"), "{e}");
    let c = load(&with("throttling = { kind = \"flag\", flag_rate = \"20 KiB/s\", penalty = 0.25, unthrottled = \"code\" }")).unwrap();
    assert!(matches!(c.mechanisms.throttling, ThrottlingConfig::Flag { unthrottled: "code", .. }));
    // Static and bit-splitting never lift a throttle: the key is unknown there.
    err_at(
        &with("throttling = { kind = \"static\", rate = \"5 KiB/s\", unthrottled = \"code\" }"),
        "mechanisms.throttling.unthrottled",
        &[],
    );
    let c = load(&with("throttling = { kind = \"split\", denominator = \"client-connections\" }")).unwrap();
    assert_eq!(c.mechanisms.throttling, ThrottlingConfig::Split { burst: 2 << 20, denominator: "client-connections" });
    let c = load(&with("throttling = { kind = \"static\", rate = \"5 KiB/s\", burst = \"2 MiB\" }")).unwrap();
    assert_eq!(c.mechanisms.throttling, ThrottlingConfig::Static { rate: 5 * 1024, burst: 2 << 20 });
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);

    // Errors, each at its field.
    err_at(&with("throttling = \"flag\""), "mechanisms.throttling", &["needs its parameters"]);
    let e = err_at(&with("throttling = \"flagg\""), "mechanisms.throttling", &["unknown throttling"]);
    assert!(hint(&e).contains("flag"));
    err_at(&with("throttling = { kind = \"flag\", penalty = 0.5 }"), "mechanisms.throttling.flag_rate", &["missing"]);
    err_at(
        &with("throttling = { kind = \"flag\", flag_rate = \"20 KiB/s\", penalty = 1.5 }"),
        "mechanisms.throttling.penalty",
        &["between 0 and 1"],
    );
    err_at(
        &with("throttling = { kind = \"flag\", flag_rate = \"20 KiB/s\", penalty = 0.5, freeze_penalty_at_flag = \"yes\" }"),
        "mechanisms.throttling.freeze_penalty_at_flag",
        &["true or false"],
    );
    err_at(&with("throttling = { kind = \"split\", denominator = \"clients\" }"), "mechanisms.throttling.denominator", &["unknown value"]);
    err_at(&with("throttling = { kind = \"static\", rate = 50 }"), "mechanisms.throttling.rate", &["bare number"]);
    err_at(
        &with("throttling = { kind = \"static\", rate = \"5 KiB/s\", burst = \"0 B\" }"),
        "mechanisms.throttling.burst",
        &["at least 1 byte"],
    );
    err_at(
        &with("throttling = { kind = \"threshold\", fraction = 0.1, refresh = \"0 s\", floor = \"1 KiB/s\" }"),
        "mechanisms.throttling.refresh",
        &["longer than 0"],
    );
    err_at(
        &with("throttling = { kind = \"threshold\", fraction = 0.1, refresh = \"10 s\", floor = \"1 KiB/s\", semantics = \"mine\" }"),
        "mechanisms.throttling.semantics",
        &["unknown value"],
    );
    err_at(&with("throttling = { kind = \"static\", rate = \"5 KiB/s\", rat = 1 }"), "mechanisms.throttling.rat", &["unknown key"]);
    err_at(&with("throttling = { kind = \"bogus\" }"), "mechanisms.throttling.kind", &["unknown throttling"]);

    // Per relay: a guard may run its own algorithm (incremental deployment).
    let text = edit("name = \"guard\"\n", "name = \"guard\"\nthrottling = { kind = \"static\", rate = \"50 KiB/s\" }\n");
    let c = load(&text).unwrap();
    assert_eq!(c.relays[0].throttling, ThrottlingConfig::Static { rate: 50 * 1024, burst: 2 << 20 });
    assert_eq!(c.relays[1].throttling, ThrottlingConfig::None);
    err_at(&edit("name = \"guard\"\n", "name = \"guard\"\nthrottling = 5\n"), "relays[0].throttling", &["expected \"none\""]);
}

#[test]
fn connection_and_channel_metrics_intervals() {
    let c = load(&edit("duration = \"2 min\"", "duration = \"2 min\"\nconnection_metrics_interval = \"60 s\"")).unwrap();
    assert_eq!(c.experiment.connection_metrics_interval, Some(SimDuration::from_secs(60)));
    assert_eq!(load(MINIMAL).unwrap().experiment.connection_metrics_interval, None);
    err_at(
        &edit("duration = \"2 min\"", "duration = \"2 min\"\nconnection_metrics_interval = \"0 s\""),
        "experiment.connection_metrics_interval",
        &["longer than 0"],
    );
    let c = load(&edit("duration = \"2 min\"", "duration = \"2 min\"\nchannel_metrics_interval = \"10 s\"")).unwrap();
    assert_eq!(c.experiment.channel_metrics_interval, Some(SimDuration::from_secs(10)));
    assert_eq!(load(MINIMAL).unwrap().experiment.channel_metrics_interval, None);
    err_at(
        &edit("duration = \"2 min\"", "duration = \"2 min\"\nchannel_metrics_interval = \"often\""),
        "experiment.channel_metrics_interval",
        &["duration"],
    );
}

#[test]
fn tortoise_client_relays_and_computed_flags() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    let c = load(&with("tortoise = { rate = \"100 KBps\" }")).unwrap();
    let t = TortoiseConfig {
        rate: 100_000,
        burst: 100_000,
        directions: "both",
        check_interval: SimDuration::from_millis(100),
        limit_unit: "connection",
    };
    assert_eq!(c.mechanisms.tortoise, Some(t), "burst defaults to one second of rate");
    assert!(c.relays.iter().all(|r| r.tortoise == Some(t)));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    // Partial deployment: one relay opts out.
    let text = with("tortoise = { rate = \"200 KBps\", burst = \"400 KB\", directions = \"write\" }").replacen(
        "name = \"guard\"\n",
        "name = \"guard\"\ntortoise = \"off\"\n",
        1,
    );
    let c = load(&text).unwrap();
    assert_eq!(c.relays[0].tortoise, None);
    assert_eq!(c.relays[1].tortoise.unwrap().directions, "write");
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "the opt-out survives the round trip");

    err_at(&with("tortoise = { }"), "mechanisms.tortoise.rate", &["missing"]);
    err_at(&with("tortoise = { rate = \"100 KBps\", directions = \"up\" }"), "mechanisms.tortoise.directions", &["unknown value"]);
    // The unit of limiting (spec 1.2): the connection by default, not written out then
    // (configs of earlier runs read the same); the circuit on request, and survives the
    // round trip.
    assert!(!to_toml(&c).contains("limit_unit"), "the default unit is not written out");
    let c = load(&with("tortoise = { rate = \"100 KBps\", limit_unit = \"circuit\" }")).unwrap();
    assert_eq!(c.mechanisms.tortoise.unwrap().limit_unit, "circuit");
    assert!(c.relays.iter().all(|r| r.tortoise.unwrap().limit_unit == "circuit"));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "the circuit unit survives the round trip");
    err_at(&with("tortoise = { rate = \"100 KBps\", limit_unit = \"client\" }"), "mechanisms.tortoise.limit_unit", &["unknown value"]);
    err_at(&with("tortoise = { rate = \"100 KBps\", limit_unit = 2 }"), "mechanisms.tortoise.limit_unit", &[]);
    err_at(&with("tortoise = \"on\""), "mechanisms.tortoise", &["expected \"off\""]);
    // Both as defaults: one problem at [mechanisms], not one per relay (a network file's
    // relays were blamed for what an override set).
    let e = errors(&with("tortoise = { rate = \"100 KBps\" }\nthrottling = { kind = \"split\" }"));
    assert_eq!(e.0.len(), 1, "{e}");
    let n = load(MINIMAL).unwrap().relays.len();
    err_at(
        &with("tortoise = { rate = \"100 KBps\" }\nthrottling = { kind = \"split\" }"),
        "mechanisms",
        &["both apply", &format!("{n} relay(s)")],
    );
    // One relay's own Tortoise beside the default throttling: that relay.
    let own = with("throttling = { kind = \"split\" }").replacen(
        "name = \"guard\"\n",
        "name = \"guard\"\ntortoise = { rate = \"100 KBps\" }\n",
        1,
    );
    err_at(&own, "relays[0]", &["both guard throttling and Tortoise"]);

    // Client-relays.
    let text = edit("count = 20\n", "count = 20\nrelay_operators = { count = 2 }\n");
    let c = load(&text).unwrap();
    assert_eq!(c.clients[0].relay_operators, Some(RelayOperators { count: 2, exit: true, mtbf: None, entry: "bridge" }));
    let c = load(&edit("count = 20\n", "count = 20\nrelay_operators = { count = 2, entry = \"exempt\" }\n")).unwrap();
    assert_eq!(c.clients[0].relay_operators.unwrap().entry, "exempt");
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    err_at(
        &edit("count = 20\n", "count = 20\nrelay_operators = { count = 2, entry = \"guard\" }\n"),
        "clients[0].relay_operators.entry",
        &["unknown value"],
    );
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    err_at(&edit("count = 20\n", "count = 20\nrelay_operators = { count = 21 }\n"), "clients[0].relay_operators.count", &["only 20"]);
    err_at(
        &edit("count = 20\n", "count = 20\nrelay_operators = { count = 1, exit = 1 }\n"),
        "clients[0].relay_operators.exit",
        &["true or false"],
    );

    // Computed flags need every relay's MTBF.
    let text = edit("latency = { constant = \"20 ms\" }", "latency = { constant = \"20 ms\" }\ncompute_flags = true");
    let e = errors(&text);
    assert!(e.at("relays[0].mtbf").is_some() && e.at("relays[1].mtbf").is_some(), "{e}");
    let text = text
        .replace("name = \"guard\"\n", "name = \"guard\"\nmtbf = \"4 days\"\n")
        .replace("name = \"exit\"\n", "name = \"exit\"\nmtbf = \"1 day\"\n");
    let c = load(&text).unwrap();
    assert!(c.network.compute_flags);
    assert_eq!(c.relays[0].mtbf, Some(SimDuration::from_secs(4 * 86400)));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
}

#[test]
fn web_sessions() {
    let text = edit(
        "size = \"320 KiB\"",
        "size = \"320 KiB\"\nsession = { length = \"15 min\", pause = { dist = \"uniform\", min = \"9 min\", max = \"11 min\" } }",
    );
    let c = load(&text).unwrap();
    let Workload::Web { session: Some(s), .. } = &c.workloads["web"] else { panic!("no session") };
    assert_eq!(s.length, SimDuration::from_secs(900));
    assert_eq!(s.pause, TimeDist::Uniform { min: SimDuration::from_secs(540), max: SimDuration::from_secs(660) });
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    err_at(
        &edit("size = \"320 KiB\"", "size = \"320 KiB\"\nsession = { length = \"15 min\" }"),
        "workloads.web.session.pause",
        &["missing"],
    );
    err_at(
        &edit("size = \"320 KiB\"", "size = \"320 KiB\"\nsession = { length = \"0 s\", pause = \"1 min\" }"),
        "workloads.web.session.length",
        &["longer than 0"],
    );
}

const NET_EXPERIMENT: &str = r#"
network_file = "net/network.toml"

[experiment]
duration = "1 min"
"#;

#[test]
fn network_file_provides_the_whole_network() {
    let cfg = load(NET_EXPERIMENT).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.relays.len(), 2);
    assert_eq!(cfg.relays[0].location, 1);
    assert!(matches!(cfg.relays[0].scheduler, SchedulerConfig::Ewma { .. }));
    assert_eq!(cfg.relays[1].scheduler, SchedulerConfig::RoundRobin);
    assert_eq!(cfg.clients[0].count, 30);
    assert_eq!(cfg.servers.count, 3);
    assert_eq!(cfg.tor.circ_max_cell_queue, 2000);
    let LatencyConfig::Matrix { path, one_way } = &cfg.network.latency else { panic!("matrix expected") };
    assert_eq!(path, "net/latency.csv");
    assert_eq!(one_way[0][1], SimDuration::from_millis(10));
    let Some(BandwidthWeightsConfig::Given(w)) = &cfg.network.bandwidth_weights else { panic!("{:?}", cfg.network.bandwidth_weights) };
    assert_eq!(w["Wgg"], 9611);
    let Workload::Markov { stream_model, packet_model, packet_bytes, pause } = &cfg.workloads["markov"] else {
        panic!("markov workload expected")
    };
    assert_eq!(stream_model.states.len(), 3);
    assert_eq!(packet_model.states.len(), 27);
    assert_eq!(*packet_bytes, 1434);
    assert_eq!(*pause, TimeDist::Exponential { mean: SimDuration::from_secs(600) });
    // The round trip keeps the model paths.
    let text = to_toml(&cfg);
    assert!(text.contains("type = \"markov\"") && text.contains("stream_model.json"), "{text}");
}

#[test]
fn experiment_overrides_network_file_tor_network_and_workloads() {
    let text = format!(
        "{NET_EXPERIMENT}\n[tor]\ncirc_max_cell_queue = 1000\n[network]\nlatency = {{ constant = \"5 ms\" }}\n\
         [workloads.markov]\ntype = \"bulk\"\nsize = \"1 MiB\"\n"
    );
    let cfg = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.tor.circ_max_cell_queue, 1000);
    assert_eq!(cfg.network.latency, LatencyConfig::Constant { one_way: SimDuration::from_millis(5) });
    // bandwidth_weights still come from the file.
    assert!(cfg.network.bandwidth_weights.is_some());
    assert!(matches!(cfg.workloads["markov"], Workload::Bulk { .. }));
}

#[test]
fn network_file_errors_name_the_file_and_field() {
    err_at("network_file = \"net/none.toml\"\n[experiment]\nduration = \"1 min\"", "network_file", &["cannot read", "none.toml"]);
    let clash = format!("{NET_EXPERIMENT}\n[servers]\ncount = 2\n");
    let e = err_at(&clash, "network_file", &["servers", "both"]);
    assert!(hint(&e).contains("remove"));
    let clash = format!("{NET_EXPERIMENT}\n[[relays]]\nname = \"x\"\nbandwidth = \"1 MiB/s\"\n");
    err_at(&clash, "network_file", &["relays", "both"]);
    err_at("network_file = 3\n", "network_file", &["file name"]);
    let bad = "network_file = \"net/bad.toml\"\n[experiment]\nduration = \"1 min\"";
    err_at(bad, "network_file:experiment", &["not allowed"]);
    err_at(bad, "network_file:relays[0].bandwidth", &["bad rate"]);
    err_at(bad, "network_file:workloads.markov.stream_model", &["cannot read", "nope.json"]);
    // A stream model is not a packet model: it has no `-` observation.
    err_at(bad, "network_file:workloads.markov.packet_model", &["stream_model.json", "\"-\""]);
    // A network file's [mechanisms] holds the network's scheduler and nothing else.
    err_at(bad, "network_file:mechanisms.scheduler", &["unknown scheduler"]);
    let e = err_at(bad, "network_file:mechanisms.throttling", &["not allowed"]);
    assert!(hint(&e).contains("experiment"), "{e}");
}

fn kist_2ms() -> SchedulerConfig {
    SchedulerConfig::Kist {
        run_interval: SimDuration::from_millis(2),
        sock_buf_size_factor: 1.0,
        halflife: SimDuration::from_secs(30),
        tick: SimDuration::from_secs(10),
    }
}

#[test]
fn a_link_beside_both_directions_is_refused() {
    let both = edit("count = 20\n", "count = 20\nlink_up = \"10 Mbit\"\nlink_down = \"20 Mbit\"\n");
    let errs = load_with(&both, &["clients[web].link=1 Mbit"]).unwrap_err();
    assert!(errs.at("clients[0].link").is_some_and(|e| e.message.contains("changes nothing")), "{errs}");
    let relay = edit("name = \"exit\"\n", "name = \"exit\"\nlink = \"1 Gbit\"\nlink_up = \"1 Mbit\"\nlink_down = \"2 Mbit\"\n");
    err_at(&relay, "relays[1].link", &["changes nothing"]);
    // One direction of its own and `link` for the other is what `link` is for.
    let c = load_with(&edit("count = 20\n", "count = 20\nlink_up = \"10 Mbit\"\n"), &["clients[web].link=1 Mbit"]).unwrap();
    assert_eq!((c.clients[0].link_up, c.clients[0].link_down), (10_000_000, 1_000_000));
}

#[test]
fn perconn_on_a_relay_that_runs_throttling_or_tortoise_is_refused() {
    // The mechanism sets the same per-connection buckets; a run with both was the
    // mechanism's alone (a helper's dogfooding found it).
    let perconn = edit("name = \"guard\"\n", "name = \"guard\"\nperconn = { rate = \"20 KiB/s\", burst = \"100 KiB\" }\n");
    assert!(load(&perconn).unwrap().relays[0].perconn.is_some());
    for mechanism in ["throttling = { kind = \"static\", rate = \"1 MiB/s\" }", "tortoise = { rate = \"1 MBps\" }"] {
        let e = err_at(&format!("{perconn}\n[mechanisms]\n{mechanism}\n"), "relays[0].perconn", &["changes nothing"]);
        assert!(hint(&e).contains("static"), "{e}");
    }
    // On a relay that opts out of the mechanism, perconn is its limit.
    let opted_out = perconn.replacen("name = \"guard\"\n", "name = \"guard\"\nthrottling = \"none\"\n", 1);
    load(&format!("{opted_out}\n[mechanisms]\nthrottling = {{ kind = \"split\" }}\n")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sendme_windows_set_under_vegas_are_refused_where_they_change_nothing() {
    // MINIMAL with Vegas in its own [tor], as a resolved config writes it.
    let vegas = format!("{MINIMAL}\n[tor]\ncongestion_control = \"vegas\"\n");
    for field in ["tor.circ_window=500", "tor.circ_window_increment=50"] {
        let errs = load_with(&vegas, &[field]).unwrap_err();
        let path = field.split('=').next().unwrap();
        let e = errs.at(path).unwrap_or_else(|| panic!("{errs}"));
        assert!(e.message.contains("changes nothing") && hint(e).contains("fixed-window"), "{e}");
        // Tor's own windows: the setting is the experiment.
        assert_eq!(load_with(MINIMAL, &[field]).unwrap().tor.circ_window, if path == "tor.circ_window" { 500 } else { 1000 });
        // A sweep of the congestion control sets the windows for every point, Vegas's too.
        load_with(MINIMAL, &["tor.congestion_control=vegas", field]).unwrap_or_else(|e| panic!("{e}"));
    }
    // A file (or a resolved config) that writes the windows beside its own Vegas loads.
    let cfg = load(&vegas).unwrap();
    load(&to_toml(&cfg)).unwrap_or_else(|e| panic!("{e}"));
    load(&format!("{vegas}circ_window = 500\n")).unwrap_or_else(|e| panic!("{e}"));
    // The experiment's own [tor] over a network file's Vegas is refused.
    let net = "network_file = \"net/vegas.toml\"\n[experiment]\nduration = \"1 min\"\n";
    assert!(matches!(load(net).unwrap_or_else(|e| panic!("{e}")).tor.congestion_control, CongestionControlConfig::Vegas(_)));
    err_at(&format!("{net}[tor]\ncirc_window = 500\n"), "tor.circ_window", &["changes nothing"]);
    let cfg = load(&format!("{net}[tor]\ncongestion_control = \"fixed-window\"\ncirc_window = 500\n")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.tor.circ_window, 500);
}

#[test]
fn a_network_files_scheduler_is_the_default_the_experiment_may_replace() {
    let net = "network_file = \"net/scheduled.toml\"\n[experiment]\nduration = \"1 min\"\n";
    let cfg = load(net).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.mechanisms.scheduler, kist_2ms());
    assert!(cfg.relays.iter().all(|r| r.scheduler == kist_2ms()), "{:?}", cfg.relays);
    // The experiment's [mechanisms] wins, for every relay, and so does an override.
    let cfg = load(&format!("{net}[mechanisms]\nscheduler = \"ewma\"\n")).unwrap_or_else(|e| panic!("{e}"));
    let ewma = SchedulerConfig::Ewma { halflife: SimDuration::from_secs(30), tick: SimDuration::from_secs(10) };
    assert!(cfg.relays.iter().all(|r| r.scheduler == ewma), "{:?}", cfg.relays);
    let cfg = load_with(net, &["mechanisms.scheduler=round-robin"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == SchedulerConfig::RoundRobin), "{:?}", cfg.relays);
    // Other mechanisms sit beside the file's scheduler, also when an override replaces the
    // whole [mechanisms] table (a sweep of mechanisms side by side): it stands in for the
    // experiment's own table, which the file completes.
    let cfg = load_with(net, &["mechanisms.throttling.kind=split"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == kist_2ms() && r.throttling != ThrottlingConfig::None));
    let cfg = load_with(net, &["mechanisms={ throttling = { kind = \"split\" } }"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == kist_2ms() && r.throttling != ThrottlingConfig::None), "{:?}", cfg.relays);
    let cfg = load_with(net, &["mechanisms={ scheduler = \"ewma\" }"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == ewma));
    // A problem in what an override wrote is the command line's, not the file's, even
    // inside a table the file gave; the file's own values keep their label.
    let errs = load_with(net, &["mechanisms={ scheduler = \"kist2\" }"]).unwrap_err();
    assert!(errs.at("mechanisms.scheduler").is_some(), "{errs}");
    let errs = load_with(net, &["mechanisms.scheduler.run_interval=0 ms"]).unwrap_err();
    assert!(errs.at("mechanisms.scheduler.run_interval").is_some(), "{errs}");
    let errs = load_with(net, &["mechanisms.predictor={}"]).unwrap_err();
    let e = errs.at("network_file:mechanisms.scheduler").unwrap_or_else(|| panic!("{errs}"));
    assert!(hint(e).contains("round-robin"), "{e}");
}

#[test]
fn a_mechanisms_default_no_relay_follows_is_refused_where_it_was_set() {
    // Every relay of this (older) network file sets its own scheduler.
    let net = "network_file = \"net/per_relay_schedulers.toml\"\n[experiment]\nduration = \"1 min\"\n";
    let cfg = load(net).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == kist_2ms()));
    let errs = load_with(net, &["mechanisms.scheduler=ewma"]).unwrap_err();
    let e = errs.at("mechanisms.scheduler").unwrap_or_else(|| panic!("{errs}"));
    assert!(e.message.contains("changes nothing") && e.message.contains("every relay (2)"), "{e}");
    assert!(hint(e).contains("relays[*].scheduler") && hint(e).contains("generate"), "{e}");
    // A later override that replaces the whole table without the key leaves it unset.
    load_with(net, &["mechanisms.scheduler=ewma", "mechanisms={ throttling = { kind = \"split\" } }"]).unwrap_or_else(|e| panic!("{e}"));
    err_at(&format!("{net}[mechanisms]\nscheduler = \"ewma\"\n"), "mechanisms.scheduler", &["changes nothing"]);
    // A whole [mechanisms] table set by an override (a sweep of mechanisms side by side).
    let errs = load_with(net, &["mechanisms={ scheduler = \"ewma\" }"]).unwrap_err();
    assert!(errs.at("mechanisms").is_some_and(|e| e.message.contains("sets its own `scheduler`")), "{errs}");
    load_with(net, &["mechanisms={ throttling = { kind = \"split\" } }"]).unwrap_or_else(|e| panic!("{e}"));
    // So is a network file's relays_file whose relays all set their own.
    let via_file = "network_file = \"net/relays_file_schedulers.toml\"\n[experiment]\nduration = \"1 min\"\n\
                    [network]\nlatency = { constant = \"10 ms\" }\n\
                    [[clients]]\nname = \"web\"\nworkload = \"web\"\ncount = 1\n\
                    [workloads.web]\ntype = \"web\"\nsize = \"1 KiB\"\n";
    load(via_file).unwrap_or_else(|e| panic!("{e}"));
    err_at(&format!("{via_file}[mechanisms]\nscheduler = \"ewma\"\n"), "mechanisms.scheduler", &["changes nothing"]);
    // A network file whose own default no relay follows is not the experiment's doing.
    let both_in_file = "network_file = \"net/own_and_default.toml\"\n[experiment]\nduration = \"1 min\"\n";
    let cfg = load(both_in_file).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| r.scheduler == kist_2ms()));
    // And the experiment's own relays_file.
    let own_file = format!("relays_file = \"relays_with_schedulers.toml\"\n{}", no_relays());
    load(&own_file).unwrap_or_else(|e| panic!("{e}"));
    let e = err_at(&format!("{own_file}\n[mechanisms]\nscheduler = \"ewma\"\n"), "mechanisms.scheduler", &["changes nothing"]);
    // The hint does not send the user to relays[*], which cannot reach a relays_file.
    assert!(hint(&e).contains("relays_file") && !hint(&e).contains("relays[*]") && !hint(&e).contains("generate"), "{e}");
    // Setting the relays themselves does what was meant.
    let cfg = load_with(net, &["relays[*].scheduler=ewma"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.relays.iter().all(|r| matches!(r.scheduler, SchedulerConfig::Ewma { .. })));
    // Throttling and Tortoise defaults too, reported at the override's own path.
    let own = "name = \"exit\"\n";
    let both = edit("name = \"guard\"\n", "name = \"guard\"\nthrottling = \"none\"\n").replacen(
        own,
        "name = \"exit\"\nthrottling = \"none\"\n",
        1,
    );
    let errs = load_with(&both, &["mechanisms.throttling.kind=split"]).unwrap_err();
    assert!(
        errs.at("mechanisms.throttling.kind").is_some_and(|e| e.message.contains("every relay (2) sets its own `throttling`")),
        "{errs}"
    );
    let both =
        edit("name = \"guard\"\n", "name = \"guard\"\ntortoise = \"off\"\n").replacen(own, "name = \"exit\"\ntortoise = \"off\"\n", 1);
    let errs = load_with(&both, &["mechanisms.tortoise={ rate = \"100 KBps\" }"]).unwrap_err();
    assert!(errs.at("mechanisms.tortoise").is_some(), "{errs}");
    // Not refused: one relay follows the default; a file that sets every relay and the
    // default itself (a resolved config); client-operated relays, which follow the default.
    let one = edit("name = \"guard\"\n", "name = \"guard\"\nscheduler = \"kist\"\n");
    let cfg = load_with(&one, &["mechanisms.scheduler=ewma"]).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(cfg.relays[1].scheduler, SchedulerConfig::Ewma { .. }));
    let cfg = load_with(MINIMAL, &["mechanisms.scheduler=ewma"]).unwrap();
    load(&to_toml(&cfg)).unwrap_or_else(|e| panic!("a resolved config reloads: {e}"));
    let operators = both.replacen("count = 20\n", "count = 20\nrelay_operators = { count = 2 }\n", 1);
    load_with(&operators, &["mechanisms.tortoise={ rate = \"100 KBps\" }"]).unwrap_or_else(|e| panic!("{e}"));
    // ... if there are any: none operates a relay at count 0.
    let none = both.replacen("count = 20\n", "count = 20\nrelay_operators = { count = 0 }\n", 1);
    let errs = load_with(&none, &["mechanisms.tortoise={ rate = \"100 KBps\" }"]).unwrap_err();
    assert!(errs.at("mechanisms.tortoise").is_some(), "{errs}");
    // A resolved config's hint says why every relay has its own.
    let errs = load_with(&to_toml(&cfg), &["mechanisms.scheduler=kist"]).unwrap_err();
    assert!(
        errs.at("mechanisms.scheduler").is_some_and(|e| hint(e).contains("resolved config") && !hint(e).contains("generate")),
        "{errs}"
    );
}

#[test]
fn markov_workload_fields() {
    let m = |extra: &str| {
        edit(
            "type = \"web\"\nsize = \"320 KiB\"",
            &format!(
                "type = \"markov\"\nstream_model = \"../../../../data/traffic/stream_model.json\"\n\
                 packet_model = \"../../../../data/traffic/packet_model.json\"\n{extra}"
            ),
        )
    };
    let cfg = load(&m("packet_size = \"1 KiB\"\npause = \"20 s\"")).unwrap_or_else(|e| panic!("{e}"));
    let Workload::Markov { packet_bytes, pause, .. } = &cfg.workloads["web"] else { panic!() };
    assert_eq!((*packet_bytes, pause.clone()), (1024, TimeDist::Fixed { value: SimDuration::from_secs(20) }));
    err_at(&m("packet_size = \"0 B\""), "workloads.web.packet_size", &["at least 1 byte"]);
    err_at(&m("colour = 1"), "workloads.web.colour", &["unknown key"]);
    let missing = edit("type = \"web\"\nsize = \"320 KiB\"", "type = \"markov\"");
    err_at(&missing, "workloads.web.stream_model", &["missing"]);
    err_at(&missing, "workloads.web.packet_model", &["missing"]);
    err_at(&m("").replace("stream_model.json", "latency.csv_nope"), "workloads.web.stream_model", &["cannot read"]);
    let not_json = m("").replace("../../../../data/traffic/stream_model.json", "latency.csv");
    err_at(&not_json, "workloads.web.stream_model", &["latency.csv", "JSON"]);
}

#[test]
fn relay_names_must_not_be_client_or_server_host_names() {
    let e = err_at(&edit("name = \"exit\"", "name = \"server3\""), "relays[1].name", &["server3", "server"]);
    assert!(hint(&e).contains("rename"));
    err_at(&edit("name = \"exit\"", "name = \"web19\""), "relays[1].name", &["web19", "\"web\""]);
    // Outside the group's range, or not the canonical number, is fine.
    assert!(load(&edit("name = \"exit\"", "name = \"web20\"")).is_ok());
    assert!(load(&edit("name = \"exit\"", "name = \"web007\"")).is_ok());
    assert!(load(&edit("name = \"exit\"", "name = \"server10\"")).is_ok());
}

#[test]
fn braids_tickets_hpd_and_client_service_classes() {
    let with = |m: &str| format!("{}\n[mechanisms]\n{m}\n", MINIMAL.replacen("count = 20\n", "count = 20\nservice = \"low-latency\"\n", 1));
    let c = load(&with("scheduler = \"hpd\"\nbraids = { spending_interval = \"2 min\", free_period = \"20 s\" }")).unwrap();
    assert_eq!(c.clients[0].service, "low-latency");
    assert_eq!(c.mechanisms.scheduler, SchedulerConfig::Hpd { delay: [1.0, 2.0, 3.0], f: 0.5 }, "the spec's defaults");
    let b = c.mechanisms.braids.unwrap();
    assert_eq!((b.ticket_cells, b.free_tickets, b.tax, b.free_tickets_need_exchange), (256, 3, 0.0, false));
    assert_eq!(b.spending_interval, SimDuration::from_secs(120));
    assert_eq!(b.low_latency_window, b.spending_interval, "the window defaults to the spending interval");
    // The paper's low-latency threshold: a spending interval's free tickets (6 handouts x 3), in cells.
    assert_eq!(b.low_latency_limit, 6 * 3 * 256);
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "survives the round trip");
    // The paper's 24-hour interval by default: 432 tickets a day.
    let c = load(&with("scheduler = \"hpd\"\n[mechanisms.braids]")).unwrap();
    assert_eq!(c.mechanisms.braids.unwrap().low_latency_limit, 432 * 256);
    // No free tickets: the paper's threshold would shut the low-latency class; the config
    // must say what it wants instead.
    let e =
        err_at(&with("scheduler = \"hpd\"\nbraids = { free_tickets = 0 }"), "mechanisms.braids.low_latency_limit", &["free_tickets = 0"]);
    assert!(hint(&e).contains("110592"), "{e}");
    let c = load(&with("scheduler = \"hpd\"\nbraids = { free_tickets = 0, low_latency_limit = 5000 }")).unwrap();
    assert_eq!(c.mechanisms.braids.unwrap().low_latency_limit, 5000);
    let c = load(&with("scheduler = { kind = \"hpd\", delay = [1, 4, 8], f = 0 }\nbraids = { tax = 0.25, low_latency_limit = 1000, free_tickets_need_exchange = true }")).unwrap();
    assert_eq!(c.mechanisms.scheduler, SchedulerConfig::Hpd { delay: [1.0, 4.0, 8.0], f: 0.0 });
    let b = c.mechanisms.braids.unwrap();
    assert_eq!((b.tax, b.low_latency_limit, b.free_tickets_need_exchange), (0.25, 1000, true));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);

    // Bad input: each error names its field.
    err_at(
        &with("scheduler = { kind = \"hpd\", delay = [3, 2, 1] }\n[mechanisms.braids]"),
        "mechanisms.scheduler.delay",
        &["strictly increasing"],
    );
    // The paper's c1 < c2 < c3: equal parameters are refused too.
    for delay in ["[1, 1, 1]", "[1, 2, 2]", "[1, 1, 3]"] {
        err_at(
            &with(&format!("scheduler = {{ kind = \"hpd\", delay = {delay} }}\n[mechanisms.braids]")),
            "mechanisms.scheduler.delay",
            &["strictly increasing"],
        );
    }
    err_at(&with("scheduler = { kind = \"hpd\", delay = [1, 2] }\n[mechanisms.braids]"), "mechanisms.scheduler.delay", &["three numbers"]);
    err_at(&with("scheduler = { kind = \"hpd\", f = 2 }\n[mechanisms.braids]"), "mechanisms.scheduler.f", &["between 0 and 1"]);
    err_at(&with("scheduler = { kind = \"hpd\", c = 2 }\n[mechanisms.braids]"), "mechanisms.scheduler.c", &["unknown key"]);
    err_at(&with("scheduler = \"hpd\"\nbraids = { tax = 1.5 }"), "mechanisms.braids.tax", &["between 0 and 1"]);
    err_at(&with("scheduler = \"hpd\"\nbraids = { ticket_cells = 0 }"), "mechanisms.braids.ticket_cells", &[]);
    err_at(&with("scheduler = \"hpd\"\nbraids = { spending_interval = \"0 s\" }"), "mechanisms.braids.spending_interval", &[]);
    err_at(&with("scheduler = \"hpd\"\nbraids = { tickets = 3 }"), "mechanisms.braids.tickets", &["unknown key"]);
    err_at(&with("scheduler = \"hpd\"\nbraids = \"on\""), "mechanisms.braids", &["expected \"off\""]);
    err_at(&with("scheduler = \"ewma\"\n[mechanisms.braids]"), "mechanisms.braids", &["HPD"]);
    err_at(&with("scheduler = \"hpd\""), "clients[0].service", &["mechanisms.braids is off"]);
    err_at(&edit("count = 20\n", "count = 20\nservice = \"gold\"\n"), "clients[0].service", &["unknown value"]);
}

#[test]
fn predictor_parameters_defaults_and_conflicts() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    let c = load(&with("[mechanisms.predictor]")).unwrap();
    let p = c.mechanisms.predictor.unwrap();
    assert_eq!(p.dt, SimDuration::from_millis(40), "the authors' code's step");
    assert_eq!((p.horizon, p.s_max, p.capacity_fraction), (10, 100.0, 0.85));
    assert!((p.discount - 1.0 / 3.0).abs() < 1e-12, "the paper's d");
    assert_eq!(p.r_max, PredictorRMax::Network, "Theorem 1: at least the largest capacity");
    assert_eq!(p.slack_penalty, 1e5, "the authors' code");
    assert_eq!(p.successor_shift, 0, "(13) as the paper writes it");
    let c0 = load(&with("predictor = { successor_shift = 2 }")).unwrap();
    assert_eq!(c0.mechanisms.predictor.unwrap().successor_shift, 2);
    assert_eq!(load_str(&to_toml(&c0), &fixtures()).unwrap(), c0, "survives the round trip");
    err_at(&with("predictor = { successor_shift = 11 }"), "mechanisms.predictor.successor_shift", &["at most the horizon (10)"]);
    err_at(&with("predictor = { horizon = 3, successor_shift = 4 }"), "mechanisms.predictor.successor_shift", &["at most the horizon (3)"]);
    err_at(&with("predictor = { successor_shift = -1 }"), "mechanisms.predictor.successor_shift", &[]);
    for (text, want) in
        [("\"relay\"", PredictorRMax::Relay), ("2500", PredictorRMax::Cells(2500.0)), ("\"network\"", PredictorRMax::Network)]
    {
        let c = load(&with(&format!("predictor = {{ r_max = {text}, slack_penalty = 1000 }}"))).unwrap();
        assert_eq!((c.mechanisms.predictor.unwrap().r_max, c.mechanisms.predictor.unwrap().slack_penalty), (want, 1000.0));
        assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "survives the round trip");
    }
    err_at(&with("predictor = { r_max = \"own\" }"), "mechanisms.predictor.r_max", &["unknown value"]);
    err_at(&with("predictor = { r_max = 0 }"), "mechanisms.predictor.r_max", &["positive"]);
    err_at(&with("predictor = { slack_penalty = -1 }"), "mechanisms.predictor.slack_penalty", &["positive"]);
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "survives the round trip");
    let c = load(&with("predictor = { dt = \"10 ms\", horizon = 20, discount = 0.5, s_max = 50, capacity_fraction = 1 }")).unwrap();
    assert_eq!(c.mechanisms.predictor.unwrap().horizon, 20);
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c);
    assert_eq!(load(&with("predictor = \"off\"")).unwrap().mechanisms.predictor, None);

    err_at(&with("predictor = { dt = \"0 s\" }"), "mechanisms.predictor.dt", &[]);
    err_at(&with("predictor = { horizon = 0 }"), "mechanisms.predictor.horizon", &["between 1 and 100"]);
    err_at(&with("predictor = { discount = 1.5 }"), "mechanisms.predictor.discount", &["at most 1"]);
    err_at(&with("predictor = { capacity_fraction = 0 }"), "mechanisms.predictor.capacity_fraction", &["positive"]);
    err_at(&with("predictor = { s_max = -1 }"), "mechanisms.predictor.s_max", &["positive"]);
    err_at(&with("predictor = { horizn = 3 }"), "mechanisms.predictor.horizn", &["unknown key"]);
    let e = errors(&with("scheduler = \"ewma\"\npredictor = {}"));
    assert_eq!(e.0.len(), 1, "one error for the default, not one per relay: {e}");
    assert!(e.at("mechanisms.scheduler").is_some_and(|e| e.message.contains("PredicTor shapes each circuit")), "{e}");
    let text = with("predictor = {}").replacen("name = \"guard\"\n", "name = \"guard\"\nscheduler = \"kist\"\n", 1);
    let e = err_at(&text, "relays[0].scheduler", &["PredicTor"]);
    assert!(e.hint.as_deref().is_some_and(|h| h.contains("this relay's scheduler")), "the relay's own setting is the one to change: {e}");
    err_at(&with("throttling = { kind = \"split\" }\npredictor = {}"), "relays[0]", &["PredicTor"]);
}

#[test]
fn fixed_paths_name_existing_distinct_relays() {
    let with = |path: &str| edit("count = 20\n", &format!("count = 20\npath = {path}\n"));
    // MINIMAL has two relays; a third makes a path.
    let three = |path: &str| {
        with(path).replacen("[[clients]]", "[[relays]]\nname = \"middle\"\nbandwidth = \"1 MiB/s\"\nflags = [\"Fast\"]\n\n[[clients]]", 1)
    };
    let c = load(&three("[\"guard\", \"middle\", \"exit\"]")).unwrap();
    assert_eq!(c.clients[0].path.as_deref(), Some(&["guard".to_string(), "middle".into(), "exit".into()][..]));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "survives the round trip");
    err_at(&three("[\"guard\", \"midle\", \"exit\"]"), "clients[0].path[1]", &["no relay is named \"midle\""]);
    err_at(&three("[\"guard\", \"guard\", \"exit\"]"), "clients[0].path[1]", &["already on the path"]);
    err_at(&with("[\"guard\", \"exit\"]"), "clients[0].path", &["three relay names"]);
    err_at(&with("[\"guard\", 2, \"exit\"]"), "clients[0].path[1]", &[]);
}

fn load_with(text: &str, overrides: &[&str]) -> Result<ExperimentConfig, ConfigErrors> {
    let os: Vec<Override> = overrides.iter().map(|o| Override::parse(o).unwrap_or_else(|e| panic!("{o}: {e}"))).collect();
    parse_config_with(text, &fixtures(), "experiment", &os)
}

#[test]
fn overrides_are_validated_as_if_the_file_said_so() {
    let cfg = load_with(
        MINIMAL,
        &[
            "experiment.duration=30 s",
            "tor.circ_window=500",
            "clients[web].count=7",
            "relays[*].bandwidth=3 MiB/s",
            "mechanisms.scheduler=ewma",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.experiment.duration, SimDuration::from_secs(30));
    assert_eq!(cfg.tor.circ_window, 500);
    assert_eq!(cfg.clients[0].count, 7);
    assert!(cfg.relays.iter().all(|r| r.bandwidth_rate == 3 << 20));
    assert!(cfg.relays.iter().all(|r| matches!(r.scheduler, SchedulerConfig::Ewma { .. })));
    // The same config written out in full is the same config.
    let written = edit("duration = \"2 min\"", "duration = \"30 s\"")
        .replace("count = 20", "count = 7")
        .replace("bandwidth = \"2 MiB/s\"", "bandwidth = \"3 MiB/s\"")
        .replace("bandwidth = \"512 KiB/s\"", "bandwidth = \"3 MiB/s\"")
        + "\n[tor]\ncirc_window = 500\n[mechanisms]\nscheduler = \"ewma\"\n";
    assert_eq!(to_toml(&cfg), to_toml(&load(&written).unwrap_or_else(|e| panic!("{e}"))));
}

#[test]
fn a_bad_override_value_is_reported_at_its_field_with_the_rest() {
    let errs = load_with(MINIMAL, &["tor.circ_window=-5", "experiment.duration=soon", "clients[bulk].count=1"]).unwrap_err();
    // The override that cannot be followed comes first, then validation's own problems.
    assert_eq!(errs.0[0].path, "clients[bulk].count");
    assert!(errs.0[0].message.contains("no element named \"bulk\""), "{errs}");
    assert!(errs.at("tor.circ_window").is_some(), "{errs}");
    assert!(errs.at("experiment.duration").is_some(), "{errs}");
    let errs = load_with(MINIMAL, &["tor.circ_windw=500"]).unwrap_err();
    let e = errs.at("tor.circ_windw").unwrap_or_else(|| panic!("{errs}"));
    assert!(e.message.contains("unknown key") && hint(e).contains("circ_window"), "{e}");
}

#[test]
fn overrides_reach_a_network_files_content_and_their_problems_are_not_the_files() {
    let cfg = load_with(NET_EXPERIMENT, &["clients[0].count=3", "tor.circ_max_cell_queue=900"]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.clients[0].count, 3);
    assert_eq!(cfg.tor.circ_max_cell_queue, 900);
    let errs = load_with(NET_EXPERIMENT, &["tor.circ_max_cell_queue=none"]).unwrap_err();
    assert!(errs.at("tor.circ_max_cell_queue").is_some(), "{errs}");
}

#[test]
fn a_group_may_start_later_over_its_own_spread() {
    let with = |lines: &str| edit("count = 20\n", &format!("count = 20\n{lines}\n"));
    let c = load(MINIMAL).unwrap();
    assert_eq!((c.clients[0].start, c.clients[0].start_spread), (SimDuration::ZERO, None), "defaults");
    let c = load(&with("start = \"90 s\"\nstart_spread = \"5 s\"")).unwrap();
    assert_eq!(c.clients[0].start, SimDuration::from_secs(90));
    assert_eq!(c.clients[0].start_spread, Some(SimDuration::from_secs(5)));
    assert_eq!(load_str(&to_toml(&c), &fixtures()).unwrap(), c, "survives the round trip");
    // MINIMAL runs for 2 minutes.
    let e = err_at(&with("start = \"2 min\""), "clients[0].start", &["must be before the end of the run", "2 min"]);
    assert!(hint(&e).contains("never act"), "{e}");
    err_at(&with("start = \"soon\""), "clients[0].start", &["bad duration"]);
    err_at(&with("start_spread = \"0 s\""), "clients[0].start_spread", &["longer than 0"]);
    err_at(&with("start = 5"), "clients[0].start", &[]);
}

// ---- boundaries, defaults and unit conversions pinned by hand-applied mutants ----

#[test]
fn documented_workload_defaults_are_exact() {
    // docs/config.md: log-normal think time with median 5 s and sigma 1.25.
    let c = load(MINIMAL).unwrap();
    let Workload::Web { think, .. } = &c.workloads["web"] else { panic!() };
    assert_eq!(*think, TimeDist::LogNormal { median: SimDuration::from_secs(5), sigma: 1.25 });
    // onionperf's 50 KiB / 1 MiB / 5 MiB (binary units) with weights 12:2:1.
    let perf = |extra: &str| format!("{MINIMAL}\n[workloads.p]\ntype = \"perf\"\npause = \"1 min\"\n{extra}");
    let c = load(&perf("")).unwrap();
    let Workload::Perf { size, .. } = &c.workloads["p"] else { panic!() };
    assert_eq!(*size, SizeDist::Choice { sizes: vec![51_200, 1_048_576, 5_242_880], weights: vec![12.0, 2.0, 1.0] });
    // A given size replaces the default.
    let c = load(&perf("size = \"1 MB\"")).unwrap();
    assert_eq!(
        c.workloads["p"],
        Workload::Perf { size: SizeDist::Fixed { bytes: 1_000_000 }, pause: TimeDist::Fixed { value: SimDuration::from_secs(60) } }
    );
}

#[test]
fn token_bucket_rates_round_bits_down_to_whole_bytes() {
    let bw = |rate: &str| edit("bandwidth = \"2 MiB/s\"", &format!("bandwidth = \"{rate}\""));
    // 7 bit/s is less than one byte/s; 8 bit/s is exactly one.
    err_at(&bw("7 bit"), "relays[0].bandwidth", &["at least 1 byte/s"]);
    assert_eq!(load(&bw("8 bit")).unwrap().relays[0].bandwidth_rate, 1);
    assert_eq!(load(&bw("15 bit")).unwrap().relays[0].bandwidth_rate, 1);
    assert_eq!(load(&bw("100 Mbit")).unwrap().relays[0].bandwidth_rate, 12_500_000);
    assert_eq!(load(&bw("100 KB/s")).unwrap().relays[0].bandwidth_rate, 100_000);
    assert_eq!(load(&bw("100 KiB/s")).unwrap().relays[0].bandwidth_rate, 102_400);
}

#[test]
fn uniform_distributions_may_be_degenerate() {
    // Only min > max is an error: min == max is a fixed value written as a range.
    let c = load(&edit(
        "size = \"320 KiB\"",
        "size = { dist = \"uniform\", min = \"1 KiB\", max = \"1 KiB\" }\nthink = { dist = \"uniform\", min = \"3 s\", max = \"3 s\" }",
    ))
    .unwrap();
    let Workload::Web { size, think, .. } = &c.workloads["web"] else { panic!() };
    assert_eq!(*size, SizeDist::Uniform { min: 1024, max: 1024 });
    assert_eq!(*think, TimeDist::Uniform { min: SimDuration::from_secs(3), max: SimDuration::from_secs(3) });
}

#[test]
fn an_empirical_cdf_may_jump_and_stay_flat() {
    // Non-decreasing, not increasing: repeated seconds (an atom) and repeated probabilities
    // (a stretch with no mass) are both allowed.
    let c = load(&edit("size = \"320 KiB\"", "size = \"320 KiB\"\nthink = { dist = \"empirical\", file = \"think_steps.csv\" }")).unwrap();
    let Workload::Web { think: TimeDist::Empirical { points, .. }, .. } = &c.workloads["web"] else { panic!() };
    assert_eq!(*points, vec![(0.0, 0.0), (2.0, 0.5), (2.0, 0.7), (10.0, 0.7), (20.0, 1.0)]);
}

#[test]
fn an_ewma_tick_may_span_exactly_512_half_lives() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    load(&with("scheduler = { kind = \"ewma\", halflife = \"1 s\", tick = \"512 s\" }")).expect("512 half-lives is the bound");
    err_at(
        &with("scheduler = { kind = \"ewma\", halflife = \"1 s\", tick = \"513 s\" }"),
        "mechanisms.scheduler.halflife",
        &["at least tick / 512"],
    );
}

#[test]
fn relays_come_from_one_place_even_across_a_network_file() {
    // The network file gives [[relays]] and the experiment a relays_file.
    let e = err_at(&format!("relays_file = \"relays.toml\"\n{NET_EXPERIMENT}"), "network_file", &["`relays_file` is given both"]);
    assert!(hint(&e).contains("remove"), "{e}");
}

#[test]
fn an_experiment_key_that_extends_a_network_file_key_is_the_experiments() {
    // The network file gives tor.circ_max_cell_queue; a typo'd key in the experiment that
    // merely starts with that name is the experiment's problem, not the file's.
    let errs = errors(&format!("{NET_EXPERIMENT}\n[tor]\ncirc_max_cell_queue_x = 1\n"));
    assert!(errs.at("tor.circ_max_cell_queue_x").is_some(), "{errs}");
}

#[test]
fn a_network_files_relays_file_resolves_against_the_network_file() {
    // net/relays_only.toml says relays_file = "../relays.toml": the fixtures' relays.toml.
    let text = "network_file = \"net/relays_only.toml\"\n[experiment]\nduration = \"1 min\"\n\
                [network]\nlatency = { constant = \"10 ms\" }\n\
                [[clients]]\nname = \"web\"\nworkload = \"web\"\ncount = 1\n\
                [workloads.web]\ntype = \"web\"\nsize = \"1 KiB\"\n";
    let c = load(text).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = c.relays.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["fileguard", "fileexit"]);
}

#[test]
fn documented_inclusive_upper_bounds_are_allowed() {
    let with = |m: &str| format!("{MINIMAL}\n[mechanisms]\n{m}\n");
    // PredicTor's horizon: between 1 and 100.
    assert_eq!(load(&with("predictor = { horizon = 100 }")).unwrap().mechanisms.predictor.unwrap().horizon, 100);
    err_at(&with("predictor = { horizon = 101 }"), "mechanisms.predictor.horizon", &["between 1 and 100"]);
    // BRAIDS's tax: between 0 and 1.
    let braids = |b: &str| {
        format!(
            "{}\n[mechanisms]\nscheduler = \"hpd\"\nbraids = {b}\n",
            MINIMAL.replacen("count = 20\n", "count = 20\nservice = \"low-latency\"\n", 1)
        )
    };
    assert_eq!(load(&braids("{ tax = 1 }")).unwrap().mechanisms.braids.unwrap().tax, 1.0);
    // A spending interval that is not a whole number of free periods still gets its last
    // handout: 25 min / 10 min rounds up to 3 handouts of 3 tickets of 256 cells.
    let c = load(&braids("{ spending_interval = \"25 min\", free_period = \"10 min\" }")).unwrap();
    assert_eq!(c.mechanisms.braids.unwrap().low_latency_limit, 3 * 3 * 256);
    // tor's ranges are inclusive: cbtmaxopencircs 0..=14, cc_sendme_inc 1..=255.
    let tor = |t: &str| format!("{MINIMAL}\n[tor]\n{t}\n");
    let c = load(&tor("predicted_circuits = true\ncbt_learning = { max_clean = 14 }")).unwrap();
    assert_eq!(c.tor.cbt_learning.unwrap().max_clean, 14);
    let c = load(&tor("congestion_control = { kind = \"vegas\", sendme_inc = 255 }")).unwrap();
    assert!(matches!(c.tor.congestion_control, CongestionControlConfig::Vegas(v) if v.sendme_inc == 255));
    err_at(&tor("congestion_control = { kind = \"vegas\", sendme_inc = 256 }"), "tor.congestion_control.sendme_inc", &["1..=255"]);
    // Every client of a group may run a relay.
    let c = load(&edit("count = 20\n", "count = 20\nrelay_operators = { count = 20 }\n")).unwrap();
    assert_eq!(c.clients[0].relay_operators.unwrap().count, 20);
}

#[test]
fn a_fixed_time_may_be_zero() {
    // Unlike a mean, median or scale, a fixed think time or pause may be 0 s (back to back).
    let c = load(&edit("size = \"320 KiB\"", "size = \"320 KiB\"\nthink = \"0 s\"")).unwrap();
    let Workload::Web { think, .. } = &c.workloads["web"] else { panic!() };
    assert_eq!(*think, TimeDist::Fixed { value: SimDuration::ZERO });
    let c = load(&format!("{MINIMAL}\n[workloads.p]\ntype = \"perf\"\npause = {{ dist = \"fixed\", value = \"0 s\" }}\n")).unwrap();
    let Workload::Perf { pause, .. } = &c.workloads["p"] else { panic!() };
    assert_eq!(*pause, TimeDist::Fixed { value: SimDuration::ZERO });
}
