//! One-way latency and loss between network locations.
//!
//! **Owns:** the [`LatencyModel`] the transport consults for every packet batch — a
//! constant, an explicit [`LatencyMatrix`], or all-pairs shortest paths over a GML graph —
//! and checking that a host's location exists.
//!
//! **Must not touch:** hosts, bandwidth or queueing. Latency here is pure propagation
//! delay; transmission and queueing time are the transport's business.
//!
//! Hosts sit at a location (a `u32` index). A matrix is dense and row-major, so a lookup
//! is one multiply-add: it is on the transport's hot path.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use onionlab_core::SimDuration;

use crate::gml::GmlGraph;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LatencyError {
    #[error("latency matrix is empty; give at least one location (one row and one column each)")]
    Empty,
    #[error(
        "{matrix} matrix row {row} has {len} entries, expected {n}; the matrix must be square with one row and one column per location"
    )]
    NotSquare { matrix: &'static str, row: usize, len: usize, n: usize },
    #[error("loss matrix has {rows} rows but the latency matrix has {n}; give both the same shape")]
    LossRows { rows: usize, n: usize },
    #[error("loss {value} from {from} to {to} is outside [0, 1]; loss is a probability, e.g. 0.01 for 1%")]
    LossOutOfRange { from: u64, to: u64, value: f64 },
    #[error("location {location} does not exist; the latency matrix has locations 0..={max}")]
    BadLocation { location: u32, max: usize },
    #[error("GML graph has no nodes; a topology needs at least one `node [ id 0 ]` with a self-loop edge")]
    NoNodes,
    #[error("GML node id {id} appears more than once; node ids must be unique")]
    DuplicateNode { id: u64 },
    #[error("GML edge refers to node {id}, which is not in the graph; declare `node [ id {id} ]` or fix the edge")]
    UnknownNode { id: u64 },
    #[error("GML node {node} has no self-loop edge, so latency between hosts at that node is unknown; add `edge [ source {node} target {node} latency \"1 ms\" ]` (Shadow requires one per node)")]
    NoSelfLoop { node: u64 },
    #[error(
        "GML graph has no path from node {from} to node {to}; every node must reach every other (in a directed graph, add edges both ways)"
    )]
    Disconnected { from: u64, to: u64 },
}

/// Latency and loss between every ordered pair of locations.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMatrix {
    n: usize,
    /// Row-major: `[from * n + to]`.
    latency_ns: Vec<u64>,
    loss: Vec<f64>,
}

impl LatencyMatrix {
    /// `latency[from][to]` is the one-way latency; `loss` (default all zero) has the same
    /// shape and holds probabilities in [0, 1].
    pub fn new(latency: Vec<Vec<SimDuration>>, loss: Option<Vec<Vec<f64>>>) -> Result<Self, LatencyError> {
        let n = latency.len();
        if n == 0 {
            return Err(LatencyError::Empty);
        }
        let latency_ns = flatten(latency, "latency", n)?.into_iter().map(SimDuration::as_nanos).collect();
        let loss = match loss {
            None => vec![0.0; n * n],
            Some(rows) if rows.len() != n => return Err(LatencyError::LossRows { rows: rows.len(), n }),
            Some(rows) => flatten(rows, "loss", n)?,
        };
        if let Some(i) = loss.iter().position(|p| !(0.0..=1.0).contains(p)) {
            return Err(LatencyError::LossOutOfRange { from: (i / n) as u64, to: (i % n) as u64, value: loss[i] });
        }
        Ok(LatencyMatrix { n, latency_ns, loss })
    }

    /// Number of locations (at least one).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false: an empty matrix is rejected by [`LatencyMatrix::new`].
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    #[inline]
    fn index(&self, from: u32, to: u32) -> usize {
        let (from, to) = (from as usize, to as usize);
        // Without this, `to >= n` would silently read the next row.
        assert!(from < self.n && to < self.n, "location {from} or {to} out of range 0..{}; hosts must pass validate_location", self.n);
        from * self.n + to
    }
}

fn flatten<T>(rows: Vec<Vec<T>>, matrix: &'static str, n: usize) -> Result<Vec<T>, LatencyError> {
    if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != n) {
        return Err(LatencyError::NotSquare { matrix, row, len: r.len(), n });
    }
    Ok(rows.into_iter().flatten().collect())
}

