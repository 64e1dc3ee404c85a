//! PrivCount Markov clients: sampling tgen's hidden Markov models (Jansen, Traudt & Hopper,
//! "Privacy-Preserving Dynamic Learning of Tor Network Traffic", CCS 2018), the background
//! traffic tornettools gives its Shadow networks.
//!
//! **Owns:** walking a [`MarkovModel`] the way tgen does (start -> transition to a state;
//! then repeatedly: emit an observation with its delay, and if it is not the end
//! observation, transition), and the mapping of one user's stream model onto onionlab's
//! download-after-a-gap model. **Must not touch:** validation (the config layer guarantees
//! every reachable state emits and can move on, and the first observation is reachable).
//!
//! Mapping (docs/generate.md): each `$` of the stream model is one stream = one download;
//! the emission's delay is the gap before it. The download's size is the number of `-`
//! packets (towards the client) the packet model emits before its `F`, times the packet size;
//! `+` packets and the packet delays are not modelled (onionlab's request is
//! `tor.request_size` and a download runs as fast as the network allows). A stream with no
//! `-` packet downloads one packet. Streams of one user run one after another. When the
//! stream model emits `F` the flow is over; the next flow starts after the workload's pause.

use onionlab_config::markov::{MarkovDelay, MarkovModel};
use onionlab_core::SimDuration;
use rand::Rng;

/// Longest delay a model may produce (a safety bound against overflow: the log-normal
/// tails of the PrivCount models reach years); 30 days.
pub const MAX_DELAY_SECS: f64 = 30.0 * 86_400.0;
/// Safety bound on one walk of the packet model.
const MAX_STEPS: u64 = 1 << 26;

fn pick<R: Rng + ?Sized>(items: &[(usize, f64)], rng: &mut R) -> Option<usize> {
    let total: f64 = items.iter().map(|x| x.1).sum();
    if total <= 0.0 {
        return None;
    }
    let mut x = rng.random::<f64>() * total;
    for &(i, w) in items {
        if x < w {
            return Some(i);
        }
        x -= w;
    }
    items.iter().rev().find(|x| x.1 > 0.0).map(|x| x.0)
}

fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A delay in seconds (tgen's microseconds / 1e6), capped at [`MAX_DELAY_SECS`].
pub fn sample_delay<R: Rng + ?Sized>(d: &MarkovDelay, rng: &mut R) -> f64 {
    let us = match *d {
        MarkovDelay::Zero => 0.0,
        MarkovDelay::Exponential { lambda_per_us } => -(1.0 - rng.random::<f64>()).ln() / lambda_per_us,
        MarkovDelay::LogNormal { mu, sigma } => (mu + sigma * standard_normal(rng)).exp(),
    };
    (us / 1e6).min(MAX_DELAY_SECS)
}

/// A position in a model: `None` before the start transition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    state: Option<usize>,
}

impl Walk {
    /// The next observation and its delay in seconds. The walk restarts from `start`
    /// after it returned the end observation `end`.
    pub fn step<R: Rng + ?Sized>(&mut self, m: &MarkovModel, end: usize, rng: &mut R) -> (usize, f64) {
        let s = match self.state {
            Some(s) => s,
            None => pick(&m.start, rng).expect("validated: start has a positive transition"),
        };
        let em: Vec<(usize, f64)> = m.emissions[s].iter().enumerate().map(|(i, e)| (i, e.weight)).collect();
        let e = &m.emissions[s][pick(&em, rng).expect("validated: reachable states emit")];
        let delay = sample_delay(&e.delay, rng);
        self.state = if e.observation == end {
            None
        } else {
            Some(pick(&m.transitions[s], rng).expect("validated: states that emit more than the end move on"))
        };
        (e.observation, delay)
    }
}

/// Packets of one stream: (towards the client `-`, towards the server `+`).
pub fn sample_stream_packets<R: Rng + ?Sized>(m: &MarkovModel, rng: &mut R) -> (u64, u64) {
    let end = m.observation("F").expect("validated");
    let down = m.observation("-").expect("validated");
    let mut w = Walk::default();
    let (mut d, mut u) = (0u64, 0u64);
    for _ in 0..MAX_STEPS {
        let (o, _) = w.step(m, end, rng);
        if o == end {
            break;
        } else if o == down {
            d += 1;
        } else {
            u += 1;
        }
    }
    (d, u)
}

