"""Reproduction of "Throttling Tor Bandwidth Parasites" (Jansen, Syverson, Hopper, USENIX
Security 2012): figure 3, table 1, the parameter sweep the paper does not report, and the
anonymity analysis of section 5 (figure 4a probing; attacks 1 and 2, figures 4b/4c).

**Owns:** the paper's experiment matrix as generated configs, the parameter sweep and the
choice of each algorithm's parameters, and the tables and figures. **Must not touch:** the
algorithms (``crates/onionlab-mech``) or the model.

Network: the throttling paper's (50 relays from the 2010 consensus, 950 web clients fetching
320 KiB with think times, 25/50/100 bulk clients fetching 5 MiB, 200 servers; the think
time is :data:`THINK`, calibrated to table 1's vanilla split). Every relay runs the
algorithm ("network-wide deployments"); the circuit scheduler is round robin throughout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab import stats
from onionlab.reproduce import run_many, write_config
from onionlab.stats import ecdf

DESCRIPTION = "Throttling Tor Bandwidth Parasites (2012): figure 3, table 1, parameter sweep, anonymity analysis (figure 4)"

LOADS = {"light": 25, "medium": 50, "heavy": 100}
ALGORITHMS = ["vanilla", "static", "split", "flag", "thresh"]

#: Table 1 of the paper, verbatim: (total GiB, web %, bulk %).
PAPER_TABLE1 = {
    "light": {"vanilla": (88.3, 74.5, 25.5), "static": (80.3, 83.7, 16.3), "split": (78.3, 85.9, 14.1), "flag": (72.1, 92.7, 7.3), "thresh": (69.8, 90.1, 9.9)},
    "medium": {"vanilla": (92.2, 65.8, 34.2), "static": (88.6, 72.4, 27.6), "split": (84.7, 75.0, 25.0), "flag": (77.7, 86.2, 13.8), "thresh": (76.3, 82.8, 17.2)},
    "heavy": {"vanilla": (94.7, 55.8, 44.2), "static": (91.1, 60.5, 39.5), "split": (85.0, 64.3, 35.7), "flag": (81.7, 75.4, 24.6), "thresh": (85.0, 71.2, 28.8)},
}

#: Payload bytes per byte of cells on the wire (498 of 514 + 29 TLS bytes).
PAYLOAD_PER_WIRE_BYTE = 498 / 543

BURST = "2 MiB"

#: Sampling interval (seconds) of the per-connection table of the medium-load flagging
#: runs: the timing resolution of attack 2's flag-timing variant, one algorithm tick (the
#: paper: the attacker learns the flag times "precisely"). Other medium-load runs sample
#: every PEAK_STEP_S, the rest every minute.
TIMING_STEP_S = 1.0
#: Attack 2 reads an unthrottled circuit's speed as its busiest PEAK_STEP_S seconds in a minute.
PEAK_STEP_S = 10.0

#: Sampling interval (seconds) of the per-channel table of the medium-load runs
#: (``channels.csv``: where relays' queues sit).
CHANNEL_STEP_S = 10.0
#: Channel ends per algorithm in ``channels.csv``: those with the most queued cells.
CHANNEL_TOP = 10

#: Web think times (the paper's UNC data set may not be redistributed). Both are lognormal
#: stand-ins calibrated to table 1's vanilla medium-load split (65.8 % web / 34.2 % bulk).
#: "heavy" (the default): median 8 s, sigma 2.0 (mean 59 s; 10 % of pauses under 0.6 s,
#: 1 % over 14 min), the dispersed, heavy-tailed shape web think-time traces show.
#: "smooth": median 20 s, sigma 1.25 (mean 44 s), the earlier default, kept as a
#: sensitivity check: with it no static rate in spec 9's range harms web clients.
#: (median, sigma) of each.
THINK_SHAPES = {"heavy": ("8 s", 2.0), "smooth": ("20 s", 1.25)}


def think_text(median: str, sigma: float) -> str:
    """The `think` value of a web workload: a lognormal of this median and sigma."""
    return f'{{ dist = "lognormal", median = "{median}", sigma = {sigma} }}'


THINK = {name: think_text(m, s) for name, (m, s) in THINK_SHAPES.items()}


#: Spec section 9's proposed ranges (the paper gives none), one axis per parameter. Each
#: algorithm's sweep points are the product of its axes, in this order; ``--grid`` replaces
#: an axis (:func:`grid_overrides`).
SWEEP_AXES: dict[str, dict[str, list]] = {
    "static": {"rate": [f"{r} KiB/s" for r in (5, 10, 20, 50, 100)]},
    "flag": {
        "flag_rate": [f"{r} KiB/s" for r in (5, 20, 50)],
        "penalty": [0.0, 0.25, 0.5],
        "halflife": [f"{h} s" for h in (3, 30, 90)],
    },
    "thresh": {
        "fraction": [0.05, 0.1, 0.2],
        "refresh": [f"{r} s" for r in (10, 30, 60)],
        "floor": [f"{f} KiB/s" for f in (5, 20, 50)],
    },
}

#: How each swept parameter's values are written: a byte rate, a duration, or a number in
#: [0, 1] (the mechanisms' own ranges for T and P).
AXIS_KINDS = {"rate": "rate", "flag_rate": "rate", "floor": "rate", "halflife": "duration", "refresh": "duration", "penalty": "unit", "fraction": "unit"}


def axis_value_key(param: str, value) -> float:
    """The number a swept value stands for (bytes/s, seconds or the fraction itself), to order
    an axis. Raises ValueError naming the parameter for a value of the wrong form."""
    from onionlab._core import parse_byte_rate

    kind = AXIS_KINDS[param]
    try:
        if kind == "rate":
            x = float(parse_byte_rate(value))
        elif kind == "duration":
            x = _seconds(value)
        else:
            x = float(value)
    except (TypeError, ValueError) as e:
        what = {"rate": "byte rate", "duration": "duration", "unit": "number"}[kind]
        raise ValueError(f"{param}: {value!r} is not a {what} ({e})") from None
    if kind == "unit" and not 0.0 <= x <= 1.0:
        raise ValueError(f"{param}: {x:g} is outside [0, 1]")
    if kind != "unit" and not x > 0:
        raise ValueError(f"{param}: {value!r} must be positive")
    return x


def grid_overrides(specs: list[str] | None) -> dict[str, dict[str, list]]:
    """Parse ``--grid ALG.PARAM=V1,V2,...`` arguments into axes that replace spec 9's. Values
    are byte rates ("5 KiB/s"), durations ("30 s") or numbers, as the parameter takes.
    Raises ValueError naming the argument for an unknown algorithm or parameter, a bad or
    repeated value, or a parameter given twice."""
    out: dict[str, dict[str, list]] = {}
    for spec in specs or []:
        key, sep, values = spec.partition("=")
        alg, dot, param = key.strip().partition(".")
        if not sep or not dot:
            raise ValueError(f"--grid {spec!r}: expected ALG.PARAM=V1,V2,... (for example thresh.fraction=0.1,0.2,0.4)")
        if alg not in SWEEP_AXES:
            raise ValueError(f"--grid {spec!r}: unknown algorithm {alg!r} (one of {', '.join(SWEEP_AXES)}; split has no parameters)")
        if param not in SWEEP_AXES[alg]:
            raise ValueError(f"--grid {spec!r}: {alg} has no parameter {param!r} (one of {', '.join(SWEEP_AXES[alg])})")
        if param in out.get(alg, {}):
            raise ValueError(f"--grid {spec!r}: {alg}.{param} is given twice")
        raw = [v.strip() for v in values.split(",")]
        if any(not v for v in raw):
            raise ValueError(f"--grid {spec!r}: empty value in the list")
        keys = []
        for v in raw:
            try:
                keys.append(axis_value_key(param, v))
            except ValueError as e:
                raise ValueError(f"--grid {spec!r}: {e}") from None
        if len(set(keys)) != len(keys):
            raise ValueError(f"--grid {spec!r}: a value is repeated")
        # Numbers go into the configs as numbers (the parsed keys); rates and durations as
        # written, units and all.
        out.setdefault(alg, {})[param] = keys if AXIS_KINDS[param] == "unit" else raw
    return out


def sweep_axes(quick: bool, overrides: dict[str, dict[str, list]] | None = None) -> dict[str, dict[str, list]]:
    """Each algorithm's axes: spec 9's, or the quick version's two static rates and one point
    each for flagging and threshold, with ``overrides`` (from :func:`grid_overrides`) in place."""
    if quick:
        axes = {
            "static": {"rate": ["10 KiB/s", "50 KiB/s"]},
            "flag": {"flag_rate": ["20 KiB/s"], "penalty": [0.25], "halflife": ["30 s"]},
            "thresh": {"fraction": [0.1], "refresh": ["30 s"], "floor": ["20 KiB/s"]},
        }
    else:
        axes = {alg: {k: list(v) for k, v in ax.items()} for alg, ax in SWEEP_AXES.items()}
    for alg, params in (overrides or {}).items():
        axes[alg].update(params)
    return axes


def _sweep_grid(quick: bool, overrides: dict[str, dict[str, list]] | None = None) -> dict[str, list[dict]]:
    """The sweep's points per algorithm (the product of its axes), and vanilla as the
    reference every point is compared with."""
    axes = sweep_axes(quick, overrides)
    grid: dict[str, list[dict]] = {}
    for alg in ALGORITHMS:
        names = list(axes.get(alg, {}))  # vanilla and split have no parameters: one point
        grid[alg] = [dict(zip(names, combo)) for combo in itertools.product(*(axes[alg][n] for n in names))]
    return grid


def edge_choices(axes: dict[str, dict[str, list]], chosen: dict[str, dict]) -> list[dict]:
    """Chosen values that are the smallest or largest of an axis of three or more values:
    there the best setting may lie outside the swept range, and a researcher would extend
    it (``--grid``). One row per such parameter: algorithm, parameter, value, which edge,
    and the axis."""
    rows = []
    for alg, ax in axes.items():
        for param, values in ax.items():
            if len(values) < 3 or param not in chosen.get(alg, {}):
                continue
            keys = [axis_value_key(param, v) for v in values]
            k = axis_value_key(param, chosen[alg][param])
            edge = "smallest" if k == min(keys) else "largest" if k == max(keys) else None
            if edge:
                rows.append({"algorithm": alg, "parameter": param, "value": chosen[alg][param], "edge": edge, "axis": values})
    return rows


def _toml_value(v) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(v)


def mechanism_line(alg: str, params: dict) -> str:
    """The ``throttling = ...`` line of an algorithm with `params`."""
    kind = {"vanilla": None, "static": "static", "split": "split", "flag": "flag", "thresh": "threshold"}[alg]
    if kind is None:
        return 'throttling = "none"'
    fields = [f'kind = "{kind}"'] + [f"{k} = {_toml_value(v)}" for k, v in params.items()] + [f'burst = "{BURST}"']
    return "throttling = { " + ", ".join(fields) + " }"


LINKING_CLIENTS = """
[[clients]]
name = "link-same"
workload = "link-same"
count = 10
link_up = "10 Mbit"
link_down = "20 Mbit"
placement = "round_robin"

