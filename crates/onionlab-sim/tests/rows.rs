//! What the result rows and the summary report, checked on small networks whose numbers
//! can be worked out by hand: the warm-up boundary, client start-up, per-row fields that
//! no plausibility check would catch if they were wrong, and config fields that must
//! reach the network.

mod common;

use onionlab_config::model::ExperimentConfig;
use onionlab_sim::{run, RunOutput};
use onionlab_tor::UNFINISHED;

/// Three relays of 1 MiB/s (guard, middle, exit), 20 ms between any two hosts, one server
/// on a 1 Gbit link, then `rest` (the experiment section, clients and workloads).
fn net(rest: &str) -> ExperimentConfig {
    common::load(&common::three_relays(&format!("[servers]\ncount = 1\nlink = \"1 Gbit\"\n{rest}")))
}

/// Web clients that fetch one page and then think for an hour: in a short run each client's
/// only download is its first, so its start is the client's start-up time.
const ONE_PAGE_EACH: &str = r#"
[workloads.once]
type = "web"
size = "20 KiB"
think = "1 h"
"#;

#[test]
fn without_a_warm_up_clients_start_spread_over_the_first_ten_seconds() {
    // No warm-up: start-up times are uniform in [0, 10 s) (run.rs's module docs), not over
    // the whole 30 s run, and not all at once.
    let cfg = net(&format!(
        "[experiment]\nduration = \"30 s\"\nseeds = [1]\n[[clients]]\nname = \"web\"\nworkload = \"once\"\ncount = 12\n{ONE_PAGE_EACH}"
    ));
    let out = run(&cfg, 1, None).unwrap();
    let starts: Vec<f64> = out.downloads.iter().map(|d| d.start).collect();
    assert_eq!(starts.len(), 12, "one download per client: {:?}", out.downloads);
    assert!(starts.iter().all(|&s| (0.0..10.0).contains(&s)), "{starts:?}");
    // 12 uniform draws over 10 s: the chance that they all fall within 4 s of each other is
    // below 1e-3; for this seed they are well spread.
    let (lo, hi) = starts.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert!(hi - lo > 4.0, "start-ups not staggered: {starts:?}");
}

/// A group of `count` clients of `workload`, all starting exactly at `start` (a spread of
/// one nanosecond leaves no room to stagger them).
fn group_at(name: &str, workload: &str, count: u32, start: &str) -> String {
    format!("[[clients]]\nname = \"{name}\"\nworkload = \"{workload}\"\ncount = {count}\nstart = \"{start}\"\nstart_spread = \"1 ns\"\n")
}

#[test]
fn a_download_starting_exactly_at_the_warm_up_is_measured() {
    // Warm-up 5 s. A web client starts its one page exactly at 5 s (it completes), and a bulk
    // client its 1 GiB download exactly at 5 s (unfinished when the run ends at 10 s: 1 MiB/s
    // moves about 5 MiB). Both are in the measured window, which starts at the warm-up.
    let cfg = net(&format!(
        "[experiment]\nduration = \"10 s\"\nwarmup = \"5 s\"\nseeds = [1]\n{}{}{ONE_PAGE_EACH}[workloads.bulk]\ntype = \"bulk\"\nsize = \"1 GiB\"\n",
        group_at("web", "once", 1, "5 s"),
        group_at("bulk", "bulk", 1, "5 s"),
    ));
    let out = run(&cfg, 1, None).unwrap();
    let web: Vec<_> = out.downloads.iter().filter(|d| &*d.class == "web").collect();
    let bulk: Vec<_> = out.downloads.iter().filter(|d| &*d.class == "bulk").collect();
    assert_eq!(web.len(), 1, "{:?}", out.downloads);
    assert_eq!((web[0].start, web[0].error.as_deref()), (5.0, None), "{:?}", web[0]);
    assert_eq!(bulk.len(), 1, "{:?}", out.downloads);
    assert_eq!((bulk[0].start, bulk[0].error.as_deref()), (5.0, Some(UNFINISHED)), "{:?}", bulk[0]);
    let t = &out.summary.classes;
    assert_eq!((t["web"].downloads, t["web"].bytes), (1, 20 << 10));
    assert_eq!((t["bulk"].downloads, t["bulk"].unfinished, t["bulk"].bytes), (1, 1, 0));
    assert_eq!((out.summary.sim_seconds, out.summary.warmup_seconds), (10.0, 5.0));
}

