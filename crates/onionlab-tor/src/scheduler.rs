//! Circuit schedulers: which circuit's cell goes next on a channel.
//!
//! **Owns:** the [`CircuitScheduler`] trait (tor's `circuitmux` policy, one instance per
//! channel end) and the round-robin policy the 2010-2012 papers call "vanilla".
//! **Must not touch:** queues, buffers or buckets. A scheduler sees circuit ids and is told
//! when circuits gain or lose cells and when cells leave; the relay does the moving.
//!
//! Later schedulers (EWMA, KIST's per-channel part, BRAIDS priorities) implement the same
//! trait and are picked with [`SchedulerKind`]; relay code does not change.

use onionlab_core::SimTime;

/// Picks circuits for one channel end.
pub trait CircuitScheduler {
    /// `circ` now has cells waiting for this channel (it had none).
    fn activate(&mut self, circ: u32, now: SimTime);
    /// `circ` has no more cells for this channel, or was closed.
    fn deactivate(&mut self, circ: u32);
    /// The circuit whose cells go next and how many of them at most before the scheduler
    /// must be asked again; `None` when no circuit is active.
    fn pick(&mut self, now: SimTime) -> Option<(u32, u32)>;
    /// `n` cells of `circ` (the last pick) were moved to the channel.
    fn on_cells_sent(&mut self, circ: u32, n: u32, now: SimTime);
    /// Number of active circuits.
    fn active(&self) -> usize;
    /// Short name for results and traces.
    fn name(&self) -> &'static str;
}

/// Which scheduler a relay runs on its channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SchedulerKind {
    /// Round robin over active circuits, one cell per turn (the papers' "vanilla").
    #[default]
    RoundRobin,
    /// Tor's circuit EWMA with tick-based decay ([`crate::ewma::EwmaScheduler`]).
    Ewma { halflife: onionlab_core::SimDuration, tick: onionlab_core::SimDuration },
    /// The paper's exact-decay EWMA ([`crate::ewma::ExactEwmaScheduler`]).
    EwmaExact { halflife: onionlab_core::SimDuration },
}

impl SchedulerKind {
    pub fn build(self) -> Box<dyn CircuitScheduler> {
        match self {
            SchedulerKind::RoundRobin => Box::new(RoundRobin::new(1)),
            SchedulerKind::Ewma { halflife, tick } => Box::new(crate::ewma::EwmaScheduler::new(halflife, tick)),
            SchedulerKind::EwmaExact { halflife } => Box::new(crate::ewma::ExactEwmaScheduler::new(halflife)),
        }
    }
}

/// Round robin over the circuits that have cells, `quantum` cells per circuit per turn.
///
/// Tor before circuit EWMA (0.2.1) kept a ring of active circuits per connection and
/// flushed from the first one, then advanced the ring (`connection_or_flush_from_first_active_circuit`);
/// the papers' "vanilla" is this policy. The default quantum of 1 cell is the fair
/// per-cell form; a larger quantum reproduces tor's flush of several cells per turn.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    ring: std::collections::VecDeque<u32>,
    quantum: u32,
    used: u32,
}

impl RoundRobin {
    pub fn new(quantum: u32) -> Self {
        RoundRobin { ring: Default::default(), quantum: quantum.max(1), used: 0 }
    }
}

impl CircuitScheduler for RoundRobin {
    fn activate(&mut self, circ: u32, _now: SimTime) {
        debug_assert!(!self.ring.contains(&circ));
        self.ring.push_back(circ);
    }

    fn deactivate(&mut self, circ: u32) {
        if self.ring.front() == Some(&circ) {
            self.ring.pop_front();
            self.used = 0;
        } else if let Some(i) = self.ring.iter().position(|&c| c == circ) {
            self.ring.remove(i);
        }
    }

    fn pick(&mut self, _now: SimTime) -> Option<(u32, u32)> {
        self.ring.front().map(|&c| (c, self.quantum - self.used))
    }

    fn on_cells_sent(&mut self, circ: u32, n: u32, _now: SimTime) {
        debug_assert_eq!(self.ring.front(), Some(&circ));
        self.used += n;
        if self.used >= self.quantum {
            self.used = 0;
            self.ring.rotate_left(1);
        }
    }

    fn active(&self) -> usize {
        self.ring.len()
    }

    fn name(&self) -> &'static str {
        "round-robin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_alternates_cell_by_cell() {
        let mut rr = RoundRobin::new(1);
        let t = SimTime::ZERO;
        rr.activate(7, t);
        rr.activate(9, t);
        let mut order = vec![];
        for _ in 0..4 {
            let (c, n) = rr.pick(t).unwrap();
            assert_eq!(n, 1);
            order.push(c);
            rr.on_cells_sent(c, 1, t);
        }
        assert_eq!(order, [7, 9, 7, 9]);
        rr.deactivate(7);
        assert_eq!(rr.pick(t), Some((9, 1)));
        rr.deactivate(9);
        assert_eq!(rr.pick(t), None);
    }

    #[test]
    fn quantum_sends_several_cells_per_turn() {
        let mut rr = RoundRobin::new(3);
        let t = SimTime::ZERO;
        rr.activate(1, t);
        rr.activate(2, t);
        assert_eq!(rr.pick(t), Some((1, 3)));
        rr.on_cells_sent(1, 2, t);
        assert_eq!(rr.pick(t), Some((1, 1)));
        rr.on_cells_sent(1, 1, t);
        assert_eq!(rr.pick(t), Some((2, 3)));
    }
}
