//! Relay hooks and the circuit rate limit: the handles mechanisms use.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::cell::{CELL_WIRE_BYTES, RELAY_PAYLOAD_SIZE};
use onionlab_tor::*;

/// Throttles every client connection to a fixed rate after `after`, and logs what it saw.
/// What a hook saw at each tick: the time and the client connections.
type SeenLog = Rc<RefCell<Vec<(SimTime, Vec<ClientConnection>)>>>;

struct ThrottleAfter {
    after: SimTime,
    rate: u64,
    seen: SeenLog,
}

impl RelayHook for ThrottleAfter {
    fn interval(&self) -> SimDuration {
        SimDuration::from_secs(1)
    }
    fn on_tick(&mut self, now: SimTime, relay: &mut RelayControl<'_>) {
        let conns = relay.client_connections();
        if now >= self.after {
            for c in &conns {
                relay.set_throttle(c.chan, Some((self.rate, self.rate)));
            }
        }
        self.seen.borrow_mut().push((now, conns));
    }
    fn name(&self) -> &'static str {
        "throttle-after"
    }
}

#[test]
fn a_hook_ticks_sees_client_connections_and_throttles_them() {
    let (mut sim, r, c, s) = line(TorConfig::default(), SimDuration::from_millis(10), [100 * MIB; 3], 2, 1);
    let seen = Rc::new(RefCell::new(vec![]));
    let hook = ThrottleAfter { after: secs(5.0), rate: 20 * KIB, seen: seen.clone() };
    sim.tor.set_relay_hook(&mut sim.q, r[0], Box::new(hook)).unwrap();
    for &cl in &c {
        sim.start_stream(cl, s, 50 * MIB, 0).unwrap();
    }
    sim.run_until(secs(5.0), |_| {});
    let before = sim.tor.node_stats(r[0]).bytes_written;
    sim.run_until(secs(25.0), |_| {});
    let after = sim.tor.node_stats(r[0]).bytes_written;
    let seen = seen.borrow();
    assert_eq!(seen.len(), 25, "one tick per second");
    assert_eq!(seen[3].1.len(), 2, "both clients' connections are visible");
    assert!(seen[3].1.iter().all(|cc| cc.throttle.is_none()));
    assert!(seen[10].1.iter().all(|cc| cc.throttle == Some((20 * KIB, 20 * KIB))));
    // Counters grow, and the guard's relay-side connections are not reported as clients.
    assert!(seen[4].1[0].bytes_written > seen[3].1[0].bytes_written);
    // Two connections at 20 KiB/s for 20 s (plus the first burst and one refill).
    let rate = (after - before) as f64 / 20.0;
    assert!(rate <= 2.0 * 20.0 * 1024.0 * 1.1, "guard wrote {rate} B/s to two throttled clients");
    sim.tor.check_invariants().unwrap();
}

#[test]
fn hooks_only_go_on_relays() {
    let (mut sim, _, c, _) = line(TorConfig::default(), SimDuration::from_millis(10), [MIB; 3], 1, 1);
    let hook = ThrottleAfter { after: SimTime::ZERO, rate: 1, seen: Default::default() };
    assert!(matches!(sim.tor.set_relay_hook(&mut sim.q, c[0], Box::new(hook)), Err(TorError::WrongKind(..))));
}

#[test]
fn circuit_rate_limit_paces_the_exit() {
    let (mut sim, _, c, s) = line(TorConfig::default(), SimDuration::from_millis(10), [100 * MIB; 3], 1, 1);
    let sid = sim.start_stream(c[0], s, 2 * MIB, 0).unwrap();
    let circ = sim.tor.stream_circuit(sid);
    let limit = 40 * KIB;
    sim.tor.set_circuit_rate_limit(&mut sim.q, circ, limit, limit);
    sim.run_until(secs(200.0), |t| t.check_invariants().unwrap());
    let rec = sim.tor.take_records().pop().unwrap();
    let wire = ((2 * MIB).div_ceil(RELAY_PAYLOAD_SIZE) * CELL_WIRE_BYTES) as f64;
    let rate = wire / rec.ttlb.unwrap().as_secs_f64();
    eprintln!("rate-limited circuit: {rate:.0} B/s of cells (limit {limit})");
    assert!(rate <= limit as f64 * 1.03 && rate >= limit as f64 * 0.9, "{rate}");
}

/// Limits each client connection's write side (downstream) from its first tick with
/// `RelayControl::set_limits`, as Tortoise does, leaving the read side unlimited.
struct LimitWrites {
    rate: u64,
    burst: u64,
}

impl RelayHook for LimitWrites {
    fn interval(&self) -> SimDuration {
        SimDuration::from_secs(1)
    }
    fn on_tick(&mut self, _now: SimTime, relay: &mut RelayControl<'_>) {
        for c in relay.client_connections() {
            relay.set_limits(c.chan, None, Some((self.rate, self.burst)));
        }
    }
    fn name(&self) -> &'static str {
        "limit-writes"
    }
}

