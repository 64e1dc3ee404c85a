"""The ray backend for real: a one-machine ray instance (``--ray local``, which ray.init
starts and stops with the command) runs the same (config, seed) runs as the local workers,
and the tables come out bit-identical. Ray is in the test extras, so ``make test`` has it;
test_cli.py covers the address reaching each command and a missing ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import TINY, needs_core

SHORT = ["--set", "experiment.duration=30 s", "--no-progress"]
# No usage report from ray's driver (the machine may have no internet), no login token.
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def onionlab(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "onionlab", *args], capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


@needs_core
def test_run_on_ray_gives_the_local_workers_results(tmp_path):
    onionlab("run", str(TINY), "-o", str(tmp_path / "ray"), "--seeds", "2", "--ray", "local", *SHORT)
    onionlab("run", str(TINY), "-o", str(tmp_path / "local"), "--seeds", "2", "--jobs", "2", *SHORT)
    for name in ("downloads.parquet", "relays.parquet", "summary.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    assert json.loads((tmp_path / "ray" / "summary.json").read_text())["seeds"] == [1, 2]


@needs_core
def test_a_sweep_on_ray_gives_the_local_sweep(tmp_path):
    vary = ["--vary", "mechanisms.scheduler=round-robin,ewma"]
    onionlab("sweep", str(TINY), "-o", str(tmp_path / "ray"), *vary, "--ray", "local", *SHORT)
    onionlab("sweep", str(TINY), "-o", str(tmp_path / "local"), *vary, "--jobs", "1", *SHORT)
    assert (tmp_path / "ray" / "sweep.csv").read_text() == (tmp_path / "local" / "sweep.csv").read_text()
