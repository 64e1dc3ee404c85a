//! Proposal 324's congestion control, the Vegas variant tor runs (`cc_alg` 2), behind the
//! [`CongestionControl`] trait.
//!
//! **Owns:** one circuit edge's congestion window, its count of cells in flight, the send
//! times of the cells a SENDME will acknowledge, and the RTT and BDP estimates made from
//! them. **Must not touch:** stream flow control (with congestion control on, tor replaces
//! stream SENDMEs by XON/XOFF; the network turns stream windows off, see
//! [`CongestionControl::stream_windows`]) or how cells move.
//!
//! Source: tor 0.4.8 `congestion_control_common.c` and `congestion_control_vegas.c`, with
//! the consensus parameters' code defaults (`../shared/specs/tor-constants.md` section
//! 3.5; where proposal 324 section 6.5 says otherwise, the value is a parameter). Units:
//! cells and microseconds, in integers, as tor computes them.
//!
//! - **Sending.** The package window is `cwnd - inflight`. Every `sendme_inc`-th cell
//!   packaged records its send time (`congestion_control_note_cell_sent`).
//! - **Receiving.** The other edge sends one circuit SENDME per `sendme_inc` cells
//!   delivered (`sendme_circuit_consider_sending` with congestion control).
//! - **On a SENDME** (`congestion_control_vegas_process_sendme`): the RTT sample is now
//!   minus the oldest recorded send time; the RTT EWMA (`n_count_ewma`, N = `ewma_ss` in
//!   slow start, else `min(update_rate * ewma_cwnd_pct / 100, ewma_max)`), the minimum
//!   RTT (the EWMA's minimum; raised by `rtt_reset_pct` when cwnd sits at its minimum),
//!   BDP = cwnd * min_rtt / ewma_rtt and queue use = cwnd - BDP follow. In slow start, a
//!   queue below gamma grows cwnd by the RFC 3742 increment while the window is full, and
//!   a queue at gamma or more sets cwnd = BDP + gamma and ends slow start; slow start also
//!   ends at `ss_max`. After slow start, `cwnd_inc_rate` times per cwnd of SENDMEs:
//!   queue above delta sets cwnd = BDP + delta - inc; above beta, cwnd -= inc; a full
//!   window with queue below alpha, cwnd += inc. After an update cwnd never falls below `cwnd_min`. Tor clamps cwnd
//!   at `cc_cwnd_max` (`congestion_control_dispatch_cc_alg`); its default is INT32_MAX and
//!   no consensus we model sets it, so this model has no upper bound.
//! - **Counters.** `next_cc_event` counts SENDMEs to the next steady-state update:
//!   `CWND_UPDATE_RATE` is 1 during slow start and `cwnd / (sendme_inc * cwnd_inc_rate)`,
//!   rounded, after it, so the first steady-state update comes one such period after slow
//!   start ends. `next_cwnd_event` (SENDMEs to the next cwnd-full reset) starts at 0, as in
//!   tor's zero-allocated state, so the first reset is at the first SENDME.
//!
//! - **Blocked streams.** While the circuit's streams are blocked on a full circuit queue
//!   ([`CongestionControl::set_blocked`], with `tor.cell_queue_watermarks` on), a SENDME
//!   ends slow start at BDP + gamma and steady-state updates step cwnd down; blocking and
//!   unblocking each make the next SENDME an update.
//!
//! Not modelled: the RTT sanity checks against clock jumps (the simulated clock does not
//! jump).

use std::collections::VecDeque;
use std::sync::Arc;

use onionlab_core::SimTime;

use crate::flow_control::CongestionControl;

