//! Circuits and streams.
//!
//! **Owns:** a circuit's path, the channels between its hops, the per-hop circuit queues
//! (one per direction, tor's `p_chan_cells`/`n_chan_cells`), its build state, the
//! congestion control of both edges, per-hop cell counters and an optional rate limit;
//! a stream's request, its stream windows (STREAMWINDOW_START 500, a SENDME per 50 cells)
//! and its timings. **Must not touch:** channels' buffers or buckets.

use onionlab_core::SimTime;
use onionlab_net::{ConnId, Side};

use crate::cell::{CellFifo, Direction};
use crate::flow_control::CongestionControl;
use crate::node::NodeId;
use crate::scheduler::CircPolicyData;
use crate::token_bucket::TokenBucket;
use crate::transit::TransitLedger;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CircuitState {
    /// CREATE/EXTEND round trips under way.
    Building,
    Open,
    Closed,
}

/// Why a circuit was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// A circuit queue exceeded `circ_max_cell_queue_size` (relay.c).
    QueueLimit,
    /// The client closed it: dirty for longer than MaxCircuitDirtiness with no stream
    /// left on it (`circuit_expire_old_circuits_clientside`, END_CIRC_REASON_FINISHED).
    Expired,
    /// The client closed it: clean (built for a predicted port, never used) and open
    /// for `CircuitIdleTimeout` (`circuit_expire_old_circuits_clientside`).
    IdleTimeout,
}

/// Nodes on a circuit: the client and its three relays (tor's DEFAULT_ROUTE_LEN, 3).
pub(crate) const CIRCUIT_NODES: usize = 4;

/// Circuit queues: one per position and direction the position forwards cells in. The
/// client never queues cells coming back to it, nor the exit cells going on to the
/// server (both are delivered at the edge), so a circuit has six queues, not eight
/// (128 bytes less a circuit; a full-scale network holds millions).
pub(crate) const HOP_QUEUES: usize = 2 * CIRCUIT_NODES - 2;

/// Where the queue at position `pos` for direction `dir` sits in [`Circuit::queues`] and
/// [`Circuit::policy`]: towards the exit at `2 pos`, towards the client at `2 pos - 1`.
/// The two positions without a queue (the client's In, the exit's Out) panic.
#[inline]
pub(crate) fn queue_index(pos: usize, dir: Direction) -> usize {
    match dir {
        Direction::Out => 2 * pos,
        Direction::In => 2 * pos - 1,
    }
}

/// The position and direction of queue `i` (the inverse of [`queue_index`]).
#[inline]
pub(crate) fn queue_slot(i: usize) -> (usize, Direction) {
    if i.is_multiple_of(2) {
        (i / 2, Direction::Out)
    } else {
        (i.div_ceil(2), Direction::In)
    }
}

/// A circuit queue with the count of cells the relay there has queued in it: one cache
/// line, so relaying a run touches one line for both.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct HopQueue {
    pub cells: CellFifo,
    /// Cells the relay at this position queued in this direction (0 at the edges).
    pub relayed: u64,
}

/// In [`Circuit::streams`], a stream that has finished.
pub(crate) const NO_STREAM: u32 = u32::MAX;

