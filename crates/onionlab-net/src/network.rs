//! The network: hosts, connections and the events that move bytes between them.
//!
//! **Owns:** the set of hosts and connections, the [`NetEvent`]s that drive them, and the
//! notices ([`NetNotice`]) it gives the application layer. **Must not touch:** what the bytes
//! mean. Layers above (Tor channels) keep their own record of what they wrote, in order,
//! and interpret delivered byte counts against it.
//!
//! ## The model
//! A connection is two [`flow`](crate::flow)s, one per direction. A batch of at most
//! `max_batch_bytes` leaves the sender's send buffer when the sender's uplink is free and the
//! congestion and receive windows allow; it is serialised at the uplink capacity, travels
//! the one-way latency of the [`LatencyModel`], waits in front of the receiver's downlink
//! (per-flow queues served round robin), is serialised at the downlink capacity, enters the
//! receive buffer, and its acknowledgement travels back one latency later. Never an event
//! per packet, and in the common case one event per batch:
//! - **Lazy downlinks.** A sent batch goes into the receiver's `arrivals` heap with its
//!   arrival time. A [`NetEvent::DownlinkWake`] replays the downlink's round robin up to the
//!   current time: it admits the arrivals due by then, in arrival order, and completes the
//!   batches that finish by then; then it makes sure a wake comes at the next instant
//!   something must happen (the end of the batch on the link, or the earliest completion of
//!   the next arrival). Sending a batch asks for a wake at its earliest completion (arrival
//!   plus serialisation) unless an earlier one is pending. Every completion is thus handled
//!   at its exact time, and arrivals before it in order, so the schedule, the congestion
//!   marks and the delivery times are those of an arrival event plus a completion event
//!   per batch; a batch costs about one event, waiting or not.
//! - **Lazy acknowledgements.** An acknowledgement is queued on its flow with the time it
//!   reaches the sender, and applied, in order, before anything reads or changes the
//!   sender's state at or after that time (a write, a send, a socket query). Only a sender
//!   that waits for it (a blocked writer, or unsent data the windows hold back) gets an
//!   [`NetEvent::AckDue`] event, so the window opens and the writer wakes at the same
//!   instant as with an event per acknowledgement.
//! - **Uplinks.** An uplink nobody else waits for gets no event of its own.
//!
//! ## What real TCP does that is not modelled, and why results do not depend on it
//! - **Packets, ACK clocking and delayed ACKs.** Batches are acknowledged whole. With batches
//!   of about 11 segments (16 KiB) the cwnd/RTT bound, slow-start timing and fair sharing
//!   hold to within one batch; the mechanisms studied act on cells and token buckets at the
//!   millisecond-to-second scale, far coarser than a batch time (1.3 ms at 100 Mbit/s).
//! - **Loss and retransmission.** Congestion is signalled by marking (ECN-style) at a full
//!   downlink queue, and a path's packet loss rate becomes a probability of marking a batch;
//!   data is never lost, so there are no retransmission timeouts or head-of-line stalls.
//!   Tor's backlog sits in its own queues and in socket buffers, which are modelled exactly;
//!   loss recovery changes tail latency on lossy links, which none of the papers studies.
//! - **Core-network congestion.** Only access links (each host's up and down capacity) have
//!   finite capacity, as in Shadow; paths between them add latency and loss only.
//! - **ACK bandwidth and header overhead.** ACKs take no capacity; headers are not counted.
//!   Both are a few percent at most and the same for every mechanism compared.
//! - **CUBIC.** Window growth is Reno (one MSS per RTT in congestion avoidance). Tor relays
//!   run CUBIC, which regains bandwidth faster after a cut; the difference matters only after
//!   congestion marks, which keep queues bounded either way.
//! - **Handshake details.** A connection takes one RTT to establish (SYN, SYN-ACK); the
//!   first data leaves with the handshake's final ACK. TLS handshakes belong to the layer above.

use crate::flow::{FlowWaits, DELIVERED, READ, SENT, WRITTEN};
use onionlab_core::little::Tally;
use onionlab_core::{rng::SimRng, Counters, EventClass, EventQueue, RngStreams, SimTime};
use rand::Rng;

use crate::flow::{Flow, PendingAck, SocketInfo, TransportConfig};
use crate::host::{Batch, Host, HostId, HostSpec, InFlight};
use crate::latency::LatencyModel;

/// Index of a connection in its [`Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// An endpoint of a connection: `Initiator` called [`Network::connect`], `Acceptor` was
/// connected to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    Initiator,
    Acceptor,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Initiator => Side::Acceptor,
            Side::Acceptor => Side::Initiator,
        }
    }
}

/// The event class of every network event (the engine orders classes at equal times).
pub const NET_EVENT_CLASS: EventClass = EventClass(10);

/// Events the network schedules for itself. Opaque to other layers, which wrap them in
/// their own event type (`E: From<NetEvent>`) and hand them back to [`Network::handle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// A connection request reached the acceptor.
    SynArrived { conn: ConnId },
    /// The acceptor's answer reached the initiator.
    SynAckArrived { conn: ConnId },
    /// A host's uplink is free again and flows are waiting for it. (An uplink nobody
    /// waits for gets no event: its batch goes to the receiver's arrivals when it starts.)
    UplinkFree { host: HostId },

    /// The next instant something must happen at a host's downlink: the end of the batch
    /// on it, or the earliest completion of the next batch to arrive.
    DownlinkWake { host: HostId },
    /// The first pending acknowledgement of a flow whose sender waits for it is due.
    AckDue { flow: u32 },
    /// A receive-window update reached the sender.
    WindowUpdate { flow: u32, unread: u64 },
}