/// Vegas parameters: tor 0.4.8's code defaults for exits (consensus `cc_vegas_*_exit`).
#[derive(Clone, Debug, PartialEq)]
pub struct VegasParams {
    /// `cc_sendme_inc`: cells per circuit SENDME (31).
    pub sendme_inc: u64,
    /// `cc_cwnd_init`: initial window, cells (4 * 31 = 124).
    pub cwnd_init: u64,
    /// `cc_cwnd_min`: 62 in the code (proposal 324 says 31).
    pub cwnd_min: u64,
    /// `cc_cwnd_inc`: steady-state step, cells (31).
    pub cwnd_inc: u64,
    /// `cc_cwnd_inc_pct_ss`: slow-start step as a percentage of `sendme_inc`; 100 in the
    /// code (proposal 324 says 50).
    pub cwnd_inc_pct_ss: u64,
    /// `cc_cwnd_inc_rate`: steady-state updates per cwnd (1): one every
    /// `cwnd / (sendme_inc * cwnd_inc_rate)` SENDMEs, rounded (tor's `CWND_UPDATE_RATE`).
    /// The 2022 consensus's 31 makes that every SENDME while cwnd is under 1442 cells.
    pub cwnd_inc_rate: u64,
    /// `cc_vegas_alpha_exit`, `_beta_`, `_gamma_`, `_delta_` (cells): 124, 248, 186, 372
    /// (2, 4, 3 and 6 times `OUTBUF_CELLS`, 62, as tor writes them).
    pub alpha: u64,
    pub beta: u64,
    pub gamma: u64,
    pub delta: u64,
    /// `cc_sscap_exit`: above this cwnd slow start grows by RFC 3742's limited increment (500).
    pub ss_cap: u64,
    /// `cc_ss_max`: slow start ends at this cwnd (5000).
    pub ss_max: u64,
    /// `cc_ewma_cwnd_pct` (50), `cc_ewma_max` (10), `cc_ewma_ss` (2): the RTT EWMA's N.
    pub ewma_cwnd_pct: u64,
    pub ewma_max: u64,
    pub ewma_ss: u64,
    /// `cc_rtt_reset_pct` (100): how far the minimum RTT moves to the EWMA when cwnd sits
    /// at `cwnd_min`.
    pub rtt_reset_pct: u64,
    /// `cc_cwnd_full_gap` (1, in SENDMEs), `cc_cwnd_full_minpct` (75),
    /// `cc_cwnd_full_per_cwnd` (true): when the window counts as full.
    pub cwnd_full_gap: u64,
    pub cwnd_full_minpct: u64,
    pub cwnd_full_per_cwnd: bool,
}

impl Default for VegasParams {
    fn default() -> Self {
        VegasParams {
            sendme_inc: 31,
            cwnd_init: 124,
            cwnd_min: 62,
            cwnd_inc: 31,
            cwnd_inc_pct_ss: 100,
            cwnd_inc_rate: 1,
            alpha: 124,
            beta: 248,
            gamma: 186,
            delta: 372,
            ss_cap: 500,
            ss_max: 5000,
            ewma_cwnd_pct: 50,
            ewma_max: 10,
            ewma_ss: 2,
            rtt_reset_pct: 100,
            cwnd_full_gap: 1,
            cwnd_full_minpct: 75,
            cwnd_full_per_cwnd: true,
        }
    }
}

/// One circuit edge's Vegas state (tor's `congestion_control_t`).
#[derive(Clone, Debug)]
pub struct Vegas {
    /// Shared by every edge of the run: a copy each would be 150 bytes per edge, two per
    /// circuit, and a full-scale network holds millions of circuits.
    p: Arc<VegasParams>,
    cwnd: u64,
    inflight: u64,
    in_slow_start: bool,
    cwnd_full: bool,
    /// SENDMEs until the next steady-state update, and until the next cwnd-full reset.
    next_cc_event: u64,
    next_cwnd_event: u64,
    /// Send times of cells still to be acknowledged, one per `sendme_inc` cells.
    sent_at: VecDeque<SimTime>,
    ewma_rtt_us: u64,
    min_rtt_us: u64,
    /// Cells delivered at this edge since its last SENDME.
    delivered_since_sendme: u64,
    /// The circuit's streams are blocked on a full queue now (`circuit_blocked_on_p_chan`),
    /// and as of the last SENDME (`blocked_chan`).
    chan_blocked_now: bool,
    blocked_chan: bool,
}

impl Vegas {
    /// A controller with parameters `p`: a [`VegasParams`], or an `Arc` of one to share.
    pub fn new(p: impl Into<Arc<VegasParams>>) -> Self {
        let p = p.into();
        let mut v = Vegas {
            cwnd: p.cwnd_init,
            inflight: 0,
            in_slow_start: true,
            cwnd_full: false,
            next_cc_event: 0,
            next_cwnd_event: 0,
            sent_at: VecDeque::new(),
            ewma_rtt_us: 0,
            min_rtt_us: 0,
            delivered_since_sendme: 0,
            chan_blocked_now: false,
            blocked_chan: false,
            p,
        };
        // congestion_control_init sets only next_cc_event; the rest of tor's state is
        // zero-allocated (congestion_control_new), next_cwnd_event included.
        v.next_cc_event = v.update_rate();
        v
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }
    pub fn inflight(&self) -> u64 {
        self.inflight
    }
    pub fn in_slow_start(&self) -> bool {
        self.in_slow_start
    }
    /// (EWMA RTT, minimum RTT) in microseconds; 0 before the first SENDME.
    pub fn rtt_us(&self) -> (u64, u64) {
        (self.ewma_rtt_us, self.min_rtt_us)
    }
    /// cwnd * min_rtt / ewma_rtt (`vegas_bdp`, BDP_ALG_CWND_RTT).
    pub fn bdp(&self) -> u64 {
        if self.ewma_rtt_us == 0 {
            return self.cwnd;
        }
        self.cwnd * self.min_rtt_us / self.ewma_rtt_us
    }

