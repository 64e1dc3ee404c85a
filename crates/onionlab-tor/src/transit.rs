//! Data cells in transit, per circuit: the byte-wise latency and the backlog of the
//! PredicTor paper (section 5, definition 1).
//!
//! **Owns:** [`TransitLedger`], which counts cells entering and leaving a stretch of a
//! circuit and integrates the number in between over time. A circuit keeps two for its
//! downstream DATA cells: from the exit packaging the server's bytes to the exit forwarding
//! them (its circuit queue), and from that forwarding to the client taking them off its
//! guard channel. The paper's latency runs from a byte entering the overlay (taken in by
//! the exit) to its delivery, and its backlog (definition 1) sums every node's queues, the
//! exit's included: both ledgers together. The second alone is what the authors' code
//! measured ("bytes forwarded at the first relay minus bytes delivered at the last", spec
//! 8, where the exit relay generated the data itself). **Must not touch:** queues, windows or anything that decides
//! when a cell moves; it only watches.
//!
//! The paper tracks "for each payload byte the times of sending and receiving"
//! and averages the difference. The model counts cells, not bytes (every byte of a cell
//! enters and leaves with it), and keeps no per-cell times: it integrates the cells in
//! transit instead. Over any set of cells that have all left, that integral *is* the sum
//! of their transit times, whatever order they left in (each cell adds one to the count
//! for exactly its own transit), so the mean per cell, and per payload byte, is the
//! integral divided by the cells. Over a window in which cells are still in transit at
//! either end, the same ratio is Little's law's estimate (L = lambda W), off by at most the
//! cells in transit at the window's ends times their transit time.

use onionlab_core::SimTime;

/// One circuit's downstream cells: entered, left, and cells in transit integrated over
/// time. Updated once per packaged or delivered run, never per cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransitLedger {
    entered: u64,
    left: u64,
    /// Cells in transit integrated over time, in cell-nanoseconds, up to `since`.
    area_ns: u128,
    since: SimTime,
}

/// A ledger read at one instant (what a metrics sample keeps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransitSnapshot {
    /// Cells that have entered the overlay (packaged at the exit) so far.
    pub entered: u64,
    /// Cells that have left it (delivered at the client) so far.
    pub left: u64,
    /// Cells in transit integrated from the circuit's creation to the instant read, in
    /// cell-nanoseconds.
    pub area_ns: u128,
}

impl TransitSnapshot {
    /// Cells in transit at the instant read (the paper's backlog, in cells).
    pub fn in_transit(&self) -> u64 {
        self.entered - self.left
    }
}

impl TransitLedger {
    /// An empty ledger starting at `now` (a circuit's creation).
    pub fn new(now: SimTime) -> Self {
        Self { since: now, ..Self::default() }
    }

    /// `n` cells enter the overlay at `now`.
    #[inline]
    pub fn enter(&mut self, now: SimTime, n: u64) {
        self.advance(now);
        self.entered += n;
    }

    /// `n` cells leave the overlay at `now`. More cells leaving than entered is a model bug.
    #[inline]
    pub fn leave(&mut self, now: SimTime, n: u64) {
        self.advance(now);
        debug_assert!(self.left + n <= self.entered, "cells left the overlay that never entered it");
        self.left = (self.left + n).min(self.entered);
    }

    /// Cells that have entered and not yet left.
    #[inline]
    pub fn in_transit(&self) -> u64 {
        self.entered - self.left
    }

    /// The ledger as it stands at `now` (no earlier than its last update).
    pub fn snapshot(&self, now: SimTime) -> TransitSnapshot {
        let mut l = *self;
        l.advance(now);
        TransitSnapshot { entered: l.entered, left: l.left, area_ns: l.area_ns }
    }

    #[inline]
    fn advance(&mut self, now: SimTime) {
        let dt = now.saturating_since(self.since).as_nanos();
        self.area_ns += u128::from(self.entered - self.left) * u128::from(dt);
        self.since = self.since.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_core::SimDuration;

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    /// Hand-worked: cells entering at 0, 0, 10 ms and leaving at 30, 50, 40 ms (out of
    /// order) spend 30 + 50 + 30 = 110 ms in transit; the integral is exactly that.
    #[test]
    fn integral_is_the_sum_of_transit_times_once_all_have_left() {
        let mut l = TransitLedger::new(at(0));
        l.enter(at(0), 2);
        l.enter(at(10), 1);
        l.leave(at(30), 1);
        l.leave(at(40), 1);
        l.leave(at(50), 1);
        let s = l.snapshot(at(90));
        assert_eq!((s.entered, s.left, s.in_transit()), (3, 3, 0));
        assert_eq!(s.area_ns, 110 * 1_000_000);
    }

    /// Mid-way, the snapshot counts the cells still in transit up to the instant read, and
    /// reading changes nothing.
    #[test]
    fn snapshot_integrates_up_to_the_instant_read() {
        let mut l = TransitLedger::new(at(0));
        l.enter(at(5), 4);
        l.leave(at(15), 1);
        let s = l.snapshot(at(20));
        // 4 cells for 10 ms, then 3 for 5 ms.
        assert_eq!(s.area_ns, (40 + 15) * 1_000_000);
        assert_eq!(s.in_transit(), 3);
        assert_eq!(l.snapshot(at(20)), s);
    }
}
