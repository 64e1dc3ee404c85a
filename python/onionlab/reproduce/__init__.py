"""Paper reproductions: ``onionlab reproduce NAME -o DIR``.

**Owns:** the registry of reproductions and the shared plumbing they use (writing generated
configs next to their results, running them, collecting tables). Each paper is one module
(or package) here that builds its experiments as TOML configs (so every run goes through the same
validation as a user's file), runs them with :func:`onionlab.run`, and writes tables and
figures with the paper's numbers beside ours. **Must not touch:** model logic; a
reproduction only configures, runs and summarises.

A reproduction module defines::

    DESCRIPTION: str                          # one line for --help
    def add_arguments(parser) -> None         # its own options (e.g. --quick, --seeds)
    def main(out: pathlib.Path, args) -> int  # writes everything under `out`
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: name -> module. Add a paper here when its module exists.
PAPERS: dict[str, str] = {
    "ewma": "onionlab.reproduce.ewma",
    "predictor": "onionlab.reproduce.predictor",
    "throttling": "onionlab.reproduce.throttling",
    "tortoise": "onionlab.reproduce.tortoise",
}


def module(name: str) -> ModuleType:
    if name not in PAPERS:
        known = ", ".join(sorted(PAPERS)) or "none yet"
        raise ValueError(f"unknown reproduction {name!r} (available: {known})")
    return importlib.import_module(PAPERS[name])


# ---------------------------------------------------------------- shared plumbing

import argparse
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from onionlab import config as config_mod


class Given(argparse.Action):
    """Stores an option's value and records in ``args.given`` that the command line gave
    it, so that ``--quick`` sets only what was left to it (``--quick --seeds 3`` runs 3)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = set(getattr(namespace, "given", ())) | {self.dest}


def quick_settings(args, **values) -> None:
    """``--quick``'s settings, each unless the command line gave that option (see
    :class:`Given`)."""
    given = getattr(args, "given", ())
    for dest, value in values.items():
        if dest not in given:
            setattr(args, dest, value)


def write_summary(path: Path, summary: dict, sort_keys: bool = False) -> None:
    """A reproduction's ``summary.json``: strict JSON, a missing number (NaN) as ``null``
    (``json.dumps`` would write a bare ``NaN``, which JSON readers refuse)."""
    import json

    from onionlab.results import _json_safe

    text = json.dumps(_json_safe(summary), indent=2, sort_keys=sort_keys, default=float, allow_nan=False)
    Path(path).write_text(text + "\n")


def markdown_table(df) -> str:
    """A DataFrame as a markdown pipe table (without the optional ``tabulate``
    dependency): floats to three decimals (NaN as "nan"), anything else as ``str()``."""
    import math

    import numpy as np

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "nan" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body])


def write_config(directory: Path, name: str, text: str) -> Path:
    """Writes a generated experiment config as ``directory/configs/name.toml``."""
    d = directory / "configs"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.toml"
    p.write_text(text, encoding="utf-8")
    return p


def _reusable_runs(outs: Sequence[Path]) -> dict[str, Path]:
    """Every results directory under ``OUT/runs`` for each of ``outs``, by its config
    without the name; where two hold the same config, the first of ``outs`` wins."""
    found = {}
    for out in outs:
        for cfg in sorted((out / "runs").glob("*/config.toml")):
            found.setdefault(config_mod.without_name(cfg.read_text(encoding="utf-8")), cfg.parent)
    return found


def reuse_sources(dirs: Optional[Sequence[str | Path]], option: str = "--reuse-runs-from") -> list[Path]:
    """The output directories ``option`` names, checked: each must hold a ``runs``
    directory. Raises ValueError naming the option and the directory otherwise."""
    found = []
    for d in dirs or []:
        d = Path(d)
        if not (d / "runs").is_dir():
            raise ValueError(f"{option}: {d} has no runs/ directory (is it the output directory of a reproduction?)")
        found.append(d)
    return found


