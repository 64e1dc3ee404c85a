"""What a results directory gives back: timings, configs and user-edited integer columns
with missing values (hand-built, no simulation)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from onionlab.results import Results, load

from conftest import fake_run


def test_load_gives_back_the_wall_seconds_per_seed(tmp_path):
    """``timing.json`` nests the seconds under ``wall_seconds``; ``Results.timing`` is the
    seed -> seconds map itself (fake runs: 0.123 s per unit of seed)."""
    Results.from_runs([fake_run(1), fake_run(2)], "").write(tmp_path / "r")
    assert load(tmp_path / "r").timing == {"1": 0.123, "2": 0.246}


def test_config_is_written_with_a_final_newline(tmp_path):
    Results.from_runs([fake_run(1)], "[experiment]").write(tmp_path / "r")
    assert (tmp_path / "r" / "config.toml").read_text() == "[experiment]\n"


def test_an_integer_column_with_missing_values_writes_them_as_nulls(tmp_path):
    """A pandas edit that leaves NaN in an integer column (here ``size``) makes it float;
    written, the NaN is a null and the other values integers again."""
    r = Results.from_runs([fake_run(1)], "")
    d = r.downloads.copy()
    d["size"] = d["size"].astype(float)
    d.loc[0, "size"] = np.nan
    r.downloads = d
    r.write(tmp_path / "r")
    back = load(tmp_path / "r").downloads["size"]
    assert pd.isna(back.iloc[0]) and back.iloc[1:].tolist() == d["size"].iloc[1:].astype(int).tolist()
