//! Property tests of whole runs: random valid experiment configs (relays with random rates,
//! bursts, links, flags and weights; per-relay schedulers, HPD among them, guard throttling,
//! Tortoise and PerConnBW; BRAIDS's tickets wherever a relay runs HPD, with client groups
//! asking for its classes; client groups of every workload type, some operating relays;
//! servers; random tor parameters, the path order and guard keys among them, and latency
//! models) load, build and run a few simulated seconds without
//! a panic, with the Tor model's invariants holding after every event, result tables that
//! add up, and the same results when run again with the same seed.
//!
//! The configs are written as TOML and loaded with `onionlab_config::load_str`, so every
//! case is one that `onionlab check` accepts. Typical configs run 0.5-20 simulated seconds;
//! wild ones put values anywhere in their valid ranges and run 0.3-3 s. To hunt for more:
//! `PROPTEST_CASES=1000 cargo test -p onionlab-sim --test fuzz_run`; `FUZZ_STATS=1` (with
//! `--nocapture`) prints every config and what its run did.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use onionlab_config::model::{ExperimentConfig, ThrottlingConfig};
use onionlab_config::parse::{MIN_RCVBUF, MIN_SNDBUF};
use onionlab_sim::{run, run_inspected, RunOutput, SimError};
use onionlab_tor::{TorError, UNFINISHED};
use proptest::prelude::*;
use proptest::sample::select;

// ---------------------------------------------------------------- generators

/// Log-uniform in [lo, hi]: small and large values alike.
fn logu(lo: u64, hi: u64) -> impl Strategy<Value = u64> {
    ((lo as f64).ln()..=(hi as f64).ln()).prop_map(move |x| (x.exp().round() as u64).clamp(lo, hi))
}

/// Mostly in the typical range [lo, hi], sometimes anywhere in [min, max]; wild (`w`),
/// mostly anywhere.
fn typ(w: bool, min: u64, lo: u64, hi: u64, max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![if w { 1 } else { 10 } => logu(lo, hi), 1 => logu(min, max)]
}

/// `normal`, or `wild` for wild configs.
fn pick(w: bool, normal: u64, wild: u64) -> u64 {
    if w {
        wild
    } else {
        normal
    }
}

fn dur_us(us: u64) -> String {
    format!("\"{us} us\"")
}

fn size_b(b: u64) -> String {
    format!("\"{b} B\"")
}

fn rate_bps(b: u64) -> String {
    format!("\"{b} B/s\"")
}

fn bits(b: u64) -> String {
    format!("\"{b} bit\"")
}

/// A duration between `lo_us` and `hi_us` microseconds, as a TOML value; wild, from
/// 10 us (periodic timers then run that often).
fn dur(w: bool, lo_us: u64, hi_us: u64) -> impl Strategy<Value = String> {
    logu(pick(w, lo_us, lo_us.min(10)), hi_us).prop_map(dur_us)
}

fn size_dist(w: bool) -> impl Strategy<Value = String> {
    prop_oneof![
        typ(w, 1, 1 << 10, 2 << 20, pick(w, 8 << 20, 1 << 40)).prop_map(size_b),
        typ(w, 1, 1 << 10, 2 << 20, pick(w, 8 << 20, 1 << 40)).prop_map(|b| format!("{{ dist = \"fixed\", value = {} }}", size_b(b))),
        (typ(w, 1, 1 << 10, 2 << 20, pick(w, 8 << 20, 1 << 40)), typ(w, 1, 1 << 10, 2 << 20, pick(w, 8 << 20, 1 << 40)))
            .prop_map(|(a, b)| format!("{{ dist = \"uniform\", min = {}, max = {} }}", size_b(a.min(b)), size_b(a.max(b)))),
        proptest::collection::vec(
            (typ(w, 1, 1 << 10, 2 << 20, pick(w, 8 << 20, 1 << 40)), if w { 1e-300 } else { 0.01 }..if w { 1e300 } else { 100.0f64 }),
            1..4
        )
        .prop_map(|v| {
            let sizes: Vec<String> = v.iter().map(|(s, _)| size_b(*s)).collect();
            let weights: Vec<String> = v.iter().map(|(_, w)| format!("{w:?}")).collect();
            format!("{{ dist = \"choice\", sizes = [{}], weights = [{}] }}", sizes.join(", "), weights.join(", "))
        }),
    ]
}

/// A time distribution; `empirical` names a CDF file written by [`base_dir`].
fn time_dist(w: bool) -> impl Strategy<Value = String> {
    prop_oneof![
        (0..pick(w, 3_000_000, 1 << 40)).prop_map(dur_us),
        (0..pick(w, 3_000_000, 1 << 40)).prop_map(|v| format!("{{ dist = \"fixed\", value = {} }}", dur_us(v))),
        (0..pick(w, 3_000_000, 1 << 40), 0..pick(w, 3_000_000, 1 << 40)).prop_map(|(a, b)| format!(
            "{{ dist = \"uniform\", min = {}, max = {} }}",
            dur_us(a.min(b)),
            dur_us(a.max(b))
        )),
        dur(w, 1, pick(w, 5_000_000, 1 << 40)).prop_map(|m| format!("{{ dist = \"exponential\", mean = {m} }}")),
        (dur(w, 1, pick(w, 5_000_000, 1 << 40)), 0.01..if w { 20.0 } else { 3.0f64 })
            .prop_map(|(m, s)| format!("{{ dist = \"lognormal\", median = {m}, sigma = {s:?} }}")),
        (dur(w, 1, pick(w, 2_000_000, 1 << 40)), if w { 0.001 } else { 0.05 }..4.0f64)
            .prop_map(|(m, a)| format!("{{ dist = \"pareto\", scale = {m}, alpha = {a:?} }}")),
        Just("{ dist = \"empirical\", file = \"think.csv\" }".to_string()),
    ]
}

/// An EWMA half-life and tick as TOML values, the tick at most 512 half-lives (validation's
/// bound: beyond it tor's per-tick scale factor overflows the counts).
fn ewma_halflife_tick(w: bool) -> impl Strategy<Value = (String, String)> {
    (logu(pick(w, 1_000, 10), 60_000_000), logu(pick(w, 1_000, 10), 20_000_000)).prop_map(|(h, t)| (dur_us(h), dur_us(t.min(h * 512))))
}

