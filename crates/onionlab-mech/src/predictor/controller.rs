//! PredicTor's closed loop: every relay solves its local problem every step, shapes each
//! circuit to the first step of its plan, and exchanges plans with its neighbours
//! (section 3.4 of the paper; spec `predictor.md` sections 5 and 6).
//!
//! **Owns:** the per-relay controller ([`PredictorHook`], a relay hook) and the exchange of
//! trajectories between relays ([`Exchange`], shared by the hooks of one run).
//! **Must not touch:** the relays' internals; a controller sees its circuits and sets
//! budgets through `RelayControl` only.
//!
//! # One step at a relay, every `dt`
//! 1. For each open circuit through the relay, in the data direction (exit to client):
//!    its queue here (`s_init`, cells), and its neighbours' plans of the previous step.
//!    - Predecessor (towards the exit): its planned outgoing rate, queue and virtual rate
//!      of the previous step, taken as they are, stage 0 for now: "we consider information
//!      from the source node at the current time-step k, as both the control action and the
//!      information are delayed" (section 3.2; the authors' code stamps these trajectories
//!      one step later for the same reason). Before it has published anything it is idle
//!      (rate 0, queue 0), as the authors' code assumes. (Until 2026-11-26 they were
//!      advanced by a stage, which dropped the stage that matters most: a relay with the
//!      last cells of a page plans to send them all at once, in stage 0, and its successor,
//!      seeing nothing to take, never asked for them; the cells stayed for good.)
//!    - At the exit the predecessor is the server: its queue is the data the circuit's
//!      streams have still to package (capped at 60 s of the relay's capacity, "virtually
//!      infinite" in the authors' code), falling over the horizon by its planned reads;
//!      its outgoing rate the exit's own previous incoming plan, capped so that all the
//!      stages together read no more than is left (spec 5; until 2026-11-28 the queue was
//!      held constant and each stage capped alone, so an exit with the last 13 cells of a
//!      page planned to package 145); its virtual rate the relay's capacity.
//!    - Successor (towards the client): its incoming-rate plan of the previous step, which
//!      bounds this relay's outgoing rate (the paper's (13)), from its stage 0 as the
//!      paper writes it (the authors' code read it from stage 2, which stalls the last
//!      cells of a transfer under the paper's virtual rates:
//!      [`PredictorParams::successor_shift`]). The guard's successor is the client, which
//!      sets no limit ("go full blast").
//! 2. Solve problem (25) ([`super::ocp::solve`]) with capacities of `capacity_fraction` of
//!    the relay's BandwidthRate, or of its link in that direction where that is slower
//!    (the authors' code: 0.85 x min(BandwidthRate, link DataRate), spec 4.7; the paper
//!    gives no capacity), and the paper's r^max ([`RMax`]: by default the largest capacity
//!    of the network, Theorem 1's condition).
//! 3. Shape: each circuit may send the whole cells of `r_out[0] * dt` towards the client
//!    until the next step, plus the fraction of a cell its earlier budgets left over (a
//!    budget, replaced each step; the authors' code set a bucket of ceil(r_out^0 dt)
//!    bytes, within a byte of the plan; rounding whole cells up, as this did until
//!    2026-11-28, sent up to a cell a step more than planned). At the exit the server's
//!    data is packaged at `r_in[0]` the same way: a grant of `r_in[0] * dt` cells each
//!    step, replacing what the last left, with the fraction carried (spec 5; the authors'
//!    code, `CalculateReadPlan`, set its read bucket for the server connection to
//!    r_in^0 dt bytes of 512-byte cells each step). Until 2026-11-30 this was a rate on a
//!    bucket refilled at the relay's refills, every 100 ms: with dt = 40 ms the exit read
//!    2.5 steps' worth at one step in five and nothing at the others.
//! 4. Publish the plans for the neighbours' next step.
//!
//! Plans travel "out of band", as in the paper's evaluation: a neighbour uses them at its
//! next step, i.e. after `dt` (the authors' code delivered them after the link's nominal
//! one-way latency less 2 ms, nominal even on fuzzed links: 38 ms on the paper's networks,
//! so also before the next step; and shifted their time stamps by one step). The solver's
//! running time is not charged to simulated time (neither was it in the authors'
//! simulations).
//! If a solve fails, the relay lifts its budgets for that step (plain round robin) and
//! counts the failure.
//!
//! Parameters ([`PredictorParams`]): the local problem's ([`super::ocp::OcpParams`]:
//! horizon 10 and discount 1/3 from the paper; dt 40 ms, s_max 100 cells and the soft
//! limits' slack penalty 1e5 from the authors' code, which also had a terminal penalty,
//! not modelled), `capacity_fraction` 0.85 (the authors' code) and r^max.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::cell::CELL_WIRE_BYTES;
use onionlab_tor::{NodeId, RelayCircuit, RelayControl, RelayHook};

use super::ocp::{solve, CircuitInput, CircuitPlan, OcpParams};

