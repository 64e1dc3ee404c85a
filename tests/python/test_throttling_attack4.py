"""Attack 4 (opening connections to confirm a guard): the attacker's steps, its scores and
their AUC, against hand-worked cases; its verdicts; its option's errors."""

import math

import numpy as np
import pandas as pd
import pytest

from onionlab.cli import main
from onionlab.config import tomllib
from onionlab.reproduce.throttling.attack4 import (
    PACED_CLASS, TESTABLE_CLASS, attacker_clients, auc, auc_se, busiest_guards, circuit_scores, helpers_for, pace_rate, paced_targets, step_sizes, step_times, summarise,
)
from onionlab.reproduce.throttling.findings import findings

from test_throttling_findings import A3, PAPER_ANON, PAPER_ORDER, anonymity, numbers, verdict


def test_each_step_multiplies_the_guards_connections():
    # 100 connections, doubled three times: 100 + 100 = 200, + 200 = 400, + 400 = 800.
    assert step_sizes(100, 2.0) == [100, 200, 400]
    assert step_sizes(10, 1.5) == [5, 8, 11]  # 15, 22.5 -> 23 (rounded), 33.75 -> 34
    # A factor too small to add a whole connection still adds one per step.
    assert step_sizes(3, 1.01) == [1, 1, 1]


def test_steps_are_even_inside_the_measured_part_and_windows_do_not_overlap():
    times, w = step_times(1200.0, 240.0)  # the reproduction's 20 minutes with 4 of warm-up
    assert times == [480.0, 720.0, 960.0] and w == 120.0
    # The first window before starts after the warm-up; the last settled window ends with the run.
    assert times[0] - w >= 240.0 and times[-1] + 2 * w <= 1200.0
    # --quick's 3 minutes with 1 of warm-up: steps and windows in whole 10 s samples.
    assert step_times(180.0, 60.0) == ([90.0, 120.0, 150.0], 10.0)
    assert step_times(200.0, 60.0) == ([100.0, 130.0, 170.0], 10.0)  # 95, 130, 165 s, to the nearest sample


def test_attacker_groups_join_at_each_step_through_the_attacked_guard():
    text = attacker_clients("G", "M", "E", [480.0, 720.0], [5, 10])
    assert text.count("[[clients]]") == 2
    assert 'name = "attack4-2"' in text and "count = 10" in text and 'start = "720 s"' in text
    assert text.count('path = ["G", "M", "E"]') == 2


def test_the_pace_lies_between_the_fair_share_before_and_after_the_first_step():
    # A 1 MiB/s guard with 64 client connections: fair share 16 KiB/s, 8 KiB/s once
    # doubled; the pace is their geometric middle, 16 / sqrt(2) = 11.31 KiB/s.
    r = pace_rate(1 << 20, 64, 2.0)
    assert r == 11585  # floor(1048576 / (64 * 1.41421...))
    assert (1 << 20) / 128 < r < (1 << 20) / 64
    # Factor 4: half the fair share (the middle of B/N0 and B/(4 N0)).
    assert pace_rate(1 << 20, 64, 4.0) == 8192
    assert pace_rate(10, 1000, 2.0) == 1  # never zero


def test_paced_targets_are_one_endless_download_each_at_the_pace():
    text = paced_targets(11585, count=7).replace("$LINK_UP", "10 Mbit")
    cfg = tomllib.loads(text)
    (group,) = cfg["clients"]
    assert group["name"] == PACED_CLASS and group["count"] == 7 and group["link_down"] == "11585 B/s"
    assert "path" not in group  # the targets choose their guards as every client does
    assert cfg["workloads"][PACED_CLASS] == {"type": "bulk", "size": "16 GiB"}


def test_auc_is_the_chance_a_true_guard_slowed_more_than_a_decoy():
    assert auc(np.array([-1.0, -2.0]), np.array([0.0, 0.5])) == 1.0
    assert auc(np.array([1.0]), np.array([0.0, -1.0])) == 0.0
    # Against 1, 3, 5: above one, tied with one (half), below one: (0 + 0.5 + 1) / 3.
    assert auc(np.array([3.0]), np.array([1.0, 3.0, 5.0])) == pytest.approx(0.5)
    assert math.isnan(auc(np.array([]), np.array([1.0])))


