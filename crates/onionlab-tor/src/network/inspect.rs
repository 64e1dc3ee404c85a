//! Read-only views of a running network: cells waiting per node and in flight, the
//! invariant checks tests and the fuzzer run after every event, and per-circuit accessors.
//!
//! **Owns:** nothing but queries. **Must not touch:** the model's state (every method
//! takes `&self`).

use super::{side_at, side_index, TorNetwork};
use crate::cell::{CellKind, Direction};
use crate::circuit::{queue_index, queue_slot, CircuitState, CIRCUIT_NODES};
use crate::flow_control::{STREAMWINDOW_INCREMENT, STREAMWINDOW_START};
use crate::node::{IoRef, NodeId};
use crate::scheduler::CircuitScheduler;
use crate::transit::TransitSnapshot;
use onionlab_core::{SimDuration, SimTime};
use onionlab_net::HostId;

impl TorNetwork {
    /// Cells waiting at each node: in its circuit queues and its channel outbufs.
    pub fn queued_cells_per_node(&self) -> Vec<u64> {
        let mut out = vec![0; self.nodes.len()];
        for c in &self.circuits {
            for (i, q) in c.queues.iter().enumerate() {
                out[c.nodes[queue_slot(i).0] as usize] += q.cells.len();
            }
        }
        for ch in &self.chans {
            for (i, e) in ch.ends.iter().enumerate() {
                out[ch.nodes[i] as usize] += e.outbuf.len();
            }
        }
        out
    }

    /// Cells at each node by where they wait: in its circuit queues, its outbufs, and on
    /// the wire from it (written, not yet read by the next node).
    pub fn cells_waiting_per_node(&self) -> Vec<[u64; 3]> {
        let mut out = vec![[0; 3]; self.nodes.len()];
        for c in &self.circuits {
            for (i, q) in c.queues.iter().enumerate() {
                out[c.nodes[queue_slot(i).0] as usize][0] += q.cells.len();
            }
        }
        for ch in &self.chans {
            for (i, e) in ch.ends.iter().enumerate() {
                out[ch.nodes[i] as usize][1] += e.outbuf.len();
                out[ch.nodes[i] as usize][2] += e.wire.len();
            }
        }
        out
    }

    /// Where a relay's cells wait, integrated up to `now` ([`crate::wait`]); `None` for
    /// clients and servers.
    pub fn node_waits(&self, n: NodeId, now: SimTime) -> Option<crate::wait::WaitSnapshot> {
        let node = &self.nodes[n as usize];
        let mut s = node.waits.as_ref()?.snapshot(now);
        for &(chan, side) in &node.chans {
            if let Some(areas) = self.net.wait_areas(self.chans[chan as usize].conn, side, now) {
                s.wire_bytes += areas;
            }
        }
        Some(s)
    }

