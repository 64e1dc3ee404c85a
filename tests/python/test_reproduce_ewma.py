"""`onionlab reproduce ewma`: the K-S test against known values, the generated configs, and a
smoke run of the quick version (about 25 s on two cores)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from onionlab import config as config_mod
from onionlab.cli import main
from onionlab.reproduce import PAPERS, ewma

from conftest import needs_core


def test_registered():
    assert PAPERS["ewma"] == "onionlab.reproduce.ewma"


def test_ks_statistic_and_p_value():
    # Identical samples: D = 0, p = 1.
    assert ewma.ks_2samp([1, 2, 3], [1, 2, 3]) == (0.0, 1.0)
    # Disjoint samples: D = 1 and a tiny p.
    d, p = ewma.ks_2samp(np.arange(50), np.arange(100, 150))
    assert d == 1.0 and p < 1e-9
    # D by hand: a = {1,2,3,4}, b = {3,4,5,6}: at x = 2, F_a = 0.5 and F_b = 0.
    d, _ = ewma.ks_2samp([1, 2, 3, 4], [3, 4, 5, 6])
    assert d == 0.5
    # Asymptotic p-value against the Kolmogorov distribution: lambda = 1.36 gives p = 0.049.
    n = 10_000
    ne = n * n / (2 * n)
    dd = 1.36 / (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne))
    a = np.linspace(0, 1, n)
    _, p = ewma.ks_2samp(a, a + dd)
    assert abs(p - 0.0494) < 0.003
    with pytest.raises(ValueError):
        ewma.ks_2samp([], [1.0])


def test_generated_configs_are_valid(tmp_path):
    for sched in [ewma._scheduler_toml("round-robin"), ewma._scheduler_toml("ewma", 4.5)]:
        p = tmp_path / "line.toml"
        p.write_text(ewma.line_config("line", sched, quick=True, seeds=[1, 2]))
        resolved = config_mod.parse(config_mod.check(str(p)))
        middle = [r for r in resolved["relays"] if r["name"] == "middle"][0]
        assert middle["scheduler"]["kind"] == ("round-robin" if "round-robin" in sched else "ewma")
    for kind in ["round-robin", "ewma", "kist"]:
        p = tmp_path / f"full-{kind}.toml"
        p.write_text(ewma.full_network_config(kind, quick=True))
        resolved = config_mod.parse(config_mod.check(str(p)))
        assert resolved["mechanisms"]["scheduler"]["kind"] == kind
        assert len(resolved["relays"]) == 50


@needs_core
def test_quick_reproduction_runs(tmp_path, monkeypatch):
    import onionlab.runner as runner

    batches = []
    real = runner.run_jobs

    def recording(jobs, **kw):
        batches.append((sorted(j.name for j in jobs), kw.get("workers")))
        return real(jobs, **kw)

    monkeypatch.setattr(runner, "run_jobs", recording)
    out = tmp_path / "ewma"
    assert main(["reproduce", "ewma", "--quick", "--jobs", "2", "-o", str(out)]) == 0
    # One batch of every experiment on the workers asked for, so experiments share the cores.
    names = ["full-ewma", "full-kist", "full-round-robin", "line-ewma", "line-ewma-h1.5", "line-ewma-h10", "line-round-robin"]
    assert batches == [(names, 2)], batches
    for f in ["web_bulk_cdf.png", "halflife_sweep.png", "full_network_cdf.png", "web_bulk.csv", "halflife_sweep.csv", "full_network.csv", "summary.md"]:
        assert (out / f).stat().st_size > 0, f
    s = json.loads((out / "summary.json").read_text())
    line = s["line"]
    # The paper's direction: EWMA at the congested middle speeds up web downloads.
    assert line["web_median_s"]["ewma"] < line["web_median_s"]["round-robin"]
    assert set(s["halflife_sweep_web_median_s"]) == {"1.5", "10", "66"}
    # The paper's figure 13: 25th/50th/75th percentiles of each half-life's first downloads
    # (200 in the full run, 50 here), round robin's beside them.
    sweep = pd.read_csv(out / "halflife_sweep.csv")
    assert list(sweep["halflife_s"].astype(str)) == ["round-robin", "1.5", "10", "66"] and (sweep["downloads"] == 50).all()
    assert (sweep["web_p25_s"] <= sweep["web_median_s"]).all() and (sweep["web_median_s"] <= sweep["web_p75_s"]).all()
    pcts = s["halflife_sweep_web_percentiles_s"]
    assert pcts["66"][1] == s["halflife_sweep_web_median_s"]["66"] and len(pcts["round-robin"]) == 3
    assert [r["scheduler"] for r in s["full_network"]] == ["round-robin", "ewma", "kist"]
    assert (out / "configs" / "line-ewma.toml").exists()


def test_no_optimistic_data_reaches_every_config(tmp_path):
    # `--no-optimistic-data`: the [tor] table of every config the reproduction writes turns
    # it off; by default the key is absent (tor's default, on) and the configs are as before.
    sched = ewma._scheduler_toml("round-robin")
    for optimistic in (True, False):
        texts = {"line": ewma.line_config("line", sched, quick=True, seeds=[1], optimistic_data=optimistic)}
        texts["full"] = ewma.full_network_config("round-robin", quick=True, optimistic_data=optimistic)
        for name, text in texts.items():
            p = tmp_path / f"{name}-{optimistic}.toml"
            p.write_text(text)
            resolved = config_mod.parse(config_mod.check(str(p)))
            assert resolved["tor"].get("optimistic_data", True) is optimistic, (name, optimistic)
            assert ("optimistic_data" in text) is not optimistic, name
    assert ewma.line_config("line", sched, quick=True, seeds=[1]) == ewma.line_config("line", sched, True, [1], True)


@needs_core
def test_without_optimistic_data_each_web_download_takes_one_more_circuit_round_trip(tmp_path):
    # The line's hosts are 150 ms apart, so the request following CONNECTED costs a circuit
    # round trip, client -> guard -> middle -> exit and back: 6 x 150 ms = 0.9 s, plus the
    # request's own wait behind bulk cells in the middle's bottleneck uplink. Round robin's
    # median web download must grow by that trip and not by many.
    medians = {}
    for flag in ([], ["--no-optimistic-data"]):
        out = tmp_path / ("off" if flag else "on")
        assert main(["reproduce", "ewma", "--quick", "--no-full-network", "--jobs", "2", "-o", str(out), *flag]) == 0
        s = json.loads((out / "summary.json").read_text())
        assert s["optimistic_data"] is (not flag)
        medians["off" if flag else "on"] = s["line"]["web_median_s"]
    for sched in ("round-robin", "ewma"):
        grew = medians["off"][sched] - medians["on"][sched]
        assert 0.9 <= grew < 1.5, (sched, medians)
    assert "Without optimistic data" in (tmp_path / "off" / "summary.md").read_text()
