//! Tor's fixed SENDME windows, the exit's cell-queue watermarks and outbuf refills,
//! checked after every event against tor's numbers (or.h: STREAMWINDOW_START 500,
//! STREAMWINDOW_INCREMENT 50, CIRCWINDOW_START 1000, CIRCWINDOW_INCREMENT 100,
//! RELAY_PAYLOAD_SIZE 498), written out rather than taken from the crate's constants, so
//! that a wrong constant shows.

mod common;

use common::*;
use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::kist::KistParams;
use onionlab_tor::*;

/// Runs `sim` to `until`, calling `check` with the network and the time after every event
/// (`TorSim::run_until`'s check does not get the time, which transit snapshots need).
fn run_checked(sim: &mut TorSim, until: SimTime, mut check: impl FnMut(&TorNetwork, SimTime)) {
    while let Some(ev) = sim.q.pop_until(until) {
        sim.tor.handle(&mut sim.q, ev.event);
        check(&sim.tor, sim.q.now());
    }
}

/// DATA cells the exit has packaged on `circ`, the network's only circuit.
fn packaged(tor: &TorNetwork, now: SimTime, circ: u32) -> u64 {
    tor.circuit_transits(now).into_iter().find(|t| t.circ == circ).expect("the circuit is open").at_exit.entered
}

/// DATA cells the client has had on each unfinished stream (`received` is whole cells
/// until the stream completes).
fn delivered(tor: &TorNetwork) -> Vec<u64> {
    tor.unfinished_records().iter().map(|r| r.received / 498).collect()
}

#[test]
fn one_stream_fills_its_stream_window_and_gets_a_sendme_per_50_cells() {
    // Fast relays and 50 ms between hosts: the stream window, not a relay, limits the
    // download once the server's TCP has opened up. 4000 cells of exactly 498 bytes: the
    // exit packages 500 cells, then 50 more per stream SENDME, each sent when the client
    // has had another 50 cells; a circuit SENDME per 100. The stream SENDME due with the
    // 4000th cell is not sent: the stream is complete then.
    let cells = 4000;
    let (mut sim, _, c, s) = line(TorConfig::default(), SimDuration::from_millis(50), [100 * MIB; 3], 1, 1);
    let sid = sim.start_stream(c[0], s, cells * 498, 0).unwrap();
    let circ = sim.tor.stream_circuit(sid);
    let mut most = 0;
    run_checked(&mut sim, secs(30.0), |t, now| {
        let k = &t.counters;
        if let [got] = delivered(t)[..] {
            // The exit's stream window: packaged less what SENDMEs gave back.
            most = most.max(packaged(t, now, circ) - 50 * k.stream_sendmes_received);
            assert_eq!(k.stream_sendmes_sent, got / 50, "stream SENDMEs after {got} cells");
            assert_eq!(k.circuit_sendmes_sent, got / 100, "circuit SENDMEs after {got} cells");
            assert!(k.stream_sendmes_received <= k.stream_sendmes_sent);
        }
    });
    assert_eq!(most, 500, "the exit fills its stream window and never passes it");
    let rec = sim.tor.take_records().pop().expect("a download of whole cells completes");
    assert_eq!((rec.error, rec.received), (None, cells * 498));
    let k = &sim.tor.counters;
    assert!(k.stream_sendmes_sent < cells / 50, "{} stream SENDMEs", k.stream_sendmes_sent);
    assert_eq!(k.circuit_sendmes_sent, cells / 100);
    quiet_accounting(k).unwrap();
}

#[test]
fn streams_sharing_a_circuit_fill_its_circuit_window() {
    // Three streams of 3000 cells on one circuit: their stream windows (3 x 500) would let
    // 1500 cells out, the circuit window 1000. Every 100 cells delivered on the circuit,
    // whatever their stream, send one circuit SENDME: 90 in all.
    let cells = 3000;
    let (mut sim, _, c, s) = line(TorConfig::default(), SimDuration::from_millis(50), [100 * MIB; 3], 1, 1);
    let ids: Vec<u32> = (0..3).map(|i| sim.start_stream(c[0], s, cells * 498, i).unwrap()).collect();
    let circ = sim.tor.stream_circuit(ids[0]);
    assert!(ids.iter().all(|&i| sim.tor.stream_circuit(i) == circ), "one circuit for the three");
    let mut most = 0;
    run_checked(&mut sim, secs(60.0), |t, now| {
        if t.circuit_state(circ) == CircuitState::Open {
            most = most.max(packaged(t, now, circ) - 100 * t.counters.circuit_sendmes_received);
        }
        let got = delivered(t);
        if got.len() == 3 {
            let total: u64 = got.iter().sum();
            assert_eq!(t.counters.circuit_sendmes_sent, total / 100, "circuit SENDMEs after {got:?} cells");
        }
    });
    assert_eq!(most, 1000, "the exit fills its circuit window and never passes it");
    let recs = sim.tor.take_records();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.error.is_none() && r.received == r.bytes), "{recs:?}");
    assert_eq!(sim.tor.counters.circuit_sendmes_sent, 3 * cells / 100);
}

