//! The validated experiment configuration: what a run is built from.
//!
//! **Owns:** the types of a fully resolved, validated experiment. Every unit is converted
//! (bytes, bits per second, [`SimDuration`]), every default filled in, every file read.
//! **Must not touch:** parsing or validation (that is [`crate::parse`]) and anything that
//! runs the simulation.
//!
//! `Serialize` renders the resolved config for `onionlab show-config`.

use std::collections::BTreeMap;

use onionlab_core::SimDuration;
use serde::Serialize;

/// A validated experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentConfig {
    pub experiment: ExperimentSection,
    pub tor: TorParams,
    pub network: NetworkConfig,
    pub relays: Vec<RelayConfig>,
    pub clients: Vec<ClientGroup>,
    pub servers: ServerGroup,
    /// Workloads by name; every client group names one.
    pub workloads: BTreeMap<String, Workload>,
    pub mechanisms: Mechanisms,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentSection {
    pub name: String,
    /// Simulated time of one run.
    #[serde(serialize_with = "ser_duration")]
    pub duration: SimDuration,
    /// Downloads that start before this are excluded from metrics.
    #[serde(serialize_with = "ser_duration")]
    pub warmup: SimDuration,
    /// One run per seed.
    pub seeds: Vec<u64>,
    /// Length of the per-relay metrics interval.
    #[serde(serialize_with = "ser_duration")]
    pub metrics_interval: SimDuration,
    /// Interval of the per-client-connection table (bytes a relay exchanged with each
    /// client and its throttle); `None`: no such table.
    #[serde(serialize_with = "ser_opt_duration")]
    pub connection_metrics_interval: Option<SimDuration>,
    /// Interval of the per-channel table (each relay-to-relay channel end: bytes, circuits,
    /// queued cells); `None`: no such table.
    #[serde(serialize_with = "ser_opt_duration")]
    pub channel_metrics_interval: Option<SimDuration>,
    /// Interval of the per-circuit table (each open circuit's downstream cells delivered,
    /// in transit, and their transit time: byte-wise latency and backlog); `None`: no such
    /// table.
    #[serde(serialize_with = "ser_opt_duration")]
    pub circuit_metrics_interval: Option<SimDuration>,
    /// Split the relays table's wire wait into kernel, link and unread (time sums on every
    /// flow between relays: about 3 % more instructions). Default false.
    pub wire_waits: bool,
}

/// Tor and transport parameters (defaults: tor's, see onionlab-tor's `TorConfig`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TorParams {
    #[serde(serialize_with = "ser_duration")]
    pub refill_interval: SimDuration,
    /// Where each relay's refill grid starts: all at 0 s (`aligned`, the default) or each
    /// at its own offset drawn from the seed (`random`, as separate tor processes have).
    pub refill_phase: RefillPhaseConfig,
    pub link_handshake_rtts: u32,
    #[serde(serialize_with = "ser_duration")]
    pub max_circuit_dirtiness: SimDuration,
    /// A channel without circuits closes after this long; `None`: never.
    pub idle_channel_timeout: Option<IdleChannelTimeoutConfig>,
    /// Clients keep circuits ready for their predicted port (tor's predicted circuits).
    pub predicted_circuits: bool,
    /// Clients launch circuit-build-timeout test circuits; needs `predicted_circuits`.
    /// `None`: no test circuits.
    pub cbt_learning: Option<CbtLearningConfig>,
    /// `CircuitIdleTimeout`: a clean open circuit this old closes.
    #[serde(serialize_with = "ser_duration")]
    pub circuit_idle_timeout: SimDuration,
    pub circ_max_cell_queue: u64,
    pub num_entry_guards: u32,
    /// `UseEntryGuards`: false picks the first hop afresh, bandwidth-weighted, per circuit.
    pub use_entry_guards: bool,
    /// The order a client with entry guards draws a path in (default exit-first, tor's;
    /// guard-first is the model's earlier draw).
    pub path_order: PathOrderConfig,
    /// `guard-n-primary-guards`: the guards an exit-first circuit looks among for
    /// `num_entry_guards` that obey its exit. Default: 3 (tor 0.4.8), or `num_entry_guards`
    /// if that is larger; never below `num_entry_guards`. Unused guard-first.
    pub num_primary_guards: u32,
    /// A client's guards in distinct /16s (tor 0.2.2; default true). Tor 0.4.8: false.
    pub distinct_guard_subnets: bool,
    /// PCTCP: every circuit gets channels (TCP connections) of its own instead of sharing
    /// one per pair of nodes.
    pub channel_per_circuit: bool,
    /// Bytes of a client's request.
    pub request_bytes: u64,
    /// The request rides with BEGIN (tor 0.2.3.3-alpha on; default true); false: it
    /// follows CONNECTED as DATA cells (tor 0.2.2).
    pub optimistic_data: bool,
    pub circ_window: u64,
    pub circ_window_increment: u64,
    /// Circuit-level flow or congestion control.
    pub congestion_control: CongestionControlConfig,
    /// (`cellq_high`, `cellq_low`), cells: an exit stops reading a circuit's streams at
    /// `high` queued cells and resumes at `low`; `None`: off.
    pub cell_queue_watermarks: Option<(u64, u64)>,
    /// Kernel socket buffers, bytes; at least Linux's floors (`parse::MIN_SNDBUF`,
    /// `parse::MIN_RCVBUF`: 4608 and 2304 B).
    pub sndbuf_bytes: u64,
    pub rcvbuf_bytes: u64,
}