def _connections(rows):
    return pd.DataFrame(rows, columns=["seed", "relay", "client", "class", "interval_start", "bytes_written"])


class _Run:
    def __init__(self, connections=None, circuits=None):
        self.connections = connections
        self.circuits = circuits


def test_scores_compare_each_steps_window_after_with_the_one_before():
    # Step k compares [t_k - w, t_k) with [t_k + w, t_k + 2 w), once the step has settled.
    times, w = [100.0, 200.0], 50.0
    rows = []
    for t in range(40, 310, 10):
        # Through X: 100 cells per sample, halved at each step. Through Y: steady. A web
        # circuit silent before the first step and after the second: no step with both
        # windows. The attacker's own circuits are left out.
        level = 100 if t < 100 else 50 if t < 200 else 25
        rows.append((1, "bulk0", "bulk", 3, 0.0, "X,m,e", float(t), level))
        rows.append((1, "bulk1", "bulk", 4, 0.0, "Y,m,e", float(t), 80))
        rows.append((1, "web0", "web", 5, 0.0, "X,m,e", float(t), 30 if 100 <= t < 150 else 0))
        rows.append((1, "a1", "attack4-1", 6, 0.0, "X,m,e", float(t), 1))
        # Slowed only once the step has settled (a throttle holds a connection back after its
        # burst drains): seen by the window from t_1 + w, not by one right after t_1.
        rows.append((1, "bulk3", "bulk", 9, 0.0, "X,m,e", float(t), 100 if t < 150 else 50))
        # A paced target is scored like any client (its class is not an attacker step's).
        rows.append((1, "p0", PACED_CLASS, 8, 0.0, "X,m,e", float(t), 40 if t < 100 else 4))
        # Opened at 70 s, inside the first step's window before: only the second step counts.
        if t >= 70:
            rows.append((1, "bulk2", "bulk", 7, 70.0, "X,m,e", float(t), 10 if t < 200 else 5))
    circuits = pd.DataFrame(rows, columns=["seed", "client", "class", "circuit", "created", "path", "interval_start", "cells_delivered"])
    s = circuit_scores(_Run(circuits=circuits), times, w).set_index("client")
    assert set(s.index) == {"bulk0", "bulk1", "bulk2", "bulk3", "p0"}
    assert s.at["bulk3", "score"] == pytest.approx(math.log(251 / 501) / 2)
    assert s.at["p0", "score"] == pytest.approx(math.log(21 / 201) / 2)  # 5 x 40 before, 5 x 4 after, then level
    # Cells a second before the first step: 5 samples of 40 cells over the 50 s window.
    assert s.at["p0", "pre_cells_per_s"] == pytest.approx(4.0) and s.at["bulk0", "pre_cells_per_s"] == pytest.approx(10.0)
    assert math.isnan(s.at["bulk2", "pre_cells_per_s"])  # opened inside that window
    assert s.at["bulk2", "steps"] == 1 and s.at["bulk2", "score"] == pytest.approx(math.log(26 / 51))
    assert s.at["bulk0", "relay"] == "X" and s.at["bulk1", "relay"] == "Y"
    assert s.at["bulk0", "score"] == pytest.approx(math.log(251 / 501) / 2 + math.log(126 / 251) / 2)
    assert s.at["bulk0", "steps"] == 2
    assert s.at["bulk1", "score"] == pytest.approx(0.0)
    assert circuit_scores(_Run(circuits=circuits.iloc[:0]), times, w).empty


def test_summary_counts_the_attacked_guards_connections_as_positives():
    scores = pd.DataFrame({
        "algorithm": ["split"] * 4, "class": ["bulk", "bulk", "bulk", "web"], "relay": ["X", "X", "Y", "Y"],
        "attacked": ["X"] * 4, "score": [math.log(0.5), math.log(0.9), 0.0, math.log(0.7)],
    })
    t = summarise(scores).set_index(["algorithm", "class"])
    b = t.loc[("split", "bulk")]
    assert (b["positives"], b["negatives"]) == (2, 1)
    assert b["auc"] == 1.0 and b["true_positive_rate"] == 0.5 and b["false_positive_rate"] == 0.0  # 0.9 is not a 20 % drop
    a = t.loc[("split", "all")]
    assert (a["positives"], a["negatives"]) == (2, 2) and a["auc"] == pytest.approx(0.75)
    assert a["positive_ratio"] == pytest.approx(math.sqrt(0.45))
    assert math.isnan(t.loc[("vanilla", "all"), "auc"])  # no rows: nothing measured


