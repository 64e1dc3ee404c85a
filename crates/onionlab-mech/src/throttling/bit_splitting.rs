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

#[derive(Clone, Debug)]
pub struct BitSplitting {
    burst: u64,
    denominator: SplitDenominator,
    split: Option<u64>,
    /// (chan, bytes_written) at the last tick, for "active".
    last_written: Vec<(u32, u64)>,
}

impl BitSplitting {
    pub fn new(burst: u64, denominator: SplitDenominator) -> Result<Self, ThrottlingError> {
        check(burst > 0, "burst", || "must be positive".into())?;
        Ok(BitSplitting { burst, denominator, split: None, last_written: Vec::new() })
    }

    /// `floor(B / N)`, or `None` when `N` is 0.
    pub fn split_rate(bandwidth_rate: u64, n: usize) -> Option<u64> {
        (n > 0).then(|| bandwidth_rate / n as u64)
    }
}

impl ThrottlePolicy for BitSplitting {
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision> {
        let n = match self.denominator {
            SplitDenominator::AllOrConnections => guard.or_connections,
            SplitDenominator::ClientConnections => guard.clients.len(),
            SplitDenominator::ActiveClientConnections => {
                let active = guard
                    .clients
                    .iter()
                    .filter(|c| {
                        let before = self.last_written.iter().find(|(ch, _)| *ch == c.chan).map_or(0, |&(_, b)| b);
                        c.bytes_written > before
                    })
                    .count();
                self.last_written = guard.clients.iter().map(|c| (c.chan, c.bytes_written)).collect();
                active.max(1)
            }
        };
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
