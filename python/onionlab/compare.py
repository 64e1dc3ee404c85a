"""Comparing experiments: side-by-side CDFs and a summary table for several result dirs.

**Owns:** assembling the comparison of several results (labels, the table of data shares,
medians and p90s per class, the overlaid CDF figures). **Must not touch:** the statistics'
definitions (:mod:`onionlab.stats`) or the drawing style (:mod:`onionlab.plot`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional, Union

import pandas as pd

from onionlab import stats
from onionlab.plot import labels_for, plot
from onionlab.results import Results, as_results

Source = Union[Results, str, os.PathLike]


def summary_table(results: Iterable[Source]) -> pd.DataFrame:
    """One row per experiment: "Data (GiB)", each class's share of bytes ("Web (%)", ...),
    and per class downloads, errors, unfinished downloads, ttfb/ttlb median and p90 (s), median goodput (KiB/s)."""
    rs = [as_results(r) for r in results]
    labels = labels_for(rs)
    return stats.class_shares_table({label: r.summary for label, r in zip(labels, rs)})


def format_table(df: pd.DataFrame) -> str:
    """The table as text, transposed when it is wide (one column per experiment)."""
    cells = stats.display_cells(df)
    t = cells.T if len(df.columns) > 6 else cells
    return t.to_string()


def compare(dirs: Iterable[Source], out: Optional[Union[str, os.PathLike]] = None, echo: bool = False) -> pd.DataFrame:
    """Compares several results (directories or :class:`Results`). Returns the summary table;
    with `out`, also writes ``ttfb.png``/``ttlb.png`` (one line per experiment per class) and
    ``compare.csv`` there; with `echo`, prints the table."""
    rs = [as_results(d) for d in dirs]
    if not rs:
        raise ValueError("compare: give at least one results directory")
    table = summary_table(rs)
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        plot(rs, str(o) + os.sep)
        table.to_csv(o / "compare.csv", float_format="%.6g")
    if echo:
        print(format_table(table))
    return table