/// What the network tells the application layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetNotice {
    /// The connection is established at this endpoint; it may send.
    Connected { conn: ConnId, side: Side },
    /// New bytes are in this endpoint's receive buffer.
    Readable { conn: ConnId, side: Side },
    /// This endpoint's send buffer, which was full at its last write, has room again.
    Writable { conn: ConnId, side: Side },
}

impl NetNotice {
    /// The connection and the endpoint the notice is for.
    pub fn endpoint(&self) -> (ConnId, Side) {
        match *self {
            NetNotice::Connected { conn, side } | NetNotice::Readable { conn, side } | NetNotice::Writable { conn, side } => (conn, side),
        }
    }
}

/// A batch one link carried, when `record_link_log` is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkRecord {
    pub host: HostId,
    /// `true` for the uplink, `false` for the downlink.
    pub up: bool,
    pub start: SimTime,
    pub end: SimTime,
    pub bytes: u32,
}

/// Why a host or connection could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("host {name:?}: {field} must be positive (got 0 bit/s)")]
    ZeroCapacity { name: String, field: &'static str },
    #[error("host {name:?}: location {location} is not in the latency model ({hint})")]
    BadLocation { name: String, location: u32, hint: String },
    #[error("host name {name:?} is used twice")]
    DuplicateHost { name: String },
    #[error("unknown host id {0}")]
    UnknownHost(u32),
    #[error("cannot connect host {0} to itself")]
    SelfConnection(u32),
}

/// Counters the network keeps (names as reported in run summaries).
struct NetCounters {
    batches: onionlab_core::counters::CounterId,
    bytes_delivered: onionlab_core::counters::CounterId,
    marks_queue: onionlab_core::counters::CounterId,
    marks_loss: onionlab_core::counters::CounterId,
    out_of_order: onionlab_core::counters::CounterId,
    opened: onionlab_core::counters::CounterId,
    closed: onionlab_core::counters::CounterId,
}

/// Hosts, connections and their transport state.
pub struct Network {
    cfg: TransportConfig,
    latency: LatencyModel,
    hosts: Vec<Host>,
    /// Host names, for the duplicate check (a set lookup; a scan would make adding n hosts
    /// quadratic, and full-scale networks have millions of clients).
    host_names: std::collections::HashSet<onionlab_core::Name>,
    /// Per-host random streams, drawn from only when a path has packet loss; created on
    /// first use (a stream is ~300 bytes, and full-scale networks have millions of hosts).
    /// Streams derive from (seed, "net-host", name), so creation order does not matter.
    host_rng: Vec<Option<SimRng>>,
    flows: Vec<Flow>,
    /// Some connection's waits are tracked ([`Network::track_waits`]). Checked before a
    /// flow's ledger, whose field sits in a line of the flow nothing else on the hot path
    /// reads: untracked runs pay a predictable branch, not a cache line.
    waits_tracked: bool,
    /// Connections the application closed, in closing order, each with the earliest time
    /// its slot may be reused; reused by [`connect`](Self::connect) once quiescent.
    closing: std::collections::VecDeque<(ConnId, SimTime)>,
    notices: Vec<NetNotice>,
    link_log: Vec<LinkRecord>,
    streams: RngStreams,
    counters: Counters,
    ids: NetCounters,
    /// Batches sent so far: orders arrivals at the same instant.
    batch_seq: u64,
}

#[inline]
fn flow_id(conn: ConnId, sender: Side) -> u32 {
    conn.0 * 2 + (sender == Side::Acceptor) as u32
}

#[inline]
fn conn_of(flow: u32) -> (ConnId, Side) {
    (ConnId(flow / 2), if flow.is_multiple_of(2) { Side::Initiator } else { Side::Acceptor })
}

impl Network {
    pub fn new(cfg: TransportConfig, latency: LatencyModel, seed: u64) -> Self {
        let mut counters = Counters::new();
        let ids = NetCounters {
            batches: counters.register("net.batches"),
            bytes_delivered: counters.register("net.bytes_delivered"),
            marks_queue: counters.register("net.congestion_marks_queue"),
            marks_loss: counters.register("net.congestion_marks_loss"),
            out_of_order: counters.register("net.out_of_order_deliveries"),
            opened: counters.register("net.connections_opened"),
            closed: counters.register("net.connections_closed"),
        };
        Network {
            cfg,
            latency,
            hosts: Vec::new(),
            host_names: Default::default(),
            host_rng: Vec::new(),
            flows: Vec::new(),
            waits_tracked: false,
            closing: Default::default(),
            notices: Vec::new(),
            link_log: Vec::new(),
            streams: RngStreams::new(seed),
            counters,
            ids,
            batch_seq: 0,
        }
    }

    pub fn config(&self) -> &TransportConfig {
        &self.cfg
    }

    pub fn latency_model(&self) -> &LatencyModel {
        &self.latency
    }

    /// Adds a host. Names must be unique; capacities positive; the location must exist.
    /// Reserves room for `additional` more hosts (avoids repeated growth when building
    /// networks with millions of hosts).
    pub fn reserve_hosts(&mut self, additional: usize) {
        self.hosts.reserve_exact(additional);
        self.host_rng.reserve_exact(additional);
        self.host_names.reserve(additional);
    }

    pub fn add_host(&mut self, spec: HostSpec) -> Result<HostId, NetError> {
        if spec.up_bits_per_sec == 0 {
            return Err(NetError::ZeroCapacity { name: spec.name.to_string(), field: "up_bits_per_sec" });
        }
        if spec.down_bits_per_sec == 0 {
            return Err(NetError::ZeroCapacity { name: spec.name.to_string(), field: "down_bits_per_sec" });
        }
        if let Err(e) = self.latency.validate_location(spec.location) {
            return Err(NetError::BadLocation { name: spec.name.to_string(), location: spec.location, hint: e.to_string() });
        }
        if !self.host_names.insert(spec.name.clone()) {
            return Err(NetError::DuplicateHost { name: spec.name.to_string() });
        }
        let id = HostId(self.hosts.len() as u32);
        self.host_rng.push(None);
        self.hosts.push(Host::new(spec, self.cfg.queue_limit_bytes));
        Ok(id)
    }