    /// `SENDME_PER_CWND`: SENDMEs per cwnd, rounded.
    fn sendmes_per_cwnd(&self) -> u64 {
        (self.cwnd + self.p.sendme_inc / 2) / self.p.sendme_inc
    }
    /// `CWND_UPDATE_RATE`: SENDMEs between steady-state updates; 1 in slow start, which
    /// checks every SENDME.
    fn update_rate(&self) -> u64 {
        if self.in_slow_start {
            return 1;
        }
        let per = self.p.sendme_inc * self.p.cwnd_inc_rate;
        (self.cwnd + per / 2) / per
    }
    /// `rfc3742_ss_inc`.
    fn slow_start_inc(&self) -> u64 {
        if self.cwnd <= self.p.ss_cap {
            (self.p.cwnd_inc_pct_ss * self.p.sendme_inc + 50) / 100
        } else {
            ((self.p.sendme_inc * self.p.ss_cap + self.cwnd) / (2 * self.cwnd)).max(1)
        }
    }

    /// The RTT sample of this SENDME (`congestion_control_update_circuit_rtt`); false if
    /// there was no recorded send time.
    fn update_rtt(&mut self, now: SimTime) -> bool {
        let Some(sent) = self.sent_at.pop_front() else { return false };
        let rtt = now.saturating_since(sent).as_nanos() / 1000;
        // n_ewma_count: every SENDME is checked in slow start, so a short average there.
        let n =
            if self.in_slow_start { self.p.ewma_ss } else { (self.update_rate() * self.p.ewma_cwnd_pct / 100).min(self.p.ewma_max) }.max(2);
        // n_count_ewma: (2 * curr + (N - 1) * prev) / (N + 1); the first sample is taken whole.
        self.ewma_rtt_us = if self.ewma_rtt_us == 0 { rtt } else { (2 * rtt + (n - 1) * self.ewma_rtt_us) / (n + 1) };
        if self.min_rtt_us == 0 {
            self.min_rtt_us = self.ewma_rtt_us;
        } else if self.cwnd == self.p.cwnd_min && !self.in_slow_start {
            // percent_max_mix: out of a wedge where an abnormally low RTT pinned cwnd at its
            // minimum.
            let (hi, lo) = (self.ewma_rtt_us.max(self.min_rtt_us), self.ewma_rtt_us.min(self.min_rtt_us));
            let pct = self.p.rtt_reset_pct.min(100);
            self.min_rtt_us = pct * hi / 100 + (100 - pct) * lo / 100;
        } else if self.ewma_rtt_us < self.min_rtt_us {
            // The EWMA, not the sample, averages out other connections' effects.
            self.min_rtt_us = self.ewma_rtt_us;
        }
        self.ewma_rtt_us > 0
    }

    fn exit_slow_start(&mut self) {
        self.in_slow_start = false;
    }
}

impl CongestionControl for Vegas {
    fn package_allowance(&self) -> u64 {
        self.cwnd.saturating_sub(self.inflight)
    }

    fn on_packaged(&mut self, cells: u64, now: SimTime) {
        // The cells that complete a multiple of sendme_inc each record a send time.
        let before = self.inflight;
        self.inflight += cells;
        let marks = self.inflight / self.p.sendme_inc - before / self.p.sendme_inc;
        for _ in 0..marks {
            self.sent_at.push_back(now);
        }
    }