[[clients]]
name = "link-diff"
workload = "link-diff"
count = 40
link_up = "10 Mbit"
link_down = "20 Mbit"
placement = "round_robin"

[workloads.link-same]
type = "web"
size = "2 MiB"
think = { dist = "fixed", value = "120 s" }

[workloads.link-diff]
type = "web"
size = "1 MiB"
think = { dist = "fixed", value = "120 s" }
"""


def config_text(
    name: str, bulk: int, throttling: str, duration: str, warmup: str, relays_file: str, conn_metrics: bool = True, extra_clients: str = "", conn_interval: str = "60 s",
    think: str = THINK["heavy"], entry_guards: int = 3, predicted_circuits: bool = False, congestion_control: str = "fixed-window",
    cellq: tuple | None = None, cbt_learning: bool = False, weights: str = "uniform", chan_interval: str | None = None,
) -> str:
    extra = f'\nconnection_metrics_interval = "{conn_interval}"' if conn_metrics else ""
    if chan_interval:
        extra += f'\nchannel_metrics_interval = "{chan_interval}"'
    # [tor] lines beyond the defaults: sensitivities only, so the main runs' configs stay as they were.
    tor_extra = "\npredicted_circuits = true" if predicted_circuits or cbt_learning else ""
    if cbt_learning:
        # Tor 0.2.2's test circuits: one a minute, up to 12 clean (`true` is tor 0.4.8's).
        tor_extra += '\ncbt_learning = { test_frequency = "60 s", max_clean = 12 }'
    if congestion_control != "fixed-window":
        tor_extra += f'\ncongestion_control = "{congestion_control}"'
    if cellq:
        tor_extra += f"\ncellq_high = {cellq[0]}\ncellq_low = {cellq[1]}"
    # The 2010 consensus has no bandwidth-weights line: uniform weights, or what tor's
    # directory authorities would compute for these relays (a sensitivity).
    network_extra = '\nbandwidth_weights = "computed"' if weights == "computed" else ""
    return f"""# Generated by `onionlab reproduce throttling`: {name}.
relays_file = "{relays_file}"

[experiment]
name = "{name}"
duration = "{duration}"
warmup = "{warmup}"
seeds = [1]{extra}

[tor]
refill_interval = "1 s"
num_entry_guards = {entry_guards}{tor_extra}

[network]
latency = {{ constant = "40 ms" }}{network_extra}

[[clients]]
name = "web"
workload = "web"
count = 950
link_up = "10 Mbit"
link_down = "20 Mbit"
placement = "round_robin"

[[clients]]
name = "bulk"
workload = "bulk"
count = {bulk}
link_up = "10 Mbit"
link_down = "20 Mbit"
placement = "round_robin"

[servers]
count = 200
link = "1 Gbit"

[workloads.web]
type = "web"
size = "320 KiB"
think = {think}

[workloads.bulk]
type = "bulk"
size = "5 MiB"

