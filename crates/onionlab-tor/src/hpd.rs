//! BRAIDS's relay scheduler: hybrid proportional delay (HPD) over service classes,
//! relay-wide.
//!
//! BRAIDS (Jansen, Hopper and Kim, CCS 2010), section 3.4 ("Differentiated Service");
//! spec `ewma-braids.md` B.6.2. The paper takes HPD from Dovrolis et al.'s proportional
//! differentiation model: the queueing delay of class i should be proportional to its
//! parameter `c_i` (`q_i / q_j = c_i / c_j`, `c1 < c2 < c3`). "Each Tor cell is
//! time-stamped upon arrival at the relay and placed in the queue associated with the
//! cell's class of service. When the relay makes a scheduling decision at time t", for
//! every class with cells waiting,
//!
//! ```text
//! w_i  = now - arrival time of the class's head cell          (waiting time)
//! a_i  = mean queueing delay of the class's cells sent so far (0 before the first)
//! p_i  = ((1 - f) * w_i + f * a_i) / c_i                      (WTP and PAD mixed by f)
//! ```
//!
//! and the head cell of the class with the largest `p_i` goes next; ties go to the class
//! with the smaller index (the higher priority; a design choice, spec B.6.2).
//!
//! **Parameters** ([`HpdParams`]): `delay` = `c_LL : c_HT : c_N`, strictly increasing,
//! default `1 : 2 : 3`, and `f` in [0, 1], default 0.5. The paper gives neither value; the
//! defaults are the spec's (B.10, design choice).
//!
//! **Scope: the relay, not a connection.** The paper's queues are the relay's: a paid
//! cell leaves before an unpaid one whichever connection each leaves on (spec B.6.2:
//! "one HPD scheduler per relay output link"). So the scheduler has two parts:
//! - [`HpdScheduler`], one per channel end (the end's circuitmux): bookkeeping only. It
//!   keeps that end's class FIFOs (cell counts with their arrival times, not cells) and the
//!   end's own per-class counts for the run's results, and tells the relay the arrival
//!   time of each class's head run ([`CircuitScheduler::class_heads`]).
//! - [`HpdRelay`] and [`hpd_run`], one per relay: the decisions. The relay's class FIFOs
//!   are the union of its ends' FIFOs, each class ordered by arrival time, so the relay's
//!   head cell of class i is the oldest class-i head over the ends that can write now (a
//!   heap per class). The class statistics `a_i` are relay-wide: every cell the relay
//!   sent in class i, on any connection. [`hpd_run`] replaces, at an HPD relay, the write
//!   pass's round robin over channel ends and the fill of each outbuf up to its high-water
//!   mark: it takes the class with the highest `p_i`, moves that class's head cells to
//!   their end's outbuf, only as many as the end can write now (its socket's free space
//!   and one share of the relay's write bucket, [`HpdChannels::room`]), and writes them at
//!   once. An outbuf thus holds at most the unwritten part of one cell, and never locks a
//!   class-blind order in front of a later decision. The pass runs at every pump of the
//!   relay, until the write bucket is empty or every end with cells is blocked (socket
//!   full: its writable notice brings it back; per-connection bucket empty: the refill).
//!
//! HPD orders only cells that wait in the relay's circuit queues, which they do behind
//! the relay's write bucket (an exit, which turns 498-byte payloads into 543-byte cells,
//! can read faster than it writes). A guard or middle reads exactly the cells it writes;
//! with one rate for both buckets it is limited by reading, and the cells wait unread in
//! the connection they arrive on, in arrival order. A cell written to the kernel is out
//! of HPD's hands too: where a connection's socket or link is the bottleneck, cells wait
//! there in the order they were written. (`docs/mechanisms/braids.md` measures both.)
//!
//! **Owns:** the class FIFOs of each channel end, the relay-wide class statistics and the
//! order in which a relay's queued cells leave for its channels' outbufs. **Must not
//! touch:** the circuit queues, outbufs, sockets or buckets themselves: a run sees them
//! through [`HpdChannels`] (implemented by the network's pump over the relay's channel
//! ends), which moves the cells and writes them. The cells stay in their circuits' queues
//! in order, so when a class's head run belongs to circuit c the relay takes c's oldest
//! cells: within one circuit cells never overtake each other (Tor's cells must arrive in
//! order), and a circuit whose paid credit runs out mid-queue has its later cells counted
//! in the lower class. Which class a cell is in is decided by the relay's
//! [`crate::incentive::IncentiveScheme`] when the cell is queued
//! ([`CircuitScheduler::on_cells_queued`]); without a scheme every cell is
//! [`ServiceClass::Normal`] and HPD is first come, first served across the relay.
//!
//! Deterministic: ties between ends whose heads arrived at the same time go to the end
//! listed first in the relay's write ring. No allocation per cell: the heaps and lists of
//! a run are the relay's, reused.

