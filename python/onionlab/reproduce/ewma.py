"""Reproduction of Tang & Goldberg, "An Improved Algorithm for Tor Circuit Scheduling"
(ACM CCS 2010): circuit EWMA against round robin.

**Owns:** the experiment configs of the reproduction (generated as TOML into the output
directory, so every run is validated like a user's file), a two-sample Kolmogorov-Smirnov
test in numpy, and the tables and figures. **Must not touch:** model logic.

Experiments (spec ``ewma-braids.md`` A.7, copied into ``docs/reproductions/ewma.md``):

1. *Live-network analogue* (the paper's E2/E3): a guard, a middle and an exit relay; the
   middle's uplink is the bottleneck, shared by bulk circuits fetching 4 MB back to back
   and web clients fetching 87 KB with 20 s pauses. Flags force every path through
   guard -> middle -> exit (a single Guard-flagged relay, a single Exit-flagged relay).
   The middle runs round robin, then EWMA (H = 66 s, the original patch's default). We
   report the first 250 web downloads and the first 200 bulk downloads (by start time)
   of each run: web CDFs and medians, bulk completion times with a two-sample K-S test.
2. *Half-life sweep*: the same with H in {1.5, 3, 4.5, 10, 20, 33, 66, 99} s, 200 web
   downloads per value and round robin's first 200 beside them, as the paper's 25th, 50th
   and 75th percentiles (its figure 13).
3. *Full network*: examples/throttling-medium.toml with every relay on round robin, EWMA
   (tor's defaults) and KIST (tor's defaults); web and bulk CDFs side by side.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onionlab.argtypes import at_least
from onionlab.reproduce import add_reuse_arguments, markdown_table, reuse_options, run_many, write_config, write_summary

DESCRIPTION = "Tang & Goldberg CCS 2010: circuit EWMA vs round robin (web/bulk CDFs, K-S test, half-life sweep, KIST)"

#: The paper's live-network result (its section on the live Tor test).
PAPER_WEB_MEDIAN = {"round-robin": 11.49, "ewma": 9.04}
HALFLIVES = [1.5, 3, 4.5, 10, 20, 33, 66, 99]
MAIN_HALFLIFE = 66.0
WEB_DOWNLOADS = 250
#: Web downloads per half-life in the sweep: the paper's "until each value had 200 data
#: points" (section 5.1; spec A.7).
SWEEP_DOWNLOADS = 200
#: Downlinks of the bulk clients (two each): the live network's bulk downloads varied
#: widely (mean 416 s, std 335 s) with their paths; clients of different speeds stand in
#: for that diversity, and the fast ones congest the middle.
BULK_LINKS = ["250 kbit", "500 kbit", "1 Mbit", "2 Mbit", "100 Mbit"]
BULK_DOWNLOADS = 200

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small version (fewer downloads, shorter runs; a few seconds)")
    parser.add_argument("--seeds", type=at_least(1), default=None, help="seeds per line experiment (default 3; 2 with --quick)")
    parser.add_argument("--no-full-network", action="store_true", help="skip the throttling-medium comparison with KIST")
    parser.add_argument(
        "--no-optimistic-data", dest="optimistic_data", action="store_false",
        help="clients send each request only once CONNECTED comes back, one more circuit round trip per download, as tor "
        "before 0.2.3.3-alpha did (the paper's clients, March 2010); default: it rides with BEGIN (tor's optimistic data)",
    )
    parser.add_argument("--jobs", type=at_least(1), default=None, help="parallel runs (default: the CPUs)")
    add_reuse_arguments(parser)


# ---------------------------------------------------------------- statistics


def ks_2samp(a, b) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov test: statistic D and the asymptotic p-value.

    D = sup |F_a - F_b|; p = Q_KS((sqrt(ne) + 0.12 + 0.11/sqrt(ne)) D) with ne = nm/(n+m)
    and Q_KS(l) = 2 sum_{j>=1} (-1)^(j-1) exp(-2 j^2 l^2) (Stephens 1970; Numerical Recipes
    14.3), accurate for ne >= 4, which is far exceeded here.
    """
    a = np.sort(np.asarray(a, dtype=float))
    b = np.sort(np.asarray(b, dtype=float))
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        raise ValueError("ks_2samp: both samples must be non-empty")
    x = np.concatenate([a, b])
    fa = np.searchsorted(a, x, side="right") / n
    fb = np.searchsorted(b, x, side="right") / m
    d = float(np.max(np.abs(fa - fb)))
    ne = n * m / (n + m)
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    if lam < 1e-3:
        return d, 1.0
    j = np.arange(1, 101)
    p = 2.0 * np.sum((-1.0) ** (j - 1) * np.exp(-2.0 * j * j * lam * lam))
    return d, float(min(max(p, 0.0), 1.0))