[mechanisms]
scheduler = "round-robin"
{throttling}
{extra_clients}"""


def all_guards(relays_text: str) -> str:
    """The relay sample with the Guard flag on every relay (`--guards all`).

    The paper's anonymity analysis says "Since there are 50 guards, the maximum entropy is
    log2(50)", so in its Shadow network every relay could be a client's first hop; a sample
    that keeps the consensus's flag proportions (spec section 5) has 14 guards. Everything
    else (bandwidths, Exit flags, order) is unchanged."""
    def add_guard(m: re.Match) -> str:
        flags = [f.strip().strip('"') for f in m.group(1).split(",") if f.strip()]
        if "Guard" not in flags:
            flags.insert(0, "Guard")
        return "flags = [" + ", ".join(f'"{f}"' for f in flags) + "]"

    text, n = re.subn(r"^flags = \[([^\]]*)\]", add_guard, relays_text, flags=re.M)
    if n == 0:
        raise ValueError("--guards all: the relay sample has no flags lines")
    return "# Every relay made a guard (`--guards all`).\n" + text


BUILTIN_RELAYS = Path(__file__).with_name("data") / "throttling-relays.toml"
#: The relay sample's name under ``configs/``, where every generated config refers to it.
RELAYS_FILE = "throttling-relays.toml"


def relay_sample_text(path: str | None) -> str:
    """The text of the relay sample: `path` (`--relays`) or the built-in 50 relays."""
    if path is None:
        return BUILTIN_RELAYS.read_text(encoding="utf-8")
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"--relays {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--relays {path}: cannot read it ({e})") from None


_BANDWIDTH_LINE = re.compile(r'^(\s*bandwidth\s*=\s*)"([^"]*)"', re.MULTILINE)


def scale_capacity(relays_text: str, factor: float) -> str:
    """The relay sample with every relay's `bandwidth` (its token-bucket rate) multiplied
    by `factor` (`--capacity-scale`). Consensus weights are left as they are: scaling them
    all alike would not change which paths clients pick."""
    from onionlab._core import parse_byte_rate

    def scaled(m: re.Match) -> str:
        try:
            rate = parse_byte_rate(m.group(2))
        except ValueError as e:
            raise ValueError(f"--capacity-scale: relay bandwidth {m.group(2)!r}: {e}") from None
        return f'{m.group(1)}"{round(rate * factor)} B/s"'

    text, n = _BANDWIDTH_LINE.subn(scaled, relays_text)
    if n == 0:
        raise ValueError("--capacity-scale: the relay sample has no bandwidth lines to scale")
    return f"# Every bandwidth multiplied by {factor:g} (--capacity-scale).\n" + text


def check_relay_sample(relays_text: str, args) -> list[dict]:
    """The sample's `[[relays]]` tables, after the config validator has passed a medium-load
    run on it (so a bad sample fails before any run starts, with `--relays` and the field
    named)."""
    import tempfile

    from onionlab import config as config_mod

    label = f"--relays {args.relays}" if args.relays else "the built-in relay sample"
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / RELAYS_FILE).write_text(relays_text, encoding="utf-8")
        text = config_text("relays-check", LOADS["medium"], mechanism_line("vanilla", {}), "1 min", "0 s", RELAYS_FILE, **client_settings(args))
        (Path(d) / "check.toml").write_text(text, encoding="utf-8")
        try:
            resolved = config_mod.check(Path(d) / "check.toml")
        except config_mod.ConfigError as e:
            raise ValueError(f"{label}:\n" + config_mod.format_problems(e)) from None
    return config_mod.parse(resolved)["relays"]


def client_settings(args) -> dict:
    """The `config_text` settings every run of one reproduction shares: the web think time,
    the entry guards per client, whether clients build predicted circuits (and build-time
    test circuits), the circuits' congestion control, and the exits' edge-blocking
    watermarks."""
    median, sigma = THINK_SHAPES[args.think]
    return {"think": think_text(args.think_median or median, sigma), **tor_settings(args)}


def tor_settings(args) -> dict:
    """The settings of `client_settings` beyond the think time: the `[tor]` lines and the
    path-selection weights (also recorded in summary.json)."""
    return {
        "entry_guards": args.entry_guards, "predicted_circuits": args.predicted_circuits,
        "congestion_control": args.congestion_control, "cellq": args.cellq, "cbt_learning": args.cbt_learning,
        "weights": args.weights,
    }


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def _positive_duration(text: str) -> str:
    from onionlab._core import parse_duration

    try:
        secs = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
    if not secs > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return text


def _cellq(text: str) -> tuple:
    """`HIGH,LOW` for --cellq: two whole numbers, LOW below HIGH."""
    try:
        high, low = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HIGH,LOW (two whole numbers, e.g. 256,64), got {text!r}") from None
    if not 0 <= low < high:
        raise argparse.ArgumentTypeError(f"LOW must be below HIGH and not negative, got {text!r}")
    return (high, low)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", type=int, default=5, help="seeds per configuration (default 5, as in the paper)")
    p.add_argument("--duration", default="20 min", help='simulated time per main run (default "20 min")')
    p.add_argument("--warmup", default="4 min", help='warm-up excluded from metrics (default "4 min")')
    p.add_argument("--sweep-seeds", type=int, default=2, help="seeds per sweep point (default 2); the choice is the best mean of per-seed medians")
    p.add_argument("--sweep-duration", help="simulated time per sweep run (default: --duration, so the choice is made on runs like the ones it is used for)")
    p.add_argument("--sweep-warmup", help="warm-up of sweep runs (default: --warmup)")
    p.add_argument(
        "--criterion", choices=tuple(SWEEP_CRITERIA),
        help="what the sweep minimises, per seed then averaged over seeds: the median web download time (default, the "
        "paper's) or the mean, which counts in full the slow downloads of clients a setting starves, and those the run's "
        "end cuts short at the time they had run",
    )
    p.add_argument("--think", choices=sorted(THINK), default="heavy", help="web think-time distribution (default heavy; smooth is the earlier, narrower lognormal)")
    p.add_argument(
        "--think-median", metavar="DURATION", type=_positive_duration,
        help="the think time's median, its sigma kept (default: the --think shape's, 8 s for heavy); to recalibrate the "
        "vanilla split after --capacity-scale",
    )
    p.add_argument(
        "--capacity-scale", metavar="K", type=_positive_float, default=1.0,
        help="multiply every relay's bandwidth by K (default 1). If the paper's table 1 totals (about 90 GiB) are per "
        "60-minute run, they are what a network of about 4 times the built-in sample's capacity delivers",
    )
    p.add_argument("--quick", action="store_true", help="a small version (1 seed, 3 simulated minutes, two sweep points) for tests")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep; use the parameters in --params")
    p.add_argument("--params", metavar="FILE", help="chosen parameters (a chosen.json from an earlier run) for --no-sweep")
    p.add_argument(
        "--guards", choices=("consensus", "all"), default="consensus",
        help="which relays may be entry guards: the sample's Guard-flagged relays (default, 14 of 50, the consensus's proportion) "
        "or all 50, as the paper's anonymity analysis states (\"Since there are 50 guards\")",
    )
    p.add_argument("--entry-guards", type=int, default=3, help="entry guards per client (default 3, tor 0.2.2's NumEntryGuards; spec M14 says one is enough)")
    p.add_argument(
        "--predicted-circuits", action="store_true",
        help="clients keep two circuits ready, as tor does (predicted circuits; default off: circuits are built when a stream needs one)",
    )
    p.add_argument(
        "--cbt-learning", action="store_true",
        help="clients also launch tor 0.2.2's circuit-build-time test circuits, one a minute up to 12 clean (implies --predicted-circuits)",
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
        "--weights", choices=("uniform", "computed"), default="uniform",
        help="path-selection bandwidth weights: uniform (default; the 2010 consensus has no weights line) or what tor's "
        "directory authorities compute for the 50 relays (dir-spec 3.8.3), as the paper's Shadow network's authorities would have",
    )
    p.add_argument(
        "--grid", action="append", metavar="ALG.PARAM=V1,V2,...",
        help="replace one axis of the sweep (spec 9's ranges), e.g. thresh.fraction=0.05,0.1,0.2,0.4 or "
        "\"flag.flag_rate=2 KiB/s,5 KiB/s\"; repeatable. The sweep names chosen values on an axis's edge in sweep_edges.json",
    )
    p.add_argument(
        "--relays", metavar="FILE",
        help="the relay sample, a [[relays]] TOML file (default: the built-in 50 relays from the 2010-01-12 consensus); "
        "tools/relays_from_consensus.py --seed S draws others with the same flag proportions. The think time stays "
        "calibrated on the built-in sample",
    )
    p.add_argument("--jobs", type=int, help="parallel runs (default: the CPUs)")


# ---------------------------------------------------------------- metrics


def _completed(d: pd.DataFrame, cls: str) -> pd.DataFrame:
    return stats.completed(d[d["class"] == cls])


def data_by_class(res, warmup_s: float) -> dict[str, float]:
    """Payload GiB delivered by guards to each client class after the warm-up, averaged
    over seeds (from the per-connection table; partial downloads count, as bytes did in
    the paper's totals)."""
    c = res.connections
    c = c[c["interval_start"] >= warmup_s]
    seeds = max(1, c["seed"].nunique())
    g = c.groupby("class")["bytes_written"].sum() * PAYLOAD_PER_WIRE_BYTE / 2**30 / seeds
    return {k: float(v) for k, v in g.items()}


def _unfinished_pct(d: pd.DataFrame, cls: str) -> float:
    """Percent of `cls`'s downloads started in the measured window that were still in
    progress when the run ended: the downloads a median over finished ones leaves out."""
    rows = d[d["class"] == cls]
    return 100.0 * float(stats.unfinished(rows).sum()) / len(rows) if len(rows) else math.nan


def web_time_mean(d: pd.DataFrame, end_s: float) -> float:
    """Mean web download time with the downloads the end of the run cut short counted at
    the time they had run by then (``end_s`` - start): a lower bound on what they would
    have taken, where a mean over finished downloads leaves them out. Failed downloads are
    left out, as everywhere."""
    web = d[d["class"] == "web"]
    times = np.concatenate([stats.completed(web)["ttlb"].to_numpy(dtype=float), end_s - web.loc[stats.unfinished(web), "start"].to_numpy(dtype=float)])
    return float(times.mean()) if len(times) else math.nan


def medians(res, seed: int | None = None, end_s: float | None = None) -> dict[str, float]:
    """Figure 3's medians over finished downloads, the mean web download time over finished
    downloads and (given the run's end, ``end_s`` seconds) with the unfinished ones counted
    at their elapsed time (:func:`web_time_mean`), the number of finished downloads, and the
    share of downloads the end of the run cut short."""
    d = res.downloads
    if seed is not None:
        d = d[d["seed"] == seed]
    w, b = _completed(d, "web"), _completed(d, "bulk")
    return {
        "web_ttfb_median": float(w["ttfb"].median()) if len(w) else math.nan,
        "web_ttlb_median": float(w["ttlb"].median()) if len(w) else math.nan,
        "web_ttlb_mean": float(w["ttlb"].mean()) if len(w) else math.nan,
        "web_time_mean": web_time_mean(d, end_s) if end_s is not None else math.nan,
        "bulk_ttlb_median": float(b["ttlb"].median()) if len(b) else math.nan,
        "web_downloads": int(len(w)),
        "bulk_downloads": int(len(b)),
        "web_unfinished_pct": _unfinished_pct(d, "web"),
        "bulk_unfinished_pct": _unfinished_pct(d, "bulk"),
    }


# ---------------------------------------------------------------- the sweep


#: The sweep's criteria: the per-seed column each one averages over seeds (lowest wins).
#: ``median`` is the paper's ("tuned to maximize web client performance", judged by the
#: median download time of figure 3). A median over finished downloads can be won by
#: starving the clients an algorithm throttles: they finish few downloads, so they barely
#: count (flagging at 1 KiB/s, never unflagged, had the fastest median at 4x capacity
#: while its web clients received 12 % less data than under vanilla). ``mean`` weighs
#: those slow downloads in full, and the downloads the run's end cut short at the time they
#: had run (:func:`web_time_mean`).
SWEEP_CRITERIA = {"median": "web_ttlb_median", "mean": "web_time_mean"}


def choose(table: pd.DataFrame, criterion: str = "median") -> dict[str, dict]:
    """Each algorithm's parameters with the lowest mean over seeds of the per-seed web
    download time statistic ``criterion`` names (:data:`SWEEP_CRITERIA`; default the
    median, the paper's). The paper tuned for web client performance; a mean over seeds
    weighs every seed equally and is not swayed by one seed's outlier. Ties: lower mean
    time to first byte, then the sweep's order."""
    if criterion not in SWEEP_CRITERIA:
        raise ValueError(f"--criterion: {criterion!r} is not one of {', '.join(SWEEP_CRITERIA)}")
    column = SWEEP_CRITERIA[criterion]
    per = table.groupby(["algorithm", "params"], sort=False).agg(
        key=(column, "mean"), web_ttfb_mean_of_medians=("web_ttfb_median", "mean")
    ).reset_index()
    chosen = {"vanilla": {}}
    for alg, grp in per.groupby("algorithm", sort=True):
        best = grp.sort_values(["key", "web_ttfb_mean_of_medians"], kind="mergesort").iloc[0]
        chosen[alg] = json.loads(best["params"])
    return chosen


def sweep_settings(args) -> tuple[str, str]:
    """Duration and warm-up of the sweep runs: the main runs' unless given. The choice is
    only the best for web clients on runs like the ones it is used for: 10-minute sweep
    runs with a 2-minute warm-up measured minutes 2-10, while clients were still starting
    (they start over the first 4 minutes) and before any circuit had been replaced, and
    their choice for flagging lost to the runner-up on every one of the 20-minute main
    runs' seeds (docs/reproductions/throttling.md)."""
    return args.sweep_duration or args.duration, args.sweep_warmup or args.warmup


def sweep(out: Path, args, relays_file: str, overrides: dict[str, dict[str, list]]) -> dict[str, dict]:
    """Runs the sweep (spec 9's axes with ``overrides`` from :func:`grid_overrides` in place)
    and writes its tables and choice; returns the choice."""
    grid = _sweep_grid(args.quick, overrides)
    duration, warmup = sweep_settings(args)
    end_s = _seconds(duration)
    seeds = list(range(1, args.sweep_seeds + 1))
    exps, meta = [], {}
    for alg, points in grid.items():
        for i, params in enumerate(points):
            name = f"sweep-{alg}-{i:02d}"
            text = config_text(name, LOADS["medium"], mechanism_line(alg, params), duration, warmup, relays_file, conn_metrics=False, **client_settings(args))
            exps.append((name, write_config(out, name, text), seeds))
            meta[name] = (alg, params)
    print(f"sweep: {len(exps)} configurations, medium load, seeds {seeds}, {duration} each, warm-up {warmup}, criterion: web download {args.criterion}", flush=True)
    results = run_many(exps, out, args.jobs)
    rows = []
    for name, res in results.items():
        alg, params = meta[name]
        for seed in seeds:
            rows.append({"algorithm": alg, "params": json.dumps(params, sort_keys=True), "seed": seed, **medians(res, seed, end_s)})
    table = pd.DataFrame(rows)
    chosen = choose(table, args.criterion)
    agg = table.groupby(["algorithm", "params"], sort=False).agg(
        seeds=("seed", "size"), web_ttlb_mean_of_medians=("web_ttlb_median", "mean"), web_ttfb_mean_of_medians=("web_ttfb_median", "mean"),
        web_ttlb_mean_of_means=("web_ttlb_mean", "mean"), web_time_mean_of_means=("web_time_mean", "mean"), web_unfinished_pct=("web_unfinished_pct", "mean"),
        bulk_ttlb_mean_of_medians=("bulk_ttlb_median", "mean"), web_ttlb_min=("web_ttlb_median", "min"), web_ttlb_max=("web_ttlb_median", "max"),
    ).reset_index()
    agg["chosen"] = [json.loads(p) == chosen[a] for a, p in zip(agg["algorithm"], agg["params"])]
    sort_by = {"median": "web_ttlb_mean_of_medians", "mean": "web_time_mean_of_means"}[args.criterion]
    agg.sort_values(["algorithm", sort_by], kind="mergesort").to_csv(out / "sweep.csv", index=False)
    table.to_csv(out / "sweep_per_seed.csv", index=False)
    (out / "chosen.json").write_text(json.dumps(chosen, indent=2, sort_keys=True) + "\n")
    edges = edge_choices(sweep_axes(args.quick, overrides), chosen)
    (out / "sweep_edges.json").write_text(json.dumps(edges, indent=2) + "\n")
    for e in edges:
        print(
            f"sweep: {e['algorithm']}'s chosen {e['parameter']} {e['value']} is the {e['edge']} value swept "
            f"({', '.join(map(str, e['axis']))}); the best may lie beyond (extend with --grid {e['algorithm']}.{e['parameter']}=...)",
            flush=True,
        )
    return chosen


# ---------------------------------------------------------------- anonymity analysis


def _guard_rates(res, relay_bw: dict[str, float], alg: str) -> pd.DataFrame:
    """Per (seed, relay, minute): the rate at which a connection would become throttled;
    for vanilla the relay's bandwidth (spec 7.4)."""
    r = res.relays.copy()
    r["minute"] = (r["interval_start"] // 60).astype(int)
    if alg == "vanilla":
        r["alpha"] = r["relay"].map(relay_bw)
    else:
        r["alpha"] = r["throttle_rate"]
    return r.groupby(["seed", "relay", "minute"], as_index=False)["alpha"].mean()


def _per_minute(c: pd.DataFrame) -> pd.DataFrame:
    """The per-connection table in one-minute rows (the paper's "circuit throughputs over
    each minute"), whatever its sampling interval: bytes summed, the throttle rate the mean
    of the minute's throttled samples (missing if never throttled in the minute), and
    ``peak_rate``, the highest throughput over PEAK_STEP_S seconds (or one sample, if
    samples are longer) in the minute (bytes/s): what the circuit carries while busy; and
    ``bucket_empty_s``, the time in the minute the throttle held the connection back (NaN
    for results recorded before that column existed)."""
    c = c.copy()
    starts = np.unique(c["interval_start"].to_numpy())
    gaps = np.diff(starts)
    step = max(PEAK_STEP_S, float(gaps[gaps > 0].min()) if (gaps > 0).any() else 60.0)
    keys = ["seed", "relay", "client", "class"]
    c["bin"] = (c["interval_start"] // step) * step
    c["sample_rate"] = c.groupby(keys + ["bin"], sort=False)["bytes_written"].transform("sum") / step
    c["interval_start"] = (c["interval_start"] // 60) * 60.0
    sums = {"bytes_written": ("bytes_written", "sum"), "bytes_read": ("bytes_read", "sum"), "throttle_rate": ("throttle_rate", "mean"), "peak_rate": ("sample_rate", "max")}
    if "bucket_empty_s" in c:  # not in results from before the column existed
        sums["bucket_empty_s"] = ("bucket_empty_s", "sum")
    m = c.groupby(["seed", "relay", "client", "class", "interval_start"], as_index=False, sort=True).agg(**sums)
    if "bucket_empty_s" not in m:
        m["bucket_empty_s"] = np.nan
    return m


def attacks(res, relay_bw: dict[str, float], alg: str, warmup_s: float) -> pd.DataFrame:
    """Attacks 1 and 2 per target client (spec 7.4): the anonymity set of guards whose mean
    throttle rate lies within one standard deviation of the client's per-minute throughput
    (attack 1) or of its connection's throttle rate (attack 2). An empty set tells the
    attacker nothing (entropy loss 0); a set without the true guard is a false exclusion.

    Rows ``attack1-any`` and ``attack2-any`` apply spec 7.4's variant rule to the same band:
    a guard stays if its rate in *any* minute lies in the band. The paper's "remove any guard
    whose throttle rate is outside a range" fits both readings when a guard's rate moves
    over time (B/N does); the variant never drops a guard for a rate it actually had.

    Rows ``attack2-observed`` (and ``-any``) estimate the target's throttle rate from its
    own traffic only, as the paper's simulation did ("using the same data set as Attack
    1"): the throttle rate counts only in minutes it held the connection back. ``attack2``
    is the flood the paper describes, which reveals the rate whether or not it binds.
    Results recorded before the connection table had ``bucket_empty_s`` have no such rows."""
    guards = sorted(relay_bw)
    gi = {name: i for i, name in enumerate(guards)}
    hmax = math.log2(len(guards))
    g = _guard_rates(res, relay_bw, alg)
    g = g[g["minute"] * 60 >= warmup_s]
    rho = g.groupby(["seed", "relay"])["alpha"].mean()
    # Per seed: every guard's mean rate (NaN if it has none) and its minutes' rates, sorted,
    # so that "any minute in the band" is two binary searches.
    rho_by_seed = {seed: rho.loc[seed].reindex(guards).to_numpy(dtype=float) for seed in rho.index.get_level_values(0).unique()}
    minutes = {k: np.sort(v.dropna().to_numpy(dtype=float)) for k, v in g.groupby(["seed", "relay"])["alpha"]}
    c = _per_minute(res.connections)
    c = c[c["interval_start"] >= warmup_s]
    rows = []
    for seed, target in _band_targets(c):
        rho_s = rho_by_seed.get(seed, np.full(len(guards), np.nan))
        known = ~np.isnan(rho_s)
        mins = [minutes.get((seed, name), np.empty(0)) for name in guards]
        for client, cls, true_guard, bw, th, peak, held in target:
            # Attack 1: throughput. Attack 2: the rate a flood would reveal (Eq. 2): the
            # connection's throttle rate in minutes it is throttled; otherwise what the
            # circuit carries while busy (the minute's peak sample), since an unthrottled
            # flood runs at the circuit's own speed. (The guard's bandwidth itself is not
            # observable through the target circuit; using it would hand the attacker the
            # answer.)
            lam = bw[bw > 0] / 60.0
            seen = (bw > 0) | ~np.isnan(th)
            est = np.where(np.isnan(th[seen]), peak[seen], th[seen])
            # Attack 2 as the paper simulated it, "using the same data set as Attack 1"
            # (no flood): the circuit's own traffic shows its throttle rate (Eq. 2) only in
            # minutes the throttle held it back (its bucket ran empty); otherwise it shows
            # what the circuit carried while busy, and a minute without traffic nothing.
            estimates = [("attack1", lam), ("attack2", est)]
            if not np.isnan(held).any():
                bound = (held > 0) & ~np.isnan(th)
                shown = (bw > 0) | bound
                estimates.append(("attack2-observed", np.where(bound[shown], th[shown], peak[shown])))
            for attack, x in estimates:
                mu, sd = float(np.mean(x)), float(np.std(x))
                lo, hi = mu - sd, mu + sd
                with np.errstate(invalid="ignore"):
                    by_mean = known & (lo <= rho_s) & (rho_s <= hi)
                by_any = np.array([np.searchsorted(a, hi, "right") > np.searchsorted(a, lo, "left") for a in mins])
                for name, cand in ((attack, by_mean), (f"{attack}-any", by_any)):
                    n = int(cand.sum())
                    if n:
                        loss = hmax - math.log2(n)
                        excluded = true_guard not in gi or not cand[gi[true_guard]]
                    else:
                        loss, excluded = 0.0, False
                    rows.append({"seed": seed, "client": client, "class": cls, "attack": name, "algorithm": alg,
                                 "set_size": n, "entropy_loss_bits": loss, "true_guard_excluded": excluded})
    return pd.DataFrame(rows)


def _main_guards(c: pd.DataFrame) -> pd.DataFrame:
    """Each (seed, client)'s main guard: the relay it received the most bytes from in
    ``c`` (ties: the first relay by name), with those bytes. Columns seed, client, relay,
    total."""
    sums = c.groupby(["seed", "client", "relay"], sort=True, as_index=False)["bytes_written"].sum()
    sums = sums.rename(columns={"bytes_written": "total"})
    sums = sums.sort_values(["seed", "client", "total", "relay"], ascending=[True, True, False, True], kind="stable")
    return sums.drop_duplicates(["seed", "client"], keep="first")


def _band_targets(c: pd.DataFrame):
    """Targets of the band procedure (:func:`attacks`), from the per-minute connection
    table after the warm-up: each client whose main guard sent it bytes, on at least two
    active minutes. Yields (seed, list of (client, class, guard, bytes written, throttle
    rate, peak rate, time held back by the throttle)), the arrays in minute order."""
    main = _main_guards(c)
    main = main[main["total"] > 0]
    mine = c.merge(main[["seed", "client", "relay"]], on=["seed", "client", "relay"], how="inner")
    mine = mine.sort_values(["seed", "client", "interval_start"], kind="stable")
    for seed, cs in mine.groupby("seed", sort=True):
        out = []
        client = cs["client"].to_numpy()
        bounds = np.flatnonzero(client[1:] != client[:-1]) + 1
        bw_all = cs["bytes_written"].to_numpy()
        th_all = cs["throttle_rate"].to_numpy(dtype=float)
        pk_all = cs["peak_rate"].to_numpy(dtype=float)
        held_all = cs["bucket_empty_s"].to_numpy(dtype=float)
        cls_all, relay_all = cs["class"].to_numpy(), cs["relay"].to_numpy()
        for a, b in zip(np.r_[0, bounds], np.r_[bounds, len(cs)]):
            bw = bw_all[a:b]
            if int((bw > 0).sum()) < 2:
                continue
            out.append((client[a], cls_all[a], relay_all[a], bw, th_all[a:b], pk_all[a:b], held_all[a:b]))
        yield seed, out


def _ewma_factor(halflife_s: float, dt: float = 1.0) -> float:
    return math.exp(-math.log(2) * dt / halflife_s)


def _timing_targets(cs: pd.DataFrame, warmup_s: float, gi: dict[str, int]):
    """Targets of the timing attacks, as in :func:`attacks`: each client's main guard
    connection (most bytes after the warm-up), if that guard is known and the connection
    was active in at least two minutes after the warm-up. Yields (client, class, guard,
    the connection's rows: ``interval_start``, ``bytes_written``, ``throttle_rate`` and,
    where recorded, ``bucket_empty_s``, all samples), clients in order."""
    after = cs[cs["interval_start"] >= warmup_s]
    main = _main_guards(after)
    main = main[(main["total"] > 0) & main["relay"].isin(gi)]
    mine = after.merge(main[["seed", "client", "relay"]], on=["seed", "client", "relay"], how="inner")
    per_minute = mine.groupby(["client", mine["interval_start"] // 60])["bytes_written"].sum()
    active = (per_minute > 0).groupby(level=0).sum()
    keep = main[main["client"].map(active).fillna(0).to_numpy() >= 2]
    rows_of = cs.groupby(["client", "relay"], sort=False).indices
    first_class = cs.drop_duplicates("client").set_index("client")["class"]
    # Numeric columns only: taking rows of the Arrow-backed string columns costs more than
    # the attacks themselves.
    numeric = cs[[k for k in ("interval_start", "bytes_written", "throttle_rate", "bucket_empty_s") if k in cs]]
    for client, g in zip(keep["client"], keep["relay"]):
        yield client, first_class[client], g, numeric.iloc[rows_of[(client, g)]]


def flag_timing_attack(res, relay_bw: dict[str, float], params: dict, warmup_s: float, step_s: float, slack_s: float | None = None) -> pd.DataFrame:
    """Attack 2 against flagging by *timing* (paper section 5.2; spec 7.3), beside spec
    7.4's band procedure. The paper's attacker raises the target's EWMA and learns when
    each guard would start or stop throttling it; "we can eliminate from the anonymity set
    any guard such that the EWMA of the target circuit should have resulted in a throttling
    but did not" and "any guard that would not have throttled at precisely those times".

    The attacker knows (i) every guard g's meta-EWMA threshold over time: the fair-share
    rate B_g/N_g(t) that probing reveals (the relay table's per-second ``throttle_rate``
    under flagging), from which ``M_g(t)`` follows by the same EWMA; (ii) the system-wide
    flagging policy (H, P); (iii) the target connection's downstream bytes over time (what
    the attacker's server sends, per ``step_s`` interval of the connection table), hence
    its cell EWMA ``E(t)``; and (iv) when the target was flagged (the paper: "this
    determination must be made after the fact to account for the burst bucket ... but it
    can still be made precisely"; here the connection's throttle state sampled every
    ``step_s``). For each guard it replays algorithm 2 (flag when ``E > M_g``, unflag when
    ``E < P M_g``) and keeps the guard only if, at every sample after the warm-up, the
    observed state occurs in the replay within ``slack_s`` (default one sample: the bytes
    within a sample are spread evenly, so the replay's timing is only that precise).

    Output rows as :func:`attacks`, attack ``attack2-timing``. An empty set tells the
    attacker nothing (loss 0); a set without the true guard is a false exclusion."""
    slack_s = step_s if slack_s is None else slack_s
    h = _seconds(params.get("halflife", "30 s")) if isinstance(params.get("halflife", "30 s"), str) else float(params["halflife"])
    pen = float(params.get("penalty", 0.0))
    f = _ewma_factor(h)
    guards = sorted(relay_bw)
    gi = {g: i for i, g in enumerate(guards)}
    hmax = math.log2(len(guards))
    per = int(round(step_s))
    slack_blocks = max(1, int(math.ceil(slack_s / step_s)))
    rows = []
    for seed, cs in res.connections.groupby("seed", sort=True):
        rs = res.relays[res.relays["seed"] == seed]
        t_end = int(math.ceil(max(cs["interval_start"].max() + step_s, rs["interval_start"].max() + 1)))
        nsec = t_end + 1
        # Split rate per guard per second: the row at interval_start k is the value at k+1.
        split = np.zeros((len(guards), nsec))
        have = np.zeros((len(guards), nsec), dtype=bool)
        k = (rs["interval_start"].to_numpy() + 1).round().astype(int)
        ok = (k < nsec) & rs["relay"].isin(gi).to_numpy()
        gidx = rs["relay"].map(gi).to_numpy()
        val = rs["throttle_rate"].to_numpy(dtype=float)
        split[gidx[ok].astype(int), k[ok]] = np.nan_to_num(val[ok])
        have[gidx[ok].astype(int), k[ok]] = ~np.isnan(val[ok])
        meta = np.zeros((len(guards), nsec))
        m = np.zeros(len(guards))
        for s in range(1, nsec):
            m = m * f + split[:, s]
            meta[:, s] = m
        targets = list(_timing_targets(cs, warmup_s, gi))
        if not targets:
            continue
        nb = int(math.ceil(nsec / per)) + 1
        nc = len(targets)
        byts = np.zeros((nc, nb))
        obs = np.full((nc, nb), -1, dtype=np.int8)  # -1 unknown, 0 unflagged, 1 flagged
        for i, (_, _, _, mine) in enumerate(targets):
            b = (mine["interval_start"].to_numpy() / step_s).round().astype(int)
            byts[i, b] = mine["bytes_written"].to_numpy(dtype=float)
            after = mine["interval_start"].to_numpy() >= warmup_s
            obs[i, b[after]] = mine["throttle_rate"].notna().to_numpy()[after].astype(np.int8)
        # Replay algorithm 2 for every (target, guard), once a second.
        e = np.zeros(nc)
        flagged = np.zeros((nc, len(guards)), dtype=bool)
        any_on = np.zeros((nb, nc, len(guards)), dtype=bool)
        any_off = np.zeros((nb, nc, len(guards)), dtype=bool)
        for s in range(1, nsec):
            blk = (s - 1) // per  # the sample interval this second belongs to
            if blk < nb:
                e = e * f + byts[:, blk] / per
            mg = meta[:, s]
            live = have[:, s]
            over = (e[:, None] > mg[None, :]) & live[None, :]
            under = (e[:, None] < pen * mg[None, :]) & live[None, :]
            flagged = over | (flagged & ~under)
            # The state sampled at the end of interval j (second (j+1)*per) is compared
            # with the replay's states within slack of that second.
            j = s // per - 1
            for d in range(-slack_blocks, slack_blocks + 1):
                jj = j + d
                if 0 <= jj < nb and abs(s - (jj + 1) * per) <= slack_s:
                    any_on[jj] |= flagged
                    any_off[jj] |= ~flagged
        known_on = obs == 1
        known_off = obs == 0
        bad = (known_on.T[:, :, None] & ~any_on) | (known_off.T[:, :, None] & ~any_off)
        consistent = ~bad.any(axis=0)
        for i, (client, cls, g, _) in enumerate(targets):
            n = int(consistent[i].sum())
            if n:
                loss, excluded = hmax - math.log2(n), not consistent[i, gi[g]]
            else:
                loss, excluded = 0.0, False
            rows.append({"seed": seed, "client": client, "class": cls, "attack": "attack2-timing", "algorithm": "flag", "set_size": n, "entropy_loss_bits": loss, "true_guard_excluded": excluded})
    return pd.DataFrame(rows)


def _sample_step(starts: np.ndarray, default: float) -> float:
    """The sampling interval of a table: the smallest gap between its interval starts."""
    u = np.unique(starts)
    gaps = np.diff(u)
    return float(gaps[gaps > 0].min()) if (gaps > 0).any() else default


def thresh_timing_attack(res, relay_bw: dict[str, float], warmup_s: float, slack_s: float = 1.0, rel_tol: float = 0.01) -> pd.DataFrame:
    """Attack 2 against threshold throttling by the *signature of its rate over time*
    (paper section 5.2: "once the circuit has been throttled, then any fluctuation in the
    throttling rate that separates out the guard nodes can be used to further narrow the
    set"), beside spec 7.4's band procedure.

    The attacker knows every guard's threshold rate over time (what probing reveals: the
    relay table's ``throttle_rate``, absent while a guard throttles nobody) and, by
    flooding the target circuit, the rate the target is throttled at whenever it is
    throttled (the connection table's ``throttle_rate`` at each sample). It keeps a guard
    only if, at every throttled sample after the warm-up, the guard's own rate within
    ``slack_s`` of the sample equals the observed one (within ``rel_tol``). Samples in
    which the target is not throttled tell it nothing here: whether the target should have
    been depends on the ranking of the guard's other connections, which it does not know.
    Targets are those of :func:`attacks` (each client's main guard connection, at least two
    active minutes); a target never throttled leaves every guard in the set (loss 0).

    Rows ``attack2-observed-timing`` give the same attack without a flood, from the
    target's own traffic only (as in :func:`attacks`' ``attack2-observed``): a throttled
    sample shows its rate only if the throttle held the connection back in it
    (``bucket_empty_s`` > 0). Results recorded before that column existed have no such rows.

    Output rows as :func:`attacks`, attacks ``attack2-timing`` and
    ``attack2-observed-timing``, algorithm ``thresh``."""
    guards = sorted(relay_bw)
    gi = {g: i for i, g in enumerate(guards)}
    hmax = math.log2(len(guards))
    recorded = "bucket_empty_s" in res.connections
    out = []
    for seed, cs in res.connections.groupby("seed", sort=True):
        rs = res.relays[(res.relays["seed"] == seed) & res.relays["relay"].isin(gi)]
        if rs.empty:
            continue
        relay_step = _sample_step(rs["interval_start"].to_numpy(), 1.0)
        conn_step = _sample_step(cs["interval_start"].to_numpy(), 60.0)
        # rate[g, t]: guard g's rate at second t (a row is the value at its interval's end).
        t_rel = np.rint(rs["interval_start"].to_numpy() + relay_step).astype(int)
        nsec = int(max(t_rel.max(), math.ceil(cs["interval_start"].max() + conn_step))) + 2
        rate = np.full((len(guards), nsec), np.nan)
        rate[rs["relay"].map(gi).to_numpy().astype(int), t_rel] = rs["throttle_rate"].to_numpy(dtype=float)
        slack = int(math.ceil(slack_s))
        for client, cls, g, rows in _timing_targets(cs, warmup_s, gi):
            mine = rows[rows["interval_start"] >= warmup_s]
            seen = mine[mine["throttle_rate"].notna()]
            # matches[k, g]: guard g's rate matched the target's at throttled sample k.
            matches = np.ones((len(seen), len(guards)), dtype=bool)
            for k, (t, r) in enumerate(zip(np.rint(seen["interval_start"].to_numpy() + conn_step).astype(int), seen["throttle_rate"].to_numpy(dtype=float))):
                window = rate[:, max(0, t - slack): min(nsec, t + slack + 1)]
                with np.errstate(invalid="ignore"):
                    matches[k] = (np.abs(window - r) <= rel_tol * r).any(axis=1)
            variants = [("attack2-timing", matches)]
            if recorded:
                variants.append(("attack2-observed-timing", matches[seen["bucket_empty_s"].to_numpy() > 0]))
            for attack, m in variants:
                consistent = m.all(axis=0)
                n = int(consistent.sum())
                if n:
                    loss, excluded = hmax - math.log2(n), not consistent[gi[g]]
                else:
                    loss, excluded = 0.0, False
                out.append({"seed": seed, "client": client, "class": cls, "attack": attack, "algorithm": "thresh",
                             "set_size": n, "entropy_loss_bits": loss, "true_guard_excluded": excluded})
    return pd.DataFrame(out)


def attack3(out: Path, args, relays_file: str, chosen: dict, seeds: list[int]) -> pd.DataFrame:
    """Attack 3 (section 5.2), measured: linking two streams of one client through the
    shared burst bucket. The paper gives no simulation; this is ours. Two malicious servers
    each send beta/2 = 1 MiB; on one client connection that is 2 MiB through one bucket
    (clients "link-same": one 2 MiB response), on two clients' connections 1 MiB each
    ("link-diff"). The attacker then sees whether the connection is throttled (here: its
    throttle is set in the 5 s interval the response ends in or the next; the paper's small
    test response measures the same). True positive: a link-same response followed by
    throttling. False positive: two link-diff responses at the same guard starting within
    30 s of each other, both followed by throttling. Medium load, every algorithm."""
    exps = []
    for alg in ALGORITHMS:
        name = f"attack3-{alg}"
        text = config_text(name, LOADS["medium"], mechanism_line(alg, chosen[alg]), args.duration, args.warmup, relays_file, extra_clients=LINKING_CLIENTS, conn_interval="5 s", **client_settings(args))
        exps.append((name, write_config(out, name, text), seeds))
    print(f"attack 3: {len(exps)} configurations x {len(seeds)} seeds", flush=True)
    runs = run_many(exps, out, args.jobs)
    rows = []
    for alg in ALGORITHMS:
        res = runs[f"attack3-{alg}"]
        c = res.connections
        d = res.downloads
        d = d[d["class"].isin(["link-same", "link-diff"]) & d["ttlb"].notna()].copy()
        d["guard"] = d["path"].str.split(",").str[0]
        d["end"] = d["start"] + d["ttlb"]
        thr = c[c["throttle_rate"].notna()].groupby(["seed", "relay", "client"])["interval_start"].apply(lambda x: set((x // 5).astype(int)))

        def throttled(r) -> bool:
            slots = thr.get((r.seed, r.guard, r.client), set())
            k = int(r.end // 5)
            return k in slots or (k + 1) in slots

        d["throttled"] = [throttled(r) for r in d.itertuples()]
        same = d[d["class"] == "link-same"]
        diff = d[d["class"] == "link-diff"].sort_values(["seed", "guard", "start"])
        pairs = both = 0
        for _, g in diff.groupby(["seed", "guard"]):
            st, th, cl = g["start"].to_numpy(), g["throttled"].to_numpy(), g["client"].to_numpy()
            for i in range(len(g)):
                for j in range(i + 1, len(g)):
                    if st[j] - st[i] > 30:
                        break
                    if cl[i] != cl[j]:
                        pairs += 1
                        both += bool(th[i] and th[j])
        rows.append({
            "algorithm": alg,
            "same_client_responses": len(same),
            "true_positive_rate": float(same["throttled"].mean()) if len(same) else math.nan,
            "different_client_pairs": pairs,
            "false_positive_rate": both / pairs if pairs else math.nan,
            "single_1MiB_throttled_rate": float(diff["throttled"].mean()) if len(diff) else math.nan,
        })
    t = pd.DataFrame(rows)
    t.to_csv(out / "attack3.csv", index=False)
    return t


def probe(out: Path, args, relays_file: str) -> dict:
    """Figure 4a: probing a guard with static throttling at 5 KiB/s and a 2 MiB burst. One
    client downloads 10 MiB through the guard over fast middle and exit relays."""
    text = f"""# Generated by `onionlab reproduce throttling`: figure 4a probe.
[experiment]
name = "probe"
duration = "{'5 min' if args.quick else '20 min'}"
connection_metrics_interval = "1 s"

[tor]
refill_interval = "1 s"

[network]
latency = {{ constant = "40 ms" }}

[[relays]]
name = "target-guard"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast", "Stable"]
throttling = {{ kind = "static", rate = "5 KiB/s", burst = "2 MiB" }}

[[relays]]
name = "fast-middle"
bandwidth = "50 MiB/s"
flags = ["Fast", "Stable"]

[[relays]]
name = "fast-exit"
bandwidth = "50 MiB/s"
flags = ["Exit", "Fast", "Stable"]

[[clients]]
name = "probe"
workload = "probe"
count = 1

[servers]
count = 1

[workloads.probe]
type = "bulk"
size = "10 MiB"
"""
    res = run_many([("probe", write_config(out, "probe", text), [1])], out, 1)["probe"]
    c = res.connections.sort_values("interval_start")
    lam = c["bytes_written"].to_numpy(dtype=float)  # bytes in each 1 s interval
    t = c["interval_start"].to_numpy() + 1.0
    cum = np.cumsum(lam)
    beta = 2 * 2**20
    i1 = int(np.searchsorted(cum, beta))
    alpha = np.full_like(lam, np.nan)
    for i in range(i1 + 1, len(lam)):
        alpha[i] = (cum[i] - cum[i1]) / (t[i] - t[i1])
    est = float(alpha[-1]) if len(alpha) and not np.isnan(alpha[-1]) else math.nan
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, lam / 1024, lw=0.8, label="throughput λ (KiB/s)")
    ax.plot(t, alpha / 1024, lw=1.5, label="estimate α (eq. 2)")
    ax.axhline(5, color="k", ls="--", lw=0.8, label="true rate 5 KiB/s")
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KiB/s")
    ax.set_title("Figure 4a: probing a guard's throttle rate (static, 5 KiB/s, 2 MiB burst)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "figure4a.png", dpi=120)
    plt.close(fig)
    return {"burst_done_s": float(t[i1]) if i1 < len(t) else math.nan, "estimated_rate_KiBps": est / 1024, "true_rate_KiBps": 5.0}


# ---------------------------------------------------------------- figures and tables


COLORS = dict(zip(ALGORITHMS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")))


def busiest_channels(res, warmup_s: float, top: int = CHANNEL_TOP) -> pd.DataFrame:
    """The `top` relay-to-relay channel ends with the most cells waiting, after the warm-up,
    averaged over samples and seeds (a channel end absent from a sample, closed or not yet
    open, counts as empty then; two channels between the same pair count as one end). Per
    end: KiB/s written, circuits, active circuits (with cells waiting there), queued cells,
    and KiB/s per active circuit, the share of a circuit waiting there. ``share_of_relay``
    is the end's part of what its relay wrote to relays."""
    cols = ["relay", "peer", "kib_per_s", "share_of_relay", "circuits", "active_circuits", "queued_cells", "kib_per_s_per_active_circuit"]
    c = res.channels
    c = c[c["interval_start"] >= warmup_s]
    if c.empty:
        return pd.DataFrame(columns=cols)
    samples = c.groupby("seed")["interval_start"].nunique().sum()
    step = float(np.diff(np.sort(c["interval_start"].unique()))[0]) if c["interval_start"].nunique() > 1 else CHANNEL_STEP_S
    g = c.groupby(["relay", "peer"]).agg(
        written=("bytes_written", "sum"), circuits=("circuits", "sum"), active_circuits=("active_circuits", "sum"), queued_cells=("queued_cells", "sum"),
    )
    t = pd.DataFrame({
        "kib_per_s": g["written"] / 1024 / (samples * step),
        "share_of_relay": g["written"] / g.groupby("relay")["written"].transform("sum"),
        "circuits": g["circuits"] / samples,
        "active_circuits": g["active_circuits"] / samples,
        "queued_cells": g["queued_cells"] / samples,
    })
    t["kib_per_s_per_active_circuit"] = (t["kib_per_s"] / t["active_circuits"]).where(t["active_circuits"] > 0)
    t = t.reset_index().sort_values(["queued_cells", "relay", "peer"], ascending=[False, True, True], kind="mergesort").head(top)
    return t[cols].round(3).reset_index(drop=True)


THROTTLE_STATE_COLUMNS = [
    "load", "algorithm", "guard_samples_throttling_pct", "throttled_connections_per_guard", "at_floor_pct",
    "web_throttled_pct", "bulk_throttled_pct", "web_pct_of_throttled",
]


def throttle_state(res, alg: str, params: dict, warmup_s: float) -> dict:
    """Whom an algorithm throttles, after the warm-up (``throttle_state.csv``). Both tables
    sample the state at the end of each interval, so each share is a time average whatever
    the interval. From the relay table, guards with client connections only:
    ``guard_samples_throttling_pct`` (samples with at least one throttled connection),
    ``throttled_connections_per_guard`` (mean) and, for threshold, ``at_floor_pct`` (samples
    whose rate is the floor F: the floor(T*N)-th loudest connection was slower than F).
    From the per-connection table: ``web_throttled_pct`` and ``bulk_throttled_pct`` (each
    class's connection samples that were throttled) and ``web_pct_of_throttled`` (web
    clients' part of the throttled samples). A share with nothing to count is NaN."""

    def pct(mask) -> float:
        return 100.0 * float(mask.mean()) if len(mask) else math.nan

    r = res.relays
    r = r[(r["interval_start"] >= warmup_s) & (r["client_connections"] > 0)]
    at_floor = math.nan
    if alg == "thresh":
        floor = axis_value_key("floor", params["floor"])
        rated = r["throttle_rate"].dropna()
        at_floor = pct(rated <= floor + 0.5)  # rates are whole bytes/s
    c = res.connections
    c = c[c["interval_start"] >= warmup_s]
    throttled = c["throttle_rate"].notna()
    return {
        "algorithm": alg,
        "guard_samples_throttling_pct": pct(r["throttled_connections"] > 0),
        "throttled_connections_per_guard": float(r["throttled_connections"].mean()) if len(r) else math.nan,
        "at_floor_pct": at_floor,
        "web_throttled_pct": pct(throttled[c["class"] == "web"]),
        "bulk_throttled_pct": pct(throttled[c["class"] == "bulk"]),
        "web_pct_of_throttled": pct(c.loc[throttled, "class"] == "web"),
    }


def _cdf(ax, values, label):
    x, y = ecdf(values)
    if len(x):
        ax.step(x, y, where="post", label=f"{label} (n={len(x)})", lw=1.2, color=COLORS.get(label))


def figure3(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(3, 3, figsize=(13, 11))
    panels = [("web", "ttfb", "time to first byte (s), web"), ("web", "ttlb", "download time (s), web"), ("bulk", "ttlb", "download time (s), bulk")]
    for i, load in enumerate(LOADS):
        for j, (cls, metric, xl) in enumerate(panels):
            ax = axes[i][j]
            for alg in ALGORITHMS:
                res = results.get((load, alg))
                if res is not None:
                    _cdf(ax, _completed(res.downloads, cls)[metric], alg)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel(xl)
            ax.set_ylabel("cumulative fraction")
            ax.set_title(f"({'abcdefghi'[3 * i + j]}) {'320 KiB' if cls == 'web' else '5 MiB'} clients, {load} load")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure4(anon: pd.DataFrame, attack: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for alg in ALGORITHMS:
        a = anon[(anon["attack"] == attack) & (anon["algorithm"] == alg)]
        _cdf(ax, a["entropy_loss_bits"], alg)
    timing = anon[anon["attack"] == f"{attack}-timing"]
    for alg, t in timing.groupby("algorithm", sort=True):
        x, y = ecdf(t["entropy_loss_bits"])
        ax.step(x, y, where="post", label=f"{alg}, timing (n={len(x)})", lw=1.2, ls="--", color=COLORS[alg])
    ax.set_xlabel(f"entropy lost (bits; maximum log2(50) = {math.log2(50):.2f})")
    ax.set_ylabel("cumulative fraction of clients")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(out: Path, args) -> int:
    if args.quick:
        args.seeds, args.duration, args.warmup = 1, "3 min", "1 min"
        args.sweep_seeds, args.sweep_duration, args.sweep_warmup = 1, None, None
    if args.seeds < 1:
        raise ValueError(f"--seeds: must be at least 1, got {args.seeds}")
    if args.sweep_seeds < 1:
        raise ValueError(f"--sweep-seeds: must be at least 1, got {args.sweep_seeds}")
    if args.entry_guards < 1:
        raise ValueError(f"--entry-guards: must be at least 1, got {args.entry_guards}")
    relays_text = relay_sample_text(args.relays)
    if args.guards == "all":
        relays_text = all_guards(relays_text)
    if args.capacity_scale != 1.0:
        relays_text = scale_capacity(relays_text, args.capacity_scale)
    relays = check_relay_sample(relays_text, args)
    (out / "configs").mkdir(parents=True, exist_ok=True)
    relays_file = RELAYS_FILE
    (out / "configs" / relays_file).write_text(relays_text, encoding="utf-8")
    from onionlab._core import parse_byte_rate

    relay_bw = {r["name"]: float(parse_byte_rate(r["bandwidth"])) for r in relays}

    if args.no_sweep and args.grid:
        raise ValueError("--grid: has no effect with --no-sweep (the parameters come from --params)")
    if args.no_sweep and args.criterion:
        raise ValueError("--criterion: has no effect with --no-sweep (the parameters come from --params)")
    args.criterion = args.criterion or "median"
    overrides = grid_overrides(args.grid)  # a bad --grid fails before any run
    if args.no_sweep:
        if not args.params:
            raise ValueError("--no-sweep needs --params FILE (a chosen.json)")
        chosen = json.loads(Path(args.params).read_text())
        missing = [a for a in ALGORITHMS if a not in chosen]
        if missing:
            raise ValueError(f"--params {args.params}: no parameters for {', '.join(missing)}")
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
                name, bulk, mechanism_line(alg, chosen[alg]), args.duration, args.warmup, relays_file,
                conn_interval=ci, chan_interval=chan, **client_settings(args),
            )
            exps.append((name, write_config(out, name, text), seeds))
    print(f"main runs: {len(exps)} configurations x {len(seeds)} seeds", flush=True)
    runs = run_many(exps, out, args.jobs)
    results = {(load, alg): runs[f"{load}-{alg}"] for load in LOADS for alg in ALGORITHMS}

    warmup_s = _seconds(args.warmup)
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
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in medians(res).items()},
        })
    table1 = pd.DataFrame(rows)
    table1.to_csv(out / "table1.csv", index=False)
    figure3(results, out / "figure3.png")

    flag_timing = flag_timing_attack(results[("medium", "flag")], relay_bw, chosen["flag"], warmup_s, TIMING_STEP_S)
    anon = pd.concat(
        [attacks(results[("medium", alg)], relay_bw, alg, warmup_s) for alg in ALGORITHMS]
        + [flag_timing, thresh_timing_attack(results[("medium", "thresh")], relay_bw, warmup_s),
           # Flagging's timing needs no flood: "this determination must be made after the
           # fact to account for the burst bucket of the target circuit, but it can still be
           # made precisely" (section 5.2). The same rows stand for the observed attack.
           flag_timing.assign(attack="attack2-observed-timing")],
        ignore_index=True,
    )
    anon.to_csv(out / "anonymity.csv", index=False)
    channels = pd.concat([busiest_channels(results[("medium", alg)], warmup_s).assign(algorithm=alg) for alg in ALGORITHMS], ignore_index=True)
    channels = channels[["algorithm", *[c for c in channels.columns if c != "algorithm"]]]
    channels.to_csv(out / "channels.csv", index=False)
    state = pd.DataFrame(
        [{"load": load, **throttle_state(res, alg, chosen[alg], warmup_s)} for (load, alg), res in results.items()],
        columns=THROTTLE_STATE_COLUMNS,
    ).round(3)
    state.to_csv(out / "throttle_state.csv", index=False)
    figure4(anon, "attack1", out / "figure4b.png", "Figure 4b: information leaked by circuit throughput (attack 1)")
    figure4(anon, "attack2-observed", out / "figure4c.png", "Figure 4c: information leaked by throttle rates (attack 2)")
    figure4(anon, "attack2", out / "figure4c-flood.png", "Attack 2 with a flood: every throttle rate revealed")
    anon_summary = (
        anon.groupby(["attack", "algorithm"])
        .agg(clients=("client", "size"), mean_loss_bits=("entropy_loss_bits", "mean"), median_loss_bits=("entropy_loss_bits", "median"), false_exclusion_rate=("true_guard_excluded", "mean"))
        .reset_index()
    )
    anon_summary.to_csv(out / "anonymity_summary.csv", index=False)
    probe_res = probe(out, args, relays_file)
    a3 = attack3(out, args, relays_file, chosen, seeds[: min(len(seeds), 2)])

    summary = {
        "seeds": seeds, "duration": args.duration, "warmup": args.warmup, "chosen": chosen, "think": args.think, "think_median": args.think_median or THINK_SHAPES[args.think][0],
        "capacity_scale": args.capacity_scale, "guards": args.guards, "relays": args.relays or "built-in", **tor_settings(args),
        "sweep": dict(zip(("seeds", "duration", "warmup", "grid", "criterion"), (args.sweep_seeds, *sweep_settings(args), args.grid or [], args.criterion))) if not args.no_sweep else None,
        "table1": rows, "probe": probe_res,
        "anonymity": anon_summary.to_dict(orient="records"),
        "attack3": a3.to_dict(orient="records"),
        "throttle_state": state.to_dict(orient="records"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=float) + "\n")
    _print_report(table1, anon_summary, probe_res)
    print("\nAttack 3 (linking two streams through the shared burst bucket):")
    print(a3.to_string(index=False))
    print(f"wrote {out}: table1.csv, figure3.png, sweep.csv, chosen.json, sweep_edges.json, anonymity*.csv, figure4[abc].png, figure4c-flood.png, channels.csv, throttle_state.csv, summary.json")
    return 0


def _seconds(s: str) -> float:
    from onionlab._core import parse_duration

    return float(parse_duration(s))


def _print_report(table1: pd.DataFrame, anon: pd.DataFrame, probe_res: dict) -> None:
    cols = ["load", "algorithm", "data_GiB", "web_pct", "bulk_pct", "paper_web_pct", "paper_bulk_pct", "web_ttfb_median", "web_ttlb_median", "bulk_ttlb_median", "web_unfinished_pct"]
    print("\nTable 1 (ours beside the paper's) and medians (s):")
    print(table1[cols].to_string(index=False))
    print("\nAnonymity (medium load):")
    print(anon.to_string(index=False))
    print(f"\nProbe (figure 4a): estimated {probe_res['estimated_rate_KiBps']:.2f} KiB/s (true 5), burst spent after {probe_res['burst_done_s']:.0f} s")
