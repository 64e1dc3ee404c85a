"""Config overrides (``--set``) and parameter sweeps (``onionlab sweep``): the grid, what
each point runs, resuming, the tidy table, and bad input."""

from __future__ import annotations

import json
import shutil
import math
import sys

import pandas as pd
import pytest

import onionlab
import onionlab.runner as runner
from onionlab import config as config_mod
from onionlab import stats
from onionlab import sweep as sweep_mod
from onionlab.cli import main

from conftest import TINY

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """The tiny example cut to 20 simulated seconds (10 of them warm-up)."""
    d = tmp_path_factory.mktemp("cfg")
    cfg = d / "tiny.toml"
    cfg.write_text(TINY.read_text().replace('duration = "2 min"', 'duration = "20 s"'))
    return cfg


# ---------------------------------------------------------------- overrides


def test_set_overrides_reach_the_resolved_config_and_the_run(short):
    text = config_mod.check(short, ["mechanisms.scheduler=ewma", "clients[bulk].count=1", "experiment.duration=15 s"])
    cfg = tomllib.loads(text)
    assert cfg["experiment"]["duration"] == "15 s"
    assert [c["count"] for c in cfg["clients"]] == [20, 1]
    assert {r["scheduler"]["kind"] for r in cfg["relays"]} == {"ewma"}
    res = onionlab.run(short, seeds=[1], overrides=["clients[bulk].count=1"])
    assert res.downloads.loc[res.downloads["class"] == "bulk", "client"].unique().tolist() == ["bulk0"]


def test_set_overrides_bad_input_names_the_field(short):
    with pytest.raises(onionlab.ConfigError) as e:
        config_mod.check(short, ["tor.circ_window=many", "clients[heavy].count=1", "nonsense"])
    paths = [p["path"] for p in e.value.problems]
    assert paths == ["nonsense"], "an unparsable override is reported before anything is applied"
    with pytest.raises(onionlab.ConfigError) as e:
        config_mod.check(short, ["tor.circ_window=many", "clients[heavy].count=1"])
    by_path = {p["path"]: p for p in e.value.problems}
    assert "no element named \"heavy\"" in by_path["clients[heavy].count"]["message"]
    assert "many" in by_path["tor.circ_window"]["message"]
    with pytest.raises(TypeError, match="list of PATH=VALUE"):
        onionlab.run(short, overrides="tor.circ_window=500")
    with pytest.raises(TypeError, match="list of PATH=VALUE"):
        config_mod.check(short, "tor.circ_window=500")


def test_cli_set_on_check_show_config_and_run(short, tmp_path, capsys):
    assert main(["show-config", str(short), "--set", "tor.circ_window=500", "--set", "mechanisms.scheduler=kist"]) == 0
    out = capsys.readouterr().out
    assert "circ_window = 500" in out and 'kind = "kist"' in out
    assert main(["check", str(short), "--set", "tor.circ_windw=500"]) == 1
    err = capsys.readouterr().err
    assert "tor.circ_windw: unknown key" in err and "circ_window" in err
    assert main(["run", str(short), "-o", str(tmp_path / "r"), "--no-progress", "--set", "clients[web].count=2"]) == 0
    cfg = tomllib.loads((tmp_path / "r" / "config.toml").read_text())
    assert cfg["clients"][0]["count"] == 2


# ---------------------------------------------------------------- the grid


def test_vary_values_bare_or_as_a_toml_array():
    path, s = sweep_mod.parse_vary("mechanisms.scheduler=round-robin, ewma")
    assert path == "mechanisms.scheduler" and [x.value for x in s] == ["round-robin", "ewma"]
    _, s = sweep_mod.parse_vary('network.latency=[{ constant = "20 ms" }, { constant = "80 ms" }]')
    assert [tomllib.loads(f"v = {x.value}")["v"] for x in s] == [{"constant": "20 ms"}, {"constant": "80 ms"}]
    _, s = sweep_mod.parse_vary("tor.circ_window=[500, 1000]")
    assert [(x.value, x.label) for x in s] == [("500", "500"), ("1000", "1000")]
    for bad, says in [
        ("tor.circ_window", "PATH=V1,V2"),
        ("=1,2", "path is empty"),
        ("tor.circ_window=1,,2", "empty value"),
        ("tor.circ_window=1,1", "given twice"),
        ("tor.circ_window=[1, ", "not a TOML array"),
        ("tor.circ_window=[]", "no values"),
        ("experiment.seeds=1,2", "--seeds"),
        ("experiment.name=a,b", "sets this itself"),
    ]:
        with pytest.raises(ValueError, match=says):
            sweep_mod.parse_vary(bad)


