//! Property tests: random valid configs (random counts, sizes, rates and durations written
//! in random units) load to exactly the values they describe and survive `to_toml`; random
//! junk in any field is reported, never a panic.

use std::path::Path;

use onionlab_config::model::*;
use onionlab_config::{load_str, to_toml};
use onionlab_core::SimDuration;
use proptest::prelude::*;
use proptest::sample::select;

/// A duration of `n` in a random unit, and its value.
fn duration(n: std::ops::Range<u64>) -> impl Strategy<Value = (String, SimDuration)> {
    let units =
        vec![("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("min", 60_000_000_000), ("h", 3_600_000_000_000)];
    (n, select(units)).prop_map(|(v, (u, ns))| (format!("{v} {u}"), SimDuration::from_nanos(v * ns)))
}

/// Whole seconds written in a random unit (so that bounds such as warmup < duration hold).
fn seconds(n: std::ops::Range<u64>) -> impl Strategy<Value = (String, SimDuration)> {
    (n, 0..5u8, 0..10u64).prop_map(|(s, form, tenth)| {
        let d = SimDuration::from_secs(s);
        match form {
            0 => (format!("{s} s"), d),
            1 => (format!("{} ms", s * 1000), d),
            2 => (format!("{} us", s * 1_000_000), d),
            3 if s % 60 == 0 => (format!("{} min", s / 60), d),
            // A decimal: s.t seconds.
            _ => (format!("{s}.{tenth}s"), SimDuration::from_millis(s * 1000 + tenth * 100)),
        }
    })
}

fn size() -> impl Strategy<Value = (String, u64)> {
    let units = vec![("B", 1u64), ("KB", 1_000), ("KiB", 1024), ("MB", 1_000_000), ("MiB", 1 << 20)];
    (1..100_000u64, select(units), any::<bool>()).prop_map(|(v, (u, m), space)| (format!("{v}{}{u}", if space { " " } else { "" }), v * m))
}

/// A relay rate: the string and bytes/s.
fn byte_rate() -> impl Strategy<Value = (String, u64)> {
    let units = vec![("KiB/s", 1024u64 * 8), ("MiB/s", 8 << 20), ("Mbit", 1_000_000), ("KBps", 8_000), ("Gbit", 1_000_000_000)];
    (1..5_000u64, select(units)).prop_map(|(v, (u, bits))| (format!("{v} {u}"), v * bits / 8))
}

/// A link rate: the string and bits/s.
fn link() -> impl Strategy<Value = (String, u64)> {
    let units = vec![("Mbit", 1_000_000u64), ("Gbit", 1_000_000_000), ("Kbit", 1_000), ("MiB/s", 8 << 20), ("Mbps", 1_000_000)];
    (1..2_000u64, select(units)).prop_map(|(v, (u, bits))| (format!("{v} {u}"), v * bits))
}

#[derive(Debug, Clone)]
struct GenRelay {
    rate: (String, u64),
    burst: Option<(String, u64)>,
    link: Option<(String, u64)>,
    flags: Vec<&'static str>,
    weight: Option<u64>,
    location: u32,
}

fn relay() -> impl Strategy<Value = GenRelay> {
    let flags = proptest::sample::subsequence(vec!["Exit", "Fast", "Guard", "HSDir", "Stable", "Valid"], 0..4);
    (byte_rate(), proptest::option::of(size()), proptest::option::of(link()), flags, proptest::option::of(0..100_000u64), 0..4u32)
        .prop_map(|(rate, burst, link, flags, weight, location)| GenRelay { rate, burst, link, flags, weight, location })
}

#[derive(Debug, Clone)]
struct GenClient {
    workload: usize,
    count: u32,
    up: Option<(String, u64)>,
    placement: Option<Placement>,
}

#[derive(Debug, Clone)]
struct Gen {
    duration_min: u64,
    duration: (String, SimDuration),
    warmup: (String, SimDuration),
    seeds: Vec<u64>,
    refill: (String, SimDuration),
    window: u64,
    increment: u64,
    relays: Vec<GenRelay>,
    clients: Vec<GenClient>,
    servers: u32,
    web_size: (String, u64),
    think: (String, SimDuration),
    bulk_size: (String, u64),
    pause: (String, SimDuration),
    latency: (String, SimDuration),
}

fn placement() -> impl Strategy<Value = Placement> {
    prop_oneof![
        (0..8u32).prop_map(Placement::At),
        Just(Placement::RoundRobin),
        proptest::collection::vec(0..8u32, 1..4).prop_map(Placement::Cycle),
    ]
}

fn config() -> impl Strategy<Value = Gen> {
    let client = (0..3usize, 1..10_000u32, proptest::option::of(link()), proptest::option::of(placement()))
        .prop_map(|(workload, count, up, placement)| GenClient { workload, count, up, placement });
    (
        (2..200u64, 0..5u8).prop_map(|(m, form)| match form {
            0 => (m, format!("{} s", m * 60)),
            1 => (m, format!("{} ms", m * 60_000)),
            2 => (m, format!("{m}min")),
            _ => (m, format!("{m} min")),
        }),
        seconds(0..120),
        proptest::collection::btree_set(0..1_000_000u64, 1..5),
        duration(1..2_000),
        (1..3000u64).prop_flat_map(|w| (Just(w), 1..=w)),
        proptest::collection::vec(relay(), 0..6),
        proptest::collection::vec(client, 1..5),
        1..1000u32,
        (size(), duration(1..100_000), size(), duration(1..100_000), duration(0..1_000)),
    )
        .prop_map(|((m, dstr), warmup, seeds, refill, (window, increment), relays, clients, servers, (ws, th, bs, pa, lat))| Gen {
            duration_min: m,
            duration: (dstr, SimDuration::from_secs(m * 60)),
            warmup,
            seeds: seeds.into_iter().collect(),
            refill,
            window,
            increment,
            relays,
            clients,
            servers,
            web_size: ws,
            think: th,
            bulk_size: bs,
            pause: pa,
            latency: lat,
        })
}

const WORKLOADS: [&str; 3] = ["web", "bulk", "perf"];

/// The relays of a generated config: a fixed guard and exit first, so the set is valid.
fn all_relays(g: &Gen) -> Vec<GenRelay> {
    let fixed = |flags: Vec<&'static str>| GenRelay {
        rate: ("1 MiB/s".into(), 1 << 20),
        burst: None,
        link: None,
        flags,
        weight: None,
        location: 0,
    };
    let mut v = vec![fixed(vec!["Guard", "Fast"]), fixed(vec!["Exit", "Fast"])];
    v.extend(g.relays.iter().cloned());
    v
}

fn render(g: &Gen) -> String {
    let mut s = String::new();
    s += &format!("[experiment]\nname = \"prop\"\nduration = \"{}\"\nwarmup = \"{}\"\nseeds = {:?}\n\n", g.duration.0, g.warmup.0, g.seeds);
    s += &format!("[tor]\nrefill_interval = \"{}\"\ncirc_window = {}\ncirc_window_increment = {}\n\n", g.refill.0, g.window, g.increment);
    s += &format!("[network]\nlatency = {{ constant = \"{}\" }}\n\n", g.latency.0);
    for (i, r) in all_relays(g).iter().enumerate() {
        s += &format!("[[relays]]\nname = \"r{i}\"\nbandwidth = \"{}\"\nflags = {:?}\nlocation = {}\n", r.rate.0, r.flags, r.location);
        if let Some(b) = &r.burst {
            s += &format!("burst = \"{}\"\n", b.0);
        }
        if let Some(l) = &r.link {
            s += &format!("link = \"{}\"\n", l.0);
        }
        if let Some(w) = r.weight {
            s += &format!("consensus_weight = {w}\n");
        }
        s += "\n";
    }
    for (i, c) in g.clients.iter().enumerate() {
        s += &format!("[[clients]]\nname = \"c{i}\"\nworkload = \"{}\"\ncount = {}\n", WORKLOADS[c.workload], c.count);
        if let Some(u) = &c.up {
            s += &format!("link_up = \"{}\"\n", u.0);
        }
        match &c.placement {
            Some(Placement::At(l)) => s += &format!("placement = {l}\n"),
            Some(Placement::RoundRobin) => s += "placement = \"round_robin\"\n",
            Some(Placement::Cycle(ls)) => s += &format!("placement = {ls:?}\n"),
            None => {}
        }
        s += "\n";
    }
    s += &format!("[servers]\ncount = {}\n\n", g.servers);
    s += &format!("[workloads.web]\ntype = \"web\"\nsize = \"{}\"\nthink = \"{}\"\n\n", g.web_size.0, g.think.0);
    s += &format!("[workloads.bulk]\ntype = \"bulk\"\nsize = \"{}\"\n\n", g.bulk_size.0);
    s += &format!("[workloads.perf]\ntype = \"perf\"\npause = {{ dist = \"exponential\", mean = \"{}\" }}\n", g.pause.0);
    s
}

fn check(g: &Gen, c: &ExperimentConfig) -> Result<(), TestCaseError> {
    prop_assert_eq!(c.experiment.duration, g.duration.1);
    prop_assert_eq!(c.experiment.warmup, g.warmup.1);
    prop_assert_eq!(&c.experiment.seeds, &g.seeds);
    prop_assert_eq!(c.tor.refill_interval, g.refill.1);
    prop_assert_eq!((c.tor.circ_window, c.tor.circ_window_increment), (g.window, g.increment));
    prop_assert_eq!(&c.network.latency, &LatencyConfig::Constant { one_way: g.latency.1 });
    let relays = all_relays(g);
    prop_assert_eq!(c.relays.len(), relays.len());
    for (r, gr) in c.relays.iter().zip(&relays) {
        prop_assert_eq!(r.bandwidth_rate, gr.rate.1);
        prop_assert_eq!(r.bandwidth_burst, gr.burst.as_ref().map_or(gr.rate.1, |b| b.1));
        let link = gr.link.as_ref().map_or((gr.rate.1 * 16).max(10_000_000), |l| l.1);
        prop_assert_eq!((r.link_up, r.link_down), (link, link));
        prop_assert_eq!(&r.flags, &gr.flags.iter().map(|f| f.to_string()).collect::<Vec<_>>());
        prop_assert_eq!(r.consensus_weight, gr.weight.unwrap_or((gr.rate.1 / 1024).max(1)));
        prop_assert_eq!(r.location, gr.location);
    }
    prop_assert_eq!(c.clients.len(), g.clients.len());
    for (cl, gc) in c.clients.iter().zip(&g.clients) {
        prop_assert_eq!(cl.workload.as_str(), WORKLOADS[gc.workload]);
        prop_assert_eq!(cl.count, gc.count);
        prop_assert_eq!(cl.link_up, gc.up.as_ref().map_or(10_000_000, |u| u.1));
        prop_assert_eq!(cl.link_down, 20_000_000);
        let want = gc.placement.clone().unwrap_or(Placement::At(0));
        prop_assert_eq!(&cl.placement, &want);
    }
    prop_assert_eq!(c.servers.count, g.servers);
    prop_assert_eq!(
        &c.workloads["web"],
        &Workload::Web { size: SizeDist::Fixed { bytes: g.web_size.1 }, think: TimeDist::Fixed { value: g.think.1 }, session: None }
    );
    prop_assert_eq!(&c.workloads["bulk"], &Workload::Bulk { size: SizeDist::Fixed { bytes: g.bulk_size.1 } });
    prop_assert_eq!(
        &c.workloads["perf"],
        &Workload::Perf { size: onionlab_config::parse::default_perf_sizes(), pause: TimeDist::Exponential { mean: g.pause.1 } }
    );
    Ok(())
}

/// A few valid configs, for the fuzzing tests to break.
const BASE: &str = r#"
[experiment]
duration = "@duration@"
warmup = "@warmup@"
seeds = [@seed@]

[network]
latency = { constant = "@latency@" }

[[relays]]
name = "guard"
bandwidth = "@bandwidth@"
burst = "@burst@"
link = "@link@"
flags = ["Guard", "Fast", "@flag@"]
location = @location@

[[relays]]
name = "exit"
bandwidth = "512 KiB/s"
flags = ["Exit", "Fast"]

[[clients]]
name = "web"
workload = "@workload@"
count = @count@
placement = @placement@

[workloads.web]
type = "web"
size = "@size@"
think = { dist = "@dist@", median = "@median@", sigma = @sigma@ }
"#;

const SLOTS: &[(&str, &str)] = &[
    ("\"@duration@\"", "\"2 min\""),
    ("\"@warmup@\"", "\"1 s\""),
    ("@seed@", "1"),
    ("\"@latency@\"", "\"20 ms\""),
    ("\"@bandwidth@\"", "\"2 MiB/s\""),
    ("\"@burst@\"", "\"4 MiB\""),
    ("\"@link@\"", "\"100 Mbit\""),
    ("\"@flag@\"", "\"Stable\""),
    ("@location@", "0"),
    ("\"@workload@\"", "\"web\""),
    ("@count@", "3"),
    ("@placement@", "\"round_robin\""),
    ("\"@size@\"", "\"320 KiB\""),
    ("\"@dist@\"", "\"lognormal\""),
    ("\"@median@\"", "\"5 s\""),
    ("@sigma@", "1.25"),
];

/// BASE with slot `k` holding `value` and the others their valid defaults.
fn base_with(k: usize, value: &str) -> String {
    let mut s = BASE.to_string();
    for (i, (slot, default)) in SLOTS.iter().enumerate() {
        s = s.replace(slot, if i == k { value } else { default });
    }
    s
}

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,24}".prop_map(|s| toml::Value::String(s).to_string()),
        "[0-9 .]{0,6}[a-zA-Z/µ]{0,6}".prop_map(|s| toml::Value::String(s).to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|x| toml::Value::Float(x).to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("[1, \"a\", 2.5]".to_string()),
        Just("{ a = 1 }".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_configs_load_exactly(g in config()) {
        let text = render(&g);
        let c = load_str(&text, Path::new(".")).map_err(|e| TestCaseError::fail(format!("{e}\n---\n{text}")))?;
        prop_assert!(g.duration_min >= 2);
        check(&g, &c)?;
        let again = load_str(&to_toml(&c), Path::new(".")).map_err(|e| TestCaseError::fail(format!("{e}\n---\n{}", to_toml(&c))))?;
        prop_assert_eq!(&again, &c);
    }

    #[test]
    fn durations_round_trip_through_format((_, d) in duration(0..1_000_000)) {
        prop_assert_eq!(onionlab_core::units::parse_duration(&onionlab_config::format_duration(d)), Ok(d));
    }

    #[test]
    fn any_nanos_round_trip_through_format(ns in 0..(1u64 << 52)) {
        let d = SimDuration::from_nanos(ns);
        prop_assert_eq!(onionlab_core::units::parse_duration(&onionlab_config::format_duration(d)), Ok(d));
    }

    #[test]
    fn sizes_and_rates_round_trip_through_format(n in 0..(1u64 << 50)) {
        use onionlab_core::units::{parse_bandwidth, parse_size};
        prop_assert_eq!(parse_size(&onionlab_config::format_size(n)), Ok(n));
        prop_assert_eq!(parse_bandwidth(&onionlab_config::format_bits(n)), Ok(n));
        prop_assert_eq!(parse_bandwidth(&onionlab_config::format_byte_rate(n)), Ok(n * 8));
    }

    #[test]
    fn junk_in_any_field_is_reported_not_a_panic(k in 0..SLOTS.len(), v in toml_value()) {
        let text = base_with(k, &v);
        match load_str(&text, Path::new(".")) {
            Ok(c) => {
                // Whatever was accepted must render and load back identically.
                prop_assert_eq!(load_str(&to_toml(&c), Path::new(".")).ok(), Some(c));
            }
            Err(errs) => {
                prop_assert!(!errs.is_empty());
                for e in &errs.0 {
                    prop_assert!(!e.message.is_empty());
                }
                let _ = errs.to_string();
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "(?s).{0,300}") {
        let _ = load_str(&s, Path::new("."));
    }

    #[test]
    fn corrupted_valid_config_never_panics(pos in 0..BASE.len(), junk in ".{0,8}") {
        let good = base_with(usize::MAX, "");
        let pos = pos.min(good.len());
        if good.is_char_boundary(pos) {
            let text = format!("{}{}{}", &good[..pos], junk, &good[pos..]);
            let _ = load_str(&text, Path::new(".")).map(|c| to_toml(&c));
        }
    }
}

#[test]
fn base_config_is_valid() {
    let text = base_with(usize::MAX, "");
    load_str(&text, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
}
