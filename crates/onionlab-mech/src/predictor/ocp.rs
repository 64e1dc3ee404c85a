//! PredicTor's local optimal control problem: what one relay solves every time step (the
//! paper's problem (25), section 3.3; spec `predictor.md` section 4).
//!
//! **Owns:** assembling problem (25) for the circuits of one relay from its measured queues
//! and its neighbours' predicted trajectories, solving it (a convex quadratic program,
//! with Clarabel), and returning each circuit's planned trajectories.
//! **Must not touch:** the network. Exchanging trajectories between relays, shaping a
//! relay's output to the plan and the edge defaults belong to the controller that calls
//! this.
//!
//! # The problem, per circuit `i` at the relay and stage `k = 0..=horizon`
//! ```text
//! minimise  sum_k d^k ( dr_in^2 + dr_out^2 + dr_extra^2 + r_minus^2 )  [+ slack penalty]
//! with      r_in = r_max - dr_in,  r_out = r_max - dr_out,                            (22), (23)
//!           r^_out = r_out + (r_max - dr_extra) - r_minus                                (24)
//!           s^(k+1)   = s^k  + dt (r_in - r_out)                queue             (25a)
//!           ds^(k+1)  = ds^k + dt (r_in - r_out_pred)           predecessor error (25b)
//!           s^^(k+1)  = s^^k + dt (r_in - r^_out)               virtual queue     (25c)
//!           0 <= s <= s_max,  0 <= s^ <= s_max                                      (25d), (25f)
//!           s_pred - ds >= 0                       data must exist upstream          (15)
//!           sum_{l<=k} r_in <= sum_{l<=k} r^_out_pred   cumulative pull limit        (25i)
//!           0 <= r_out <= r_in_succ (the successor's plan of the previous step)     (25j)
//!           sum over circuits: r_in <= C_in, r_out <= C_out, r^_out <= C_out         (25h), (25k), (25l)
//!           r_in >= 0, r^_out >= 0,  0 <= dr <= r_max,  r_minus >= 0
//! ```
//! with `s^0 = s^^0 = s_init` and `ds^0 = 0` (25n). The paper's typos are read as the spec
//! says: (23) is `r_out = r_max - dr_out`, (25e) is (15), (25f) bounds the virtual queue.
//!
//! # Parameters ([`OcpParams`]) and where they come from
//! - `horizon` N = 10 and discount `d` = 1/3: the paper. Stages run `k = 0..=N` as (25)
//!   sums them (11 input stages; the authors' code used N).
//! - `dt` = 40 ms, `s_max` = 100 cells: not in the paper, from its authors' code (spec
//!   4.7).
//! - `r_max`: the paper's "arbitrary upper limit" of (8), (22)-(24), which "must satisfy
//!   r^max >= max(C_1, C_2, ..., C_n)" (Theorem 1, section 3.1): at least the largest
//!   capacity of the network, which one relay's problem does not know; the caller passes
//!   it ([`OcpParams::new`] takes this relay's larger capacity, the smallest value the
//!   condition allows and what the authors' code used). It must be at least this relay's
//!   capacities.
//! - `capacity_in`, `capacity_out`: cells/s (the code: 0.85 of the relay's rate; the caller
//!   decides).
//! - `slack_penalty` = 1e5: the queue limits are soft, as in the authors' code, so that a
//!   measured queue above `s_max` (measurement noise) leaves the problem feasible; each
//!   cell-step over the limit costs this much (in the scaled units below).
//!
//! Rates are solved in units of `r_max` and queues in units of `r_max * dt`, so every
//! variable is of order one (the authors' code divided by 50 for the same reason).

use clarabel::algebra::CscMatrix;
use clarabel::solver::{DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus, ZeroConeT};
use thiserror::Error;

use super::maxmin::csc_from_rows;

