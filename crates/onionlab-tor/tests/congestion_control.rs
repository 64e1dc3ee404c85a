//! Proposal 324's Vegas congestion control in the network, against tor's fixed windows.

mod common;

use common::*;
use onionlab_core::SimDuration;
use onionlab_tor::*;

fn vegas() -> TorConfig {
    TorConfig { congestion_control: CongestionControlKind::Vegas(VegasParams::default().into()), ..TorConfig::default() }
}

/// One 5 MiB download over `rates`: (transfer seconds after the first byte, the mean
/// count of cells between the exit and the client, sampled every 50 ms from the first
/// byte, the run's counters).
fn download(cfg: TorConfig, one_way_ms: u64, rates: [u64; 3]) -> (f64, f64, TorCounters) {
    let (mut sim, _, c, s) = line(cfg, SimDuration::from_millis(one_way_ms), rates, 1, 1);
    sim.start_stream(c[0], s, 5 * MIB, 0).unwrap();
    let (mut sum, mut samples) = (0u64, 0u64);
    let mut t = 0.0;
    while !sim.tor.has_records() && t < 300.0 {
        t += 0.05;
        sim.run_until(secs(t), |t| t.check_invariants().unwrap());
        let n = sim.tor.cells_in_flight();
        if n > 0 || samples > 0 {
            sum += n;
            samples += 1;
        }
    }
    let rec = sim.tor.take_records().pop().expect("the download finished");
    assert_eq!(rec.error, None);
    (rec.ttlb.unwrap().as_secs_f64() - rec.ttfb.unwrap().as_secs_f64(), sum as f64 / samples as f64, sim.tor.counters.clone())
}

#[test]
fn vegas_outgrows_the_stream_window_on_a_long_fast_path() {
    // 50 ms one way, fast relays: tor's fixed windows allow 500 cells (the stream window)
    // per 300 ms round trip, about 830 KB/s. Vegas has no stream window, and its slow
    // start grows cwnd a SENDME at a time while the RTT stays at its minimum.
    let (fixed, _, kf) = download(TorConfig::default(), 50, [100 * MIB; 3]);
    let (cc, _, kv) = download(vegas(), 50, [100 * MIB; 3]);
    eprintln!("5 MiB over 300 ms RTT: fixed windows {fixed:.2} s, vegas {cc:.2} s");
    assert!(cc < 0.6 * fixed, "vegas {cc} s against fixed {fixed} s");
    // XON/XOFF replaces stream SENDMEs; circuit SENDMEs come every 31 cells, not 100.
    assert!(kf.stream_sendmes_sent > 0);
    assert_eq!(kv.stream_sendmes_sent, 0);
    let cells = (5 * MIB).div_ceil(onionlab_tor::cell::RELAY_PAYLOAD_SIZE);
    assert_eq!(kf.circuit_sendmes_sent, cells / 100);
    assert_eq!(kv.circuit_sendmes_sent, cells / 31);
}

#[test]
fn vegas_keeps_the_bottleneck_queue_short_at_the_same_rate() {
    // A 200 KiB/s middle, 60 ms round trips: a bandwidth-delay product of about 24
    // cells. Both controllers run the download at the middle's rate (within 5 %), but the
    // fixed windows keep the whole stream window (500 cells) in flight, queued in front of
    // the middle, and Vegas about BDP plus its alpha-beta target (124-248 cells).
    let rate = 200 * KIB;
    let (fixed, qf, _) = download(TorConfig::default(), 10, [100 * MIB, rate, 100 * MIB]);
    let (cc, qv, _) = download(vegas(), 10, [100 * MIB, rate, 100 * MIB]);
    eprintln!("5 MiB through 200 KiB/s: fixed {fixed:.2} s ({qf:.0} cells in flight), vegas {cc:.2} s ({qv:.0} cells in flight)");
    assert!((cc - fixed).abs() < 0.05 * fixed, "vegas {cc} s against fixed {fixed} s");
    assert!(qf > 400.0, "fixed windows keep most of a stream window in flight: {qf}");
    assert!(qv < 0.7 * qf && qv > 24.0 + 124.0 * 0.8, "vegas {qv} cells against fixed {qf}");
}

/// A 5 MiB download whose exit-to-middle connection is the bottleneck: the middle's
/// downlink is 2 Mbit/s and socket buffers are 32 KiB, so TCP pushes back into the exit's
/// outbuf and circuit queue. Returns (transfer seconds, the most cells the exit held).
fn exit_backlog(cfg: TorConfig) -> (f64, u64) {
    let mut cfg = cfg;
    cfg.transport.sndbuf_bytes = 32 * KIB;
    cfg.transport.rcvbuf_bytes = 32 * KIB;
    let mut tor = TorNetwork::new(cfg, onionlab_net::LatencyModel::constant(SimDuration::from_millis(10)), BandwidthWeights::uniform(), 1);
    tor.add_relay(relay("guard", 100 * MIB, RelayFlags::GUARD)).unwrap();
    tor.add_relay(RelaySpec { down_bits_per_sec: 2_000_000, ..relay("middle", 100 * MIB, RelayFlags::default()) }).unwrap();
    let exit = tor.add_relay(relay("exit", 100 * MIB, RelayFlags::EXIT)).unwrap();
    let c = tor.add_client(endpoint("c")).unwrap();
    let s = tor.add_server(endpoint("s")).unwrap();
    let mut sim = TorSim::new(tor);
    sim.start_stream(c, s, 5 * MIB, 0).unwrap();
    let (mut peak, mut t) = (0, 0.0);
    while !sim.tor.has_records() && t < 300.0 {
        t += 0.02;
        sim.run_until(secs(t), |t| t.check_invariants().unwrap());
        peak = peak.max(sim.tor.queued_cells_per_node()[exit as usize]);
    }
    let rec = sim.tor.take_records().pop().expect("the download finished");
    assert_eq!(rec.error, None);
    (rec.ttlb.unwrap().as_secs_f64() - rec.ttfb.unwrap().as_secs_f64(), peak)
}

#[test]
fn an_exit_stops_reading_at_cellq_high_and_resumes_at_cellq_low() {
    // Without the watermarks the exit packages up to a stream window (500 cells) into its
    // circuit queue. With tor's (256, 10) it stops reading the stream at 256 queued cells
    // (plus the outbuf's 32 KiB, 64 cells) and resumes once the queue is down to 10: the
    // download takes the same time.
    let (t_off, q_off) = exit_backlog(TorConfig::default());
    let (t_on, q_on) = exit_backlog(TorConfig { cell_queue_watermarks: Some((256, 10)), ..TorConfig::default() });
    eprintln!("exit backlog: without watermarks {q_off} cells ({t_off:.2} s), with (256, 10) {q_on} cells ({t_on:.2} s)");
    assert!(q_off > 400, "{q_off}");
    assert!(q_on <= 256 + 64, "{q_on}");
    assert!((t_on - t_off).abs() < 0.05 * t_off, "{t_on} s against {t_off} s");
    // Vegas with the watermarks: the blocked edge is its congestion signal; the download
    // still runs at the bottleneck's rate and the backlog stays under the watermark.
    let vegas = TorConfig { cell_queue_watermarks: Some((256, 10)), ..vegas() };
    let (t_v, q_v) = exit_backlog(vegas);
    eprintln!("vegas with watermarks: {q_v} cells ({t_v:.2} s)");
    assert!(q_v <= 256 + 64, "{q_v}");
    assert!((t_v - t_off).abs() < 0.1 * t_off, "{t_v} s against {t_off} s");
}