# ---------------------------------------------------------------- configs


def _scheduler_toml(kind: str, halflife: float | None = None) -> str:
    if kind == "ewma":
        h = MAIN_HALFLIFE if halflife is None else halflife
        return f'{{ kind = "ewma", halflife = "{h:g} s", tick = "10 s" }}'
    return f'"{kind}"'


#: The `[tor]` line of tor before 0.2.3.3-alpha: the request follows CONNECTED.
NO_OPTIMISTIC_DATA = "optimistic_data = false\n"


def line_config(name: str, middle_scheduler: str, quick: bool, seeds: list[int], optimistic_data: bool = True) -> str:
    """The live-network analogue: one path, the middle's 5 Mbit uplink the bottleneck."""
    web = 4 if quick else 5
    duration, warmup = (300, 100) if quick else (1200, 150)
    bulk_groups = "\n".join(
        f'[[clients]]\nname = "bulk-{link.replace(" ", "")}"\nworkload = "bulk"\ncount = 2\nlink_up = "10 Mbit"\nlink_down = "{link}"\n'
        for link in BULK_LINKS
    )
    return f"""# Generated by `onionlab reproduce ewma`: the EWMA paper's live-network experiment in
# miniature. Flags force every path through guard -> middle -> exit; the middle's uplink
# (5 Mbit) is the bottleneck and its circuit scheduler is the variable. Bulk clients
# (classes bulk-*) have downlinks from 250 kbit to 100 Mbit.
[experiment]
name = "{name}"
duration = "{duration} s"
warmup = "{warmup} s"
seeds = {seeds}

[tor]
sndbuf = "256 KiB"
{"" if optimistic_data else NO_OPTIMISTIC_DATA}
[network]
latency = {{ constant = "150 ms" }}

[[relays]]
name = "guard"
bandwidth = "10 MiB/s"
link = "100 Mbit"
flags = ["Guard", "Fast", "Stable"]
scheduler = "round-robin"

[[relays]]
name = "middle"
bandwidth = "10 MiB/s"
link_up = "5 Mbit"
link_down = "100 Mbit"
flags = ["Fast"]
scheduler = {middle_scheduler}

[[relays]]
name = "exit"
bandwidth = "10 MiB/s"
link = "100 Mbit"
flags = ["Exit", "Fast"]
scheduler = "round-robin"

[[clients]]
name = "web"
workload = "web"
count = {web}
link = "100 Mbit"

{bulk_groups}
[servers]
count = 1
link = "1 Gbit"

[workloads.web]
type = "web"
size = "87 KB"
think = {{ dist = "fixed", value = "20 s" }}

[workloads.bulk]
type = "bulk"
size = "4 MB"
"""


def full_network_config(scheduler: str, quick: bool, optimistic_data: bool = True) -> str:
    """examples/throttling-medium.toml with every relay on `scheduler` (and, with
    `optimistic_data` false, tor 0.2.2's request after CONNECTED)."""
    src = EXAMPLES / "throttling-medium.toml"
    if not src.exists():
        raise FileNotFoundError(f"{src} (the full-network experiment needs the repository's examples/)")
    text = src.read_text()
    text = re.sub(r'(?m)^relays_file = "([^"]+)"', lambda m: f'relays_file = "{(EXAMPLES / m.group(1)).as_posix()}"', text)
    text = re.sub(r'(?m)^name = "throttling-medium"', f'name = "full-{scheduler}"', text)
    if quick:
        text = re.sub(r'(?m)^duration = .*$', 'duration = "3 min"', text)
    text = re.sub(r"(?ms)^\[mechanisms\].*?(?=^\[|\Z)", "", text)
    if not optimistic_data:
        text, n = re.subn(r"(?m)^\[tor\]\n", lambda m: m.group(0) + NO_OPTIMISTIC_DATA, text)
        if n != 1:
            raise ValueError(f"{src}: expected one [tor] table to turn optimistic data off in, found {n}")
    return text + f'\n[mechanisms]\nscheduler = "{scheduler}"\n'


