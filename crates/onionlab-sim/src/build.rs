//! From a validated config to a Tor network.
//!
//! **Owns:** the translation of config sections into model objects: latency model, tor
//! parameters, relays (flags, buckets, PerConnBW), client and server hosts and their
//! placement. **Must not touch:** running; [`crate::run`] drives what this builds.

use onionlab_config::model::{ExperimentConfig, LatencyConfig, Placement, SchedulerConfig};
use onionlab_net::latency::LatencyMatrix;
use onionlab_net::{LatencyModel, TransportConfig};
use onionlab_tor::kist::KistParams;
use onionlab_tor::{BandwidthWeights, EndpointSpec, NodeId, RelayFlags, RelaySpec, SchedulerKind, TorConfig, TorNetwork};

use crate::run::SimError;

/// The network and where its clients and servers are.
pub struct Built {
    pub tor: TorNetwork,
    /// (node, group index) per client, in config order.
    pub clients: Vec<(NodeId, usize)>,
    pub servers: Vec<NodeId>,
}

pub fn latency_model(cfg: &ExperimentConfig) -> Result<(LatencyModel, usize), SimError> {
    Ok(match &cfg.network.latency {
        LatencyConfig::Constant { one_way } => (LatencyModel::constant(*one_way), 1),
        LatencyConfig::Matrix { one_way, .. } => {
            let n = one_way.len();
            let m = LatencyMatrix::new(one_way.clone(), None).map_err(|e| SimError::Build(format!("network.latency: {e}")))?;
            (LatencyModel::Matrix(m), n)
        }
        LatencyConfig::Gml { path, text } => {
            let g = onionlab_net::gml::parse_gml(text).map_err(|e| SimError::Build(format!("network.latency ({path}): {e}")))?;
            let (m, ids) = LatencyModel::from_gml(&g).map_err(|e| SimError::Build(format!("network.latency ({path}): {e}")))?;
            (m, ids.len())
        }
    })
}

fn place(p: &Placement, i: usize, locations: usize) -> u32 {
    match p {
        Placement::At(l) => *l,
        Placement::RoundRobin => (i % locations.max(1)) as u32,
    }
}

fn scheduler(s: &SchedulerConfig) -> SchedulerKind {
    match *s {
        SchedulerConfig::RoundRobin => SchedulerKind::RoundRobin,
        SchedulerConfig::Ewma { halflife, tick } => SchedulerKind::Ewma { halflife, tick },
        SchedulerConfig::EwmaExact { halflife } => SchedulerKind::EwmaExact { halflife },
        SchedulerConfig::Kist { run_interval, sock_buf_size_factor, halflife, tick } => {
            SchedulerKind::Kist { params: KistParams { run_interval, sock_buf_size_factor, lite: false }, halflife, tick }
        }
        SchedulerConfig::KistLite { run_interval, halflife, tick } => {
            SchedulerKind::Kist { params: KistParams { run_interval, sock_buf_size_factor: 1.0, lite: true }, halflife, tick }
        }
    }
}

pub fn tor_config(cfg: &ExperimentConfig) -> TorConfig {
    let t = &cfg.tor;
    TorConfig {
        refill_interval: t.refill_interval,
        link_handshake_rtts: t.link_handshake_rtts,
        max_circuit_dirtiness: t.max_circuit_dirtiness,
        circ_max_cell_queue: t.circ_max_cell_queue,
        num_entry_guards: t.num_entry_guards as usize,
        request_bytes: t.request_bytes,
        circ_window: t.circ_window,
        circ_window_increment: t.circ_window_increment,
        transport: TransportConfig { sndbuf_bytes: t.sndbuf_bytes, rcvbuf_bytes: t.rcvbuf_bytes, ..TransportConfig::default() },
        ..TorConfig::default()
    }
}

pub fn build(cfg: &ExperimentConfig, seed: u64) -> Result<Built, SimError> {
    let (latency, locations) = latency_model(cfg)?;
    let weights = match &cfg.network.bandwidth_weights {
        None => BandwidthWeights::uniform(),
        Some(w) => BandwidthWeights::from_pairs(w.iter().map(|(k, v)| (k.as_str(), *v)), 10_000)
            .map_err(|e| SimError::Build(format!("network.bandwidth_weights: {e}")))?,
    };
    let mut tor = TorNetwork::new(tor_config(cfg), latency, weights, seed);
    let err = |what: String| move |e: onionlab_tor::TorError| SimError::Build(format!("{what}: {e}"));
    for (i, r) in cfg.relays.iter().enumerate() {
        tor.add_relay(RelaySpec {
            name: r.name.clone(),
            location: r.location,
            up_bits_per_sec: r.link_up,
            down_bits_per_sec: r.link_down,
            bandwidth_rate: r.bandwidth_rate,
            bandwidth_burst: r.bandwidth_burst,
            consensus_weight: r.consensus_weight,
            flags: RelayFlags::from_names(r.flags.iter().map(|s| s.as_str())),
            perconn: r.perconn,
            scheduler: scheduler(&r.scheduler),
        })
        .map_err(err(format!("relays[{i}]")))?;
    }
    let mut clients = Vec::new();
    for (gi, g) in cfg.clients.iter().enumerate() {
        for i in 0..g.count as usize {
            let spec = EndpointSpec {
                name: format!("{}{}", g.name, i),
                location: place(&g.placement, i, locations),
                up_bits_per_sec: g.link_up,
                down_bits_per_sec: g.link_down,
            };
            let id = tor.add_client(spec).map_err(err(format!("clients[{gi}]")))?;
            clients.push((id, gi));
        }
    }
    let mut servers = Vec::new();
    let s = &cfg.servers;
    for i in 0..s.count as usize {
        let spec = EndpointSpec {
            name: format!("server{i}"),
            location: place(&s.placement, i, locations),
            up_bits_per_sec: s.link_up,
            down_bits_per_sec: s.link_down,
        };
        servers.push(tor.add_server(spec).map_err(err("servers".into()))?);
    }
    Ok(Built { tor, clients, servers })
}
