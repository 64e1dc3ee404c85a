"""A self-contained HTML report of one or more results directories.

**Owns:** the HTML page: the comparison table, per-class statistics, per-seed run figures,
relay load, the CDF figures embedded as base64 PNGs and each experiment's resolved config.
The page needs no other files. **Must not touch:** statistics or figures themselves (they come
from :mod:`onionlab.stats`, :mod:`onionlab.compare` and :mod:`onionlab.plot`).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import Iterable, Union

import pandas as pd

from onionlab import config, stats
from onionlab.compare import summary_table
from onionlab.plot import METRICS, cdf_figure, labels_for
from onionlab.results import Results, as_results

Source = Union[Results, str, os.PathLike]

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
img { max-width: 100%; }
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(float_format=lambda v: f"{v:.3f}", na_rep="-", border=0)


def class_table(res: Results) -> pd.DataFrame:
    """Per-class pooled statistics of one experiment."""
    rows = {}
    for cls, c in res.summary.get("classes", {}).items():
        row = {"downloads": c["downloads"], "errors": c["errors"], "unfinished": c.get("unfinished"), "Data (GiB)": c["data_gib"], "share (%)": c["data_share_pct"]}
        for key, short in (("time_to_first_byte_recv", "ttfb"), ("time_to_last_byte_recv", "ttlb")):
            for q in ("median", "mean", "p10", "p25", "p75", "p90", "p99"):
                row[f"{short} {q} (s)"] = c[key].get(q)
        g = c.get("goodput", {}).get("median")
        row["goodput median (KiB/s)"] = g / 1024 if g is not None else None
        rows[cls] = row
    return pd.DataFrame(rows).T


def runs_table(res: Results) -> pd.DataFrame:
    """One row per seed: simulated seconds, events, downloads, wall seconds."""
    rows = []
    for r in res.summary.get("runs", []):
        seed = r.get("seed")
        rows.append(
            {
                "seed": seed,
                "sim seconds": r.get("sim_seconds"),
                "events": r.get("events"),
                "downloads": sum(c.get("downloads", 0) for c in r.get("classes", {}).values()),
                "errors": sum(c.get("errors", 0) for c in r.get("classes", {}).values()),
                "unfinished": sum(c.get("unfinished", 0) for c in r.get("classes", {}).values()),
                "wall seconds": res.timing.get(str(seed)),
            }
        )
    return pd.DataFrame(rows).set_index("seed") if rows else pd.DataFrame()


def _metrics_interval_s(res: Results) -> float | None:
    """The run's ``experiment.metrics_interval`` in seconds, from its resolved config."""
    from onionlab._core import parse_duration

    try:
        return float(parse_duration(config.parse(res.config)["experiment"]["metrics_interval"]))
    except (KeyError, TypeError, ValueError):  # a TOMLDecodeError is a ValueError
        return None


def relay_table(res: Results) -> pd.DataFrame:
    """Per relay, averaged over the intervals after the warm-up (those that start at or
    after it, as :func:`onionlab.stats.wait_split` reads them) and over seeds: bytes written
    per second, queued cells, the fraction of time its token buckets were empty, and the
    mean time a cell waited in its circuit queues, outbufs and on the wire."""
    warmup = float(res.summary.get("warmup_seconds") or 0.0)
    r = res.relays[res.relays["interval_start"] >= warmup]
    if r.empty:
        return pd.DataFrame()
    step = _metrics_interval_s(res)
    if step is None:
        # A config without the key (hand-made Results): the intervals' own spacing.
        iv = r.sort_values(["seed", "relay", "interval_start"]).groupby(["seed", "relay"])["interval_start"].diff()
        step = float(iv.dropna().median()) if iv.notna().any() else 1.0
    g = r.groupby("relay", sort=False)
    out = pd.DataFrame(
        {
            "written (KiB/s)": g["bytes_written"].mean() / step / 1024,
            "read (KiB/s)": g["bytes_read"].mean() / step / 1024,
            "queued cells (mean)": g["queued_cells"].mean(),
            "queued cells (max)": g["queued_cells"].max(),
            "bucket empty (%)": 100 * g["bucket_empty_s"].mean() / step,
        }
    )
    # Where its cells waited, mean per cell (results from before the wait columns lack them).
    if all(c in r.columns for c in ("cells_queued", *stats.WAIT_PLACES.values())) and r["cells_queued"].notna().all():
        w = stats.wait_split(r).set_index("relay")
        for place in stats.WAIT_PLACES:
            out[f"{place} wait (ms/cell)"] = w[f"{place}_ms"]
        for part in stats.WIRE_PARTS:
            if f"{part}_ms" in w:
                out[f"wire: {part} (ms/cell)"] = w[f"{part}_ms"]
    return out


def report(dirs: Iterable[Source], out_html: Union[str, os.PathLike], title: str = "onionlab report") -> Path:
    """Writes one self-contained HTML page about the given results; returns its path."""
    rs = [as_results(d) for d in dirs]
    if not rs:
        raise ValueError("report: give at least one results directory")
    labels = labels_for(rs)
    parts = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p>Experiments: " + ", ".join(html.escape(l) for l in labels) + "</p>",
        "<h2>Summary</h2>",
        _html_table(stats.display_cells(summary_table(rs)).T if len(rs) > 0 else pd.DataFrame()),
        "<h2>Download times</h2>",
        "<p>Empirical CDFs per client class, pooled over seeds; shaded: 95% DKW confidence band.</p>",
    ]
    for metric, (_, name) in METRICS.items():
        fig = cdf_figure(rs, labels, metric)
        parts.append(f"<h3>{html.escape(name)}</h3><img alt='{metric} CDF' src=\"data:image/png;base64,{_png(fig)}\">")
    for res, label in zip(rs, labels):
        parts.append(f"<h2>{html.escape(label)}</h2>")
        if res.source:
            parts.append(f"<p>Results directory: <code>{html.escape(str(res.source))}</code></p>")
        parts.append("<h3>Per class</h3>" + _html_table(class_table(res)))
        parts.append("<h3>Runs</h3>" + _html_table(runs_table(res)))
        rt = relay_table(res)
        if not rt.empty:
            parts.append("<h3>Relays</h3>" + _html_table(rt))
        parts.append("<details><summary>Resolved config</summary><pre>" + html.escape(res.config) + "</pre></details>")
    parts.append("</body></html>\n")
    path = Path(out_html)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