/// `tor.idle_channel_timeout` (`onionlab_tor::ChannelIdleTimeout`): `[low, high)` for
/// channels with a client end and for relay-to-relay channels; each end of a channel draws
/// from its range and the channel closes at the earlier draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IdleChannelTimeoutConfig {
    #[serde(serialize_with = "ser_duration_pair")]
    pub client: (SimDuration, SimDuration),
    #[serde(serialize_with = "ser_duration_pair")]
    pub relay: (SimDuration, SimDuration),
}

impl IdleChannelTimeoutConfig {
    /// One timeout for every channel.
    pub fn fixed(d: SimDuration) -> Self {
        IdleChannelTimeoutConfig { client: (d, d), relay: (d, d) }
    }

    /// Tor 0.4.8: 180-270 s with a client end, 45-75 min between relays.
    pub fn tor_0_4_8() -> Self {
        IdleChannelTimeoutConfig {
            client: (SimDuration::from_secs(180), SimDuration::from_secs(270)),
            relay: (SimDuration::from_secs(2700), SimDuration::from_secs(4500)),
        }
    }

    /// The one timeout of every channel, if it is one.
    pub fn as_fixed(&self) -> Option<SimDuration> {
        (self.client.0 == self.client.1 && self.client == self.relay).then_some(self.client.0)
    }
}

/// `tor.cbt_learning`: tor's circuit-build-timeout test circuits (`onionlab_tor::CbtLearning`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CbtLearningConfig {
    /// `cbttestfreq`: a test circuit once no circuit was launched for this long (tor
    /// 0.4.8: 10 s; tor 0.2.2: 60 s).
    #[serde(serialize_with = "ser_duration")]
    pub test_frequency: SimDuration,
    /// `cbtmaxopencircs`: testing pauses at this many clean circuits (tor 0.4.8: 10;
    /// tor 0.2.2: 12).
    pub max_clean: u32,
}

impl Default for CbtLearningConfig {
    /// Tor 0.4.8's code defaults.
    fn default() -> Self {
        CbtLearningConfig { test_frequency: SimDuration::from_secs(10), max_clean: 10 }
    }
}

/// `tor.path_order` (`onionlab_tor::PathOrder`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathOrderConfig {
    /// A guard of the client's, then the exit outside its /16 (the model's earlier draw).
    GuardFirst,
    /// The exit, then a primary guard that obeys it (tor's, path-spec 2.2; the default).
    #[default]
    ExitFirst,
}

impl PathOrderConfig {
    /// The names a config spells them with.
    pub const NAMES: [&'static str; 2] = ["guard-first", "exit-first"];

    /// Its name in a config.
    pub fn name(self) -> &'static str {
        match self {
            PathOrderConfig::GuardFirst => "guard-first",
            PathOrderConfig::ExitFirst => "exit-first",
        }
    }
}

