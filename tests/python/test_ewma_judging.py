"""The EWMA reproduction's sample selection and K-S statistic on hand-built inputs (no
simulation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from onionlab.reproduce import ewma


def _downloads() -> pd.DataFrame:
    """Seed 1. Client a completed three web downloads, listed out of order: started at 3, 1
    and 2 s, taking 30, 10 and 20 s. Client b completed one (started 1.5 s, 11 s) after a
    failed one (started 0.5 s, 99 s to its error)."""
    return pd.DataFrame({
        "seed": 1, "client": ["a", "a", "a", "b", "b"], "class": "web",
        "start": [3.0, 1.0, 2.0, 1.5, 0.5], "ttlb": [30.0, 10.0, 20.0, 11.0, 99.0],
        "error": [None, None, None, None, "timeout"],
    })


def test_first_takes_each_clients_earliest_completed_downloads_evenly():
    """Three wanted of two clients: ceil(3 / 2) = 2 each at most, by rank then client: a's
    first (10), b's first (11), a's second (20); the failed download is not b's first. Four
    wanted: still two each at most, and b has one: 10, 11, 20 (not a's third, 30)."""
    assert ewma._first(_downloads(), "web", 3)["ttlb"].tolist() == [10.0, 11.0, 20.0]
    assert ewma._first(_downloads(), "web", 4)["ttlb"].tolist() == [10.0, 11.0, 20.0]
    assert ewma._first(_downloads(), "bulk", 4).empty


def test_ks_statistic_with_a_tie():
    """a = {1, 2}, b = {2, 3}: both ECDFs right-continuous, at x = 1 F_a = 0.5, F_b = 0; at
    x = 2 F_a = 1, F_b = 0.5; at 3 both 1: D = 0.5 (a left-continuous F_b gives 1)."""
    assert ewma.ks_2samp([1, 2], [2, 3])[0] == 0.5
    assert ewma.ks_2samp([2, 3], [1, 2])[0] == 0.5


def test_ks_p_value_of_two_tiny_samples():
    """a = {1, 2}, b = {3, 4}: D = 1, ne = 2 * 2 / 4 = 1, lambda = (1 + 0.12 + 0.11) * 1 =
    1.23; p = 2 (exp(-2 * 1.23^2) - exp(-8 * 1.23^2) + ...) = 2 (0.048519 - 0.0000055) =
    0.09703."""
    d, p = ewma.ks_2samp([1, 2], [3, 4])
    assert d == 1.0 and abs(p - 0.09703) < 2e-4


def test_line_results_by_hand():
    """Web times: round robin 10, 12, 20 (p25 11, median 12, p75 16), EWMA 6, 9, 30 (7.5, 9,
    19.5): EWMA's gain 1 - 9/12 = 25 %; the paper's 1 - 9.04/11.49. Bulk: round robin 100,
    200, 300 (mean 200, sample sd 100); EWMA 400, 500, 600: D = 1, ne = 9/6 = 1.5, lambda =
    sqrt(1.5) + 0.12 + 0.11/sqrt(1.5) = 1.43456, p = 2 exp(-2 lambda^2) = 0.03262:
    significant. With the same bulk times for both, D = 0, p = 1: not significant."""
    web = {"round-robin": np.array([10.0, 12.0, 20.0]), "ewma": np.array([6.0, 9.0, 30.0])}
    bulk = {"round-robin": np.array([100.0, 200.0, 300.0]), "ewma": np.array([400.0, 500.0, 600.0])}
    t, line = ewma.line_results(web, bulk)
    rr, ew = t.iloc[0], t.iloc[1]
    assert rr["scheduler"] == "round-robin" and ew["scheduler"] == "ewma (H = 66 s)"
    assert [rr["web_p25_s"], rr["web_median_s"], rr["web_p75_s"]] == [11.0, 12.0, 16.0]
    assert [ew["web_p25_s"], ew["web_median_s"], ew["web_p75_s"]] == [7.5, 9.0, 19.5]
    assert (rr["bulk_mean_s"], rr["bulk_std_s"], ew["bulk_mean_s"]) == (200.0, 100.0, 500.0)
    assert line["web_median_s"] == {"round-robin": 12.0, "ewma": 9.0}
    assert line["web_relative_gain"] == pytest.approx(0.25)
    assert line["paper_web_relative_gain"] == pytest.approx(1 - 9.04 / 11.49)
    ks = line["bulk_ks"]
    assert ks["D"] == 1.0 and abs(ks["p"] - 0.03262) < 2e-4 and ks["significant_at_0.05"] is True
    _, same = ewma.line_results(web, {"round-robin": bulk["round-robin"], "ewma": bulk["round-robin"]})
    assert same["bulk_ks"] == {"D": 0.0, "p": 1.0, "significant_at_0.05": False}