def test_toml_values_round_trip():
    assert sweep_mod.toml_value({"kind": "split", "a.b": 1}) == '{ kind = "split", "a.b" = 1 }'
    for v in ["5 min", 'quote " and \\ backslash', 500, 0.25, True, [1, 2], {"constant": "20 ms", "a.b": 1}, [[1], ["a"]]]:
        assert tomllib.loads(f"v = {sweep_mod.toml_value(v)}")["v"] == v
    with pytest.raises(ValueError):
        sweep_mod.toml_value(float("nan"))
    with pytest.raises(ValueError):
        sweep_mod.toml_value(object())


def test_without_name_takes_out_the_name_however_toml_wrote_it():
    rest = 'duration = "1 s"\n'
    for line in ['name = "tiny"', 'name = "a \\"quoted\\" [x]"', "name = 'tiny [s={ kind = \"ewma\" }]'"]:
        assert config_mod.without_name(f"[experiment]\n{line}\n{rest}") == f"[experiment]\n{rest}", line
    # Only the opening name line: a relay's name is not the experiment's.
    text = '[experiment]\nname = "x"\n[[relays]]\nname = "y"\n'
    assert config_mod.without_name(text) == '[experiment]\n[[relays]]\nname = "y"\n'


def test_grid_is_every_combination_first_field_outermost():
    varied = sweep_mod._settings_from({"mechanisms.scheduler": ["round-robin", "ewma"], "tor.circ_window": [500, 1000, 2000]})
    pts = sweep_mod.grid(varied)
    assert [p.label for p in pts] == [f"scheduler={s}, circ_window={w}" for s in ("round-robin", "ewma") for w in (500, 1000, 2000)]
    assert pts[4].overrides == ("mechanisms.scheduler=\"ewma\"", "tor.circ_window=1000")
    assert len({p.name for p in pts}) == 6 and pts[0].name.startswith("00-")
    # Fields whose last keys collide are labelled by their whole paths.
    pts = sweep_mod.grid(sweep_mod._settings_from(["clients[web].count=1,2", "clients[bulk].count=3"]))
    assert pts[0].label == "clients[web].count=1, clients[bulk].count=3"
    with pytest.raises(ValueError, match="varied twice"):
        sweep_mod._settings_from(["a=1", "a=2"])
    with pytest.raises(TypeError, match="list of values"):
        sweep_mod._settings_from({"a": "ewma"})


def test_seed_spread_is_the_mean_of_the_seeds_medians_with_a_t_interval():
    rows = [(seed, "web", t) for seed, ts in ((1, [1.0, 1.0, 5.0]), (2, [3.0, 3.0, 9.0])) for t in ts]
    d = pd.DataFrame(rows, columns=["seed", "class", "ttlb"]).assign(ttfb=0.5, error=None)
    got = stats.seed_spread(d).set_index("class").loc["web"]
    # Per-seed medians 1 and 3: mean 2, sample sd sqrt(2), CI half-width t(1) * sqrt(2) / sqrt(2).
    assert got["seeds"] == 2 and got["ttlb_median_seed_mean"] == 2.0
    assert got["ttlb_median_ci95"] == pytest.approx(12.706)
    assert got["ttfb_median_ci95"] == 0.0
    one = stats.seed_spread(d[d["seed"] == 1]).set_index("class").loc["web"]
    assert one["seeds"] == 1 and math.isnan(one["ttlb_median_ci95"])
    assert stats.t975(4) == 2.776 and stats.t975(100) == 1.96


# ---------------------------------------------------------------- whole sweeps


