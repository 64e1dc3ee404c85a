//! Circuit schedulers: which circuit's cell goes next on a channel.
//!
//! **Owns:** the [`CircuitScheduler`] trait (tor's `circuitmux` policy, one instance per
//! channel end) and the round-robin policy the 2010-2012 papers call "vanilla".
//! **Must not touch:** queues, buffers or buckets. A scheduler sees circuit ids and is told
//! when circuits gain or lose cells and when cells leave; the relay does the moving.
//!
//! Other schedulers (EWMA in [`crate::ewma`], BRAIDS priorities) implement the same trait
//! and are picked with [`SchedulerKind`]. A channel end holds its scheduler as a
//! [`CircuitMux`]: the built-in policies inline, any other one boxed. KIST
//! ([`crate::kist`]) adds a relay-level run across channels on top of a per-channel EWMA
//! circuitmux; HPD ([`crate::hpd`]) decides across a relay's channels too, from the class
//! FIFOs its per-channel circuitmuxes keep.

use onionlab_core::SimTime;

/// What a policy keeps about one circuit on one channel end while the circuit has no cells
/// there (tor's `circuitmux_policy_circ_data_t`, which hangs off the circuit). The relay
/// stores it with the circuit's queue for that channel and hands it to
/// [`activate`](CircuitScheduler::activate) and [`deactivate`](CircuitScheduler::deactivate),
/// so a policy keeps only its active circuits and needs no map of every circuit it has
/// seen: at full-network scale such a map costs a tree walk of cache misses per
/// activation, and grows with every circuit a channel ever carried. A new circuit's data is
/// the default (zero).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CircPolicyData {
    /// The policy's value for the circuit (EWMA: its cell count).
    pub value: f64,
    /// When `value` was last brought up to date, in the policy's own unit (EWMA: a tick
    /// number or nanoseconds).
    pub stamp: u64,
}

/// The cells waiting for one channel end, by circuit, as a scheduler's
/// [`fill`](CircuitScheduler::fill) sees them. The relay implements it; the scheduler
/// decides the order and amounts.
pub trait CellSource {
    /// Cells `circ` has queued for this channel.
    fn queued(&self, circ: u32) -> u64;
    /// Moves up to `n` cells of `circ` to the channel, in order; returns how many moved.
    fn take(&mut self, circ: u32, n: u64) -> u64;
    /// The policy data of `circ` on this channel end (for [`CircuitScheduler::deactivate`]).
    fn policy_data(&mut self, circ: u32) -> &mut CircPolicyData;
    /// Whether `circ`, for which [`queued`](Self::queued) says 0, still has cells that its
    /// own per-circuit bucket holds back until the next refill: the scheduler must
    /// [`hold`](CircuitScheduler::hold) it rather than deactivate it.
    fn held(&self, _circ: u32) -> bool {
        false
    }
}

/// [`CircuitScheduler::fill`] by repeated [`pick`](CircuitScheduler::pick)s: the exact
/// policy order, one scheduling decision per turn.
pub fn fill_by_picks<S: CircuitScheduler + ?Sized>(s: &mut S, room: u64, now: SimTime, src: &mut dyn CellSource) -> u64 {
    let mut moved = 0;
    while moved < room {
        let Some((circ, quantum)) = s.pick(now) else { break };
        let n = src.take(circ, (room - moved).min(quantum as u64));
        s.on_cells_sent(circ, n as u32, now);
        if src.queued(circ) == 0 {
            if src.held(circ) {
                s.hold(circ, src.policy_data(circ));
            } else {
                s.deactivate(circ, src.policy_data(circ));
            }
        }
        if n == 0 {
            break;
        }
        moved += n;
    }
    moved
}