    fn on_sendme(&mut self, now: SimTime) {
        self.next_cc_event = self.next_cc_event.saturating_sub(1);
        self.next_cwnd_event = self.next_cwnd_event.saturating_sub(1);
        if !self.update_rtt(now) {
            self.inflight = self.inflight.saturating_sub(self.p.sendme_inc);
            return;
        }
        // A change of the blocked state is an immediate congestion event
        // (congestion_control_update_circuit_bdp).
        if self.chan_blocked_now != self.blocked_chan {
            self.blocked_chan = self.chan_blocked_now;
            self.next_cc_event = 0;
        }
        let queue = self.cwnd.saturating_sub(self.bdp());
        let p = &self.p;
        if self.inflight + p.cwnd_full_gap * p.sendme_inc >= self.cwnd {
            self.cwnd_full = true;
        } else if 100 * self.inflight < p.cwnd_full_minpct * self.cwnd {
            self.cwnd_full = false;
        }
        if self.in_slow_start {
            if queue < self.p.gamma && !self.blocked_chan {
                // A window not fully in use does not grow.
                if self.cwnd_full {
                    let inc = self.slow_start_inc();
                    self.cwnd += inc;
                    // Slow start ends when its step falls to steady state's.
                    if inc * self.sendmes_per_cwnd() <= self.p.cwnd_inc * self.p.cwnd_inc_rate {
                        self.exit_slow_start();
                    }
                }
            } else {
                // Congestion signal: down to the gamma threshold.
                self.cwnd = self.bdp() + self.p.gamma;
                self.exit_slow_start();
            }
            if self.cwnd >= self.p.ss_max {
                self.cwnd = self.p.ss_max;
                self.exit_slow_start();
            }
        } else if self.next_cc_event == 0 {
            // After slow start, `cwnd_inc_rate` updates per window.
            if queue > self.p.delta {
                self.cwnd = (self.bdp() + self.p.delta).saturating_sub(self.p.cwnd_inc);
            } else if queue > self.p.beta || self.blocked_chan {
                self.cwnd = self.cwnd.saturating_sub(self.p.cwnd_inc);
            } else if self.cwnd_full && queue < self.p.alpha {
                self.cwnd += self.p.cwnd_inc;
            }
            // "cwnd can never fall below 1 increment"; tor sets no upper bound here.
            self.cwnd = self.cwnd.max(self.p.cwnd_min);
        }
        if self.next_cwnd_event == 0 {
            self.next_cwnd_event = self.sendmes_per_cwnd();
        }
        if self.next_cc_event == 0 {
            self.next_cc_event = self.update_rate();
        }
        // cwnd_full_reset: once per cwnd (or per update), the window must prove full again.
        let reset = if self.p.cwnd_full_per_cwnd {
            self.next_cwnd_event == self.sendmes_per_cwnd()
        } else {
            self.next_cc_event == self.update_rate()
        };
        if reset {
            self.cwnd_full = false;
        }
        self.inflight = self.inflight.saturating_sub(self.p.sendme_inc);
    }

    fn on_delivered(&mut self, cells: u64, _now: SimTime) -> u64 {
        self.delivered_since_sendme += cells;
        let sendmes = self.delivered_since_sendme / self.p.sendme_inc;
        self.delivered_since_sendme %= self.p.sendme_inc;
        sendmes
    }

    fn package_window(&self) -> u64 {
        self.package_allowance()
    }

    fn stream_windows(&self) -> bool {
        false
    }

    fn set_blocked(&mut self, blocked: bool) {
        self.chan_blocked_now = blocked;
    }