use std::collections::{BTreeMap, VecDeque};

use onionlab_core::SimTime;

use crate::incentive::{ServiceClass, CLASSES};
use crate::scheduler::{CircPolicyData, CircuitScheduler, ClassDelays, ClassHeads};

/// HPD's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpdParams {
    /// Delay differentiation parameters `c_i` by class (low-latency, high-throughput,
    /// normal): positive and strictly increasing (the paper's `c1 < c2 < c3`). Default
    /// 1 : 2 : 3.
    pub delay: [f64; CLASSES],
    /// Weight of PAD (the classes' average delay) against WTP (the head cell's waiting
    /// time), in [0, 1]. Default 0.5.
    pub f: f64,
}

impl Default for HpdParams {
    fn default() -> Self {
        HpdParams { delay: [1.0, 2.0, 3.0], f: 0.5 }
    }
}

impl HpdParams {
    /// Checks the parameters; the error names the one that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.delay.iter().any(|c| !c.is_finite() || *c <= 0.0) {
            return Err(format!("delay: every class's parameter must be positive, got {:?}", self.delay));
        }
        if !(self.delay[0] < self.delay[1] && self.delay[1] < self.delay[2]) {
            return Err(format!(
                "delay: must increase strictly from low-latency to normal (c_LL < c_HT < c_N, the paper's c1 < c2 < c3), got {:?}",
                self.delay
            ));
        }
        if !(0.0..=1.0).contains(&self.f) {
            return Err(format!("f: must lie in [0, 1], got {}", self.f));
        }
        Ok(())
    }
}

/// Cells of one circuit that joined a class's FIFO at one time.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ClassRun {
    circ: u32,
    count: u32,
    at: SimTime,
}

/// The HPD bookkeeping of one channel end: its class FIFOs and what it sent per class.
/// At a relay the decisions are relay-wide ([`hpd_run`]), which reads the FIFOs' heads and
/// takes cells with [`CircuitScheduler::pick_class`]. Its own [`pick`](CircuitScheduler::pick)
/// is HPD over this end alone, with this end's statistics (the relay does not call it).
#[derive(Debug, Clone)]
pub struct HpdScheduler {
    params: HpdParams,
    fifo: [VecDeque<ClassRun>; CLASSES],
    /// Cells sent per class and the sum of their queueing delays (ns).
    sent: ClassDelays,
    /// Cells each active circuit has in the FIFOs.
    circuits: BTreeMap<u32, u64>,
    /// The class of the last pick, which `on_cells_sent` charges.
    last: Option<usize>,
    /// Circuits held off this end by their own empty bucket ([`CircuitScheduler::hold`]):
    /// their runs (class index, run) in arrival order, out of the FIFOs until released.
    held: BTreeMap<u32, Vec<(usize, ClassRun)>>,
}

impl HpdScheduler {
    pub fn new(params: HpdParams) -> Self {
        HpdScheduler {
            params,
            fifo: Default::default(),
            sent: ClassDelays::default(),
            circuits: BTreeMap::new(),
            last: None,
            held: BTreeMap::new(),
        }
    }

    /// Mean queueing delay (s) of class `i`'s cells sent so far; 0 before the first.
    fn average_delay(&self, i: usize) -> f64 {
        let n = self.sent.cells[i];
        if n == 0 {
            0.0
        } else {
            self.sent.delay_ns[i] as f64 / 1e9 / n as f64
        }
    }

    /// Each class's HPD priority at `now` (`None` for an empty class).
    fn priorities(&self, now: SimTime) -> [Option<f64>; CLASSES] {
        std::array::from_fn(|i| {
            self.fifo[i].front().map(|h| priority(&self.params, &self.sent, i, now.saturating_since(h.at).as_secs_f64(), 0))
        })
    }

    /// Mean queueing delay (s) of each class's cells sent so far.
    pub fn average_delays(&self) -> [f64; CLASSES] {
        std::array::from_fn(|i| self.average_delay(i))
    }
}

impl CircuitScheduler for HpdScheduler {
    fn activate(&mut self, _circ: u32, _now: SimTime, _data: &mut CircPolicyData) {}

