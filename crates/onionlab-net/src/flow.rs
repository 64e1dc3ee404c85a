//! One direction of a connection: TCP-like sender and receiver state.
//!
//! **Owns:** sequence counters (written, sent, acked, arrived, delivered, read), the send
//! and receive buffers' bounds, the congestion window (slow start, congestion avoidance,
//! multiplicative decrease on a congestion mark) and the receive window as the sender last
//! heard it. **Must not touch:** links, events or timing; [`crate::Network`] drives it.
//!
//! Byte accounting, all as sequence numbers starting at 0:
//! `read <= delivered <= arrived <= sent <= written`, and
//! `written - acked <= sndbuf` (unacked and unsent bytes both occupy the send buffer, as in
//! Linux), `delivered - read <= rcvbuf`.

use onionlab_core::little::Tally;
use onionlab_core::{HeadDeque, SimDuration, SimTime};

use crate::host::{Batch, HostId};

/// TCP parameters shared by all connections of a network.
///
/// Defaults follow Linux (the kernel under tor relays): initial window 10 segments
/// (RFC 6928), MSS 1448 B (1500 B MTU minus IP/TCP headers with timestamps), send buffer
/// 4 MiB and receive buffer 6 MiB (the maxima of `net.ipv4.tcp_wmem`/`tcp_rmem`, which
/// autotuning reaches on busy connections).
#[derive(Clone, Debug, PartialEq)]
pub struct TransportConfig {
    /// Largest batch of bytes moved as one unit (one event per hop). Bytes.
    pub max_batch_bytes: u32,
    /// Maximum segment size, the unit of congestion-window arithmetic. Bytes.
    pub mss: u32,
    /// Initial congestion window, in segments.
    pub initial_cwnd_segments: u32,
    /// Kernel send buffer per connection and direction (unsent + unacknowledged). Bytes.
    pub sndbuf_bytes: u64,
    /// Kernel receive buffer per connection and direction (delivered, not yet read). Bytes.
    pub rcvbuf_bytes: u64,
    /// Bytes queued in front of a host's downlink above which arriving batches of the
    /// flows holding more than their share of that queue are marked (ECN-style: the data
    /// is kept, the sender halves its window).
    pub queue_limit_bytes: u64,
    /// Keep a log of every batch each link carries (for tests and debugging; off by default).
    pub record_link_log: bool,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            max_batch_bytes: 16 * 1024,
            mss: 1448,
            initial_cwnd_segments: 10,
            sndbuf_bytes: 4 * 1024 * 1024,
            rcvbuf_bytes: 6 * 1024 * 1024,
            queue_limit_bytes: 512 * 1024,
            record_link_log: false,
        }
    }
}

/// Where a connection's bytes in one direction waited, in byte-nanoseconds since tracking
/// began ([`crate::Network::wait_areas`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowWaits {
    /// Written by the application, not yet sent: the sender's kernel send buffer.
    pub kernel_byte_ns: u128,
    /// Sent, not yet delivered: serialisation, propagation, the receiver's downlink.
    pub link_byte_ns: u128,
    /// Delivered, not yet read by the receiving application.
    pub unread_byte_ns: u128,
}

impl std::ops::AddAssign for FlowWaits {
    fn add_assign(&mut self, o: FlowWaits) {
        self.kernel_byte_ns += o.kernel_byte_ns;
        self.link_byte_ns += o.link_byte_ns;
        self.unread_byte_ns += o.unread_byte_ns;
    }
}

/// What KIST and diagnostics can see of a socket, as `TCP_INFO` and `SIOCOUTQNSD` show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketInfo {
    /// Congestion window in bytes.
    pub cwnd_bytes: u64,
    pub mss: u32,
    /// Bytes sent and not yet acknowledged.
    pub unacked: u64,
    /// Bytes in the send buffer not yet sent.
    pub unsent: u64,
    /// Free space in the send buffer.
    pub sndbuf_free: u64,
    /// Smoothed RTT, if a sample exists.
    pub srtt: Option<SimDuration>,
    /// Smallest RTT seen, if any.
    pub min_rtt: Option<SimDuration>,
}

/// Boundaries of a flow's wait ledger (`Flow::wait_ledger`).
pub const WRITTEN: usize = 0;
pub const SENT: usize = 1;
pub const DELIVERED: usize = 2;
pub const READ: usize = 3;

