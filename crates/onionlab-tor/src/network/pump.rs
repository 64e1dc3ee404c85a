//! Tor's per-node processing loop (the "pump", one pass of tor's libevent loop): the read
//! pass over connections with unread bytes, the write pass over channel ends with cells,
//! KIST runs, and the glue that lets a [`CircuitScheduler`] fill an outbuf and KIST
//! ([`crate::kist`]) see a relay's channels.
//!
//! **Owns:** moving bytes between sockets, outbufs and circuit queues within the global
//! and per-connection token buckets. **Must not touch:** what a cell does once read (the
//! parent module handles it) or the transport's internals ([`Network`]'s public API).

use super::{side_index, TorEvent, TorNetwork, TOR_EVENT_CLASS};
use crate::cell::{CellKind, CellRun, Direction, CELL_WIRE_BYTES, RELAY_PAYLOAD_SIZE};
use crate::channel::{ChanEnd, Channel};
use crate::circuit::{queue_index, Circuit, CircuitState};
use crate::kist::{kist_run, lite_limit, socket_limit, KistChannels, KistParams};
use crate::node::{channel_share, edge_share, IoRef, NodeId, TorNode};
use crate::scheduler::CircuitScheduler;
use crate::wait::Crossing;
use onionlab_core::{EventQueue, SimTime};
use onionlab_net::{Network, Side};

