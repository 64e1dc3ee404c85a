//! Static throttling: every client connection at `PerConnBWRate`/`PerConnBWBurst`
//! (throttling paper section 3, the baseline "already in Tor"; spec 4.1).
//!
//! Parameters: `rate` (bytes/s; the paper's tuned value is not given, its probing demo
//! uses 5 KiB/s) and `burst` (bytes; default [`super::DEFAULT_BURST`], 2 MiB). Tor applies
//! PerConnBWRate when a connection opens, and so does the model: the run gives a relay
//! with static throttling these buckets on every client connection as it opens (a relay's
//! `perconn`), so each tick of this policy finds them already set. A policy that set them
//! only at its tick would let a new connection run unthrottled for up to a second and then
//! hand it a fresh, full burst.

use super::{check, GuardState, ThrottleDecision, ThrottlePolicy, ThrottlingError};

#[derive(Clone, Debug)]
pub struct StaticThrottle {
    rate: u64,
    burst: u64,
}

impl StaticThrottle {
    pub fn new(rate: u64, burst: u64) -> Result<Self, ThrottlingError> {
        check(rate > 0, "rate", || "must be positive".into())?;
        check(burst > 0, "burst", || "must be positive".into())?;
        Ok(StaticThrottle { rate, burst })
    }
}

impl ThrottlePolicy for StaticThrottle {
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision> {
        guard.clients.iter().map(|c| (c.chan, Some((self.rate, self.burst)))).collect()
    }

    fn threshold_rate(&self) -> Option<u64> {
        Some(self.rate)
    }

    fn name(&self) -> &'static str {
        "static"
    }
}
