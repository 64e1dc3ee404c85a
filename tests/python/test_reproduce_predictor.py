"""`onionlab reproduce predictor`: the generated toy configs, the fairness index and byte-wise
latency on hand-worked tables, bad input, and a smoke run of the quick version (about 10 s)."""

from __future__ import annotations

import pandas as pd
import pytest

from onionlab import config as config_mod
from onionlab import stats
from onionlab.cli import main
from onionlab.reproduce import PAPERS, predictor

from conftest import needs_core


def test_registered():
    assert PAPERS["predictor"] == "onionlab.reproduce.predictor"


def test_fairness_index_matches_table_1():
    # The paper's F from its own table 1 rates, against its max-min fair 136.7 each
    # (sum 410.1): here against the equal split of the delivered total, which for
    # PredicTor's near-equal rates is within a hair of the paper's.
    assert predictor.fairness(pd.Series([134.2, 134.1, 134.1])) == pytest.approx(1.0, abs=1e-3)
    # Vanilla: one circuit at twice the others' rate -> F = 1 - (2/3 * ... ) by hand:
    # rates 1, 1, 2 (total 4, fair 4/3): |1 - 4/3| * 2 + |2 - 4/3| = 4/3, F = 1 - 1/3.
    assert predictor.fairness(pd.Series([1.0, 1.0, 2.0])) == pytest.approx(2 / 3)


def test_byte_latency_by_hand():
    # Two intervals of 1 s: 10 cells delivered having spent 2 cell-seconds in the overlay,
    # then 30 cells and 4 cell-seconds, with 1 cell-second at the exit: 6/40 = 150 ms.
    c = pd.DataFrame({
        "seed": [1, 1], "client": ["a", "a"], "class": ["x", "x"], "circuit": [0, 0], "created": [0.0, 0.0],
        "interval_start": [0.0, 1.0], "cells_delivered": [10, 30], "transit_cell_s": [2.0, 4.0], "exit_wait_cell_s": [0.0, 1.0],
    })
    b = stats.byte_latency(c)
    assert b["latency_s"].iloc[0] == pytest.approx(0.15)
    assert b["latency_with_exit_s"].iloc[0] == pytest.approx(7 / 40)
    assert b["rate"].iloc[0] == pytest.approx(40 * 498 / 2.0)
    assert b["mean_backlog_cells"].iloc[0] == pytest.approx(3.0)
    # From 1 s only.
    assert stats.byte_latency(c, start=1.0, by=())["latency_s"].iloc[0] == pytest.approx(4 / 30)


def test_byte_latency_names_a_missing_column():
    with pytest.raises(ValueError, match="transit_cell_s"):
        stats.byte_latency(pd.DataFrame({"interval_start": [0.0], "cells_delivered": [1]}))


@needs_core
def test_toy_configs_are_valid(tmp_path):
    (tmp_path / "toy-latency.csv").write_text(predictor.latency_matrix())
    for scenario in (1, 2):
        for v in predictor.VARIANTS:
            p = tmp_path / f"s{scenario}-{v}.toml"
            p.write_text(predictor.config_text(scenario, v, "5 s", 1000, "100 ms"))
            config_mod.check(p)
    with pytest.raises(ValueError, match="variant"):
        predictor.config_text(1, "bbr", "5 s", 1000, "100 ms")


@needs_core
def test_quick_reproduction_runs(tmp_path):
    out = tmp_path / "pt"
    assert main(["reproduce", "predictor", "--quick", "--jobs", "2", "-o", str(out)]) == 0
    for f in ["table1.csv", "findings.csv", "figure4.png", "figure5.png", "README.md"]:
        assert (out / f).stat().st_size > 0, f
    t = pd.read_csv(out / "table1.csv")
    tot = t[t["circuit"] == "Total"].set_index("variant")
    # No byte arrives before two 40 ms hops.
    assert (t["latency_ms"] >= predictor.MIN_LATENCY_MS).all(), t
    # The paper's findings that reproduce (docs/reproductions/predictor.md).
    assert tot.loc["PredicTor", "latency_ms"] < 0.5 * tot.loc["Vanilla", "latency_ms"]
    assert tot.loc["PredicTor", "F"] > 0.95 and tot.loc["Vanilla", "F"] < 0.8 and tot.loc["PCTCP", "F"] > 0.9
    f = pd.read_csv(out / "findings.csv")
    assert len(f) == 6


def test_bad_options_name_the_option(tmp_path):
    assert main(["reproduce", "predictor", "--circ-window", "0", "-o", str(tmp_path / "x")]) != 0
    assert main(["reproduce", "predictor", "--seeds", "0", "-o", str(tmp_path / "y")]) != 0
