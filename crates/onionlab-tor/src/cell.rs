//! Cells: sizes, kinds and the run-length representation that queues and wires use.
//!
//! **Owns:** tor's cell constants and [`CellRun`], a run of identical cells (same circuit,
//! direction, kind, stream and target hop). **Must not touch:** where cells are queued.
//!
//! Cells are never objects: every queue in the model is a FIFO of runs, so a million cells
//! of one stream cost one run, and moving cells costs O(runs), not O(cells).

/// `CELL_MAX_NETWORK_SIZE` (or.h): a cell on the wire, with the 4-byte circuit id.
pub const CELL_NETWORK_SIZE: u64 = 514;
/// `TLS_PER_CELL_OVERHEAD` (channeltls.h): TLS record overhead charged per cell.
pub const TLS_PER_CELL_OVERHEAD: u64 = 29;
/// Bytes one cell occupies in buckets, buffers and on the link.
pub const CELL_WIRE_BYTES: u64 = CELL_NETWORK_SIZE + TLS_PER_CELL_OVERHEAD;
/// `RELAY_PAYLOAD_SIZE` (or.h): application bytes one RELAY_DATA cell carries.
pub const RELAY_PAYLOAD_SIZE: u64 = 498;

/// Which way a cell travels on its circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Direction {
    /// From the client towards the exit (tor's `CELL_DIRECTION_OUT`).
    Out = 0,
    /// From the exit towards the client (tor's `CELL_DIRECTION_IN`).
    In = 1,
}

impl Direction {
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The cell types the model distinguishes. Others (padding, netinfo, ...) are not modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CellKind {
    /// CREATE2 towards the hop being added.
    Create,
    /// CREATED2 back from it.
    Created,
    /// RELAY_EARLY EXTEND2 to the current last hop.
    Extend,
    /// RELAY EXTENDED2 back to the client.
    Extended,
    /// RELAY BEGIN: open a stream at the exit. Carries the request with optimistic data
    /// (`TorConfig::optimistic_data`); without it, the request follows CONNECTED as DATA.
    Begin,
    /// RELAY CONNECTED: the exit's connection to the server is up.
    Connected,
    /// RELAY DATA: up to [`RELAY_PAYLOAD_SIZE`] bytes of a stream.
    Data,
    /// RELAY SENDME for the circuit window.
    CircuitSendme,
    /// RELAY SENDME for one stream's window.
    StreamSendme,
}

/// A run of `count` identical cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellRun {
    pub circ: u32,
    pub count: u32,
    pub dir: Direction,
    pub kind: CellKind,
    /// Hop position (0 = client) that handles the cell; other hops relay it.
    pub target: u8,
    /// Stream index within the circuit, for stream cells.
    pub stream: u16,
}

impl CellRun {
    /// Whether `other` can be appended to this run (everything but the count equal).
    #[inline]
    pub fn same_kind(&self, other: &CellRun) -> bool {
        self.circ == other.circ
            && self.dir == other.dir
            && self.kind == other.kind
            && self.target == other.target
            && self.stream == other.stream
    }
}

/// A FIFO of cells stored as runs. Used for circuit queues, channel outbufs and the
/// record of cells written to a connection and not yet read by the peer.
///
/// The runs are a [`HeadDeque`](onionlab_core::HeadDeque): the first is kept inline, and
/// most queues hold a single run (a stream's DATA cells merge into one), so the common case
/// touches no heap block.
#[derive(Clone, Debug, Default)]
pub struct CellFifo {
    runs: onionlab_core::HeadDeque<CellRun>,
    cells: u64,
}

impl CellFifo {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of cells queued.
    #[inline]
    pub fn len(&self) -> u64 {
        self.cells
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cells == 0
    }

    /// Appends a run, merging it with the last one when they are the same kind.
    #[inline]
    pub fn push(&mut self, run: CellRun) {
        if run.count == 0 {
            return;
        }
        self.cells += run.count as u64;
        if let Some(last) = self.runs.back_mut() {
            if last.same_kind(&run) {
                last.count += run.count;
                return;
            }
        }
        self.runs.push_back(run);
    }

    /// The first cell's run (with the run's full count), if any.
    #[inline]
    pub fn front(&self) -> Option<&CellRun> {
        self.runs.front()
    }

    /// Removes up to `max` cells from the front, all from the first run.
    #[inline]
    pub fn pop_front_run(&mut self, max: u32) -> Option<CellRun> {
        let front = self.runs.front_mut()?;
        let n = front.count.min(max);
        let mut out = *front;
        out.count = n;
        front.count -= n;
        if front.count == 0 {
            self.runs.pop_front();
        }
        self.cells -= n as u64;
        Some(out)
    }

    /// Moves up to `max` cells from the front of `self` to the back of `dst`, in order;
    /// returns how many moved.
    // Inlined into the relays' read and write passes: when fat LTO left it out of line
    // the Tor bench ran 2.5 % more instructions (cachegrind), results identical.
    #[inline(always)]
    pub fn move_to(&mut self, dst: &mut CellFifo, max: u64) -> u64 {
        let mut moved = 0;
        while moved < max {
            let want = (max - moved).min(u32::MAX as u64) as u32;
            let Some(run) = self.pop_front_run(want) else { break };
            moved += run.count as u64;
            dst.push(run);
        }
        moved
    }