def _first(df: pd.DataFrame, cls: str, n: int) -> pd.DataFrame:
    """`n` completed downloads of the classes starting with `cls`, taken in rounds over the
    clients of every seed (every client's earliest, then every client's second, ..., the
    last round cut short at `n`), so that two runs are compared on nearly the same mix of
    clients (fast clients finish more downloads than slow ones). A client that completed no
    download cannot contribute; :func:`_silent_clients` counts them."""
    d = df[(df["class"].str.startswith(cls)) & df["error"].isna() & df["ttlb"].notna()].sort_values(["start", "seed", "client"])
    d = d.assign(rank=d.groupby(["seed", "client"]).cumcount())
    groups = d.groupby(["seed", "client"]).ngroups
    if groups == 0:
        return d
    per = math.ceil(n / groups)
    return d[d["rank"] < per].sort_values(["rank", "seed", "client"]).head(n)


def _silent_clients(res, cls: str) -> tuple[int, int]:
    """(client-seeds of the classes starting with `cls`, those with no completed download in
    the results): the second are missing from :func:`_first`'s sample."""
    from onionlab import config as config_mod
    from onionlab.stats import completed

    clients = [c for g, c in config_mod.client_names(res.config) if g.startswith(cls)]
    total = len(clients) * len(res.summary.get("seeds") or [])
    done = completed(res.downloads)
    done = done[done["class"].str.startswith(cls)]
    return total, total - done.groupby(["seed", "client"]).ngroups


