//! Whole-transport benchmark: many concurrent bulk connections among many hosts.
//!
//! Defaults: 10,000 connections among 1,000 hosts (10 Mbit/s up, 50 Mbit/s down, one-way
//! latency 10-80 ms from a random matrix of 50 locations) for 60 simulated seconds.
//! Prints wall time, events per wall second and simulated bytes per wall second.
//! Override with env vars BENCH_HOSTS, BENCH_CONNS, BENCH_SECS.

use std::time::Instant;

use onionlab_core::{RngStreams, SimDuration, SimTime};
use onionlab_net::latency::LatencyMatrix;
use onionlab_net::*;
use rand::Rng;

/// The allocator the Python extension runs with (`onionlab_core::alloc`): large arrays on
/// transparent huge pages.
#[global_allocator]
static ALLOC: onionlab_core::HugePageAlloc = onionlab_core::HugePageAlloc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let hosts = env("BENCH_HOSTS", 1000) as u32;
    let conns = env("BENCH_CONNS", 10_000);
    let secs = env("BENCH_SECS", 60);
    let mut rng = RngStreams::new(42).stream("bench", "transport");
    let locs = 50;
    let lat: Vec<Vec<SimDuration>> =
        (0..locs).map(|_| (0..locs).map(|_| SimDuration::from_millis(rng.random_range(10..80))).collect()).collect();
    let latency = LatencyModel::Matrix(LatencyMatrix::new(lat, None).expect("valid matrix"));
    let mut run = TransferRunner::new(TransportConfig::default(), latency, 42);
    let ids: Vec<HostId> = (0..hosts)
        .map(|i| {
            run.net
                .add_host(HostSpec {
                    name: format!("h{i}").into(),
                    location: i % locs as u32,
                    up_bits_per_sec: 10_000_000,
                    down_bits_per_sec: 50_000_000,
                })
                .expect("valid host")
        })
        .collect();
    let t0 = Instant::now();
    for _ in 0..conns {
        let a = ids[rng.random_range(0..ids.len())];
        let mut b = ids[rng.random_range(0..ids.len())];
        while b == a {
            b = ids[rng.random_range(0..ids.len())];
        }
        // Effectively endless: a bulk flow for the whole run.
        run.transfer(a, b, u64::MAX / 4).expect("connect");
    }
    run.run_until(SimTime::ZERO + SimDuration::from_secs(secs), |_| {});
    let wall = t0.elapsed().as_secs_f64();
    let events = run.q.events_processed();
    let bytes = run.net.counters().get_by_name("net.bytes_delivered").unwrap_or(0);
    println!("transport benchmark: {hosts} hosts, {conns} connections, {secs} simulated s");
    println!("  wall time            {wall:.2} s");
    println!("  events               {events}");
    println!("  events / wall s      {:.2} M", events as f64 / wall / 1e6);
    println!("  simulated bytes      {:.2} GB", bytes as f64 / 1e9);
    println!("  sim bytes / wall s   {:.2} GB/s", bytes as f64 / wall / 1e9);
    println!("  sim-time speed-up    {:.2}x real time", secs as f64 / wall);
}
