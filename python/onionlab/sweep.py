"""Parameter sweeps: one config, a grid of settings, every point run over the same seeds.

**Owns:** reading ``--vary PATH=V1,V2,...`` (and the Python API's ``vary``), the grid of
points (the Cartesian product of the varied fields, the first varied field outermost), naming
and running the points as one batch (:func:`onionlab.runner.run_jobs`: every (point, seed) run
on the local workers or a ray cluster), resuming a sweep, and its outputs: one results
directory per point, the tidy ``sweep.csv`` and the figures. **Must not touch:** the model,
validation (each point is the config with ``PATH=VALUE`` overrides, checked by the Rust
validator like a hand-written file) or the statistics' definitions (:mod:`onionlab.stats`).

A sweep directory holds::

    points/NN-LABEL/    one results directory per point (as ``onionlab run`` writes), so
                        ``onionlab compare``, ``plot`` and ``report`` read any of them
    sweep.json          the base config, the fixed and varied settings, the seeds, and each
                        point's name, label, settings and directory
    sweep.csv           one row per point and client class: the varied fields' values, the
                        pooled figures (downloads, errors, share of bytes, ttfb/ttlb median
                        and p90, goodput) and each median's mean over the seeds with its 95%
                        confidence interval
    sweep.png           the ttfb and ttlb medians per class against the first varied field,
                        one line per combination of the others, with 95% intervals
    ttfb.png, ttlb.png  every point's CDFs overlaid
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from onionlab import config as config_mod

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

#: Fields a sweep may not vary: the seeds are the sweep's own (``--seeds``), and each
#: point's name is set by the sweep.
RESERVED = ("experiment.seeds", "experiment.name")


@dataclass(frozen=True)
class Setting:
    """One value of a varied field: the text given to the validator and its label."""

    value: str
    label: str


@dataclass(frozen=True)
class Point:
    """One point of the grid: its directory name, its label, and its settings as
    ``{path: Setting}`` in the order the fields were varied."""

    name: str
    label: str
    settings: tuple[tuple[str, Setting], ...]

    @property
    def overrides(self) -> tuple[str, ...]:
        return tuple(f"{path}={s.value}" for path, s in self.settings)


def toml_value(v: Any) -> str:
    """A Python value as TOML value text (strings quoted, lists as arrays, dicts as inline
    tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{v!r} is not a TOML value")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise ValueError(f"{v!r} ({type(v).__name__}) is not a TOML value")


def _key(k: str) -> str:
    """A TOML key: bare where it may be, else quoted."""
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _label(v: Any) -> str:
    return v if isinstance(v, str) else toml_value(v)


def parse_vary(text: str) -> tuple[str, list[Setting]]:
    """``PATH=V1,V2,...`` or ``PATH=[v1, v2, ...]`` (a TOML array, for values holding
    commas or arrays) as the path and its settings. Bare values are read by the validator
    like ``--set`` values (``ewma`` and ``5 min`` are strings, ``500`` an integer)."""
    if "=" not in text:
        raise ValueError(f"--vary {text!r}: give PATH=V1,V2,... (e.g. mechanisms.scheduler=round-robin,ewma)")
    path, rhs = (x.strip() for x in text.split("=", 1))
    if not path:
        raise ValueError(f"--vary {text!r}: the field path is empty")
    if rhs.startswith("["):
        try:
            values = tomllib.loads(f"v = {rhs}")["v"]
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"--vary {path}: {rhs} is not a TOML array ({e})") from None
        settings = [Setting(toml_value(v), _label(v)) for v in values]
    else:
        parts = [p.strip() for p in rhs.split(",")]
        if any(not p for p in parts):
            raise ValueError(f"--vary {path}: an empty value in {rhs!r}")
        settings = [Setting(p, p.strip("\"'")) for p in parts]
    return path, _checked(path, settings)


