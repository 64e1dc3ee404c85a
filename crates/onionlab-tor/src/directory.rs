//! The directory authorities' Stable and Fast flags, computed from relay data.
//!
//! **Owns:** tor's rules for the two flags Tortoise's exemption depends on (tor 0.2.1.28
//! `dirserv.c`, as the Tortoise paper cites them in section 4.1):
//! - **Stable:** weighted mean time between failures at least the median over all
//!   relays, or at least 5 days (`MTBF_TO_GUARANTEE_STABLE`).
//! - **Fast:** bandwidth at least the 12.5th percentile of all relays (the `n/8`-th
//!   smallest; the `n/4`-th when that is under 10 KB/s: tor's `fast_bandwidth` fallback),
//!   the threshold never above 20 KiB/s (`BANDWIDTH_TO_GUARANTEE_FAST`), so "at least 20
//!   KBps or in the top 87.5 %" (the paper's wording).
//!
//! **Must not touch:** the other flags (Guard, Exit, ...), which a network description
//! lists.

use onionlab_core::SimDuration;

/// `MTBF_TO_GUARANTEE_STABLE`: 5 days.
pub const MTBF_TO_GUARANTEE_STABLE: SimDuration = SimDuration::from_secs(5 * 24 * 3600);
/// `BANDWIDTH_TO_GUARANTEE_FAST`: 20 KiB/s.
pub const BANDWIDTH_TO_GUARANTEE_FAST: u64 = 20 * 1024;
/// Below this the n/8 percentile is replaced by the n/4 one (10 KiB/s).
const FAST_FALLBACK_BELOW: u64 = 10 * 1024;

/// What the directory knows about one relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayHistory {
    /// Bandwidth, bytes/s.
    pub bandwidth: u64,
    /// Mean time between failures.
    pub mtbf: SimDuration,
}

/// The Fast bandwidth threshold (bytes/s) for a set of relay bandwidths.
pub fn fast_threshold(bandwidths: &[u64]) -> u64 {
    if bandwidths.is_empty() {
        return BANDWIDTH_TO_GUARANTEE_FAST;
    }
    let mut bw = bandwidths.to_vec();
    bw.sort_unstable();
    let n = bw.len();
    let mut t = bw[n / 8];
    if t < FAST_FALLBACK_BELOW {
        t = bw[n / 4];
    }
    t.min(BANDWIDTH_TO_GUARANTEE_FAST)
}

/// The median MTBF (the lower median for an even count, as tor's `median_double`).
pub fn median_mtbf(relays: &[RelayHistory]) -> SimDuration {
    let mut m: Vec<SimDuration> = relays.iter().map(|r| r.mtbf).collect();
    m.sort_unstable();
    m.get(m.len().saturating_sub(1) / 2).copied().unwrap_or(SimDuration::ZERO)
}

/// (Fast, Stable) for each relay, in order.
pub fn compute_flags(relays: &[RelayHistory]) -> Vec<(bool, bool)> {
    let fast = fast_threshold(&relays.iter().map(|r| r.bandwidth).collect::<Vec<_>>());
    let median = median_mtbf(relays);
    relays.iter().map(|r| (r.bandwidth >= fast, r.mtbf >= median || r.mtbf >= MTBF_TO_GUARANTEE_STABLE)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days(d: f64) -> SimDuration {
        SimDuration::from_secs_f64(d * 86400.0)
    }

    #[test]
    fn stable_is_at_least_the_median_mtbf_or_five_days() {
        let r = |mtbf| RelayHistory { bandwidth: 1 << 20, mtbf };
        let relays = [r(days(1.0)), r(days(2.0)), r(days(4.0)), r(days(3.0)), r(days(0.5))];
        // Median of 0.5, 1, 2, 3, 4 days is 2 days.
        let stable: Vec<bool> = compute_flags(&relays).iter().map(|f| f.1).collect();
        assert_eq!(stable, vec![false, true, true, true, false]);
        // Five days guarantees Stable even above a higher median.
        let relays = [r(days(5.0)), r(days(9.0)), r(days(10.0))];
        assert_eq!(compute_flags(&relays).iter().map(|f| f.1).collect::<Vec<_>>(), vec![true, true, true]);
    }

    #[test]
    fn fast_is_the_top_seven_eighths_or_20_kib() {
        // 16 relays at 15..30 KiB/s: n/8 = 2 -> the third smallest, 17 KiB/s.
        let relays: Vec<_> = (15..31).map(|k| RelayHistory { bandwidth: k * 1024, mtbf: days(1.0) }).collect();
        assert_eq!(fast_threshold(&relays.iter().map(|r| r.bandwidth).collect::<Vec<_>>()), 17 * 1024);
        let fast: Vec<bool> = compute_flags(&relays).iter().map(|f| f.0).collect();
        assert_eq!(fast.iter().filter(|&&f| !f).count(), 2, "the slowest eighth is not Fast");
        // Big relays: the threshold is capped at 20 KiB/s.
        assert_eq!(fast_threshold(&[1 << 20, 2 << 20, 3 << 20]), BANDWIDTH_TO_GUARANTEE_FAST);
        // A tiny n/8 falls back to n/4.
        let bw = [1000, 5000, 12_000, 15_000, 16_000, 17_000, 18_000, 19_000];
        assert_eq!(fast_threshold(&bw), 12_000);
    }

    #[test]
    fn a_median_of_an_even_count_is_the_lower_one() {
        // tor's median_double: element (n - 1) / 2 of the sorted MTBFs: 2 days of 1, 2, 3, 4.
        let r = |d| RelayHistory { bandwidth: 1 << 20, mtbf: days(d) };
        let relays = [r(4.0), r(1.0), r(3.0), r(2.0)];
        assert_eq!(median_mtbf(&relays), days(2.0));
        let stable: Vec<bool> = compute_flags(&relays).iter().map(|f| f.1).collect();
        assert_eq!(stable, vec![true, false, true, true]);
        assert_eq!(median_mtbf(&[]), SimDuration::ZERO);
    }

    #[test]
    fn an_eighth_of_exactly_10_kib_needs_no_fallback() {
        // The n/8-th smallest is 10 KiB, not under it: it is the threshold.
        let bw = [1000, 10 * 1024, 12_000, 15_000, 16_000, 17_000, 18_000, 19_000];
        assert_eq!(fast_threshold(&bw), 10 * 1024);
    }
}
