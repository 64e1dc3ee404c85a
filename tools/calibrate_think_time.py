#!/usr/bin/env python3
"""Calibrate the web think time of a throttling relay sample to table 1's vanilla split.

Development tool, run by hand: the procedure each built-in sample's think-time median
(`SAMPLES[...].think_medians` in `onionlab.reproduce.throttling.configs`) was chosen by
(`--sample paper`'s with this tool, the earlier ones by hand the same way). The
paper's UNC think-time trace may not be redistributed, so the reproduction uses a lognormal
and sets its median so that vanilla at medium load (950 web, 50 bulk clients) splits the
data as table 1 does: 34.2 % bulk. For each candidate median it runs that vanilla
configuration, with the sample's own weights and client links and the `--think` shape's
sigma, on seeds 1-2 (the runs the samples were calibrated on), prints the bulk share, and
prints the median at which the share crosses the target, interpolated linearly between the
two candidates that bracket it.

Usage: tools/calibrate_think_time.py --sample paper --medians "0.8 s,1 s,1.3 s" -o DIR
       [--path-order guard-first]   (default: tor's order, the reproduction's)
       [--capacity-scale K]         (every relay's bandwidth times K, as the reproduction's
                                     option; the median to give it with --think-median)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from onionlab.argtypes import check_whole_steps, duration, positive_duration, positive_float
from onionlab.reproduce.throttling import PAPER_TABLE1
from onionlab.reproduce.throttling.configs import DEFAULT_PATH_ORDER, LATENCIES, PATH_ORDERS

#: Table 1's vanilla bulk share at medium load (%).
TARGET_BULK_PCT = PAPER_TABLE1["medium"]["vanilla"][2]


def parse_medians(text: str) -> list[tuple[str, float]]:
    """The candidate medians ("0.8 s,1 s") as (text, seconds), each a duration the config
    accepts, in increasing order. Raises ValueError naming --medians for an empty, bad,
    repeated or unordered list."""
    from onionlab._core import parse_duration

    items = [m.strip() for m in text.split(",")]
    if len(items) < 2 or any(not m for m in items):
        raise ValueError(f"--medians {text!r}: give at least two durations, comma-separated (for example \"1 s,2 s\")")
    secs = []
    for m in items:
        try:
            secs.append(float(parse_duration(m)))
        except ValueError as e:
            raise ValueError(f"--medians: {m!r} is not a duration ({e})") from None
    if any(b <= a for a, b in zip(secs, secs[1:])):
        raise ValueError(f"--medians {text!r}: the durations must increase")
    return list(zip(items, secs))


def crossing(points: list[tuple[float, float]], target: float = TARGET_BULK_PCT) -> float | None:
    """The median (s) at which the bulk share reaches `target`, by linear interpolation
    between the first pair of consecutive (median s, bulk %) points that bracket it; None if
    no pair does (the candidates need widening)."""
    for (m0, b0), (m1, b1) in zip(points, points[1:]):
        if min(b0, b1) <= target <= max(b0, b1):
            return m0 if b1 == b0 else m0 + (target - b0) * (m1 - m0) / (b1 - b0)
    return None


def configs(
    out: Path, sample: str, medians: list[str], duration: str, warmup: str, path_order: str = DEFAULT_PATH_ORDER, capacity_scale: float = 1.0,
    latency: str = "constant",
) -> list[tuple[str, Path]]:
    """Writes one vanilla medium-load config per median under `out/configs` (with the
    sample beside them, its bandwidths times `capacity_scale` as `--capacity-scale` scales
    them, placed as `--latency` places it) and returns (name, path) pairs."""
    from onionlab.reproduce import write_config
    from onionlab.reproduce import throttling as T
    from onionlab.reproduce.throttling.configs import (
        LOADS, RELAYS_FILE, client_settings, config_text, mechanism_line, place_network, relay_sample_text, scale_capacity,
    )

    # The reproduction's own parser, so each run has exactly the settings `--sample SAMPLE
    # --think-median M --path-order O --latency L` gives the main runs (the sample's weights
    # and links, the shape's sigma, the path order, where hosts sit).
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    argv = ["--sample", sample, "--path-order", path_order, "--latency", latency]
    (out / "configs").mkdir(parents=True, exist_ok=True)
    relays_text = relay_sample_text(None, sample)
    if capacity_scale != 1.0:
        relays_text = scale_capacity(relays_text, capacity_scale)
    relays_text, files = place_network(relays_text, p.parse_args(argv))
    for fname, body in files.items():
        (out / "configs" / fname).write_text(body, encoding="utf-8")
    (out / "configs" / RELAYS_FILE).write_text(relays_text, encoding="utf-8")
    made = []
    for m in medians:
        settings = client_settings(p.parse_args(argv + ["--think-median", m]))
        name = "vanilla-medium-think-" + m.replace(" ", "")
        text = config_text(name, LOADS["medium"], mechanism_line("vanilla", {}), duration, warmup, RELAYS_FILE, **settings)
        made.append((name, write_config(out, name, text)))
    return made


def main(argv: list[str] | None = None) -> int:
    from onionlab.reproduce.throttling.configs import SAMPLES

    ap = argparse.ArgumentParser(description="Calibrate a throttling relay sample's web think-time median to table 1's vanilla split.")
    ap.add_argument("--sample", choices=tuple(SAMPLES), required=True, help="the built-in relay sample")
    ap.add_argument("--medians", required=True, help='candidate think-time medians, increasing, e.g. "0.8 s,1 s,1.3 s"')
    ap.add_argument("--seeds", type=int, default=2, help="seeds per median (default 2)")
    ap.add_argument("--duration", type=positive_duration, default="20 min", help='simulated time per run (default "20 min", as the main runs)')
    ap.add_argument("--warmup", type=duration, default="4 min", help='warm-up excluded from the split (default "4 min")')
    ap.add_argument("--path-order", choices=PATH_ORDERS, default=DEFAULT_PATH_ORDER,
                    help="the clients' path order (default exit-first, tor's and the reproduction's; guard-first: the order the docs' guard-first sections ran)")
    ap.add_argument("--capacity-scale", metavar="K", type=positive_float, default=1.0,
                    help="multiply every relay's bandwidth by K, as the reproduction's --capacity-scale (default 1)")
    ap.add_argument("--latency", choices=LATENCIES, default="constant",
                    help="the latency model, as the reproduction's --latency (default constant; regions: the generator's nine regions)")
    ap.add_argument("--jobs", type=int, help="parallel runs (default: the CPUs)")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        ap.error(f"--seeds: must be at least 1, got {a.seeds}")
    try:
        medians = parse_medians(a.medians)
        check_whole_steps(a.duration, 60.0, "--duration", "the per-connection table is sampled every minute")
    except ValueError as e:
        ap.error(str(e))

    from onionlab._core import parse_duration
    from onionlab.reproduce import run_many
    from onionlab.reproduce.throttling.metrics import data_by_class

    out = Path(a.out)
    made = configs(out, a.sample, [m for m, _ in medians], a.duration, a.warmup, a.path_order, a.capacity_scale, a.latency)
    results = run_many([(name, path, list(range(1, a.seeds + 1))) for name, path in made], out, a.jobs)
    warmup_s = float(parse_duration(a.warmup))
    points = []
    scale = (f", capacity x{a.capacity_scale:g}" if a.capacity_scale != 1.0 else "") + (f", latency {a.latency}" if a.latency != "constant" else "")
    print(f"{a.sample}{scale}: vanilla, medium load, {a.path_order}, seeds 1-{a.seeds}; target {TARGET_BULK_PCT} % bulk (table 1)")
    for (m, secs), (name, _) in zip(medians, made):
        d = data_by_class(results[name], warmup_s)
        total = sum(d.values())
        if not total:
            print(f"error: median {m}: no data delivered after the warm-up; lengthen --duration or shorten --warmup "
                  "(the per-connection table is sampled every minute)", file=sys.stderr)
            return 1
        bulk = 100 * d.get("bulk", 0.0) / total
        points.append((secs, bulk))
        print(f"  median {m}: {bulk:.1f} % bulk of {total:.2f} GiB")
    x = crossing(points)
    print(f"  crossing: {x:.2f} s" if x is not None else "  no two candidates bracket the target: widen --medians")
    return 0


if __name__ == "__main__":
    sys.exit(main())
