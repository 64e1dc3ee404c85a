//! Round robin with per-circuit cell budgets: the circuit scheduler of a relay whose
//! circuits a controller shapes one by one (PredicTor's per-circuit token buckets, which
//! take the place of Tor's circuit scheduling, as PCTCP's per-circuit connections do).
//!
//! **Owns:** the ring of active circuits of one channel end and each shaped circuit's
//! budget: how many cells it may still send until the controller sets the next one.
//! **Must not touch:** the queues; the controller sets budgets through
//! `TorNetwork::set_circuit_budget`, which also wakes the channel.
//!
//! A circuit with no budget set is not shaped (round robin, one cell per turn); a shaped
//! circuit with a budget of zero is skipped until its next budget. Budgets are replaced,
//! not accumulated: what a circuit did not send in one step is gone (the authors' code
//! resets its token buckets each step). A closed circuit's budget stays until its id is
//! shaped again: a reused id can wait at most one controller step for its own budget.

use std::collections::{BTreeMap, VecDeque};

use onionlab_core::SimTime;

use crate::scheduler::{CircPolicyData, CircuitScheduler};

#[derive(Debug, Clone, Default)]
pub struct ShapedRoundRobin {
    ring: VecDeque<u32>,
    budgets: BTreeMap<u32, u64>,
}

impl ShapedRoundRobin {
    pub fn new() -> Self {
        Self::default()
    }

    /// The cells `circ` may still send, if it is shaped.
    pub fn budget(&self, circ: u32) -> Option<u64> {
        self.budgets.get(&circ).copied()
    }
}

impl CircuitScheduler for ShapedRoundRobin {
    fn activate(&mut self, circ: u32, _now: SimTime, _data: &mut CircPolicyData) {
        debug_assert!(!self.ring.contains(&circ));
        self.ring.push_back(circ);
    }

    fn deactivate(&mut self, circ: u32, _data: &mut CircPolicyData) {
        if let Some(i) = self.ring.iter().position(|&c| c == circ) {
            self.ring.remove(i);
        }
    }

    fn pick(&mut self, _now: SimTime) -> Option<(u32, u32)> {
        // The first circuit in turn that may send; the ones passed over keep their turn.
        for _ in 0..self.ring.len() {
            let c = *self.ring.front()?;
            match self.budgets.get(&c) {
                Some(0) => self.ring.rotate_left(1),
                _ => return Some((c, 1)),
            }
        }
        None
    }

    fn on_cells_sent(&mut self, circ: u32, n: u32, _now: SimTime) {
        if let Some(b) = self.budgets.get_mut(&circ) {
            *b = b.saturating_sub(n as u64);
        }
        if self.ring.front() == Some(&circ) {
            self.ring.rotate_left(1);
        }
    }

    fn active(&self) -> usize {
        self.ring.len()
    }

    fn name(&self) -> &'static str {
        "shaped-round-robin"
    }

    fn set_budget(&mut self, circ: u32, cells: Option<u64>) {
        match cells {
            Some(n) => self.budgets.insert(circ, n),
            None => self.budgets.remove(&circ),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(s: &mut ShapedRoundRobin) -> Option<u32> {
        let (c, n) = s.pick(SimTime::ZERO)?;
        s.on_cells_sent(c, n, SimTime::ZERO);
        Some(c)
    }

    #[test]
    fn unshaped_circuits_take_turns_and_shaped_ones_stop_at_their_budget() {
        let mut s = ShapedRoundRobin::new();
        for c in [1, 2, 3] {
            s.activate(c, SimTime::ZERO, &mut CircPolicyData::default());
        }
        s.set_budget(2, Some(2));
        s.set_budget(3, Some(0));
        let order: Vec<u32> = std::iter::from_fn(|| send(&mut s)).take(6).collect();
        // 3 never sends; 2 sends twice, then only 1 is left.
        assert_eq!(order, vec![1, 2, 1, 2, 1, 1]);
        assert_eq!(s.budget(2), Some(0));
        // A new budget replaces the old.
        s.set_budget(3, Some(1));
        s.set_budget(2, None);
        let order: Vec<u32> = std::iter::from_fn(|| send(&mut s)).take(4).collect();
        assert_eq!(order.iter().filter(|&&c| c == 3).count(), 1);
        assert!(order.contains(&2));
    }

    #[test]
    fn nothing_to_send_when_every_shaped_budget_is_spent() {
        let mut s = ShapedRoundRobin::new();
        s.activate(4, SimTime::ZERO, &mut CircPolicyData::default());
        s.set_budget(4, Some(1));
        assert_eq!(send(&mut s), Some(4));
        assert_eq!(s.pick(SimTime::ZERO), None);
        s.deactivate(4, &mut CircPolicyData::default());
        assert_eq!(s.active(), 0);
    }
}
