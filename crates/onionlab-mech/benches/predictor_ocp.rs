//! PredicTor's local problem (25): one relay's solve for 4, 12 and 40 circuits, what a
//! relay of a 50-relay network carries at about 70, 200 and 700 circuits (each circuit
//! has three relays). Every relay solves once per 40 ms step, so a 50-relay network
//! solves 1,250 times per simulated second: the figures here, times 1,250, are the wall
//! seconds the solver costs per simulated second.
//!
//! The inputs are a relay in the thick of it: queues between empty and over the limit,
//! predecessors that plan below capacity, successors that limit some circuits. They are
//! drawn once from a seeded stream, so every run solves the same problems.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use onionlab_core::RngStreams;
use onionlab_mech::predictor::ocp::{solve, CircuitInput, OcpParams};
use rand::Rng;

/// 1 MB/s of 514-byte cells, at the 0.85 the controller plans with.
const CAPACITY: f64 = 0.85 * 1_000_000.0 / 514.0;

fn inputs(circuits: usize) -> Vec<CircuitInput> {
    let mut rng = RngStreams::new(1).stream("bench", "predictor_ocp");
    let h = OcpParams::new(CAPACITY, CAPACITY).stages();
    (0..circuits)
        .map(|_| {
            let share = CAPACITY / circuits as f64;
            let traj = |rng: &mut onionlab_core::SimRng, lo: f64, hi: f64| (0..=h).map(|_| rng.random_range(lo..hi)).collect::<Vec<f64>>();
            let pred_r_out = traj(&mut rng, 0.5 * share, 1.5 * share);
            let pred_rhat_out = pred_r_out.iter().map(|r| r * 1.1).collect();
            let pred_s = traj(&mut rng, 0.0, 120.0);
            let succ_r_in = rng.random_bool(0.5).then(|| traj(&mut rng, 0.3 * share, 1.2 * share));
            CircuitInput { s_init: rng.random_range(0.0..130.0), pred_r_out, pred_s, pred_rhat_out, succ_r_in }
        })
        .collect()
}

fn local_problem(c: &mut Criterion) {
    let mut g = c.benchmark_group("predictor_ocp_solve");
    let params = OcpParams::new(CAPACITY, CAPACITY);
    for &n in &[4usize, 12, 40] {
        let problem = inputs(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &problem, |b, p| b.iter(|| solve(&params, black_box(p)).expect("solvable")));
    }
    g.finish();
}

criterion_group!(benches, local_problem);
criterion_main!(benches);
