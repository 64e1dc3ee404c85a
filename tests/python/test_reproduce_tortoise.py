"""`onionlab reproduce tortoise --quick` on a few experiments (about 20 s)."""

import json

import pandas as pd
import pytest

from onionlab.cli import main


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro-tortoise")
    assert main(["reproduce", "tortoise", "--quick", "--only", "E0", "E1", "E5", "E9a", "-o", str(out), "--jobs", "2"]) == 0
    return out


def test_outputs_and_the_papers_numbers_beside_ours(quick):
    for f in ("throughput.csv", "anonymity.csv", "summary.json", "figure3_rate_limits.png", "configs/E5.toml"):
        assert (quick / f).is_file(), f
    t = pd.read_csv(quick / "throughput.csv").set_index("experiment")
    assert t.loc["E0", "paper_all"] == 41
    assert t.loc["E0", "all_change_pct"] == 0
    assert t.loc["E9a", "drop_vs_before_pct"] > 0, "20 % more clients, no more relays: slower"


def test_limit_holds_for_plain_clients_and_client_relays_exist(quick):
    cfg = (quick / "configs" / "E5.toml").read_text()
    assert 'relay_operators = { count = 7, entry = "exempt" }' in cfg and 'tortoise = { rate = "100 KBps" }' in cfg
    s = json.loads((quick / "summary.json").read_text())
    e5 = next(r for r in s["anonymity"] if r["experiment"] == "E5")
    assert e5["operator_share_web"] == pytest.approx(18 / 870, rel=0.05)
    # Nobody but relay operators can sustain 1.5x the limit.
    assert e5["fast_clients"] == e5["fast_clients_relay_operators"]
    e1 = next(r for r in s["anonymity"] if r["experiment"] == "E1")
    assert e1["fast_clients"] == 0


def test_bad_arguments(tmp_path, capsys):
    assert main(["reproduce", "tortoise", "--only", "E99", "-o", str(tmp_path / "x")]) != 0
    assert "E99" in capsys.readouterr().err
    assert main(["reproduce", "tortoise", "--duration", "300.5 s", "-o", str(tmp_path / "y")]) != 0
    assert "--duration: '300.5 s' must be a whole multiple of 1 s (the relays table is sampled every second)" in capsys.readouterr().err
    assert not (tmp_path / "y" / "configs").exists()
