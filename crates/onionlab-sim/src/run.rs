//! The run loop: workloads, the Tor model and metric sampling on one event queue.
//!
//! **Owns:** client start-up staggering, the clients' fetch timers, server choice (uniform
//! per download, as in the papers), the per-relay metrics timer, warm-up exclusion and
//! progress reports. **Must not touch:** model internals.
//!
//! Clients start at uniformly random times within the warm-up (within the first 10 s, or
//! the whole run if shorter, when there is no warm-up), so they do not move in lockstep.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use onionlab_config::model::{ExperimentConfig, Workload};
use onionlab_core::{EventClass, RngStreams, SimDuration, SimTime};
use onionlab_tor::cell::CELL_WIRE_BYTES;
use onionlab_tor::{NodeId, StreamRecord, TorEvent, TorNetwork, TorSim, UNFINISHED};
use onionlab_workload::{ClientBehaviour, Next};
use rand::Rng;

use crate::build::{build, Built};
use crate::results::{ChannelRow, CircuitRow, ClassTotals, ConnectionRow, DownloadRow, Name, RelayRow, RunOutput, RunSummary};

/// Why a run could not be built or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Build(String),
    #[error("client {client}: {source}")]
    Tor { client: String, source: onionlab_tor::TorError },
}

/// Application timers run after the model's own events at the same instant.
const APP_CLASS: EventClass = EventClass(30);
const METRICS_TOKEN: u64 = u64::MAX;
const PROGRESS_TOKEN: u64 = u64::MAX - 1;
const CONN_METRICS_TOKEN: u64 = u64::MAX - 2;
const CHAN_METRICS_TOKEN: u64 = u64::MAX - 3;
const CIRC_METRICS_TOKEN: u64 = u64::MAX - 4;

/// Progress callback: (simulated seconds done, simulated seconds total, events so far).
pub type Progress<'a> = &'a mut dyn FnMut(f64, f64, u64);

/// When the interval that ends at `now` started, in seconds: subtracted in integer time, so
/// that a 100 ms interval's row starts at 0.2 s, not at 0.19999999999999998 s (a filter such as
/// `interval_start >= warmup` would drop it).
fn interval_start(now: SimTime, interval: SimDuration) -> f64 {
    SimDuration::from_nanos(now.as_nanos().saturating_sub(interval.as_nanos())).as_secs_f64()
}

/// One behaviour per client, in order; clients of a group share their workload. Each
/// client's random stream is named by its node's name in `tor`.
pub fn behaviours(cfg: &ExperimentConfig, clients: &[(NodeId, usize)], tor: &TorNetwork, streams: &RngStreams) -> Vec<ClientBehaviour> {
    let shared: BTreeMap<&str, Arc<Workload>> = cfg.workloads.iter().map(|(k, w)| (k.as_str(), Arc::new(w.clone()))).collect();
    clients
        .iter()
        .map(|&(node, g)| {
            ClientBehaviour::new(Arc::clone(&shared[cfg.clients[g].workload.as_str()]), streams.parked("workload", tor.node_name(node)))
        })
        .collect()
}

/// Runs the experiment `cfg` with `seed`.
pub fn run(cfg: &ExperimentConfig, seed: u64, progress: Option<Progress<'_>>) -> Result<RunOutput, SimError> {
    run_inspected(cfg, seed, progress, None)
}

/// Inspection callback: sees the network after every event (for invariant checks in tests).
pub type Inspect<'a> = &'a mut dyn FnMut(&TorNetwork);