#[test]
fn a_write_limit_set_by_a_hook_allows_its_burst_then_its_rate() {
    // 5 KiB/s with a 2 MiB burst on the guard's write side, a 10 MiB download: from the
    // tick the limit lands (1 s), at most the burst plus the rate times the time since,
    // and the burst is spent within seconds.
    let (mut sim, r, c, s) = line(TorConfig::default(), SimDuration::from_millis(10), [10 * MIB; 3], 1, 1);
    sim.tor.set_relay_hook(&mut sim.q, r[0], Box::new(LimitWrites { rate: 5 * KIB, burst: 2 * MIB })).unwrap();
    sim.start_stream(c[0], s, 10 * MIB, 0).unwrap();
    let mut written = Vec::new();
    for sec in 1..=60u64 {
        sim.run_until(secs(sec as f64), |_| {});
        written.push(sim.tor.client_connections(r[0]).iter().map(|cc| cc.bytes_written).sum::<u64>());
    }
    for (i, &w) in written.iter().enumerate().skip(1) {
        let since = i as u64;
        assert!(w - written[0] <= 2 * MIB + 5 * KIB * since, "{} bytes in the {since} s after the limit landed", w - written[0]);
    }
    assert!(written[10] - written[0] >= 2 * MIB - 64 * KIB, "{} bytes of the 2 MiB burst by 11 s", written[10] - written[0]);
    let late = (written[59] - written[29]) as f64 / 30.0;
    assert!((5.0 * 1024.0 * 0.9..=5.0 * 1024.0 * 1.02).contains(&late), "late rate {late} B/s");
    sim.tor.check_invariants().unwrap();
}

/// Throttles every client connection at 5 KiB/s with a 100 KiB burst at 1 s, lifts the
/// throttle at 10 s (with `release` at the relay's rate, else by removing the buckets)
/// and throttles again at 20 s; logs the connections it saw.
struct ThrottleLiftThrottle {
    release: Option<u64>,
    seen: SeenLog,
}

impl RelayHook for ThrottleLiftThrottle {
    fn interval(&self) -> SimDuration {
        SimDuration::from_secs(1)
    }
    fn on_tick(&mut self, now: SimTime, relay: &mut RelayControl<'_>) {
        let conns = relay.client_connections();
        for c in &conns {
            if now == secs(1.0) || now == secs(20.0) {
                relay.set_throttle(c.chan, Some((5 * KIB, 100 * KIB)));
            } else if now == secs(10.0) {
                match self.release {
                    Some(rate) => relay.release_throttle(c.chan, rate, 100 * KIB),
                    None => relay.set_throttle(c.chan, None),
                }
            }
        }
        self.seen.borrow_mut().push((now, conns));
    }
    fn name(&self) -> &'static str {
        "throttle-lift-throttle"
    }
}

/// Bytes the guard wrote to its one client in [20 s, 30 s], and what the hook saw.
fn rethrottled_bytes(release: Option<u64>) -> (u64, Vec<(SimTime, Vec<ClientConnection>)>) {
    let guard = 40 * KIB;
    let (mut sim, r, c, s) = line(TorConfig::default(), SimDuration::from_millis(10), [guard, 10 * MIB, 10 * MIB], 1, 1);
    let seen = Rc::new(RefCell::new(vec![]));
    sim.tor.set_relay_hook(&mut sim.q, r[0], Box::new(ThrottleLiftThrottle { release, seen: seen.clone() })).unwrap();
    sim.start_stream(c[0], s, 100 * MIB, 0).unwrap();
    let written = |sim: &TorSim| sim.tor.client_connections(r[0]).iter().map(|cc| cc.bytes_written).sum::<u64>();
    sim.run_until(secs(20.0), |_| {});
    let before = written(&sim);
    sim.run_until(secs(30.0), |_| {});
    sim.tor.check_invariants().unwrap();
    let seen = seen.borrow().clone();
    (written(&sim) - before, seen)
}

#[test]
fn a_released_throttle_keeps_its_tokens_a_removed_one_starts_full() {
    // A 40 KiB/s guard with one bulk client: throttled at 5 KiB/s with a 100 KiB burst at
    // 1 s, the burst is spent by about 4 s. Lifted at 10 s and throttled again at 20 s:
    // - removed (the paper's rate of infinity): the new bucket starts full, so in [20, 30] s
    //   the guard writes the 100 KiB burst plus 5 KiB/s: at least 100 + 9 x 5 = 145 KiB;
    // - released at the guard's rate (the authors' code): the connection used what each
    //   refill gave it, so the bucket is near empty at 20 s and the guard writes 10 refills
    //   of 5 KiB in [20, 30] s (measured: exactly 50 KiB), allowed 2 refills' slack.
    let (removed, _) = rethrottled_bytes(None);
    let (released, seen) = rethrottled_bytes(Some(40 * KIB));
    assert!(removed >= 145 * KIB, "removed: {removed} B in the 10 s after throttling again");
    assert!(released <= 12 * 5 * KIB, "released: {released} B in the 10 s after throttling again");
    // A released connection is reported unthrottled, and throttled again at 20 s.
    let at = |t: f64| seen.iter().find(|(now, _)| *now == secs(t)).map(|(_, c)| c[0].throttle).unwrap();
    assert_eq!(at(5.0), Some((5 * KIB, 100 * KIB)));
    assert_eq!(at(15.0), None, "released buckets count as unthrottled");
    assert_eq!(at(25.0), Some((5 * KIB, 100 * KIB)));
}
