//! The Tor model's parameters ([`TorConfig`]) and tor's constants behind them: channels'
//! idle timeouts, predicted circuits and circuit-build-time learning.
//!
//! **Owns:** what a run of the model is configured with, and tor's defaults for it (the
//! doc comment of each field names tor's option or constant). **Must not touch:** the
//! model's state; the network reads these values, nothing here acts on them.

use onionlab_core::SimDuration;
use onionlab_net::TransportConfig;

/// `MIN_CIRCUITS_HANDLING_STREAM` (or.h): circuits a client keeps ready for a predicted
/// port.
pub const MIN_CIRCUITS_HANDLING_STREAM: usize = 2;
/// `MAX_UNUSED_OPEN_CIRCUITS` (circuituse.c): no circuit is predicted while a client has
/// this many clean ones.
pub const MAX_UNUSED_OPEN_CIRCUITS: usize = 14;
/// `CBT_DEFAULT_MIN_CIRCUITS_TO_OBSERVE` (100): build times a client learns from.
pub const CBT_MIN_CIRCUITS_TO_OBSERVE: u32 = 100;

/// How long a channel without circuits stays open, by class of channel: one with a client
/// at either end, and one between two relays. When a channel opens each of its ends draws
/// its timeout uniformly from its class's range, as tor does once per connection
/// (`connection_or_set_canonical`, `channelpadding_get_channel_idle_timeout`), and the
/// channel closes at the earlier of the two; a range of one value draws nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelIdleTimeout {
    /// `[low, high)` for channels with a client end (tor 0.4.8: 180-270 s,
    /// `CONNTIMEOUT_CLIENTS_BASE` plus up to half of it).
    pub client: (SimDuration, SimDuration),
    /// `[low, high)` for relay-to-relay channels (tor 0.4.8: 3/4 to 5/4 of the consensus's
    /// `nf_conntimeout_relays`, default 3600 s: 45-75 min).
    pub relay: (SimDuration, SimDuration),
}

impl ChannelIdleTimeout {
    /// One timeout for every channel (tor 0.2.2's `IDLE_OR_CONN_TIMEOUT`: 180 s).
    pub const fn fixed(d: SimDuration) -> Self {
        ChannelIdleTimeout { client: (d, d), relay: (d, d) }
    }

    /// Tor 0.4.8: 180-270 s with a client end, 45-75 min between relays.
    pub const TOR_0_4_8: ChannelIdleTimeout = ChannelIdleTimeout {
        client: (SimDuration::from_secs(180), SimDuration::from_secs(270)),
        relay: (SimDuration::from_secs(2700), SimDuration::from_secs(4500)),
    };

    /// The timeout of a new channel: the earlier of its two ends' draws.
    pub(super) fn draw(&self, client_end: bool, rng: &mut onionlab_core::SimRng) -> SimDuration {
        let (lo, hi) = if client_end { self.client } else { self.relay };
        if hi <= lo {
            return lo;
        }
        let span = hi.as_nanos() - lo.as_nanos();
        let a = rand::Rng::random_range(rng, 0..span);
        let b = rand::Rng::random_range(rng, 0..span);
        SimDuration::from_nanos(lo.as_nanos() + a.min(b))
    }
}

/// Circuit-build-timeout learning (`circuit_build_times_needs_circuits_now`,
/// `needs_circuits_for_build` in circuituse.c): while a client has completed fewer than
/// [`CBT_MIN_CIRCUITS_TO_OBSERVE`] circuits and has fewer than `max_clean` clean ones, its
/// once-a-second check launches a test circuit when no circuit was launched for
/// `test_frequency`. The default is today's tor ([`CbtLearning::TOR_0_4_8`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbtLearning {
    /// `CBT_DEFAULT_TEST_FREQUENCY` (consensus `cbttestfreq`): 10 s in tor 0.4.8, 60 s in
    /// tor 0.2.2-0.2.3.
    pub test_frequency: SimDuration,
    /// Clean circuits at which testing pauses: consensus `cbtmaxopencircs` (tor 0.4.8's
    /// `DFLT_CBT_UNUSED_OPEN_CIRCS`, 10; range 0..=14); tor 0.2.2 used
    /// `MAX_UNUSED_OPEN_CIRCUITS - 2` (12).
    pub max_clean: usize,
}