def line_results(web: dict[str, np.ndarray], bulk: dict[str, np.ndarray]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Round robin against EWMA at the middle, from each scheduler's web and bulk download
    times: the table (web quartiles, bulk mean and sample standard deviation, the paper's
    median beside) and the summary's figures (web medians, EWMA's relative gain in the web
    median, ours and the paper's, and the two-sample K-S test of the bulk times)."""
    d, p = ks_2samp(bulk["round-robin"], bulk["ewma"])
    med = {k: float(np.median(v)) for k, v in web.items()}
    rows = []
    for k in ["round-robin", "ewma"]:
        w, b = web[k], bulk[k]
        rows.append(
            {
                "scheduler": k if k == "round-robin" else f"ewma (H = {MAIN_HALFLIFE:g} s)",
                "web_n": len(w),
                "web_p25_s": np.percentile(w, 25),
                "web_median_s": np.median(w),
                "web_p75_s": np.percentile(w, 75),
                "paper_web_median_s": PAPER_WEB_MEDIAN[k],
                "bulk_n": len(b),
                "bulk_mean_s": b.mean(),
                "bulk_std_s": b.std(ddof=1) if len(b) > 1 else float("nan"),
            }
        )
    line = {
        "web_median_s": med,
        "web_relative_gain": 1 - med["ewma"] / med["round-robin"],
        "paper_web_relative_gain": 1 - PAPER_WEB_MEDIAN["ewma"] / PAPER_WEB_MEDIAN["round-robin"],
        "bulk_ks": {"D": d, "p": p, "significant_at_0.05": p < 0.05},
        "bulk_mean_s": {k: float(v.mean()) for k, v in bulk.items()},
    }
    return pd.DataFrame(rows), line


# ---------------------------------------------------------------- main


def main(out: Path, args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from onionlab.stats import ecdf

    t0 = time.monotonic()
    quick = bool(args.quick)
    n_seeds = args.seeds if args.seeds is not None else (2 if quick else 3)
    if n_seeds < 1:  # a caller of main() that did not parse its options
        raise ValueError(f"--seeds: must be at least 1, got {n_seeds}")
    seeds = list(range(1, n_seeds + 1))
    n_web = 60 if quick else WEB_DOWNLOADS
    n_sweep = 50 if quick else SWEEP_DOWNLOADS
    n_bulk = 20 if quick else BULK_DOWNLOADS
    halflives = [1.5, 10, 66] if quick else HALFLIVES
    optimistic_data = getattr(args, "optimistic_data", True)
    summary: dict[str, Any] = {
        "quick": quick, "seeds": seeds, "optimistic_data": optimistic_data, "paper": {"web_median_s": PAPER_WEB_MEDIAN},
    }

    # Every experiment (the line's two schedulers, the half-lives, the full network's
    # three) is written first and run as one batch, so runs of different experiments
    # share the cores (each full-network experiment is a single seed).
    experiments = []
    for kind in ["round-robin", "ewma"]:
        name = f"line-{kind}"
        experiments.append((name, write_config(out, name, line_config(name, _scheduler_toml(kind), quick, seeds, optimistic_data)), seeds))
    for h in halflives:
        if h != MAIN_HALFLIFE:  # line-ewma is H = 66 s
            name = f"line-ewma-h{h:g}"
            experiments.append((name, write_config(out, name, line_config(name, _scheduler_toml("ewma", h), quick, seeds, optimistic_data)), seeds))
    if not args.no_full_network:
        for kind in ["round-robin", "ewma", "kist"]:
            name = f"full-{kind}"
            experiments.append((name, write_config(out, name, full_network_config(kind, quick, optimistic_data)), [1]))
    runs = run_many(experiments, out, getattr(args, "jobs", None), **reuse_options(args))

    # 1. Round robin vs EWMA at the middle.
    web: dict[str, np.ndarray] = {}
    bulk: dict[str, np.ndarray] = {}
    sweep: dict[float, np.ndarray] = {}
    silent: dict[str, dict[str, int]] = {}
    for kind in ["round-robin", "ewma"]:
        dl = runs[f"line-{kind}"].downloads
        web[kind] = _first(dl, "web", n_web)["ttlb"].to_numpy()
        bulk[kind] = _first(dl, "bulk", n_bulk)["ttlb"].to_numpy()
        for cls in ("web", "bulk"):
            total, none = _silent_clients(runs[f"line-{kind}"], cls)
            silent.setdefault(kind, {})[cls] = none
            if none:
                print(f"note: {kind}: {none} of {total} {cls} client-seeds completed no download after the warm-up; "
                      "the sample has none of theirs", flush=True)
    for kind, n, arr in [(k, n_web, web[k]) for k in web] + [(k, n_bulk, bulk[k]) for k in bulk]:
        if len(arr) < n:
            print(f"warning: {kind}: only {len(arr)} downloads of the {n} wanted", flush=True)

    main_table, summary["line"] = line_results(web, bulk)
    summary["line"]["client_seeds_without_download"] = silent
    main_table.to_csv(out / "web_bulk.csv", index=False)
    med = summary["line"]["web_median_s"]
    d, p = summary["line"]["bulk_ks"]["D"], summary["line"]["bulk_ks"]["p"]

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for k, style in [("round-robin", "-"), ("ewma", "--")]:
        x, y = ecdf(web[k])
        ax[0].step(x, y, style, where="post", label=f"{k} (median {med[k]:.2f} s)")
        x, y = ecdf(bulk[k])
        ax[1].step(x, y, style, where="post", label=k)
    ax[0].set(xlabel="web download time (s), 87 KB", ylabel="CDF", title="Web clients")
    ax[1].set(xlabel="bulk download time (s), 4 MB", title=f"Bulk clients (K-S D = {d:.3f}, p = {p:.2f})")
    for a in ax:
        a.legend(loc="lower right")
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "web_bulk_cdf.png", dpi=120)
    plt.close(fig)

    # 2. Half-life sweep: each H's first `n_sweep` web downloads (the paper's 200 per value),
    # as 25th/50th/75th percentiles (its figure 13), round robin's the same way.
    def sweep_sample(name: str) -> np.ndarray:
        return _first(runs[name].downloads, "web", n_sweep)["ttlb"].to_numpy()

    for h in halflives:
        sweep[h] = sweep_sample("line-ewma" if h == MAIN_HALFLIFE else f"line-ewma-h{h:g}")
    rr = sweep_sample("line-round-robin")
    pct = {k: np.percentile(v, [25, 50, 75]) for k, v in [("round-robin", rr), *[(f"{h:g}", sweep[h]) for h in sorted(sweep)]]}
    sweep_table = pd.DataFrame(
        [{"halflife_s": k, "downloads": len(v), "web_p25_s": q[0], "web_median_s": q[1], "web_p75_s": q[2]}
         for (k, q), v in zip(pct.items(), [rr, *[sweep[h] for h in sorted(sweep)]])]
    )
    sweep_table.to_csv(out / "halflife_sweep.csv", index=False)
    summary["halflife_sweep_web_median_s"] = {f"{h:g}": float(pct[f"{h:g}"][1]) for h in sorted(sweep)}
    summary["halflife_sweep_web_percentiles_s"] = {k: [float(x) for x in q] for k, q in pct.items()}
    fig, ax = plt.subplots(figsize=(6, 4))
    hs = sorted(sweep)
    for i, (style, label) in enumerate([(":", "25th"), ("-", "50th"), ("--", "75th")]):
        ax.plot(hs, [pct[f"{h:g}"][i] for h in hs], "o" + style, color="C0", label=f"EWMA, {label} percentile")
        ax.axhline(pct["round-robin"][i], color="gray", linestyle=style, label=f"round robin, {label}")
    ax.set(xscale="log", xlabel="half-life H (s)", ylabel="web download time (s)", title="Half-life sweep (paper's figure 13)")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "halflife_sweep.png", dpi=120)
    plt.close(fig)

    # 3. The full network: round robin vs EWMA vs KIST.
    if not args.no_full_network:
        full = {kind: runs[f"full-{kind}"].downloads for kind in ["round-robin", "ewma", "kist"]}
        rows = []
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for kind, style in [("round-robin", "-"), ("ewma", "--"), ("kist", ":")]:
            row: dict[str, Any] = {"scheduler": kind}
            for i, cls in enumerate(["web", "bulk"]):
                d_ = full[kind]
                t = d_[(d_["class"] == cls) & d_["error"].isna() & d_["ttlb"].notna()]["ttlb"].to_numpy()
                row[f"{cls}_n"] = len(t)
                row[f"{cls}_median_s"] = float(np.median(t)) if len(t) else float("nan")
                if len(t):
                    x, y = ecdf(t)
                    ax[i].step(x, y, style, where="post", label=f"{kind} (median {np.median(t):.2f} s)")
            rows.append(row)
        ax[0].set(xlabel="web download time (s), 320 KiB", ylabel="CDF", title="throttling-medium: web")
        ax[1].set(xlabel="bulk download time (s), 5 MiB", title="throttling-medium: bulk")
        for a in ax:
            a.legend(loc="lower right")
            a.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "full_network_cdf.png", dpi=120)
        plt.close(fig)
        ft = pd.DataFrame(rows)
        ft.to_csv(out / "full_network.csv", index=False)
        summary["full_network"] = ft.to_dict(orient="records")

    summary["wall_s"] = round(time.monotonic() - t0, 1)
    write_summary(out / "summary.json", summary)
    _write_markdown(out, summary, main_table, sweep_table)
    print((out / "summary.md").read_text())
    return 0


