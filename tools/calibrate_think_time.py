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

Usage: tools/calibrate_think_time.py --medians "0.8 s,1 s,1.3 s" -o DIR [--seeds N]
           [--duration D] [--warmup W] [--jobs J] [REPRODUCTION OPTIONS]

The reproduction options are `onionlab reproduce throttling`'s own, with their defaults,
for the network and the clients the runs are made on: `--sample`, `--relays`,
`--path-order`, `--capacity-scale`, `--latency`, `--guards`, `--weights`,
`--entry-guards`, `--predicted-circuits`, `--cbt-learning`, `--congestion-control`,
`--cellq`, `--no-optimistic-data`, `--refill-phase` and `--think` (the shape whose median is calibrated).
The median found is then given to the reproduction as `--think-median` beside the same
options. Any other of its options (the sweep's, the attacks') has no effect on a vanilla
run and is an error here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from onionlab.argtypes import check_whole_steps, duration, positive_duration
from onionlab.reproduce.throttling import PAPER_TABLE1

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


#: The reproduction's options (argparse dests) that shape a vanilla medium-load run: the
#: network, the clients' Tor and the think time's shape. Every other one must keep its
#: default here.
NETWORK_OPTIONS = frozenset({
    "sample", "relays", "path_order", "capacity_scale", "latency", "guards", "weights", "entry_guards",
    "predicted_circuits", "cbt_learning", "congestion_control", "cellq", "optimistic_data", "refill_phase", "think",
})


def reproduction_parser() -> argparse.ArgumentParser:
    """`onionlab reproduce throttling`'s own option parser (without `-o`)."""
    from onionlab.reproduce import throttling as T

    p = argparse.ArgumentParser(prog="calibrate_think_time.py (reproduction options)", allow_abbrev=False)
    T.add_arguments(p)
    return p


def reproduction_args(argv: list[str]) -> argparse.Namespace:
    """The reproduction's options in `argv`, parsed by its own parser. Raises ValueError
    naming an option that does not shape the vanilla run (`--think-median` among them:
    the candidates are `--medians`)."""
    p = reproduction_parser()
    a = p.parse_args(argv)
    # argparse has no public list of a parser's options; `_actions` is that list.
    for act in p._actions:
        if act.dest in NETWORK_OPTIONS or not act.option_strings or act.dest == "help":
            continue
        if getattr(a, act.dest) != act.default:
            hint = "give the candidates as --medians" if act.dest == "think_median" else "it has no effect on a vanilla run"
            raise ValueError(f"{act.option_strings[-1]}: not a calibration option ({hint})")
    return a


def label(argv: list[str], a: argparse.Namespace) -> str:
    """What the runs are made on, for the report's first line: the sample (or the
    `--relays` file) and the other reproduction options as given."""
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--sample", "--relays", "--path-order"):
            skip = True
            continue
        if arg.startswith(("--sample=", "--relays=", "--path-order=")):
            continue
        rest.append(arg)
    return (a.relays or a.sample) + (", " + " ".join(rest) if rest else "")


def configs(out: Path, medians: list[str], duration: str, warmup: str, argv: list[str] = ()) -> list[tuple[str, Path]]:
    """Writes one vanilla medium-load config per median under `out/configs`, on the network
    the reproduction builds from its options `argv` (the sample beside them, its bandwidths
    scaled, every relay a guard, placed, as those options say), and returns (name, path)
    pairs. Raises ValueError, before writing anything, for what the reproduction refuses
    (a bad `--relays` file, `--entry-guards` below 1, ...)."""
    from onionlab.reproduce import write_config
    from onionlab.reproduce.throttling.configs import (
        LOADS, RELAYS_FILE, check_relay_sample, client_settings, config_text, mechanism_line, network_relays_text, place_network,
    )

    # The reproduction's own parser and network, so each run has exactly the settings that
    # the same options and `--think-median M` give the main runs.
    a = reproduction_args(list(argv))
    relays_text = network_relays_text(a)
    check_relay_sample(relays_text, a)
    settings = {m: client_settings(argparse.Namespace(**{**vars(a), "think_median": m})) for m in medians}
    (out / "configs").mkdir(parents=True, exist_ok=True)
    relays_text, files = place_network(relays_text, a)
    for fname, body in files.items():
        (out / "configs" / fname).write_text(body, encoding="utf-8")
    (out / "configs" / RELAYS_FILE).write_text(relays_text, encoding="utf-8")
    made = []
    for m in medians:
        name = "vanilla-medium-think-" + m.replace(" ", "")
        text = config_text(name, LOADS["medium"], mechanism_line("vanilla", {}), duration, warmup, RELAYS_FILE, **settings[m])
        made.append((name, write_config(out, name, text)))
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Calibrate a throttling relay sample's web think-time median to table 1's vanilla split. Options not "
        "listed here are the reproduction's (onionlab reproduce throttling --help), for the network the runs are made on.",
        allow_abbrev=False,
    )
    ap.add_argument("--medians", required=True, help='candidate think-time medians, increasing, e.g. "0.8 s,1 s,1.3 s"')
    ap.add_argument("--seeds", type=int, default=2, help="seeds per median (default 2)")
    ap.add_argument("--duration", type=positive_duration, default="20 min", help='simulated time per run (default "20 min", as the main runs)')
    ap.add_argument("--warmup", type=duration, default="4 min", help='warm-up excluded from the split (default "4 min")')
    ap.add_argument("--jobs", type=int, help="parallel runs (default: the CPUs)")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    a, rest = ap.parse_known_args(argv)
    if a.seeds < 1:
        ap.error(f"--seeds: must be at least 1, got {a.seeds}")
    try:
        medians = parse_medians(a.medians)
        check_whole_steps(a.duration, 60.0, "--duration", "the per-connection table is sampled every minute")
        r = reproduction_args(rest)
    except ValueError as e:
        ap.error(str(e))

    from onionlab._core import parse_duration
    from onionlab.reproduce import run_many
    from onionlab.reproduce.throttling.metrics import data_by_class

    out = Path(a.out)
    try:
        made = configs(out, [m for m, _ in medians], a.duration, a.warmup, rest)
    except ValueError as e:
        ap.error(str(e))
    results = run_many([(name, path, list(range(1, a.seeds + 1))) for name, path in made], out, a.jobs)
    warmup_s = float(parse_duration(a.warmup))
    points = []
    print(f"{label(rest, r)}: vanilla, medium load, {r.path_order}, seeds 1-{a.seeds}; target {TARGET_BULK_PCT} % bulk (table 1)")
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