impl TorNetwork {
    pub(super) fn pump(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
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
    pub(super) fn run_kist(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
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
        let share = channel_share(&n.read_bucket, end.conn_read.as_ref());
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
        if cells > 0 {
            let writer = self.chans[chan as usize].nodes[1 - si];
            if let Some(w) = self.nodes[writer as usize].waits.as_mut() {
                w.cross(Crossing::Read, q.now(), cells);
            }
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
    /// connection inbuf), at most an edge share of the read bucket ([`edge_share`]) at a
    /// time, and packages whole DATA cells from it while the circuit and stream windows
    /// allow; the stream's last cell may be partial. Reading stops while
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
            let want = avail.min(edge_share(&n.read_bucket));
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
            c.at_exit.enter(now, cells);
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
        if self.nodes[node as usize].runs_hpd {
            return self.hpd_write_pass(q, node);
        }
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

    /// The write pass of an HPD relay ([`crate::hpd`]): one relay-wide HPD run over the
    /// channel ends in the write ring, which moves cells to outbufs in HPD's order across
    /// the relay, only as many as each end can write now, and writes them. The ring's
    /// round robin and outbuf refills are not used. Ends blocked by a full socket or their
    /// own bucket leave the ring (their writable notice or the refill brings them back),
    /// as do ends left without cells; when the relay's write bucket runs out, the others
    /// stay in the ring, in order, for the refill.
    fn hpd_write_pass(&mut self, q: &mut EventQueue<TorEvent>, node: NodeId) {
        let now = q.now();
        let n = &mut self.nodes[node as usize];
        if n.write_ring.is_empty() || n.write_bucket.tokens() == 0 {
            return; // Nothing to write, or nothing to write with until the refill.
        }
        let mut state = n.hpd.take().expect("an HPD relay");
        let mut ring = std::mem::take(&mut n.write_ring);
        state.ends.clear();
        for io in ring.drain(..) {
            let IoRef::Chan(chan, side) = io else { unreachable!("only channels are written by tor") };
            let ch = &mut self.chans[chan as usize];
            debug_assert_eq!(!ch.ends[side_index(side)].open, ch.closed, "a write-ring end of a channel not yet open");
            let end = &mut ch.ends[side_index(side)];
            if end.open {
                state.ends.push((chan, side));
            } else {
                end.in_write_ring = false; // A stale entry (see `read_channel`).
            }
        }
        state.blocked.clear();
        state.blocked.resize(state.ends.len(), false);
        let unblock_at = self.cellq_low();
        let crate::node::HpdRelayState { sched, ends, blocked } = &mut *state;
        let mut view = HpdView {
            net: &mut self.net,
            q,
            relay: &mut self.nodes[node as usize],
            chans: &mut self.chans,
            circuits: &mut self.circuits,
            ends,
            blocked,
            node,
            unblock_at,
            unblocked: &mut self.unblocked,
            now,
        };
        crate::hpd::hpd_run(&mut view, sched, now);
        // Out of the relay's tokens: ends that still have something to write wait in the
        // ring for the refill. Otherwise every end with cells stopped at its socket or its
        // own bucket, or has nothing left.
        let stopped = self.nodes[node as usize].write_bucket.tokens() == 0;
        for (k, &(chan, side)) in state.ends.iter().enumerate() {
            let end = &mut self.chans[chan as usize].ends[side_index(side)];
            let pending = end.sched.active() > 0 || end.outbuf_bytes() > 0;
            debug_assert!(
                stopped || state.blocked[k] || !pending,
                "an HPD run left an end with cells and room: active {} outbuf {} heads {:?}",
                end.sched.active(),
                end.outbuf_bytes(),
                end.sched.class_heads()
            );
            if stopped && pending && !state.blocked[k] {
                ring.push_back(IoRef::Chan(chan, side));
            } else {
                end.in_write_ring = false;
            }
        }
        let n = &mut self.nodes[node as usize];
        n.write_ring = ring;
        n.hpd = Some(state);
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
        let before = outbuf.len();
        sched.fill(
            room,
            now,
            &mut ChannelCells { circuits: &mut self.circuits, outbuf, node, chan, unblock_at, unblocked: &mut self.unblocked, now },
        );
        let picked = outbuf.len() - before;
        if let (true, Some(w)) = (picked > 0, self.nodes[node as usize].waits.as_mut()) {
            w.cross(Crossing::Picked, now, picked);
        }
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
    now: SimTime,
}

impl ChannelCells<'_> {
    /// The position of this node on `circ`, and the index of its queue for this channel.
    fn locate(&self, circ: u32) -> (usize, usize) {
        let c = &self.circuits[circ as usize];
        let pos = c.position(self.node);
        let dir = if pos < c.chans.len() && c.chans[pos] == Some(self.chan) { Direction::Out } else { Direction::In };
        (pos, queue_index(pos, dir))
    }
}

impl crate::scheduler::CellSource for ChannelCells<'_> {
    /// The cells `circ` may send now: its queue, or fewer where the circuit's own bucket
    /// ([`crate::circuit::CircuitLimits`]) allows fewer.
    fn queued(&self, circ: u32) -> u64 {
        let (_, qi) = self.locate(circ);
        let c = &self.circuits[circ as usize];
        c.queues[qi].cells.len().min(c.allowance(qi))
    }

    fn take(&mut self, circ: u32, n: u64) -> u64 {
        let (pos, qi) = self.locate(circ);
        if self.circuits[circ as usize].limited {
            return self.take_limited(circ, pos, qi, n);
        }
        self.move_cells(circ, pos, qi, n)
    }

    fn policy_data(&mut self, circ: u32) -> &mut crate::scheduler::CircPolicyData {
        let (_, qi) = self.locate(circ);
        &mut self.circuits[circ as usize].policy[qi]
    }

    fn held(&self, circ: u32) -> bool {
        // Most circuits have no buckets of their own: no need to find the queue.
        if !self.circuits[circ as usize].limited {
            return false;
        }
        let (_, qi) = self.locate(circ);
        self.circuits[circ as usize].held(qi)
    }
}

impl ChannelCells<'_> {
    /// Moves up to `n` cells of `circ`'s queue `qi` (at `pos`) to the outbuf.
    #[inline]
    fn move_cells(&mut self, circ: u32, pos: usize, qi: usize, n: u64) -> u64 {
        let c = &mut self.circuits[circ as usize];
        // DATA cells the exit forwards enter the overlay (only the exit's queue towards
        // the client holds them at that position).
        let exit = pos == c.exit_pos();
        let data = if exit { c.queues[qi].cells.count_in_front(n, CellKind::Data) } else { 0 };
        let moved = c.queues[qi].cells.move_to(self.outbuf, n);
        c.cells_out += moved as u32;
        if data > 0 {
            c.at_exit.leave(self.now, data);
            c.in_overlay.enter(self.now, data);
        }
        // Only the exit's queue toward the client blocks its streams; other hops' queues of
        // the same circuit say nothing about it.
        if c.edge_blocked && exit && c.exit_queued() <= self.unblock_at {
            c.edge_blocked = false;
            c.cc_exit.set_blocked(false);
            self.unblocked.push(circ);
        }
        moved
    }

    /// [`CellSource::take`](crate::scheduler::CellSource::take) for a circuit with
    /// buckets of its own: at most the whole cells its bucket for queue `qi` holds,
    /// charged to it; once it holds less than a cell while cells remain, the circuit is
    /// held off this channel ([`crate::circuit::CircuitLimits::held`]) until the relay's
    /// next refill. Out of line: the unlimited path stays as it was.
    #[inline(never)]
    fn take_limited(&mut self, circ: u32, pos: usize, qi: usize, n: u64) -> u64 {
        let n = n.min(self.circuits[circ as usize].allowance(qi));
        let moved = self.move_cells(circ, pos, qi, n);
        let c = &mut self.circuits[circ as usize];
        if let Some(l) = c.limits.as_mut() {
            if let Some(b) = l.buckets[qi].as_mut() {
                b.take(moved * CELL_WIRE_BYTES);
            }
            if l.allowance(qi) == 0 && !c.queues[qi].cells.is_empty() {
                l.held[qi] = true;
            }
        }
        moved
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
/// ([`channel_share`]), the socket's free space and the outbuf, charged to the relay's and
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
    let share = channel_share(&n.write_bucket, end.conn_write.as_ref());
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
    let before = end.outbuf.len();
    end.note_written(w);
    if let Some(l) = n.waits.as_mut() {
        // Cells whose first byte went to the kernel.
        l.cross(Crossing::Written, q.now(), before - end.outbuf.len());
    }
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
        let picked =
            crate::scheduler::fill_by_picks(sched, 1, now, &mut ChannelCells { circuits, outbuf, node, chan, unblock_at, unblocked, now })
                == 1;
        if let (true, Some(w)) = (picked, self.relay.waits.as_mut()) {
            w.cross(Crossing::Picked, now, 1);
        }
        picked
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

/// An HPD relay's channel ends as [`crate::hpd::hpd_run`] sees them: the ends of its write
/// ring at the start of the pass.
struct HpdView<'a> {
    net: &'a mut Network,
    q: &'a mut EventQueue<TorEvent>,
    relay: &'a mut TorNode,
    chans: &'a mut [Channel],
    circuits: &'a mut [Circuit],
    ends: &'a [(u32, Side)],
    /// Per end: stopped by a full socket (its writable notice armed) or by its own bucket
    /// (waiting for the refill).
    blocked: &'a mut [bool],
    node: NodeId,
    unblock_at: u64,
    unblocked: &'a mut Vec<u32>,
    now: SimTime,
}

impl crate::hpd::HpdChannels for HpdView<'_> {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn heads(&self, i: usize) -> crate::scheduler::ClassHeads {
        let (chan, side) = self.ends[i];
        self.chans[chan as usize].ends[side_index(side)].sched.class_heads().expect("an HPD relay's circuitmux keeps classes")
    }

