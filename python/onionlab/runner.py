"""Running experiments: one config, several seeds, in parallel.

**Owns:** validating the config before anything runs, choosing the seeds, fanning the seeds
out to worker processes (or a ray cluster), relaying progress, and gathering the per-seed
tables into one :class:`~onionlab.results.Results`. **Must not touch:** the model; each seed
is one call of ``_core.run_experiment``.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_mod
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Optional

from onionlab import _core
from onionlab import config as config_mod
from onionlab.progress import Progress
from onionlab.results import Results, typed_run

# ---------------------------------------------------------------- worker side (spawned)

_progress_queue = None


def _init_worker(q) -> None:
    global _progress_queue
    _progress_queue = q


def _run_seed(path: str, seed: int, report_progress: bool = False) -> dict[str, Any]:
    """Runs one seed; in a worker process, progress goes to the queue set up by
    :func:`_init_worker`. The tables come back as DataFrames (:func:`typed_run`).
    Exceptions come back as plain ValueError/RuntimeError so that they unpickle in the
    parent."""
    cb = None
    q = _progress_queue
    if report_progress and q is not None:

        def cb(done: float, total: float, events: int) -> None:
            try:
                q.put_nowait((seed, done, total, events))
            except Exception:
                pass

    try:
        run = _core.run_experiment(path, int(seed), cb)
    except KeyboardInterrupt:
        raise
    except ValueError as e:
        raise ValueError(f"seed {seed}: {e}") from None
    except Exception as e:
        raise RuntimeError(f"seed {seed}: {type(e).__name__}: {e}") from None
    return typed_run(run)


# ---------------------------------------------------------------- parent side


def _seeds_from(resolved: dict[str, Any], seeds: Optional[Iterable[int] | int]) -> list[int]:
    if seeds is None:
        out = list(resolved.get("experiment", {}).get("seeds", [1]))
    elif isinstance(seeds, int) and not isinstance(seeds, bool):
        raise TypeError("seeds: give a list of seeds, e.g. seeds=[1, 2, 3]")
    else:
        out = list(seeds)
    bad = [s for s in out if isinstance(s, bool) or not isinstance(s, int) or s < 0]
    if bad:
        raise ValueError(f"seeds: must be non-negative integers, got {bad}")
    if not out:
        raise ValueError("seeds: at least one seed is needed")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds: duplicates in {out}")
    return out


def _run_local(path: str, seeds: list[int], jobs: int, bar: Optional[Progress]) -> list[dict]:
    if jobs <= 1:
        out = []
        for s in seeds:
            out.append(_core.run_experiment(path, s, bar.callback(s) if bar else None))
            if bar:
                bar.finish_seed(s)
        return out

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue() if bar else None
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                seed, done, total, events = q.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError):
                return
            bar.update(seed, done, total, events)

    t = threading.Thread(target=drain, daemon=True) if bar else None
    if t:
        t.start()
    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker, initargs=(q,))
    try:
        futs = {s: ex.submit(_run_seed, path, s, bar is not None) for s in seeds}
        results = {}
        pending = dict(futs)
        from concurrent.futures import FIRST_COMPLETED, wait

        while pending:
            done, _ = wait(list(pending.values()), return_when=FIRST_COMPLETED)
            for s in [s for s, f in pending.items() if f in done]:
                results[s] = pending.pop(s).result()
                if bar:
                    bar.finish_seed(s)
        ex.shutdown(wait=True)
        return [results[s] for s in seeds]
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        stop.set()
        if t:
            t.join(timeout=1.0)
        if q is not None:
            q.close()


def _run_ray(path: str, seeds: list[int], address: str, bar: Optional[Progress]) -> list[dict]:
    try:
        import ray  # type: ignore
    except ImportError:
        raise RuntimeError(
            "running on a ray cluster needs the ray package: pip install 'onionlab[ray]' (or pip install ray)"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    # The config path must be readable on the workers (a shared filesystem).
    remote = ray.remote(_run_seed)
    refs = {remote.remote(path, s): s for s in seeds}
    results = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for r in ready:
            s = refs[r]
            results[s] = ray.get(r)
            if bar:
                bar.finish_seed(s)
    return [results[s] for s in seeds]


def run(
    config_path: str | os.PathLike,
    seeds: Optional[Iterable[int]] = None,
    out: Optional[str | os.PathLike] = None,
    jobs: Optional[int] = None,
    progress: bool = False,
    ray_address: Optional[str] = None,
) -> Results:
    """Runs the experiment in `config_path` once per seed and returns the pooled results.

    The config is validated first (raising :class:`onionlab.ConfigError` listing every
    problem). `seeds` defaults to the config's ``[experiment].seeds``. Seeds run in parallel
    worker processes (``jobs``, default ``min(len(seeds), os.cpu_count())``; with one job
    they run in this process), or on the ray cluster at `ray_address`. With `progress`, a
    status line is drawn on stderr. With `out`, the results directory is written there.
    """
    path = os.path.abspath(os.fspath(config_path))
    resolved_text = config_mod.check(path)
    resolved = config_mod.parse(resolved_text)
    seed_list = _seeds_from(resolved, seeds)
    if jobs is None:
        jobs = min(len(seed_list), os.cpu_count() or 1)
    if jobs < 1:
        raise ValueError(f"jobs: must be at least 1, got {jobs}")
    jobs = min(jobs, len(seed_list))

    bar = Progress(seed_list) if progress else None
    try:
        if ray_address:
            runs = _run_ray(path, seed_list, ray_address, bar)
        else:
            runs = _run_local(path, seed_list, jobs, bar)
    finally:
        if bar:
            bar.close()

    res = Results.from_runs(runs, config_mod.with_seeds(resolved_text, seed_list))
    if out is not None:
        res.write(out)
        res.source = str(Path(out))
    return res