/// The paper's r^max (section 3.1, Theorem 1: "an arbitrary upper limit ... which must
/// satisfy r^max >= max(C_1, C_2, ..., C_n)"), in cells/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RMax {
    /// This value on every relay; it must be at least every relay's capacity. The
    /// simulator's default is the largest capacity of the experiment's PredicTor relays,
    /// worked out when the network is built (`onionlab_sim`): the paper's condition.
    Cells(f64),
    /// Each relay's own capacity (the larger of C_in, C_out): what the authors' code used
    /// (spec 4.3). It breaks the paper's condition at every relay smaller than the largest.
    Relay,
}

/// The closed loop's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredictorParams {
    /// Step length; also the controller's period.
    pub dt: SimDuration,
    pub horizon: usize,
    pub discount: f64,
    /// Cells.
    pub s_max: f64,
    /// Share of the relay's capacity (BandwidthRate, or the link where that is slower)
    /// the controller plans with, in (0, 1].
    pub capacity_fraction: f64,
    pub r_max: RMax,
    /// Cost of a cell-step over the soft queue limits (in the solver's scaled units).
    pub slack_penalty: f64,
    /// Stages dropped from the successor's incoming-rate plan of the previous step before
    /// it bounds this relay's outgoing rate ((13); padded with its last stage). The paper
    /// writes r_out^max,k = r_in,gamma^{k-1} without saying which stage of the older plan
    /// meets stage 0 of the new. Default 0: the vectors as written. 2 is the authors' code's
    /// alignment (spec 5: it stamps the plan it sends upstream a step early and the
    /// receiver takes it from its next step on, so a plan made at k-1 is read from the
    /// stage for k+1, when cells sent at k arrive after one step's delivery). That code
    /// predates the paper's virtual rates, and with them 2 stalls the end of a transfer: a
    /// successor offered a transfer's last cells asks for them all at its stage 0, which a
    /// shift of 2 never shows the sender (a 100-cell download keeps its last 19 cells at
    /// the exit for good: `with_the_authors_alignment_of_13_a_transfers_last_cells_stall`).
    /// On endless bulk it shares more fairly (the toy topology's F 1.000 on every seed
    /// against 0.987): `docs/mechanisms/predictor.md`.
    pub successor_shift: usize,
}

impl Default for PredictorParams {
    /// The paper's N and d, the authors' code's dt, s_max, capacity fraction and slack
    /// penalty; r_max each relay's own capacity, which is the paper's condition only on a
    /// network of equal relays (the simulator builds networks with the largest instead).
    fn default() -> Self {
        PredictorParams {
            dt: SimDuration::from_millis(40),
            horizon: 10,
            discount: 1.0 / 3.0,
            s_max: 100.0,
            capacity_fraction: 0.85,
            r_max: RMax::Relay,
            slack_penalty: 1e5,
            successor_shift: 0,
        }
    }
}

/// Why the parameters are not valid; each names the parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictorError {
    #[error("dt: must be positive")]
    Dt,
    #[error("horizon: must be at least 1")]
    Horizon,
    #[error("discount: must lie in (0, 1], got {0}")]
    Discount(f64),
    #[error("s_max: must be positive, got {0}")]
    SMax(f64),
    #[error("capacity_fraction: must lie in (0, 1], got {0}")]
    CapacityFraction(f64),
    #[error("r_max: must be positive and finite, got {0}")]
    RMax(f64),
    #[error("slack_penalty: must be positive and finite, got {0}")]
    SlackPenalty(f64),
    #[error("successor_shift: must be at most the horizon ({horizon}), got {shift}")]
    SuccessorShift { shift: usize, horizon: usize },
}

impl PredictorParams {
    pub fn validate(&self) -> Result<(), PredictorError> {
        if self.dt.as_nanos() == 0 {
            return Err(PredictorError::Dt);
        }
        if self.horizon == 0 {
            return Err(PredictorError::Horizon);
        }
        if !(self.discount > 0.0 && self.discount <= 1.0) {
            return Err(PredictorError::Discount(self.discount));
        }
        if !(self.s_max.is_finite() && self.s_max > 0.0) {
            return Err(PredictorError::SMax(self.s_max));
        }
        if !(self.capacity_fraction > 0.0 && self.capacity_fraction <= 1.0) {
            return Err(PredictorError::CapacityFraction(self.capacity_fraction));
        }
        if let RMax::Cells(r) = self.r_max {
            if !(r.is_finite() && r > 0.0) {
                return Err(PredictorError::RMax(r));
            }
        }
        if !(self.slack_penalty.is_finite() && self.slack_penalty > 0.0) {
            return Err(PredictorError::SlackPenalty(self.slack_penalty));
        }
        if self.successor_shift > self.horizon {
            return Err(PredictorError::SuccessorShift { shift: self.successor_shift, horizon: self.horizon });
        }
        Ok(())
    }

