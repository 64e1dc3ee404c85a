//! Whole runs from config files: results exist, are plausible and deterministic.

use std::path::PathBuf;

use onionlab_sim::run;

fn example(name: &str) -> onionlab_config::model::ExperimentConfig {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name);
    onionlab_config::load_file(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn tiny_runs_and_web_downloads_take_about_their_transfer_time() {
    let cfg = example("tiny.toml");
    let out = run(&cfg, 1, None).unwrap();
    let web: Vec<_> = out.downloads.iter().filter(|d| d.class == "web").collect();
    let bulk: Vec<_> = out.downloads.iter().filter(|d| d.class == "bulk").collect();
    assert!(web.len() > 50, "{} web downloads", web.len());
    assert!(!bulk.is_empty());
    assert!(web.iter().all(|d| d.error.is_none() && d.start >= 10.0 && d.size == 320 * 1024));
    let ttlb = median(web.iter().map(|d| d.ttlb.unwrap()).collect());
    let ttfb = median(web.iter().map(|d| d.ttfb.unwrap()).collect());
    // 320 KiB through relays of 0.5-2 MiB/s shared by a few clients: a few hundred ms of
    // transfer plus a handful of 40 ms round trips (circuit reuse makes most builds free).
    eprintln!("tiny: web median ttfb {ttfb:.3} s, ttlb {ttlb:.3} s; {} web, {} bulk", web.len(), bulk.len());
    assert!(ttfb > 0.1 && ttfb < 2.0, "median ttfb {ttfb}");
    assert!(ttlb > ttfb && ttlb < 6.0, "median ttlb {ttlb}");
    // Per-relay table: one row per relay per interval, bytes within each relay's rate.
    assert_eq!(out.relays.len(), 6 * 120);
    for r in &out.relays {
        let rate = cfg.relays.iter().find(|c| c.name == r.relay).unwrap().bandwidth_rate as f64;
        assert!((r.bytes_written as f64) <= 2.0 * rate + 1.0, "{r:?}");
    }
    let totals = &out.summary.classes;
    assert_eq!(totals["web"].downloads as usize, web.len());
    assert!(totals["bulk"].bytes > 0);
}

#[test]
fn same_seed_same_results_different_seed_different_results() {
    let cfg = example("tiny.toml");
    let a = run(&cfg, 7, None).unwrap();
    let b = run(&cfg, 7, None).unwrap();
    assert_eq!(a.downloads, b.downloads);
    assert_eq!(a.relays, b.relays);
    assert_eq!(a.summary.counters, b.summary.counters);
    let c = run(&cfg, 8, None).unwrap();
    assert_ne!(a.downloads, c.downloads);
}

#[test]
fn progress_is_reported_up_to_the_end() {
    let cfg = example("tiny.toml");
    let mut calls = vec![];
    let mut cb = |done: f64, total: f64, _events: u64| calls.push((done, total));
    run(&cfg, 1, Some(&mut cb)).unwrap();
    assert!(calls.len() >= 100);
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(calls.last().unwrap(), &(120.0, 120.0));
}