def add_reuse_arguments(p) -> None:
    """A reproduction's ``--reuse-runs`` and ``--reuse-runs-from`` (read by
    :func:`reuse_options`)."""
    p.add_argument("--reuse-runs", action="store_true",
                   help="load any run already under OUT/runs whose resolved config and seeds are the same instead of running it "
                        "again (runs are deterministic: the results a fresh run of this onionlab version gives)")
    p.add_argument("--reuse-runs-from", action="append", metavar="DIR",
                   help="also load matching runs from DIR/runs, another output of this command (repeatable; copied into OUT/runs)")


def reuse_options(args) -> dict:
    """:func:`run_many`'s ``reuse``, ``reuse_from`` and ``ray_address`` from a
    reproduction's ``--reuse-runs``, ``--reuse-runs-from`` (checked by
    :func:`reuse_sources`) and ``--ray``."""
    return {"reuse": getattr(args, "reuse_runs", False), "reuse_from": reuse_sources(getattr(args, "reuse_runs_from", None)),
            "ray_address": getattr(args, "ray", None)}


def run_many(
    experiments: Iterable[tuple[str, Path, list[int]]], out: Path, jobs: Optional[int] = None, reuse: bool = False,
    reuse_from: Sequence[Path] = (), ray_address: Optional[str] = None,
) -> dict:
    """Runs every (name, config path, seeds) as independent (config, seed) runs on a pool
    of worker processes (:func:`onionlab.runner.run_jobs`), writes each experiment's results directory to ``out/runs/name``
    and returns ``{name: Results}``. Configs are validated before anything runs.

    With ``reuse``, an experiment whose resolved config and seeds equal those of a results
    directory already under ``out/runs`` (whatever its name) is loaded from there instead
    of run again, and written under its own name if that differs: runs are deterministic,
    so this gives exactly what running it would. ``reuse_from`` names other output
    directories to search the same way after ``out`` (their runs are copied into
    ``out/runs``; the directories themselves are only read), and implies ``reuse``. Each
    experiment is written as soon as its last seed finishes, so a command stopped part-way
    keeps what it finished for reuse. With ``ray_address``, the runs go to that ray cluster
    instead of local workers (the output directory, where the configs are written, must be
    on a filesystem the cluster's workers share)."""
    from onionlab import results as results_mod
    from onionlab.results import Results
    from onionlab.runner import Job, run_jobs

    experiments = list(experiments)
    resolved = {name: config_mod.check(path) for name, path, _ in experiments}
    reused: dict[str, Results] = {}
    if reuse or reuse_from:
        sources = [out, *reuse_from]
        existing = _reusable_runs(sources)
        here = (out / "runs").resolve()
        for name, _, seeds in experiments:
            expected = config_mod.with_seeds(resolved[name], seeds)
            d = existing.get(config_mod.without_name(expected if expected.endswith("\n") else expected + "\n"))
            res = results_mod.load_for_reuse(d, "--reuse-runs") if d is not None else None
            if res is not None:
                renamed = d.name != name
                if renamed:
                    res.config = expected
                    for summary in [res.summary, *res.summary.get("runs", [])]:
                        if "experiment" in summary:
                            summary["experiment"] = name
                if renamed or d.resolve().parent != here:  # under another name or from another output
                    res.write(out / "runs" / name)
                res.source = str(out / "runs" / name)
                reused[name] = res
        if reused:
            where = " and ".join(str(d / "runs") for d in sources)
            print(f"  reusing {len(reused)} of {len(experiments)} configurations from {where}", file=sys.stderr, flush=True)
    to_run = [Job(name, str(path), tuple(seeds)) for name, path, seeds in experiments if name not in reused]

    def write(job: Job, res: Results) -> None:
        # Written as soon as its last seed is done, so a command that is stopped keeps
        # every finished experiment for --reuse-runs.
        d = out / "runs" / job.name
        res.write(d)
        res.source = str(d)

    results = dict(reused)
    results.update(run_jobs(to_run, workers=jobs, progress=True, ray_address=ray_address, on_result=write, resolved=resolved))
    return {name: results[name] for name, _, _ in experiments}