def _checked(path: str, settings: list[Setting]) -> list[Setting]:
    if path in RESERVED:
        raise ValueError(f"--vary {path}: a sweep sets this itself (use --seeds/--seed for seeds)")
    if not settings:
        raise ValueError(f"--vary {path}: no values")
    seen = [s.value for s in settings]
    dup = sorted({v for v in seen if seen.count(v) > 1})
    if dup:
        raise ValueError(f"--vary {path}: {', '.join(dup)} given twice")
    return settings


def _settings_from(vary: Union[Mapping[str, Iterable[Any]], Sequence[str]]) -> list[tuple[str, list[Setting]]]:
    """The API's ``vary``: ``{path: [python values]}`` or a list of ``PATH=V1,V2`` strings."""
    if isinstance(vary, str):
        raise TypeError(f"vary: give a dict {{path: [values]}} or a list of PATH=V1,V2 strings, e.g. [{vary!r}]")
    if isinstance(vary, Mapping):
        out = []
        for path, values in vary.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise TypeError(f"vary[{path!r}]: give a list of values, e.g. [{values!r}]")
            try:
                settings = [Setting(toml_value(v), _label(v)) for v in values]
            except ValueError as e:
                raise ValueError(f"vary[{path!r}]: {e}") from None
            out.append((str(path), _checked(str(path), settings)))
    else:
        out = [parse_vary(v) for v in vary]
    paths = [p for p, _ in out]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise ValueError(f"vary: {', '.join(dup)} varied twice")
    if not out:
        raise ValueError("vary: at least one field to vary is needed")
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")[:80] or "x"


def grid(varied: list[tuple[str, list[Setting]]]) -> list[Point]:
    """Every combination of the settings, the first varied field outermost. A point's label
    names each field by its last key (or its whole path where two last keys are equal)."""
    last = [p.rsplit(".", 1)[-1] for p, _ in varied]
    short = [k if "[" not in k else p for k, (p, _) in zip(last, varied)]
    short = [s if short.count(s) == 1 else p for s, (p, _) in zip(short, varied)]
    points = []
    combos = list(itertools.product(*[settings for _, settings in varied]))
    width = max(2, len(str(len(combos) - 1)))
    for i, combo in enumerate(combos):
        label = ", ".join(f"{k}={s.label}" for k, s in zip(short, combo))
        name = f"{i:0{width}d}-" + _slug("-".join(f"{k}={s.label}" for k, s in zip(short, combo)))
        points.append(Point(name, label, tuple((p, s) for (p, _), s in zip(varied, combo))))
    return points


class Sweep:
    """A finished sweep: its points, each point's :class:`~onionlab.results.Results`, and
    the tidy table (:attr:`table`, what ``sweep.csv`` holds)."""

    def __init__(self, info: dict, results: dict, directory: Optional[Path] = None):
        self.info = info
        self.results = results
        self.directory = directory

    @property
    def varied(self) -> list[str]:
        """The varied fields' paths, in order."""
        return [v["path"] for v in self.info["vary"]]

    @property
    def points(self):
        """One row per point: ``point``, ``label`` and one column per varied field."""
        import pandas as pd

        return pd.DataFrame([{"point": p["name"], "label": p["label"], **p["params"]} for p in self.info["points"]])

    @property
    def downloads(self):
        """Every point's downloads in one table, with ``point`` and the varied fields as
        columns."""
        import pandas as pd

        frames = []
        for p in self.info["points"]:
            df = self.results[p["name"]].downloads.copy()
            df.insert(0, "point", p["name"])
            for i, (k, v) in enumerate(p["params"].items()):
                df.insert(1 + i, k, v)
            frames.append(df)
        return pd.concat(frames, ignore_index=True)

    @property
    def table(self):
        """One row per point and client class (see the module docstring)."""
        return summary_table(self.info, self.results)


