"""Statistics over result tables: the pooled per-class summary, empirical CDFs and their
confidence bands, and the comparison table.

**Owns:** descriptive statistics of the ``downloads`` table (quantiles, means, data shares,
ECDFs with DKW bands). **Must not touch:** anything that models the network; these functions
only read tables the Rust simulator produced.

Pooled class figures (in ``summary.json`` under ``"classes"``) use tornettools-like names::

    downloads, errors, unfinished, bytes, data_gib, data_share_pct,
    received_bytes, received_share_pct,
    time_to_first_byte_recv: {median, mean, p10, p25, p75, p90, p99, count},
    time_to_last_byte_recv:  {... same ...},
    goodput: {median}           # bytes/s, size / ttlb

Times are seconds, counted only over downloads that completed (no error, ttlb present).
``downloads`` counts every download started in the measured window: completed, failed
(``errors``) and still in progress when the run ended (``unfinished``; their ``error`` is
:data:`UNFINISHED`; the Python tests tie it to the core's constant). A policy that starves
some clients shows in ``unfinished`` and in fewer downloads, not in the times.
``bytes``, ``data_gib`` and ``data_share_pct`` count completed downloads at their size;
``received_bytes`` and ``received_share_pct`` count every byte received in the measured
window's downloads, unfinished ones included (what the throttling reproduction's table 1
counts). A class with no download in the window still has its row, of zeros.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

GIB = float(1 << 30)
QUANTILES = {"p10": 0.10, "p25": 0.25, "p75": 0.75, "p90": 0.90, "p99": 0.99}
#: The ``error`` of a download still in progress when the run ended (the Rust core's
#: ``onionlab_tor::UNFINISHED``): not a failure.
UNFINISHED = "unfinished at end of run"


def _clean(x: Any) -> Any:
    """Plain Python numbers for JSON; NaN becomes None."""
    if x is None:
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return None if math.isnan(x) else x
    return x


def describe(values: Iterable[float]) -> dict[str, Any]:
    """median, mean, p10, p25, p75, p90, p99 and count of the non-missing `values`."""
    a = np.asarray(pd.Series(values, dtype="float64").dropna(), dtype="float64")
    out: dict[str, Any] = {"count": int(a.size)}
    if a.size == 0:
        out.update({"median": None, "mean": None, **{k: None for k in QUANTILES}})
        return out
    out["median"] = float(np.quantile(a, 0.5))
    out["mean"] = float(a.mean())
    for k, q in QUANTILES.items():
        out[k] = float(np.quantile(a, q))
    return out


def completed(downloads: pd.DataFrame) -> pd.DataFrame:
    """Downloads that finished: no error and a time to last byte."""
    ok = downloads["error"].isna() & downloads["ttlb"].notna()
    return downloads[ok]


def failed(downloads: pd.DataFrame) -> pd.Series:
    """Which downloads failed: an error other than :data:`UNFINISHED`."""
    return downloads["error"].notna() & (downloads["error"] != UNFINISHED)


def unfinished(downloads: pd.DataFrame) -> pd.Series:
    """Which downloads were still in progress when the run ended."""
    return downloads["error"] == UNFINISHED


def class_summary(downloads: pd.DataFrame, classes: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    """The pooled per-class figures described in the module docstring (classes sorted).
    `classes` names classes to report even without a download in the measured window (a
    class a mechanism starved, whose downloads all began in the warm-up and never ended):
    they get a row of zeros, not silence."""
    done = completed(downloads)
    total_bytes = int(done["size"].sum()) if len(done) else 0
    has_received = "received" in downloads.columns
    total_received = int(downloads["received"].sum()) if has_received and len(downloads) else 0
    out: dict[str, dict[str, Any]] = {}
    for cls in sorted({*map(str, downloads["class"].dropna().unique()), *map(str, classes)}):
        rows = downloads[downloads["class"] == cls]
        ok = done[done["class"] == cls]
        b = int(ok["size"].sum())
        received = int(rows["received"].sum()) if has_received else b
        out[str(cls)] = {
            "downloads": int(len(rows)),
            "errors": int(failed(rows).sum()),
            "unfinished": int(unfinished(rows).sum()),
            "bytes": b,
            "data_gib": b / GIB,
            "data_share_pct": (100.0 * b / total_bytes) if total_bytes else None,
            "received_bytes": received,
            "received_share_pct": (100.0 * received / total_received) if has_received and total_received else None,
            "time_to_first_byte_recv": describe(ok["ttfb"]),
            "time_to_last_byte_recv": describe(ok["ttlb"]),
            "goodput": {"median": _clean(ok["goodput"].median()) if len(ok) else None},
        }
    return out


def pooled_summary(downloads: pd.DataFrame, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The deterministic ``summary.json`` content: per-seed run summaries (without wall-clock
    times) under ``"runs"`` and pooled figures over all seeds."""
    runs = sorted(runs, key=lambda r: r.get("seed", 0))
    counters: dict[str, int] = {}
    for r in runs:
        for k, v in (r.get("counters") or {}).items():
            counters[k] = counters.get(k, 0) + int(v)
    done = completed(downloads)
    total = int(done["size"].sum()) if len(done) else 0
    first = runs[0] if runs else {}
    return {
        "experiment": first.get("experiment"),
        "seeds": [int(r["seed"]) for r in runs if "seed" in r],
        "sim_seconds": first.get("sim_seconds"),
        "warmup_seconds": first.get("warmup_seconds"),
        "events": int(sum(int(r.get("events", 0)) for r in runs)),
        "counters": dict(sorted(counters.items())),
        "downloads": int(len(downloads)),
        "errors": int(failed(downloads).sum()),
        "unfinished": int(unfinished(downloads).sum()),
        "bytes": total,
        "data_gib": total / GIB,
        "classes": class_summary(downloads, classes=[c for r in runs for c in (r.get("classes") or {})]),
        "runs": runs,
    }