fn scheduler(w: bool) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\"round-robin\"".to_string()),
        Just("\"ewma\"".to_string()),
        Just("\"ewma-exact\"".to_string()),
        Just("\"kist\"".to_string()),
        Just("\"kist-lite\"".to_string()),
        ewma_halflife_tick(w).prop_map(|(h, t)| format!("{{ kind = \"ewma\", halflife = {h}, tick = {t} }}")),
        dur(w, 1_000, 60_000_000).prop_map(|h| format!("{{ kind = \"ewma-exact\", halflife = {h} }}")),
        (dur(w, 1_000, 100_000), 0.0..3.0f64, ewma_halflife_tick(w)).prop_map(|(r, f, (h, t))| format!(
            "{{ kind = \"kist\", run_interval = {r}, sock_buf_size_factor = {f:?}, halflife = {h}, tick = {t} }}"
        )),
        (dur(w, 1_000, 100_000), ewma_halflife_tick(w))
            .prop_map(|(r, (h, t))| format!("{{ kind = \"kist-lite\", run_interval = {r}, halflife = {h}, tick = {t} }}")),
        Just("\"hpd\"".to_string()),
        // BRAIDS's HPD: delays positive and strictly increasing, PAD weight f in [0, 1].
        (0.01..5.0f64, 0.01..5.0f64, 0.01..5.0f64, prop_oneof![9 => 0.0..1.0f64, 1 => Just(1.0)]).prop_map(|(a, b, c, f)| format!(
            "{{ kind = \"hpd\", delay = [{a:?}, {:?}, {:?}], f = {f:?} }}",
            a + b,
            a + b + c
        )),
    ]
}

/// `[mechanisms.braids]`: every key optional, in the validator's ranges. Written only
/// where some relay runs HPD (the config refuses tickets that buy nothing).
#[derive(Debug, Clone)]
struct GenBraids {
    ticket_cells: Option<u64>,
    free_tickets: Option<u32>,
    free_period_us: Option<u64>,
    spending_us: Option<u64>,
    tax: Option<f64>,
    low_latency_limit: Option<u64>,
    low_latency_window_us: Option<u64>,
    need_exchange: Option<bool>,
}

fn braids(w: bool) -> impl Strategy<Value = GenBraids> {
    use proptest::option::of;
    (
        of(typ(w, 1, 16, 1_024, pick(w, 4_096, 1 << 31))),
        of(0..pick(w, 10, 100) as u32),
        of(logu(pick(w, 1_000_000, 100_000), 1_200_000_000)),
        of(logu(pick(w, 1_000_000, 100_000), 3_600_000_000)),
        of(prop_oneof![9 => 0.0..1.0f64, 1 => Just(1.0)]),
        of(prop_oneof![1 => Just(0), 9 => typ(w, 1, 64, 100_000, pick(w, 1_000_000, 1 << 60))]),
        of(logu(pick(w, 1_000_000, 1_000), 3_600_000_000)),
        of(any::<bool>()),
    )
        .prop_map(
            |(ticket_cells, free_tickets, free_period_us, spending_us, tax, low_latency_limit, low_latency_window_us, need_exchange)| {
                // Without free tickets the config must name the low-latency limit (its
                // default would be 0); 0 given explicitly keeps that case covered.
                let low_latency_limit = if free_tickets == Some(0) { low_latency_limit.or(Some(0)) } else { low_latency_limit };
                GenBraids {
                    ticket_cells,
                    free_tickets,
                    free_period_us,
                    spending_us,
                    tax,
                    low_latency_limit,
                    low_latency_window_us,
                    need_exchange,
                }
            },
        )
}

fn braids_table(b: &GenBraids) -> String {
    let mut s = String::from("\n[mechanisms.braids]\n");
    let mut opt = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            writeln!(s, "{k} = {v}").unwrap();
        }
    };
    opt("ticket_cells", b.ticket_cells.map(|n| n.to_string()));
    opt("free_tickets", b.free_tickets.map(|n| n.to_string()));
    opt("free_period", b.free_period_us.map(dur_us));
    opt("spending_interval", b.spending_us.map(dur_us));
    opt("tax", b.tax.map(|x| format!("{x:?}")));
    opt("low_latency_limit", b.low_latency_limit.map(|n| n.to_string()));
    opt("low_latency_window", b.low_latency_window_us.map(dur_us));
    opt("free_tickets_need_exchange", b.need_exchange.map(|x| x.to_string()));
    s
}

fn denominator() -> impl Strategy<Value = &'static str> {
    select(vec!["all-or-connections", "client-connections", "active-client-connections"])
}

/// A guard throttling table (never "none": [`mechanism`] adds that).
fn throttling(w: bool) -> impl Strategy<Value = String> {
    prop_oneof![
        (typ(w, 1, 10 << 10, 1 << 20, pick(w, 4 << 20, 1 << 50)), typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60))).prop_map(|(r, b)| format!("{{ kind = \"static\", rate = {}, burst = {} }}", rate_bps(r), size_b(b))),
        (proptest::option::of(typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60))), denominator()).prop_map(|(b, d)| {
            let burst = b.map_or(String::new(), |b| format!(", burst = {}", size_b(b)));
            format!("{{ kind = \"split\", denominator = \"{d}\"{burst} }}")
        }),
        (
            typ(w, 1, 10 << 10, 1 << 20, pick(w, 4 << 20, 1 << 50)),
            prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64],
            dur(w, 1_000, 120_000_000),
            typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60)),
            any::<bool>(),
            denominator(),
            any::<bool>()
        )
            .prop_map(|(r, p, h, b, freeze, d, quirk)| format!(
                "{{ kind = \"flag\", flag_rate = {}, penalty = {p:?}, halflife = {h}, burst = {}, freeze_penalty_at_flag = {freeze}, denominator = \"{d}\", meta_ewma_tick_quirk = {quirk} }}",
                rate_bps(r),
                size_b(b)
            )),
        (
            prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64],
            dur(w, 1_000, 60_000_000),
            typ(w, 1, 10 << 10, 1 << 20, pick(w, 4 << 20, 1 << 50)),
            dur(w, 1_000, 120_000_000),
            typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60)),
            // The paper's semantics with either measure of throughput; the code's has its own.
            select(vec![("paper", "transferred"), ("paper", "larger-direction"), ("code", "transferred")])
        )
            .prop_map(|(f, r, fl, h, b, (s, m))| format!(
                "{{ kind = \"threshold\", fraction = {f:?}, refresh = {r}, floor = {}, halflife = {h}, burst = {}, semantics = \"{s}\", throughput = \"{m}\" }}",
                rate_bps(fl),
                size_b(b)
            )),
    ]
}

fn tortoise(w: bool) -> impl Strategy<Value = String> {
    (
        typ(w, 1, 10 << 10, 1 << 20, pick(w, 4 << 20, 1 << 50)),
        proptest::option::of(typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60))),
        proptest::option::of(select(vec!["both", "read", "write"])),
        proptest::option::of(dur(w, 1_000, 2_000_000)),
        proptest::option::of(select(vec!["connection", "circuit"])),
    )
        .prop_map(|(r, b, d, c, u)| {
            let mut s = format!("{{ rate = {}", rate_bps(r));
            if let Some(b) = b {
                write!(s, ", burst = {}", size_b(b)).unwrap();
            }
            if let Some(d) = d {
                write!(s, ", directions = \"{d}\"").unwrap();
            }
            if let Some(c) = c {
                write!(s, ", check_interval = {c}").unwrap();
            }
            if let Some(u) = u {
                write!(s, ", limit_unit = \"{u}\"").unwrap();
            }
            s + " }"
        })
}

