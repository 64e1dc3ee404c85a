//! The Tor network: nodes, channels, circuits and streams, and the events that drive them.
//!
//! **Owns:** the model's event type [`TorEvent`], the dispatch of transport notices to
//! channels and exit connections, and tor's per-node processing loop, which it runs once
//! per event for every node that event touched (a "pump", what tor does in one pass of its
//! libevent loop):
//! 1. **Read** (figure 1 a-f of the throttling paper): connections with unread bytes are
//!    served in round robin, each reading at most its share of the global read bucket
//!    ([`crate::node`]), bounded by its own bucket if it is a client connection with
//!    PerConnBWRate set. Whole cells are decoded and each is handled (at its target hop)
//!    or switched to its circuit's queue for the next hop (g). An exit reads its server
//!    connections in the same loop and packages the bytes into DATA cells while the
//!    circuit and stream windows allow.
//! 2. **Write** (h-m): channel ends with cells are served in round robin. Each refills
//!    its outbuf from the circuit queues, as chosen by its [`CircuitScheduler`], when the
//!    outbuf falls below OR_CONN_LOWWATER (16 KiB) up to OR_CONN_HIGHWATER (32 KiB), then
//!    writes at most its share of the global write bucket to the kernel, bounded by the
//!    socket's free space.
//!
//! A node that runs out of global tokens stops and resumes at its next bucket refill.
//!
//! Lifetimes: a client closes a circuit dirty for `MaxCircuitDirtiness` once no stream is
//! left on it, and a channel without circuits closes after its idle timeout
//! ([`ChannelIdleTimeout`]: tor 0.2.2's `IDLE_OR_CONN_TIMEOUT`, 180 s, by default); the next
//! circuit between that pair opens a new channel.
//!
//! **Must not touch:** transport internals (it uses [`Network`]'s public API) or mechanism
//! policy (schedulers, flow control and relay hooks are traits).
//!
//! [`CircuitScheduler`]: crate::scheduler::CircuitScheduler

use std::collections::BTreeMap;

use onionlab_core::{EventClass, EventQueue, RngStreams, SimDuration, SimTime};
use onionlab_net::{ConnId, HostId, HostSpec, LatencyModel, NetEvent, NetNotice, Network, Side, TransportConfig};

use crate::cell::{CellKind, CellRun, Direction, CELL_WIRE_BYTES, RELAY_PAYLOAD_SIZE};
use crate::channel::{ChanEnd, Channel, RelayChannelEnd};
use crate::circuit::{Circuit, CircuitState, CloseReason, Stream, StreamRecord, CIRCUIT_NODES, NO_STREAM, UNFINISHED};
use crate::flow_control::{STREAMWINDOW_INCREMENT, STREAMWINDOW_START};
use crate::hooks::{RelayControl, RelayHook};
use crate::kist::{kist_run, lite_limit, socket_limit, KistChannels, KistParams};
use crate::node::{bucket_share, EndpointSpec, IoRef, NodeId, NodeKind, NodeStats, RelaySpec, TorNode};
use crate::path::{BandwidthWeights, PathSelector, Position, RelayInfo};
use crate::scheduler::{CircuitScheduler, SchedulerKind};
use crate::token_bucket::{next_refill, TokenBucket};

/// Event class of tor timers (after network events at the same instant).
pub const TOR_EVENT_CLASS: EventClass = EventClass(20);

/// Events of the Tor model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorEvent {
    Net(NetEvent),
    /// A node's token buckets refill.
    Refill {
        node: NodeId,
    },
    /// A channel's TLS and link handshakes complete.
    ChannelOpen {
        chan: u32,
    },
    /// A relay hook's periodic tick.
    Hook {
        node: NodeId,
    },
    /// A KIST scheduling run at a relay ([`crate::kist`]).
    Kist {
        node: NodeId,
    },
    /// A circuit has been dirty for MaxCircuitDirtiness: the client closes it once no
    /// stream is left on it.
    CircuitExpire {
        circ: u32,
    },
    /// A channel may have been idle, without circuits, for the idle timeout.
    ChannelIdle {
        chan: u32,
    },
    /// A client's once-a-second check for predicted circuits
    /// ([`TorConfig::predicted_circuits`]).
    PredictCircuits {
        client: NodeId,
    },
    /// A clean circuit may have been open, unused, for `CircuitIdleTimeout`.
    CircuitIdle {
        circ: u32,
    },
    /// A timer of the application driving the network (workloads, metrics). The Tor
    /// model never schedules or handles these; its driver does.
    App {
        token: u64,
    },
}

impl From<NetEvent> for TorEvent {
    fn from(e: NetEvent) -> Self {
        TorEvent::Net(e)
    }
}

/// A stream's package window when congestion control has replaced stream windows.
const UNLIMITED_STREAM_WINDOW: u64 = u64::MAX / 4;

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
    fn draw(&self, client_end: bool, rng: &mut onionlab_core::SimRng) -> SimDuration {
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
    /// Size of a client's request (an HTTP GET), carried with BEGIN as optimistic data.
    pub request_bytes: u64,
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
            request_bytes: 500,
            circ_window: crate::flow_control::CIRCWINDOW_START,
            circ_window_increment: crate::flow_control::CIRCWINDOW_INCREMENT,
            congestion_control: crate::flow_control::CongestionControlKind::FixedWindow,
            transport: TransportConfig::default(),
        }
    }
}