    fn room(&mut self, i: usize) -> crate::hpd::HpdRoom {
        use crate::hpd::HpdRoom;
        let (chan, side) = self.ends[i];
        if self.blocked[i] {
            return HpdRoom::Done;
        }
        loop {
            let end = &mut self.chans[chan as usize].ends[side_index(side)];
            let pending = end.outbuf_bytes();
            if pending == 0 && end.sched.active() == 0 {
                return HpdRoom::Done;
            }
            let free = self.net.writable_bytes(self.now, end.write_conn, side);
            if free == 0 {
                // The write fails with EAGAIN, which arms the transport's writable notice
                // (as `write_once` does for a full socket).
                let w = self.net.write(self.q, end.write_conn, side, pending.max(CELL_WIRE_BYTES));
                debug_assert_eq!(w, 0);
                self.blocked[i] = true;
                return HpdRoom::Done;
            }
            if self.relay.write_bucket.tokens() == 0 {
                return HpdRoom::Stop;
            }
            let share = channel_share(&self.relay.write_bucket, end.conn_write.as_ref());
            if share == 0 {
                end.write_waits_for_refill = true;
                self.blocked[i] = true;
                return HpdRoom::Done;
            }
            if pending > 0 {
                // The unwritten rest of a cell an earlier decision chose goes first.
                write_once(self.net, self.q, self.relay, end, side);
                continue;
            }
            return HpdRoom::Cells(free.min(share).div_ceil(CELL_WIRE_BYTES));
        }
    }