/// A relay's or the default mechanism: guard throttling or Tortoise, never both (the
/// config rejects a relay with both).
#[derive(Debug, Clone)]
enum Mech {
    None,
    Throttling(String),
    Tortoise(String),
}

fn mechanism(w: bool) -> impl Strategy<Value = Mech> {
    prop_oneof![2 => Just(Mech::None), 3 => throttling(w).prop_map(Mech::Throttling), 1 => tortoise(w).prop_map(Mech::Tortoise)]
}

#[derive(Debug, Clone)]
struct GenRelay {
    rate: u64,
    burst: Option<u64>,
    link: Option<(u64, u64)>,
    flags: Vec<&'static str>,
    weight: Option<u64>,
    location: u32,
    perconn: Option<(u64, u64)>,
    scheduler: Option<String>,
    /// `None`: the defaults of `[mechanisms]`.
    mech: Option<Mech>,
    mtbf_hours: u64,
    /// The relay's /16 is 10.x/16 (few values, so that paths collide), or no address.
    subnet: Option<u8>,
}

fn relay(w: bool) -> impl Strategy<Value = GenRelay> {
    let flags = (
        proptest::sample::subsequence(vec!["Exit", "Guard", "Stable", "Valid"], 0..4),
        proptest::bool::weighted(0.9),
        proptest::bool::weighted(0.05),
    )
        .prop_map(|(mut f, fast, bad_exit)| {
            if fast {
                f.push("Fast");
            }
            if bad_exit {
                f.push("BadExit");
            }
            f
        });
    (
        typ(w, 1, 50 << 10, 10 << 20, pick(w, 100 << 20, 1 << 50)),
        proptest::option::of(typ(w, 1, 50 << 10, 20 << 20, pick(w, 100 << 20, 1 << 60))),
        proptest::option::of((
            typ(w, 1_000, 1_000_000, 1_000_000_000, pick(w, 10_000_000_000, 1 << 55)),
            typ(w, 1_000, 1_000_000, 1_000_000_000, pick(w, 10_000_000_000, 1 << 55)),
        )),
        flags,
        proptest::option::of(prop_oneof![1 => Just(0u64), 9 => logu(1, pick(w, 100_000, i64::MAX as u64))]),
        0..4u32,
        proptest::option::of((
            typ(w, 1, 10 << 10, 1 << 20, pick(w, 4 << 20, 1 << 50)),
            typ(w, 1, 64 << 10, 4 << 20, pick(w, 8 << 20, 1 << 60)),
        )),
        proptest::option::of(scheduler(w)),
        proptest::option::of(mechanism(w)),
        1..2_000u64,
        proptest::option::weighted(0.3, 0..4u8),
    )
        .prop_map(|(rate, burst, link, flags, weight, location, perconn, scheduler, mech, mtbf_hours, subnet)| GenRelay {
            rate,
            burst,
            link,
            flags,
            weight,
            location,
            perconn,
            scheduler,
            mech,
            mtbf_hours,
            subnet,
        })
}

#[derive(Debug, Clone)]
struct GenOperators {
    count: u32,
    exit: bool,
    exempt: bool,
}

#[derive(Debug, Clone)]
struct GenClient {
    workload: &'static str,
    count: u32,
    link: (Option<u64>, Option<u64>),
    /// `None`: default (location 0); `Some(None)`: round robin.
    placement: Option<Option<u32>>,
    operators: Option<GenOperators>,
    /// `start` as a per-mille of the run's duration, and `start_spread` (us).
    start: Option<(u32, Option<u64>)>,
    /// BRAIDS's class, written where `[mechanisms.braids]` is.
    service: Option<&'static str>,
}

fn client(w: bool) -> impl Strategy<Value = GenClient> {
    (
        select(vec!["web", "bulk", "perf", "markov"]),
        1..8u32,
        (
            proptest::option::of(typ(w, 1_000, 1_000_000, 100_000_000, pick(w, 10_000_000_000, 1 << 55))),
            proptest::option::of(typ(w, 1_000, 1_000_000, 100_000_000, pick(w, 10_000_000_000, 1 << 55))),
        ),
        proptest::option::of(proptest::option::of(0..4u32)),
        proptest::option::weighted(0.2, (0..3u32, any::<bool>(), any::<bool>())),
        proptest::option::weighted(0.25, (0..1000u32, proptest::option::of(1..5_000_000u64))),
        proptest::option::of(select(vec!["normal", "low-latency", "high-throughput"])),
    )
        .prop_map(|(workload, count, link, placement, ops, start, service)| GenClient {
            workload,
            count,
            link,
            placement,
            operators: ops.map(|(n, exit, exempt)| GenOperators { count: n.min(count), exit, exempt }),
            start,
            service,
        })
}

#[derive(Debug, Clone)]
struct GenTor {
    refill_us: Option<u64>,
    handshake_rtts: Option<u32>,
    dirtiness_us: Option<u64>,
    /// `Some(None)`: "never".
    idle_us: Option<Option<u64>>,
    /// Write a drawn idle timeout d as per-class ranges `{ client = [d, 2d], relay = [d, 3d] }`.
    idle_ranges: bool,
    max_queue: Option<u64>,
    entry_guards: Option<u32>,
    use_entry_guards: Option<bool>,
    request: Option<u64>,
    /// `optimistic_data` (false: the request follows CONNECTED as DATA cells).
    optimistic: Option<bool>,
    /// `refill_phase`: random (true) or aligned.
    random_phase: Option<bool>,
    /// (window, increment <= window).
    window: Option<(u64, u64)>,
    sndbuf: Option<u64>,
    rcvbuf: Option<u64>,
    /// (predicted_circuits, circuit_idle_timeout, cbt_learning when predicting).
    predicted: Option<(bool, Option<u64>, Option<GenCbt>)>,
    /// `congestion_control = "vegas"`.
    vegas: bool,
    /// (`cellq_high`, `cellq_low`).
    cellq: Option<(u64, u64)>,
    /// `path_order` exit-first (true) or guard-first; `num_primary_guards` as how many
    /// beyond `num_entry_guards` (never fewer, or the config refuses it);
    /// `distinct_guard_subnets`.
    path: (Option<bool>, Option<u32>, Option<bool>),
}

/// `cbt_learning`: `None` is `true` (tor 0.4.8's), else a table of test frequency (us) and
/// max clean circuits.
type GenCbt = Option<(u64, u32)>;