/// Errors from building or using a Tor network.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TorError {
    #[error(transparent)]
    Net(#[from] onionlab_net::NetError),
    #[error("path selection: {0}")]
    Path(#[from] crate::path::PathError),
    #[error("node {0} is not a {1}")]
    WrongKind(NodeId, &'static str),
    #[error("no path: the directory has no relay for the {0:?} position outside the path's other relays and their /16s")]
    NoPath(Position),
    #[error("relay {name:?}: {field} must be positive")]
    ZeroRate { name: String, field: &'static str },
}

#[derive(Clone, Copy, Debug)]
enum ConnRole {
    Channel(u32),
    /// Exit-to-server connection of a stream.
    Edge(u32),
}

/// Counters for invariant checks and run summaries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorCounters {
    /// Cells created at their origin (edges and extending relays).
    pub cells_emitted: u64,
    /// Cells handled at their target hop.
    pub cells_consumed: u64,
    /// Cells dropped because their circuit closed.
    pub cells_dropped: u64,
    /// Cells read off channels: one per cell per hop (the "cell-hops" of benchmarks).
    pub cell_hops: u64,
    pub circuit_sendmes_sent: u64,
    pub circuit_sendmes_received: u64,
    /// SENDMEs dropped because their circuit closed before they arrived.
    pub circuit_sendmes_dropped: u64,
    pub stream_sendmes_sent: u64,
    pub stream_sendmes_received: u64,
    pub stream_sendmes_dropped: u64,
    pub circuits_built: u64,
    pub circuits_closed_queue_limit: u64,
    /// Circuits the client closed after MaxCircuitDirtiness with no stream left.
    pub circuits_expired: u64,
    /// Clean (predicted, never used) circuits the client closed after
    /// `CircuitIdleTimeout`.
    pub circuits_closed_idle: u64,
    /// Predicted-circuit launches that found no path (tried again a second later).
    pub predicted_launches_failed: u64,
    /// Channels closed after the idle timeout without circuits.
    pub channels_closed_idle: u64,
    pub streams_completed: u64,
    pub streams_failed: u64,
}

/// The whole simulated Tor network over a transport [`Network`].
pub struct TorNetwork {
    pub cfg: TorConfig,
    pub net: Network,
    nodes: Vec<TorNode>,
    relays: Vec<NodeId>,
    relay_info: Vec<RelayInfo>,
    weights: BandwidthWeights,
    selector: Option<PathSelector>,
    chans: Vec<Channel>,
    chan_by_pair: BTreeMap<(NodeId, NodeId), u32>,
    conn_role: Vec<ConnRole>,
    /// Circuit slots; a closed circuit's slot is reused once none of its cells is left
    /// in an outbuf or on the wire (see [`Circuit::cells_out`]).
    circuits: Vec<Circuit>,
    free_circuits: Vec<u32>,
    /// Stream slots; a finished stream's slot is reused (see [`Self::release_stream`]).
    streams: Vec<Stream>,
    /// Slots of finished streams, free for new ones (last freed first: still in cache).
    free_streams: Vec<u32>,
    records: Vec<StreamRecord>,
    hooks: Vec<Option<Box<dyn RelayHook>>>,
    /// Circuits with a packaging rate limit (refilled with their exit's buckets).
    rate_limited: Vec<u32>,
    rng_streams: RngStreams,
    /// Draws channels' idle timeouts (only when a class's range is wider than one value).
    idle_rng: onionlab_core::SimRng,
    notices: Vec<NetNotice>,
    dirty: Vec<NodeId>,
    /// Channels whose last circuit closed during this event: their idle timers are
    /// scheduled when the event's processing ends.
    idle_timers: Vec<u32>,
    /// Clients that lost a circuit able to take streams during this event: their
    /// predicted-circuit checks are scheduled when the event's processing ends.
    predict_checks: Vec<NodeId>,
    /// Circuits unblocked during the current write pass or KIST run.
    unblocked: Vec<u32>,
    last_kist_run: Option<(NodeId, crate::kist::KistRun)>,
    pub counters: TorCounters,
}

/// Counts a run dropped because its circuit closed.
fn count_dropped(k: &mut TorCounters, run: CellRun) {
    let n = run.count as u64;
    k.cells_dropped += n;
    match run.kind {
        CellKind::CircuitSendme => k.circuit_sendmes_dropped += n,
        CellKind::StreamSendme => k.stream_sendmes_dropped += n,
        _ => {}
    }
}

fn side_index(s: Side) -> usize {
    match s {
        Side::Initiator => 0,
        Side::Acceptor => 1,
    }
}

/// The side whose [`side_index`] is `i`.
fn side_at(i: usize) -> Side {
    if i == 0 {
        Side::Initiator
    } else {
        Side::Acceptor
    }
}

impl TorNetwork {
    pub fn new(cfg: TorConfig, latency: LatencyModel, weights: BandwidthWeights, seed: u64) -> Self {
        let net = Network::new(cfg.transport.clone(), latency, seed);
        let rng_streams = RngStreams::new(seed);
        TorNetwork {
            cfg,
            net,
            nodes: Vec::new(),
            relays: Vec::new(),
            relay_info: Vec::new(),
            weights,
            selector: None,
            chans: Vec::new(),
            chan_by_pair: BTreeMap::new(),
            conn_role: Vec::new(),
            circuits: Vec::new(),
            streams: Vec::new(),
            free_streams: Vec::new(),
            free_circuits: Vec::new(),
            records: Vec::new(),
            hooks: Vec::new(),
            rate_limited: Vec::new(),
            idle_rng: rng_streams.stream("tor-channel-idle", ""),
            rng_streams,
            notices: Vec::new(),
            dirty: Vec::new(),
            idle_timers: Vec::new(),
            predict_checks: Vec::new(),
            unblocked: Vec::new(),
            last_kist_run: None,
            counters: TorCounters::default(),
        }
    }

    fn add_node(&mut self, name: &str, location: u32, up: u64, down: u64, kind: NodeKind) -> Result<NodeId, TorError> {
        let host = self.net.add_host(HostSpec { name: name.to_string(), location, up_bits_per_sec: up, down_bits_per_sec: down })?;
        let id = self.nodes.len() as NodeId;
        self.nodes.push(TorNode {
            name: name.to_string(),
            host,
            kind,
            read_bucket: TokenBucket::unlimited(),
            write_bucket: TokenBucket::unlimited(),
            perconn: None,
            scheduler: SchedulerKind::default(),
            read_ring: Default::default(),
            write_ring: Default::default(),
            chans: Vec::new(),
            kist_ends: Vec::new(),
            refill_pending: false,
            dirty: false,
            guards: Vec::new(),
            bridge: None,
            circs: Vec::new(),
            predict: Default::default(),
            kist: None,
            kist_wanted: false,
            kist_pending: false,
            kist_last_run: None,
            rng: (kind == NodeKind::Client).then(|| self.rng_streams.stream("tor-client", name)),
            stats: NodeStats::default(),
        });
        self.hooks.push(None);
        Ok(id)
    }

    /// Reserves room for `additional` more nodes (relays, clients and servers) so that a
    /// network with millions of clients is built without repeated reallocation.
    pub fn reserve_nodes(&mut self, additional: usize) {
        self.nodes.reserve_exact(additional);
        self.hooks.reserve_exact(additional);
        self.net.reserve_hosts(additional);
    }

    /// Adds a relay. Its buckets start full.
    pub fn add_relay(&mut self, spec: RelaySpec) -> Result<NodeId, TorError> {
        if spec.bandwidth_rate == 0 {
            return Err(TorError::ZeroRate { name: spec.name, field: "bandwidth_rate" });
        }
        if spec.bandwidth_burst == 0 {
            return Err(TorError::ZeroRate { name: spec.name, field: "bandwidth_burst" });
        }
        let id = self.add_node(&spec.name, spec.location, spec.up_bits_per_sec, spec.down_bits_per_sec, NodeKind::Relay)?;
        let n = &mut self.nodes[id as usize];
        n.read_bucket = TokenBucket::new(spec.bandwidth_rate, spec.bandwidth_burst);
        n.write_bucket = TokenBucket::new(spec.bandwidth_rate, spec.bandwidth_burst);
        n.perconn = spec.perconn;
        n.scheduler = spec.scheduler;
        n.kist = spec.scheduler.kist();
        self.relays.push(id);
        let subnet = spec.address.map(RelayInfo::subnet_of);
        self.relay_info.push(RelayInfo { nickname: spec.name, bandwidth: spec.consensus_weight, flags: spec.flags, subnet });
        self.selector = None;
        Ok(id)
    }

    pub fn add_client(&mut self, spec: EndpointSpec) -> Result<NodeId, TorError> {
        self.add_node(&spec.name, spec.location, spec.up_bits_per_sec, spec.down_bits_per_sec, NodeKind::Client)
    }

    pub fn add_server(&mut self, spec: EndpointSpec) -> Result<NodeId, TorError> {
        self.add_node(&spec.name, spec.location, spec.up_bits_per_sec, spec.down_bits_per_sec, NodeKind::Server)
    }

    /// Sets the bandwidth weights to those tor's directory authorities compute for the
    /// relays added so far ([`BandwidthWeights::computed_v10`], weight scale 10000), for
    /// networks whose consensus carries none. Call it after the last relay and before the
    /// first stream (paths are drawn with the weights in force then).
    pub fn compute_bandwidth_weights(&mut self) -> Result<&BandwidthWeights, TorError> {
        let totals = crate::path::BandwidthTotals::of(&self.relay_info);
        self.weights = BandwidthWeights::computed_v10(totals, crate::path::DEFAULT_WEIGHT_SCALE)?;
        self.selector = None;
        Ok(&self.weights)
    }

    /// The bandwidth weights paths are drawn with.
    pub fn bandwidth_weights(&self) -> &BandwidthWeights {
        &self.weights
    }

    pub fn node_name(&self, n: NodeId) -> &str {
        &self.nodes[n as usize].name
    }
    pub fn node_kind(&self, n: NodeId) -> NodeKind {
        self.nodes[n as usize].kind
    }
    pub fn node_stats(&self, n: NodeId) -> &NodeStats {
        &self.nodes[n as usize].stats
    }
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
    pub fn relays(&self) -> &[NodeId] {
        &self.relays
    }

    /// Installs a periodic hook on a relay (guard throttling, Tortoise, ...). The first
    /// tick is one interval from now.
    pub fn set_relay_hook(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, hook: Box<dyn RelayHook>) -> Result<(), TorError> {
        if self.nodes[node as usize].kind != NodeKind::Relay {
            return Err(TorError::WrongKind(node, "relay"));
        }
        q.schedule_in(hook.interval(), TOR_EVENT_CLASS, TorEvent::Hook { node });
        self.hooks[node as usize] = Some(hook);
        self.ensure_refill(q, node);
        Ok(())
    }

    /// Connections from clients (not relays) to relay `node`, in channel order, with their
    /// byte counters and current per-connection throttle.
    pub fn client_connections(&self, node: NodeId) -> Vec<crate::hooks::ClientConnection> {
        let mut out = Vec::new();
        for &(chan, side) in &self.nodes[node as usize].chans {
            let peer = self.chan_peer(chan, side);
            if self.node_kind(peer) != NodeKind::Client {
                continue;
            }
            let ch = &self.chans[chan as usize];
            let end = &ch.ends[side_index(side)];
            out.push(crate::hooks::ClientConnection {
                chan,
                client: peer,
                bytes_read: end.bytes_read,
                bytes_written: end.bytes_written,
                throttle: end.conn_read.as_ref().map(|b| (b.rate(), b.burst())),
                bucket_empty_intervals: u64::from(ch.conn_bucket_empty_intervals[side_index(side)]),
            });
        }
        out
    }

    /// Makes every circuit of `client` enter the network through `relay` (its own relay,
    /// used as a bridge: Tortoise's client-relays), whatever the relay's flags.
    pub fn use_bridge(&mut self, client: NodeId, relay: NodeId) -> Result<(), TorError> {
        if self.node_kind(client) != NodeKind::Client {
            return Err(TorError::WrongKind(client, "client"));
        }
        let idx = self.relays.iter().position(|&r| r == relay).ok_or(TorError::WrongKind(relay, "relay"))?;
        self.nodes[client as usize].bridge = Some(idx);
        Ok(())
    }

    /// The consensus flags of relay `node` (`None` for clients and servers).
    pub fn relay_flags(&self, node: NodeId) -> Option<crate::path::RelayFlags> {
        self.relays.iter().position(|&r| r == node).map(|i| self.relay_info[i].flags)
    }

    /// Every connection of relay `node` (to relays and clients), in channel order.
    pub fn connections(&self, node: NodeId) -> Vec<crate::hooks::PeerConnection> {
        self.nodes[node as usize]
            .chans
            .iter()
            .map(|&(chan, side)| {
                let peer = self.chan_peer(chan, side);
                let end = &self.chans[chan as usize].ends[side_index(side)];
                crate::hooks::PeerConnection {
                    chan,
                    peer,
                    peer_kind: self.node_kind(peer),
                    peer_flags: self.relay_flags(peer),
                    inbound: side == Side::Acceptor,
                    bytes_read: end.bytes_read,
                    bytes_written: end.bytes_written,
                    read_limit: end.conn_read.as_ref().map(|b| (b.rate(), b.burst())),
                    write_limit: end.conn_write.as_ref().map(|b| (b.rate(), b.burst())),
                }
            })
            .collect()
    }

    /// Every channel end a relay holds toward another relay (open, or still in its
    /// handshakes; closed channels are gone), with what waits to be written on it: the
    /// per-channel view behind the `channels` results table. Built by one pass over the
    /// circuits, so call it at metrics intervals, not per event.
    pub fn relay_channel_ends(&self) -> Vec<RelayChannelEnd> {
        // Per (channel, side): queued cells and active circuits.
        let mut queued = vec![(0u64, 0u32); self.chans.len() * 2];
        for c in &self.circuits {
            for (pos, qs) in c.queues.iter().enumerate() {
                for dir in [Direction::Out, Direction::In] {
                    let n = qs[dir.index()].cells.len();
                    if n == 0 {
                        continue;
                    }
                    if let Some(chan) = c.queue_chan(pos, dir) {
                        let slot = &mut queued[chan as usize * 2 + side_index(c.queue_side(pos, dir))];
                        slot.0 += n;
                        slot.1 += 1;
                    }
                }
            }
        }
        let mut out = Vec::new();
        for &relay in &self.relays {
            for &(chan, side) in &self.nodes[relay as usize].chans {
                let peer = self.chan_peer(chan, side);
                if self.node_kind(peer) != NodeKind::Relay {
                    continue;
                }
                let ch = &self.chans[chan as usize];
                let end = &ch.ends[side_index(side)];
                let (in_queues, active) = queued[chan as usize * 2 + side_index(side)];
                out.push(RelayChannelEnd {
                    chan,
                    relay,
                    peer,
                    initiator: side == Side::Initiator,
                    open: ch.open,
                    bytes_read: end.bytes_read,
                    bytes_written: end.bytes_written,
                    circuits: ch.circuits,
                    active_circuits: active,
                    queued_cells: in_queues + end.outbuf.len(),
                });
            }
        }
        out
    }

    /// The installed hook's [`RelayHook::throttle_threshold`] on relay `node`, if any.
    pub fn hook_throttle_threshold(&self, node: NodeId) -> Option<u64> {
        self.hooks.get(node as usize).and_then(|h| h.as_ref()).and_then(|h| h.throttle_threshold())
    }

    /// Limits how fast the exit packages cells onto `circ` (bytes of cells per second);
    /// the hook congestion controllers use. Refilled with the exit's buckets.
    pub fn set_circuit_rate_limit(&mut self, q: &mut EventQueue<TorEvent>, circ: u32, rate: u64, burst: u64) {
        let c = &mut self.circuits[circ as usize];
        if c.rate_limit.is_none() {
            self.rate_limited.push(circ);
        }
        c.rate_limit = Some(TokenBucket::new(rate, burst));
        let exit = c.nodes[c.exit_pos()];
        self.ensure_refill(q, exit);
    }

    /// Completed and failed streams since the last call.
    pub fn take_records(&mut self) -> Vec<StreamRecord> {
        std::mem::take(&mut self.records)
    }

    /// A record for every stream still in progress, in the order they started, with
    /// `error` [`UNFINISHED`] and no time to last byte: what a driver writes at the end of
    /// a run so that downloads the end cut short are counted, not silently dropped (a
    /// median over completed downloads alone favours a policy that starves some clients).
    /// Changes nothing.
    pub fn unfinished_records(&self) -> Vec<StreamRecord> {
        let mut out: Vec<StreamRecord> = (0..self.streams.len() as u32)
            .filter(|&sid| !self.streams[sid as usize].done)
            .map(|sid| {
                let s = &self.streams[sid as usize];
                Self::stream_record(sid, s, &self.circuits[s.circ as usize], None, Some(UNFINISHED))
            })
            .collect();
        out.sort_by_key(|r| (r.start, r.stream));
        out
    }

    fn stream_record(sid: u32, s: &Stream, c: &Circuit, ttlb: Option<SimDuration>, error: Option<&'static str>) -> StreamRecord {
        StreamRecord {
            stream: sid,
            circuit: s.circ,
            tag: s.tag,
            client: s.client,
            server: s.server,
            bytes: s.bytes,
            // Whole cells: the last one carries the remainder.
            received: (s.delivered_cells * RELAY_PAYLOAD_SIZE).min(s.bytes),
            start: s.start,
            ttfb: s.first_byte.map(|t| t.saturating_since(s.start)),
            ttlb,
            path: c.nodes[1..].to_vec(),
            circuit_build_time: c.opened_at.map(|t| t.saturating_since(c.created_at)),
            error,
        }
    }

    /// Whether [`take_records`](Self::take_records) has anything: drivers check this after
    /// every event, and most events finish no stream.
    #[inline]
    pub fn has_records(&self) -> bool {
        !self.records.is_empty()
    }

    fn selector(&mut self) -> Result<&PathSelector, TorError> {
        if self.selector.is_none() {
            self.selector = Some(PathSelector::new(&self.relay_info, self.weights.clone())?);
        }
        Ok(self.selector.as_ref().expect("just built"))
    }

    // ------------------------------------------------------------------ clients

    /// Starts a stream from `client` fetching `bytes` from `server`. The stream takes the
    /// client's best circuit that can take it ([`Self::best_circuit`]), else a new one.
    /// Returns the stream's id, which names it until it finishes: a finished stream's id
    /// is given to a later stream (its [`StreamRecord`] keeps what it was).
    pub fn start_stream(
        &mut self,
        q: &mut EventQueue<TorEvent>,
        client: NodeId,
        server: NodeId,
        bytes: u64,
        tag: u64,
    ) -> Result<u32, TorError> {
        if self.nodes[client as usize].kind != NodeKind::Client {
            return Err(TorError::WrongKind(client, "client"));
        }
        if self.nodes[server as usize].kind != NodeKind::Server {
            return Err(TorError::WrongKind(server, "server"));
        }
        let now = q.now();
        if self.cfg.predicted_circuits {
            self.note_port_used(q, client);
        }
        let circ = match self.best_circuit(client, now) {
            Some(c) => c,
            None => self.build_circuit(q, client)?,
        };
        let id = self.free_streams.pop().unwrap_or(self.streams.len() as u32);
        let c = &mut self.circuits[circ as usize];
        if c.dirty_since.is_none() {
            c.dirty_since = Some(now);
            q.schedule_in(self.cfg.max_circuit_dirtiness, TOR_EVENT_CLASS, TorEvent::CircuitExpire { circ });
        }
        let idx = c.streams.len() as u16;
        c.streams.push(id);
        c.live.push(id);
        let stream = Stream {
            client,
            server,
            circ,
            idx,
            bytes,
            tag,
            start: now,
            first_byte: None,
            done: false,
            exit_conn: None,
            exit_read: 0,
            exit_inbuf: 0,
            // With congestion control on, XON/XOFF replaces stream windows; the client
            // reads what arrives at once, so it never sends XOFF: no limit.
            package_window: if self.cfg.congestion_control.stream_windows() { STREAMWINDOW_START } else { UNLIMITED_STREAM_WINDOW },
            packaged_cells: 0,
            sendmes_sent: 0,
            sendmes_received: 0,
            in_read_ring: false,
            request_written: 0,
            request_read: 0,
            server_written: 0,
            delivered_cells: 0,
            deliver_window: STREAMWINDOW_START,
        };
        match self.streams.get_mut(id as usize) {
            Some(slot) => *slot = stream,
            None => self.streams.push(stream),
        }
        if self.circuits[circ as usize].state == CircuitState::Open {
            self.send_begin(q, circ, idx);
        } else {
            self.circuits[circ as usize].pending_begins.push(idx);
        }
        if self.cfg.predicted_circuits {
            // A port predicted again after an hour without streams.
            self.schedule_prediction(q, client);
        }
        self.flush_dirty(q);
        Ok(id)
    }

    /// Whether `circ` could take a new stream now: not closed, clean or dirty for less
    /// than MaxCircuitDirtiness, and with stream ids left (ids are 16 bits; tor gives up
    /// on a circuit that has run out of them, `get_unique_stream_id_by_circ`).
    fn takes_streams(&self, circ: u32, now: SimTime) -> bool {
        let c = &self.circuits[circ as usize];
        c.state != CircuitState::Closed
            && c.dirty_since.is_none_or(|d| now.saturating_since(d) < self.cfg.max_circuit_dirtiness)
            && c.streams.len() <= u16::MAX as usize
    }

    /// The circuit a new stream of `client` takes, as tor's `circuit_get_best` picks it:
    /// an open circuit if there is one, else one being built; among those, a dirty circuit
    /// before a clean one (`circuit_is_better`), the most recently dirtied of the dirty
    /// ones and the most recently created of the clean ones. `None`: build a new one.
    fn best_circuit(&self, client: NodeId, now: SimTime) -> Option<u32> {
        let rank = |c: &Circuit| (c.state == CircuitState::Open, c.dirty_since.is_some(), c.dirty_since.unwrap_or(c.created_at));
        let mut best: Option<u32> = None;
        for &circ in &self.nodes[client as usize].circs {
            if !self.takes_streams(circ, now) {
                continue;
            }
            // Strictly better only: of equals, the oldest circuit in the list wins.
            if best.is_none_or(|b| rank(&self.circuits[circ as usize]) > rank(&self.circuits[b as usize])) {
                best = Some(circ);
            }
        }
        best
    }

    // ------------------------------------------------------------- predicted circuits

    /// A stream of `client` is starting: its tor starts now if it has not (and runs its
    /// first check for predicted circuits at once), and the port is predicted for another
    /// `PREDICTED_CIRCS_RELEVANCE_TIME` (`rep_hist_note_used_port`).
    fn note_port_used(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let p = &mut self.nodes[client as usize].predict;
        p.until = now + PREDICTED_CIRCS_RELEVANCE_TIME;
        if p.started.is_none() {
            p.started = Some(now);
            self.predict_and_launch(q, client);
        }
    }

    /// Whether `client` would launch a circuit for its predicted port now: the port is
    /// predicted, it has fewer than `MAX_UNUSED_OPEN_CIRCUITS` clean circuits and fewer
    /// than `MIN_CIRCUITS_HANDLING_STREAM` circuits that could take a stream
    /// (`circuit_stream_is_being_handled`).
    fn needs_predicted_circuit(&self, client: NodeId, now: SimTime) -> bool {
        let n = &self.nodes[client as usize];
        if !self.cfg.predicted_circuits || n.predict.started.is_none() || now >= n.predict.until {
            return false;
        }
        let handling = n.circs.iter().filter(|&&c| self.takes_streams(c, now)).count();
        self.clean_circuits(client) < MAX_UNUSED_OPEN_CIRCUITS && handling < MIN_CIRCUITS_HANDLING_STREAM
    }

    fn clean_circuits(&self, client: NodeId) -> usize {
        self.nodes[client as usize].circs.iter().filter(|&&c| self.circuits[c as usize].dirty_since.is_none()).count()
    }

    /// When `client` will want a build-time test circuit, if it learns build times:
    /// `test_frequency` after its last launch, while it has completed fewer than
    /// `CBT_MIN_CIRCUITS_TO_OBSERVE` and has fewer than `max_clean` clean circuits
    /// (`circuit_build_times_needs_circuits_now`, `needs_circuits_for_build`). A check
    /// launches one at a time strictly later than that.
    fn test_circuit_due(&self, client: NodeId) -> Option<SimTime> {
        let cbt = self.cfg.cbt_learning?;
        let p = &self.nodes[client as usize].predict;
        let wanted = self.cfg.predicted_circuits
            && p.started.is_some()
            && p.built < CBT_MIN_CIRCUITS_TO_OBSERVE
            && self.clean_circuits(client) < cbt.max_clean;
        wanted.then(|| p.last_launch + cbt.test_frequency)
    }

    /// Tor's once-a-second `circuit_predict_and_launch_new`, which launches at most one
    /// circuit per call: for the predicted port first, else a build-time test circuit.
    /// Run now (at a client's start-up) or from [`TorEvent::PredictCircuits`]; schedules
    /// the next check that would launch one. A launch can fail where a path was found
    /// before: the client's guard is drawn afresh for each circuit, and one guard may
    /// leave no exit (`NoPath`). Tor logs such a failure and tries again at its next
    /// check; so does the model, counting it (`predicted_launches_failed`). A stream that
    /// finds no circuit builds its own, and its failure is the run's error, as without
    /// prediction.
    fn predict_and_launch(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let launch = self.needs_predicted_circuit(client, now) || self.test_circuit_due(client).is_some_and(|due| now > due);
        if launch && self.build_circuit(q, client).is_err() {
            self.counters.predicted_launches_failed += 1;
        }
        self.schedule_prediction(q, client);
    }

    /// Schedules `client`'s next check that would launch a circuit: the first whole
    /// second (counted from its start) after now for its port, or after a test circuit
    /// falls due; an earlier need than the scheduled check schedules another. Called
    /// where a need may arise: a circuit stopped taking streams (its dirtiness ran out,
    /// or it closed), a check or launch, or a stream made the port predicted again.
    fn schedule_prediction(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) {
        let now = q.now();
        let after = if self.needs_predicted_circuit(client, now) {
            now
        } else {
            match self.test_circuit_due(client) {
                Some(due) => due.max(now),
                None => return,
            }
        };
        let p = &mut self.nodes[client as usize].predict;
        let started = p.started.expect("only started clients need circuits");
        let second = SimDuration::from_secs(1).as_nanos();
        let since = after.saturating_since(started).as_nanos();
        // The first whole second strictly after `after`: tor's check runs once per second,
        // and the one of this second (if any) has run already.
        let at = started + SimDuration::from_nanos((since / second + 1) * second);
        if p.check_at.is_some_and(|t| t <= at) {
            return;
        }
        p.check_at = Some(at);
        q.schedule_in(at.saturating_since(now), TOR_EVENT_CLASS, TorEvent::PredictCircuits { client });
    }

    fn build_circuit(&mut self, q: &mut EventQueue<TorEvent>, client: NodeId) -> Result<u32, TorError> {
        let num_guards = self.cfg.num_entry_guards.max(1);
        let mut rng = self.nodes[client as usize].rng.take().expect("clients have an rng");
        let mut guards = self.nodes[client as usize].guards.clone();
        let bridge = self.nodes[client as usize].bridge;
        let use_guards = self.cfg.use_entry_guards;
        let result = (|| {
            let sel = self.selector()?;
            if let Some(b) = bridge {
                return sel.choose_path_via(&mut rng, b).ok_or(TorError::NoPath(Position::Exit));
            }
            if !use_guards {
                return sel.choose_path(&mut rng, None).ok_or(TorError::NoPath(Position::Guard));
            }
            while guards.len() < num_guards {
                match sel.choose(Position::Guard, &mut rng, &guards) {
                    Some(g) => guards.push(g),
                    None if guards.is_empty() => return Err(TorError::NoPath(Position::Guard)),
                    None => break,
                }
            }
            let guard = guards[rand::Rng::random_range(&mut rng, 0..guards.len())];
            let path = sel.choose_path(&mut rng, Some(guard)).ok_or(TorError::NoPath(Position::Exit))?;
            Ok(path)
        })();
        self.nodes[client as usize].rng = Some(rng);
        let path = result?;
        self.nodes[client as usize].guards = guards;
        let nodes = [client, self.relays[path[0]], self.relays[path[1]], self.relays[path[2]]];
        let circuit = Circuit {
            nodes,
            chans: [None; CIRCUIT_NODES - 1],
            queues: Default::default(),
            policy: Default::default(),
            built: 0,
            lower_initiates: [false; CIRCUIT_NODES - 1],
            state: CircuitState::Building,
            close_reason: None,
            cells_out: 0,
            created_at: q.now(),
            opened_at: None,
            dirty_since: None,
            streams: Vec::new(),
            live: Vec::new(),
            expired: false,
            edge_blocked: false,
            pending_begins: Vec::new(),
            cc_client: self.cfg.congestion_control.build(self.cfg.circ_window, self.cfg.circ_window_increment),
            cc_exit: self.cfg.congestion_control.build(self.cfg.circ_window, self.cfg.circ_window_increment),
            rate_limit: None,
        };
        let id = match self.free_circuits.pop() {
            Some(id) => {
                self.circuits[id as usize] = circuit;
                id
            }
            None => {
                self.circuits.push(circuit);
                self.circuits.len() as u32 - 1
            }
        };
        self.nodes[client as usize].circs.push(id);
        self.nodes[client as usize].predict.last_launch = q.now();
        if self.cfg.predicted_circuits {
            q.schedule_in(self.cfg.circuit_idle_timeout, TOR_EVENT_CLASS, TorEvent::CircuitIdle { circ: id });
        }
        self.extend_to(q, id, 0);
        Ok(id)
    }

    /// Node at `pos` sends CREATE to `pos + 1`, opening a channel if there is none.
    fn extend_to(&mut self, q: &mut EventQueue<TorEvent>, circ: u32, pos: usize) {
        let (a, b) = {
            let c = &self.circuits[circ as usize];
            (c.nodes[pos], c.nodes[pos + 1])
        };
        let chan = self.channel_between(q, a, b);
        self.circuits[circ as usize].chans[pos] = Some(chan);
        self.circuits[circ as usize].lower_initiates[pos] = self.chans[chan as usize].nodes[0] == a;
        self.chans[chan as usize].circuits += 1;
        let run = CellRun { circ, count: 1, dir: Direction::Out, kind: CellKind::Create, target: (pos + 1) as u8, stream: 0 };
        self.emit(q.now(), circ, pos, run);
    }

    fn channel_between(&mut self, q: &mut EventQueue<TorEvent>, a: NodeId, b: NodeId) -> u32 {
        let key = (a.min(b), a.max(b));
        if let Some(&c) = self.chan_by_pair.get(&key) {
            return c;
        }
        let (ha, hb) = (self.nodes[a as usize].host, self.nodes[b as usize].host);
        let conn = self.net.connect(q, ha, hb).expect("hosts of two distinct nodes");
        let id = self.chans.len() as u32;
        let mut ends = [
            ChanEnd::new(self.nodes[a as usize].scheduler.build(), conn, a),
            ChanEnd::new(self.nodes[b as usize].scheduler.build(), conn, b),
        ];
        // PerConnBWRate/Burst apply to a relay's connections from clients
        // (connection_or_update_token_buckets_helper).
        if self.nodes[a as usize].kind == NodeKind::Client {
            if let Some((rate, burst)) = self.nodes[b as usize].perconn {
                ends[1].conn_read = Some(TokenBucket::new(rate, burst));
                ends[1].conn_write = Some(TokenBucket::new(rate, burst));
            }
        }
        let client_end = self.nodes[a as usize].kind == NodeKind::Client || self.nodes[b as usize].kind == NodeKind::Client;
        let idle_timeout = self.cfg.idle_channel_timeout.map_or(SimDuration::ZERO, |t| t.draw(client_end, &mut self.idle_rng));
        self.chans.push(Channel {
            conn,
            nodes: [a, b],
            open: false,
            closed: false,
            circuits: 0,
            idle_since: q.now(),
            idle_timeout,
            conn_bucket_empty_intervals: [0; 2],
            ends,
        });
        self.chan_by_pair.insert(key, id);
        self.set_role(conn, ConnRole::Channel(id));
        self.nodes[a as usize].chans.push((id, Side::Initiator));
        self.nodes[b as usize].chans.push((id, Side::Acceptor));
        id
    }

    fn set_role(&mut self, conn: ConnId, role: ConnRole) {
        let i = conn.0 as usize;
        if self.conn_role.len() <= i {
            self.conn_role.resize(i + 1, ConnRole::Channel(u32::MAX));
        }
        self.conn_role[i] = role;
    }

    fn send_begin(&mut self, q: &mut EventQueue<TorEvent>, circ: u32, idx: u16) {
        let exit = self.circuits[circ as usize].exit_pos();
        let run = CellRun { circ, count: 1, dir: Direction::Out, kind: CellKind::Begin, target: exit as u8, stream: idx };
        self.emit(q.now(), circ, 0, run);
    }

    // ------------------------------------------------------------------ cells

    /// A new cell run starts at `pos` of `circ`.
    fn emit(&mut self, now: SimTime, circ: u32, pos: usize, run: CellRun) {
        self.counters.cells_emitted += run.count as u64;
        self.enqueue(now, circ, pos, run);
    }

    /// Puts `run` in the circuit queue at `pos` for its direction and wakes the channel.
    fn enqueue(&mut self, now: SimTime, circ: u32, pos: usize, run: CellRun) {
        let c = &mut self.circuits[circ as usize];
        let exit_pos = c.exit_pos();
        let q = &mut c.queues[pos][run.dir.index()];
        let was_empty = q.cells.is_empty();
        q.cells.push(run);
        let queued = q.cells.len();
        if pos != 0 && pos != exit_pos {
            q.relayed += run.count as u64;
        }
        if queued > self.cfg.circ_max_cell_queue {
            self.close_circuit(now, circ, CloseReason::QueueLimit);
            return;
        }
        let Some(chan) = c.queue_chan(pos, run.dir) else {
            return; // The next hop is not extended to yet (cannot happen for relayed cells).
        };
        let node = c.nodes[pos];
        let side = c.queue_side(pos, run.dir);
        let end = &mut self.chans[chan as usize].ends[side_index(side)];
        if was_empty {
            end.sched.activate(circ, now, &mut c.policy[pos][run.dir.index()]);
        }
        let n = &mut self.nodes[node as usize];
        if n.kist.is_some() {
            // KIST moves cells to outbufs in its own runs; the write pass only writes them.
            n.kist_wanted = true;
            if !end.in_kist_ends {
                end.in_kist_ends = true;
                n.kist_ends.push((chan, side));
            }
        } else if end.open && !end.in_write_ring {
            end.in_write_ring = true;
            self.nodes[node as usize].write_ring.push_back(IoRef::Chan(chan, side));
        }
        self.mark_dirty(node);
    }

    fn mark_dirty(&mut self, node: NodeId) {
        let n = &mut self.nodes[node as usize];
        if !n.dirty {
            n.dirty = true;
            self.dirty.push(node);
        }
    }

    /// Handles a run decoded at `node` from a channel.
    fn on_run(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, run: CellRun) {
        let c = &mut self.circuits[run.circ as usize];
        c.cells_out -= run.count;
        if c.state == CircuitState::Closed {
            count_dropped(&mut self.counters, run);
            if c.cells_out == 0 {
                self.free_circuits.push(run.circ); // Its last cell has gone.
            }
            return;
        }
        let pos = c.position(node);
        if run.target as usize != pos {
            self.nodes[node as usize].stats.cells_relayed += run.count as u64;
            self.enqueue(q.now(), run.circ, pos, run);
            return;
        }
        self.counters.cells_consumed += run.count as u64;
        self.handle_cell(q, node, pos, run);
    }

    fn handle_cell(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, pos: usize, run: CellRun) {
        let now = q.now();
        let circ = run.circ;
        match run.kind {
            CellKind::Create => {
                let reply = CellRun { circ, count: 1, dir: Direction::In, kind: CellKind::Created, target: (pos - 1) as u8, stream: 0 };
                self.emit(now, circ, pos, reply);
            }
            CellKind::Created if pos == 0 => self.on_hop_built(q, circ),
            CellKind::Created => {
                let reply = CellRun { circ, count: 1, dir: Direction::In, kind: CellKind::Extended, target: 0, stream: 0 };
                self.emit(now, circ, pos, reply);
            }
            CellKind::Extend => self.extend_to(q, circ, pos),
            CellKind::Extended => self.on_hop_built(q, circ),
            CellKind::Begin => {
                let Some(sid) = self.live_stream(circ, run.stream) else { return };
                let server = self.streams[sid as usize].server;
                let (he, hs) = (self.nodes[node as usize].host, self.nodes[server as usize].host);
                let conn = self.net.connect(q, he, hs).expect("exit and server are distinct hosts");
                self.streams[sid as usize].exit_conn = Some(conn);
                self.set_role(conn, ConnRole::Edge(sid));
            }
            CellKind::Connected => {}
            CellKind::Data if pos == 0 => self.deliver_at_client(now, circ, run),
            // Uploads are not modelled beyond the request that rides with BEGIN.
            CellKind::Data => {}
            CellKind::CircuitSendme => {
                self.counters.circuit_sendmes_received += run.count as u64;
                let c = &mut self.circuits[circ as usize];
                for _ in 0..run.count {
                    c.cc_exit.on_sendme(now);
                }
                self.wake_circuit_streams(node, circ);
            }
            CellKind::StreamSendme => {
                self.counters.stream_sendmes_received += run.count as u64;
                let Some(sid) = self.live_stream(circ, run.stream) else { return };
                let s = &mut self.streams[sid as usize];
                s.sendmes_received += run.count;
                s.package_window = (s.package_window + STREAMWINDOW_INCREMENT * run.count as u64).min(STREAMWINDOW_START);
                self.wake_edge(node, sid);
            }
        }
    }

    fn on_hop_built(&mut self, q: &mut EventQueue<TorEvent>, circ: u32) {
        let now = q.now();
        let c = &mut self.circuits[circ as usize];
        c.built += 1;
        if c.built < c.nodes.len() - 1 {
            let target = c.built as u8;
            let run = CellRun { circ, count: 1, dir: Direction::Out, kind: CellKind::Extend, target, stream: 0 };
            self.emit(now, circ, 0, run);
            return;
        }
        c.state = CircuitState::Open;
        c.opened_at = Some(now);
        self.counters.circuits_built += 1;
        if self.cfg.predicted_circuits && c.dirty_since.is_none() && now >= c.created_at + self.cfg.circuit_idle_timeout {
            // Its idle timer fired while it was still being built; tor's periodic expiry
            // check would find it open and old now.
            q.schedule_in(SimDuration::ZERO, TOR_EVENT_CLASS, TorEvent::CircuitIdle { circ });
        }
        let client = c.nodes[0];
        let p = &mut self.nodes[client as usize].predict;
        p.built = p.built.saturating_add(1);
        for idx in std::mem::take(&mut c.pending_begins) {
            self.send_begin(q, circ, idx);
        }
    }

    fn deliver_at_client(&mut self, now: SimTime, circ: u32, run: CellRun) {
        let Some(sid) = self.live_stream(circ, run.stream) else { return };
        let n = run.count as u64;
        let stream_windows = self.cfg.congestion_control.stream_windows();
        let s = &mut self.streams[sid as usize];
        s.first_byte.get_or_insert(now);
        s.delivered_cells += n;
        let mut stream_sendmes = 0u32;
        if stream_windows {
            s.deliver_window -= n.min(s.deliver_window);
            // relay.c: a stream SENDME each time the deliver window falls an increment.
            while s.deliver_window <= STREAMWINDOW_START - STREAMWINDOW_INCREMENT {
                s.deliver_window += STREAMWINDOW_INCREMENT;
                stream_sendmes += 1;
            }
        }
        let finished = !s.done && s.delivered_cells * RELAY_PAYLOAD_SIZE >= s.bytes;
        let exit = self.circuits[circ as usize].exit_pos() as u8;
        if stream_sendmes > 0 && !finished {
            s.sendmes_sent += stream_sendmes;
            self.counters.stream_sendmes_sent += stream_sendmes as u64;
            let r = CellRun {
                circ,
                count: stream_sendmes,
                dir: Direction::Out,
                kind: CellKind::StreamSendme,
                target: exit,
                stream: run.stream,
            };
            self.emit(now, circ, 0, r);
        }
        let circ_sendmes = self.circuits[circ as usize].cc_client.on_delivered(n, now);
        if circ_sendmes > 0 {
            self.counters.circuit_sendmes_sent += circ_sendmes;
            let r =
                CellRun { circ, count: circ_sendmes as u32, dir: Direction::Out, kind: CellKind::CircuitSendme, target: exit, stream: 0 };
            self.emit(now, circ, 0, r);
        }
        if finished {
            self.finish_stream(now, sid, None);
        }
    }

    fn finish_stream(&mut self, now: SimTime, sid: u32, error: Option<&'static str>) {
        let s = &mut self.streams[sid as usize];
        if s.done {
            return;
        }
        s.done = true;
        if let Some(conn) = s.exit_conn.take() {
            // The exit closes its server connection: done, the stream has read all of it;
            // failed, tor closes the edge with its circuit.
            self.net.close(now, conn);
        }
        let s = &self.streams[sid as usize];
        let c = &self.circuits[s.circ as usize];
        if error.is_some() {
            self.counters.streams_failed += 1;
        } else {
            self.counters.streams_completed += 1;
        }
        let ttlb = error.is_none().then(|| now.saturating_since(s.start));
        let record = Self::stream_record(sid, s, c, ttlb, error);
        self.records.push(record);
        let (circ, idx, in_ring) = (s.circ, s.idx, s.in_read_ring);
        let c = &mut self.circuits[circ as usize];
        if let Some(k) = c.live.iter().position(|&x| x == sid) {
            c.live.remove(k);
        }
        // Cells still naming the stream (a client's last SENDMEs) find no stream.
        c.streams[idx as usize] = NO_STREAM;
        if !in_ring {
            self.free_streams.push(sid);
        }
        let c = &self.circuits[circ as usize];
        if c.expired && c.live.is_empty() {
            self.close_circuit(now, circ, CloseReason::Expired);
        }
    }

    /// Closes `circ` at every hop at once (the DESTROY's propagation delay is not
    /// modelled): its queued cells are dropped now, and cells of it still in outbufs or on
    /// the wire are dropped where they arrive. Channels left without circuits start their
    /// idle timeout.
    fn close_circuit(&mut self, now: SimTime, circ: u32, reason: CloseReason) {
        let c = &mut self.circuits[circ as usize];
        if c.state == CircuitState::Closed {
            return;
        }
        c.state = CircuitState::Closed;
        c.close_reason = Some(reason);
        match reason {
            CloseReason::QueueLimit => self.counters.circuits_closed_queue_limit += 1,
            CloseReason::Expired => self.counters.circuits_expired += 1,
            CloseReason::IdleTimeout => self.counters.circuits_closed_idle += 1,
        }
        for pos in 0..c.nodes.len() {
            for dir in [Direction::Out, Direction::In] {
                let qd = &mut c.queues[pos][dir.index()].cells;
                if qd.is_empty() {
                    continue;
                }
                while let Some(run) = qd.pop_front_run(u32::MAX) {
                    count_dropped(&mut self.counters, run);
                }
                *qd = Default::default();
                if let Some(ch) = c.queue_chan(pos, dir) {
                    let ch = &mut self.chans[ch as usize];
                    let side = side_index(ch.side_of(c.nodes[pos]));
                    ch.ends[side].sched.deactivate(circ, &mut c.policy[pos][dir.index()]);
                }
            }
        }
        let c = &self.circuits[circ as usize];
        for &ch in c.chans.iter().flatten() {
            let ch_ref = &mut self.chans[ch as usize];
            ch_ref.circuits -= 1;
            if ch_ref.circuits == 0 && self.cfg.idle_channel_timeout.is_some() {
                ch_ref.idle_since = now;
                self.idle_timers.push(ch);
            }
        }
        let client = c.nodes[0];
        self.nodes[client as usize].circs.retain(|&x| x != circ);
        if self.cfg.predicted_circuits {
            self.predict_checks.push(client);
        }
        for sid in std::mem::take(&mut self.circuits[circ as usize].live) {
            // Unfinished streams fail, and their exit connections close.
            self.finish_stream(now, sid, Some("circuit closed: queue limit"));
        }
        let c = &mut self.circuits[circ as usize];
        if c.rate_limit.take().is_some() {
            self.rate_limited.retain(|&x| x != circ);
        }
        if c.cells_out == 0 {
            self.free_circuits.push(circ);
        }
    }

    // ------------------------------------------------------------------ events

    /// Handles one event, then runs every node it touched.
    pub fn handle(&mut self, q: &mut EventQueue<TorEvent>, ev: TorEvent) {
        match ev {
            // Its notices are handled by `flush_dirty` below, before any node is pumped.
            TorEvent::Net(e) => self.net.handle(q, e),
            TorEvent::Refill { node } => self.on_refill(q, node),
            TorEvent::ChannelOpen { chan } if self.chans[chan as usize].closed => {}
            TorEvent::ChannelOpen { chan } => {
                let ch = &mut self.chans[chan as usize];
                ch.set_open();
                let nodes = ch.nodes;
                for (i, side) in [Side::Initiator, Side::Acceptor].into_iter().enumerate() {
                    let end = &mut self.chans[chan as usize].ends[i];
                    if end.sched.active() > 0 && self.nodes[nodes[i] as usize].kist.is_some() {
                        self.nodes[nodes[i] as usize].kist_wanted = true;
                    } else if end.sched.active() > 0 && !end.in_write_ring {
                        end.in_write_ring = true;
                        self.nodes[nodes[i] as usize].write_ring.push_back(IoRef::Chan(chan, side));
                    }
                    self.mark_dirty(nodes[i]);
                }
            }
            TorEvent::App { .. } => {}
            TorEvent::Kist { node } => self.run_kist(q, node),
            TorEvent::CircuitExpire { circ } => {
                let c = &mut self.circuits[circ as usize];
                // A circuit closed early (queue limit) may have left its slot to a newer
                // circuit, which this event is not for.
                let due = c.dirty_since.is_some_and(|d| q.now() >= d + self.cfg.max_circuit_dirtiness);
                if due && c.state != CircuitState::Closed {
                    let client = c.nodes[0];
                    if c.live.is_empty() {
                        self.close_circuit(q.now(), circ, CloseReason::Expired);
                    } else {
                        c.expired = true;
                        // It takes no more streams: one fewer ready for the predicted port.
                        if self.cfg.predicted_circuits {
                            self.predict_checks.push(client);
                        }
                    }
                }
            }
            TorEvent::PredictCircuits { client } => {
                // A check superseded by an earlier one is stale.
                if self.nodes[client as usize].predict.check_at == Some(q.now()) {
                    self.nodes[client as usize].predict.check_at = None;
                    self.predict_and_launch(q, client);
                }
            }
            TorEvent::CircuitIdle { circ } => {
                let c = &self.circuits[circ as usize];
                // Only a clean open circuit this old: a used one, one still building, or a
                // newer circuit in a reused slot is not for this timer.
                let due = q.now() >= c.created_at + self.cfg.circuit_idle_timeout;
                if due && c.state == CircuitState::Open && c.dirty_since.is_none() {
                    self.close_circuit(q.now(), circ, CloseReason::IdleTimeout);
                }
            }
            TorEvent::ChannelIdle { chan } => self.on_channel_idle(q, chan),
            TorEvent::Hook { node } => {
                let mut hook = self.hooks[node as usize].take().expect("hook events only for relays with hooks");
                let interval = hook.interval();
                {
                    let mut ctl = RelayControl::new(self, node, q.now());
                    hook.on_tick(q.now(), &mut ctl);
                }
                self.hooks[node as usize] = Some(hook);
                q.schedule_in(interval, TOR_EVENT_CLASS, TorEvent::Hook { node });
                self.mark_dirty(node);
            }
        }
        // A third of the events (an uplink taking its next batch, most acknowledgements)
        // leave nothing to pump or tell; skipping the call saves its large frame.
        if !self.dirty.is_empty() || self.net.has_notices() || !self.idle_timers.is_empty() || !self.predict_checks.is_empty() {
            self.flush_dirty(q);
        }
    }

    fn flush_dirty(&mut self, q: &mut EventQueue<TorEvent>) {
        loop {
            while let Some(node) = self.dirty.pop() {
                self.nodes[node as usize].dirty = false;
                self.pump(q, node);
            }
            // The transport's notices: those of the event being handled, and those a pump's
            // writes raised (applying acknowledgements may wake a blocked writer).
            let mut notices = std::mem::take(&mut self.notices);
            self.net.drain_notices(&mut notices);
            if notices.is_empty() {
                self.notices = notices;
                if !self.idle_timers.is_empty() {
                    self.schedule_idle_timers(q);
                }
                for client in std::mem::take(&mut self.predict_checks) {
                    self.schedule_prediction(q, client);
                }
                return;
            }
            for n in notices.drain(..) {
                self.on_notice(q, n);
            }
            self.notices = notices;
        }
    }

    fn schedule_idle_timers(&mut self, q: &mut EventQueue<TorEvent>) {
        if self.cfg.idle_channel_timeout.is_none() {
            self.idle_timers.clear();
            return;
        }
        for chan in std::mem::take(&mut self.idle_timers) {
            let ch = &self.chans[chan as usize];
            let due = ch.idle_since + ch.idle_timeout;
            q.schedule_in(due.saturating_since(q.now()), TOR_EVENT_CLASS, TorEvent::ChannelIdle { chan });
        }
    }

    /// Closes `chan` if it has had no circuit for the idle timeout (tor's
    /// `run_connection_housekeeping`). A channel still flushing, which cannot happen
    /// after minutes without circuits unless its peer is starved of tokens, is checked
    /// again a second later (tor's housekeeping runs once per second).
    fn on_channel_idle(&mut self, q: &mut EventQueue<TorEvent>, chan: u32) {
        if self.cfg.idle_channel_timeout.is_none() {
            return;
        }
        let now = q.now();
        let ch = &self.chans[chan as usize];
        if ch.closed || ch.circuits > 0 || now < ch.idle_since + ch.idle_timeout {
            return; // A circuit came and went since: its own timer is pending.
        }
        let flushing = ch.ends.iter().enumerate().any(|(i, e)| {
            let side = side_at(i);
            // Stale read- or write-ring entries are skipped once the channel is closed.
            e.outbuf_bytes() > 0 || !e.wire.is_empty() || self.net.readable_bytes(ch.conn, side) > 0
        });
        if flushing {
            q.schedule_in(SimDuration::from_secs(1), TOR_EVENT_CLASS, TorEvent::ChannelIdle { chan });
            return;
        }
        let ch = &mut self.chans[chan as usize];
        ch.close();
        let nodes = ch.nodes;
        // The TCP connection closes with the channel; the transport reuses its slot.
        self.net.close(now, ch.conn);
        let key = (nodes[0].min(nodes[1]), nodes[0].max(nodes[1]));
        if self.chan_by_pair.get(&key) == Some(&chan) {
            self.chan_by_pair.remove(&key);
        }
        for n in nodes {
            self.nodes[n as usize].chans.retain(|&(c, _)| c != chan);
        }
        self.counters.channels_closed_idle += 1;
    }

    fn on_notice(&mut self, q: &mut EventQueue<TorEvent>, n: NetNotice) {
        let (conn, side) = n.endpoint();
        match self.conn_role[conn.0 as usize] {
            // A closed channel's connection is idle; a late acknowledgement may still
            // raise a notice, which nothing is waiting for.
            // The end's copies of `closed` and the node: the channel's header line is not
            // read on a batch's arrival.
            ConnRole::Channel(chan) if self.chans[chan as usize].ends[side_index(side)].closed => {}
            ConnRole::Channel(chan) => {
                let node = self.chans[chan as usize].ends[side_index(side)].node;
                match n {
                    NetNotice::Connected { side: Side::Initiator, .. } => {
                        let ch = &self.chans[chan as usize];
                        let rtt = self.net.one_way(self.nodes[ch.nodes[0] as usize].host, self.nodes[ch.nodes[1] as usize].host)
                            + self.net.one_way(self.nodes[ch.nodes[1] as usize].host, self.nodes[ch.nodes[0] as usize].host);
                        q.schedule_in(
                            rtt.saturating_mul(self.cfg.link_handshake_rtts as u64),
                            TOR_EVENT_CLASS,
                            TorEvent::ChannelOpen { chan },
                        );
                    }
                    NetNotice::Connected { .. } => {}
                    NetNotice::Readable { .. } => {
                        let end = &mut self.chans[chan as usize].ends[side_index(side)];
                        if !end.in_read_ring && !end.read_waits_for_refill {
                            end.in_read_ring = true;
                            self.nodes[node as usize].read_ring.push_back(IoRef::Chan(chan, side));
                        }
                        self.mark_dirty(node);
                    }
                    NetNotice::Writable { .. } => {
                        let end = &mut self.chans[chan as usize].ends[side_index(side)];
                        if end.open && !end.in_write_ring && !end.write_waits_for_refill {
                            end.in_write_ring = true;
                            self.nodes[node as usize].write_ring.push_back(IoRef::Chan(chan, side));
                        }
                        self.mark_dirty(node);
                    }
                }
            }
            ConnRole::Edge(sid) => self.on_edge_notice(q, sid, n),
        }
    }

    /// Exit-to-server connections: the exit is the initiator, the server the acceptor.
    /// Kept out of line: inlined into the channel path, it made the whole pump costlier.
    #[inline(never)]
    fn on_edge_notice(&mut self, q: &mut EventQueue<TorEvent>, sid: u32, n: NetNotice) {
        let now = q.now();
        let s = &self.streams[sid as usize];
        if s.exit_conn.is_none() {
            // Closed when its stream ended, by a notice handled just before this one.
            return;
        }
        let circ = s.circ;
        match n {
            NetNotice::Connected { side: Side::Initiator, .. } => {
                // Optimistic data: the request rode with BEGIN; hand it to the server now
                // (the rest on Writable if the send buffer is smaller than the request).
                self.write_request(q, sid);
                let exit = self.circuits[circ as usize].exit_pos();
                let run = CellRun {
                    circ,
                    count: 1,
                    dir: Direction::In,
                    kind: CellKind::Connected,
                    target: 0,
                    stream: self.streams[sid as usize].idx,
                };
                if self.circuits[circ as usize].state != CircuitState::Closed {
                    self.emit(now, circ, exit, run);
                }
            }
            NetNotice::Connected { .. } => {}
            NetNotice::Readable { side: Side::Acceptor, .. } | NetNotice::Writable { side: Side::Acceptor, .. } => {
                self.serve(q, sid);
            }
            NetNotice::Readable { side: Side::Initiator, .. } => {
                let exit = self.circuits[circ as usize].nodes[self.circuits[circ as usize].exit_pos()];
                self.wake_edge(exit, sid);
            }
            NetNotice::Writable { side: Side::Initiator, .. } => self.write_request(q, sid),
        }
    }

    /// The exit writes what is left of the stream's request to the server.
    fn write_request(&mut self, q: &mut EventQueue<TorEvent>, sid: u32) {
        let s = &self.streams[sid as usize];
        let left = self.cfg.request_bytes - s.request_written;
        if left > 0 {
            let conn = s.exit_conn.expect("requests are written on connected streams");
            let w = self.net.write(q, conn, Side::Initiator, left);
            self.streams[sid as usize].request_written += w;
        }
    }

    /// The server side of a stream: read the request, then write the response.
    fn serve(&mut self, q: &mut EventQueue<TorEvent>, sid: u32) {
        let conn = self.streams[sid as usize].exit_conn.expect("served streams are connected");
        let r = self.net.read(q, conn, Side::Acceptor, u64::MAX);
        let s = &mut self.streams[sid as usize];
        s.request_read += r;
        if s.request_read < self.cfg.request_bytes {
            return;
        }
        let left = s.bytes - s.server_written;
        if left > 0 {
            let w = self.net.write(q, conn, Side::Acceptor, left);
            self.streams[sid as usize].server_written += w;
        }
    }

    /// Wakes every running stream of `circ` at its exit (its window opened, its rate
    /// limit refilled, or its queue drained).
    fn wake_circuit_streams(&mut self, exit: NodeId, circ: u32) {
        for k in 0..self.circuits[circ as usize].live.len() {
            let sid = self.circuits[circ as usize].live[k];
            self.wake_edge(exit, sid);
        }
    }

    /// Puts an exit connection in the exit's read ring if it has data and may package.
    fn wake_edge(&mut self, exit: NodeId, sid: u32) {
        let s = &mut self.streams[sid as usize];
        if s.in_read_ring || s.done || s.exit_conn.is_none() {
            return;
        }
        s.in_read_ring = true;
        self.nodes[exit as usize].read_ring.push_back(IoRef::Edge(sid));
        self.mark_dirty(exit);
    }

    fn ensure_refill(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        let n = &mut self.nodes[node as usize];
        if !n.refill_pending {
            n.refill_pending = true;
            let at = next_refill(q.now(), self.cfg.refill_interval);
            q.schedule(at, TOR_EVENT_CLASS, TorEvent::Refill { node }).expect("refill times are in the future");
        }
    }

    fn on_refill(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        let iv = self.cfg.refill_interval;
        let n = &mut self.nodes[node as usize];
        n.refill_pending = false;
        if n.read_bucket.tokens() == 0 {
            n.stats.read_bucket_empty_intervals += 1;
        }
        if n.write_bucket.tokens() == 0 {
            n.stats.write_bucket_empty_intervals += 1;
        }
        n.read_bucket.refill(iv);
        n.write_bucket.refill(iv);
        let chans = std::mem::take(&mut n.chans);
        for &(chan, side) in &chans {
            let ch = &mut self.chans[chan as usize];
            let si = side_index(side);
            // The connection's own throttle held it back in this interval.
            let empty = |b: &Option<TokenBucket>| b.as_ref().is_some_and(|b| b.tokens() == 0);
            if empty(&ch.ends[si].conn_read) || empty(&ch.ends[si].conn_write) {
                ch.conn_bucket_empty_intervals[si] = ch.conn_bucket_empty_intervals[si].saturating_add(1);
            }
            let end = &mut ch.ends[si];
            if let Some(b) = end.conn_read.as_mut() {
                b.refill(iv);
            }
            if let Some(b) = end.conn_write.as_mut() {
                b.refill(iv);
            }
            if end.read_waits_for_refill {
                end.read_waits_for_refill = false;
                if !end.in_read_ring {
                    end.in_read_ring = true;
                    self.nodes[node as usize].read_ring.push_back(IoRef::Chan(chan, side));
                }
            }
            if end.write_waits_for_refill {
                end.write_waits_for_refill = false;
                if !end.in_write_ring {
                    end.in_write_ring = true;
                    self.nodes[node as usize].write_ring.push_back(IoRef::Chan(chan, side));
                }
            }
        }
        self.nodes[node as usize].chans = chans;
        // Circuit rate limits live at exits; refill those whose exit this is.
        for k in 0..self.rate_limited.len() {
            let circ = self.rate_limited[k] as usize;
            let c = &mut self.circuits[circ];
            if c.nodes[c.exit_pos()] == node {
                if let Some(b) = c.rate_limit.as_mut() {
                    b.refill(iv);
                }
                self.wake_circuit_streams(node, circ as u32);
            }
        }
        // A relay with finite buckets refills forever, as tor's timer does.
        self.ensure_refill(q, node);
        self.mark_dirty(node);
    }

    // ------------------------------------------------------------------ the pump

    fn pump(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        self.read_pass(q, node);
        self.write_pass(q, node);
        let n = &mut self.nodes[node as usize];
        if n.finite_buckets() && !n.refill_pending {
            self.ensure_refill(q, node);
        }
        let n = &mut self.nodes[node as usize];
        if let Some(p) = n.kist {
            if n.kist_wanted && !n.kist_pending {
                // kist_scheduler_schedule: run now if the last run is an interval ago,
                // else an interval after the last run.
                let now = q.now();
                let at = n.kist_last_run.map_or(now, |t| (t + p.run_interval).max(now));
                n.kist_pending = true;
                q.schedule(at, TOR_EVENT_CLASS, TorEvent::Kist { node }).expect("KIST runs are not in the past");
            }
            n.kist_wanted = false;
        }
    }

    /// A KIST run at `node` ([`crate::kist`]): moves cells to the outbufs of all its
    /// channels within their socket limits, queues them for the write pass, and repeats
    /// an interval later while cells remain.
    fn run_kist(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        let now = q.now();
        let n = &mut self.nodes[node as usize];
        let params = n.kist.expect("KIST runs only at KIST relays");
        n.kist_pending = false;
        n.kist_last_run = Some(now);
        // The ends with circuits that have cells or with outbuf bytes, in the order of the
        // relay's channel list (channel ids grow with creation, as does that list): a run
        // breaks ties between channels by this order.
        let mut ends = std::mem::take(&mut n.kist_ends);
        ends.sort_unstable_by_key(|e| e.0);
        // KIST reads TCP_INFO: bring every socket it looks at up to now.
        for &(chan, side) in &ends {
            self.net.sync_socket(now, self.chans[chan as usize].conn, side);
        }
        let unblock_at = self.cellq_low();
        let mut view = KistView {
            net: &mut self.net,
            q,
            relay: &mut self.nodes[node as usize],
            chans: &mut self.chans,
            circuits: &mut self.circuits,
            ends: &ends,
            node,
            high_water: self.cfg.outbuf_high_water,
            unblock_at,
            unblocked: &mut self.unblocked,
        };
        let run = kist_run(&mut view, &params, now);
        self.last_kist_run = Some((node, run));
        if !self.unblocked.is_empty() {
            self.wake_unblocked(node);
        }
        // Every run queues each end with outbuf bytes for the write pass; an end stays in
        // the list while its outbuf holds bytes (they came from a run), so no other end
        // needs a visit.
        let mut write_ring = std::mem::take(&mut self.nodes[node as usize].write_ring);
        let mut left = false;
        ends.retain(|&(chan, side)| {
            let end = &mut self.chans[chan as usize].ends[side_index(side)];
            let active = end.sched.active() > 0;
            left |= active;
            let outbuf = end.outbuf_bytes() > 0;
            if outbuf && !end.in_write_ring && !end.write_waits_for_refill {
                end.in_write_ring = true;
                write_ring.push_back(IoRef::Chan(chan, side));
            }
            end.in_kist_ends = active || outbuf;
            end.in_kist_ends
        });
        let n = &mut self.nodes[node as usize];
        n.write_ring = write_ring;
        n.kist_wanted = left;
        n.kist_ends = ends;
        self.mark_dirty(node);
    }

    /// The last KIST run (relay and per-channel limits and cells), for tests.
    pub fn last_kist_run(&self) -> Option<&(NodeId, crate::kist::KistRun)> {
        self.last_kist_run.as_ref()
    }

    fn read_pass(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        loop {
            let n = &mut self.nodes[node as usize];
            let Some(io) = n.read_ring.pop_front() else { break };
            if n.read_bucket.tokens() == 0 {
                // Out of global tokens: resume at the next refill (tor's
                // connection_read_bw_exhausted).
                n.read_ring.push_front(io);
                break;
            }
            match io {
                IoRef::Chan(chan, side) => self.read_channel(q, node, chan, side),
                IoRef::Edge(sid) => self.read_edge(q, node, sid),
            }
        }
    }

    fn read_channel(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, chan: u32, side: Side) {
        let si = side_index(side);
        // The end's copies of `closed` and `conn` (see `ChanEnd::closed`).
        if self.chans[chan as usize].ends[si].closed {
            // A stale ring entry: the connection is closed and its id may belong to
            // another connection by now.
            self.chans[chan as usize].ends[si].in_read_ring = false;
            return;
        }
        let conn = self.chans[chan as usize].ends[si].conn;
        let avail = self.net.readable_bytes(conn, side);
        let n = &mut self.nodes[node as usize];
        let end = &mut self.chans[chan as usize].ends[si];
        if avail == 0 {
            end.in_read_ring = false;
            return;
        }
        let share = bucket_share(&n.read_bucket, end.conn_read.as_ref());
        if share == 0 {
            end.in_read_ring = false;
            end.read_waits_for_refill = true;
            return;
        }
        let want = avail.min(share);
        let got = self.net.read(q, conn, side, want);
        debug_assert_eq!(got, want);
        n.read_bucket.take(got);
        n.stats.bytes_read += got;
        let end = &mut self.chans[chan as usize].ends[si];
        if let Some(b) = end.conn_read.as_mut() {
            b.take(got);
        }
        end.bytes_read += got;
        let partial = end.inbuf_partial as u64 + got;
        let mut cells = partial / CELL_WIRE_BYTES;
        end.inbuf_partial = (partial % CELL_WIRE_BYTES) as u32;
        self.counters.cell_hops += cells;
        if avail > got {
            self.nodes[node as usize].read_ring.push_back(IoRef::Chan(chan, side));
        } else {
            end.in_read_ring = false;
        }
        // Decode whole cells from what the peer wrote, in order.
        while cells > 0 {
            let peer = &mut self.chans[chan as usize].ends[1 - si];
            let run = peer.wire.pop_front_run(cells.min(u32::MAX as u64) as u32).expect("bytes read without cells written");
            cells -= run.count as u64;
            self.on_run(q, node, run);
        }
    }

    /// An exit reads its server connection into the stream's inbuf (tor's edge
    /// connection inbuf) and packages whole DATA cells from it while the circuit and
    /// stream windows allow; the stream's last cell may be partial. Reading stops while
    /// the windows are closed (`connection_edge_package_raw_inbuf` stops reading).
    fn read_edge(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, sid: u32) {
        let now = q.now();
        let s = &self.streams[sid as usize];
        let circ = s.circ;
        let c = &self.circuits[circ as usize];
        if s.done || c.state == CircuitState::Closed {
            let done = s.done;
            self.streams[sid as usize].in_read_ring = false;
            if done {
                // Its slot waited for this last ring entry to go.
                self.free_streams.push(sid);
            }
            return;
        }
        let conn = s.exit_conn.expect("edges in the read ring are connected");
        let avail = self.net.readable_bytes(conn, Side::Initiator);
        let mut allowance = if c.edge_blocked { 0 } else { c.cc_exit.package_allowance().min(s.package_window) };
        if let Some((high, _)) = self.cfg.cell_queue_watermarks {
            // Tor blocks the circuit's streams on the cell that fills its queue to `high`.
            allowance = allowance.min(high.saturating_sub(c.exit_queued()));
        }
        if let Some(b) = c.rate_limit.as_ref() {
            allowance = allowance.min(b.tokens() / CELL_WIRE_BYTES);
        }
        let mut got = 0;
        if allowance > 0 && avail > 0 {
            let n = &mut self.nodes[node as usize];
            let want = avail.min(bucket_share(&n.read_bucket, None));
            got = self.net.read(q, conn, Side::Initiator, want);
            debug_assert_eq!(got, want);
            n.read_bucket.take(got);
            n.stats.bytes_read += got;
        }
        let s = &mut self.streams[sid as usize];
        s.exit_read += got;
        s.exit_inbuf += got;
        let complete = s.exit_read == s.bytes;
        let whole = s.exit_inbuf / RELAY_PAYLOAD_SIZE;
        let partial = (complete && !s.exit_inbuf.is_multiple_of(RELAY_PAYLOAD_SIZE)) as u64;
        let cells = allowance.min(whole + partial);
        if cells > 0 {
            s.exit_inbuf -= s.exit_inbuf.min(cells * RELAY_PAYLOAD_SIZE);
            s.package_window -= cells;
            s.packaged_cells += cells;
            let c = &mut self.circuits[circ as usize];
            c.cc_exit.on_packaged(cells, now);
            if let Some(b) = c.rate_limit.as_mut() {
                b.take(cells * CELL_WIRE_BYTES);
            }
            let exit = c.exit_pos();
            let run = CellRun {
                circ,
                count: cells as u32,
                dir: Direction::In,
                kind: CellKind::Data,
                target: 0,
                stream: self.streams[sid as usize].idx,
            };
            self.emit(now, circ, exit, run);
            if let Some((high, _)) = self.cfg.cell_queue_watermarks {
                let c = &mut self.circuits[circ as usize];
                if c.exit_queued() >= high && c.state != CircuitState::Closed {
                    c.edge_blocked = true;
                    c.cc_exit.set_blocked(true);
                }
            }
        }
        if got > 0 || cells > 0 {
            // Progress: look again next round (the loop ends when a round does nothing).
            self.nodes[node as usize].read_ring.push_back(IoRef::Edge(sid));
        } else {
            // Re-armed by a Readable notice, a SENDME or a rate-limit refill.
            self.streams[sid as usize].in_read_ring = false;
        }
    }

    fn write_pass(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        let now = q.now();
        loop {
            let n = &mut self.nodes[node as usize];
            let Some(io) = n.write_ring.pop_front() else { break };
            let IoRef::Chan(chan, side) = io else { unreachable!("only channels are written by tor") };
            if n.write_bucket.tokens() == 0 {
                n.write_ring.push_front(io);
                break;
            }
            let si = side_index(side);
            // An end joins the write ring only while its channel is open, and a channel
            // that stops being open is closed: the end's `open` copy spares the read of
            // the channel's header line.
            let open = self.chans[chan as usize].ends[si].open;
            debug_assert_eq!(!open, self.chans[chan as usize].closed, "a write-ring end of a channel not yet open");
            if !open {
                self.chans[chan as usize].ends[si].in_write_ring = false;
                continue; // A stale entry (see `read_channel`).
            }
            if n.kist.is_none() {
                self.fill_outbuf(now, node, chan, si);
            }
            let n = &mut self.nodes[node as usize];
            let end = &mut self.chans[chan as usize].ends[si];
            match write_once(&mut self.net, q, n, end, side) {
                WriteStep::Wrote => n.write_ring.push_back(io),
                WriteStep::Empty | WriteStep::SocketFull => end.in_write_ring = false,
                WriteStep::NoShare => {
                    end.in_write_ring = false;
                    end.write_waits_for_refill = true;
                }
            }
        }
        if !self.unblocked.is_empty() {
            self.wake_unblocked(node);
        }
    }

    /// Moves cells from circuit queues to the outbuf in the scheduler's order once the
    /// outbuf is below the low-water mark, up to the high-water mark.
    fn fill_outbuf(&mut self, now: SimTime, node: NodeId, chan: u32, si: usize) {
        let low = self.cfg.outbuf_low_water;
        let high = self.cfg.outbuf_high_water;
        let unblock_at = self.cellq_low();
        let ch = &mut self.chans[chan as usize];
        let end = &mut ch.ends[si];
        if end.outbuf_bytes() >= low {
            return;
        }
        let room = (high - end.outbuf_bytes()).div_ceil(CELL_WIRE_BYTES);
        let ChanEnd { sched, outbuf, .. } = end;
        sched.fill(
            room,
            now,
            &mut ChannelCells { circuits: &mut self.circuits, outbuf, node, chan, unblock_at, unblocked: &mut self.unblocked },
        );
    }

    /// Wakes the streams of circuits whose queues fell to `cellq_low` (their exit reads
    /// them again).
    fn wake_unblocked(&mut self, exit: NodeId) {
        while let Some(circ) = self.unblocked.pop() {
            self.wake_circuit_streams(exit, circ);
        }
    }

    /// `cellq_low`, or 0 with edge blocking off (no circuit is ever blocked then).
    fn cellq_low(&self) -> u64 {
        self.cfg.cell_queue_watermarks.map_or(0, |w| w.1)
    }

    // ------------------------------------------------------------------ checks

    /// Cells waiting at each node: in its circuit queues and its channel outbufs.
    pub fn queued_cells_per_node(&self) -> Vec<u64> {
        let mut out = vec![0; self.nodes.len()];
        for c in &self.circuits {
            for (pos, q) in c.queues.iter().enumerate() {
                out[c.nodes[pos] as usize] += q[0].cells.len() + q[1].cells.len();
            }
        }
        for ch in &self.chans {
            for (i, e) in ch.ends.iter().enumerate() {
                out[ch.nodes[i] as usize] += e.outbuf.len();
            }
        }
        out
    }

    /// Cells in circuit queues, outbufs and on the wire.
    pub fn cells_in_flight(&self) -> u64 {
        let queued: u64 = self.circuits.iter().flat_map(|c| c.queues.iter()).map(|q| q[0].cells.len() + q[1].cells.len()).sum();
        let chans: u64 = self.chans.iter().flat_map(|c| c.ends.iter()).map(|e| e.outbuf.len() + e.wire.len()).sum();
        queued + chans
    }

    /// Checks cell conservation, window bounds, channels' circuit counts (no open
    /// circuit on a closed channel) and the copies of channel state kept for the hot path
    /// (in channel ends and circuits); returns the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let c = &self.counters;
        let accounted = c.cells_consumed + c.cells_dropped + self.cells_in_flight();
        if c.cells_emitted != accounted {
            return Err(format!(
                "cells not conserved: emitted {} != consumed {} + dropped {} + in flight {}",
                c.cells_emitted,
                c.cells_consumed,
                c.cells_dropped,
                self.cells_in_flight()
            ));
        }
        let mut uses = vec![0u32; self.chans.len()];
        for (i, circ) in self.circuits.iter().enumerate() {
            if circ.state != CircuitState::Closed {
                for &ch in circ.chans.iter().flatten() {
                    if self.chans[ch as usize].closed {
                        return Err(format!("circuit {i} uses closed channel {ch}"));
                    }
                    uses[ch as usize] += 1;
                }
            }
            for cc in [&circ.cc_client, &circ.cc_exit] {
                cc.check().map_err(|e| format!("circuit {i}: {e}"))?;
            }
            // A blocked circuit unblocks as soon as its queue falls to cellq_low.
            if circ.edge_blocked && circ.state != CircuitState::Closed {
                let queued = circ.exit_queued();
                match self.cfg.cell_queue_watermarks {
                    Some((_, low)) if queued > low => {}
                    _ => return Err(format!("circuit {i}: edge blocked with {queued} cells queued at its exit")),
                }
            }
        }
        for (i, ch) in self.chans.iter().enumerate() {
            if ch.circuits != uses[i] {
                return Err(format!("channel {i}: counts {} circuits, {} use it", ch.circuits, uses[i]));
            }
            // The ends' copies of the header (read by the hot path instead of it).
            for (k, e) in ch.ends.iter().enumerate() {
                if (e.conn, e.write_conn, e.node, e.open, e.closed) != (ch.conn, ch.conn, ch.nodes[k], ch.open, ch.closed) {
                    return Err(format!("channel {i}: end {k}'s copies of the header differ from it"));
                }
            }
        }
        for (i, circ) in self.circuits.iter().enumerate() {
            if circ.state == CircuitState::Closed {
                continue;
            }
            for (p, ch) in circ.chans.iter().enumerate() {
                if let Some(ch) = ch {
                    if circ.lower_initiates[p] != (self.chans[*ch as usize].nodes[0] == circ.nodes[p]) {
                        return Err(format!("circuit {i}: the side recorded for hop channel {p} is wrong"));
                    }
                }
            }
        }
        let stream_windows = self.cfg.congestion_control.stream_windows();
        for (i, s) in self.streams.iter().enumerate() {
            if !stream_windows {
                if s.sendmes_sent > 0 {
                    return Err(format!("stream {i}: {} stream SENDMEs sent under congestion control", s.sendmes_sent));
                }
                continue;
            }
            if s.package_window > STREAMWINDOW_START || s.deliver_window > STREAMWINDOW_START {
                return Err(format!("stream {i}: window out of range"));
            }
            // The exit packages at most a window beyond what the client has had (a SENDME
            // per 50 cells delivered opens 50 more), so a SENDME credited to the wrong
            // stream shows here.
            if !s.done && s.packaged_cells > s.delivered_cells + STREAMWINDOW_START {
                return Err(format!("stream {i}: {} cells packaged, {} delivered", s.packaged_cells, s.delivered_cells));
            }
            if s.sendmes_received > s.sendmes_sent {
                return Err(format!("stream {i}: {} SENDMEs received, {} sent", s.sendmes_received, s.sendmes_sent));
            }
        }
        self.check_stream_slots()?;
        self.check_circuit_slots()?;
        self.check_scheduler_invariants()?;
        self.net.check_invariants()
    }

    /// Circuit slots: each circuit counts exactly its cells in outbufs and on the wire; a
    /// free slot is a closed circuit with none left, listed once; every circuit that is not
    /// closed is listed by its client, and only those; no rate-limited circuit is closed.
    fn check_circuit_slots(&self) -> Result<(), String> {
        let mut out = vec![0u64; self.circuits.len()];
        for e in self.chans.iter().flat_map(|c| c.ends.iter()) {
            for run in e.outbuf.iter().chain(e.wire.iter()) {
                out[run.circ as usize] += run.count as u64;
            }
        }
        for (i, c) in self.circuits.iter().enumerate() {
            if c.cells_out as u64 != out[i] {
                return Err(format!("circuit {i}: counts {} cells out, {} are in outbufs and on the wire", c.cells_out, out[i]));
            }
        }
        let mut seen = vec![false; self.circuits.len()];
        for &f in &self.free_circuits {
            let c = &self.circuits[f as usize];
            if c.state != CircuitState::Closed || c.cells_out != 0 || std::mem::replace(&mut seen[f as usize], true) {
                return Err(format!("free circuit slot {f} is in use, has cells out or is listed twice"));
            }
        }
        let mut listed = vec![false; self.circuits.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &c in &n.circs {
                let circ = &self.circuits[c as usize];
                if circ.state == CircuitState::Closed || circ.nodes[0] != i as NodeId || std::mem::replace(&mut listed[c as usize], true) {
                    return Err(format!("client {} lists circuit {c}, which is closed, not its own or listed twice", n.name));
                }
            }
        }
        if let Some(c) = (0..self.circuits.len()).find(|&c| self.circuits[c].state != CircuitState::Closed && !listed[c]) {
            return Err(format!("open circuit {c} is not listed by its client"));
        }
        if let Some(&c) = self.rate_limited.iter().find(|&&c| self.circuits[c as usize].state == CircuitState::Closed) {
            return Err(format!("closed circuit {c} is still rate-limited"));
        }
        Ok(())
    }

    /// Stream slots: an exit's read ring holds only running streams of circuits it is the
    /// exit of (and finished ones waiting to be dropped), each once and flagged as such; a free slot is a finished stream in no ring; a
    /// circuit names each of its running streams at the stream's index.
    fn check_stream_slots(&self) -> Result<(), String> {
        let mut in_ring = vec![0u32; self.streams.len()];
        for (node, n) in self.nodes.iter().enumerate() {
            for io in &n.read_ring {
                let IoRef::Edge(sid) = *io else { continue };
                let s = &self.streams[sid as usize];
                let c = &self.circuits[s.circ as usize];
                // (A finished stream's circuit may have closed and left its slot to another
                // circuit; its ring entry is dropped when it comes up.)
                if !s.done && c.nodes[c.exit_pos()] as usize != node {
                    return Err(format!("stream {sid} in the read ring of node {node}, not its exit's"));
                }
                in_ring[sid as usize] += 1;
            }
        }
        for (sid, s) in self.streams.iter().enumerate() {
            if in_ring[sid] != s.in_read_ring as u32 {
                return Err(format!("stream {sid}: in {} read rings, flag {}", in_ring[sid], s.in_read_ring));
            }
            if !s.done && self.circuits[s.circ as usize].streams[s.idx as usize] != sid as u32 {
                return Err(format!("stream {sid}: its circuit names another stream at index {}", s.idx));
            }
        }
        for &sid in &self.free_streams {
            let s = &self.streams[sid as usize];
            if !s.done || s.in_read_ring {
                return Err(format!("free stream slot {sid} is still in use"));
            }
        }
        Ok(())
    }

    /// Every channel end's scheduler has exactly the circuits with cells queued for it
    /// active, and a KIST relay lists every end with active circuits or outbuf bytes.
    fn check_scheduler_invariants(&self) -> Result<(), String> {
        let mut queued = vec![[0usize; 2]; self.chans.len()];
        for circ in &self.circuits {
            for pos in 0..CIRCUIT_NODES {
                for dir in [Direction::Out, Direction::In] {
                    if circ.queues[pos][dir.index()].cells.is_empty() {
                        continue;
                    }
                    if let Some(ch) = circ.queue_chan(pos, dir) {
                        let side = side_index(self.chans[ch as usize].side_of(circ.nodes[pos]));
                        queued[ch as usize][side] += 1;
                    }
                }
            }
        }
        for (i, ch) in self.chans.iter().enumerate() {
            for (side, end) in ch.ends.iter().enumerate() {
                if end.sched.active() != queued[i][side] {
                    return Err(format!(
                        "channel {i} end {side}: scheduler has {} active circuits, {} have cells for it",
                        end.sched.active(),
                        queued[i][side]
                    ));
                }
                let node = &self.nodes[ch.nodes[side] as usize];
                let listed = node.kist_ends.contains(&(i as u32, side_at(side)));
                if listed != end.in_kist_ends {
                    return Err(format!("channel {i} end {side}: in_kist_ends {} but listed {listed}", end.in_kist_ends));
                }
                if node.kist.is_some() && !ch.closed && (end.sched.active() > 0 || end.outbuf_bytes() > 0) && !listed {
                    return Err(format!("channel {i} end {side}: has cells but is not in its KIST relay's list"));
                }
            }
        }
        Ok(())
    }

    /// Per-relay view for hooks.
    pub(crate) fn node_mut(&mut self, n: NodeId) -> &mut TorNode {
        &mut self.nodes[n as usize]
    }

    pub(crate) fn chan_end_mut(&mut self, chan: u32, side: Side) -> &mut ChanEnd {
        &mut self.chans[chan as usize].ends[side_index(side)]
    }

    pub(crate) fn chan_peer(&self, chan: u32, side: Side) -> NodeId {
        self.chans[chan as usize].nodes[1 - side_index(side)]
    }

    /// Hops and per-hop relayed cell counts of a circuit.
    pub fn circuit_cells_relayed(&self, circ: u32) -> Vec<[u64; 2]> {
        self.circuits[circ as usize].queues.iter().map(|q| [q[0].relayed, q[1].relayed]).collect()
    }

    pub fn circuit_path(&self, circ: u32) -> &[NodeId] {
        &self.circuits[circ as usize].nodes
    }

    /// Time from the first CREATE to the last EXTENDED (tornettools' circuit_build_time).
    pub fn circuit_build_time(&self, circ: u32) -> Option<SimDuration> {
        let c = &self.circuits[circ as usize];
        c.opened_at.map(|t| t.saturating_since(c.created_at))
    }

    /// A client's circuits that are not closed, oldest first.
    pub fn client_circuits(&self, client: NodeId) -> &[u32] {
        &self.nodes[client as usize].circs
    }

    pub fn num_circuits(&self) -> usize {
        self.circuits.len()
    }

    /// State of the circuit in slot `circ` (a closed circuit's slot goes to a later one
    /// once its last cell has arrived; until then it reads `Closed`).
    pub fn circuit_state(&self, circ: u32) -> CircuitState {
        self.circuits[circ as usize].state
    }

    /// The circuit of a running stream (a finished one's is in its [`StreamRecord`]).
    pub fn stream_circuit(&self, sid: u32) -> u32 {
        let s = &self.streams[sid as usize];
        debug_assert!(!s.done, "stream {sid} has finished; its id may name another stream");
        s.circ
    }

    /// The stream with index `idx` on `circ`, unless it has finished.
    #[inline]
    fn live_stream(&self, circ: u32, idx: u16) -> Option<u32> {
        Some(self.circuits[circ as usize].streams[idx as usize]).filter(|&sid| sid != NO_STREAM)
    }

    pub fn host_of(&self, n: NodeId) -> HostId {
        self.nodes[n as usize].host
    }
}

/// The circuit queues that feed one channel end at `node`, and its outbuf: what a
/// scheduler's fill moves cells between.
struct ChannelCells<'a> {
    circuits: &'a mut [Circuit],
    outbuf: &'a mut crate::cell::CellFifo,
    node: NodeId,
    chan: u32,
    /// `cellq_low`: a blocked circuit whose queue falls to this unblocks its exit's
    /// streams, which are woken (by [`TorNetwork::wake_unblocked`]) from `unblocked`.
    unblock_at: u64,
    unblocked: &'a mut Vec<u32>,
}