impl CbtLearning {
    /// Tor 0.4.8: a test circuit every 10 s, up to 10 clean circuits.
    pub const TOR_0_4_8: CbtLearning = CbtLearning { test_frequency: SimDuration::from_secs(10), max_clean: 10 };
    /// Tor 0.2.2-0.2.3: a test circuit every 60 s, up to 12 clean circuits.
    pub const TOR_0_2_2: CbtLearning = CbtLearning { test_frequency: SimDuration::from_secs(60), max_clean: MAX_UNUSED_OPEN_CIRCUITS - 2 };
}

impl Default for CbtLearning {
    fn default() -> Self {
        CbtLearning::TOR_0_4_8
    }
}

/// `PREDICTED_CIRCS_RELEVANCE_TIME` (rephist.c, 60 min): a port stays predicted this long
/// after it was last used.
pub const PREDICTED_CIRCS_RELEVANCE_TIME: SimDuration = SimDuration::from_secs(3600);

/// Model parameters, tor's defaults unless noted.
#[derive(Clone, Debug, PartialEq)]
pub struct TorConfig {
    /// `TokenBucketRefillInterval`: 100 ms in tor >= 0.2.3; 1 s in the 2010-2012 papers.
    pub refill_interval: SimDuration,
    /// Where each relay's refill grid starts (and its hooks' ticks with it).
    pub refill_phase: RefillPhase,
    /// Round trips for TLS and tor's link handshake (VERSIONS, CERTS, AUTH_CHALLENGE,
    /// NETINFO) after the TCP handshake before a channel carries cells.
    pub link_handshake_rtts: u32,
    /// `MaxCircuitDirtiness`: a circuit takes new streams for this long after its first,
    /// and the client closes it once it is this old and has no stream left
    /// (`circuit_expire_old_circuits_clientside`).
    pub max_circuit_dirtiness: SimDuration,
    /// How long a channel without circuits stays open before it is closed
    /// (`run_connection_housekeeping`): tor 0.2.2's `IDLE_OR_CONN_TIMEOUT`, 180 s for every
    /// channel, the era of the throttling paper, by default; tor 0.4.8's per-class ranges
    /// are [`ChannelIdleTimeout::TOR_0_4_8`]. `None` keeps every channel open for the whole
    /// run.
    pub idle_channel_timeout: Option<ChannelIdleTimeout>,
    /// Predicted circuits (tor's `circuit_predict_and_launch_new`, circuituse.c; on in
    /// tor unless `DisablePredictedCircuits`). A client keeps at least
    /// [`MIN_CIRCUITS_HANDLING_STREAM`] circuits that could take a new stream (clean ones,
    /// and dirty ones younger than MaxCircuitDirtiness, building or open) while a port is
    /// predicted, launching at most one circuit per second; a stream takes the best of
    /// them as `circuit_get_best` does. Tor predicts port 80 from start-up and every port
    /// used in the last hour (`PREDICTED_CIRCS_RELEVANCE_TIME`); the model has one port,
    /// so a client predicts from its first stream until an hour after its last. Off by
    /// default, unlike tor: with it off every circuit is built when a stream needs one, as
    /// in every reproduction made before it existed (`docs/tor-model.md`).
    pub predicted_circuits: bool,
    /// Circuit-build-timeout learning circuits (tor's `LearnCircuitBuildTimeout`, on by
    /// default in tor; needs `predicted_circuits`), with tor 0.4.8's or tor 0.2.2's
    /// [`CbtLearning`] parameters. Test circuits are general-purpose: streams may use them.
    /// `None` (the default here, unlike tor): no test circuits.
    pub cbt_learning: Option<CbtLearning>,
    /// `CircuitIdleTimeout` (tor 0.2.2 default 3600 s): a clean (never used) open circuit
    /// this old is closed (`circuit_expire_old_circuits_clientside`). Only predicted
    /// circuits are ever clean.
    pub circuit_idle_timeout: SimDuration,
    /// `circ_max_cell_queue_size` (relay.c, consensus `circ_max_cell_queue_size`): a relay
    /// closes a circuit whose queue grows beyond this many cells.
    pub circ_max_cell_queue: u64,
    /// `(cellq_high, cellq_low)`, cells (tor 0.4.8: 256 and 10; tor 0.2.2's
    /// `CELL_QUEUE_HIGHWATER_SIZE`/`_LOWWATER_SIZE`: 256 and 64): an exit stops reading a
    /// circuit's streams once the circuit's queue toward the client holds `high` cells, and
    /// resumes when it is down to `low` (relay.c, `set_circuit_blocked_on_chan`). `None`
    /// (the default here, unlike tor; `docs/tor-model.md`): the exit packages whatever the
    /// windows allow.
    pub cell_queue_watermarks: Option<(u64, u64)>,
    /// `OR_CONN_LOWWATER` / `OR_CONN_HIGHWATER` (or.h): outbuf refill thresholds, bytes.
    pub outbuf_low_water: u64,
    pub outbuf_high_water: u64,
    /// `NumEntryGuards`: 1 in tor >= 0.3.0 (3 in the 2010-2012 tor).
    pub num_entry_guards: usize,
    /// `UseEntryGuards` (default 1): with false, every circuit's first hop is drawn afresh
    /// by bandwidth weight (the Tortoise paper's setup "does not utilize guard relays").
    pub use_entry_guards: bool,
    /// The order a client with entry guards draws a path in ([`PathOrder`]; default
    /// exit-first, tor's. Guard-first is the model's earlier draw, kept for the
    /// throttling reproduction's published numbers).
    pub path_order: PathOrder,
    /// `guard-n-primary-guards` (tor 0.4.8, default 3): the guards, in sampled order, an
    /// exit-first circuit looks among for `num_entry_guards` that obey its exit. Tor 0.2.2
    /// used every entry guard: there it equals `num_entry_guards`. Unused guard-first.
    pub num_primary_guards: usize,
    /// A client's entry guards are kept in distinct /16s (tor 0.2.2's
    /// `choose_good_entry_server`; default true, the model's behaviour so far). Tor 0.4.8
    /// samples guards without a /16 rule: false.
    pub distinct_guard_subnets: bool,
    /// PCTCP (AlSabah and Goldberg, CCS 2013; the PredicTor paper's second baseline):
    /// every circuit opens channels of its own at every hop, so no two circuits share a
    /// TCP connection (or its buffers, or its place in a relay's round of reads and
    /// writes). Default false: tor multiplexes all circuits between two nodes over one
    /// channel. PCTCP's IPsec layer is not modelled (neither did the PredicTor paper).
    pub channel_per_circuit: bool,
    /// Keep how long each relay's bytes wait in its kernel, on the link and unread at the
    /// next relay ([`crate::wait`]; time sums on every channel between relays). Default
    /// false: the wire is measured whole.
    pub wire_waits: bool,
    /// Size of a client's request (an HTTP GET).
    pub request_bytes: u64,
    /// Optimistic data (proposal 181, tor 0.2.3.3-alpha on; `OptimisticData auto`): the
    /// request rides with BEGIN and the exit hands it to the server as soon as its TCP
    /// connection is up. Default true. False is tor before 0.2.3.3 (the 0.2.2 of the
    /// throttling, EWMA and BRAIDS papers' testbeds): the client answers CONNECTED with
    /// the request as `ceil(request_bytes / 498)` DATA cells, so every stream takes one more
    /// circuit round trip, and the request cells queue at each hop like any other. They are
    /// not charged to the client's package windows (a request of up to 500 cells fits the
    /// stream window, which `onionlab-config` checks).
    pub optimistic_data: bool,
    /// `CIRCWINDOW_START` and `CIRCWINDOW_INCREMENT`.
    pub circ_window: u64,
    pub circ_window_increment: u64,
    /// Circuit-level flow or congestion control (`cc_alg`): tor's fixed SENDME windows
    /// (the default here and tor's code default, 0) or proposal 324's Vegas (2, what the
    /// live network's consensus sets).
    pub congestion_control: crate::flow_control::CongestionControlKind,
    pub transport: TransportConfig,
}

