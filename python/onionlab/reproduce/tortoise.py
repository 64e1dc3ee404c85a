"""Reproduction of Tortoise (Moore, Wacek, Sherr, "Exploring the Potential Benefits of
Expanded Rate Limiting in Tor: Slow and Steady Wins the Race With Tortoise", ACSAC 2011):
experiments E0-E10 of the spec, the throughput tables with the paper's numbers beside ours,
client-bandwidth CDFs, and the anonymity-set consideration of section 4.2.

**Owns:** the paper's network and workloads as generated configs, the experiment matrix,
the metric (mean client bandwidth: each download's size over its time, averaged per client,
then over clients) and the outputs. **Must not touch:** the mechanism
(``crates/onionlab-mech/src/tortoise.rs``) or the model.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab.argtypes import at_least, check_warmup, check_whole_steps, duration, positive_duration, positive_float
from onionlab.reproduce import Given, add_reuse_arguments, quick_settings, reuse_options, run_many, write_config, write_summary
from onionlab.stats import ecdf

DESCRIPTION = "Tortoise (2011): universal ingress rate limit, client-relays, partial deployment; experiments E0-E10"

#: Paper numbers (mean client bandwidth, KBps), spec section 4.
PAPER = {
    "E0": {"all": 41, "web": 40, "bulk": 70},
    "E1": {"web": 34, "bulk": 49, "all": 35},  # section 5.2 (the bulk drop is quoted for 200 KBps; -30% at 100)
    "E2": {"bulk": 49},
    "E3": {"all": 52},
    "E4": {"all": 68},
    "E5": {"all": 43},
    "E6": {"all": 56},
    "E10a": {"all": 42},
    "E10b": {"all": 44},
    "E10c": {"all": 54},
}
#: Relative changes the paper reports against E0 (section 4.12).
PAPER_CHANGE = {"E1": {"web": -15, "bulk": -30}, "E2": {"web": -15, "bulk": -31}, "E3": {"all": 27}, "E4": {"all": 66},
                "E5": {"all": 3.1}, "E6": {"all": 36}, "E7": {"all": 0.7}, "E8": {"all": 31}}

# Client population (spec 3.2, 3.5): 870 web and 30 bulk, 90 % residential (asymmetric), 10 %
# institutional (symmetric). Per-country NetIndex speeds are not published with the paper;
# we use one residential (10 Mbit down, 2 Mbit up) and one institutional (10/10 Mbit) profile.
GROUPS = [("web-res", "web", 783, "10 Mbit", "2 Mbit"), ("web-inst", "web", 87, "10 Mbit", "10 Mbit"),
          ("bulk-res", "bulk", 27, "10 Mbit", "2 Mbit"), ("bulk-inst", "bulk", 3, "10 Mbit", "10 Mbit")]
#: Client-relays (spec 3.7: use the counts, 2 bulk + 18 web, and 4 + 36), per group.
OPERATORS = {0: {}, 20: {"web-res": 16, "web-inst": 2, "bulk-res": 2}, 40: {"web-res": 32, "web-inst": 4, "bulk-res": 4}}

#: `--client-links tiers`: a spread of access links standing in for the per-country NetIndex
#: table (an assumption, not data): 30 % fast (20 Mbit down / 4 up), 40 % medium (8 / 1),
#: 30 % slow (2 / 0.5); 90 % residential, 10 % institutional (symmetric) in each tier.
TIERS = [("fast", 0.3, "20 Mbit", "4 Mbit"), ("mid", 0.4, "8 Mbit", "1 Mbit"), ("slow", 0.3, "2 Mbit", "0.5 Mbit")]
TIER_OPERATORS = {
    0: {},
    20: {"web-res-fast": 5, "web-res-mid": 7, "web-res-slow": 4, "web-inst-mid": 2, "bulk-res-mid": 1, "bulk-res-fast": 1},
    40: {"web-res-fast": 10, "web-res-mid": 14, "web-res-slow": 8, "web-inst-mid": 2, "web-inst-fast": 2,
         "bulk-res-mid": 2, "bulk-res-fast": 1, "bulk-res-slow": 1},
}


def tier_groups() -> list[tuple[str, str, int, str, str]]:
    g = []
    for kind, n in (("web", 870), ("bulk", 30)):
        for tname, share, down, up in TIERS:
            res, inst = round(n * 0.9 * share), round(n * 0.1 * share)
            if res:
                g.append((f"{kind}-res-{tname}", kind, res, down, up))
            if inst:
                g.append((f"{kind}-inst-{tname}", kind, inst, down, down))
    return g


def experiments() -> dict[str, dict]:
    """The spec's matrix (3.8). rate in KBps (None: unmodified), share of original relays
    enforcing, client-relays, client scale."""
    e = {
        "E0": dict(rate=None, share=1.0, ops=0, scale=1.0),
        "E1": dict(rate=100, share=1.0, ops=0, scale=1.0),
        "E2": dict(rate=200, share=1.0, ops=0, scale=1.0),
        "E3": dict(rate=None, share=1.0, ops=20, scale=1.0),
        "E4": dict(rate=None, share=1.0, ops=40, scale=1.0),
        "E5": dict(rate=100, share=1.0, ops=20, scale=1.0),
        "E6": dict(rate=100, share=1.0, ops=40, scale=1.0),
        "E7": dict(rate=200, share=1.0, ops=20, scale=1.0),
        "E8": dict(rate=200, share=1.0, ops=40, scale=1.0),
        # +20 % clients, no added relays; "before" is E0 / E5 / E7 (spec 4.7's suggested default).
        "E9a": dict(rate=None, share=1.0, ops=0, scale=1.2),
        "E9b": dict(rate=100, share=1.0, ops=20, scale=1.2),
        "E9c": dict(rate=200, share=1.0, ops=20, scale=1.2),
        "E10a": dict(rate=100, share=0.5, ops=0, scale=1.0),
        "E10b": dict(rate=100, share=0.5, ops=20, scale=1.0),
        "E10c": dict(rate=100, share=0.5, ops=40, scale=1.0),
    }
    return e


#: How `--partial` picks the relays that enforce in the 50 % experiments (E10).
PARTIAL_CHOICES = ("balanced", "random")


def enforcing_relays(bandwidths: list[float], share: float, pick: str = "balanced") -> set[int]:
    """The indices of the ceil(share * n) relays that enforce the limit. The paper says
    only "50% of the relays rate limit the clients" (section 5.3; which half is spec 4.8's
    gap). ``balanced``: of all sets of that size, the one whose share of the bandwidth is
    closest to `share` (first in lexicographic order on a tie): clients pick first hops by
    bandwidth, so a half that holds most of it limits most clients (the ``random`` pick
    below holds 93 % of it). ``random``: the first of a fixed shuffle (seed 2011), spec
    4.8's inferred default."""
    import itertools

    n = len(bandwidths)
    k = math.ceil(share * n)
    if pick == "random":
        order = list(range(n))
        np.random.default_rng(2011).shuffle(order)
        return set(order[:k])
    if pick != "balanced":
        raise ValueError(f"--partial: one of {', '.join(PARTIAL_CHOICES)}, got {pick!r}")
    if k >= n:
        return set(range(n))
    total = sum(bandwidths)
    best = min(itertools.combinations(range(n), k), key=lambda c: abs(sum(bandwidths[i] for i in c) / total - share))
    return set(best)


