"""Running experiments: one config, several seeds, in parallel.

**Owns:** validating configs before anything runs, choosing the seeds, fanning (experiment,
seed) runs out to worker processes (or a ray cluster), relaying progress, and gathering each
experiment's per-seed tables into one :class:`~onionlab.results.Results` (:func:`run` for one
config, :func:`run_jobs` for a batch such as a sweep or a reproduction). **Must not touch:** the model; each seed
is one call of ``_core.run_experiment``.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_mod
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Optional, Sequence

from onionlab import _core
from onionlab import config as config_mod
from onionlab.progress import Progress
from onionlab.results import Results, output_dir, typed_run

# ---------------------------------------------------------------- worker side (spawned)

_progress_queue = None


def _init_worker(q, parent: Optional[int] = None) -> None:
    global _progress_queue
    _progress_queue = q
    if parent is not None:
        _die_with(parent)


def _die_with(parent: int) -> None:
    """Asks Linux to end this worker when the process that started it ends, however it
    ends: a sweep stopped with ``kill`` (or killed outright) would otherwise leave its
    workers running their simulations to the end, hours of CPU for nobody. Elsewhere, and
    where the call fails, workers keep the pool's own behaviour (they notice only once
    their run is done). Linux sends the signal when the *thread* that spawned the worker
    ends; the pool spawns its workers from the thread that submits, which :func:`run_jobs`
    keeps waiting until every run is in."""
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the request was made
        os._exit(1)


def _run_seed(path: str, seed: int, report_progress: bool = False, overrides: Sequence[str] = (), key: Hashable = None) -> dict[str, Any]:
    """Runs one seed of the config at `path` with `overrides`; in a worker process,
    progress goes to the queue set up by :func:`_init_worker`, as ``(key, done, total,
    events)`` (`key` defaults to the seed). The tables come back as DataFrames
    (:func:`typed_run`). Exceptions come back as plain ValueError/RuntimeError so that they
    unpickle in the parent."""
    key = seed if key is None else key
    cb = None
    q = _progress_queue
    if report_progress and q is not None:

        def cb(done: float, total: float, events: int) -> None:
            try:
                q.put_nowait((key, done, total, events))
            except Exception:
                pass

    try:
        run = _core.run_experiment(path, int(seed), cb, list(overrides))
    except KeyboardInterrupt:
        raise
    except ValueError as e:
        raise ValueError(f"seed {seed}: {e}") from None
    except Exception as e:
        raise RuntimeError(f"seed {seed}: {type(e).__name__}: {e}") from None
    return typed_run(run)


# ---------------------------------------------------------------- parent side


@dataclass(frozen=True)
class Job:
    """One experiment of a batch for :func:`run_jobs`: the config file at `path` with
    `overrides` (``PATH=VALUE`` strings, see ``docs/config.md``), run once per seed."""

    name: str
    path: str
    seeds: tuple[int, ...]
    overrides: tuple[str, ...] = ()


def _check_count(name: str, v: Any) -> None:
    """Raises unless `v` is a whole number of at least 1 (a count of workers), naming `name`."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: give a whole number, got {v!r}")
    if v < 1:
        raise ValueError(f"{name}: must be at least 1, got {v}")


def _seeds_from(resolved: dict[str, Any], seeds: Optional[Iterable[int] | int]) -> list[int]:
    if seeds is None:
        out = list(resolved.get("experiment", {}).get("seeds", [1]))
    elif isinstance(seeds, int) and not isinstance(seeds, bool):
        raise TypeError("seeds: give a list of seeds, e.g. seeds=[1, 2, 3]")
    else:
        out = list(seeds)
    # At most 2^63 - 1: a config's seeds are TOML integers, and the tables' seed column int64
    # (a larger one ran the whole simulation, then failed writing its rows).
    bad = [s for s in out if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 2**63 - 1]
    if bad:
        raise ValueError(f"seeds: must be integers from 0 to 2^63 - 1, got {bad}")
    if not out:
        raise ValueError("seeds: at least one seed is needed")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds: duplicates in {out}")
    return out


def seeds_from_options(seed: Optional[list[int]], seeds: Optional[int], config: dict[str, Any]) -> Optional[list[int]]:
    """The seeds the command-line options ask for: ``--seed S ...`` exactly, ``--seeds N``
    as N seeds counting from the config's first (`config`: a parsed resolved config), or
    None for the config's own."""
    if seed:
        return list(seed)
    if seeds is None:
        return None
    if seeds < 1:
        raise ValueError(f"--seeds: must be at least 1, got {seeds}")
    first = int(config.get("experiment", {}).get("seeds", [1])[0])
    return list(range(first, first + seeds))


def _run_in_process(job: Job, seed: int, bar: Optional[Progress]) -> dict:
    """One run in this process (one worker: no pool, and Ctrl-C stops it at once)."""
    key = (job.name, seed)
    return _core.run_experiment(job.path, seed, bar.callback(key) if bar else None, list(job.overrides))


