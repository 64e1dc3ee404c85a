//! Max-min fairness: the reference allocation PredicTor aims for, and the paper's
//! fairness index (Döpmann et al., PredicTor, section 2.2 and section 5; spec
//! `predictor.md` sections 2 and 8).
//!
//! **Owns:** computing the max-min fair rates of circuits over nodes of limited capacity
//! (progressive filling, and the paper's Theorem 1 quadratic program as a cross-check) and
//! the fairness index `F`. **Must not touch:** any network state; these are functions of a
//! topology (which nodes each circuit crosses, each node's capacity) and of rates.
//!
//! The model is the paper's: capacity is per node (`sum of rates of the circuits through
//! node a <= C_a`), not per link, and a circuit's rate is limited only by the nodes it
//! crosses. Units are whatever the caller uses (the paper: packets per second).

use thiserror::Error;

/// Why a max-min problem is not well posed; each names what is wrong.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MaxMinError {
    #[error("capacities[{0}]: must be finite and at least 0, got {1}")]
    Capacity(usize, f64),
    #[error("circuits[{0}]: crosses node {1}, but there are only {2} nodes")]
    UnknownNode(usize, usize, usize),
    #[error("circuits[{0}]: crosses no node, so nothing limits its rate")]
    EmptyCircuit(usize),
    #[error("observed: {0} rates for {1} circuits")]
    Length(usize, usize),
    #[error("the quadratic program failed: {0}")]
    Solver(String),
}

fn check(capacities: &[f64], circuits: &[Vec<usize>]) -> Result<(), MaxMinError> {
    for (a, &c) in capacities.iter().enumerate() {
        if !c.is_finite() || c < 0.0 {
            return Err(MaxMinError::Capacity(a, c));
        }
    }
    for (i, path) in circuits.iter().enumerate() {
        if path.is_empty() {
            return Err(MaxMinError::EmptyCircuit(i));
        }
        if let Some(&n) = path.iter().find(|&&n| n >= capacities.len()) {
            return Err(MaxMinError::UnknownNode(i, n, capacities.len()));
        }
    }
    Ok(())
}

/// The max-min fair rates of `circuits` (each the list of nodes it crosses; a node listed
/// twice counts twice) over nodes with `capacities`, by progressive filling (Bertsekas and
/// Gallager): raise every unfrozen circuit's rate together until a node saturates, freeze
/// the circuits through it, repeat. Each circuit ends with exactly one bottleneck
/// (the paper's Lemma 1).
pub fn max_min_fair(capacities: &[f64], circuits: &[Vec<usize>]) -> Result<Vec<f64>, MaxMinError> {
    check(capacities, circuits)?;
    let n = capacities.len();
    let mut rate = vec![0.0; circuits.len()];
    let mut frozen = vec![false; circuits.len()];
    let mut left = capacities.to_vec();
    loop {
        // Unfrozen crossings per node, and how far every unfrozen rate can rise together.
        let mut users = vec![0usize; n];
        for (path, _) in circuits.iter().zip(&frozen).filter(|(_, f)| !**f) {
            for &a in path {
                users[a] += 1;
            }
        }
        let step = (0..n).filter(|&a| users[a] > 0).map(|a| left[a] / users[a] as f64).fold(f64::INFINITY, f64::min);
        if !step.is_finite() {
            return Ok(rate);
        }
        for (i, path) in circuits.iter().enumerate() {
            if !frozen[i] {
                rate[i] += step;
                for &a in path {
                    left[a] -= step;
                }
            }
        }
        // Freeze every circuit through a node that is now full (relative tolerance).
        let full: Vec<bool> = (0..n).map(|a| users[a] > 0 && left[a] <= 1e-12 * capacities[a].max(1.0)).collect();
        for (i, path) in circuits.iter().enumerate() {
            if path.iter().any(|&a| full[a]) {
                frozen[i] = true;
            }
        }
    }
}