@pytest.fixture(scope="module")
def swept(short, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    sw = onionlab.run_sweep(short, {"mechanisms.scheduler": ["round-robin", "ewma"]}, seeds=[1, 2], out=out, jobs=2,
                              overrides=["clients[web].count=10"])
    return out, sw


def test_a_point_is_exactly_the_run_with_its_settings(swept, short):
    out, sw = swept
    assert [p["name"] for p in sw.info["points"]] == ["00-scheduler=round-robin", "01-scheduler=ewma"]
    alone = onionlab.run(short, seeds=[1, 2], jobs=1, overrides=["clients[web].count=10", "mechanisms.scheduler=ewma"])
    point = onionlab.load(out / "points" / "01-scheduler=ewma")
    pd.testing.assert_frame_equal(point.downloads, alone.downloads)
    pd.testing.assert_frame_equal(point.relays, alone.relays)
    cfg = tomllib.loads(point.config)
    assert cfg["experiment"]["name"] == "tiny [scheduler=ewma]" and cfg["experiment"]["seeds"] == [1, 2]
    assert {r["scheduler"]["kind"] for r in cfg["relays"]} == {"ewma"} and cfg["clients"][0]["count"] == 10
    # The two points differ (the scheduler did something) and each has both seeds.
    rr = onionlab.load(out / "points" / "00-scheduler=round-robin")
    assert set(rr.downloads["seed"]) == {1, 2}
    assert not rr.downloads[["ttfb", "ttlb"]].equals(point.downloads[["ttfb", "ttlb"]])


def test_sweep_table_and_files(swept):
    out, sw = swept
    t = pd.read_csv(out / "sweep.csv")
    assert list(t["point"].unique()) == ["00-scheduler=round-robin", "01-scheduler=ewma"]
    assert sorted(t["class"].unique()) == ["bulk", "web"] and len(t) == 4
    # Every point's web class has both seeds; a bulk client (5 MiB at a time) may start no
    # download in the 10 measured seconds, so its class may have fewer.
    assert set(t["mechanisms.scheduler"]) == {"round-robin", "ewma"} and (t[t["class"] == "web"]["seeds"] == 2).all()
    assert t["seeds"].between(0, 2).all()
    # Pooled medians are the points' own summaries'.
    ewma = sw.results["01-scheduler=ewma"]
    row = t[(t["point"] == "01-scheduler=ewma") & (t["class"] == "web")].iloc[0]
    assert row["ttlb_median"] == pytest.approx(ewma.summary["classes"]["web"]["time_to_last_byte_recv"]["median"], rel=1e-5)
    assert row["downloads"] == ewma.summary["classes"]["web"]["downloads"]
    info = json.loads((out / "sweep.json").read_text())
    assert info["seeds"] == [1, 2] and info["set"] == ["clients[web].count=10"]
    for f in ("sweep.png", "ttfb.png", "ttlb.png"):
        assert (out / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = sweep_mod.load(out)
    pd.testing.assert_frame_equal(again.table, sw.table)
    dl = again.downloads
    assert set(dl["mechanisms.scheduler"]) == {"round-robin", "ewma"} and len(dl) == sum(len(r.downloads) for r in sw.results.values())


def test_resume_loads_finished_points_and_reruns_changed_ones(swept, short, monkeypatch):
    out, sw = swept

    def no_runs(*a, **k):
        raise AssertionError("a finished point was run again")

    monkeypatch.setattr(runner, "_run_in_process", no_runs)
    monkeypatch.setattr(runner, "_run_seed", no_runs)
    again = onionlab.run_sweep(short, {"mechanisms.scheduler": ["round-robin", "ewma"]}, seeds=[1, 2], out=out, jobs=1,
                                 overrides=["clients[web].count=10"], resume=True)
    pd.testing.assert_frame_equal(again.table, sw.table)
    # Other seeds are another point: it is run (and here, that fails loudly).
    with pytest.raises(AssertionError, match="run again"):
        onionlab.run_sweep(short, {"mechanisms.scheduler": ["round-robin", "ewma"]}, seeds=[1, 3], out=out, jobs=1,
                             overrides=["clients[web].count=10"], resume=True)


def test_resume_runs_a_damaged_point_again(swept, short, tmp_path, monkeypatch, capsys):
    out, sw = swept
    copy = tmp_path / "sweep"
    shutil.copytree(out, copy)
    damaged = copy / "points" / "01-scheduler=ewma"
    (damaged / "downloads.parquet").write_bytes(b"not parquet")
    ran = []

    def record(jobs, *a, **k):
        ran.extend(j.name for j in jobs)
        return {j.name: sw.results[j.name] for j in jobs}

    monkeypatch.setattr(runner, "run_jobs", record)
    again = onionlab.run_sweep(short, {"mechanisms.scheduler": ["round-robin", "ewma"]}, seeds=[1, 2], out=copy,
                               jobs=1, overrides=["clients[web].count=10"], resume=True)
    assert ran == ["01-scheduler=ewma"]  # the intact point is loaded, the damaged one run
    assert "01-scheduler=ewma cannot be read" in capsys.readouterr().err
    pd.testing.assert_frame_equal(again.table, sw.table)


def test_a_base_valid_only_with_the_varied_setting_sweeps(tmp_path, monkeypatch):
    # 2.5 s runs: the default 1 s metrics interval does not divide them, the swept ones do.
    cfg = tmp_path / "t25.toml"
    cfg.write_text(TINY.read_text().replace('duration = "2 min"', 'duration = "2.5 s"').replace('warmup = "10 s"', 'warmup = "0 s"'))
    with pytest.raises(onionlab.ConfigError, match="metrics_interval"):
        config_mod.check(cfg)
    ran = []

    class Validated(Exception):
        pass

    def record(jobs, *a, **k):
        ran.extend(jobs)
        raise Validated

    monkeypatch.setattr(runner, "run_jobs", record)
    with pytest.raises(Validated):
        onionlab.run_sweep(cfg, ['experiment.metrics_interval="250 ms","500 ms"'], seeds=[1])
    assert len(ran) == 2
    # Invalid whatever the point: the base's problem, as before.
    with pytest.raises(onionlab.ConfigError, match="does not divide"):
        onionlab.run_sweep(cfg, ['experiment.metrics_interval="1 s","2 s"'], seeds=[1])


def test_bad_points_are_reported_before_anything_runs(short, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "run_jobs", lambda *a, **k: pytest.fail("ran despite a bad point"))
    with pytest.raises(onionlab.ConfigError) as e:
        onionlab.run_sweep(short, ["tor.circ_window=500,lots", "mechanisms.scheduler=ewma,kist"], out=tmp_path)
    (p,) = e.value.problems
    assert p["path"] == "tor.circ_window" and "in points 02-circ_window=lots-scheduler=ewma, 03-" in p["message"]
    # The message itself says what is wrong, as the config loader's does (a traceback shows only it).
    assert str(e.value).startswith("1 problem in the sweep's points:\ntor.circ_window: ") and "lots" in str(e.value)
    assert main(["sweep", str(short), "-o", str(tmp_path), "--vary", "clients[heavy].count=1,2", "--no-progress"]) == 1
    assert "no element named \"heavy\" (in every point)" in capsys.readouterr().err
    assert main(["sweep", str(short), "-o", str(tmp_path), "--vary", "experiment.seeds=1,2"]) == 2
    assert main(["sweep", str(short), "-o", str(tmp_path), "--vary", "tor.circ_window=1", "--jobs", "0"]) == 2
    assert main(["sweep", str(short), "-o", str(tmp_path), "--vary", "tor.circ_window=1", "--seeds", "0"]) == 2
    assert "--seeds: must be at least 1" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "none.toml"), "-o", str(tmp_path), "--vary", "tor.circ_window=1"]) == 2
    with pytest.raises(ValueError, match="resume"):
        onionlab.run_sweep(short, ["tor.circ_window=1"], resume=True)


