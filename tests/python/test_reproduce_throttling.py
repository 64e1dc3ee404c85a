"""`onionlab reproduce throttling --quick`: the whole pipeline on a short run (about 30 s)."""

import json
import math

import pandas as pd
import pytest

from onionlab.cli import main


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro-throttling")
    assert main(["reproduce", "throttling", "--quick", "-o", str(out), "--jobs", "2"]) == 0
    return out


def test_writes_every_output(quick):
    for f in ("table1.csv", "figure3.png", "sweep.csv", "chosen.json", "anonymity.csv", "anonymity_summary.csv",
              "figure4a.png", "figure4b.png", "figure4c.png", "summary.json", "attack3.csv", "configs/medium-flag.toml"):
        assert (quick / f).is_file(), f
    chosen = json.loads((quick / "chosen.json").read_text())
    assert set(chosen) == {"vanilla", "static", "split", "flag", "thresh"}


def test_table1_has_the_papers_numbers_beside_ours_and_throttling_cuts_the_bulk_share(quick):
    t = pd.read_csv(quick / "table1.csv")
    assert len(t) == 15
    assert t.loc[(t.load == "medium") & (t.algorithm == "vanilla"), "paper_bulk_pct"].item() == 34.2
    for load, grp in t.groupby("load"):
        v = grp[grp.algorithm == "vanilla"].iloc[0]
        for _, row in grp[grp.algorithm != "vanilla"].iterrows():
            assert row.bulk_pct < v.bulk_pct, (load, row.algorithm)
            assert row.data_GiB < v.data_GiB, (load, row.algorithm)
    assert (t.web_pct + t.bulk_pct - 100).abs().max() < 0.2


def test_probe_recovers_the_static_rate_and_static_leaks_nothing(quick):
    s = json.loads((quick / "summary.json").read_text())
    assert s["probe"]["estimated_rate_KiBps"] == pytest.approx(5.0, rel=0.1)
    a = pd.read_csv(quick / "anonymity_summary.csv")
    static = a[a.algorithm == "static"]
    assert (static.mean_loss_bits == 0).all(), "every guard has the same static rate: nothing to learn"
    assert a.mean_loss_bits.max() <= math.log2(50) + 1e-9


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    assert main(["reproduce", "throttling", "--no-sweep", "-o", str(tmp_path / "x")]) != 0
    assert "--params" in capsys.readouterr().err
