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
//!    writes at most its share of the global write bucket (and of its own write bucket,
//!    where it has one) to the kernel, bounded by the socket's free space.
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

use onionlab_core::{EventClass, EventQueue, Name, RngStreams, SimDuration, SimTime};
use onionlab_net::{HostSpec, LatencyModel, NetEvent, NetNotice, Network, Side};

use crate::cell::{CellKind, CellRun, Direction, RELAY_PAYLOAD_SIZE};
use crate::channel::{ChanEnd, Channel, RelayChannelEnd};
use crate::circuit::{
    queue_index, queue_slot, Circuit, CircuitState, CloseReason, Stream, StreamRecord, CIRCUIT_NODES, HOP_QUEUES, NO_STREAM, UNFINISHED,
};
use crate::flow_control::{STREAMWINDOW_INCREMENT, STREAMWINDOW_START};
use crate::hooks::{RelayControl, RelayHook};
use crate::node::{edge_share, EndpointSpec, IoRef, NodeId, NodeKind, NodeStats, RelaySpec, TorNode};
use crate::path::{BandwidthWeights, PathSelector, Position, RelayInfo, WeightsMethod};
use crate::scheduler::{CircuitScheduler, SchedulerKind};
use crate::token_bucket::{next_refill, TokenBucket};
use crate::wait::Crossing;

mod circuits;
mod config;
mod inspect;
mod pump;

