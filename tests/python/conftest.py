"""Shared fixtures for the Python tests: the tiny example, and synthetic results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from onionlab import _core, stats

# No example database: the tests leave no .hypothesis directory behind. Derandomized, so a
# run's examples are the same every time (CI is repeatable); HYPOTHESIS_PROFILE=explore
# draws new ones.
settings.register_profile("onionlab", database=None, derandomize=True)
settings.register_profile("explore", database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "onionlab"))

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "examples" / "tiny.toml"

needs_core = pytest.mark.skipif(
    not hasattr(_core, "run_experiment"), reason="onionlab._core.run_experiment is not built yet"
)


def fake_run(
    seed: int, classes=(("web", 320 * 1024, 1.0), ("bulk", 5 << 20, 10.0)), n: int = 20, errors: int = 1, unfinished: int = 0
):
    """A synthetic ``_core.run_experiment`` return value following the glue contract: per
    class, `n` downloads of which the first `errors` failed, then `unfinished` downloads
    still in progress at the end (half received)."""
    cols = {k: [] for k in ("seed", "client", "class", "size", "received", "start", "begin", "connected", "ttfb", "ttlb", "goodput",
                             "circuit_build_time", "path", "error")}
    for cls, size, scale in classes:
        for i in range(n + unfinished):
            failed, cut = i < errors, i >= n
            done = not (failed or cut)
            ttlb = scale * (1 + i) / n + 0.01 * seed if done else None
            row = {
                "seed": seed,
                "client": f"{cls}{i % 3}",
                "class": cls,
                "size": size,
                "received": size if done else size // 2 if cut else size // 3,
                "start": 110.0 + i * 0.1 if cut else 10.0 + (n - i) * 0.5,
                "begin": 0.0,
                "connected": None if failed else 0.05,
                "ttfb": 0.2 if cut else None if failed else 0.1 + 0.01 * i,
                "ttlb": ttlb,
                "goodput": size / ttlb if done else None,
                "circuit_build_time": 0.3,
                "path": "guard1,middle1,exit1",
                "error": stats.UNFINISHED if cut else "timeout" if failed else None,
            }
            for k, v in row.items():
                cols[k].append(v)
    relays = {
        "seed": [seed] * 4,
        "relay": ["guard1", "exit1", "guard1", "exit1"],
        "interval_start": [0.0, 0.0, 1.0, 1.0],
        "bytes_read": [100, 200, 300, 400],
        "bytes_written": [110, 210, 310, 410],
        "queued_cells": [0, 1, 2, 3],
        "bucket_empty_s": [0.0, 0.1, 0.2, 0.0],
    }
    counts = {}
    for cls, size, _ in classes:
        counts[cls] = {"downloads": n + unfinished, "errors": errors, "unfinished": unfinished, "bytes": size * (n - errors)}
    summary = {
        "experiment": "fake",
        "seed": seed,
        "sim_seconds": 120.0,
        "warmup_seconds": 10.0,
        "events": 1000 + seed,
        "wall_seconds": 0.123 * seed,
        "counters": {"cells": 10 * seed},
        "classes": counts,
    }
    return {"downloads": cols, "relays": relays, "summary": summary}


@pytest.fixture(scope="session")
def fake_results():
    from onionlab.results import Results

    return Results.from_runs([fake_run(2), fake_run(1)], config='[experiment]\nname = "fake"\nseeds = [1, 2]\n')


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """The tiny example run with seeds 1 and 2 (in worker processes), written to a directory."""
    if not hasattr(_core, "run_experiment"):
        pytest.skip("onionlab._core.run_experiment is not built yet")
    import onionlab

    out = tmp_path_factory.mktemp("tiny")
    onionlab.run(TINY, seeds=[1, 2], out=out, jobs=2)
    return out