/// An acknowledgement on its way back to the sender, applied when it is due (see
/// [`crate::network`]'s lazy acknowledgements).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingAck {
    /// When the acknowledgement reaches the sender.
    pub due: SimTime,
    pub upto: u64,
    pub unread: u64,
    pub ce: bool,
    pub sent_at: SimTime,
}

/// One direction of a connection. Fields are grouped by cache line in the order the
/// transport touches them (`repr(C)` keeps it): a batch's arrival and its start on the
/// downlink read lines 1 and 2, its completion lines 1 to 3, sending lines 1, 3 and 4. At
/// full-network sizes each further line a batch touches is a cache miss.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Flow {
    // Line 1: endpoints, flags, and the sequence numbers both sides read.
    pub src: HostId,
    pub dst: HostId,
    pub established: bool,
    /// The window, not the application or the receiver, last limited sending.
    pub cwnd_limited: bool,
    /// The application wrote less than it asked to; tell it when space frees.
    pub want_writable: bool,
    pub in_up_ring: bool,
    pub in_down_ring: bool,
    /// The application closed the connection ([`Network::close`](crate::Network::close)):
    /// no notices, arriving data is discarded.
    pub closed: bool,
    pub written: u64,
    pub arrived: u64,
    pub delivered: u64,
    pub read: u64,
    /// Receive-buffer free space as last advertised to the sender.
    pub advertised_free: u64,
    /// Deficit-round-robin credit at the receiver's downlink, in bytes.
    pub down_deficit: u64,
    // Line 2: the receiver's downlink queue.
    /// Batches that arrived at the receiver's downlink and wait for it, in order.
    pub down_queue: HeadDeque<Batch>,
    // Line 3: acknowledgements on their way back.
    /// Acknowledgements travelling back to the sender, in order of `due` (a flow's
    /// batches are delivered in order and its return latency is fixed).
    pub pending_acks: HeadDeque<PendingAck>,
    // Line 4: the sender's windows.
    pub sent: u64,
    pub acked: u64,
    pub cwnd: u64,
    /// Receiver's unread bytes as last reported by an ACK or window update.
    pub peer_unread: u64,
    /// Largest in-flight amount since the window last grew (Linux's cwnd-limited test).
    pub max_inflight: u64,
    /// The earliest `AckDue` event scheduled for this flow and not yet handled.
    pub ack_event_at: Option<SimTime>,
    // Line 5: what acknowledgements update.
    pub ssthresh: u64,
    /// No second window cut until this sequence number is acknowledged (one cut per RTT).
    pub recover_until: u64,
    pub srtt: Option<SimDuration>,
    pub min_rtt: Option<SimDuration>,
    // Statistics.
    pub window_cuts: u64,
    /// Bytes written, sent, delivered and read ([`WRITTEN`], [`SENT`], [`DELIVERED`],
    /// [`READ`]), with the sums of their times ([`onionlab_core::little`]): how long bytes
    /// wait in the sender's kernel, on the link and unread at the receiver. Only on
    /// connections asked for ([`crate::Network::track_waits`]); boxed, so an untracked flow
    /// pays a pointer.
    pub wait_ledger: Option<Box<[Tally; 4]>>,
}

impl Flow {
    pub fn new(src: HostId, dst: HostId, cfg: &TransportConfig) -> Self {
        Flow {
            src,
            dst,
            established: false,
            written: 0,
            sent: 0,
            acked: 0,
            cwnd: cfg.initial_cwnd_segments as u64 * cfg.mss as u64,
            ssthresh: u64::MAX,
            peer_unread: 0,
            recover_until: 0,
            max_inflight: 0,
            cwnd_limited: false,
            want_writable: false,
            in_up_ring: false,
            closed: false,
            srtt: None,
            min_rtt: None,
            arrived: 0,
            delivered: 0,
            read: 0,
            advertised_free: cfg.rcvbuf_bytes,
            down_queue: HeadDeque::new(),
            in_down_ring: false,
            down_deficit: 0,
            pending_acks: HeadDeque::new(),
            ack_event_at: None,
            window_cuts: 0,
            wait_ledger: None,
        }
    }

    #[inline]
    pub fn inflight(&self) -> u64 {
        self.sent - self.acked
    }