    pub fn host_spec(&self, h: HostId) -> &HostSpec {
        &self.hosts[h.0 as usize].spec
    }

    pub fn num_hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Connection slots: open connections and closed ones not yet reused.
    pub fn num_connections(&self) -> usize {
        self.flows.len() / 2
    }

    /// One-way latency from host `a` to host `b`.
    pub fn one_way(&self, a: HostId, b: HostId) -> onionlab_core::SimDuration {
        self.latency.one_way(self.hosts[a.0 as usize].location, self.hosts[b.0 as usize].location)
    }

    /// Opens a connection from `from` to `to`. Both ends get [`NetNotice::Connected`] once
    /// the handshake reaches them (acceptor after one latency, initiator after one RTT).
    /// Bytes written before then wait in the send buffer.
    ///
    /// The id may be that of a connection closed earlier: the oldest closed one, once its
    /// last byte, acknowledgement and event have passed. So the number of slots follows
    /// the number of open connections, not of all connections ever opened.
    pub fn connect<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, from: HostId, to: HostId) -> Result<ConnId, NetError> {
        for h in [from, to] {
            if h.0 as usize >= self.hosts.len() {
                return Err(NetError::UnknownHost(h.0));
            }
        }
        if from == to {
            return Err(NetError::SelfConnection(from.0));
        }
        let now = q.now();
        let reusable = self.closing.front().is_some_and(|&(c, not_before)| {
            now >= not_before
                && self.flows[flow_id(c, Side::Initiator) as usize].is_quiescent(now)
                && self.flows[flow_id(c, Side::Acceptor) as usize].is_quiescent(now)
        });
        let conn = if reusable {
            let (conn, _) = self.closing.pop_front().expect("checked");
            self.flows[flow_id(conn, Side::Initiator) as usize] = Flow::new(from, to, &self.cfg);
            self.flows[flow_id(conn, Side::Acceptor) as usize] = Flow::new(to, from, &self.cfg);
            conn
        } else {
            let conn = ConnId(self.num_connections() as u32);
            self.flows.push(Flow::new(from, to, &self.cfg));
            self.flows.push(Flow::new(to, from, &self.cfg));
            conn
        };
        self.counters.incr(self.ids.opened);
        q.schedule_in(self.one_way(from, to), NET_EVENT_CLASS, NetEvent::SynArrived { conn }.into());
        Ok(conn)
    }

    /// Closes `conn` at both ends at once, abortively (as a reset): bytes written and not
    /// yet sent are dropped, bytes in flight are discarded where they arrive, and neither
    /// end gets another notice. The caller must not use `conn` again: its id is reused by
    /// a later [`connect`](Self::connect) once nothing of it remains in flight and its
    /// last acknowledgement and window update are past (at least one latency from now,
    /// whichever way is longer).
    pub fn close(&mut self, now: SimTime, conn: ConnId) {
        let (a, b) = (flow_id(conn, Side::Initiator), flow_id(conn, Side::Acceptor));
        if self.flows[a as usize].closed {
            return;
        }
        for fid in [a, b] {
            let f = &mut self.flows[fid as usize];
            if self.waits_tracked {
                if let Some(l) = f.wait_ledger.as_mut() {
                    // Dropped bytes leave the kernel now (passing the link and the receive
                    // buffer in no time), unread ones the receive buffer: without this
                    // they would wait there for ever in `wait_areas`.
                    let (unsent, unread) = (f.written - f.sent, f.delivered - f.read);
                    l[SENT].cross(now, unsent);
                    l[DELIVERED].cross(now, unsent);
                    l[READ].cross(now, unsent + unread);
                }
            }
            f.closed = true;
            f.want_writable = false;
            f.written = f.sent;
            f.read = f.delivered;
            f.advertised_free = self.cfg.rcvbuf_bytes;
        }
        self.notices.retain(|n| n.endpoint().0 != conn);
        let (ha, hb) = (self.flows[a as usize].src, self.flows[b as usize].src);
        // A window update sent before the close arrives within one latency.
        let not_before = now + self.one_way(ha, hb).max(self.one_way(hb, ha)) + onionlab_core::SimDuration::from_nanos(1);
        self.closing.push_back((conn, not_before));
        self.counters.incr(self.ids.closed);
    }

    /// The host at `side` of `conn`.
    pub fn endpoint(&self, conn: ConnId, side: Side) -> HostId {
        self.flows[flow_id(conn, side) as usize].src
    }

    /// Appends up to `bytes` to the send buffer of `side` of `conn`; returns how many fit.
    /// If fewer than asked fit, a [`NetNotice::Writable`] follows when room frees up.
    pub fn write<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, conn: ConnId, side: Side, bytes: u64) -> u64 {
        let fid = flow_id(conn, side);
        self.apply_due_acks(q.now(), fid);
        let f = &mut self.flows[fid as usize];
        let n = bytes.min(f.sndbuf_free(&self.cfg));
        f.written += n;
        if self.waits_tracked {
            if let Some(l) = f.wait_ledger.as_mut() {
                l[WRITTEN].cross(q.now(), n);
            }
        }
        if n < bytes {
            f.want_writable = true;
        }
        if n > 0 {
            self.make_ready(q, fid);
        }
        self.want_acks(q, fid);
        n
    }

    /// Free space in the send buffer of `side` of `conn` at time `now` (the current time).
    pub fn writable_bytes(&mut self, now: SimTime, conn: ConnId, side: Side) -> u64 {
        let fid = flow_id(conn, side);
        self.apply_due_acks(now, fid);
        self.flows[fid as usize].sndbuf_free(&self.cfg)
    }

    /// Applies the acknowledgements of the sending socket of `side` of `conn` due by `now`
    /// (the current time), so that [`socket_info`](Self::socket_info) shows it as the
    /// kernel would.
    pub fn sync_socket(&mut self, now: SimTime, conn: ConnId, side: Side) {
        self.apply_due_acks(now, flow_id(conn, side));
    }

    /// Keeps, from now on, how long the bytes of `conn` (both directions) wait in the
    /// sender's kernel, on the link and unread at the receiver ([`Network::wait_areas`]).
    pub fn track_waits(&mut self, now: SimTime, conn: ConnId) {
        self.waits_tracked = true;
        for side in [Side::Initiator, Side::Acceptor] {
            let f = &mut self.flows[flow_id(conn, side) as usize];
            // Bytes already on their way count from now, each in the place it is in.
            let mut l = [Tally::default(); 4];
            l[WRITTEN].cross(now, f.written - f.read);
            l[SENT].cross(now, f.sent - f.read);
            l[DELIVERED].cross(now, f.delivered - f.read);
            f.wait_ledger = Some(Box::new(l));
        }
    }

    /// For the bytes `side` of `conn` wrote since [`Network::track_waits`]: the byte-
    /// nanoseconds they spent up to `now` (the current time) in the sender's kernel (written,
    /// not yet sent), on the link (sent, not yet delivered: serialisation, propagation, the
    /// receiver's downlink) and unread in the receiver's buffer; `None` if not tracked.
    /// Bytes a [`close`](Self::close) drops stop waiting at the close, as do bytes it
    /// leaves unread; bytes still on the wire wait on the link until they arrive.
    pub fn wait_areas(&self, conn: ConnId, side: Side, now: SimTime) -> Option<FlowWaits> {
        let l = self.flows[flow_id(conn, side) as usize].wait_ledger.as_ref()?;
        let area = |a: usize, b: usize| onionlab_core::little::area(l[a], l[b], now).1;
        Some(FlowWaits { kernel_byte_ns: area(WRITTEN, SENT), link_byte_ns: area(SENT, DELIVERED), unread_byte_ns: area(DELIVERED, READ) })
    }

    /// Bytes waiting in the receive buffer of `side` of `conn`.
    pub fn readable_bytes(&self, conn: ConnId, side: Side) -> u64 {
        let f = &self.flows[flow_id(conn, side.other()) as usize];
        f.delivered - f.read
    }

    /// Consumes up to `max` bytes from the receive buffer of `side` of `conn`.
    // Inlined into the relays' read and write passes: when fat LTO left it out of line
    // the Tor bench ran 2.5 % more instructions (cachegrind), results identical.
    #[inline(always)]
    pub fn read<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, conn: ConnId, side: Side, max: u64) -> u64 {
        let fid = flow_id(conn, side.other());
        let rcvbuf = self.cfg.rcvbuf_bytes;
        let f = &mut self.flows[fid as usize];
        let n = max.min(f.delivered - f.read);
        f.read += n;
        if self.waits_tracked {
            if let Some(l) = f.wait_ledger.as_mut() {
                l[READ].cross(q.now(), n);
            }
        }
        // Receiver-side silly-window avoidance: tell the sender only when the window it
        // knows is less than half the buffer and the real one has grown past half.
        let free = rcvbuf - (f.delivered - f.read);
        if n > 0 && f.advertised_free < rcvbuf / 2 && free >= rcvbuf / 2 {
            f.advertised_free = free;
            let unread = f.delivered - f.read;
            let (src, dst) = (f.src, f.dst);
            let d = self.one_way(dst, src);
            q.schedule_in(d, NET_EVENT_CLASS, NetEvent::WindowUpdate { flow: fid, unread }.into());
        }
        n
    }

    /// The sending socket of `side` of `conn` as `TCP_INFO` would show it, as of the last
    /// write, send or [`sync_socket`](Self::sync_socket).
    pub fn socket_info(&self, conn: ConnId, side: Side) -> SocketInfo {
        self.flows[flow_id(conn, side) as usize].socket_info(&self.cfg)
    }

    /// Whether notices wait for [`drain_notices`](Self::drain_notices).
    #[inline]
    pub fn has_notices(&self) -> bool {
        !self.notices.is_empty()
    }

    /// Moves pending notices to `out` (appending), leaving the network's buffer empty.
    pub fn drain_notices(&mut self, out: &mut Vec<NetNotice>) {
        out.append(&mut self.notices);
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn link_log(&self) -> &[LinkRecord] {
        &self.link_log
    }

    /// Bytes a host's uplink (`up = true`) or downlink has carried so far.
    pub fn link_bytes(&self, h: HostId, up: bool) -> u64 {
        let host = &self.hosts[h.0 as usize];
        if up {
            host.up_bytes_total
        } else {
            host.down_bytes_total
        }
    }

    /// Per-direction sequence counters `(written, sent, arrived, delivered, read)` of the
    /// flow sent by `side` of `conn` (for invariant checks and diagnostics).
    pub fn flow_counters(&self, conn: ConnId, side: Side) -> [u64; 5] {
        let f = &self.flows[flow_id(conn, side) as usize];
        [f.written, f.sent, f.arrived, f.delivered, f.read]
    }

    /// Checks the byte-accounting invariants of every flow; returns the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (i, f) in self.flows.iter().enumerate() {
            let ok = f.read <= f.delivered
                && f.delivered <= f.arrived
                && f.arrived <= f.sent
                && f.acked <= f.delivered
                && f.sent <= f.written
                && f.written - f.acked <= self.cfg.sndbuf_bytes
                && f.delivered - f.read <= self.cfg.rcvbuf_bytes
                && f.down_queue.iter().map(|b| b.bytes as u64).sum::<u64>() == f.arrived - f.delivered - self.on_downlink(i as u32)
                && f.pending_acks.iter().all(|a| a.upto <= f.delivered)
                && f.pending_acks.iter().zip(f.pending_acks.iter().skip(1)).all(|(a, b)| a.due <= b.due && a.upto <= b.upto);
            if !ok {
                return Err(format!("flow {i} violates byte accounting: {f:?}"));
            }
        }
        if self.counters.get(self.ids.out_of_order) != 0 {
            return Err("a batch was delivered out of order".into());
        }
        Ok(())
    }

    fn on_downlink(&self, flow: u32) -> u64 {
        let dst = self.flows[flow as usize].dst;
        match self.hosts[dst.0 as usize].down_current {
            Some(b) if b.flow == flow => b.bytes as u64,
            _ => 0,
        }
    }

    /// Handles one network event.
    pub fn handle<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, ev: NetEvent) {
        let now = q.now();
        match ev {
            NetEvent::SynArrived { conn } => {
                let fid = flow_id(conn, Side::Acceptor);
                self.flows[fid as usize].established = true;
                if !self.flows[fid as usize].closed {
                    self.notices.push(NetNotice::Connected { conn, side: Side::Acceptor });
                }
                let f = &self.flows[fid as usize];
                q.schedule_in(self.one_way(f.src, f.dst), NET_EVENT_CLASS, NetEvent::SynAckArrived { conn }.into());
                self.make_ready(q, fid);
            }
            NetEvent::SynAckArrived { conn } => {
                let fid = flow_id(conn, Side::Initiator);
                self.flows[fid as usize].established = true;
                if !self.flows[fid as usize].closed {
                    self.notices.push(NetNotice::Connected { conn, side: Side::Initiator });
                }
                self.make_ready(q, fid);
            }
            NetEvent::UplinkFree { host } => {
                self.hosts[host.0 as usize].up_wake_pending = false;
                self.start_uplink(q, host);
            }
            NetEvent::DownlinkWake { host } => self.advance_downlink(q, host),
            NetEvent::AckDue { flow } => {
                let f = &mut self.flows[flow as usize];
                if f.ack_event_at.is_some_and(|t| t <= now) {
                    f.ack_event_at = None;
                }
                self.apply_due_acks(now, flow);
                self.make_ready(q, flow);
                self.want_acks(q, flow);
            }
            NetEvent::WindowUpdate { flow, unread } => {
                self.apply_due_acks(now, flow);
                let f = &mut self.flows[flow as usize];
                // An update older than a later ACK's report must not shrink what we know.
                f.peer_unread = f.peer_unread.min(unread);
                self.after_window_change(q, flow);
            }
        }
    }

    fn after_window_change<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, fid: u32) {
        self.check_writable(fid);
        self.make_ready(q, fid);
    }

    /// Linux wakes a writer once free space reaches half of what is queued
    /// (sk_stream_wspace >= sk_stream_min_wspace).
    fn check_writable(&mut self, fid: u32) {
        let f = &mut self.flows[fid as usize];
        if f.want_writable {
            let used = f.written - f.acked;
            if f.sndbuf_free(&self.cfg) >= used / 2 && f.sndbuf_free(&self.cfg) > 0 {
                f.want_writable = false;
                let (conn, side) = conn_of(fid);
                self.notices.push(NetNotice::Writable { conn, side });
            }
        }
    }

    /// Applies, in order, the acknowledgements of flow `fid` that reached the sender by
    /// `now`, each at its own arrival time (RTT samples and window growth are as if each
    /// had had its event).
    #[inline]
    fn apply_due_acks(&mut self, now: SimTime, fid: u32) {
        // Fast path: most calls find nothing due.
        if self.flows[fid as usize].pending_acks.front().is_none_or(|a| a.due > now) {
            return;
        }
        self.apply_due_acks_slow(now, fid);
    }

    #[inline(never)]
    fn apply_due_acks_slow(&mut self, now: SimTime, fid: u32) {
        let f = &mut self.flows[fid as usize];
        let mut any = false;
        while let Some(a) = f.pending_acks.front().copied() {
            if a.due > now {
                break;
            }
            f.pending_acks.pop_front();
            f.on_ack(a.due, a.upto, a.unread, a.ce, a.sent_at, &self.cfg);
            any = true;
        }
        if any {
            self.check_writable(fid);
        }
    }

    /// Makes sure an [`NetEvent::AckDue`] comes when the sender of flow `fid` needs an
    /// acknowledgement: at the first pending one for unsent data the uplink will not send
    /// without a window opening, at the first one that frees enough room for a blocked
    /// writer.
    #[inline]
    fn want_acks<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, fid: u32) {
        let f = &self.flows[fid as usize];
        let Some(first) = f.pending_acks.front() else { return };
        let window_wait = f.unsent() > 0 && !f.in_up_ring;
        if !(window_wait || f.want_writable) || f.ack_event_at.is_some_and(|t| t <= first.due) {
            // Nothing waits, or an event comes by the first acknowledgement anyway.
            return;
        }
        self.schedule_ack_due(q, fid, window_wait);
    }

    #[inline(never)]
    fn schedule_ack_due<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, fid: u32, window_wait: bool) {
        let sndbuf = self.cfg.sndbuf_bytes;
        let f = &mut self.flows[fid as usize];
        // Data held back by the windows waits for the next acknowledgement; a writer that
        // only waits for room waits for the first one after which `check_writable` would
        // wake it (the condition only grows easier as `upto` grows, so bisect).
        let i = if window_wait {
            0
        } else {
            let written = f.written;
            f.pending_acks.partition_point(|a| {
                let used = written - a.upto;
                let free = sndbuf.saturating_sub(used);
                !(free >= used / 2 && free > 0)
            })
        };
        if let Some(a) = f.pending_acks.get(i) {
            if f.ack_event_at.is_some_and(|t| t <= a.due) {
                return;
            }
            // An acknowledgement already due (not yet applied: nothing has looked) is
            // applied by the event at once.
            let at = a.due.max(q.now());
            f.ack_event_at = Some(at);
            q.schedule(at, NET_EVENT_CLASS, NetEvent::AckDue { flow: fid }.into()).expect("not in the past");
        }
    }

    /// Puts a flow in its host's uplink ring if it can send, and starts the uplink if idle.
    // Inlined into the relays' read and write passes: when fat LTO left it out of line
    // the Tor bench ran 2.5 % more instructions (cachegrind), results identical.
    #[inline(always)]
    fn make_ready<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, fid: u32) {
        self.apply_due_acks(q.now(), fid);
        let f = &mut self.flows[fid as usize];
        if f.in_up_ring || f.sendable(&self.cfg) == 0 {
            return;
        }
        f.in_up_ring = true;
        let src = f.src;
        self.hosts[src.0 as usize].up_ring.push_back(fid);
        self.start_uplink(q, src);
    }

    /// Puts the next waiting flow's batch on an idle uplink. The batch goes into the
    /// receiver's arrivals with a wake for its earliest completion; the uplink itself gets
    /// an event only when more flows wait for it.
    fn start_uplink<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, host: HostId) {
        let now = q.now();
        let h = &mut self.hosts[host.0 as usize];
        if h.up_busy_until > now {
            if !h.up_wake_pending && !h.up_ring.is_empty() {
                h.up_wake_pending = true;
                q.schedule(h.up_busy_until, NET_EVENT_CLASS, NetEvent::UplinkFree { host }.into()).expect("busy_until is in the future");
            }
            return;
        }
        while let Some(fid) = self.hosts[host.0 as usize].up_ring.pop_front() {
            self.apply_due_acks(now, fid);
            let f = &mut self.flows[fid as usize];
            let n = f.sendable(&self.cfg);
            if n == 0 {
                f.in_up_ring = false;
                self.want_acks(q, fid);
                continue;
            }
            f.note_sent(n);
            if self.waits_tracked {
                if let Some(l) = f.wait_ledger.as_mut() {
                    l[SENT].cross(now, n);
                }
            }
            let (end_seq, dst) = (f.sent, f.dst);
            let more = f.sendable(&self.cfg) > 0;
            if !more {
                f.in_up_ring = false;
            }
            let h = &mut self.hosts[host.0 as usize];
            if more {
                h.up_ring.push_back(fid);
            }
            let dur = onionlab_core::SimDuration::transmission(n, h.up_bits_per_sec);
            h.up_busy_until = now + dur;
            h.up_bytes_total += n;
            let src_loc = h.location;
            if self.cfg.record_link_log {
                self.link_log.push(LinkRecord { host, up: true, start: now, end: now + dur, bytes: n as u32 });
            }
            self.counters.incr(self.ids.batches);
            let d = &mut self.hosts[dst.0 as usize];
            let at = now + dur + self.latency.one_way(src_loc, d.location);
            let earliest_done = at + onionlab_core::SimDuration::transmission(n, d.down_bits_per_sec);
            self.batch_seq += 1;
            d.arrivals.push(InFlight { at, seq: self.batch_seq, end_seq, flow: fid, bytes: n as u32 });
            self.wake_downlink(q, dst, earliest_done);
            if !more {
                self.want_acks(q, fid);
            }
            let h = &mut self.hosts[host.0 as usize];
            if !h.up_ring.is_empty() {
                h.up_wake_pending = true;
                q.schedule(h.up_busy_until, NET_EVENT_CLASS, NetEvent::UplinkFree { host }.into()).expect("busy_until is in the future");
            }
            return;
        }
    }

    /// Replays host `host`'s downlink up to the current time: admits the batches that
    /// arrived by now and completes those that finish by now, in time order, then makes
    /// sure a wake comes at the next instant something must happen.
    fn advance_downlink<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, host: HostId) {
        let now = q.now();
        let h = &mut self.hosts[host.0 as usize];
        if h.down_wake_at.is_some_and(|w| w <= now) {
            h.down_wake_at = None;
        }
        loop {
            let h = &self.hosts[host.0 as usize];
            let next_done = if h.down_busy() { h.down_done_at } else { SimTime::MAX };
            let next_arrival = h.arrivals.peek().map_or(SimTime::MAX, |a| a.at);
            if next_arrival <= next_done && next_arrival <= now {
                let a = self.hosts[host.0 as usize].arrivals.pop().expect("peeked");
                self.admit(a);
            } else if next_done <= now {
                debug_assert_eq!(next_done, now, "a downlink batch finished without a wake at its end");
                self.complete_downlink(q, host);
            } else {
                break;
            }
        }
        // The next instant something must happen here: the end of the batch on the link,
        // or else the earliest completion of the next arrival (which starts on arrival).
        let h = &self.hosts[host.0 as usize];
        let next = if h.down_busy() {
            Some(h.down_done_at)
        } else {
            h.arrivals.peek().map(|a| a.at + onionlab_core::SimDuration::transmission(a.bytes as u64, h.down_bits_per_sec))
        };
        if let Some(t) = next {
            self.wake_downlink(q, host, t);
        }
    }

    /// Makes sure a `DownlinkWake` for `host` comes at or before `t`.
    #[inline]
    fn wake_downlink<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, host: HostId, t: SimTime) {
        let h = &mut self.hosts[host.0 as usize];
        if h.down_wake_at.is_none_or(|w| w > t) {
            h.down_wake_at = Some(t);
            q.schedule(t, NET_EVENT_CLASS, NetEvent::DownlinkWake { host }.into()).expect("downlink wakes are not in the past");
        }
    }

    /// A batch reaches its receiver's downlink queue at time `a.at`.
    fn admit(&mut self, a: InFlight) {
        let InFlight { at, flow: fid, end_seq, bytes, .. } = a;
        let f = &mut self.flows[fid as usize];
        let (src, dst) = (f.src, f.dst);
        let (src_loc, src_up) = (self.hosts[src.0 as usize].location, self.hosts[src.0 as usize].up_bits_per_sec);
        let h = &mut self.hosts[dst.0 as usize];
        // `start_uplink` set `at` to the send time plus these two, exactly.
        let in_transit = self.latency.one_way(src_loc, h.location) + onionlab_core::SimDuration::transmission(bytes as u64, src_up);
        let sent_at = SimTime::from_nanos(at.as_nanos().saturating_sub(in_transit.as_nanos()));
        let mut ce = false;
        // Fair-share marking: above the queue limit, mark the flows that hold at least an
        // equal share of the queue, so one bulk flow cannot push others' windows down.
        if h.down_queued + bytes as u64 > h.queue_limit {
            let flow_q = f.arrived - f.delivered;
            let active = h.down_active_flows.max(1) as u64;
            if flow_q + bytes as u64 >= h.down_queued / active {
                ce = true;
                self.counters.incr(self.ids.marks_queue);
            }
        }
        let loss = self.latency.loss(src_loc, h.location);
        if loss > 0.0 && !ce {
            let packets = (bytes as f64 / self.cfg.mss as f64).ceil();
            let p_batch = 1.0 - (1.0 - loss).powf(packets);
            let streams = &self.streams;
            let rng = self.host_rng[dst.0 as usize].get_or_insert_with(|| streams.stream("net-host", &h.spec.name));
            if rng.random::<f64>() < p_batch {
                ce = true;
                self.counters.incr(self.ids.marks_loss);
            }
        }
        f.arrived += bytes as u64;
        if f.down_queue.is_empty() && !matches!(h.down_current, Some(b) if b.flow == fid) {
            h.down_active_flows += 1;
        }
        f.down_queue.push_back(Batch { flow: fid, end_seq, bytes, sent_at, ce });
        h.down_queued += bytes as u64;
        if !f.in_down_ring {
            f.in_down_ring = true;
            h.down_ring.push_back(fid);
        }
        if !h.down_busy() {
            self.start_downlink(at, dst);
        }
    }

    /// Serves the downlink's flows by deficit round robin with a quantum of one maximum
    /// batch: per-flow byte shares are equal even when flows send batches of different sizes.
    /// `now` is the time the link starts the batch (it may lie before the event being
    /// handled: downlinks are replayed lazily).
    fn start_downlink(&mut self, now: SimTime, host: HostId) {
        let quantum = self.cfg.max_batch_bytes as u64;
        let h = &mut self.hosts[host.0 as usize];
        if h.down_busy() {
            return;
        }
        let Some(&fid) = h.down_ring.front() else { return };
        let f = &mut self.flows[fid as usize];
        let b = f.down_queue.pop_front().expect("flow in downlink ring without queued batches");
        if f.down_deficit < b.bytes as u64 {
            // A new turn: every batch fits in one quantum.
            f.down_deficit += quantum;
        }
        f.down_deficit -= b.bytes as u64;
        match f.down_queue.front() {
            None => {
                h.down_ring.pop_front();
                f.in_down_ring = false;
                f.down_deficit = 0;
            }
            Some(next) if next.bytes as u64 > f.down_deficit => {
                h.down_ring.rotate_left(1);
            }
            Some(_) => {}
        }
        let dur = onionlab_core::SimDuration::transmission(b.bytes as u64, h.down_bits_per_sec);
        h.down_current = Some(b);
        h.down_done_at = now + dur;
        h.down_bytes_total += b.bytes as u64;
        if self.cfg.record_link_log {
            self.link_log.push(LinkRecord { host, up: false, start: now, end: now + dur, bytes: b.bytes });
        }
    }

    /// The batch on `host`'s downlink finishes now: it enters the receive buffer, its
    /// acknowledgement starts back, and the link takes the next batch.
    fn complete_downlink<E: From<NetEvent>>(&mut self, q: &mut EventQueue<E>, host: HostId) {
        let now = q.now();
        let h = &mut self.hosts[host.0 as usize];
        let b = h.down_current.take().expect("a completion without a batch on the downlink");
        h.down_queued -= b.bytes as u64;
        let f = &mut self.flows[b.flow as usize];
        if f.down_queue.is_empty() {
            h.down_active_flows -= 1;
        }
        if f.delivered + b.bytes as u64 != b.end_seq {
            self.counters.incr(self.ids.out_of_order);
        }
        f.delivered += b.bytes as u64;
        self.counters.add(self.ids.bytes_delivered, b.bytes as u64);
        let closed = f.closed;
        if self.waits_tracked {
            if let Some(l) = f.wait_ledger.as_mut() {
                l[DELIVERED].cross(now, b.bytes as u64);
                if closed {
                    l[READ].cross(now, f.delivered - f.read);
                }
            }
        }
        if closed {
            f.read = f.delivered; // Nobody reads a closed connection.
        }
        let unread = f.delivered - f.read;
        f.advertised_free = self.cfg.rcvbuf_bytes - unread;
        let (src_loc, dst_loc) = (self.hosts[f.src.0 as usize].location, self.hosts[f.dst.0 as usize].location);
        let due = now + self.latency.one_way(dst_loc, src_loc);
        f.pending_acks.push_back(PendingAck { due, upto: b.end_seq, unread, ce: b.ce, sent_at: b.sent_at });
        self.want_acks(q, b.flow);
        if !closed {
            let (conn, sender) = conn_of(b.flow);
            self.notices.push(NetNotice::Readable { conn, side: sender.other() });
        }
        self.start_downlink(now, host);
    }
}

