//! Bit-splitting: split the guard's bandwidth equally and throttle every client
//! connection at the split (throttling paper section 3.1, algorithm 1; spec 4.2).
//!
//! `splitRate = floor(B / N)` bytes/s with `B` the relay's BandwidthRate, applied to every
//! client connection with a constant burst, every tick. Parameters:
//! - `burst`: bytes, default 2 MiB ([`super::DEFAULT_BURST`]).
//! - `denominator`: what `N` counts. The paper's pseudocode counts every connection of
//!   the relay and applies the rate to client ones, its prose says "all active client
//!   connections"; the authors' code counts open OR connections (relays and clients).
//!   Default [`SplitDenominator::AllOrConnections`] (pseudocode and code agree); the
//!   prose's readings are options.

use std::collections::BTreeMap;

use super::{check, GuardState, ThrottleDecision, ThrottlePolicy, ThrottlingError};

/// What `N` in `B / N` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SplitDenominator {
    /// Open OR connections, to relays and clients (pseudocode and code).
    #[default]
    AllOrConnections,
    /// Client connections only.
    ClientConnections,
    /// Client connections the guard sent data on since the last tick (the prose's
    /// "active client connections"); at least 1.
    ActiveClientConnections,
}

/// Counts `N` for `B / N` as a [`SplitDenominator`] says, every tick; keeps what
/// "active" needs between ticks. Shared by bit-splitting and flagging, whose split is the
/// same.
#[derive(Clone, Debug)]
pub struct SplitCount {
    denominator: SplitDenominator,
    /// Client connections' bytes written at the last tick, by channel id (for "active").
    last_written: BTreeMap<u32, u64>,
}

impl SplitCount {
    pub fn new(denominator: SplitDenominator) -> Self {
        SplitCount { denominator, last_written: BTreeMap::new() }
    }

    /// `N` at this tick. "Active" counts the client connections the guard wrote to since
    /// the last tick (a connection new since then counts if it has written at all), at
    /// least 1.
    pub fn count(&mut self, guard: &GuardState<'_>) -> usize {
        match self.denominator {
            SplitDenominator::AllOrConnections => guard.or_connections,
            SplitDenominator::ClientConnections => guard.clients.len(),
            SplitDenominator::ActiveClientConnections => {
                let last = &self.last_written;
                let active = guard.clients.iter().filter(|c| c.bytes_written > last.get(&c.chan).copied().unwrap_or(0)).count();
                self.last_written = guard.clients.iter().map(|c| (c.chan, c.bytes_written)).collect();
                active.max(1)
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct BitSplitting {
    burst: u64,
    count: SplitCount,
    split: Option<u64>,
}

impl BitSplitting {
    pub fn new(burst: u64, denominator: SplitDenominator) -> Result<Self, ThrottlingError> {
        check(burst > 0, "burst", || "must be positive".into())?;
        Ok(BitSplitting { burst, count: SplitCount::new(denominator), split: None })
    }

    /// `floor(B / N)`, or `None` when `N` is 0.
    pub fn split_rate(bandwidth_rate: u64, n: usize) -> Option<u64> {
        (n > 0).then(|| bandwidth_rate / n as u64)
    }
}

impl ThrottlePolicy for BitSplitting {
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision> {
        let n = self.count.count(guard);
        self.split = Self::split_rate(guard.bandwidth_rate, n);
        match self.split {
            // A split of 0 would stall the connection for good; 1 byte/s is tor's minimum.
            Some(rate) => guard.clients.iter().map(|c| (c.chan, Some((rate.max(1), self.burst)))).collect(),
            None => Vec::new(),
        }
    }

    fn threshold_rate(&self) -> Option<u64> {
        self.split
    }

    fn name(&self) -> &'static str {
        "split"
    }
}