    /// A relay's capacities (C_in, C_out) in cells/s: `capacity_fraction` of its
    /// BandwidthRate, or of its link in that direction where the link is slower (the
    /// authors' code: 0.85 x min(BandwidthRate, link DataRate), spec 4.7), in cells of
    /// [`CELL_WIRE_BYTES`], what the relay's token buckets charge a cell. `link_*` in
    /// bytes/s, `None` where unknown.
    pub fn capacities(&self, bandwidth_rate: u64, link_down: Option<u64>, link_up: Option<u64>) -> (f64, f64) {
        let cells = |link: Option<u64>| {
            let bytes = link.map_or(bandwidth_rate, |l| l.min(bandwidth_rate));
            bytes as f64 * self.capacity_fraction / CELL_WIRE_BYTES as f64
        };
        (cells(link_down), cells(link_up))
    }
}

/// A circuit's budget for the next step: the whole cells of its plan for the step plus
/// the fraction its earlier budgets left over, so that over many steps the budgets sum to
/// the planned rate (the authors' code set a bucket of ceil(r_out^0 dt) bytes, within a
/// byte of the plan; rounding a step's cells up instead added up to a cell a step).
/// Returns the budget and the fraction to carry, in [0, 1).
fn step_budget(planned_cells: f64, carried: f64) -> (u64, f64) {
    let due = planned_cells.max(0.0) + carried;
    let whole = (due + 1e-9).floor();
    (whole as u64, (due - whole).max(0.0))
}

/// The fractions of a cell one circuit's grants have left over: its step budgets towards
/// the client and, at its exit, its reads from the server.
#[derive(Clone, Copy, Debug, Default)]
struct Carry {
    send: f64,
    read: f64,
}

/// A relay's published plan for one circuit.
#[derive(Clone, Debug, PartialEq)]
struct Published {
    r_in: Vec<f64>,
    r_out: Vec<f64>,
    s: Vec<f64>,
    rhat_out: Vec<f64>,
}

/// The plans of one run's relays, by (circuit, relay): those of the previous step, which
/// relays read, and those of the current step, which they write.
#[derive(Debug, Default)]
pub struct Exchange {
    step: u64,
    previous: BTreeMap<(u32, NodeId), Published>,
    current: BTreeMap<(u32, NodeId), Published>,
    /// Solves and failed solves so far, and the circuits they covered.
    pub solves: u64,
    pub failures: u64,
    pub circuit_solves: u64,
}

impl Exchange {
    /// Moves to `step`: what was written becomes what is read.
    fn advance(&mut self, step: u64) {
        if step != self.step {
            self.previous = std::mem::take(&mut self.current);
            if step > self.step + 1 {
                self.previous.clear(); // a step was skipped: those plans are too old
            }
            self.step = step;
        }
    }
}

/// A shared exchange for the hooks of one run.
pub type SharedExchange = Rc<RefCell<Exchange>>;

/// Drops the first `k` stages of a trajectory (padding with its last value). Values the
/// solver left a hair below zero are zero.
fn advanced(v: &[f64], k: usize) -> Vec<f64> {
    if v.is_empty() {
        return vec![0.0];
    }
    let mut out: Vec<f64> = v.iter().skip(k).map(|x| x.max(0.0)).collect();
    while out.len() < v.len() {
        out.push(v.last().expect("not empty").max(0.0));
    }
    out
}

/// PredicTor's controller on one relay.
pub struct PredictorHook {
    params: PredictorParams,
    exchange: SharedExchange,
    /// Circuits shaped at the last step: those left out now get their budget lifted.
    shaped: Vec<u32>,
    /// Per circuit: the fractions of a cell its budgets have left over ([`step_budget`]).
    carry: BTreeMap<u32, Carry>,
    /// The relay's link (bytes/s, down and up), where it caps the capacities.
    link: (Option<u64>, Option<u64>),
}

impl PredictorHook {
    pub fn new(params: PredictorParams, exchange: SharedExchange) -> Result<Self, PredictorError> {
        params.validate()?;
        Ok(PredictorHook { params, exchange, shaped: Vec::new(), carry: BTreeMap::new(), link: (None, None) })
    }

    /// The relay's link rates (bytes/s, down and up): where slower than its
    /// BandwidthRate, they set its capacities ([`PredictorParams::capacities`]).
    pub fn with_link(mut self, down: u64, up: u64) -> Self {
        self.link = (Some(down), Some(up));
        self
    }