fn tor(w: bool) -> impl Strategy<Value = GenTor> {
    use proptest::option::of;
    (
        of(logu(pick(w, 1_000, 10), 2_000_000)),
        of(0..pick(w, 5, 12) as u32),
        of(logu(pick(w, 1_000, 1), 600_000_000)),
        of(of(logu(pick(w, 1_000, 1), 300_000_000))),
        of(typ(w, 1, 500, 5_000, pick(w, 5_000, 1 << 40))),
        of(1..pick(w, 5, 100) as u32),
        of(any::<bool>()),
        of(typ(w, 1, 100, 2_000, pick(w, 100_000, 1 << 40))),
        of(typ(w, 1, 100, 1_000, pick(w, 2_000, 1 << 40)).prop_flat_map(|n| (Just(n), 1..=n))),
        // Socket buffers down to Linux's floors (the validator's minimum).
        of(typ(w, MIN_SNDBUF, 64 << 10, 8 << 20, pick(w, 8 << 20, 1 << 50))),
        of(typ(w, MIN_RCVBUF, 64 << 10, 8 << 20, pick(w, 8 << 20, 1 << 50))),
        (
            of((any::<bool>(), of(logu(pick(w, 1_000, 1), 7_200_000_000)), of(of((logu(pick(w, 100_000, 1), 120_000_000), 0..=14u32))))),
            any::<bool>(),
            of((1..pick(w, 600, 5_000)).prop_flat_map(|h| (Just(h), 0..h))),
            any::<bool>(),
            (of(any::<bool>()), of(0..pick(w, 4, 20) as u32), of(any::<bool>())),
            of(any::<bool>()),
            of(any::<bool>()),
        ),
    )
        .prop_map(
            |(
                refill_us,
                handshake_rtts,
                dirtiness_us,
                idle_us,
                max_queue,
                entry_guards,
                use_entry_guards,
                request,
                window,
                sndbuf,
                rcvbuf,
                (predicted, vegas, cellq, idle_ranges, path, optimistic, random_phase),
            )| {
                GenTor {
                    refill_us,
                    handshake_rtts,
                    dirtiness_us,
                    idle_us,
                    idle_ranges,
                    max_queue,
                    entry_guards,
                    use_entry_guards,
                    request,
                    // Without optimistic data a request must fit one stream window.
                    optimistic: optimistic.filter(|&o| o || request.unwrap_or(500) <= 500 * 498),
                    random_phase,
                    window,
                    sndbuf,
                    rcvbuf,
                    predicted,
                    vegas,
                    cellq,
                    path,
                }
            },
        )
}

#[derive(Debug, Clone)]
enum GenLatency {
    Constant(u64),
    /// One-way milliseconds, row by row.
    Matrix(Vec<Vec<f64>>),
}

fn latency(w: bool) -> impl Strategy<Value = GenLatency> {
    prop_oneof![
        prop_oneof![Just(0u64), typ(w, 1, 1_000, 50_000, pick(w, 200_000, 100_000_000))].prop_map(GenLatency::Constant),
        (1..5usize).prop_flat_map(move |n| {
            proptest::collection::vec(
                proptest::collection::vec(prop_oneof![1 => Just(0.0), 10 => 0.0..50.0f64, 1 => 0.0..if w { 1e9 } else { 150.0f64 }], n),
                n,
            )
            .prop_map(GenLatency::Matrix)
        }),
    ]
}

#[derive(Debug, Clone)]
struct GenWorkloads {
    web_size: String,
    web_think: Option<String>,
    web_session: Option<(String, String)>,
    bulk_size: String,
    perf_size: Option<String>,
    perf_pause: String,
    markov_packet: Option<u64>,
    markov_pause: Option<String>,
}

fn workloads(w: bool) -> impl Strategy<Value = GenWorkloads> {
    (
        size_dist(w),
        proptest::option::of(time_dist(w)),
        proptest::option::weighted(0.3, (dur(w, 1_000, 3_000_000), time_dist(w))),
        size_dist(w),
        proptest::option::of(size_dist(w)),
        time_dist(w),
        proptest::option::of(logu(1, 100_000)),
        proptest::option::of(time_dist(w)),
    )
        .prop_map(|(web_size, web_think, web_session, bulk_size, perf_size, perf_pause, markov_packet, markov_pause)| GenWorkloads {
            web_size,
            web_think,
            web_session,
            bulk_size,
            perf_size,
            perf_pause,
            markov_packet,
            markov_pause,
        })
}

