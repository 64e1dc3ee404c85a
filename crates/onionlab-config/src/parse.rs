//! Parsing and validation: TOML text -> [`toml::Table`] -> validated [`ExperimentConfig`].
//!
//! **Owns:** walking the raw TOML tree, applying the defaults and rules of `docs/config.md`,
//! reading the files a config names (latency matrix, GML, empirical CDFs, relays file), and
//! collecting *every* problem as a [`ConfigError`] with its field path and a hint.
//! **Must not touch:** the simulation, and the shape of the validated types (that is
//! [`crate::model`]).
//!
//! We walk `toml::Table` by hand rather than deserialising into structs with
//! `deny_unknown_fields`: serde stops at the first problem, while `onionlab check` must report
//! all of them, each at its exact path. Invalid values are replaced by placeholders so that
//! validation can go on; any recorded error makes the whole result an `Err`, so placeholders
//! never escape.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use onionlab_core::units::{parse_bandwidth, parse_duration, parse_size};
use onionlab_core::SimDuration;
use toml::{Table, Value};

use crate::model::*;
use crate::{format_duration, format_size};

/// One problem in a config, at a field path such as `relays[3].bandwidth`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Field path (`experiment.duration`, `clients[1].workload`,
    /// `relays_file:relays[0].flags[2]`); empty for problems with the whole file.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when we can tell.
    pub hint: Option<String>,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into(), hint: None }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "{}: {}", self.path, self.message)?;
        }
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a config, in the order the file was walked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The problem at exactly `path`, if any (handy in tests and tools).
    pub fn at(&self, path: &str) -> Option<&ConfigError> {
        self.0.iter().find(|e| e.path == path)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(f, "{n} problem{} in the config:", if n == 1 { "" } else { "s" })?;
        for e in &self.0 {
            write!(f, "\n{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Consensus flags a relay may carry.
pub const KNOWN_FLAGS: &[&str] = &["Authority", "BadExit", "Exit", "Fast", "Guard", "HSDir", "Running", "Stable", "V2Dir", "Valid"];
/// Circuit schedulers the simulator implements.
pub const SCHEDULERS: &[&str] = &["round-robin", "ewma", "ewma-exact", "kist", "kist-lite", "hpd"];
/// BRAIDS's service classes, as client groups name them.
pub const SERVICE_CLASSES: &[&str] = &["low-latency", "high-throughput", "normal"];
/// Tor's CircuitPriorityHalflife default (circuitmux_ewma.c), and its decay tick.
const EWMA_HALFLIFE: SimDuration = SimDuration::from_secs(30);
const EWMA_TICK: SimDuration = SimDuration::from_secs(10);
/// Guard throttling algorithms (the throttling paper), and `N` choices for the split.
pub const THROTTLINGS: &[&str] = &["none", "static", "split", "flag", "threshold"];
pub const SPLIT_DENOMINATORS: &[&str] = &["all-or-connections", "client-connections", "active-client-connections"];
/// The paper's constant PerConnBWBurst (footnote 3) and the authors' code's EWMA half-life.
const THROTTLE_BURST: u64 = 2 << 20;
const THROTTLE_HALFLIFE: SimDuration = SimDuration::from_secs(30);
const THROTTLING_EXAMPLE: &str = "throttling = { kind = \"flag\", flag_rate = \"20 KiB/s\", penalty = 0.25 }";
/// Tor's KISTSchedRunInterval default and its allowed maximum (1..100 ms; 0 disables KIST).
const KIST_RUN_INTERVAL: SimDuration = SimDuration::from_millis(10);
/// Linux's floors on a socket's buffers (`SOCK_MIN_SNDBUF`, `SOCK_MIN_RCVBUF`: 2 x (2048 +
/// sizeof(sk_buff)) and 2048 + sizeof(sk_buff), bytes): `setsockopt` never goes below them.
/// Smaller buffers are not only unreal but make a run take an event per few bytes (a 2-byte
/// send buffer turned a 3-second run into six billion events).
pub const MIN_SNDBUF: u64 = 4608;
pub const MIN_RCVBUF: u64 = 2304;
const KIST_RUN_INTERVAL_MAX: SimDuration = SimDuration::from_millis(100);
/// Most EWMA half-lives one tick may span (see `Ctx::ewma_ticks_fit`).
const EWMA_MAX_HALFLIVES_PER_TICK: u64 = 512;
const SCHEDULER_EXAMPLE: &str =
    "scheduler = \"round-robin\", \"ewma\", \"kist\", { kind = \"ewma\", halflife = \"30 s\", tick = \"10 s\" } or { kind = \"kist\", run_interval = \"10 ms\", sock_buf_size_factor = 1.0 }";
/// Bandwidth weights a consensus line must give (dir-spec section 3.8.3), and their scale
/// (10000 = weight 1; each weight is at most that).
const REQUIRED_BANDWIDTH_WEIGHTS: &[&str] = &["Wgg", "Wgm", "Wgd", "Wmg", "Wmm", "Wme", "Wmd", "Weg", "Wem", "Wee", "Wed"];
const BANDWIDTH_WEIGHT_SCALE: u64 = 10_000;
/// Consensus bandwidth-weight names (dir-spec section 3.8.3).
pub const BANDWIDTH_WEIGHTS: &[&str] =
    &["Wbd", "Wbe", "Wbg", "Wbm", "Wdb", "Web", "Wed", "Wee", "Weg", "Wem", "Wgb", "Wgd", "Wgg", "Wgm", "Wmb", "Wmd", "Wme", "Wmg", "Wmm"];

const TOP_KEYS: &[&str] =
    &["experiment", "tor", "network", "relays", "relays_file", "clients", "servers", "workloads", "mechanisms", "network_file"];
const EXPERIMENT_KEYS: &[&str] = &[
    "name",
    "duration",
    "warmup",
    "seeds",
    "metrics_interval",
    "connection_metrics_interval",
    "channel_metrics_interval",
    "circuit_metrics_interval",
    "wire_waits",
];
const TOR_KEYS: &[&str] = &[
    "refill_interval",
    "refill_phase",
    "link_handshake_rtts",
    "max_circuit_dirtiness",
    "idle_channel_timeout",
    "predicted_circuits",
    "cbt_learning",
    "circuit_idle_timeout",
    "circ_max_cell_queue",
    "num_entry_guards",
    "use_entry_guards",
    "path_order",
    "num_primary_guards",
    "distinct_guard_subnets",
    "channel_per_circuit",
    "request_size",
    "optimistic_data",
    "circ_window",
    "circ_window_increment",
    "congestion_control",
    "cellq_high",
    "cellq_low",
    "sndbuf",
    "rcvbuf",
];
const NETWORK_KEYS: &[&str] = &["latency", "bandwidth_weights", "compute_flags"];
const LATENCY_KEYS: &[&str] = &["constant", "matrix", "gml"];
const RELAY_KEYS: &[&str] = &[
    "name",
    "bandwidth",
    "burst",
    "link",
    "link_up",
    "link_down",
    "flags",
    "consensus_weight",
    "location",
    "perconn",
    "scheduler",
    "throttling",
    "tortoise",
    "mtbf",
    "address",
];
const CLIENT_KEYS: &[&str] = &[
    "name",
    "workload",
    "count",
    "link",
    "link_up",
    "link_down",
    "placement",
    "relay_operators",
    "service",
    "path",
    "start",
    "start_spread",
];
const SERVER_KEYS: &[&str] = &["count", "link", "link_up", "link_down", "placement"];
const WORKLOAD_TYPES: &[&str] = &["web", "bulk", "perf", "markov"];
const SIZE_DISTS: &[&str] = &["fixed", "uniform", "choice"];
const TIME_DISTS: &[&str] = &["fixed", "uniform", "exponential", "lognormal", "pareto", "empirical"];

const MBIT: u64 = 1_000_000;
/// Relay access links are never slower than this by default.
const MIN_DEFAULT_RELAY_LINK: u64 = 10 * MBIT;
const DEFAULT_CLIENT_UP: u64 = 10 * MBIT;
const DEFAULT_CLIENT_DOWN: u64 = 20 * MBIT;
const DEFAULT_SERVER_LINK: u64 = 1_000 * MBIT;
const DEFAULT_SERVER_COUNT: u32 = 10;
const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
/// The largest request the model sends without optimistic data: one stream window
/// (`STREAMWINDOW_START`, 500 cells) of `RELAY_PAYLOAD_SIZE` (498 B) each. Spelled out
/// because this crate sits below the Tor model; `onionlab-sim`'s tests check it against
/// the model's constants.
pub const MAX_UNWINDOWED_REQUEST: u64 = 500 * 498;

const DURATION_EXAMPLE: &str = "write a number and a unit, e.g. \"100 ms\", \"1.5 s\", \"10 min\"";
const SIZE_EXAMPLE: &str = "write a number and a unit, e.g. \"500 B\", \"320 KiB\", \"5 MiB\"";
const RATE_EXAMPLE: &str = "write a number and a unit, e.g. \"20 Mbit\", \"10 MiB/s\", \"100 KBps\"";

/// Tor's defaults for `[tor]`.
pub fn default_tor_params() -> TorParams {
    TorParams {
        refill_interval: SimDuration::from_millis(100),
        refill_phase: RefillPhaseConfig::Aligned,
        link_handshake_rtts: 2,
        max_circuit_dirtiness: SimDuration::from_secs(600),
        idle_channel_timeout: Some(IdleChannelTimeoutConfig::fixed(SimDuration::from_secs(180))),
        predicted_circuits: false,
        cbt_learning: None,
        circuit_idle_timeout: SimDuration::from_secs(3600),
        circ_max_cell_queue: 2500,
        num_entry_guards: 1,
        use_entry_guards: true,
        path_order: PathOrderConfig::ExitFirst,
        num_primary_guards: default_num_primary_guards(1),
        distinct_guard_subnets: true,
        channel_per_circuit: false,
        request_bytes: 500,
        optimistic_data: true,
        circ_window: 1000,
        circ_window_increment: 100,
        congestion_control: CongestionControlConfig::FixedWindow,
        cell_queue_watermarks: None,
        sndbuf_bytes: 4 * MIB,
        rcvbuf_bytes: 6 * MIB,
    }
}

/// The default web think time: log-normal, median 5 s, sigma 1.25 (mean about 10.9 s; see
/// docs/config.md for why).
pub fn default_think_time() -> TimeDist {
    TimeDist::LogNormal { median: SimDuration::from_secs(5), sigma: 1.25 }
}

/// Bytes per packet of a Markov packet model (tgen's markov packet payload, see
/// docs/generate.md).
pub const DEFAULT_MARKOV_PACKET: u64 = 1434;

/// The default pause between two Markov flows (a flow = one run of the stream model to its
/// end): exponential with mean 10 min, tor's MaxCircuitDirtiness (see docs/generate.md).
pub fn default_markov_pause() -> TimeDist {
    TimeDist::Exponential { mean: SimDuration::from_secs(600) }
}

/// The default perf-workload sizes: 50 KiB / 1 MiB / 5 MiB with weights 12:2:1 (onionperf).
pub fn default_perf_sizes() -> SizeDist {
    SizeDist::Choice { sizes: vec![50 * KIB, MIB, 5 * MIB], weights: vec![12.0, 2.0, 1.0] }
}

/// Parses and validates `text`. Relative file names resolve against `base_dir`;
/// `default_name` is the experiment name when `experiment.name` is absent.
pub fn parse_config(text: &str, base_dir: &Path, default_name: &str) -> Result<ExperimentConfig, ConfigErrors> {
    parse_config_with(text, base_dir, default_name, &[])
}

/// [`parse_config`] with `overrides` applied to the tree after a `network_file` is merged
/// and before validation. A path an override cannot follow is a problem at that path; the
/// rest of the config is still validated, so every problem is reported at once.
pub fn parse_config_with(
    text: &str,
    base_dir: &Path,
    default_name: &str,
    overrides: &[crate::overrides::Override],
) -> Result<ExperimentConfig, ConfigErrors> {
    let mut root = match text.parse::<Table>() {
        Ok(t) => t,
        Err(e) => return Err(syntax_error("", None, text, &e).into()),
    };
    let mut cx = Ctx {
        base_dir,
        errors: Vec::new(),
        default_scheduler: SchedulerConfig::RoundRobin,
        default_throttling: ThrottlingConfig::None,
        default_tortoise: None,
        relays_setting_own: [0; RELAY_DEFAULTS.len()],
    };
    let mut origins = crate::include::merge_network_file(&mut root, base_dir, &mut cx.errors);
    let override_errors = crate::overrides::apply_all(&mut root, overrides);
    // A value an override wrote is the command line's, not the network file's; a table it
    // replaced whole is completed by the file's entries, as the experiment's own would be.
    origins.overridden_by(overrides.iter().map(|o| o.path.as_str()));
    origins.refill(&mut root);
    let cfg = cx.config(&root, default_name);
    cx.dead_defaults(&root, &cfg, &origins, overrides);
    cx.windows_under_vegas(&root, &cfg, &origins, overrides);
    crate::include::relabel(&mut cx.errors, &origins);
    cx.errors.splice(0..0, override_errors);
    if cx.errors.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigErrors(cx.errors))
    }
}

/// A TOML syntax error as one problem, with line and column (1-based) in the message.
fn syntax_error(path: &str, file: Option<&str>, text: &str, e: &toml::de::Error) -> ConfigError {
    let where_ = match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!(" at line {line}, column {col}")
        }
        None => String::new(),
    };
    let file = file.map(|f| format!("{f}: ")).unwrap_or_default();
    let msg = e.message().trim().replace('\n', " ");
    ConfigError::new(path, format!("{file}TOML syntax error{where_}: {msg}"))
        .with_hint("see docs/config.md for the format; strings need quotes, e.g. duration = \"5 min\"")
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut col = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line, col)
}

/// `path.key`; just `key` at the top, and `file:key` right after a `file:` prefix (the top
/// of a file the config names, such as `relays_file:colour`).
fn join(path: &str, key: &str) -> String {
    if path.is_empty() || path.ends_with(':') {
        format!("{path}{key}")
    } else {
        format!("{path}.{key}")
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string {s:?}"),
        Value::Integer(i) => format!("integer {i}"),
        Value::Float(x) => format!("float {x}"),
        Value::Boolean(b) => format!("boolean {b}"),
        Value::Datetime(d) => format!("date-time {d}"),
        Value::Array(_) => "an array".to_string(),
        Value::Table(_) => "a table".to_string(),
    }
}

/// Levenshtein distance (by chars, case-insensitive: `guard` is close to `Guard`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates.iter().map(|c| (edit_distance(word, c), *c)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, c)| c)
}