/// Picks circuits for one channel end.
pub trait CircuitScheduler {
    /// `circ` now has cells waiting for this channel (it had none); `data` is what the
    /// policy left in it at the circuit's last deactivation here (default if none).
    fn activate(&mut self, circ: u32, now: SimTime, data: &mut CircPolicyData);
    /// `circ` has no more cells for this channel, or was closed; the policy saves what it
    /// needs at the next activation in `data`.
    fn deactivate(&mut self, circ: u32, data: &mut CircPolicyData);
    /// `circ` still has cells queued for this channel but may send none until
    /// [`release`](Self::release): its own per-circuit bucket is empty (Tortoise's
    /// `limit_unit = "circuit"`). The policy stops offering it, like a circuit without
    /// cells, and keeps what it needs to resume. Also called for a circuit that is not
    /// active (its queue was empty when its first cells came behind an empty bucket). The
    /// default is [`deactivate`](Self::deactivate) (a no-op for a circuit not active);
    /// a policy that keeps the cells' order itself (HPD's class FIFOs) must set them aside.
    fn hold(&mut self, circ: u32, data: &mut CircPolicyData) {
        self.deactivate(circ, data)
    }
    /// A circuit [`hold`](Self::hold) stopped, which still has cells, may send again (its
    /// bucket refilled). The default is [`activate`](Self::activate).
    fn release(&mut self, circ: u32, now: SimTime, data: &mut CircPolicyData) {
        self.activate(circ, now, data)
    }
    /// The circuit whose cells go next and how many of them at most before the scheduler
    /// must be asked again; `None` when no circuit is active.
    fn pick(&mut self, now: SimTime) -> Option<(u32, u32)>;
    /// `n` cells of `circ` (the last pick) were moved to the channel.
    fn on_cells_sent(&mut self, circ: u32, n: u32, now: SimTime);
    /// Number of active circuits.
    fn active(&self) -> usize;
    /// Short name for results and traces.
    fn name(&self) -> &'static str;
    /// The priority of the circuit [`pick`](Self::pick) would choose at `now`, comparable
    /// across the channels of one relay (lower goes first): what a relay-level scheduler
    /// (KIST, [`crate::kist`]) uses to choose between channels, as tor's
    /// `circuitmux_compare_muxes` does. `None` when the policy has no such value or no
    /// circuit is active.
    fn head_priority(&mut self, _now: SimTime) -> Option<f64> {
        None
    }
    /// `n` cells of `circ` of service class `class` joined its queue for this channel at
    /// `now` (every queued run, not only the first). Policies that order by class or by
    /// arrival time ([`crate::hpd::HpdScheduler`]) keep them; the others ignore it.
    fn on_cells_queued(&mut self, _circ: u32, _n: u32, _class: crate::incentive::ServiceClass, _now: SimTime) {}
    /// Whether this policy reads [`on_cells_queued`](Self::on_cells_queued): the relay
    /// skips the call (and any classification) for policies that do not.
    fn wants_classes(&self) -> bool {
        false
    }
    /// Cells sent per service class and their summed queueing delay, for policies that
    /// keep them (HPD).
    fn class_delays(&self) -> Option<ClassDelays> {
        None
    }
    /// For a policy whose decisions are made across the relay ([`crate::hpd::hpd_run`]):
    /// per service class, the arrival time of the head run of the class's FIFO at this end
    /// and its length in cells. `None` for policies without classes.
    fn class_heads(&self) -> Option<ClassHeads> {
        None
    }
    /// For a relay-wide class policy: makes the head run of class `class` (a
    /// [`crate::incentive::ServiceClass`] index) this end's pick, so that
    /// [`on_cells_sent`](Self::on_cells_sent) charges it, and returns its circuit and
    /// length. `None` when the class has no cells here or the policy has no classes.
    fn pick_class(&mut self, _class: usize) -> Option<(u32, u32)> {
        None
    }
    /// Limits `circ` to `cells` more cells on this channel until the next call (`None`:
    /// unlimited), for policies that shape circuits one by one
    /// ([`crate::shaped::ShapedRoundRobin`]); others ignore it.
    fn set_budget(&mut self, _circ: u32, _cells: Option<u64>) {}
    /// Moves up to `room` cells to the channel in this policy's order (tor's outbuf refill,
    /// `channel_flush_from_first_active_circuit` called until the room is used); returns
    /// how many moved. Circuits left without cells are deactivated. The default asks
    /// [`pick`](Self::pick) turn by turn; a policy may compute the same allocation faster.
    fn fill(&mut self, room: u64, now: SimTime, src: &mut dyn CellSource) -> u64 {
        fill_by_picks(self, room, now, src)
    }
}