impl Default for TorConfig {
    fn default() -> Self {
        TorConfig {
            refill_interval: SimDuration::from_millis(100),
            refill_phase: RefillPhase::Aligned,
            link_handshake_rtts: 2,
            max_circuit_dirtiness: SimDuration::from_secs(600),
            idle_channel_timeout: Some(ChannelIdleTimeout::fixed(SimDuration::from_secs(180))),
            predicted_circuits: false,
            cbt_learning: None,
            circuit_idle_timeout: SimDuration::from_secs(3600),
            circ_max_cell_queue: 2500,
            cell_queue_watermarks: None,
            outbuf_low_water: 16 * 1024,
            outbuf_high_water: 32 * 1024,
            num_entry_guards: 1,
            use_entry_guards: true,
            path_order: PathOrder::ExitFirst,
            num_primary_guards: 3,
            distinct_guard_subnets: true,
            channel_per_circuit: false,
            wire_waits: false,
            request_bytes: 500,
            optimistic_data: true,
            circ_window: crate::flow_control::CIRCWINDOW_START,
            circ_window_increment: crate::flow_control::CIRCWINDOW_INCREMENT,
            congestion_control: crate::flow_control::CongestionControlKind::FixedWindow,
            transport: TransportConfig::default(),
        }
    }
}

