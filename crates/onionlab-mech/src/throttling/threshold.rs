//! Threshold throttling: throttle the loudest fraction `T` of client connections at the
//! mean throughput of the quietest of them (throttling paper section 3.3, algorithm 3;
//! spec 4.4).
//!
//! Every `R` seconds (checked at each 1 s tick): sort client connections by cell EWMA,
//! loudest first; `k = floor(T * N)`; the rate is the mean throughput over the last `R`
//! seconds of the `k`-th loudest connection, "the average number of bytes transferred over
//! the last R seconds" (paper section 3.3): by default `(bytes read + bytes written) / R`
//! (`throughput` below), raised to
//! the floor `F` if below it; the `k` loudest are throttled at that rate, the others
//! unthrottled; the throughput counters restart. `k = 0` throttles nobody.
//!
//! Parameters (tuned values not given by the paper; its example is `T` = 0.1):
//! - `fraction` (`T`): in [0, 1].
//! - `refresh` (`R`): period, required.
//! - `floor` (`F`): bytes/s, required.
//! - `halflife` (`H`): EWMA half-life, default 30 s (code default).
//! - `burst`: bytes, default 2 MiB.
//! - `throughput`: what "bytes transferred" counts under the paper's semantics:
//!   [`ThresholdThroughput::Transferred`] (default: bytes read plus bytes written, the
//!   paper's words) or [`ThresholdThroughput::LargerDirection`] (the larger of the two: the
//!   unit of the per-connection buckets the rate sets, which limit each direction on its
//!   own). They differ on a throttled `k`-th connection: it writes at the rate and also
//!   reads (its SENDMEs, about 3 % of what it is sent), so under `Transferred` the next
//!   rate is that much higher and the rate creeps up each refresh while the same connection
//!   stays `k`-th (about 3 % per `R` for a bulk download), until it no longer binds; under
//!   `LargerDirection` it holds.
//! - `semantics`: [`ThresholdSemantics::Paper`] (default) or [`ThresholdSemantics::Code`],
//!   the authors' code taken literally: it sorts quietest first, takes index `floor(T*N)`
//!   and throttles every connection at least as loud (so about `(1 - T) N` of them), lifts
//!   only rates in `(0, F]` to `F` (a rate of 0 stays 0, which this model turns into tor's
//!   minimum of 1 byte/s), and measures throughput as `(bytes read + bytes written) / 2 /
//!   R`. That halving is a relay-wide formula (every relayed byte is read once and written
//!   once); on a client connection at a guard almost every byte is written (downstream), so
//!   it halves the connection's throughput, and a k-th connection that stays throttled at
//!   `r` sets `r / 2` next time, ratcheting the rate down to `F`. The paper's "bytes
//!   transferred over the last R seconds" has no halving.
//!
//! Ties in EWMA are broken by channel id, so runs are deterministic.

use onionlab_core::{SimDuration, SimTime};

