"""Which seeds a run uses (no simulation)."""

from __future__ import annotations

import pytest

from onionlab import runner


def test_seed_zero_is_a_seed():
    """Seeds are non-negative: 0 is as good as any (the Rust side takes a u64)."""
    assert runner._seeds_from({}, [0, 3]) == [0, 3]
    assert runner._seeds_from({"experiment": {"seeds": [0]}}, None) == [0]
    with pytest.raises(ValueError, match="from 0 to 2"):
        runner._seeds_from({}, [-1])
    # The largest a TOML config (and the tables' int64 seed column) holds, and one more,
    # which once ran the whole simulation and then failed writing its rows.
    assert runner._seeds_from({}, [2**63 - 1]) == [2**63 - 1]
    with pytest.raises(ValueError, match=r"seeds: must be integers from 0 to 2\^63 - 1, got \[9223372036854775808\]"):
        runner._seeds_from({}, [2**63])
    assert runner.seeds_from_options(None, 3, {"experiment": {"seeds": [0, 9]}}) == [0, 1, 2]


@pytest.mark.parametrize("workers", [0, -2])
def test_run_jobs_refuses_fewer_than_one_worker(workers):
    # 0 once meant "the CPUs" and a negative count one worker, silently.
    job = runner.Job("a", "unused.toml", (1,))
    with pytest.raises(ValueError, match="workers: must be at least 1"):
        runner.run_jobs([job], workers=workers)


@pytest.mark.parametrize("jobs, error, message", [("2", TypeError, "jobs: give a whole number"), (True, TypeError, "jobs: give a whole number"), (0, ValueError, "jobs: must be at least 1")])
def test_run_and_run_sweep_name_a_bad_jobs(jobs, error, message):
    import onionlab
    from conftest import TINY

    with pytest.raises(error, match=message):
        onionlab.run(TINY, seeds=[1], jobs=jobs)
    with pytest.raises(error, match=message):  # not run_jobs' own name for it, "workers"
        onionlab.run_sweep(TINY, {"tor.circ_window": [100, 200]}, jobs=jobs)


def test_workers_that_cannot_start_are_a_clear_error():
    """A script read from stdin cannot be imported by spawned workers: the pool breaks, and
    the error says why and what to do (it was a bare BrokenProcessPool)."""
    import subprocess
    import sys

    from conftest import TINY

    code = f"import onionlab\nonionlab.run({str(TINY)!r}, seeds=[1, 2], overrides=['experiment.duration=5 s', 'experiment.warmup=1 s'])\n"
    r = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "a worker process ended before its run did" in r.stderr and '__name__ == "__main__"' in r.stderr, r.stderr[-2000:]
