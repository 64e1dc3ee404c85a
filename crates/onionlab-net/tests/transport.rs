//! Transport behaviour: analytic cases, fairness, backpressure, capacity, conservation and
//! determinism.

mod common;

use common::*;
use onionlab_core::{EventQueue, SimDuration, SimTime};
use onionlab_net::*;
use proptest::prelude::*;

const MBIT: u64 = 1_000_000;

fn within(actual: f64, expected: f64, tol: f64) -> bool {
    (actual - expected).abs() <= tol * expected
}

#[test]
fn one_long_flow_matches_slow_start_plus_size_over_capacity() {
    // 5 MiB over a 10 Mbit/s bottleneck with a 100 ms RTT.
    let mut h = constant(50);
    let a = h.net.add_host(host("a", 10 * MBIT, 1000 * MBIT)).unwrap();
    let b = h.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let s = 5 * 1024 * 1024;
    h.transfer(a, b, s).unwrap();
    h.run();
    let got = h.transfers[0].done_at.unwrap().as_secs_f64();
    let want = textbook_time(s, 10 * MBIT, 0.1, 10 * 1448);
    eprintln!("5 MiB @ 10 Mbit/s, RTT 100 ms: {got:.4} s (textbook {want:.4} s)");
    assert!(within(got, want, 0.05), "took {got:.3} s, textbook {want:.3} s");
}

#[test]
fn short_flows_pay_their_round_trips() {
    // 100 KiB on a fast path: slow start, not capacity, decides the time.
    for (s, one_way_ms) in [(100 * 1024u64, 40u64), (20 * 1024, 100), (1024 * 1024, 25)] {
        let mut h = constant(one_way_ms);
        let a = h.net.add_host(host("a", 100 * MBIT, 1000 * MBIT)).unwrap();
        let b = h.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
        h.transfer(a, b, s).unwrap();
        h.run();
        let got = h.transfers[0].done_at.unwrap().as_secs_f64();
        let want = textbook_time(s, 100 * MBIT, 2.0 * one_way_ms as f64 / 1000.0, 10 * 1448);
        eprintln!("{s} B, RTT {} ms: {got:.4} s (textbook {want:.4} s)", 2 * one_way_ms);
        assert!(within(got, want, 0.05), "{s} B: took {got:.4} s, textbook {want:.4} s");
    }
}

fn throughputs(h: &Harness, dur: SimDuration) -> Vec<f64> {
    h.transfers.iter().map(|t| t.read as f64 * 8.0 / dur.as_secs_f64()).collect()
}

#[test]
fn equal_flows_share_a_downlink_bottleneck_fairly() {
    let mut h = constant(20);
    let sink = h.net.add_host(host("sink", 1000 * MBIT, 20 * MBIT)).unwrap();
    for i in 0..10 {
        let src = h.net.add_host(host(&format!("src{i}"), 100 * MBIT, 100 * MBIT)).unwrap();
        h.transfer(src, sink, u64::MAX / 4).unwrap();
    }
    let dur = SimDuration::from_secs(30);
    h.run_until(SimTime::ZERO + dur, |_| {});
    let x = throughputs(&h, dur);
    let total: f64 = x.iter().sum();
    eprintln!("Jain index {:.4}, total {:.0} bit/s", jain_index(&x), x.iter().sum::<f64>());
    assert!(jain_index(&x) >= 0.99, "Jain index {} for {:?}", jain_index(&x), x);
    assert!(total > 0.95 * 20e6 && total <= 20e6, "bottleneck utilisation {total}");
    h.net.check_invariants().unwrap();
}

#[test]
fn equal_flows_share_an_uplink_fairly() {
    let mut h = constant(30);
    let src = h.net.add_host(host("src", 10 * MBIT, 1000 * MBIT)).unwrap();
    for i in 0..8 {
        let dst = h.net.add_host(host(&format!("dst{i}"), 100 * MBIT, 100 * MBIT)).unwrap();
        h.transfer(src, dst, u64::MAX / 4).unwrap();
    }
    let dur = SimDuration::from_secs(30);
    h.run_until(SimTime::ZERO + dur, |_| {});
    let x = throughputs(&h, dur);
    eprintln!("Jain index {:.4}, total {:.0} bit/s", jain_index(&x), x.iter().sum::<f64>());
    assert!(jain_index(&x) >= 0.99, "Jain index {} for {:?}", jain_index(&x), x);
    assert!(x.iter().sum::<f64>() > 0.95 * 10e6);
}