/// Where a relay's refill grid (`k x refill_interval + phase`) starts.
///
/// Tor refills its buckets from a timer of its own process: tor 0.2.2 from
/// `second_elapsed_callback`, a libevent timer armed at start-up, and tor 0.2.3-0.3.3 from
/// a `TokenBucketRefillInterval` timer armed the same way. So each relay has its own phase
/// and a cell held by one relay's empty bucket, released at its refill, can meet the next
/// relay's bucket empty until that relay's own refill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefillPhase {
    /// Every relay's grid starts at 0 s: all relays refill at the same instants (the
    /// model's default, which every published number on this project ran).
    #[default]
    Aligned,
    /// Each relay's grid starts at its own offset, uniform in `[0, refill_interval)`, drawn
    /// from the run seed and the relay's name (stream `tor-refill-phase`), as separate tor
    /// processes started at unrelated times have.
    Random,
}

/// How a client with entry guards draws a circuit's path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathOrder {
    /// The model's earlier order (the default until 2026-11-28, which the throttling
    /// reproduction's published numbers ran): one of the client's `num_entry_guards`
    /// guards uniformly, then the exit outside its /16, then the middle. Exits are biased
    /// away from the /16s of a client's guards, and a guard that leaves no exit fails the
    /// circuit (`TorError::NoPath`).
    GuardFirst,
    /// Tor's (path-spec 2.2, `onion_pick_cpath_exit` then `select_primary_guard_for_circuit`):
    /// the exit from the whole exit distribution, then one of the first `num_entry_guards`
    /// of the client's `num_primary_guards` guards that do not conflict with it
    /// (same relay or /16), uniformly; if every primary conflicts, the first further
    /// guard in sampled order that does not, sampling another when none does; then the
    /// middle outside both. The default.
    #[default]
    ExitFirst,
}