    fn inputs(&self, me: NodeId, circuits: &[RelayCircuit], capacity: f64) -> Vec<CircuitInput> {
        let ex = self.exchange.borrow();
        let idle = || (vec![0.0], vec![0.0], vec![0.0]);
        circuits
            .iter()
            .map(|c| {
                let (pred_r_out, pred_s, pred_rhat_out) = match c.from {
                    Some(pred) => match ex.previous.get(&(c.circ, pred)) {
                        Some(p) => (advanced(&p.r_out, 0), advanced(&p.s, 0), advanced(&p.rhat_out, 0)),
                        None => idle(),
                    },
                    None => {
                        // The server: what is left to package, and the exit's own last plan
                        // as its outgoing rate, capped by the data left cumulatively; its
                        // queue falls by those planned reads (spec 5, server-side input).
                        let dt = self.params.dt.as_secs_f64();
                        let left = (c.source_cells.unwrap_or(0) as f64).min(60.0 * capacity);
                        let plan = ex.previous.get(&(c.circ, me)).map_or(vec![0.0], |p| advanced(&p.r_in, 1));
                        let (mut out, mut queue) = (Vec::with_capacity(plan.len()), Vec::with_capacity(plan.len() + 1));
                        let mut rest = left;
                        queue.push(rest);
                        for r in plan {
                            let x = r.min(rest / dt);
                            out.push(x);
                            rest = (rest - x * dt).max(0.0);
                            queue.push(rest);
                        }
                        (out, queue, vec![capacity])
                    }
                };
                // The guard's successor is the client: no limit.
                let succ_r_in = if c.pos == 1 {
                    None
                } else {
                    ex.previous.get(&(c.circ, c.to)).map(|p| advanced(&p.r_in, self.params.successor_shift))
                };
                CircuitInput { s_init: c.queued as f64, pred_r_out, pred_s, pred_rhat_out, succ_r_in }
            })
            .collect()
    }
}

impl RelayHook for PredictorHook {
    fn interval(&self) -> SimDuration {
        self.params.dt
    }

    fn on_tick(&mut self, now: SimTime, relay: &mut RelayControl<'_>) {
        let me = relay.node();
        let step = now.as_nanos() / self.params.dt.as_nanos();
        self.exchange.borrow_mut().advance(step);
        // Spec 6 solves for every circuit at the relay every step. A circuit that has never
        // had data anywhere (no queue here, nothing upstream, no plan from its predecessor)
        // is left out until it has: its plan would be all zeros, and a relay carries many
        // such circuits. Once this relay has planned for a circuit it keeps it in the
        // problem while the circuit is open, idle or not, as the spec does: leaving an idle
        // circuit out would unshape it, and a web circuit's next page would then burst
        // into the bottleneck until the relays took it back (tried on 2026-11-27: the toy
        // topology's latency rose from 313 to 388 ms).
        let circuits: Vec<RelayCircuit> = {
            let ex = self.exchange.borrow();
            let moves =
                |circ: u32, node: NodeId| ex.previous.get(&(circ, node)).is_some_and(|x| x.s.iter().chain(&x.r_out).any(|&v| v > 1e-6));
            relay
                .circuits()
                .into_iter()
                .filter(|c| {
                    c.queued > 0
                        || c.source_cells.is_some_and(|n| n > 0)
                        || c.from.is_some_and(|p| moves(c.circ, p))
                        || ex.previous.contains_key(&(c.circ, me))
                })
                .collect()
        };
        for &circ in &self.shaped {
            if !circuits.iter().any(|c| c.circ == circ) {
                relay.set_circuit_budget(circ, None);
                relay.set_exit_read_budget(circ, None);
                self.carry.remove(&circ);
            }
        }
        self.shaped = circuits.iter().map(|c| c.circ).collect();
        let (capacity_in, capacity_out) = self.params.capacities(relay.bandwidth_rate(), self.link.0, self.link.1);
        let ocp = OcpParams {
            horizon: self.params.horizon,
            dt: self.params.dt.as_secs_f64(),
            discount: self.params.discount,
            s_max: self.params.s_max,
            capacity_in,
            capacity_out,
            r_max: match self.params.r_max {
                RMax::Cells(r) => r,
                RMax::Relay => capacity_in.max(capacity_out),
            },
            slack_penalty: self.params.slack_penalty,
        };
        let inputs = self.inputs(me, &circuits, capacity_in);
        let result = solve(&ocp, &inputs);
        let mut ex = self.exchange.borrow_mut();
        ex.solves += 1;
        ex.circuit_solves += circuits.len() as u64;
        let plans: Vec<CircuitPlan> = match result {
            Ok(p) => p,
            Err(_) => {
                ex.failures += 1;
                drop(ex);
                for c in &circuits {
                    relay.set_circuit_budget(c.circ, None);
                    relay.set_exit_read_budget(c.circ, None);
                }
                self.shaped.clear();
                self.carry.clear();
                return;
            }
        };
        for (c, p) in circuits.iter().zip(&plans) {
            ex.current.insert(
                (c.circ, me),
                Published { r_in: p.r_in.clone(), r_out: p.r_out.clone(), s: p.s.clone(), rhat_out: p.rhat_out.clone() },
            );
        }
        drop(ex);
        let dt = self.params.dt.as_secs_f64();
        for (c, p) in circuits.iter().zip(&plans) {
            let carry = self.carry.entry(c.circ).or_default();
            let (budget, left) = step_budget(p.r_out[0] * dt, carry.send);
            carry.send = left;
            relay.set_circuit_budget(c.circ, Some(budget));
            if c.from.is_none() {
                // The exit reads the server's data at r_in[0] for this step: a grant of
                // r_in[0] x dt cells, replacing the last, as the authors' code set its
                // read bucket each step.
                let (grant, left) = step_budget(p.r_in[0] * dt, carry.read);
                carry.read = left;
                relay.set_exit_read_budget(c.circ, Some(grant));
            }
        }
    }