/// Jain's fairness index of a set of allocations: 1 when all are equal, 1/n when one takes all.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostSpec;
    use onionlab_core::SimDuration;
    use proptest::prelude::*;

    impl Network {
        /// Lazy acknowledgements make no sender wait longer than an event per
        /// acknowledgement would: a flow whose windows hold back unsent data has an
        /// `AckDue` by its first pending acknowledgement, and a blocked writer one by the
        /// last, if that frees room enough (both no earlier than `now`, the current time).
        fn check_ack_wakeups(&self, now: SimTime) -> Result<(), String> {
            for (i, f) in self.flows.iter().enumerate() {
                let (Some(first), Some(last)) = (f.pending_acks.front(), f.pending_acks.back()) else { continue };
                let woken_by = |due: SimTime| f.ack_event_at.is_some_and(|t| t <= due.max(now));
                if f.unsent() > 0 && !f.in_up_ring && !woken_by(first.due) {
                    return Err(format!("flow {i} waits for its window with no wake-up at {:?}: {f:?}", first.due));
                }
                let used = f.written - last.upto;
                let free = self.cfg.sndbuf_bytes.saturating_sub(used);
                if f.want_writable && free >= used / 2 && free > 0 && !woken_by(last.due) {
                    return Err(format!("flow {i}'s writer waits with no wake-up at {:?}: {f:?}", last.due));
                }
            }
            Ok(())
        }
    }

    /// Bulk senders (resumed on `Writable`) and readers that read everything, each pair
    /// `(from, to, bytes)` a connection between hosts of `caps` (Mbit/s up, down): checks
    /// the wake-up rule after every event, and that every byte was written in the end.
    fn run_checking_wake_ups(
        caps: &[(u64, u64)],
        pairs: &[(usize, usize, u64)],
        one_way_us: u64,
        sndbuf_kib: u64,
        rcvbuf_kib: u64,
        batch_kib: u32,
    ) -> Result<(), String> {
        let cfg = TransportConfig {
            sndbuf_bytes: sndbuf_kib * 1024,
            rcvbuf_bytes: rcvbuf_kib * 1024,
            max_batch_bytes: batch_kib * 1024,
            queue_limit_bytes: 32 * 1024,
            ..TransportConfig::default()
        };
        let mut net = Network::new(cfg, LatencyModel::constant(SimDuration::from_micros(one_way_us)), 1);
        let mut q = EventQueue::new();
        let hosts: Vec<_> = caps
            .iter()
            .enumerate()
            .map(|(i, &(u, d))| {
                let spec = HostSpec {
                    name: format!("h{i}").into(),
                    location: 0,
                    up_bits_per_sec: u * 1_000_000,
                    down_bits_per_sec: d * 1_000_000,
                };
                net.add_host(spec).unwrap()
            })
            .collect();
        let mut left = Vec::new();
        for &(a, b, s) in pairs {
            let (a, b) = (hosts[a % hosts.len()], hosts[b % hosts.len()]);
            if a != b {
                let c = net.connect(&mut q, a, b).unwrap();
                left.push(s - net.write(&mut q, c, Side::Initiator, s));
            }
        }
        let mut notices = Vec::new();
        while let Some(ev) = q.pop() {
            net.handle(&mut q, ev.event);
            net.drain_notices(&mut notices);
            for n in notices.drain(..) {
                match n {
                    NetNotice::Writable { conn, side } => {
                        let w = net.write(&mut q, conn, side, left[conn.0 as usize]);
                        left[conn.0 as usize] -= w;
                    }
                    NetNotice::Readable { conn, side } => {
                        net.read(&mut q, conn, side, u64::MAX);
                    }
                    NetNotice::Connected { .. } => {}
                }
            }
            net.check_ack_wakeups(q.now())?;
        }
        match left.iter().all(|&l| l == 0) {
            true => Ok(()),
            false => Err(format!("bytes left unwritten: {left:?}")),
        }
    }

    /// A flow whose window closed while it waited in the uplink ring (a congestion mark,
    /// or an acknowledgement reporting more unread bytes) leaves the ring unsent, and still
    /// needs a wake-up at its next acknowledgement. A case the property below found.
    #[test]
    fn a_flow_leaving_the_uplink_ring_unsent_gets_a_wake_up() {
        let caps = [(58, 15), (1, 45), (16, 1)];
        let pairs = [(0, 1, 77_233), (2, 1, 59_824), (0, 1, 129_457)];
        assert_eq!(run_checking_wake_ups(&caps, &pairs, 7370, 64, 54, 1), Ok(()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Over small windows and buffers, the wake-up rule holds after every event.
        #[test]
        fn a_waiting_sender_always_has_a_wake_up(
            caps in prop::collection::vec((1u64..100, 1u64..100), 2..5),
            pairs in prop::collection::vec((0usize..5, 0usize..5, 1u64..400_000), 1..8),
            one_way_us in 0u64..30_000,
            sndbuf_kib in 8u64..128,
            rcvbuf_kib in 8u64..128,
            batch_kib in 1u32..17,
        ) {
            prop_assert_eq!(run_checking_wake_ups(&caps, &pairs, one_way_us, sndbuf_kib, rcvbuf_kib, batch_kib), Ok(()));
        }
    }
}
