//! A whole experiment from its config: `examples/throttling-medium.toml` (50 relays,
//! 1,000 clients, 200 servers) for its configured 10 simulated minutes. Prints wall time,
//! events per second, cell-hops per second and peak memory. Set BENCH_CONFIG to run
//! another config. Under `cargo test` (no `--bench` argument) it runs 90 simulated seconds.

use std::path::PathBuf;

/// The allocator the Python extension runs with (`onionlab_core::alloc`): large arrays on
/// transparent huge pages.
#[global_allocator]
static ALLOC: onionlab_core::HugePageAlloc = onionlab_core::HugePageAlloc;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .unwrap_or(0.0)
        / 1024.0
}

fn main() {
    let path = std::env::var("BENCH_CONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/throttling-medium.toml"));
    let mut cfg = match onionlab_config::load_file(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    // `cargo test --all-targets` runs benches once without `--bench`: keep that a short smoke run.
    if !std::env::args().any(|a| a == "--bench") {
        cfg.experiment.duration = onionlab_core::SimDuration::from_secs(90);
        cfg.experiment.warmup = onionlab_core::SimDuration::from_secs(30);
    }
    let out = onionlab_sim::run(&cfg, cfg.experiment.seeds[0], None).expect("the example runs");
    let s = &out.summary;
    let hops = s.counters.get("cell_hops").copied().unwrap_or(0);
    println!("experiment benchmark: {} ({})", s.experiment, path.display());
    println!("  simulated time        {:.0} s", s.sim_seconds);
    println!("  wall time             {:.2} s", s.wall_seconds);
    println!("  events                {} ({:.2} M/s)", s.events, s.events as f64 / s.wall_seconds / 1e6);
    println!("  cell-hops             {} ({:.2} M/s)", hops, hops as f64 / s.wall_seconds / 1e6);
    println!("  downloads reported    {}", out.downloads.len());
    for (class, t) in &s.classes {
        println!("  {class:<8} downloads {:>6}, errors {:>4}, {:.2} GiB", t.downloads, t.errors, t.bytes as f64 / (1u64 << 30) as f64);
    }
    println!("  peak memory (VmHWM)   {:.1} MiB", peak_rss_mib());
}
