//! Whole-model benchmark: 50 relays and 1,000 clients, each client downloading 5 MiB
//! files back to back over its own circuit for 10 simulated minutes.
//!
//! It runs two networks that differ only in their relays' capacities (BENCH_RELAYS picks
//! one; both by default):
//! - `live`: BandwidthRate at 50 evenly spaced quantiles of the live network's observed
//!   capacities (`LIVE_CAPACITY_KIB`), 100 KiB/s to 63 MiB/s, median 7.1 MiB/s, total
//!   593 MiB/s; each relay's link carries 1.25 times its rate, at least 100 Mbit/s.
//! - `small`: BandwidthRate log-uniform from 256 KiB/s to 10 MiB/s (median 1.4 MiB/s,
//!   total 134 MiB/s: under a quarter of the live spread's), 100 Mbit/s links. This was
//!   the only network until 2026-11-24, so `docs/performance.md`'s history is in its terms.
//!
//! Both: a third guards, a third exits, the rest middles (by index, so each class spans the
//! spread); one-way latencies 5-60 ms from a random matrix of 20 locations. Prints wall
//! time, CPU time, events (and their mix), cell-hops per wall second and peak memory.
//! Override with BENCH_CLIENTS, BENCH_SECS; BENCH_LINK_LOG=1 also prints transport batch
//! sizes by sender; BENCH_CC=vegas runs proposal 324's Vegas instead of tor's fixed SENDME
//! windows. Under `cargo test` (no `--bench` argument) it runs 10 simulated seconds of each
//! network as a smoke test.

use std::time::Instant;

use onionlab_core::{RngStreams, SimDuration, SimTime};
use onionlab_net::latency::LatencyMatrix;
use onionlab_net::LatencyModel;
use onionlab_tor::*;
use rand::Rng;

/// The allocator the Python extension runs with (`onionlab_core::alloc`): large arrays on
/// transparent huge pages.
#[global_allocator]
static ALLOC: onionlab_core::HugePageAlloc = onionlab_core::HugePageAlloc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<f64>().unwrap_or(0.0))
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// CPU time of this process so far (on-CPU nanoseconds from /proc/self/schedstat): on a
/// shared machine wall time varies with other load, CPU time much less.
fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()))
        .map_or(f64::NAN, |ns| ns / 1e9)
}

/// BENCH_SCHEDULER: `rr` (round robin, the papers' vanilla; the default), `ewma` (tor's
/// circuit EWMA with its default half-life and tick) or `kist` (tor's default scheduler on
/// Linux since 0.3.2: KIST every 10 ms over EWMA circuitmuxes).
fn bench_scheduler() -> SchedulerKind {
    let (halflife, tick) = (onionlab_tor::ewma::DEFAULT_HALFLIFE, onionlab_tor::ewma::DEFAULT_TICK);
    match std::env::var("BENCH_SCHEDULER").as_deref() {
        Err(_) | Ok("rr") => SchedulerKind::RoundRobin,
        Ok("ewma") => SchedulerKind::Ewma { halflife, tick },
        Ok("kist") => SchedulerKind::Kist { params: onionlab_tor::kist::KistParams::default(), halflife, tick },
        Ok(other) => panic!("BENCH_SCHEDULER must be rr, ewma or kist (got {other:?})"),
    }
}

/// The live network's relay capacities in KiB/s: the 2021-04-30 capacity snapshot
/// (`data/consensus/tor-consensus-with-observed-weights-2021-04-30.json`, 6,481 relays'
/// observed bandwidths, guards, middles and exits pooled and sorted ascending): for i in
/// 0..50 the capacity at 0-based index floor((i + 0.5) / 50 * 6481), rounded down to KiB/s.
const LIVE_CAPACITY_KIB: [u64; 50] = [
    100, 105, 200, 311, 500, 512, 768, 1000, 1010, 1024, 1305, 1780, 2038, 2282, 2563, 3000, 3210, 3780, 4096, 4558, 4995, 5172, 5805,
    6250, 6908, 7680, 8192, 8964, 9728, 10240, 10779, 11321, 11739, 12032, 12643, 13389, 14607, 16061, 17920, 19560, 21362, 23370, 25600,
    28992, 31579, 34346, 38090, 41452, 50000, 64484,
];

/// Which relay capacities a run uses (module docs).
#[derive(Clone, Copy)]
enum RelaySpread {
    Live,
    Small,
}