/// `tor.refill_phase`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefillPhaseConfig {
    /// Every relay refills at `k x refill_interval` (the model's default).
    #[default]
    Aligned,
    /// Each relay at `k x refill_interval + phase`, its phase uniform in
    /// `[0, refill_interval)`, drawn from the seed and the relay's name.
    Random,
}

impl RefillPhaseConfig {
    /// The names a config spells them with.
    pub const NAMES: [&'static str; 2] = ["aligned", "random"];

    /// Its name in a config.
    pub fn name(self) -> &'static str {
        match self {
            RefillPhaseConfig::Aligned => "aligned",
            RefillPhaseConfig::Random => "random",
        }
    }
}

/// The default `tor.num_primary_guards` for `num_entry_guards`: tor 0.4.8's
/// `guard-n-primary-guards` default (3), or every guard in use if more (tor 0.2.2 used all
/// its NumEntryGuards guards, 3).
pub fn default_num_primary_guards(num_entry_guards: u32) -> u32 {
    num_entry_guards.max(3)
}

/// `tor.congestion_control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CongestionControlConfig {
    /// Tor's SENDME windows (`cc_alg` 0, tor's code default).
    FixedWindow,
    /// Proposal 324's Vegas (`cc_alg` 2, what the live network's consensus sets).
    Vegas(VegasConfig),
}

/// Vegas parameters in cells, named after tor's consensus parameters (`cc_sendme_inc`,
/// `cc_cwnd_init`, ..., `cc_vegas_alpha_exit`, `cc_sscap_exit`, `cc_ss_max`); defaults are
/// tor 0.4.8's code defaults (`onionlab_tor::VegasParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VegasConfig {
    pub sendme_inc: u64,
    pub cwnd_init: u64,
    pub cwnd_min: u64,
    pub cwnd_inc: u64,
    pub cwnd_inc_rate: u64,
    pub cwnd_inc_pct_ss: u64,
    pub alpha: u64,
    pub beta: u64,
    pub gamma: u64,
    pub delta: u64,
    pub ss_cap: u64,
    pub ss_max: u64,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            sendme_inc: 31,
            cwnd_init: 124,
            cwnd_min: 62,
            cwnd_inc: 31,
            cwnd_inc_rate: 1,
            cwnd_inc_pct_ss: 100,
            alpha: 124,
            beta: 248,
            gamma: 186,
            delta: 372,
            ss_cap: 500,
            ss_max: 5000,
        }
    }
}