use super::conn_ewma::ConnEwma;
use super::{check, GuardState, ThrottleDecision, ThrottlePolicy, ThrottlingError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThresholdSemantics {
    #[default]
    Paper,
    Code,
}

/// What the paper's "bytes transferred over the last R seconds" counts (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThresholdThroughput {
    #[default]
    Transferred,
    LargerDirection,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThresholdParams {
    pub fraction: f64,
    pub refresh: SimDuration,
    pub floor: u64,
    pub halflife: SimDuration,
    pub burst: u64,
    pub semantics: ThresholdSemantics,
    /// Only with [`ThresholdSemantics::Paper`]: the code's measure is its own.
    pub throughput: ThresholdThroughput,
}

#[derive(Clone, Debug)]
pub struct Threshold {
    p: ThresholdParams,
    ewma: ConnEwma,
    last_refresh: Option<SimTime>,
    /// (chan, bytes read, bytes written) at the last refresh.
    counters: Vec<(u32, u64, u64)>,
    rate: Option<u64>,
}

impl Threshold {
    pub fn new(p: ThresholdParams) -> Result<Self, ThrottlingError> {
        check((0.0..=1.0).contains(&p.fraction), "fraction", || format!("must be in [0, 1], got {}", p.fraction))?;
        check(p.refresh > SimDuration::ZERO, "refresh", || "must be positive".into())?;
        check(p.floor > 0, "floor", || "must be positive".into())?;
        check(p.halflife > SimDuration::ZERO, "halflife", || "must be positive".into())?;
        check(p.burst > 0, "burst", || "must be positive".into())?;
        check(p.semantics == ThresholdSemantics::Paper || p.throughput == ThresholdThroughput::Transferred, "throughput", || {
            "applies to the paper's semantics only: the code's measures (read + written) / 2".into()
        })?;
        Ok(Threshold { ewma: ConnEwma::new(p.halflife), p, last_refresh: None, counters: Vec::new(), rate: None })
    }

    /// The last throttle rate chosen, bytes/s.
    pub fn rate(&self) -> Option<u64> {
        self.rate
    }
}

impl ThrottlePolicy for Threshold {
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision> {
        self.ewma.update(guard.now, guard.clients);
        let start = *self.last_refresh.get_or_insert(guard.now);
        let elapsed = guard.now.saturating_since(start);
        if elapsed < self.p.refresh {
            if elapsed == SimDuration::ZERO {
                self.counters = guard.clients.iter().map(|c| (c.chan, c.bytes_read, c.bytes_written)).collect();
            }
            return Vec::new();
        }
        let secs = elapsed.as_secs_f64();
        let throughput = |c: &onionlab_tor::ClientConnection| -> f64 {
            let (r0, w0) = self.counters.iter().find(|(ch, _, _)| *ch == c.chan).map_or((0, 0), |&(_, r, w)| (r, w));
            let (read, written) = (c.bytes_read.saturating_sub(r0) as f64, c.bytes_written.saturating_sub(w0) as f64);
            let bytes = match (self.p.semantics, self.p.throughput) {
                (ThresholdSemantics::Code, _) => (read + written) / 2.0,
                (ThresholdSemantics::Paper, ThresholdThroughput::Transferred) => read + written,
                (ThresholdSemantics::Paper, ThresholdThroughput::LargerDirection) => read.max(written),
            };
            bytes / secs
        };
        let mut order: Vec<(f64, u32, f64)> = guard.clients.iter().map(|c| (self.ewma.get(c.chan), c.chan, throughput(c))).collect();
        // Loudest first; ties by channel id.
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let n = order.len();
        let mut throttled = vec![false; n];
        let mut rate = None;
        match self.p.semantics {
            ThresholdSemantics::Paper => {
                let k = (self.p.fraction * n as f64).floor() as usize;
                if k > 0 {
                    let r = order[k - 1].2;
                    rate = Some((r.floor() as u64).max(self.p.floor));
                    throttled[..k].iter_mut().for_each(|t| *t = true);
                }
            }
            ThresholdSemantics::Code => {
                // Quietest first, index floor(T*N): with order loudest-first that is
                // position n - 1 - floor(T*N).
                let idx = (self.p.fraction * n as f64).floor() as usize;
                if n > 0 && idx < n {
                    let sel = n - 1 - idx;
                    let r = order[sel].2.floor() as u64;
                    rate = Some(if r > 0 && r <= self.p.floor { self.p.floor } else { r });
                    let cut = order[sel].0;
                    for (i, o) in order.iter().enumerate() {
                        throttled[i] = o.0 >= cut;
                    }
                }
            }
        }
        self.rate = rate;
        self.last_refresh = Some(guard.now);
        self.counters = guard.clients.iter().map(|c| (c.chan, c.bytes_read, c.bytes_written)).collect();
        order.iter().zip(&throttled).map(|(o, &t)| (o.1, if t { rate.map(|r| (r.max(1), self.p.burst)) } else { None })).collect()
    }

    fn threshold_rate(&self) -> Option<u64> {
        self.rate
    }

    fn name(&self) -> &'static str {
        "thresh"
    }
}