impl ChannelCells<'_> {
    /// The queue of `circ` at this node for this channel.
    fn locate(&self, circ: u32) -> (usize, usize) {
        let c = &self.circuits[circ as usize];
        let pos = c.position(self.node);
        let dir = if pos < c.chans.len() && c.chans[pos] == Some(self.chan) { Direction::Out } else { Direction::In };
        (pos, dir.index())
    }
}

impl crate::scheduler::CellSource for ChannelCells<'_> {
    fn queued(&self, circ: u32) -> u64 {
        let (pos, dir) = self.locate(circ);
        self.circuits[circ as usize].queues[pos][dir].cells.len()
    }

    fn take(&mut self, circ: u32, n: u64) -> u64 {
        let (pos, dir) = self.locate(circ);
        let c = &mut self.circuits[circ as usize];
        let moved = c.queues[pos][dir].cells.move_to(self.outbuf, n);
        c.cells_out += moved as u32;
        // Only the exit's queue toward the client blocks its streams; other hops' queues of
        // the same circuit say nothing about it.
        if c.edge_blocked && pos == c.exit_pos() && c.exit_queued() <= self.unblock_at {
            c.edge_blocked = false;
            c.cc_exit.set_blocked(false);
            self.unblocked.push(circ);
        }
        moved
    }

    fn policy_data(&mut self, circ: u32) -> &mut crate::scheduler::CircPolicyData {
        let (pos, dir) = self.locate(circ);
        &mut self.circuits[circ as usize].policy[pos][dir]
    }
}