/// One web client fetching 100 KiB pages (1 s think time) from 1 s on, every table on.
fn one_web_client() -> RunOutput {
    let cfg = net(&format!(
        "[experiment]\nduration = \"6 s\"\nseeds = [1]\nmetrics_interval = \"2 s\"\ncircuit_metrics_interval = \"1 s\"\n\
         channel_metrics_interval = \"2 s\"\nconnection_metrics_interval = \"2 s\"\n{}\
         [workloads.page]\ntype = \"web\"\nsize = \"100 KiB\"\nthink = \"1 s\"\n",
        group_at("web", "page", 1, "1 s")
    ));
    run(&cfg, 1, None).unwrap()
}

#[test]
fn interval_starts_are_the_decimal_times_of_every_table() {
    // 100 ms intervals: the row after 0.2 s starts at 0.2 (the double a warm-up of "200 ms"
    // gives), not at 0.3 - 0.1 = 0.19999999999999998, which `>= 0.2` would drop.
    let cfg = net(&format!(
        "[experiment]\nduration = \"1 s\"\nseeds = [1]\nmetrics_interval = \"100 ms\"\ncircuit_metrics_interval = \"100 ms\"\n\
         channel_metrics_interval = \"100 ms\"\nconnection_metrics_interval = \"100 ms\"\n{}\
         [workloads.page]\ntype = \"web\"\nsize = \"100 KiB\"\nthink = \"1 s\"\n",
        group_at("web", "page", 1, "0 s")
    ));
    let out = run(&cfg, 1, None).unwrap();
    let tenths = |starts: Vec<f64>| starts.iter().all(|&s| s == (s * 10.0).round() / 10.0);
    let guard: Vec<f64> = out.relays.iter().filter(|r| &*r.relay == "guard").map(|r| r.interval_start).collect();
    assert_eq!(guard, (0..10).map(|k| k as f64 / 10.0).collect::<Vec<_>>());
    assert!(tenths(out.connections.iter().map(|c| c.interval_start).collect()) && !out.connections.is_empty(), "{:?}", out.connections);
    assert!(tenths(out.channels.iter().map(|c| c.interval_start).collect()) && !out.channels.is_empty(), "{:?}", out.channels);
    assert!(tenths(out.circuits.iter().map(|c| c.interval_start).collect()) && !out.circuits.is_empty(), "{:?}", out.circuits);
}

#[test]
fn download_rows_of_one_client_on_one_circuit() {
    let out = one_web_client();
    let done: Vec<_> = out.downloads.iter().filter(|d| d.error.is_none()).collect();
    assert!(done.len() >= 2, "{:?}", out.downloads);
    for d in &out.downloads {
        assert_eq!(d.path, "guard,middle,exit", "{d:?}");
    }
    for d in &done {
        let (ttfb, ttlb) = (d.ttfb.unwrap(), d.ttlb.unwrap());
        assert_eq!(d.goodput, Some(102_400.0 / ttlb), "goodput is bytes per second of ttlb: {d:?}");
        // The last 100 KiB - 498 B after the first cell cross 1 MiB/s relays: >= 97 ms.
        assert!(ttlb - ttfb >= 0.097, "{d:?}");
    }
    // The first download waited for its circuit: a CREATE to the guard and EXTENDs to the
    // middle and the exit, one, two and three 40 ms round trips (240 ms, link handshakes
    // on top), and then a BEGIN through three hops and back (120 ms) before its first byte.
    let first = done[0];
    let cbt = first.circuit_build_time.expect("a circuit was built for it");
    assert!(cbt >= 0.24 && first.ttfb.unwrap() >= cbt + 0.12, "{first:?}");
    // Later ones reuse the circuit: their first byte comes sooner than a build would take.
    assert!(done[1].ttfb.unwrap() < cbt, "{:?}", done[1]);
    // Each one's timeline: BEGIN once the circuit is open (at once on an open circuit),
    // CONNECTED after BEGIN's three hops out and back and the exit's TCP handshake with
    // the server (20 ms one way: 60 + 40 + 60 ms), the first byte after both (or with
    // CONNECTED, in the same read).
    assert_eq!(first.begin, Some(cbt), "{first:?}");
    assert_eq!(done[1].begin, Some(0.0), "{:?}", done[1]);
    for d in &done {
        let (begin, connected) = (d.begin.unwrap(), d.connected.unwrap());
        assert!(connected >= begin + 0.16 && d.ttfb.unwrap() >= connected, "{d:?}");
    }
}

