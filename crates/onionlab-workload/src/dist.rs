//! Sampling from the configured size and time distributions.
//!
//! **Owns:** the inverse-transform and closed-form samplers for [`SizeDist`] and
//! [`TimeDist`]. **Must not touch:** validation (the config layer guarantees parameters are
//! in range: positive sigma and alpha, non-empty choices, CDFs ending at 1).

use onionlab_config::model::{SizeDist, TimeDist};
use onionlab_core::SimDuration;
use rand::Rng;

/// Draws a size in bytes.
pub fn sample_size<R: Rng + ?Sized>(d: &SizeDist, rng: &mut R) -> u64 {
    match d {
        SizeDist::Fixed { bytes } => *bytes,
        SizeDist::Uniform { min, max } => rng.random_range(*min..=*max),
        SizeDist::Choice { sizes, weights } => {
            let total: f64 = weights.iter().sum();
            let mut x = rng.random::<f64>() * total;
            for (s, w) in sizes.iter().zip(weights) {
                if x < *w {
                    return *s;
                }
                x -= w;
            }
            *sizes.last().expect("validated: choices are non-empty")
        }
    }
}

/// A standard normal deviate (Box-Muller; one of the pair is discarded for simplicity).
fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Draws a duration.
pub fn sample_time<R: Rng + ?Sized>(d: &TimeDist, rng: &mut R) -> SimDuration {
    let secs = match d {
        TimeDist::Fixed { value } => return *value,
        TimeDist::Uniform { min, max } => {
            return SimDuration::from_nanos(rng.random_range(min.as_nanos()..=max.as_nanos()));
        }
        TimeDist::Exponential { mean } => -mean.as_secs_f64() * (1.0 - rng.random::<f64>()).ln(),
        TimeDist::LogNormal { median, sigma } => median.as_secs_f64() * (sigma * standard_normal(rng)).exp(),
        TimeDist::Pareto { scale, alpha } => scale.as_secs_f64() / (1.0 - rng.random::<f64>()).powf(1.0 / alpha),
        TimeDist::Empirical { points, .. } => {
            let u: f64 = rng.random();
            let i = points.partition_point(|&(_, p)| p < u);
            if i == 0 {
                points[0].0
            } else if i >= points.len() {
                points[points.len() - 1].0
            } else {
                let (x0, p0) = points[i - 1];
                let (x1, p1) = points[i];
                if p1 > p0 {
                    x0 + (x1 - x0) * (u - p0) / (p1 - p0)
                } else {
                    x1
                }
            }
        }
    };
    SimDuration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_core::RngStreams;

    fn mean_secs(d: &TimeDist, n: usize) -> f64 {
        let mut rng = RngStreams::new(3).stream("test", "dist");
        (0..n).map(|_| sample_time(d, &mut rng).as_secs_f64()).sum::<f64>() / n as f64
    }

    #[test]
    fn means_match_the_closed_forms() {
        let n = 200_000;
        let exp = TimeDist::Exponential { mean: SimDuration::from_secs(11) };
        assert!((mean_secs(&exp, n) - 11.0).abs() < 0.15);
        // Log-normal mean = median * exp(sigma^2 / 2) = 5 * exp(0.78125) = 10.92 s.
        let ln = TimeDist::LogNormal { median: SimDuration::from_secs(5), sigma: 1.25 };
        assert!((mean_secs(&ln, n) - 10.92).abs() < 0.4, "{}", mean_secs(&ln, n));
        // Pareto mean = alpha * scale / (alpha - 1) = 1.5 s for alpha 3, scale 1 s (a smaller
        // alpha such as 1.5 has infinite variance and converges too slowly to test).
        let p = TimeDist::Pareto { scale: SimDuration::from_secs(1), alpha: 3.0 };
        assert!((mean_secs(&p, n) - 1.5).abs() < 0.02);
        let u = TimeDist::Uniform { min: SimDuration::from_secs(1), max: SimDuration::from_secs(3) };
        assert!((mean_secs(&u, n) - 2.0).abs() < 0.01);
    }

    #[test]
    fn empirical_cdf_is_inverted_by_interpolation() {
        // Uniform on [2, 4] s as a two-point CDF: mean 3 s, median 3 s.
        let d = TimeDist::Empirical { path: "x".into(), points: vec![(2.0, 0.0), (4.0, 1.0)] };
        assert!((mean_secs(&d, 100_000) - 3.0).abs() < 0.01);
        let step = TimeDist::Empirical { path: "x".into(), points: vec![(1.0, 0.5), (7.0, 1.0)] };
        let mut rng = RngStreams::new(1).stream("t", "e");
        for _ in 0..1000 {
            let s = sample_time(&step, &mut rng).as_secs_f64();
            assert!((1.0..=7.0).contains(&s));
        }
    }

    #[test]
    fn choice_follows_its_weights() {
        let d = SizeDist::Choice { sizes: vec![50, 1000, 5000], weights: vec![12.0, 2.0, 1.0] };
        let mut rng = RngStreams::new(2).stream("t", "c");
        let n = 150_000;
        let mut counts = [0usize; 3];
        for _ in 0..n {
            let s = sample_size(&d, &mut rng);
            counts[[50, 1000, 5000].iter().position(|&x| x == s).unwrap()] += 1;
        }
        for (c, w) in counts.iter().zip([12.0, 2.0, 1.0]) {
            let want = n as f64 * w / 15.0;
            assert!((*c as f64 - want).abs() < 4.0 * want.sqrt() + 1.0, "{counts:?}");
        }
    }

    #[test]
    fn lognormal_median_is_the_configured_median() {
        // The median is the scale parameter itself (not the mean): half the draws lie below
        // 5 s. The sample median of 100,000 draws has a relative standard error of about
        // 1.25 * 1.2533 / sqrt(100000) = 0.5 %, so 2 % is four of them.
        let d = TimeDist::LogNormal { median: SimDuration::from_secs(5), sigma: 1.25 };
        let mut rng = RngStreams::new(5).stream("test", "median");
        let mut xs: Vec<f64> = (0..100_000).map(|_| sample_time(&d, &mut rng).as_secs_f64()).collect();
        xs.sort_by(f64::total_cmp);
        let median = xs[xs.len() / 2];
        assert!((median / 5.0 - 1.0).abs() < 0.02, "sample median {median}");
    }

    #[test]
    fn uniform_bounds_are_both_inclusive() {
        // Validation allows min == max (a degenerate range), and max itself must be drawable.
        let mut rng = RngStreams::new(4).stream("test", "uniform");
        assert_eq!(sample_size(&SizeDist::Uniform { min: 7, max: 7 }, &mut rng), 7);
        let three = SimDuration::from_secs(3);
        assert_eq!(sample_time(&TimeDist::Uniform { min: three, max: three }, &mut rng), three);
        let sizes: Vec<u64> = (0..200).map(|_| sample_size(&SizeDist::Uniform { min: 1, max: 2 }, &mut rng)).collect();
        assert!(sizes.contains(&1) && sizes.contains(&2), "{sizes:?}");
        let (one_ns, two_ns) = (SimDuration::from_nanos(1), SimDuration::from_nanos(2));
        let times: Vec<SimDuration> = (0..200).map(|_| sample_time(&TimeDist::Uniform { min: one_ns, max: two_ns }, &mut rng)).collect();
        assert!(times.contains(&one_ns) && times.contains(&two_ns), "{times:?}");
    }

    #[test]
    fn empirical_cdf_with_an_atom_at_its_first_point() {
        // P(X = 1 s) = 0.5 (the CDF starts at 0.5), then uniform on [1, 7] s: mean 0.5 * 1 +
        // 0.5 * 4 = 2.5 s. The binomial standard error of the atom's share over 100,000
        // draws is 0.0016; of the mean, about 0.007 s.
        let d = TimeDist::Empirical { path: "x".into(), points: vec![(1.0, 0.5), (7.0, 1.0)] };
        let mut rng = RngStreams::new(6).stream("test", "atom");
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| sample_time(&d, &mut rng).as_secs_f64()).collect();
        let atom = xs.iter().filter(|&&x| x == 1.0).count() as f64 / n as f64;
        assert!((atom - 0.5).abs() < 0.01, "share at 1 s: {atom}");
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 2.5).abs() < 0.05, "mean {mean}");
        // Three points, two segments of unequal width: P(X <= 1 s) = 0.5, mean 0.5 * 0.5 +
        // 0.5 * 5.5 = 3 s.
        let d = TimeDist::Empirical { path: "x".into(), points: vec![(0.0, 0.0), (1.0, 0.5), (10.0, 1.0)] };
        let xs: Vec<f64> = (0..n).map(|_| sample_time(&d, &mut rng).as_secs_f64()).collect();
        let below = xs.iter().filter(|&&x| x <= 1.0).count() as f64 / n as f64;
        assert!((below - 0.5).abs() < 0.01, "P(X <= 1 s) = {below}");
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.05, "mean {mean}");
    }
}