/// What one write of a channel end's outbuf did.
enum WriteStep {
    /// The outbuf was empty.
    Empty,
    /// The kernel buffer was full: the write failed with EAGAIN, which arms the
    /// transport's Writable notice (without the attempt the transport would never notify,
    /// and the channel would stall).
    SocketFull,
    /// The relay's write bucket (or the connection's) had no share to give.
    NoShare,
    /// Bytes went to the kernel.
    Wrote,
}

/// One write of the outbuf of channel end `end` (on `side` of its channel) to the kernel
/// (tor's `connection_handle_write` for an OR connection): at most one bucket share
/// ([`bucket_share`]), the socket's free space and the outbuf, charged to the relay's and
/// the connection's write buckets.
#[inline(always)]
fn write_once(net: &mut Network, q: &mut EventQueue<TorEvent>, n: &mut TorNode, end: &mut ChanEnd, side: Side) -> WriteStep {
    let conn = end.write_conn;
    let free = net.writable_bytes(q.now(), conn, side);
    let pending = end.outbuf_bytes();
    if pending == 0 {
        return WriteStep::Empty;
    }
    if free == 0 {
        let w = net.write(q, conn, side, pending);
        debug_assert_eq!(w, 0);
        return WriteStep::SocketFull;
    }
    let share = bucket_share(&n.write_bucket, end.conn_write.as_ref());
    if share == 0 {
        return WriteStep::NoShare;
    }
    let len = pending.min(free).min(share);
    let w = net.write(q, conn, side, len);
    debug_assert_eq!(w, len);
    n.write_bucket.take(w);
    n.stats.bytes_written += w;
    if let Some(b) = end.conn_write.as_mut() {
        b.take(w);
    }
    end.note_written(w);
    WriteStep::Wrote
}

