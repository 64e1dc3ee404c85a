"""What a run of the throttling experiment shows: table 1's data per client class, figure
3's medians and the sweep's statistics, where relays' queues sit (``channels.csv``) and
whom each algorithm throttles (``throttle_state.csv``).

**Owns:** turning one configuration's results (downloads, per-connection, per-relay and
per-channel tables) into numbers. **Must not touch:** running anything, or the anonymity
analysis (``anonymity``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from onionlab import stats
from onionlab.reproduce.throttling.configs import axis_value_key

#: Payload bytes per byte of cells on the wire (498 of 514 + 29 TLS bytes).
PAYLOAD_PER_WIRE_BYTE = 498 / 543

#: Sampling interval (seconds) of the per-channel table of the medium-load runs
#: (``channels.csv``: where relays' queues sit).
CHANNEL_STEP_S = 10.0

#: Channel ends per algorithm in ``channels.csv``: those with the most queued cells.
CHANNEL_TOP = 10


def completed_of_class(d: pd.DataFrame, cls: str) -> pd.DataFrame:
    """The finished downloads of client class ``cls`` in the download table ``d``."""
    return stats.completed(d[d["class"] == cls])


def data_by_class(res, warmup_s: float, seed: int | None = None) -> dict[str, float]:
    """Payload GiB delivered by guards to each client class after the warm-up, averaged
    over seeds, or of one ``seed``, from the per-connection table: every byte delivered in
    the measured window counts, of downloads finished or not and whenever they started.
    The paper says only "Total data downloaded ... by client type" (table 1); counting
    finished downloads alone would leave out most of a throttled bulk client's bytes, as
    the run ends in its download."""
    c = res.connections
    if seed is not None:
        c = c[c["seed"] == seed]
    c = c[c["interval_start"] >= warmup_s]
    seeds = max(1, c["seed"].nunique())
    g = c.groupby("class")["bytes_written"].sum() * PAYLOAD_PER_WIRE_BYTE / 2**30 / seeds
    return {k: float(v) for k, v in g.items()}


def _unfinished_pct(d: pd.DataFrame, cls: str) -> float:
    """Percent of `cls`'s downloads started in the measured window that were still in
    progress when the run ended: the downloads a median over finished ones leaves out."""
    rows = d[d["class"] == cls]
    return 100.0 * float(stats.unfinished(rows).sum()) / len(rows) if len(rows) else math.nan


def web_time_mean(d: pd.DataFrame, end_s: float) -> float:
    """Mean web download time with the downloads the end of the run cut short counted at
    the time they had run by then (``end_s`` - start): a lower bound on what they would
    have taken, where a mean over finished downloads leaves them out. Failed downloads are
    left out, as everywhere."""
    web = d[d["class"] == "web"]
    times = np.concatenate([stats.completed(web)["ttlb"].to_numpy(dtype=float), end_s - web.loc[stats.unfinished(web), "start"].to_numpy(dtype=float)])
    return float(times.mean()) if len(times) else math.nan


def medians(res, seed: int | None = None, end_s: float | None = None) -> dict[str, float]:
    """Figure 3's medians over finished downloads, the mean web download time over finished
    downloads and (given the run's end, ``end_s`` seconds) with the unfinished ones counted
    at their elapsed time (:func:`web_time_mean`), the number of finished downloads, and the
    share of downloads the end of the run cut short."""
    d = res.downloads
    if seed is not None:
        d = d[d["seed"] == seed]
    w, b = completed_of_class(d, "web"), completed_of_class(d, "bulk")
    return {
        "web_ttfb_median": float(w["ttfb"].median()) if len(w) else math.nan,
        "web_ttlb_median": float(w["ttlb"].median()) if len(w) else math.nan,
        "web_ttlb_mean": float(w["ttlb"].mean()) if len(w) else math.nan,
        "web_time_mean": web_time_mean(d, end_s) if end_s is not None else math.nan,
        "bulk_ttlb_median": float(b["ttlb"].median()) if len(b) else math.nan,
        "web_downloads": int(len(w)),
        "bulk_downloads": int(len(b)),
        "web_unfinished_pct": _unfinished_pct(d, "web"),
        "bulk_unfinished_pct": _unfinished_pct(d, "bulk"),
    }


def busiest_channels(res, warmup_s: float, top: int = CHANNEL_TOP) -> pd.DataFrame:
    """The `top` relay-to-relay channel ends with the most cells waiting, after the warm-up,
    averaged over samples and seeds (a channel end absent from a sample, closed or not yet
    open, counts as empty then; two channels between the same pair count as one end). Per
    end: KiB/s written, circuits, active circuits (with cells waiting there), queued cells,
    and KiB/s per active circuit, the share of a circuit waiting there. ``share_of_relay``
    is the end's part of what its relay wrote to relays."""
    cols = ["relay", "peer", "kib_per_s", "share_of_relay", "circuits", "active_circuits", "queued_cells", "kib_per_s_per_active_circuit"]
    c = res.channels
    c = c[c["interval_start"] >= warmup_s]
    if c.empty:
        return pd.DataFrame(columns=cols)
    samples = c.groupby("seed")["interval_start"].nunique().sum()
    step = float(np.diff(np.sort(c["interval_start"].unique()))[0]) if c["interval_start"].nunique() > 1 else CHANNEL_STEP_S
    g = c.groupby(["relay", "peer"]).agg(
        written=("bytes_written", "sum"), circuits=("circuits", "sum"), active_circuits=("active_circuits", "sum"), queued_cells=("queued_cells", "sum"),
    )
    t = pd.DataFrame({
        "kib_per_s": g["written"] / 1024 / (samples * step),
        "share_of_relay": g["written"] / g.groupby("relay")["written"].transform("sum"),
        "circuits": g["circuits"] / samples,
        "active_circuits": g["active_circuits"] / samples,
        "queued_cells": g["queued_cells"] / samples,
    })
    t["kib_per_s_per_active_circuit"] = (t["kib_per_s"] / t["active_circuits"]).where(t["active_circuits"] > 0)
    t = t.reset_index().sort_values(["queued_cells", "relay", "peer"], ascending=[False, True, True], kind="mergesort").head(top)
    return t[cols].round(3).reset_index(drop=True)


THROTTLE_STATE_COLUMNS = [
    "load", "algorithm", "guard_samples_throttling_pct", "throttled_connections_per_guard", "at_floor_pct",
    "web_throttled_pct", "bulk_throttled_pct", "web_pct_of_throttled",
]


def throttle_state(res, alg: str, params: dict, warmup_s: float) -> dict:
    """Whom an algorithm throttles, after the warm-up (``throttle_state.csv``). Both tables
    sample the state at the end of each interval, so each share is a time average whatever
    the interval. From the relay table, guards with client connections only:
    ``guard_samples_throttling_pct`` (samples with at least one throttled connection),
    ``throttled_connections_per_guard`` (mean) and, for threshold, ``at_floor_pct`` (samples
    whose rate is the floor F: the floor(T*N)-th loudest connection was slower than F).
    From the per-connection table: ``web_throttled_pct`` and ``bulk_throttled_pct`` (each
    class's connection samples that were throttled) and ``web_pct_of_throttled`` (web
    clients' part of the throttled samples). A share with nothing to count is NaN."""

    def pct(mask) -> float:
        return 100.0 * float(mask.mean()) if len(mask) else math.nan

    r = res.relays
    r = r[(r["interval_start"] >= warmup_s) & (r["client_connections"] > 0)]
    at_floor = math.nan
    if alg == "thresh":
        floor = axis_value_key("floor", params["floor"])
        rated = r["throttle_rate"].dropna()
        at_floor = pct(rated <= floor + 0.5)  # rates are whole bytes/s
    c = res.connections
    c = c[c["interval_start"] >= warmup_s]
    throttled = c["throttle_rate"].notna()
    return {
        "algorithm": alg,
        "guard_samples_throttling_pct": pct(r["throttled_connections"] > 0),
        "throttled_connections_per_guard": float(r["throttled_connections"].mean()) if len(r) else math.nan,
        "at_floor_pct": at_floor,
        "web_throttled_pct": pct(throttled[c["class"] == "web"]),
        "bulk_throttled_pct": pct(throttled[c["class"] == "bulk"]),
        "web_pct_of_throttled": pct(c.loc[throttled, "class"] == "web"),
    }