#[derive(Debug, Clone, PartialEq)]
pub enum LatencyModel {
    /// The same latency between any two locations, and no loss; every location is valid.
    Constant {
        one_way: SimDuration,
    },
    Matrix(LatencyMatrix),
}

impl LatencyModel {
    pub fn constant(one_way: SimDuration) -> Self {
        LatencyModel::Constant { one_way }
    }

    /// All-pairs shortest paths (by latency, Dijkstra from every node) over a GML graph.
    ///
    /// Location `i` of the returned model is node `node_ids[i]`; nodes keep the order in
    /// which they appear in the graph. Undirected graphs have every edge both ways;
    /// parallel edges keep the lowest latency. A path's loss is `1 - prod(1 - p)` over the
    /// edges of the lowest-latency path (equal-latency ties go to the path found first,
    /// which is deterministic). Latency from a node to itself is its self-loop edge, which
    /// Shadow requires and so do we; self-loops never take part in paths between nodes.
    pub fn from_gml(graph: &GmlGraph) -> Result<(Self, Vec<u64>), LatencyError> {
        let node_ids: Vec<u64> = graph.nodes.iter().map(|node| node.id).collect();
        let n = node_ids.len();
        if n == 0 {
            return Err(LatencyError::NoNodes);
        }
        // `GmlGraph` has public fields, so it may not have come from `parse_gml`: recheck.
        let mut index = BTreeMap::new();
        for (i, &id) in node_ids.iter().enumerate() {
            if index.insert(id, i as u32).is_some() {
                return Err(LatencyError::DuplicateNode { id });
            }
        }
        let loc = |id| index.get(&id).copied().ok_or(LatencyError::UnknownNode { id });

        // (latency ns, loss); the lowest latency wins, then the lowest loss.
        let better = |a: (u64, f64), b: (u64, f64)| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).is_lt();
        let mut self_loop: Vec<Option<(u64, f64)>> = vec![None; n];
        let mut arcs = Vec::with_capacity(graph.edges.len() * if graph.directed { 1 } else { 2 });
        for e in &graph.edges {
            let (s, t) = (loc(e.source)?, loc(e.target)?);
            if !(0.0..=1.0).contains(&e.packet_loss) {
                return Err(LatencyError::LossOutOfRange { from: e.source, to: e.target, value: e.packet_loss });
            }
            let w = (e.latency.as_nanos(), e.packet_loss);
            if s == t {
                let slot = &mut self_loop[s as usize];
                if slot.is_none_or(|cur| better(w, cur)) {
                    *slot = Some(w);
                }
                continue;
            }
            arcs.push((s, t, w));
            if !graph.directed {
                arcs.push((t, s, w));
            }
        }
        if let Some(i) = self_loop.iter().position(Option::is_none) {
            return Err(LatencyError::NoSelfLoop { node: node_ids[i] });
        }

        let mut adj = Adjacency::new(n, arcs);
        let mut latency_ns = vec![0; n * n];
        let mut loss = vec![0.0; n * n];
        let mut heap = BinaryHeap::new();
        for (s, (dist, keep)) in latency_ns.chunks_exact_mut(n).zip(loss.chunks_exact_mut(n)).enumerate() {
            adj.dijkstra(s, dist, keep, &mut heap);
            if let Some(t) = dist.iter().position(|&d| d == UNREACHABLE) {
                return Err(LatencyError::Disconnected { from: node_ids[s], to: node_ids[t] });
            }
            adj.keep_only_shortest(s, dist);
            // `keep` held the delivery probability along the path; store its complement.
            keep.iter_mut().for_each(|k| *k = 1.0 - *k);
            if let Some((lat, p)) = self_loop[s] {
                (dist[s], keep[s]) = (lat, p);
            }
        }
        Ok((LatencyModel::Matrix(LatencyMatrix { n, latency_ns, loss }), node_ids))
    }

    /// One-way latency from `from` to `to`.
    ///
    /// # Panics
    /// If either location is out of range for a matrix. That is a programming error: hosts
    /// are checked with [`LatencyModel::validate_location`] when they are added.
    #[inline]
    pub fn one_way(&self, from: u32, to: u32) -> SimDuration {
        match self {
            LatencyModel::Constant { one_way } => *one_way,
            LatencyModel::Matrix(m) => SimDuration::from_nanos(m.latency_ns[m.index(from, to)]),
        }
    }

    /// Probability in [0, 1] that a packet from `from` to `to` is lost. Panics like
    /// [`LatencyModel::one_way`].
    #[inline]
    pub fn loss(&self, from: u32, to: u32) -> f64 {
        match self {
            LatencyModel::Constant { .. } => 0.0,
            LatencyModel::Matrix(m) => m.loss[m.index(from, to)],
        }
    }

    /// Number of locations; `None` for a constant model, where any location is valid.
    pub fn locations(&self) -> Option<usize> {
        match self {
            LatencyModel::Constant { .. } => None,
            LatencyModel::Matrix(m) => Some(m.n),
        }
    }

    pub fn validate_location(&self, location: u32) -> Result<(), LatencyError> {
        match self.locations() {
            Some(n) if location as usize >= n => Err(LatencyError::BadLocation { location, max: n - 1 }),
            _ => Ok(()),
        }
    }
}

