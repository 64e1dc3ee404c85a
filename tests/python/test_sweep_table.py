"""``sweep.csv`` and the comparison table on hand-built results (no simulation): every column
is checked against a number worked out by hand, so a column fed from the wrong figure, in
the wrong unit or over the wrong downloads fails here."""

from __future__ import annotations

import pytest

from onionlab import stats
from onionlab import sweep as sweep_mod
from onionlab.results import Results


def _run(seed: int, rows: list[tuple]) -> dict:
    """A run of class ``web`` downloads of 1000 B: rows of (ttfb, ttlb, goodput, error)."""
    cols = {k: [] for k in ("seed", "client", "class", "size", "received", "start", "ttfb", "ttlb", "goodput", "error")}
    for i, (ttfb, ttlb, good, err) in enumerate(rows):
        for k, v in zip(cols, (seed, f"c{i}", "web", 1000, 1000 if err is None else 500, 10.0 + i, ttfb, ttlb, good, err)):
            cols[k].append(v)
    return {"downloads": cols, "relays": {}, "summary": {"experiment": "hand", "seed": seed}}


@pytest.fixture(scope="module")
def hand():
    """Two seeds of one class. Seed 1: completed (ttfb, ttlb, goodput) (0.1, 1, 1024),
    (0.2, 2, 2048), (0.3, 6, 3072), one failed download that got its first byte at 8 s and
    one unfinished at the end that got it at 9 s. Seed 2: completed (0.3, 3, 4096),
    (0.4, 4, 5120), (0.5, 5, 6144), and one unfinished that got its first byte at 7 s.

    Pooled over the six completed: ttlb sorted 1..6, median 3.5, p90 (linear) 5.5; ttfb
    sorted 0.1 0.2 0.3 0.3 0.4 0.5, median 0.3; goodput median (3072 + 4096) / 2 = 3584 B/s
    = 3.5 KiB/s. Per seed over completed downloads only: ttlb medians 2 and 4 (mean 3, sample
    sd sqrt 2, half-width t(1) sqrt 2 / sqrt 2 = 12.706); ttfb medians 0.2 and 0.4 (mean
    0.3; with the failed and unfinished downloads' first bytes they would be 0.3 and 0.45)."""
    r1 = _run(1, [(0.1, 1.0, 1024.0, None), (0.2, 2.0, 2048.0, None), (0.3, 6.0, 3072.0, None),
                  (8.0, None, None, "timeout"), (9.0, None, None, stats.UNFINISHED)])
    r2 = _run(2, [(0.3, 3.0, 4096.0, None), (0.4, 4.0, 5120.0, None), (0.5, 5.0, 6144.0, None), (7.0, None, None, stats.UNFINISHED)])
    res = Results.from_runs([r1, r2], config="")
    info = {"points": [{"name": "00-x=1", "label": "x=1", "params": {"a.x": "1"}}]}
    return res, sweep_mod.summary_table(info, {"00-x=1": res})


def test_sweep_csv_columns_by_hand(hand):
    _, t = hand
    assert len(t) == 1
    row = t.iloc[0]
    assert (row["point"], row["a.x"], row["class"]) == ("00-x=1", "1", "web")
    assert (row["downloads"], row["errors"], row["unfinished"]) == (9, 1, 2)
    assert row["ttfb_median"] == pytest.approx(0.3)
    assert row["ttlb_median"] == pytest.approx(3.5)
    assert row["ttlb_p90"] == pytest.approx(5.5)
    assert row["ttfb_p90"] == pytest.approx(0.45)  # sorted ttfb at index 4.5: (0.4 + 0.5) / 2
    assert row["goodput_median_kib_s"] == pytest.approx(3.5)
    assert row["data_share_pct"] == pytest.approx(100.0)


def test_sweep_csv_seed_spread_is_over_completed_downloads_per_seed(hand):
    _, t = hand
    row = t.iloc[0]
    assert row["seeds"] == 2
    assert row["ttlb_median_seed_mean"] == pytest.approx(3.0)
    assert row["ttlb_median_ci95"] == pytest.approx(12.706)
    # Failed and unfinished downloads' first bytes are not a completed download's.
    assert row["ttfb_median_seed_mean"] == pytest.approx(0.3)
    assert row["ttfb_median_ci95"] == pytest.approx(12.706 * 0.1)  # medians 0.2, 0.4: sd 0.1 sqrt 2


def test_seed_count_is_the_most_seeds_of_any_metric():
    """A seed whose completed downloads all lack a ttfb still counts for ttlb: ``seeds`` is
    the larger count (2), not the last metric's."""
    r1 = _run(1, [(0.1, 1.0, 1.0, None)])
    r2 = _run(2, [(None, 3.0, 1.0, None)])
    sp = stats.seed_spread(Results.from_runs([r1, r2], config="").downloads, metrics=("ttlb", "ttfb")).iloc[0]
    assert sp["seeds"] == 2 and sp["ttlb_median_seed_mean"] == pytest.approx(2.0)


def test_compare_table_columns_by_hand(hand):
    res, _ = hand
    row = stats.class_shares_table({"a": res.summary}).iloc[0]
    assert row["Web (%)"] == pytest.approx(100.0)
    assert row["Data (GiB)"] == pytest.approx(6000 / 2**30)
    assert row["web goodput median (KiB/s)"] == pytest.approx(3.5)
    assert row["web ttlb p90 (s)"] == pytest.approx(5.5) and row["web ttlb median (s)"] == pytest.approx(3.5)
    assert row["web ttfb median (s)"] == pytest.approx(0.3) and row["web ttfb p90 (s)"] == pytest.approx(0.45)
    assert (row["web downloads"], row["web errors"], row["web unfinished"]) == (9, 1, 2)