/// One user of the stream model.
#[derive(Clone, Debug, Default)]
pub struct MarkovUser {
    walk: Walk,
}

impl MarkovUser {
    /// The gap before the next stream, in seconds, and whether flows ended on the way (each
    /// ended flow adds `pause()` seconds to the gap).
    pub fn next_stream<R: Rng + ?Sized>(&mut self, m: &MarkovModel, rng: &mut R, mut pause: impl FnMut(&mut R) -> f64) -> f64 {
        let end = m.observation("F").expect("validated");
        let mut gap = 0.0;
        loop {
            let (o, delay) = self.walk.step(m, end, rng);
            gap += delay;
            if o == end {
                gap += pause(rng);
            } else {
                // `$`: the stream model has no other observation that matters.
                return gap.min(MAX_DELAY_SECS);
            }
        }
    }
}

/// Seconds as a duration.
pub fn secs(s: f64) -> SimDuration {
    SimDuration::from_secs_f64(s.clamp(0.0, MAX_DELAY_SECS))
}

#[cfg(test)]
// The checks below are dense linear algebra over state indices (Gaussian elimination,
// a fundamental matrix): indexing several arrays by one state reads clearer than zips.
#[allow(clippy::needless_range_loop)]
pub(crate) mod tests {
    use super::*;
    use onionlab_core::RngStreams;

