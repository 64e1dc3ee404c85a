//! # onionlab-config
//!
//! Experiment configuration: TOML text -> raw TOML tree -> validated [`ExperimentConfig`]
//! (the schema and the rules are in `docs/config.md`).
//!
//! **Owns:** reading config files and the files they name, unit conversion, defaults,
//! validation with every problem reported at once ([`ConfigErrors`], each with a field path
//! such as `relays[3].bandwidth` and a hint), and rendering a resolved config back to TOML
//! ([`to_toml`], for `onionlab show-config`).
//! **Must not touch:** the simulation. Nothing here builds hosts, relays or events; the
//! validated [`model`] is all the rest of onionlab sees.
//!
//! ```no_run
//! let cfg = onionlab_config::load_file(std::path::Path::new("examples/tiny.toml"))
//!     .map_err(|errs| eprintln!("{errs}"));
//! ```

// `u64::is_multiple_of` is newer than the workspace's rust-version (1.80).
#![allow(unknown_lints, clippy::manual_is_multiple_of)]

pub mod include;
pub mod markov;
pub mod model;
pub mod overrides;
pub mod parse;

use std::collections::BTreeMap;
use std::path::Path;

use onionlab_core::SimDuration;
use serde::Serialize;

pub use model::ExperimentConfig;
pub use overrides::Override;
pub use parse::{ConfigError, ConfigErrors};

use model::*;

/// Parses and validates a config given as text. Relative file names (latency matrix, GML,
/// empirical CDFs, `relays_file`) resolve against `base_dir`. The experiment is named
/// `"experiment"` unless `experiment.name` says otherwise.
pub fn load_str(text: &str, base_dir: &Path) -> Result<ExperimentConfig, ConfigErrors> {
    parse::parse_config(text, base_dir, "experiment")
}

/// Reads, parses and validates the config file at `path`. Relative file names resolve
/// against the file's directory; the experiment name defaults to the file stem.
pub fn load_file(path: &Path) -> Result<ExperimentConfig, ConfigErrors> {
    load_file_with(path, &[])
}

/// [`load_file`] with `overrides` ([`Override`], `PATH=VALUE`) written into the file's
/// tree, in order, before validation: the config is checked as if the file said so.
pub fn load_file_with(path: &Path, overrides: &[Override]) -> Result<ExperimentConfig, ConfigErrors> {
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::new("", format!("cannot read config file {}: {e}", path.display())))?;
    let base_dir = path.parent().unwrap_or(Path::new(""));
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "experiment".into());
    parse::parse_config_with(&text, base_dir, &name, overrides)
}