def relays_text(capacity_scale: float, share: float, rate_line: str, partial: str = "balanced") -> str:
    """The 15 relays, bandwidths scaled by `capacity_scale`; the relays
    :func:`enforcing_relays` picks enforce the limit, the others opt out."""
    from onionlab.config import tomllib

    src = Path(__file__).with_name("data") / "tortoise-relays.toml"
    relays = tomllib.loads(src.read_text(encoding="utf-8"))["relays"]
    kibs = [float(r["bandwidth"].split()[0]) * capacity_scale for r in relays]
    enforcing = enforcing_relays(kibs, share, partial) if share < 1 else set(range(len(relays)))
    out = []
    for i, (r, kib) in enumerate(zip(relays, kibs)):
        line = f'[[relays]]\nname = "{r["name"]}"\nbandwidth = "{kib:.0f} KiB/s"\nflags = ["Guard", "Exit", "Fast", "Stable"]\n'
        if rate_line and i not in enforcing:
            line += 'tortoise = "off"\n'
        out.append(line)
    return "\n".join(out)


#: What one Tortoise bucket pair limits (spec 1.2): each limited connection (the paper's
#: reading, the default) or each circuit over it (section 6's wording).
LIMIT_UNITS = ("connection", "circuit")


def config_text(name: str, spec: dict, duration: str, warmup: str, capacity_scale: float, links: str = "tiers", entry: str = "exempt",
                partial: str = "balanced", burst_seconds: float = 1.0, refill_interval: str = "1 s", limit_unit: str = "connection",
                optimistic_data: bool = True) -> str:
    """The config of experiment `name`. The paper gives no bucket burst or refill interval
    (spec 1.5): `burst_seconds` of the rate (default 1, B = R) and tor 0.2.1.28's refill
    once a second by default; spec 1.5 proposes B in {R, 2R} and 1 s or 100 ms as a sweep.
    `limit_unit`: spec 1.2's switch, written into the limit only when not the default (so
    default configs, and runs reused from them, stay as they were). `optimistic_data`
    false: the client sends its request only once CONNECTED comes back, as tor 0.2.1.28
    did (optimistic data came in 0.2.3.3-alpha); written only then, for the same reason."""
    if not burst_seconds > 0:
        raise ValueError(f"--burst-seconds: must be positive, got {burst_seconds}")
    if limit_unit not in LIMIT_UNITS:
        raise ValueError(f"--limit-unit: one of {', '.join(LIMIT_UNITS)}, got {limit_unit!r}")
    burst = "" if burst_seconds == 1.0 or not spec["rate"] else f', burst = "{spec["rate"] * burst_seconds:g} KB"'
    unit = "" if limit_unit == "connection" else f', limit_unit = "{limit_unit}"'
    rate_line = f'tortoise = {{ rate = "{spec["rate"]} KBps"{burst}{unit} }}' if spec["rate"] else ""
    groups = []
    ops = (TIER_OPERATORS if links == "tiers" else OPERATORS)[spec["ops"]]
    for gname, workload, count, down, up in (tier_groups() if links == "tiers" else GROUPS):
        n = int(round(count * spec["scale"]))
        op = ops.get(gname, 0)
        groups.append(
            f'[[clients]]\nname = "{gname}"\nworkload = "{workload}"\ncount = {n}\nlink_down = "{down}"\nlink_up = "{up}"\n'
            f'placement = "round_robin"\n' + (f'relay_operators = {{ count = {op}, entry = "{entry}" }}\n' if op else "")
        )
    return f"""# Generated by `onionlab reproduce tortoise`: {name}.
[experiment]
name = "{name}"
duration = "{duration}"
warmup = "{warmup}"
seeds = [1]

[tor]
refill_interval = "{refill_interval}"        # tor 0.2.1.28: "1 s"
use_entry_guards = false       # "Our setup does not utilize guard relays"
{"" if optimistic_data else "optimistic_data = false        # tor 0.2.1.28: the request follows CONNECTED" + chr(10)}
[network]
latency = {{ constant = "5 ms" }}   # "latencies between all nodes are less than 10ms"

{relays_text(capacity_scale, spec["share"], rate_line, partial)}
{chr(10).join(groups)}
[servers]
count = 40
link = "1 Gbit"

[workloads.web]
type = "web"
size = {{ dist = "choice", sizes = ["106 KB", "150 KB", "238 KB", "496 KB", "992 KB"], weights = [1, 1, 1, 1, 1] }}
think = {{ dist = "exponential", mean = "11 s" }}
session = {{ length = "15 min", pause = {{ dist = "uniform", min = "9 min", max = "11 min" }} }}

[workloads.bulk]
type = "bulk"
size = {{ dist = "choice", sizes = ["1 MB", "2 MB", "3 MB", "4 MB", "5 MB"], weights = [1, 1, 1, 1, 1] }}

[mechanisms]
scheduler = "round-robin"
{rate_line}
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", action=Given, type=int, default=2, help="seeds per experiment (default 2)")
    p.add_argument("--duration", action=Given, type=positive_duration, default="20 min", help='simulated time per run (default "20 min")')
    p.add_argument("--warmup", action=Given, type=duration, default="4 min", help='warm-up excluded from metrics (default "4 min")')
    p.add_argument("--capacity-scale", type=float, default=0.5,
                   help="relay bandwidth multiplier (default 0.5; see docs/reproductions/tortoise.md for the calibration)")
    p.add_argument("--client-links", choices=["flat", "tiers"], default="tiers",
                   help="tiers: a fast/medium/slow spread of access links (default); flat: residential 10/2 Mbit, institutional 10/10")
    p.add_argument("--operator-entry", choices=["bridge", "exempt"], default="exempt",
                   help="exempt: ordinary paths, recognised at every ingress (default); bridge: operators enter through their own relay")
    p.add_argument("--burst-seconds", type=positive_float, default=1.0,
                   help="each Tortoise bucket's burst in seconds of its rate (default 1: B = R; spec 1.5 sweeps 1 and 2)")
    p.add_argument("--refill-interval", type=positive_duration, default="1 s",
                   help='token-bucket refill interval (default "1 s", tor 0.2.1.28; spec 1.5 also "100 ms")')
    p.add_argument("--limit-unit", choices=LIMIT_UNITS, default="connection",
                   help="what one Tortoise bucket pair limits (spec 1.2): each limited connection (default, the paper's "
                        "per-connection limits) or each circuit over it (section 6's wording)")
    p.add_argument("--partial", choices=PARTIAL_CHOICES, default="balanced",
                   help="which half of the relays enforce in E10: balanced (half the relays holding half the bandwidth, default); "
                        "random (a fixed shuffle's first half, which holds 93 %% of it)")
    p.add_argument("--no-optimistic-data", dest="optimistic_data", action="store_false",
                   help="clients send each request only once CONNECTED comes back, as the paper's tor 0.2.1.28 did; "
                        "default: it rides with BEGIN (tor's optimistic data since 0.2.3.3-alpha)")
    p.add_argument("--quick", action="store_true", help="a small version (1 seed, 6 simulated minutes) for tests; options given beside it keep their values")
    p.add_argument("--only", nargs="+", metavar="E", help="run only these experiments (e.g. E0 E1)")
    p.add_argument("--jobs", type=at_least(1), help="parallel runs (default: the CPUs)")
    add_reuse_arguments(p)


def client_means(res) -> pd.DataFrame:
    """Per client of every run (every client of the config, whether it finished a download
    or not): mean download throughput (KBps, 1000 B/s) over its completed downloads (NaN
    for a client that completed none: it is starved, not absent), its class (web/bulk),
    whether it runs a relay, and its mean throughput over downloads of at least 900 KB
    (sustained rate, little affected by the bucket's burst)."""
    from onionlab import config as config_mod

    d = res.downloads
    d = d[d["error"].isna() & d["ttlb"].notna() & (d["ttlb"] > 0)].copy()
    d["kbps"] = d["size"] / d["ttlb"] / 1000.0
    means = d.groupby(["seed", "client"])["kbps"].mean()
    big = d[d["size"] >= 900_000].groupby(["seed", "client"])["kbps"].mean().rename("sustained_kbps")
    if getattr(res, "config", None):
        roster = config_mod.client_names(res.config)
        seeds = res.summary.get("seeds") or sorted(res.downloads["seed"].unique())
        per = pd.DataFrame([(int(s), c, g) for s in seeds for g, c in roster], columns=["seed", "client", "class"])
    else:
        # Hand-made results without a config: the clients with any download row.
        per = res.downloads[["seed", "client", "class"]].drop_duplicates().reset_index(drop=True)
    per = per.join(means, on=["seed", "client"]).join(big, on=["seed", "client"])
    per["kind"] = per["class"].str.split("-").str[0]
    # Operators are the first `count` clients of their group (relay names "<client>-relay").
    operators = set(res.relays["relay"][res.relays["relay"].str.endswith("-relay")].str[: -len("-relay")])
    per["relay_operator"] = per["client"].isin(operators)
    return per


def summarize(per: pd.DataFrame) -> dict[str, float]:
    """Mean client throughput per class and for relay operators, over the clients that
    completed a download; ``starved_web`` and ``starved_bulk``: clients per run that
    completed none (their throughput is unknown, not zero, so the means leave them out)."""
    out = {"all": per["kbps"].mean(), "web": per.loc[per.kind == "web", "kbps"].mean(), "bulk": per.loc[per.kind == "bulk", "kbps"].mean()}
    ops = per[per.relay_operator]
    out["operators"] = ops["kbps"].mean() if len(ops) else math.nan
    out["non_operators"] = per.loc[~per.relay_operator, "kbps"].mean()
    out["operators_bulk"] = ops.loc[ops.kind == "bulk", "kbps"].mean() if len(ops) else math.nan
    runs = max(1, per["seed"].nunique())
    for kind in ("web", "bulk"):
        out[f"starved_{kind}"] = float((per["kind"].eq(kind) & per["kbps"].isna()).sum()) / runs
    return {k: float(v) for k, v in out.items()}


def anonymity(per: pd.DataFrame, rate_kbps: float | None) -> dict:
    """Section 4.2: a throughput observer singles out clients whose sustained throughput
    (downloads of at least 900 KB) exceeds 1.5 times the universal limit, which only exempt
    (relay-running) clients can reach. Share of relay-running clients per class, and what
    the observer learns: how many fast senders there are (the anonymity set of a fast flow
    against all clients), how many of them run relays, and P(bulk | fast).

    ``per`` has one row per client per seed; an observer watches one run, so the fast
    senders are counted per run and averaged over the seeds (a count of rows would add up
    the seeds' runs against the clients of one)."""
    n = per.groupby("kind")["client"].nunique().to_dict()
    ops = per[per.relay_operator].groupby("kind")["client"].nunique().to_dict()
    res = {"operator_share_" + k: ops.get(k, 0) / n[k] for k in n}
    if rate_kbps:
        fast = per[per["sustained_kbps"] > 1.5 * rate_kbps]
        runs = max(1, per["seed"].nunique())
        res["fast_clients"] = len(fast) / runs
        res["fast_clients_relay_operators"] = int(fast.relay_operator.sum()) / runs
        res["fast_share_bulk"] = float((fast.kind == "bulk").mean()) if len(fast) else math.nan
        res["anonymity_set_fast"] = len(fast) / runs
        res["anonymity_set_all"] = int(per["client"].nunique())
    return res


#: The "before" of each +20 % clients experiment (spec 4.7's suggested default).
BEFORE = {"E9a": "E0", "E9b": "E5", "E9c": "E7"}

#: For each experiment with client-relays, the same network and limit without them: the
#: second baseline of an operator's gain (spec 4.5: the paper's is a gap, "report both").
WITHOUT_RELAYS = {"E3": "E0", "E4": "E0", "E5": "E1", "E6": "E1", "E7": "E2", "E8": "E2", "E10b": "E10a", "E10c": "E10a"}


def operator_gain_vs_same_clients(per: pd.DataFrame, without: pd.DataFrame) -> float:
    """Per cent by which the relay operators' mean bandwidth in `per` exceeds the same
    clients' (same seed, same name) mean in `without`, the run without client-relays, over
    the clients that completed a download in both; NaN without operators."""
    ops = per[per["relay_operator"] & per["kbps"].notna()][["seed", "client", "kbps"]]
    same = ops.merge(without[["seed", "client", "kbps"]].dropna(), on=["seed", "client"], suffixes=("", "_without"))
    if same.empty:
        return math.nan
    return round(100 * (same["kbps"].mean() / same["kbps_without"].mean() - 1), 1)


def throughput_table(rows: list[dict]) -> pd.DataFrame:
    """``throughput.csv`` from one row per experiment (its :func:`summarize` figures): each
    class's change against E0 (when E0 ran), the client-relays' gain over the same network's
    other clients (spec 4.5), and each +20 % clients experiment's drop against its before
    (spec 4.7)."""
    table = pd.DataFrame(rows)
    base = table.set_index("experiment")
    if "E0" in base.index:
        for k in ("all", "web", "bulk"):
            table[f"{k}_change_pct"] = (100 * (table[k] / base.loc["E0", k] - 1)).round(1)
        table["paper_change_pct"] = [json.dumps(PAPER_CHANGE.get(n, {})) for n in table.experiment]
    table["operator_gain_pct"] = (100 * (table["operators"] / table["non_operators"] - 1)).round(1)
    table["drop_vs_before_pct"] = [
        round(100 * (1 - base.loc[n, "all"] / base.loc[BEFORE[n], "all"]), 1) if n in BEFORE and BEFORE[n] in base.index else math.nan
        for n in table.experiment
    ]
    return table


def main(out: Path, args) -> int:
    if args.quick:  # each unless the command line gave it
        quick_settings(args, seeds=1, duration="6 min", warmup="1 min")
    if args.seeds < 1:
        raise ValueError(f"--seeds: must be at least 1, got {args.seeds}")
    check_warmup(args.duration, args.warmup)
    check_whole_steps(args.duration, 1.0, "--duration", "the relays table is sampled every second")
    if not args.capacity_scale > 0:
        raise ValueError(f"--capacity-scale: must be positive, got {args.capacity_scale}")
    exps = experiments()
    names = args.only or list(exps)
    unknown = [n for n in names if n not in exps]
    if unknown:
        raise ValueError(f"--only: unknown experiments {unknown} (known: {', '.join(exps)})")
    seeds = list(range(1, args.seeds + 1))
    jobs = [(n, write_config(out, n, config_text(n, exps[n], args.duration, args.warmup, args.capacity_scale, args.client_links, args.operator_entry, args.partial,
                                              args.burst_seconds, args.refill_interval, args.limit_unit, args.optimistic_data)), seeds)
            for n in names]
    print(f"tortoise: {len(jobs)} experiments x {len(seeds)} seeds", flush=True)
    results = run_many(jobs, out, args.jobs, **reuse_options(args))

    rows, anon_rows, pers = [], [], {}
    for n in names:
        per = client_means(results[n])
        pers[n] = per
        s = summarize(per)
        rows.append({"experiment": n, **{k: round(v, 2) for k, v in s.items()},
                     **{f"paper_{k}": v for k, v in PAPER.get(n, {}).items()}, **exps[n]})
        anon_rows.append({"experiment": n, **anonymity(per, exps[n]["rate"])})
    for row in rows:
        n = row["experiment"]
        b = WITHOUT_RELAYS.get(n)
        row["operator_gain_vs_same_clients_pct"] = operator_gain_vs_same_clients(pers[n], pers[b]) if b in pers else math.nan
    table = throughput_table(rows)
    table.to_csv(out / "throughput.csv", index=False)
    anon = pd.DataFrame(anon_rows)
    anon.to_csv(out / "anonymity.csv", index=False)
    _figures(pers, out)
    summary = {"seeds": seeds, "duration": args.duration, "warmup": args.warmup, "capacity_scale": args.capacity_scale, "client_links": args.client_links, "operator_entry": args.operator_entry,
               "partial": args.partial, "burst_seconds": args.burst_seconds, "refill_interval": args.refill_interval,
               "throughput": table.to_dict(orient="records"), "anonymity": anon.to_dict(orient="records")}
    if args.limit_unit != "connection":  # recorded when asked for; earlier summaries read as they did
        summary["limit_unit"] = args.limit_unit
    if not args.optimistic_data:
        summary["optimistic_data"] = False
    write_summary(out / "summary.json", summary, sort_keys=True)
    cols = [c for c in ["experiment", "all", "web", "bulk", "operators", "all_change_pct", "web_change_pct", "bulk_change_pct",
                        "operator_gain_pct", "operator_gain_vs_same_clients_pct", "drop_vs_before_pct", "starved_web", "starved_bulk", "paper_all", "paper_change_pct"] if c in table.columns]
    print("\nMean client bandwidth (KBps) and changes against E0:")
    print(table[cols].to_string(index=False))
    print("\nAnonymity (section 4.2):")
    print(anon.to_string(index=False))
    print(f"wrote {out}: throughput.csv, anonymity.csv, figures, summary.json")
    return 0


def _figures(pers: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("figure3_rate_limits.png", ["E0", "E1", "E2"], "Rate limiting, no client-relays (fig. 3)"),
              ("figure6_altruistic.png", ["E0", "E3", "E4"], "Added relays, no rate limit (fig. 6)"),
              ("figure7_tortoise.png", ["E0", "E1", "E5", "E6", "E2", "E7", "E8"], "Tortoise with client-relays (fig. 7)"),
              ("figure8_more_clients.png", ["E0", "E9a", "E5", "E9b", "E7", "E9c"], "+20 % clients (fig. 8)"),
              ("figure10_partial.png", ["E1", "E10a", "E5", "E10b", "E6", "E10c"], "Half the relays enforce (fig. 10)")]
    for fname, names, title in panels:
        names = [n for n in names if n in pers]
        if not names:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, kind in zip(axes, ("web", "bulk")):
            for n in names:
                x, y = ecdf(pers[n].loc[pers[n].kind == kind, "kbps"])
                if len(x):
                    ax.step(x, y, where="post", label=n)
            ax.set_xscale("log")
            ax.set_xlabel(f"client bandwidth (KBps), {kind} clients")
            ax.set_ylabel("cumulative fraction of clients")
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[1]:  # a short run may have no client of a kind
                ax.legend(fontsize=8)
            else:
                ax.text(0.5, 0.5, f"no {kind} client measured", ha="center", va="center", transform=ax.transAxes)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
