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
        // Pareto mean = alpha * scale / (alpha - 1) = 3 s for alpha 1.5, scale 1 s (slow to converge).
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
}
