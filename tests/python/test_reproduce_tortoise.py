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


def test_reuse_runs_loads_the_runs_and_gives_the_same_tables(quick, capsys):
    before = (quick / "throughput.csv").read_text()
    assert main(["reproduce", "tortoise", "--quick", "--only", "E0", "E1", "E5", "E9a", "-o", str(quick), "--reuse-runs"]) == 0
    assert "reusing 4 of 4 configurations" in capsys.readouterr().err
    assert (quick / "throughput.csv").read_text() == before


def test_outputs_and_the_papers_numbers_beside_ours(quick):
    for f in ("throughput.csv", "anonymity.csv", "summary.json", "figure3_rate_limits.png", "configs/E5.toml"):
        assert (quick / f).is_file(), f
    t = pd.read_csv(quick / "throughput.csv").set_index("experiment")
    assert t.loc["E0", "paper_all"] == 41
    assert t.loc["E0", "all_change_pct"] == 0
    assert t.loc["E9a", "drop_vs_before_pct"] > 0, "20 % more clients, no more relays: slower"
    # E5's operators against the same clients in E1 (which has no client-relays).
    assert t.loc["E5", "operator_gain_vs_same_clients_pct"] > 0 and pd.isna(t.loc["E0", "operator_gain_vs_same_clients_pct"])


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


def test_a_starved_client_counts_in_the_sets_not_in_the_means():
    """Every client of the config is in the per-client table: one that completed no download
    counts in the anonymity set and the operator share, and is reported as starved rather
    than dropped (it once made E9b's bulk share 2/34 instead of 2/36)."""
    from types import SimpleNamespace

    from onionlab.reproduce import tortoise

    config = '[[clients]]\nname = "web-a"\ncount = 2\n[[clients]]\nname = "bulk-a"\ncount = 3\n'
    downloads = pd.DataFrame({
        "seed": [1, 1, 1, 1], "client": ["web-a0", "web-a1", "bulk-a0", "bulk-a2"], "class": ["web-a", "web-a", "bulk-a", "bulk-a"],
        "size": [100_000, 100_000, 1_000_000, 1_000_000], "ttlb": [1.0, 2.0, 10.0, float("nan")],
        "error": [None, None, None, "unfinished"],
    })
    relays = pd.DataFrame({"relay": ["guard", "bulk-a0-relay"]})
    res = SimpleNamespace(config=config, downloads=downloads, relays=relays, summary={"seeds": [1]})
    per = tortoise.client_means(res)
    assert sorted(per["client"]) == ["bulk-a0", "bulk-a1", "bulk-a2", "web-a0", "web-a1"]
    s = tortoise.summarize(per)
    assert (s["starved_web"], s["starved_bulk"]) == (0.0, 2.0)
    assert s["bulk"] == pytest.approx(100.0) and s["web"] == pytest.approx((100 + 50) / 2)  # KBps over those that finished
    a = tortoise.anonymity(per, 100.0)
    assert a["operator_share_bulk"] == pytest.approx(1 / 3) and a["anonymity_set_all"] == 5


def test_half_the_relays_enforce_holding_half_the_bandwidth():
    """E10's "50% of the relays": 8 of 15, by default the 8 holding closest to half the
    bandwidth (clients' first hops are drawn by bandwidth); the earlier random draw held
    93 % of it."""
    from onionlab.config import tomllib
    from onionlab.reproduce import tortoise

    # Hand-worked: relays of 40, 30, 20 and 10; two enforce. {0, 3} and {1, 2} hold
    # exactly 50 %, and the first in lexicographic order wins; a random half of 2 may hold
    # anything from 30 to 70 %.
    assert tortoise.enforcing_relays([40, 30, 20, 10], 0.5) == {0, 3}
    # 60, 20, 10, 10: {0, 2} (70 %) ties {1, 2} (30 %), both 20 points off: {0, 2}.
    assert tortoise.enforcing_relays([60, 20, 10, 10], 0.5) == {0, 2}
    assert tortoise.enforcing_relays([60, 20, 10, 10], 1.0) == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="--partial"):
        tortoise.enforcing_relays([1, 2], 0.5, "by-name")
    spec = {"rate": 100, "share": 0.5, "ops": 0, "scale": 1.0}
    for pick, lo, hi in (("balanced", 0.49, 0.51), ("random", 0.93, 0.94)):
        relays = tomllib.loads(tortoise.config_text("E10a", spec, "6 min", "1 min", 0.5, partial=pick))["relays"]
        bw = [float(r["bandwidth"].split()[0]) for r in relays]
        on = [b for r, b in zip(relays, bw) if r.get("tortoise") != "off"]
        assert len(on) == 8 and lo <= sum(on) / sum(bw) <= hi, (pick, sum(on) / sum(bw))