/// The paper's fairness index (section 5): `F = 1 - sum |r_f - r| / sum r_f`, the share of
/// traffic that behaves according to max-min fairness (1 = exactly max-min fair). Jain's
/// index is deliberately not used: max-min fair rates need not be equal.
pub fn fairness_index(fair: &[f64], observed: &[f64]) -> Result<f64, MaxMinError> {
    if fair.len() != observed.len() {
        return Err(MaxMinError::Length(observed.len(), fair.len()));
    }
    let total: f64 = fair.iter().sum();
    let off: f64 = fair.iter().zip(observed).map(|(f, r)| (f - r).abs()).sum();
    Ok(if total > 0.0 { 1.0 - off / total } else { 1.0 })
}

/// The paper's Theorem 1 program: rates `r_max - dr` where `dr` minimises `sum dr_i^2`
/// subject to `r_max - dr` feasible (every node's circuits within its capacity) and
/// `0 <= dr <= r_max`, with `r_max` the largest capacity. Solved with Clarabel.
///
/// The paper states that this gives the max-min fair rates for any `r_max >= the largest
/// capacity`. It does where every circuit meets one shared bottleneck (the paper's toy
/// topology), but not in general: with two nodes of capacity 1, a circuit through both
/// and one through each, max-min gives 1/2 to each and the program 1/3 and 2/3 (the tests
/// work it by hand). Use [`max_min_fair`] for the reference allocation; this is here to
/// study what PredicTor's objective, built on the theorem, converges to.
pub fn theorem1_rates(capacities: &[f64], circuits: &[Vec<usize>]) -> Result<Vec<f64>, MaxMinError> {
    use clarabel::algebra::CscMatrix;
    use clarabel::solver::{DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus};
    check(capacities, circuits)?;
    let p = circuits.len();
    let r_max = capacities.iter().copied().fold(0.0, f64::max).max(1e-12);
    // Variables: the rates r (= r_max - dr), scaled by r_max so they lie in [0, 1].
    // Objective: sum (1 - r_i)^2 = const + sum (r_i^2 - 2 r_i): P = 2 I, q = -2.
    let pm = CscMatrix::new(p, p, (0..=p).collect(), (0..p).collect(), vec![2.0; p]);
    let q = vec![-2.0; p];
    // Rows: per node, sum of its circuits' rates <= C_a / r_max; per circuit, -r <= 0 and r <= 1.
    let mut rows: Vec<Vec<(usize, f64)>> = Vec::new();
    let mut b = Vec::new();
    for (a, &c) in capacities.iter().enumerate() {
        let mut row: Vec<(usize, f64)> = Vec::new();
        for (i, path) in circuits.iter().enumerate() {
            let k = path.iter().filter(|&&x| x == a).count();
            if k > 0 {
                row.push((i, k as f64));
            }
        }
        if !row.is_empty() {
            rows.push(row);
            b.push(c / r_max);
        }
    }
    for i in 0..p {
        rows.push(vec![(i, -1.0)]);
        b.push(0.0);
        rows.push(vec![(i, 1.0)]);
        b.push(1.0);
    }
    let a = csc_from_rows(&rows, p);
    let cones = [NonnegativeConeT(b.len())];
    let settings = DefaultSettingsBuilder::default()
        .verbose(false)
        .tol_gap_abs(1e-10)
        .tol_gap_rel(1e-10)
        .tol_feas(1e-10)
        .build()
        .expect("valid settings");
    let mut solver = DefaultSolver::new(&pm, &q, &a, &b, &cones, settings).map_err(|e| MaxMinError::Solver(format!("{e:?}")))?;
    solver.solve();
    match solver.solution.status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => Ok(solver.solution.x.iter().map(|x| x * r_max).collect()),
        s => Err(MaxMinError::Solver(format!("{s:?}"))),
    }
}