impl CongestionControlConfig {
    pub const NAMES: [&'static str; 2] = ["fixed-window", "vegas"];
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LatencyConfig {
    /// The same one-way latency between every pair of hosts.
    Constant {
        #[serde(serialize_with = "ser_duration")]
        one_way: SimDuration,
    },
    /// A square matrix of one-way latencies between locations, read from a CSV file
    /// (milliseconds, no header).
    Matrix {
        path: String,
        #[serde(skip)]
        one_way: Vec<Vec<SimDuration>>,
    },
    /// A Shadow-style GML graph; host locations are node indices in file order.
    Gml {
        path: String,
        #[serde(skip)]
        text: String,
    },
}

/// `network.bandwidth_weights`.
#[derive(Clone, Debug, PartialEq)]
pub enum BandwidthWeightsConfig {
    /// A consensus bandwidth-weights line's values (Wgg, Wgm, ...), scaled by 10000.
    Given(BTreeMap<String, i64>),
    /// `"computed"`: what tor's directory authorities compute for the run's relays
    /// (`networkstatus_compute_bw_weights_v10`), for relay lists from a consensus that has
    /// no weights line (before consensus method 9, e.g. 2010's).
    Computed,
    /// `"computed-v9"`: what tor 0.2.2.10-alpha to 0.2.2.16-alpha's authorities computed
    /// (`networkstatus_compute_bw_weights_v9`, consensus method 9), as in the throttling
    /// paper's Shadow network.
    ComputedV9,
}

impl Serialize for BandwidthWeightsConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BandwidthWeightsConfig::Given(w) => w.serialize(s),
            BandwidthWeightsConfig::Computed => s.serialize_str("computed"),
            BandwidthWeightsConfig::ComputedV9 => s.serialize_str("computed-v9"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkConfig {
    pub latency: LatencyConfig,
    /// Consensus bandwidth-weights; `None` = uniform.
    pub bandwidth_weights: Option<BandwidthWeightsConfig>,
    /// Compute the Fast and Stable flags as tor's directory authorities do (from each
    /// relay's bandwidth and `mtbf`) instead of taking them from the relay lists.
    pub compute_flags: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RelayConfig {
    pub name: String,
    /// BandwidthRate, bytes/s.
    pub bandwidth_rate: u64,
    /// BandwidthBurst, bytes.
    pub bandwidth_burst: u64,
    /// Access link, bits/s.
    pub link_up: u64,
    pub link_down: u64,
    /// Consensus weight for path selection (defaults to bandwidth_rate in KiB/s).
    pub consensus_weight: u64,
    /// Consensus flags, e.g. ["Guard", "Exit", "Fast", "Stable"].
    pub flags: Vec<String>,
    pub location: u32,
    /// PerConnBWRate / PerConnBWBurst, bytes/s and bytes.
    pub perconn: Option<(u64, u64)>,
    /// This relay's circuit scheduler (default: `mechanisms.scheduler`).
    pub scheduler: SchedulerConfig,
    /// This relay's guard throttling (default: `mechanisms.throttling`).
    pub throttling: ThrottlingConfig,
    /// This relay's Tortoise limit (default: `mechanisms.tortoise`).
    pub tortoise: Option<TortoiseConfig>,
    /// Mean time between failures, for `network.compute_flags`.
    #[serde(serialize_with = "ser_opt_duration")]
    pub mtbf: Option<SimDuration>,
    /// IPv4 address, for tor's same-/16 path restriction; `None`: unknown.
    pub address: Option<std::net::Ipv4Addr>,
}

/// Where the hosts of a group are placed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// All at one location.
    At(u32),
    /// Host i at location i mod number of locations.
    RoundRobin,
    /// Host i at `locations[i mod locations.len()]`: round robin over some locations only
    /// (say, servers in a few regions of a geographic matrix). Never empty.
    Cycle(Vec<u32>),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientGroup {
    /// Group name; it is the client class in results (e.g. "web", "bulk").
    pub name: String,
    /// Name of the workload the group runs.
    pub workload: String,
    pub count: u32,
    pub link_up: u64,
    pub link_down: u64,
    pub placement: Placement,
    /// Clients of the group that also run a relay.
    pub relay_operators: Option<RelayOperators>,
    /// The BRAIDS service class the group's clients pay for: "low-latency",
    /// "high-throughput" or "normal" (pays nothing; the default).
    pub service: &'static str,
    /// Relay names (guard, middle, exit) every circuit of the group takes instead of
    /// path selection, for experiments on a given topology.
    pub path: Option<Vec<String>>,
    /// When the group's clients begin: each one's first action comes `start` plus a
    /// stagger drawn uniformly from `[0, start_spread)` into the run. Default 0: clients
    /// that join later (a flash crowd, an attacker's connections) set it.
    #[serde(serialize_with = "ser_duration")]
    pub start: SimDuration,
    /// The window the group's first actions are staggered over. `None`: the run's own
    /// (the warm-up, or the first 10 s without one).
    #[serde(serialize_with = "ser_opt_duration")]
    pub start_spread: Option<SimDuration>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerGroup {
    pub count: u32,
    pub link_up: u64,
    pub link_down: u64,
    pub placement: Placement,
}

/// A distribution of sizes in bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "dist", rename_all = "snake_case")]
pub enum SizeDist {
    Fixed {
        bytes: u64,
    },
    Uniform {
        min: u64,
        max: u64,
    },
    /// Sizes with relative weights.
    Choice {
        sizes: Vec<u64>,
        weights: Vec<f64>,
    },
}

/// A distribution of durations.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "dist", rename_all = "snake_case")]
pub enum TimeDist {
    Fixed {
        #[serde(serialize_with = "ser_duration")]
        value: SimDuration,
    },
    Uniform {
        #[serde(serialize_with = "ser_duration")]
        min: SimDuration,
        #[serde(serialize_with = "ser_duration")]
        max: SimDuration,
    },
    Exponential {
        #[serde(serialize_with = "ser_duration")]
        mean: SimDuration,
    },
    /// Log-normal with the given median and shape sigma (of the underlying normal).
    LogNormal {
        #[serde(serialize_with = "ser_duration")]
        median: SimDuration,
        sigma: f64,
    },
    /// Pareto with scale (minimum) and shape alpha.
    Pareto {
        #[serde(serialize_with = "ser_duration")]
        scale: SimDuration,
        alpha: f64,
    },
    /// An empirical CDF from a file of `seconds,cumulative_probability` lines, sampled by
    /// linear interpolation between points.
    Empirical {
        path: String,
        /// (seconds, cumulative probability), probabilities increasing to 1.
        #[serde(skip)]
        points: Vec<(f64, f64)>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Workload {
    /// Download a file, think, repeat forever.
    Web { size: SizeDist, think: TimeDist, session: Option<Session> },
    /// Download files back to back.
    Bulk { size: SizeDist },
    /// onionperf-like: a file drawn from `sizes` (50 KiB / 1 MiB / 5 MiB, weights 12:2:1
    /// by default), then a pause.
    Perf { size: SizeDist, pause: TimeDist },
    /// PrivCount Markov client (tgen's models): the stream model emits streams and the gaps
    /// before them; each stream is one download of the packet model's packets towards the
    /// client times `packet_bytes`; after the stream model ends, `pause`, then again.
    Markov { stream_model: crate::markov::MarkovModel, packet_model: crate::markov::MarkovModel, packet_bytes: u64, pause: TimeDist },
}

/// Browsing sessions of a web client: it browses for `length`, then pauses for a time
/// drawn from `pause`, and starts another session (the Tortoise paper's 15-minute sessions
/// with 9-11 minute breaks).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Session {
    #[serde(serialize_with = "ser_duration")]
    pub length: SimDuration,
    pub pause: TimeDist,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mechanisms {
    /// Circuit scheduler on every relay that does not name its own.
    pub scheduler: SchedulerConfig,
    /// Guard throttling of client connections on every relay that does not name its own.
    pub throttling: ThrottlingConfig,
    /// Tortoise's universal ingress rate limit on every relay that does not name its own
    /// (`None`: off).
    pub tortoise: Option<TortoiseConfig>,
    /// BRAIDS's tickets (`None`: off).
    pub braids: Option<BraidsConfig>,
    /// PredicTor's controller on every relay (`None`: off).
    pub predictor: Option<PredictorConfig>,
}

/// PredicTor (`onionlab_mech::predictor`, where each parameter's source is given): every
/// relay solves its local problem every `dt` and shapes each circuit to the plan.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PredictorConfig {
    /// Default 40 ms.
    #[serde(serialize_with = "ser_duration")]
    pub dt: SimDuration,
    /// Default 10.
    pub horizon: u32,
    /// Default 1/3.
    pub discount: f64,
    /// Cells, default 100.
    pub s_max: f64,
    /// Default 0.85.
    pub capacity_fraction: f64,
    /// The paper's r^max (Theorem 1); default the largest capacity in the network.
    pub r_max: PredictorRMax,
    /// Cost of a cell-step over the soft queue limits; default 1e5 (the authors' code).
    pub slack_penalty: f64,
    /// Stages dropped from the successor's previous incoming-rate plan before it bounds
    /// the outgoing rate ((13)); default 0, as the paper writes it (2: the authors' code).
    pub successor_shift: u32,
}

/// PredicTor's r^max, which Theorem 1 asks to be at least every relay's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PredictorRMax {
    /// `"network"` (default): the largest capacity among the experiment's relays (each
    /// `capacity_fraction` of its BandwidthRate or slower link, in cells/s), the smallest
    /// value Theorem 1 allows.
    Network,
    /// `"relay"`: each relay's own capacity, as the authors' code did (below the paper's
    /// condition at every relay smaller than the largest).
    Relay,
    /// A number: cells/s on every relay; at least the largest capacity.
    Cells(f64),
}

impl Serialize for PredictorRMax {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PredictorRMax::Network => s.serialize_str("network"),
            PredictorRMax::Relay => s.serialize_str("relay"),
            PredictorRMax::Cells(x) => s.serialize_f64(*x),
        }
    }
}

/// BRAIDS's ticket economy (`onionlab_mech::braids`, where each parameter's source is
/// given). Relays serve the classes with `scheduler = "hpd"`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BraidsConfig {
    /// Cells one ticket pays for at one relay (default 256: 128 KiB).
    pub ticket_cells: u32,
    /// Free tickets per handout (default 3) ...
    pub free_tickets: u32,
    /// ... every `free_period` (default 10 min).
    #[serde(serialize_with = "ser_duration")]
    pub free_period: SimDuration,
    /// Default 24 h.
    #[serde(serialize_with = "ser_duration")]
    pub spending_interval: SimDuration,
    /// Fraction of exchanged tickets destroyed (default 0).
    pub tax: f64,
    /// Low-latency cells per circuit per relay per window (default: a spending interval's
    /// free tickets in cells).
    pub low_latency_limit: u64,
    /// Default: the spending interval.
    #[serde(serialize_with = "ser_duration")]
    pub low_latency_window: SimDuration,
    pub free_tickets_need_exchange: bool,
}

/// Tortoise (universal rate limit for peers that are not Stable+Fast relays).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TortoiseConfig {
    /// Bytes/s.
    #[serde(serialize_with = "ser_byte_rate")]
    pub rate: u64,
    /// Bytes.
    #[serde(serialize_with = "ser_size")]
    pub burst: u64,
    /// "both", "read" (bytes from the peer) or "write" (bytes to the peer).
    pub directions: &'static str,
    #[serde(serialize_with = "ser_duration")]
    pub check_interval: SimDuration,
    /// What one bucket pair limits: "connection" (the default: each limited connection) or
    /// "circuit" (each circuit over a limited connection; spec 1.2's sensitivity switch).
    /// Written out only when not the default, so configs of earlier runs read the same.
    #[serde(skip_serializing_if = "is_connection_unit")]
    pub limit_unit: &'static str,
}

fn is_connection_unit(u: &&'static str) -> bool {
    *u == "connection"
}

/// Clients of a group that also run a relay (Tortoise's client-relays): the first `count`
/// clients of the group. Each relay's bandwidth is its operator's access link (the slower
/// direction), its circuits enter the network through it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RelayOperators {
    pub count: u32,
    /// Flags of the operators' relays besides Fast and Stable (which are given, or computed
    /// when `network.compute_flags` is on): "Exit" by default.
    pub exit: bool,
    /// Mean time between failures, for computed flags.
    #[serde(serialize_with = "ser_opt_duration")]
    pub mtbf: Option<SimDuration>,
    /// How an operator's own traffic enters the network: "bridge" (through its own relay,
    /// the paper's figure 1 right) or "exempt" (normal paths; every relay recognises the
    /// operator's relay identity and exempts its connections; spec 1.3 option (b)).
    pub entry: &'static str,
}

