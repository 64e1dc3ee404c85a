//! Channels: one TLS-over-TCP connection between two tor nodes, carrying many circuits.
//!
//! **Owns:** per end, the outbuf (cells the scheduler chose, not yet in the kernel), the
//! record of cells written to the kernel and not yet read by the peer (`wire`), the
//! partial cell read so far, the circuit scheduler, and the per-connection token buckets
//! used when the peer is a client. **Must not touch:** circuit queues (the network moves
//! cells between them and the outbuf under the scheduler's choice).
//!
//! Where cells wait, in order (figure 1 of the throttling paper): circuit queue (g),
//! outbuf (i), kernel send buffer and link (m, the transport), kernel receive buffer at
//! the peer until the peer's read bucket lets it read (a-d). Only the first is reordered by
//! a scheduler; the rest are FIFO across all circuits of the channel.
//!
//! A channel counts the circuits over it and closes (for good: a later circuit between the
//! same pair gets a new channel) once it has had none for the idle timeout.

use onionlab_net::{ConnId, Side};

use crate::cell::{CellFifo, CELL_WIRE_BYTES};
use crate::node::NodeId;
use crate::scheduler::CircuitMux;
use crate::token_bucket::TokenBucket;

/// One node's end of a channel. Fields are grouped by who touches them together, one
/// cache line a group (`repr(C)` keeps the order): a batch arriving at this end reads the
/// first line (and the peer's `wire`), writing from this end touches the others. The
/// circuitmux is inline (lines 3 and 4), not behind a pointer. At full-network sizes each
/// further line a batch touches is a cache miss.
#[repr(C, align(64))]
pub(crate) struct ChanEnd {
    // Reading (line 1).
    pub in_read_ring: bool,
    /// Out of per-connection read tokens; re-armed at the next refill.
    pub read_waits_for_refill: bool,
    /// Copy of [`Channel::closed`], kept here so that a batch's arrival (its notice and
    /// the read) reads this line only, not the channel's header line as well.
    pub closed: bool,
    /// The per-connection buckets were kept at the relay's own rate when a throttle was
    /// lifted (the throttling authors' code's "unthrottled", `RelayControl::release_throttle`):
    /// they still limit, but the connection is reported as unthrottled.
    pub conn_released: bool,
    /// Bytes of the next cell from the peer read so far (less than one cell).
    pub inbuf_partial: u32,
    pub bytes_read: u64,
    /// Per-connection buckets (PerConnBWRate/Burst), only on a relay's end of a channel
    /// from a client.
    pub conn_read: Option<TokenBucket>,
    /// Copy of [`Channel::conn`] (see `closed`).
    pub conn: ConnId,
    /// The node at this end (its entry of [`Channel::nodes`]; see `closed`).
    pub node: NodeId,
    // Writing: the outbuf (line 2) ...
    pub outbuf: CellFifo,
    /// Bytes of the last started cell not yet written to the kernel (0..CELL_WIRE_BYTES).
    pub tail_unwritten: u64,
    // ... the scheduler (line 3, into line 4) and write limits (line 4) ...
    pub sched: CircuitMux,
    pub conn_write: Option<TokenBucket>,
    pub in_write_ring: bool,
    pub write_waits_for_refill: bool,
    /// In its KIST relay's `kist_ends`.
    pub in_kist_ends: bool,
    /// Copy of [`Channel::open`], and below it of [`Channel::conn`], for the write path:
    /// queueing and writing read this line, not the channel's header line.
    pub open: bool,
    pub write_conn: ConnId,
    // ... and what went to the kernel (the count ends line 4, the cells fill line 5).
    pub bytes_written: u64,
    /// Cells at least partly written to the kernel, not yet wholly read by the peer.
    pub wire: CellFifo,
}

impl ChanEnd {
    /// `node`'s end of a channel over connection `conn`.
    pub fn new(sched: CircuitMux, conn: ConnId, node: NodeId) -> Self {
        ChanEnd {
            closed: false,
            conn_released: false,
            conn,
            node,
            open: false,
            write_conn: conn,
            outbuf: CellFifo::new(),
            tail_unwritten: 0,
            wire: CellFifo::new(),
            inbuf_partial: 0,
            sched,
            conn_read: None,
            conn_write: None,
            in_read_ring: false,
            in_write_ring: false,
            read_waits_for_refill: false,
            write_waits_for_refill: false,
            in_kist_ends: false,
            bytes_read: 0,
            bytes_written: 0,
        }
    }