/// A circuit. Its per-hop state lives inline in fixed arrays, not in vectors of its own,
/// and the fields every relayed run reads share the first cache line: every cell run
/// relayed touches the circuit, and each further line or heap block costs a cache miss at
/// full-network sizes (the model is bound by memory accesses as much as by instructions).
/// `repr(C)` keeps that order.
#[repr(C)]
pub(crate) struct Circuit {
    // First cache line: what relaying a run reads.
    /// `[client, guard, middle, exit]`: position 0 is the client.
    pub nodes: [NodeId; CIRCUIT_NODES],
    /// `chans[p]` links position p and p+1, once known.
    pub chans: [Option<u32>; CIRCUIT_NODES - 1],
    pub state: CircuitState,
    /// Dirty for longer than MaxCircuitDirtiness: closes when its last stream finishes.
    pub expired: bool,
    /// The exit has stopped reading this circuit's streams: its queue toward the client
    /// reached `cellq_high` ([`crate::TorConfig::cell_queue_watermarks`]).
    pub edge_blocked: bool,
    pub close_reason: Option<CloseReason>,
    /// Cells of this circuit in channel outbufs or on the wire (moved out of its queues
    /// and not yet read at the next hop): a closed circuit's slot is reused only at 0.
    pub cells_out: u32,
    /// Hops whose CREATED the client has seen.
    pub built: usize,
    /// `lower_initiates[p]`: the node at position p is the initiator of `chans[p]` (the
    /// channel may have been opened by the other node, for another circuit). Kept here so
    /// that queueing a run on a channel does not read the channel's header for its side.
    pub lower_initiates: [bool; CIRCUIT_NODES - 1],
    /// `limits` is set: some relay of the circuit gives it buckets of its own (kept in
    /// this line, in what was padding, so that the hot path tests it without reading
    /// `limits`).
    pub limited: bool,
    /// `queues[queue_index(p, dir)]`: cells at position p waiting to leave in direction
    /// dir, and the relay's count of cells it queued there ([`queue_index`]).
    pub queues: [HopQueue; HOP_QUEUES],
    /// `policy[queue_index(p, dir)]`: what the circuit scheduler of the channel end that
    /// queue feeds keeps about this circuit while it is idle there (EWMA: its count).
    pub policy: [CircPolicyData; HOP_QUEUES],
    // The edges' state.
    /// Stream ids, by stream index within the circuit (what cells name); [`NO_STREAM`]
    /// once the stream has finished (its id may belong to another stream by then).
    pub streams: Vec<u32>,
    /// Ids of the streams attached and not yet finished, in the order they attached: what
    /// a SENDME or a refill wakes (a circuit carries every stream of its client for up to
    /// ten minutes, most of them long done).
    pub live: Vec<u32>,
    /// Flow/congestion control at the client edge (packages Out, delivers In) ...
    pub cc_client: Box<dyn CongestionControl>,
    /// ... and at the exit edge (packages In, delivers Out).
    pub cc_exit: Box<dyn CongestionControl>,
    /// Optional packaging rate limit at the exit edge (hook for congestion controllers).
    pub rate_limit: Option<TokenBucket>,
    /// Per-circuit buckets at relays that limit circuits one by one
    /// ([`crate::RelayControl::set_circuit_limits`]); `None` almost always.
    pub limits: Option<Box<CircuitLimits>>,
    /// Streams waiting for the circuit to open before sending BEGIN.
    pub pending_begins: Vec<u16>,
    pub created_at: SimTime,
    pub opened_at: Option<SimTime>,
    /// First stream attached (tor's `timestamp_dirty`).
    pub dirty_since: Option<SimTime>,
    /// Downstream DATA cells packaged at the exit and not yet forwarded by it ...
    pub at_exit: TransitLedger,
    /// ... and forwarded by the exit and not yet delivered at the client: the overlay
    /// transit of the PredicTor paper ([`crate::transit`]).
    pub in_overlay: TransitLedger,
}

/// A circuit's own token buckets at the relays that limit it (Tortoise with
/// `limit_unit = "circuit"`), by queue: the bucket of queue `qi` is charged for every cell
/// that leaves it for its channel's outbuf, and while it holds less than one cell
/// ([`CELL_WIRE_BYTES`]) the circuit is held off that channel's scheduler until the
/// relay's next refill.
#[derive(Clone, Debug, Default)]
pub(crate) struct CircuitLimits {
    pub buckets: [Option<TokenBucket>; HOP_QUEUES],
    /// The circuit has cells in queue `qi` and is held off its channel's scheduler
    /// ([`crate::scheduler::CircuitScheduler::hold`]).
    pub held: [bool; HOP_QUEUES],
}