    fn deactivate(&mut self, circ: u32, _data: &mut CircPolicyData) {
        // Emptied (nothing of it left in the FIFOs) or closed with cells queued: those are
        // dropped, and leave without counting as sent (a held circuit's too).
        self.held.remove(&circ);
        if self.circuits.remove(&circ).is_some_and(|n| n > 0) {
            for q in &mut self.fifo {
                q.retain(|r| r.circ != circ);
            }
        }
    }

    /// Sets the circuit's runs aside, with their arrival times: HPD's FIFOs hold only
    /// cells that may leave now, so a held circuit's head never stands in front of the
    /// class at this end.
    fn hold(&mut self, circ: u32, _data: &mut CircPolicyData) {
        let runs = self.held.entry(circ).or_default();
        if self.circuits.remove(&circ).is_some_and(|n| n > 0) {
            for (i, q) in self.fifo.iter_mut().enumerate() {
                q.retain(|r| {
                    if r.circ == circ {
                        runs.push((i, *r));
                    }
                    r.circ != circ
                });
            }
            runs.sort_by_key(|(_, r)| r.at);
        }
    }

    /// Puts the held runs back in their classes' FIFOs at their arrival times: they have
    /// waited all along, and go before cells that came later.
    fn release(&mut self, circ: u32, _now: SimTime, _data: &mut CircPolicyData) {
        let Some(runs) = self.held.remove(&circ) else { return };
        for (i, r) in runs {
            let q = &mut self.fifo[i];
            let at = q.partition_point(|x| x.at <= r.at);
            q.insert(at, r);
            *self.circuits.entry(circ).or_insert(0) += r.count as u64;
        }
    }

    fn on_cells_queued(&mut self, circ: u32, n: u32, class: ServiceClass, now: SimTime) {
        if n == 0 {
            return;
        }
        if let Some(runs) = self.held.get_mut(&circ) {
            runs.push((class.index(), ClassRun { circ, count: n, at: now }));
            return;
        }
        *self.circuits.entry(circ).or_insert(0) += n as u64;
        let q = &mut self.fifo[class.index()];
        match q.back_mut() {
            Some(r) if r.circ == circ && r.at == now => r.count += n,
            _ => q.push_back(ClassRun { circ, count: n, at: now }),
        }
    }

    fn pick(&mut self, now: SimTime) -> Option<(u32, u32)> {
        let p = self.priorities(now);
        let i = best_class(&p)?;
        self.last = Some(i);
        let head = *self.fifo[i].front().expect("best class has a head");
        let w = now.saturating_since(head.at).as_secs_f64();
        Some((head.circ, run_length(&self.params, &self.sent, &p, i, w, head.count)))
    }

    fn on_cells_sent(&mut self, circ: u32, n: u32, now: SimTime) {
        let Some(i) = self.last else { return };
        let mut left = n;
        while left > 0 {
            let Some(head) = self.fifo[i].front_mut() else { break };
            debug_assert_eq!(head.circ, circ, "HPD sends the head run's circuit");
            let k = left.min(head.count);
            self.sent.cells[i] += k as u64;
            self.sent.delay_ns[i] += k as u128 * now.saturating_since(head.at).as_nanos() as u128;
            head.count -= k;
            left -= k;
            if head.count == 0 {
                self.fifo[i].pop_front();
            }
            if let Some(c) = self.circuits.get_mut(&circ) {
                *c = c.saturating_sub(k as u64);
            }
        }
    }

    fn active(&self) -> usize {
        self.circuits.len()
    }

    fn name(&self) -> &'static str {
        "hpd"
    }

    fn wants_classes(&self) -> bool {
        true
    }

    fn class_delays(&self) -> Option<ClassDelays> {
        Some(self.sent)
    }

    fn class_heads(&self) -> Option<ClassHeads> {
        Some(std::array::from_fn(|i| self.fifo[i].front().map(|h| (h.at, h.count))))
    }

    fn pick_class(&mut self, class: usize) -> Option<(u32, u32)> {
        let head = self.fifo[class].front()?;
        self.last = Some(class);
        Some((head.circ, head.count))
    }
}

/// What a relay-wide HPD run ([`hpd_run`]) may do at one of the relay's channel ends now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpdRoom {
    /// The end can write this many more cells now (at least one; the last may be written
    /// only in part).
    Cells(u64),
    /// Nothing more at this end in this run: no cells, or its socket is full (its
    /// writable notice is armed), or its own bucket is empty (it waits for the refill).
    Done,
    /// The relay's write bucket is empty: the run ends, and the ends wait for the refill.
    Stop,
}