/// A line whose middle has a 2 Mbit/s downlink and whose sockets have 32 KiB buffers, so
/// that cells back up at the exit (as in congestion_control.rs's `exit_backlog`), with the
/// exit running `exit_scheduler`. Returns (sim, client, server, exit).
fn backlog(cfg: TorConfig, exit_scheduler: SchedulerKind) -> (TorSim, NodeId, NodeId, NodeId) {
    let mut cfg = cfg;
    cfg.transport.sndbuf_bytes = 32 * KIB;
    cfg.transport.rcvbuf_bytes = 32 * KIB;
    let mut tor = TorNetwork::new(cfg, onionlab_net::LatencyModel::constant(SimDuration::from_millis(10)), BandwidthWeights::uniform(), 1);
    tor.add_relay(relay("guard", 100 * MIB, RelayFlags::GUARD)).unwrap();
    tor.add_relay(RelaySpec { down_bits_per_sec: 2_000_000, ..relay("middle", 100 * MIB, RelayFlags::default()) }).unwrap();
    let exit = tor.add_relay(RelaySpec { scheduler: exit_scheduler, ..relay("exit", 100 * MIB, RelayFlags::EXIT) }).unwrap();
    let c = tor.add_client(endpoint("c")).unwrap();
    let s = tor.add_server(endpoint("s")).unwrap();
    (TorSim::new(tor), c, s, exit)
}

#[test]
fn an_outbuf_is_refilled_below_16_kib_up_to_32_kib() {
    // connection_or_flushed_some: an outbuf under OR_CONN_LOWWATER (16 KiB) takes
    // CEIL_DIV(OR_CONN_HIGHWATER - outbuf, cell) more cells, the model's cell being 543
    // bytes on the wire: at most ceil(32768 / 543) = 61 cells, reached when the exit's
    // socket is full and its queue long.
    let (mut sim, c, s, exit) = backlog(TorConfig::default(), SchedulerKind::RoundRobin);
    sim.start_stream(c, s, 2 * MIB, 0).unwrap();
    let mut most = 0;
    sim.run_until(secs(60.0), |t| most = most.max(t.cells_waiting_per_node()[exit as usize][1]));
    assert_eq!(sim.tor.take_records().pop().expect("done").error, None);
    assert_eq!(most, 61);
}

#[test]
fn an_exit_fills_its_queue_to_cellq_high_then_waits_for_cellq_low() {
    // In `backlog`'s network, with cellq (256, 10), the exit packages until
    // its queue towards the client holds exactly 256 cells, then nothing until the queue is
    // down to 10; KIST at the exit takes cells off one at a time, so the queue passes
    // through every count on the way down. A queue of exactly 256 is within a
    // circ_max_cell_queue of 256: only a 257th cell would close the circuit.
    let (high, low) = (256, 10);
    let cfg = TorConfig { cell_queue_watermarks: Some((high, low)), circ_max_cell_queue: high, ..TorConfig::default() };
    let kist =
        SchedulerKind::Kist { params: KistParams::default(), halflife: SimDuration::from_secs(30), tick: SimDuration::from_secs(10) };
    let (mut sim, c, s, _) = backlog(cfg, kist);
    let sid = sim.start_stream(c, s, 2 * MIB, 0).unwrap();
    let circ = sim.tor.stream_circuit(sid);
    // Per event: DATA cells at the exit, and cells it has forwarded so far.
    let (mut prev, mut prev_out, mut waiting, mut fills) = (0, 0, false, 0);
    run_checked(&mut sim, secs(60.0), |t, now| {
        t.check_invariants().unwrap();
        if t.circuit_state(circ) != CircuitState::Open {
            return;
        }
        let transit = t.circuit_transits(now).into_iter().find(|x| x.circ == circ).unwrap();
        let (queued, out) = (transit.at_exit.in_transit(), transit.in_overlay.entered);
        assert!(queued <= high, "{queued} cells at the exit");
        // One event may take the queue down to cellq_low and let the exit package again:
        // then it forwarded at least the cells above cellq_low.
        if waiting && queued > prev {
            assert!(prev - (out - prev_out) <= low, "the exit packaged at {prev} cells, forwarding {} first", out - prev_out);
            waiting = false;
        }
        if queued == high && prev < high {
            fills += 1;
            waiting = true;
        }
        if queued <= low {
            waiting = false;
        }
        (prev, prev_out) = (queued, out);
    });
    let rec = sim.tor.take_records().pop().expect("done");
    assert_eq!(rec.error, None);
    assert_eq!(sim.tor.counters.circuits_closed_queue_limit, 0);
    eprintln!("exit queue filled to cellq_high {fills} times");
    assert!(fills >= 1, "{fills}");
}