impl CircuitLimits {
    /// Whole cells queue `qi` may still send (`u64::MAX` without a bucket).
    #[inline]
    pub fn allowance(&self, qi: usize) -> u64 {
        self.buckets[qi].as_ref().map_or(u64::MAX, |b| b.tokens() / crate::cell::CELL_WIRE_BYTES)
    }
}

impl Circuit {
    /// Whole cells the queue `qi` may still send under the circuit's own bucket there
    /// (`u64::MAX`: no such bucket, the case of every circuit a relay does not limit).
    #[inline]
    pub fn allowance(&self, qi: usize) -> u64 {
        if !self.limited {
            return u64::MAX;
        }
        self.limits.as_ref().map_or(u64::MAX, |l| l.allowance(qi))
    }

    /// Whether the circuit is held off the channel queue `qi` feeds.
    #[inline]
    pub fn held(&self, qi: usize) -> bool {
        self.limited && self.limits.as_ref().is_some_and(|l| l.held[qi])
    }

    /// Position of `node` in the path.
    #[inline]
    pub fn position(&self, node: NodeId) -> usize {
        self.nodes.iter().position(|&n| n == node).expect("node is not on this circuit")
    }

    /// Position of the exit (the last hop) in the path.
    #[inline]
    pub fn exit_pos(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The exit relay: the hop that talks to servers.
    #[inline]
    pub fn exit(&self) -> NodeId {
        self.nodes[self.exit_pos()]
    }

    /// Cells queued at the exit toward the client (what edge blocking watches).
    #[inline]
    pub fn exit_queued(&self) -> u64 {
        self.queues[queue_index(self.exit_pos(), Direction::In)].cells.len()
    }

    /// The channel the queue at `pos` for `dir` feeds: towards the exit from `pos` (Out),
    /// towards the client (In); `None` until that hop is extended to, and for the edges'
    /// non-existent outer channels.
    #[inline]
    pub fn queue_chan(&self, pos: usize, dir: Direction) -> Option<u32> {
        let chan_pos = match dir {
            Direction::Out => pos,
            Direction::In => pos.checked_sub(1)?,
        };
        self.chans.get(chan_pos).copied().flatten()
    }

    /// The side the node at `pos` holds on [`queue_chan`](Self::queue_chan)`(pos, dir)`,
    /// which must exist.
    #[inline]
    pub fn queue_side(&self, pos: usize, dir: Direction) -> Side {
        // Out: `pos` is the lower node of channel `pos`; In: the upper node of `pos - 1`.
        let initiates = match dir {
            Direction::Out => self.lower_initiates[pos],
            Direction::In => !self.lower_initiates[pos - 1],
        };
        if initiates {
            Side::Initiator
        } else {
            Side::Acceptor
        }
    }
}

/// A client's request for `bytes` from a server, carried over one stream.
pub(crate) struct Stream {
    pub client: NodeId,
    pub server: NodeId,
    pub circ: u32,
    /// Index of the stream within its circuit (the stream id its cells carry).
    pub idx: u16,
    pub bytes: u64,
    /// Caller's label, returned in the record.
    pub tag: u64,
    pub start: SimTime,
    /// When the client sent BEGIN: at `start` on an open circuit, else once it opened.
    pub begin_sent: Option<SimTime>,
    /// When CONNECTED reached the client (a SOCKS client's reply; OnionPerf's "proxy
    /// response").
    pub connected: Option<SimTime>,
    pub first_byte: Option<SimTime>,
    pub done: bool,
    // Exit side.
    pub exit_conn: Option<ConnId>,
    /// Response bytes the exit has read from the server.
    pub exit_read: u64,
    /// Read from the server and not yet packaged (less than a cell, or window closed).
    pub exit_inbuf: u64,
    pub package_window: u64,
    /// DATA cells the exit has packaged, and stream SENDMEs the client sent and the exit
    /// received (for the window invariants).
    pub packaged_cells: u64,
    pub sendmes_sent: u32,
    pub sendmes_received: u32,
    pub in_read_ring: bool,
    /// Request bytes the exit has written to the server (a send buffer smaller than the
    /// request takes them in parts).
    pub request_written: u64,
    /// Request DATA cells the exit has received (without optimistic data, the request
    /// comes after CONNECTED; the exit writes it once all of them are in).
    pub request_cells: u32,
    /// The exit's write bucket ran out with request bytes left to write: the stream is in
    /// its exit's `request_waits` until the refill (tor's `write_blocked_on_bw`).
    pub request_waits_for_refill: bool,
    // Server side.
    pub request_read: u64,
    pub server_written: u64,
    // Client side.
    pub delivered_cells: u64,
    pub deliver_window: u64,
}

/// The outcome of one stream: a row of the per-download results.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamRecord {
    /// The id `start_stream` returned (given to a later stream once this one finished).
    pub stream: u32,
    /// The circuit the stream used.
    pub circuit: u32,
    pub tag: u64,
    pub client: NodeId,
    pub server: NodeId,
    /// The download's size: response bytes the client asked for.
    pub bytes: u64,
    /// Response bytes the client had received when the record was written: `bytes` for a
    /// completed stream, fewer for a failed or unfinished one.
    pub received: u64,
    pub start: SimTime,
    /// Time until the client sent BEGIN, from `start`: the wait for an open circuit (zero
    /// on one already open).
    pub begin: Option<onionlab_core::SimDuration>,
    /// Time until CONNECTED reached the client, from `start`.
    pub connected: Option<onionlab_core::SimDuration>,
    /// Time to first byte, from `start`.
    pub ttfb: Option<onionlab_core::SimDuration>,
    /// Time to last byte, from `start`.
    pub ttlb: Option<onionlab_core::SimDuration>,
    /// Relays of the circuit: guard, middle, exit.
    pub path: Vec<NodeId>,
    /// Build time of the circuit the stream used (tornettools' circuit_build_time).
    pub circuit_build_time: Option<onionlab_core::SimDuration>,
    /// Why the stream did not complete: a failure, or [`UNFINISHED`] for a stream still
    /// in progress when the run ended. `None`: completed.
    pub error: Option<&'static str>,
}