def summary_table(info: dict, results: Mapping[str, Any]):
    """The ``sweep.csv`` table from a sweep's description and its points' results."""
    import pandas as pd

    from onionlab import stats

    rows = []
    for p in info["points"]:
        res = results[p["name"]]
        spread = stats.seed_spread(res.downloads).set_index("class")
        for cls, c in res.summary.get("classes", {}).items():
            fb, lb = c["time_to_first_byte_recv"], c["time_to_last_byte_recv"]
            good = c.get("goodput", {}).get("median")
            row = {"point": p["name"], **p["params"], "class": cls, "downloads": c["downloads"], "errors": c["errors"],
                   "unfinished": c.get("unfinished", 0), "data_gib": c.get("data_gib"), "data_share_pct": c.get("data_share_pct"),
                   "ttfb_median": fb["median"], "ttfb_p90": fb["p90"], "ttlb_median": lb["median"], "ttlb_p90": lb["p90"],
                   "goodput_median_kib_s": good / 1024.0 if good is not None else None}
            if cls in spread.index:
                row.update(spread.loc[cls].to_dict())
            rows.append(row)
    df = pd.DataFrame(rows)
    if "seeds" in df:
        df["seeds"] = df["seeds"].fillna(0).astype("int64")
    return df


def _describe(config: Path, fixed: Sequence[str], varied: list[tuple[str, list[Setting]]], seeds: list[int], points: list[Point]) -> dict:
    return {
        "config": str(config),
        "set": list(fixed),
        "vary": [{"path": p, "values": [s.value for s in ss], "labels": [s.label for s in ss]} for p, ss in varied],
        "seeds": seeds,
        "points": [
            {"name": pt.name, "label": pt.label, "params": {p: s.label for p, s in pt.settings}, "overrides": list(pt.overrides),
             "dir": f"points/{pt.name}"}
            for pt in points
        ],
    }


def sweep(
    config: Union[str, os.PathLike],
    vary: Union[Mapping[str, Iterable[Any]], Sequence[str]],
    seeds: Optional[Iterable[int]] = None,
    out: Optional[Union[str, os.PathLike]] = None,
    overrides: Optional[Iterable[str]] = None,
    jobs: Optional[int] = None,
    progress: bool = False,
    ray_address: Optional[str] = None,
    resume: bool = False,
) -> Sweep:
    """Runs the config at `config` at every point of the grid `vary` spans, each over the
    same `seeds` (default: the config's), and returns the :class:`Sweep`.

    `vary` is ``{path: [values]}`` (``{"mechanisms.scheduler": ["round-robin", "ewma"],
    "tor.circ_window": [500, 1000]}``) or a list of ``PATH=V1,V2`` strings as on the
    command line; `overrides` are fixed ``PATH=VALUE`` settings applied first. Every point
    is validated before anything runs (a :class:`~onionlab.ConfigError` names the point).
    All (point, seed) runs share `jobs` local worker processes, or the ray cluster at
    `ray_address`. With `out`, each point is written under ``out/points`` as soon as its
    last seed finishes, then ``sweep.json``, ``sweep.csv`` and the figures; with `resume`,
    a point whose directory already holds this point's config and seeds is loaded, not run.
    """
    from onionlab import results as results_mod
    from onionlab.results import output_dir
    from onionlab.runner import Job, _check_count, _overrides, _seeds_from, run_jobs

    config_mod.require_file(config)
    if jobs is not None:
        _check_count("jobs", jobs)
    path = Path(os.path.abspath(os.fspath(config)))
    fixed = _overrides(overrides)
    varied = _settings_from(vary)
    points = grid(varied)
    base = _base(path, fixed, points)
    seed_list = _seeds_from(base, seeds)
    base_name = str(base.get("experiment", {}).get("name", path.stem))
    out_dir = Path(out) if out is not None else None
    if resume and out_dir is None:
        raise ValueError("resume: needs an output directory (out)")

    jobs_list = []
    for pt in points:
        name_override = f"experiment.name={toml_value(f'{base_name} [{pt.label}]')}"
        jobs_list.append(Job(pt.name, str(path), tuple(seed_list), (*fixed, *pt.overrides, name_override)))

    resolved = _validate(jobs_list)
    with contextlib.ExitStack() as stack:
        if out_dir is not None:  # a sweep that fails before writing leaves no empty directory
            stack.enter_context(output_dir(out_dir))
        loaded: dict = {}
        if resume:
            for j in jobs_list:
                d = out_dir / "points" / j.name
                cfg = d / "config.toml"
                if cfg.is_file():
                    want = config_mod.with_seeds(resolved[j.name], list(j.seeds))
                    if cfg.read_text(encoding="utf-8").rstrip("\n") == want.rstrip("\n"):
                        res = results_mod.load_for_reuse(d, "resume")
                        if res is None:
                            continue
                        res.source = str(d)
                        loaded[j.name] = res
            if progress and loaded:
                print(f"resuming: {len(loaded)} of {len(jobs_list)} points already done in {out_dir / 'points'}", file=sys.stderr)

        def write(job: Job, res) -> None:
            if out_dir is not None:
                d = out_dir / "points" / job.name
                res.write(d)
                res.source = str(d)

        results = dict(loaded)
        results.update(run_jobs([j for j in jobs_list if j.name not in loaded], workers=jobs, progress=progress,
                                ray_address=ray_address, on_result=write, resolved=resolved))
        info = _describe(path, fixed, varied, seed_list, points)
        sw = Sweep(info, {pt.name: results[pt.name] for pt in points}, out_dir)
        if out_dir is not None:
            _write(sw, out_dir)
        return sw


