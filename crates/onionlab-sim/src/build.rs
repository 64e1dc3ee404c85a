//! From a validated config to a Tor network.
//!
//! **Owns:** the translation of config sections into model objects: latency model, tor
//! parameters, relays (flags, buckets, PerConnBW; Fast/Stable computed by the directory
//! rules when asked), client-operated relays, client and server hosts and their placement,
//! and the mechanisms' hooks (throttling, Tortoise). **Must not touch:** running; [`crate::run`](mod@crate::run) drives what this builds.

use std::collections::BTreeMap;

use onionlab_config::model::{
    BandwidthWeightsConfig, CongestionControlConfig, ExperimentConfig, LatencyConfig, PathOrderConfig, Placement, PredictorRMax,
    RefillPhaseConfig, SchedulerConfig, ThrottlingConfig, TortoiseConfig,
};
use onionlab_core::SimDuration;
use onionlab_mech::predictor::{PredictorHook, PredictorParams, RMax, SharedExchange};
use onionlab_mech::throttling::*;
use onionlab_mech::tortoise::{Directions, LimitUnit, Tortoise};
use onionlab_mech::{Braids, BraidsParams};
use onionlab_net::latency::LatencyMatrix;
use onionlab_net::{LatencyModel, TransportConfig};
use onionlab_tor::directory::{compute_flags, RelayHistory};
use onionlab_tor::kist::KistParams;
use onionlab_tor::RelayHook;
use onionlab_tor::{
    BandwidthWeights, CongestionControlKind, EndpointSpec, NodeId, RelayFlags, RelaySpec, SchedulerKind, ServiceClass, TorConfig,
    TorNetwork, VegasParams, WeightsMethod,
};

use crate::run::SimError;

/// The network and where its clients and servers are.
pub struct Built {
    pub tor: TorNetwork,
    /// (node, group index) per client, in config order.
    pub clients: Vec<(NodeId, usize)>,
    pub servers: Vec<NodeId>,
    /// Hooks to install on relays once the event queue exists (guard throttling).
    pub hooks: Vec<(NodeId, Box<dyn RelayHook>)>,
    /// PredicTor's exchange of plans, shared by its relays' controllers (for its counters).
    pub predictor: Option<SharedExchange>,
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
        Placement::Cycle(l) => l[i % l.len()],
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
        SchedulerConfig::Hpd { delay, f } => SchedulerKind::Hpd(onionlab_tor::HpdParams { delay, f }),
    }
}

/// The split's denominator named in the config. The parser admits only
/// `onionlab_config::SPLIT_DENOMINATORS`; a config built another way with any other name
/// is an error, never a silent default.
fn denominator(name: &str) -> Result<SplitDenominator, ThrottlingError> {
    match name {
        "all-or-connections" => Ok(SplitDenominator::AllOrConnections),
        "client-connections" => Ok(SplitDenominator::ClientConnections),
        "active-client-connections" => Ok(SplitDenominator::ActiveClientConnections),
        other => Err(ThrottlingError::BadParameter { name: "denominator", problem: format!("unknown reading {other:?}") }),
    }
}

/// Threshold's semantics named in the config ("paper" or "code"), as [`denominator`].
fn threshold_semantics(name: &str) -> Result<ThresholdSemantics, ThrottlingError> {
    match name {
        "paper" => Ok(ThresholdSemantics::Paper),
        "code" => Ok(ThresholdSemantics::Code),
        other => Err(ThrottlingError::BadParameter { name: "semantics", problem: format!("unknown semantics {other:?}") }),
    }
}

/// What threshold's throughput counts, named in the config, as [`denominator`].
fn threshold_throughput(name: &str) -> Result<ThresholdThroughput, ThrottlingError> {
    match name {
        "transferred" => Ok(ThresholdThroughput::Transferred),
        "larger-direction" => Ok(ThresholdThroughput::LargerDirection),
        other => Err(ThrottlingError::BadParameter { name: "throughput", problem: format!("unknown measure {other:?}") }),
    }
}