/// Per service class ([`crate::incentive::ServiceClass`] order): the arrival time and
/// length (cells) of the head run of the class's FIFO at one channel end, if any.
pub type ClassHeads = [Option<(SimTime, u32)>; crate::incentive::CLASSES];

/// Per service class ([`crate::incentive::ServiceClass`] order): cells a scheduler sent
/// and the sum of their queueing delays (time from joining the circuit queue to leaving
/// it for the channel's outbuf) in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassDelays {
    pub cells: [u64; crate::incentive::CLASSES],
    pub delay_ns: [u128; crate::incentive::CLASSES],
}

impl ClassDelays {
    /// Adds `other` to these totals.
    pub fn add(&mut self, other: &ClassDelays) {
        for i in 0..crate::incentive::CLASSES {
            self.cells[i] += other.cells[i];
            self.delay_ns[i] += other.delay_ns[i];
        }
    }
}

/// Which scheduler a relay runs on its channels.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum SchedulerKind {
    /// Round robin over active circuits, one cell per turn (the papers' "vanilla").
    #[default]
    RoundRobin,
    /// Tor's circuit EWMA with tick-based decay ([`crate::ewma::EwmaScheduler`]).
    Ewma { halflife: onionlab_core::SimDuration, tick: onionlab_core::SimDuration },
    /// The paper's exact-decay EWMA ([`crate::ewma::ExactEwmaScheduler`]).
    EwmaExact { halflife: onionlab_core::SimDuration },
    /// KIST ([`crate::kist`]): a relay-level run every interval over all channels, limited
    /// per socket by the kernel's state; each channel's circuitmux is tor's EWMA with the
    /// given half-life and tick.
    Kist { params: crate::kist::KistParams, halflife: onionlab_core::SimDuration, tick: onionlab_core::SimDuration },
    /// BRAIDS's hybrid proportional delay over service classes ([`crate::hpd`]): a
    /// relay-wide run over all channels ([`crate::hpd::hpd_run`]); each channel's
    /// circuitmux keeps that channel's class FIFOs.
    Hpd(crate::hpd::HpdParams),
    /// Round robin with per-circuit budgets a controller sets ([`crate::shaped`];
    /// PredicTor).
    Shaped,
}

impl SchedulerKind {
    /// The circuitmux of one channel end under this kind.
    pub fn build(self) -> CircuitMux {
        match self {
            SchedulerKind::RoundRobin => CircuitMux::RoundRobin(RoundRobin::new(1)),
            SchedulerKind::Ewma { halflife, tick } => CircuitMux::Ewma(crate::ewma::EwmaScheduler::new(halflife, tick)),
            SchedulerKind::EwmaExact { halflife } => CircuitMux::EwmaExact(crate::ewma::ExactEwmaScheduler::new(halflife)),
            SchedulerKind::Kist { halflife, tick, .. } => CircuitMux::Ewma(crate::ewma::EwmaScheduler::new(halflife, tick)),
            SchedulerKind::Hpd(params) => CircuitMux::Custom(Box::new(crate::hpd::HpdScheduler::new(params))),
            SchedulerKind::Shaped => CircuitMux::Custom(Box::new(crate::shaped::ShapedRoundRobin::new())),
        }
    }

    /// The relay-level HPD parameters, if this is HPD.
    pub fn hpd(&self) -> Option<crate::hpd::HpdParams> {
        match self {
            SchedulerKind::Hpd(p) => Some(*p),
            _ => None,
        }
    }

    /// The relay-level KIST parameters, if this is KIST.
    pub fn kist(&self) -> Option<crate::kist::KistParams> {
        match self {
            SchedulerKind::Kist { params, .. } => Some(*params),
            _ => None,
        }
    }
}