#[derive(Debug, Clone)]
struct Gen {
    duration_ms: u64,
    /// Fraction of the duration.
    warmup: Option<f64>,
    seed: u64,
    metrics_us: Option<u64>,
    conn_metrics_us: Option<u64>,
    chan_metrics_us: Option<u64>,
    tor: GenTor,
    latency: GenLatency,
    weights: Option<Vec<(&'static str, u64)>>,
    compute_flags: bool,
    relays: Vec<GenRelay>,
    /// Which relays get Guard+Fast and Exit+Fast, each with a positive weight (so that the set is valid).
    guard: usize,
    exit: usize,
    clients: Vec<GenClient>,
    servers: u32,
    server_link: Option<u64>,
    server_placement: Option<Option<u32>>,
    workloads: GenWorkloads,
    scheduler: Option<String>,
    mech: Mech,
    braids: Option<GenBraids>,
}

/// Bandwidth weights a consensus line must give, and those it may.
const REQUIRED_WEIGHTS: &[&str] = &["Wgg", "Wgm", "Wgd", "Wmg", "Wmm", "Wme", "Wmd", "Weg", "Wem", "Wee", "Wed"];
const OPTIONAL_WEIGHTS: &[&str] = &["Wbd", "Wbe", "Wbg", "Wbm", "Wdb", "Web", "Wgb", "Wmb"];

fn config(w: bool) -> impl Strategy<Value = Gen> {
    use proptest::option::of;
    (
        (
            if w { 300..3_000u64 } else { 500..20_000u64 },
            of(0.0..0.5f64),
            0..(i64::MAX as u64),
            of(logu(pick(w, 10_000, 1_000), 2_000_000)),
            of(logu(pick(w, 10_000, 1_000), 3_000_000)),
            of(logu(pick(w, 10_000, 1_000), 3_000_000)),
        ),
        tor(w),
        latency(w),
        (
            proptest::option::weighted(
                0.2,
                proptest::sample::subsequence(OPTIONAL_WEIGHTS.to_vec(), 0..OPTIONAL_WEIGHTS.len()).prop_flat_map(|opt| {
                    let ks: Vec<&'static str> = REQUIRED_WEIGHTS.iter().copied().chain(opt).collect();
                    let n = ks.len();
                    (Just(ks), proptest::collection::vec(prop_oneof![Just(0u64), Just(10_000), 0..=10_000u64], n))
                        .prop_map(|(ks, vs)| ks.into_iter().zip(vs).collect::<Vec<_>>())
                }),
            ),
            proptest::option::weighted(0.1, Just(())).prop_map(|x| x.is_some()),
        ),
        proptest::collection::vec(relay(w), 3..pick(w, 12, 16) as usize).prop_flat_map(|rs| {
            let n = rs.len();
            (Just(rs), 0..n, 0..n)
        }),
        proptest::collection::vec(client(w), 1..pick(w, 4, 6) as usize),
        (1..pick(w, 4, 20) as u32, of(typ(w, 1_000, 10_000_000, 10_000_000_000, pick(w, 10_000_000_000, 1 << 55))), of(of(0..4u32))),
        workloads(w),
        (of(scheduler(w)), mechanism(w), proptest::option::weighted(0.6, braids(w))),
    )
        .prop_map(
            |(
                (duration_ms, warmup, seed, metrics_us, conn_metrics_us, chan_metrics_us),
                tor,
                latency,
                (weights, compute_flags),
                (relays, guard, exit),
                clients,
                (servers, server_link, server_placement),
                workloads,
                (scheduler, mech, braids),
            )| Gen {
                duration_ms,
                warmup,
                seed,
                metrics_us,
                conn_metrics_us,
                chan_metrics_us,
                tor,
                latency,
                weights,
                compute_flags,
                relays,
                guard,
                exit,
                clients,
                servers,
                server_link,
                server_placement,
                workloads,
                scheduler,
                mech,
                braids,
            },
        )
}

// ---------------------------------------------------------------- rendering

/// Writes `path` whole or not at all: tests in parallel (and other test processes) read
/// these files while they are written.
fn write_atomically(path: &Path, contents: &[u8]) {
    let tmp = path.with_extension(format!("tmp-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Directory the configs load from: a think-time CDF and the PrivCount Markov models.
fn base_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz_run");
        std::fs::create_dir_all(&dir).unwrap();
        write_atomically(&dir.join("think.csv"), b"# seconds,cumulative probability\n0,0\n0.5,0.2\n2,0.7\n2,0.8\n9,1\n");
        let traffic = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/traffic");
        for f in ["stream_model.json", "packet_model.json"] {
            write_atomically(&dir.join(f), &std::fs::read(traffic.join(f)).unwrap());
        }
        dir
    })
}

fn locations(g: &Gen) -> u32 {
    match &g.latency {
        GenLatency::Constant(_) => 4,
        GenLatency::Matrix(m) => m.len() as u32,
    }
}

fn placement(p: &Option<Option<u32>>, locations: u32) -> String {
    match p {
        None => String::new(),
        Some(None) => "placement = \"round_robin\"\n".into(),
        Some(Some(l)) => format!("placement = {}\n", l % locations),
    }
}

fn mech_lines(m: &Mech) -> String {
    match m {
        Mech::None => "throttling = \"none\"\ntortoise = \"off\"\n".into(),
        Mech::Throttling(t) => format!("throttling = {t}\ntortoise = \"off\"\n"),
        Mech::Tortoise(t) => format!("throttling = \"none\"\ntortoise = {t}\n"),
    }
}

/// The largest divisor of `dur_ns` that is at most `target_ns` (at least 1): a metrics
/// interval must divide the run.
fn dividing(dur_ns: u64, target_ns: u64) -> u64 {
    let target = target_ns.clamp(1, dur_ns);
    let mut best = 1;
    let mut k = 1;
    while k * k <= dur_ns {
        if dur_ns.is_multiple_of(k) {
            for d in [k, dur_ns / k] {
                if d <= target && d > best {
                    best = d;
                }
            }
        }
        k += 1;
    }
    best
}

/// The config's TOML, and the latency matrix file's contents if it has one.
fn render(g: &Gen) -> (String, Option<String>) {
    let mut s = String::new();
    // The default metrics interval (1 s) must divide the run.
    let dur_ms = if g.metrics_us.is_none() { g.duration_ms.div_ceil(1000) * 1000 } else { g.duration_ms };
    writeln!(s, "[experiment]\nname = \"fuzz\"\nduration = \"{dur_ms} ms\"\nseeds = [{}]", g.seed).unwrap();
    if let Some(w) = g.warmup {
        writeln!(s, "warmup = \"{} us\"", (w * dur_ms as f64 * 1000.0) as u64).unwrap();
    }
    let dur_ns = dur_ms * 1_000_000;
    let intervals = [
        ("metrics_interval", g.metrics_us),
        ("connection_metrics_interval", g.conn_metrics_us),
        ("channel_metrics_interval", g.chan_metrics_us),
    ];
    for (key, us) in intervals {
        if let Some(us) = us {
            writeln!(s, "{key} = \"{} ns\"", dividing(dur_ns, us * 1000)).unwrap();
        }
    }

    let t = &g.tor;
    s += "\n[tor]\n";
    let mut opt = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            writeln!(s, "{k} = {v}").unwrap();
        }
    };
    opt("refill_interval", t.refill_us.map(dur_us));
    opt("refill_phase", t.random_phase.map(|r| if r { "\"random\"" } else { "\"aligned\"" }.to_string()));
    opt("link_handshake_rtts", t.handshake_rtts.map(|n| n.to_string()));
    opt("max_circuit_dirtiness", t.dirtiness_us.map(dur_us));
    opt(
        "idle_channel_timeout",
        t.idle_us.map(|i| match i {
            None => "\"never\"".into(),
            Some(d) if t.idle_ranges => {
                format!("{{ client = [{}, {}], relay = [{}, {}] }}", dur_us(d), dur_us(2 * d), dur_us(d), dur_us(3 * d))
            }
            Some(d) => dur_us(d),
        }),
    );
    opt("circ_max_cell_queue", t.max_queue.map(|n| n.to_string()));
    opt("num_entry_guards", t.entry_guards.map(|n| n.to_string()));
    opt("use_entry_guards", t.use_entry_guards.map(|b| b.to_string()));
    opt("path_order", t.path.0.map(|e| if e { "\"exit-first\"" } else { "\"guard-first\"" }.to_string()));
    opt("num_primary_guards", t.path.1.map(|extra| (t.entry_guards.unwrap_or(1) + extra).to_string()));
    opt("distinct_guard_subnets", t.path.2.map(|b| b.to_string()));
    opt("request_size", t.request.map(size_b));
    opt("optimistic_data", t.optimistic.map(|b| b.to_string()));
    opt("circ_window", t.window.map(|w| w.0.to_string()));
    opt("circ_window_increment", t.window.map(|w| w.1.to_string()));
    opt("sndbuf", t.sndbuf.map(size_b));
    opt("predicted_circuits", t.predicted.map(|p| p.0.to_string()));
    opt("congestion_control", t.vegas.then(|| "\"vegas\"".to_string()));
    opt("cellq_high", t.cellq.map(|c| c.0.to_string()));
    opt("cellq_low", t.cellq.map(|c| c.1.to_string()));
    opt("circuit_idle_timeout", t.predicted.and_then(|p| p.1).map(dur_us));
    opt(
        "cbt_learning",
        t.predicted.filter(|p| p.0).and_then(|p| p.2).map(|c| match c {
            None => "true".to_string(),
            Some((freq, max_clean)) => format!("{{ test_frequency = {}, max_clean = {max_clean} }}", dur_us(freq)),
        }),
    );
    opt("rcvbuf", t.rcvbuf.map(size_b));

    s += "\n[network]\n";
    let matrix = match &g.latency {
        GenLatency::Constant(us) => {
            writeln!(s, "latency = {{ constant = {} }}", dur_us(*us)).unwrap();
            None
        }
        GenLatency::Matrix(m) => {
            let text: String = m.iter().map(|row| row.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(",") + "\n").collect();
            // One file per matrix, so that parallel cases do not overwrite each other's.
            let name = format!("latency-{:016x}.csv", fnv(&text));
            writeln!(s, "latency = {{ matrix = \"{name}\" }}").unwrap();
            Some(text)
        }
    };
    if let Some(w) = &g.weights {
        let kv: Vec<String> = w.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        writeln!(s, "bandwidth_weights = {{ {} }}", kv.join(", ")).unwrap();
    }
    if g.compute_flags {
        s += "compute_flags = true\n";
    }

    let locs = locations(g);
    s += "\n[mechanisms]\n";
    if let Some(sch) = &g.scheduler {
        writeln!(s, "scheduler = {sch}").unwrap();
    }
    s += &mech_lines(&g.mech);
    let hpd = |sch: &Option<String>| sch.as_deref().is_some_and(|x| x.contains("hpd"));
    let braids = g.braids.as_ref().filter(|_| hpd(&g.scheduler) || g.relays.iter().any(|r| hpd(&r.scheduler)));
    if let Some(b) = braids {
        s += &braids_table(b);
    }

    for (i, r) in g.relays.iter().enumerate() {
        let mut flags = r.flags.clone();
        for (want, f) in [(g.guard, "Guard"), (g.guard, "Fast"), (g.exit, "Exit"), (g.exit, "Fast")] {
            if i == want && !flags.contains(&f) {
                flags.push(f);
            }
        }
        writeln!(
            s,
            "\n[[relays]]\nname = \"relay{i}\"\nbandwidth = {}\nflags = {flags:?}\nlocation = {}",
            rate_bps(r.rate),
            r.location % locs
        )
        .unwrap();
        if let Some(b) = r.burst {
            writeln!(s, "burst = {}", size_b(b)).unwrap();
        }
        if let Some((up, down)) = r.link {
            writeln!(s, "link_up = {}\nlink_down = {}", bits(up), bits(down)).unwrap();
        }
        if let Some(w) = r.weight {
            // The relays made Guard+Fast and Exit+Fast above weigh at least 1: a position
            // whose candidates all weigh 0 is a config error (tested in onionlab-config),
            // and the fuzz wants valid configs. Other relays may still weigh 0.
            let w = if i == g.guard || i == g.exit { w.max(1) } else { w };
            writeln!(s, "consensus_weight = {w}").unwrap();
        }
        if let Some((rate, burst)) = r.perconn {
            writeln!(s, "perconn = {{ rate = {}, burst = {} }}", rate_bps(rate), size_b(burst)).unwrap();
        }
        if let Some(sch) = &r.scheduler {
            writeln!(s, "scheduler = {sch}").unwrap();
        }
        // A relay with perconn runs no throttling or Tortoise (they set the same buckets, and
        // the config refuses both), whatever it or the defaults drew.
        let mech = if r.perconn.is_some() { Some(&Mech::None) } else { r.mech.as_ref() };
        if let Some(m) = mech {
            s += &mech_lines(m);
        }
        if g.compute_flags {
            writeln!(s, "mtbf = \"{} h\"", r.mtbf_hours).unwrap();
        }
        if let Some(x) = r.subnet {
            writeln!(s, "address = \"10.{x}.{}.{}\"", i / 256, i % 256).unwrap();
        }
    }

    for (i, c) in g.clients.iter().enumerate() {
        writeln!(s, "\n[[clients]]\nname = \"c{i}x\"\nworkload = \"{}\"\ncount = {}", c.workload, c.count).unwrap();
        if let Some(up) = c.link.0 {
            writeln!(s, "link_up = {}", bits(up)).unwrap();
        }
        if let Some(down) = c.link.1 {
            writeln!(s, "link_down = {}", bits(down)).unwrap();
        }
        s += &placement(&c.placement, locs);
        if let Some(o) = &c.operators {
            let entry = if o.exempt { "exempt" } else { "bridge" };
            let mtbf = if g.compute_flags { ", mtbf = \"30 days\"" } else { "" };
            writeln!(s, "relay_operators = {{ count = {}, exit = {}, entry = \"{entry}\"{mtbf} }}", o.count, o.exit).unwrap();
        }
        if let (Some(service), Some(_)) = (c.service, braids) {
            writeln!(s, "service = \"{service}\"").unwrap();
        }
        if let Some((permille, spread)) = c.start {
            // Before the end of the run: a group that joins late.
            writeln!(s, "start = \"{} us\"", dur_ms * permille as u64).unwrap();
            if let Some(us) = spread {
                writeln!(s, "start_spread = {}", dur_us(us)).unwrap();
            }
        }
    }

    writeln!(s, "\n[servers]\ncount = {}", g.servers).unwrap();
    if let Some(l) = g.server_link {
        writeln!(s, "link = {}", bits(l)).unwrap();
    }
    s += &placement(&g.server_placement, locs);

    let w = &g.workloads;
    writeln!(s, "\n[workloads.web]\ntype = \"web\"\nsize = {}", w.web_size).unwrap();
    if let Some(t) = &w.web_think {
        writeln!(s, "think = {t}").unwrap();
    }
    if let Some((len, pause)) = &w.web_session {
        writeln!(s, "session = {{ length = {len}, pause = {pause} }}").unwrap();
    }
    writeln!(s, "\n[workloads.bulk]\ntype = \"bulk\"\nsize = {}", w.bulk_size).unwrap();
    writeln!(s, "\n[workloads.perf]\ntype = \"perf\"\npause = {}", w.perf_pause).unwrap();
    if let Some(sz) = &w.perf_size {
        writeln!(s, "size = {sz}").unwrap();
    }
    s += "\n[workloads.markov]\ntype = \"markov\"\nstream_model = \"stream_model.json\"\npacket_model = \"packet_model.json\"\n";
    if let Some(p) = w.markov_packet {
        writeln!(s, "packet_size = {}", size_b(p)).unwrap();
    }
    if let Some(p) = &w.markov_pause {
        writeln!(s, "pause = {p}").unwrap();
    }
    (s, matrix)
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// Loads a config text from the fuzz directory (writing its latency matrix first).
fn load(text: &str, matrix: Option<&str>) -> ExperimentConfig {
    let dir = base_dir();
    if let Some(m) = matrix {
        let name = format!("latency-{:016x}.csv", fnv(m));
        write_atomically(&dir.join(name), m.as_bytes());
    }
    onionlab_config::load_str(text, dir).unwrap_or_else(|e| panic!("the generated config is invalid:\n{e}\n---\n{text}"))
}