#[test]
fn relay_channel_and_circuit_rows_of_one_client_on_one_circuit() {
    let out = one_web_client();
    // Metrics every 2 s for 6 s: each relay's rows cover [0, 2), [2, 4), [4, 6).
    for name in ["guard", "middle", "exit"] {
        let starts: Vec<f64> = out.relays.iter().filter(|r| &*r.relay == name).map(|r| r.interval_start).collect();
        assert_eq!(starts, [0.0, 2.0, 4.0], "{name}");
    }
    // A relay reads from relays (channel table) and clients (connection table); the guard
    // and the middle read nothing else. The exit also reads the server's response: the
    // first page (1.0 s to about 2.0 s) in [0, 2), the second (from about 3.0 s, done in
    // under 0.5 s) in [2, 4), 100 KiB each.
    for r in &out.relays {
        let from_relays: u64 =
            out.channels.iter().filter(|c| c.relay == r.relay && c.interval_start == r.interval_start).map(|c| c.bytes_read).sum();
        let from_clients: u64 =
            out.connections.iter().filter(|c| c.relay == r.relay && c.interval_start == r.interval_start).map(|c| c.bytes_read).sum();
        if &*r.relay == "exit" {
            if r.interval_start < 4.0 {
                assert_eq!(r.bytes_read, from_relays + 102_400, "{r:?}");
            }
        } else {
            assert_eq!(r.bytes_read, from_relays + from_clients, "{r:?}");
        }
    }
    // One circuit: every channel carries it, idle between cells at each sample.
    assert!(!out.channels.is_empty());
    for c in &out.channels {
        assert_eq!((c.circuits, c.active_circuits), (1, 0), "{c:?}");
    }
    // Circuit rows name the relays of the path (not the client), and a completed 100 KiB
    // page is ceil(102400 / 498) = 206 DATA cells packaged at the exit.
    assert!(out.circuits.iter().all(|c| c.path == "guard,middle,exit" && &*c.client == "web0"), "{:?}", out.circuits);
    assert!(out.circuits.iter().any(|c| c.cells_packaged == 206), "{:?}", out.circuits);
}