/// The scheduler of one channel end (tor's circuitmux with its policy), stored inline in
/// the channel end: the built-in policies are variants, so the relay's hot path reaches a
/// policy's state without following a pointer to a heap object of its own (at
/// full-network scale every such pointer is a cache miss per batch). Any other
/// [`CircuitScheduler`] goes in [`CircuitMux::Custom`]; the relay code sees only the trait.
pub enum CircuitMux {
    RoundRobin(RoundRobin),
    Ewma(crate::ewma::EwmaScheduler),
    EwmaExact(crate::ewma::ExactEwmaScheduler),
    Custom(Box<dyn CircuitScheduler>),
}

impl std::fmt::Debug for CircuitMux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Calls `$body` with `$s` bound to the policy inside `$mux`.
macro_rules! with_policy {
    ($mux:expr, $s:ident => $body:expr) => {
        match $mux {
            CircuitMux::RoundRobin($s) => $body,
            CircuitMux::Ewma($s) => $body,
            CircuitMux::EwmaExact($s) => $body,
            CircuitMux::Custom($s) => $body,
        }
    };
}

impl CircuitScheduler for CircuitMux {
    #[inline]
    fn activate(&mut self, circ: u32, now: SimTime, data: &mut CircPolicyData) {
        with_policy!(self, s => s.activate(circ, now, data))
    }
    #[inline]
    fn deactivate(&mut self, circ: u32, data: &mut CircPolicyData) {
        with_policy!(self, s => s.deactivate(circ, data))
    }
    fn hold(&mut self, circ: u32, data: &mut CircPolicyData) {
        with_policy!(self, s => s.hold(circ, data))
    }
    fn release(&mut self, circ: u32, now: SimTime, data: &mut CircPolicyData) {
        with_policy!(self, s => s.release(circ, now, data))
    }
    #[inline]
    fn pick(&mut self, now: SimTime) -> Option<(u32, u32)> {
        with_policy!(self, s => s.pick(now))
    }
    #[inline]
    fn on_cells_sent(&mut self, circ: u32, n: u32, now: SimTime) {
        with_policy!(self, s => s.on_cells_sent(circ, n, now))
    }
    #[inline]
    fn active(&self) -> usize {
        with_policy!(self, s => s.active())
    }
    fn name(&self) -> &'static str {
        with_policy!(self, s => s.name())
    }
    #[inline]
    fn head_priority(&mut self, now: SimTime) -> Option<f64> {
        with_policy!(self, s => s.head_priority(now))
    }
    #[inline]
    fn fill(&mut self, room: u64, now: SimTime, src: &mut dyn CellSource) -> u64 {
        with_policy!(self, s => s.fill(room, now, src))
    }
    #[inline]
    fn on_cells_queued(&mut self, circ: u32, n: u32, class: crate::incentive::ServiceClass, now: SimTime) {
        if let CircuitMux::Custom(s) = self {
            s.on_cells_queued(circ, n, class, now)
        }
    }
    #[inline]
    fn wants_classes(&self) -> bool {
        match self {
            CircuitMux::Custom(s) => s.wants_classes(),
            _ => false,
        }
    }
    fn class_delays(&self) -> Option<ClassDelays> {
        with_policy!(self, s => s.class_delays())
    }
    fn set_budget(&mut self, circ: u32, cells: Option<u64>) {
        if let CircuitMux::Custom(s) = self {
            s.set_budget(circ, cells)
        }
    }
    fn class_heads(&self) -> Option<ClassHeads> {
        match self {
            CircuitMux::Custom(s) => s.class_heads(),
            _ => None,
        }
    }
    fn pick_class(&mut self, class: usize) -> Option<(u32, u32)> {
        match self {
            CircuitMux::Custom(s) => s.pick_class(class),
            _ => None,
        }
    }
}