    /// How many of the first `max` cells (all, if fewer are queued) are of `kind`.
    pub fn count_in_front(&self, max: u64, kind: CellKind) -> u64 {
        let (mut seen, mut found) = (0u64, 0u64);
        for r in self.runs.iter() {
            if seen >= max {
                break;
            }
            let n = u64::from(r.count).min(max - seen);
            seen += n;
            if r.kind == kind {
                found += n;
            }
        }
        found
    }

    /// Drops every cell of circuit `circ`; returns how many were dropped. The runs left
    /// keep their boundaries (runs that become adjacent are not merged).
    pub fn remove_circuit(&mut self, circ: u32) -> u64 {
        let before = self.cells;
        self.runs.retain(|r| r.circ != circ);
        self.cells = self.runs.iter().map(|r| r.count as u64).sum();
        before - self.cells
    }

    pub fn iter(&self) -> impl Iterator<Item = &CellRun> {
        self.runs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(circ: u32, count: u32, kind: CellKind) -> CellRun {
        CellRun { circ, count, dir: Direction::In, kind, target: 0, stream: 0 }
    }

    #[test]
    fn runs_merge_and_split_in_order() {
        let mut q = CellFifo::new();
        q.push(run(1, 3, CellKind::Data));
        q.push(run(1, 2, CellKind::Data));
        q.push(run(2, 1, CellKind::Data));
        q.push(run(1, 4, CellKind::Data));
        assert_eq!(q.len(), 10);
        assert_eq!(q.iter().count(), 3, "adjacent equal runs merge");
        let mut dst = CellFifo::new();
        assert_eq!(q.move_to(&mut dst, 6), 6);
        assert_eq!(dst.iter().map(|r| (r.circ, r.count)).collect::<Vec<_>>(), vec![(1, 5), (2, 1)]);
        assert_eq!(q.iter().map(|r| (r.circ, r.count)).collect::<Vec<_>>(), vec![(1, 4)]);
        assert_eq!(q.remove_circuit(1), 4);
        assert!(q.is_empty());
    }

    /// One cell of a run, as a cell-by-cell model sees it (everything but the count).
    fn key(r: &CellRun) -> (u32, Direction, u8, u8, u16) {
        (r.circ, r.dir, r.kind as u8, r.target, r.stream)
    }

    fn cells(q: &CellFifo) -> Vec<(u32, Direction, u8, u8, u16)> {
        q.iter().flat_map(|r| std::iter::repeat_n(key(r), r.count as usize)).collect()
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32, u32, bool),
        Pop(u32),
        Move(u64),
        Remove(u32),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0..3u32, 0..4u32, any::<bool>()).prop_map(|(c, n, data)| Op::Push(c, n, data)),
            (0..5u32).prop_map(Op::Pop),
            (0..8u64).prop_map(Op::Move),
            (0..3u32).prop_map(Op::Remove),
        ]
    }

    proptest::proptest! {
        /// Against a cell-by-cell model: every operation keeps the same cells in the same
        /// order, the count agrees, and no run is empty (the inline head never hides a
        /// cell behind an empty slot).
        #[test]
        fn fifo_matches_a_cell_by_cell_model(ops in proptest::collection::vec(op(), 0..60)) {
            let mut q = CellFifo::new();
            let mut other = CellFifo::new();
            let mut model: std::collections::VecDeque<_> = Default::default();
            let mut other_model: Vec<_> = Vec::new();
            for o in ops {
                match o {
                    Op::Push(c, n, data) => {
                        let r = run(c, n, if data { CellKind::Data } else { CellKind::CircuitSendme });
                        q.push(r);
                        model.extend(std::iter::repeat_n(key(&r), n as usize));
                    }
                    Op::Pop(max) => {
                        let got = q.pop_front_run(max);
                        match got {
                            Some(r) => {
                                proptest::prop_assert!(r.count <= max && (r.count >= 1 || max == 0));
                                for _ in 0..r.count {
                                    proptest::prop_assert_eq!(model.pop_front(), Some(key(&r)));
                                }
                            }
                            None => proptest::prop_assert!(model.is_empty() || max == 0),
                        }
                    }
                    Op::Move(max) => {
                        let moved = q.move_to(&mut other, max);
                        proptest::prop_assert_eq!(moved, max.min(model.len() as u64));
                        other_model.extend(model.drain(..moved as usize));
                    }
                    Op::Remove(c) => {
                        let before = model.len();
                        model.retain(|k| k.0 != c);
                        proptest::prop_assert_eq!(q.remove_circuit(c), (before - model.len()) as u64);
                    }
                }
                proptest::prop_assert_eq!(cells(&q), model.iter().copied().collect::<Vec<_>>());
                proptest::prop_assert_eq!(q.len(), model.len() as u64);
                proptest::prop_assert_eq!(q.is_empty(), model.is_empty());
                proptest::prop_assert!(q.iter().all(|r| r.count > 0));
                proptest::prop_assert_eq!(q.front().map(key), model.front().copied());
                proptest::prop_assert_eq!(cells(&other), other_model.clone());
            }
        }
    }
}
