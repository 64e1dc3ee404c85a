//! Hosts and their access links.
//!
//! **Owns:** a host's identity, location, upstream and downstream capacity, and the state of
//! its two access links: which flows wait for the link (a round-robin ring) and which batch
//! is on the wire. **Must not touch:** TCP state (that is [`crate::flow`]) or anything above
//! the transport.
//!
//! A downlink is simulated lazily: batches on their way to a host wait in its `arrivals`
//! heap (ordered by arrival time), and the downlink's round robin is advanced through them
//! whenever a wake event for the host fires, so a batch costs one event (its completion)
//! instead of two (arrival, completion). See [`crate::network`].
//!
//! Capacity is shared fairly by serving the flows that have data for a link in round robin,
//! one batch (at most `max_batch_bytes`) per turn. Every flow that wants the link therefore
//! gets an equal share of it, and a flow that wants less gets all it wants (max-min fairness
//! at batch granularity), which is how Shadow's and most fluid models share an access link.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use onionlab_core::SimTime;

/// Index of a host in its [`crate::Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub u32);

/// What a host is: where it sits and how fast its access link is.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    /// Unique name; also names the host's random stream.
    pub name: String,
    /// Location index in the latency model.
    pub location: u32,
    /// Upstream (sending) capacity in bits per second. Must be positive.
    pub up_bits_per_sec: u64,
    /// Downstream (receiving) capacity in bits per second. Must be positive.
    pub down_bits_per_sec: u64,
}

/// A batch of bytes of one flow, as one unit on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    pub flow: u32,
    /// Sequence number one past the batch's last byte.
    pub end_seq: u64,
    pub bytes: u32,
    /// When the sender put the batch on its uplink (for RTT samples).
    pub sent_at: SimTime,
    /// Congestion experienced: the batch met a full queue or a lossy path.
    pub ce: bool,
}

/// A batch travelling to a host's downlink, not yet arrived there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlight {
    /// When the batch reaches the downlink's queue.
    pub at: SimTime,
    /// Network-wide send counter: batches arriving at the same instant enter in send order.
    pub seq: u64,
    pub batch: Batch,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    // Reversed: `BinaryHeap` is a max-heap and the earliest arrival must be on top.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// One direction of a host's access link.
#[derive(Debug, Default)]
pub(crate) struct Link {
    /// Flows with something to send on this link, served in round robin.
    pub ring: VecDeque<u32>,
    /// The batch on the wire, if any (downlinks; uplinks keep only a busy-until time).
    pub current: Option<Batch>,
    /// Bytes this link has carried.
    pub bytes_total: u64,
}

impl Link {
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }
}

#[derive(Debug)]
pub(crate) struct Host {
    pub spec: HostSpec,
    pub up: Link,
    pub down: Link,
    /// Bytes waiting in front of the downlink (the bottleneck queue of this host).
    pub down_queued: u64,
    /// Queue length above which arriving batches are marked; see `TransportConfig`.
    pub queue_limit: u64,
    /// Flows with bytes queued at the downlink (for the fair-share marking rule).
    pub down_active_flows: u32,
    /// The uplink is serialising a batch until this time.
    pub up_busy_until: SimTime,
    /// An `UplinkFree` event is scheduled.
    pub up_wake_pending: bool,
    /// Batches on their way to this host's downlink, earliest arrival first.
    pub arrivals: BinaryHeap<InFlight>,
    /// When the batch on the downlink (`down.current`) finishes.
    pub down_done_at: SimTime,
    /// The earliest `DownlinkWake` scheduled for this host and not yet handled.
    pub down_wake_at: Option<SimTime>,
}