/// Round robin over the circuits that have cells, `quantum` cells per circuit per turn.
///
/// Tor before circuit EWMA (0.2.1) kept a ring of active circuits per connection and
/// flushed from the first one, then advanced the ring (`connection_or_flush_from_first_active_circuit`);
/// the papers' "vanilla" is this policy. Tor always flushed one cell per turn (`max` is 1
/// at every caller in 0.2.0-0.2.3), which is the default quantum; a larger quantum is a
/// variant of ours, not a tor behaviour.
///
/// With a quantum of one cell, [`fill`](CircuitScheduler::fill) computes a whole refill at
/// once: each circuit gets exactly the cells cell-by-cell round robin would give it
/// (water-filling: full rounds, then one more cell for the first circuits in ring order),
/// and the ring ends where cell-by-cell round robin would leave it.
///
/// **Approximation.** The cells of one refill go to the outbuf grouped by circuit in ring
/// order, one run each, where tor interleaves them one cell a turn. The order matters: a
/// refill (up to 64 cells) is written in bucket shares of at most 32 cells and carried in
/// batches of at most 16 KiB, so a circuit that comes late in the ring leaves a write or a
/// batch later than tor would send its first cells. Exact interleaving (commit 8d2b305)
/// was measured on 2026-11-30 and reverted: it cost 25 % of the Tor bench's speed on the
/// live capacities and 45 % on the small ones (a refill of k circuits becomes up to k x 32
/// runs instead of k), and moved no result beyond seed noise: over the throttling
/// reproduction's 61 sweep settings the median web download moved by +0.2 % on average
/// (standard deviation 1.6 %; vanilla -0.3 %), and the EWMA reproduction's round-robin
/// web median by +0.3 % (3.365 to 3.375 s; full network 8.90 to 8.85 s).
#[derive(Debug, Clone)]
pub struct RoundRobin {
    /// Active circuits in turn order. A [`HeadDeque`](onionlab_core::HeadDeque): a
    /// client's channel has one circuit, which then needs no heap block of its own.
    ring: onionlab_core::HeadDeque<u32>,
    quantum: u32,
    used: u32,
}

/// Scratch for [`RoundRobin::fill`]: queued cells per ring position, and the same sorted.
/// One per thread rather than per channel end, which keeps a round-robin circuitmux to a
/// few words inline in its channel end.
#[derive(Default)]
struct FillScratch {
    queued: Vec<u64>,
    sorted: Vec<u64>,
}

thread_local! {
    static FILL_SCRATCH: std::cell::Cell<FillScratch> = std::cell::Cell::new(FillScratch::default());
}

impl RoundRobin {
    pub fn new(quantum: u32) -> Self {
        RoundRobin { ring: Default::default(), quantum: quantum.max(1), used: 0 }
    }
}

impl CircuitScheduler for RoundRobin {
    fn activate(&mut self, circ: u32, _now: SimTime, _data: &mut CircPolicyData) {
        debug_assert!(!self.ring.contains(&circ));
        self.ring.push_back(circ);
    }

    fn deactivate(&mut self, circ: u32, _data: &mut CircPolicyData) {
        if self.ring.front() == Some(&circ) {
            self.ring.pop_front();
            self.used = 0;
            return;
        }
        let at = self.ring.iter().position(|&c| c == circ);
        if let Some(i) = at {
            self.ring.remove(i);
        }
    }

    fn pick(&mut self, _now: SimTime) -> Option<(u32, u32)> {
        self.ring.front().map(|&c| (c, self.quantum - self.used))
    }

    fn on_cells_sent(&mut self, circ: u32, n: u32, _now: SimTime) {
        debug_assert_eq!(self.ring.front(), Some(&circ));
        self.used += n;
        if self.used >= self.quantum {
            self.used = 0;
            self.ring.rotate_left(1);
        }
    }

    fn active(&self) -> usize {
        self.ring.len()
    }