def _result(get: Callable[[], dict], job: Job, label: bool) -> dict:
    """A run's result; with `label`, a failure names its experiment (in a batch the seed
    alone does not say which failed)."""
    if not label:
        return get()
    try:
        return get()
    except (ValueError, RuntimeError) as e:
        if type(e) not in (ValueError, RuntimeError):  # a ConfigError keeps its problem list
            raise
        raise type(e)(f"{job.name}: {e}") from None


def _execute_local(tasks: list[tuple[Job, int]], workers: int, bar: Optional[Progress], done: Callable[[Job, int, dict], None],
                   label: bool = False) -> None:
    if workers <= 1:
        for job, seed in tasks:
            run = _result(lambda: _run_in_process(job, seed, bar), job, label)
            if bar:
                bar.finish_seed((job.name, seed))
            done(job, seed, run)
        return

    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue() if bar else None
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                key, d, total, events = q.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            except (EOFError, OSError):
                return
            bar.update(tuple(key), d, total, events)

    t = threading.Thread(target=drain, daemon=True) if bar else None
    if t:
        t.start()
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(q, os.getpid()))
    try:
        pending = {
            ex.submit(_run_seed, job.path, seed, bar is not None, job.overrides, (job.name, seed)): (job, seed) for job, seed in tasks
        }
        while pending:
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in finished:
                job, seed = pending.pop(f)
                try:
                    run = _result(f.result, job, label)
                except BrokenProcessPool:
                    raise RuntimeError(
                        f"{job.name}, seed {seed}: a worker process ended before its run did. It was killed (out of "
                        "memory?), or it could not start: workers are new processes that import the calling script, "
                        "which needs a file (not stdin) with its work under `if __name__ == \"__main__\":`. "
                        "jobs=1 (--jobs 1) runs everything in this process"
                    ) from None
                if bar:
                    bar.finish_seed((job.name, seed))
                done(job, seed, run)
        ex.shutdown(wait=True)
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        stop.set()
        if t:
            t.join(timeout=1.0)
        if q is not None:
            q.close()


def require_ray(address: Optional[str] = None):
    """The ray module, or a RuntimeError saying how to install it (commands call this
    before they write anything). With a cluster's `address` (``host:port`` or
    ``ray://host:port``), also a RuntimeError if nothing answers there: ray itself retries
    an unreachable address for minutes without a word."""
    try:
        import ray  # type: ignore
    except ImportError:
        raise RuntimeError(
            "running on a ray cluster needs the ray package: pip install 'onionlab[ray]' (or pip install ray)"
        ) from None
    if address is not None:
        _check_ray_address(address)
    return ray


#: Seconds to wait for a ray cluster's port to accept a connection.
RAY_CONNECT_TIMEOUT_S = 5.0


def _check_ray_address(address: str) -> None:
    """Raises RuntimeError unless `address` is "local", "auto" (ray finds, or fails fast
    to find, a cluster started here) or a ``[ray://]host:port`` that accepts a TCP
    connection within :data:`RAY_CONNECT_TIMEOUT_S`."""
    import socket

    if address in ("local", "auto"):
        return
    hostport = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    host = host.strip("[]")  # an IPv6 address in brackets
    if not sep or not host or not port.isdigit():
        raise RuntimeError(f"ray: address {address!r} is not 'local', 'auto', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise RuntimeError(
            f"ray: nothing answers at {address} ({e.strerror or e}); start a cluster there "
            "(ray start --head), or give --ray local for a new one on this machine"
        ) from None


def _execute_ray(tasks: list[tuple[Job, int]], address: str, bar: Optional[Progress], done: Callable[[Job, int, dict], None],
                 label: bool = False, num_cpus: Optional[int] = None) -> None:
    ray = require_ray()
    if not ray.is_initialized():
        _check_ray_address(address)
        # A new local cluster (address "local") takes --jobs as its CPUs; ray gives it them all otherwise.
        extra = {"num_cpus": num_cpus} if num_cpus is not None else {}
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, **extra)
    # The config path (and the files it names) must be readable on the workers: a shared
    # filesystem. Overrides travel with each task.
    remote = ray.remote(_run_seed)
    refs = {remote.remote(job.path, seed, False, job.overrides, (job.name, seed)): (job, seed) for job, seed in tasks}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for r in ready:
            job, seed = refs[r]
            run = _result(lambda: ray.get(r), job, label)
            if bar:
                bar.finish_seed((job.name, seed))
            done(job, seed, run)