/// Distance sentinel; real path sums are capped one below it.
const UNREACHABLE: u64 = u64::MAX;

/// Compressed adjacency lists: the arcs out of node `u` are `start[u]..end[u]`.
/// Parallel arrays rather than a Vec of structs, so the relaxation loop streams only
/// targets and latencies (the all-pairs run is memory-bound on dense graphs).
struct Adjacency {
    start: Vec<usize>,
    end: Vec<usize>,
    target: Vec<u32>,
    latency_ns: Vec<u64>,
    /// Delivery probability `1 - loss`, so path loss is a running product.
    keep: Vec<f64>,
}

impl Adjacency {
    fn new(n: usize, mut arcs: Vec<(u32, u32, (u64, f64))>) -> Self {
        // Sorting by every field makes the result independent of edge order; dedup then
        // keeps the best of parallel arcs.
        arcs.sort_unstable_by(|a, b| (a.0, a.1, a.2 .0).cmp(&(b.0, b.1, b.2 .0)).then(a.2 .1.total_cmp(&b.2 .1)));
        arcs.dedup_by_key(|a| (a.0, a.1));
        // Fastest first within each node, so `dijkstra` can stop scanning early.
        arcs.sort_by_key(|a| (a.0, a.2 .0));
        let mut start = vec![0; n + 1];
        for a in &arcs {
            start[a.0 as usize + 1] += 1;
        }
        for u in 0..n {
            start[u + 1] += start[u];
        }
        Adjacency {
            end: start[1..].to_vec(),
            start,
            target: arcs.iter().map(|a| a.1).collect(),
            latency_ns: arcs.iter().map(|a| a.2 .0).collect(),
            keep: arcs.iter().map(|a| 1.0 - a.2 .1).collect(),
        }
    }

    /// Fills `dist` with shortest latencies from `s` and `keep` with the delivery
    /// probability along each chosen path. Unreached nodes stay `UNREACHABLE`.
    fn dijkstra(&self, s: usize, dist: &mut [u64], keep: &mut [f64], heap: &mut BinaryHeap<Reverse<(u64, u32)>>) {
        dist.fill(UNREACHABLE);
        keep.fill(0.0);
        (dist[s], keep[s]) = (0, 1.0);
        heap.push(Reverse((0, s as u32)));
        // No unsettled node is farther than `bound`. Refreshing it now and then is enough:
        // distances only fall, so a stale bound is still a bound.
        let (mut bound, mut settled) = (UNREACHABLE, 0usize);
        while let Some(Reverse((d, u))) = heap.pop() {
            let u = u as usize;
            if d > dist[u] {
                continue; // stale entry: `u` was reached more cheaply since
            }
            settled += 1;
            if settled % 8 == 2 {
                bound = dist.iter().copied().max().unwrap_or(UNREACHABLE);
            }
            let arcs = self.start[u]..self.end[u];
            let out = self.target[arcs.clone()].iter().zip(&self.latency_ns[arcs.clone()]).zip(&self.keep[arcs]);
            for ((&v, &w), &k) in out {
                let nd = d.saturating_add(w).min(UNREACHABLE - 1);
                if nd >= bound {
                    break; // arcs are sorted by latency: none of the rest can improve anything
                }
                let v = v as usize;
                if nd < dist[v] {
                    (dist[v], keep[v]) = (nd, keep[u] * k);
                    heap.push(Reverse((nd, v as u32)));
                }
            }
        }
    }

