"""Reproduction of "Throttling Tor Bandwidth Parasites" (Jansen, Syverson, Hopper, USENIX
Security 2012): figure 3, table 1, the parameter sweep the paper does not report, and the
anonymity analysis of section 5 (figure 4a probing; attacks 1 and 2, figures 4b/4c; attack 3).

**Owns:** the ``onionlab reproduce throttling`` command: its options, the order of its steps
(sweep, main runs, analysis, figures) and what it writes. **Must not touch:** the algorithms
(``crates/onionlab-mech``) or the model.

The steps live in their own modules:

- ``configs``: the paper's network and workloads as generated configs (50 relays from the
  2010 consensus, 950 web clients fetching 320 KiB with think times, 25/50/100 bulk clients
  fetching 5 MiB, 200 servers; the think time calibrated to table 1's vanilla split). Every
  relay runs the algorithm ("network-wide deployments"); the circuit scheduler is round
  robin throughout;
- ``sweep``: the parameter sweep and the choice;
- ``metrics``: table 1, figure 3's medians, queues and throttle state from a run;
- ``anonymity``: the probe and attacks 1-3;
- ``figures``: figures 3 and 4a-c;
- ``findings``: each of the paper's findings judged on the runs' numbers, pooled and seed
  by seed (``findings.csv``);
- ``pooling``: a finished output directory's runs joined with more seeds of its own
  configs, and the findings judged on them (``tools/throttling_pooled_findings.py``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from onionlab.argtypes import at_least, check_warmup, check_whole_steps, duration, positive_duration, positive_float
from onionlab.reproduce import Given, quick_settings, reuse_options, reuse_sources, run_many, write_config, write_summary
from onionlab.reproduce.throttling.attack4 import DEFAULT_FACTOR, DEFAULT_GUARDS, attack4
from onionlab.reproduce.throttling.anonymity import EMPTY_SETS, PEAK_STEP_S, TIMING_STEP_S, VANILLA_RATES, attack3, medium_load_attacks, probe, summarise
from onionlab.reproduce.throttling.configs import (
    ALGORITHMS, ATTACK_POOLS, DEFAULT_PATH_ORDER, LATENCIES, LOADS, PATH_ORDERS, REFILL_PHASES, RELAYS_FILE, SAMPLES, THINK, UNTHROTTLED, attack_pool, check_relay_sample, client_settings,
    config_text, load_params, mechanism_line, network_relays_text, place_network, relay_bandwidths, sample_in_use, seconds, think_median, tor_settings,
)
from onionlab.reproduce.throttling.figures import figure3, figure4
from onionlab.reproduce.throttling.findings import findings, per_seed_numbers, print_findings
from onionlab.reproduce.throttling.metrics import (
    CHANNEL_STEP_S, THROTTLE_STATE_COLUMNS, busiest_channels, data_by_class, medians, throttle_state,
)
from onionlab.reproduce.throttling.sweep import SWEEP_CRITERIA, grid_overrides, sweep, sweep_loads, sweep_settings

DESCRIPTION = "Throttling Tor Bandwidth Parasites (2012): figure 3, table 1, parameter sweep, anonymity analysis (figure 4)"

#: Table 1 of the paper, verbatim: (total GiB, web %, bulk %).
PAPER_TABLE1 = {
    "light": {"vanilla": (88.3, 74.5, 25.5), "static": (80.3, 83.7, 16.3), "split": (78.3, 85.9, 14.1), "flag": (72.1, 92.7, 7.3), "thresh": (69.8, 90.1, 9.9)},
    "medium": {"vanilla": (92.2, 65.8, 34.2), "static": (88.6, 72.4, 27.6), "split": (84.7, 75.0, 25.0), "flag": (77.7, 86.2, 13.8), "thresh": (76.3, 82.8, 17.2)},
    "heavy": {"vanilla": (94.7, 55.8, 44.2), "static": (91.1, 60.5, 39.5), "split": (85.0, 64.3, 35.7), "flag": (81.7, 75.4, 24.6), "thresh": (85.0, 71.2, 28.8)},
}


def _cellq(text: str) -> tuple:
    """`HIGH,LOW` for --cellq: two whole numbers, LOW below HIGH."""
    try:
        high, low = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HIGH,LOW (two whole numbers, e.g. 256,64), got {text!r}") from None
    if not 0 <= low < high:
        raise argparse.ArgumentTypeError(f"LOW must be below HIGH and not negative, got {text!r}")
    return (high, low)


def _attack3_sizes(text: str) -> list[int]:
    """``--attack3-sizes``: attack 3's response sizes per malicious server, comma-separated
    (e.g. "1 MiB,4 MiB"), each positive, none repeated."""
    from onionlab._core import parse_size

    sizes = []
    for part in text.split(","):
        try:
            n = int(parse_size(part.strip()))
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{part.strip()!r}: {e}") from None
        if n <= 0:
            raise argparse.ArgumentTypeError(f"each size must be positive, got {part.strip()!r}")
        if n in sizes:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is repeated in {text!r}")
        sizes.append(n)
    return sizes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", action=Given, type=int, default=5, help="seeds per configuration (default 5, as in the paper)")
    p.add_argument("--duration", action=Given, type=positive_duration, default="20 min", help='simulated time per main run (default "20 min")')
    p.add_argument("--warmup", action=Given, type=duration, default="4 min", help='warm-up excluded from metrics (default "4 min")')
    p.add_argument("--sweep-seeds", action=Given, type=int, default=2, help="seeds per sweep point (default 2); the choice is the best mean of per-seed medians")
    p.add_argument(
        "--sweep-first-seed", type=int, default=1, metavar="N",
        help="the sweep's seeds are N, N+1, ... (default 1: seeds 1-2, which the main runs also use, so the choice is judged "
        "partly on the seeds it was made on; a seed above --seeds holds the choice out from the runs that judge it)",
    )
    p.add_argument("--sweep-duration", action=Given, type=positive_duration, help="simulated time per sweep run (default: --duration, so the choice is made on runs like the ones it is used for)")
    p.add_argument("--sweep-warmup", action=Given, type=duration, help="warm-up of sweep runs (default: --warmup)")
    p.add_argument(
        "--sweep-loads", metavar="LOADS",
        help="loads to sweep at, comma-separated (default medium, spec 9's). With several, each algorithm gets the one "
        "setting whose web download time relative to vanilla's, averaged over the loads, is lowest: tuned once for every load",
    )
    p.add_argument(
        "--criterion", choices=tuple(SWEEP_CRITERIA),
        help="what the sweep minimises, per seed then averaged over seeds: the median web download time (default, the "
        "paper's) or the mean, which counts in full the slow downloads of clients a setting starves, and those the run's "
        "end cuts short at the time they had run",
    )
    p.add_argument("--think", choices=sorted(THINK), default="heavy", help="web think-time distribution (default heavy; smooth is the earlier, narrower lognormal)")
    p.add_argument(
        "--think-median", metavar="DURATION", type=positive_duration,
        help="the think time's median, its sigma kept (default: the one calibrated on the sample in the path order in use, for heavy 8 s on quantiles, 2.5 s on deciles, 1.8 s on deciles guard-first); to recalibrate the "
        "vanilla split after --capacity-scale",
    )
    p.add_argument(
        "--capacity-scale", metavar="K", type=positive_float, default=1.0,
        help="multiply every relay's bandwidth by K (default 1). If the paper's table 1 totals (about 90 GiB) are per "
        "60-minute run, they are what a network of about 4 times the built-in sample's capacity delivers",
    )
    p.add_argument("--quick", action="store_true", help="a small version (1 seed, 3 simulated minutes, two sweep points) for tests; options given beside it keep their values")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep; use the parameters in --params")
    p.add_argument("--params", metavar="FILE", help="chosen parameters (a chosen.json from an earlier run) for --no-sweep")
    p.add_argument(
        "--guards", choices=("consensus", "all"), default="consensus",
        help="which relays may be entry guards: the sample's Guard-flagged relays (default, 14 of 50, the consensus's proportion) "
        "or all 50, as the paper's anonymity analysis states (\"Since there are 50 guards\")",
    )
    p.add_argument(
        "--attack-pool", choices=ATTACK_POOLS, default="guards",
        help="the attacker's candidate guards in attacks 1 and 2: the relays clients may take as guards (default; the maximum "
        "entropy is log2 of their number) or every relay of the sample, spec 7.4's letter (\"all 50 relays as potential "
        "guards\"), which keeps relays no client uses as candidates; the same with --guards all",
    )
    p.add_argument(
        "--empty-set", choices=EMPTY_SETS, default="nothing",
        help="what attacks 1 and 2 count for a target whose anonymity set is empty (spec 7.4: \"report max loss or skip; "
        "state the policy used\"): nothing, loss 0, the paper's \"an attacker can learn nothing\" (default); skip, left out of "
        "the mean and the CDFs; max, the maximum loss",
    )
    p.add_argument(
        "--vanilla-rate", choices=VANILLA_RATES, default="bandwidth",
        help="what attacks 1 and 2 read as a guard's rate under vanilla: its bandwidth (default; the paper's \"distribution on "
        "guard bandwidth\") or what its busiest client connection carried each minute, a stand-in for spec 7.4's \"measured "
        "probe throughput through g\"",
    )
    p.add_argument("--entry-guards", type=int, default=3, help="entry guards per client (default 3, tor 0.2.2's NumEntryGuards; spec M14 says one is enough)")
    p.add_argument(
        "--path-order", choices=PATH_ORDERS, default=DEFAULT_PATH_ORDER,
        help="the order a client draws a circuit's relays in: tor's exit first, then one of its entry guards outside the "
        "exit's family and /16 (default; tor 0.2.2's choose_random_entry, the tor of the paper's Shadow runs, and the "
        "model's default), or the model's earlier guard first, then an exit outside it (this reproduction's default until "
        "2026-11-28, which the guard-first sections of docs/reproductions/throttling-details.md ran)",
    )
    p.add_argument(
        "--predicted-circuits", action="store_true",
        help="clients keep two circuits ready, as tor does (predicted circuits; default off: circuits are built when a stream needs one)",
    )
    p.add_argument(
        "--cbt-learning", action="store_true",
        help="clients also launch tor 0.2.2's circuit-build-time test circuits, one a minute up to 12 clean (implies --predicted-circuits)",
    )
    p.add_argument(
        "--no-optimistic-data", dest="optimistic_data", action="store_false",
        help="clients send a stream's request only once CONNECTED arrives, one circuit round trip later, as tor 0.2.2 (the "
        "paper's Shadow ran 0.2.2.15) did; default: it rides with BEGIN, tor's optimistic data since 0.2.3.3-alpha",
    )
    p.add_argument(
        "--refill-phase", choices=REFILL_PHASES, default="aligned",
        help="aligned: every relay refills its buckets at the same whole seconds (the default); random: each at its own "
        "offset, drawn from the seed, as separate tor processes' once-a-second timers do",
    )
    p.add_argument(
        "--unthrottled", choices=UNTHROTTLED, default="paper",
        help="what flagging and threshold leave when they lift a connection's throttle: paper, no bucket (the paper's rate "
        "of infinity; default), so a throttle set again starts from a full 2 MiB burst; or code, the bucket kept at the "
        "relay's BandwidthRate with its tokens and burst, as the authors' tor code does (spec 3)",
    )
    p.add_argument(
        "--congestion-control", choices=("fixed-window", "vegas"), default="fixed-window",
        help="circuits' flow control: tor 0.2.2's fixed SENDME windows (default, the tor of the paper) or today's proposal 324 Vegas",
    )
    p.add_argument(
        "--cellq", type=_cellq, metavar="HIGH,LOW",
        help="exits stop reading a circuit's streams at HIGH queued cells and resume at LOW (tor 0.2.2: 256,64; default off)",
    )
    p.add_argument(
        "--weights", choices=("uniform", "computed", "computed-v9"),
        help="path-selection bandwidth weights (default: the sample's; uniform but for --sample shadow, as the 2010 consensus "
        "has no weights line): uniform, what tor's directory authorities compute for the relays (dir-spec 3.8.3), or what "
        "tor 0.2.2.10-0.2.2.16's computed (consensus method 9; the paper's authority ran 0.2.2.15)",
    )
    p.add_argument(
        "--grid", action="append", metavar="ALG.PARAM=V1,V2,...",
        help="replace one axis of the sweep (spec 9's ranges), e.g. thresh.fraction=0.05,0.1,0.2,0.4 or "
        "\"flag.flag_rate=2 KiB/s,5 KiB/s\"; repeatable. The sweep names chosen values on an axis's edge in sweep_edges.json",
    )
    p.add_argument(
        "--sample", choices=tuple(SAMPLES), default="quantiles",
        help="the built-in relay sample: from the 2010-01-12 consensus, quantiles (default; flag classes at bandwidth "
        "quantiles, 36 MiB/s), deciles (as Shadow's 2011 generator drew the paper's network: 40 %% exits, one relay per "
        "bandwidth decile, 143 MiB/s) or shadow (that draw as the paper's Shadow network ran it: flags voted by its tor "
        "0.2.2.15 authority, the authority a 100 MiB/s Guard+Exit relay, method-9 weights, 1024/3584 KiB/s client links); "
        "or paper (the paper's own 2011-04-27 consensus, drawn and run as shadow is, 360 MiB/s); "
        "each has its own calibrated think time",
    )
    p.add_argument(
        "--latency", choices=LATENCIES, default="constant",
        help="latency between hosts: 40 ms one way between any two (default), or regions: the nine regions of the paper's "
        "Shadow network generator with the median PlanetLab-measured latency between them (12-195 ms one way), relays in "
        "the region of their address's country, clients spread evenly over the nine, servers over the four US and western "
        "European ones, as the generator placed them; a --relays file then gives each relay's location itself",
    )
    p.add_argument(
        "--relays", metavar="FILE",
        help="the relay sample, a [[relays]] TOML file (default: the built-in 50 relays from the 2010-01-12 consensus); "
        "tools/relays_from_consensus.py --seed S draws others with the same flag proportions. The think time stays "
        "calibrated on the default built-in sample; not with --sample",
    )
    p.add_argument(
        "--attack3-sizes", type=_attack3_sizes, metavar="SIZES",
        help='attack 3\'s response size per malicious server, comma-separated (default "1 MiB", the paper\'s beta/2). '
        "Under flagging, 2 x the size throttles a connection only where it exceeds about B/N x H / ln 2 (the guard's "
        'meta-EWMA); on a network with a large fair share add larger sizes, e.g. "1 MiB,4 MiB,8 MiB"',
    )
    p.add_argument(
        "--attack4-factor", type=float, default=DEFAULT_FACTOR, metavar="F",
        help=f"attack 4: each of its three steps multiplies the attacked guard's client connections by F (default {DEFAULT_FACTOR:g}: "
        "the attacker opens as many connections as the guard had, then twice, then four times as many)",
    )
    p.add_argument(
        "--attack4-guards", type=int, default=DEFAULT_GUARDS, metavar="N",
        help=f"attack 4: how many guards are attacked, one run each, the busiest first (default {DEFAULT_GUARDS}; 0 skips attack 4)",
    )
    p.add_argument("--jobs", type=at_least(1), help="parallel runs (default: the CPUs)")
    p.add_argument(
        "--reuse-runs", action="store_true",
        help="load any run already under DIR/runs whose resolved config and seeds are the same (whatever its name) instead "
        "of running it again: runs are deterministic, so the results are those a fresh run gives, provided the runs were "
        "made by this version of onionlab. For example, a sweep widened with --grid or --sweep-loads reruns only its new points",
    )
    p.add_argument(
        "--reuse-runs-from", action="append", metavar="DIR2",
        help="with or without --reuse-runs, also load matching runs from DIR2/runs, another output directory of this command "
        "(repeatable; DIR's own runs come first). They are copied into DIR/runs; DIR2 is only read. For example, rerun "
        "an earlier output with --criterion mean without sweeping again",
    )


def main(out: Path, args) -> int:
    if args.quick:  # each unless the command line gave it
        quick_settings(args, seeds=1, duration="3 min", warmup="1 min", sweep_seeds=1, sweep_duration=None, sweep_warmup=None)
    if args.seeds < 1:
        raise ValueError(f"--seeds: must be at least 1, got {args.seeds}")
    check_warmup(args.duration, args.warmup)
    check_warmup(
        *sweep_settings(args),
        "--sweep-duration" if args.sweep_duration else "--sweep-duration (default --duration)",
        "--sweep-warmup" if args.sweep_warmup else "--sweep-warmup (default --warmup)",
    )
    # The main runs sample client connections every minute (table 1's data, attacks 1 and
    # 2); the sweep's runs only the relays, every second.
    check_whole_steps(args.duration, 60.0, "--duration", "the per-connection table is sampled every minute")
    check_whole_steps(
        sweep_settings(args)[0], 1.0, "--sweep-duration" if args.sweep_duration else "--sweep-duration (default --duration)",
        "the relays table is sampled every second",
    )
    if args.sweep_seeds < 1:
        raise ValueError(f"--sweep-seeds: must be at least 1, got {args.sweep_seeds}")
    if args.sweep_first_seed < 1:
        raise ValueError(f"--sweep-first-seed: must be at least 1, got {args.sweep_first_seed}")
    if not (math.isfinite(args.attack4_factor) and args.attack4_factor > 1):
        raise ValueError(f"--attack4-factor: must be a number above 1, got {args.attack4_factor:g}")
    if args.attack4_guards < 0:
        raise ValueError(f"--attack4-guards: must be at least 0, got {args.attack4_guards}")
    reuse_sources(args.reuse_runs_from)  # a bad --reuse-runs-from fails before any run
    relays_text = network_relays_text(args)
    client_settings(args)  # a --think shape not calibrated on the sample fails before any run
    relays = check_relay_sample(relays_text, args)
    (out / "configs").mkdir(parents=True, exist_ok=True)
    relays_file = RELAYS_FILE
    placed_text, network_files = place_network(relays_text, args)
    for fname, body in network_files.items():
        (out / "configs" / fname).write_text(body, encoding="utf-8")
    (out / "configs" / relays_file).write_text(placed_text, encoding="utf-8")
    relay_bw = relay_bandwidths(relays)
    pool_bw = attack_pool(relays, args.attack_pool)

    if args.no_sweep and args.grid:
        raise ValueError("--grid: has no effect with --no-sweep (the parameters come from --params)")
    if args.no_sweep and args.sweep_loads:
        raise ValueError("--sweep-loads: has no effect with --no-sweep (the parameters come from --params)")
    sweep_loads(args.sweep_loads)  # a bad --sweep-loads fails before any run
    if args.no_sweep and args.criterion:
        raise ValueError("--criterion: has no effect with --no-sweep (the parameters come from --params)")
    args.criterion = args.criterion or "median"
    overrides = grid_overrides(args.grid)  # a bad --grid fails before any run
    if args.no_sweep:
        if not args.params:
            raise ValueError("--no-sweep needs --params FILE (a chosen.json)")
        chosen = load_params(args.params, relays_text, args)
    else:
        chosen = sweep(out, args, relays_file, overrides)
    print("chosen parameters: " + json.dumps(chosen, sort_keys=True), flush=True)

    seeds = list(range(1, args.seeds + 1))
    exps = []
    for load, bulk in LOADS.items():
        for alg in ALGORITHMS:
            name = f"{load}-{alg}"
            # Medium load feeds the anonymity analysis (finer samples; see TIMING_STEP_S).
            ci = "60 s" if load != "medium" else f"{TIMING_STEP_S:g} s" if alg == "flag" else f"{PEAK_STEP_S:g} s"
            chan = f"{CHANNEL_STEP_S:g} s" if load == "medium" else None
            text = config_text(
                name, bulk, mechanism_line(alg, chosen[alg], args.unthrottled), args.duration, args.warmup, relays_file,
                conn_interval=ci, chan_interval=chan, **client_settings(args),
            )
            exps.append((name, write_config(out, name, text), seeds))
    print(f"main runs: {len(exps)} configurations x {len(seeds)} seeds", flush=True)
    runs = run_many(exps, out, args.jobs, **reuse_options(args))
    results = {(load, alg): runs[f"{load}-{alg}"] for load in LOADS for alg in ALGORITHMS}

    warmup_s = seconds(args.warmup)
    rows = []
    for (load, alg), res in results.items():
        data = data_by_class(res, warmup_s)
        web, bulk = data.get("web", 0.0), data.get("bulk", 0.0)
        total = web + bulk
        p_total, p_web, p_bulk = PAPER_TABLE1[load][alg]
        rows.append({
            "load": load, "algorithm": alg,
            "data_GiB": round(total, 3), "web_pct": round(100 * web / total, 1) if total else math.nan, "bulk_pct": round(100 * bulk / total, 1) if total else math.nan,
            "paper_data_GiB": p_total, "paper_web_pct": p_web, "paper_bulk_pct": p_bulk,
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in medians(res, end_s=seconds(args.duration)).items()},
        })
    table1 = pd.DataFrame(rows)
    table1.to_csv(out / "table1.csv", index=False)
    figure3(results, out / "figure3.png")

    anon = medium_load_attacks({alg: results[("medium", alg)] for alg in ALGORITHMS}, pool_bw, chosen["flag"], warmup_s, args.empty_set, args.vanilla_rate)
    anon.to_csv(out / "anonymity.csv", index=False)
    channels = pd.concat([busiest_channels(results[("medium", alg)], warmup_s).assign(algorithm=alg) for alg in ALGORITHMS], ignore_index=True)
    channels = channels[["algorithm", *[c for c in channels.columns if c != "algorithm"]]]
    channels.to_csv(out / "channels.csv", index=False)
    state = pd.DataFrame(
        [{"load": load, **throttle_state(res, alg, chosen[alg], warmup_s)} for (load, alg), res in results.items()],
        columns=THROTTLE_STATE_COLUMNS,
    ).round(3)
    state.to_csv(out / "throttle_state.csv", index=False)
    empty = "" if args.empty_set == "nothing" else f" (empty sets: {args.empty_set})"
    figure4(anon, "attack1", out / "figure4b.png", f"Figure 4b: information leaked by circuit throughput (attack 1){empty}", len(pool_bw))
    figure4(anon, "attack2-observed", out / "figure4c.png", f"Figure 4c: information leaked by throttle rates (attack 2){empty}", len(pool_bw))
    figure4(anon, "attack2", out / "figure4c-flood.png", f"Attack 2 with a flood: every throttle rate revealed{empty}", len(pool_bw))
    anon_summary = summarise(anon, ["attack", "algorithm"])
    anon_summary.to_csv(out / "anonymity_summary.csv", index=False)
    summarise(anon, ["attack", "algorithm", "class"]).to_csv(out / "anonymity_by_class.csv", index=False)
    probe_res = probe(out, args, relays_file)
    attack_seeds = seeds[:2]  # attacks 3 and 4 run their own experiments, on two seeds at most
    a3 = attack3(out, args, relays_file, chosen, attack_seeds)
    a4 = None
    if args.attack4_guards:
        a4 = attack4(out, args, relays_file, relays, relay_bw, chosen, attack_seeds, results[("medium", "vanilla")])
    verdicts = findings(per_seed_numbers(results, warmup_s), anon, a3, a4)
    verdicts.to_csv(out / "findings.csv", index=False)

    summary = {
        "seeds": seeds, "duration": args.duration, "warmup": args.warmup, "chosen": chosen, "think": args.think, "think_median": think_median(args), "sample": args.sample,
        "capacity_scale": args.capacity_scale, "latency": args.latency, "guards": args.guards, "attack_pool": args.attack_pool, "attack_pool_size": len(pool_bw), "empty_set": args.empty_set, "vanilla_rate": args.vanilla_rate, "relays": args.relays or "built-in", "unthrottled": args.unthrottled, **tor_settings(args),
        "client_links": list(sample_in_use(args)[1].client_links),
        "sweep": dict(zip(("seeds", "first_seed", "duration", "warmup", "grid", "criterion", "loads"),
                          (args.sweep_seeds, args.sweep_first_seed, *sweep_settings(args), args.grid or [], args.criterion, sweep_loads(args.sweep_loads)))) if not args.no_sweep else None,
        "table1": rows, "probe": probe_res,
        "anonymity": anon_summary.to_dict(orient="records"),
        "attack3": a3.to_dict(orient="records"),
        "attack3_sizes": list(dict.fromkeys(a3["response_size"])),
        "attack4": a4.to_dict(orient="records") if a4 is not None else None,
        "throttle_state": state.to_dict(orient="records"),
        "findings": json.loads(verdicts.to_json(orient="records")),
    }
    write_summary(out / "summary.json", summary, sort_keys=True)
    _print_report(table1, anon_summary, probe_res)
    print("\nAttack 3 (linking two streams through the shared burst bucket):")
    print(a3.to_string(index=False))
    if a4 is not None:
        print("\nAttack 4 (opening connections to a guard; AUC 0.5: no information, 1: the guard confirmed):")
        print(a4[["algorithm", "class", "positives", "negatives", "auc", "auc_se", "true_positive_rate", "false_positive_rate", "positive_ratio", "negative_ratio"]].to_string(index=False))
    print_findings(verdicts)
    sweep_files = "" if args.no_sweep else " sweep.csv, sweep_per_seed.csv, chosen.json, sweep_edges.json, sweep_margins.csv,"
    attack4_files = " attack4*.csv," if a4 is not None else ""
    print(f"wrote {out}: table1.csv, figure3.png,{sweep_files} anonymity*.csv, figure4[abc].png, figure4c-flood.png, attack3.csv,{attack4_files} channels.csv, throttle_state.csv, findings.csv, summary.json")
    return 0


def _print_report(table1: pd.DataFrame, anon: pd.DataFrame, probe_res: dict) -> None:
    cols = ["load", "algorithm", "data_GiB", "web_pct", "bulk_pct", "paper_web_pct", "paper_bulk_pct", "web_ttfb_median", "web_ttlb_median", "bulk_ttlb_median", "web_unfinished_pct"]
    print("\nTable 1 (ours beside the paper's) and medians (s):")
    print(table1[cols].to_string(index=False))
    print("\nAnonymity (medium load):")
    print(anon.to_string(index=False))
    print(f"\nProbe (figure 4a): estimated {probe_res['estimated_rate_KiBps']:.2f} KiB/s (true 5), burst spent after {probe_res['burst_done_s']:.0f} s")