    fn check(&self) -> Result<(), String> {
        if self.cwnd < self.p.cwnd_min.min(self.p.cwnd_init) {
            return Err(format!("vegas: cwnd {} below cwnd_min {}", self.cwnd, self.p.cwnd_min));
        }
        // One send time per whole sendme_inc of cells in flight.
        if self.sent_at.len() as u64 != self.inflight / self.p.sendme_inc {
            return Err(format!("vegas: {} send times for {} cells in flight", self.sent_at.len(), self.inflight));
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "vegas"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_core::SimDuration;

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    /// One SENDME at `now_ms` whose cell was sent `rtt_ms` earlier. With `fill`, the edge
    /// first packages all its window allows, as a bulk sender does.
    fn sendme(v: &mut Vegas, now_ms: u64, rtt_ms: u64, fill: bool) {
        if fill {
            let n = v.package_allowance();
            v.on_packaged(n, at(now_ms));
        }
        *v.sent_at.front_mut().expect("a cell awaits its SENDME") = at(now_ms - rtt_ms);
        v.on_sendme(at(now_ms));
    }

    #[test]
    fn starts_at_124_cells_and_times_every_31st() {
        let mut v = Vegas::new(VegasParams::default());
        assert_eq!(v.package_allowance(), 124);
        v.on_packaged(30, at(0));
        assert_eq!(v.sent_at.len(), 0);
        v.on_packaged(1, at(1));
        assert_eq!(v.sent_at, [at(1)]);
        v.on_packaged(93, at(2));
        assert_eq!(v.sent_at.len(), 4);
        assert_eq!(v.package_allowance(), 0);
        v.check().unwrap();
    }

    #[test]
    fn the_receiver_sends_a_sendme_per_31_cells() {
        let mut v = Vegas::new(VegasParams::default());
        assert_eq!(v.on_delivered(30, at(0)), 0);
        assert_eq!(v.on_delivered(1, at(0)), 1);
        assert_eq!(v.on_delivered(93, at(0)), 3);
        assert_eq!(v.on_delivered(40, at(0)), 1);
        assert_eq!(v.on_delivered(22, at(0)), 1, "9 + 22 = 31");
        assert!(!v.stream_windows(), "XON/XOFF replaces stream windows");
    }

    #[test]
    fn slow_start_grows_a_full_window_by_31_cells_a_sendme() {
        // Constant 100 ms RTT: min = EWMA, BDP = cwnd, queue 0 < gamma; every SENDME of a
        // full window adds the RFC 3742 step, 100 % of sendme_inc below ss_cap (500).
        let mut v = Vegas::new(VegasParams::default());
        for k in 1..=12u64 {
            sendme(&mut v, 100 * k, 100, true);
            assert_eq!(v.cwnd(), 124 + 31 * k, "after SENDME {k}");
            assert!(v.in_slow_start());
            v.check().unwrap();
        }
        assert_eq!(v.rtt_us(), (100_000, 100_000));
        // A window not in use does not grow. With nothing more packaged, inflight falls by
        // 31 a SENDME; once it is below 75 % of cwnd (cc_cwnd_full_minpct) the window no
        // longer counts as full and cwnd stays.
        let mut k = 13;
        while !v.sent_at.is_empty() {
            let (cwnd, inflight) = (v.cwnd(), v.inflight());
            sendme(&mut v, 100 * k, 100, false);
            if 100 * inflight < 75 * cwnd {
                assert_eq!(v.cwnd(), cwnd, "SENDME {k}: inflight {inflight} of {cwnd}");
            }
            k += 1;
        }
        assert!(v.cwnd() < 496 + 31 * 4, "{}", v.cwnd());
    }

    #[test]
    fn a_queue_of_gamma_ends_slow_start_at_bdp_plus_gamma() {
        // cwnd 496 after 12 SENDMEs at 100 ms. Then a 250 ms sample: EWMA (N = 2 in slow
        // start) = (2 * 250 + 100) / 3 = 200 ms, BDP = 496 * 100 / 200 = 248 cells, queue
        // 248 >= gamma (186): cwnd = 248 + 186 = 434 and slow start ends.
        let mut v = Vegas::new(VegasParams::default());
        for k in 1..=12 {
            sendme(&mut v, 100 * k, 100, true);
        }
        assert_eq!(v.cwnd(), 496);
        sendme(&mut v, 1300, 250, true);
        assert_eq!(v.rtt_us(), (200_000, 100_000));
        assert_eq!(v.cwnd(), 434);
        assert!(!v.in_slow_start());
    }

    #[test]
    fn after_slow_start_cwnd_moves_once_per_window() {
        // ss_max 186 ends slow start at the second SENDME (124 -> 155 -> 186). In slow start
        // CWND_UPDATE_RATE is 1, so the counter is 0 at that SENDME and restarts at
        // (186 + 15) / 31 = 6: the 8th SENDME is the first steady-state update. With a
        // full window and queue 0 < alpha, cwnd grows by cwnd_inc (31) then, and again
        // (217 + 15) / 31 = 7 SENDMEs later (the 15th: 248) and (248 + 15) / 31 = 8 after
        // that (the 23rd: 279). Traced through tor's congestion_control_vegas.c.
        let mut v = Vegas::new(VegasParams { ss_max: 186, ..VegasParams::default() });
        let mut cwnds = Vec::new();
        for k in 1..=23 {
            sendme(&mut v, 100 * k, 100, true);
            cwnds.push(v.cwnd());
        }
        assert!(!v.in_slow_start());
        let mut want = vec![155, 186];
        want.extend([186; 5]);
        want.extend([217; 7]);
        want.extend([248; 8]);
        want.push(279);
        assert_eq!(cwnds, want);
    }

    #[test]
    fn the_window_must_prove_full_again_from_the_first_sendme() {
        // tor's state starts zeroed, so next_cwnd_event is 0 and the first SENDME already
        // resets cwnd_full. After it (124 -> 155, 93 cells in flight) the edge packages 27
        // more: 120 in flight is neither full (120 + 31 < 155) nor below 75 % of 155, so
        // the window stays not-full and slow start does not grow it.
        let mut v = Vegas::new(VegasParams::default());
        sendme(&mut v, 100, 100, true);
        assert_eq!((v.cwnd(), v.inflight()), (155, 93));
        v.on_packaged(27, at(100));
        sendme(&mut v, 200, 100, false);
        assert_eq!(v.cwnd(), 155);
        assert!(v.in_slow_start());
    }

    #[test]
    fn steady_state_grows_once_per_window_without_an_upper_bound() {
        // tor's Vegas floors cwnd at cwnd_min and caps it only in slow start (ss_max). At a
        // constant RTT with a full window, each update adds 31 cells and the next comes
        // (cwnd + 15) / 31 SENDMEs later, for as long as the run lasts.
        let mut v = Vegas::new(VegasParams { ss_max: 186, ..VegasParams::default() });
        sendme(&mut v, 100, 100, true);
        sendme(&mut v, 200, 100, true);
        let (mut cwnd, mut next) = (186u64, 6u64);
        for k in 3..=3000 {
            sendme(&mut v, 100 * k, 100, true);
            next -= 1;
            if next == 0 {
                cwnd += 31;
                next = (cwnd + 15) / 31;
            }
            assert_eq!(v.cwnd(), cwnd, "SENDME {k}");
        }
        assert!(cwnd > 2000, "{cwnd}");
        v.check().unwrap();
    }

    #[test]
    fn steady_state_holds_the_queue_between_alpha_and_beta() {
        // Out of slow start at 434 cells (EWMA 200 ms, min 100 ms), then every RTT is 2 s:
        // the EWMA climbs towards 2 s while the minimum stays 100 ms, so BDP falls to about
        // cwnd / 20 and the queue estimate to 95 % of cwnd. The first updates see queue
        // above delta (372) and reset cwnd to BDP + delta - inc; then each update above
        // beta (248) takes one step off, and below alpha (124) adds one, so cwnd settles
        // where the queue lies between alpha and beta.
        let mut v = Vegas::new(VegasParams::default());
        for k in 1..=12 {
            sendme(&mut v, 100 * k, 100, true);
        }
        sendme(&mut v, 1300, 250, true);
        assert_eq!(v.cwnd(), 434);
        let mut cwnds = Vec::new();
        for k in 14..=400 {
            sendme(&mut v, 10_000 + 100 * k, 2_000, true);
            v.check().unwrap();
            cwnds.push(v.cwnd());
        }
        assert!(cwnds.windows(2).take(60).all(|w| w[1] <= w[0]), "falls first: {cwnds:?}");
        let queue = v.cwnd() - v.bdp();
        assert!((124..=248 + 31).contains(&queue), "queue {queue} at cwnd {}", v.cwnd());
        assert_eq!(v.rtt_us().1, 100_000, "the minimum RTT is the lowest EWMA");
    }

    #[test]
    fn cwnd_never_falls_below_cwnd_min() {
        // With every threshold at 0 any queue is "above delta": cwnd = BDP - inc, floored
        // at cc_cwnd_min (62).
        let p = VegasParams { alpha: 0, beta: 0, gamma: 0, delta: 0, ..VegasParams::default() };
        let mut v = Vegas::new(p);
        sendme(&mut v, 100, 100, true);
        for k in 2..=100 {
            sendme(&mut v, 10_000 + 100 * k, 1_000, true);
            assert!(v.cwnd() >= 62);
        }
        assert_eq!(v.cwnd(), 62);
    }

    #[test]
    fn a_blocked_edge_ends_slow_start_and_steps_cwnd_down() {
        // 124 -> 155 -> 186 in slow start at a constant RTT (queue 0). Blocked: the next
        // SENDME takes the congestion branch, cwnd = BDP + gamma = 186 + 186 = 372, and
        // slow start ends. The counter restarts at CWND_UPDATE_RATE(372) = 12: twelve
        // SENDMEs later, still blocked, cwnd steps down by 31 (queue 0, but blocked).
        // Unblocking makes the next SENDME an update: queue 0 < alpha, window full: +31.
        let mut v = Vegas::new(VegasParams::default());
        sendme(&mut v, 100, 100, true);
        sendme(&mut v, 200, 100, true);
        assert_eq!(v.cwnd(), 186);
        v.set_blocked(true);
        sendme(&mut v, 300, 100, true);
        assert_eq!((v.cwnd(), v.in_slow_start()), (372, false));
        for k in 4..=14 {
            sendme(&mut v, 100 * k, 100, true);
            assert_eq!(v.cwnd(), 372, "SENDME {k}");
        }
        sendme(&mut v, 1500, 100, true);
        assert_eq!(v.cwnd(), 341);
        v.set_blocked(false);
        sendme(&mut v, 1600, 100, true);
        assert_eq!(v.cwnd(), 372);
    }

    /// A Vegas edge out of slow start at `cwnd` with the given minimum and EWMA RTT (µs),
    /// whose next SENDME is a steady-state update. A SENDME whose sample equals the EWMA
    /// keeps the EWMA (and so BDP = cwnd * min / ewma) unchanged.
    fn steady_at(cwnd: u64, min_us: u64, ewma_us: u64) -> Vegas {
        let mut v = Vegas::new(VegasParams::default());
        v.in_slow_start = false;
        v.cwnd = cwnd;
        v.min_rtt_us = min_us;
        v.ewma_rtt_us = ewma_us;
        v.next_cc_event = 1;
        v.next_cwnd_event = 1;
        v
    }

    #[test]
    fn steady_state_thresholds_are_strict_and_hold_between_alpha_and_beta() {
        // min 100 ms, EWMA 200 ms: BDP = cwnd / 2, queue = cwnd / 2. Full window each time.
        let update = |cwnd: u64| {
            let mut v = steady_at(cwnd, 100_000, 200_000);
            sendme(&mut v, 1000, 200, true);
            assert_eq!(v.rtt_us(), (200_000, 100_000));
            v.cwnd()
        };
        assert_eq!(update(246), 246 + 31, "queue 123 < alpha (124): grow");
        assert_eq!(update(248), 248, "queue 124 == alpha: hold (alpha is strict)");
        assert_eq!(update(372), 372, "queue 186, between alpha and beta: hold");
        assert_eq!(update(496), 496, "queue 248 == beta: hold (beta is strict)");
        assert_eq!(update(498), 498 - 31, "queue 249 > beta: one step down");
    }

    #[test]
    fn a_queue_above_delta_resets_cwnd_to_bdp_plus_delta_minus_inc() {
        // cwnd 1000, BDP 500, queue 500 > delta (372): cwnd = 500 + 372 - 31 = 841.
        let mut v = steady_at(1000, 100_000, 200_000);
        sendme(&mut v, 1000, 200, true);
        assert_eq!(v.cwnd(), 841);
    }

    #[test]
    fn steady_state_does_not_grow_a_window_that_is_not_full() {
        // Queue 0 < alpha, but only 62 of 496 cells in flight: cwnd stays.
        let mut v = steady_at(496, 100_000, 100_000);
        v.on_packaged(62, at(900));
        sendme(&mut v, 1000, 100, false);
        assert_eq!(v.cwnd(), 496, "an application-limited window must not grow");
        // The same update with the window full grows it by cwnd_inc.
        let mut v = steady_at(496, 100_000, 100_000);
        sendme(&mut v, 1000, 100, true);
        assert_eq!(v.cwnd(), 527);
    }

    #[test]
    fn the_minimum_rtt_follows_the_ewma_not_the_raw_sample() {
        // 100 ms then a 40 ms sample: EWMA (N = 2 in slow start) = (2 * 40 + 100) / 3 = 60 ms,
        // and the minimum is the EWMA (60 ms), not the sample (40 ms).
        let mut v = Vegas::new(VegasParams::default());
        sendme(&mut v, 100, 100, true);
        sendme(&mut v, 200, 40, true);
        assert_eq!(v.rtt_us(), (60_000, 60_000));
    }

    #[test]
    fn slow_start_above_ss_cap_uses_the_rfc3742_limited_step() {
        // 124 + 13 * 31 = 527 (> ss_cap 500 only after the 13th SENDME). The 14th grows by
        // (31 * 500 + 527) / (2 * 527) = 15 cells, not 31.
        let mut v = Vegas::new(VegasParams::default());
        for k in 1..=13u64 {
            sendme(&mut v, 100 * k, 100, true);
        }
        assert_eq!((v.cwnd(), v.in_slow_start()), (527, true));
        sendme(&mut v, 1400, 100, true);
        assert_eq!((v.cwnd(), v.in_slow_start()), (542, true));
    }

    #[test]
    fn steady_state_update_period_is_rounded_not_truncated() {
        // cwnd 300 -> 331 at the first update; the next comes (331 + 15) / 31 = 11 SENDMEs
        // later (331 / 31 truncated would be 10).
        let mut v = steady_at(300, 100_000, 100_000);
        let mut cwnds = vec![];
        for k in 1..=12u64 {
            sendme(&mut v, 1000 + 100 * k, 100, true);
            cwnds.push(v.cwnd());
        }
        let mut want = vec![331; 11];
        want.push(362);
        assert_eq!(cwnds, want);
    }

    #[test]
    fn steady_state_rtt_ewma_uses_n_from_the_update_rate() {
        // Steady state at cwnd 496: N = min(16 * 50 / 100, 10) = 8. A 200 ms sample on a
        // 100 ms EWMA gives (2 * 200 + 7 * 100) / 9 = 122.222 ms (N = 2 would give 166.666).
        let mut v = steady_at(496, 100_000, 100_000);
        v.next_cc_event = 5; // not an update: only the RTT estimate moves
        sendme(&mut v, 1000, 200, true);
        assert_eq!(v.rtt_us(), (122_222, 100_000));
    }

    #[test]
    fn at_cwnd_min_the_minimum_rtt_is_reset_to_the_ewma() {
        // cwnd pinned at cwnd_min (62) after slow start, min 50 ms, EWMA 100 ms: with
        // rtt_reset_pct 100 the minimum moves all the way to the EWMA (percent_max_mix).
        let mut v = steady_at(62, 50_000, 100_000);
        v.next_cc_event = 5;
        sendme(&mut v, 1000, 100, true);
        assert_eq!(v.rtt_us(), (100_000, 100_000));
    }

    #[test]
    fn a_window_is_full_from_one_sendme_short_of_cwnd() {
        // cc_cwnd_full_gap 1: the window is full when inflight + 31 >= cwnd. At cwnd 496
        // with queue 0 < alpha, 465 cells in flight (465 + 31 = 496) make it full and the
        // update grows cwnd; 464 do not, and 464 is not below 75 % (372) either, so the
        // not-full window stays as it is.
        assert_eq!(update_with_inflight(465, false), 527, "465 + 31 == 496: full");
        assert_eq!(update_with_inflight(464, false), 496, "464 + 31 < 496: not full");
    }

    /// cwnd after one steady-state update at cwnd 496 with queue 0 < alpha (so a full
    /// window grows by 31), `inflight` cells in flight and the window `full` before it.
    fn update_with_inflight(inflight: u64, full: bool) -> u64 {
        let mut v = steady_at(496, 100_000, 100_000);
        v.cwnd_full = full;
        v.on_packaged(inflight, at(900));
        sendme(&mut v, 1000, 100, false);
        v.cwnd()
    }

    #[test]
    fn a_full_window_stays_full_down_to_exactly_75_percent() {
        // cc_cwnd_full_minpct 75: a window already full loses that only when inflight falls
        // strictly below 75 % of cwnd. At cwnd 496, 372 cells (exactly 75 %) keep it full
        // and the update grows cwnd; 371 clear it and cwnd stays.
        assert_eq!(update_with_inflight(372, true), 527, "100 * 372 == 75 * 496: still full");
        assert_eq!(update_with_inflight(371, true), 496, "below 75 %: no longer full");
    }

    #[test]
    fn slow_start_ends_when_its_step_over_a_cwnd_reaches_steady_states() {
        // tor: exit slow start when inc * SENDME_PER_CWND <= CWND_INC * cwnd_inc_rate, with
        // SENDME_PER_CWND rounded ((cwnd + 15) / 31) at the grown cwnd. With cwnd_inc 155,
        // the first SENDME grows 124 -> 155: 31 * 5 = 155 <= 155, so slow start ends there.
        let mut v = Vegas::new(VegasParams { cwnd_inc: 155, ..VegasParams::default() });
        sendme(&mut v, 100, 100, true);
        assert_eq!((v.cwnd(), v.in_slow_start()), (155, false), "equal steps end slow start");
        // cwnd_init 109, cwnd_inc 124: 109 -> 140, SENDME_PER_CWND (140 + 15) / 31 = 5 and
        // 31 * 5 = 155 > 124, so slow start goes on (140 / 31 truncated, 4, would end it).
        let mut v = Vegas::new(VegasParams { cwnd_init: 109, cwnd_inc: 124, ..VegasParams::default() });
        sendme(&mut v, 100, 100, true);
        assert_eq!((v.cwnd(), v.in_slow_start()), (140, true), "rounded SENDMEs per cwnd");
    }

    #[test]
    fn slow_start_ends_on_reaching_ss_max_exactly() {
        // cc_ss_max 155: the first SENDME grows 124 -> 155, which is ss_max: slow start ends
        // there (cwnd >= ss_max), not one SENDME later.
        let mut v = Vegas::new(VegasParams { ss_max: 155, ..VegasParams::default() });
        sendme(&mut v, 100, 100, true);
        assert_eq!((v.cwnd(), v.in_slow_start()), (155, false));
    }

    #[test]
    fn default_params_are_tors_exit_values() {
        // tor-constants.md 3.5: exit alpha/beta/gamma/delta 124/248/186/372, sscap 500.
        let p = VegasParams::default();
        assert_eq!((p.alpha, p.beta, p.gamma, p.delta), (124, 248, 186, 372));
        assert_eq!((p.ss_cap, p.ss_max), (500, 5000));
        assert_eq!((p.sendme_inc, p.cwnd_init, p.cwnd_min, p.cwnd_inc, p.cwnd_inc_pct_ss, p.cwnd_inc_rate), (31, 124, 62, 31, 100, 1));
        assert_eq!((p.ewma_cwnd_pct, p.ewma_max, p.ewma_ss, p.rtt_reset_pct), (50, 10, 2, 100));
        assert_eq!((p.cwnd_full_gap, p.cwnd_full_minpct, p.cwnd_full_per_cwnd), (1, 75, true));
    }
}
