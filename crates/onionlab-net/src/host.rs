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
    /// Unique name; also names the host's random stream. Shared with whoever else names
    /// the host (the Tor node, result rows): `"relay1".into()` makes one.
    pub name: onionlab_core::Name,
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

/// A batch travelling to a host's downlink, not yet arrived there. Half a cache line: the
/// arrivals heap sifts through these, so their size sets how many lines a push or pop
/// touches. The send time is not stored: it is `at` less the path's one-way latency and
/// the batch's serialisation on the sender's uplink, both fixed by the flow, so the
/// receiver recomputes it exactly ([`crate::network`]'s `admit`). Congestion marks are
/// only set on arrival.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlight {
    /// When the batch reaches the downlink's queue.
    pub at: SimTime,
    /// Network-wide send counter: batches arriving at the same instant enter in send order.
    pub seq: u64,
    /// Sequence number one past the batch's last byte.
    pub end_seq: u64,
    pub flow: u32,
    pub bytes: u32,
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

/// A host's access links and the queues in front of them. Fields are grouped by cache
/// line in the order a batch touches them (`repr(C)` keeps it): sending reads line 1,
/// arrivals and wakes line 2, the downlink's queue line 3. The location and capacities are
/// copies of `spec`'s, kept where the hot path reads them; `spec` itself (with the name)
/// comes last. At full-network sizes each further line a batch touches is a cache miss.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Host {
    // Line 1: the uplink.
    /// The uplink is serialising a batch until this time.
    pub up_busy_until: SimTime,
    /// Flows with something to send on the uplink, served in round robin.
    pub up_ring: VecDeque<u32>,
    /// Bytes the uplink has carried.
    pub up_bytes_total: u64,
    /// `spec.up_bits_per_sec`.
    pub up_bits_per_sec: u64,
    /// `spec.location`.
    pub location: u32,
    /// An `UplinkFree` event is scheduled.
    pub up_wake_pending: bool,
    // Line 2: batches on their way in, and the downlink's timing.
    /// Batches on their way to this host's downlink, earliest arrival first.
    pub arrivals: BinaryHeap<InFlight>,
    /// The earliest `DownlinkWake` scheduled for this host and not yet handled.
    pub down_wake_at: Option<SimTime>,
    /// When the batch on the downlink (`down_current`) finishes.
    pub down_done_at: SimTime,
    /// `spec.down_bits_per_sec`.
    pub down_bits_per_sec: u64,
    /// Flows with bytes queued at the downlink (for the fair-share marking rule).
    pub down_active_flows: u32,
    // Line 3: the downlink.
    /// The batch on the downlink, if any.
    pub down_current: Option<Batch>,
    /// Flows with batches queued at the downlink, served by deficit round robin.
    pub down_ring: VecDeque<u32>,
    // Line 4: the downlink's queue and counters, and the spec.
    /// Bytes waiting in front of the downlink (the bottleneck queue of this host).
    pub down_queued: u64,
    /// Queue length above which arriving batches are marked; see `TransportConfig`.
    pub queue_limit: u64,
    /// Bytes the downlink has carried.
    pub down_bytes_total: u64,
    pub spec: HostSpec,
}

impl Host {
    pub fn new(spec: HostSpec, queue_limit: u64) -> Self {
        Host {
            up_busy_until: SimTime::ZERO,
            up_ring: VecDeque::new(),
            up_bytes_total: 0,
            up_bits_per_sec: spec.up_bits_per_sec,
            location: spec.location,
            up_wake_pending: false,
            arrivals: BinaryHeap::new(),
            down_wake_at: None,
            down_done_at: SimTime::ZERO,
            down_bits_per_sec: spec.down_bits_per_sec,
            down_active_flows: 0,
            down_current: None,
            down_ring: VecDeque::new(),
            down_queued: 0,
            queue_limit,
            down_bytes_total: 0,
            spec,
        }
    }

    /// The downlink is carrying a batch.
    #[inline]
    pub fn down_busy(&self) -> bool {
        self.down_current.is_some()
    }
}

/// Hosts keep each link's hot fields in one cache line (see `docs/performance.md`).
#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn link_fields_share_their_cache_lines() {
        let line = |offset: usize, size: usize| (offset / 64, (offset + size - 1) / 64);
        assert_eq!(line(offset_of!(Host, up_busy_until), 8), (0, 0));
        assert_eq!(line(offset_of!(Host, up_wake_pending), 1), (0, 0));
        assert_eq!(line(offset_of!(Host, arrivals), size_of::<BinaryHeap<InFlight>>()), (1, 1));
        assert_eq!(size_of::<InFlight>(), 32, "two in-flight batches per cache line");
        assert_eq!(line(offset_of!(Host, down_active_flows), 4), (1, 1));
        assert_eq!(line(offset_of!(Host, down_current), size_of::<Option<Batch>>()), (2, 2));
        assert_eq!(line(offset_of!(Host, down_ring), size_of::<VecDeque<u32>>()), (2, 2));
    }
}
