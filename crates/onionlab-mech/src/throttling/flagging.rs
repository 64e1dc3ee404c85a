//! Flagging unfair clients: throttle connections whose cell EWMA exceeds the meta-EWMA of
//! the fair share (throttling paper section 3.2, algorithm 2; spec 4.3).
//!
//! Every tick: `splitRate = B / N` (as in bit-splitting), `M <- M.increment(H, splitRate)`;
//! a client connection whose EWMA exceeds `M` is flagged and throttled at `flag_rate`; a
//! flagged connection whose EWMA falls below `P * M` is unflagged and unthrottled.
//!
//! Parameters (the paper gives none of the tuned values; see docs/reproductions):
//! - `flag_rate`: bytes/s for flagged connections, required.
//! - `penalty` (`P`): in [0, 1]; 0 never unflags (the authors' code comment).
//! - `halflife` (`H`): per-connection EWMA and `M` half-life, default 30 s (code default).
//! - `burst`: bytes, default 2 MiB.
//! - `freeze_penalty_at_flag`: the authors' code compares with `P * M(t_flag)`, frozen when
//!   the connection was flagged; the paper with the current `P * M`. Default false (paper).
//! - `denominator`: `N` for the split, as in bit-splitting (default: open OR connections).
//! - `meta_ewma_tick_quirk`: the authors' code adds `splitRate/512` to `M` unweighted while
//!   connection cells are weighted by `f^-x` within tor's 10 s EWMA tick, understating `M`
//!   by up to `2^(10/H)` (spec 4.5). Default false (consistent form); true emulates the
//!   code by weighting each increment by `2^(-(t mod 10 s)/H)`.
//!
//! The flag test is `EWMA > M` (paper; the code's `>=` is immaterial).

use std::collections::BTreeMap;

use onionlab_core::SimDuration;

use super::bit_splitting::{BitSplitting, SplitCount, SplitDenominator};
use super::conn_ewma::{ConnEwma, MetaEwma};
use super::{check, GuardState, ThrottleDecision, ThrottlePolicy, ThrottlingError, TICK};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlagParams {
    pub flag_rate: u64,
    pub penalty: f64,
    pub halflife: SimDuration,
    pub burst: u64,
    pub freeze_penalty_at_flag: bool,
    pub denominator: SplitDenominator,
    pub meta_ewma_tick_quirk: bool,
}

/// Tor's circuit/connection EWMA tick (`EWMA_TICK_LEN`, 10 s), for the code quirk.
const TOR_EWMA_TICK: SimDuration = SimDuration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Flagging {
    p: FlagParams,
    ewma: ConnEwma,
    meta: MetaEwma,
    count: SplitCount,
    split: Option<u64>,
    /// Flagged connections, with the unflag threshold frozen at flag time (used only with
    /// `freeze_penalty_at_flag`).
    flagged: BTreeMap<u32, f64>,
}

impl Flagging {
    pub fn new(p: FlagParams) -> Result<Self, ThrottlingError> {
        check(p.flag_rate > 0, "flag_rate", || "must be positive".into())?;
        check((0.0..=1.0).contains(&p.penalty), "penalty", || format!("must be in [0, 1], got {}", p.penalty))?;
        check(p.halflife > SimDuration::ZERO, "halflife", || "must be positive".into())?;
        check(p.burst > 0, "burst", || "must be positive".into())?;
        Ok(Flagging {
            ewma: ConnEwma::new(p.halflife),
            meta: MetaEwma::new(p.halflife),
            count: SplitCount::new(p.denominator),
            p,
            split: None,
            flagged: BTreeMap::new(),
        })
    }

    /// The meta-EWMA `M`, cells.
    pub fn meta_ewma(&self) -> f64 {
        self.meta.value()
    }

    pub fn conn_ewma(&self, chan: u32) -> f64 {
        self.ewma.get(chan)
    }

    pub fn is_flagged(&self, chan: u32) -> bool {
        self.flagged.contains_key(&chan)
    }
}

impl ThrottlePolicy for Flagging {
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision> {
        self.ewma.update(guard.now, guard.clients);
        let n = self.count.count(guard);
        self.split = BitSplitting::split_rate(guard.bandwidth_rate, n);
        match self.split {
            Some(s) => {
                let mut rate = s as f64;
                if self.p.meta_ewma_tick_quirk {
                    let into_tick = guard.now.as_nanos() % TOR_EWMA_TICK.as_nanos();
                    rate *= (-(into_tick as f64 / 1e9) / self.p.halflife.as_secs_f64() * std::f64::consts::LN_2).exp();
                }
                self.meta.increment(guard.now, rate, TICK)
            }
            None => self.meta.decay_to(guard.now),
        }
        self.flagged.retain(|chan, _| guard.clients.iter().any(|c| c.chan == *chan));
        if self.split.is_none() {
            return Vec::new();
        }
        let m = self.meta.value();
        let mut out = Vec::new();
        for c in guard.clients {
            let e = self.ewma.get(c.chan);
            if e > m {
                self.flagged.entry(c.chan).or_insert(self.p.penalty * m);
                out.push((c.chan, Some((self.p.flag_rate, self.p.burst))));
            } else if let Some(&frozen) = self.flagged.get(&c.chan) {
                let limit = if self.p.freeze_penalty_at_flag { frozen } else { self.p.penalty * m };
                if e < limit {
                    self.flagged.remove(&c.chan);
                    out.push((c.chan, None));
                }
            }
        }
        out
    }

    /// A connection is flagged once its EWMA exceeds `M`, i.e. once it has sent faster
    /// than the fair share `B / N` for a while: that share is the rate to probe for.
    fn threshold_rate(&self) -> Option<u64> {
        self.split
    }

    fn name(&self) -> &'static str {
        "flag"
    }
}