#[test]
fn full_send_buffer_blocks_and_wakes_the_writer() {
    let cfg = TransportConfig { sndbuf_bytes: 64 * 1024, ..TransportConfig::default() };
    let mut h = Harness::new(cfg, LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let a = h.net.add_host(host("a", MBIT, 1000 * MBIT)).unwrap();
    let b = h.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let s = 1024 * 1024;
    h.transfer(a, b, s).unwrap();
    assert_eq!(h.transfers[0].written, 64 * 1024, "the first write is cut at the send buffer");
    h.run();
    assert_eq!(h.transfers[0].read, s, "Writable notices resumed the writer to the end");
    // At 1 Mbit/s the transfer is capacity-bound: about 8.4 s.
    let t = h.transfers[0].done_at.unwrap().as_secs_f64();
    assert!(t > 8.3 && t < 8.9, "took {t}");
}

#[test]
fn small_receive_buffer_bounds_throughput_to_window_per_rtt() {
    // A slow reader is modelled by a small receive buffer: throughput <= rcvbuf / RTT.
    let cfg = TransportConfig { rcvbuf_bytes: 64 * 1024, ..TransportConfig::default() };
    let mut h = Harness::new(cfg, LatencyModel::constant(SimDuration::from_millis(50)), 1);
    let a = h.net.add_host(host("a", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let b = h.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    h.transfer(a, b, u64::MAX / 4).unwrap();
    let dur = SimDuration::from_secs(10);
    h.run_until(SimTime::ZERO + dur, |_| {});
    let rate = h.transfers[0].read as f64 / dur.as_secs_f64();
    let bound = 64.0 * 1024.0 / 0.1;
    // An ACK advertises the window before the application has read the batch it
    // acknowledges (as Linux does), so the usable window is one batch smaller.
    let lower = (64.0 - 16.0) * 1024.0 / 0.1;
    assert!(rate <= bound && rate >= lower, "rate {rate} outside [{lower}, {bound}]");
}

#[test]
fn a_link_never_exceeds_its_capacity_over_any_window() {
    let cfg = TransportConfig { record_link_log: true, ..TransportConfig::default() };
    let mut h = Harness::new(cfg, LatencyModel::constant(SimDuration::from_millis(5)), 3);
    let hub = h.net.add_host(host("hub", 5 * MBIT, 7 * MBIT)).unwrap();
    for i in 0..6 {
        let o = h.net.add_host(host(&format!("o{i}"), 50 * MBIT, 50 * MBIT)).unwrap();
        h.transfer(hub, o, 3_000_000).unwrap();
        h.transfer(o, hub, 3_000_000).unwrap();
    }
    h.run();
    let batch = h.net.config().max_batch_bytes as f64;
    for (up, cap) in [(true, 5e6), (false, 7e6)] {
        let recs: Vec<_> = h.net.link_log().iter().filter(|r| r.host == hub && r.up == up).collect();
        // Transmissions on one link never overlap.
        for w in recs.windows(2) {
            assert!(w[1].start >= w[0].end);
        }
        // Every window [recs[i].start, recs[j].end] carries at most capacity x length.
        for i in (0..recs.len()).step_by(7) {
            let mut bytes = 0.0;
            for r in &recs[i..] {
                bytes += r.bytes as f64;
                let len = (r.end - recs[i].start).as_secs_f64();
                assert!(bytes * 8.0 <= cap * len + 8.0, "{bytes} B in {len} s on a {cap} bit/s link");
                let _ = batch;
            }
        }
    }
}

fn lossy_run(seed: u64) -> (Vec<LinkRecord>, Vec<Option<SimTime>>) {
    let lat = latency::LatencyMatrix::new(vec![vec![SimDuration::from_millis(20); 2]; 2], Some(vec![vec![0.01; 2]; 2])).unwrap();
    let cfg = TransportConfig { record_link_log: true, ..TransportConfig::default() };
    let mut h = Harness::new(cfg, LatencyModel::Matrix(lat), seed);
    let a = h.net.add_host(HostSpec { location: 0, ..host("a", 20 * MBIT, 20 * MBIT) }).unwrap();
    let b = h.net.add_host(HostSpec { location: 1, ..host("b", 20 * MBIT, 20 * MBIT) }).unwrap();
    for _ in 0..3 {
        h.transfer(a, b, 2_000_000).unwrap();
        h.transfer(b, a, 1_000_000).unwrap();
    }
    h.run();
    assert!(h.net.counters().get_by_name("net.congestion_marks_loss").unwrap() > 0);
    (h.net.link_log().to_vec(), h.transfers.iter().map(|t| t.done_at).collect())
}

#[test]
fn same_seed_same_run_different_seed_different_run() {
    let a = lossy_run(7);
    assert_eq!(a, lossy_run(7));
    assert_ne!(a, lossy_run(8));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Bytes are conserved at every event (written = unsent + in flight + delivered, in
    /// order) and, once the network drains, everything written has been read.
    #[test]
    fn bytes_are_conserved_and_delivered_in_order(
        caps in prop::collection::vec((1u64..200, 1u64..200), 2..6),
        pairs in prop::collection::vec((0usize..6, 0usize..6, 1u64..3_000_000), 1..12),
        one_way_us in 0u64..80_000,
        sndbuf_kib in 16u64..2048,
        rcvbuf_kib in 16u64..2048,
        stop_ms in 1u64..4000,
    ) {
        let cfg = TransportConfig {
            sndbuf_bytes: sndbuf_kib * 1024,
            rcvbuf_bytes: rcvbuf_kib * 1024,
            queue_limit_bytes: 64 * 1024,
            ..TransportConfig::default()
        };
        let mut h = Harness::new(cfg, LatencyModel::constant(SimDuration::from_micros(one_way_us)), 5);
        let ids: Vec<_> = caps.iter().enumerate()
            .map(|(i, &(u, d))| h.net.add_host(host(&format!("h{i}"), u * MBIT, d * MBIT)).unwrap())
            .collect();
        for &(a, b, s) in &pairs {
            let (a, b) = (ids[a % ids.len()], ids[b % ids.len()]);
            if a != b { h.transfer(a, b, s).unwrap(); }
        }
        let mut violation = None;
        let mut last = SimTime::ZERO;
        let stop = SimTime::ZERO + SimDuration::from_millis(stop_ms);
        h.run_until(stop, |net| {
            if violation.is_none() { violation = net.check_invariants().err(); }
        });
        prop_assert!(violation.is_none(), "{:?}", violation);
        prop_assert!(h.q.now() >= last);
        last = h.q.now();
        h.run_until(SimTime::MAX, |net| {
            if violation.is_none() { violation = net.check_invariants().err(); }
        });
        prop_assert!(violation.is_none(), "{:?}", violation);
        prop_assert!(h.q.now() >= last);
        for t in &h.transfers {
            prop_assert_eq!(t.read, t.total);
            let [written, sent, arrived, delivered, read] = h.net.flow_counters(t.conn, Side::Initiator);
            prop_assert_eq!([written, sent, arrived, delivered, read], [t.total; 5]);
        }
    }
}

/// A transfer driven directly over the network's public API, for the close tests (the
/// `TransferRunner` maps connection ids to transfers once and for all; here ids are reused).
struct Xfer {
    conn: ConnId,
    total: u64,
    written: u64,
    read: u64,
    closed: bool,
}

struct CloseDriver {
    net: Network,
    q: onionlab_core::EventQueue<NetEvent>,
    xfers: Vec<Xfer>,
    /// The transfer each connection id currently belongs to.
    by_conn: std::collections::HashMap<ConnId, usize>,
    violation: Option<String>,
}

impl CloseDriver {
    fn new(cfg: TransportConfig, one_way: SimDuration) -> Self {
        Self::with_latency(cfg, LatencyModel::constant(one_way))
    }

    fn with_latency(cfg: TransportConfig, latency: LatencyModel) -> Self {
        CloseDriver {
            net: Network::new(cfg, latency, 3),
            q: onionlab_core::EventQueue::new(),
            xfers: Vec::new(),
            by_conn: Default::default(),
            violation: None,
        }
    }

    fn start(&mut self, a: HostId, b: HostId, total: u64) -> usize {
        let conn = self.net.connect(&mut self.q, a, b).unwrap();
        let written = self.net.write(&mut self.q, conn, Side::Initiator, total);
        self.xfers.push(Xfer { conn, total, written, read: 0, closed: false });
        self.by_conn.insert(conn, self.xfers.len() - 1);
        self.xfers.len() - 1
    }

    fn close(&mut self, i: usize) {
        let now = self.q.now();
        self.net.close(now, self.xfers[i].conn);
        self.xfers[i].closed = true;
    }

    fn run_until(&mut self, until: SimTime) {
        let mut notices = Vec::new();
        while let Some(ev) = self.q.pop_until(until) {
            self.net.handle(&mut self.q, ev.event);
            self.net.drain_notices(&mut notices);
            for n in notices.drain(..) {
                let (conn, side) = n.endpoint();
                let i = self.by_conn[&conn];
                if self.xfers[i].closed {
                    self.violation.get_or_insert(format!("notice {n:?} for closed transfer {i}"));
                    continue;
                }
                match (n, side) {
                    (NetNotice::Writable { .. }, Side::Initiator) => {
                        let left = self.xfers[i].total - self.xfers[i].written;
                        self.xfers[i].written += self.net.write(&mut self.q, conn, Side::Initiator, left);
                    }
                    (NetNotice::Readable { .. }, Side::Acceptor) => {
                        self.xfers[i].read += self.net.read(&mut self.q, conn, Side::Acceptor, u64::MAX);
                    }
                    _ => {}
                }
            }
            if self.violation.is_none() {
                self.violation = self.net.check_invariants().err();
            }
        }
        if until != SimTime::MAX {
            self.q.advance_to(until).expect("no event is left before `until`");
        }
    }
}

#[test]
fn a_closed_connection_is_reused_only_once_nothing_of_it_is_left() {
    let one_way = SimDuration::from_millis(10);
    let mut d = CloseDriver::new(TransportConfig::default(), one_way);
    let a = d.net.add_host(host("a", 10 * MBIT, 1000 * MBIT)).unwrap();
    let b = d.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let first = d.start(a, b, 4 * 1024 * 1024);
    d.run_until(SimTime::ZERO + SimDuration::from_millis(300));
    let read_at_close = d.xfers[first].read;
    assert!(read_at_close > 0 && read_at_close < d.xfers[first].total, "mid-transfer: {read_at_close}");
    d.close(first);
    // Bytes are still in flight: a new connection gets a fresh id.
    let second = d.start(a, b, 100_000);
    assert_ne!(d.xfers[second].conn, d.xfers[first].conn);
    assert_eq!(d.net.num_connections(), 2);
    d.run_until(SimTime::ZERO + SimDuration::from_secs(5));
    assert_eq!(d.xfers[second].read, 100_000);
    // Everything of the closed connection has arrived and been acknowledged: reused.
    let third = d.start(a, b, 300_000);
    assert_eq!(d.xfers[third].conn, d.xfers[first].conn, "the closed slot is reused");
    assert_eq!(d.net.num_connections(), 2);
    d.run_until(SimTime::MAX);
    assert_eq!(d.violation, None);
    assert_eq!(d.xfers[third].read, 300_000, "the new connection carries its own bytes only");
    assert_eq!(d.xfers[first].read, read_at_close, "nothing is read from a closed connection");
    let [written, sent, arrived, delivered, read] = d.net.flow_counters(d.xfers[third].conn, Side::Initiator);
    assert_eq!([written, sent, arrived, delivered, read], [300_000; 5]);
    let counters = d.net.counters().snapshot();
    let get = |name: &str| counters.iter().find(|(n, _)| *n == name).map(|&(_, v)| v);
    assert_eq!(get("net.connections_opened"), Some(3));
    assert_eq!(get("net.connections_closed"), Some(1));
}

#[test]
fn a_closed_slot_waits_for_the_last_window_update() {
    // A reader that frees a nearly full receive buffer sends a window update, which takes
    // one latency to arrive. Closing right after must not let a new connection take the id
    // before that update has arrived.
    let cfg = TransportConfig { rcvbuf_bytes: 64 * 1024, ..TransportConfig::default() };
    let one_way = SimDuration::from_millis(50);
    let mut d = CloseDriver::new(cfg, one_way);
    let a = d.net.add_host(host("a", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let b = d.net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let first = d.start(a, b, 64 * 1024);
    d.run_until(SimTime::ZERO + SimDuration::from_secs(2));
    assert_eq!(d.xfers[first].read, 64 * 1024);
    d.close(first);
    let t_close = d.q.now();
    d.run_until(t_close + SimDuration::from_millis(49));
    let early = d.start(a, b, 1000);
    assert_ne!(d.xfers[early].conn, d.xfers[first].conn, "reused within one latency of the close");
    d.run_until(t_close + SimDuration::from_millis(51));
    let late = d.start(a, b, 1000);
    assert_eq!(d.xfers[late].conn, d.xfers[first].conn);
    d.run_until(SimTime::MAX);
    assert_eq!(d.violation, None);
    assert_eq!((d.xfers[early].read, d.xfers[late].read), (1000, 1000));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Transfers start, some are closed mid-way, and more start later (taking the closed
    /// ids when they are free): the transport's accounting holds after every event, a
    /// closed connection raises no notice, and every transfer left open delivers exactly
    /// its own bytes.
    #[test]
    fn closing_and_reusing_connections_keeps_every_transfer_whole(
        n_hosts in 2usize..6,
        one_way_ms in 1u64..40,
        waves in proptest::collection::vec(
            (proptest::collection::vec((0usize..6, 0usize..6, 1u64..400_000), 1..6), proptest::collection::vec(any::<bool>(), 6), 1u64..400),
            1..6),
    ) {
        let mut d = CloseDriver::new(TransportConfig::default(), SimDuration::from_millis(one_way_ms));
        let ids: Vec<_> = (0..n_hosts).map(|i| d.net.add_host(host(&format!("h{i}"), 20 * MBIT, 50 * MBIT)).unwrap()).collect();
        let mut t = SimTime::ZERO;
        for (starts, closes, gap_ms) in waves {
            let mut started = Vec::new();
            for (a, b, s) in starts {
                let (a, b) = (ids[a % n_hosts], ids[b % n_hosts]);
                if a != b {
                    started.push(d.start(a, b, s));
                }
            }
            t += SimDuration::from_millis(gap_ms);
            d.run_until(t);
            // Close some of the transfers still running (and some finished ones).
            for (k, i) in started.into_iter().enumerate() {
                if closes[k % closes.len()] {
                    d.close(i);
                }
            }
        }
        d.run_until(SimTime::MAX);
        prop_assert_eq!(d.violation.clone(), None);
        for (i, x) in d.xfers.iter().enumerate() {
            if !x.closed {
                prop_assert_eq!(x.read, x.total, "transfer {} on {:?}", i, x.conn);
            }
        }
        prop_assert!(d.net.num_connections() <= d.xfers.len());
    }
}

#[test]
fn rtt_sample_is_both_serialisations_and_both_latencies() {
    // One 1,000-byte batch on an idle path: the sender's RTT sample is its uplink's
    // serialisation, the one-way latency, the receiver's downlink serialisation and the
    // acknowledgement's latency back (in-flight batches do not store their send time; the
    // receiver recomputes it, and this pins that to the exact nanosecond).
    let mut h = constant(30);
    let a = h.net.add_host(host("a", 8 * MBIT, 1000 * MBIT)).unwrap();
    let b = h.net.add_host(host("b", 1000 * MBIT, 2 * MBIT)).unwrap();
    let i = h.transfer(a, b, 1000).unwrap();
    h.run();
    // Acknowledgements are applied lazily, when the sender is next looked at.
    let later = SimTime::ZERO + SimDuration::from_secs(1);
    h.q.advance_to(later).unwrap();
    h.net.sync_socket(later, h.transfers[i].conn, Side::Initiator);
    let info = h.net.socket_info(h.transfers[i].conn, Side::Initiator);
    let up = SimDuration::transmission(1000, 8 * MBIT);
    let down = SimDuration::transmission(1000, 2 * MBIT);
    let want = up + SimDuration::from_millis(30) + down + SimDuration::from_millis(30);
    assert_eq!(up, SimDuration::from_millis(1));
    assert_eq!(down, SimDuration::from_millis(4));
    assert_eq!(info.min_rtt, Some(want));
    assert_eq!(info.srtt, Some(want));
}

/// Runs `q` up to `until` (then moves the clock there), handing every event to `net`, and
/// appends the notices raised with the time of each.
fn run_logged(net: &mut Network, q: &mut EventQueue<NetEvent>, until: SimTime, log: &mut Vec<(SimTime, NetNotice)>) {
    let mut buf = Vec::new();
    while let Some(ev) = q.pop_until(until) {
        net.handle(q, ev.event);
        net.drain_notices(&mut buf);
        log.extend(buf.drain(..).map(|n| (q.now(), n)));
    }
    if until != SimTime::MAX {
        q.advance_to(until).unwrap();
    }
}

fn ms(x: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_millis(x)
}

/// Two locations 10 ms apart one way and 30 ms the other (1 ms within each).
fn asymmetric() -> LatencyModel {
    let d = SimDuration::from_millis;
    LatencyModel::Matrix(latency::LatencyMatrix::new(vec![vec![d(1), d(10)], vec![d(30), d(1)]], None).unwrap())
}

#[test]
fn each_leg_takes_the_latency_of_its_own_direction() {
    // `a` at location 0 sends 1,000 B to `b` at location 1: 10 ms there, 30 ms back.
    let mut net = Network::new(TransportConfig::default(), asymmetric(), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(HostSpec { location: 0, ..host("a", 8 * MBIT, 1000 * MBIT) }).unwrap();
    let b = net.add_host(HostSpec { location: 1, ..host("b", 1000 * MBIT, 2 * MBIT) }).unwrap();
    let conn = net.connect(&mut q, a, b).unwrap();
    assert_eq!(net.write(&mut q, conn, Side::Initiator, 1000), 1000);
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, ms(100), &mut log);
    // SYN 10 ms; SYN-ACK 30 ms; then 1 ms on a's uplink, 10 ms, 4 ms on b's downlink.
    let want = [
        (ms(10), NetNotice::Connected { conn, side: Side::Acceptor }),
        (ms(40), NetNotice::Connected { conn, side: Side::Initiator }),
        (ms(55), NetNotice::Readable { conn, side: Side::Acceptor }),
    ];
    assert_eq!(log, want);
    assert_eq!((net.readable_bytes(conn, Side::Acceptor), net.readable_bytes(conn, Side::Initiator)), (1000, 0));
    // The acknowledgement takes 30 ms back: RTT 1 + 10 + 4 + 30 ms.
    net.sync_socket(ms(100), conn, Side::Initiator);
    let info = net.socket_info(conn, Side::Initiator);
    assert_eq!((info.min_rtt, info.unacked), (Some(SimDuration::from_millis(45)), 0));
    assert_eq!((net.link_bytes(a, true), net.link_bytes(a, false), net.link_bytes(b, true), net.link_bytes(b, false)), (1000, 0, 0, 1000));
}

#[test]
fn a_window_update_travels_back_from_the_reader() {
    // A 20,000 B receive buffer the reader leaves full until 200 ms, then half empties:
    // the update takes b's 30 ms back to a, and the next 10,000 B batch then needs 10 ms
    // on a's uplink, 10 ms across and 80 us on b's downlink.
    let cfg = TransportConfig { rcvbuf_bytes: 20_000, max_batch_bytes: 10_000, ..TransportConfig::default() };
    let mut net = Network::new(cfg, asymmetric(), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(HostSpec { location: 0, ..host("a", 8 * MBIT, 1000 * MBIT) }).unwrap();
    let b = net.add_host(HostSpec { location: 1, ..host("b", 1000 * MBIT, 1000 * MBIT) }).unwrap();
    let conn = net.connect(&mut q, a, b).unwrap();
    net.write(&mut q, conn, Side::Initiator, 100_000);
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, ms(200), &mut log);
    assert_eq!(net.readable_bytes(conn, Side::Acceptor), 20_000, "the receive window is full");
    assert!(q.is_empty(), "the sender waits for a window update");
    // Exactly half the buffer free is enough for an update.
    assert_eq!(net.read(&mut q, conn, Side::Acceptor, 10_000), 10_000);
    log.clear();
    run_logged(&mut net, &mut q, ms(300), &mut log);
    let want = ms(230) + SimDuration::from_millis(20) + SimDuration::from_micros(80);
    assert_eq!(log.first(), Some(&(want, NetNotice::Readable { conn, side: Side::Acceptor })));
}

/// The blocked-writer case: a 20,000 B send buffer and 4,000 B batches, a 10 ms network,
/// host a's 8 Mbit/s uplink; 30,000 B written, of which the buffer takes 20,000 (the
/// window holds all five batches).
fn blocked_writer() -> (Network, EventQueue<NetEvent>, ConnId) {
    let cfg = TransportConfig { sndbuf_bytes: 20_000, max_batch_bytes: 4000, initial_cwnd_segments: 20, ..TransportConfig::default() };
    let mut net = Network::new(cfg, LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(host("a", 8 * MBIT, 1000 * MBIT)).unwrap();
    let b = net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let conn = net.connect(&mut q, a, b).unwrap();
    assert_eq!(net.write(&mut q, conn, Side::Initiator, 30_000), 20_000);
    (net, q, conn)
}

#[test]
fn a_blocked_writer_wakes_once_free_space_is_half_of_what_is_queued() {
    // A 20,000 B send buffer, five 4,000 B batches in flight (the window holds them all),
    // 4 ms each on a's uplink from 20 ms; the k-th acknowledgement is back at
    // 40 + 4k ms + 32 us. After the first, 4,000 B are free for 16,000 B queued; after the
    // second 8,000 B for 12,000 B, which is the first time free >= queued / 2 (Linux's
    // sk_stream_wspace >= sk_stream_min_wspace).
    let (mut net, mut q, conn) = blocked_writer();
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, SimTime::MAX, &mut log);
    let woken: Vec<_> = log.iter().filter(|(_, n)| matches!(n, NetNotice::Writable { .. })).collect();
    assert_eq!(woken, [&(ms(48) + SimDuration::from_micros(32), NetNotice::Writable { conn, side: Side::Initiator })]);
    // A write that fits promises no notice.
    log.clear();
    assert_eq!(net.write(&mut q, conn, Side::Initiator, 5000), 5000);
    run_logged(&mut net, &mut q, SimTime::MAX, &mut log);
    assert!(log.iter().all(|(_, n)| !matches!(n, NetNotice::Writable { .. })), "{log:?}");
}

#[test]
fn batches_arriving_at_one_instant_are_served_in_the_order_they_were_sent() {
    // Two identical senders, one batch each, reach the sink's 2 Mbit/s downlink at 31 ms;
    // the first connection's batch left first (its handshake completed first).
    let mut h = constant(10);
    let sink = h.net.add_host(host("sink", 1000 * MBIT, 2 * MBIT)).unwrap();
    for i in 0..2 {
        let s = h.net.add_host(host(&format!("s{i}"), 8 * MBIT, 1000 * MBIT)).unwrap();
        h.transfer(s, sink, 1000).unwrap();
    }
    h.run();
    let done: Vec<_> = h.transfers.iter().map(|t| t.done_at).collect();
    assert_eq!(done, [Some(ms(35)), Some(ms(39))]);
}

#[test]
fn loss_marks_a_batch_with_the_probability_that_one_of_its_packets_is_lost() {
    // 1 % loss per packet a to b; a queue limit nothing reaches, so every mark is a loss.
    let lat =
        latency::LatencyMatrix::new(vec![vec![SimDuration::from_millis(20); 2]; 2], Some(vec![vec![0.0, 0.01], vec![0.0, 0.0]])).unwrap();
    let cfg = TransportConfig { record_link_log: true, queue_limit_bytes: u64::MAX / 2, ..TransportConfig::default() };
    let mut h = Harness::new(cfg, LatencyModel::Matrix(lat), 11);
    let a = h.net.add_host(HostSpec { location: 0, ..host("a", 20 * MBIT, 20 * MBIT) }).unwrap();
    let b = h.net.add_host(HostSpec { location: 1, ..host("b", 20 * MBIT, 20 * MBIT) }).unwrap();
    h.transfer(a, b, 10_000_000).unwrap();
    h.run();
    let get = |name| h.net.counters().get_by_name(name).unwrap();
    assert_eq!(get("net.congestion_marks_queue"), 0);
    let mss = h.net.config().mss as f64;
    let batches: Vec<f64> = h.net.link_log().iter().filter(|r| r.host == b && !r.up).map(|r| r.bytes as f64).collect();
    let expected: f64 = batches.iter().map(|&n| 1.0 - 0.99f64.powf((n / mss).ceil())).sum();
    let marks = get("net.congestion_marks_loss") as f64;
    // About 11 % of full batches: far from the 1 % of a per-batch rate.
    assert!(expected > 40.0 && expected > 0.05 * batches.len() as f64, "expected {expected} of {}", batches.len());
    eprintln!("{marks} marks, {expected} expected of {} batches", batches.len());
    assert!(within(marks, expected, 0.3), "{marks} marks, {expected} expected of {} batches", batches.len());
}

#[test]
fn wait_areas_split_a_byte_s_time_between_kernel_link_and_receive_buffer() {
    // 1,000 B written at 0: sent at 20 ms (after the handshake), delivered at
    // 20 + 1 + 10 + 4 = 35 ms, read at 50 ms.
    let mut net = Network::new(TransportConfig::default(), LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(host("a", 8 * MBIT, 1000 * MBIT)).unwrap();
    let b = net.add_host(host("b", 1000 * MBIT, 2 * MBIT)).unwrap();
    let conn = net.connect(&mut q, a, b).unwrap();
    net.write(&mut q, conn, Side::Initiator, 1000);
    net.track_waits(SimTime::ZERO, conn);
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, ms(50), &mut log);
    assert_eq!(net.read(&mut q, conn, Side::Acceptor, u64::MAX), 1000);
    let ms_bytes = |x: u128| x * 1_000_000 * 1000;
    let want = FlowWaits { kernel_byte_ns: ms_bytes(20), link_byte_ns: ms_bytes(15), unread_byte_ns: ms_bytes(15) };
    assert_eq!(net.wait_areas(conn, Side::Initiator, ms(60)), Some(want));
    assert_eq!(net.wait_areas(conn, Side::Acceptor, ms(60)), Some(FlowWaits::default()));

    // Tracking that starts with bytes delivered and unread counts them from then on.
    let conn = net.connect(&mut q, a, b).unwrap();
    net.write(&mut q, conn, Side::Initiator, 1000);
    run_logged(&mut net, &mut q, ms(100), &mut log);
    assert_eq!(net.readable_bytes(conn, Side::Acceptor), 1000);
    net.track_waits(ms(100), conn);
    run_logged(&mut net, &mut q, ms(110), &mut log);
    net.read(&mut q, conn, Side::Acceptor, u64::MAX);
    let want = FlowWaits { kernel_byte_ns: 0, link_byte_ns: 0, unread_byte_ns: ms_bytes(10) };
    assert_eq!(net.wait_areas(conn, Side::Initiator, ms(120)), Some(want));
}

#[test]
fn a_closed_slot_is_free_one_nanosecond_after_the_longer_latency() {
    // A window update from b to a takes 30 ms, one the other way 10 ms: the slot of a
    // connection closed at t is free at t + 30 ms + 1 ns, not before.
    let mut d = CloseDriver::with_latency(TransportConfig::default(), asymmetric());
    let a = d.net.add_host(HostSpec { location: 0, ..host("a", 100 * MBIT, 100 * MBIT) }).unwrap();
    let b = d.net.add_host(HostSpec { location: 1, ..host("b", 100 * MBIT, 100 * MBIT) }).unwrap();
    let first = d.start(a, b, 10_000);
    d.run_until(ms(1000));
    assert_eq!(d.xfers[first].read, 10_000);
    d.close(first);
    let t = d.q.now();
    d.run_until(t + SimDuration::from_millis(30));
    let early = d.start(a, b, 1000);
    assert_ne!(d.xfers[early].conn, d.xfers[first].conn, "reused at exactly the longer latency");
    d.run_until(t + SimDuration::from_millis(30) + SimDuration::from_nanos(1));
    let late = d.start(a, b, 1000);
    assert_eq!(d.xfers[late].conn, d.xfers[first].conn);
    d.run_until(SimTime::MAX);
    assert_eq!(d.violation, None);
    assert_eq!((d.xfers[early].read, d.xfers[late].read), (1000, 1000));
}

#[test]
fn closing_drops_what_was_not_yet_sent() {
    let mut d = CloseDriver::new(TransportConfig::default(), SimDuration::from_millis(10));
    let a = d.net.add_host(host("a", MBIT, 100 * MBIT)).unwrap();
    let b = d.net.add_host(host("b", 100 * MBIT, 100 * MBIT)).unwrap();
    let first = d.start(a, b, 1_000_000);
    d.run_until(ms(200));
    let conn = d.xfers[first].conn;
    d.close(first);
    let [written, sent, ..] = d.net.flow_counters(conn, Side::Initiator);
    assert!(sent > 0 && sent < 1_000_000, "mid-transfer: {sent} B sent");
    assert_eq!(written, sent, "unsent bytes are dropped");
    d.run_until(SimTime::MAX);
    assert_eq!(d.net.link_bytes(a, true), sent, "nothing leaves after the close");
    assert_eq!(d.violation, None);
}

#[test]
fn a_flow_woken_while_waiting_for_the_uplink_gets_no_extra_turn() {
    // Two bulk flows share a's 1 Mbit/s uplink, and by 1 s both wait in its ring (a batch
    // takes 131 ms, their windows are open). One application then writes a byte at a
    // time, ten times: its flow still gets one turn per round.
    let mut net = Network::new(TransportConfig::default(), LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(host("a", MBIT, 1000 * MBIT)).unwrap();
    let conns: Vec<_> = (0..2)
        .map(|i| {
            let d = net.add_host(host(&format!("d{i}"), 1000 * MBIT, 1000 * MBIT)).unwrap();
            let c = net.connect(&mut q, a, d).unwrap();
            net.write(&mut q, c, Side::Initiator, 2_000_000);
            c
        })
        .collect();
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, ms(1000), &mut log);
    let sent = |net: &Network, c| net.flow_counters(c, Side::Initiator)[1];
    let before: Vec<u64> = conns.iter().map(|&c| sent(&net, c)).collect();
    for _ in 0..10 {
        net.write(&mut q, conns[1], Side::Initiator, 1);
    }
    run_logged(&mut net, &mut q, ms(5000), &mut log);
    let got: Vec<u64> = conns.iter().zip(&before).map(|(&c, b)| sent(&net, c) - b).collect();
    eprintln!("bytes sent from 1 s to 5 s: {got:?}");
    let batch = net.config().max_batch_bytes as u64;
    assert!(got[0] > 10 * batch && got[0].abs_diff(got[1]) <= batch, "bytes sent from 1 s to 5 s: {got:?}");
}

/// Four 8,192 B batches of flow A and `b_batches` 16,384 B batches of flow B reach a
/// 1 Mbit/s downlink while A's first is on it (from 30.07 to 95.6 ms; the others arrive
/// by 31.6 ms, B's first). Returns the sizes of the batches in the order the downlink
/// carried them, and the number of queue marks.
fn drr_scenario(b_batches: u64, queue_limit_bytes: u64) -> (Vec<u32>, u64) {
    let cfg = TransportConfig { initial_cwnd_segments: 100, queue_limit_bytes, record_link_log: true, ..TransportConfig::default() };
    let mut net = Network::new(cfg, LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let mut q = EventQueue::new();
    let sink = net.add_host(host("sink", 1000 * MBIT, MBIT)).unwrap();
    let a = net.add_host(host("a", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let b = net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let ca = net.connect(&mut q, a, sink).unwrap();
    let cb = net.connect(&mut q, b, sink).unwrap();
    net.write(&mut q, ca, Side::Initiator, 8192);
    net.write(&mut q, cb, Side::Initiator, b_batches * 16_384);
    let mut log = Vec::new();
    // A's uplink is idle again 66 us after each send: each write leaves as one batch.
    for t_us in [20_500, 21_000, 21_500] {
        run_logged(&mut net, &mut q, SimTime::ZERO + SimDuration::from_micros(t_us), &mut log);
        assert_eq!(net.write(&mut q, ca, Side::Initiator, 8192), 8192);
    }
    run_logged(&mut net, &mut q, SimTime::MAX, &mut log);
    let order = net.link_log().iter().filter(|r| r.host == sink && !r.up).map(|r| r.bytes).collect();
    (order, net.counters().get_by_name("net.congestion_marks_queue").unwrap())
}

#[test]
fn the_downlink_serves_flows_by_deficit_round_robin() {
    // A quantum of one maximum batch (16,384 B): A's first batch is a turn of its own
    // (A's queue emptied, its credit is dropped), then B one batch, A two, B, A.
    let (order, marks) = drr_scenario(2, TransportConfig::default().queue_limit_bytes);
    assert_eq!(order, [8192, 16_384, 8192, 8192, 16_384, 8192]);
    assert_eq!(marks, 0);
}

#[test]
fn a_full_downlink_queue_marks_the_flows_holding_their_share() {
    // Queue limit 40,000 B. A batch is marked if the bytes queued (the batch on the link
    // included) and it exceed the limit and its flow's queued bytes and it reach the
    // queue over the active flows. With two B batches:
    // B2: 24,576 + 16,384 > limit; B 32,768 >= 24,576 / 2: marked.
    // A2: A 16,384 < 40,960 / 2. A3: A 24,576 >= 49,152 / 2: marked.
    // A4: A 32,768 >= 57,344 / 2: marked.
    assert_eq!(drr_scenario(2, 40_000).1, 3);
    // With three B batches, B2 and B3 are marked, and A's batches are not:
    // A3: A 24,576 < 65,536 / 2; A4: A 32,768 < 73,728 / 2. (A1, on the link when A2
    // arrives, keeps A an active flow once, not twice.)
    assert_eq!(drr_scenario(3, 40_000).1, 2);
}

#[test]
fn jain_index_of_equal_and_of_one_taking_all() {
    assert_eq!(jain_index(&[3.0, 3.0, 3.0]), 1.0);
    assert_eq!(jain_index(&[4.0, 0.0]), 0.5);
    assert_eq!(jain_index(&[2.0, 0.0, 0.0, 0.0]), 0.25);
    assert_eq!(jain_index(&[0.0, 0.0]), 1.0);
}

#[test]
fn a_batch_smaller_than_a_segment_is_one_packet_for_loss() {
    // 200 transfers of 1,000 B, each one batch, over a path losing half its packets.
    let lat =
        latency::LatencyMatrix::new(vec![vec![SimDuration::from_millis(5); 2]; 2], Some(vec![vec![0.0, 0.5], vec![0.0, 0.0]])).unwrap();
    let mut h = Harness::new(TransportConfig::default(), LatencyModel::Matrix(lat), 3);
    let a = h.net.add_host(HostSpec { location: 0, ..host("a", 100 * MBIT, 100 * MBIT) }).unwrap();
    let b = h.net.add_host(HostSpec { location: 1, ..host("b", 100 * MBIT, 100 * MBIT) }).unwrap();
    for _ in 0..200 {
        h.transfer(a, b, 1000).unwrap();
    }
    h.run();
    let get = |name| h.net.counters().get_by_name(name).unwrap();
    assert_eq!(get("net.batches"), 200);
    let marks = get("net.congestion_marks_loss");
    assert!((70..=130).contains(&marks), "{marks} of 200 one-packet batches marked at 50 % loss");
}

#[test]
fn a_closed_slot_is_not_reused_while_its_bytes_are_on_the_wire() {
    // One 10,000 B batch on a 1 Mbit/s uplink takes 80 ms: closed at 50 ms, it is still
    // on the wire at 70 ms (past the latency wait), one way or the other.
    for reverse in [false, true] {
        let mut d = CloseDriver::new(TransportConfig::default(), SimDuration::from_millis(10));
        let a = d.net.add_host(host("a", MBIT, 100 * MBIT)).unwrap();
        let b = d.net.add_host(host("b", MBIT, 100 * MBIT)).unwrap();
        let first = d.start(a, b, if reverse { 0 } else { 10_000 });
        if reverse {
            let conn = d.xfers[first].conn;
            assert_eq!(d.net.write(&mut d.q, conn, Side::Acceptor, 10_000), 10_000);
        }
        d.run_until(ms(50));
        d.close(first);
        d.run_until(ms(70));
        let next = d.start(a, b, 1000);
        assert_ne!(d.xfers[next].conn, d.xfers[first].conn, "reused with a batch on the wire (reverse: {reverse})");
        d.run_until(SimTime::MAX);
        assert_eq!(d.violation, None);
        assert_eq!(d.xfers[next].read, 1000);
    }
}

#[test]
fn closing_withdraws_the_notices_not_yet_drained() {
    // As in the blocked-writer case: the second acknowledgement, due at 48.032 ms, makes
    // the writer writable; the application looks at the socket then, and closes.
    let (mut net, mut q, conn) = blocked_writer();
    let due = ms(48) + SimDuration::from_micros(32);
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, SimTime::from_nanos(due.as_nanos() - 1), &mut log);
    q.advance_to(due).unwrap(); // up to the acknowledgement's event, not past it
    assert!(!net.has_notices());
    net.sync_socket(due, conn, Side::Initiator);
    assert!(net.has_notices(), "the acknowledgement applied by the query wakes the writer");
    net.close(due, conn);
    assert!(!net.has_notices());
}

#[test]
fn bytes_arriving_after_a_close_wait_unread_no_time() {
    // 10,000 B sent at 20 ms on a 1 Mbit/s uplink, closed at 50 ms, delivered at 110 ms
    // (80 us after arriving) and discarded: 20 ms in the kernel, 90.08 ms on the link,
    // none unread.
    let mut d = CloseDriver::new(TransportConfig::default(), SimDuration::from_millis(10));
    let a = d.net.add_host(host("a", MBIT, 100 * MBIT)).unwrap();
    let b = d.net.add_host(host("b", 100 * MBIT, 1000 * MBIT)).unwrap();
    let first = d.start(a, b, 10_000);
    let conn = d.xfers[first].conn;
    d.net.track_waits(SimTime::ZERO, conn);
    d.run_until(ms(50));
    d.close(first);
    d.run_until(ms(300));
    let ms_bytes = |x: u128| x * 1_000_000 * 10_000;
    let want = FlowWaits { kernel_byte_ns: ms_bytes(20), link_byte_ns: ms_bytes(90) + 10_000 * 80_000, unread_byte_ns: 0 };
    assert_eq!(d.net.wait_areas(conn, Side::Initiator, ms(300)), Some(want));
}

#[test]
fn a_closed_connection_s_bytes_stop_waiting() {
    let ms_bytes = |x: u128, n: u128| x * 1_000_000 * n;
    // 20,000 B written at 0 on a 1 Mbit/s uplink: 14,480 B (the initial window) leave at
    // 20 ms and are delivered at 145.95584 ms (115.84 ms on the uplink, 10 ms across,
    // 115.84 us on b's downlink); the other 5,520 B wait for the window until the close at
    // 50 ms drops them.
    let mut net = Network::new(TransportConfig::default(), LatencyModel::constant(SimDuration::from_millis(10)), 1);
    let mut q = EventQueue::new();
    let a = net.add_host(host("a", MBIT, 1000 * MBIT)).unwrap();
    let b = net.add_host(host("b", 1000 * MBIT, 1000 * MBIT)).unwrap();
    let conn = net.connect(&mut q, a, b).unwrap();
    net.write(&mut q, conn, Side::Initiator, 20_000);
    net.track_waits(SimTime::ZERO, conn);
    let mut log = Vec::new();
    run_logged(&mut net, &mut q, ms(50), &mut log);
    net.close(ms(50), conn);
    let want =
        FlowWaits { kernel_byte_ns: ms_bytes(20, 14_480) + ms_bytes(50, 5520), link_byte_ns: 125_955_840 * 14_480, unread_byte_ns: 0 };
    for t in [1, 2] {
        run_logged(&mut net, &mut q, ms(1000 * t), &mut log);
        assert_eq!(net.wait_areas(conn, Side::Initiator, ms(1000 * t)), Some(want), "at {t} s");
    }

    // 1,000 B delivered at 35 ms and never read: unread from 35 ms to the close at 50 ms.
    let b2 = net.add_host(host("b2", 1000 * MBIT, 2 * MBIT)).unwrap();
    let a2 = net.add_host(host("a2", 8 * MBIT, 1000 * MBIT)).unwrap();
    let conn = net.connect(&mut q, a2, b2).unwrap();
    let t0 = q.now();
    net.write(&mut q, conn, Side::Initiator, 1000);
    net.track_waits(t0, conn);
    run_logged(&mut net, &mut q, t0 + SimDuration::from_millis(50), &mut log);
    net.close(q.now(), conn);
    let want = FlowWaits { kernel_byte_ns: ms_bytes(20, 1000), link_byte_ns: ms_bytes(15, 1000), unread_byte_ns: ms_bytes(15, 1000) };
    run_logged(&mut net, &mut q, t0 + SimDuration::from_secs(1), &mut log);
    assert_eq!(net.wait_areas(conn, Side::Initiator, t0 + SimDuration::from_secs(1)), Some(want));
}