/// The `error` of a stream still in progress when the run ended
/// ([`TorNetwork::unfinished_records`](crate::TorNetwork::unfinished_records)): not a
/// failure, but a download time that is only known to exceed the time it ran for.
pub const UNFINISHED: &str = "unfinished at end of run";

#[cfg(test)]
mod tests {
    use super::*;

    /// Six queues: the client's towards the exit, each relay's both ways, the exit's
    /// towards the client; each at its own index, and the client's In and the exit's Out
    /// have none.
    #[test]
    fn queue_indices_cover_the_six_queues_once() {
        let mut seen = [false; HOP_QUEUES];
        for pos in 0..CIRCUIT_NODES {
            for dir in [Direction::Out, Direction::In] {
                let exists = !((pos == 0 && dir == Direction::In) || (pos == CIRCUIT_NODES - 1 && dir == Direction::Out));
                if !exists {
                    continue;
                }
                let i = queue_index(pos, dir);
                assert!(i < HOP_QUEUES && !seen[i], "({pos}, {dir:?}) -> {i}");
                seen[i] = true;
                assert_eq!(queue_slot(i), (pos, dir));
            }
        }
        assert!(seen.iter().all(|&s| s));
        // Indexing the queues with either panics: the exit's Out is past the end, the
        // client's In underflows (or, without overflow checks, wraps past the end).
        assert!(queue_index(CIRCUIT_NODES - 1, Direction::Out) >= HOP_QUEUES);
        assert!(std::panic::catch_unwind(|| [0u8; HOP_QUEUES][queue_index(0, Direction::In)]).is_err());
    }
}