// ---------------------------------------------------------------- checks

/// Runs `cfg` with its invariants checked after every event, checks the tables, and runs it
/// again to check determinism.
fn check_run(cfg: &ExperimentConfig) -> Result<(), TestCaseError> {
    let seed = cfg.experiment.seeds[0];
    let mut violation: Option<String> = None;
    let mut events = 0u64;
    let mut inspect = |tor: &onionlab_tor::TorNetwork| {
        events += 1;
        // Every event at first, then every 64th: the checks walk every flow's unacked
        // segments, quadratic in long runs with deep send buffers.
        if violation.is_none() && (events <= 20_000 || events.is_multiple_of(64)) {
            if let Err(e) = tor.check_invariants() {
                violation = Some(format!("after event {events}: {e}"));
            }
        }
    };
    let out = run_inspected(cfg, seed, None, Some(&mut inspect));
    prop_assert!(violation.is_none(), "invariant violated {}", violation.unwrap());
    let out = match out {
        Ok(out) => out,
        // A valid config may still describe a network without a path for some client (no
        // three distinct Fast relays with positive weight for its guard): a clean error.
        Err(SimError::Tor { source: TorError::NoPath(_) | TorError::NoWeightedRelay(_), .. }) => {
            if std::env::var_os("FUZZ_STATS").is_some() {
                eprintln!("nopath: {}", out.as_ref().err().unwrap());
            }
            prop_assert_eq!(run(cfg, seed, None).err(), out.err());
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("the run failed: {e}"))),
    };
    if std::env::var_os("FUZZ_STATS").is_some() {
        let c = &out.summary.counters;
        let k = [
            "circuits_built",
            "circuits_closed_queue_limit",
            "circuits_expired",
            "circuits_closed_idle",
            "channels_closed_idle",
            "streams_completed",
            "streams_failed",
            "cells_dropped",
            "braids_tickets_spent",
            "braids_cells_low_latency",
            "braids_cells_high_throughput",
        ];
        let nz: Vec<&str> = k.iter().copied().filter(|k| c.get(*k).is_some_and(|&n| n > 0)).collect();
        let throttled = out.relays.iter().any(|r| r.throttled_connections > 0);
        eprintln!(
            "ok: {} events, {} downloads, {} relays, throttled {throttled}, {nz:?}",
            out.summary.events,
            out.downloads.len(),
            cfg.relays.len()
        );
    }
    check_tables(cfg, &out)?;

    let again = run(cfg, seed, None).map_err(|e| TestCaseError::fail(format!("the second run failed: {e}")))?;
    prop_assert_eq!(&again.downloads, &out.downloads);
    prop_assert_eq!(&again.relays, &out.relays);
    prop_assert_eq!(&again.connections, &out.connections);
    prop_assert_eq!(&again.channels, &out.channels);
    prop_assert_eq!(&again.summary.counters, &out.summary.counters);
    prop_assert_eq!(&again.summary.classes, &out.summary.classes);
    prop_assert_eq!(again.summary.events, out.summary.events);
    Ok(())
}