def _write_markdown(out: Path, s: dict, main_table: pd.DataFrame, sweep_table: pd.DataFrame) -> None:
    ln = s["line"]
    ks = ln["bulk_ks"]
    lines = [
        "# EWMA circuit scheduling (Tang & Goldberg, CCS 2010): reproduction",
        "",
        f"{'Quick version. ' if s['quick'] else ''}"
        f"{'' if s['optimistic_data'] else 'Without optimistic data (the request follows CONNECTED, tor before 0.2.3.3). '}"
        f"Seeds {s['seeds']}. Figures: web_bulk_cdf.png, halflife_sweep.png"
        + (", full_network_cdf.png." if "full_network" in s else "."),
        "",
        "## Web and bulk downloads through a congested middle relay",
        "",
        markdown_table(main_table),
        "",
        f"Median web download: round robin {ln['web_median_s']['round-robin']:.3f} s, EWMA {ln['web_median_s']['ewma']:.3f} s: "
        f"{100 * ln['web_relative_gain']:.1f} % faster (paper: 11.49 s -> 9.04 s, {100 * ln['paper_web_relative_gain']:.1f} % faster).",
        "",
        f"Bulk completion times, two-sample K-S: D = {ks['D']:.3f}, p = {ks['p']:.3f} "
        f"({'significant' if ks['significant_at_0.05'] else 'not significant'} at 0.05; paper: not significant).",
        "",
        "## Half-life sweep (web download time percentiles, first 200 downloads per value)",
        "",
        markdown_table(sweep_table),
        "",
    ]
    if "full_network" in s:
        lines += ["## Full network (examples/throttling-medium.toml)", "", markdown_table(pd.DataFrame(s["full_network"])), ""]
    lines += [f"Wall time: {s['wall_s']} s.", ""]
    (out / "summary.md").write_text("\n".join(lines))
