"""The parameter sweep the paper does not report, and the choice of each algorithm's
parameters.

The paper's algorithms were "tuned" in a tech report whose values it does not give. The
sweep runs spec section 9's ranges (``--grid`` replaces an axis) at medium load (or at the
loads ``--sweep-loads`` names, one setting then judged over all of them), on runs like the
main runs, and picks each algorithm's best for web download time
(:data:`SWEEP_CRITERIA`). **Owns:** the axes, the sweep's runs and tables (``sweep.csv``,
``sweep_per_seed.csv``, ``chosen.json``, ``sweep_edges.json``, ``sweep_margins.csv``) and
the choice. **Must not touch:** the main runs or the analysis of them.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd

from onionlab.reproduce import reuse_options, run_many, write_config
from onionlab.reproduce.throttling.configs import ALGORITHMS, AXIS_KINDS, LOADS, axis_value_key, client_settings, config_text, mechanism_line, seconds
from onionlab.reproduce.throttling.metrics import medians
from onionlab.stats import mean_ci95

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


#: The sweep's criteria: the per-seed column each one averages over seeds (lowest wins).
#: ``median`` is the paper's ("tuned to maximize web client performance", judged by the
#: median download time of figure 3). A median over finished downloads can be won by
#: starving the clients an algorithm throttles: they finish few downloads, so they barely
#: count (flagging at 1 KiB/s, never unflagged, had the fastest median at 4x capacity
#: while its web clients received 12 % less data than under vanilla). ``mean`` weighs
#: those slow downloads in full, and the downloads the run's end cut short at the time they
#: had run (:func:`metrics.web_time_mean`).
SWEEP_CRITERIA = {"median": "web_ttlb_median", "mean": "web_time_mean"}


def over_vanilla(per_load: pd.DataFrame, column: str) -> pd.Series:
    """``column`` of a table with one row per (load, algorithm, params) divided by
    vanilla's at the same load. Raises ValueError if a load has no vanilla row."""
    vanilla = per_load[per_load["algorithm"] == "vanilla"].set_index("load")[column]
    if set(vanilla.index) != set(per_load["load"]):
        raise ValueError("the sweep needs vanilla at every load it judges settings at")
    return per_load[column] / per_load["load"].map(vanilla)


def _several_loads(table: pd.DataFrame) -> bool:
    """Whether the sweep's ``table`` judges settings at more than one load (``--sweep-loads``)."""
    return "load" in table.columns and table["load"].nunique() > 1


def _ranked(table: pd.DataFrame, criterion: str) -> dict[str, pd.DataFrame]:
    """Each algorithm's settings, best first, as :func:`choose` ranks them: one row per
    setting (``params``) with ``key``, the criterion's mean over seeds (relative to
    vanilla's and averaged over the loads where several are swept), and the time to first
    byte it breaks ties with. Raises ValueError for an unknown ``criterion``."""
    if criterion not in SWEEP_CRITERIA:
        raise ValueError(f"--criterion: {criterion!r} is not one of {', '.join(SWEEP_CRITERIA)}")
    column = SWEEP_CRITERIA[criterion]
    by_load = ["load"] if "load" in table.columns else []
    per = table.groupby([*by_load, "algorithm", "params"], sort=False).agg(
        key=(column, "mean"), web_ttfb_mean_of_medians=("web_ttfb_median", "mean")
    ).reset_index()
    if _several_loads(table):
        for col in ("key", "web_ttfb_mean_of_medians"):
            per[col] = over_vanilla(per, col)
    # One load: its only row per setting; several: the mean over the loads.
    per = per.groupby(["algorithm", "params"], sort=False)[["key", "web_ttfb_mean_of_medians"]].mean().reset_index()
    return {
        alg: grp.sort_values(["key", "web_ttfb_mean_of_medians"], kind="mergesort").reset_index(drop=True)
        for alg, grp in per.groupby("algorithm", sort=True)
    }


def choose(table: pd.DataFrame, criterion: str = "median") -> dict[str, dict]:
    """Each algorithm's parameters with the lowest mean over seeds of the per-seed web
    download time statistic ``criterion`` names (:data:`SWEEP_CRITERIA`; default the
    median, the paper's). The paper tuned for web client performance; a mean over seeds
    weighs every seed equally and is not swayed by one seed's outlier. Ties: lower mean
    time to first byte, then the sweep's order.

    Swept at several loads (a ``load`` column with more than one value;
    ``--sweep-loads``), a setting is judged by its mean over the loads of that statistic
    relative to vanilla's at the same load (mean over seeds of each), so that one setting
    serves every load, as the paper's "little-to-no maintenance" has it, and the slowest
    load does not outweigh the others."""
    chosen = {"vanilla": {}}
    for alg, ranked in _ranked(table, criterion).items():
        chosen[alg] = json.loads(ranked["params"].iloc[0])
    return chosen