/// [`run`], calling `inspect` with the network after each event the run handles.
pub fn run_inspected(
    cfg: &ExperimentConfig,
    seed: u64,
    mut progress: Option<Progress<'_>>,
    mut inspect: Option<Inspect<'_>>,
) -> Result<RunOutput, SimError> {
    let wall = Instant::now();
    let Built { tor, clients, servers, hooks, predictor } = build(cfg, seed)?;
    let mut sim = TorSim::new(tor);
    for (node, hook) in hooks {
        sim.tor.set_relay_hook(&mut sim.q, node, hook).map_err(|e| SimError::Build(format!("relay hook: {e}")))?;
    }
    let streams = RngStreams::new(seed);
    let duration = cfg.experiment.duration;
    let end = SimTime::ZERO + duration;
    let warmup = SimTime::ZERO + cfg.experiment.warmup;
    let spread = if cfg.experiment.warmup > SimDuration::ZERO { cfg.experiment.warmup } else { SimDuration::from_secs(10).min(duration) };

    let mut behaviours = behaviours(cfg, &clients, &sim.tor, &streams);
    let mut pending = vec![0u64; clients.len()];
    let schedule = |sim: &mut TorSim, pending: &mut [u64], i: usize, next: Next| {
        let Next::Fetch { after, bytes } = next;
        pending[i] = bytes;
        sim.q.schedule_in(after, APP_CLASS, TorEvent::App { token: i as u64 });
    };
    for (i, b) in behaviours.iter_mut().enumerate() {
        // A group that joins later starts at its `start`, staggered over its own spread.
        let group = &cfg.clients[clients[i].1];
        let spread = group.start_spread.unwrap_or(spread);
        let offset = group.start + SimDuration::from_nanos(b.with_rng(|r| r.random_range(0..spread.as_nanos().max(1))));
        let next = b.first(offset);
        schedule(&mut sim, &mut pending, i, next);
    }
    let interval = cfg.experiment.metrics_interval;
    sim.q.schedule_in(interval, APP_CLASS, TorEvent::App { token: METRICS_TOKEN });
    if let Some(ci) = cfg.experiment.connection_metrics_interval {
        sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CONN_METRICS_TOKEN });
    }
    if let Some(ci) = cfg.experiment.channel_metrics_interval {
        sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CHAN_METRICS_TOKEN });
    }
    if let Some(ci) = cfg.experiment.circuit_metrics_interval {
        sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CIRC_METRICS_TOKEN });
    }
    let progress_step = SimDuration::from_nanos((duration.as_nanos() / 100).max(1));
    if progress.is_some() {
        sim.q.schedule_in(progress_step, APP_CLASS, TorEvent::App { token: PROGRESS_TOKEN });
    }

    let relays: Vec<_> = sim.tor.relays().to_vec();
    let refill_s = cfg.tor.refill_interval.as_secs_f64();
    let mut last_stats: Vec<_> = relays.iter().map(|&r| sim.tor.node_stats(r).clone()).collect();
    let mut last_waits: Vec<_> = relays.iter().map(|&r| sim.tor.node_waits(r, sim.q.now()).unwrap_or_default()).collect();
    let mut downloads = Vec::new();
    let mut relay_rows = Vec::new();
    let mut conn_rows = Vec::new();
    let mut chan_rows = Vec::new();
    let mut circ_rows = Vec::new();
    // Each open circuit's transit ledger at the last sample, by (slot, creation time).
    let mut circ_last: BTreeMap<(u32, SimTime), [onionlab_tor::TransitSnapshot; 2]> = BTreeMap::new();
    // Byte counters at the last sample, per (channel, this end is the initiator).
    let mut chan_last: BTreeMap<(u32, bool), (u64, u64)> = BTreeMap::new();
    // Rows share the network's own allocation of each node's name, and one of each group's.
    let group_names: Vec<Name> = cfg.clients.iter().map(|g| Name::from(g.name.as_str())).collect();
    // Node -> its client group, for the connection rows' class.
    let mut group_of: Vec<Option<usize>> = vec![None; sim.tor.num_nodes()];
    for &(n, g) in &clients {
        group_of[n as usize] = Some(g);
    }
    // Byte counters at the last sample, per channel: a client that reconnects to a guard
    // (its old connection closed when idle) gets a new channel whose counters start at 0.
    let mut conn_last: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
    let mut classes: BTreeMap<String, ClassTotals> = cfg.clients.iter().map(|g| (g.name.clone(), ClassTotals::default())).collect();
    let name_of = |sim: &TorSim, n: NodeId| sim.tor.node_name_shared(n).clone();
    // One download row, counted in its class's totals.
    let record_row = |sim: &TorSim, rec: &StreamRecord, classes: &mut BTreeMap<String, ClassTotals>| {
        let i = rec.tag as usize;
        let (node, group) = clients[i];
        let totals = classes.get_mut(&cfg.clients[group].name).expect("every group has totals");
        totals.downloads += 1;
        match rec.error {
            None => totals.bytes += rec.bytes,
            Some(UNFINISHED) => totals.unfinished += 1,
            Some(_) => totals.errors += 1,
        }
        let ttlb = rec.ttlb.map(|d| d.as_secs_f64());
        DownloadRow {
            seed,
            client: name_of(sim, node),
            class: group_names[group].clone(),
            size: rec.bytes,
            received: rec.received,
            start: rec.start.as_secs_f64(),
            begin: rec.begin.map(|d| d.as_secs_f64()),
            connected: rec.connected.map(|d| d.as_secs_f64()),
            ttfb: rec.ttfb.map(|d| d.as_secs_f64()),
            ttlb,
            goodput: ttlb.filter(|&t| t > 0.0).map(|t| rec.bytes as f64 / t),
            circuit_build_time: rec.circuit_build_time.map(|d| d.as_secs_f64()),
            path: rec.path.iter().map(|&n| sim.tor.node_name(n)).collect::<Vec<_>>().join(","),
            error: rec.error.map(str::to_string),
        }
    };

    while let Some(ev) = sim.q.pop_until(end) {
        match ev.event {
            TorEvent::App { token: METRICS_TOKEN } => {
                let now = sim.q.now();
                let queued = sim.tor.queued_cells_per_node();
                for (k, &r) in relays.iter().enumerate() {
                    let s = sim.tor.node_stats(r).clone();
                    let l = &last_stats[k];
                    let empty = (s.read_bucket_empty_intervals - l.read_bucket_empty_intervals)
                        .max(s.write_bucket_empty_intervals - l.write_bucket_empty_intervals);
                    let conns = sim.tor.client_connections(r);
                    let w = sim.tor.node_waits(r, now).unwrap_or_default();
                    let lw = &last_waits[k];
                    let cell_s = |a: u128, b: u128| (a - b) as f64 * 1e-9;
                    let wire_split = |a: u128, b: u128| cfg.experiment.wire_waits.then(|| cell_s(a, b) / CELL_WIRE_BYTES as f64);
                    relay_rows.push(RelayRow {
                        cells_queued: w.circuit_queue.entered - lw.circuit_queue.entered,
                        queue_wait_cell_s: cell_s(w.circuit_queue.area_ns, lw.circuit_queue.area_ns),
                        outbuf_wait_cell_s: cell_s(w.outbuf.area_ns, lw.outbuf.area_ns),
                        wire_wait_cell_s: cell_s(w.wire.area_ns, lw.wire.area_ns),
                        kernel_wait_cell_s: wire_split(w.wire_bytes.kernel_byte_ns, lw.wire_bytes.kernel_byte_ns),
                        link_wait_cell_s: wire_split(w.wire_bytes.link_byte_ns, lw.wire_bytes.link_byte_ns),
                        unread_wait_cell_s: wire_split(w.wire_bytes.unread_byte_ns, lw.wire_bytes.unread_byte_ns),
                        client_connections: conns.len() as u64,
                        throttled_connections: conns.iter().filter(|c| c.throttle.is_some()).count() as u64,
                        throttle_rate: sim.tor.hook_throttle_threshold(r),
                        seed,
                        relay: name_of(&sim, r),
                        interval_start: interval_start(now, interval),
                        bytes_read: s.bytes_read - l.bytes_read,
                        bytes_written: s.bytes_written - l.bytes_written,
                        queued_cells: queued[r as usize],
                        bucket_empty_s: empty as f64 * refill_s,
                    });
                    last_stats[k] = s;
                    last_waits[k] = w;
                }
                if now + interval <= end {
                    sim.q.schedule_in(interval, APP_CLASS, TorEvent::App { token: METRICS_TOKEN });
                }
            }
            TorEvent::App { token: CONN_METRICS_TOKEN } => {
                let now = sim.q.now();
                let ci = cfg.experiment.connection_metrics_interval.expect("scheduled only when set");
                for &r in &relays {
                    for c in sim.tor.client_connections(r) {
                        let last = conn_last.insert(c.chan, (c.bytes_written, c.bytes_read, c.bucket_empty_intervals)).unwrap_or((0, 0, 0));
                        let (name, class) = group_of[c.client as usize]
                            .map_or_else(Default::default, |g| (name_of(&sim, c.client), group_names[g].clone()));
                        conn_rows.push(ConnectionRow {
                            seed,
                            relay: name_of(&sim, r),
                            client: name,
                            class,
                            interval_start: interval_start(now, ci),
                            bytes_written: c.bytes_written.saturating_sub(last.0),
                            bytes_read: c.bytes_read.saturating_sub(last.1),
                            throttle_rate: c.throttle.map(|(rate, _)| rate),
                            bucket_empty_s: c.bucket_empty_intervals.saturating_sub(last.2) as f64 * refill_s,
                            circuit_throttle_rate: c.circuit_throttle.map(|(rate, _)| rate),
                        });
                    }
                }
                if now + ci <= end {
                    sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CONN_METRICS_TOKEN });
                }
            }
            TorEvent::App { token: CHAN_METRICS_TOKEN } => {
                let now = sim.q.now();
                let ci = cfg.experiment.channel_metrics_interval.expect("scheduled only when set");
                for e in sim.tor.relay_channel_ends() {
                    let last = chan_last.insert((e.chan, e.initiator), (e.bytes_written, e.bytes_read)).unwrap_or((0, 0));
                    chan_rows.push(ChannelRow {
                        seed,
                        relay: name_of(&sim, e.relay),
                        peer: name_of(&sim, e.peer),
                        initiator: e.initiator,
                        interval_start: interval_start(now, ci),
                        bytes_written: e.bytes_written - last.0,
                        bytes_read: e.bytes_read - last.1,
                        circuits: u64::from(e.circuits),
                        active_circuits: u64::from(e.active_circuits),
                        queued_cells: e.queued_cells,
                    });
                }
                if now + ci <= end {
                    sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CHAN_METRICS_TOKEN });
                }
            }
            TorEvent::App { token: CIRC_METRICS_TOKEN } => {
                let now = sim.q.now();
                let ci = cfg.experiment.circuit_metrics_interval.expect("scheduled only when set");
                let mut seen = BTreeMap::new();
                for t in sim.tor.circuit_transits(now) {
                    let key = (t.circ, t.created);
                    let [ex, ov] = circ_last.get(&key).copied().unwrap_or_default();
                    seen.insert(key, [t.at_exit, t.in_overlay]);
                    let Some(g) = group_of[t.nodes[0] as usize] else { continue };
                    circ_rows.push(CircuitRow {
                        seed,
                        client: name_of(&sim, t.nodes[0]),
                        class: group_names[g].clone(),
                        circuit: u64::from(t.circ),
                        created: t.created.as_secs_f64(),
                        path: t.nodes[1..].iter().map(|&n| sim.tor.node_name(n)).collect::<Vec<_>>().join(","),
                        interval_start: interval_start(now, ci),
                        cells_packaged: t.at_exit.entered - ex.entered,
                        cells_forwarded: t.in_overlay.entered - ov.entered,
                        cells_delivered: t.in_overlay.left - ov.left,
                        exit_queued_cells: t.at_exit.in_transit(),
                        backlog_cells: t.in_overlay.in_transit(),
                        exit_wait_cell_s: (t.at_exit.area_ns - ex.area_ns) as f64 * 1e-9,
                        transit_cell_s: (t.in_overlay.area_ns - ov.area_ns) as f64 * 1e-9,
                    });
                }
                // Closed circuits drop out, so the map holds only what is open.
                circ_last = seen;
                if now + ci <= end {
                    sim.q.schedule_in(ci, APP_CLASS, TorEvent::App { token: CIRC_METRICS_TOKEN });
                }
            }
            TorEvent::App { token: PROGRESS_TOKEN } => {
                if let Some(p) = progress.as_mut() {
                    p(sim.q.now().as_secs_f64(), duration.as_secs_f64(), sim.q.events_processed());
                }
                sim.q.schedule_in(progress_step, APP_CLASS, TorEvent::App { token: PROGRESS_TOKEN });
            }
            TorEvent::App { token } => {
                let i = token as usize;
                let server = servers[behaviours[i].with_rng(|r| r.random_range(0..servers.len()))];
                sim.tor
                    .start_stream(&mut sim.q, clients[i].0, server, pending[i], token)
                    .map_err(|source| SimError::Tor { client: sim.tor.node_name(clients[i].0).to_string(), source })?;
            }
            other => sim.tor.handle(&mut sim.q, other),
        }
        // Most events finish no stream.
        if sim.tor.has_records() {
            for rec in sim.tor.take_records() {
                let i = rec.tag as usize;
                if rec.start >= warmup {
                    downloads.push(record_row(&sim, &rec, &mut classes));
                }
                let next = behaviours[i].next_after_done(sim.q.now());
                schedule(&mut sim, &mut pending, i, next);
            }
        }
        if let Some(f) = inspect.as_mut() {
            f(&sim.tor);
        }
    }
    if let Some(p) = progress.as_mut() {
        p(duration.as_secs_f64(), duration.as_secs_f64(), sim.q.events_processed());
    }
    // Downloads the end cut short: recorded, so that a slow policy's longest downloads are
    // not dropped from the results.
    for rec in sim.tor.unfinished_records() {
        if rec.start >= warmup {
            downloads.push(record_row(&sim, &rec, &mut classes));
        }
    }

    let end = sim.q.now();
    let incentive = sim.tor.incentive_counters(end);
    let k = &sim.tor.counters;
    let mut counters: BTreeMap<String, u64> = [
        ("cells_emitted", k.cells_emitted),
        ("cells_consumed", k.cells_consumed),
        ("cells_dropped", k.cells_dropped),
        ("cell_hops", k.cell_hops),
        ("circuit_sendmes_sent", k.circuit_sendmes_sent),
        ("stream_sendmes_sent", k.stream_sendmes_sent),
        ("circuits_built", k.circuits_built),
        ("circuits_closed_queue_limit", k.circuits_closed_queue_limit),
        ("circuits_expired", k.circuits_expired),
        ("circuits_closed_idle", k.circuits_closed_idle),
        ("predicted_launches_failed", k.predicted_launches_failed),
        ("channels_closed_idle", k.channels_closed_idle),
        ("streams_completed", k.streams_completed),
        ("streams_failed", k.streams_failed),
        ("requests_held_for_refill", k.requests_held_for_refill),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    for (n, v) in sim.tor.net.counters().snapshot() {
        counters.insert(n.to_string(), v);
    }
    counters.extend(incentive);
    if let Some(ex) = predictor {
        let ex = ex.borrow();
        counters.insert("predictor_solves".into(), ex.solves);
        counters.insert("predictor_failed_solves".into(), ex.failures);
        counters.insert("predictor_circuit_solves".into(), ex.circuit_solves);
    }
    // HPD's cells and summed queueing delays per service class, over every relay.
    if let Some(d) = sim.tor.class_delays_total() {
        for c in onionlab_tor::ServiceClass::ALL {
            let name = c.name().replace('-', "_");
            counters.insert(format!("hpd_cells_{name}"), d.cells[c.index()]);
            counters.insert(format!("hpd_delay_us_{name}"), (d.delay_ns[c.index()] / 1000) as u64);
        }
    }
    Ok(RunOutput {
        downloads,
        relays: relay_rows,
        connections: conn_rows,
        channels: chan_rows,
        circuits: circ_rows,
        summary: RunSummary {
            experiment: cfg.experiment.name.clone(),
            seed,
            sim_seconds: duration.as_secs_f64(),
            warmup_seconds: cfg.experiment.warmup.as_secs_f64(),
            events: sim.q.events_processed(),
            wall_seconds: wall.elapsed().as_secs_f64(),
            counters,
            classes,
        },
    })
}
