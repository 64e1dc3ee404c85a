//! Token buckets as tor implements them (`token_bucket.c`, `connection.c`).
//!
//! **Owns:** one bucket's rate, burst and tokens, and refill at a fixed interval.
//! **Must not touch:** who reads or writes; relays take tokens, policies set rates.
//!
//! Tor refills its buckets from a timer every `TokenBucketRefillInterval` (100 ms in
//! modern tor; once a second in the 2010-2012 tor the throttling and Tortoise papers used).
//! Each refill adds `rate x interval` tokens, capped at the burst. Reading or writing
//! takes tokens. Tor's buckets can go negative (a TLS read may exceed its allotment, and
//! TLS bytes are charged against a plaintext limit); here every transfer is charged
//! exactly, at most what the bucket holds, so they never do.

use onionlab_core::{SimDuration, SimTime};

/// A byte token bucket with a periodic refill.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    /// Refill rate in bytes per second.
    rate: u64,
    /// Capacity in bytes.
    burst: u64,
    tokens: u64,
    /// Fractional bytes carried between refills so slow rates are exact in the long run.
    carry_nanobytes: u64,
}

impl TokenBucket {
    /// A bucket starting full. `burst` below `rate x interval` would waste tokens at
    /// each refill; tor accepts it, and so do we.
    pub fn new(rate_bytes_per_sec: u64, burst_bytes: u64) -> Self {
        TokenBucket { rate: rate_bytes_per_sec, burst: burst_bytes, tokens: burst_bytes, carry_nanobytes: 0 }
    }

    /// A bucket that never limits (tor's default BandwidthRate is 1 GB/s; this is more).
    pub fn unlimited() -> Self {
        TokenBucket::new(u64::MAX / 4, u64::MAX / 4)
    }

    pub fn is_unlimited(&self) -> bool {
        self.rate >= u64::MAX / 4
    }

    #[inline]
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
    pub fn rate(&self) -> u64 {
        self.rate
    }
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Changes rate and burst (tor's `token_bucket_rw_adjust`): tokens are capped at
    /// the new burst.
    pub fn set(&mut self, rate: u64, burst: u64) {
        self.rate = rate;
        self.burst = burst;
        self.tokens = self.tokens.min(burst);
    }

    /// Adds one refill interval's worth of tokens, capped at the burst.
    pub fn refill(&mut self, interval: SimDuration) {
        if self.is_unlimited() {
            return;
        }
        let nb = self.rate as u128 * interval.as_nanos() as u128 + self.carry_nanobytes as u128;
        let add = (nb / 1_000_000_000) as u64;
        self.carry_nanobytes = (nb % 1_000_000_000) as u64;
        self.tokens = self.tokens.saturating_add(add).min(self.burst);
    }

    /// Takes `n` tokens; the caller must not take more than [`tokens`](Self::tokens).
    #[inline]
    pub fn take(&mut self, n: u64) {
        debug_assert!(n <= self.tokens || self.is_unlimited());
        if !self.is_unlimited() {
            self.tokens -= n.min(self.tokens);
        }
    }
}

/// The first refill time strictly after `now` on the grid `k x interval + phase`
/// (`phase < interval`).
pub fn next_refill(now: SimTime, interval: SimDuration, phase: SimDuration) -> SimTime {
    let i = interval.as_nanos().max(1);
    let (t, p) = (now.as_nanos(), phase.as_nanos());
    let k = if t < p { 0 } else { (t - p) / i + 1 };
    SimTime::from_nanos(k * i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_adds_rate_times_interval_and_caps_at_burst() {
        let mut b = TokenBucket::new(1000, 1500);
        b.take(1500);
        b.refill(SimDuration::from_millis(100));
        assert_eq!(b.tokens(), 100);
        for _ in 0..100 {
            b.refill(SimDuration::from_millis(100));
        }
        assert_eq!(b.tokens(), 1500);
    }

    #[test]
    fn fractional_rates_are_exact_over_time() {
        // 7 B/s refilled every 100 ms: 0.7 B per refill, exactly 7 B per second.
        let mut b = TokenBucket::new(7, 1_000_000);
        b.take(1_000_000);
        for _ in 0..10 {
            b.refill(SimDuration::from_millis(100));
        }
        assert_eq!(b.tokens(), 7);
    }

    #[test]
    fn refill_grid() {
        let iv = SimDuration::from_millis(100);
        let z = SimDuration::ZERO;
        assert_eq!(next_refill(SimTime::ZERO, iv, z), SimTime::from_nanos(100_000_000));
        assert_eq!(next_refill(SimTime::from_nanos(150_000_000), iv, z), SimTime::from_nanos(200_000_000));
        // On a grid shifted by 30 ms: 30, 130, 230 ms; strictly after `now`.
        let ph = SimDuration::from_millis(30);
        assert_eq!(next_refill(SimTime::ZERO, iv, ph), SimTime::from_nanos(30_000_000));
        assert_eq!(next_refill(SimTime::from_nanos(30_000_000), iv, ph), SimTime::from_nanos(130_000_000));
        assert_eq!(next_refill(SimTime::from_nanos(150_000_000), iv, ph), SimTime::from_nanos(230_000_000));
    }

    #[test]
    fn set_caps_tokens_at_the_new_burst() {
        // token_bucket_rw_adjust: lowering the burst drops tokens above it.
        let mut b = TokenBucket::new(1000, 1500);
        b.set(500, 400);
        assert_eq!((b.rate(), b.burst(), b.tokens()), (500, 400, 400));
        // Raising it does not add tokens.
        b.set(500, 2000);
        assert_eq!(b.tokens(), 400);
    }
}