def run_jobs(
    jobs: Sequence[Job],
    workers: Optional[int] = None,
    progress: bool = False,
    ray_address: Optional[str] = None,
    on_result: Optional[Callable[[Job, Results], None]] = None,
    resolved: Optional[dict[str, str]] = None,
) -> dict[str, Results]:
    """Runs a batch of experiments as independent (experiment, seed) runs, spread over
    `workers` local processes (default: the CPUs; with one, in this process) or over the
    ray cluster at `ray_address`, and returns ``{name: Results}``.

    Every config is validated (with its overrides) before anything runs; a
    :class:`~onionlab.ConfigError` names the experiment. ``on_result(job, results)`` is
    called as soon as an experiment's last seed is done (a batch stopped part-way keeps
    what it finished, if ``on_result`` writes it). `resolved` maps job names to resolved
    configs a caller has already validated (``config.check``); those are not checked again."""
    jobs = list(jobs)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"jobs: duplicate names in {names}")
    if workers is not None:  # 0 would silently mean "the CPUs"
        _check_count("workers", workers)
    resolved = dict(resolved or {})
    for j in jobs:
        if j.name in resolved:
            continue
        try:
            resolved[j.name] = config_mod.check(j.path, j.overrides)
        except config_mod.ConfigError as e:
            if len(jobs) > 1:
                e.args = (f"{j.name}: {e.args[0]}", *e.args[1:])
            raise
    tasks = [(j, s) for j in jobs for s in j.seeds]
    if ray_address and workers is not None and ray_address != "local":
        # A running cluster's workers are its own; only a new local one can be sized.
        raise ValueError(f"jobs: has no effect on the ray cluster at {ray_address!r} (its CPUs decide); "
                         "--ray local --jobs N starts a local cluster of N CPUs")
    ray_cpus = workers if ray_address == "local" else None
    workers = max(1, min(workers or (os.cpu_count() or 1), len(tasks) or 1))
    runs: dict[str, list] = {j.name: [] for j in jobs}
    results: dict[str, Results] = {}

    def finish(job: Job) -> None:
        res = Results.from_runs(runs.pop(job.name), config_mod.with_seeds(resolved[job.name], list(job.seeds)))
        res.files_dir = str(Path(job.path).resolve().parent)  # where the config's file names resolve
        results[job.name] = res
        if on_result is not None:
            on_result(job, res)

    def done(job: Job, seed: int, run: dict) -> None:
        runs[job.name].append(run)
        if len(runs[job.name]) == len(job.seeds):
            finish(job)

    bar = Progress([(j.name, s) for j, s in tasks], noun="runs") if progress and tasks else None
    try:
        label = len(jobs) > 1
        if ray_address:
            _execute_ray(tasks, ray_address, bar, done, label, ray_cpus)
        else:
            _execute_local(tasks, workers, bar, done, label)
    finally:
        if bar:
            bar.close()
    for j in jobs:
        if j.name not in results:  # no seeds: an empty experiment
            finish(j)
    return {n: results[n] for n in names}


def run(
    config_path: str | os.PathLike,
    seeds: Optional[Iterable[int]] = None,
    out: Optional[str | os.PathLike] = None,
    jobs: Optional[int] = None,
    progress: bool = False,
    ray_address: Optional[str] = None,
    overrides: Optional[Iterable[str]] = None,
) -> Results:
    """Runs the experiment in `config_path` once per seed and returns the pooled results.

    `overrides` are ``PATH=VALUE`` settings applied to the config before validation (as
    ``onionlab run --set``; ``docs/config.md``), e.g. ``["tor.circ_window=500"]``.
    The config is validated first (raising :class:`onionlab.ConfigError` listing every
    problem). `seeds` defaults to the config's ``[experiment].seeds``. Seeds run in parallel
    worker processes (``jobs``, default ``min(len(seeds), os.cpu_count())``; with one job
    they run in this process), or on the ray cluster at `ray_address`. With `progress`, a
    status line is drawn on stderr. With `out`, the results directory is written there.
    """
    path = os.path.abspath(os.fspath(config_path))
    overrides = _overrides(overrides)
    resolved_text = config_mod.check(path, overrides)
    resolved = config_mod.parse(resolved_text)
    seed_list = _seeds_from(resolved, seeds)
    if jobs is None and not ray_address:  # on ray: the cluster's CPUs, unless --jobs sizes a local one
        jobs = min(len(seed_list), os.cpu_count() or 1)
    if jobs is not None:
        _check_count("jobs", jobs)
    name = str(resolved.get("experiment", {}).get("name", "experiment"))
    job = Job(name, path, tuple(seed_list), overrides)
    if out is None:
        return run_jobs([job], workers=jobs, progress=progress, ray_address=ray_address)[name]
    with output_dir(out):
        res = run_jobs([job], workers=jobs, progress=progress, ray_address=ray_address)[name]
        res.write(out)
    res.source = str(Path(out))
    return res


def _overrides(overrides: Optional[Iterable[str]]) -> tuple[str, ...]:
    """`overrides` as a tuple of ``PATH=VALUE`` strings (a lone string is a mistake)."""
    if overrides is None:
        return ()
    if isinstance(overrides, str):
        raise TypeError(f"overrides: give a list of PATH=VALUE strings, e.g. [{overrides!r}]")
    out = tuple(overrides)
    bad = [o for o in out if not isinstance(o, str)]
    if bad:
        raise TypeError(f"overrides: each must be a PATH=VALUE string, got {bad!r}")
    return out