/// Flagging's parameters from a `kind = "flag"` config.
fn flag_params(t: &ThrottlingConfig) -> Result<Option<FlagParams>, ThrottlingError> {
    Ok(match *t {
        ThrottlingConfig::Flag {
            flag_rate,
            penalty,
            halflife,
            burst,
            freeze_penalty_at_flag,
            denominator: d,
            meta_ewma_tick_quirk,
            ..
        } => Some(FlagParams {
            flag_rate,
            penalty,
            halflife,
            burst,
            freeze_penalty_at_flag,
            denominator: denominator(d)?,
            meta_ewma_tick_quirk,
        }),
        _ => None,
    })
}

/// Threshold's parameters from a `kind = "thresh"` config.
fn threshold_params(t: &ThrottlingConfig) -> Result<Option<ThresholdParams>, ThrottlingError> {
    Ok(match *t {
        ThrottlingConfig::Threshold { fraction, refresh, floor, halflife, burst, semantics, throughput, .. } => Some(ThresholdParams {
            fraction,
            refresh,
            floor,
            halflife,
            burst,
            semantics: threshold_semantics(semantics)?,
            throughput: threshold_throughput(throughput)?,
        }),
        _ => None,
    })
}

/// What lifting a throttle does, named in the config (`unthrottled`), with the burst kept.
fn unthrottled(name: &str, burst: u64) -> Result<Unthrottled, ThrottlingError> {
    match name {
        "paper" => Ok(Unthrottled::Paper),
        "code" => Ok(Unthrottled::Code { burst }),
        other => Err(ThrottlingError::BadParameter { name: "unthrottled", problem: format!("unknown value {other:?}") }),
    }
}

/// The hook for a relay's guard throttling, if any.
fn throttling_hook(t: &ThrottlingConfig) -> Result<Option<Box<dyn RelayHook>>, ThrottlingError> {
    fn hook(policy: impl ThrottlePolicy + 'static, u: Unthrottled) -> Option<Box<dyn RelayHook>> {
        Some(Box::new(ThrottleHook::with_unthrottled(policy, u)))
    }
    // Static and bit-splitting never lift a throttle, so what lifting leaves is moot there.
    Ok(match *t {
        ThrottlingConfig::None => None,
        ThrottlingConfig::Static { rate, burst } => hook(StaticThrottle::new(rate, burst)?, Unthrottled::Paper),
        ThrottlingConfig::Split { burst, denominator: d } => hook(BitSplitting::new(burst, denominator(d)?)?, Unthrottled::Paper),
        ThrottlingConfig::Flag { burst, unthrottled: u, .. } => {
            let u = unthrottled(u, burst)?;
            flag_params(t)?.map(Flagging::new).transpose()?.and_then(|p| hook(p, u))
        }
        ThrottlingConfig::Threshold { burst, unthrottled: u, .. } => {
            let u = unthrottled(u, burst)?;
            threshold_params(t)?.map(Threshold::new).transpose()?.and_then(|p| hook(p, u))
        }
    })
}

