"""Reproduction of PredicTor (Döpmann, Fiedler, Lucia, Tschorsch, "Optimization-Based
Predictive Congestion Control for the Tor Network: Opportunities and Challenges", ACM TOIT
2022): the toy topology of section 5.2 (figure 1), table 1's
latency, throughput and fairness columns for PredicTor, vanilla Tor and PCTCP, and figures 4
and 5 (rates and backlog over time).

**Owns:** the toy topology and its two scenarios as generated configs, the table with the
paper's numbers beside ours, the findings and the figures. **Must not touch:** the controller
(``crates/onionlab-mech/src/predictor``) or the model; byte-wise latency comes from the
``circuits`` table (``onionlab_tor::transit``).

The setup (spec ``predictor.md`` 9.2, the authors' scripts where the paper is silent): six
relays, three circuits ``entry_i -> btlnk -> exit``, circuits 1 and 2 sharing ``exit1``;
4 Mbit/s at the bottleneck relay, 10 Mbit/s elsewhere; 40 ms one-way between any two relays,
so the theoretical minimum latency from an exit to an entry is 80 ms, as in the paper. The
paper's entry relays are the clients' endpoints (the client proxy was disabled); here each
client sits beside its entry relay with no propagation delay, so its last hop adds only a
10 Mbit/s cell's transmission time. Scenario 1 (latency): circuits 1 and 3 download without
end, circuit 2 fetches 200 KiB objects with 2 s pauses ("stops and restarts"). Scenario 2
(throughput): all three download without end. Measured after the first 4 s (the authors'
lead time). Vanilla and PCTCP run tor's own circuit windows (1000 cells, SENDME every 100),
the paper being silent (the authors' scripts used 500/50: ``--circ-window 500``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab.argtypes import at_least, check_whole_steps, positive_duration
from onionlab.reproduce import Given, add_reuse_arguments, markdown_table, quick_settings, reuse_options, run_many, write_config
from onionlab.stats import byte_latency

DESCRIPTION = "PredicTor (2022): the toy topology's table 1 (latency, throughput, fairness) against vanilla Tor and PCTCP; figures 4 and 5"

VARIANTS = ("predictor", "vanilla", "pctcp")
LABELS = {"predictor": "PredicTor", "vanilla": "Vanilla", "pctcp": "PCTCP"}

#: Table 1 of the paper (latency from scenario 1 in ms, throughput from scenario 2 in KB/s).
PAPER_LATENCY_MS = {
    "predictor": [91.7, 98.7, 93.7, 93.5],
    "vanilla": [534.7, 545.4, 572.1, 553.1],
    "pctcp": [601.6, 697.5, 654.2, 635.5],
}
PAPER_RATE_KBS = {
    "predictor": [134.2, 134.1, 134.1, 402.4],
    "vanilla": [102.5, 102.5, 197.3, 402.3],
    "pctcp": [130.9, 143.9, 130.5, 405.3],
}
PAPER_MAXMIN_KBS = [136.7, 136.7, 136.7, 410.1]
PAPER_F = {"predictor": 0.981, "vanilla": 0.685, "pctcp": 0.953}
#: The theoretical minimum latency (two 40 ms hops), ours and the paper's.
MIN_LATENCY_MS = 80.0
#: The share of a relay's bandwidth PredicTor plans with (the authors' 0.85), and the max-min
#: reference's: see :func:`fair_rates`.
CAPACITY_FRACTION = 0.85
#: Payload bytes of a cell, and the bytes a relay's token buckets charge for one: a 514-byte
#: cell and its share of TLS records' overhead (``onionlab_tor::cell::CELL_WIRE_BYTES``, 543).
#: The controller plans its capacity in these cells, so the max-min reference must too.
PAYLOAD, CELL = 498, 543

#: Locations of the latency matrix: each entry relay shares one with its client.
ENTRIES = ("entry1", "entry2", "entry3")
TOY_BANDWIDTH = {"entry1": 1_250_000, "entry2": 1_250_000, "entry3": 1_250_000, "btlnk": 500_000, "exit1": 1_250_000, "exit2": 1_250_000}
CIRCUITS = (("circuit1", "entry1", "exit1"), ("circuit2", "entry2", "exit1"), ("circuit3", "entry3", "exit2"))
LOCATIONS = {"entry1": 0, "entry2": 1, "entry3": 2, "btlnk": 3, "exit1": 4, "exit2": 5, "servers": 6}
HOP_MS = 40


def uniform_latency_matrix(n: int) -> str:
    """One-way latencies (ms) between ``n`` locations: 40 ms between distinct ones, none
    within one (a client and its entry relay share a location)."""
    return "\n".join(",".join("0" if i == j else str(HOP_MS) for j in range(n)) for i in range(n)) + "\n"


def latency_matrix() -> str:
    """The toy topology's latency matrix (locations: :data:`LOCATIONS`)."""
    return uniform_latency_matrix(len(LOCATIONS))


def tor_lines(variant: str, window: int) -> list[str]:
    """The ``[tor]`` section of a variant: the circuit window, and a channel per circuit for
    PCTCP."""
    return ["[tor]", f"circ_window = {window}", f"circ_window_increment = {max(1, window // 10)}",
            f"channel_per_circuit = {'true' if variant == 'pctcp' else 'false'}", ""]