    /// Nothing of this flow is on its way or waits for an event at or after `now`: every
    /// byte written was sent and delivered, no acknowledgement is due later and no
    /// [`AckDue`](crate::NetEvent::AckDue) is pending. Such a flow can be dropped whole.
    pub fn is_quiescent(&self, now: SimTime) -> bool {
        self.established
            && self.written == self.sent
            && self.sent == self.delivered
            && !self.in_up_ring
            && !self.in_down_ring
            && self.pending_acks.back().is_none_or(|a| a.due < now)
            && self.ack_event_at.is_none_or(|t| t < now)
    }

    #[inline]
    pub fn unsent(&self) -> u64 {
        self.written - self.sent
    }

    #[inline]
    pub fn sndbuf_free(&self, cfg: &TransportConfig) -> u64 {
        cfg.sndbuf_bytes.saturating_sub(self.written - self.acked)
    }

    /// Bytes the sender may put on the wire now: bounded by unsent data, the congestion
    /// window and the receive window, and by one batch. Records which bound bit.
    pub fn sendable(&mut self, cfg: &TransportConfig) -> u64 {
        if !self.established {
            return 0;
        }
        let by_cwnd = self.cwnd.saturating_sub(self.inflight());
        let by_rwnd = cfg.rcvbuf_bytes.saturating_sub(self.peer_unread + self.inflight());
        let unsent = self.unsent();
        // Limited when this send fills the window (Linux, after tcp_write_xmit's loop:
        // `is_cwnd_limited |= packets_in_flight >= snd_cwnd`), so an exact fit counts too.
        if unsent > 0 && by_cwnd <= by_rwnd && by_cwnd <= unsent.min(cfg.max_batch_bytes as u64) {
            self.cwnd_limited = true;
        }
        unsent.min(by_cwnd).min(by_rwnd).min(cfg.max_batch_bytes as u64)
    }

    /// Updates sender state for an acknowledgement of everything below `upto`.
    pub fn on_ack(&mut self, now: SimTime, upto: u64, unread: u64, ce: bool, sent_at: SimTime, cfg: &TransportConfig) {
        debug_assert!(upto <= self.sent && upto >= self.acked);
        let newly = upto - self.acked;
        self.acked = upto;
        self.peer_unread = unread;
        let sample = now.saturating_since(sent_at);
        self.min_rtt = Some(self.min_rtt.map_or(sample, |m| m.min(sample)));
        // RFC 6298 smoothing, alpha = 1/8.
        self.srtt = Some(match self.srtt {
            None => sample,
            Some(s) => SimDuration::from_nanos((s.as_nanos() * 7 + sample.as_nanos()) / 8),
        });
        let mss = cfg.mss as u64;
        if ce && upto > self.recover_until {
            // Multiplicative decrease, once per window of data (RFC 3168 / RFC 5681).
            self.ssthresh = (self.cwnd / 2).max(2 * mss);
            self.cwnd = self.ssthresh;
            self.recover_until = self.sent;
            self.window_cuts += 1;
            self.max_inflight = 0;
            self.cwnd_limited = false;
            return;
        }
        // Grow only when the window limited sending (RFC 7661; Linux's
        // tcp_is_cwnd_limited): an application-limited flow must not inflate its window.
        let in_slow_start = self.cwnd < self.ssthresh;
        let limited = if in_slow_start { self.cwnd < 2 * self.max_inflight } else { self.cwnd_limited };
        if limited && newly > 0 {
            if in_slow_start {
                self.cwnd += newly.min(self.ssthresh - self.cwnd).max(1);
            } else {
                // Congestion avoidance: about one MSS per window of acknowledged data.
                self.cwnd += (mss * newly / self.cwnd).max(1);
            }
            self.cwnd_limited = false;
            self.max_inflight = self.inflight();
        }
    }

    pub fn note_sent(&mut self, bytes: u64) {
        self.sent += bytes;
        self.max_inflight = self.max_inflight.max(self.inflight());
    }