/// Why a problem could not be set up or solved; each names what is wrong.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OcpError {
    #[error("{0}: must be positive and finite, got {1}")]
    Positive(&'static str, f64),
    #[error("discount: must lie in (0, 1], got {0}")]
    Discount(f64),
    #[error("r_max: must be at least the relay's capacity, {1} cells/s (the paper's Theorem 1: at least every capacity), got {0}")]
    RMax(f64, f64),
    #[error("circuits[{0}].{1}: must not be empty")]
    EmptyTrajectory(usize, &'static str),
    #[error("circuits[{0}].{1}: every value must be finite and at least 0")]
    BadValue(usize, &'static str),
    #[error("the solver stopped without a solution: {0}")]
    Solver(String),
}

/// The controller's parameters; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OcpParams {
    /// N: the problem has N + 1 input stages.
    pub horizon: usize,
    /// Seconds per stage.
    pub dt: f64,
    /// d: stage k weighs d^k (floored at 1e-6, as the authors' code).
    pub discount: f64,
    /// Cells.
    pub s_max: f64,
    /// Cells/s.
    pub capacity_in: f64,
    pub capacity_out: f64,
    /// Cells/s: the paper's r^max, at least both capacities (Theorem 1 asks for the
    /// network's largest).
    pub r_max: f64,
    pub slack_penalty: f64,
}

impl OcpParams {
    /// The paper's N and d, the authors' code's dt and s_max, and the given capacities;
    /// r_max the larger of them (a relay alone, or the largest relay of its network).
    pub fn new(capacity_in: f64, capacity_out: f64) -> Self {
        let r_max = capacity_in.max(capacity_out);
        OcpParams { horizon: 10, dt: 0.04, discount: 1.0 / 3.0, s_max: 100.0, capacity_in, capacity_out, r_max, slack_penalty: 1e5 }
    }

    fn validate(&self) -> Result<(), OcpError> {
        for (name, v) in [
            ("dt", self.dt),
            ("s_max", self.s_max),
            ("capacity_in", self.capacity_in),
            ("capacity_out", self.capacity_out),
            ("r_max", self.r_max),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(OcpError::Positive(name, v));
            }
        }
        let cap = self.capacity_in.max(self.capacity_out);
        if self.r_max < cap {
            return Err(OcpError::RMax(self.r_max, cap));
        }
        if !(self.discount > 0.0 && self.discount <= 1.0) {
            return Err(OcpError::Discount(self.discount));
        }
        if !(self.slack_penalty.is_finite() && self.slack_penalty > 0.0) {
            return Err(OcpError::Positive("slack_penalty", self.slack_penalty));
        }
        Ok(())
    }

    /// Input stages: N + 1.
    pub fn stages(&self) -> usize {
        self.horizon + 1
    }
}

/// What the relay knows about one circuit when it solves: its queue, and its neighbours'
/// latest trajectories, aligned to this step (element k is stage k). A trajectory shorter
/// than the horizon is padded with its last element (the authors' code does the same).
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitInput {
    /// Cells queued for the circuit here now.
    pub s_init: f64,
    /// The predecessor's planned outgoing rate (cells/s).
    pub pred_r_out: Vec<f64>,
    /// The predecessor's predicted queue (cells), stage 0 = now.
    pub pred_s: Vec<f64>,
    /// The predecessor's virtual outgoing rate (cells/s).
    pub pred_rhat_out: Vec<f64>,
    /// The successor's planned incoming rate from its previous step (cells/s): this
    /// relay's limit on its outgoing rate (13). `None`: no successor limits it (the last
    /// hop, or no feedback yet: "go full blast").
    pub succ_r_in: Option<Vec<f64>>,
}

/// One circuit's plan: rates per stage (cells/s) and queues per state (cells, state 0 =
/// now).
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitPlan {
    pub r_in: Vec<f64>,
    pub r_out: Vec<f64>,
    pub rhat_out: Vec<f64>,
    pub s: Vec<f64>,
    pub shat: Vec<f64>,
    /// The relay's estimate of the predecessor's queue, `s_pred - ds` (15).
    pub pred_s_estimate: Vec<f64>,
}

/// Variables per circuit and stage: r_in, r_out, the extra virtual rate, r_minus (0-3);
/// the slacks of the queue and virtual-queue limits after the stage; and the states after
/// the stage: the queue, the virtual queue and the cells pulled so far.
const VARS: usize = 9;
const SLACK: usize = 4;
const SLACK_HAT: usize = 5;
const QUEUE: usize = 6;
const QUEUE_HAT: usize = 7;
const PULLED: usize = 8;

fn padded(v: &[f64], k: usize) -> f64 {
    v[k.min(v.len() - 1)]
}