const NS_PER: [(u64, &str); 5] = [(60_000_000_000, "min"), (1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us"), (1, "ns")];

/// A human duration string that `parse_duration` reads back exactly: an integer in the
/// largest unit that divides it ("10 min", "100 ms", "250 us"), or decimal seconds when
/// that is shorter and exact ("1.5 s" rather than "1500 ms").
pub fn format_duration(d: SimDuration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0 s".to_string();
    }
    let (div, unit) = NS_PER.iter().copied().find(|(div, _)| ns % div == 0).unwrap_or((1, "ns"));
    let integer = format!("{} {unit}", ns / div);
    // Decimal seconds, at most three decimals (whole milliseconds), for e.g. 1.5 s.
    if ns > 1_000_000_000 && ns % 1_000_000 == 0 && div < 1_000_000_000 {
        let frac = format!("{:03}", (ns % 1_000_000_000) / 1_000_000);
        let decimal = format!("{}.{} s", ns / 1_000_000_000, frac.trim_end_matches('0'));
        if decimal.len() <= integer.len() {
            return decimal;
        }
    }
    integer
}

const BINARY_BYTES: [(u64, &str); 5] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B")];
const DECIMAL_BYTES: [(u64, &str); 5] = [(1_000_000_000_000, "TB"), (1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "KB"), (1, "B")];
const DECIMAL_BITS: [(u64, &str); 4] = [(1_000_000_000, "Gbit"), (1_000_000, "Mbit"), (1_000, "Kbit"), (1, "bit")];

/// `n` as an integer in the largest unit of `units` that divides it exactly.
fn in_units(n: u64, units: &[(u64, &str)], suffix: &str) -> String {
    // Zero is divisible by everything; write it in the smallest unit.
    let fits = |&(div, _): &(u64, &str)| n != 0 && n % div == 0;
    let (div, unit) = units.iter().copied().find(fits).or(units.last().copied()).unwrap_or((1, ""));
    format!("{} {unit}{suffix}", n / div)
}

/// The shortest of `candidates`; the first wins ties (it is the field's natural unit).
fn shortest(candidates: impl IntoIterator<Item = String>) -> String {
    candidates.into_iter().fold(String::new(), |best, c| if best.is_empty() || c.len() < best.len() { c } else { best })
}

/// Bytes as an exact string, in binary or decimal units, whichever is shorter
/// ("320 KiB", "87 KB", "500 B").
pub fn format_size(bytes: u64) -> String {
    shortest([in_units(bytes, &BINARY_BYTES, ""), in_units(bytes, &DECIMAL_BYTES, "")])
}

/// A token-bucket rate in bytes/s as an exact string ("5 MiB/s", or "100 Mbit" when the
/// rate was given in bits).
pub fn format_byte_rate(bytes_per_sec: u64) -> String {
    let mut c = vec![in_units(bytes_per_sec, &BINARY_BYTES, "/s"), in_units(bytes_per_sec, &DECIMAL_BYTES, "/s")];
    if let Some(bits) = bytes_per_sec.checked_mul(8) {
        c.push(in_units(bits, &DECIMAL_BITS, ""));
    }
    shortest(c)
}

/// A link rate in bits/s as an exact string ("20 Mbit", or "3 MiB/s" for a link derived
/// from a relay's binary-unit rate).
pub fn format_bits(bits_per_sec: u64) -> String {
    let mut c = vec![in_units(bits_per_sec, &DECIMAL_BITS, "")];
    if bits_per_sec % 8 == 0 {
        c.push(in_units(bits_per_sec / 8, &BINARY_BYTES, "/s"));
        c.push(in_units(bits_per_sec / 8, &DECIMAL_BYTES, "/s"));
    }
    shortest(c)
}

/// Renders a resolved config as TOML in the input schema of `docs/config.md`: every default
/// filled in, every quantity an exact unit string, file contents referred to by file name.
/// Loading the result (from the same base directory) gives back an equal config.
///
/// This goes through mirror structs rather than `model`'s own `Serialize`, whose shape
/// (numbers in base units, `kind`/`dist` tags) is not loadable: bare numbers are errors.
pub fn to_toml(cfg: &ExperimentConfig) -> String {
    match toml::to_string(&Doc::from(cfg)) {
        Ok(s) => s,
        // Unreachable for a validated config (all integers fit in i64); keep it non-fatal.
        Err(e) => format!("# cannot render the config as TOML: {e}\n"),
    }
}

#[derive(Serialize)]
struct Doc<'a> {
    experiment: DocExperiment<'a>,
    tor: DocTor,
    network: DocNetwork<'a>,
    relays: Vec<DocRelay<'a>>,
    clients: Vec<DocClient<'a>>,
    servers: DocServers,
    workloads: BTreeMap<&'a str, DocWorkload<'a>>,
    mechanisms: &'a Mechanisms,
}

#[derive(Serialize)]
struct DocExperiment<'a> {
    name: &'a str,
    duration: String,
    warmup: String,
    seeds: &'a [u64],
    metrics_interval: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    connection_metrics_interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel_metrics_interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    circuit_metrics_interval: Option<String>,
    wire_waits: bool,
}