#: Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (beyond: 1.96).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(dof: int) -> float:
    """The 97.5% quantile of Student's t with `dof` degrees of freedom (a 95% two-sided
    interval); 1.96, the normal's, beyond 30."""
    if dof < 1:
        raise ValueError(f"dof: must be at least 1, got {dof}")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def mean_ci95(values: Iterable[float]) -> tuple[float, float]:
    """The mean of `values` (missing ones left out) and the half-width of its 95%
    confidence interval (Student's t): over seeds, how far the mean may move. NaN for the
    mean of no values and for the half-width of fewer than two."""
    s = pd.Series(values, dtype="float64").dropna()
    n = int(s.size)
    mean = float(s.mean()) if n else float("nan")
    return mean, t975(n - 1) * float(s.std(ddof=1)) / math.sqrt(n) if n >= 2 else float("nan")


def wilson_ci95(successes: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion, ``successes`` of ``n`` trials (sound
    for small ``n`` and for proportions at 0 or 1, where the normal interval collapses).
    Raises ValueError for ``n`` < 1 or successes outside 0..n."""
    _check_count(successes, n)
    return _wilson(successes / n, n)


def _check_count(successes: int, n: int) -> None:
    """ValueError (naming :func:`wilson_ci95`) unless 0 <= ``successes`` <= ``n`` and ``n`` >= 1."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson_ci95: need 0 <= successes <= n and n >= 1, got {successes} of {n}")


