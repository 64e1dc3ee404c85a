//! Small networks for Tor model tests.

#![allow(dead_code)]

use onionlab_core::{SimDuration, SimTime};
use onionlab_net::LatencyModel;
use onionlab_tor::*;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GBIT: u64 = 1_000_000_000;

pub fn relay(name: &str, rate: u64, flags: RelayFlags) -> RelaySpec {
    RelaySpec {
        name: name.into(),
        location: 0,
        up_bits_per_sec: GBIT,
        down_bits_per_sec: GBIT,
        bandwidth_rate: rate,
        bandwidth_burst: rate,
        consensus_weight: (rate / 1024).max(1),
        flags: flags | RelayFlags::FAST,
        perconn: None,
        scheduler: SchedulerKind::RoundRobin,
        address: None,
    }
}

pub fn endpoint(name: &str) -> EndpointSpec {
    EndpointSpec { name: name.into(), location: 0, up_bits_per_sec: GBIT, down_bits_per_sec: GBIT }
}

/// Three relays whose flags force the path guard -> middle -> exit, one server, and
/// `clients` clients. Returns (sim, relays, clients, server).
pub fn line(
    cfg: TorConfig,
    one_way: SimDuration,
    rates: [u64; 3],
    clients: usize,
    seed: u64,
) -> (TorSim, [NodeId; 3], Vec<NodeId>, NodeId) {
    let mut tor = TorNetwork::new(cfg, LatencyModel::constant(one_way), BandwidthWeights::uniform(), seed);
    let g = tor.add_relay(relay("guard", rates[0], RelayFlags::GUARD)).unwrap();
    let m = tor.add_relay(relay("middle", rates[1], RelayFlags::default())).unwrap();
    let e = tor.add_relay(relay("exit", rates[2], RelayFlags::EXIT)).unwrap();
    let cs = (0..clients).map(|i| tor.add_client(endpoint(&format!("client{i}"))).unwrap()).collect();
    let s = tor.add_server(endpoint("server")).unwrap();
    (TorSim::new(tor), [g, m, e], cs, s)
}

pub fn secs(s: f64) -> SimTime {
    SimTime::ZERO + SimDuration::from_secs_f64(s)
}

/// End-to-end accounting once the network is quiet: every SENDME sent arrived or died
/// with its circuit, every cell emitted was consumed or dropped, and only SENDMEs (a
/// client's last, sent with a stream's last cells) outlive their streams.
pub fn quiet_accounting(k: &TorCounters) -> Result<(), String> {
    let checks = [
        ("circuit SENDMEs sent = received + dropped", k.circuit_sendmes_sent, k.circuit_sendmes_received + k.circuit_sendmes_dropped),
        ("stream SENDMEs sent = received + dropped", k.stream_sendmes_sent, k.stream_sendmes_received + k.stream_sendmes_dropped),
        ("cells emitted = consumed + dropped", k.cells_emitted, k.cells_consumed + k.cells_dropped),
        ("cells dropped = SENDMEs dropped", k.cells_dropped, k.circuit_sendmes_dropped + k.stream_sendmes_dropped),
    ];
    match checks.iter().find(|(_, a, b)| a != b) {
        Some((what, a, b)) => Err(format!("{what}: {a} != {b} ({k:?})")),
        None => Ok(()),
    }
}