/// A relay's channel ends as [`hpd_run`] sees them. Indices are stable for one run.
pub trait HpdChannels {
    /// Number of channel ends in the run.
    fn len(&self) -> usize;
    /// Whether the run has no channel ends.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The end's class heads ([`CircuitScheduler::class_heads`]).
    fn heads(&self, i: usize) -> ClassHeads;
    /// What the end can write now. May first write what its outbuf already holds (the
    /// unwritten part of a cell): those bytes were chosen by an earlier decision.
    fn room(&mut self, i: usize) -> HpdRoom;
    /// Moves `n` cells of the head run of `class` at the end to its outbuf and writes the
    /// outbuf to the kernel; returns the cells moved.
    fn send(&mut self, i: usize, class: usize, n: u32, now: SimTime) -> u32;
}

/// The head run of an end's class FIFO in a run's heap: its arrival time, then the end's
/// index (earlier first on both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head(SimTime, usize);

impl Ord for Head {
    /// Reversed, so that `BinaryHeap`'s maximum is the oldest head (then the lowest index).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A relay's HPD state: its parameters, its class statistics over every cell it sent
/// (every channel end, open or since closed), and a run's scratch, kept for the next run.
#[derive(Debug, Clone)]
pub struct HpdRelay {
    params: HpdParams,
    /// Cells the relay sent per class and the sum of their queueing delays (ns).
    sent: ClassDelays,
    /// Per class, the ends that can write now by their head's arrival time.
    heaps: [std::collections::BinaryHeap<Head>; CLASSES],
    /// Per end of the run: still able to write.
    live: Vec<bool>,
}

impl HpdRelay {
    pub fn new(params: HpdParams) -> Self {
        HpdRelay { params, sent: ClassDelays::default(), heaps: Default::default(), live: Vec::new() }
    }

    /// The relay-wide class statistics (cells sent and their summed queueing delays).
    pub fn class_delays(&self) -> ClassDelays {
        self.sent
    }
}

/// HPD priority of class `i` whose head cell waited `w` seconds, after `extra` more of its
/// cells with that wait have been sent, given the cells sent so far (`sent`: one channel
/// end's or the relay's).
fn priority(params: &HpdParams, sent: &ClassDelays, i: usize, w: f64, extra: u64) -> f64 {
    let f = params.f;
    let n = sent.cells[i] + extra;
    let a = if n == 0 { 0.0 } else { (sent.delay_ns[i] as f64 / 1e9 + extra as f64 * w) / n as f64 };
    ((1.0 - f) * w + f * a) / params.delay[i]
}

/// The class with the largest priority in `p` (`None`: every class empty); strictly
/// greater, so a tie keeps the earlier (higher-priority) class.
fn best_class(p: &[Option<f64>; CLASSES]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, pi) in p.iter().enumerate() {
        if let Some(pi) = *pi {
            if best.is_none_or(|(_, bp)| pi > bp) {
                best = Some((i, pi));
            }
        }
    }
    best.map(|(i, _)| i)
}

/// How many cells of class `i`'s head run (at most `limit`, at least 1), whose head waited
/// `w` seconds, go before HPD would choose again: sending a cell leaves every other class's
/// priority in `p` as it is (same time, same heads) and moves only this class's average
/// delay towards the head's wait.
fn run_length(params: &HpdParams, sent: &ClassDelays, p: &[Option<f64>; CLASSES], i: usize, w: f64, limit: u32) -> u32 {
    let rival = |js: std::ops::Range<usize>| js.filter_map(|j| p[j]).fold(f64::NEG_INFINITY, f64::max);
    // The best of the classes before i (which win ties) and after i (which lose them).
    let rivals = (rival(0..i), rival(i + 1..CLASSES));
    let mut k = 1u32;
    while k < limit {
        let p = priority(params, sent, i, w, k as u64);
        if !(p > rivals.0 && p >= rivals.1) {
            break;
        }
        k += 1;
    }
    k
}