    fn name(&self) -> &'static str {
        "predictor"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trajectories_advance_by_a_stage_keeping_their_length() {
        assert_eq!(advanced(&[1.0, 2.0, 3.0], 1), vec![2.0, 3.0, 3.0]);
        assert_eq!(advanced(&[], 1), vec![0.0]);
        assert_eq!(advanced(&[-1e-12, 2.0], 0), vec![0.0, 2.0]);
    }

    #[test]
    fn the_exchange_hands_each_step_what_the_previous_one_wrote() {
        let mut ex = Exchange::default();
        ex.advance(1);
        ex.current.insert((7, 2), Published { r_in: vec![1.0], r_out: vec![1.0], s: vec![0.0], rhat_out: vec![1.0] });
        ex.advance(1);
        assert!(ex.previous.is_empty(), "same step: nothing moves");
        ex.advance(2);
        assert!(ex.previous.contains_key(&(7, 2)) && ex.current.is_empty());
        ex.advance(4);
        assert!(ex.previous.is_empty(), "a skipped step drops stale plans");
    }

    /// A middle relay holds the last 13 cells of a page and plans, as the discounted
    /// objective prefers, to send them all in the first stage. Its successor must see that
    /// stage as now and plan to take them: read a stage late, it saw nothing to take, never
    /// raised its intake, and the cells stayed at the middle for good (found in the mixed
    /// traffic runs, section 5.5).
    #[test]
    fn the_successor_reads_its_predecessors_plan_from_stage_0_and_takes_the_last_cells() {
        let params = PredictorParams::default();
        let ex = SharedExchange::default();
        let hook = PredictorHook::new(params, ex.clone()).unwrap();
        let (middle, guard, client, circ) = (2, 5, 9, 7);
        let n = params.horizon + 1;
        // The middle's plan: its guard asked for nothing yet, so it sends nothing (r_out 0)
        // and keeps the 13 cells (s), but its virtual rate offers them all at once.
        let mut rhat = vec![0.0; n];
        rhat[0] = 13.0 / params.dt.as_secs_f64();
        ex.borrow_mut()
            .previous
            .insert((circ, middle), Published { r_in: vec![0.0; n], r_out: vec![0.0; n], s: vec![13.0; n], rhat_out: rhat });
        let c = RelayCircuit { circ, pos: 1, from: Some(middle), to: client, queued: 0, source_cells: None };
        let inputs = hook.inputs(guard, &[c], 1000.0);
        assert_eq!(inputs[0].pred_s[0], 13.0);
        assert!(inputs[0].pred_rhat_out[0] > 300.0);
        let ocp = OcpParams {
            horizon: params.horizon,
            dt: params.dt.as_secs_f64(),
            discount: params.discount,
            s_max: params.s_max,
            capacity_in: 1000.0,
            capacity_out: 1000.0,
            r_max: 1000.0,
            slack_penalty: 1e5,
        };
        let plan = &solve(&ocp, &inputs).unwrap()[0];
        let taken: f64 = plan.r_in.iter().map(|r| r * params.dt.as_secs_f64()).sum();
        assert!(plan.r_in[0] > 100.0 && taken > 12.9, "the guard plans to take the 13 cells: {:?}", plan.r_in);
    }

    /// (13) bounds the outgoing rate by the successor's incoming-rate plan of the previous
    /// step, as written by default. With `successor_shift = 2`, the authors' code's
    /// alignment (it stamps that plan a step early and its receiver takes it from its next
    /// step on), the plan made at k-1 meets this step's stage 0 at its stage 2, padded
    /// with its last stage.
    #[test]
    fn the_successors_previous_intake_plan_bounds_the_outgoing_rate_shifted_by_successor_shift() {
        let (guard, middle, exit, circ) = (1, 2, 3, 7);
        let n = PredictorParams::default().horizon + 1;
        let planned: Vec<f64> = (0..n).map(|i| 10.0 * i as f64).collect();
        let ex = SharedExchange::default();
        ex.borrow_mut()
            .previous
            .insert((circ, guard), Published { r_in: planned.clone(), r_out: vec![0.0; n], s: vec![0.0; n], rhat_out: vec![0.0; n] });
        let c = RelayCircuit { circ, pos: 2, from: Some(exit), to: guard, queued: 5, source_cells: None };
        let hook = PredictorHook::new(PredictorParams::default(), ex.clone()).unwrap();
        assert_eq!(hook.inputs(middle, std::slice::from_ref(&c), 1000.0)[0].succ_r_in.as_deref(), Some(&planned[..]));
        let mut shifted: Vec<f64> = planned[2..].to_vec();
        shifted.extend([100.0, 100.0]);
        let authors = PredictorParams { successor_shift: 2, ..Default::default() };
        let hook = PredictorHook::new(authors, ex).unwrap();
        assert_eq!(hook.inputs(middle, &[c], 1000.0)[0].succ_r_in.as_deref(), Some(&shifted[..]));
    }