/// Solves problem (25) for the circuits of one relay.
pub fn solve(params: &OcpParams, circuits: &[CircuitInput]) -> Result<Vec<CircuitPlan>, OcpError> {
    params.validate()?;
    for (i, c) in circuits.iter().enumerate() {
        let mut trajectories = vec![("pred_r_out", &c.pred_r_out), ("pred_s", &c.pred_s), ("pred_rhat_out", &c.pred_rhat_out)];
        if let Some(s) = &c.succ_r_in {
            trajectories.push(("succ_r_in", s));
        }
        for (name, v) in trajectories {
            if v.is_empty() {
                return Err(OcpError::EmptyTrajectory(i, name));
            }
            if v.iter().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(OcpError::BadValue(i, name));
            }
        }
        if !c.s_init.is_finite() || c.s_init < 0.0 {
            return Err(OcpError::BadValue(i, "s_init"));
        }
    }
    let h = params.stages();
    let p = circuits.len();
    if p == 0 {
        return Ok(Vec::new());
    }
    let r = params.r_max;
    let q_unit = r * params.dt;
    // Variables per circuit and stage k: the four inputs and the two slacks (see VARS),
    // then the states after the stage: queue, virtual queue and cells pulled so far. With
    // the states as variables and their dynamics as equalities, every row is short and
    // the solver's factorisation stays sparse (a condensed form with cumulative sums has
    // rows of O(horizon) entries and is several times slower).
    let var = |i: usize, k: usize, j: usize| (i * h + k) * VARS + j;
    let n = p * h * VARS;
    let weight = |k: usize| params.discount.powi(k as i32).max(1e-6);

    // Objective: per stage d^k ((1 - r_in)^2 + (1 - r_out)^2 + (1 - x)^2 + m^2) in scaled
    // units (dr = 1 - r), plus the slacks' penalty.
    let mut diag = vec![0.0; n];
    let mut q = vec![0.0; n];
    for i in 0..p {
        for k in 0..h {
            let w = weight(k);
            for j in 0..4 {
                diag[var(i, k, j)] = 2.0 * w;
            }
            for j in 0..3 {
                q[var(i, k, j)] = -2.0 * w;
            }
            q[var(i, k, SLACK)] = params.slack_penalty;
            q[var(i, k, SLACK_HAT)] = params.slack_penalty;
        }
    }
    let nz: Vec<usize> = (0..n).filter(|&v| diag[v] != 0.0).collect();
    let mut colptr = vec![0usize; n + 1];
    for v in 0..n {
        colptr[v + 1] = colptr[v] + usize::from(diag[v] != 0.0);
    }
    let pm = CscMatrix::new(n, n, colptr, nz.clone(), nz.iter().map(|&v| diag[v]).collect());

    // Equalities (the dynamics) first, then inequalities `a x <= b`.
    let mut eq_rows: Vec<Vec<(usize, f64)>> = Vec::new();
    let mut eq_b: Vec<f64> = Vec::new();
    let mut rows: Vec<Vec<(usize, f64)>> = Vec::new();
    let mut b: Vec<f64> = Vec::new();
    let mut le = |row: Vec<(usize, f64)>, bound: f64| {
        rows.push(row);
        b.push(bound);
    };
    for (i, c) in circuits.iter().enumerate() {
        let s0 = c.s_init / q_unit;
        let smax = params.s_max / q_unit;
        let mut pred_out_sum = 0.0;
        let mut pred_hat_sum = 0.0;
        for k in 0..h {
            let (rin, rout, x, m) = (var(i, k, 0), var(i, k, 1), var(i, k, 2), var(i, k, 3));
            let (eps, epsh) = (var(i, k, SLACK), var(i, k, SLACK_HAT));
            let (sq, sh, pulled) = (var(i, k, QUEUE), var(i, k, QUEUE_HAT), var(i, k, PULLED));
            // The states after stage k from those after stage k - 1 (or the initial ones).
            let before = |j: usize| if k == 0 { None } else { Some(var(i, k - 1, j)) };
            let dyn_row = |state: usize, prev: Option<usize>, terms: &[(usize, f64)], init: f64| {
                let mut row = vec![(state, 1.0)];
                if let Some(pv) = prev {
                    row.push((pv, -1.0));
                }
                row.extend(terms.iter().map(|&(v, a)| (v, -a)));
                (row, if prev.is_none() { init } else { 0.0 })
            };
            for (row, rhs) in [
                dyn_row(sq, before(QUEUE), &[(rin, 1.0), (rout, -1.0)], s0), // (25a)
                dyn_row(sh, before(QUEUE_HAT), &[(rin, 1.0), (rout, -1.0), (x, -1.0), (m, 1.0)], s0), // (25c)
                dyn_row(pulled, before(PULLED), &[(rin, 1.0)], 0.0),
            ] {
                eq_rows.push(row);
                eq_b.push(rhs);
            }
            let out_max = c.succ_r_in.as_ref().map_or(1.0, |s| (padded(s, k) / r).min(1.0));
            for (v, hi) in [(rin, Some(1.0)), (rout, Some(out_max)), (x, Some(1.0)), (m, None), (eps, None), (epsh, None)] {
                le(vec![(v, -1.0)], 0.0);
                if let Some(hi) = hi {
                    le(vec![(v, 1.0)], hi);
                }
            }
            le(vec![(rout, -1.0), (x, -1.0), (m, 1.0)], 0.0); // (25m) r^_out >= 0
            le(vec![(sq, -1.0)], 0.0); // (25d)
            le(vec![(sq, 1.0), (eps, -1.0)], smax); // (25d), soft
            le(vec![(sh, -1.0)], 0.0); // (25f)
            le(vec![(sh, 1.0), (epsh, -1.0)], smax); // (25f), soft
            pred_out_sum += padded(&c.pred_r_out, k) / r;
            pred_hat_sum += padded(&c.pred_rhat_out, k) / r;
            le(vec![(pulled, 1.0)], padded(&c.pred_s, k + 1) / q_unit + pred_out_sum); // (15)
            le(vec![(pulled, 1.0)], pred_hat_sum); // (25i)
        }
    }
    for k in 0..h {
        le((0..p).map(|i| (var(i, k, 0), 1.0)).collect(), params.capacity_in / r); // (25h)
        le((0..p).map(|i| (var(i, k, 1), 1.0)).collect(), params.capacity_out / r); // (25k)
        le((0..p).flat_map(|i| [(var(i, k, 1), 1.0), (var(i, k, 2), 1.0), (var(i, k, 3), -1.0)]).collect(), params.capacity_out / r);
        // (25l)
    }
    let n_eq = eq_rows.len();
    eq_rows.extend(rows);
    eq_b.extend(b);
    let a = csc_from_rows(&eq_rows, n);
    let cones = [ZeroConeT(n_eq), NonnegativeConeT(eq_b.len() - n_eq)];
    // Tolerance: an absolute duality gap of 1e-6 in scaled units (a millionth of the
    // capacity, far below a cell per step). The relative gap is set out of reach: once a
    // queue is above s_max its slack costs 1e5 per cell, the objective is large, and a gap
    // of 1e-6 relative to it left stage-0 rates up to a third of C from the optimum
    // (150 random problems: up to 374 cells/s of 1000; now within 0.1 of a 1e-12 solve).
    let settings = DefaultSettingsBuilder::default()
        .verbose(false)
        .max_iter(200)
        .tol_gap_abs(1e-6)
        .tol_gap_rel(1e-12)
        .tol_feas(1e-6)
        .build()
        .expect("valid settings");
    let mut solver = DefaultSolver::new(&pm, &q, &a, &eq_b, &cones, settings).map_err(|e| OcpError::Solver(format!("{e:?}")))?;
    solver.solve();
    let x = match solver.solution.status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => &solver.solution.x,
        s => return Err(OcpError::Solver(format!("{s:?}"))),
    };
    // Back to cells/s and cells; tiny negative values of the interior-point solution are 0.
    let val = |v: usize| x[v].max(0.0);
    Ok(circuits
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let r_in: Vec<f64> = (0..h).map(|k| val(var(i, k, 0)) * r).collect();
            let r_out: Vec<f64> = (0..h).map(|k| val(var(i, k, 1)) * r).collect();
            let rhat_out: Vec<f64> = (0..h).map(|k| (val(var(i, k, 1)) + val(var(i, k, 2)) - val(var(i, k, 3))).max(0.0) * r).collect();
            let mut s = vec![c.s_init];
            let mut shat = vec![c.s_init];
            let mut pred = vec![padded(&c.pred_s, 0)];
            let mut ds = 0.0;
            for k in 0..h {
                s.push(s[k] + params.dt * (r_in[k] - r_out[k]));
                shat.push(shat[k] + params.dt * (r_in[k] - rhat_out[k]));
                ds += params.dt * (r_in[k] - padded(&c.pred_r_out, k));
                pred.push(padded(&c.pred_s, k + 1) - ds);
            }
            CircuitPlan { r_in, r_out, rhat_out, s, shat, pred_s_estimate: pred }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: f64 = 1000.0; // cells/s

    /// A circuit with `queued` cells here and a predecessor that has plenty and would send
    /// at full rate; no successor limit.
    fn plentiful(queued: f64) -> CircuitInput {
        CircuitInput { s_init: queued, pred_r_out: vec![C], pred_s: vec![1e6], pred_rhat_out: vec![C], succ_r_in: None }
    }

    /// Every constraint of (25) holds in a plan, to a small tolerance (cells or cells/s).
    fn check(params: &OcpParams, inputs: &[CircuitInput], plans: &[CircuitPlan]) {
        let tol = 1e-3 * C;
        let h = params.stages();
        for (c, p) in inputs.iter().zip(plans) {
            let mut pulled = 0.0;
            let mut limit = 0.0;
            for k in 0..h {
                assert!(p.r_in[k] >= 0.0 && p.r_out[k] >= 0.0 && p.rhat_out[k] >= 0.0);
                if let Some(s) = &c.succ_r_in {
                    assert!(p.r_out[k] <= padded(s, k) + tol, "(25j) at {k}: {} > {}", p.r_out[k], padded(s, k));
                }
                pulled += p.r_in[k];
                limit += padded(&c.pred_rhat_out, k);
                assert!(pulled <= limit + tol, "(25i) at {k}");
            }
            for k in 0..=h {
                let qtol = tol * params.dt;
                assert!(p.s[k] >= -qtol && p.s[k] <= params.s_max.max(c.s_init) + qtol, "(25d) s[{k}] = {}", p.s[k]);
                assert!(p.shat[k] >= -qtol && p.shat[k] <= params.s_max.max(c.s_init) + qtol, "(25f) s^[{k}] = {}", p.shat[k]);
                assert!(p.pred_s_estimate[k] >= -qtol, "(15) at {k}: {}", p.pred_s_estimate[k]);
            }
        }
        for k in 0..h {
            let sum = |f: &dyn Fn(&CircuitPlan) -> f64| plans.iter().map(f).sum::<f64>();
            assert!(sum(&|p| p.r_in[k]) <= params.capacity_in + tol, "(25h) at {k}");
            assert!(sum(&|p| p.r_out[k]) <= params.capacity_out + tol, "(25k) at {k}");
            assert!(sum(&|p| p.rhat_out[k]) <= params.capacity_out + tol, "(25l) at {k}");
        }
    }

    #[test]
    fn backlogged_circuits_share_the_node_equally_at_full_capacity() {
        // Figure 3, point 1: all circuits get the same rate at the start, limited only by
        // the node's capacity.
        let params = OcpParams::new(C, C);
        let inputs = vec![plentiful(50.0), plentiful(50.0), plentiful(50.0)];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        let first: Vec<f64> = plans.iter().map(|p| p.r_out[0]).collect();
        for r in &first {
            assert!((r - C / 3.0).abs() < 1e-3 * C, "{first:?}");
        }
    }

    #[test]
    fn a_lone_backlogged_circuit_is_planned_at_four_fifths_of_the_capacity() {
        // Hand-worked from (22)-(25), r_max = C_in = C_out = C, one circuit with its queue
        // at s_max and a predecessor with plenty. (25d) keeps r_in <= r_out (the queue is
        // full), and (25l) with (24) reads r_out + (C - dr_extra) - r_minus <= C, i.e.
        // dr_extra + r_minus >= r_out, cheapest split evenly: cost r_out^2 / 2. With
        // r_in = r_out = x a stage costs 2 (C - x)^2 + x^2 / 2, least at x = 4C/5. Each
        // stage weighs its queue's shadow price alike (0.4 C), so no stage gains by
        // draining the queue for a later one, and the virtual queue falls 0.2 C dt = 8
        // cells a stage, 88 over the horizon, within the 100 it starts with. With two or
        // more circuits (25k) binds first (the test above: C/3 each); a lone circuit is
        // the only one the virtual-rate terms hold below the node's capacity.
        let params = OcpParams::new(C, C);
        let inputs = vec![plentiful(params.s_max)];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        // Stages weighed d^5 = 1/243 and less are solved only as closely as the duality
        // gap allows (stage 9 is 68 cells/s off at a cost of 6e-7): stage 0 is the one
        // the relay applies.
        let p = &plans[0];
        for k in 0..5 {
            assert!((p.r_in[k] - 800.0).abs() < 0.5 && (p.r_out[k] - 800.0).abs() < 0.5, "stage {k}: in {:?}, out {:?}", p.r_in, p.r_out);
            assert!((p.rhat_out[k] - C).abs() < 0.5, "stage {k}: {:?}", p.rhat_out);
            assert!((p.shat[k + 1] - (100.0 - 8.0 * (k + 1) as f64)).abs() < 0.1, "{:?}", p.shat);
        }
    }

    #[test]
    fn an_r_max_of_four_thirds_of_the_capacity_plans_a_lone_circuit_at_full_capacity() {
        // The test above with r^max > C, which Theorem 1 allows ("r^max >= max(C_1, ...,
        // C_n)") and asks for wherever a larger relay is in the network. (25l) with (24)
        // now reads dr_extra + r_minus >= r_out + r_max - C, cheapest split evenly; with
        // r_in = r_out = x a stage costs 2 (r_max - x)^2 + (x + r_max - C)^2 / 2, least at
        // x = (3 r_max + C) / 5, which reaches C at r_max = 4C/3. The node's capacity
        // (25k) caps it there.
        for (r_max, want) in [(C, 800.0), (1.2 * C, 920.0), (4.0 * C / 3.0, C), (2.0 * C, C)] {
            let params = OcpParams { r_max, ..OcpParams::new(C, C) };
            let inputs = vec![plentiful(params.s_max)];
            let plans = solve(&params, &inputs).unwrap();
            check(&params, &inputs, &plans);
            let p = &plans[0];
            assert!((p.r_out[0] - want).abs() < 0.5 && (p.r_in[0] - want).abs() < 0.5, "r_max {r_max}: {:?}", p.r_out);
        }
    }

    #[test]
    fn a_free_circuit_beside_a_limited_one_gets_the_rest_of_the_node_once_r_max_is_above_its_capacity() {
        // Two backlogged circuits (queues full, so r_in = r_out), circuit 2's successor
        // takes only a = 100 cells/s. Max-min: circuit 1 gets C - a = 900. Hand-worked:
        // circuit 1 at x, circuit 2 at a; (25l) with (24) needs the four extra/minus terms
        // to sum to at least x + a + 2 r_max - C, cheapest split evenly (cost y^2 / 4), so
        // a stage costs 2 (r_max - x)^2 + 2 (r_max - a)^2 + (x + a + 2 r_max - C)^2 / 4,
        // least at x = (6 r_max + C - a) / 9: 766.7 with r_max = C (the relay's own
        // capacity, the authors' code), 23 % below max-min; with r_max = 2C that is 1433,
        // above what (25k) leaves, so circuit 1 gets all of C - a = 900.
        for (r_max, want) in [(C, (7.0 * C - 100.0) / 9.0), (2.0 * C, 900.0)] {
            let params = OcpParams { r_max, ..OcpParams::new(C, C) };
            let mut limited = plentiful(params.s_max);
            limited.succ_r_in = Some(vec![100.0]);
            let inputs = vec![plentiful(params.s_max), limited];
            let plans = solve(&params, &inputs).unwrap();
            check(&params, &inputs, &plans);
            assert!((plans[0].r_out[0] - want).abs() < 0.5, "r_max {r_max}: {:?}", plans[0].r_out);
            assert!((plans[1].r_out[0] - 100.0).abs() < 0.5, "r_max {r_max}: {:?}", plans[1].r_out);
        }
    }

    #[test]
    fn an_r_max_below_the_capacity_is_refused() {
        // Theorem 1: r^max >= max(C_1, ..., C_n), so at least this relay's capacities.
        let params = OcpParams { r_max: 900.0, ..OcpParams::new(C, C) };
        assert_eq!(
            solve(&params, &[]).unwrap_err().to_string(),
            "r_max: must be at least the relay's capacity, 1000 cells/s (the paper's Theorem 1: at least every capacity), got 900"
        );
    }

    #[test]
    fn an_empty_predecessor_stops_the_pull_once_its_data_is_taken() {
        // Figure 3, point 6: the predecessor holds 100 cells and plans to send none. The
        // relay may pull at most those 100 cells over the horizon; it pulls them early
        // (the discount), and its planned incoming rate then drops to zero.
        let params = OcpParams::new(C, C);
        let inputs =
            vec![CircuitInput { s_init: 0.0, pred_r_out: vec![0.0], pred_s: vec![100.0], pred_rhat_out: vec![C], succ_r_in: None }];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        let p = &plans[0];
        let pulled: f64 = p.r_in.iter().map(|r| r * params.dt).sum();
        assert!((pulled - 100.0).abs() < 0.5, "pulled {pulled} cells: {:?}", p.r_in);
        assert!(p.r_in[0] > 0.9 * C, "pulls at once: {:?}", p.r_in);
        assert!(p.r_in[params.horizon] < 1e-3 * C, "nothing left to pull at the end: {:?}", p.r_in);
        assert!(p.pred_s_estimate.last().unwrap().abs() < 0.5);
    }

    #[test]
    fn a_limited_successor_is_asked_for_more_through_the_virtual_rate() {
        // Figure 3, point 7: circuit 2's successor accepts only 100 cells/s; circuits 1
        // and 3 have little data (their predecessors are nearly empty), so the node has
        // room. Circuit 2's virtual rate, which ignores the successor's limit, asks for it.
        let params = OcpParams::new(C, C);
        let sparse = CircuitInput { s_init: 5.0, pred_r_out: vec![50.0], pred_s: vec![5.0], pred_rhat_out: vec![50.0], succ_r_in: None };
        let mut limited = plentiful(80.0);
        limited.succ_r_in = Some(vec![100.0]);
        let inputs = vec![sparse.clone(), limited, sparse];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        let p = &plans[1];
        assert!(p.r_out[0] <= 100.0 + 1.0, "{:?}", p.r_out);
        assert!(p.rhat_out[0] > p.r_out[0] + 300.0, "virtual {:?} against real {:?}", p.rhat_out, p.r_out);
        // Its queue grows while the successor holds it back (point 3).
        assert!(p.s[params.stages()] > p.s[0], "{:?}", p.s);
    }

    #[test]
    fn at_a_saturated_node_the_virtual_rates_only_redistribute_capacity() {
        // With every circuit backlogged, the real rates already fill the node, so
        // sum r^_out <= C_out leaves the virtual rates no room above the real ones: (24)
        // builds r^_out as a deviation from r_out, and the symmetric objective keeps it
        // there at stage 0.
        let params = OcpParams::new(C, C);
        let mut limited = plentiful(80.0);
        limited.succ_r_in = Some(vec![100.0]);
        let inputs = vec![plentiful(50.0), limited, plentiful(50.0)];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        assert!((plans[1].rhat_out[0] - plans[1].r_out[0]).abs() < 1.0, "{:?} {:?}", plans[1].rhat_out, plans[1].r_out);
        assert!(plans[0].r_out[0] > 400.0 && plans[2].r_out[0] > 400.0, "the others take what circuit 2 cannot use");
    }

    #[test]
    fn a_queue_above_its_limit_keeps_the_problem_feasible_and_drains() {
        let params = OcpParams::new(C, C);
        let inputs = vec![plentiful(300.0)];
        let plans = solve(&params, &inputs).unwrap();
        let p = &plans[0];
        assert!(p.s[params.stages()] < p.s[0], "drains: {:?}", p.s);
        assert!(p.r_out[0] > p.r_in[0], "sends faster than it pulls: in {:?}, out {:?}", p.r_in, p.r_out);
    }

    #[test]
    fn no_virtual_rate_exceeds_the_nodes_capacity_while_a_queue_drains() {
        // (25l) with (25m): sum r^_out <= C_out and every r^_out >= 0, so no single circuit's
        // virtual rate exceeds C_out. Circuit 1's queue is far above s_max and drains at the
        // whole capacity; circuit 2's virtual rate must not go negative to lend it more.
        let params = OcpParams::new(C, C);
        let inputs = vec![plentiful(300.0), plentiful(50.0)];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        assert!((plans[0].r_out[0] - C).abs() < 1.0, "drains at full capacity: {:?}", plans[0].r_out);
        for p in &plans {
            assert!(p.rhat_out.iter().all(|&r| r <= C + 1.0), "{:?}", p.rhat_out);
        }
    }

    #[test]
    fn with_a_queue_above_s_max_the_other_circuits_inputs_are_still_exact() {
        // Hand-worked (section 4.6's weights d^k, d = 1/3): circuit 1 holds 300 cells, above
        // s_max, takes nothing in and drains at C; circuit 2 holds 50 and sends nothing, so
        // it may take 50 more cells: dt * (r_0 + r_1 + ...) <= 50, i.e. r_0 + r_1 + ... <=
        // 1.25 C. Minimising sum d^k (1 - r_k / C)^2 makes d^k (1 - r_k / C) equal over the
        // stages that take cells: 1 - r_1 / C = 3 (1 - r_0 / C), and stage 2 would need
        // 9 (1 - r_0 / C) > 1, so it takes none. r_0 = 812.5, r_1 = 437.5 cells/s.
        // Circuit 1's slack costs 1e5 per cell in the objective: a tolerance relative to
        // the objective would leave circuit 2's rates tens of cells/s off.
        let params = OcpParams::new(C, C);
        let inputs = vec![plentiful(300.0), plentiful(50.0)];
        let plans = solve(&params, &inputs).unwrap();
        check(&params, &inputs, &plans);
        let r = &plans[1].r_in;
        assert!((r[0] - 812.5).abs() < 1.0 && (r[1] - 437.5).abs() < 1.0, "{r:?}");
        // Stages 2 to 4 take none; from stage 5, with circuit 1 down to s_max, circuit 2 sends
        // and takes cells again (weighed d^5 and less).
        assert!(r[2..5].iter().all(|&x| x < 1.0), "{r:?}");
        assert!(plans[0].r_in[..5].iter().all(|&x| x < 1.0), "takes nothing while above s_max: {:?}", plans[0].r_in);
    }

    #[test]
    fn a_virtual_queue_above_s_max_drains_at_full_capacity_though_the_real_one_cannot() {
        // (25f) bounds the virtual queue by s_max as (25d) bounds the real one, and both
        // start at s_init (25n). 300 cells queued, nothing arriving, the successor takes
        // 100 cells/s (4 a step): the real queue can only fall by 4 a step, but the
        // virtual rate ignores the successor (section 3.3) and drains the virtual queue at
        // C_out, 40 cells a step, down to the limit: 300, 260, ..., 100.
        let params = OcpParams::new(C, C);
        let c = CircuitInput {
            s_init: 300.0,
            pred_r_out: vec![0.0],
            pred_s: vec![0.0],
            pred_rhat_out: vec![0.0],
            succ_r_in: Some(vec![100.0]),
        };
        let p = &solve(&params, &[c]).unwrap()[0];
        for k in 0..=5 {
            assert!((p.s[k] - (300.0 - 4.0 * k as f64)).abs() < 0.5, "s: {:?}", p.s);
            assert!((p.shat[k] - (300.0 - 40.0 * k as f64)).abs() < 0.5, "s^: {:?}", p.shat);
        }
    }

    #[test]
    fn the_defaults_are_the_papers_and_the_authors_code() {
        // Section 5.1: N_horz = 10, d = 1/3; dt 40 ms, s_max 100 cells and the slack
        // penalty 1e5 from the authors' code (spec 4.6, 4.7).
        let params = OcpParams::new(C, C);
        assert_eq!((params.horizon, params.discount, params.dt, params.s_max), (10, 1.0 / 3.0, 0.04, 100.0));
        assert_eq!(params.slack_penalty, 1e5);
        // (25) sums k = 0..=N: N + 1 input stages and N + 2 states (spec 4.8).
        let plan = &solve(&params, &[plentiful(10.0)]).unwrap()[0];
        assert_eq!((plan.r_in.len(), plan.r_out.len(), plan.rhat_out.len()), (11, 11, 11));
        assert_eq!((plan.s.len(), plan.shat.len(), plan.pred_s_estimate.len()), (12, 12, 12));
    }

    #[test]
    fn a_held_back_circuit_fills_its_queue_to_s_max_and_no_further() {
        // (25d): 0 <= s <= s_max = 100 cells. The successor accepts only 100 cells/s (4 a
        // step), the predecessor has plenty and the r_in term pulls as hard as the queue
        // limit allows (backpressure): the queue climbs from 80 to the limit and stays.
        let params = OcpParams::new(C, C);
        let mut c = plentiful(80.0);
        c.succ_r_in = Some(vec![100.0]);
        let plan = &solve(&params, &[c]).unwrap()[0];
        let top = plan.s.iter().copied().fold(0.0, f64::max);
        assert!((top - 100.0).abs() < 0.5, "queue tops out at {top}: {:?}", plan.s);
        assert!((plan.s[params.stages()] - 100.0).abs() < 0.5, "{:?}", plan.s);
    }

    #[test]
    fn the_relay_pulls_no_more_than_its_predecessor_will_ever_hold() {
        // (14), (15): the estimate s_beta - ds of the predecessor's queue stays >= 0. The
        // predecessor holds 400 cells, receives nothing and plans to send 500 cells/s (20
        // a step), so its predicted queue is 400, 380, ..., 180. Whatever the relay's own
        // pace, it can take those 400 cells and no more, though its capacity (40 cells a
        // step over 11 stages, 440) would allow more; the discount makes it take them early.
        let params = OcpParams::new(C, C);
        let pred_s: Vec<f64> = (0..=params.stages()).map(|k| 400.0 - 20.0 * k as f64).collect();
        let c = CircuitInput { s_init: 0.0, pred_r_out: vec![500.0], pred_s, pred_rhat_out: vec![C], succ_r_in: None };
        let plans = solve(&params, std::slice::from_ref(&c)).unwrap();
        check(&params, &[c], &plans);
        let p = &plans[0];
        let pulled: f64 = p.r_in.iter().map(|r| r * params.dt).sum();
        assert!((pulled - 400.0).abs() < 0.5, "pulled {pulled} cells: {:?}", p.r_in);
        assert!(p.pred_s_estimate.last().unwrap().abs() < 0.5, "{:?}", p.pred_s_estimate);
    }

    #[test]
    fn the_successors_limit_applies_stage_by_stage() {
        // (25j): r_out^k <= r_in,gamma^(k-1) at each stage k. The successor takes up to
        // 1000 cells/s now and nothing after; with 80 cells queued and nothing arriving,
        // the relay sends only in stage 0 (not all 40 it could: the virtual queue (25c),
        // (25f) holds the rest for the virtual rate of later stages) and keeps the rest.
        let params = OcpParams::new(C, C);
        let mut succ = vec![0.0; params.stages()];
        succ[0] = C;
        let c = CircuitInput { s_init: 80.0, pred_r_out: vec![0.0], pred_s: vec![0.0], pred_rhat_out: vec![0.0], succ_r_in: Some(succ) };
        let plans = solve(&params, std::slice::from_ref(&c)).unwrap();
        check(&params, &[c], &plans);
        let p = &plans[0];
        assert!(p.r_out[0] > 0.5 * C, "{:?}", p.r_out);
        assert!(p.r_out[1..].iter().all(|&r| r < 1.0), "{:?}", p.r_out);
        let kept = 80.0 - p.r_out[0] * params.dt;
        assert!(p.s[1..].iter().all(|&s| (s - kept).abs() < 0.1), "{:?}", p.s);
    }

    #[test]
    fn a_discount_of_1_is_valid() {
        // d lies in (0, 1]: d = 1 is (25) without discounting.
        let params = OcpParams { discount: 1.0, ..OcpParams::new(C, C) };
        let plans = solve(&params, &[plentiful(50.0)]).unwrap();
        check(&params, &[plentiful(50.0)], &plans);
        for d in [0.0, 1.5] {
            let params = OcpParams { discount: d, ..OcpParams::new(C, C) };
            assert_eq!(solve(&params, &[]).unwrap_err(), OcpError::Discount(d));
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        let mut params = OcpParams::new(C, C);
        params.dt = 0.0;
        assert_eq!(solve(&params, &[]).unwrap_err().to_string(), "dt: must be positive and finite, got 0");
        let params = OcpParams::new(C, C);
        let mut c = plentiful(1.0);
        c.pred_s = vec![];
        assert_eq!(solve(&params, &[c]).unwrap_err().to_string(), "circuits[0].pred_s: must not be empty");
        let mut c = plentiful(1.0);
        c.succ_r_in = Some(vec![f64::NAN]);
        assert_eq!(
            solve(&params, &[plentiful(1.0), c]).unwrap_err().to_string(),
            "circuits[1].succ_r_in: every value must be finite and at least 0"
        );
        assert!(solve(&params, &[]).unwrap().is_empty());
    }
}