def config_text(scenario: int, variant: str, duration: str, window: int, interval: str) -> str:
    """The toy topology (figure 1) as an onionlab config."""
    if scenario not in (1, 2):
        raise ValueError(f"scenario: 1 or 2, got {scenario}")
    if variant not in VARIANTS:
        raise ValueError(f"variant: one of {', '.join(VARIANTS)}, got {variant!r}")
    lines = [
        f"# PredicTor's toy topology (paper figure 1), scenario {scenario}, {LABELS[variant]}.",
        "# Generated by `onionlab reproduce predictor`.",
        "[experiment]",
        f'name = "toy-s{scenario}-{variant}"',
        f'duration = "{duration}"',
        'warmup = "1.2 s"              # the circuits start within it (the authors: 0.4-1.2 s)',
        "seeds = [1]",
        f'metrics_interval = "{interval}"',
        f'circuit_metrics_interval = "{interval}"',
        "",
        *tor_lines(variant, window),
        "[network]",
        'latency = { matrix = "toy-latency.csv" }',
        "",
    ]
    for name, link, flags in (
        *((e, "10 Mbit", '["Guard", "Fast", "Stable"]') for e in ENTRIES),
        ("btlnk", "4 Mbit", '["Fast"]'),
        ("exit1", "10 Mbit", '["Exit", "Fast"]'),
        ("exit2", "10 Mbit", '["Exit", "Fast"]'),
    ):
        lines += ["[[relays]]", f'name = "{name}"', f'bandwidth = "{TOY_BANDWIDTH[name]} B/s"', f'link = "{link}"', f"flags = {flags}",
                  f"location = {LOCATIONS[name]}", ""]
    for name, entry, exit_ in CIRCUITS:
        workload = "object" if scenario == 1 and name == "circuit2" else "endless"
        lines += ["[[clients]]", f'name = "{name}"', f'workload = "{workload}"', "count = 1", 'link = "10 Mbit"',
                  f"placement = {LOCATIONS[entry]}", f'path = ["{entry}", "btlnk", "{exit_}"]', ""]
    lines += ["[servers]", "count = 2", 'link = "1 Gbit"', f"placement = {LOCATIONS['servers']}", "",
              "[workloads.endless]", 'type = "bulk"', 'size = "1 GiB"                 # "infinite": the authors used 2^30 B', ""]
    if scenario == 1:
        lines += ["[workloads.object]", 'type = "web"', 'size = "200 KiB"', 'think = { dist = "fixed", value = "2 s" }', ""]
    lines += ["[mechanisms]", 'scheduler = "round-robin"']
    if variant == "predictor":
        lines += ["[mechanisms.predictor]                 # the paper's and its authors' defaults"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- random networks (5.3)

#: Section 5.3: 50 relays, every circuit a random sequence of three distinct relays. The
#: paper states neither bandwidths nor latency: every relay here has the toy topology's
#: 10 Mbit/s (1250 KB/s) and 40 ms to every other, and each client sits beside its entry.
RANDOM_RELAYS = 50
RANDOM_BANDWIDTH = 1_250_000
#: Latency fuzziness values (section 5.4; the paper does not list its values).
FUZZINESS = (0.0, 0.5, 1.0, 2.0)
#: Circuit counts (the paper: 10 to 1,000; 100 and 500 its "low" and "high" congestion).
RANDOM_CIRCUITS = (10, 25, 50, 100, 200)
# The tables' sampling intervals (s): the toy's, as fine as the authors' plots; the random
# networks', one second. A run must last a whole number of them.
TOY_STEP_S = 0.1
RANDOM_STEP_S = 1.0


def random_relay_names() -> list[str]:
    return [f"relay{i:02d}" for i in range(RANDOM_RELAYS)]


def random_paths(circuits: int, rep: int) -> dict[str, list[str]]:
    """Circuit name -> [entry, middle, exit]: three distinct relays drawn uniformly (the
    authors' code), a new network for every repetition ``rep`` (the paper: "a completely new
    random network for every single simulation run")."""
    if circuits < 1:
        raise ValueError(f"circuits: at least 1, got {circuits}")
    rng = np.random.default_rng([circuits, rep])
    names = random_relay_names()
    return {f"c{i:04d}": [names[j] for j in rng.choice(RANDOM_RELAYS, size=3, replace=False)] for i in range(circuits)}


def random_latency_matrix(fuzziness: float = 0.0, rep: int = 1) -> str:
    """Locations 0-49: one relay each (and the clients entering there); 50: the servers.

    With ``fuzziness`` f > 0 (section 5.4), each relay's spoke to the central router (half of
    the nominal 40 ms between two relays, the authors' star topology) is multiplied by a
    factor drawn from U[max(0.01, 1 - f), 1 + f] (the authors' epsilon of 0.01 l); two
    relays are the sum of their spokes apart. The servers keep the nominal spoke. The
    controller does not know: it has no latency in its model beyond the one-step delay of
    its neighbours' plans."""
    if fuzziness == 0:
        return uniform_latency_matrix(RANDOM_RELAYS + 1)
    if not fuzziness > 0:
        raise ValueError(f"fuzziness: must be at least 0, got {fuzziness}")
    rng = np.random.default_rng([RANDOM_RELAYS, rep, int(round(fuzziness * 1000))])
    spoke = np.full(RANDOM_RELAYS + 1, HOP_MS / 2)
    spoke[:RANDOM_RELAYS] *= rng.uniform(max(0.01, 1 - fuzziness), 1 + fuzziness, RANDOM_RELAYS)
    n = len(spoke)
    return "\n".join(",".join("0" if i == j else f"{spoke[i] + spoke[j]:.3f}" for j in range(n)) for i in range(n)) + "\n"


def random_config_text(circuits: int, rep: int, variant: str, duration: str, window: int, interval: str,
                       matrix: str = "random-latency.csv", name: str | None = None, web: frozenset = frozenset()) -> str:
    """A random network of section 5.3 with ``circuits`` endless bulk circuits, repetition
    ``rep`` (its seed and its paths), its latencies from the CSV ``matrix``; the circuits
    named in ``web`` fetch web pages instead (section 5.5)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: one of {', '.join(VARIANTS)}, got {variant!r}")
    names = random_relay_names()
    lines = [
        f"# PredicTor section 5.3: a random network, {circuits} circuits, repetition {rep}, {LABELS[variant]}.",
        "# Generated by `onionlab reproduce predictor`.",
        "[experiment]",
        f'name = "{name or f"random-n{circuits}-r{rep}-{variant}"}"',
        f'duration = "{duration}"',
        'warmup = "2 s"                # the circuits start within it',
        f"seeds = [{rep}]",
        f'metrics_interval = "{interval}"',
        f'circuit_metrics_interval = "{interval}"',
        "",
        *tor_lines(variant, window),
        "[network]",
        f'latency = {{ matrix = "{matrix}" }}',
        "",
    ]
    for i, name in enumerate(names):
        lines += ["[[relays]]", f'name = "{name}"', f'bandwidth = "{RANDOM_BANDWIDTH} B/s"', 'link = "10 Mbit"',
                  'flags = ["Guard", "Exit", "Fast", "Stable"]', f"location = {i}", ""]
    for c, path in random_paths(circuits, rep).items():
        lines += ["[[clients]]", f'name = "{c}"', f'workload = "{"page" if c in web else "endless"}"', "count = 1", 'link = "10 Mbit"',
                  f"placement = {names.index(path[0])}", f"path = {json.dumps(path)}", ""]
    lines += ["[servers]", "count = 5", 'link = "1 Gbit"', f"placement = {RANDOM_RELAYS}", "",
              "[workloads.endless]", 'type = "bulk"', 'size = "1 GiB"', ""]
    if web:
        lines += ["[workloads.page]                # section 5.5: 320 KB, then 1-2 s", 'type = "web"', 'size = "320 KB"',
                  'think = { dist = "uniform", min = "1 s", max = "2 s" }', ""]
    lines += ["[mechanisms]", 'scheduler = "round-robin"']
    if variant == "predictor":
        lines += ["[mechanisms.predictor]"]
    return "\n".join(lines) + "\n"


def random_row(res, circuits: int, rep: int, variant: str, lead: float) -> dict:
    """One random-network run: byte-weighted latency (the paper's, with the exit's queue;
    ``latency_after_exit_ms`` from the exit forwarding a byte, the authors' code's), total
    rate and F against the max-min fair rates of its paths."""
    c = res.circuits
    tot = byte_latency(c, start=lead, by=())
    per = byte_latency(c, start=lead, by=("class",)).set_index("class")
    paths = random_paths(circuits, rep)
    fair = fair_rates({r: RANDOM_BANDWIDTH for r in random_relay_names()}, paths)
    rates = (per["rate"] / 1000).reindex(list(paths)).fillna(0.0)
    return {"circuits": circuits, "rep": rep, "variant": LABELS[variant],
            "latency_ms": 1000 * float(tot["latency_with_exit_s"].iloc[0]), "latency_after_exit_ms": 1000 * float(tot["latency_s"].iloc[0]),
            "rate_kbs": float(rates.sum()), "maxmin_kbs": float(fair.sum()), "F": fairness(rates, fair),
            "solves_failed": int(res.summary["runs"][0]["counters"].get("predictor_failed_solves", 0))}


def by_variant(m: pd.DataFrame, index: str):
    """Latency, rate and F of the means table ``m`` as (``index`` x variant) tables, with the
    smallest and largest ``index``."""
    lat, rate, f = (m.pivot(index=index, columns="variant", values=col) for col in ("latency_ms", "rate_kbs", "F"))
    return lat, rate, f, lat.index.min(), lat.index.max()


def random_findings(m: pd.DataFrame) -> pd.DataFrame:
    """Section 5.3's findings, judged on the means over repetitions."""
    lat, rate, f, lo, hi = by_variant(m, "circuits")
    p, v, c = (LABELS[k] for k in VARIANTS)
    growth = {k: lat.loc[hi, k] / lat.loc[lo, k] for k in (p, v, c)}
    ratio = (rate[p] / rate[[v, c]].max(axis=1))
    trend = (f"PredicTor {lat.loc[lo, p]:.0f} -> {lat.loc[hi, p]:.0f} ms (x{growth[p]:.1f}); vanilla {lat.loc[lo, v]:.0f} -> "
             f"{lat.loc[hi, v]:.0f} (x{growth[v]:.1f}); PCTCP {lat.loc[lo, c]:.0f} -> {lat.loc[hi, c]:.0f} (x{growth[c]:.1f})")
    rows = [
        (f"PredicTor's latency is below the baselines' and grows less with the circuits ({lo} to {hi})", trend,
         bool(growth[p] < min(growth[v], growth[c]) and (lat[p] < lat[[v, c]].min(axis=1)).all())),
        ("PredicTor's latency is low independently of the number of circuits (taken as: grows by less than half)", trend,
         bool(growth[p] < 1.5)),
        ("PredicTor delivers less in total (paper: about 20 % less)",
         "PredicTor / best baseline: " + ", ".join(f"{n}: {r:.2f}" for n, r in ratio.items()), bool((ratio < 1).all())),
        ("PredicTor's F is around 0.9 at every circuit count (taken as: 0.8 to 1)",
         ", ".join(f"{n}: {x:.2f}" for n, x in f[p].items()), bool((f[p] >= 0.8).all())),
        ("under congestion the baselines are less fair than PredicTor",
         f"at {hi} circuits: PredicTor {f.loc[hi, p]:.2f}, vanilla {f.loc[hi, v]:.2f}, PCTCP {f.loc[hi, c]:.2f}",
         bool(f.loc[hi, p] > max(f.loc[hi, v], f.loc[hi, c]))),
        ("with little congestion the baselines are fairer than PredicTor",
         f"at {lo} circuits: PredicTor {f.loc[lo, p]:.2f}, vanilla {f.loc[lo, v]:.2f}, PCTCP {f.loc[lo, c]:.2f}",
         bool(min(f.loc[lo, v], f.loc[lo, c]) > f.loc[lo, p])),
    ]
    return pd.DataFrame(rows, columns=["finding", "ours", "reproduces"])


def fuzziness_findings(m: pd.DataFrame) -> pd.DataFrame:
    """Section 5.4's findings, judged on the means over repetitions."""
    lat, rate, f, lo, hi = by_variant(m, "fuzziness")
    p, v, c = (LABELS[k] for k in VARIANTS)
    rel = {k: lat.loc[hi, k] / lat.loc[lo, k] for k in (p, v, c)}
    drift = {k: max(abs(rate.loc[hi, k] / rate.loc[lo, k] - 1), abs(f.loc[hi, k] - f.loc[lo, k])) for k in (p, v, c)}
    rows = [
        ("latency grows with fuzziness for every variant (taken as: by more than 5 %)",
         ", ".join(f"{k} x{rel[k]:.2f}" for k in (p, v, c)), bool(all(r > 1.05 for r in rel.values()))),
        ("PredicTor's latency is affected much more than the baselines' (taken as: grows by more than 5 % and twice as much)",
         f"f {lo:g} -> {hi:g}: PredicTor x{rel[p]:.2f}, vanilla x{rel[v]:.2f}, PCTCP x{rel[c]:.2f}",
         bool(rel[p] > 1.05 and rel[p] - 1 > 2 * max(rel[v] - 1, rel[c] - 1))),
        ("PredicTor's latency stays below the baselines'",
         f"at f = {hi:g}: {lat.loc[hi, p]:.0f} against {lat.loc[hi, v]:.0f} and {lat.loc[hi, c]:.0f} ms",
         bool(lat.loc[hi, p] < min(lat.loc[hi, v], lat.loc[hi, c]))),
        ("PredicTor's throughput and F are less affected than the baselines'",
         ", ".join(f"{k}: rate x{rate.loc[hi, k] / rate.loc[lo, k]:.2f}, F {f.loc[lo, k]:.2f} -> {f.loc[hi, k]:.2f}" for k in (p, v, c)),
         bool(drift[p] <= min(drift[v], drift[c]))),
    ]
    return pd.DataFrame(rows, columns=["finding", "ours", "reproduces"])


#: Section 5.5: the share of web circuits (the paper: 90 % of 300).
WEB_SHARE = 0.9


def web_circuits(circuits: int, rep: int) -> frozenset:
    """The circuits of a mixed network that fetch web pages: ``WEB_SHARE`` of them, drawn per
    repetition."""
    names = list(random_paths(circuits, rep))
    rng = np.random.default_rng([circuits, rep, 55])
    k = int(round(WEB_SHARE * circuits))
    return frozenset(names[i] for i in rng.choice(circuits, size=k, replace=False))


def mixed_latencies(res, circuits: int, rep: int, variant: str, lead: float) -> pd.DataFrame:
    """Per circuit of a mixed run: its kind (web or bulk) and byte-wise latency (ms, the
    paper's: from the exit taking a byte in; ``latency_after_exit_ms`` from its forwarding
    it) after ``lead`` s; circuits that delivered nothing then are left out."""
    per = byte_latency(res.circuits, start=lead, by=("class",))
    web = web_circuits(circuits, rep)
    per = per[per["cells_delivered"] > 0]
    return pd.DataFrame({"circuits": circuits, "rep": rep, "variant": LABELS[variant], "circuit": per["class"],
                         "kind": np.where(per["class"].isin(web), "web", "bulk"), "latency_ms": 1000 * per["latency_with_exit_s"],
                         "latency_after_exit_ms": 1000 * per["latency_s"]})


def mixed_summary(lat: pd.DataFrame) -> pd.DataFrame:
    """Median, 90th and 99th percentile of the circuits' latencies, per variant and kind."""
    g = lat.groupby(["variant", "kind"], sort=False)["latency_ms"]
    return pd.DataFrame({"circuits": g.size(), "median_ms": g.median(), "p90_ms": g.quantile(0.9),
                         "p99_ms": g.quantile(0.99)}).reset_index()


def mixed_findings(m: pd.DataFrame) -> pd.DataFrame:
    """Section 5.5's findings on the per-circuit latencies."""
    k = m.set_index(["variant", "kind"])
    p, v, c = LABELS["predictor"], LABELS["vanilla"], LABELS["pctcp"]
    rows = [
        ("PredicTor achieves low latency for its circuits (web and bulk) in mixed traffic: below the baselines' for most circuits",
         "; ".join(f"{kind} median {k.loc[(p, kind), 'median_ms']:.0f} against {k.loc[(v, kind), 'median_ms']:.0f} / "
                   f"{k.loc[(c, kind), 'median_ms']:.0f} ms" for kind in ("web", "bulk")),
         bool(all(k.loc[(p, kind), "median_ms"] < min(k.loc[(v, kind), "median_ms"], k.loc[(c, kind), "median_ms"]) for kind in ("web", "bulk")))),
        ("the baselines' web circuits show a long tail of very high latency (taken as: their 90th percentile over twice PredicTor's)",
         f"web p90: PredicTor {k.loc[(p, 'web'), 'p90_ms']:.0f}, vanilla {k.loc[(v, 'web'), 'p90_ms']:.0f}, PCTCP {k.loc[(c, 'web'), 'p90_ms']:.0f} ms",
         bool(min(k.loc[(v, "web"), "p90_ms"], k.loc[(c, "web"), "p90_ms"]) > 2 * k.loc[(p, "web"), "p90_ms"])),
    ]
    return pd.DataFrame(rows, columns=["finding", "ours", "reproduces"])


def mixed_figure(lat: pd.DataFrame, path: Path) -> None:
    """Figure 13: CDFs of the circuits' byte-wise latency, web and bulk, per variant."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.6))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, v in enumerate(VARIANTS):
        for kind, style in (("web", "-"), ("bulk", "--")):
            x = np.sort(lat[(lat["variant"] == LABELS[v]) & (lat["kind"] == kind)]["latency_ms"].to_numpy())
            if len(x):
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), style, color=f"C{i}", label=f"{LABELS[v]}, {kind}")
    ax.set_xscale("log")
    ax.set_xlabel("byte-wise latency per circuit (ms)")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def random_figure(m: pd.DataFrame, path: Path) -> None:
    """Figures 7a, 7b and 9b: latency, total throughput and F against the circuit count."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    for ax, col, label in zip(axes, ("latency_ms", "rate_kbs", "F"), ("latency (ms)", "total rate (KB/s)", "fairness index F")):
        for v in VARIANTS:
            g = m[m["variant"] == LABELS[v]]
            ax.plot(g["circuits"], g[col], marker="o", label=LABELS[v])
        ax.set_xscale("log")
        ax.set_xlabel("circuits")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", action=Given, type=int, default=3, help="seeds per configuration (default 3; the paper ran one)")
    p.add_argument("--duration", action=Given, type=positive_duration, default="30 s", help='simulated time per run (default "30 s"; the authors: 7.5 s)')
    p.add_argument("--lead", type=float, default=4.0, help="seconds left out at the start (default 4, the authors')")
    p.add_argument("--circ-window", type=int, default=1000,
                   help="vanilla and PCTCP's circuit window in cells (default 1000, tor's; the authors' scripts: 500)")
    p.add_argument("--circuits", action=Given, default=",".join(map(str, RANDOM_CIRCUITS)),
                   help=f"random networks (section 5.3): circuit counts, comma-separated (default {','.join(map(str, RANDOM_CIRCUITS))}; "
                        "'none' skips them)")
    p.add_argument("--reps", action=Given, type=int, default=3, help="random networks per circuit count (default 3; the paper: 25)")
    p.add_argument("--random-duration", action=Given, type=positive_duration, default="12 s", help='simulated time per random-network run (default "12 s")')
    p.add_argument("--random-lead", action=Given, type=float, default=6.0,
                   help="seconds left out at the start of a random-network run (default 6; the paper: all but the last 2 s)")
    p.add_argument("--fuzziness", action=Given, default=",".join(map(str, FUZZINESS)),
                   help=f"latency fuzziness f (section 5.4), comma-separated (default {','.join(map(str, FUZZINESS))}; 'none' skips it)")
    p.add_argument("--fuzz-circuits", action=Given, type=int, default=100, help="circuits of the fuzziness runs (default 100, the paper's 'little congestion')")
    p.add_argument("--mixed-circuits", action=Given, type=int, default=100,
                   help="circuits of the mixed-traffic networks (section 5.5; default 100, the paper: 300; 0 skips them)")
    p.add_argument("--quick", action="store_true", help="a small version (1 seed, 10 s; one random network of 10 circuits) for tests; options given beside it keep their values")
    p.add_argument("--jobs", type=at_least(1), help="parallel runs (default: the CPUs)")
    add_reuse_arguments(p)


def circuit_rates(res, lead: float) -> pd.DataFrame:
    """Per seed and circuit (its client's group): byte-wise latency (ms) and rate (KB/s, 1000 B/s of
    payload) after ``lead`` seconds; the rows named ``Total`` pool the circuits of a seed
    (latency byte-weighted, rate summed). ``latency_ms`` is the paper's (section 5: from a
    byte entering the overlay, at the exit, to its delivery; definition 1's backlog counts
    the exit's queue too); ``latency_after_exit_ms`` leaves out the time in the exit's queue,
    as the authors' code measured it (spec 8: from the first relay forwarding a byte)."""
    per = byte_latency(res.circuits, start=lead, by=("seed", "class")).rename(columns={"class": "circuit"})
    tot = pd.concat([byte_latency(g, start=lead, by=()).assign(seed=s, circuit="Total") for s, g in res.circuits.groupby("seed")],
                    ignore_index=True)
    df = pd.concat([per, tot], ignore_index=True)
    df["latency_ms"] = 1000 * df["latency_with_exit_s"]
    df["latency_after_exit_ms"] = 1000 * df["latency_s"]
    df["rate_kbs"] = df["rate"] / 1000
    return df[["seed", "circuit", "latency_ms", "latency_after_exit_ms", "rate_kbs", "mean_backlog_cells"]]


def fairness(rates: pd.Series, fair: pd.Series | None = None) -> float:
    """The paper's fairness index F = 1 - sum |r_f - r| / sum r_f (section 5) of observed
    ``rates`` against the max-min fair rates ``fair`` (same index). Without ``fair``: against
    the equal split of the delivered total, which is the max-min fair split of what one shared
    bottleneck delivered (``F_split``: the split alone, throughput aside)."""
    if fair is None:
        total = float(rates.sum())
        if total <= 0:
            return float("nan")
        fair = pd.Series(total / len(rates), index=rates.index)
    fair = fair.reindex(rates.index)
    if fair.isna().any():
        raise ValueError(f"fairness: no max-min fair rate for {sorted(map(str, fair[fair.isna()].index))}")
    from onionlab import _core

    return _core.fairness_index(fair.astype(float).tolist(), rates.astype(float).tolist())


def fair_rates(bandwidth: dict[str, float], paths: dict[str, list[str]], fraction: float = CAPACITY_FRACTION) -> pd.Series:
    """The max-min fair rates (payload KB/s) of circuits ``paths`` (name -> relays) over relays
    of ``bandwidth`` (bytes/s on the wire): each relay's capacity is ``fraction`` of its
    bandwidth in cells of :data:`CELL` (543) bytes, what its token buckets charge a cell and
    what the controller plans with, counted in payload bytes (498 a cell). The paper's
    reference: its max-min column of table 1 (136.7 KB/s each, 410.1 in total) is
    PredicTor's planned 0.85 of the bottleneck (in its simulator's 512-byte cells, 413.4; in
    ours 389.8, which our PredicTor delivers). Until 2026-11-28 this took 514-byte cells,
    5.6 % above what the relays can forward."""
    from onionlab import _core

    relays = sorted(bandwidth)
    index = {r: i for i, r in enumerate(relays)}
    unknown = sorted({r for p in paths.values() for r in p} - set(index))
    if unknown:
        raise ValueError(f"fair_rates: circuits cross relays with no bandwidth: {unknown}")
    caps = [bandwidth[r] * fraction * PAYLOAD / CELL / 1000 for r in relays]
    names = list(paths)
    rates = _core.max_min_fair(caps, [[index[r] for r in paths[n]] for n in names])
    return pd.Series(rates, index=names)


def table1(s1: dict, s2: dict, lead: float) -> pd.DataFrame:
    """Table 1: per circuit and in total, our latency (scenario 1) and rate (scenario 2), mean
    over seeds, with the paper's beside them; and F per variant."""
    rows = []
    names = ["circuit1", "circuit2", "circuit3", "Total"]
    fair = fair_rates(TOY_BANDWIDTH, {c: [e, "btlnk", x] for c, e, x in CIRCUITS})
    for v in VARIANTS:
        lat = circuit_rates(s1[v], lead).groupby("circuit")[["latency_ms", "latency_after_exit_ms"]].mean()
        r2 = circuit_rates(s2[v], lead)
        thr = r2.groupby("circuit")["rate_kbs"].mean()
        per = r2[r2["circuit"] != "Total"]
        f = per.groupby("seed").apply(lambda g: fairness(g.set_index("circuit")["rate_kbs"], fair))
        f_split = per.groupby("seed")["rate_kbs"].apply(fairness)
        for i, n in enumerate(names):
            rows.append({
                "variant": LABELS[v], "circuit": n.replace("circuit", ""),
                "latency_ms": lat.loc[n, "latency_ms"], "paper_latency_ms": PAPER_LATENCY_MS[v][i],
                "latency_after_exit_ms": lat.loc[n, "latency_after_exit_ms"],
                "rate_kbs": thr.loc[n], "paper_rate_kbs": PAPER_RATE_KBS[v][i],
                "maxmin_kbs": fair.sum() if n == "Total" else fair.loc[n], "paper_maxmin_kbs": PAPER_MAXMIN_KBS[i],
                "F": f.mean() if n == "Total" else np.nan, "F_min_seed": f.min() if n == "Total" else np.nan,
                "paper_F": PAPER_F[v] if n == "Total" else np.nan, "F_split": f_split.mean() if n == "Total" else np.nan,
            })
    return pd.DataFrame(rows)


def findings(t: pd.DataFrame) -> pd.DataFrame:
    """The paper's section 5.2 findings, judged on our table 1."""
    tot = t[t["circuit"] == "Total"].set_index("variant")
    per = t[t["circuit"] != "Total"]
    p, v, c = (tot.loc[LABELS[k]] for k in VARIANTS)
    rows = [
        ("PredicTor's latency is far below vanilla's and PCTCP's (paper: 93 against 553 and 635 ms)",
         f"{p.latency_ms:.0f} against {v.latency_ms:.0f} and {c.latency_ms:.0f} ms",
         bool(p.latency_ms < 0.5 * min(v.latency_ms, c.latency_ms))),
        ("PredicTor's latency is near the theoretical minimum (paper: 93.5 against 80 ms)",
         f"{p.latency_ms:.0f} against {MIN_LATENCY_MS:.0f} ms", bool(p.latency_ms < 1.5 * MIN_LATENCY_MS)),
        ("PredicTor shares the bottleneck max-min fairly (paper: F = 0.98)", f"F = {p.F:.3f} (lowest seed {p.F_min_seed:.3f})",
         bool(p.F_min_seed >= 0.95)),
        ("vanilla discriminates circuits 1 and 2, which share a connection (paper: F = 0.68)",
         f"F = {v.F:.3f}; circuit 3 at {per[(per.variant == 'Vanilla') & (per.circuit == '3')].rate_kbs.iloc[0]:.0f} KB/s, "
         f"circuits 1-2 at {per[(per.variant == 'Vanilla') & (per.circuit != '3')].rate_kbs.mean():.0f}",
         bool(v.F < 0.8)),
        ("PCTCP revises this to some extent (paper: F = 0.95)", f"F = {c.F:.3f}", bool(c.F > v.F + 0.1)),
        ("the three deliver about the same in total (paper: 402-405 KB/s)",
         f"{p.rate_kbs:.0f} / {v.rate_kbs:.0f} / {c.rate_kbs:.0f} KB/s",
         bool(min(p.rate_kbs, v.rate_kbs, c.rate_kbs) > 0.9 * max(p.rate_kbs, v.rate_kbs, c.rate_kbs))),
    ]
    return pd.DataFrame(rows, columns=["finding", "ours", "reproduces"])


def figure_over_time(s1: dict, column: str, ylabel: str, path: Path, seed: int) -> None:
    """Figures 4 and 5: per circuit over time in scenario 1, one panel per variant."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.2))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(VARIANTS), sharey=True)
    for ax, v in zip(axes, VARIANTS):
        c = s1[v].circuits
        c = c[c["seed"] == seed]
        step = float(np.diff(np.sort(c["interval_start"].unique())).min())
        for name, g in c.groupby("class"):
            g = g.groupby("interval_start", as_index=False)[["cells_delivered", "transit_cell_s", "exit_wait_cell_s"]].sum()
            # Backlog: definition 1, every node's queue, the exit's included.
            y = g["cells_delivered"] * 498 / step / 1000 if column == "rate" else (g["transit_cell_s"] + g["exit_wait_cell_s"]) / step
            ax.plot(g["interval_start"], y, label=name.replace("circuit", "circuit "), lw=1)
        ax.set_title(LABELS[v])
        ax.set_xlabel("time (s)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_fuzziness(text: str) -> list[float]:
    """``--fuzziness``: comma-separated values of at least 0, or ``none``."""
    if text.strip().lower() == "none":
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--fuzziness: comma-separated numbers or 'none', got {text!r}") from None
    if not values or any(not (f >= 0 and math.isfinite(f)) for f in values):
        raise ValueError(f"--fuzziness: every value must be a finite number of at least 0, got {text!r}")
    return sorted(set(values))


def parse_counts(text: str) -> list[int]:
    """``--circuits``: comma-separated positive circuit counts, or ``none``."""
    if text.strip().lower() == "none":
        return []
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--circuits: comma-separated whole numbers or 'none', got {text!r}") from None
    if not counts or any(n < 1 for n in counts):
        raise ValueError(f"--circuits: every count must be at least 1, got {text!r}")
    return sorted(set(counts))


def main(out: Path, args) -> int:
    if args.quick:  # each unless the command line gave it
        quick_settings(args, seeds=1, duration="10 s", circuits="10", reps=1, random_duration="6 s", random_lead=3.0,
                       fuzziness="1", fuzz_circuits=10, mixed_circuits=10)
    if args.seeds < 1:
        raise ValueError(f"--seeds: must be at least 1, got {args.seeds}")
    if args.circ_window < 1:
        raise ValueError(f"--circ-window: must be at least 1 cell, got {args.circ_window}")
    if not args.lead >= 0:
        raise ValueError(f"--lead: must be at least 0 s, got {args.lead}")
    counts = parse_counts(args.circuits)
    fuzz = parse_fuzziness(args.fuzziness)
    if args.fuzz_circuits < 1:
        raise ValueError(f"--fuzz-circuits: must be at least 1, got {args.fuzz_circuits}")
    if args.mixed_circuits < 0:
        raise ValueError(f"--mixed-circuits: must be at least 0 (0 skips them), got {args.mixed_circuits}")
    if args.reps < 1:
        raise ValueError(f"--reps: must be at least 1, got {args.reps}")
    if not args.random_lead >= 0:
        raise ValueError(f"--random-lead: must be at least 0 s, got {args.random_lead}")
    from onionlab._core import parse_duration

    # A lead as long as the run leaves nothing to measure: found after every run, not here.
    for lead, lead_flag, run, run_flag in ((args.lead, "--lead", args.duration, "--duration"),
                                           (args.random_lead, "--random-lead", args.random_duration, "--random-duration")):
        if lead >= parse_duration(run):
            raise ValueError(f"{lead_flag}: {lead:g} s must be shorter than {run_flag} ({run!r})")
    check_whole_steps(args.duration, TOY_STEP_S, "--duration", "the toy's tables are sampled every 100 ms")
    check_whole_steps(args.random_duration, RANDOM_STEP_S, "--random-duration", "the random networks' tables are sampled every second")
    seeds = list(range(1, args.seeds + 1))
    cfg_dir = out / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    (cfg_dir / "toy-latency.csv").write_text(latency_matrix(), encoding="utf-8")
    jobs = []
    for scenario in (1, 2):
        for v in VARIANTS:
            name = f"toy-s{scenario}-{v}"
            jobs.append((name, write_config(out, name, config_text(scenario, v, args.duration, args.circ_window, f"{TOY_STEP_S * 1000:g} ms")), seeds))
    nm = args.mixed_circuits
    if counts or nm:  # the random and mixed networks' latencies
        (cfg_dir / "random-latency.csv").write_text(random_latency_matrix(), encoding="utf-8")
    for n in counts:
        for rep in range(1, args.reps + 1):
            for v in VARIANTS:
                name = f"random-n{n}-r{rep}-{v}"
                jobs.append((name, write_config(out, name, random_config_text(n, rep, v, args.random_duration, args.circ_window, f"{RANDOM_STEP_S:g} s")), [rep]))
    for rep in range(1, args.reps + 1) if nm else ():
        for v in VARIANTS:
            name = f"mixed-n{nm}-r{rep}-{v}"
            text = random_config_text(nm, rep, v, args.random_duration, args.circ_window, f"{RANDOM_STEP_S:g} s", name=name, web=web_circuits(nm, rep))
            jobs.append((name, write_config(out, name, text), [rep]))
    nf = args.fuzz_circuits
    fuzz_names = {}  # (f, rep, variant) -> the run's name
    for f in fuzz:
        for rep in range(1, args.reps + 1):
            if f == 0 and nf in counts:  # the random networks' own run
                fuzz_names.update({(f, rep, v): f"random-n{nf}-r{rep}-{v}" for v in VARIANTS})
                continue
            matrix = f"fuzz-f{f:g}-r{rep}-latency.csv"
            (cfg_dir / matrix).write_text(random_latency_matrix(f, rep), encoding="utf-8")
            for v in VARIANTS:
                name = fuzz_names[(f, rep, v)] = f"fuzz-f{f:g}-n{nf}-r{rep}-{v}"
                text = random_config_text(nf, rep, v, args.random_duration, args.circ_window, f"{RANDOM_STEP_S:g} s", matrix, name)
                jobs.append((name, write_config(out, name, text), [rep]))
    print(f"predictor: {len(jobs)} configurations (the toy topology's with {len(seeds)} seeds each, the random networks' with one)",
          flush=True)
    res = run_many(jobs, out, args.jobs, **reuse_options(args))
    s1 = {v: res[f"toy-s1-{v}"] for v in VARIANTS}
    s2 = {v: res[f"toy-s2-{v}"] for v in VARIANTS}

    t = table1(s1, s2, args.lead)
    t.to_csv(out / "table1.csv", index=False)
    f = findings(t)
    f.to_csv(out / "findings.csv", index=False)
    figure_over_time(s1, "rate", "rate (KB/s)", out / "figure4.png", seeds[0])
    figure_over_time(s1, "backlog", "backlog (cells)", out / "figure5.png", seeds[0])
    random_md = []
    if counts:
        rows = pd.DataFrame([random_row(res[f"random-n{n}-r{rep}-{v}"], n, rep, v, args.random_lead)
                             for n in counts for rep in range(1, args.reps + 1) for v in VARIANTS])
        rows.to_csv(out / "random_runs.csv", index=False)
        m = rows.groupby(["circuits", "variant"], as_index=False, sort=False).mean(numeric_only=True).drop(columns="rep")
        m.to_csv(out / "random.csv", index=False)
        random_figure(m, out / "figure7_9b.png")
        rf = random_findings(m) if len(counts) > 1 else pd.DataFrame(columns=["finding", "ours", "reproduces"])
        rf.to_csv(out / "random_findings.csv", index=False)
        random_md = ["## Random networks (section 5.3)", "",
                     f"50 relays, {args.reps} random networks per circuit count, {args.random_duration}, measured after "
                     f"{args.random_lead:g} s; F against the max-min fair rates of 0.85 of each relay's capacity.", "",
                     markdown_table(m.round(3)), "",
                     markdown_table(rf) if len(rf) else "(the findings need at least two circuit counts)", ""]
    if fuzz:
        rows = pd.DataFrame([{**random_row(res[fuzz_names[(f, rep, v)]], nf, rep, v, args.random_lead), "fuzziness": f}
                             for f in fuzz for rep in range(1, args.reps + 1) for v in VARIANTS])
        rows.to_csv(out / "fuzziness_runs.csv", index=False)
        fm = rows.groupby(["fuzziness", "variant"], as_index=False, sort=False).mean(numeric_only=True).drop(columns=["rep", "circuits"])
        fm.to_csv(out / "fuzziness.csv", index=False)
        fz_findings = fuzziness_findings(fm) if len(fuzz) > 1 else pd.DataFrame(columns=["finding", "ours", "reproduces"])
        fz_findings.to_csv(out / "fuzziness_findings.csv", index=False)
        random_md += ["## Latency fuzziness (section 5.4)", "",
                      f"{nf} circuits, {args.reps} random networks per value; each relay's spoke (20 ms) times U[max(0.01, 1-f), 1+f].", "",
                      markdown_table(fm.round(3)), "",
                      markdown_table(fz_findings) if len(fz_findings) else "(the findings need at least two values)", ""]
    if nm:
        lat = pd.concat([mixed_latencies(res[f"mixed-n{nm}-r{rep}-{v}"], nm, rep, v, args.random_lead)
                         for rep in range(1, args.reps + 1) for v in VARIANTS], ignore_index=True)
        lat.to_csv(out / "mixed_circuits.csv", index=False)
        ms = mixed_summary(lat)
        ms.to_csv(out / "mixed.csv", index=False)
        mf = mixed_findings(ms)
        mf.to_csv(out / "mixed_findings.csv", index=False)
        mixed_figure(lat, out / "figure13.png")
        random_md += ["## Mixed traffic (section 5.5)", "",
                      f"{nm} circuits, {WEB_SHARE:.0%} of them fetching 320 KB pages with 1-2 s pauses, the rest endless bulk; "
                      f"{args.reps} random networks; latency per circuit after {args.random_lead:g} s.", "",
                      markdown_table(ms.round(1)), "", markdown_table(mf), ""]
    md = ["# PredicTor: table 1 on the toy topology (ours beside the paper's)", "",
          f"{len(seeds)} seeds x {args.duration}, measured after {args.lead:g} s; latency from scenario 1, "
          "throughput and F from scenario 2. Latency is the paper's (section 5: from a byte entering the overlay at the "
          "exit to its delivery, the exit's queue included as in definition 1); `latency_after_exit_ms` leaves out the "
          "time in the exit's queue, as the authors' code measured it. F against the max-min fair rates of 0.85 of each "
          "relay's bandwidth in 543-byte cells (what the relays' buckets charge a cell).", "",
          markdown_table(t.round(3)), "", "## Findings", "", markdown_table(f), "", *random_md]
    (out / "README.md").write_text("\n".join(md), encoding="utf-8")
    print(markdown_table(t.round(3)))  # as README.md: F at one decimal read 0.942 as 0.900
    print()
    print(markdown_table(f))
    if random_md:
        print()
        print("\n".join(random_md))
    print(f"\nwritten to {out}")
    return 0