    /// Cells in circuit queues, outbufs and on the wire.
    pub fn cells_in_flight(&self) -> u64 {
        let queued: u64 = self.circuits.iter().flat_map(|c| c.queues.iter()).map(|q| q.cells.len()).sum();
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
        // Each relay's wait ledger counts exactly the cells in its queues, outbufs and on
        // the wire from it.
        for (n, actual) in self.cells_waiting_per_node().iter().enumerate() {
            if let Some(w) = self.nodes[n].waits.as_ref() {
                if w.cells() != *actual {
                    return Err(format!("node {n}: cells in queues / outbufs / wire {actual:?}, its wait ledger counts {:?}", w.cells()));
                }
            }
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
            // The exit's ledger counts exactly the DATA cells in its queue towards the client
            // (the transit table's `exit_queued_cells`; a closed circuit's queues are dropped).
            if circ.state != CircuitState::Closed {
                let exit_q = &circ.queues[queue_index(circ.exit_pos(), Direction::In)].cells;
                let data = exit_q.count_in_front(u64::MAX, CellKind::Data);
                if data != circ.at_exit.in_transit() {
                    return Err(format!(
                        "circuit {i}: {data} DATA cells queued at its exit, its ledger counts {}",
                        circ.at_exit.in_transit()
                    ));
                }
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
            // The exit's window is what it started with, less what it packaged, plus 50 a
            // SENDME (the client sends one only for 50 cells it has had, so the cap at
            // STREAMWINDOW_START never binds).
            if !s.done && s.package_window + s.packaged_cells != STREAMWINDOW_START + STREAMWINDOW_INCREMENT * u64::from(s.sendmes_received)
            {
                return Err(format!(
                    "stream {i}: package window {} after {} cells packaged and {} SENDMEs",
                    s.package_window, s.packaged_cells, s.sendmes_received
                ));
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
                if !s.done && c.exit() as usize != node {
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
        // A request waiting for its exit's refill: a running stream, in that exit's list once.
        let mut waiting = vec![0u32; self.streams.len()];
        for (node, n) in self.nodes.iter().enumerate() {
            for &sid in &n.request_waits {
                let s = &self.streams[sid as usize];
                let c = &self.circuits[s.circ as usize];
                if s.done || c.exit() as usize != node {
                    return Err(format!("stream {sid} waits for node {node}'s refill, not its exit's or not running"));
                }
                waiting[sid as usize] += 1;
            }
        }
        for (sid, s) in self.streams.iter().enumerate() {
            if waiting[sid] != s.request_waits_for_refill as u32 {
                return Err(format!("stream {sid}: in {} refill waits, flag {}", waiting[sid], s.request_waits_for_refill));
            }
        }
        Ok(())
    }

    /// Every channel end's scheduler has exactly the circuits with cells queued for it
    /// active, and a KIST relay lists every end with active circuits or outbuf bytes.
    fn check_scheduler_invariants(&self) -> Result<(), String> {
        let mut queued = vec![[0usize; 2]; self.chans.len()];
        for (ci, circ) in self.circuits.iter().enumerate() {
            for (i, q) in circ.queues.iter().enumerate() {
                // A circuit is held off its channel exactly while it has cells there and its
                // own bucket holds less than a cell.
                let (pos, dir) = queue_slot(i);
                let behind_empty_bucket = !q.cells.is_empty() && circ.allowance(i) == 0 && circ.queue_chan(pos, dir).is_some();
                if circ.held(i) != behind_empty_bucket {
                    return Err(format!(
                        "circuit {ci} queue {i}: held {} with {} cells queued and room for {} under its own bucket",
                        circ.held(i),
                        q.cells.len(),
                        circ.allowance(i)
                    ));
                }
                if q.cells.is_empty() || circ.held(i) {
                    continue;
                }
                if let Some(ch) = circ.queue_chan(pos, dir) {
                    let side = side_index(self.chans[ch as usize].side_of(circ.nodes[pos]));
                    queued[ch as usize][side] += 1;
                }
            }
            if circ.limited != circ.limits.is_some() {
                return Err(format!("circuit {ci}: limited flag {} but limits {}", circ.limited, circ.limits.is_some()));
            }
            if let Some(l) = circ.limits.as_ref() {
                if circ.state == CircuitState::Closed {
                    return Err(format!("closed circuit {ci} keeps its own buckets"));
                }
                for (i, b) in l.buckets.iter().enumerate() {
                    let node = circ.nodes[queue_slot(i).0];
                    if b.is_some() && !self.nodes[node as usize].limited_circs.contains(&(ci as u32)) {
                        return Err(format!("circuit {ci}: a bucket at node {node}, which does not refill it"));
                    }
                }
            }
        }
        for (n, node) in self.nodes.iter().enumerate() {
            for &c in &node.limited_circs {
                let circ = &self.circuits[c as usize];
                let here = circ
                    .limits
                    .as_ref()
                    .is_some_and(|l| l.buckets.iter().enumerate().any(|(i, b)| b.is_some() && circ.nodes[queue_slot(i).0] == n as NodeId));
                if !here {
                    return Err(format!("node {n} refills circuit {c}, which has no bucket there"));
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

    /// Cells each position of a circuit relayed, `[towards the exit, towards the client]`
    /// (0 where a position has no queue: the client's In, the exit's Out).
    pub fn circuit_cells_relayed(&self, circ: u32) -> Vec<[u64; 2]> {
        let mut out = vec![[0; 2]; CIRCUIT_NODES];
        for (i, q) in self.circuits[circ as usize].queues.iter().enumerate() {
            let (pos, dir) = queue_slot(i);
            out[pos][dir.index()] = q.relayed;
        }
        out
    }

    pub fn circuit_path(&self, circ: u32) -> &[NodeId] {
        &self.circuits[circ as usize].nodes
    }

    /// Offset of `node`'s refill grid: zero unless `refill_phase` is random and it is a relay.
    pub fn refill_phase(&self, node: NodeId) -> SimDuration {
        self.nodes[node as usize].refill_phase
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

    /// Stream slots: how many there are, and how many are free for the next stream.
    pub fn stream_slots(&self) -> (usize, usize) {
        (self.streams.len(), self.free_streams.len())
    }

    /// State of the circuit in slot `circ` (a closed circuit's slot goes to a later one
    /// once its last cell has arrived; until then it reads `Closed`).
    pub fn circuit_state(&self, circ: u32) -> CircuitState {
        self.circuits[circ as usize].state
    }

    /// The circuit of a running stream (a finished one's is in its [`StreamRecord`](crate::circuit::StreamRecord)).
    pub fn stream_circuit(&self, sid: u32) -> u32 {
        let s = &self.streams[sid as usize];
        debug_assert!(!s.done, "stream {sid} has finished; its id may name another stream");
        s.circ
    }

    /// Of a running stream: request bytes its exit has written to the server, and whether
    /// the rest waits for the exit's write bucket to refill.
    pub fn stream_request_written(&self, sid: u32) -> (u64, bool) {
        let s = &self.streams[sid as usize];
        debug_assert!(!s.done, "stream {sid} has finished; its id may name another stream");
        (s.request_written, s.request_waits_for_refill)
    }

    pub fn host_of(&self, n: NodeId) -> HostId {
        self.nodes[n as usize].host
    }

    /// Every circuit that is not closed, with its downstream DATA cells waiting at the exit
    /// and in the overlay as they stand at `now` ([`crate::transit`]), in circuit-slot order. A closed circuit's cells
    /// still on their way are dropped, so its ledger stops counting and it has no entry.
    pub fn circuit_transits(&self, now: SimTime) -> Vec<CircuitTransit> {
        self.circuits
            .iter()
            .enumerate()
            .filter(|(_, c)| c.state != CircuitState::Closed)
            .map(|(id, c)| CircuitTransit {
                circ: id as u32,
                created: c.created_at,
                nodes: c.nodes,
                at_exit: c.at_exit.snapshot(now),
                in_overlay: c.in_overlay.snapshot(now),
            })
            .collect()
    }
}

/// A circuit's downstream cells in transit ([`TorNetwork::circuit_transits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitTransit {
    /// The circuit's slot (a later circuit may reuse it: `created` tells them apart).
    pub circ: u32,
    pub created: SimTime,
    /// `[client, guard, middle, exit]`.
    pub nodes: [NodeId; CIRCUIT_NODES],
    /// Packaged at the exit, not yet forwarded by it (its circuit queue towards the client).
    pub at_exit: TransitSnapshot,
    /// Forwarded by the exit, not yet delivered at the client.
    pub in_overlay: TransitSnapshot,
}