    /// Bytes waiting in the outbuf (whole cells not started plus the started cell's rest).
    #[inline]
    pub fn outbuf_bytes(&self) -> u64 {
        self.outbuf.len() * CELL_WIRE_BYTES + self.tail_unwritten
    }

    /// Records that `n` bytes of the outbuf went to the kernel: cells whose first byte
    /// was written move to `wire`, in order.
    pub fn note_written(&mut self, n: u64) {
        let from_tail = n.min(self.tail_unwritten);
        self.tail_unwritten -= from_tail;
        let rest = n - from_tail;
        if rest > 0 {
            let started = rest.div_ceil(CELL_WIRE_BYTES);
            let moved = self.outbuf.move_to(&mut self.wire, started);
            debug_assert_eq!(moved, started, "wrote more than the outbuf held");
            self.tail_unwritten = started * CELL_WIRE_BYTES - rest;
        }
        self.bytes_written += n;
    }
}

/// A channel: its header fits one cache line and each end starts a line of its own.
#[repr(C, align(64))]
pub(crate) struct Channel {
    pub conn: ConnId,
    /// `[initiator, acceptor]`.
    pub nodes: [NodeId; 2],
    /// TLS and link handshakes done: cells may flow. Each end keeps a copy
    /// ([`ChanEnd::open`]); [`Channel::set_open`] and [`Channel::close`] set all three.
    pub open: bool,
    /// Closed for idleness: gone from both nodes' channel lists, never used again. Each
    /// end keeps a copy ([`ChanEnd::closed`]); [`Channel::close`] sets all three.
    pub closed: bool,
    /// Circuits (not closed) with a hop over this channel (tor's `n_circuits`).
    pub circuits: u32,
    /// When `circuits` last fell to zero: the start of the idle timeout.
    pub idle_since: onionlab_core::SimTime,
    /// How long it stays open without circuits (drawn when it opened).
    pub idle_timeout: onionlab_core::SimDuration,
    /// Per end (`[initiator, acceptor]`): refills at which that end's per-connection read or
    /// write bucket was empty, i.e. intervals in which its own throttle, not the relay's
    /// bucket, held the connection back. Kept here, in the header's spare bytes, because only
    /// the refill touches it.
    pub conn_bucket_empty_intervals: [u32; 2],
    pub ends: [ChanEnd; 2],
}

impl Channel {
    /// Marks the channel open (handshakes done), in its header and in both ends.
    pub fn set_open(&mut self) {
        self.open = true;
        for e in &mut self.ends {
            e.open = true;
        }
    }

    /// Marks the channel closed, in its header and in both ends.
    pub fn close(&mut self) {
        self.closed = true;
        self.open = false;
        for e in &mut self.ends {
            e.closed = true;
            e.open = false;
        }
    }

    /// The side `node` holds on this channel (one of its two nodes).
    #[inline]
    pub fn side_of(&self, node: NodeId) -> Side {
        if self.nodes[0] == node {
            Side::Initiator
        } else {
            Side::Acceptor
        }
    }
}

/// One relay's end of a channel to another relay at one moment
/// ([`crate::TorNetwork::relay_channel_ends`]): who is at each end, its byte counters since
/// the channel opened, and what waits to be written on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayChannelEnd {
    pub chan: u32,
    /// The relay at this end.
    pub relay: NodeId,
    /// The relay at the other end.
    pub peer: NodeId,
    /// This relay opened the channel.
    pub initiator: bool,
    /// Handshakes done (cells may flow).
    pub open: bool,
    /// Bytes read from / written to the kernel at this end since the channel opened.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Circuits (not closed) over the channel (tor's `n_circuits`).
    pub circuits: u32,
    /// Circuits with cells waiting in a queue that feeds this end: those the circuit
    /// scheduler chooses among.
    pub active_circuits: u32,
    /// Cells in those queues plus this end's outbuf (not yet given to the kernel).
    pub queued_cells: u64,
}
