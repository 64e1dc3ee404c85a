"""The EWMA reproduction's sample selection and K-S statistic on hand-built inputs (no
simulation)."""

from __future__ import annotations

import pandas as pd

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