def _base(path: Path, fixed: tuple, points: list) -> dict:
    """The sweep's base (its seeds and name): the file with the fixed overrides, or, where
    that alone is invalid, with the first point's that makes it valid: a base may need
    what every point varies (a 2.5 s run sweeping the metrics interval over "250 ms" and
    "500 ms" has no valid base with the default 1 s). Invalid with every point: the base's
    problems."""
    try:
        return config_mod.parse(config_mod.check(path, fixed))
    except config_mod.ConfigError:
        for pt in points:
            try:
                return config_mod.parse(config_mod.check(path, (*fixed, *pt.overrides)))
            except config_mod.ConfigError:
                continue
        raise


def _validate(jobs: list) -> dict[str, str]:
    """Checks every point before anything runs and returns each point's resolved config. A
    problem is reported once, with the points it occurs in (most problems of a varied value
    occur in some points only)."""
    found: dict[tuple, list[str]] = {}
    resolved = {}
    for j in jobs:
        try:
            resolved[j.name] = config_mod.check(j.path, j.overrides)
        except config_mod.ConfigError as e:
            for p in config_mod.problems(e):
                found.setdefault((p.get("path", ""), p["message"], p.get("hint")), []).append(j.name)
    if not found:
        _refuse_identical_points(jobs, resolved)
        return resolved
    problems = []
    for (path, message, hint), names in found.items():
        where = "in every point" if len(names) == len(jobs) else "in point" + ("s " if len(names) > 1 else " ") + ", ".join(names)
        problems.append({"path": path, "message": f"{message} ({where})", "hint": hint})
    n = len(problems)
    err = config_mod.ConfigError(f"{n} problem{'s' if n != 1 else ''} in the sweep's points", problems)
    # The message carries the problems, as the config loader's does (the CLI prints them from
    # err.problems; a traceback shows only the message).
    raise config_mod.ConfigError(f"{err.args[0]}:\n{config_mod.format_problems(err)}", problems)