def test_paced_targets_that_carried_their_pace_are_summed_up_as_testable():
    # Pace 10 cells/s: p0 carried 9.5 (testable), p1 5 (held back elsewhere), p2 unknown.
    scores = pd.DataFrame({
        "algorithm": ["flag"] * 5, "class": [PACED_CLASS] * 3 + ["bulk"] * 2, "relay": ["X", "X", "Y", "X", "Y"],
        "attacked": ["X"] * 5, "score": [math.log(0.2), 0.0, 0.0, math.log(0.9), 0.0],
        "pre_cells_per_s": [9.5, 5.0, math.nan, 50.0, 50.0], "pace_cells_per_s": [10.0] * 5,
    })
    t = summarise(scores).set_index(["algorithm", "class"])
    assert (t.loc[("flag", PACED_CLASS), "positives"], t.loc[("flag", PACED_CLASS), "negatives"]) == (2, 1)
    tt = t.loc[("flag", TESTABLE_CLASS)]
    assert (tt["positives"], tt["negatives"]) == (1, 0) and tt["true_positive_rate"] == 1.0
    # "all" counts every circuit once: the testable ones are not added again.
    assert (t.loc[("flag", "all"), "positives"], t.loc[("flag", "all"), "negatives"]) == (3, 2)


def test_the_busiest_guards_and_the_attackers_helpers():
    c = _connections([(1, "A", f"c{i}", "web", 10.0, 1) for i in range(3)] + [(1, "B", f"c{i}", "web", 10.0, 1) for i in range(5)]
                     + [(1, "C", f"c{i}", "web", 10.0, 1) for i in range(9)] + [(2, "A", f"d{i}", "web", 10.0, 1) for i in range(20)]
                     + [(1, "A", f"e{i}", "web", 99.0, 1) for i in range(20)])
    assert busiest_guards(_Run(connections=c), 2, 0.0, 50.0) == [("C", 9), ("B", 5)]  # seed 1 only, inside the window
    relays = [{"name": "G", "flags": ["Guard"]}, {"name": "E1", "flags": ["Exit"]}, {"name": "E2", "flags": ["Exit"]}, {"name": "M", "flags": []}]
    bw = {"G": 9.0, "E1": 5.0, "E2": 1.0, "M": 3.0}
    assert helpers_for("G", relays, bw) == ("M", "E1")
    assert helpers_for("E1", relays, bw) == ("G", "E2")  # a guard may be the attacker's middle
    with pytest.raises(ValueError, match="no exit relay besides 'E1'"):
        helpers_for("E1", relays[:2], bw)


def _a4(aucs: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"algorithm": a, "class": cls, "auc": v} for a, v in aucs.items() for cls in ("bulk", "all")])


def test_auc_standard_error_is_hanley_and_mcneils():
    # A = 0.5, 5 positives, 50 negatives: Q1 = Q2 = 1/3, A^2 = 1/4, so
    # SE^2 = (1/4 + 4/12 + 49/12) / 250 = 0.018667: SE 0.137, an AUC of 0.33 1.2 SE away.
    assert auc_se(0.5, 5, 50) == pytest.approx(math.sqrt((0.25 + 4 / 12 + 49 / 12) / 250))
    assert auc_se(0.5, 5, 50) == pytest.approx(0.1366, abs=1e-4)
    # More positives, a smaller error; a perfect AUC has none.
    assert auc_se(0.5, 50, 50) < auc_se(0.5, 5, 50)
    assert auc_se(1.0, 5, 50) == 0.0
    assert math.isnan(auc_se(0.5, 0, 50)) and math.isnan(auc_se(math.nan, 5, 50))