#: The columns of ``sweep_margins.csv`` (:func:`choice_margins`).
MARGIN_COLUMNS = [
    "algorithm", "chosen", "runner_up", "criterion", "unit", "chosen_key", "runner_up_key", "margin", "margin_pct",
    "seeds", "seeds_won", "margin_seed_mean", "margin_ci95", "resolved",
]


def _seed_keys(table: pd.DataFrame, column: str) -> pd.Series:
    """Every setting's criterion per seed, indexed by (algorithm, params, seed), on the scale
    :func:`_ranked` judges it: the seed's value, or where several loads are swept, the mean
    over the loads of the seed's value over vanilla's mean over seeds at that load."""
    value = table[column]
    if _several_loads(table):
        vanilla = table[table["algorithm"] == "vanilla"].groupby("load")[column].mean()
        value = value / table["load"].map(vanilla)
    return value.groupby([table["algorithm"], table["params"], table["seed"]]).mean()


def choice_margins(table: pd.DataFrame, criterion: str = "median") -> pd.DataFrame:
    """How far each choice of :func:`choose` is ahead of its runner-up, the setting it
    ranks second, and whether the sweep's seeds can tell them apart. One row per algorithm
    with two settings or more (:data:`MARGIN_COLUMNS`): the two settings and their keys
    (seconds for one load; for several, the ratio to vanilla averaged over the loads:
    ``unit``), ``margin`` = runner-up's key minus the choice's, and per seed the same
    difference: on how many seeds the choice wins (``seeds_won``), the seeds' mean
    difference with its 95 % interval (Student's t), and ``resolved``: the interval lies
    above 0. With two seeds (the default sweep) an interval resolves only a choice that
    wins by far more than the seeds differ: an unresolved choice is a near tie, which more
    ``--sweep-seeds`` may turn."""
    ranked = _ranked(table, criterion)
    keys = _seed_keys(table, SWEEP_CRITERIA[criterion])
    several = _several_loads(table)
    rows = []
    for alg, r in ranked.items():
        if len(r) < 2:
            continue
        first, second = r["params"].iloc[0], r["params"].iloc[1]
        diff = (keys.loc[(alg, second)] - keys.loc[(alg, first)]).dropna()
        seed_mean, ci = mean_ci95(diff)
        key1, key2 = float(r["key"].iloc[0]), float(r["key"].iloc[1])
        rows.append({
            "algorithm": alg, "chosen": first, "runner_up": second, "criterion": criterion,
            "unit": "x vanilla" if several else "s", "chosen_key": key1, "runner_up_key": key2,
            "margin": key2 - key1, "margin_pct": 100.0 * (key2 - key1) / key1 if key1 else math.nan,
            "seeds": int(diff.size), "seeds_won": int((diff > 0).sum()),
            "margin_seed_mean": seed_mean, "margin_ci95": ci,
            "resolved": None if math.isnan(ci) else bool(seed_mean - ci > 0),
        })
    out = pd.DataFrame(rows, columns=MARGIN_COLUMNS)
    out["resolved"] = out["resolved"].astype("boolean")
    return out


def margin_lines(margins: pd.DataFrame) -> list[str]:
    """A line for each choice the sweep's seeds do not resolve (:func:`choice_margins`),
    naming the runner-up and the margin, for the command to print."""
    lines = []
    for m in margins.itertuples():
        if pd.notna(m.resolved) and m.resolved:
            continue
        unit = " s" if m.unit == "s" else f" ({m.unit})"
        ci = "" if math.isnan(m.margin_ci95) else f", 95 % interval of the seeds' mean {m.margin_seed_mean:+.3f} +- {m.margin_ci95:.3f}"
        lines.append(
            f"sweep: {m.algorithm}'s choice {m.chosen} leads the runner-up {m.runner_up} by {m.margin:.3f}{unit} "
            f"({m.margin_pct:.1f} %), on {m.seeds_won} of {m.seeds} seeds{ci}: the sweep's seeds do not resolve it "
            f"(more --sweep-seeds may)"
        )
    return lines


def sweep_settings(args) -> tuple[str, str]:
    """Duration and warm-up of the sweep runs: the main runs' unless given. The choice is
    only the best for web clients on runs like the ones it is used for: 10-minute sweep
    runs with a 2-minute warm-up measured minutes 2-10, while clients were still starting
    (they start over the first 4 minutes) and before any circuit had been replaced, and
    their choice for flagging lost to the runner-up on every one of the 20-minute main
    runs' seeds (docs/reproductions/throttling-details.md, "What changed in the last two rounds")."""
    return args.sweep_duration or args.duration, args.sweep_warmup or args.warmup


def sweep_loads(text: str | None) -> list[str]:
    """``--sweep-loads``: the loads to sweep at, comma-separated (default medium only, as
    spec 9 has it). Raises ValueError naming the option for an unknown or repeated load."""
    if text is None:
        return ["medium"]
    loads = [x.strip() for x in text.split(",")]
    for load in loads:
        if load not in LOADS:
            raise ValueError(f"--sweep-loads: unknown load {load!r} (any of {', '.join(LOADS)}, comma-separated)")
    if len(set(loads)) != len(loads):
        raise ValueError(f"--sweep-loads: a load is repeated in {text!r}")
    return [load for load in LOADS if load in loads]