def test_varying_the_whole_mechanisms_table_puts_mechanisms_side_by_side(short, monkeypatch):
    """docs/config.md's recipe: each value of `mechanisms` is one combination, so mechanisms
    that may not share a relay (throttling and Tortoise) are points of one sweep."""
    ran = {}
    monkeypatch.setattr(runner, "run_jobs", lambda jobs, **k: ran.update(k["resolved"]) or {j.name: None for j in jobs})
    monkeypatch.setattr(sweep_mod, "Sweep", lambda *a, **k: "ran")
    vary = ['mechanisms=[{ scheduler = "round-robin" }, { throttling = { kind = "split" } }, { tortoise = { rate = "100 KBps" } }]']
    assert onionlab.run_sweep(short, vary) == "ran"
    relays = [tomllib.loads(text)["relays"] for _, text in sorted(ran.items())]
    assert [r[0]["throttling"]["kind"] for r in relays] == ["none", "split", "none"]
    assert [r[0]["tortoise"] == "off" for r in relays] == [True, True, False]


def test_points_that_resolve_to_the_same_experiment_are_refused(short, tmp_path, monkeypatch, capsys):
    """A value written two ways (a scheduler's name and its table with tor's defaults) would
    run one experiment twice and report identical rows as if the setting did nothing."""
    monkeypatch.setattr(runner, "run_jobs", lambda *a, **k: pytest.fail("ran the same experiment twice"))
    same = {"mechanisms.scheduler": ["ewma", {"kind": "ewma", "halflife": "30 s", "tick": "10 s"}, "kist"]}
    with pytest.raises(onionlab.ConfigError) as e:
        onionlab.run_sweep(short, same, out=tmp_path / "sw")
    (p,) = e.value.problems
    assert p["path"] == "vary" and "points 00-scheduler=ewma and 01-scheduler=" in p["message"], p
    assert "02-" not in p["message"] and "show-config" in p["hint"]
    assert not (tmp_path / "sw").exists()
    argv = ["sweep", str(short), "-o", str(tmp_path / "sw"), "--no-progress",
            "--vary", 'tor.refill_interval=["100 ms", "0.1 s", "1 s"]']
    assert main(argv) == 1
    assert "resolve to the same experiment" in capsys.readouterr().err
    # Values that differ are a sweep (the check does not confuse a different name).
    monkeypatch.setattr(runner, "run_jobs", lambda jobs, **k: {j.name: None for j in jobs})
    monkeypatch.setattr(sweep_mod, "Sweep", lambda *a, **k: "ran")
    assert onionlab.run_sweep(short, {"mechanisms.scheduler": ["ewma", "kist"]}) == "ran"