def _wilson(p: float, n: float) -> tuple[float, float]:
    """Wilson's 95% interval of a proportion ``p`` over ``n`` trials, ``n`` > 0 and possibly
    fractional (an effective sample size)."""
    z = 1.96
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _newcombe(p1: float, n1: float, p2: float, n2: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) of ``p1 - p2`` from the two Wilson
    intervals, over (possibly effective) sample sizes ``n1`` and ``n2``."""
    (l1, u1), (l2, u2) = _wilson(p1, n1), _wilson(p2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def difference_ci95(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float]:
    """The 95% interval of p1 - p2, the difference of two independent proportions (x1 of
    n1, x2 of n2), by Newcombe's hybrid score method (his method 10), built from the two
    Wilson intervals. Raises ValueError as :func:`wilson_ci95`."""
    _check_count(x1, n1)
    _check_count(x2, n2)
    return _newcombe(x1 / n1, n1, x2 / n2, n2)


def design_effect(hits: Iterable[float], trials: Iterable[float]) -> float:
    """The design effect of a proportion pooled over clusters, p = sum(hits) / sum(trials)
    (cluster i: ``hits[i]`` of ``trials[i]``): the cluster-robust variance of that ratio
    (the linearised, "sandwich" one) over the binomial variance p (1 - p) / n, floored at
    1. Both are the plain estimates, without a small-sample correction, so that trials of
    one cluster each give exactly 1. Trials that share a cluster and fail or succeed
    together make it large; dividing n by it gives the effective number of independent
    trials (Kish; Rao and Scott's adjustment). 1 where it cannot be estimated or says
    nothing: fewer than two clusters, or p at 0 or 1. The floor keeps an interval built
    on it from being narrower than the one that treats every trial as independent. With
    few clusters the cluster-robust variance runs low (no C / (C - 1) factor: about 10 %
    with ten clusters). Raises ValueError for hits and trials of different lengths, a
    missing or negative count or hits above trials."""
    y, m = np.asarray(list(hits), dtype=float), np.asarray(list(trials), dtype=float)
    if y.shape != m.shape or np.isnan(y).any() or np.isnan(m).any() or (y < 0).any() or (y > m).any():
        raise ValueError("design_effect: need as many hits as trials, 0 <= hits <= trials in every cluster")
    n, c = float(m.sum()), int((m > 0).sum())
    if c < 2 or n <= 0:
        return 1.0
    p = float(y.sum()) / n
    if p <= 0.0 or p >= 1.0:
        return 1.0
    robust = float(((y - p * m) ** 2).sum()) / (n * n)
    return max(1.0, robust / (p * (1 - p) / n))


def clustered_difference_ci95(hits1: Iterable[float], trials1: Iterable[float], hits2: Iterable[float],
                              trials2: Iterable[float], max_effective: tuple[float | None, float | None] = (None, None)) -> tuple[float, float]:
    """The 95% interval of p1 - p2 for two proportions each pooled over clusters
    (``hits1[i]`` of ``trials1[i]`` in cluster i; the same for group 2): Newcombe's interval
    (:func:`difference_ci95`) with each n divided by its :func:`design_effect`, so that
    trials that move together count as fewer, and then capped at ``max_effective``'s bound
    for that group where one is given (e.g. trials known to share parts: at most as many
    independent trials as parts). Where every cluster holds one trial, or the trials do
    not cluster, and no cap binds, it is Newcombe's. The two groups are taken as
    independent. Raises ValueError for a group without trials or a cap below 1, or as
    :func:`design_effect`."""
    groups = []
    for k, (hits, trials, cap) in enumerate(((hits1, trials1, max_effective[0]), (hits2, trials2, max_effective[1])), start=1):
        y, m = np.asarray(list(hits), dtype=float), np.asarray(list(trials), dtype=float)
        deff = design_effect(y, m)  # raises on bad counts
        if m.sum() <= 0:
            raise ValueError(f"clustered_difference_ci95: group {k} has no trials")
        if cap is not None and not cap >= 1:
            raise ValueError(f"clustered_difference_ci95: group {k}'s max_effective must be at least 1, got {cap}")
        n_eff = float(m.sum()) / deff
        groups.append((float(y.sum() / m.sum()), n_eff if cap is None else min(n_eff, float(cap))))
    (p1, n1), (p2, n2) = groups
    return _newcombe(p1, n1, p2, n2)


def seed_spread(downloads: pd.DataFrame, metrics: Iterable[str] = ("ttfb", "ttlb")) -> pd.DataFrame:
    """How a class's median moves between seeds: per class and metric, the median over each
    seed's completed downloads, then their mean over the seeds and the half-width of its 95%
    confidence interval (Student's t over the seeds; NaN with one seed). One row per class:
    ``seeds``, ``{metric}_median_seed_mean``, ``{metric}_median_ci95``."""
    metrics = list(metrics)
    done = completed(downloads)
    rows = []
    for cls in sorted(downloads["class"].dropna().unique()):
        ok = done[done["class"] == cls]
        row: dict[str, Any] = {"class": str(cls)}
        for m in metrics:
            per_seed = ok.groupby("seed")[m].median().dropna()
            row["seeds"] = max(row.get("seeds", 0), int(per_seed.size))
            row[f"{m}_median_seed_mean"], row[f"{m}_median_ci95"] = mean_ci95(per_seed)
        rows.append(row)
    cols = ["class", "seeds"] + [f"{m}_median_{k}" for m in metrics for k in ("seed_mean", "ci95")]
    return pd.DataFrame(rows, columns=cols)


def ecdf(values: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted non-missing values and their empirical CDF (i/n)."""
    a = np.sort(np.asarray(pd.Series(values, dtype="float64").dropna(), dtype="float64"))
    n = a.size
    return a, (np.arange(1, n + 1) / n if n else np.zeros(0))


def dkw_epsilon(n: int, alpha: float = 0.05) -> float:
    """Half-width of the Dvoretzky-Kiefer-Wolfowitz confidence band for an ECDF of n samples:
    with probability 1 - alpha the true CDF lies within +/- epsilon everywhere."""
    if n <= 0:
        return 1.0
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def class_shares_table(summaries: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The comparison table: one row per labelled pooled summary, with its number of seeds
    (counts and GiB are summed over them), total data, each class's share of bytes (the
    throttling paper's "Data (GiB)", "Web (%)", "Bulk (%)", over completed downloads), the
    same over every byte received (unfinished downloads too), and per class the median and
    p90 of time to first and last byte and the median goodput."""
    classes = sorted({c for s in summaries.values() for c in s.get("classes", {})})
    rows = []
    for label, s in summaries.items():
        row: dict[str, Any] = {"experiment": label, "Seeds": len(s.get("seeds") or []) or None, "Data (GiB)": s.get("data_gib")}
        cl = s.get("classes", {})
        for c in classes:
            row[f"{c.capitalize()} (%)"] = cl.get(c, {}).get("data_share_pct")
        # What every download received, unfinished ones too (summaries written before these
        # fields existed have none).
        received = [x.get("received_bytes") for x in cl.values()]
        row["Received (GiB)"] = sum(received) / GIB if received and None not in received else None
        for c in classes:
            row[f"{c.capitalize()} received (%)"] = cl.get(c, {}).get("received_share_pct")
        for c in classes:
            x = cl.get(c, {})
            ttfb = x.get("time_to_first_byte_recv", {})
            ttlb = x.get("time_to_last_byte_recv", {})
            row[f"{c} downloads"] = x.get("downloads")
            row[f"{c} errors"] = x.get("errors")
            row[f"{c} unfinished"] = x.get("unfinished")
            row[f"{c} ttfb median (s)"] = ttfb.get("median")
            row[f"{c} ttfb p90 (s)"] = ttfb.get("p90")
            row[f"{c} ttlb median (s)"] = ttlb.get("median")
            row[f"{c} ttlb p90 (s)"] = ttlb.get("p90")
            row[f"{c} goodput median (KiB/s)"] = (
                x["goodput"]["median"] / 1024.0 if x.get("goodput", {}).get("median") is not None else None
            )
        rows.append(row)
    df = pd.DataFrame(rows).set_index("experiment")
    return df.astype("float64", errors="ignore")


def is_count_column(name: str) -> bool:
    """A column of :func:`class_shares_table` that counts (seeds, downloads, errors)."""
    return name == "Seeds" or name.endswith((" downloads", " errors", " unfinished"))


def display_cells(df: pd.DataFrame) -> pd.DataFrame:
    """The table's cells as text for printing: counts as whole numbers ("2", not "2.000"),
    other numbers to three decimals, a missing value as "-"."""

    def cell(v, count: bool) -> str:
        if v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)):
            return "-"
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            return f"{int(round(v))}" if count else f"{v:.3f}"
        return str(v)

    return pd.DataFrame({c: [cell(v, is_count_column(str(c))) for v in df[c]] for c in df.columns}, index=df.index)


#: The relays table's wait columns (the Rust `onionlab_tor::wait` ledgers), by place.
WAIT_PLACES = {"queue": "queue_wait_cell_s", "outbuf": "outbuf_wait_cell_s", "wire": "wire_wait_cell_s"}
#: The wire in parts, on channels between relays: the relay's kernel, the link, unread in
#: the next relay's receive buffer.
WIRE_PARTS = {"kernel": "kernel_wait_cell_s", "link": "link_wait_cell_s", "unread": "unread_wait_cell_s"}


def wait_split(relays: pd.DataFrame, start: float = 0.0, by: tuple[str, ...] = ("relay",)) -> pd.DataFrame:
    """Where cells wait at each relay (the design's queue-time split), from the ``relays``
    table's intervals that start at or after ``start`` (seconds): per group of ``by``, the
    cells that entered its circuit queues and the mean time per cell (Little's law:
    cell-seconds over cells, in ms) in its circuit queues (``queue_ms``, where a circuit
    scheduler can reorder them), outbufs (``outbuf_ms``) and on the wire to the next node
    (``wire_ms``: the kernel, the link, and the next node's unread buffer), and their sum;
    ``kernel_ms``, ``link_ms`` and ``unread_ms`` split the wire on channels between relays
    (the relay's kernel send buffer; serialisation, propagation and the next relay's
    downlink; its receive buffer, where its read bucket holds the cells back), in runs with
    ``experiment.wire_waits = true``. Channels to clients are not split, so on a guard the
    parts add up to less than ``wire_ms``.
    ``by=()`` pools every relay (each cell counted once per relay it crosses)."""
    missing = [c for c in ("cells_queued", *WAIT_PLACES.values()) if c not in relays.columns]
    if missing:
        raise ValueError(f"relays: no {', '.join(missing)} column (results from before the wait columns?)")
    r = relays[relays["interval_start"] >= start]
    # The wire's parts exist where the run set experiment.wire_waits.
    parts = {p: c for p, c in WIRE_PARTS.items() if c in r.columns and r[c].notna().any()}
    cols = ["cells_queued", *WAIT_PLACES.values(), *parts.values()]
    g = r.groupby(list(by))[cols].sum() if by else r[cols].sum().to_frame().T
    out = pd.DataFrame({"cells": g["cells_queued"].astype("int64")}, index=g.index)
    cells = g["cells_queued"].where(g["cells_queued"] > 0)
    for place, col in WAIT_PLACES.items():
        out[f"{place}_ms"] = 1000.0 * g[col] / cells
    out["total_ms"] = out[[f"{p}_ms" for p in WAIT_PLACES]].sum(axis=1, min_count=len(WAIT_PLACES))
    for part, col in parts.items():
        out[f"{part}_ms"] = 1000.0 * g[col] / cells
    return out.reset_index(drop=not by)


#: Payload bytes a DATA cell carries (tor's RELAY_PAYLOAD_SIZE): the circuits table counts cells.
RELAY_PAYLOAD_SIZE = 498


def byte_latency(circuits: pd.DataFrame, start: float = 0.0, end: float | None = None,
                 by: tuple[str, ...] = ("seed", "client", "class", "circuit", "created")) -> pd.DataFrame:
    """Byte-wise overlay latency (the PredicTor paper's, section 5) from the ``circuits``
    table, over the intervals that start at or after ``start`` and before ``end`` (seconds),
    per group of ``by`` (by default each circuit; ``by=()`` pools everything into one row,
    the paper's byte-weighted "Total").

    Columns: ``latency_with_exit_s``, the summed time of the cells in the overlay (packaged
    at the exit until delivered at the client) over the cells delivered, which every payload
    byte of a cell shares: the paper's metric (section 5: from a byte entering the overlay
    to reaching its destination; definition 1's backlog sums every node's queues, the
    exit's included); ``latency_s``, the same without the time the cells waited in the
    exit's queue (from the exit forwarding them, as the authors' code measured it, spec 8);
    ``cells_delivered``; ``bytes_delivered`` (cells times 498 payload bytes); ``rate``
    (payload bytes/s over the span of the intervals read); ``mean_backlog_cells``
    (forwarded by the exit and not yet delivered, the authors' code's backlog) and
    ``mean_exit_queued_cells`` (in the exit's queue), averaged over that span: definition
    1's backlog is their sum. These three are per run: where ``by`` does not
    hold ``seed`` and the table holds several seeds, a group's sums are divided by the
    span times the number of seeds in the table (a class's rate is its mean over the runs,
    not their sum; a group absent from a run counts 0 there). Over a window with cells
    still in transit at its ends the ratios are Little's law's estimates
    (``onionlab_tor::transit``). A group that delivered nothing has NaN latencies. Raises ``ValueError`` naming a missing column, or for a table without rows
    (a run without ``experiment.circuit_metrics_interval`` has an empty one)."""
    need = {"interval_start", "cells_delivered", "transit_cell_s", "exit_wait_cell_s", *by}
    missing = sorted(need - set(circuits.columns))
    if missing:
        raise ValueError(f"circuits table: missing column(s) {', '.join(missing)} (set experiment.circuit_metrics_interval)")
    if circuits.empty:
        raise ValueError("circuits table: no rows (set experiment.circuit_metrics_interval; with it set, no circuit was open at any sample)")
    c = circuits[circuits["interval_start"] >= start]
    if end is not None:
        c = c[c["interval_start"] < end]
    starts = np.sort(circuits["interval_start"].unique())
    step = float(np.diff(starts).min()) if len(starts) > 1 else float("nan")
    span = c["interval_start"].nunique() * step if len(c) else float("nan")
    if "seed" not in by and "seed" in circuits.columns:
        # Per run: every run of the table counts, a group absent from one counting 0 there.
        span *= max(1, circuits["seed"].nunique())
    sums = {"cells_delivered": ("cells_delivered", "sum"), "transit_cell_s": ("transit_cell_s", "sum"),
            "exit_wait_cell_s": ("exit_wait_cell_s", "sum")}
    if by:
        g = c.groupby(list(by), as_index=False, sort=True).agg(**sums)
    else:
        g = pd.DataFrame({k: [c[col].sum()] for k, (col, _) in sums.items()})
    delivered = g["cells_delivered"].where(g["cells_delivered"] > 0)
    g["latency_s"] = g["transit_cell_s"] / delivered
    g["latency_with_exit_s"] = (g["transit_cell_s"] + g["exit_wait_cell_s"]) / delivered
    g["bytes_delivered"] = g["cells_delivered"] * RELAY_PAYLOAD_SIZE
    g["rate"] = g["bytes_delivered"] / span
    g["mean_backlog_cells"] = g["transit_cell_s"] / span
    g["mean_exit_queued_cells"] = g["exit_wait_cell_s"] / span
    return g
