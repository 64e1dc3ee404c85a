//! Times PredicTor's local problem: one solve for 3, 10, 30 and 100 circuits at a relay.
//! `cargo run --release -p onionlab-mech --example ocp_time`
use onionlab_mech::predictor::ocp::{solve, CircuitInput, OcpParams};

fn main() {
    for p in [3usize, 10, 30, 100] {
        let params = OcpParams::new(2000.0, 2000.0);
        let inputs: Vec<CircuitInput> = (0..p)
            .map(|i| CircuitInput {
                s_init: (i % 7) as f64 * 15.0,
                pred_r_out: vec![100.0 + i as f64],
                pred_s: vec![50.0 * (i % 3) as f64],
                pred_rhat_out: vec![2000.0],
                succ_r_in: if i % 2 == 0 { Some(vec![300.0]) } else { None },
            })
            .collect();
        let t = std::time::Instant::now();
        let n = 20;
        for _ in 0..n {
            solve(&params, &inputs).expect("solves");
        }
        println!("{p:>4} circuits: {:.2} ms per solve", t.elapsed().as_secs_f64() * 1000.0 / n as f64);
    }
}