def test_cli_sweep_prints_the_table(short, tmp_path, capsys):
    args = ["sweep", str(short), "-o", str(tmp_path / "s"), "--vary", "tor.circ_window=500,1000", "--seed", "3", "--no-progress",
            "--jobs", "2", "--set", "clients[web].count=5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "circ_window=500" in out and "circ_window=1000" in out and "2 points x 1 seeds" in out
    assert (tmp_path / "s" / "points" / "01-circ_window=1000" / "downloads.parquet").is_file()


def test_compare_and_report_take_a_sweep_directory_as_its_points(swept, tmp_path, capsys, monkeypatch):
    out, sw = swept
    assert main(["compare", str(out), "-o", str(tmp_path / "cmp")]) == 0
    table = pd.read_csv(tmp_path / "cmp" / "compare.csv", index_col=0)
    assert list(table.index) == ["scheduler=round-robin", "scheduler=ewma"]
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "scheduler=ewma" in page and "queue wait (ms/cell)" in page
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["sweep", str(TINY), "-o", str(tmp_path / "s"), "--vary", "tor.circ_window=500", "--ray", "auto", "--no-progress"]) == 2
    assert "pip install" in capsys.readouterr().err


def test_wire_waits_split_the_wire_when_asked(short, tmp_path):
    from onionlab import stats
    from onionlab.report import report

    res = onionlab.run(short, seeds=[1], overrides=["experiment.wire_waits=true"], out=tmp_path / "w")
    w = stats.wait_split(res.relays, start=10).set_index("relay")
    assert {"kernel_ms", "link_ms", "unread_ms"} <= set(w.columns)
    # tiny.toml's 20 ms between hosts: every cell between relays spends at least that on the link.
    between_relays = w.loc[["middle1", "middle2"]]
    assert (between_relays["link_ms"] >= 20.0).all(), between_relays
    assert "wire: unread (ms/cell)" in report([tmp_path / "w"], tmp_path / "r.html").read_text()
    off = stats.wait_split(onionlab.run(short, seeds=[1]).relays, start=10)
    assert "unread_ms" not in off.columns