def _refuse_identical_points(jobs: list, resolved: dict[str, str]) -> None:
    """Two points whose resolved configs are the same but for the experiment's name would
    run the same experiment twice and report the same numbers as if the varied settings
    made no difference (a value written two ways, such as ``ewma`` and its table with
    tor's defaults): a ConfigError naming the points."""
    first: dict[str, str] = {}
    same = []
    for j in jobs:
        text = resolved[j.name]
        body = config_mod.without_name(text)  # the one line a sweep sets per point
        if body in first:
            same.append((first[body], j.name))
        else:
            first[body] = j.name
    if same:
        pairs = "; ".join(f"{a} and {b}" for a, b in same)
        raise config_mod.ConfigError(
            f"the sweep's points {pairs} resolve to the same experiment",
            [{"path": "vary", "message": f"points {pairs} resolve to the same experiment: the varied values differ only in how they are written",
              "hint": "drop one of each pair's values; `onionlab show-config FILE --set PATH=VALUE` shows what a value resolves to"}],
        )


def _write(sw: Sweep, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(sw.info, indent=2) + "\n", encoding="utf-8")
    sw.table.to_csv(out / "sweep.csv", index=False, float_format="%.6g")
    from onionlab.plot import cdf_figure

    rs = [sw.results[p["name"]] for p in sw.info["points"]]
    labels = [p["label"] for p in sw.info["points"]]
    for metric in ("ttfb", "ttlb"):
        cdf_figure(rs, labels, metric).savefig(out / f"{metric}.png")
    figure(sw).savefig(out / "sweep.png")