pub fn tor_config(cfg: &ExperimentConfig) -> TorConfig {
    let t = &cfg.tor;
    TorConfig {
        refill_interval: t.refill_interval,
        refill_phase: match t.refill_phase {
            RefillPhaseConfig::Aligned => onionlab_tor::RefillPhase::Aligned,
            RefillPhaseConfig::Random => onionlab_tor::RefillPhase::Random,
        },
        link_handshake_rtts: t.link_handshake_rtts,
        max_circuit_dirtiness: t.max_circuit_dirtiness,
        idle_channel_timeout: t.idle_channel_timeout.map(|c| onionlab_tor::ChannelIdleTimeout { client: c.client, relay: c.relay }),
        predicted_circuits: t.predicted_circuits,
        cbt_learning: t
            .cbt_learning
            .map(|c| onionlab_tor::CbtLearning { test_frequency: c.test_frequency, max_clean: c.max_clean as usize }),
        circuit_idle_timeout: t.circuit_idle_timeout,
        circ_max_cell_queue: t.circ_max_cell_queue,
        num_entry_guards: t.num_entry_guards as usize,
        use_entry_guards: t.use_entry_guards,
        path_order: match t.path_order {
            PathOrderConfig::GuardFirst => onionlab_tor::PathOrder::GuardFirst,
            PathOrderConfig::ExitFirst => onionlab_tor::PathOrder::ExitFirst,
        },
        num_primary_guards: t.num_primary_guards as usize,
        distinct_guard_subnets: t.distinct_guard_subnets,
        channel_per_circuit: t.channel_per_circuit,
        wire_waits: cfg.experiment.wire_waits,
        request_bytes: t.request_bytes,
        optimistic_data: t.optimistic_data,
        circ_window: t.circ_window,
        circ_window_increment: t.circ_window_increment,
        congestion_control: match t.congestion_control {
            CongestionControlConfig::Vegas(v) => CongestionControlKind::Vegas(
                VegasParams {
                    sendme_inc: v.sendme_inc,
                    cwnd_init: v.cwnd_init,
                    cwnd_min: v.cwnd_min,
                    cwnd_inc: v.cwnd_inc,
                    cwnd_inc_rate: v.cwnd_inc_rate,
                    cwnd_inc_pct_ss: v.cwnd_inc_pct_ss,
                    alpha: v.alpha,
                    beta: v.beta,
                    gamma: v.gamma,
                    delta: v.delta,
                    ss_cap: v.ss_cap,
                    ss_max: v.ss_max,
                    ..VegasParams::default()
                }
                .into(),
            ),
            CongestionControlConfig::FixedWindow => CongestionControlKind::FixedWindow,
        },
        cell_queue_watermarks: t.cell_queue_watermarks,
        transport: TransportConfig { sndbuf_bytes: t.sndbuf_bytes, rcvbuf_bytes: t.rcvbuf_bytes, ..TransportConfig::default() },
        ..TorConfig::default()
    }
}