/// "did you mean `x`?" if something is close, else the list of choices.
fn suggest(word: &str, candidates: &[&str], what: &str) -> String {
    match closest(word, candidates) {
        Some(c) => format!("did you mean `{c}`? {what}: {}", candidates.join(", ")),
        None => format!("{what}: {}", candidates.join(", ")),
    }
}

struct Ctx<'a> {
    base_dir: &'a Path,
    errors: Vec<ConfigError>,
    /// `mechanisms.scheduler` and `.throttling`, parsed before the relays, which may
    /// override them.
    default_scheduler: SchedulerConfig,
    default_throttling: ThrottlingConfig,
    default_tortoise: Option<TortoiseConfig>,
    /// How many relays set their own value of each of [`RELAY_DEFAULTS`].
    relays_setting_own: [usize; RELAY_DEFAULTS.len()],
}

/// The `[mechanisms]` keys that are defaults a relay may set for itself.
const RELAY_DEFAULTS: [&str; 3] = ["scheduler", "throttling", "tortoise"];

impl Ctx<'_> {
    fn err(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::new(path, message));
    }
    fn err_hint(&mut self, path: impl Into<String>, message: impl Into<String>, hint: impl Into<String>) {
        self.errors.push(ConfigError::new(path, message).with_hint(hint));
    }

    /// Tor's tick-based EWMA adds F^(-phi) for a cell sent a fraction phi into a tick, with
    /// F = 2^(-tick/halflife). Past about 1000 half-lives per tick that overflows a double
    /// (counts become infinite, then NaN, and the ordering breaks without an error), so the
    /// tick may be at most `EWMA_MAX_HALFLIVES_PER_TICK` half-lives.
    fn ewma_ticks_fit(&mut self, p: &str, halflife: SimDuration, tick: SimDuration) -> bool {
        if tick.as_nanos() / EWMA_MAX_HALFLIVES_PER_TICK <= halflife.as_nanos() {
            return true;
        }
        self.err_hint(
            join(p, "halflife"),
            format!(
                "must be at least tick / {EWMA_MAX_HALFLIVES_PER_TICK} ({} with tick {}), found {}",
                // Rounded up to the microsecond, for reading.
                crate::format_duration(SimDuration::from_nanos(
                    tick.as_nanos().div_ceil(EWMA_MAX_HALFLIVES_PER_TICK).div_ceil(1000) * 1000
                )),
                crate::format_duration(tick),
                crate::format_duration(halflife)
            ),
            "the scale factor 2^(-tick/halflife) would overflow the counts; shorten the tick or lengthen the half-life",
        );
        false
    }

    /// Reports every key of `t` not in `known`, suggesting the closest known one.
    fn keys(&mut self, t: &Table, path: &str, known: &[&str]) {
        for k in t.keys() {
            if !known.contains(&k.as_str()) {
                let hint = suggest(k, known, "Known keys here");
                self.err_hint(join(path, k), format!("unknown key `{k}`"), hint);
            }
        }
    }

    // ---- value conversions: None means "invalid, already reported" ----

    fn string<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v str> {
        match v {
            Value::String(s) => Some(s.as_str()),
            other => {
                self.err(path, format!("expected a string, found {}", describe(other)));
                None
            }
        }
    }

    fn table<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v Table> {
        match v {
            Value::Table(t) => Some(t),
            other => {
                self.err(path, format!("expected a table, found {}", describe(other)));
                None
            }
        }
    }

    fn array<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v Vec<Value>> {
        match v {
            Value::Array(a) => Some(a),
            other => {
                self.err(path, format!("expected an array, found {}", describe(other)));
                None
            }
        }
    }

    /// A non-negative integer no larger than `max`.
    fn uint(&mut self, v: &Value, path: &str, max: u64) -> Option<u64> {
        match v {
            Value::Integer(i) if *i < 0 => {
                self.err(path, format!("must not be negative, found {i}"));
                None
            }
            Value::Integer(i) if (*i as u64) > max => {
                self.err(path, format!("{i} is too large (at most {max})"));
                None
            }
            Value::Integer(i) => Some(*i as u64),
            Value::String(s) if s.trim().parse::<i64>().is_ok() => {
                self.err_hint(path, format!("expected an integer, found string {s:?}"), format!("drop the quotes: {}", s.trim()));
                None
            }
            other => {
                self.err(path, format!("expected a non-negative integer, found {}", describe(other)));
                None
            }
        }
    }

    fn u32(&mut self, v: &Value, path: &str) -> Option<u32> {
        self.uint(v, path, u64::from(u32::MAX)).map(|n| n as u32)
    }
    fn u64(&mut self, v: &Value, path: &str) -> Option<u64> {
        self.uint(v, path, i64::MAX as u64)
    }

    /// A finite number (integers accepted).
    fn float(&mut self, v: &Value, path: &str) -> Option<f64> {
        match v {
            Value::Integer(i) => Some(*i as f64),
            Value::Float(x) if x.is_finite() => Some(*x),
            Value::Float(x) => {
                self.err(path, format!("must be a finite number, found {x}"));
                None
            }
            other => {
                self.err(path, format!("expected a number, found {}", describe(other)));
                None
            }
        }
    }

    /// A unit string; a bare TOML number is an error because its unit would be a guess.
    fn unit_str<'v>(&mut self, v: &'v Value, path: &str, what: &str, unit: &str, example: &str) -> Option<&'v str> {
        match v {
            Value::String(s) => Some(s.as_str()),
            Value::Integer(_) | Value::Float(_) => {
                let (n, negative) = match v {
                    Value::Integer(i) => (i.to_string(), *i < 0),
                    Value::Float(x) => (x.to_string(), *x < 0.0),
                    _ => (String::new(), false),
                };
                // A negative one gets no hint with its own number and a unit: that would
                // only be refused next, as negative.
                if negative {
                    self.err_hint(path, format!("a {what} cannot be negative, found {n}"), example.to_string());
                } else {
                    self.err_hint(
                        path,
                        format!("a bare number is ambiguous for a {what}, found {n}"),
                        format!("give the unit in a string, e.g. \"{n} {unit}\"; {example}"),
                    );
                }
                None
            }
            other => {
                self.err_hint(path, format!("expected a {what} string, found {}", describe(other)), example.to_string());
                None
            }
        }
    }

    fn duration(&mut self, v: &Value, path: &str) -> Option<SimDuration> {
        let s = self.unit_str(v, path, "duration", "s", DURATION_EXAMPLE)?;
        match parse_duration(s) {
            Ok(d) => Some(d),
            Err(e) => {
                self.err_hint(path, format!("bad duration: {e}"), DURATION_EXAMPLE);
                None
            }
        }
    }

    /// A duration that must be longer than zero.
    fn pos_duration(&mut self, v: &Value, path: &str) -> Option<SimDuration> {
        let d = self.duration(v, path)?;
        if d == SimDuration::ZERO {
            self.err_hint(path, "must be longer than 0", DURATION_EXAMPLE);
            return None;
        }
        Some(d)
    }

    /// Bytes.
    fn size(&mut self, v: &Value, path: &str) -> Option<u64> {
        let s = self.unit_str(v, path, "size", "KiB", SIZE_EXAMPLE)?;
        match parse_size(s) {
            Ok(b) if b > i64::MAX as u64 => {
                self.err(path, format!("size {s:?} is too large"));
                None
            }
            Ok(b) => Some(b),
            Err(e) => {
                self.err_hint(path, format!("bad size: {e}"), SIZE_EXAMPLE);
                None
            }
        }
    }

    /// A size of at least one byte.
    fn pos_size(&mut self, v: &Value, path: &str) -> Option<u64> {
        let b = self.size(v, path)?;
        if b == 0 {
            self.err_hint(path, "must be at least 1 byte", SIZE_EXAMPLE);
            return None;
        }
        Some(b)
    }

    /// A socket buffer size: at least Linux's floor `min` (named `floor` in the message).
    fn socket_buffer(&mut self, v: &Value, path: &str, min: u64, floor: &str) -> Option<u64> {
        let b = self.size(v, path)?;
        if b < min {
            self.err_hint(
                path,
                format!("must be at least {min} B, found {b} B"),
                format!("Linux never sets a socket buffer below {floor}, {min} B"),
            );
            return None;
        }
        Some(b)
    }

    /// A link rate in bits/s, positive.
    fn bits(&mut self, v: &Value, path: &str) -> Option<u64> {
        let s = self.unit_str(v, path, "rate", "Mbit", RATE_EXAMPLE)?;
        match parse_bandwidth(s) {
            Ok(0) => {
                self.err_hint(path, format!("rate {s:?} must be positive"), RATE_EXAMPLE);
                None
            }
            Ok(b) if b > i64::MAX as u64 => {
                self.err(path, format!("rate {s:?} is too large"));
                None
            }
            Ok(b) => Some(b),
            Err(e) => {
                self.err_hint(path, format!("bad rate: {e}"), RATE_EXAMPLE);
                None
            }
        }
    }

    /// A token-bucket rate in bytes/s (bits/s / 8, rounded down), positive.
    fn byte_rate(&mut self, v: &Value, path: &str) -> Option<u64> {
        let s = self.unit_str(v, path, "rate", "KiB/s", RATE_EXAMPLE)?;
        match parse_bandwidth(s) {
            Ok(b) if b / 8 == 0 => {
                self.err_hint(path, format!("rate {s:?} must be at least 1 byte/s"), RATE_EXAMPLE);
                None
            }
            Ok(b) => Some(b / 8),
            Err(e) => {
                self.err_hint(path, format!("bad rate: {e}"), RATE_EXAMPLE);
                None
            }
        }
    }

    // ---- field access ----

    /// The converted value of optional `key`; None if absent or invalid.
    fn opt<'v, T>(&mut self, t: &'v Table, path: &str, key: &str, f: impl FnOnce(&mut Self, &'v Value, &str) -> Option<T>) -> Option<T> {
        let v = t.get(key)?;
        f(self, v, &join(path, key))
    }

    /// Like [`Ctx::opt`], but a missing key is reported, with `example` as the hint.
    fn req<'v, T>(
        &mut self,
        t: &'v Table,
        path: &str,
        key: &str,
        f: impl FnOnce(&mut Self, &'v Value, &str) -> Option<T>,
        example: &str,
    ) -> Option<T> {
        match t.get(key) {
            Some(v) => f(self, v, &join(path, key)),
            None => {
                self.err_hint(join(path, key), format!("missing required key `{key}`"), example.to_string());
                None
            }
        }
    }

    /// A top-level section; absent means empty (the missing required keys inside are then
    /// reported at their own paths).
    fn section<'v>(&mut self, root: &'v Table, key: &str) -> Option<&'v Table> {
        let v = root.get(key)?;
        self.table(v, key)
    }

    /// Reads a file named relative to the config's directory.
    fn read(&mut self, rel: &str, path: &str) -> Option<String> {
        let full = self.base_dir.join(rel);
        match std::fs::read_to_string(&full) {
            Ok(s) => Some(s),
            Err(e) => {
                self.err_hint(
                    path,
                    format!("cannot read {rel:?} ({}): {e}", full.display()),
                    "relative paths are resolved against the config file's directory",
                );
                None
            }
        }
    }

    /// A `[mechanisms]` default that no relay follows is refused where the user set it: an
    /// override (`--set`, a sweep's `--vary`), or the experiment's own `[mechanisms]` over
    /// relays from another file (a network file or a `relays_file`). Either would otherwise
    /// run unchanged and look like a result. A config with its relays inline is not refused
    /// for its own `[mechanisms]`: a resolved config writes every relay's settings out
    /// beside the defaults. Client-operated relays follow the defaults, so with them a
    /// default is never dead.
    fn dead_defaults(
        &mut self,
        root: &Table,
        cfg: &ExperimentConfig,
        origins: &crate::include::Origins,
        overrides: &[crate::overrides::Override],
    ) {
        let n = cfg.relays.len();
        if n == 0 || cfg.clients.iter().any(|g| g.relay_operators.is_some_and(|o| o.count > 0)) {
            return;
        }
        let in_a_relays_file = root.contains_key("relays_file");
        let from_network_file = origins.contains("relays") || origins.contains("relays_file");
        let in_experiment = |key: &str| {
            matches!(root.get("mechanisms"), Some(Value::Table(m)) if m.contains_key(key))
                && !origins.contains(&format!("mechanisms.{key}"))
                && (from_network_file || in_a_relays_file)
        };
        for (key, own) in RELAY_DEFAULTS.into_iter().zip(self.relays_setting_own) {
            if own < n {
                continue;
            }
            let field = format!("mechanisms.{key}");
            // The last override that decides the key: the key itself or a field inside it,
            // or a whole [mechanisms] table (which, without the key, leaves it unset).
            let by_override = overrides.iter().rev().find_map(|o| {
                if o.path == field || o.path.starts_with(&format!("{field}.")) {
                    Some(Some(o))
                } else if o.path == "mechanisms" {
                    Some(o.value.get(key).is_some().then_some(o))
                } else {
                    None
                }
            });
            let path = match by_override {
                Some(Some(o)) => o.path.clone(),
                Some(None) => continue,
                None if in_experiment(key) => field.clone(),
                None => continue,
            };
            let hint = if in_a_relays_file {
                format!(
                    "the relays come from a relays_file, which overrides do not reach: remove `{key}` there from the relays \
                     that should follow the default, or set it there"
                )
            } else {
                let old_network = if key == "scheduler" && from_network_file {
                    " (network files written by `onionlab generate` before 2026-11-28 set every relay's scheduler: \
                     generate the network anew)"
                } else {
                    ""
                };
                format!(
                    "set `{key}` on the relays instead (e.g. --set 'relays[*].{key}=...'; a resolved config.toml writes \
                     every relay's own), or remove it from the relays that should follow the default{old_network}"
                )
            };
            self.err_hint(path, format!("`{field}` changes nothing: every relay ({n}) sets its own `{key}`"), hint);
        }
    }

    /// `tor.circ_window` and `circ_window_increment` while circuits run Vegas, whose
    /// congestion window takes the place of tor's SENDME windows, set where the run would
    /// otherwise go on unchanged: by an override, or in the experiment's own `[tor]` over a
    /// network file's Vegas. Not refused: a file that writes them beside its own Vegas (a
    /// resolved config writes every `[tor]` key), nor when an override chooses the
    /// congestion control too (a sweep of fixed windows against Vegas sets the windows for
    /// every point).
    fn windows_under_vegas(
        &mut self,
        root: &Table,
        cfg: &ExperimentConfig,
        origins: &crate::include::Origins,
        overrides: &[crate::overrides::Override],
    ) {
        if !matches!(cfg.tor.congestion_control, CongestionControlConfig::Vegas(_)) {
            return;
        }
        let cc = "tor.congestion_control";
        if overrides.iter().any(|o| {
            o.path == cc || o.path.starts_with(&format!("{cc}.")) || (o.path == "tor" && o.value.get("congestion_control").is_some())
        }) {
            return;
        }
        let own_tor = |key: &str| matches!(root.get("tor"), Some(Value::Table(t)) if t.contains_key(key));
        for key in ["circ_window", "circ_window_increment"] {
            let field = format!("tor.{key}");
            let path = match overrides.iter().rev().find(|o| o.path == field) {
                Some(o) => o.path.clone(),
                None if own_tor(key) && !origins.contains(&field) && origins.contains(cc) => field.clone(),
                None => continue,
            };
            self.err_hint(
                path,
                format!("`{field}` changes nothing: with congestion_control = \"vegas\" a circuit's window is Vegas's"),
                "set tor.congestion_control = \"fixed-window\" to study tor's SENDME windows, or Vegas's own parameters \
                 (tor.congestion_control = { kind = \"vegas\", cwnd_init = ... })",
            );
        }
    }

    // ---- sections ----

    fn config(&mut self, root: &Table, default_name: &str) -> ExperimentConfig {
        self.keys(root, "", TOP_KEYS);
        let empty = Table::new();
        let t = self.section(root, "experiment").unwrap_or(&empty);
        let experiment = self.experiment(t, default_name);
        let t = self.section(root, "tor").unwrap_or(&empty);
        let tor = self.tor(t);
        let t = self.section(root, "network").unwrap_or(&empty);
        let (network, locations) = self.network(t);
        let t = self.section(root, "mechanisms").unwrap_or(&empty);
        let mechanisms = self.mechanisms(t);
        self.default_scheduler = mechanisms.scheduler;
        self.default_throttling = mechanisms.throttling;
        self.default_tortoise = mechanisms.tortoise;
        let relays = self.relays(root, locations);
        let t = self.section(root, "workloads");
        let workloads = self.workloads(t);
        // Reference checks use the raw names so that a workload with a bad field does not
        // also produce "unknown workload" errors.
        let workload_names: Vec<&str> = match root.get("workloads") {
            Some(Value::Table(t)) => t.keys().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        let clients = self.clients(root.get("clients"), &workload_names, locations, experiment.duration);
        for (i, g) in clients.iter().enumerate() {
            let Some(path) = &g.path else { continue };
            for (j, name) in path.iter().enumerate() {
                if !relays.iter().any(|r| &r.name == name) {
                    let names: Vec<&str> = relays.iter().map(|r| r.name.as_str()).collect();
                    self.err_hint(
                        format!("clients[{i}].path[{j}]"),
                        format!("no relay is named {name:?}"),
                        suggest(name, &names, "Relays"),
                    );
                }
                if path[..j].contains(name) {
                    self.err_hint(
                        format!("clients[{i}].path[{j}]"),
                        format!("{name:?} is already on the path"),
                        "a circuit's three relays must differ",
                    );
                }
            }
        }
        let t = self.section(root, "servers").unwrap_or(&empty);
        let servers = self.servers(t, locations);
        // A conflict every such relay inherits from [mechanisms] is one problem there, not
        // one per relay (which blamed a network file's relays for what an override set).
        let inherited = |r: &RelayConfig| r.throttling == mechanisms.throttling && r.tortoise == mechanisms.tortoise;
        let both = |r: &RelayConfig| r.throttling != ThrottlingConfig::None && r.tortoise.is_some();
        let n_inherited = relays.iter().filter(|r| both(r) && inherited(r)).count();
        if n_inherited > 0 {
            self.err_hint(
                "mechanisms",
                format!("mechanisms.throttling and mechanisms.tortoise both apply to {n_inherited} relay(s) that set neither"),
                "both act on the same per-connection buckets: choose one of them (or set the other to \"none\"/\"off\" on those relays)",
            );
        }
        for (i, r) in relays.iter().enumerate() {
            if both(r) && !inherited(r) {
                let hint = "both act on the same per-connection buckets: set tortoise = \"off\" or throttling = \"none\" on this relay";
                self.err_hint(format!("relays[{i}]"), "runs both guard throttling and Tortoise", hint);
            }
            // The mechanism sets the client connections' buckets and so replaces perconn's
            // (a run with both was the run with the mechanism alone).
            if r.perconn.is_some() && (r.throttling != ThrottlingConfig::None || r.tortoise.is_some()) {
                self.err_hint(
                    format!("relays[{i}].perconn"),
                    "changes nothing on a relay that runs guard throttling or Tortoise: the mechanism sets the same \
                     per-connection buckets",
                    "static throttling is PerConnBWRate/Burst as a mechanism (throttling = { kind = \"static\", rate = ..., \
                     burst = ... }); or set throttling = \"none\" and tortoise = \"off\" on this relay",
                );
            }
        }
        if n_inherited == 0
            && mechanisms.throttling != ThrottlingConfig::None
            && mechanisms.tortoise.is_some()
            && clients.iter().any(|g| g.relay_operators.is_some())
        {
            self.err_hint(
                "mechanisms",
                "client-operated relays would run both guard throttling and Tortoise",
                "choose one of mechanisms.throttling and mechanisms.tortoise",
            );
        }
        if mechanisms.predictor.is_some() {
            // PredicTor shapes every circuit itself, on every relay (round robin with
            // per-circuit budgets); it is not combined with the other relay mechanisms.
            let (what, hint) = (
                "PredicTor shapes each circuit itself (round robin with per-circuit budgets)",
                "run the relays on round robin with mechanisms.predictor on: mechanisms.scheduler = \"round-robin\" (the \
                 experiment's replaces a network file's)",
            );
            if mechanisms.scheduler != SchedulerConfig::RoundRobin {
                self.err_hint("mechanisms.scheduler", what, hint);
            }
            for (i, r) in relays.iter().enumerate() {
                // Relays that inherit the default are covered by the error above.
                if r.scheduler != SchedulerConfig::RoundRobin && r.scheduler != mechanisms.scheduler {
                    // The relay's own setting wins over mechanisms.scheduler: it is the one to change.
                    self.err_hint(
                        format!("relays[{i}].scheduler"),
                        what,
                        "set this relay's scheduler = \"round-robin\", or remove it so that the relay follows mechanisms.scheduler",
                    );
                }
                if r.throttling != ThrottlingConfig::None || r.tortoise.is_some() {
                    self.err_hint(
                        format!("relays[{i}]"),
                        "runs guard throttling or Tortoise with PredicTor",
                        "a relay runs one controller",
                    );
                }
            }
            if mechanisms.braids.is_some() {
                self.err_hint("mechanisms.predictor", "PredicTor and BRAIDS both decide which circuit goes next", "choose one of them");
            }
        }
        if mechanisms.braids.is_none() {
            for (i, g) in clients.iter().enumerate().filter(|(_, g)| g.service != "normal") {
                self.err_hint(
                    format!("clients[{i}].service"),
                    format!("{:?} needs BRAIDS's tickets, and mechanisms.braids is off", g.service),
                    "add [mechanisms.braids] (its parameters default to the paper's), or drop service",
                );
            }
        } else if !relays.iter().any(|r| matches!(r.scheduler, SchedulerConfig::Hpd { .. }))
            && !matches!(mechanisms.scheduler, SchedulerConfig::Hpd { .. })
        {
            self.err_hint(
                "mechanisms.braids",
                "no relay runs the HPD scheduler, so the tickets would buy nothing",
                "set mechanisms.scheduler = \"hpd\" (or scheduler = \"hpd\" on the relays that serve BRAIDS's classes)",
            );
        }
        if network.compute_flags {
            for (i, r) in relays.iter().enumerate() {
                if r.mtbf.is_none() {
                    let hint = "give each relay mtbf = \"4 days\" (its mean time between failures), or turn network.compute_flags off";
                    self.err_hint(format!("relays[{i}].mtbf"), "needed when network.compute_flags is on", hint);
                }
            }
            for (i, g) in clients.iter().enumerate() {
                if g.relay_operators.is_some_and(|o| o.mtbf.is_none()) {
                    self.err_hint(
                        format!("clients[{i}].relay_operators.mtbf"),
                        "needed when network.compute_flags is on",
                        "mtbf = \"30 days\"",
                    );
                }
            }
        }
        self.host_name_clashes(&relays, &clients, &servers);
        ExperimentConfig { experiment, tor, network, relays, clients, servers, workloads, mechanisms }
    }

    /// Client hosts are named `<group><i>` and servers `server<i>`; a relay with one of
    /// those names would make the network unbuildable (real consensuses have a "server1").
    fn host_name_clashes(&mut self, relays: &[RelayConfig], clients: &[ClientGroup], servers: &ServerGroup) {
        let mut groups: Vec<(&str, u32)> = clients.iter().map(|g| (g.name.as_str(), g.count)).collect();
        groups.push(("server", servers.count));
        for (i, r) in relays.iter().enumerate() {
            for &(prefix, count) in &groups {
                let Some(num) = r.name.strip_prefix(prefix) else { continue };
                let canonical = num.parse::<u32>().ok().filter(|n| n.to_string() == num);
                if canonical.is_some_and(|n| n < count) {
                    let what = if prefix == "server" { "a server".to_string() } else { format!("a client of group {prefix:?}") };
                    self.err_hint(
                        format!("relays[{i}].name"),
                        format!("relay name {:?} is also the host name of {what}", r.name),
                        "rename the relay; clients are named <group><i> and servers server<i>",
                    );
                }
            }
        }
    }

    fn experiment(&mut self, t: &Table, default_name: &str) -> ExperimentSection {
        let p = "experiment";
        self.keys(t, p, EXPERIMENT_KEYS);
        let name = match self.opt(t, p, "name", Ctx::string) {
            Some("") => {
                self.err_hint("experiment.name", "must not be empty", "name = \"my-experiment\"");
                String::new()
            }
            Some(s) => s.to_string(),
            None => default_name.to_string(),
        };
        let duration = self.req(t, p, "duration", Ctx::pos_duration, "duration = \"10 min\": the simulated time of one run");
        let warmup = self.opt(t, p, "warmup", Ctx::duration).unwrap_or(SimDuration::ZERO);
        if let Some(d) = duration {
            if warmup >= d {
                self.err_hint(
                    "experiment.warmup",
                    format!("warmup ({}) must be shorter than the duration ({})", format_duration(warmup), format_duration(d)),
                    "downloads starting during the warmup are not reported; shorten it or lengthen the run",
                );
            }
        }
        let seeds = match t.get("seeds") {
            None => vec![1],
            Some(v) => self.seeds(v),
        };
        let metrics_interval_set = self.opt(t, p, "metrics_interval", Ctx::pos_duration);
        let metrics_interval = metrics_interval_set.unwrap_or(SimDuration::from_secs(1));
        let connection_metrics_interval = self.opt(t, p, "connection_metrics_interval", Ctx::pos_duration);
        let channel_metrics_interval = self.opt(t, p, "channel_metrics_interval", Ctx::pos_duration);
        let circuit_metrics_interval = self.opt(t, p, "circuit_metrics_interval", Ctx::pos_duration);
        let wire_waits = self.opt(t, p, "wire_waits", Ctx::boolean).unwrap_or(false);
        if let Some(d) = duration {
            let set = |k: &str| t.contains_key(k);
            // An interval that failed to parse has its own error; its default is not it.
            let metrics = if set("metrics_interval") { metrics_interval_set } else { Some(metrics_interval) };
            let intervals = [
                ("metrics_interval", metrics),
                ("connection_metrics_interval", connection_metrics_interval),
                ("channel_metrics_interval", channel_metrics_interval),
                ("circuit_metrics_interval", circuit_metrics_interval),
            ];
            for (key, interval) in intervals {
                if let Some(i) = interval {
                    self.interval_divides(key, i, d, set(key));
                }
            }
        }
        ExperimentSection {
            name,
            duration: duration.unwrap_or(SimDuration::ZERO),
            warmup,
            seeds,
            metrics_interval,
            connection_metrics_interval,
            channel_metrics_interval,
            circuit_metrics_interval,
            wire_waits,
        }
    }

    /// A metrics table has one row per whole interval: an interval longer than the run
    /// leaves the table empty, and one that does not divide the run leaves its last part
    /// without a row, so both are refused rather than silently dropped.
    fn interval_divides(&mut self, key: &str, interval: SimDuration, duration: SimDuration, set: bool) {
        let (i, d) = (interval.as_nanos(), duration.as_nanos());
        if d % i == 0 {
            return;
        }
        let path = format!("experiment.{key}");
        let given = if set { format_duration(interval) } else { format!("{} (the default)", format_duration(interval)) };
        let what = if i > d {
            format!("{given} is longer than the duration ({}), so its table would have no row", format_duration(duration))
        } else {
            let rest = SimDuration::from_nanos(d % i);
            format!(
                "{given} does not divide the duration ({}): the run's last {} would have no row",
                format_duration(duration),
                format_duration(rest)
            )
        };
        let fit = SimDuration::from_nanos(gcd(i, d));
        self.err_hint(&path, what, format!("a row covers one whole interval; e.g. {key} = \"{}\"", format_duration(fit)));
    }

    fn seeds(&mut self, v: &Value) -> Vec<u64> {
        let p = "experiment.seeds";
        let Some(a) = self.array(v, p) else { return Vec::new() };
        if a.is_empty() {
            self.err_hint(p, "needs at least one seed", "seeds = [1]");
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (i, s) in a.iter().enumerate() {
            let sp = format!("{p}[{i}]");
            let seed = match s {
                Value::Integer(n) if *n >= 0 => Some(*n as u64),
                Value::Integer(n) => {
                    self.err_hint(&sp, format!("seeds must be non-negative integers, found {n}"), "e.g. seeds = [1, 2, 3]");
                    None
                }
                other => {
                    self.err_hint(&sp, format!("seeds must be non-negative integers, found {}", describe(other)), "e.g. seeds = [1, 2, 3]");
                    None
                }
            };
            if let Some(seed) = seed {
                if !seen.insert(seed) {
                    self.err_hint(&sp, format!("seed {seed} is listed twice"), "each seed is one run; list it once");
                }
                out.push(seed);
            }
        }
        out
    }

    fn tor(&mut self, t: &Table) -> TorParams {
        let p = "tor";
        self.keys(t, p, TOR_KEYS);
        let d = default_tor_params();
        let pos_u64 = |cx: &mut Ctx<'_>, key: &str, default: u64| -> u64 {
            match cx.opt(t, p, key, Ctx::u64) {
                Some(0) => {
                    cx.err(join(p, key), "must be at least 1");
                    default
                }
                Some(n) => n,
                None => default,
            }
        };
        let circ_max_cell_queue = pos_u64(self, "circ_max_cell_queue", d.circ_max_cell_queue);
        let circ_window = pos_u64(self, "circ_window", d.circ_window);
        let circ_window_increment = pos_u64(self, "circ_window_increment", d.circ_window_increment);
        if circ_window_increment > circ_window {
            self.err_hint(
                "tor.circ_window_increment",
                format!("the increment ({circ_window_increment}) is larger than circ_window ({circ_window})"),
                "a SENDME cannot open more than the whole window; tor uses 1000 and 100",
            );
        }
        let num_entry_guards = match self.opt(t, p, "num_entry_guards", Ctx::u32) {
            Some(0) => {
                self.err_hint("tor.num_entry_guards", "must be at least 1", "tor 0.2.x used 3, current tor uses 1");
                d.num_entry_guards
            }
            Some(n) => n,
            None => d.num_entry_guards,
        };
        let path_order = match t.get("path_order") {
            None => d.path_order,
            Some(v) => match self.choice(v, "tor.path_order", &PathOrderConfig::NAMES) {
                Some("exit-first") => PathOrderConfig::ExitFirst,
                Some(_) => PathOrderConfig::GuardFirst,
                None => d.path_order,
            },
        };
        let num_primary_guards = match self.opt(t, p, "num_primary_guards", Ctx::u32) {
            Some(0) => {
                self.err_hint("tor.num_primary_guards", "must be at least 1", "tor 0.4.8's guard-n-primary-guards is 3");
                default_num_primary_guards(num_entry_guards)
            }
            Some(n) if n < num_entry_guards => {
                self.err_hint(
                    "tor.num_primary_guards",
                    format!("{n} is fewer than num_entry_guards ({num_entry_guards})"),
                    "tor refuses NumEntryGuards greater than NumPrimaryGuards: the guards in use are primary guards",
                );
                default_num_primary_guards(num_entry_guards)
            }
            Some(n) => n,
            None => default_num_primary_guards(num_entry_guards),
        };
        let request_bytes = self.opt(t, p, "request_size", Ctx::pos_size).unwrap_or(d.request_bytes);
        let optimistic_data = self.opt(t, p, "optimistic_data", Ctx::boolean).unwrap_or(d.optimistic_data);
        // Without optimistic data the request goes as DATA cells, which the model does not
        // charge to the client's windows: it must fit the stream window (500 cells).
        if !optimistic_data && request_bytes > MAX_UNWINDOWED_REQUEST {
            self.err_hint(
                "tor.request_size",
                format!("{} is more than {MAX_UNWINDOWED_REQUEST} B, with optimistic_data = false", format_size(request_bytes)),
                "without optimistic data the request goes as DATA cells, and the model sends at most one stream window of them \
                 (500 cells of 498 B); uploads that need SENDMEs are not modelled",
            );
        }
        TorParams {
            refill_interval: self.opt(t, p, "refill_interval", Ctx::pos_duration).unwrap_or(d.refill_interval),
            refill_phase: match t.get("refill_phase") {
                None => d.refill_phase,
                Some(v) => match self.choice(v, "tor.refill_phase", &RefillPhaseConfig::NAMES) {
                    Some("random") => RefillPhaseConfig::Random,
                    Some(_) => RefillPhaseConfig::Aligned,
                    None => d.refill_phase,
                },
            },
            link_handshake_rtts: self.opt(t, p, "link_handshake_rtts", Ctx::u32).unwrap_or(d.link_handshake_rtts),
            max_circuit_dirtiness: self.opt(t, p, "max_circuit_dirtiness", Ctx::pos_duration).unwrap_or(d.max_circuit_dirtiness),
            idle_channel_timeout: match t.get("idle_channel_timeout") {
                None => d.idle_channel_timeout,
                Some(Value::String(s)) if s.trim() == "never" => None,
                Some(v) => self.idle_channel_timeout(v, &join(p, "idle_channel_timeout")).or(d.idle_channel_timeout),
            },
            predicted_circuits: self.opt(t, p, "predicted_circuits", Ctx::boolean).unwrap_or(d.predicted_circuits),
            cbt_learning: match t.get("cbt_learning") {
                None => d.cbt_learning,
                Some(v) => {
                    let path = join(p, "cbt_learning");
                    match self.cbt_learning(v, &path) {
                        Some(Some(_)) if t.get("predicted_circuits").and_then(Value::as_bool) != Some(true) => {
                            let hint =
                                "tor launches its build-time test circuits where it predicts circuits: set predicted_circuits = true too";
                            self.err_hint(path, "needs predicted_circuits = true", hint);
                            d.cbt_learning
                        }
                        Some(c) => c,
                        None => d.cbt_learning,
                    }
                }
            },
            circuit_idle_timeout: self.opt(t, p, "circuit_idle_timeout", Ctx::pos_duration).unwrap_or(d.circuit_idle_timeout),
            circ_max_cell_queue,
            num_entry_guards,
            use_entry_guards: self.opt(t, p, "use_entry_guards", Ctx::boolean).unwrap_or(d.use_entry_guards),
            path_order,
            num_primary_guards,
            distinct_guard_subnets: self.opt(t, p, "distinct_guard_subnets", Ctx::boolean).unwrap_or(d.distinct_guard_subnets),
            channel_per_circuit: self.opt(t, p, "channel_per_circuit", Ctx::boolean).unwrap_or(d.channel_per_circuit),
            request_bytes,
            optimistic_data,
            circ_window,
            circ_window_increment,
            cell_queue_watermarks: self.cell_queue_watermarks(t, p),
            congestion_control: match t.get("congestion_control") {
                None => d.congestion_control,
                Some(v) => self.congestion_control(v, &join(p, "congestion_control")).unwrap_or(d.congestion_control),
            },
            sndbuf_bytes: self
                .opt(t, p, "sndbuf", |cx, v, path| cx.socket_buffer(v, path, MIN_SNDBUF, "SOCK_MIN_SNDBUF"))
                .unwrap_or(d.sndbuf_bytes),
            rcvbuf_bytes: self
                .opt(t, p, "rcvbuf", |cx, v, path| cx.socket_buffer(v, path, MIN_RCVBUF, "SOCK_MIN_RCVBUF"))
                .unwrap_or(d.rcvbuf_bytes),
        }
    }

    /// The network section and, for a latency matrix, its number of locations.
    fn network(&mut self, t: &Table) -> (NetworkConfig, Option<usize>) {
        let p = "network";
        self.keys(t, p, NETWORK_KEYS);
        let placeholder = LatencyConfig::Constant { one_way: SimDuration::ZERO };
        let mut locations = None;
        let example = "latency = { constant = \"20 ms\" }, or { matrix = \"latency.csv\" }, or { gml = \"topology.gml\" }";
        let latency = match self.req(t, p, "latency", Ctx::table, example) {
            None => placeholder,
            Some(lt) => {
                let lp = "network.latency";
                self.keys(lt, lp, LATENCY_KEYS);
                let given: Vec<&str> = LATENCY_KEYS.iter().copied().filter(|k| lt.contains_key(*k)).collect();
                match given.as_slice() {
                    [] => {
                        self.err_hint(lp, "needs one of `constant`, `matrix` or `gml`", example);
                        placeholder
                    }
                    ["constant"] => match self.opt(lt, lp, "constant", Ctx::duration) {
                        Some(one_way) => LatencyConfig::Constant { one_way },
                        None => placeholder,
                    },
                    ["matrix"] => match self.opt(lt, lp, "matrix", Ctx::string) {
                        Some(file) => match self.matrix(file, "network.latency.matrix") {
                            Some(one_way) => {
                                locations = Some(one_way.len());
                                LatencyConfig::Matrix { path: file.to_string(), one_way }
                            }
                            None => placeholder,
                        },
                        None => placeholder,
                    },
                    ["gml"] => match self.opt(lt, lp, "gml", Ctx::string) {
                        Some(file) => match self.read(file, "network.latency.gml") {
                            Some(text) if text.trim().is_empty() => {
                                self.err("network.latency.gml", format!("{file:?} is empty"));
                                placeholder
                            }
                            Some(text) => LatencyConfig::Gml { path: file.to_string(), text },
                            None => placeholder,
                        },
                        None => placeholder,
                    },
                    _ => {
                        self.err_hint(
                            lp,
                            format!("gives {}; exactly one latency model is allowed", given.join(" and ")),
                            "keep one of `constant`, `matrix`, `gml`",
                        );
                        placeholder
                    }
                }
            }
        };
        let bandwidth_weights = match t.get("bandwidth_weights") {
            None => None,
            Some(Value::String(v)) => match v.as_str() {
                "computed-v9" => Some(BandwidthWeightsConfig::ComputedV9),
                "computed" => Some(BandwidthWeightsConfig::Computed),
                _ => {
                    self.err_hint(
                        "network.bandwidth_weights",
                        format!("unknown value {v:?}"),
                        "give \"computed\" (what tor's directory authorities compute for these relays), \"computed-v9\" \
                         (what tor 0.2.2.10-0.2.2.16's computed) or a table of Wgg, Wgm, ...",
                    );
                    Some(BandwidthWeightsConfig::Computed)
                }
            },
            Some(v) => {
                let wp = "network.bandwidth_weights";
                self.table(v, wp).map(|wt| {
                    let mut out = BTreeMap::new();
                    for (k, v) in wt {
                        let kp = join(wp, k);
                        if !BANDWIDTH_WEIGHTS.contains(&k.as_str()) {
                            self.err_hint(&kp, format!("unknown bandwidth weight `{k}`"), suggest(k, BANDWIDTH_WEIGHTS, "Weights"));
                            continue;
                        }
                        if let Some(n) = self.uint(v, &kp, BANDWIDTH_WEIGHT_SCALE) {
                            out.insert(k.clone(), n as i64);
                        }
                    }
                    // The run builds the weights as a consensus line, which needs these.
                    let missing: Vec<&str> = REQUIRED_BANDWIDTH_WEIGHTS.iter().copied().filter(|k| !wt.contains_key(*k)).collect();
                    if !missing.is_empty() {
                        self.err_hint(
                            wp,
                            format!("missing {}", missing.join(", ")),
                            format!(
                                "a consensus bandwidth-weights line gives {}; omit the whole table for uniform weights",
                                REQUIRED_BANDWIDTH_WEIGHTS.join(", ")
                            ),
                        );
                    }
                    BandwidthWeightsConfig::Given(out)
                })
            }
        };
        let compute_flags = self.opt(t, p, "compute_flags", Ctx::boolean).unwrap_or(false);
        (NetworkConfig { latency, bandwidth_weights, compute_flags }, locations)
    }

    /// A square CSV matrix of non-negative one-way latencies in milliseconds.
    fn matrix(&mut self, file: &str, path: &str) -> Option<Vec<Vec<SimDuration>>> {
        let text = self.read(file, path)?;
        let mut rows: Vec<(usize, Vec<SimDuration>)> = Vec::new();
        let mut ok = true;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut row = Vec::new();
            for (j, cell) in line.split(',').enumerate() {
                let cell = cell.trim();
                match cell.parse::<f64>() {
                    Ok(ms) if (0.0..1e12).contains(&ms) => row.push(SimDuration::from_nanos((ms * 1e6).round() as u64)),
                    _ => {
                        self.err_hint(
                            path,
                            format!("{file} line {}, column {}: {cell:?} is not a non-negative number of milliseconds", i + 1, j + 1),
                            "the matrix is comma-separated one-way latencies in ms, one row per location, no header",
                        );
                        ok = false;
                    }
                }
            }
            rows.push((i + 1, row));
        }
        if !ok {
            return None;
        }
        if rows.is_empty() {
            self.err_hint(path, format!("{file} has no rows"), "one row of comma-separated milliseconds per location");
            return None;
        }
        let n = rows.len();
        for (line, row) in &rows {
            if row.len() != n {
                self.err_hint(
                    path,
                    format!("{file} line {line}: {} values, but the matrix has {n} rows; it must be square", row.len()),
                    "entry (i, j) is the one-way latency from location i to location j",
                );
                ok = false;
            }
        }
        ok.then(|| rows.into_iter().map(|(_, r)| r).collect())
    }

    fn check_location(&mut self, loc: u32, path: &str, locations: Option<usize>) {
        if let Some(n) = locations {
            if loc as usize >= n {
                self.err_hint(
                    path,
                    format!("location {loc} does not exist: the latency matrix has {n} locations"),
                    format!("use a location from 0 to {}", n.saturating_sub(1)),
                );
            }
        }
    }

    fn relays(&mut self, root: &Table, locations: Option<usize>) -> Vec<RelayConfig> {
        let mut out = Vec::new();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        // Whether some relay source was present but broken, so "no relays" would be noise.
        let mut broken = false;
        if let Some(v) = root.get("relays") {
            match self.relay_list(v, "relays", &mut names, locations) {
                Some(mut rs) => out.append(&mut rs),
                None => broken = true,
            }
        }
        if let Some(v) = root.get("relays_file") {
            broken |= !self.relays_file(v, &mut out, &mut names, locations);
        }
        if out.is_empty() {
            if !broken {
                self.err_hint(
                    "relays",
                    "no relays: at least one is required",
                    "add [[relays]] tables, or relays_file = \"relays.toml\" naming a file of them",
                );
            }
            return out;
        }
        let has = |r: &RelayConfig, f: &str| r.flags.iter().any(|x| x == f);
        if !out.iter().any(|r| has(r, "Guard") && has(r, "Fast")) {
            self.err_hint(
                "relays",
                "no relay has both the Guard and Fast flags, so no circuit can pick an entry",
                "add flags = [\"Guard\", \"Fast\"] to at least one relay",
            );
        }
        if !out.iter().any(|r| has(r, "Exit") && has(r, "Fast")) {
            self.err_hint(
                "relays",
                "no relay has both the Exit and Fast flags, so no circuit can pick an exit",
                "add flags = [\"Exit\", \"Fast\"] to at least one relay",
            );
        }
        // Path selection never picks a relay of weight 0 (tor would pick uniformly when a
        // position's weights are all 0; `onionlab_tor::path` documents why we do not), so
        // a position whose candidates all weigh 0 fails every circuit: say so now, not as a
        // client's path error at run time. The middle is left to that error: whether a
        // weighted relay is left for it depends on the guard and exit a path took.
        for (flag, position) in [("Guard", "an entry"), ("Exit", "an exit")] {
            let mut candidates = out.iter().filter(|r| has(r, flag) && has(r, "Fast")).peekable();
            if candidates.peek().is_some() && candidates.all(|r| r.consensus_weight == 0) {
                self.err_hint(
                    "relays",
                    format!("every relay with the {flag} and Fast flags has consensus_weight = 0, so no circuit can pick {position}"),
                    "give at least one of them a positive consensus_weight, or leave the key out: it defaults to the bandwidth in KiB/s",
                );
            }
        }
        out
    }

    /// Returns whether the file gave usable relays (false if it failed, already reported).
    fn relays_file(
        &mut self,
        v: &Value,
        out: &mut Vec<RelayConfig>,
        names: &mut BTreeMap<String, String>,
        locations: Option<usize>,
    ) -> bool {
        let Some(file) = self.string(v, "relays_file") else { return false };
        let Some(text) = self.read(file, "relays_file") else { return false };
        let t = match text.parse::<Table>() {
            Ok(t) => t,
            Err(e) => {
                let e = syntax_error("relays_file", Some(file), &text, &e);
                self.errors.push(e);
                return false;
            }
        };
        self.keys(&t, "relays_file:", &["relays"]);
        match t.get("relays") {
            None => {
                self.err_hint(
                    "relays_file",
                    format!("{file:?} has no [[relays]] tables"),
                    "the file holds [[relays]] tables like the main config's",
                );
                false
            }
            Some(v) => match self.relay_list(v, "relays_file:relays", names, locations) {
                Some(mut rs) => {
                    out.append(&mut rs);
                    true
                }
                None => false,
            },
        }
    }

    fn relay_list(
        &mut self,
        v: &Value,
        path: &str,
        names: &mut BTreeMap<String, String>,
        locations: Option<usize>,
    ) -> Option<Vec<RelayConfig>> {
        let Value::Array(a) = v else {
            self.err_hint(
                path,
                format!("expected an array of [[relays]] tables, found {}", describe(v)),
                "write each relay as a [[relays]] table",
            );
            return None;
        };
        let mut out = Vec::new();
        for (i, rv) in a.iter().enumerate() {
            let rp = format!("{path}[{i}]");
            if let Some(rt) = self.table(rv, &rp) {
                out.push(self.relay(rt, &rp, names, locations));
            }
        }
        Some(out)
    }

    /// One relay. The default access link is twice the relay's rate, and at least 10 Mbit:
    /// fast enough that the token bucket, not the link, is what limits a relay by default.
    fn relay(&mut self, t: &Table, p: &str, names: &mut BTreeMap<String, String>, locations: Option<usize>) -> RelayConfig {
        self.keys(t, p, RELAY_KEYS);
        let name = self.req(t, p, "name", Ctx::string, "name = \"relay1\"").unwrap_or("");
        if name.is_empty() && t.contains_key("name") {
            self.err(join(p, "name"), "must not be empty");
        }
        if !name.is_empty() {
            if let Some(first) = names.get(name) {
                let msg = format!("duplicate relay name {name:?} (also at {first})");
                self.err_hint(join(p, "name"), msg, "relay names must be unique");
            } else {
                names.insert(name.to_string(), p.to_string());
            }
        }
        let rate = self.req(t, p, "bandwidth", Ctx::byte_rate, "bandwidth = \"5 MiB/s\": the relay's BandwidthRate");
        let burst = self.opt(t, p, "burst", Ctx::pos_size).or(rate).unwrap_or(0);
        let default_link = rate.map_or(MIN_DEFAULT_RELAY_LINK, |r| r.saturating_mul(16).max(MIN_DEFAULT_RELAY_LINK));
        let (link_up, link_down) = self.links(t, p, default_link, default_link);
        let flags = self.flags(t, p);
        let consensus_weight = self.opt(t, p, "consensus_weight", Ctx::u64).unwrap_or_else(|| (rate.unwrap_or(0) / 1024).max(1));
        let location = self.opt(t, p, "location", Ctx::u32).unwrap_or(0);
        self.check_location(location, &join(p, "location"), locations);
        let perconn = match t.get("perconn") {
            None => None,
            Some(v) => {
                let pp = join(p, "perconn");
                self.table(v, &pp).and_then(|pt| {
                    self.keys(pt, &pp, &["rate", "burst"]);
                    let example = "perconn = { rate = \"50 KiB/s\", burst = \"2 MiB\" }";
                    let r = self.req(pt, &pp, "rate", Ctx::byte_rate, example);
                    let b = self.req(pt, &pp, "burst", Ctx::pos_size, example);
                    Some((r?, b?))
                })
            }
        };
        for (n, key) in self.relays_setting_own.iter_mut().zip(RELAY_DEFAULTS) {
            *n += usize::from(t.contains_key(key));
        }
        let scheduler = self.opt(t, p, "scheduler", Ctx::scheduler).unwrap_or(self.default_scheduler);
        let throttling = self.opt(t, p, "throttling", Ctx::throttling).unwrap_or(self.default_throttling);
        let tortoise = match t.get("tortoise") {
            None => self.default_tortoise,
            Some(v) => self.tortoise(v, &join(p, "tortoise")).unwrap_or(None),
        };
        let mtbf = self.opt(t, p, "mtbf", Ctx::pos_duration);
        let address = self.opt(t, p, "address", Ctx::ipv4);
        RelayConfig {
            tortoise,
            mtbf,
            address,
            scheduler,
            throttling,
            name: name.to_string(),
            bandwidth_rate: rate.unwrap_or(0),
            bandwidth_burst: burst,
            link_up,
            link_down,
            consensus_weight,
            flags,
            location,
            perconn,
        }
    }

    fn flags(&mut self, t: &Table, p: &str) -> Vec<String> {
        let fp = join(p, "flags");
        let Some(v) = t.get("flags") else { return Vec::new() };
        let Some(a) = self.array(v, &fp) else { return Vec::new() };
        let mut out: Vec<String> = Vec::new();
        for (i, f) in a.iter().enumerate() {
            let ip = format!("{fp}[{i}]");
            let Some(s) = self.string(f, &ip) else { continue };
            if !KNOWN_FLAGS.contains(&s) {
                self.err_hint(&ip, format!("unknown flag {s:?}"), suggest(s, KNOWN_FLAGS, "Known flags"));
            } else if out.iter().any(|x| x == s) {
                self.err(&ip, format!("flag {s:?} is listed twice"));
            } else {
                out.push(s.to_string());
            }
        }
        out
    }

    /// A relay's IPv4 address in dotted-quad form.
    fn ipv4(&mut self, v: &Value, path: &str) -> Option<std::net::Ipv4Addr> {
        let s = self.string(v, path)?;
        match s.trim().parse() {
            Ok(a) => Some(a),
            Err(_) => {
                self.err_hint(
                    path,
                    format!("{s:?} is not an IPv4 address"),
                    "write it as four numbers 0-255, e.g. address = \"192.0.2.7\"",
                );
                None
            }
        }
    }

    /// `link` sets both directions; `link_up` / `link_down` override one.
    fn links(&mut self, t: &Table, p: &str, default_up: u64, default_down: u64) -> (u64, u64) {
        let both = self.opt(t, p, "link", Ctx::bits);
        if both.is_some() && t.contains_key("link_up") && t.contains_key("link_down") {
            // Each direction's own key wins, so `link` would change nothing (an override of
            // it on tiny.toml's clients once ran unchanged).
            self.err_hint(
                join(p, "link"),
                "changes nothing: link_up and link_down are both set, and each direction's own key wins",
                "set link_up and link_down, or link alone",
            );
        }
        let up = self.opt(t, p, "link_up", Ctx::bits).or(both).unwrap_or(default_up);
        let down = self.opt(t, p, "link_down", Ctx::bits).or(both).unwrap_or(default_down);
        (up, down)
    }

    fn placement(&mut self, v: &Value, path: &str) -> Option<Placement> {
        let hint =
            "placement = \"round_robin\", a location number such as placement = 0, or a list of locations such as placement = [0, 2]";
        match v {
            Value::String(s) if s == "round_robin" => Some(Placement::RoundRobin),
            Value::String(s) => {
                self.err_hint(path, format!("unknown placement {s:?}"), hint);
                None
            }
            Value::Integer(_) => self.u32(v, path).map(Placement::At),
            Value::Array(items) if items.is_empty() => {
                self.err_hint(path, "an empty list places no host", hint);
                None
            }
            Value::Array(items) => {
                let locs: Vec<Option<u32>> = items.iter().enumerate().map(|(i, x)| self.u32(x, &format!("{path}[{i}]"))).collect();
                locs.into_iter().collect::<Option<Vec<u32>>>().map(Placement::Cycle)
            }
            other => {
                self.err_hint(
                    path,
                    format!("expected \"round_robin\", a location number or a list of them, found {}", describe(other)),
                    hint,
                );
                None
            }
        }
    }

    fn placement_field(&mut self, t: &Table, p: &str, default: Placement, locations: Option<usize>) -> Placement {
        let pl = self.opt(t, p, "placement", Ctx::placement).unwrap_or(default);
        match &pl {
            Placement::At(loc) => self.check_location(*loc, &join(p, "placement"), locations),
            Placement::Cycle(locs) => {
                for (i, loc) in locs.iter().enumerate() {
                    self.check_location(*loc, &format!("{}[{i}]", join(p, "placement")), locations);
                }
            }
            Placement::RoundRobin => {}
        }
        pl
    }

    fn count(&mut self, v: &Value, path: &str) -> Option<u32> {
        match self.u32(v, path)? {
            0 => {
                self.err_hint(path, "must be at least 1", "remove the group instead of giving it no hosts");
                None
            }
            n => Some(n),
        }
    }

    fn clients(&mut self, v: Option<&Value>, workloads: &[&str], locations: Option<usize>, duration: SimDuration) -> Vec<ClientGroup> {
        let p = "clients";
        let example = "add a [[clients]] table with name, workload and count";
        let Some(v) = v else {
            self.err_hint(p, "no client groups: at least one is required", example);
            return Vec::new();
        };
        let Value::Array(a) = v else {
            self.err_hint(p, format!("expected an array of [[clients]] tables, found {}", describe(v)), example);
            return Vec::new();
        };
        if a.is_empty() {
            self.err_hint(p, "no client groups: at least one is required", example);
        }
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        let mut out = Vec::new();
        for (i, cv) in a.iter().enumerate() {
            let cp = format!("{p}[{i}]");
            let Some(t) = self.table(cv, &cp) else { continue };
            self.keys(t, &cp, CLIENT_KEYS);
            let name = self.req(t, &cp, "name", Ctx::string, "name = \"web\": the client class in results").unwrap_or("");
            if name.is_empty() && t.contains_key("name") {
                self.err(join(&cp, "name"), "must not be empty");
            }
            if !name.is_empty() {
                if let Some(first) = names.get(name) {
                    let msg = format!("duplicate client group name {name:?} (also at {first})");
                    self.err_hint(join(&cp, "name"), msg, "group names are the client classes in results; make them unique");
                } else {
                    names.insert(name.to_string(), cp.clone());
                }
            }
            let workload = self.req(t, &cp, "workload", Ctx::string, "workload = \"web\": a key of [workloads]").unwrap_or("");
            if t.contains_key("workload") && !workload.is_empty() && !workloads.contains(&workload) {
                let hint = if workloads.is_empty() {
                    format!("no workloads are defined; add a [workloads.{workload}] table")
                } else {
                    suggest(workload, workloads, "Defined workloads")
                };
                self.err_hint(join(&cp, "workload"), format!("workload {workload:?} is not defined in [workloads]"), hint);
            }
            let count = self.req(t, &cp, "count", Ctx::count, "count = 10: the number of clients in the group").unwrap_or(1);
            let (link_up, link_down) = self.links(t, &cp, DEFAULT_CLIENT_UP, DEFAULT_CLIENT_DOWN);
            let placement = self.placement_field(t, &cp, Placement::At(0), locations);
            let relay_operators = t.get("relay_operators").and_then(|v| self.relay_operators(v, &join(&cp, "relay_operators"), count));
            let path = t.get("path").and_then(|v| self.relay_path(v, &join(&cp, "path")));
            let service =
                t.get("service").map_or(Some("normal"), |v| self.choice(v, &join(&cp, "service"), SERVICE_CLASSES)).unwrap_or("normal");
            let start = self.opt(t, &cp, "start", Ctx::duration).unwrap_or(SimDuration::ZERO);
            if start >= duration && t.contains_key("start") {
                self.err_hint(
                    join(&cp, "start"),
                    format!("start ({}) must be before the end of the run ({})", format_duration(start), format_duration(duration)),
                    "the group's clients would never act; start them earlier or lengthen the run",
                );
            }
            let start_spread = self.opt(t, &cp, "start_spread", Ctx::pos_duration);
            out.push(ClientGroup {
                name: name.to_string(),
                workload: workload.to_string(),
                count,
                link_up,
                link_down,
                placement,
                relay_operators,
                service,
                path,
                start,
                start_spread,
            });
        }
        out
    }

    fn servers(&mut self, t: &Table, locations: Option<usize>) -> ServerGroup {
        let p = "servers";
        self.keys(t, p, SERVER_KEYS);
        let count = self.opt(t, p, "count", Ctx::count).unwrap_or(DEFAULT_SERVER_COUNT);
        let (link_up, link_down) = self.links(t, p, DEFAULT_SERVER_LINK, DEFAULT_SERVER_LINK);
        let placement = self.placement_field(t, p, Placement::RoundRobin, locations);
        ServerGroup { count, link_up, link_down, placement }
    }

    fn workloads(&mut self, t: Option<&Table>) -> BTreeMap<String, Workload> {
        let mut out = BTreeMap::new();
        let Some(t) = t else { return out };
        for (name, v) in t {
            let p = join("workloads", name);
            let Some(wt) = self.table(v, &p) else { continue };
            let ty = self.req(wt, &p, "type", Ctx::string, "type = \"web\" (or \"bulk\", \"perf\")");
            let w = match ty {
                Some("web") => {
                    self.keys(wt, &p, &["type", "size", "think", "session"]);
                    let size = self.req(wt, &p, "size", Ctx::size_dist, "size = \"320 KiB\"");
                    let think = self.opt(wt, &p, "think", Ctx::time_dist).unwrap_or_else(default_think_time);
                    let session = match wt.get("session") {
                        None => Some(None),
                        Some(v) => {
                            let sp = join(&p, "session");
                            let example =
                                "session = { length = \"15 min\", pause = { dist = \"uniform\", min = \"9 min\", max = \"11 min\" } }";
                            self.table(v, &sp).and_then(|st| {
                                self.keys(st, &sp, &["length", "pause"]);
                                let length = self.req(st, &sp, "length", Ctx::pos_duration, example);
                                let pause = self.req(st, &sp, "pause", Ctx::time_dist, example);
                                Some(Some(Session { length: length?, pause: pause? }))
                            })
                        }
                    };
                    match (size, session) {
                        (Some(size), Some(session)) => Some(Workload::Web { size, think, session }),
                        _ => None,
                    }
                }
                Some("bulk") => {
                    self.keys(wt, &p, &["type", "size"]);
                    let size = self.req(wt, &p, "size", Ctx::size_dist, "size = \"5 MiB\"");
                    size.map(|size| Workload::Bulk { size })
                }
                Some("perf") => {
                    self.keys(wt, &p, &["type", "size", "pause"]);
                    let size = self.opt(wt, &p, "size", Ctx::size_dist).unwrap_or_else(default_perf_sizes);
                    let pause = self.req(wt, &p, "pause", Ctx::time_dist, "pause = \"60 s\": the wait after each download");
                    pause.map(|pause| Workload::Perf { size, pause })
                }
                Some("markov") => self.markov_workload(wt, &p),
                Some(other) => {
                    self.err_hint(join(&p, "type"), format!("unknown workload type {other:?}"), suggest(other, WORKLOAD_TYPES, "Types"));
                    None
                }
                None => None,
            };
            if let Some(w) = w {
                out.insert(name.clone(), w);
            }
        }
        out
    }

    /// `type = "markov"`: PrivCount stream and packet models (see [`crate::markov`]).
    fn markov_workload(&mut self, wt: &Table, p: &str) -> Option<Workload> {
        self.keys(wt, p, &["type", "stream_model", "packet_model", "packet_size", "pause"]);
        let model = |cx: &mut Ctx<'_>, key: &str, required: &[&str]| -> Option<crate::markov::MarkovModel> {
            let example = format!("{key} = \"{key}.json\": a tgen Markov model in networkx node-link JSON");
            let file = cx.req(wt, p, key, Ctx::string, &example)?;
            let kp = join(p, key);
            let text = cx.read(file, &kp)?;
            match crate::markov::MarkovModel::parse(&text, file, required) {
                Ok(m) => Some(m),
                Err(e) => {
                    cx.err_hint(kp, e, "see docs/generate.md for the model format (data/traffic/ has PrivCount's)");
                    None
                }
            }
        };
        let stream_model = model(self, "stream_model", &["$", "F"]);
        let packet_model = model(self, "packet_model", &["-", "+", "F"]);
        let packet_bytes = self.opt(wt, p, "packet_size", Ctx::pos_size).unwrap_or(DEFAULT_MARKOV_PACKET);
        let pause = self.opt(wt, p, "pause", Ctx::time_dist).unwrap_or_else(default_markov_pause);
        Some(Workload::Markov { stream_model: stream_model?, packet_model: packet_model?, packet_bytes, pause })
    }

    /// The `dist` of a distribution table, checked against `dists`.
    fn dist_kind<'v>(&mut self, t: &'v Table, p: &str, dists: &[&str], example: &str) -> Option<&'v str> {
        let d = self.req(t, p, "dist", Ctx::string, example)?;
        if !dists.contains(&d) {
            self.err_hint(join(p, "dist"), format!("unknown distribution {d:?}"), suggest(d, dists, "Distributions here"));
            return None;
        }
        Some(d)
    }

    fn size_dist(&mut self, v: &Value, p: &str) -> Option<SizeDist> {
        let example = "size = \"320 KiB\" or size = { dist = \"uniform\", min = \"100 KiB\", max = \"1 MiB\" }";
        let t = match v {
            Value::Table(t) => t,
            _ => return self.pos_size(v, p).map(|bytes| SizeDist::Fixed { bytes }),
        };
        match self.dist_kind(t, p, SIZE_DISTS, example)? {
            "fixed" => {
                self.keys(t, p, &["dist", "value"]);
                let bytes = self.req(t, p, "value", Ctx::pos_size, "{ dist = \"fixed\", value = \"320 KiB\" }")?;
                Some(SizeDist::Fixed { bytes })
            }
            "uniform" => {
                self.keys(t, p, &["dist", "min", "max"]);
                let min = self.req(t, p, "min", Ctx::pos_size, example);
                let max = self.req(t, p, "max", Ctx::pos_size, example);
                let (min, max) = (min?, max?);
                if min > max {
                    self.err_hint(join(p, "min"), format!("min ({min} B) is larger than max ({max} B)"), "swap them");
                    return None;
                }
                Some(SizeDist::Uniform { min, max })
            }
            _ => {
                self.keys(t, p, &["dist", "sizes", "weights"]);
                let example = "{ dist = \"choice\", sizes = [\"50 KiB\", \"1 MiB\"], weights = [12, 2] }";
                let sizes = self.req(t, p, "sizes", Ctx::array, example);
                let weights = self.req(t, p, "weights", Ctx::array, example);
                let (sizes, weights) = (sizes?, weights?);
                let sp = join(p, "sizes");
                let wp = join(p, "weights");
                if sizes.is_empty() {
                    self.err_hint(&sp, "needs at least one size", example);
                }
                if sizes.len() != weights.len() {
                    self.err_hint(&wp, format!("{} weights for {} sizes", weights.len(), sizes.len()), "give one weight per size");
                }
                let before = self.errors.len();
                let sizes: Vec<u64> = sizes.iter().enumerate().filter_map(|(i, s)| self.pos_size(s, &format!("{sp}[{i}]"))).collect();
                let weights: Vec<f64> = weights
                    .iter()
                    .enumerate()
                    .filter_map(|(i, w)| {
                        let ip = format!("{wp}[{i}]");
                        match self.float(w, &ip)? {
                            x if x > 0.0 => Some(x),
                            x => {
                                self.err_hint(&ip, format!("weight {x} must be positive"), "drop the size instead");
                                None
                            }
                        }
                    })
                    .collect();
                (self.errors.len() == before && !sizes.is_empty() && sizes.len() == weights.len())
                    .then_some(SizeDist::Choice { sizes, weights })
            }
        }
    }

    fn time_dist(&mut self, v: &Value, p: &str) -> Option<TimeDist> {
        let example = "\"20 s\" or { dist = \"lognormal\", median = \"5 s\", sigma = 1.25 }";
        let t = match v {
            Value::Table(t) => t,
            _ => return self.duration(v, p).map(|value| TimeDist::Fixed { value }),
        };
        let pos = |cx: &mut Ctx<'_>, key: &str, ex: &str| cx.req(t, p, key, Ctx::pos_duration, ex);
        let positive_float = |cx: &mut Ctx<'_>, key: &str, ex: &str| -> Option<f64> {
            let x = cx.req(t, p, key, Ctx::float, ex)?;
            if x <= 0.0 {
                cx.err_hint(join(p, key), format!("must be positive, found {x}"), ex.to_string());
                return None;
            }
            Some(x)
        };
        match self.dist_kind(t, p, TIME_DISTS, example)? {
            "fixed" => {
                self.keys(t, p, &["dist", "value"]);
                let value = self.req(t, p, "value", Ctx::duration, "{ dist = \"fixed\", value = \"20 s\" }")?;
                Some(TimeDist::Fixed { value })
            }
            "uniform" => {
                self.keys(t, p, &["dist", "min", "max"]);
                let ex = "{ dist = \"uniform\", min = \"1 s\", max = \"20 s\" }";
                let min = self.req(t, p, "min", Ctx::duration, ex);
                let max = self.req(t, p, "max", Ctx::duration, ex);
                let (min, max) = (min?, max?);
                if min > max {
                    let msg = format!("min ({}) is larger than max ({})", format_duration(min), format_duration(max));
                    self.err_hint(join(p, "min"), msg, "swap them");
                    return None;
                }
                Some(TimeDist::Uniform { min, max })
            }
            "exponential" => {
                self.keys(t, p, &["dist", "mean"]);
                let mean = pos(self, "mean", "{ dist = \"exponential\", mean = \"11 s\" }")?;
                Some(TimeDist::Exponential { mean })
            }
            "lognormal" => {
                self.keys(t, p, &["dist", "median", "sigma"]);
                let ex = "{ dist = \"lognormal\", median = \"5 s\", sigma = 1.25 }";
                let median = pos(self, "median", ex);
                let sigma = positive_float(self, "sigma", ex);
                Some(TimeDist::LogNormal { median: median?, sigma: sigma? })
            }
            "pareto" => {
                self.keys(t, p, &["dist", "scale", "alpha"]);
                let ex = "{ dist = \"pareto\", scale = \"1 s\", alpha = 1.5 }";
                let scale = pos(self, "scale", ex);
                let alpha = positive_float(self, "alpha", ex);
                Some(TimeDist::Pareto { scale: scale?, alpha: alpha? })
            }
            _ => {
                self.keys(t, p, &["dist", "file"]);
                let file = self.req(t, p, "file", Ctx::string, "{ dist = \"empirical\", file = \"think.csv\" }")?;
                let points = self.empirical(file, &join(p, "file"))?;
                Some(TimeDist::Empirical { path: file.to_string(), points })
            }
        }
    }

    /// An empirical CDF: lines `seconds,cumulative_probability`, both non-decreasing,
    /// seconds >= 0, probabilities in [0, 1] ending at 1. Blank and `#` lines are skipped.
    fn empirical(&mut self, file: &str, path: &str) -> Option<Vec<(f64, f64)>> {
        let text = self.read(file, path)?;
        let hint = "each line is \"seconds,cumulative_probability\", both non-decreasing, ending at probability 1";
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = i + 1;
            let parts: Vec<&str> = line.split(',').map(str::trim).collect();
            let parsed = match parts.as_slice() {
                [s, p] => s.parse::<f64>().ok().zip(p.parse::<f64>().ok()),
                _ => None,
            };
            let Some((s, p)) = parsed else {
                self.err_hint(path, format!("{file} line {n}: expected \"seconds,probability\", found {line:?}"), hint);
                return None;
            };
            let problem = if !s.is_finite() || s < 0.0 {
                Some(format!("seconds {s} must be a non-negative number"))
            } else if !(0.0..=1.0).contains(&p) {
                Some(format!("probability {p} is outside [0, 1]"))
            } else if let Some(&(ps, pp)) = points.last() {
                if s < ps {
                    Some(format!("seconds {s} is smaller than the previous line's {ps}"))
                } else if p < pp {
                    Some(format!("probability {p} is smaller than the previous line's {pp}"))
                } else {
                    None
                }
            } else {
                None
            };
            if let Some(problem) = problem {
                self.err_hint(path, format!("{file} line {n}: {problem}"), hint);
                return None;
            }
            points.push((s, p));
            last_line = n;
        }
        match points.last() {
            None => {
                self.err_hint(path, format!("{file} has no data lines"), hint);
                None
            }
            Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => {
                self.err_hint(path, format!("{file} line {last_line}: the last probability is {p}, it must be 1"), hint);
                None
            }
            Some(_) => Some(points),
        }
    }

    fn mechanisms(&mut self, t: &Table) -> Mechanisms {
        let p = "mechanisms";
        self.keys(t, p, &["scheduler", "throttling", "tortoise", "braids", "predictor"]);
        let scheduler = self.opt(t, p, "scheduler", Ctx::scheduler).unwrap_or(SchedulerConfig::RoundRobin);
        let throttling = self.opt(t, p, "throttling", Ctx::throttling).unwrap_or(ThrottlingConfig::None);
        let tortoise = t.get("tortoise").and_then(|v| self.tortoise(v, "mechanisms.tortoise")).flatten();
        let braids = t.get("braids").and_then(|v| self.braids(v, "mechanisms.braids")).flatten();
        let predictor = t.get("predictor").and_then(|v| self.predictor(v, "mechanisms.predictor")).flatten();
        Mechanisms { scheduler, throttling, tortoise, braids, predictor }
    }

    /// PredicTor: `"off"`, or a table of the controller's parameters, each with the paper's
    /// or its authors' code's default (`onionlab_mech::predictor`).
    fn predictor(&mut self, v: &Value, p: &str) -> Option<Option<PredictorConfig>> {
        let example = "predictor = { dt = \"40 ms\", horizon = 10 }, or \"off\"";
        let Some(t) = self.off_or_table(v, p, example)? else { return Some(None) };
        self.keys(t, p, &["dt", "horizon", "discount", "s_max", "capacity_fraction", "r_max", "slack_penalty", "successor_shift"]);
        let dt = self.opt(t, p, "dt", Ctx::pos_duration);
        let horizon = self.opt(t, p, "horizon", Ctx::u32).and_then(|n| {
            if n == 0 || n > 100 {
                self.err_hint(join(p, "horizon"), format!("must be between 1 and 100, found {n}"), "the paper's is 10");
            }
            (1..=100).contains(&n).then_some(n)
        });
        let discount = self.opt(t, p, "discount", Ctx::unit_fraction);
        let s_max = self.opt(t, p, "s_max", |c, v, path| {
            let x = c.float(v, path)?;
            if x <= 0.0 {
                c.err(path, format!("must be positive, found {x}"));
                return None;
            }
            Some(x)
        });
        let fraction = self.opt(t, p, "capacity_fraction", Ctx::unit_fraction);
        let r_max = self.opt(t, p, "r_max", |c, v, path| match v {
            Value::String(s) if s.trim() == "network" => Some(PredictorRMax::Network),
            Value::String(s) if s.trim() == "relay" => Some(PredictorRMax::Relay),
            Value::String(s) => {
                c.err_hint(
                    path,
                    format!("unknown value {s:?}"),
                    "\"network\" (the largest capacity, the paper's Theorem 1), \"relay\" (each relay's own, the authors' code), or cells/s",
                );
                None
            }
            _ => {
                let x = c.float(v, path)?;
                if x <= 0.0 {
                    c.err(path, format!("must be positive (cells/s), found {x}"));
                    return None;
                }
                Some(PredictorRMax::Cells(x))
            }
        });
        let slack_penalty = self.opt(t, p, "slack_penalty", |c, v, path| {
            let x = c.float(v, path)?;
            if x <= 0.0 {
                c.err(path, format!("must be positive, found {x}"));
                return None;
            }
            Some(x)
        });
        let successor_shift = self.opt(t, p, "successor_shift", Ctx::u32);
        if let (Some(shift), n) = (successor_shift, horizon.unwrap_or(10)) {
            if shift > n {
                self.err_hint(
                    join(p, "successor_shift"),
                    format!("must be at most the horizon ({n}), found {shift}"),
                    "0 (the paper's (13) as written, the default) or 2 (the authors' code)",
                );
                return None;
            }
        }
        let parsed = [
            ("dt", dt.is_some()),
            ("horizon", horizon.is_some()),
            ("discount", discount.is_some()),
            ("s_max", s_max.is_some()),
            ("capacity_fraction", fraction.is_some()),
            ("r_max", r_max.is_some()),
            ("slack_penalty", slack_penalty.is_some()),
            ("successor_shift", successor_shift.is_some()),
        ];
        if parsed.iter().any(|&(k, ok)| t.contains_key(k) && !ok) {
            return None;
        }
        Some(Some(PredictorConfig {
            dt: dt.unwrap_or(SimDuration::from_millis(40)),
            horizon: horizon.unwrap_or(10),
            discount: discount.unwrap_or(1.0 / 3.0),
            s_max: s_max.unwrap_or(100.0),
            capacity_fraction: fraction.unwrap_or(0.85),
            r_max: r_max.unwrap_or(PredictorRMax::Network),
            slack_penalty: slack_penalty.unwrap_or(1e5),
            successor_shift: successor_shift.unwrap_or(0),
        }))
    }

    /// BRAIDS: `"off"`, or a table of the ticket economy's parameters, each defaulting to
    /// the paper's value (`onionlab_mech::braids`). `Some(None)` is a valid "off".
    fn braids(&mut self, v: &Value, p: &str) -> Option<Option<BraidsConfig>> {
        let example = "braids = { spending_interval = \"10 min\", free_tickets = 3, free_period = \"10 min\" }, or \"off\"";
        let Some(t) = self.off_or_table(v, p, example)? else { return Some(None) };
        self.keys(
            t,
            p,
            &[
                "ticket_cells",
                "free_tickets",
                "free_period",
                "spending_interval",
                "tax",
                "low_latency_limit",
                "low_latency_window",
                "free_tickets_need_exchange",
            ],
        );
        let ticket_cells = self.opt(t, p, "ticket_cells", Ctx::u32).and_then(|n| {
            if n == 0 {
                self.err_hint(join(p, "ticket_cells"), "must be at least 1", "the paper's ticket is worth 128 KiB: 256 cells");
            }
            (n > 0).then_some(n)
        });
        let free_tickets = self.opt(t, p, "free_tickets", Ctx::u32);
        let free_period = self.opt(t, p, "free_period", Ctx::pos_duration);
        let spending_interval = self.opt(t, p, "spending_interval", Ctx::pos_duration);
        let tax = self.opt(t, p, "tax", |c, v, path| c.float_in(v, path, 0.0, 1.0));
        let limit = self.opt(t, p, "low_latency_limit", Ctx::u64);
        let window = self.opt(t, p, "low_latency_window", Ctx::pos_duration);
        let need = self.opt(t, p, "free_tickets_need_exchange", Ctx::boolean);
        // A key that is present and did not parse has been reported.
        let parsed = [
            ("ticket_cells", ticket_cells.is_some()),
            ("free_tickets", free_tickets.is_some()),
            ("free_period", free_period.is_some()),
            ("spending_interval", spending_interval.is_some()),
            ("tax", tax.is_some()),
            ("low_latency_limit", limit.is_some()),
            ("low_latency_window", window.is_some()),
            ("free_tickets_need_exchange", need.is_some()),
        ];
        if parsed.iter().any(|&(k, ok)| t.contains_key(k) && !ok) {
            return None;
        }
        let (ticket_cells, free_tickets) = (ticket_cells.unwrap_or(256), free_tickets.unwrap_or(3));
        if free_tickets == 0 && limit.is_none() {
            // The paper's threshold would be 0: a silent trap, not a setting anyone means.
            self.err_hint(
                join(p, "low_latency_limit"),
                "the default, a spending interval's free tickets in cells, is 0 with free_tickets = 0: every low-latency cell would be demoted to normal and still paid for",
                "give low_latency_limit (cells per circuit per relay per low_latency_window), e.g. 110592, the paper's 432 tickets of 256 cells",
            );
            return None;
        }
        let free_period = free_period.unwrap_or(SimDuration::from_secs(600));
        let spending_interval = spending_interval.unwrap_or(SimDuration::from_secs(86_400));
        // The paper's low-latency threshold: a spending interval's free tickets, in cells
        // (`onionlab_mech::BraidsParams::default_low_latency_limit`, which this crate cannot call).
        let handouts = spending_interval.as_nanos().div_ceil(free_period.as_nanos());
        Some(Some(BraidsConfig {
            ticket_cells,
            free_tickets,
            free_period,
            spending_interval,
            tax: tax.unwrap_or(0.0),
            low_latency_limit: limit.unwrap_or(handouts * free_tickets as u64 * ticket_cells as u64),
            low_latency_window: window.unwrap_or(spending_interval),
            free_tickets_need_exchange: need.unwrap_or(false),
        }))
    }

    /// A client group's fixed path: three relay names (guard, middle, exit).
    fn relay_path(&mut self, v: &Value, p: &str) -> Option<Vec<String>> {
        let hint = "path = [\"guard1\", \"middle1\", \"exit1\"]: the relays every circuit of the group takes, in order";
        match v {
            Value::Array(a) if a.len() == 3 => {
                let names: Vec<Option<&str>> = a.iter().enumerate().map(|(j, x)| self.string(x, &format!("{p}[{j}]"))).collect();
                names.into_iter().map(|n| n.map(str::to_string)).collect()
            }
            other => {
                self.err_hint(p, format!("expected an array of three relay names, found {}", describe(other)), hint);
                None
            }
        }
    }

    /// A mechanism's value: `"off"` (`Some(None)`), or its table (`Some(Some(t))`);
    /// anything else is reported with `example` and gives `None`.
    fn off_or_table<'v>(&mut self, v: &'v Value, p: &str, example: &str) -> Option<Option<&'v Table>> {
        match v {
            Value::String(s) if s == "off" => Some(None),
            Value::Table(t) => Some(Some(t)),
            other => {
                self.err_hint(p, format!("expected \"off\" or a table, found {}", describe(other)), example);
                None
            }
        }
    }

    /// A number in (0, 1].
    fn unit_fraction(&mut self, v: &Value, path: &str) -> Option<f64> {
        let x = self.float(v, path)?;
        if !(x > 0.0 && x <= 1.0) {
            self.err(path, format!("must be positive and at most 1, found {x}"));
            return None;
        }
        Some(x)
    }

    /// Tortoise: `"off"`, or `{ rate, burst, directions, check_interval, limit_unit }`. `Some(None)` is
    /// a valid "off"; `None` an error (reported).
    fn tortoise(&mut self, v: &Value, p: &str) -> Option<Option<TortoiseConfig>> {
        let example = "tortoise = { rate = \"100 KBps\" } (burst defaults to one second of rate), or \"off\"";
        let Some(t) = self.off_or_table(v, p, example)? else { return Some(None) };
        self.keys(t, p, &["rate", "burst", "directions", "check_interval", "limit_unit"]);
        let rate = self.req(t, p, "rate", Ctx::byte_rate, example);
        let burst = match t.get("burst") {
            None => rate,
            Some(v) => self.pos_size(v, &join(p, "burst")),
        };
        let directions = match t.get("directions") {
            None => Some("both"),
            Some(v) => self.choice(v, &join(p, "directions"), &["both", "read", "write"]),
        };
        let check_interval = match t.get("check_interval") {
            None => Some(SimDuration::from_millis(100)),
            Some(v) => self.pos_duration(v, &join(p, "check_interval")),
        };
        let limit_unit = match t.get("limit_unit") {
            None => Some("connection"),
            Some(v) => self.choice(v, &join(p, "limit_unit"), &["connection", "circuit"]),
        };
        Some(Some(TortoiseConfig {
            rate: rate?,
            burst: burst?,
            directions: directions?,
            check_interval: check_interval?,
            limit_unit: limit_unit?,
        }))
    }

    /// `cellq_high` and `cellq_low` (cells), both or neither, low below high.
    fn cell_queue_watermarks(&mut self, t: &Table, p: &str) -> Option<(u64, u64)> {
        let hint = "tor's values: cellq_high = 256, cellq_low = 10 (tor 0.2.2: 256 and 64)";
        let high = self.opt(t, p, "cellq_high", Ctx::u64);
        let low = self.opt(t, p, "cellq_low", Ctx::u64);
        match (high, low) {
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                let missing = if high.is_none() { "cellq_high" } else { "cellq_low" };
                if t.contains_key("cellq_high") && t.contains_key("cellq_low") {
                    return None; // one of them was malformed and is reported already
                }
                self.err_hint(join(p, missing), "missing: cellq_high and cellq_low go together", hint);
                None
            }
            (Some(h), Some(l)) if h == 0 || l >= h => {
                self.err_hint(
                    join(p, "cellq_low"),
                    format!("cellq_low ({l}) must be below cellq_high ({h}), and cellq_high above 0"),
                    hint,
                );
                None
            }
            (Some(h), Some(l)) => Some((h, l)),
        }
    }

    /// `"180 s"` (every channel), or a table `{ client = ["180 s", "270 s"], relay =
    /// ["45 min", "75 min"] }` whose entries are a duration or a `[low, high]` range; a
    /// missing entry is tor 0.4.8's range. `None` when something was reported.
    fn idle_channel_timeout(&mut self, v: &Value, p: &str) -> Option<IdleChannelTimeoutConfig> {
        let hint = "\"180 s\" (tor 0.2.2's IDLE_OR_CONN_TIMEOUT), \"never\" to keep channels open, \
                    or { client = [\"180 s\", \"270 s\"], relay = [\"45 min\", \"75 min\"] } (tor 0.4.8)";
        let t = match v {
            Value::Table(t) => t,
            _ => {
                let d = self.duration(v, p)?;
                if d == SimDuration::ZERO {
                    self.err_hint(p, "must be longer than 0", hint);
                    return None;
                }
                return Some(IdleChannelTimeoutConfig::fixed(d));
            }
        };
        self.keys(t, p, &["client", "relay"]);
        let d = IdleChannelTimeoutConfig::tor_0_4_8();
        let mut range = |key: &str, default: (SimDuration, SimDuration)| -> Option<(SimDuration, SimDuration)> {
            let path = join(p, key);
            let r = match t.get(key) {
                None => return Some(default),
                Some(Value::Array(a)) if a.len() == 2 => (self.duration(&a[0], &path)?, self.duration(&a[1], &path)?),
                Some(Value::Array(_)) => {
                    self.err_hint(path, "a range has two durations, [low, high]", hint);
                    return None;
                }
                Some(v) => {
                    let x = self.duration(v, &path)?;
                    (x, x)
                }
            };
            if r.0 == SimDuration::ZERO || r.1 < r.0 {
                self.err_hint(path, "must be longer than 0, and low no more than high", hint);
                return None;
            }
            Some(r)
        };
        let client = range("client", d.client);
        let relay = range("relay", d.relay);
        Some(IdleChannelTimeoutConfig { client: client?, relay: relay? })
    }

    /// `true` (tor 0.4.8's test circuits), `false`, or a table `{ test_frequency = "60 s",
    /// max_clean = 12 }` (tor 0.2.2's); a missing key of the table is tor 0.4.8's.
    fn cbt_learning(&mut self, v: &Value, p: &str) -> Option<Option<CbtLearningConfig>> {
        let example = "cbt_learning = true (tor 0.4.8: a test circuit every 10 s up to 10 clean), \
                       or { test_frequency = \"60 s\", max_clean = 12 } (tor 0.2.2)";
        let t = match v {
            Value::Boolean(b) => return Some(b.then(CbtLearningConfig::default)),
            Value::Table(t) => t,
            other => {
                self.err_hint(p, format!("expected true, false or a table, found {}", describe(other)), example);
                return None;
            }
        };
        self.keys(t, p, &["test_frequency", "max_clean"]);
        let d = CbtLearningConfig::default();
        let test_frequency = self.opt(t, p, "test_frequency", Ctx::pos_duration);
        let max_clean = self.opt(t, p, "max_clean", Ctx::u32);
        // Tor's range for cbtmaxopencircs: 0..=MAX_UNUSED_OPEN_CIRCUITS (14).
        if let Some(n) = max_clean.filter(|&n| n > 14) {
            self.err_hint(
                join(p, "max_clean"),
                format!("{n} is outside tor's range 0..=14"),
                "cbtmaxopencircs: 10 in tor 0.4.8, 12 in tor 0.2.2",
            );
            return None;
        }
        let bad = |k: &str| t.contains_key(k);
        if (test_frequency.is_none() && bad("test_frequency")) || (max_clean.is_none() && bad("max_clean")) {
            return None; // reported already
        }
        Some(Some(CbtLearningConfig {
            test_frequency: test_frequency.unwrap_or(d.test_frequency),
            max_clean: max_clean.unwrap_or(d.max_clean),
        }))
    }

    /// `"fixed-window"`, `"vegas"` (tor's code defaults), or a table `{ kind = "vegas", ... }`
    /// that sets some of the Vegas parameters (cells).
    fn congestion_control(&mut self, v: &Value, p: &str) -> Option<CongestionControlConfig> {
        let example = "congestion_control = \"vegas\", or { kind = \"vegas\", alpha = 155, delta = 310 } to set parameters";
        let t = match v {
            Value::String(_) => {
                return match self.choice(v, p, &CongestionControlConfig::NAMES)? {
                    "vegas" => Some(CongestionControlConfig::Vegas(VegasConfig::default())),
                    _ => Some(CongestionControlConfig::FixedWindow),
                };
            }
            Value::Table(t) => t,
            other => {
                self.err_hint(p, format!("expected a name or a table, found {}", describe(other)), example);
                return None;
            }
        };
        let d = VegasConfig::default();
        // Key, default, and tor's range (congestion_control_common.c, _vegas.c).
        let spec: [(&str, u64, u64, u64); 12] = [
            ("sendme_inc", d.sendme_inc, 1, 255),
            ("cwnd_init", d.cwnd_init, 31, 10_000),
            ("cwnd_min", d.cwnd_min, 31, 1000),
            ("cwnd_inc", d.cwnd_inc, 1, 1000),
            ("cwnd_inc_rate", d.cwnd_inc_rate, 1, 250),
            ("cwnd_inc_pct_ss", d.cwnd_inc_pct_ss, 1, 500),
            ("alpha", d.alpha, 0, 1000),
            ("beta", d.beta, 0, 1000),
            ("gamma", d.gamma, 0, 1000),
            ("delta", d.delta, 0, i32::MAX as u64),
            ("ss_cap", d.ss_cap, 100, i32::MAX as u64),
            ("ss_max", d.ss_max, 500, i32::MAX as u64),
        ];
        let mut keys = vec!["kind"];
        keys.extend(spec.iter().map(|s| s.0));
        self.keys(t, p, &keys);
        let kind = self.req(t, p, "kind", Ctx::string, example)?;
        if kind != "vegas" {
            self.err_hint(join(p, "kind"), format!("unknown kind {kind:?}"), "only \"vegas\" has parameters");
            return None;
        }
        // Every key is checked, so that each bad one is reported.
        let values: Vec<Option<u64>> = spec
            .iter()
            .map(|&(key, default, lo, hi)| {
                let n = self.opt(t, p, key, Ctx::u64).unwrap_or(default);
                if !(lo..=hi).contains(&n) {
                    self.err(join(p, key), format!("{n} is outside tor's range {lo}..={hi}"));
                    return None;
                }
                Some(n)
            })
            .collect();
        let v: Vec<u64> = values.into_iter().collect::<Option<_>>()?;
        let c = VegasConfig {
            sendme_inc: v[0],
            cwnd_init: v[1],
            cwnd_min: v[2],
            cwnd_inc: v[3],
            cwnd_inc_rate: v[4],
            cwnd_inc_pct_ss: v[5],
            alpha: v[6],
            beta: v[7],
            gamma: v[8],
            delta: v[9],
            ss_cap: v[10],
            ss_max: v[11],
        };
        Some(CongestionControlConfig::Vegas(c))
    }

    /// `relay_operators = { count = 2, exit = true, mtbf = "30 days" }` of a client group.
    fn relay_operators(&mut self, v: &Value, p: &str, group_count: u32) -> Option<RelayOperators> {
        let t = self.table(v, p)?;
        self.keys(t, p, &["count", "exit", "mtbf", "entry"]);
        let count = self.req(t, p, "count", Ctx::u32, "relay_operators = { count = 2 }: how many of the group's clients run a relay")?;
        if count > group_count {
            self.err(join(p, "count"), format!("{count} operators but the group has only {group_count} clients"));
            return None;
        }
        let exit = match t.get("exit") {
            None => Some(true),
            Some(v) => self.boolean(v, &join(p, "exit")),
        };
        let mtbf = self.opt(t, p, "mtbf", Ctx::pos_duration);
        if t.contains_key("mtbf") && mtbf.is_none() {
            return None;
        }
        let entry = match t.get("entry") {
            None => Some("bridge"),
            Some(v) => self.choice(v, &join(p, "entry"), &["bridge", "exempt"]),
        };
        Some(RelayOperators { count, exit: exit?, mtbf, entry: entry? })
    }

    /// A number in `[lo, hi]`.
    fn float_in(&mut self, v: &Value, path: &str, lo: f64, hi: f64) -> Option<f64> {
        let x = self.float(v, path)?;
        if !(lo..=hi).contains(&x) {
            self.err(path, format!("must be between {lo} and {hi}, found {x}"));
            return None;
        }
        Some(x)
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v {
            Value::Boolean(b) => Some(*b),
            other => {
                self.err(path, format!("expected true or false, found {}", describe(other)));
                None
            }
        }
    }

    /// One of `choices`, returned as the matching `&'static str`.
    fn choice(&mut self, v: &Value, path: &str, choices: &[&'static str]) -> Option<&'static str> {
        let s = self.string(v, path)?;
        match choices.iter().find(|c| **c == s) {
            Some(c) => Some(c),
            None => {
                self.err_hint(path, format!("unknown value {s:?}"), suggest(s, choices, "Possible values"));
                None
            }
        }
    }

    /// Guard throttling: `"none"`, or a table with `kind` (static, split, flag, threshold)
    /// and its parameters (docs/config.md).
    fn throttling(&mut self, v: &Value, p: &str) -> Option<ThrottlingConfig> {
        let (kind, t, kp) = match v {
            Value::String(s) if s == "none" => return Some(ThrottlingConfig::None),
            Value::String(s) => {
                let hint = format!("{THROTTLING_EXAMPLE}; the kinds need parameters, so only \"none\" may be a bare string");
                if THROTTLINGS.contains(&s.as_str()) {
                    self.err_hint(p, format!("throttling {s:?} needs its parameters"), hint);
                } else {
                    self.err_hint(p, format!("unknown throttling {s:?}"), suggest(s, THROTTLINGS, "Available kinds"));
                }
                return None;
            }
            Value::Table(t) => (self.req(t, p, "kind", Ctx::string, THROTTLING_EXAMPLE)?, t, join(p, "kind")),
            other => {
                self.err_hint(p, format!("expected \"none\" or a throttling table, found {}", describe(other)), THROTTLING_EXAMPLE);
                return None;
            }
        };
        let burst = |cx: &mut Self| match t.get("burst") {
            None => Some(THROTTLE_BURST),
            Some(v) => cx.pos_size(v, &join(p, "burst")),
        };
        let halflife = |cx: &mut Self| match t.get("halflife") {
            None => Some(THROTTLE_HALFLIFE),
            Some(v) => cx.pos_duration(v, &join(p, "halflife")),
        };
        let denominator = |cx: &mut Self| match t.get("denominator") {
            None => Some(SPLIT_DENOMINATORS[0]),
            Some(v) => cx.choice(v, &join(p, "denominator"), SPLIT_DENOMINATORS),
        };
        // What lifting a throttle leaves: "paper" (no bucket) or "code" (the bucket at BandwidthRate).
        let unthrottled = |cx: &mut Self| match t.get("unthrottled") {
            None => Some("paper"),
            Some(v) => cx.choice(v, &join(p, "unthrottled"), &["paper", "code"]),
        };
        match kind {
            "none" => {
                self.keys(t, p, &["kind"]);
                Some(ThrottlingConfig::None)
            }
            "static" => {
                self.keys(t, p, &["kind", "rate", "burst"]);
                let rate = self.req(t, p, "rate", Ctx::byte_rate, "rate = \"50 KiB/s\": PerConnBWRate");
                let burst = burst(self);
                Some(ThrottlingConfig::Static { rate: rate?, burst: burst? })
            }
            "split" => {
                self.keys(t, p, &["kind", "burst", "denominator"]);
                let burst = burst(self);
                let denominator = denominator(self);
                Some(ThrottlingConfig::Split { burst: burst?, denominator: denominator? })
            }
            "flag" => {
                self.keys(
                    t,
                    p,
                    &[
                        "kind",
                        "flag_rate",
                        "penalty",
                        "halflife",
                        "burst",
                        "freeze_penalty_at_flag",
                        "denominator",
                        "meta_ewma_tick_quirk",
                        "unthrottled",
                    ],
                );
                let flag_rate = self.req(t, p, "flag_rate", Ctx::byte_rate, "flag_rate = \"20 KiB/s\": the rate of flagged connections");
                let penalty = self.req(
                    t,
                    p,
                    "penalty",
                    |cx, v, q| cx.float_in(v, q, 0.0, 1.0),
                    "penalty = 0.25: unflag below penalty x M (0 never unflags)",
                );
                let halflife = halflife(self);
                let burst = burst(self);
                let freeze = self.opt(t, p, "freeze_penalty_at_flag", Ctx::boolean);
                let freeze_bad = t.contains_key("freeze_penalty_at_flag") && freeze.is_none();
                let denominator = denominator(self);
                let quirk = self.opt(t, p, "meta_ewma_tick_quirk", Ctx::boolean);
                let unthrottled = unthrottled(self);
                if freeze_bad || (t.contains_key("meta_ewma_tick_quirk") && quirk.is_none()) {
                    return None;
                }
                Some(ThrottlingConfig::Flag {
                    flag_rate: flag_rate?,
                    penalty: penalty?,
                    halflife: halflife?,
                    burst: burst?,
                    freeze_penalty_at_flag: freeze.unwrap_or(false),
                    denominator: denominator?,
                    meta_ewma_tick_quirk: quirk.unwrap_or(false),
                    unthrottled: unthrottled?,
                })
            }
            "threshold" => {
                self.keys(t, p, &["kind", "fraction", "refresh", "floor", "halflife", "burst", "semantics", "throughput", "unthrottled"]);
                let fraction =
                    self.req(t, p, "fraction", |cx, v, q| cx.float_in(v, q, 0.0, 1.0), "fraction = 0.1: throttle the loudest 10%");
                let refresh = self.req(t, p, "refresh", Ctx::pos_duration, "refresh = \"30 s\": the period R");
                let floor = self.req(t, p, "floor", Ctx::byte_rate, "floor = \"20 KiB/s\": the lowest throttle rate F");
                let halflife = halflife(self);
                let burst = burst(self);
                let semantics = match t.get("semantics") {
                    None => Some("paper"),
                    Some(v) => self.choice(v, &join(p, "semantics"), &["paper", "code"]),
                };
                let throughput = match t.get("throughput") {
                    None => Some("transferred"),
                    Some(v) => self.choice(v, &join(p, "throughput"), &["transferred", "larger-direction"]),
                };
                let unthrottled = unthrottled(self);
                if semantics == Some("code") && throughput == Some("larger-direction") {
                    self.err_hint(
                        join(p, "throughput"),
                        "applies to semantics = \"paper\" only: the code's semantics measure (read + written) / 2",
                        "remove `throughput`, or use semantics = \"paper\"",
                    );
                }
                Some(ThrottlingConfig::Threshold {
                    fraction: fraction?,
                    refresh: refresh?,
                    floor: floor?,
                    halflife: halflife?,
                    burst: burst?,
                    semantics: semantics?,
                    throughput: throughput?,
                    unthrottled: unthrottled?,
                })
            }
            other => {
                self.err_hint(kp, format!("unknown throttling {other:?}"), suggest(other, THROTTLINGS, "Available kinds"));
                None
            }
        }
    }

    /// A scheduler: a name with default parameters, or a table with `kind` and parameters.
    fn scheduler(&mut self, v: &Value, p: &str) -> Option<SchedulerConfig> {
        let (kind, table, kp) = match v {
            Value::String(s) => (s.as_str(), None, p.to_string()),
            Value::Table(t) => {
                let kind = self.req(t, p, "kind", Ctx::string, SCHEDULER_EXAMPLE)?;
                (kind, Some(t), join(p, "kind"))
            }
            other => {
                self.err_hint(p, format!("expected a scheduler name or table, found {}", describe(other)), SCHEDULER_EXAMPLE);
                return None;
            }
        };
        let empty = Table::new();
        let t = table.unwrap_or(&empty);
        match kind {
            "round-robin" => {
                self.keys(t, p, &["kind"]);
                Some(SchedulerConfig::RoundRobin)
            }
            "ewma" => {
                self.keys(t, p, &["kind", "halflife", "tick"]);
                let halflife = self.opt(t, p, "halflife", Ctx::pos_duration);
                let tick = self.opt(t, p, "tick", Ctx::pos_duration);
                let bad = (t.contains_key("halflife") && halflife.is_none()) || (t.contains_key("tick") && tick.is_none());
                let (halflife, tick) = (halflife.unwrap_or(EWMA_HALFLIFE), tick.unwrap_or(EWMA_TICK));
                let ok = self.ewma_ticks_fit(p, halflife, tick);
                (!bad && ok).then_some(SchedulerConfig::Ewma { halflife, tick })
            }
            "ewma-exact" => {
                self.keys(t, p, &["kind", "halflife"]);
                let halflife = self.opt(t, p, "halflife", Ctx::pos_duration);
                let bad = t.contains_key("halflife") && halflife.is_none();
                (!bad).then(|| SchedulerConfig::EwmaExact { halflife: halflife.unwrap_or(EWMA_HALFLIFE) })
            }
            "kist" | "kist-lite" => {
                let lite = kind == "kist-lite";
                let known: &[&str] = if lite {
                    &["kind", "run_interval", "halflife", "tick"]
                } else {
                    &["kind", "run_interval", "sock_buf_size_factor", "halflife", "tick"]
                };
                self.keys(t, p, known);
                let run_interval = self.opt(t, p, "run_interval", Ctx::pos_duration);
                if let Some(ri) = run_interval.filter(|&d| d > KIST_RUN_INTERVAL_MAX) {
                    self.err_hint(
                        join(p, "run_interval"),
                        format!("must be at most 100 ms (tor's KISTSchedRunInterval range), found {}", crate::format_duration(ri)),
                        "tor's default is \"10 ms\"; the 2021 live network used \"2 ms\"",
                    );
                }
                let factor = self.opt(t, p, "sock_buf_size_factor", Ctx::float);
                if let Some(f) = factor.filter(|&f| f < 0.0) {
                    self.err_hint(
                        join(p, "sock_buf_size_factor"),
                        format!("must be at least 0, found {f}"),
                        "KISTSockBufSizeFactor, tor's default 1.0",
                    );
                }
                let halflife = self.opt(t, p, "halflife", Ctx::pos_duration);
                let tick = self.opt(t, p, "tick", Ctx::pos_duration);
                let bad = (t.contains_key("run_interval") && run_interval.is_none_or(|d| d > KIST_RUN_INTERVAL_MAX))
                    || (t.contains_key("sock_buf_size_factor") && factor.is_none_or(|f| f < 0.0))
                    || (t.contains_key("halflife") && halflife.is_none())
                    || (t.contains_key("tick") && tick.is_none());
                let run_interval = run_interval.unwrap_or(KIST_RUN_INTERVAL);
                let halflife = halflife.unwrap_or(EWMA_HALFLIFE);
                let tick = tick.unwrap_or(EWMA_TICK);
                let ok = self.ewma_ticks_fit(p, halflife, tick);
                (!bad && ok).then(|| {
                    if lite {
                        SchedulerConfig::KistLite { run_interval, halflife, tick }
                    } else {
                        SchedulerConfig::Kist { run_interval, sock_buf_size_factor: factor.unwrap_or(1.0), halflife, tick }
                    }
                })
            }
            "hpd" => {
                self.keys(t, p, &["kind", "delay", "f"]);
                let hint = "delay = [1, 2, 3]: c_LL : c_HT : c_N, positive and strictly increasing (BRAIDS section 3.4: c1 < c2 < c3)";
                let delay = match t.get("delay") {
                    None => Some([1.0, 2.0, 3.0]),
                    Some(Value::Array(a)) if a.len() == 3 => {
                        let dp = join(p, "delay");
                        let xs: Vec<Option<f64>> = a.iter().enumerate().map(|(i, v)| self.float(v, &format!("{dp}[{i}]"))).collect();
                        match xs.as_slice() {
                            [Some(a), Some(b), Some(c)] if *a > 0.0 && a < b && b < c => Some([*a, *b, *c]),
                            [Some(_), Some(_), Some(_)] => {
                                self.err_hint(
                                    dp,
                                    format!(
                                        "must be positive and strictly increasing (c_LL < c_HT < c_N), found {a:?}",
                                        a = a.iter().map(|v| v.to_string()).collect::<Vec<_>>()
                                    ),
                                    hint,
                                );
                                None
                            }
                            _ => None,
                        }
                    }
                    Some(other) => {
                        self.err_hint(join(p, "delay"), format!("expected an array of three numbers, found {}", describe(other)), hint);
                        None
                    }
                };
                let f = match t.get("f") {
                    None => Some(0.5),
                    Some(v) => self.float_in(v, &join(p, "f"), 0.0, 1.0),
                };
                Some(SchedulerConfig::Hpd { delay: delay?, f: f? })
            }
            other => {
                self.err_hint(kp, format!("unknown scheduler {other:?}"), suggest(other, SCHEDULERS, "Available schedulers"));
                None
            }
        }
    }
}

/// Greatest common divisor, for an interval that divides the run.
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("durration", "duration"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("guard", "Guard"), 0);
        assert_eq!(closest("durration", EXPERIMENT_KEYS), Some("duration"));
        assert_eq!(closest("zzzzzzzz", EXPERIMENT_KEYS), None);
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn display_format() {
        let e = ConfigErrors(vec![ConfigError::new("a.b", "bad").with_hint("fix it"), ConfigError::new("", "whole file")]);
        assert_eq!(e.to_string(), "2 problems in the config:\na.b: bad (hint: fix it)\nwhole file");
    }
}