/// One relay-wide HPD pass at `now` over the relay's channel ends (see the module docs):
/// repeatedly sends the head cells of the class with the highest priority, from the end
/// where that class's oldest head waits among the ends that can write, until the relay's
/// write bucket is empty or no end can take a cell; then asks every end still able to
/// write for its room once more, so that the rest of a cell written in part goes too.
/// Returns the cells sent.
pub fn hpd_run(chans: &mut dyn HpdChannels, relay: &mut HpdRelay, now: SimTime) -> u64 {
    let n = chans.len();
    relay.live.clear();
    relay.live.resize(n, false);
    for h in &mut relay.heaps {
        h.clear();
    }
    for i in 0..n {
        match chans.room(i) {
            HpdRoom::Stop => return 0,
            HpdRoom::Done => {}
            HpdRoom::Cells(_) => {
                relay.live[i] = true;
                for (c, head) in chans.heads(i).iter().enumerate() {
                    if let Some((at, _)) = *head {
                        relay.heaps[c].push(Head(at, i));
                    }
                }
            }
        }
    }
    let mut total = 0u64;
    loop {
        // Each class's relay-wide head among the ends that can still write, and its
        // priority. An end's entry in a class's heap changes only when that class is served
        // there (it is then the top); ends that stopped are dropped as they surface.
        let mut top: [Option<(f64, SimTime, usize)>; CLASSES] = [None; CLASSES];
        for (c, t) in top.iter_mut().enumerate() {
            while let Some(&Head(at, i)) = relay.heaps[c].peek() {
                if !relay.live[i] {
                    relay.heaps[c].pop();
                    continue;
                }
                *t = Some((priority(&relay.params, &relay.sent, c, now.saturating_since(at).as_secs_f64(), 0), at, i));
                break;
            }
        }
        let p = top.map(|t| t.map(|t| t.0));
        let Some(c) = best_class(&p) else { break };
        let (_, at, i) = top[c].expect("the best class has a head");
        let room = match chans.room(i) {
            HpdRoom::Stop => return total,
            HpdRoom::Done => {
                relay.live[i] = false;
                continue;
            }
            HpdRoom::Cells(r) => r,
        };
        let (head_at, run) = chans.heads(i)[c].expect("a class in the heap has a head at its end");
        debug_assert_eq!(head_at, at, "the heap holds the end's current head");
        // The run's cells are the oldest of their class at the relay, as in
        // `HpdScheduler::pick`.
        let w = now.saturating_since(at);
        let k = run_length(&relay.params, &relay.sent, &p, c, w.as_secs_f64(), room.min(run as u64) as u32);
        let moved = chans.send(i, c, k, now);
        relay.sent.cells[c] += moved as u64;
        relay.sent.delay_ns[c] += moved as u128 * w.as_nanos() as u128;
        total += moved as u64;
        relay.heaps[c].pop();
        if moved == 0 {
            debug_assert!(false, "an end with room and a head sent nothing");
            relay.live[i] = false;
            continue;
        }
        if let Some((next, _)) = chans.heads(i)[c] {
            relay.heaps[c].push(Head(next, i));
        }
    }
    // A send whose last cell went to the kernel only in part left the rest in the outbuf;
    // asking each end's room writes it (or finds the end blocked, or the bucket empty).
    for i in 0..n {
        if relay.live[i] && chans.room(i) == HpdRoom::Stop {
            break;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_core::SimDuration;

    fn t(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    fn sched(f: f64) -> HpdScheduler {
        HpdScheduler::new(HpdParams { delay: [1.0, 2.0, 3.0], f })
    }

    /// Sends what `pick` offers, all of it, and returns (circuit, cells).
    fn step(s: &mut HpdScheduler, now: SimTime) -> Option<(u32, u32)> {
        let (c, n) = s.pick(now)?;
        s.on_cells_sent(c, n, now);
        Some((c, n))
    }

    #[test]
    fn wtp_serves_the_largest_normalised_wait() {
        // Pure WTP (f = 0). At t = 1 s: a normal cell waiting 1 s has priority 1/3, a
        // high-throughput cell waiting 0.5 s 0.5/2 = 0.25, a low-latency cell waiting
        // 0.2 s 0.2/1 = 0.2. Normal goes first, then HT (0.25 > 0.2), then LL.
        let mut s = sched(0.0);
        s.on_cells_queued(7, 1, ServiceClass::Normal, t(0));
        s.on_cells_queued(8, 1, ServiceClass::HighThroughput, t(500));
        s.on_cells_queued(9, 1, ServiceClass::LowLatency, t(800));
        assert_eq!(step(&mut s, t(1000)), Some((7, 1)));
        assert_eq!(step(&mut s, t(1000)), Some((8, 1)));
        assert_eq!(step(&mut s, t(1000)), Some((9, 1)));
        assert_eq!(s.pick(t(1000)), None);
        // Delays: 1 s, 0.5 s, 0.2 s.
        assert_eq!(s.average_delays(), [0.2, 0.5, 1.0]);
    }

    #[test]
    fn equal_waits_go_to_the_higher_class_and_a_tie_to_the_lower_index() {
        let mut s = sched(0.0);
        s.on_cells_queued(1, 2, ServiceClass::Normal, t(0));
        s.on_cells_queued(2, 2, ServiceClass::LowLatency, t(0));
        // Waits 0.3 s each: LL 0.3, N 0.1.
        assert_eq!(step(&mut s, t(300)), Some((2, 2)));
        assert_eq!(step(&mut s, t(300)), Some((1, 2)));
        // A tie: LL waiting 0.25 s (0.25) against HT waiting 0.5 s (0.5/2 = 0.25): LL.
        let mut s = sched(0.0);
        s.on_cells_queued(1, 1, ServiceClass::HighThroughput, t(0));
        s.on_cells_queued(2, 1, ServiceClass::LowLatency, t(250));
        assert_eq!(s.pick(t(500)).map(|p| p.0), Some(2));
    }

    #[test]
    fn a_held_circuit_leaves_the_fifos_and_comes_back_at_its_arrival_times() {
        // Circuit 1 is held (its own bucket is empty): its cells, queued before and while
        // held, are out of the FIFO, so circuit 2's later cells go first; released, its
        // cells go back by arrival time, ahead of circuit 2's later ones.
        let mut s = sched(0.0);
        let d = &mut CircPolicyData::default();
        s.on_cells_queued(1, 2, ServiceClass::Normal, t(0));
        s.on_cells_queued(2, 1, ServiceClass::Normal, t(100));
        s.hold(1, d);
        s.on_cells_queued(1, 1, ServiceClass::Normal, t(200));
        s.on_cells_queued(2, 1, ServiceClass::Normal, t(300));
        assert_eq!(s.active(), 1, "a held circuit is not active");
        assert_eq!(step(&mut s, t(400)), Some((2, 1)));
        s.release(1, t(500), d);
        assert_eq!(s.active(), 2);
        let order: Vec<_> = std::iter::from_fn(|| step(&mut s, t(600))).collect();
        assert_eq!(order, vec![(1, 2), (1, 1), (2, 1)], "by arrival: 0 ms, 200 ms, then 300 ms");
        s.deactivate(1, d);
        s.deactivate(2, d);
        // Closing a held circuit drops its cells.
        s.on_cells_queued(3, 5, ServiceClass::Normal, t(700));
        s.hold(3, d);
        s.deactivate(3, d);
        s.release(3, t(800), d);
        assert_eq!((s.active(), s.pick(t(900))), (0, None));
    }

    #[test]
    fn pad_counts_the_delay_a_class_already_suffered() {
        // f = 1 (pure PAD). HT has sent one cell with 1 s delay (a = 1, p = 0.5); LL none
        // (a = 0, p = 0). With both waiting, HT goes first, whatever the heads' waits.
        let mut s = sched(1.0);
        s.on_cells_queued(5, 1, ServiceClass::HighThroughput, t(0));
        assert_eq!(step(&mut s, t(1000)), Some((5, 1)));
        s.on_cells_queued(6, 1, ServiceClass::LowLatency, t(1000));
        s.on_cells_queued(5, 1, ServiceClass::HighThroughput, t(1900));
        assert_eq!(step(&mut s, t(2000)).map(|p| p.0), Some(5));
        // HT's average is now (1 + 0.1) / 2 = 0.55 s, p = 0.275; LL still 0: LL is alone.
        assert_eq!(step(&mut s, t(2000)), Some((6, 1)));
    }

    #[test]
    fn hpd_mixes_the_two_and_a_run_goes_until_its_class_stops_winning() {
        // f = 0.5. LL has sent 1 cell with 0 delay (a = 0). Now at t = 1 s: LL head (4
        // cells) waited 0.4 s: p = (0.5*0.4 + 0.5*0)/1 = 0.2. N head waited 1.0 s with
        // a = 0: p = 0.5/3 = 0.1667. LL goes; after k of its cells its average is
        // 0.4k/(1+k): p(k) = 0.2 + 0.2k/(1+k) rises, so the whole run goes.
        let mut s = sched(0.5);
        s.on_cells_queued(3, 1, ServiceClass::LowLatency, t(0));
        assert_eq!(step(&mut s, t(0)), Some((3, 1)));
        s.on_cells_queued(4, 1, ServiceClass::Normal, t(0));
        s.on_cells_queued(3, 4, ServiceClass::LowLatency, t(600));
        assert_eq!(step(&mut s, t(1000)), Some((3, 4)));
        assert_eq!(step(&mut s, t(1000)), Some((4, 1)));

        // The other way: LL has an average of 2 s over 1 cell, its head (5 cells) waited
        // 0.1 s: p(0) = (0.05 + 1.0)/1 = 1.05; N head waited 2.4 s, a = 0: p = 1.2/3 = 0.4.
        // After k cells LL's average is (2 + 0.1k)/(1+k): p(k) = 0.05 + 0.5(2+0.1k)/(1+k);
        // p(1) = 0.575, p(2) = 0.4167, p(3) = 0.3375 < 0.4: three cells, then N.
        let mut s = sched(0.5);
        s.on_cells_queued(3, 1, ServiceClass::LowLatency, t(0));
        assert_eq!(step(&mut s, t(2000)), Some((3, 1)));
        s.on_cells_queued(4, 1, ServiceClass::Normal, t(0));
        s.on_cells_queued(3, 5, ServiceClass::LowLatency, t(2300));
        assert_eq!(step(&mut s, t(2400)), Some((3, 3)));
        assert_eq!(step(&mut s, t(2400)), Some((4, 1)));
        assert_eq!(step(&mut s, t(2400)), Some((3, 2)));
    }

    #[test]
    fn closing_a_circuit_drops_its_cells_without_counting_them() {
        let mut s = sched(0.5);
        s.on_cells_queued(1, 3, ServiceClass::Normal, t(0));
        s.on_cells_queued(2, 2, ServiceClass::Normal, t(10));
        s.on_cells_queued(1, 1, ServiceClass::LowLatency, t(20));
        assert_eq!(s.active(), 2);
        s.deactivate(1, &mut CircPolicyData::default());
        assert_eq!(s.active(), 1);
        assert_eq!(step(&mut s, t(100)), Some((2, 2)));
        assert_eq!(s.pick(t(100)), None);
        assert_eq!(s.class_delays().unwrap().cells, [0, 0, 2]);
    }

    /// A relay for [`hpd_run`]: channel ends, each an [`HpdScheduler`] with circuit `i` on
    /// end `i`, and the relay's write bucket as a number of cells per pass.
    struct Ends {
        ends: Vec<HpdScheduler>,
        queued: Vec<u64>,
        bucket: u64,
        /// (end, class, cells) of every send, in order.
        log: Vec<(usize, usize, u32)>,
    }

    impl Ends {
        fn new(n: usize, params: HpdParams) -> Self {
            Ends { ends: (0..n).map(|_| HpdScheduler::new(params)).collect(), queued: vec![0; n], bucket: 0, log: Vec::new() }
        }
        fn queue(&mut self, i: usize, n: u32, class: ServiceClass, at: SimTime) {
            self.ends[i].on_cells_queued(i as u32, n, class, at);
            self.queued[i] += n as u64;
        }
    }

    impl HpdChannels for Ends {
        fn len(&self) -> usize {
            self.ends.len()
        }
        fn heads(&self, i: usize) -> ClassHeads {
            self.ends[i].class_heads().unwrap()
        }
        fn room(&mut self, i: usize) -> HpdRoom {
            if self.bucket == 0 {
                HpdRoom::Stop
            } else if self.queued[i] == 0 {
                HpdRoom::Done
            } else {
                HpdRoom::Cells(self.bucket)
            }
        }
        fn send(&mut self, i: usize, class: usize, n: u32, now: SimTime) -> u32 {
            let (circ, run) = self.ends[i].pick_class(class).unwrap();
            let k = n.min(run);
            self.ends[i].on_cells_sent(circ, k, now);
            self.queued[i] -= k as u64;
            self.bucket -= k as u64;
            self.log.push((i, class, k));
            k
        }
    }

    #[test]
    fn the_relay_serves_the_oldest_head_of_the_best_class_across_its_ends() {
        // Pure WTP (f = 0), three ends. At t = 1 s: end 0 holds 2 low-latency cells that
        // arrived at 0.8 s (p = 0.2/1 = 0.2); end 1 holds 3 normal cells from 0.1 s
        // (p = 0.9/3 = 0.3); end 2 holds 2 normal cells from 0.4 s. The relay's normal
        // head is end 1's: it goes first, all 3 cells (its priority stays 0.3 > 0.2). Then
        // the normal head is end 2's (0.6/3 = 0.2), which ties with low-latency: LL goes
        // (2 cells), then end 2. A per-end scheduler would never compare end 0 with end 1.
        let mut r = Ends::new(3, HpdParams { delay: [1.0, 2.0, 3.0], f: 0.0 });
        r.queue(0, 2, ServiceClass::LowLatency, t(800));
        r.queue(1, 3, ServiceClass::Normal, t(100));
        r.queue(2, 2, ServiceClass::Normal, t(400));
        r.bucket = 100;
        let mut relay = HpdRelay::new(HpdParams { delay: [1.0, 2.0, 3.0], f: 0.0 });
        assert_eq!(hpd_run(&mut r, &mut relay, t(1000)), 7);
        assert_eq!(r.log, vec![(1, 2, 3), (0, 0, 2), (2, 2, 2)]);
        // The relay's statistics are over all ends: normal 3 x 0.9 s + 2 x 0.6 s.
        let d = relay.class_delays();
        assert_eq!((d.cells, d.delay_ns), ([2, 0, 5], [400_000_000, 0, 3_900_000_000]));

        // The bucket bounds a run: with room for 2 cells, only end 1's first 2 go, and the
        // next run (after the refill) goes on from there.
        let mut r = Ends::new(2, HpdParams::default());
        r.queue(0, 4, ServiceClass::Normal, t(0));
        r.queue(1, 4, ServiceClass::Normal, t(10));
        r.bucket = 2;
        let mut relay = HpdRelay::new(HpdParams::default());
        assert_eq!(hpd_run(&mut r, &mut relay, t(100)), 2);
        assert_eq!(r.log, vec![(0, 2, 2)]);
        r.bucket = 3;
        assert_eq!(hpd_run(&mut r, &mut relay, t(200)), 3);
        assert_eq!(r.log, vec![(0, 2, 2), (0, 2, 2), (1, 2, 1)]);
    }

    #[test]
    fn two_backlogged_ends_get_delays_in_the_ratio_of_their_classes() {
        // A relay whose write bucket is its bottleneck: end 0 carries a low-latency circuit,
        // end 1 a normal one, each gets one cell every 10 ms and both start with 300
        // queued; the bucket lets 2 cells a tick leave. The backlog stays (600 cells in
        // all), and HPD shares it so that the delays go as c_LL : c_N = 1 : 3: by Little's
        // law 150 and 450 cells queued, 1.5 s and 4.5 s. A scheduler per end, with the
        // ends served in turn, would give each 300 cells and 3 s.
        for f in [0.0, 0.5] {
            let params = HpdParams { delay: [1.0, 2.0, 3.0], f };
            let mut r = Ends::new(2, params);
            let mut relay = HpdRelay::new(params);
            r.queue(0, 300, ServiceClass::LowLatency, t(0));
            r.queue(1, 300, ServiceClass::Normal, t(0));
            let mut half = ClassDelays::default();
            for tick in 1..=6000u64 {
                let now = t(10 * tick);
                r.queue(0, 1, ServiceClass::LowLatency, now);
                r.queue(1, 1, ServiceClass::Normal, now);
                r.bucket = 2;
                assert_eq!(hpd_run(&mut r, &mut relay, now), 2);
                if tick == 3000 {
                    half = relay.class_delays();
                }
            }
            // The mean delays over the second half, the first 30 s being the transient.
            let d = relay.class_delays();
            let mean = |i: usize| (d.delay_ns[i] - half.delay_ns[i]) as f64 / 1e9 / (d.cells[i] - half.cells[i]) as f64;
            let (ll, n) = (mean(0), mean(2));
            // Measured: 1.500 s and 4.500 s at f = 0, 1.511 s and 4.489 s at f = 0.5.
            eprintln!("f = {f}: low-latency {ll:.4} s, normal {n:.4} s");
            assert!((ll - 1.5).abs() < 0.1 && (n - 4.5).abs() < 0.1, "f = {f}: low-latency {ll:.3} s, normal {n:.3} s");
            assert_eq!(r.queued[0] + r.queued[1], 600, "the backlog stays");
        }
    }

    #[test]
    fn bad_parameters_name_the_field() {
        assert!(HpdParams::default().validate().is_ok());
        assert!(HpdParams { delay: [1.0, 0.0, 3.0], f: 0.5 }.validate().unwrap_err().starts_with("delay"));
        assert!(HpdParams { delay: [3.0, 2.0, 1.0], f: 0.5 }.validate().unwrap_err().starts_with("delay"));
        // The paper's c1 < c2 < c3: equal parameters are refused (item 6 of the BRAIDS audit).
        for delay in [[1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [1.0, 1.0, 3.0]] {
            assert!(HpdParams { delay, f: 0.5 }.validate().unwrap_err().starts_with("delay"), "{delay:?}");
        }
        assert!(HpdParams { delay: [1.0, 2.0, 3.0], f: 1.5 }.validate().unwrap_err().starts_with("f:"));
    }
}