    fn name(&self) -> &'static str {
        "round-robin"
    }

    fn fill(&mut self, room: u64, now: SimTime, src: &mut dyn CellSource) -> u64 {
        if self.quantum != 1 || self.used != 0 || self.ring.is_empty() || room == 0 {
            return fill_by_picks(self, room, now, src);
        }
        if self.ring.len() == 1 {
            // One active circuit (every client's channel): it gets all the room.
            let c = *self.ring.front().expect("one circuit");
            let moved = src.take(c, room);
            if src.queued(c) == 0 {
                self.ring.clear();
            }
            return moved;
        }
        let mut scratch = FILL_SCRATCH.take();
        scratch.queued.clear();
        scratch.queued.extend(self.ring.iter().map(|&c| src.queued(c)));
        let total: u64 = scratch.queued.iter().sum();
        if total <= room {
            for (&c, &q) in self.ring.iter().zip(&scratch.queued) {
                let n = src.take(c, q);
                debug_assert_eq!(n, q);
            }
            self.ring.clear();
            FILL_SCRATCH.set(scratch);
            return total;
        }
        // Water level: the largest number of full rounds L with sum(min(q, L)) <= room.
        scratch.sorted.clear();
        scratch.sorted.extend_from_slice(&scratch.queued);
        scratch.sorted.sort_unstable();
        let (mut left, mut prev, mut level) = (room, 0u64, 0u64);
        let mut above = scratch.sorted.len() as u64;
        for &q in &scratch.sorted {
            let step = q - prev;
            if step * above > left {
                level = prev + left / above;
                left -= (level - prev) * above;
                break;
            }
            left -= step * above;
            prev = q;
            above -= 1;
        }
        // `left` (< the circuits above the level) cells more, one each, to the first
        // circuits above the level in ring order: the last, partial round.
        let mut extra = left;
        let mut last_extra = None;
        let mut moved = 0;
        let k = self.ring.len();
        for i in 0..k {
            let q = scratch.queued[i];
            let mut give = q.min(level);
            if q > level && extra > 0 {
                give += 1;
                extra -= 1;
                last_extra = Some(i);
            }
            let n = src.take(*self.ring.get(i).expect("i < ring length"), give);
            debug_assert_eq!(n, give);
            moved += n;
            scratch.queued[i] = q - give;
        }
        // Survivors keep their order; the next turn is the first survivor after the last
        // circuit served in the partial round.
        let start = last_extra.map_or(0, |i| i + 1);
        let (mut i, mut kept, mut front) = (0, 0, None);
        let queued = &scratch.queued;
        self.ring.retain(|_| {
            let keep = queued[i] > 0;
            if keep {
                if front.is_none() && i >= start {
                    front = Some(kept);
                }
                kept += 1;
            }
            i += 1;
            keep
        });
        if let Some(f) = front {
            self.ring.rotate_left(f);
        }
        FILL_SCRATCH.set(scratch);
        debug_assert_eq!(moved, room);
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_alternates_cell_by_cell() {
        let mut rr = RoundRobin::new(1);
        let t = SimTime::ZERO;
        let d = &mut CircPolicyData::default();
        rr.activate(7, t, d);
        rr.activate(9, t, d);
        let mut order = vec![];
        for _ in 0..4 {
            let (c, n) = rr.pick(t).unwrap();
            assert_eq!(n, 1);
            order.push(c);
            rr.on_cells_sent(c, 1, t);
        }
        assert_eq!(order, [7, 9, 7, 9]);
        rr.deactivate(7, d);
        assert_eq!(rr.pick(t), Some((9, 1)));
        rr.deactivate(9, d);
        assert_eq!(rr.pick(t), None);
    }

    #[test]
    fn a_custom_policy_runs_behind_the_circuitmux() {
        // Any CircuitScheduler plugs in as `CircuitMux::Custom`; the relay sees the trait.
        let mut mux = CircuitMux::Custom(Box::new(RoundRobin::new(2)));
        let t = SimTime::ZERO;
        let d = &mut CircPolicyData::default();
        mux.activate(4, t, d);
        mux.activate(5, t, d);
        assert_eq!((mux.name(), mux.active()), ("round-robin", 2));
        assert_eq!(mux.pick(t), Some((4, 2)));
        mux.on_cells_sent(4, 2, t);
        assert_eq!(mux.pick(t), Some((5, 2)));
        mux.deactivate(5, d);
        assert_eq!(mux.pick(t), Some((4, 2)));
        assert_eq!(format!("{mux:?}"), "round-robin");
    }

    #[test]
    fn quantum_sends_several_cells_per_turn() {
        let mut rr = RoundRobin::new(3);
        let t = SimTime::ZERO;
        let d = &mut CircPolicyData::default();
        rr.activate(1, t, d);
        rr.activate(2, t, d);
        assert_eq!(rr.pick(t), Some((1, 3)));
        rr.on_cells_sent(1, 2, t);
        assert_eq!(rr.pick(t), Some((1, 1)));
        rr.on_cells_sent(1, 1, t);
        assert_eq!(rr.pick(t), Some((2, 3)));
    }

    #[test]
    fn kist_and_ewma_circuitmuxes_get_the_configured_halflife_and_tick() {
        use onionlab_core::SimDuration;
        let (h, l) = (SimDuration::from_secs(30), SimDuration::from_secs(10));
        // F = 0.5^(L/H) = 0.5^(1/3) = 0.7937 for H = 30 s, L = 10 s (0.125 if swapped).
        for kind in [
            SchedulerKind::Ewma { halflife: h, tick: l },
            SchedulerKind::Kist { params: crate::kist::KistParams::default(), halflife: h, tick: l },
        ] {
            match kind.build() {
                CircuitMux::Ewma(s) => assert!((s.scale_factor() - 0.793_700_5).abs() < 1e-6, "{kind:?}: {}", s.scale_factor()),
                other => panic!("{kind:?} built {other:?}"),
            }
        }
    }
}