/// A KIST relay's channel ends as [`kist_run`] sees them.
struct KistView<'a> {
    net: &'a mut Network,
    q: &'a mut EventQueue<TorEvent>,
    relay: &'a mut TorNode,
    chans: &'a mut [Channel],
    circuits: &'a mut [Circuit],
    ends: &'a [(u32, Side)],
    node: NodeId,
    high_water: u64,
    unblock_at: u64,
    unblocked: &'a mut Vec<u32>,
}

impl KistChannels for KistView<'_> {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn has_cells(&self, i: usize) -> bool {
        let (chan, side) = self.ends[i];
        let end = &self.chans[chan as usize].ends[side_index(side)];
        end.open && end.sched.active() > 0
    }

    fn limit(&self, i: usize, params: &KistParams) -> u64 {
        let (chan, side) = self.ends[i];
        let ch = &self.chans[chan as usize];
        let outbuf = ch.ends[side_index(side)].outbuf_bytes();
        if params.lite {
            lite_limit(outbuf, self.high_water)
        } else {
            socket_limit(&self.net.socket_info(ch.conn, side), outbuf, params.sock_buf_size_factor)
        }
    }

    fn priority(&mut self, i: usize, now: SimTime) -> Option<f64> {
        let (chan, side) = self.ends[i];
        self.chans[chan as usize].ends[side_index(side)].sched.head_priority(now)
    }

    fn flush_one(&mut self, i: usize, now: SimTime) -> bool {
        let (chan, side) = self.ends[i];
        let ChanEnd { sched, outbuf, .. } = &mut self.chans[chan as usize].ends[side_index(side)];
        let (circuits, node, unblock_at, unblocked) = (&mut *self.circuits, self.node, self.unblock_at, &mut *self.unblocked);
        // One cell in the scheduler's order.
        crate::scheduler::fill_by_picks(sched, 1, now, &mut ChannelCells { circuits, outbuf, node, chan, unblock_at, unblocked }) == 1
    }

    fn outbuf_bytes(&self, i: usize) -> u64 {
        let (chan, side) = self.ends[i];
        self.chans[chan as usize].ends[side_index(side)].outbuf_bytes()
    }

    fn write_now(&mut self, i: usize) {
        let (chan, side) = self.ends[i];
        let end = &mut self.chans[chan as usize].ends[side_index(side)];
        // A write the bucket refuses leaves the outbuf to the write pass after the run,
        // which waits for the refill (tor's connection_write_bw_exhausted).
        write_once(self.net, self.q, self.relay, end, side);
    }
}

/// A Tor network with its event queue: the loop every driver (tests, benchmarks, the
/// experiment runner) uses.
pub struct TorSim {
    pub tor: TorNetwork,
    pub q: EventQueue<TorEvent>,
}

impl TorSim {
    pub fn new(tor: TorNetwork) -> Self {
        TorSim { tor, q: EventQueue::with_capacity(1 << 12) }
    }

    /// Runs events up to and including time `until`; `check` runs after each event.
    pub fn run_until(&mut self, until: SimTime, mut check: impl FnMut(&TorNetwork)) {
        while let Some(ev) = self.q.pop_until(until) {
            self.tor.handle(&mut self.q, ev.event);
            check(&self.tor);
        }
        if self.q.now() < until && self.q.peek_time().is_none_or(|t| t > until) {
            self.q.advance_to(until).expect("no event before `until` remains");
        }
    }

    pub fn start_stream(&mut self, client: NodeId, server: NodeId, bytes: u64, tag: u64) -> Result<u32, TorError> {
        self.tor.start_stream(&mut self.q, client, server, bytes, tag)
    }
}