fn check_tables(cfg: &ExperimentConfig, out: &RunOutput) -> Result<(), TestCaseError> {
    let end = cfg.experiment.duration.as_secs_f64();
    let warmup = cfg.experiment.warmup.as_secs_f64();
    let eps = 1e-9;

    // Downloads: in the measured window, times ordered, totals per class add up.
    let mut totals: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for d in &out.downloads {
        prop_assert!(d.start >= warmup - eps && d.start <= end + eps, "{d:?}");
        prop_assert!(d.received <= d.size, "{d:?}");
        let t = totals.entry(&*d.class).or_default();
        t.0 += 1;
        match d.error.as_deref() {
            Some(UNFINISHED) => {
                t.3 += 1;
                // Cut short by the end: it had not received everything, and has no ttlb.
                prop_assert!(d.received < d.size && d.ttlb.is_none(), "{d:?}");
                prop_assert!(d.ttfb.is_none_or(|t| d.start + t <= end + eps), "{d:?}");
            }
            Some(_) => t.1 += 1,
            None => {
                t.2 += d.size;
                prop_assert_eq!(d.received, d.size, "{:?}", d);
                let (ttfb, ttlb) = (d.ttfb.expect("completed downloads have a ttfb"), d.ttlb.expect("and a ttlb"));
                prop_assert!(0.0 <= ttfb && ttfb <= ttlb + eps, "{d:?}");
                prop_assert!(d.start + ttlb <= end + eps, "finished after the end: {d:?}");
                prop_assert!(!d.path.is_empty(), "{d:?}");
            }
        }
    }
    for (class, t) in &out.summary.classes {
        let (n, errors, bytes, unfinished) = totals.get(class.as_str()).copied().unwrap_or_default();
        prop_assert_eq!((t.downloads, t.errors, t.bytes, t.unfinished), (n, errors, bytes, unfinished), "class {}", class);
    }
    prop_assert_eq!(out.summary.classes.len(), cfg.clients.len());
    let c = &out.summary.counters;
    let ok = out.downloads.iter().filter(|d| d.error.is_none()).count() as u64;
    let failed = out.downloads.iter().filter(|d| d.error.as_deref().is_some_and(|e| e != UNFINISHED)).count() as u64;
    prop_assert!(c["streams_completed"] >= ok, "{c:?}");
    prop_assert!(c["streams_failed"] >= failed, "{c:?}");
    prop_assert!(c["cells_emitted"] >= c["cells_consumed"] + c["cells_dropped"], "{c:?}");

    // Relay table: one row per relay per metrics interval, within the relay's buckets.
    let operators: u32 = cfg.clients.iter().filter_map(|g| g.relay_operators.map(|o| o.count)).sum();
    let relays = cfg.relays.len() + operators as usize;
    let interval = cfg.experiment.metrics_interval;
    let ticks = cfg.experiment.duration.as_nanos() / interval.as_nanos();
    prop_assert_eq!(out.relays.len() as u64, relays as u64 * ticks);
    let iv = interval.as_secs_f64();
    let refill = cfg.tor.refill_interval.as_secs_f64();
    for r in &out.relays {
        let Some(rc) = cfg.relays.iter().find(|c| *c.name == *r.relay) else { continue };
        // Tokens at the start (at most a burst) plus the refills within the interval.
        let most = rc.bandwidth_burst as f64 + rc.bandwidth_rate as f64 * (iv + refill) + 1.0;
        prop_assert!((r.bytes_written as f64) <= most && (r.bytes_read as f64) <= most, "{r:?} over {most} bytes");
        prop_assert!(r.throttled_connections <= r.client_connections, "{r:?}");
        prop_assert!(r.bucket_empty_s <= iv + refill + eps, "{r:?}");
    }

    // Connection table: only relays with a per-connection limit throttle.
    let limits = |name: &str| {
        cfg.relays
            .iter()
            .find(|c| c.name == name)
            .is_none_or(|c| c.perconn.is_some() || c.throttling != ThrottlingConfig::None || c.tortoise.is_some())
    };
    // Circuits are limited one by one only by Tortoise with limit_unit = "circuit".
    let per_circuit = |name: &str| {
        cfg.relays.iter().find(|c| c.name == name).is_none_or(|c| c.tortoise.as_ref().is_some_and(|t| t.limit_unit == "circuit"))
    };
    for c in &out.connections {
        prop_assert!(c.circuit_throttle_rate.is_none() || per_circuit(&c.relay), "{c:?}");
    }
    // A connection is held back by its own bucket only where there is one, and for at most
    // one refill interval per refill in the sample.
    let civ = cfg.experiment.connection_metrics_interval.map_or(0.0, |d| d.as_secs_f64());
    for c in &out.connections {
        prop_assert!(c.throttle_rate.is_none() || limits(&c.relay), "{c:?}");
        prop_assert!(c.bucket_empty_s == 0.0 || limits(&c.relay), "{c:?}");
        prop_assert!(c.bucket_empty_s >= 0.0 && c.bucket_empty_s <= civ + refill + eps, "{c:?}");
    }

    // Channel table: relay-to-relay ends only, present only when asked for; only open
    // circuits hold cells, and an active circuit holds at least one.
    prop_assert!(cfg.experiment.channel_metrics_interval.is_some() || out.channels.is_empty());
    // Configured relays, and client operators' relays (named as build.rs names them; a run
    // shorter than one metrics interval has no relay rows to find them in).
    let operator_relays: Vec<String> = cfg
        .clients
        .iter()
        .flat_map(|g| (0..g.relay_operators.map_or(0, |o| o.count)).map(move |i| format!("{}{}-relay", g.name, i)))
        .collect();
    let is_relay = |name: &str| cfg.relays.iter().any(|c| c.name == name) || operator_relays.iter().any(|r| r == name);
    for c in &out.channels {
        prop_assert!(c.relay != c.peer && is_relay(&c.relay) && is_relay(&c.peer), "{c:?}");
        prop_assert!(c.active_circuits <= c.circuits && c.queued_cells >= c.active_circuits, "{c:?}");
    }
    Ok(())
}

