//! Service classes and the incentive-scheme hook (BRAIDS, Jansen, Hopper and Kim, CCS 2010).
//!
//! **Owns:** [`ServiceClass`], the three classes a BRAIDS relay serves (section 3.4 of the
//! paper; spec `ewma-braids.md` B.6.3), and the [`IncentiveScheme`] trait through which a
//! scheme (tickets, a bank, free handouts: `onionlab_mech::braids`) tells the relay which
//! class each queued cell belongs to. **Must not touch:** queues, channels or the
//! scheduler's order; a scheme only labels cells, and the circuit scheduler
//! ([`crate::hpd::HpdScheduler`]) decides what the labels mean.

use onionlab_core::SimTime;

use crate::node::NodeId;

/// Number of service classes.
pub const CLASSES: usize = 3;

/// A BRAIDS service class, in priority order: a class with a smaller index has the smaller
/// delay parameter (`c_LL < c_HT < c_N`, "proportionately delayed as low-latency :
/// high-throughput : normal").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ServiceClass {
    /// Paid interactive (web) traffic, rate-limited per circuit.
    LowLatency = 0,
    /// Paid bulk traffic: more delay than low-latency, not limited.
    HighThroughput = 1,
    /// Unpaid and legacy traffic.
    Normal = 2,
}

impl ServiceClass {
    pub const ALL: [ServiceClass; CLASSES] = [ServiceClass::LowLatency, ServiceClass::HighThroughput, ServiceClass::Normal];

    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name in configs and results: "low-latency", "high-throughput", "normal".
    pub fn name(self) -> &'static str {
        match self {
            ServiceClass::LowLatency => "low-latency",
            ServiceClass::HighThroughput => "high-throughput",
            ServiceClass::Normal => "normal",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        ServiceClass::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// How a run of cells queued at a relay splits over the classes: at most two pieces (the
/// cells the circuit's paid credit covers, then the rest as [`ServiceClass::Normal`]), in
/// queue order. Counts of zero are skipped by the relay.
pub type ClassSplit = [(ServiceClass, u32); 2];

/// An incentive scheme: labels the cells relays queue with a service class, and keeps its
/// own accounts (tickets, wallets). The relay calls it only on relay hops (positions 1 to 3
/// of a circuit), once per queued cell run, in simulated-time order.
pub trait IncentiveScheme {
    /// Circuit `circ` was created by `client` over `path` (guard, middle, exit) at `now`.
    /// Circuit ids are reused after a circuit closes: this resets whatever the scheme kept
    /// about the id.
    fn on_circuit_created(&mut self, now: SimTime, circ: u32, client: NodeId, path: &[NodeId]);
    /// `n` cells of `circ` join a queue at position `pos` (1 = guard .. 3 = exit) at `now`:
    /// their classes.
    fn classify(&mut self, now: SimTime, circ: u32, pos: usize, n: u32) -> ClassSplit;
    /// The scheme's counters for the run summary (name, value), in a fixed order, with
    /// its accounts brought up to `now` first.
    fn counters(&mut self, now: SimTime) -> Vec<(String, u64)>;
    fn name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_is_priority() {
        for c in ServiceClass::ALL {
            assert_eq!(ServiceClass::from_name(c.name()), Some(c));
        }
        assert_eq!(ServiceClass::from_name("gold"), None);
        assert!(ServiceClass::LowLatency < ServiceClass::HighThroughput && ServiceClass::HighThroughput < ServiceClass::Normal);
    }
}