    #[test]
    fn the_defaults_are_the_papers_and_the_authors_code() {
        // Section 5.1: N_horz = 10, d = 1/3; the authors' code: dt 40 ms, s_max 100 cells,
        // C = 0.85 of the relay's rate (spec 4.7).
        let p = PredictorParams::default();
        assert_eq!((p.dt, p.horizon, p.discount), (SimDuration::from_millis(40), 10, 1.0 / 3.0));
        assert_eq!((p.s_max, p.capacity_fraction, p.slack_penalty), (100.0, 0.85, 1e5));
        assert_eq!(p.successor_shift, 0, "(13) as the paper writes it");
    }

    #[test]
    fn capacities_are_the_fraction_of_the_bandwidth_rate_or_of_a_slower_link() {
        // Spec 4.7, the authors' code: C = 0.85 x min(BandwidthRate, link DataRate), per
        // direction, in cells of 543 wire bytes.
        let p = PredictorParams::default();
        let (cin, cout) = p.capacities(543_000, None, None);
        assert!((cin - 850.0).abs() < 1e-9 && (cout - 850.0).abs() < 1e-9);
        let (cin, cout) = p.capacities(543_000, Some(5_430_000), Some(271_500));
        assert!((cin - 850.0).abs() < 1e-9 && (cout - 425.0).abs() < 1e-9, "{cin} {cout}");
    }

    /// A hook with the default parameters, and its exchange.
    fn hook() -> (PredictorHook, SharedExchange) {
        let ex = SharedExchange::default();
        (PredictorHook::new(PredictorParams::default(), ex.clone()).unwrap(), ex)
    }

    fn published(r_in: &[f64], r_out: &[f64], s: &[f64], rhat_out: &[f64]) -> Published {
        Published { r_in: r_in.to_vec(), r_out: r_out.to_vec(), s: s.to_vec(), rhat_out: rhat_out.to_vec() }
    }

    #[test]
    fn a_middle_reads_each_neighbours_trajectories_as_the_paper_exchanges_them() {
        // Section 3.2, Fig. 2 (spec 4.4, 5): downstream the predecessor sends its r_out, s
        // and r^_out; upstream the successor sends its r_in, the relay's limit (13), as the
        // paper writes it (`successor_shift` 0).
        let (hook, ex) = hook();
        let (guard, middle, exit, circ) = (1, 2, 3, 7);
        ex.borrow_mut().previous.insert((circ, exit), published(&[1.0, 1.5], &[2.0, 2.5], &[3.0, 3.5], &[4.0, 4.5]));
        ex.borrow_mut().previous.insert((circ, guard), published(&[5.0, 5.5, 6.0, 6.5], &[6.0], &[7.0], &[8.0]));
        let c = RelayCircuit { circ, pos: 2, from: Some(exit), to: guard, queued: 9, source_cells: None };
        let inp = &hook.inputs(middle, &[c], 1000.0)[0];
        assert_eq!(inp.s_init, 9.0);
        assert_eq!((&inp.pred_r_out[..], &inp.pred_s[..], &inp.pred_rhat_out[..]), (&[2.0, 2.5][..], &[3.0, 3.5][..], &[4.0, 4.5][..]));
        assert_eq!(inp.succ_r_in.as_deref(), Some(&[5.0, 5.5, 6.0, 6.5][..]));
        // Neighbours that have published nothing: an idle predecessor, no limit downstream.
        let c = RelayCircuit { circ: 8, pos: 2, from: Some(exit), to: guard, queued: 0, source_cells: None };
        let inp = &hook.inputs(middle, &[c], 1000.0)[0];
        assert_eq!((&inp.pred_r_out[..], &inp.pred_s[..]), (&[0.0][..], &[0.0][..]));
        assert_eq!(inp.succ_r_in, None);
    }