/// Adaptive guard throttling (the throttling paper's algorithms; `onionlab-mech`).
/// Rates in bytes/s, bursts in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ThrottlingConfig {
    /// No throttling ("vanilla").
    None,
    Static {
        #[serde(serialize_with = "ser_byte_rate")]
        rate: u64,
        #[serde(serialize_with = "ser_size")]
        burst: u64,
    },
    Split {
        #[serde(serialize_with = "ser_size")]
        burst: u64,
        /// "all-or-connections", "client-connections" or "active-client-connections".
        denominator: &'static str,
    },
    Flag {
        #[serde(serialize_with = "ser_byte_rate")]
        flag_rate: u64,
        penalty: f64,
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
        #[serde(serialize_with = "ser_size")]
        burst: u64,
        freeze_penalty_at_flag: bool,
        denominator: &'static str,
        meta_ewma_tick_quirk: bool,
        /// What unflagging does to the buckets: "paper" (none left: rate infinity) or
        /// "code" (kept at the relay's BandwidthRate, tokens and burst kept). Written only
        /// when not the default, as `throughput` below.
        #[serde(skip_serializing_if = "is_default_unthrottled")]
        unthrottled: &'static str,
    },
    Threshold {
        fraction: f64,
        #[serde(serialize_with = "ser_duration")]
        refresh: SimDuration,
        #[serde(serialize_with = "ser_byte_rate")]
        floor: u64,
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
        #[serde(serialize_with = "ser_size")]
        burst: u64,
        /// "paper" or "code".
        semantics: &'static str,
        /// What the paper's "bytes transferred" counts: "transferred" (read + written) or
        /// "larger-direction" (the larger of the two). A resolved config writes it only when
        /// it is not the default, so configs resolved before it existed stay the same text
        /// (reproductions reuse earlier runs by their resolved config).
        #[serde(skip_serializing_if = "is_default_throughput")]
        throughput: &'static str,
        /// What lifting a throttle does to the buckets, as flagging's `unthrottled`.
        #[serde(skip_serializing_if = "is_default_unthrottled")]
        unthrottled: &'static str,
    },
}