/// A compressed-sparse-column matrix with `cols` columns from rows of (column, value).
pub(crate) fn csc_from_rows(rows: &[Vec<(usize, f64)>], cols: usize) -> clarabel::algebra::CscMatrix<f64> {
    let mut by_col: Vec<Vec<(usize, f64)>> = vec![Vec::new(); cols];
    for (r, row) in rows.iter().enumerate() {
        for &(c, v) in row {
            by_col[c].push((r, v));
        }
    }
    let mut colptr = Vec::with_capacity(cols + 1);
    let (mut rowval, mut nzval) = (Vec::new(), Vec::new());
    colptr.push(0);
    for col in &mut by_col {
        col.sort_by_key(|&(r, _)| r);
        for &(r, v) in col.iter() {
            rowval.push(r);
            nzval.push(v);
        }
        colptr.push(rowval.len());
    }
    clarabel::algebra::CscMatrix::new(rows.len(), cols, colptr, rowval, nzval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_toy_topology() {
        // Fig. 1: exit1 and exit2 send through one bottleneck to three entries; circuits 1
        // and 2 leave exit1. With the bottleneck at 410.1 and the rest ample, each circuit
        // gets 136.7 (table 1's "max-min fair" column).
        let caps = [1000.0, 1000.0, 410.1, 1000.0, 1000.0, 1000.0];
        let circuits = vec![vec![0, 2, 3], vec![0, 2, 4], vec![1, 2, 5]];
        let r = max_min_fair(&caps, &circuits).unwrap();
        for x in &r {
            assert!((x - 136.7).abs() < 1e-9, "{r:?}");
        }
    }

    #[test]
    fn a_circuit_bottlenecked_elsewhere_leaves_its_share_to_the_others() {
        // Node 0 (capacity 10) carries circuits a and b; b also crosses node 1 (capacity 2).
        // b is held to 2 at node 1, so a gets 8 at node 0.
        let r = max_min_fair(&[10.0, 2.0], &[vec![0], vec![0, 1]]).unwrap();
        assert_eq!(r, vec![8.0, 2.0]);
    }

    #[test]
    fn the_fairness_index_reproduces_table_1() {
        let fair = [136.7; 3];
        let f = |r: [f64; 3]| (fairness_index(&fair, &r).unwrap() * 1000.0).round() / 1000.0;
        // Table 1's throughput columns: PredicTor, vanilla, PCTCP: F 0.98, 0.68, 0.95.
        assert_eq!(f([134.2, 134.1, 134.1]), 0.981);
        assert_eq!(f([102.5, 102.5, 197.3]), 0.685);
        assert_eq!(f([130.9, 143.9, 130.5]), 0.953);
        assert_eq!(fairness_index(&[1.0], &[1.0, 2.0]).unwrap_err().to_string(), "observed: 2 rates for 1 circuits");
    }

    #[test]
    fn theorem_1_holds_on_the_toy_topology_and_not_with_two_bottlenecks() {
        // Fig. 1's single shared bottleneck: the program gives the max-min rates.
        let caps = [1000.0, 1000.0, 410.1, 1000.0, 1000.0, 1000.0];
        let circuits = vec![vec![0, 2, 3], vec![0, 2, 4], vec![1, 2, 5]];
        for x in theorem1_rates(&caps, &circuits).unwrap() {
            assert!((x - 136.7).abs() < 1e-5, "{x}");
        }
        // Two nodes of capacity 1; x crosses both, y only the first, z only the second.
        // Max-min fair: 1/2 each. Theorem 1's program minimises (1-x)^2 + 2 (x)^2 (y = z =
        // 1 - x): x = 1/3, y = z = 2/3. It favours circuits with fewer bottlenecks, so
        // the theorem holds only where circuits share one bottleneck each; PredicTor's
        // local objective inherits this (docs/mechanisms/predictor.md).
        let circuits = vec![vec![0, 1], vec![0], vec![1]];
        assert_eq!(max_min_fair(&[1.0, 1.0], &circuits).unwrap(), vec![0.5, 0.5, 0.5]);
        let qp = theorem1_rates(&[1.0, 1.0], &circuits).unwrap();
        for (got, want) in qp.iter().zip([1.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0]) {
            assert!((got - want).abs() < 1e-6, "{qp:?}");
        }
    }

    #[test]
    fn progressive_filling_gives_every_circuit_a_saturated_bottleneck_where_it_is_largest() {
        // Lemma 1 on random networks: each circuit crosses a full node at which no
        // circuit has a larger rate, and no node is over capacity.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200 {
            let n = 3 + next(10) as usize;
            let caps: Vec<f64> = (0..n).map(|_| 1.0 + next(100) as f64).collect();
            let circuits: Vec<Vec<usize>> = (0..1 + next(30))
                .map(|_| {
                    let mut p = Vec::new();
                    while p.len() < 3 {
                        let a = next(n as u64) as usize;
                        if !p.contains(&a) {
                            p.push(a);
                        }
                    }
                    p
                })
                .collect();
            let r = max_min_fair(&caps, &circuits).unwrap();
            let load = |a: usize| circuits.iter().zip(&r).filter(|(p, _)| p.contains(&a)).map(|(_, x)| x).sum::<f64>();
            for (a, &cap) in caps.iter().enumerate() {
                assert!(load(a) <= cap * (1.0 + 1e-9), "node {a} over capacity");
            }
            for (i, p) in circuits.iter().enumerate() {
                let bottleneck = p.iter().any(|&a| {
                    (load(a) - caps[a]).abs() <= 1e-9 * caps[a]
                        && circuits.iter().zip(&r).filter(|(q, _)| q.contains(&a)).all(|(_, &y)| y <= r[i] * (1.0 + 1e-9))
                });
                assert!(bottleneck, "circuit {i} ({p:?}, rate {}) has no bottleneck: {r:?}", r[i]);
            }
        }
    }

    #[test]
    fn a_node_of_capacity_zero_is_valid_and_stops_only_its_own_circuits() {
        // Capacities must be "at least 0": a node with nothing to give is a valid network.
        // Circuit a crosses only that node and gets 0; b and c split node 1's 6 equally.
        let r = max_min_fair(&[0.0, 6.0], &[vec![0], vec![1], vec![1]]).unwrap();
        assert_eq!(r, vec![0.0, 3.0, 3.0]);
    }

    #[test]
    fn theorem_1_needs_r_max_at_least_the_largest_capacity() {
        // Section 2.2, Theorem 1: r_max >= max(C_1, ..., C_n). Circuit a alone at node 0
        // (capacity 10), b alone at node 1 (capacity 2): max-min gives each its node's
        // whole capacity, 10 and 2. An r_max of the smallest capacity (2) would cap a at 2.
        let circuits = vec![vec![0], vec![1]];
        assert_eq!(max_min_fair(&[10.0, 2.0], &circuits).unwrap(), vec![10.0, 2.0]);
        let qp = theorem1_rates(&[10.0, 2.0], &circuits).unwrap();
        for (got, want) in qp.iter().zip([10.0, 2.0]) {
            assert!((got - want).abs() < 1e-3, "{qp:?}");
        }
    }

    #[test]
    fn a_node_crossed_twice_counts_twice_in_both_computations() {
        // The documented model: a circuit listing node 0 twice loads it with twice its
        // rate, so with capacity 1 it reaches 1/2 (progressive filling and Theorem 1 alike).
        let circuits = vec![vec![0, 0]];
        assert_eq!(max_min_fair(&[1.0], &circuits).unwrap(), vec![0.5]);
        let qp = theorem1_rates(&[1.0], &circuits).unwrap();
        assert!((qp[0] - 0.5).abs() < 1e-6, "{qp:?}");
    }

    #[test]
    fn the_fairness_index_of_an_all_zero_allocation_observed_exactly_is_1() {
        // F = 1 means "exactly max-min fair" (section 5); where every fair rate is 0 and
        // every observed rate is 0, the traffic behaves exactly so (the formula's 0/0).
        assert_eq!(fairness_index(&[0.0, 0.0], &[0.0, 0.0]).unwrap(), 1.0);
    }

    #[test]
    fn bad_input_names_what_is_wrong() {
        // The first index past the last node is already unknown.
        assert_eq!(
            max_min_fair(&[1.0, 1.0], &[vec![0, 2]]).unwrap_err().to_string(),
            "circuits[0]: crosses node 2, but there are only 2 nodes"
        );
        assert!(theorem1_rates(&[1.0, 1.0], &[vec![2]]).is_err());
        assert_eq!(max_min_fair(&[1.0, -2.0], &[vec![0]]).unwrap_err().to_string(), "capacities[1]: must be finite and at least 0, got -2");
        assert_eq!(
            max_min_fair(&[1.0], &[vec![0], vec![3]]).unwrap_err().to_string(),
            "circuits[1]: crosses node 3, but there are only 1 nodes"
        );
        assert!(max_min_fair(&[1.0], &[vec![]]).unwrap_err().to_string().starts_with("circuits[0]"));
    }
}