    fn send(&mut self, i: usize, class: usize, n: u32, now: SimTime) -> u32 {
        let (chan, side) = self.ends[i];
        let end = &mut self.chans[chan as usize].ends[side_index(side)];
        let ChanEnd { sched, outbuf, .. } = &mut *end;
        let Some((circ, run)) = sched.pick_class(class) else { return 0 };
        let (circuits, node, unblock_at, unblocked) = (&mut *self.circuits, self.node, self.unblock_at, &mut *self.unblocked);
        let mut src = ChannelCells { circuits, outbuf, node, chan, unblock_at, unblocked, now };
        use crate::scheduler::CellSource;
        let moved = src.take(circ, u64::from(n.min(run))) as u32;
        sched.on_cells_sent(circ, moved, now);
        if src.queued(circ) == 0 {
            if src.held(circ) {
                sched.hold(circ, src.policy_data(circ));
            } else {
                sched.deactivate(circ, src.policy_data(circ));
            }
        }
        if let (true, Some(w)) = (moved > 0, self.relay.waits.as_mut()) {
            w.cross(Crossing::Picked, now, u64::from(moved));
        }
        write_once(self.net, self.q, self.relay, end, side);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::CellFifo;
    use crate::circuit::CIRCUIT_NODES;
    use crate::flow_control::CongestionControlKind;
    use crate::scheduler::CellSource;
    use crate::transit::TransitLedger;

    /// An open circuit client 0, relays 1-3, whose exit holds `queued` DATA cells towards
    /// the client (channel 2 between middle and exit), its streams blocked.
    fn blocked_at_exit(queued: u32) -> Circuit {
        let cc = || CongestionControlKind::FixedWindow.build(1000, 100);
        let mut c = Circuit {
            nodes: [0, 1, 2, 3],
            chans: [Some(0), Some(1), Some(2)],
            state: CircuitState::Open,
            expired: false,
            edge_blocked: true,
            close_reason: None,
            cells_out: 0,
            built: CIRCUIT_NODES - 1,
            lower_initiates: [true; CIRCUIT_NODES - 1],
            limited: false,
            limits: None,
            queues: Default::default(),
            policy: Default::default(),
            streams: vec![0],
            live: vec![0],
            cc_client: cc(),
            cc_exit: cc(),
            rate_limit: None,
            pending_begins: Vec::new(),
            created_at: SimTime::ZERO,
            opened_at: Some(SimTime::ZERO),
            dirty_since: Some(SimTime::ZERO),
            at_exit: TransitLedger::new(SimTime::ZERO),
            in_overlay: TransitLedger::new(SimTime::ZERO),
        };
        let run = CellRun { circ: 0, count: queued, dir: Direction::In, kind: CellKind::Data, target: 0, stream: 0 };
        c.queues[queue_index(3, Direction::In)].cells.push(run);
        c.at_exit.enter(SimTime::ZERO, u64::from(queued));
        c
    }

    /// Tor's `cellq_low` (relay.c: `queue->n <= cell_queue_lowwatermark()`): a blocked
    /// circuit's streams are woken once its exit queue has fallen to the low watermark,
    /// not below it; cells leaving the exit enter the overlay.
    #[test]
    fn the_exit_unblocks_when_its_queue_falls_to_cellq_low() {
        let mut circuits = vec![blocked_at_exit(12)];
        let (mut outbuf, mut unblocked) = (CellFifo::new(), Vec::new());
        let now = SimTime::ZERO;
        let mut cells =
            ChannelCells { circuits: &mut circuits, outbuf: &mut outbuf, node: 3, chan: 2, unblock_at: 10, unblocked: &mut unblocked, now };
        assert_eq!(cells.queued(0), 12);
        assert_eq!(cells.take(0, 1), 1);
        assert!(cells.circuits[0].edge_blocked, "11 cells: still above cellq_low");
        assert_eq!(cells.take(0, 1), 1);
        assert!(!cells.circuits[0].edge_blocked, "10 cells: at cellq_low");
        assert_eq!(cells.take(0, 5), 5);
        let c = &circuits[0];
        assert_eq!((c.cells_out, c.exit_queued(), c.at_exit.in_transit(), c.in_overlay.in_transit()), (7, 5, 5, 7));
        assert_eq!((unblocked, outbuf.len()), (vec![0], 7), "woken once");
    }
}