pub fn build(cfg: &ExperimentConfig, seed: u64) -> Result<Built, SimError> {
    let (latency, locations) = latency_model(cfg)?;
    // "computed" weights need the relays: uniform until they are all added (below).
    let weights = match &cfg.network.bandwidth_weights {
        None | Some(BandwidthWeightsConfig::Computed | BandwidthWeightsConfig::ComputedV9) => BandwidthWeights::uniform(),
        Some(BandwidthWeightsConfig::Given(w)) => BandwidthWeights::from_pairs(w.iter().map(|(k, v)| (k.as_str(), *v)), 10_000)
            .map_err(|e| SimError::Build(format!("network.bandwidth_weights: {e}")))?,
    };
    let mut tor = TorNetwork::new(tor_config(cfg), latency, weights, seed);
    let clients_total: usize = cfg.clients.iter().map(|g| g.count as usize).sum();
    tor.reserve_nodes(cfg.relays.len() + clients_total + cfg.servers.count as usize);
    let err = |what: String| move |e: onionlab_tor::TorError| SimError::Build(format!("{what}: {e}"));

    // Every relay, the configured ones and the client-operated ones, before any client.
    struct Planned<'a> {
        spec: RelaySpec,
        mtbf: Option<SimDuration>,
        throttling: &'a ThrottlingConfig,
        tortoise: Option<TortoiseConfig>,
        /// (group, index in group) of the client operating it.
        operator: Option<(usize, usize)>,
        path: String,
    }
    let mut planned: Vec<Planned<'_>> = Vec::new();
    for (i, r) in cfg.relays.iter().enumerate() {
        planned.push(Planned {
            spec: RelaySpec {
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
                address: r.address,
            },
            mtbf: r.mtbf,
            throttling: &r.throttling,
            tortoise: r.tortoise,
            operator: None,
            path: format!("relays[{i}]"),
        });
    }
    for (gi, g) in cfg.clients.iter().enumerate() {
        let Some(ops) = g.relay_operators else { continue };
        for i in 0..ops.count as usize {
            // The relay's capacity is its operator's access link (spec 3.7).
            let rate = (g.link_up.min(g.link_down) / 8).max(1);
            let mut flags = RelayFlags::FAST | RelayFlags::STABLE;
            if ops.exit {
                flags |= RelayFlags::EXIT;
            }
            planned.push(Planned {
                spec: RelaySpec {
                    name: format!("{}{}-relay", g.name, i),
                    location: place(&g.placement, i, locations),
                    up_bits_per_sec: g.link_up,
                    down_bits_per_sec: g.link_down,
                    bandwidth_rate: rate,
                    bandwidth_burst: rate,
                    consensus_weight: (rate / 1024).max(1),
                    flags,
                    perconn: None,
                    scheduler: scheduler(&cfg.mechanisms.scheduler),
                    // An operator's relay runs on its own host: its address is unknown.
                    address: None,
                },
                mtbf: ops.mtbf,
                throttling: &cfg.mechanisms.throttling,
                tortoise: cfg.mechanisms.tortoise,
                operator: Some((gi, i)),
                path: format!("clients[{gi}].relay_operators"),
            });
        }
    }
    // Static throttling is tor's PerConnBWRate/PerConnBWBurst, which a connection from a
    // client gets when it opens (connection_or_update_token_buckets_helper); its hook alone
    // would set it at the first tick after, leaving up to a second unthrottled and then a
    // fresh, full burst. (A relay with both is refused by the config.)
    for p in &mut planned {
        if let ThrottlingConfig::Static { rate, burst } = *p.throttling {
            p.spec.perconn = Some((rate, burst));
        }
    }
    if cfg.network.compute_flags {
        let hist: Vec<RelayHistory> =
            planned.iter().map(|p| RelayHistory { bandwidth: p.spec.bandwidth_rate, mtbf: p.mtbf.unwrap_or(SimDuration::ZERO) }).collect();
        for (p, (fast, stable)) in planned.iter_mut().zip(compute_flags(&hist)) {
            let mut f = RelayFlags(p.spec.flags.0 & !(RelayFlags::FAST.0 | RelayFlags::STABLE.0));
            if fast {
                f |= RelayFlags::FAST;
            } else {
                // Tor gives Guard only to Fast relays (0.2.1.28 dirserv.c); the listed
                // Guard flag's other criteria are not recomputed.
                f = RelayFlags(f.0 & !RelayFlags::GUARD.0);
            }
            if stable {
                f |= RelayFlags::STABLE;
            }
            p.spec.flags = f;
        }
    }
    if cfg.mechanisms.predictor.is_some() {
        // PredicTor shapes every circuit itself: round robin with per-circuit budgets.
        for p in &mut planned {
            p.spec.scheduler = SchedulerKind::Shaped;
        }
    }
    let mut relay_nodes = Vec::new();
    for p in &planned {
        relay_nodes.push(tor.add_relay(p.spec.clone()).map_err(err(p.path.clone()))?);
    }
    let method = match cfg.network.bandwidth_weights {
        Some(BandwidthWeightsConfig::Computed) => Some(WeightsMethod::V10),
        Some(BandwidthWeightsConfig::ComputedV9) => Some(WeightsMethod::V9),
        _ => None,
    };
    if let Some(method) = method {
        // With the client-operated relays, which are in the consensus too.
        tor.compute_bandwidth_weights(method).map_err(|e| SimError::Build(format!("network.bandwidth_weights: {e}")))?;
    }

    let mut clients = Vec::with_capacity(clients_total);
    let mut operator_node: BTreeMap<(usize, usize), NodeId> = BTreeMap::new();
    for (gi, g) in cfg.clients.iter().enumerate() {
        for i in 0..g.count as usize {
            let spec = EndpointSpec {
                name: format!("{}{}", g.name, i),
                location: place(&g.placement, i, locations),
                up_bits_per_sec: g.link_up,
                down_bits_per_sec: g.link_down,
            };
            let id = tor.add_client(spec).map_err(err(format!("clients[{gi}]")))?;
            if g.relay_operators.is_some_and(|o| (i as u32) < o.count) {
                operator_node.insert((gi, i), id);
            }
            clients.push((id, gi));
        }
    }

    // Fixed paths: relay names to their nodes (names are unique; the config checked them).
    if cfg.clients.iter().any(|g| g.path.is_some()) {
        let by_name: BTreeMap<&str, NodeId> = planned.iter().zip(&relay_nodes).map(|(p, &n)| (p.spec.name.as_str(), n)).collect();
        for &(id, gi) in &clients {
            if let Some(path) = &cfg.clients[gi].path {
                let node = |j: usize| {
                    by_name
                        .get(path[j].as_str())
                        .copied()
                        .ok_or_else(|| SimError::Build(format!("clients[{gi}].path[{j}]: no relay {:?}", path[j])))
                };
                tor.use_fixed_path(id, [node(0)?, node(1)?, node(2)?]).map_err(err(format!("clients[{gi}].path")))?;
            }
        }
    }
    // Operators whose relays are recognised at every ingress (entry = "exempt"): exempt
    // as their relay would be, so only where that relay ends up Stable and Fast (Tortoise
    // section 4.1; with `compute_flags` an operator's relay may lose either flag).
    let exempt_everywhere: Vec<NodeId> = planned
        .iter()
        .filter(|p| p.spec.flags.contains(RelayFlags::STABLE | RelayFlags::FAST))
        .filter_map(|p| p.operator)
        .filter(|&(gi, _)| cfg.clients[gi].relay_operators.is_some_and(|o| o.entry == "exempt"))
        .map(|k| operator_node[&k])
        .collect();
    let mut hooks: Vec<(NodeId, Box<dyn RelayHook>)> = Vec::new();
    for (p, &node) in planned.iter().zip(&relay_nodes) {
        let operator = p.operator.map(|k| operator_node[&k]);
        let bridge = p.operator.is_some_and(|(gi, _)| cfg.clients[gi].relay_operators.is_some_and(|o| o.entry == "bridge"));
        if let (Some(op), true) = (operator, bridge) {
            tor.use_bridge(op, node).map_err(err(p.path.clone()))?;
        }
        let throttle = throttling_hook(p.throttling).map_err(|e| SimError::Build(format!("{}.throttling.{e}", p.path)))?;
        let tortoise = match p.tortoise {
            None => None,
            Some(t) => {
                let dirs = match t.directions {
                    "read" => Directions::Read,
                    "write" => Directions::Write,
                    _ => Directions::Both,
                };
                let unit = match t.limit_unit {
                    "circuit" => LimitUnit::Circuit,
                    _ => LimitUnit::Connection,
                };
                let mut h = Tortoise::new(t.rate, t.burst, dirs, t.check_interval)
                    .map_err(|e| SimError::Build(format!("{}.tortoise.{e}", p.path)))?
                    .with_limit_unit(unit);
                if let Some(op) = operator {
                    h = h.with_operator(op);
                }
                for &op in &exempt_everywhere {
                    h = h.with_operator(op);
                }
                Some(Box::new(h) as Box<dyn RelayHook>)
            }
        };
        match (throttle, tortoise) {
            (Some(_), Some(_)) => {
                return Err(SimError::Build(format!(
                    "{}: throttling and tortoise both set; both act on the same per-connection buckets, so a relay runs one of them",
                    p.path
                )))
            }
            (Some(h), None) | (None, Some(h)) => hooks.push((node, h)),
            (None, None) => {}
        }
    }
    if let Some(b) = cfg.mechanisms.braids {
        let params = BraidsParams {
            ticket_cells: b.ticket_cells,
            free_tickets: b.free_tickets,
            free_period: b.free_period,
            spending_interval: b.spending_interval,
            tax: b.tax,
            low_latency_limit: b.low_latency_limit,
            low_latency_window: b.low_latency_window,
            free_tickets_need_exchange: b.free_tickets_need_exchange,
        };
        let paying: Vec<(NodeId, ServiceClass)> = clients
            .iter()
            .filter_map(|&(id, gi)| {
                ServiceClass::from_name(cfg.clients[gi].service).filter(|c| *c != ServiceClass::Normal).map(|c| (id, c))
            })
            .collect();
        let operators: Vec<(NodeId, NodeId)> =
            planned.iter().zip(&relay_nodes).filter_map(|(p, &relay)| p.operator.map(|k| (operator_node[&k], relay))).collect();
        let mut scheme = Braids::new(params, &paying, &operators).map_err(|e| SimError::Build(format!("mechanisms.braids.{e}")))?;
        for &(id, gi) in &clients {
            scheme.set_joined(id, onionlab_core::SimTime::ZERO + cfg.clients[gi].start);
        }
        tor.set_incentive_scheme(Box::new(scheme));
    }
    let predictor = match cfg.mechanisms.predictor {
        None => None,
        Some(p) => {
            let mut params = PredictorParams {
                dt: p.dt,
                horizon: p.horizon as usize,
                discount: p.discount,
                s_max: p.s_max,
                capacity_fraction: p.capacity_fraction,
                r_max: RMax::Relay,
                slack_penalty: p.slack_penalty,
                successor_shift: p.successor_shift as usize,
            };
            // Each relay's link, bytes/s (down, up): where slower than its BandwidthRate it
            // sets the relay's capacity (PredictorParams::capacities).
            let links: Vec<(u64, u64)> = planned.iter().map(|p| (p.spec.down_bits_per_sec / 8, p.spec.up_bits_per_sec / 8)).collect();
            // Theorem 1: r^max >= max(C_1, ..., C_n), every PredicTor relay's capacity.
            let largest = planned
                .iter()
                .zip(&links)
                .map(|(p, &(down, up))| {
                    let (cin, cout) = params.capacities(p.spec.bandwidth_rate, Some(down), Some(up));
                    cin.max(cout)
                })
                .fold(0.0, f64::max);
            params.r_max = match p.r_max {
                PredictorRMax::Relay => RMax::Relay,
                PredictorRMax::Network => RMax::Cells(largest),
                PredictorRMax::Cells(x) if x < largest => {
                    return Err(SimError::Build(format!(
                        "mechanisms.predictor.r_max: must be at least the largest relay capacity, {largest:.1} cells/s (the \
                         paper's Theorem 1: r_max >= max(C_1, ..., C_n)), got {x}"
                    )))
                }
                PredictorRMax::Cells(x) => RMax::Cells(x),
            };
            let exchange = SharedExchange::default();
            for (&node, &(down, up)) in relay_nodes.iter().zip(&links) {
                let hook = PredictorHook::new(params, exchange.clone())
                    .map_err(|e| SimError::Build(format!("mechanisms.predictor.{e}")))?
                    .with_link(down, up);
                hooks.push((node, Box::new(hook)));
            }
            Some(exchange)
        }
    };
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
    Ok(Built { tor, clients, servers, hooks, predictor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_throttling_option_reaches_its_policy() {
        let flag = |freeze, quirk, d| ThrottlingConfig::Flag {
            flag_rate: 20 << 10,
            penalty: 0.25,
            halflife: SimDuration::from_secs(90),
            burst: 2 << 20,
            freeze_penalty_at_flag: freeze,
            denominator: d,
            meta_ewma_tick_quirk: quirk,
            unthrottled: "paper",
        };
        let p = flag_params(&flag(true, false, "client-connections")).unwrap().unwrap();
        assert_eq!(
            (p.flag_rate, p.penalty, p.halflife, p.burst, p.freeze_penalty_at_flag, p.meta_ewma_tick_quirk, p.denominator),
            (20 << 10, 0.25, SimDuration::from_secs(90), 2 << 20, true, false, SplitDenominator::ClientConnections)
        );
        let p = flag_params(&flag(false, true, "active-client-connections")).unwrap().unwrap();
        assert_eq!(
            (p.freeze_penalty_at_flag, p.meta_ewma_tick_quirk, p.denominator),
            (false, true, SplitDenominator::ActiveClientConnections)
        );
        assert_eq!(
            flag_params(&flag(false, false, "all-or-connections")).unwrap().unwrap().denominator,
            SplitDenominator::AllOrConnections
        );
        let e = flag_params(&flag(false, false, "client-connection")).unwrap_err().to_string();
        assert_eq!(e, "denominator: unknown reading \"client-connection\"");

        let thresh_measured = |semantics, throughput| ThrottlingConfig::Threshold {
            fraction: 0.1,
            refresh: SimDuration::from_secs(30),
            floor: 20 << 10,
            halflife: SimDuration::from_secs(60),
            burst: 1 << 20,
            semantics,
            throughput,
            unthrottled: "paper",
        };
        let thresh = |semantics| thresh_measured(semantics, "transferred");
        assert_eq!(threshold_params(&thresh("paper")).unwrap().unwrap().throughput, ThresholdThroughput::Transferred);
        let larger = threshold_params(&thresh_measured("paper", "larger-direction")).unwrap().unwrap();
        assert_eq!(larger.throughput, ThresholdThroughput::LargerDirection);
        assert!(threshold_params(&thresh_measured("paper", "sum")).unwrap_err().to_string().starts_with("throughput:"));
        let p = threshold_params(&thresh("code")).unwrap().unwrap();
        assert_eq!(
            (p.fraction, p.refresh, p.floor, p.halflife, p.burst, p.semantics),
            (0.1, SimDuration::from_secs(30), 20 << 10, SimDuration::from_secs(60), 1 << 20, ThresholdSemantics::Code)
        );
        assert_eq!(threshold_params(&thresh("paper")).unwrap().unwrap().semantics, ThresholdSemantics::Paper);
        assert!(threshold_params(&thresh("Paper")).unwrap_err().to_string().starts_with("semantics:"));
        assert!(
            flag_params(&thresh("paper")).unwrap().is_none()
                && threshold_params(&flag(false, false, "client-connections")).unwrap().is_none()
        );
        assert_eq!(unthrottled("paper", 1 << 20).unwrap(), Unthrottled::Paper);
        assert_eq!(unthrottled("code", 1 << 20).unwrap(), Unthrottled::Code { burst: 1 << 20 });
        assert_eq!(unthrottled("Code", 1).unwrap_err().to_string(), "unthrottled: unknown value \"Code\"");
    }

    #[test]
    fn the_config_defaults_for_vegas_are_the_models() {
        let d = onionlab_config::model::VegasConfig::default();
        let p = VegasParams::default();
        let from_config = [
            d.sendme_inc,
            d.cwnd_init,
            d.cwnd_min,
            d.cwnd_inc,
            d.cwnd_inc_rate,
            d.cwnd_inc_pct_ss,
            d.alpha,
            d.beta,
            d.gamma,
            d.delta,
            d.ss_cap,
            d.ss_max,
        ];
        let model = [
            p.sendme_inc,
            p.cwnd_init,
            p.cwnd_min,
            p.cwnd_inc,
            p.cwnd_inc_rate,
            p.cwnd_inc_pct_ss,
            p.alpha,
            p.beta,
            p.gamma,
            p.delta,
            p.ss_cap,
            p.ss_max,
        ];
        assert_eq!(from_config, model);
    }

    #[test]
    fn the_config_defaults_for_tor_0_4_8_are_the_models() {
        // `true` and a table with no entries are the config crate's defaults for tor 0.4.8.
        let text = r#"
            [experiment]
            duration = "1 min"
            [tor]
            predicted_circuits = true
            cbt_learning = true
            idle_channel_timeout = {}
            [network]
            latency = { constant = "20 ms" }
            [[relays]]
            name = "exit"
            bandwidth = "1 MiB/s"
            flags = ["Guard", "Exit", "Fast"]
            [[clients]]
            name = "web"
            count = 1
            workload = "w"
            [servers]
            count = 1
            [workloads.w]
            type = "web"
            size = "320 KiB"
        "#;
        let cfg = onionlab_config::load_str(text, std::path::Path::new(".")).expect("valid config");
        let built = tor_config(&cfg);
        assert_eq!(built.cbt_learning, Some(onionlab_tor::CbtLearning::TOR_0_4_8));
        assert_eq!(built.idle_channel_timeout, Some(onionlab_tor::ChannelIdleTimeout::TOR_0_4_8));
    }

    #[test]
    fn every_scheduler_option_reaches_its_kind() {
        // Half-life and tick differ, so that a swap shows; KIST's factor is not its default.
        let (h, t, ri) = (SimDuration::from_secs(30), SimDuration::from_millis(10), SimDuration::from_millis(2));
        let SchedulerKind::Ewma { halflife, tick } = scheduler(&SchedulerConfig::Ewma { halflife: h, tick: t }) else { panic!() };
        assert_eq!((halflife, tick), (h, t));
        let kist = scheduler(&SchedulerConfig::Kist { run_interval: ri, sock_buf_size_factor: 2.5, halflife: h, tick: t });
        let SchedulerKind::Kist { params, halflife, tick } = kist else { panic!() };
        assert_eq!((params, halflife, tick), (KistParams { run_interval: ri, sock_buf_size_factor: 2.5, lite: false }, h, t));
        let SchedulerKind::Kist { params, .. } = scheduler(&SchedulerConfig::KistLite { run_interval: ri, halflife: h, tick: t }) else {
            panic!()
        };
        assert_eq!(params, KistParams { run_interval: ri, sock_buf_size_factor: 1.0, lite: true });
    }
}