/// `tor.congestion_control` as written back: a name, or the Vegas table in full.
#[derive(Serialize)]
#[serde(untagged)]
enum DocCongestionControl {
    Name(&'static str),
    Vegas {
        kind: &'static str,
        #[serde(flatten)]
        params: VegasConfig,
    },
}

/// `idle_channel_timeout`: one duration (or "never"), or per-class ranges.
#[derive(Serialize)]
#[serde(untagged)]
enum DocIdleTimeout {
    One(String),
    Classes { client: Vec<String>, relay: Vec<String> },
}

fn doc_range(r: (onionlab_core::SimDuration, onionlab_core::SimDuration)) -> Vec<String> {
    vec![format_duration(r.0), format_duration(r.1)]
}

/// `cbt_learning = false`, or the table with both parameters spelled out.
#[derive(Serialize)]
#[serde(untagged)]
enum DocCbtLearning {
    Off(bool),
    On { test_frequency: String, max_clean: u32 },
}

#[derive(Serialize)]
struct DocTor {
    refill_interval: String,
    // Written only when random, so that resolved configs made before it match.
    #[serde(skip_serializing_if = "Option::is_none")]
    refill_phase: Option<&'static str>,
    link_handshake_rtts: u32,
    max_circuit_dirtiness: String,
    idle_channel_timeout: DocIdleTimeout,
    predicted_circuits: bool,
    cbt_learning: DocCbtLearning,
    circuit_idle_timeout: String,
    circ_max_cell_queue: u64,
    num_entry_guards: u32,
    use_entry_guards: bool,
    // `path_order` is always written: its default changed (guard-first to exit-first,
    // 2026-11-28), so a resolved config made before then, which has no such line and ran
    // guard-first, must not match a new one (`--reuse-runs` matches resolved configs byte
    // for byte). The other path keys are written only where they differ from their
    // defaults, so that resolved configs made before them are otherwise unchanged.
    path_order: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_primary_guards: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    distinct_guard_subnets: Option<bool>,
    channel_per_circuit: bool,
    request_size: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    optimistic_data: Option<bool>,
    circ_window: u64,
    circ_window_increment: u64,
    congestion_control: DocCongestionControl,
    #[serde(skip_serializing_if = "Option::is_none")]
    cellq_high: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cellq_low: Option<u64>,
    sndbuf: String,
    rcvbuf: String,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum DocLatency<'a> {
    Constant(String),
    Matrix(&'a str),
    Gml(&'a str),
}

#[derive(Serialize)]
struct DocNetwork<'a> {
    latency: DocLatency<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth_weights: Option<&'a BandwidthWeightsConfig>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    compute_flags: bool,
}

#[derive(Serialize)]
struct DocPerconn {
    rate: String,
    burst: String,
}

#[derive(Serialize)]
struct DocRelay<'a> {
    name: &'a str,
    bandwidth: String,
    burst: String,
    link_up: String,
    link_down: String,
    flags: &'a [String],
    consensus_weight: u64,
    location: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    perconn: Option<DocPerconn>,
    scheduler: &'a SchedulerConfig,
    throttling: &'a ThrottlingConfig,
    tortoise: DocTortoise<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtbf: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<String>,
}

/// A relay's Tortoise setting: "off" or its table.
#[derive(Serialize)]
#[serde(untagged)]
enum DocTortoise<'a> {
    Off(&'static str),
    On(&'a TortoiseConfig),
}

impl<'a> From<&'a Option<TortoiseConfig>> for DocTortoise<'a> {
    fn from(t: &'a Option<TortoiseConfig>) -> Self {
        match t {
            None => DocTortoise::Off("off"),
            Some(t) => DocTortoise::On(t),
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum DocPlacement {
    Named(&'static str),
    At(u32),
    Cycle(Vec<u32>),
}

#[derive(Serialize)]
struct DocClient<'a> {
    name: &'a str,
    workload: &'a str,
    count: u32,
    link_up: String,
    link_down: String,
    placement: DocPlacement,
    #[serde(skip_serializing_if = "Option::is_none")]
    relay_operators: Option<&'a RelayOperators>,
    /// BRAIDS's class; omitted when "normal" (the default, and no BRAIDS needed).
    #[serde(skip_serializing_if = "is_normal_service")]
    service: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a Vec<String>>,
    /// Omitted for groups that start with the run (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_spread: Option<String>,
}

fn is_normal_service(s: &&'static str) -> bool {
    *s == "normal"
}

#[derive(Serialize)]
struct DocServers {
    count: u32,
    link_up: String,
    link_down: String,
    placement: DocPlacement,
}

#[derive(Serialize)]
#[serde(untagged)]
enum DocSize {
    Fixed(String),
    Uniform { dist: &'static str, min: String, max: String },
    Choice { dist: &'static str, sizes: Vec<String>, weights: Vec<f64> },
}

#[derive(Serialize)]
#[serde(untagged)]
enum DocTime<'a> {
    Fixed(String),
    Uniform { dist: &'static str, min: String, max: String },
    Exponential { dist: &'static str, mean: String },
    LogNormal { dist: &'static str, median: String, sigma: f64 },
    Pareto { dist: &'static str, scale: String, alpha: f64 },
    Empirical { dist: &'static str, file: &'a str },
}

#[derive(Serialize)]
struct DocWorkload<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<DocSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<DocTime<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause: Option<DocTime<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<DocSession<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    packet_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    packet_size: Option<String>,
}

#[derive(Serialize)]
struct DocSession<'a> {
    length: String,
    pause: DocTime<'a>,
}

fn doc_placement(p: &Placement) -> DocPlacement {
    match p {
        Placement::At(l) => DocPlacement::At(*l),
        Placement::RoundRobin => DocPlacement::Named("round_robin"),
        Placement::Cycle(l) => DocPlacement::Cycle(l.clone()),
    }
}

fn doc_size(s: &SizeDist) -> DocSize {
    match s {
        SizeDist::Fixed { bytes } => DocSize::Fixed(format_size(*bytes)),
        SizeDist::Uniform { min, max } => DocSize::Uniform { dist: "uniform", min: format_size(*min), max: format_size(*max) },
        SizeDist::Choice { sizes, weights } => {
            DocSize::Choice { dist: "choice", sizes: sizes.iter().map(|b| format_size(*b)).collect(), weights: weights.clone() }
        }
    }
}

fn doc_time(t: &TimeDist) -> DocTime<'_> {
    let f = |d: &SimDuration| format_duration(*d);
    match t {
        TimeDist::Fixed { value } => DocTime::Fixed(f(value)),
        TimeDist::Uniform { min, max } => DocTime::Uniform { dist: "uniform", min: f(min), max: f(max) },
        TimeDist::Exponential { mean } => DocTime::Exponential { dist: "exponential", mean: f(mean) },
        TimeDist::LogNormal { median, sigma } => DocTime::LogNormal { dist: "lognormal", median: f(median), sigma: *sigma },
        TimeDist::Pareto { scale, alpha } => DocTime::Pareto { dist: "pareto", scale: f(scale), alpha: *alpha },
        TimeDist::Empirical { path, .. } => DocTime::Empirical { dist: "empirical", file: path },
    }
}

impl<'a> From<&'a ExperimentConfig> for Doc<'a> {
    fn from(c: &'a ExperimentConfig) -> Self {
        let e = &c.experiment;
        let t = &c.tor;
        Doc {
            experiment: DocExperiment {
                name: &e.name,
                duration: format_duration(e.duration),
                warmup: format_duration(e.warmup),
                seeds: &e.seeds,
                metrics_interval: format_duration(e.metrics_interval),
                connection_metrics_interval: e.connection_metrics_interval.map(format_duration),
                channel_metrics_interval: e.channel_metrics_interval.map(format_duration),
                circuit_metrics_interval: e.circuit_metrics_interval.map(format_duration),
                wire_waits: e.wire_waits,
            },
            tor: DocTor {
                refill_interval: format_duration(t.refill_interval),
                refill_phase: (t.refill_phase != RefillPhaseConfig::Aligned).then(|| t.refill_phase.name()),
                link_handshake_rtts: t.link_handshake_rtts,
                max_circuit_dirtiness: format_duration(t.max_circuit_dirtiness),
                idle_channel_timeout: match t.idle_channel_timeout {
                    None => DocIdleTimeout::One("never".to_string()),
                    Some(c) => match c.as_fixed() {
                        Some(d) => DocIdleTimeout::One(format_duration(d)),
                        None => DocIdleTimeout::Classes { client: doc_range(c.client), relay: doc_range(c.relay) },
                    },
                },
                predicted_circuits: t.predicted_circuits,
                cbt_learning: match t.cbt_learning {
                    None => DocCbtLearning::Off(false),
                    Some(c) => DocCbtLearning::On { test_frequency: format_duration(c.test_frequency), max_clean: c.max_clean },
                },
                circuit_idle_timeout: format_duration(t.circuit_idle_timeout),
                circ_max_cell_queue: t.circ_max_cell_queue,
                num_entry_guards: t.num_entry_guards,
                use_entry_guards: t.use_entry_guards,
                path_order: t.path_order.name(),
                num_primary_guards: (t.num_primary_guards != default_num_primary_guards(t.num_entry_guards))
                    .then_some(t.num_primary_guards),
                distinct_guard_subnets: (!t.distinct_guard_subnets).then_some(false),
                channel_per_circuit: t.channel_per_circuit,
                request_size: format_size(t.request_bytes),
                optimistic_data: (!t.optimistic_data).then_some(false),
                circ_window: t.circ_window,
                circ_window_increment: t.circ_window_increment,
                congestion_control: match t.congestion_control {
                    CongestionControlConfig::FixedWindow => DocCongestionControl::Name("fixed-window"),
                    CongestionControlConfig::Vegas(v) => DocCongestionControl::Vegas { kind: "vegas", params: v },
                },
                cellq_high: t.cell_queue_watermarks.map(|w| w.0),
                cellq_low: t.cell_queue_watermarks.map(|w| w.1),
                sndbuf: format_size(t.sndbuf_bytes),
                rcvbuf: format_size(t.rcvbuf_bytes),
            },
            network: DocNetwork {
                latency: match &c.network.latency {
                    LatencyConfig::Constant { one_way } => DocLatency::Constant(format_duration(*one_way)),
                    LatencyConfig::Matrix { path, .. } => DocLatency::Matrix(path),
                    LatencyConfig::Gml { path, .. } => DocLatency::Gml(path),
                },
                bandwidth_weights: c.network.bandwidth_weights.as_ref(),
                compute_flags: c.network.compute_flags,
            },
            relays: c
                .relays
                .iter()
                .map(|r| DocRelay {
                    name: &r.name,
                    bandwidth: format_byte_rate(r.bandwidth_rate),
                    burst: format_size(r.bandwidth_burst),
                    link_up: format_bits(r.link_up),
                    link_down: format_bits(r.link_down),
                    flags: &r.flags,
                    consensus_weight: r.consensus_weight,
                    location: r.location,
                    perconn: r.perconn.map(|(rate, burst)| DocPerconn { rate: format_byte_rate(rate), burst: format_size(burst) }),
                    scheduler: &r.scheduler,
                    throttling: &r.throttling,
                    tortoise: DocTortoise::from(&r.tortoise),
                    mtbf: r.mtbf.map(format_duration),
                    address: r.address.map(|a| a.to_string()),
                })
                .collect(),
            clients: c
                .clients
                .iter()
                .map(|g| DocClient {
                    name: &g.name,
                    workload: &g.workload,
                    count: g.count,
                    link_up: format_bits(g.link_up),
                    link_down: format_bits(g.link_down),
                    placement: doc_placement(&g.placement),
                    relay_operators: g.relay_operators.as_ref(),
                    service: g.service,
                    path: g.path.as_ref(),
                    start: (g.start > SimDuration::ZERO).then(|| format_duration(g.start)),
                    start_spread: g.start_spread.map(format_duration),
                })
                .collect(),
            servers: DocServers {
                count: c.servers.count,
                link_up: format_bits(c.servers.link_up),
                link_down: format_bits(c.servers.link_down),
                placement: doc_placement(&c.servers.placement),
            },
            workloads: c
                .workloads
                .iter()
                .map(|(name, w)| {
                    let base = DocWorkload {
                        kind: "web",
                        size: None,
                        think: None,
                        pause: None,
                        session: None,
                        stream_model: None,
                        packet_model: None,
                        packet_size: None,
                    };
                    let dw = match w {
                        Workload::Web { size, think, session } => DocWorkload {
                            size: Some(doc_size(size)),
                            think: Some(doc_time(think)),
                            session: session.as_ref().map(|s| DocSession { length: format_duration(s.length), pause: doc_time(&s.pause) }),
                            ..base
                        },
                        Workload::Bulk { size } => DocWorkload { kind: "bulk", size: Some(doc_size(size)), ..base },
                        Workload::Perf { size, pause } => {
                            DocWorkload { kind: "perf", size: Some(doc_size(size)), pause: Some(doc_time(pause)), ..base }
                        }
                        Workload::Markov { stream_model, packet_model, packet_bytes, pause } => DocWorkload {
                            kind: "markov",
                            pause: Some(doc_time(pause)),
                            stream_model: Some(&stream_model.path),
                            packet_model: Some(&packet_model.path),
                            packet_size: Some(format_size(*packet_bytes)),
                            ..base
                        },
                    };
                    (name.as_str(), dw)
                })
                .collect(),
            mechanisms: &c.mechanisms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_strings() {
        assert_eq!(format_duration(SimDuration::from_millis(100)), "100 ms");
        assert_eq!(format_duration(SimDuration::from_secs(600)), "10 min");
        assert_eq!(format_duration(SimDuration::from_millis(1500)), "1.5 s");
        assert_eq!(format_duration(SimDuration::from_micros(250)), "250 us");
        assert_eq!(format_duration(SimDuration::from_secs(90)), "90 s");
        assert_eq!(format_duration(SimDuration::ZERO), "0 s");
        assert_eq!(format_duration(SimDuration::from_nanos(7)), "7 ns");
    }

    #[test]
    fn size_and_rate_strings() {
        assert_eq!(format_size(320 * 1024), "320 KiB");
        assert_eq!(format_size(500), "500 B");
        assert_eq!(format_byte_rate(5 << 20), "5 MiB/s");
        assert_eq!(format_bits(20_000_000), "20 Mbit");
        assert_eq!(format_bits(1_000_000_000), "1 Gbit");
        assert_eq!(format_bits(1_500), "1500 bit");
        assert_eq!(format_bits(25_165_824), "3 MiB/s");
        assert_eq!(format_bits(0), "0 bit");
        assert_eq!(format_byte_rate(12_500_000), "100 Mbit");
        assert_eq!(format_byte_rate(1536 * 1024), "1536 KiB/s");
        assert_eq!(format_size(87_000), "87 KB");
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(u64::MAX), format!("{} B", u64::MAX));
    }
}
