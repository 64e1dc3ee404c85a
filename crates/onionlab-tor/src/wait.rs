//! Where cells wait at a node: the design's queue-time split, per node.
//!
//! **Owns:** [`WaitLedger`], which counts the cells crossing the boundaries between the
//! three places a cell waits at a node on its way to the next hop, and from the counts the
//! cell-seconds spent in each:
//! - **circuit queue**: from the cell's arrival (or its packaging at an edge) until the
//!   scheduler moves it to a channel's outbuf, or it is dropped with its circuit. Only
//!   here can a circuit scheduler (EWMA, KIST, HPD) reorder it.
//! - **outbuf**: from the scheduler's pick until the first of its bytes goes to the kernel;
//!   FIFO behind every circuit on the channel.
//! - **wire**: from then until the next node reads its last byte: the kernel's send buffer,
//!   the link, and the next node's receive buffer while that node's read bucket holds it
//!   back (KIST's paper found most of tor's queueing delay in the kernel).
//!
//! **Must not touch:** anything that decides when a cell moves; it only watches.
//!
//! No time is kept per cell: for each boundary the ledger keeps the cells that crossed it
//! and the sum of their crossing times ([`onionlab_core::little`]), which gives the
//! cell-seconds spent in each place exactly, for one multiply-add per run of cells crossing.
//! Divided by the cells that passed through in an interval it is Little's law's mean wait
//! per cell.
//!
//! The wire's parts (the relay's kernel, the link, unread in the next relay's receive
//! buffer) are kept by the transport, in bytes, for channels between relays
//! (`onionlab_net::Network::track_waits`) and added to the snapshot by
//! [`crate::TorNetwork::node_waits`].

use onionlab_core::little::{area, Tally};
use onionlab_core::SimTime;
use onionlab_net::FlowWaits;

/// A boundary between two places (or a place and the outside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crossing {
    /// Into a circuit queue: relayed from the previous hop or packaged here.
    Queued = 0,
    /// Circuit queue to outbuf: picked by the circuit scheduler.
    Picked = 1,
    /// Out of a circuit queue without going on: dropped with a closing circuit.
    Dropped = 2,
    /// Outbuf to wire: the cell's first byte went to the kernel.
    Written = 3,
    /// Off the wire: the next node read the cell's last byte.
    Read = 4,
}

const CROSSINGS: usize = 5;

/// A node's crossings; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitLedger {
    tallies: [Tally; CROSSINGS],
    /// Where the relay's bytes waited on the wire of channels to relays closed so far
    /// (open channels' are read from the transport).
    pub closed_channels: FlowWaits,
}

/// One place at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlaceSnapshot {
    /// Cells that have entered the place so far.
    pub entered: u64,
    /// Cells in the place at the instant.
    pub cells: u64,
    /// Cell-nanoseconds spent in the place so far.
    pub area_ns: u128,
}

/// A node's three places at one instant ([`WaitLedger::snapshot`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitSnapshot {
    pub circuit_queue: PlaceSnapshot,
    pub outbuf: PlaceSnapshot,
    pub wire: PlaceSnapshot,
    /// The wire in parts, on channels to relays (in bytes, as the transport counts):
    /// byte-nanoseconds the relay's bytes spent in its kernel, on the link, and unread in
    /// the next relay's receive buffer (its read bucket holds them back).
    pub wire_bytes: FlowWaits,
}

impl WaitLedger {
    /// `n` cells cross `b` at `now`.
    #[inline]
    pub fn cross(&mut self, b: Crossing, now: SimTime, n: u64) {
        self.tallies[b as usize].cross(now, n);
    }

    fn place(&self, now: SimTime, into: &[Crossing], out_of: &[Crossing]) -> PlaceSnapshot {
        let sum = |bs: &[Crossing]| bs.iter().fold(Tally::default(), |t, &b| t + self.tallies[b as usize]);
        let (into, out_of) = (sum(into), sum(out_of));
        let (cells, area_ns) = area(into, out_of, now);
        PlaceSnapshot { entered: into.count, cells, area_ns }
    }

    /// Cells in the circuit queues, the outbufs and on the wire now.
    pub fn cells(&self) -> [u64; 3] {
        let c = |b: Crossing| self.tallies[b as usize].count;
        use Crossing::*;
        [c(Queued) - c(Picked) - c(Dropped), c(Picked) - c(Written), c(Written) - c(Read)]
    }