pub use config::{
    CbtLearning, ChannelIdleTimeout, PathOrder, RefillPhase, TorConfig, CBT_MIN_CIRCUITS_TO_OBSERVE, MAX_UNUSED_OPEN_CIRCUITS,
    MIN_CIRCUITS_HANDLING_STREAM, PREDICTED_CIRCS_RELEVANCE_TIME,
};
pub use inspect::CircuitTransit;

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
    /// No relay at all weighs more than 0 in a position the path needs, whatever the rest
    /// of the path: the network, not the draw, is at fault.
    #[error(
        "no path: no relay can take the {0:?} position: each relay with the flags it needs weighs 0 there \
         (its consensus_weight times its network.bandwidth_weights entry for the position)"
    )]
    NoWeightedRelay(Position),
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
    /// Streams that finished while an exit's read ring still held them: their slot is
    /// free only once the ring lets go (at the exit's next read pass, after a refill if
    /// its bucket is empty), so a stream started meanwhile takes another slot.
    pub stream_slots_held_by_ring: u64,
    /// Times an exit found its write bucket empty with a request to write to a server,
    /// and held the request for the refill (once per wait; a stream may wait again).
    pub requests_held_for_refill: u64,
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
    /// The incentive scheme that labels relayed cells with service classes (BRAIDS), if
    /// any; consulted only for channel ends whose scheduler reads classes.
    incentive: Option<Box<dyn crate::incentive::IncentiveScheme>>,
    /// Per-class delays (HPD) of channel ends closed so far, by their node.
    closed_class_delays: BTreeMap<NodeId, crate::scheduler::ClassDelays>,
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
            incentive: None,
            closed_class_delays: BTreeMap::new(),
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
        // One allocation for the name, shared by the host, the node and the result rows.
        let shared: Name = name.into();
        let host = self.net.add_host(HostSpec { name: shared.clone(), location, up_bits_per_sec: up, down_bits_per_sec: down })?;
        let id = self.nodes.len() as NodeId;
        self.nodes.push(TorNode {
            name: shared,
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
            refill_phase: SimDuration::ZERO,
            dirty: false,
            guards: Vec::new(),
            bridge: None,
            fixed_path: None,
            circs: Vec::new(),
            predict: Default::default(),
            kist: None,
            hpd: None,
            runs_hpd: false,
            kist_wanted: false,
            kist_pending: false,
            kist_last_run: None,
            rng: (kind == NodeKind::Client).then(|| self.rng_streams.parked("tor-client", name)),
            stats: NodeStats::default(),
            waits: (kind == NodeKind::Relay).then(Box::default),
            circuit_limits: Vec::new(),
            limited_circs: Vec::new(),
            request_waits: Vec::new(),
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
        n.hpd = spec
            .scheduler
            .hpd()
            .map(|p| Box::new(crate::node::HpdRelayState { sched: crate::hpd::HpdRelay::new(p), ends: Vec::new(), blocked: Vec::new() }));
        n.runs_hpd = n.hpd.is_some();
        if self.cfg.refill_phase == RefillPhase::Random {
            let interval = self.cfg.refill_interval.as_nanos().max(1);
            let mut rng = self.rng_streams.stream("tor-refill-phase", &spec.name);
            n.refill_phase = SimDuration::from_nanos(rand::Rng::random_range(&mut rng, 0..interval));
        }
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
    /// relays added so far ([`BandwidthWeights::computed_v10`], or
    /// [`computed_v9`](BandwidthWeights::computed_v9) for `method` 9; weight scale 10000),
    /// for networks whose consensus carries none. Call it after the last relay and before
    /// the first stream (paths are drawn with the weights in force then).
    pub fn compute_bandwidth_weights(&mut self, method: WeightsMethod) -> Result<&BandwidthWeights, TorError> {
        let totals = crate::path::BandwidthTotals::of(&self.relay_info);
        self.weights = BandwidthWeights::computed(method, totals, crate::path::DEFAULT_WEIGHT_SCALE)?;
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
    /// The node's name as the shared allocation its host and result rows hold too.
    pub fn node_name_shared(&self, n: NodeId) -> &Name {
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
    /// tick is one interval from now, shifted by the relay's refill phase (tor runs both
    /// from the same once-a-second timer of its own).
    pub fn set_relay_hook(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId, hook: Box<dyn RelayHook>) -> Result<(), TorError> {
        if self.nodes[node as usize].kind != NodeKind::Relay {
            return Err(TorError::WrongKind(node, "relay"));
        }
        let first = hook.interval() + self.nodes[node as usize].refill_phase;
        q.schedule_in(first, TOR_EVENT_CLASS, TorEvent::Hook { node });
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
                // Throttling sets both buckets alike; Tortoise may limit writes only. Buckets
                // kept at the relay's rate after a throttle was lifted count as none.
                throttle: if end.conn_released {
                    None
                } else {
                    end.conn_read.as_ref().or(end.conn_write.as_ref()).map(|b| (b.rate(), b.burst()))
                },
                bucket_empty_intervals: u64::from(ch.conn_bucket_empty_intervals[side_index(side)]),
                circuit_throttle: self.nodes[node as usize].circuit_limit_spec(chan).and_then(|(read, write)| read.or(write)),
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

    /// Makes every circuit of `client` use `path` (guard, middle, exit), bypassing path
    /// selection: for experiments on a given topology, such as PredicTor's figure 1. The
    /// relays must be distinct; their flags are not checked.
    pub fn use_fixed_path(&mut self, client: NodeId, path: [NodeId; 3]) -> Result<(), TorError> {
        if self.node_kind(client) != NodeKind::Client {
            return Err(TorError::WrongKind(client, "client"));
        }
        let mut idx = [0; 3];
        for (i, &r) in path.iter().enumerate() {
            idx[i] = self.relays.iter().position(|&x| x == r).ok_or(TorError::WrongKind(r, "relay"))?;
        }
        if idx[0] == idx[1] || idx[1] == idx[2] || idx[0] == idx[2] {
            return Err(TorError::NoPath(Position::Middle));
        }
        self.nodes[client as usize].fixed_path = Some(idx);
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
                    circuit_limits: self.nodes[node as usize].circuit_limit_spec(chan).unwrap_or((None, None)),
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
            for (i, q) in c.queues.iter().enumerate() {
                let n = q.cells.len();
                if n == 0 {
                    continue;
                }
                let (pos, dir) = queue_slot(i);
                if let Some(chan) = c.queue_chan(pos, dir) {
                    let slot = &mut queued[chan as usize * 2 + side_index(c.queue_side(pos, dir))];
                    slot.0 += n;
                    slot.1 += 1;
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

    /// The open circuits through relay `node`, in the direction data flows (from the exit
    /// towards the client), as a per-circuit controller (PredicTor) sees them. Walks every
    /// circuit slot: O(circuits) per call.
    pub fn relay_circuits(&self, node: NodeId) -> Vec<crate::hooks::RelayCircuit> {
        let mut out = Vec::new();
        for (id, c) in self.circuits.iter().enumerate() {
            if c.state != CircuitState::Open {
                continue;
            }
            let Some(pos) = (1..c.nodes.len()).find(|&p| c.nodes[p] == node) else { continue };
            let exit = pos == c.exit_pos();
            let source_cells = exit.then(|| {
                c.live
                    .iter()
                    .map(|&sid| {
                        let st = &self.streams[sid as usize];
                        st.bytes.div_ceil(crate::cell::RELAY_PAYLOAD_SIZE).saturating_sub(st.packaged_cells)
                    })
                    .sum()
            });
            out.push(crate::hooks::RelayCircuit {
                circ: id as u32,
                pos,
                from: (!exit).then(|| c.nodes[pos + 1]),
                to: c.nodes[pos - 1],
                queued: c.queues[queue_index(pos, Direction::In)].cells.len(),
                source_cells,
            });
        }
        out
    }

    /// Limits circuit `circ` at relay `node` to `cells` more cells towards the client
    /// until the next call (`None`: unlimited), where the channel's scheduler shapes
    /// circuits ([`crate::shaped`]), and wakes the channel so that a new budget is used at
    /// once.
    pub fn set_circuit_budget(&mut self, node: NodeId, circ: u32, cells: Option<u64>) {
        let c = &mut self.circuits[circ as usize];
        let Some(pos) = (1..c.nodes.len()).find(|&p| c.nodes[p] == node) else { return };
        let Some(chan) = c.queue_chan(pos, Direction::In) else { return };
        let side = c.queue_side(pos, Direction::In);
        let queued = !c.queues[queue_index(pos, Direction::In)].cells.is_empty();
        let end = &mut self.chans[chan as usize].ends[side_index(side)];
        end.sched.set_budget(circ, cells);
        if queued && end.open && !end.in_write_ring {
            end.in_write_ring = true;
            self.nodes[node as usize].write_ring.push_back(IoRef::Chan(chan, side));
        }
        self.mark_dirty(node);
    }

    /// Lets exit `node` package `cells` more cells of the server's data onto `circ` until
    /// the next call (`None`: unlimited): the exit's incoming rate under a per-circuit
    /// controller that plans in steps. A grant replaces what the last one left and is not
    /// refilled between calls (a bucket of rate 0), so the exit reads each step's plan in
    /// that step rather than in lumps at the relay's refills. Wakes the circuit's streams
    /// so that the grant is used at once.
    pub fn set_exit_read_budget(&mut self, node: NodeId, circ: u32, cells: Option<u64>) {
        let c = &mut self.circuits[circ as usize];
        if c.exit() != node || c.state == CircuitState::Closed {
            return;
        }
        match cells {
            Some(n) => {
                if c.rate_limit.is_none() {
                    self.rate_limited.push(circ);
                }
                c.rate_limit = Some(TokenBucket::new(0, n * crate::cell::CELL_WIRE_BYTES));
            }
            None => {
                if c.rate_limit.take().is_some() {
                    self.rate_limited.retain(|&x| x != circ);
                }
            }
        }
        if cells != Some(0) {
            self.wake_circuit_streams(node, circ);
        }
    }

    /// Installs the incentive scheme that labels cells queued at relays with service
    /// classes (replacing any earlier one). Only relays whose scheduler reads classes
    /// (HPD) consult it.
    pub fn set_incentive_scheme(&mut self, scheme: Box<dyn crate::incentive::IncentiveScheme>) {
        self.incentive = Some(scheme);
    }

    /// The incentive scheme's counters at `now` (empty without a scheme).
    pub fn incentive_counters(&mut self, now: SimTime) -> Vec<(String, u64)> {
        self.incentive.as_mut().map(|s| s.counters(now)).unwrap_or_default()
    }

    /// Cells sent per service class and their summed queueing delays, over the channel
    /// ends of `node` whose scheduler keeps them (HPD), open and closed; `None` if none does.
    pub fn class_delays(&self, node: NodeId) -> Option<crate::scheduler::ClassDelays> {
        let mut total: Option<crate::scheduler::ClassDelays> = self.closed_class_delays.get(&node).copied();
        for &(chan, side) in &self.nodes[node as usize].chans {
            if let Some(d) = self.chans[chan as usize].ends[side_index(side)].sched.class_delays() {
                total.get_or_insert_with(Default::default).add(&d);
            }
        }
        total
    }

    /// The class statistics an HPD relay decides with ([`crate::hpd::HpdRelay`]): every
    /// cell it sent, per class, over all its channel ends, open and closed. Equal to
    /// [`class_delays`](Self::class_delays) (a check of the bookkeeping); `None` if `node`
    /// does not run HPD.
    pub fn hpd_relay_delays(&self, node: NodeId) -> Option<crate::scheduler::ClassDelays> {
        self.nodes[node as usize].hpd.as_ref().map(|h| h.sched.class_delays())
    }

    /// [`class_delays`](Self::class_delays) summed over every node; `None` if no channel
    /// end keeps them.
    pub fn class_delays_total(&self) -> Option<crate::scheduler::ClassDelays> {
        let mut total: Option<crate::scheduler::ClassDelays> = None;
        for n in 0..self.nodes.len() {
            if let Some(d) = self.class_delays(n as NodeId) {
                total.get_or_insert_with(Default::default).add(&d);
            }
        }
        total
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
        let exit = c.exit();
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
            begin: s.begin_sent.map(|t| t.saturating_since(s.start)),
            connected: s.connected.map(|t| t.saturating_since(s.start)),
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
        let qi = queue_index(pos, run.dir);
        let q = &mut c.queues[qi];
        let was_empty = q.cells.is_empty();
        q.cells.push(run);
        let queued = q.cells.len();
        if let Some(w) = self.nodes[c.nodes[pos] as usize].waits.as_mut() {
            w.cross(Crossing::Queued, now, run.count as u64);
        }
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
        // A circuit whose own bucket here holds less than a cell waits for the refill
        // off the scheduler (held), its cells queued behind it.
        let hold = was_empty && c.limited && c.allowance(qi) == 0;
        if was_empty && !hold {
            end.sched.activate(circ, now, &mut c.policy[qi]);
        }
        if end.sched.wants_classes() {
            use crate::incentive::ServiceClass;
            let split = match self.incentive.as_mut() {
                Some(s) if pos != 0 => s.classify(now, circ, pos, run.count),
                _ => [(ServiceClass::Normal, run.count), (ServiceClass::Normal, 0)],
            };
            for (class, k) in split {
                if k > 0 {
                    end.sched.on_cells_queued(circ, k, class, now);
                }
            }
        }
        if hold {
            c.limits.as_mut().expect("a limited circuit has limits").held[qi] = true;
            end.sched.hold(circ, &mut c.policy[qi]);
        }
        wake_for_cells(&mut self.nodes[node as usize], end, chan, side);
        self.mark_dirty(node);
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

    /// The stream with index `idx` on `circ`, unless it has finished.
    #[inline]
    fn live_stream(&self, circ: u32, idx: u16) -> Option<u32> {
        Some(self.circuits[circ as usize].streams[idx as usize]).filter(|&sid| sid != NO_STREAM)
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
            CellKind::Connected => {
                let Some(sid) = self.live_stream(circ, run.stream) else { return };
                self.streams[sid as usize].connected = Some(now);
                // With optimistic data the request went with BEGIN; without, it follows now.
                if !self.cfg.optimistic_data {
                    let exit = self.circuits[circ as usize].exit_pos();
                    let count = self.request_cells();
                    let req = CellRun { circ, count, dir: Direction::Out, kind: CellKind::Data, target: exit as u8, stream: run.stream };
                    self.emit(now, circ, 0, req);
                }
            }
            CellKind::Data if pos == 0 => self.deliver_at_client(now, circ, run),
            // At the exit: the request's cells (no other uploads are modelled). The exit's
            // connection to the server is up: CONNECTED went out once it was.
            CellKind::Data => {
                let Some(sid) = self.live_stream(circ, run.stream) else { return };
                let needed = self.request_cells();
                let s = &mut self.streams[sid as usize];
                s.request_cells += run.count;
                if s.request_cells >= needed {
                    self.write_request(q, sid);
                }
            }
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
        // The cells have left the overlay, whether or not their stream is still there.
        self.circuits[circ as usize].in_overlay.leave(now, u64::from(run.count));
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
        if s.request_waits_for_refill {
            s.request_waits_for_refill = false;
            let c = &self.circuits[s.circ as usize];
            let waits = &mut self.nodes[c.exit() as usize].request_waits;
            let k = waits.iter().position(|&x| x == sid).expect("a waiting request is in its exit's list");
            waits.remove(k); // Keeps the rest in arrival order.
        }
        let s = &mut self.streams[sid as usize];
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
        if in_ring {
            self.counters.stream_slots_held_by_ring += 1;
        } else {
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
        for qi in 0..HOP_QUEUES {
            let qd = &mut c.queues[qi].cells;
            if qd.is_empty() {
                continue;
            }
            let (pos, dir) = queue_slot(qi);
            let waits = self.nodes[c.nodes[pos] as usize].waits.as_mut();
            let mut dropped = 0;
            while let Some(run) = qd.pop_front_run(u32::MAX) {
                dropped += run.count as u64;
                count_dropped(&mut self.counters, run);
            }
            if let Some(w) = waits {
                w.cross(Crossing::Dropped, now, dropped);
            }
            *qd = Default::default();
            if let Some(ch) = c.queue_chan(pos, dir) {
                let ch = &mut self.chans[ch as usize];
                let side = side_index(ch.side_of(c.nodes[pos]));
                ch.ends[side].sched.deactivate(circ, &mut c.policy[qi]);
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
        if std::mem::take(&mut c.limited) {
            c.limits = None;
            for p in 1..CIRCUIT_NODES {
                self.nodes[c.nodes[p] as usize].limited_circs.retain(|&x| x != circ);
            }
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
        // Per-class delays of the closing ends stay counted at their relays.
        for e in &ch.ends {
            if let Some(d) = e.sched.class_delays() {
                self.closed_class_delays.entry(e.node).or_default().add(&d);
            }
        }
        ch.close();
        let nodes = ch.nodes;
        // Where its bytes waited stays counted at the relays that wrote them (idle: nothing
        // waits now).
        for (i, &n) in nodes.iter().enumerate() {
            if let (Some(w), Some(areas)) = (self.nodes[n as usize].waits.as_mut(), self.net.wait_areas(ch.conn, side_at(i), now)) {
                w.closed_channels += areas;
            }
        }
        // The TCP connection closes with the channel; the transport reuses its slot.
        self.net.close(now, ch.conn);
        let key = (nodes[0].min(nodes[1]), nodes[0].max(nodes[1]));
        if self.chan_by_pair.get(&key) == Some(&chan) {
            self.chan_by_pair.remove(&key);
        }
        for n in nodes {
            let node = &mut self.nodes[n as usize];
            node.chans.retain(|&(c, _)| c != chan);
            if !node.circuit_limits.is_empty() {
                node.circuit_limits.retain(|&(c, _)| c != chan);
            }
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
                // Without it, the client sends the request once CONNECTED reaches it.
                if self.cfg.optimistic_data {
                    self.write_request(q, sid);
                }
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
                let exit = self.circuits[circ as usize].exit();
                self.wake_edge(exit, sid);
            }
            NetNotice::Writable { side: Side::Initiator, .. } => self.write_request(q, sid),
        }
    }

    /// DATA cells a request takes without optimistic data.
    fn request_cells(&self) -> u32 {
        self.cfg.request_bytes.div_ceil(RELAY_PAYLOAD_SIZE) as u32
    }

    /// The exit writes what is left of the stream's request to the server (once its
    /// connection is up and, without optimistic data, the request's cells are in),
    /// charged to the exit's write bucket as tor charges every connection it rate-limits
    /// (`connection_bucket_write_limit`; a server is not a local address). With the
    /// bucket empty the rest waits for the refill (tor stops writing to the connection,
    /// `write_blocked_on_bw`, until `connection_bucket_refill`); with the send buffer
    /// full, for the connection's Writable notice. Each write is at most an edge
    /// connection's share of the bucket ([`edge_share`]).
    fn write_request(&mut self, q: &mut EventQueue<TorEvent>, sid: u32) {
        let s = &self.streams[sid as usize];
        if !self.cfg.optimistic_data && s.request_cells < self.request_cells() {
            return; // Writable before the request has come: nothing to write yet.
        }
        if s.request_waits_for_refill {
            return; // Writable while waiting for the refill, which writes it.
        }
        let conn = s.exit_conn.expect("requests are written on connected streams");
        let c = &self.circuits[s.circ as usize];
        let exit = c.exit();
        loop {
            let left = self.cfg.request_bytes - self.streams[sid as usize].request_written;
            if left == 0 {
                return;
            }
            let n = &mut self.nodes[exit as usize];
            let share = edge_share(&n.write_bucket);
            if share == 0 {
                self.counters.requests_held_for_refill += 1;
                self.streams[sid as usize].request_waits_for_refill = true;
                n.request_waits.push(sid);
                self.ensure_refill(q, exit);
                return;
            }
            let want = left.min(share);
            let w = self.net.write(q, conn, Side::Initiator, want);
            n.write_bucket.take(w);
            n.stats.bytes_written += w;
            self.streams[sid as usize].request_written += w;
            if w < want {
                return; // The send buffer is full: its Writable notice resumes.
            }
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
            let at = next_refill(q.now(), self.cfg.refill_interval, n.refill_phase);
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
            if c.exit() == node {
                if let Some(b) = c.rate_limit.as_mut() {
                    b.refill(iv);
                }
                self.wake_circuit_streams(node, circ as u32);
            }
        }
        if !self.nodes[node as usize].limited_circs.is_empty() {
            self.refill_circuit_limits(q.now(), node);
        }
        // Requests the exit held for this refill, oldest first (tor's
        // connection_bucket_refill starts writing them again).
        if !self.nodes[node as usize].request_waits.is_empty() {
            let waits = std::mem::take(&mut self.nodes[node as usize].request_waits);
            for &sid in &waits {
                self.streams[sid as usize].request_waits_for_refill = false;
            }
            for &sid in &waits {
                self.write_request(q, sid);
            }
        }
        // A relay with finite buckets refills forever, as tor's timer does.
        self.ensure_refill(q, node);
        self.mark_dirty(node);
    }

    // ------------------------------------------------------------------ per-circuit buckets

    /// Refills the buckets circuits have of their own at `node` and releases the circuits
    /// they held (their schedulers offer them again).
    fn refill_circuit_limits(&mut self, now: SimTime, node: NodeId) {
        let iv = self.cfg.refill_interval;
        let circs = std::mem::take(&mut self.nodes[node as usize].limited_circs);
        for &circ in &circs {
            let nodes = self.circuits[circ as usize].nodes;
            for qi in (0..HOP_QUEUES).filter(|&qi| nodes[queue_slot(qi).0] == node) {
                let limits = self.circuits[circ as usize].limits.as_mut();
                if let Some(b) = limits.and_then(|l| l.buckets[qi].as_mut()) {
                    b.refill(iv);
                }
                self.reconcile_hold(now, circ, qi);
            }
        }
        self.nodes[node as usize].limited_circs = circs;
    }

    /// Brings queue `qi` of `circ` in line with its bucket: held while it has cells and
    /// its bucket holds less than a cell, offered to its scheduler (and its channel end
    /// woken) otherwise.
    fn reconcile_hold(&mut self, now: SimTime, circ: u32, qi: usize) {
        let c = &mut self.circuits[circ as usize];
        let (pos, dir) = queue_slot(qi);
        let Some(chan) = c.queue_chan(pos, dir) else { return };
        let queued = !c.queues[qi].cells.is_empty();
        let allowance = c.allowance(qi);
        let side = c.queue_side(pos, dir);
        let node = c.nodes[pos];
        let Some(l) = c.limits.as_mut() else { return };
        let held = l.held[qi];
        let end = &mut self.chans[chan as usize].ends[side_index(side)];
        if held && (allowance > 0 || !queued) {
            l.held[qi] = false;
            if queued {
                end.sched.release(circ, now, &mut c.policy[qi]);
                wake_for_cells(&mut self.nodes[node as usize], end, chan, side);
                self.mark_dirty(node);
            }
        } else if !held && queued && allowance == 0 {
            l.held[qi] = true;
            end.sched.hold(circ, &mut c.policy[qi]);
        }
    }

    /// Gives every circuit over channel `chan` at relay `node`, now and later, buckets of
    /// its own: `read` for the cells the relay reads from the connection (charged as they
    /// leave for the circuit's next hop), `write` for those it writes to it (charged as
    /// they leave for this connection's outbuf); `None` removes them. A new bucket starts
    /// full; a changed one keeps its tokens, capped at the new burst. Walks the circuit
    /// slots until it has found the channel's circuits (none: no walk; a new connection's
    /// few: about half of them): call it when a connection's setting changes, not per tick.
    pub(crate) fn set_circuit_limits(&mut self, now: SimTime, node: NodeId, chan: u32, spec: crate::node::CircuitLimitSpec) {
        let n = &mut self.nodes[node as usize];
        n.circuit_limits.retain(|&(c, _)| c != chan);
        if spec != (None, None) {
            n.circuit_limits.push((chan, spec));
        }
        // Every circuit over the channel has a hop at `node`, one of its two ends.
        let mut left = self.chans[chan as usize].circuits;
        for circ in 0..self.circuits.len() as u32 {
            if left == 0 {
                break;
            }
            let c = &self.circuits[circ as usize];
            if c.state != CircuitState::Closed && c.chans.contains(&Some(chan)) {
                debug_assert!(c.nodes.contains(&node));
                left -= 1;
                self.apply_circuit_limits(now, node, circ, chan, spec);
            }
        }
        debug_assert_eq!(left, 0, "channel {chan} counts circuits it does not carry");
    }

    /// A circuit that starts to use channel `chan` gets the buckets either end has set for
    /// the circuits of that connection.
    fn on_circuit_joins_channel(&mut self, now: SimTime, circ: u32, chan: u32) {
        for node in self.chans[chan as usize].nodes {
            if let Some(spec) = self.nodes[node as usize].circuit_limit_spec(chan) {
                self.apply_circuit_limits(now, node, circ, chan, spec);
            }
        }
    }

    /// Sets `circ`'s buckets at relay `node` for channel `chan` (one of its hops there).
    fn apply_circuit_limits(&mut self, now: SimTime, node: NodeId, circ: u32, chan: u32, (read, write): crate::node::CircuitLimitSpec) {
        let c = &mut self.circuits[circ as usize];
        let pos = c.position(node);
        // The peer is the lower neighbour (a client's connection to its guard) or, on a
        // connection the next hop opened, the upper one. Read: cells from the peer, which
        // leave in the other direction; write: cells towards the peer.
        let (towards_peer, from_peer) =
            if pos > 0 && c.chans[pos - 1] == Some(chan) { (Direction::In, Direction::Out) } else { (Direction::Out, Direction::In) };
        let last = CIRCUIT_NODES - 1;
        let has_queue = |dir| !((pos == 0 && dir == Direction::In) || (pos == last && dir == Direction::Out));
        let limits = c.limits.get_or_insert_with(Box::default);
        let mut touched = [None; 2];
        for (k, (dir, want)) in [(from_peer, read), (towards_peer, write)].into_iter().enumerate() {
            // Cells from the peer that end here (at the exit, from the middle) have no
            // queue: nothing to limit.
            if !has_queue(dir) {
                continue;
            }
            let qi = queue_index(pos, dir);
            let b = &mut limits.buckets[qi];
            match (b.as_mut(), want) {
                (Some(b), Some((rate, burst))) => b.set(rate, burst),
                (None, Some((rate, burst))) => *b = Some(TokenBucket::new(rate, burst)),
                (_, None) => *b = None,
            }
            touched[k] = Some(qi);
        }
        let any_here = (0..HOP_QUEUES).any(|qi| queue_slot(qi).0 == pos && limits.buckets[qi].is_some());
        let any = limits.buckets.iter().any(|b| b.is_some());
        c.limited = true;
        let listed = self.nodes[node as usize].limited_circs.contains(&circ);
        if any_here && !listed {
            self.nodes[node as usize].limited_circs.push(circ);
        } else if !any_here && listed {
            self.nodes[node as usize].limited_circs.retain(|&x| x != circ);
        }
        for qi in touched.into_iter().flatten() {
            self.reconcile_hold(now, circ, qi);
        }
        let c = &mut self.circuits[circ as usize];
        if !any && !c.limits.as_ref().is_some_and(|l| l.held.iter().any(|&h| h)) {
            c.limits = None;
            c.limited = false;
        }
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

/// Channel end `end` (of `chan`, on `side`) at node `n` has cells its scheduler may send:
/// under KIST the node's next run visits it (KIST moves cells to outbufs in its own runs;
/// the write pass only writes them), otherwise its write pass does, once the channel is
/// open.
fn wake_for_cells(n: &mut TorNode, end: &mut ChanEnd, chan: u32, side: Side) {
    if n.kist.is_some() {
        n.kist_wanted = true;
        if !end.in_kist_ends {
            end.in_kist_ends = true;
            n.kist_ends.push((chan, side));
        }
    } else if end.open && !end.in_write_ring {
        end.in_write_ring = true;
        n.write_ring.push_back(IoRef::Chan(chan, side));
    }
}