    #[test]
    fn at_the_exit_the_server_is_a_predecessor_with_the_data_left_to_package() {
        // Spec 5, server-side input: s_source = the data left to package, capped at a
        // "virtually infinite" 60 s of capacity, "later elements predicted by subtracting
        // the planned reads"; v_out,source = the exit's own previous v_in plan from the
        // stage that is now (elapsed stages dropped), "capped by the data available"
        // (cumulatively: the reads of all stages together take no more than is left); the
        // virtual rate the relay's capacity.
        let (hook, ex) = hook();
        let (exit, middle, circ) = (3, 2, 7);
        let cap = 1000.0;
        ex.borrow_mut().previous.insert((circ, exit), published(&[100.0, 200.0, 300.0], &[0.0], &[0.0], &[0.0]));
        let at = |cells: u64| {
            let c = RelayCircuit { circ, pos: 3, from: None, to: middle, queued: 0, source_cells: Some(cells) };
            hook.inputs(exit, &[c], cap).remove(0)
        };
        let plenty = at(1000);
        assert_eq!(plenty.pred_r_out, vec![200.0, 300.0, 300.0]);
        // 200 cells/s for 40 ms is 8 cells, 300 is 12.
        assert_eq!(plenty.pred_s, vec![1000.0, 992.0, 980.0, 968.0]);
        assert_eq!(plenty.pred_rhat_out, vec![cap]);
        // 2 cells left: both in the first step (50 cells/s), then none, and none left.
        let two = at(2);
        assert_eq!(two.pred_r_out, vec![50.0, 0.0, 0.0]);
        assert_eq!(two.pred_s, vec![2.0, 0.0, 0.0, 0.0]);
        // 20 cells left: 8 in the first step, the other 12 in the second.
        let twenty = at(20);
        assert_eq!(twenty.pred_r_out, vec![200.0, 300.0, 0.0]);
        assert_eq!(twenty.pred_s, vec![20.0, 12.0, 0.0, 0.0]);
        // A huge response counts as 60 s of capacity.
        assert_eq!(at(1_000_000_000).pred_s[0], 60.0 * cap);
    }

    #[test]
    fn an_exit_with_13_cells_left_to_package_plans_to_take_13() {
        // The audit's case (2026-11-28): 13 cells left at the server, the exit's previous
        // plan 300 cells/s at every stage, its successor taking 300 cells/s. With the
        // server's queue held at 13 over the horizon and its rate capped stage by stage at
        // 13 cells a step, (15) let the exit plan to package 145 cells that do not exist,
        // and publish them downstream. With the queue falling by the planned reads it
        // plans 13.
        let (hook, ex) = hook();
        let (exit, middle, circ) = (3, 2, 7);
        let cap = 0.85 * 1_250_000.0 / CELL_WIRE_BYTES as f64;
        let n = PredictorParams::default().horizon + 1;
        ex.borrow_mut().previous.insert((circ, exit), published(&vec![300.0; n], &[0.0], &[0.0], &[0.0]));
        ex.borrow_mut().previous.insert((circ, middle), published(&vec![300.0; n], &[0.0], &[0.0], &[0.0]));
        let c = RelayCircuit { circ, pos: 3, from: None, to: middle, queued: 0, source_cells: Some(13) };
        let inputs = hook.inputs(exit, &[c], cap);
        let plan = &solve(&OcpParams::new(cap, cap), &inputs).unwrap()[0];
        let taken: f64 = plan.r_in.iter().map(|r| r * 0.04).sum();
        assert!((taken - 13.0).abs() < 0.1, "plans to package {taken} cells: {:?}", plan.r_in);
    }

    #[test]
    fn budgets_carry_the_fraction_of_a_cell_so_they_sum_to_the_plan() {
        // A plan of 260.9 cells/s (the toy topology's share of its bottleneck) is 10.436
        // cells a 40 ms step. Rounded up, every step got 11: 275 cells/s, 5.4 % over the
        // plan. Carried: 10, 10, 11, 10, 11 (the running total 10.4, 20.9, 31.3, 41.7, 52.2 rounded
        // down), and 1043 cells in 100 steps (1043.6 planned).
        let per_step = 260.9 * 0.04;
        let (mut carry, mut sum, mut budgets) = (0.0, 0, Vec::new());
        for _ in 0..100 {
            let (b, c) = step_budget(per_step, carry);
            assert!((0.0..1.0).contains(&c), "{c}");
            carry = c;
            sum += b;
            budgets.push(b);
        }
        assert_eq!(&budgets[..5], &[10, 10, 11, 10, 11]);
        assert_eq!(sum, 1043, "{budgets:?}");
        // Whole cells pass unchanged, and a plan below a cell a step sends one every few.
        assert_eq!(step_budget(40.0, 0.0), (40, 0.0));
        let mut carry = 0.0;
        let sent: u64 = (0..10)
            .map(|_| {
                let (b, c) = step_budget(0.25, carry);
                carry = c;
                b
            })
            .sum();
        assert_eq!(sent, 2);
        assert_eq!(step_budget(-1e-9, 0.0).0, 0);
    }

    const MIB: u64 = 1 << 20;