    fn model(name: &str, req: &[&str]) -> MarkovModel {
        let path = format!("{}/../../data/traffic/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        MarkovModel::parse(&text, name, req).unwrap()
    }

    /// Solves (I - Q) x = b by Gaussian elimination (small dense systems).
    fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
        let n = b.len();
        for c in 0..n {
            let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs())).unwrap();
            a.swap(c, p);
            b.swap(c, p);
            for r in 0..n {
                if r != c {
                    let f = a[r][c] / a[c][c];
                    for k in c..n {
                        a[r][k] -= f * a[c][k];
                    }
                    b[r] -= f * b[c];
                }
            }
        }
        (0..n).map(|i| b[i] / a[i][i]).collect()
    }

    /// Expected visits to each state per walk from start to the end observation (the
    /// absorbing chain's fundamental matrix applied to the start distribution).
    fn expected_visits(m: &MarkovModel, end: usize) -> Vec<f64> {
        let n = m.states.len();
        // P(continue from s to t) = P(s does not emit end) * P(s -> t).
        let mut q = vec![vec![0.0; n]; n];
        for s in 0..n {
            let tot: f64 = m.emissions[s].iter().map(|e| e.weight).sum();
            let p_end: f64 = m.emissions[s].iter().filter(|e| e.observation == end).map(|e| e.weight).sum::<f64>() / tot.max(1e-300);
            let tt: f64 = m.transitions[s].iter().map(|x| x.1).sum();
            for &(t, w) in &m.transitions[s] {
                q[s][t] += (1.0 - p_end) * w / tt;
            }
        }
        let st: f64 = m.start.iter().map(|x| x.1).sum();
        let mut p0 = vec![0.0; n];
        for &(s, w) in &m.start {
            p0[s] += w / st;
        }
        // visits v = p0 (I - Q)^-1  <=>  (I - Q)^T v = p0.
        let a: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| f64::from(u8::from(i == j)) - q[j][i]).collect()).collect();
        solve(a, p0)
    }

    /// Expected count of observation `o` per walk.
    fn expected_count(m: &MarkovModel, o: usize, end: usize) -> f64 {
        let v = expected_visits(m, end);
        (0..m.states.len())
            .map(|s| {
                let tot: f64 = m.emissions[s].iter().map(|e| e.weight).sum();
                v[s] * m.emissions[s].iter().filter(|e| e.observation == o).map(|e| e.weight).sum::<f64>() / tot.max(1e-300)
            })
            .sum()
    }

    #[test]
    fn packet_counts_match_the_models_expectation() {
        let m = model("packet_model.json", &["-", "+", "F"]);
        let end = m.observation("F").unwrap();
        let want_down = expected_count(&m, m.observation("-").unwrap(), end);
        let want_up = expected_count(&m, m.observation("+").unwrap(), end);
        let mut rng = RngStreams::new(7).stream("test", "packets");
        let n = 20_000;
        let (mut d, mut u) = (Vec::new(), 0u64);
        for _ in 0..n {
            let (a, b) = sample_stream_packets(&m, &mut rng);
            d.push(a as f64);
            u += b;
        }
        let mean = d.iter().sum::<f64>() / n as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // Within 4 standard errors of the analytic mean.
        assert!((mean - want_down).abs() < 4.0 * sd / (n as f64).sqrt() + 1e-9, "down {mean} vs {want_down} (sd {sd})");
        let mean_up = u as f64 / n as f64;
        assert!((mean_up - want_up).abs() / want_up < 0.1, "up {mean_up} vs {want_up}");
        eprintln!("packets per stream: down {mean:.2} (model {want_down:.2}), up {mean_up:.2} (model {want_up:.2})");
        assert!(want_down > 1.0, "the model should download something: {want_down}");
    }

    fn erf(x: f64) -> f64 {
        // Abramowitz-Stegun 7.1.26, |error| < 1.5e-7.
        let t = 1.0 / (1.0 + 0.3275911 * x.abs());
        let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-x * x).exp();
        if x >= 0.0 {
            y
        } else {
            -y
        }
    }

    /// P(delay <= secs) for one emission's delay distribution (microseconds in the model).
    fn delay_cdf(d: &MarkovDelay, secs: f64) -> f64 {
        let us = secs * 1e6;
        match *d {
            MarkovDelay::Zero => 1.0,
            MarkovDelay::Exponential { lambda_per_us } => 1.0 - (-lambda_per_us * us).exp(),
            MarkovDelay::LogNormal { mu, sigma } => {
                if us <= 0.0 {
                    0.0
                } else {
                    0.5 * (1.0 + erf((us.ln() - mu) / (sigma * std::f64::consts::SQRT_2)))
                }
            }
        }
    }

    #[test]
    fn stream_gaps_follow_the_emission_mixture() {
        // Gaps between streams inside a flow (flows are walked one at a time, so no pause
        // enters): the gap of a `$` emitted in state s has that emission's distribution, and
        // the state is s with probability proportional to the expected `$` emissions in s.
        // Compare the empirical CDFs with the mixture CDFs (one-sample Kolmogorov-Smirnov).
        let m = model("stream_model.json", &["$", "F"]);
        let end = m.observation("F").unwrap();
        let dollar = m.observation("$").unwrap();
        let v = expected_visits(&m, end);
        let mut comps = Vec::new();
        for s in 0..m.states.len() {
            for e in &m.emissions[s] {
                if e.observation == dollar {
                    let tot: f64 = m.emissions[s].iter().map(|e| e.weight).sum();
                    comps.push((v[s] * e.weight / tot, e.delay));
                }
            }
        }
        // The first gap of a flow comes from the start distribution's states (independent
        // across flows, so the plain K-S critical value applies).
        let st: f64 = m.start.iter().map(|x| x.1).sum();
        let mut first_comps: Vec<(f64, MarkovDelay)> = Vec::new();
        for &(s, w) in &m.start {
            let tot: f64 = m.emissions[s].iter().map(|e| e.weight).sum();
            for e in m.emissions[s].iter().filter(|e| e.observation == dollar) {
                first_comps.push((w / st * e.weight / tot, e.delay));
            }
        }
        let mix_cdf = |comps: &[(f64, MarkovDelay)], secs: f64| -> f64 {
            let wsum: f64 = comps.iter().map(|c| c.0).sum();
            comps.iter().map(|(w, d)| w / wsum * delay_cdf(d, secs)).sum()
        };
        let ks_of = |xs: &mut Vec<f64>, comps: &[(f64, MarkovDelay)]| -> (f64, f64) {
            xs.sort_by(f64::total_cmp);
            let n = xs.len() as f64;
            let d = xs
                .iter()
                .enumerate()
                .map(|(i, &g)| {
                    let f = mix_cdf(comps, g);
                    (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
                })
                .fold(0.0, f64::max);
            (d, n)
        };
        let mut rng = RngStreams::new(11).stream("test", "gaps");
        let mut gaps = Vec::new();
        let mut first = Vec::new();
        let mut streams_per_flow = Vec::new();
        for _ in 0..20_000 {
            let mut w = Walk::default();
            let mut k = 0.0;
            loop {
                let (o, d) = w.step(&m, end, &mut rng);
                if o == end {
                    break;
                }
                if k == 0.0 {
                    first.push(d);
                }
                k += 1.0;
                gaps.push(d);
            }
            streams_per_flow.push(k);
        }
        // Critical value at alpha = 0.001: 1.95 / sqrt(n).
        let (d1, n1) = ks_of(&mut first, &first_comps);
        eprintln!("first gap of a flow vs model: one-sample K-S D = {d1:.5}, n = {n1}, critical (alpha 0.001) {:.5}", 1.95 / n1.sqrt());
        assert!(d1 < 1.95 / n1.sqrt(), "KS {d1} with n {n1}");
        // All gaps against the visit-weighted mixture. Gaps of one flow are correlated (the
        // chain stays in a state for several streams), which widens the K-S spread beyond
        // the i.i.d. critical value; allow twice it.
        let (d, n) = ks_of(&mut gaps, &comps);
        eprintln!(
            "all gaps vs visit-weighted model mixture: K-S D = {d:.5}, n = {n}, i.i.d. critical (alpha 0.001) {:.5}",
            1.95 / n.sqrt()
        );
        assert!(d < 2.0 * 1.95 / n.sqrt(), "KS {d} with n {n}");
        let want = expected_count(&m, dollar, end);
        let got = streams_per_flow.iter().sum::<f64>() / streams_per_flow.len() as f64;
        eprintln!("streams per flow: {got:.3} (model {want:.3})");
        assert!((got - want).abs() / want < 0.05, "streams per flow {got} vs {want}");
    }

    #[test]
    fn a_user_pauses_between_flows_and_is_deterministic() {
        let m = model("stream_model.json", &["$", "F"]);
        let run = |seed| {
            let mut rng = RngStreams::new(seed).stream("test", "user");
            let mut u = MarkovUser::default();
            (0..200).map(|_| u.next_stream(&m, &mut rng, |_| 1e6)).collect::<Vec<f64>>()
        };
        let a = run(3);
        assert_eq!(a, run(3));
        assert_ne!(a, run(4));
        // Flows end (about 1 in 9 streams), each adding the 1e6 s pause to the next gap.
        assert!(a.iter().any(|&g| g >= 1e6) && a.iter().any(|&g| g < 1e3));
    }

    /// A stream model that alternates deterministically: state `a` emits `$` at once and
    /// moves to `e`, which emits `F` after exactly exp(ln(2e6)) us = 2 s.
    pub(crate) const TWO_SECOND_FLOWS: &str = r#"{"nodes": [{"id": "start"}, {"id": "a", "type": "state"},
        {"id": "e", "type": "state"}, {"id": "$", "type": "observation"}, {"id": "F", "type": "observation"}],
      "links": [{"source": "start", "target": "a", "type": "transition", "weight": 1},
        {"source": "a", "target": "e", "type": "transition", "weight": 1},
        {"source": "a", "target": "$", "type": "emission", "weight": 1},
        {"source": "e", "target": "F", "type": "emission", "weight": 1, "lognorm_mu": 14.508657738524219}]}"#;

    #[test]
    fn a_flows_end_delay_and_the_pause_both_enter_the_next_gap() {
        let m = MarkovModel::parse(TWO_SECOND_FLOWS, "flows.json", &["$", "F"]).unwrap();
        let mut rng = RngStreams::new(1).stream("test", "flows");
        let mut u = MarkovUser::default();
        // The first stream comes at once; every later one after the 2 s end of the previous
        // flow plus the 10 s pause.
        assert_eq!(u.next_stream(&m, &mut rng, |_| 10.0), 0.0);
        for _ in 0..3 {
            let gap = u.next_stream(&m, &mut rng, |_| 10.0);
            assert!((gap - 12.0).abs() < 1e-6, "gap {gap}");
        }
        // A pause past the safety bound is capped there.
        assert_eq!(u.next_stream(&m, &mut rng, |_| 1e12), MAX_DELAY_SECS);
    }

    #[test]
    fn delays_are_microseconds_capped_at_the_safety_bound() {
        let mut rng = RngStreams::new(2).stream("test", "delay");
        // exp(ln(2e6)) us = 2 s; exp(50) us is about 165 years.
        let two = sample_delay(&MarkovDelay::LogNormal { mu: 2e6f64.ln(), sigma: 0.0 }, &mut rng);
        assert!((two - 2.0).abs() < 1e-9, "{two}");
        assert_eq!(sample_delay(&MarkovDelay::LogNormal { mu: 50.0, sigma: 0.0 }, &mut rng), MAX_DELAY_SECS);
        assert_eq!(sample_delay(&MarkovDelay::Zero, &mut rng), 0.0);
    }
}
