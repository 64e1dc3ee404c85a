"""Tortoise's metric and anonymity figures on hand-built downloads (no simulation): the mean
client bandwidth (each download's size over its time, averaged per client, then over
clients), who counts as a relay operator, and what a throughput observer learns."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from onionlab.reproduce import tortoise


@pytest.fixture(scope="module")
def per():
    """Seed 1; sizes in bytes, times in seconds, KBps = 1000 B/s.

    w0 (web): 100 kB in 1 s, 200 kB in 1 s, 300 kB in 0.5 s = 100, 200, 600 KBps, mean 300
    (median 200); a failed download of 1 MB in 1 s does not count. w1 (web, runs relay
    ``w1-relay``): 950 kB in 1 s and 100 kB in 0.1 s = 950 and 1000, mean 975; sustained
    (downloads of at least 900 kB) 950. w2 (web): 100 kB in 2 s = 50. b0 (bulk): 2.4 MB in
    20 s = 120, sustained 120."""
    rows = [("w0", "web-res-fast", 100_000, 1.0, None), ("w0", "web-res-fast", 200_000, 1.0, None),
            ("w0", "web-res-fast", 300_000, 0.5, None), ("w0", "web-res-fast", 1_000_000, 1.0, "timeout"),
            ("w1", "web-inst-mid", 950_000, 1.0, None), ("w1", "web-inst-mid", 100_000, 0.1, None),
            ("w2", "web-res-slow", 100_000, 2.0, None), ("b0", "bulk-res-mid", 2_400_000, 20.0, None)]
    d = pd.DataFrame(rows, columns=["client", "class", "size", "ttlb", "error"]).assign(seed=1)
    relays = pd.DataFrame({"relay": ["relay1", "w1-relay", "relay2"]})
    return tortoise.client_means(SimpleNamespace(downloads=d, relays=relays)).set_index("client")


def test_client_means_by_hand(per):
    assert per["kbps"].to_dict() == pytest.approx({"b0": 120.0, "w0": 300.0, "w1": 975.0, "w2": 50.0})
    assert per["sustained_kbps"]["w1"] == pytest.approx(950.0) and per["sustained_kbps"]["b0"] == pytest.approx(120.0)
    assert math.isnan(per["sustained_kbps"]["w0"])
    assert per["relay_operator"].to_dict() == {"b0": False, "w0": False, "w1": True, "w2": False}
    assert per["kind"].to_dict() == {"b0": "bulk", "w0": "web", "w1": "web", "w2": "web"}


def test_summary_by_hand(per):
    """all (300 + 975 + 50 + 120) / 4 = 361.25; web (300 + 975 + 50) / 3 = 441.67; bulk 120;
    operators 975; the others (300 + 50 + 120) / 3 = 156.67; no operator runs bulk."""
    s = tortoise.summarize(per.reset_index())
    assert s["all"] == pytest.approx(361.25) and s["web"] == pytest.approx(1325 / 3) and s["bulk"] == pytest.approx(120.0)
    assert s["operators"] == pytest.approx(975.0) and s["non_operators"] == pytest.approx(470 / 3)
    assert math.isnan(s["operators_bulk"])


def test_anonymity_by_hand(per):
    """At a 100 KBps limit the observer flags sustained rates over 150: w1 alone (b0's 120
    is over the limit, not 1.5 times it). One of three web clients runs a relay, no bulk
    client does."""
    a = tortoise.anonymity(per.reset_index(), 100)
    assert a["operator_share_web"] == pytest.approx(1 / 3) and a["operator_share_bulk"] == 0
    assert (a["fast_clients"], a["fast_clients_relay_operators"], a["anonymity_set_all"]) == (1, 1, 4)
    assert a["fast_share_bulk"] == 0.0
    # At 70 KBps (threshold 105) b0 is flagged too: one of the two is bulk.
    a = tortoise.anonymity(per.reset_index(), 70)
    assert a["fast_clients"] == 2 and a["fast_share_bulk"] == 0.5


def test_half_the_relays_enforcing_is_eight_of_fifteen():
    """The first ceil(0.5 * 15) = 8 relays of the shuffled order enforce; 7 opt out."""
    text = tortoise.relays_text(1.0, 0.5, 'tortoise = { rate = "100 KBps" }')
    assert text.count("[[relays]]") == 15 and text.count('tortoise = "off"') == 7
    assert tortoise.relays_text(1.0, 1.0, "x").count('tortoise = "off"') == 0


def test_fast_senders_are_counted_per_run_not_per_seed_row():
    """Two seeds of the same three clients (w0, w1 running a relay, b0). At a 100 KBps limit
    (threshold 150) w1 sustains 950 KBps in both runs, b0 200 in seed 1 only: the observer
    of one run sees 2 fast senders in seed 1 and 1 in seed 2, 1.5 per run, of which one is
    the relay operator (counting seed rows as clients gave 3 fast clients and 2 operators out
    of one operator)."""
    per = pd.DataFrame({
        "seed": [1, 1, 1, 2, 2, 2], "client": ["w0", "w1", "b0"] * 2, "class": ["web", "web", "bulk"] * 2,
        "kind": ["web", "web", "bulk"] * 2, "relay_operator": [False, True, False] * 2, "kbps": 100.0,
        "sustained_kbps": [math.nan, 950.0, 200.0, math.nan, 950.0, 120.0],
    })
    a = tortoise.anonymity(per, 100)
    assert a["operator_share_web"] == 0.5 and a["operator_share_bulk"] == 0
    assert a["fast_clients"] == 1.5 and a["anonymity_set_fast"] == 1.5
    assert a["fast_clients_relay_operators"] == 1.0
    assert a["fast_share_bulk"] == pytest.approx(1 / 3) and a["anonymity_set_all"] == 3


def test_throughput_table_changes_by_hand():
    """E0 all/web/bulk 100/80/400; E5 90/72/300 (-10 %, -10 %, -25 %); E7 120 all; E9a 95
    (5 % below E0), E9b 81 (10 % below its before, E5, not 19 % below E0), E9c 108 (10 %
    below E7). Operators 150 against the others' 100 in E5: +50 %."""
    def row(n, a, w=math.nan, b=math.nan, ops=math.nan, non=math.nan):
        return {"experiment": n, "all": a, "web": w, "bulk": b, "operators": ops, "non_operators": non}

    t = tortoise.throughput_table([row("E0", 100, 80, 400), row("E5", 90, 72, 300, 150, 100), row("E7", 120),
                                   row("E9a", 95), row("E9b", 81), row("E9c", 108)]).set_index("experiment")
    assert t.loc["E5", ["all_change_pct", "web_change_pct", "bulk_change_pct"]].tolist() == [-10.0, -10.0, -25.0]
    assert t.loc["E0", "all_change_pct"] == 0 and t.loc["E7", "all_change_pct"] == 20.0
    assert t.loc["E5", "operator_gain_pct"] == 50.0
    assert t.loc[["E9a", "E9b", "E9c"], "drop_vs_before_pct"].tolist() == [5.0, 10.0, 10.0]
    assert math.isnan(t.loc["E5", "drop_vs_before_pct"])
    assert t.loc["E5", "paper_change_pct"] == '{"all": 3.1}'


def test_an_operators_gain_against_the_same_clients_without_relays():
    """Spec 4.5's second baseline: operators' mean against the same clients (same seed and
    name) in the run without client-relays. Operators a (seed 1) and b (seed 2) average
    150 KBps; without relays the same clients averaged 100: +50 %. A plain client and an
    operator starved in one run stay out."""
    import numpy as np

    from onionlab.reproduce.tortoise import operator_gain_vs_same_clients

    per = pd.DataFrame({"seed": [1, 2, 1, 1], "client": ["a", "b", "c", "d"], "kbps": [120.0, 180.0, 50.0, 300.0],
                        "relay_operator": [True, True, False, True]})
    without = pd.DataFrame({"seed": [1, 2, 1, 1, 2], "client": ["a", "b", "c", "d", "a"], "kbps": [90.0, 110.0, 40.0, np.nan, 999.0]})
    assert operator_gain_vs_same_clients(per, without) == 50.0
    assert np.isnan(operator_gain_vs_same_clients(per.assign(relay_operator=False), without))