/// Renders a generated config, loads it (it must be valid) and runs [`check_run`] on it;
/// a failure carries the config's text.
fn check_generated(g: &Gen) -> Result<(), TestCaseError> {
    let (text, matrix) = render(g);
    let cfg = load(&text, matrix.as_deref());
    if std::env::var_os("FUZZ_STATS").is_some() {
        eprintln!("CONFIG\n{text}\nEND");
    }
    check_run(&cfg).map_err(|e| TestCaseError::fail(format!("{e}\n---\n{text}")))
}

/// `PROPTEST_CASES` when set to a number, else `default`.
fn cases_or(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    // CI runs the debug profile (tests build with opt-level 2): 24 cases take a few seconds.
    // PROPTEST_CASES overrides the 24 (a literal `cases` would override the variable).
    #![proptest_config(ProptestConfig { cases: cases_or(24), max_shrink_iters: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_configs_run_with_invariants_and_deterministically(g in config(false)) {
        check_generated(&g)?;
    }

    /// Extreme values anywhere in their valid ranges: rates and sizes up to petabytes,
    /// timers every 10 us, windows, queues and buffers of one byte or cell.
    #[test]
    fn wild_valid_configs_run_with_invariants_and_deterministically(g in config(true)) {
        check_generated(&g)?;
    }
}

// ---------------------------------------------------------------- regressions

/// Three relays, one web client, one server: the smallest network that runs. Regression
/// cases add or replace lines.
const SMALL: &str = r#"
[experiment]
duration = "10 s"
seeds = [1]

[tor]

[network]
latency = { constant = "5 ms" }

[[relays]]
name = "guard"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast"]

[[relays]]
name = "middle"
bandwidth = "1 MiB/s"
flags = ["Fast"]

[[relays]]
name = "exit"
bandwidth = "1 MiB/s"
flags = ["Exit", "Fast"]

[[clients]]
name = "web"
workload = "web"
count = 1

[servers]
count = 1

[workloads.web]
type = "web"
size = "20 KiB"
think = "100 ms"
"#;

fn small_with(from: &str, to: &str) -> ExperimentConfig {
    assert!(SMALL.contains(from));
    let text = SMALL.replacen(from, to, 1);
    onionlab_config::load_str(&text, Path::new(".")).unwrap_or_else(|e| panic!("{e}\n---\n{text}"))
}

#[test]
fn the_small_network_runs() {
    let cfg = small_with("", "");
    check_run(&cfg).unwrap();
    let out = run(&cfg, 1, None).unwrap();
    assert!(out.downloads.iter().filter(|d| d.error.is_none()).count() > 5, "{:?}", out.summary);
}

/// A send buffer smaller than the request: the exit wrote the request to the server in one
/// call and asserted that all of it fit (a panic in debug builds; in release the server
/// waited for the rest forever and no download finished). It now writes the rest when the
/// socket becomes writable. Without optimistic data the same holds once the request's DATA
/// cells are all in.
#[test]
fn a_send_buffer_smaller_than_the_request() {
    for optimistic in ["true", "false"] {
        let tor = format!("[tor]\nsndbuf = \"8 KiB\"\nrequest_size = \"20 KiB\"\noptimistic_data = {optimistic}\n");
        let cfg = small_with("[tor]\n", &tor);
        check_run(&cfg).unwrap();
        let out = run(&cfg, 1, None).unwrap();
        assert!(
            out.downloads.iter().any(|d| d.error.is_none()),
            "optimistic_data = {optimistic}: downloads finish: {:?}",
            out.summary.counters
        );
    }
}

/// A partial `bandwidth_weights` table (or a weight above 10000) passed validation, and
/// the run then failed to build ("bandwidth_weights.Wgg: missing"). Validation now asks for
/// the eleven weights a consensus line gives, each at most 10000.
#[test]
fn partial_bandwidth_weights_are_rejected_by_validation() {
    let with = |w: &str| {
        SMALL.replace("latency = { constant = \"5 ms\" }", &format!("latency = {{ constant = \"5 ms\" }}\nbandwidth_weights = {{ {w} }}"))
    };
    let errs = onionlab_config::load_str(&with("Wgg = 5000"), Path::new(".")).unwrap_err();
    assert!(errs.at("network.bandwidth_weights").is_some_and(|e| e.message.contains("missing Wgm")), "{errs}");
    let full =
        "Wgg = 5806, Wgm = 5806, Wgd = 0, Wmg = 4194, Wmm = 10000, Wme = 0, Wmd = 0, Weg = 10000, Wem = 10000, Wee = 10000, Wed = 10000";
    let errs = onionlab_config::load_str(&with(&full.replace("Wmm = 10000", "Wmm = 20000")), Path::new(".")).unwrap_err();
    assert!(errs.at("network.bandwidth_weights.Wmm").is_some(), "{errs}");
    let cfg = onionlab_config::load_str(&with(full), Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    check_run(&cfg).unwrap();
}
