//! The per-connection cell EWMA and the meta-EWMA (throttling paper sections 4.2-4.3;
//! spec section 4.5).
//!
//! **Owns:** an exponentially decayed count of the cells a guard sent on each client
//! connection, `E_c(t) = sum over cells i of 2^-((t - t_i) / H)`, and the meta-EWMA `M` of
//! the fair split rate. **Must not touch:** throttles; the algorithms decide.
//!
//! The paper increments a connection's count whenever a cell is flushed onto it. A hook
//! sees the connection's byte counter once a tick instead, so the cells of the last tick
//! are added together at the tick: `E <- E * 2^(-dt/H) + cells`. Within a tick this
//! weights cells by at most `2^(dt/H)` differently from the per-cell form (2.3 % for
//! `H` = 30 s, 1 s ticks), the same for every connection, and it is exactly the 1-second
//! sampling the spec's steady-state check uses: a connection sending `r` bytes/s converges
//! to `(r / cell) / (1 - 2^(-1/H))`. `M` is kept the same way with the fair share `B/N`
//! as its rate, so once both have converged `E > M` iff the connection is faster than
//! `B/N` (the paper's "upper bound of a connection-level EWMA if a connection were
//! continuously sending only its fair share").

use std::collections::BTreeMap;

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::cell::CELL_WIRE_BYTES;
use onionlab_tor::ClientConnection;

fn decay(halflife: SimDuration, dt: SimDuration) -> f64 {
    (-(dt.as_secs_f64() / halflife.as_secs_f64()) * std::f64::consts::LN_2).exp()
}

#[derive(Clone, Debug, Default)]
struct ConnState {
    ewma: f64,
    /// `bytes_written` at the last update.
    seen_bytes: u64,
}

/// Per-connection cell EWMAs of one guard, keyed by channel id.
#[derive(Clone, Debug)]
pub struct ConnEwma {
    halflife: SimDuration,
    last: Option<SimTime>,
    conns: BTreeMap<u32, ConnState>,
}

impl ConnEwma {
    pub fn new(halflife: SimDuration) -> Self {
        assert!(halflife > SimDuration::ZERO, "EWMA half-life must be positive");
        ConnEwma { halflife, last: None, conns: BTreeMap::new() }
    }

    pub fn halflife(&self) -> SimDuration {
        self.halflife
    }

    /// Decays every count to `now` and adds the cells each connection was sent since the
    /// last update. Connections not in `clients` (closed) are forgotten; new ones start
    /// at 0 plus the cells they have been sent so far.
    pub fn update(&mut self, now: SimTime, clients: &[ClientConnection]) {
        let f = match self.last {
            Some(t) => decay(self.halflife, now.saturating_since(t)),
            None => 1.0,
        };
        self.last = Some(now);
        let mut next = BTreeMap::new();
        for c in clients {
            let mut s = self.conns.remove(&c.chan).unwrap_or_default();
            let new_bytes = c.bytes_written.saturating_sub(s.seen_bytes);
            s.ewma = s.ewma * f + new_bytes as f64 / CELL_WIRE_BYTES as f64;
            s.seen_bytes = c.bytes_written;
            next.insert(c.chan, s);
        }
        self.conns = next;
    }

    /// The EWMA of connection `chan` in cells (0 for one never seen).
    pub fn get(&self, chan: u32) -> f64 {
        self.conns.get(&chan).map_or(0.0, |s| s.ewma)
    }
}

/// The meta-EWMA `M`: the EWMA a connection would have if it always sent exactly the fair
/// split rate (algorithm 2, line 7: `M <- M.increment(H, splitRate)`).
#[derive(Clone, Debug)]
pub struct MetaEwma {
    halflife: SimDuration,
    last: Option<SimTime>,
    value: f64,
}

impl MetaEwma {
    pub fn new(halflife: SimDuration) -> Self {
        assert!(halflife > SimDuration::ZERO, "EWMA half-life must be positive");
        MetaEwma { halflife, last: None, value: 0.0 }
    }

    /// Decays `M` to `now` and adds `split_rate` (bytes/s) times the time since the last
    /// increment (one tick for the first), in cells.
    pub fn increment(&mut self, now: SimTime, split_rate: f64, first_dt: SimDuration) {
        let dt = match self.last {
            Some(t) => now.saturating_since(t),
            None => first_dt,
        };
        let f = if self.last.is_some() { decay(self.halflife, dt) } else { 1.0 };
        self.last = Some(now);
        self.value = self.value * f + split_rate * dt.as_secs_f64() / CELL_WIRE_BYTES as f64;
    }

    /// Decays `M` to `now` without adding (a tick with no connections).
    pub fn decay_to(&mut self, now: SimTime) {
        if let Some(t) = self.last {
            self.value *= decay(self.halflife, now.saturating_since(t));
        }
        self.last = Some(now);
    }

    pub fn value(&self) -> f64 {
        self.value
    }
}

/// The steady state of an EWMA fed `rate` bytes/s in 1-second samples with half-life `h`:
/// `(rate / cell) / (1 - 2^(-1/h))` cells (spec 4.5).
pub fn steady_state(rate: f64, halflife: SimDuration) -> f64 {
    (rate / CELL_WIRE_BYTES as f64) / (1.0 - decay(halflife, SimDuration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(chan: u32, bytes_written: u64) -> ClientConnection {
        ClientConnection {
            chan,
            client: 0,
            bytes_read: 0,
            bytes_written,
            throttle: None,
            bucket_empty_intervals: 0,
            circuit_throttle: None,
        }
    }

    fn t(s: u64) -> SimTime {
        SimTime::from_nanos(s * 1_000_000_000)
    }

    #[test]
    fn hand_worked_counts_over_three_ticks() {
        // H = 1 s: each tick halves the count. 543 B = 1 cell on the wire.
        let c = CELL_WIRE_BYTES;
        let mut e = ConnEwma::new(SimDuration::from_secs(1));
        e.update(t(1), &[conn(7, 4 * c)]);
        assert_eq!(e.get(7), 4.0);
        e.update(t(2), &[conn(7, 6 * c)]); // 4/2 + 2
        assert_eq!(e.get(7), 4.0);
        e.update(t(3), &[conn(7, 6 * c)]); // 4/2 + 0
        assert_eq!(e.get(7), 2.0);
        e.update(t(5), &[conn(7, 6 * c), conn(9, c)]); // two ticks: 2/4; a new connection
        assert_eq!(e.get(7), 0.5);
        assert_eq!(e.get(9), 1.0);
        e.update(t(6), &[conn(9, c)]); // 7 closed: forgotten
        assert_eq!(e.get(7), 0.0);
        assert_eq!(e.get(9), 0.5);
    }

    #[test]
    fn constant_rate_converges_to_the_spec_steady_state_and_meets_m_at_the_fair_share() {
        let h = SimDuration::from_secs(30);
        let rate = 50_000u64; // bytes/s
        let mut e = ConnEwma::new(h);
        let mut m = MetaEwma::new(h);
        for s in 1..=2000u64 {
            e.update(t(s), &[conn(1, rate * s)]);
            m.increment(t(s), rate as f64, SimDuration::from_secs(1));
        }
        let expect = steady_state(rate as f64, h);
        assert!((e.get(1) - expect).abs() / expect < 1e-9, "{} vs {expect}", e.get(1));
        assert!((m.value() - expect).abs() / expect < 1e-9);
        // 1 / (1 - 2^(-1/30)) = 43.8 (spec 4.5)
        let factor = expect / (rate as f64 / CELL_WIRE_BYTES as f64);
        assert!((factor - 43.78).abs() < 0.01, "{factor}");
    }
}