#[test]
fn a_slow_exits_queue_in_the_relay_circuit_and_hpd_columns() {
    // One bulk download through a 100 KiB/s exit (1 MiB/s elsewhere), HPD scheduling,
    // relay and circuit samples every 2 s.
    let text = common::three_relays_at(
        ["1 MiB/s", "1 MiB/s", "100 KiB/s"],
        r#"
[experiment]
duration = "10 s"
seeds = [1]
metrics_interval = "2 s"
circuit_metrics_interval = "2 s"
[[clients]]
name = "bulk"
workload = "bulk"
count = 1
[servers]
count = 1
link = "1 Gbit"
[workloads.bulk]
type = "bulk"
size = "1 GiB"
[mechanisms]
scheduler = "hpd"
"#,
    );
    let out = run(&common::load(&text), 1, None).unwrap();
    let exit: Vec<_> = out.relays.iter().filter(|r| &*r.relay == "exit").collect();
    // From 6 s on the exit reads and sends at its rate, 200 KiB per interval, and its
    // bucket is empty at each of the 20 refills (100 ms) of the interval: 2 s. The fast
    // relays' buckets never run dry.
    for r in exit.iter().filter(|r| r.interval_start >= 6.0) {
        assert_eq!((r.bytes_read, r.bucket_empty_s), (204_800, 2.0), "{r:?}");
    }
    assert!(out.relays.iter().filter(|r| &*r.relay != "exit").all(|r| r.bucket_empty_s == 0.0));
    // The only circuit's cells are the only ones in the exit's circuit queue: the circuit
    // table's exit wait is the exit's queue wait, interval by interval, in cell-seconds.
    assert!(exit.iter().any(|r| r.queue_wait_cell_s > 1.0), "{exit:?}");
    for c in &out.circuits {
        let r = exit.iter().find(|r| r.interval_start == c.interval_start).unwrap();
        assert!((c.exit_wait_cell_s - r.queue_wait_cell_s).abs() < 1e-6, "{c:?} against {r:?}");
    }
    // HPD's summed queueing delay, in microseconds, is the cells' time in the relays'
    // circuit queues (less those still queued at the end, which HPD has not sent).
    let queued: f64 = out.relays.iter().map(|r| r.queue_wait_cell_s).sum();
    let hpd = out.summary.counters["hpd_delay_us_normal"] as f64 / 1e6;
    assert!(hpd <= queued && hpd > 0.9 * queued, "HPD {hpd} s, circuit queues {queued} s");
}

#[test]
fn a_relay_that_read_its_rate_but_wrote_less_found_its_read_bucket_empty() {
    // In tiny.toml guard2 (1 MiB/s) reads for many clients: in some seconds it reads its
    // whole rate and writes a little less (cells read for a circuit wait to be written).
    // Reading a second's rate in a second empties the read bucket at some refill, even
    // when the write bucket never ran dry: the row's empty time is either bucket's.
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny.toml");
    let cfg = onionlab_config::load_file(&p).unwrap();
    let out = run(&cfg, 1, None).unwrap();
    let rate = cfg.relays.iter().find(|r| r.name == "guard2").unwrap().bandwidth_rate;
    let read_bound: Vec<_> =
        out.relays.iter().filter(|r| &*r.relay == "guard2" && r.bytes_read >= rate && r.bytes_written < rate).collect();
    assert!(!read_bound.is_empty());
    for r in read_bound {
        assert!(r.bucket_empty_s > 0.0, "{r:?}");
    }
}

#[test]
fn a_web_session_ends_with_the_first_page_finished_past_its_length() {
    // Sessions of 2 s, 10 ms think time, then a 10 s pause. A session is over once a page
    // *finishes* 2 s or more after the session began: the next page waits for the pause.
    // 500 KiB pages take about 0.5-1 s, so some page starts before the 2 s and ends after.
    let cfg = net(&format!(
        "[experiment]\nduration = \"30 s\"\nseeds = [1]\n{}[workloads.s]\ntype = \"web\"\nsize = \"500 KiB\"\nthink = \"10 ms\"\n\
         session = {{ length = \"2 s\", pause = \"10 s\" }}\n",
        group_at("web", "s", 1, "0 s")
    ));
    let out = run(&cfg, 1, None).unwrap();
    let ds: Vec<_> = out.downloads.iter().filter(|d| d.ttlb.is_some()).collect();
    let mut session = ds[0].start;
    let mut pauses = 0;
    for (d, next) in ds.iter().zip(&ds[1..]) {
        let end = d.start + d.ttlb.unwrap();
        let gap = next.start - end;
        if end - session >= 2.0 {
            assert!((gap - 10.0).abs() < 1e-6, "the session ended with {d:?}; next {next:?}");
            assert!(d.start - session < 2.0, "a page straddles the session's end: {d:?}");
            session = next.start;
            pauses += 1;
        } else {
            assert!((gap - 0.01).abs() < 1e-6, "within the session: {d:?} then {next:?}");
        }
    }
    assert!(pauses >= 2, "{pauses} pauses in {:?}", out.downloads);
}
