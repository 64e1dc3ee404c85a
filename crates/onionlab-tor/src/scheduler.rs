//! Circuit schedulers: which circuit's cell goes next on a channel.
//!
//! **Owns:** the [`CircuitScheduler`] trait (tor's `circuitmux` policy, one instance per
//! channel end) and the round-robin policy the 2010-2012 papers call "vanilla".
//! **Must not touch:** queues, buffers or buckets. A scheduler sees circuit ids and is told
//! when circuits gain or lose cells and when cells leave; the relay does the moving.
//!
//! Other schedulers (EWMA in [`crate::ewma`], BRAIDS priorities) implement the same trait
//! and are picked with [`SchedulerKind`]. KIST ([`crate::kist`]) adds a relay-level run
//! across channels on top of a per-channel EWMA circuitmux.

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
    /// The priority of the circuit [`pick`](Self::pick) would choose at `now`, comparable
    /// across the channels of one relay (lower goes first): what a relay-level scheduler
    /// (KIST, [`crate::kist`]) uses to choose between channels, as tor's
    /// `circuitmux_compare_muxes` does. `None` when the policy has no such value or no
    /// circuit is active.
    fn head_priority(&mut self, _now: SimTime) -> Option<f64> {
        None
    }
}

/// Which scheduler a relay runs on its channels.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum SchedulerKind {
    /// Round robin over active circuits, one cell per turn (the papers' "vanilla").
    #[default]
    RoundRobin,
    /// Tor's circuit EWMA with tick-based decay ([`crate::ewma::EwmaScheduler`]).
    Ewma { halflife: onionlab_core::SimDuration, tick: onionlab_core::SimDuration },
    /// The paper's exact-decay EWMA ([`crate::ewma::ExactEwmaScheduler`]).
    EwmaExact { halflife: onionlab_core::SimDuration },
    /// KIST ([`crate::kist`]): a relay-level run every interval over all channels, limited
    /// per socket by the kernel's state; each channel's circuitmux is tor's EWMA with the
    /// given half-life and tick.
    Kist { params: crate::kist::KistParams, halflife: onionlab_core::SimDuration, tick: onionlab_core::SimDuration },
}

impl SchedulerKind {
    pub fn build(self) -> Box<dyn CircuitScheduler> {
        match self {
            SchedulerKind::RoundRobin => Box::new(RoundRobin::new(1)),
            SchedulerKind::Ewma { halflife, tick } => Box::new(crate::ewma::EwmaScheduler::new(halflife, tick)),
            SchedulerKind::EwmaExact { halflife } => Box::new(crate::ewma::ExactEwmaScheduler::new(halflife)),
            SchedulerKind::Kist { halflife, tick, .. } => Box::new(crate::ewma::EwmaScheduler::new(halflife, tick)),
        }
    }

    /// The relay-level KIST parameters, if this is KIST.
    pub fn kist(&self) -> Option<crate::kist::KistParams> {
        match self {
            SchedulerKind::Kist { params, .. } => Some(*params),
            _ => None,
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

#[cfg(test)]
mod invariants {
    use super::*;
    use onionlab_core::SimDuration;
    use proptest::prelude::*;

    fn kinds() -> Vec<SchedulerKind> {
        let h = SimDuration::from_secs(3);
        vec![
            SchedulerKind::RoundRobin,
            SchedulerKind::Ewma { halflife: h, tick: SimDuration::from_secs(1) },
            SchedulerKind::EwmaExact { halflife: h },
            SchedulerKind::Kist { params: crate::kist::KistParams::default(), halflife: h, tick: SimDuration::from_secs(1) },
        ]
    }

    proptest! {
        /// Work-conserving: `pick` answers whenever a circuit is active, and only then;
        /// fair enough that every backlogged circuit is served within the run.
        #[test]
        fn work_conserving_and_every_circuit_served(
            which in 0usize..4,
            backlog in prop::collection::vec(1u64..200, 1..8),
            arrivals in prop::collection::vec(0u64..400, 1..8),
        ) {
            let mut s = kinds()[which].build();
            let n = backlog.len().min(arrivals.len());
            let mut left: Vec<u64> = backlog[..n].to_vec();
            let mut served = vec![0u64; n];
            let mut active = vec![false; n];
            let total: u64 = left.iter().sum();
            let mut now = SimTime::ZERO;
            let mut step = 0u64;
            while served.iter().sum::<u64>() < total {
                for i in 0..n {
                    if !active[i] && left[i] > 0 && arrivals[i] <= step {
                        s.activate(i as u32, now);
                        active[i] = true;
                    }
                }
                let any = active.iter().any(|&a| a);
                let p = s.pick(now);
                prop_assert_eq!(p.is_some(), any, "pick must answer exactly when a circuit is active");
                prop_assert_eq!(s.active(), active.iter().filter(|&&a| a).count());
                if let Some((c, max)) = p {
                    let c = c as usize;
                    prop_assert!(active[c] && max >= 1);
                    s.on_cells_sent(c as u32, 1, now);
                    left[c] -= 1;
                    served[c] += 1;
                    if left[c] == 0 {
                        s.deactivate(c as u32);
                        active[c] = false;
                    }
                }
                step += 1;
                now += SimDuration::from_millis(5);
                prop_assert!(step < 10 * total + 1000, "no progress");
            }
            prop_assert_eq!(served, backlog[..n].to_vec());
        }
    }
}
