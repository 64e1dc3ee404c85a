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
    "throttling": "onionlab.reproduce.throttling",
    "tortoise": "onionlab.reproduce.tortoise",
}


def module(name: str) -> ModuleType:
    if name not in PAPERS:
        known = ", ".join(sorted(PAPERS)) or "none yet"
        raise ValueError(f"unknown reproduction {name!r} (available: {known})")
    return importlib.import_module(PAPERS[name])


# ---------------------------------------------------------------- shared plumbing

import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Iterable, Optional


def write_config(directory: Path, name: str, text: str) -> Path:
    """Writes a generated experiment config as ``directory/configs/name.toml``."""
    d = directory / "configs"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.toml"
    p.write_text(text, encoding="utf-8")
    return p


def run_many(experiments: Iterable[tuple[str, Path, list[int]]], out: Path, jobs: Optional[int] = None) -> dict:
    """Runs every (name, config path, seeds) as independent (config, seed) jobs on a pool
    of worker processes, writes each experiment's results directory to ``out/runs/name``
    and returns ``{name: Results}``. Configs are validated before anything runs."""
    import multiprocessing

    from onionlab import config as config_mod
    from onionlab.results import Results
    from onionlab.runner import _run_seed

    experiments = list(experiments)
    resolved = {name: config_mod.check(path) for name, path, _ in experiments}
    tasks = [(name, str(path), s) for name, path, seeds in experiments for s in seeds]
    jobs = max(1, min(jobs or (os.cpu_count() or 1), len(tasks)))
    runs: dict[str, list] = {name: [] for name, _, _ in experiments}
    t0 = time.perf_counter()
    done_n = 0
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
        pending = {ex.submit(_run_seed, path, s): name for name, path, s in tasks}
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in done:
                name = pending.pop(f)
                runs[name].append(f.result())
                done_n += 1
                el = time.perf_counter() - t0
                print(f"\r  {done_n}/{len(tasks)} runs, {el:.0f} s", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    results = {}
    for name, _, seeds in experiments:
        res = Results.from_runs(runs[name], config_mod.with_seeds(resolved[name], seeds))
        d = out / "runs" / name
        res.write(d)
        res.source = str(d)
        results[name] = res
    return results