#[cfg(test)]
mod invariants {
    use super::*;
    use onionlab_core::SimDuration;
    use proptest::prelude::*;

    /// Queues by circuit id, recording every take in order.
    struct Queues {
        left: Vec<u64>,
        taken: Vec<(u32, u64)>,
        data: Vec<CircPolicyData>,
    }

    impl Queues {
        fn new(left: Vec<u64>) -> Self {
            let data = vec![CircPolicyData::default(); left.len()];
            Queues { left, taken: vec![], data }
        }
    }

    impl CellSource for Queues {
        fn queued(&self, circ: u32) -> u64 {
            self.left[circ as usize]
        }
        fn take(&mut self, circ: u32, n: u64) -> u64 {
            let n = n.min(self.left[circ as usize]);
            self.left[circ as usize] -= n;
            if n > 0 {
                self.taken.push((circ, n));
            }
            n
        }
        fn policy_data(&mut self, circ: u32) -> &mut CircPolicyData {
            &mut self.data[circ as usize]
        }
    }

    #[test]
    fn a_round_robin_refill_gives_each_circuit_tors_count_grouped() {
        // Circuits 1-4 with 100 cells each, then circuit 5 with 3; a refill of 31 cells.
        // Tor sends 1 2 3 4 5 three times, then 1 2 3 4 four times: 7 cells each for 1-4
        // and 3 for 5 (the 5th, 10th and 15th); the fill gives the same counts, grouped
        // in ring order (circuit 5's cells 29th to 31st: the approximation its docs measure),
        // and circuit 1 is next.
        let t = SimTime::ZERO;
        let mut rr = RoundRobin::new(1);
        let mut q = Queues::new(vec![0, 100, 100, 100, 100, 3]);
        for c in 1..=5 {
            rr.activate(c, t, &mut q.data[c as usize]);
        }
        assert_eq!(rr.fill(31, t, &mut q), 31);
        assert_eq!(q.taken, [(1, 7), (2, 7), (3, 7), (4, 7), (5, 3)]);
        assert_eq!(rr.pick(t), Some((1, 1)));
    }