    /// guard -> middle -> exit at 1 MiB/s each, shaping their circuits and running
    /// PredicTor with the default parameters, with a bulk download of 500 MiB started.
    fn bulk_network() -> (onionlab_tor::TorSim, [NodeId; 3], SharedExchange) {
        use onionlab_net::LatencyModel;
        use onionlab_tor::{BandwidthWeights, EndpointSpec, RelayFlags, RelaySpec, SchedulerKind, TorConfig, TorNetwork, TorSim};
        let relay = |name: &str, flags| RelaySpec {
            name: name.into(),
            location: 0,
            up_bits_per_sec: 1_000_000_000,
            down_bits_per_sec: 1_000_000_000,
            bandwidth_rate: MIB,
            bandwidth_burst: MIB,
            consensus_weight: 1024,
            flags,
            perconn: None,
            scheduler: SchedulerKind::Shaped,
            address: None,
        };
        let endpoint =
            |name: &str| EndpointSpec { name: name.into(), location: 0, up_bits_per_sec: 1_000_000_000, down_bits_per_sec: 1_000_000_000 };
        let mut tor =
            TorNetwork::new(TorConfig::default(), LatencyModel::constant(SimDuration::from_millis(5)), BandwidthWeights::uniform(), 1);
        let sf = RelayFlags::STABLE | RelayFlags::FAST;
        let g = tor.add_relay(relay("guard", RelayFlags::GUARD | sf)).unwrap();
        let m = tor.add_relay(relay("middle", sf)).unwrap();
        let e = tor.add_relay(relay("exit", RelayFlags::EXIT | sf)).unwrap();
        let client = tor.add_client(endpoint("client")).unwrap();
        let server = tor.add_server(endpoint("server")).unwrap();
        let mut sim = TorSim::new(tor);
        let ex = SharedExchange::default();
        for r in [g, m, e] {
            sim.tor.set_relay_hook(&mut sim.q, r, Box::new(PredictorHook::new(PredictorParams::default(), ex.clone()).unwrap())).unwrap();
        }
        sim.start_stream(client, server, 500 * MIB, 0).unwrap();
        (sim, [g, m, e], ex)
    }

    fn ms(n: u64) -> onionlab_core::SimTime {
        onionlab_core::SimTime::ZERO + SimDuration::from_millis(n)
    }

    #[test]
    fn every_published_plan_is_one_consistent_trajectory() {
        // Section 3.2, Fig. 2: a relay sends its predicted trajectories, rates and queue,
        // to its neighbours. They come from one solution, so the queue it announces follows
        // (25a) from the rates it announces: s^(k+1) = s^k + dt (r_in^k - r_out^k).
        let (mut sim, _, ex) = bulk_network();
        let dt = PredictorParams::default().dt.as_secs_f64();
        let mut changing = 0;
        for k in 0..100 {
            sim.run_until(ms(500 + 40 * k + 20), |_| {});
            for (key, p) in &ex.borrow().current {
                for j in 0..p.r_in.len() {
                    let want = p.s[j] + dt * (p.r_in[j] - p.r_out[j]);
                    assert!((p.s[j + 1] - want).abs() < 1e-6, "{key:?} stage {j}: {p:?}");
                    if (p.r_in[j] - p.r_out[j]).abs() > 1.0 {
                        changing += 1;
                    }
                }
            }
        }
        assert!(changing > 0, "no plan moved a queue: the check above saw nothing");
    }

    #[test]
    fn a_relay_whose_solves_fail_lifts_its_budgets_and_counts_the_failures() {
        // Module docs: if a solve fails, the relay lifts its budgets for that step (plain
        // round robin) and counts the failure. The exit's plan is made unusable (an
        // infinite rate) in every step for two seconds, so every middle solve fails; the
        // download must go on through the middle all the same.
        let (mut sim, [g, m, e], ex) = bulk_network();
        sim.run_until(ms(3000), |_| {});
        assert_eq!(ex.borrow().failures, 0);
        let circ = sim.tor.relay_circuits(m)[0].circ;
        let before = sim.tor.client_connections(g)[0].bytes_written;
        let steps = 50;
        for k in 0..steps {
            // Mid-step, after every relay has written its plan for the step.
            sim.run_until(ms(3000 + 40 * k + 20), |_| {});
            ex.borrow_mut().current.get_mut(&(circ, e)).expect("the exit's plan").r_out[0] = f64::INFINITY;
        }
        sim.run_until(ms(3000 + 40 * steps), |_| {});
        let moved = sim.tor.client_connections(g)[0].bytes_written - before;
        let failures = ex.borrow().failures;
        assert_eq!(failures, steps, "one failed solve per step, at the middle");
        // Two seconds at about 0.85 MiB/s planned: far more than a step's budget.
        assert!(moved > MIB / 2, "only {moved} B reached the client while the middle's solves failed");
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let ex = SharedExchange::default();
        let p = PredictorParams { horizon: 0, ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex.clone()).err().unwrap().to_string(), "horizon: must be at least 1");
        let p = PredictorParams { capacity_fraction: 1.5, ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex.clone()).err().unwrap().to_string(), "capacity_fraction: must lie in (0, 1], got 1.5");
        let p = PredictorParams { dt: SimDuration::ZERO, ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex.clone()).err().unwrap().to_string(), "dt: must be positive");
        let p = PredictorParams { r_max: RMax::Cells(-1.0), ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex.clone()).err().unwrap().to_string(), "r_max: must be positive and finite, got -1");
        let p = PredictorParams { slack_penalty: 0.0, ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex.clone()).err().unwrap().to_string(), "slack_penalty: must be positive and finite, got 0");
        let p = PredictorParams { successor_shift: 11, ..Default::default() };
        assert_eq!(PredictorHook::new(p, ex).err().unwrap().to_string(), "successor_shift: must be at most the horizon (10), got 11");
    }
}