def figure(sw: Sweep):
    """The ttfb and ttlb medians (mean over the seeds, 95% interval) per class against the
    first varied field, one line per combination of the other varied fields."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = sw.table
    first, rest = sw.varied[0], sw.varied[1:]
    xs = sw.info["vary"][0]["labels"]
    classes = sorted(t["class"].unique()) if len(t) else []
    fig = Figure(figsize=(4.2 * max(1, len(classes)), 6.5), dpi=100)
    FigureCanvasAgg(fig)
    for col, cls in enumerate(classes):
        for row, metric in enumerate(("ttfb", "ttlb")):
            ax = fig.add_subplot(2, max(1, len(classes)), row * len(classes) + col + 1)
            sub = t[t["class"] == cls]
            groups = sub.groupby(rest, sort=False) if rest else [((), sub)]
            for key, g in groups:
                key = key if isinstance(key, tuple) else (key,)
                g = g.set_index(first).reindex(xs)
                lab = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in zip(rest, key)) or None
                ax.errorbar(range(len(xs)), g[f"{metric}_median_seed_mean"], yerr=g[f"{metric}_median_ci95"],
                            marker="o", capsize=3, label=lab)
            ax.set_xticks(range(len(xs)))
            ax.set_xlim(-0.5, len(xs) - 0.5)
            ax.set_xticklabels([textwrap.fill(x, 22) for x in xs], fontsize=7)
            ax.set_title(f"{cls}: median {metric}", fontsize=9)
            ax.set_ylabel("seconds", fontsize=8)
            if row == 1:
                ax.set_xlabel(first, fontsize=8)
            if rest and row == 0 and col == 0:
                ax.legend(fontsize=7)
    fig.suptitle("Each class's median: mean over the seeds, 95% confidence interval", fontsize=9)
    fig.tight_layout()
    return fig


def load(directory: Union[str, os.PathLike]) -> Sweep:
    """Reads a sweep directory written by :func:`sweep`."""
    from onionlab import results as results_mod

    d = Path(directory)
    f = d / "sweep.json"
    if not f.is_file():
        raise FileNotFoundError(f"{d}: not a sweep directory (no sweep.json)")
    info = json.loads(f.read_text(encoding="utf-8"))
    results = {}
    for p in info["points"]:
        res = results_mod.load(d / p["dir"])
        results[p["name"]] = res
    return Sweep(info, results, d)


# ---------------------------------------------------------------- command line


def add_parser(sub) -> None:
    s = sub.add_parser(
        "sweep",
        help="run a config over a grid of settings (every point over the same seeds) and tabulate them",
        description="Runs the config FILE at every combination of the --vary settings, each over the same seeds, all runs in "
        "parallel (or on a ray cluster), and writes one results directory per point, sweep.csv (one row per point "
        "and class, medians with 95% intervals over the seeds) and figures.",
    )
    s.add_argument("file", metavar="FILE", help="experiment config (TOML; see docs/config.md)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="sweep directory to write")
    s.add_argument("--vary", action="append", required=True, metavar="PATH=V1,V2,...",
                   help="a field and its values (repeatable; the grid is every combination): "
                   "mechanisms.scheduler=round-robin,ewma; tor.circ_window=500,1000; for values with commas, a TOML array: "
                   "'network.latency=[{ constant = \"20 ms\" }, { constant = \"80 ms\" }]'")
    s.add_argument("--set", action="append", metavar="PATH=VALUE", help="a fixed setting for every point (repeatable)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--seeds", type=int, metavar="N", help="N seeds s, s+1, ..., s+N-1 per point (s: the config's first seed)")
    g.add_argument("--seed", type=int, nargs="+", action="extend", metavar="S", help="exactly these seeds per point")
    s.add_argument("--jobs", type=int, metavar="J", help="parallel worker processes (default: the CPUs); with --ray local, the local cluster's CPUs")
    s.add_argument("--ray", metavar="ADDRESS", help="run on the ray cluster at ADDRESS (needs ray; the config on a shared filesystem)")
    s.add_argument("--resume", action="store_true", help="load points already in DIR/points with the same config and seeds instead of running them")
    s.add_argument("--no-progress", action="store_true", help="do not draw the progress line on stderr")
    s.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from onionlab.results import output_dir
    from onionlab.runner import seeds_from_options

    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs: must be at least 1, got {args.jobs}")
    seeds = None
    if args.seed or args.seeds is not None:  # --seeds N counts from the config's first seed
        config_mod.require_file(args.file)
        seeds = seeds_from_options(args.seed, args.seeds, config_mod.parse(config_mod.check(args.file, args.set or [])))
    with output_dir(args.output, "--output"):  # named as the user wrote it; sweep() would say "out"
        sw = sweep(args.file, args.vary, seeds=seeds, out=args.output, overrides=args.set, jobs=args.jobs,
                   progress=not args.no_progress, ray_address=args.ray, resume=args.resume)
    print(format_table(sw))
    print(f"wrote {args.output}: {len(sw.info['points'])} points x {len(sw.info['seeds'])} seeds, sweep.csv, sweep.png, ttfb.png, ttlb.png")
    return 0


def format_table(sw: Sweep) -> str:
    """Per point and class: downloads, errors, ttfb and ttlb medians (pooled) and the ttlb
    median's mean over the seeds with its 95% interval."""
    t = sw.table
    width = max(5, *(len(p["label"]) for p in sw.info["points"]))
    lines = [f"{'point':<{width}}  {'class':<10} {'downloads':>9} {'errors':>6} "
             f"{'ttfb med':>9} {'ttlb med':>9} {'ttlb med over seeds':>21}"]
    labels = {p["name"]: p["label"] for p in sw.info["points"]}
    for r in t.to_dict("records"):
        ci = r.get("ttlb_median_ci95")
        mean = r.get("ttlb_median_seed_mean")
        spread = "-" if mean is None or mean != mean else (f"{mean:.3f}" + (f" +- {ci:.3f}" if ci == ci and ci is not None else ""))
        fmt = lambda v: "-" if v is None or v != v else f"{v:.3f}"  # noqa: E731
        lines.append(f"{labels[r['point']]:<{width}}  {r['class']:<10} {r['downloads']:>9} {r['errors']:>6} "
                     f"{fmt(r['ttfb_median']):>9} {fmt(r['ttlb_median']):>9} {spread:>21}")
    return "\n".join(lines)