def test_attack4_verdicts_read_the_flooded_targets_auc():
    base = numbers({0: PAPER_ORDER, 1: PAPER_ORDER})
    anon = anonymity({1: PAPER_ANON})
    works = _a4({"split": 0.95, "flag": 0.8, "thresh": 0.75, "static": 0.52, "vanilla": 0.45})
    t = findings(base, anon, A3, works)
    assert verdict(t, "attack4_adaptive", "medium")["holds"]
    assert verdict(t, "attack4_static_vanilla_nothing", "medium")["holds"]
    assert verdict(t, "attack4_adaptive", "medium")["detail"] == "AUC (flooded targets): split 0.95, flag 0.80, thresh 0.75"
    # One adaptive algorithm below 0.75 fails the first; static outside 0.5 +- 0.1 the second.
    t = findings(base, anon, A3, _a4({"split": 0.95, "flag": 0.6, "thresh": 0.9, "static": 0.65, "vanilla": 0.5}))
    assert not verdict(t, "attack4_adaptive", "medium")["holds"]
    assert not verdict(t, "attack4_static_vanilla_nothing", "medium")["holds"]
    # Without attack 4's table there are no attack 4 rows; a table from before the paced
    # targets has no paced rows.
    assert not findings(base, anon, A3)["finding"].str.startswith("attack4").any()
    assert not t["finding"].str.startswith("attack4_paced").any()


def test_attack4_paced_verdicts_read_the_paced_targets_auc():
    base = numbers({0: PAPER_ORDER, 1: PAPER_ORDER})
    anon = anonymity({1: PAPER_ANON})
    flooded = {"split": 0.95, "flag": 0.55, "thresh": 0.75, "static": 0.52, "vanilla": 0.45}
    paced = {"split": 0.9, "flag": 0.85, "thresh": 0.8, "static": 0.5, "vanilla": 0.7}
    # All paced targets do badly; the verdicts read the testable ones.
    a4 = pd.concat([_a4(flooded), pd.DataFrame([{"algorithm": a, "class": PACED_CLASS, "auc": 0.5} for a in paced]),
                    pd.DataFrame([{"algorithm": a, "class": TESTABLE_CLASS, "auc": v} for a, v in paced.items()])])
    t = findings(base, anon, A3, a4)
    assert not verdict(t, "attack4_adaptive", "medium")["holds"]  # flagging 0.55 on the flooded ones
    assert verdict(t, "attack4_paced_adaptive", "medium")["holds"]
    assert verdict(t, "attack4_paced_adaptive", "medium")["detail"] == "AUC (paced, testable targets): split 0.90, flag 0.85, thresh 0.80"
    assert verdict(t, "attack4_static_vanilla_nothing", "medium")["holds"]
    assert not verdict(t, "attack4_paced_static_vanilla_nothing", "medium")["holds"]  # vanilla 0.7


def test_an_algorithm_without_testable_targets_tells_nothing_and_confirms_nothing():
    # Static at 10 KiB/s holds every paced target below its pace, so none is testable and
    # attack4.csv has no testable row for it: the attacker learns nothing there. A missing
    # adaptive row fails the other reading (the attack could not confirm the guard).
    base = numbers({0: PAPER_ORDER, 1: PAPER_ORDER})
    anon = anonymity({1: PAPER_ANON})
    flooded = {"split": 0.95, "flag": 0.8, "thresh": 0.75, "static": 0.52, "vanilla": 0.45}
    testable = {"split": 1.0, "flag": 0.6, "vanilla": 0.55}  # no static, no thresh
    a4 = pd.concat([_a4(flooded), pd.DataFrame([{"algorithm": a, "class": TESTABLE_CLASS, "auc": v} for a, v in testable.items()])])
    t = findings(base, anon, A3, a4)
    nothing = verdict(t, "attack4_paced_static_vanilla_nothing", "medium")
    assert nothing["holds"] and nothing["detail"] == "AUC (paced, testable targets): static no targets, vanilla 0.55"
    works = verdict(t, "attack4_paced_adaptive", "medium")
    assert not works["holds"] and works["detail"].endswith("thresh no targets")


@pytest.mark.parametrize("flag,value,words", [
    ("--attack4-factor", "1", "--attack4-factor: must be a number above 1"),
    ("--attack4-factor", "nan", "--attack4-factor: must be a number above 1"),
    ("--attack4-guards", "-1", "--attack4-guards: must be at least 0"),
])
def test_bad_attack4_options_are_named(tmp_path, capsys, flag, value, words):
    assert main(["reproduce", "throttling", "--quick", "-o", str(tmp_path / "o"), flag, value]) != 0
    assert words in capsys.readouterr().err
