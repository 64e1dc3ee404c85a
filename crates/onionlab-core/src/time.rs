//! Simulated time as integer nanoseconds.
//!
//! Integers, not floats, so that sums never drift and two runs with one seed agree to the
//! nanosecond. `u64` nanoseconds cover about 584 years of simulated time.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of simulated time in nanoseconds. Never negative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        SimTime(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time elapsed since `earlier`; zero if `earlier` is later (saturating, never panics).
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        SimDuration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        SimDuration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Self {
        SimDuration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s * 1_000_000_000)
    }
    /// Rounds to the nearest nanosecond; negative or NaN inputs give zero.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            SimDuration(0)
        } else {
            SimDuration((s * 1e9).round().min(u64::MAX as f64) as u64)
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn saturating_mul(self, k: u64) -> Self {
        SimDuration(self.0.saturating_mul(k))
    }

    /// Time to move `bytes` at `bits_per_sec`, rounded up to a whole nanosecond so that a
    /// link never runs faster than its capacity. `bits_per_sec` must be positive.
    pub fn transmission(bytes: u64, bits_per_sec: u64) -> Self {
        debug_assert!(bits_per_sec > 0);
        // 64-bit arithmetic covers any batch below 2 GiB; u128 division is several times slower.
        if bytes < (1 << 31) {
            return SimDuration((bytes * 8_000_000_000).div_ceil(bits_per_sec));
        }
        let num = bytes as u128 * 8 * 1_000_000_000;
        let d = bits_per_sec as u128;
        SimDuration(num.div_ceil(d).min(u64::MAX as u128) as u64)
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}
impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    /// Panics in debug builds if `rhs` is later; use [`SimTime::saturating_since`] when unsure.
    fn sub(self, rhs: SimTime) -> SimDuration {
        debug_assert!(self.0 >= rhs.0, "time subtraction went negative");
        SimDuration(self.0.saturating_sub(rhs.0))
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for SimDuration {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}
impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmission_time_rounds_up() {
        // 1500 B at 1 Gbit/s = 12 µs exactly.
        assert_eq!(SimDuration::transmission(1500, 1_000_000_000).as_nanos(), 12_000);
        // 1 B at 3 bit/s = 8/3 s, rounded up.
        assert_eq!(SimDuration::transmission(1, 3).as_nanos(), 2_666_666_667);
        // Beyond 2 GiB the product no longer fits 64 bits: 4 GiB at 1 Gbit/s = 2^35 ns.
        assert_eq!(SimDuration::transmission(1 << 32, 1_000_000_000).as_nanos(), 1 << 35);
        assert_eq!(SimDuration::transmission((1 << 31) - 1, 8_000_000_000).as_nanos(), (1 << 31) - 1);
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(SimTime::MAX + SimDuration::from_secs(1), SimTime::MAX);
        assert_eq!(SimTime::ZERO.saturating_since(SimTime::from_nanos(5)), SimDuration::ZERO);
        assert_eq!(SimDuration::from_secs_f64(-1.0), SimDuration::ZERO);
        assert_eq!(SimDuration::from_secs_f64(0.25), SimDuration::from_millis(250));
        // Nearest nanosecond, not truncated.
        assert_eq!(SimDuration::from_secs_f64(2.6e-9), SimDuration::from_nanos(3));
    }
}