    /// The three places as they stand at `now` (no earlier than the last crossing).
    pub fn snapshot(&self, now: SimTime) -> WaitSnapshot {
        use Crossing::*;
        WaitSnapshot {
            circuit_queue: self.place(now, &[Queued], &[Picked, Dropped]),
            outbuf: self.place(now, &[Picked], &[Written]),
            wire: self.place(now, &[Written], &[Read]),
            wire_bytes: self.closed_channels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_core::SimDuration;

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    const MS: u128 = 1_000_000;

    /// Hand-worked: three cells queued at 0, 0 and 10 ms; picked at 5 (one) and 30 ms (one);
    /// the third dropped at 40 ms. Queue: 5 + 30 + 30 = 65 ms. Outbuf: written at 20 and
    /// 50 ms, so 15 + 20 = 35 ms. Wire: read at 70 (the first) and still there at 100 (the
    /// second): 50 + 50 = 100 ms.
    #[test]
    fn each_place_holds_the_sum_of_its_cells_waits() {
        use Crossing::*;
        let mut l = WaitLedger::default();
        l.cross(Queued, at(0), 2);
        l.cross(Picked, at(5), 1);
        l.cross(Queued, at(10), 1);
        l.cross(Written, at(20), 1);
        l.cross(Picked, at(30), 1);
        l.cross(Dropped, at(40), 1);
        l.cross(Written, at(50), 1);
        l.cross(Read, at(70), 1);
        let s = l.snapshot(at(100));
        assert_eq!((s.circuit_queue.entered, s.circuit_queue.cells, s.circuit_queue.area_ns), (3, 0, 65 * MS));
        assert_eq!((s.outbuf.entered, s.outbuf.cells, s.outbuf.area_ns), (2, 0, 35 * MS));
        assert_eq!((s.wire.entered, s.wire.cells, s.wire.area_ns), (2, 1, 100 * MS));
        // Between two snapshots, the difference is the interval's cell-seconds.
        let later = l.snapshot(at(130));
        assert_eq!(later.wire.area_ns - s.wire.area_ns, 30 * MS);
        assert_eq!(later.circuit_queue.area_ns, s.circuit_queue.area_ns);
    }

    proptest::proptest! {
        /// Against cells timed one by one: runs enter the circuit queue, leave it in any
        /// order (a scheduler reorders), go through the outbuf and the wire; every place's
        /// cell-seconds equal the sum of its cells' own waits.
        #[test]
        fn matches_per_cell_waits(ops in proptest::collection::vec((0u8..5, 1u64..5, 0u64..20, 0usize..64), 1..80)) {
            use Crossing::*;
            let mut l = WaitLedger::default();
            let mut now = 0u64;
            // Arrival times of the cells in each place, and the waits of those that left.
            let (mut queue, mut outbuf, mut wire): (Vec<u64>, Vec<u64>, Vec<u64>) = Default::default();
            let mut waited = [0u128; 3];
            for (op, n, dt, pick) in ops {
                now += dt;
                let t = at(now);
                match op {
                    0 => {
                        queue.extend(std::iter::repeat_n(now, n as usize));
                        l.cross(Queued, t, n);
                    }
                    1 | 2 if !queue.is_empty() => {
                        // Any cell of the queue, as a scheduler may pick out of order.
                        let i = pick % queue.len();
                        let arrived = queue.remove(i);
                        waited[0] += u128::from(now - arrived) * MS;
                        if op == 1 {
                            outbuf.push(now);
                            l.cross(Picked, t, 1);
                        } else {
                            l.cross(Dropped, t, 1);
                        }
                    }
                    3 if !outbuf.is_empty() => {
                        let arrived = outbuf.remove(0);
                        waited[1] += u128::from(now - arrived) * MS;
                        wire.push(now);
                        l.cross(Written, t, 1);
                    }
                    4 if !wire.is_empty() => {
                        let arrived = wire.remove(0);
                        waited[2] += u128::from(now - arrived) * MS;
                        l.cross(Read, t, 1);
                    }
                    _ => {}
                }
            }
            let end = now + 7;
            let s = l.snapshot(at(end));
            let still = |v: &Vec<u64>| v.iter().map(|&a| u128::from(end - a) * MS).sum::<u128>();
            proptest::prop_assert_eq!(s.circuit_queue.area_ns, waited[0] + still(&queue));
            proptest::prop_assert_eq!(s.outbuf.area_ns, waited[1] + still(&outbuf));
            proptest::prop_assert_eq!(s.wire.area_ns, waited[2] + still(&wire));
            proptest::prop_assert_eq!((s.circuit_queue.cells, s.outbuf.cells, s.wire.cells), (queue.len() as u64, outbuf.len() as u64, wire.len() as u64));
        }
    }
}