def sweep_seed_list(args) -> list[int]:
    """The sweep's seeds: ``--sweep-seeds`` of them from ``--sweep-first-seed`` on."""
    return list(range(args.sweep_first_seed, args.sweep_first_seed + args.sweep_seeds))


def seeds_shared_with_main_runs(args) -> list[int]:
    """The sweep's seeds that the main runs (seeds 1 to ``--seeds``) also use: on them the
    runs that judge the choice repeat the sweep's own runs of the chosen setting (the same
    configuration and seed)."""
    return [s for s in sweep_seed_list(args) if s <= args.seeds]


def sweep(out: Path, args, relays_file: str, overrides: dict[str, dict[str, list]]) -> dict[str, dict]:
    """Runs the sweep (spec 9's axes with ``overrides`` from :func:`grid_overrides` in place)
    at each of ``--sweep-loads`` and writes its tables and choice; returns the choice."""
    grid = _sweep_grid(args.quick, overrides)
    duration, warmup = sweep_settings(args)
    end_s = seconds(duration)
    seeds = sweep_seed_list(args)
    loads = sweep_loads(args.sweep_loads)
    exps, meta = [], {}
    for load in loads:
        for alg, points in grid.items():
            for i, params in enumerate(points):
                # Medium alone keeps the names sweeps have always had.
                name = f"sweep-{alg}-{i:02d}" if loads == ["medium"] else f"sweep-{load}-{alg}-{i:02d}"
                text = config_text(name, LOADS[load], mechanism_line(alg, params, args.unthrottled), duration, warmup, relays_file, conn_metrics=False, **client_settings(args))
                exps.append((name, write_config(out, name, text), seeds))
                meta[name] = (load, alg, params)
    print(
        f"sweep: {len(exps)} configurations, {' and '.join(loads)} load, seeds {seeds}, {duration} each, warm-up {warmup}, "
        f"criterion: web download {args.criterion}" + (" relative to vanilla, averaged over the loads" if len(loads) > 1 else ""),
        flush=True,
    )
    shared = seeds_shared_with_main_runs(args)
    if shared:  # the choice is then judged partly on the runs it was made on
        print(f"sweep: seeds {shared} are also main-run seeds (--sweep-first-seed {args.seeds + 1} holds the choice out)", flush=True)
    results = run_many(exps, out, args.jobs, **reuse_options(args))
    rows = []
    for name, res in results.items():
        load, alg, params = meta[name]
        for seed in seeds:
            rows.append({"load": load, "algorithm": alg, "params": json.dumps(params, sort_keys=True), "seed": seed, **medians(res, seed, end_s)})
    table = pd.DataFrame(rows)
    chosen = choose(table, args.criterion)
    agg = table.groupby(["load", "algorithm", "params"], sort=False).agg(
        seeds=("seed", "size"), web_ttlb_mean_of_medians=("web_ttlb_median", "mean"), web_ttfb_mean_of_medians=("web_ttfb_median", "mean"),
        web_ttlb_mean_of_means=("web_ttlb_mean", "mean"), web_time_mean_of_means=("web_time_mean", "mean"), web_unfinished_pct=("web_unfinished_pct", "mean"),
        bulk_ttlb_mean_of_medians=("bulk_ttlb_median", "mean"), web_ttlb_min=("web_ttlb_median", "min"), web_ttlb_max=("web_ttlb_median", "max"),
    ).reset_index()
    agg["chosen"] = [json.loads(p) == chosen[a] for a, p in zip(agg["algorithm"], agg["params"])]
    sort_by = {"median": "web_ttlb_mean_of_medians", "mean": "web_time_mean_of_means"}[args.criterion]
    # What a multi-load choice compares, per load: the criterion over vanilla's there.
    agg["criterion_vs_vanilla"] = over_vanilla(agg, sort_by)
    agg.sort_values(["algorithm", "load", sort_by], kind="mergesort").to_csv(out / "sweep.csv", index=False)
    table.to_csv(out / "sweep_per_seed.csv", index=False)
    (out / "chosen.json").write_text(json.dumps(chosen, indent=2, sort_keys=True) + "\n")
    edges = edge_choices(sweep_axes(args.quick, overrides), chosen)
    (out / "sweep_edges.json").write_text(json.dumps(edges, indent=2) + "\n")
    margins = choice_margins(table, args.criterion)
    margins.to_csv(out / "sweep_margins.csv", index=False)
    for line in margin_lines(margins):
        print(line, flush=True)
    for e in edges:
        print(
            f"sweep: {e['algorithm']}'s chosen {e['parameter']} {e['value']} is the {e['edge']} value swept "
            f"({', '.join(map(str, e['axis']))}); the best may lie beyond (extend with --grid {e['algorithm']}.{e['parameter']}=...)",
            flush=True,
        )
    return chosen