    pub fn socket_info(&self, cfg: &TransportConfig) -> SocketInfo {
        SocketInfo {
            cwnd_bytes: self.cwnd,
            mss: cfg.mss,
            unacked: self.inflight(),
            unsent: self.unsent(),
            sndbuf_free: self.sndbuf_free(cfg),
            srtt: self.srtt,
            min_rtt: self.min_rtt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> (Flow, TransportConfig) {
        let cfg = TransportConfig::default();
        let mut f = Flow::new(HostId(0), HostId(1), &cfg);
        f.established = true;
        (f, cfg)
    }

    #[test]
    fn slow_start_doubles_per_window_when_window_limited() {
        let (mut f, cfg) = flow();
        f.written = 10_000_000;
        let w0 = f.cwnd;
        let b = f.sendable(&cfg);
        assert_eq!(b, w0, "initial window is sent at once");
        f.note_sent(b);
        assert_eq!(f.sendable(&cfg), 0);
        f.on_ack(SimTime::from_nanos(100), b, 0, false, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, 2 * w0);
    }

    #[test]
    fn application_limited_flow_does_not_grow() {
        let (mut f, cfg) = flow();
        f.written = 1000;
        let b = f.sendable(&cfg);
        f.note_sent(b);
        let w0 = f.cwnd;
        f.on_ack(SimTime::from_nanos(100), b, 0, false, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, w0);
    }

    /// Data that fills the congestion window exactly leaves it full: the window limited
    /// sending, and congestion avoidance grows it (Linux marks a flow cwnd-limited when
    /// packets in flight reach cwnd after a send).
    #[test]
    fn data_that_fills_the_window_exactly_makes_it_grow() {
        let mss = TransportConfig::default().mss as u64;
        for (written, grows) in [(10 * mss, true), (10 * mss - 1, false)] {
            let (mut f, cfg) = flow();
            f.cwnd = 10 * mss;
            f.ssthresh = 2 * mss; // congestion avoidance
            f.written = written;
            let n = send_all(&mut f, &cfg);
            assert_eq!(n, written);
            f.on_ack(SimTime::from_nanos(100), n, 0, false, SimTime::ZERO, &cfg);
            assert_eq!(f.cwnd > 10 * mss, grows, "{written} B written into a {} B window", 10 * mss);
        }
    }

    #[test]
    fn congestion_mark_halves_once_per_window() {
        let (mut f, cfg) = flow();
        f.written = 10_000_000;
        f.cwnd = 100 * cfg.mss as u64;
        let a = f.sendable(&cfg);
        f.note_sent(a);
        let b = f.sendable(&cfg);
        f.note_sent(b);
        f.on_ack(SimTime::from_nanos(10), a, 0, true, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, 50 * cfg.mss as u64);
        // A second mark from the same window of data does not cut again.
        f.on_ack(SimTime::from_nanos(11), a + b, 0, true, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, 50 * cfg.mss as u64);
        assert_eq!(f.window_cuts, 1);
    }

    #[test]
    fn receive_window_bounds_sending() {
        let (mut f, cfg) = flow();
        f.written = 100_000_000;
        f.cwnd = u64::MAX / 4;
        f.peer_unread = cfg.rcvbuf_bytes - 100;
        assert_eq!(f.sendable(&cfg), 100);
    }

    /// Sends until the windows or the data run out, as the uplink would.
    fn send_all(f: &mut Flow, cfg: &TransportConfig) -> u64 {
        let start = f.sent;
        loop {
            let n = f.sendable(cfg);
            if n == 0 {
                return f.sent - start;
            }
            f.note_sent(n);
        }
    }

    #[test]
    fn rtt_estimates_smooth_by_an_eighth_and_keep_the_minimum() {
        let (mut f, cfg) = flow();
        f.written = 2000;
        f.note_sent(2000);
        f.on_ack(SimTime::from_nanos(800), 1000, 0, false, SimTime::ZERO, &cfg);
        f.on_ack(SimTime::from_nanos(1000), 2000, 0, false, SimTime::from_nanos(960), &cfg);
        // Samples 800 and 40 ns: srtt = (7 x 800 + 40) / 8.
        assert_eq!(f.srtt, Some(SimDuration::from_nanos(705)));
        assert_eq!(f.min_rtt, Some(SimDuration::from_nanos(40)));
    }

    #[test]
    fn a_cut_never_takes_the_window_below_two_segments() {
        let (mut f, cfg) = flow();
        let mss = cfg.mss as u64;
        f.written = 10_000_000;
        f.cwnd = 3 * mss;
        let n = send_all(&mut f, &cfg);
        f.on_ack(SimTime::from_nanos(10), n, 0, true, SimTime::ZERO, &cfg);
        assert_eq!((f.cwnd, f.ssthresh), (2 * mss, 2 * mss));
    }

    /// Linux's slow-start test (`tcp_is_cwnd_limited`): the window grows only if at least
    /// half of it was in flight.
    #[test]
    fn slow_start_grows_only_when_half_the_window_was_used() {
        for (used, grows) in [(6000, false), (7300, true)] {
            let (mut f, cfg) = flow();
            let w0 = f.cwnd;
            f.written = used;
            let n = send_all(&mut f, &cfg);
            f.on_ack(SimTime::from_nanos(100), n, 0, false, SimTime::ZERO, &cfg);
            assert_eq!(f.cwnd > w0, grows, "{used} B in flight of a {w0} B window");
        }
    }

    #[test]
    fn slow_start_stops_at_ssthresh() {
        let (mut f, cfg) = flow();
        f.written = 10_000_000;
        f.ssthresh = f.cwnd + 1000;
        let n = send_all(&mut f, &cfg);
        f.on_ack(SimTime::from_nanos(100), n, 0, false, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, f.ssthresh);
    }

    /// After a cut the window is at ssthresh, in congestion avoidance: one MSS per window
    /// of acknowledged data, and no growth for a window the application did not fill.
    #[test]
    fn congestion_avoidance_adds_one_segment_per_full_window() {
        let (mut f, cfg) = flow();
        let mss = cfg.mss as u64;
        f.written = 10_000_000;
        f.cwnd = 100 * mss;
        let n = send_all(&mut f, &cfg);
        f.on_ack(SimTime::from_nanos(10), n, 0, true, SimTime::ZERO, &cfg);
        assert_eq!((f.cwnd, f.ssthresh), (50 * mss, 50 * mss));
        let n = send_all(&mut f, &cfg);
        assert_eq!(n, 50 * mss);
        f.on_ack(SimTime::from_nanos(20), f.sent, 0, false, SimTime::from_nanos(10), &cfg);
        assert_eq!(f.cwnd, 51 * mss);
        // Application-limited: a thousand bytes, far below the window.
        f.written = f.sent + 1000;
        assert_eq!(send_all(&mut f, &cfg), 1000);
        f.on_ack(SimTime::from_nanos(30), f.sent, 0, false, SimTime::from_nanos(20), &cfg);
        assert_eq!(f.cwnd, 51 * mss);
    }

    /// Lazy acknowledgements are applied back to back, with no send in between: each
    /// still grows the window as it would have with the sender looking in between.
    #[test]
    fn acks_applied_back_to_back_each_grow_the_window_in_slow_start() {
        let cfg = TransportConfig { max_batch_bytes: 1448, ..TransportConfig::default() };
        let mut f = Flow::new(HostId(0), HostId(1), &cfg);
        f.established = true;
        f.written = 10_000_000;
        let w0 = f.cwnd;
        assert_eq!(send_all(&mut f, &cfg), w0, "ten batches of one segment");
        f.on_ack(SimTime::from_nanos(100), 1448, 0, false, SimTime::ZERO, &cfg);
        f.on_ack(SimTime::from_nanos(101), 2 * 1448, 0, false, SimTime::ZERO, &cfg);
        assert_eq!(f.cwnd, w0 + 2 * 1448);
    }
}

/// Flows keep the fields each transport step touches in as few cache lines as they fit
/// (see `docs/performance.md`).
#[cfg(test)]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn flow_fields_share_their_cache_lines() {
        let line = |offset: usize, size: usize| (offset / 64, (offset + size - 1) / 64);
        // Arrival and downlink: line 0 and the downlink queue alone in line 1.
        assert_eq!(line(offset_of!(Flow, src), 4), (0, 0));
        assert_eq!(line(offset_of!(Flow, down_deficit), 8), (0, 0));
        assert_eq!(line(offset_of!(Flow, down_queue), size_of::<HeadDeque<Batch>>()), (1, 1));
        // Sending: the window fields together in line 3.
        assert_eq!(line(offset_of!(Flow, sent), 8), (3, 3));
        assert_eq!(line(offset_of!(Flow, ack_event_at), size_of::<Option<SimTime>>()), (3, 3));
    }
}