def test_the_bucket_burst_and_refill_interval_are_options(tmp_path, capsys):
    """Spec 1.5: the paper gives no burst or refill interval; B = R and 1 s by default, and
    the sweep it proposes (B = 2R, 100 ms) is a flag away."""
    from onionlab import config as config_mod
    from onionlab.config import tomllib
    from onionlab.reproduce import tortoise

    spec = {"rate": 100, "share": 1.0, "ops": 0, "scale": 1.0}
    default = tomllib.loads(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5))
    assert default["tor"]["refill_interval"] == "1 s" and default["mechanisms"]["tortoise"] == {"rate": "100 KBps"}
    path = tmp_path / "E1.toml"
    path.write_text(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5, burst_seconds=2, refill_interval="100 ms"))
    resolved = tomllib.loads(config_mod.check(path))
    assert resolved["tor"]["refill_interval"] == "100 ms"
    assert {(r["tortoise"]["rate"], r["tortoise"]["burst"]) for r in resolved["relays"]} == {("100 KB/s", "200 KB")}
    # Unmodified Tor (E0) has no limit to give a burst to.
    unlimited = tomllib.loads(tortoise.config_text("E0", dict(spec, rate=None), "6 min", "1 min", 0.5, burst_seconds=2))
    assert "tortoise" not in unlimited.get("mechanisms", {})
    with pytest.raises(SystemExit):
        main(["reproduce", "tortoise", "--quick", "--burst-seconds", "0", "-o", str(tmp_path / "x")])
    assert "--burst-seconds: must be a positive number" in capsys.readouterr().err


def test_the_limit_unit_is_an_option_that_reaches_the_config(tmp_path, capsys):
    """Spec 1.2's switch: per connection by default (not written out, so earlier configs and
    their reused runs are unchanged), per circuit with --limit-unit circuit, on every
    enforcing relay of the resolved config."""
    from onionlab import config as config_mod
    from onionlab.config import tomllib
    from onionlab.reproduce import tortoise

    spec = {"rate": 100, "share": 1.0, "ops": 0, "scale": 1.0}
    default = tomllib.loads(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5))
    assert default["mechanisms"]["tortoise"] == {"rate": "100 KBps"}
    assert tortoise.config_text("E1", spec, "6 min", "1 min", 0.5, limit_unit="connection") == tortoise.config_text(
        "E1", spec, "6 min", "1 min", 0.5)
    path = tmp_path / "E1.toml"
    path.write_text(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5, limit_unit="circuit"))
    resolved = tomllib.loads(config_mod.check(path))
    assert {r["tortoise"]["limit_unit"] for r in resolved["relays"]} == {"circuit"}
    path.write_text(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5))
    resolved_default = tomllib.loads(config_mod.check(path))
    assert all("limit_unit" not in r["tortoise"] for r in resolved_default["relays"])
    # From the command line to the configs it writes (E0 has no limit to set it on).
    out = tmp_path / "circ"
    args = ["reproduce", "tortoise", "--quick", "--duration", "30 s", "--warmup", "10 s", "--only", "E1", "--limit-unit", "circuit"]
    assert main(args + ["-o", str(out), "--jobs", "1"]) == 0
    written = tomllib.loads((out / "configs" / "E1.toml").read_text())
    assert written["mechanisms"]["tortoise"]["limit_unit"] == "circuit"
    assert json.loads((out / "summary.json").read_text())["limit_unit"] == "circuit"
    with pytest.raises(SystemExit):
        main(["reproduce", "tortoise", "--quick", "--limit-unit", "client", "-o", str(tmp_path / "x")])
    assert "--limit-unit" in capsys.readouterr().err


def test_no_optimistic_data_reaches_the_configs_and_the_summary(tmp_path):
    """The paper's tor 0.2.1.28 sent the request after CONNECTED: `--no-optimistic-data`
    writes it into the [tor] table; by default the line is absent (configs, and runs reused
    from them, as before)."""
    from onionlab import config as config_mod
    from onionlab.config import tomllib
    from onionlab.reproduce import tortoise

    spec = {"rate": 100, "share": 1.0, "ops": 0, "scale": 1.0}
    default = tortoise.config_text("E1", spec, "6 min", "1 min", 0.5)
    assert "optimistic_data" not in default and default == tortoise.config_text("E1", spec, "6 min", "1 min", 0.5, optimistic_data=True)
    path = tmp_path / "E1.toml"
    path.write_text(tortoise.config_text("E1", spec, "6 min", "1 min", 0.5, optimistic_data=False))
    assert tomllib.loads(config_mod.check(path))["tor"]["optimistic_data"] is False
    out = tmp_path / "noopt"
    args = ["reproduce", "tortoise", "--quick", "--duration", "30 s", "--warmup", "10 s", "--only", "E0", "--no-optimistic-data"]
    assert main(args + ["-o", str(out), "--jobs", "1"]) == 0
    assert tomllib.loads((out / "configs" / "E0.toml").read_text())["tor"]["optimistic_data"] is False
    assert json.loads((out / "summary.json").read_text())["optimistic_data"] is False
