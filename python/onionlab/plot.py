"""Figures of experiment results: CDFs of time to first and last byte per client class.

**Owns:** drawing PNGs from result tables (matplotlib, Agg backend, no global pyplot state).
Each line is one client class of one experiment, pooled over its seeds, with a shaded 95%
Dvoretzky-Kiefer-Wolfowitz confidence band (the true CDF lies inside the band everywhere with
probability 95%). **Must not touch:** the statistics' definitions (:mod:`onionlab.stats`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence, Union

import matplotlib

matplotlib.use("Agg", force=False)
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from onionlab import stats  # noqa: E402
from onionlab.results import Results, as_results  # noqa: E402

Source = Union[Results, str, os.PathLike]

METRICS = {
    "ttfb": ("time to first byte (s)", "Time to first byte"),
    "ttlb": ("time to last byte (s)", "Time to last byte"),
}


def labels_for(results: Sequence[Results]) -> list[str]:
    """Distinct labels: experiment names, or directory names where names repeat."""
    names = [r.label for r in results]
    if len(set(names)) == len(names):
        return names
    out = []
    for i, r in enumerate(results):
        base = Path(r.source).name if r.source else names[i]
        out.append(base if base not in out else f"{base} ({i + 1})")
    return out


def _as_list(x: Union[Source, Iterable[Source]]) -> list[Results]:
    if isinstance(x, (Results, str, os.PathLike)):
        return [as_results(x)]
    return [as_results(i) for i in x]


def cdf_figure(results: Sequence[Results], labels: Sequence[str], metric: str) -> Figure:
    """A CDF of `metric` ("ttfb" or "ttlb"): one line per (experiment, class)."""
    xlabel, title = METRICS[metric]
    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    styles = ["-", "--", ":", "-."]
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    classes = sorted({c for r in results for c in r.downloads["class"].dropna().unique()})
    drawn = 0
    positive = True
    for i, (res, label) in enumerate(zip(results, labels)):
        done = stats.completed(res.downloads)
        for j, cls in enumerate(classes):
            x, y = stats.ecdf(done.loc[done["class"] == cls, metric])
            if x.size == 0:
                continue
            positive = positive and bool(x.min() > 0)
            eps = stats.dkw_epsilon(x.size)
            color = colors[j % len(colors)]  # colour: class; line style: experiment
            ls = styles[i % len(styles)]
            name = f"{label}: {cls}" if len(results) > 1 else cls
            ax.step(x, y, where="post", color=color, linestyle=ls, label=f"{name} (n={x.size})")
            ax.fill_between(
                x, (y - eps).clip(0, 1), (y + eps).clip(0, 1), step="post", color=color, alpha=0.15, linewidth=0
            )
            drawn += 1
    if drawn and positive:
        ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cumulative fraction of downloads")
    if len(results) == 1:
        n = len(results[0].summary.get("seeds", [])) or 1
        pooled = f"pooled over {n} seed{'s' if n != 1 else ''}"
    else:
        pooled = "pooled over each experiment's seeds"
    ax.set_title(f"{title} per client class ({pooled}, 95% DKW band)", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(loc="lower right", fontsize="small")
    else:
        ax.text(0.5, 0.5, "no completed downloads", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig


def _out_path(prefix: Union[str, os.PathLike], name: str) -> Path:
    p = str(prefix)
    if p.endswith(("/", os.sep)) or os.path.isdir(p):
        return Path(p) / name
    return Path(p + name) if p.endswith(("-", "_", ".")) else Path(f"{p}-{name}")


def plot(dirs_or_results: Union[Source, Iterable[Source]], out_png_prefix: Union[str, os.PathLike]) -> list[Path]:
    """Writes ``ttfb.png`` and ``ttlb.png`` CDFs for one or more results (directories or
    :class:`Results`). `out_png_prefix` is a directory (existing, or ending in ``/``) or a
    file-name prefix (``out/tiny`` gives ``out/tiny-ttfb.png``). Returns the paths written."""
    results = _as_list(dirs_or_results)
    labels = labels_for(results)
    paths = []
    for metric in METRICS:
        path = _out_path(out_png_prefix, f"{metric}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig = cdf_figure(results, labels, metric)
        fig.savefig(path, format="png", metadata={"Software": None})
        paths.append(path)
    return paths