impl RelaySpread {
    fn name(self) -> &'static str {
        match self {
            RelaySpread::Live => "live",
            RelaySpread::Small => "small",
        }
    }
}

fn main() {
    match std::env::var("BENCH_RELAYS").as_deref() {
        Ok("live") => run(RelaySpread::Live),
        Ok("small") => run(RelaySpread::Small),
        Ok(other) => panic!("BENCH_RELAYS must be live or small (got {other:?})"),
        // Both, each in a process of its own, so that neither inherits the other's peak
        // memory, heap or caches.
        Err(_) => {
            for spread in [RelaySpread::Live, RelaySpread::Small] {
                let exe = std::env::current_exe().expect("own executable");
                let status = std::process::Command::new(exe)
                    .args(std::env::args().skip(1))
                    .env("BENCH_RELAYS", spread.name())
                    .status()
                    .expect("run the benchmark for one network");
                assert!(status.success(), "the {} network's run failed: {status}", spread.name());
            }
        }
    }
}

fn run(spread: RelaySpread) {
    let clients = env("BENCH_CLIENTS", 1000) as usize;
    // `cargo test --all-targets` runs benches once without `--bench`: keep that a short smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let secs = env("BENCH_SECS", if full { 600 } else { 10 });
    let mut rng = RngStreams::new(7).stream("bench", "tor");
    let locs = 20;
    let lat: Vec<Vec<SimDuration>> =
        (0..locs).map(|_| (0..locs).map(|_| SimDuration::from_millis(rng.random_range(5..60))).collect()).collect();
    let latency = LatencyModel::Matrix(LatencyMatrix::new(lat, None).expect("square"));
    let mut cfg = TorConfig::default();
    match std::env::var("BENCH_CC").as_deref() {
        Err(_) | Ok("fixed") => {}
        Ok("vegas") => cfg.congestion_control = CongestionControlKind::Vegas(VegasParams::default().into()),
        Ok(other) => panic!("BENCH_CC must be fixed or vegas (got {other:?})"),
    }
    // BENCH_LINK_LOG=1: also print the transport's batch sizes by sender kind.
    let link_log = env("BENCH_LINK_LOG", 0) == 1;
    cfg.transport.record_link_log = link_log;
    let scheduler = bench_scheduler();
    let mut tor = TorNetwork::new(cfg, latency, BandwidthWeights::uniform(), 7);
    let mut capacity = Vec::with_capacity(50);
    for i in 0..50u32 {
        // Drawn for both spreads, so that the small spread's relays, and every draw after
        // them, are what they were before the live spread existed.
        let small = (256.0 * 1024.0 * 40f64.powf(rng.random::<f64>())) as u64;
        let (rate, link_bits) = match spread {
            RelaySpread::Small => (small, 100_000_000),
            RelaySpread::Live => {
                let rate = LIVE_CAPACITY_KIB[i as usize] * 1024;
                // 1.25 x the rate in bits: 8 x 1.25 = 10 bits per byte/s.
                (rate, (rate * 10).max(100_000_000))
            }
        };
        capacity.push(rate);
        let flags = match i % 3 {
            0 => RelayFlags::GUARD,
            1 => RelayFlags::EXIT,
            _ => RelayFlags::default(),
        } | RelayFlags::FAST;
        tor.add_relay(RelaySpec {
            name: format!("relay{i}"),
            location: i % locs as u32,
            up_bits_per_sec: link_bits,
            down_bits_per_sec: link_bits,
            bandwidth_rate: rate,
            bandwidth_burst: rate,
            consensus_weight: rate / 1024,
            flags,
            perconn: None,
            scheduler,
            address: None,
        })
        .expect("valid relay");
    }
    let client_ids: Vec<NodeId> = (0..clients)
        .map(|i| {
            tor.add_client(EndpointSpec {
                name: format!("client{i}"),
                location: (i % locs) as u32,
                up_bits_per_sec: 20_000_000,
                down_bits_per_sec: 50_000_000,
            })
            .expect("valid client")
        })
        .collect();
    let servers: Vec<NodeId> = (0..20)
        .map(|i| {
            tor.add_server(EndpointSpec {
                name: format!("server{i}"),
                location: (i % locs) as u32,
                up_bits_per_sec: 1_000_000_000,
                down_bits_per_sec: 1_000_000_000,
            })
            .expect("valid server")
        })
        .collect();
    let mut sim = TorSim::new(tor);
    let t0 = Instant::now();
    let cpu0 = cpu_secs();
    // Event mix: [uplink free, downlink wake, ack due, window update, other net, refill, other tor].
    let mut mix = [0u64; 7];
    let size = 5 * 1024 * 1024;
    for (i, &c) in client_ids.iter().enumerate() {
        sim.start_stream(c, servers[i % servers.len()], size, i as u64).expect("stream");
    }
    let end = SimTime::ZERO + SimDuration::from_secs(secs);
    let mut downloads = 0u64;
    while let Some(ev) = sim.q.pop_until(end) {
        mix[match ev.event {
            TorEvent::Net(onionlab_net::NetEvent::UplinkFree { .. }) => 0,
            TorEvent::Net(onionlab_net::NetEvent::DownlinkWake { .. }) => 1,
            TorEvent::Net(onionlab_net::NetEvent::AckDue { .. }) => 2,
            TorEvent::Net(onionlab_net::NetEvent::WindowUpdate { .. }) => 3,
            TorEvent::Net(_) => 4,
            TorEvent::Refill { .. } => 5,
            _ => 6,
        }] += 1;
        sim.tor.handle(&mut sim.q, ev.event);
        if !sim.tor.has_records() {
            continue;
        }
        for r in sim.tor.take_records() {
            downloads += 1;
            let next = servers[(r.tag as usize + downloads as usize) % servers.len()];
            sim.tor.start_stream(&mut sim.q, r.client, next, size, r.tag).expect("stream");
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0;
    let k = &sim.tor.counters;
    println!("tor model benchmark: 50 relays ({} capacities), {clients} clients, {secs} simulated s", spread.name());
    capacity.sort_unstable();
    let mib = |b: u64| b as f64 / 1024.0 / 1024.0;
    println!(
        "  relay capacity         total {:.0} MiB/s, median {:.1} MiB/s",
        mib(capacity.iter().sum()),
        mib((capacity[24] + capacity[25]) / 2)
    );
    println!("  wall time              {wall:.2} s");
    println!("  cpu time               {cpu:.2} s ({:.2} M cell-hops per cpu s)", sim.tor.counters.cell_hops as f64 / cpu / 1e6);
    println!(
        "  event mix              uplink-free {} downlink-wake {} ack-due {} window-update {} other-net {} refill {} other {}",
        mix[0], mix[1], mix[2], mix[3], mix[4], mix[5], mix[6]
    );
    println!("  events                 {} ({:.2} M/s)", sim.q.events_processed(), sim.q.events_processed() as f64 / wall / 1e6);
    println!("  cell-hops              {} ({:.2} M per wall s)", k.cell_hops, k.cell_hops as f64 / wall / 1e6);
    let batches = sim.tor.net.counters().get_by_name("net.batches").unwrap_or(0);
    let bytes = sim.tor.net.counters().get_by_name("net.bytes_delivered").unwrap_or(0);
    println!("  transport batches      {batches} (mean {:.0} B)", bytes as f64 / batches.max(1) as f64);
    println!("  downloads completed    {downloads}");
    println!("  circuits built         {}", k.circuits_built);
    if link_log {
        let mut by_kind: std::collections::BTreeMap<String, (u64, u64, [u64; 6])> = Default::default();
        let kind_of = |h: onionlab_net::HostId| -> String {
            let name = &sim.tor.net.host_spec(h).name;
            name.trim_end_matches(|c: char| c.is_ascii_digit()).to_string()
        };
        for r in sim.tor.net.link_log().iter().filter(|r| r.up) {
            let e = by_kind.entry(kind_of(r.host)).or_default();
            e.0 += 1;
            e.1 += r.bytes as u64;
            let cells = r.bytes as u64 / 543;
            let bucket = match cells {
                0..=1 => 0,
                2..=3 => 1,
                4..=7 => 2,
                8..=15 => 3,
                16..=29 => 4,
                _ => 5,
            };
            e.2[bucket] += 1;
        }
        for (k, (n, bytes, hist)) in by_kind {
            println!(
                "  batches from {k:<8} {n:>9} mean {:>6.0} B; cells <=1 {} 2-3 {} 4-7 {} 8-15 {} 16-29 {} 30+ {}",
                bytes as f64 / n as f64,
                hist[0],
                hist[1],
                hist[2],
                hist[3],
                hist[4],
                hist[5]
            );
        }
    }
    println!("  peak memory (VmHWM)    {:.1} MiB", peak_rss_mib());
    println!("  sim-time speed-up      {:.2}x real time", secs as f64 / wall);
}