    proptest! {
        /// Round robin's whole-refill `fill` gives every circuit exactly the cells that
        /// cell-by-cell round robin gives it, and leaves the ring in the same state, over a
        /// sequence of refills.
        #[test]
        fn round_robin_fill_equals_cell_by_cell(
            backlog in prop::collection::vec(0u64..120, 1..10),
            rooms in prop::collection::vec(1u64..200, 1..6),
        ) {
            let t = SimTime::ZERO;
            let mut fast = RoundRobin::new(1);
            let mut slow = RoundRobin::new(1);
            let mut qf = Queues::new(backlog.clone());
            let mut qs = Queues::new(backlog.clone());
            for (c, &b) in backlog.iter().enumerate() {
                if b > 0 {
                    fast.activate(c as u32, t, &mut qf.data[c]);
                    slow.activate(c as u32, t, &mut qs.data[c]);
                }
            }
            for &room in &rooms {
                let a = fast.fill(room, t, &mut qf);
                let b = fill_by_picks(&mut slow, room, t, &mut qs);
                prop_assert_eq!(a, b);
                prop_assert_eq!(&qf.left, &qs.left, "per-circuit allocation differs");
                prop_assert_eq!(fast.ring.iter().collect::<Vec<_>>(), slow.ring.iter().collect::<Vec<_>>(), "ring state differs");
            }
            // Within one refill the fast form groups cells by circuit: at most one take each.
            let mut seen = std::collections::BTreeSet::new();
            let first_room = rooms[0];
            let mut fresh = RoundRobin::new(1);
            let mut q = Queues::new(backlog.clone());
            for (c, &b) in backlog.iter().enumerate() {
                if b > 0 { fresh.activate(c as u32, t, &mut q.data[c]); }
            }
            fresh.fill(first_room, t, &mut q);
            for &(c, _) in &q.taken {
                prop_assert!(seen.insert(c), "circuit {} taken twice in one refill", c);
            }
        }
    }

    fn kinds() -> Vec<SchedulerKind> {
        let h = SimDuration::from_secs(3);
        vec![
            SchedulerKind::RoundRobin,
            SchedulerKind::Ewma { halflife: h, tick: SimDuration::from_secs(1) },
            SchedulerKind::EwmaExact { halflife: h },
            SchedulerKind::Kist { params: crate::kist::KistParams::default(), halflife: h, tick: SimDuration::from_secs(1) },
        ]
    }

    proptest! {
        /// Work-conserving: `pick` answers whenever a circuit is active, and only then;
        /// fair enough that every backlogged circuit is served within the run.
        #[test]
        fn work_conserving_and_every_circuit_served(
            which in 0usize..4,
            backlog in prop::collection::vec(1u64..200, 1..8),
            arrivals in prop::collection::vec(0u64..400, 1..8),
        ) {
            let mut s = kinds()[which].build();
            let n = backlog.len().min(arrivals.len());
            let mut left: Vec<u64> = backlog[..n].to_vec();
            let mut served = vec![0u64; n];
            let mut active = vec![false; n];
            let mut data = vec![CircPolicyData::default(); n];
            let total: u64 = left.iter().sum();
            let mut now = SimTime::ZERO;
            let mut step = 0u64;
            while served.iter().sum::<u64>() < total {
                for i in 0..n {
                    if !active[i] && left[i] > 0 && arrivals[i] <= step {
                        s.activate(i as u32, now, &mut data[i]);
                        active[i] = true;
                    }
                }
                let any = active.iter().any(|&a| a);
                let p = s.pick(now);
                prop_assert_eq!(p.is_some(), any, "pick must answer exactly when a circuit is active");
                prop_assert_eq!(s.active(), active.iter().filter(|&&a| a).count());
                if let Some((c, max)) = p {
                    let c = c as usize;
                    prop_assert!(active[c] && max >= 1);
                    s.on_cells_sent(c as u32, 1, now);
                    left[c] -= 1;
                    served[c] += 1;
                    if left[c] == 0 {
                        s.deactivate(c as u32, &mut data[c]);
                        active[c] = false;
                    }
                }
                step += 1;
                now += SimDuration::from_millis(5);
                prop_assert!(step < 10 * total + 1000, "no progress");
            }
            prop_assert_eq!(served, backlog[..n].to_vec());
        }
    }
}