    /// Drops the arcs out of `u` that are not themselves shortest paths, given `dist`
    /// from `u`. Every subpath of a shortest path is shortest, so later searches never
    /// need them; on dense graphs most arcs go, which makes all-pairs several times
    /// faster. Results are unchanged: a dropped arc could only ever offer a distance
    /// above the final one. Order is kept, so tie-breaking stays deterministic.
    fn keep_only_shortest(&mut self, u: usize, dist: &[u64]) {
        let mut kept = self.start[u];
        for a in self.start[u]..self.end[u] {
            if self.latency_ns[a] <= dist[self.target[a] as usize] {
                self.target[kept] = self.target[a];
                self.latency_ns[kept] = self.latency_ns[a];
                self.keep[kept] = self.keep[a];
                kept += 1;
            }
        }
        self.end[u] = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gml::{GmlEdge, GmlNode};
    use proptest::prelude::*;

    fn ms(x: u64) -> SimDuration {
        SimDuration::from_millis(x)
    }

    fn graph(directed: bool, ids: &[u64], edges: &[(u64, u64, u64, f64)]) -> GmlGraph {
        GmlGraph {
            directed,
            nodes: ids.iter().map(|&id| GmlNode { id, bandwidth_up_bits: None, bandwidth_down_bits: None, label: None }).collect(),
            edges: edges
                .iter()
                .map(|&(source, target, lat, packet_loss)| GmlEdge { source, target, latency: ms(lat), packet_loss })
                .collect(),
        }
    }

    fn self_loops(ids: &[u64]) -> Vec<(u64, u64, u64, f64)> {
        ids.iter().map(|&i| (i, i, 1, 0.0)).collect()
    }

    #[test]
    fn two_hops_beat_a_slow_direct_edge() {
        // Triangle 10-20-30: direct 10-30 is 100 ms, via 20 it is 30 + 40 = 70 ms.
        let mut edges = vec![(10, 30, 100, 0.0), (10, 20, 30, 0.1), (20, 30, 40, 0.2)];
        edges.extend(self_loops(&[10, 20, 30]));
        let (m, ids) = LatencyModel::from_gml(&graph(false, &[10, 20, 30], &edges)).unwrap();
        assert_eq!(ids, vec![10, 20, 30]);
        assert_eq!(m.locations(), Some(3));
        assert_eq!(m.one_way(0, 2), ms(70));
        assert_eq!(m.one_way(2, 0), ms(70));
        assert_eq!(m.one_way(0, 1), ms(30));
        assert_eq!(m.one_way(1, 2), ms(40));
        // Loss along 10-20-30: 1 - 0.9 * 0.8.
        assert!((m.loss(0, 2) - 0.28).abs() < 1e-12, "{}", m.loss(0, 2));
        assert!((m.loss(0, 1) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn parallel_edges_keep_the_fastest() {
        let mut edges = vec![(0, 1, 50, 0.5), (0, 1, 20, 0.0), (1, 0, 30, 0.0)];
        edges.extend(self_loops(&[0, 1]));
        let (m, _) = LatencyModel::from_gml(&graph(false, &[0, 1], &edges)).unwrap();
        assert_eq!(m.one_way(0, 1), ms(20));
        assert_eq!(m.loss(0, 1), 0.0);
    }

    /// Among edges of equal latency, the least lossy wins, whatever their order.
    #[test]
    fn equal_latency_edges_keep_the_lowest_loss() {
        let edges = [(0, 1, 20, 0.75), (0, 1, 20, 0.25), (1, 0, 20, 0.5), (0, 0, 5, 0.5), (0, 0, 5, 0.25), (1, 1, 1, 0.0)];
        for rev in [false, true] {
            let mut e = edges.to_vec();
            if rev {
                e.reverse();
            }
            let (m, _) = LatencyModel::from_gml(&graph(false, &[0, 1], &e)).unwrap();
            assert_eq!((m.one_way(0, 1), m.loss(0, 1), m.loss(1, 0)), (ms(20), 0.25, 0.25));
            assert_eq!((m.one_way(0, 0), m.loss(0, 0)), (ms(5), 0.25));
        }
    }

    #[test]
    fn self_loops_give_the_diagonal() {
        let edges = [(0, 0, 5, 0.25), (0, 0, 3, 0.5), (1, 1, 7, 0.0), (0, 1, 10, 0.0)];
        let (m, _) = LatencyModel::from_gml(&graph(false, &[0, 1], &edges)).unwrap();
        assert_eq!((m.one_way(0, 0), m.loss(0, 0)), (ms(3), 0.5));
        assert_eq!(m.one_way(1, 1), ms(7));

        let err = LatencyModel::from_gml(&graph(false, &[0, 1], &edges[2..])).unwrap_err();
        assert_eq!(err, LatencyError::NoSelfLoop { node: 0 });
        assert!(err.to_string().contains("source 0 target 0"), "{err}");
    }

    #[test]
    fn disconnected_pairs_are_named() {
        let mut edges = vec![(0, 1, 10, 0.0), (2, 3, 10, 0.0)];
        edges.extend(self_loops(&[0, 1, 2, 3]));
        let err = LatencyModel::from_gml(&graph(false, &[0, 1, 2, 3], &edges)).unwrap_err();
        assert_eq!(err, LatencyError::Disconnected { from: 0, to: 2 });
        assert!(err.to_string().contains("node 0 to node 2"), "{err}");
    }

    #[test]
    fn directed_edges_go_one_way() {
        let mut edges = vec![(1, 2, 10, 0.0)];
        edges.extend(self_loops(&[1, 2]));
        let err = LatencyModel::from_gml(&graph(true, &[1, 2], &edges)).unwrap_err();
        assert_eq!(err, LatencyError::Disconnected { from: 2, to: 1 });

        edges.push((2, 1, 25, 0.0));
        let (m, _) = LatencyModel::from_gml(&graph(true, &[1, 2], &edges)).unwrap();
        assert_eq!((m.one_way(0, 1), m.one_way(1, 0)), (ms(10), ms(25)));
    }

    #[test]
    fn bad_graphs_and_matrices_are_rejected() {
        assert_eq!(LatencyModel::from_gml(&graph(false, &[], &[])).unwrap_err(), LatencyError::NoNodes);
        let g = graph(false, &[0, 0], &[]);
        assert_eq!(LatencyModel::from_gml(&g).unwrap_err(), LatencyError::DuplicateNode { id: 0 });
        let g = graph(false, &[0], &[(0, 4, 1, 0.0)]);
        assert_eq!(LatencyModel::from_gml(&g).unwrap_err(), LatencyError::UnknownNode { id: 4 });
        let g = graph(false, &[0], &[(0, 0, 1, 2.0)]);
        assert!(matches!(LatencyModel::from_gml(&g), Err(LatencyError::LossOutOfRange { .. })));

        assert_eq!(LatencyMatrix::new(vec![], None), Err(LatencyError::Empty));
        let ragged = vec![vec![ms(1), ms(2)], vec![ms(1)]];
        assert_eq!(LatencyMatrix::new(ragged, None), Err(LatencyError::NotSquare { matrix: "latency", row: 1, len: 1, n: 2 }));
        let sq = vec![vec![ms(1); 2]; 2];
        assert_eq!(LatencyMatrix::new(sq.clone(), Some(vec![vec![0.0; 2]])), Err(LatencyError::LossRows { rows: 1, n: 2 }));
        assert!(matches!(
            LatencyMatrix::new(sq.clone(), Some(vec![vec![0.0, 0.0], vec![0.0]])),
            Err(LatencyError::NotSquare { matrix: "loss", row: 1, .. })
        ));
        assert_eq!(
            LatencyMatrix::new(sq.clone(), Some(vec![vec![0.0, f64::NAN], vec![0.0; 2]])).map(|_| ()).unwrap_err().to_string(),
            "loss NaN from 0 to 1 is outside [0, 1]; loss is a probability, e.g. 0.01 for 1%"
        );
    }

    #[test]
    fn matrix_and_constant_lookups() {
        let m = LatencyMatrix::new(vec![vec![ms(1), ms(2)], vec![ms(3), ms(4)]], Some(vec![vec![0.0, 0.5], vec![0.25, 1.0]])).unwrap();
        assert_eq!(m.len(), 2);
        let m = LatencyModel::Matrix(m);
        assert_eq!((m.one_way(1, 0), m.loss(0, 1)), (ms(3), 0.5));
        assert_eq!(m.validate_location(1), Ok(()));
        let err = m.validate_location(2).unwrap_err();
        assert!(err.to_string().contains("location 2") && err.to_string().contains("0..=1"), "{err}");

        let c = LatencyModel::constant(ms(9));
        assert_eq!((c.one_way(7, 1_000_000), c.loss(0, 0), c.locations()), (ms(9), 0.0, None));
        assert_eq!(c.validate_location(u32::MAX), Ok(()));
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn out_of_range_lookup_panics_instead_of_reading_the_next_row() {
        let m = LatencyModel::Matrix(LatencyMatrix::new(vec![vec![ms(1); 2]; 2], None).unwrap());
        m.one_way(0, 2);
    }

    /// A 1,500-node complete graph (~1.1M edges). Run with
    /// `cargo test --release -- --ignored complete_graph` to time it.
    #[test]
    #[ignore]
    fn complete_graph_is_fast() {
        let n = 1500u64;
        let ids: Vec<u64> = (0..n).collect();
        let mut edges = self_loops(&ids);
        let mut x = 1u64;
        for a in 0..n {
            for b in a + 1..n {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let lat = 5 + (x >> 33) % 200;
                edges.push((a, b, lat, 0.001));
            }
        }
        let g = graph(false, &ids, &edges);
        let t = std::time::Instant::now();
        let (m, _) = LatencyModel::from_gml(&g).unwrap();
        eprintln!("all-pairs on {n} nodes, {} edges: {:?}", edges.len(), t.elapsed());
        assert_eq!(m.locations(), Some(n as usize));
    }

    /// Random strongly connected graphs: a cycle through every node plus random extras.
    fn arb_graph() -> impl Strategy<Value = GmlGraph> {
        (2usize..9, any::<bool>()).prop_flat_map(|(n, directed)| {
            let ring = prop::collection::vec(0u64..100, n);
            let extra = prop::collection::vec((0..n as u64, 0..n as u64, 0u64..100, 0.0..=1.0f64), 0..3 * n);
            (ring, extra).prop_map(move |(ring, extra)| {
                let ids: Vec<u64> = (0..n as u64).collect();
                let mut edges = self_loops(&ids);
                edges.extend(ring.iter().enumerate().map(|(i, &l)| (i as u64, ((i + 1) % n) as u64, l, 0.0)));
                edges.extend(extra);
                graph(directed, &ids, &edges)
            })
        })
    }

    proptest! {
        #[test]
        fn shortest_paths_obey_the_triangle_inequality(g in arb_graph()) {
            let (m, ids) = LatencyModel::from_gml(&g).unwrap();
            let n = ids.len() as u32;
            for a in 0..n {
                for b in 0..n {
                    for c in (0..n).filter(|&c| c != a) {
                        // The diagonal is the self-loop, not zero, so only a != c holds.
                        prop_assert!(m.one_way(a, c) <= m.one_way(a, b) + m.one_way(b, c));
                    }
                }
            }
        }

        #[test]
        fn matches_floyd_warshall(g in arb_graph()) {
            let (m, ids) = LatencyModel::from_gml(&g).unwrap();
            let n = ids.len();
            let mut d = vec![vec![u64::MAX; n]; n];
            for e in g.edges.iter().filter(|e| e.source != e.target) {
                let (s, t, w) = (e.source as usize, e.target as usize, e.latency.as_nanos());
                d[s][t] = d[s][t].min(w);
                if !g.directed {
                    d[t][s] = d[t][s].min(w);
                }
            }
            for k in 0..n {
                for i in 0..n {
                    for j in 0..n {
                        d[i][j] = d[i][j].min(d[i][k].saturating_add(d[k][j]));
                    }
                }
            }
            for (i, row) in d.iter().enumerate() {
                for j in (0..n).filter(|&j| j != i) {
                    prop_assert_eq!(m.one_way(i as u32, j as u32).as_nanos(), row[j]);
                    let p = m.loss(i as u32, j as u32);
                    prop_assert!((0.0..=1.0).contains(&p));
                }
            }
        }
    }
}