/// A relay's circuit scheduler. Written `scheduler = "ewma"` (defaults) or
/// `scheduler = { kind = "ewma", halflife = "30 s", tick = "10 s" }`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SchedulerConfig {
    /// Round robin over active circuits, one cell per turn (the 2010-2012 papers' "vanilla").
    RoundRobin,
    /// Tor's circuit EWMA: tick-based decay (CircuitPriorityHalflife, default 30 s; tick 10 s).
    Ewma {
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
        #[serde(serialize_with = "ser_duration")]
        tick: SimDuration,
    },
    /// The EWMA paper's exact continuous decay (half-life default 30 s).
    EwmaExact {
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
    },
    /// KIST (scheduler_kist.c): a relay-wide run every `run_interval` (KISTSchedRunInterval,
    /// default 10 ms) limited per socket by cwnd, unacked and unsent bytes scaled by
    /// `sock_buf_size_factor` (KISTSockBufSizeFactor, default 1.0); EWMA circuitmux per channel.
    Kist {
        #[serde(serialize_with = "ser_duration")]
        run_interval: SimDuration,
        sock_buf_size_factor: f64,
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
        #[serde(serialize_with = "ser_duration")]
        tick: SimDuration,
    },
    /// KISTLite: KIST's runs, limited by each channel's outbuf room instead of kernel state.
    KistLite {
        #[serde(serialize_with = "ser_duration")]
        run_interval: SimDuration,
        #[serde(serialize_with = "ser_duration")]
        halflife: SimDuration,
        #[serde(serialize_with = "ser_duration")]
        tick: SimDuration,
    },
    /// BRAIDS's hybrid proportional delay scheduler over service classes: delay parameters
    /// `c_LL : c_HT : c_N` (default 1 : 2 : 3) and the PAD weight `f` (default 0.5).
    Hpd { delay: [f64; 3], f: f64 },
}

fn ser_opt_duration<S: serde::Serializer>(d: &Option<SimDuration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&crate::format_duration(*d)),
        None => s.serialize_none(),
    }
}

fn ser_size<S: serde::Serializer>(b: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format_size(*b))
}

fn ser_byte_rate<S: serde::Serializer>(b: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format_byte_rate(*b))
}

fn ser_duration_pair<S: serde::Serializer>(d: &(SimDuration, SimDuration), s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeTuple;
    let mut t = s.serialize_tuple(2)?;
    t.serialize_element(&crate::format_duration(d.0))?;
    t.serialize_element(&crate::format_duration(d.1))?;
    t.end()
}

fn ser_duration<S: serde::Serializer>(d: &SimDuration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::format_duration(*d))
}

fn is_default_throughput(t: &&'static str) -> bool {
    *t == "transferred"
}

fn is_default_unthrottled(u: &&'static str) -> bool {
    *u == "paper"
}
