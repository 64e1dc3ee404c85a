"""Pure-Python parts over synthetic tables: statistics, the results directory, figures,
comparison and report (no simulation needed)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from onionlab import stats
from onionlab.compare import compare, summary_table
from onionlab.plot import plot
from onionlab.report import report
from onionlab.results import Results, load

from conftest import fake_run

PNG = b"\x89PNG\r\n\x1a\n"


def test_tables_are_sorted_and_typed(fake_results):
    d = fake_results.downloads
    assert list(d.columns) == [
        "seed", "client", "class", "size", "received", "start", "begin", "connected", "ttfb", "ttlb", "goodput",
        "circuit_build_time", "path", "error",
    ]
    keys = list(zip(d["seed"], d["start"], d["client"]))
    assert keys == sorted(keys)
    assert d["seed"].dtype == np.int64 and d["ttlb"].dtype == np.float64
    assert d["ttlb"].isna().sum() == 4  # one failed download per class per seed
    assert list(fake_results.relays["seed"].unique()) == [1, 2]


def test_pooled_summary_figures(fake_results):
    s = fake_results.summary
    assert s["seeds"] == [1, 2]
    assert s["events"] == 1001 + 1002
    assert s["counters"] == {"cells": 30}
    assert [r["seed"] for r in s["runs"]] == [1, 2]
    assert all("wall_seconds" not in r for r in s["runs"])
    web, bulk = s["classes"]["web"], s["classes"]["bulk"]
    assert web["downloads"] == 40 and web["errors"] == 2
    assert web["bytes"] == 38 * 320 * 1024
    assert bulk["data_gib"] == pytest.approx(38 * 5 / 1024)
    assert web["data_share_pct"] + bulk["data_share_pct"] == pytest.approx(100.0)
    done = fake_results.downloads.dropna(subset=["ttlb"])
    w = done[done["class"] == "web"]["ttlb"]
    t = web["time_to_last_byte_recv"]
    assert t["count"] == 38
    assert t["median"] == pytest.approx(w.median())
    assert t["mean"] == pytest.approx(w.mean())
    assert t["p10"] <= t["p25"] <= t["median"] <= t["p75"] <= t["p90"] <= t["p99"]
    assert t["p90"] == pytest.approx(np.quantile(w, 0.9))
    assert web["goodput"]["median"] == pytest.approx(done[done["class"] == "web"]["goodput"].median())


def test_unfinished_downloads_are_counted_apart_from_errors_and_times():
    from onionlab.results import Results

    res = Results.from_runs([fake_run(1, unfinished=2), fake_run(2, unfinished=2)], config="")
    web = res.summary["classes"]["web"]
    # 20 downloads per seed, one failed, plus two cut short by the end of the run.
    assert (web["downloads"], web["errors"], web["unfinished"]) == (44, 2, 4)
    assert (res.summary["downloads"], res.summary["errors"], res.summary["unfinished"]) == (88, 4, 8)
    # Times and bytes are over completed downloads only.
    assert web["time_to_last_byte_recv"]["count"] == 38 and web["bytes"] == 38 * 320 * 1024
    assert stats.completed(res.downloads)["error"].isna().all()
    cut = res.downloads[stats.unfinished(res.downloads)]
    assert len(cut) == 8 and cut["ttlb"].isna().all() and (cut["received"] < cut["size"]).all()
    assert stats.failed(res.downloads).sum() == 4
    row = stats.class_shares_table({"a": res.summary}).iloc[0]
    assert row["web unfinished"] == 4 and row["web errors"] == 2


def test_received_bytes_count_unfinished_downloads_and_a_starved_class_keeps_its_row():
    """A helper found that the shares ignored what unfinished downloads received (a policy
    that leaves bulk unfinished looked better than it was) and that a class with no download
    in the measured window vanished from the pooled summary."""
    downloads = pd.DataFrame(
        {
            "class": ["web", "web", "bulk"],
            "size": [100, 100, 1000],
            "received": [100, 100, 300],
            "ttfb": [0.1, 0.2, 0.5],
            "ttlb": [1.0, 2.0, np.nan],
            "goodput": [100.0, 50.0, np.nan],
            "error": [None, None, stats.UNFINISHED],
        }
    )
    out = stats.class_summary(downloads, classes=["perf"])
    assert (out["web"]["bytes"], out["web"]["data_share_pct"]) == (200, 100.0)
    assert (out["bulk"]["bytes"], out["bulk"]["received_bytes"]) == (0, 300)
    assert out["bulk"]["received_share_pct"] == pytest.approx(60.0) and out["web"]["received_share_pct"] == pytest.approx(40.0)
    assert out["perf"]["downloads"] == 0 and out["perf"]["received_bytes"] == 0
    assert out["perf"]["time_to_last_byte_recv"]["count"] == 0
    # The pooled summary names every class a seed's run had.
    s = stats.pooled_summary(downloads, [{"seed": 1, "classes": {"web": {}, "bulk": {}, "perf": {"downloads": 0}}}])
    assert sorted(s["classes"]) == ["bulk", "perf", "web"]


def test_describe_empty_and_nan():
    d = stats.describe([None, float("nan")])
    assert d["count"] == 0 and d["median"] is None and d["p99"] is None


def test_ecdf_and_dkw():
    x, y = stats.ecdf([3.0, None, 1.0, 2.0])
    assert list(x) == [1.0, 2.0, 3.0] and list(y) == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert stats.dkw_epsilon(100) == pytest.approx(math.sqrt(math.log(40) / 200))
    assert stats.dkw_epsilon(10_000) < stats.dkw_epsilon(100)


def test_write_load_round_trip_and_bytes_identical(fake_results, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    fake_results.write(a)
    Results.from_runs([fake_run(1), fake_run(2)], fake_results.config).write(b)
    for f in ("downloads.parquet", "relays.parquet", "summary.json", "config.toml"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    summary_text = (a / "summary.json").read_text()
    assert "wall_seconds" not in summary_text
    assert json.loads((a / "timing.json").read_text())["wall_seconds"] == {"1": 0.123, "2": 0.246}
    assert summary_text == json.dumps(json.loads(summary_text), indent=2, sort_keys=True) + "\n"
    r = load(a)
    pd.testing.assert_frame_equal(
        r.downloads.astype(object).where(r.downloads.notna(), None),
        fake_results.downloads.astype(object).where(fake_results.downloads.notna(), None),
    )
    assert r.summary == fake_results.summary
    assert r.config == fake_results.config
    assert len(r.relays) == len(fake_results.relays)


def test_a_write_cut_short_leaves_no_config_behind(fake_results, tmp_path, monkeypatch):
    """Overwriting a results directory and failing part-way must not leave the old
    config.toml beside new tables: --reuse-runs finds runs by their config."""
    import onionlab.results as results_mod

    d = fake_results.write(tmp_path / "run")
    assert (d / "config.toml").is_file()
    calls = []

    def failing_write_table(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    real = results_mod.pq.write_table
    monkeypatch.setattr(results_mod.pq, "write_table", failing_write_table)
    with pytest.raises(OSError, match="disk full"):
        fake_results.write(d)
    assert not (d / "config.toml").exists()
    monkeypatch.setattr(results_mod.pq, "write_table", real)
    fake_results.write(d)
    assert load(d).config == fake_results.config


def test_a_write_into_a_hard_linked_copy_leaves_the_original_alone(fake_results, tmp_path):
    """`cp -al` of an output directory shares its files by hard links; rerunning a run
    into the copy must replace the copy's files, not write through the links into the
    original (which then held one config and another run's tables)."""
    import os

    orig = fake_results.write(tmp_path / "orig" / "run")
    before = {f.name: f.read_bytes() for f in orig.iterdir()}
    copy = tmp_path / "copy" / "run"
    copy.mkdir(parents=True)
    for f in orig.iterdir():
        os.link(f, copy / f.name)
    other = Results.from_runs([fake_run(3)], fake_results.config + "# another run\n")
    other.write(copy)
    assert {f.name: f.read_bytes() for f in orig.iterdir()} == before
    assert load(copy).config == other.config and load(orig).config == fake_results.config
    assert (copy / "downloads.parquet").read_bytes() != before["downloads.parquet"]
    assert not list(copy.glob(".*partial")), "no temporary file left behind"


def test_an_overwrite_without_an_optional_table_drops_the_old_one(fake_results, tmp_path):
    """A run without connection metrics written over one with them must not read back the
    old run's connections."""
    d = fake_results.write(tmp_path / "run")
    (d / "connections.parquet").write_bytes((d / "relays.parquet").read_bytes())  # a stale table
    assert len(fake_results.connections) == 0
    fake_results.write(d)
    assert not (d / "connections.parquet").exists()
    assert len(load(d).connections) == 0


def test_runs_typed_in_a_worker_give_the_same_results_as_raw_runs(fake_results, tmp_path):
    from onionlab.results import typed_run

    typed = [typed_run(fake_run(1)), typed_run(fake_run(2))]
    assert all(isinstance(r["downloads"], pd.DataFrame) and isinstance(r["relays"], pd.DataFrame) for r in typed)
    assert all(typed_run(typed[0])[k] is v for k, v in typed[0].items()), "typing twice changes nothing"
    a, b = tmp_path / "a", tmp_path / "b"
    fake_results.write(a)
    Results.from_runs(typed, fake_results.config).write(b)
    for f in ("downloads.parquet", "relays.parquet", "summary.json", "config.toml"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def _encoded(values, dtype):
    """`values` in the glue's encoded column forms (``onionlab.results.table``)."""
    if dtype == "dict":
        names = list(dict.fromkeys(values))
        return ("dict", np.array([names.index(v) for v in values], dtype="<u4").tobytes(), names)
    fill = [np.nan if v is None else v for v in values]
    return (dtype, np.array(fill, dtype=dtype).tobytes())


def test_encoded_columns_give_the_same_tables_as_lists(tmp_path):
    """The forms ``_core.run_experiment`` sends (numbers as bytes, names as codes into a
    list) make the same DataFrame as plain lists, missing floats included."""
    from onionlab.results import CHANNELS_SCHEMA, RELAYS_SCHEMA, table

    raw = fake_run(3)
    relays = dict(raw["relays"])
    relays["throttle_rate"] = [None, 5120, None, 20480]
    chans = {
        "seed": [3, 3, 3], "relay": ["r1", "r2", "r1"], "peer": ["r2", "r1", "r3"], "initiator": [True, False, True],
        "interval_start": [0.0, 0.0, 10.0], "bytes_written": [1, 2, 2**40], "bytes_read": [0, 5, 6],
        "circuits": [1, 1, 2], "active_circuits": [0, 1, 1], "queued_cells": [0, 7, 3],
    }
    kinds = {"seed": "<i8", "relay": "dict", "peer": "dict", "initiator": "|b1", "interval_start": "<f8", "bucket_empty_s": "<f8", "throttle_rate": "<f8"}
    for cols, schema in ((relays, RELAYS_SCHEMA), (chans, CHANNELS_SCHEMA)):
        enc = {k: _encoded(v, kinds.get(k, "<i8")) for k, v in cols.items()}
        a, b = table(cols, schema), table(enc, schema)
        pd.testing.assert_frame_equal(a, b)
        assert list(b.columns) == schema.names
    rates = table({k: _encoded(v, kinds.get(k, "<i8")) for k, v in relays.items()}, RELAYS_SCHEMA)["throttle_rate"]
    assert rates.isna().tolist() == [True, False, True, False], "NaN reads as missing"
    # A missing column is all nulls, as for lists.
    part = table({"seed": _encoded([1, 2], "<i8")}, CHANNELS_SCHEMA)
    assert len(part) == 2 and part["relay"].isna().all()


def test_tables_edited_by_a_user_still_write_with_nulls_and_the_schema_types(fake_results, tmp_path):
    # A float column's NaN is written as null; a whole-valued float column where the
    # schema has integers (what a pandas edit that introduced NaN and dropped it leaves)
    # is written as integers; a column the schema lacks is kept after the schema's.
    r = fake_results
    d = r.downloads.copy()
    d["size"] = d["size"].astype(float)
    d["note"] = "x"
    r.downloads = d
    r.write(tmp_path / "e")
    back = load(tmp_path / "e").downloads
    assert back["size"].dtype == np.int64 and (back["size"] == d["size"].astype(np.int64)).all()
    assert back["ttlb"].isna().sum() == d["ttlb"].isna().sum() == 4
    assert list(back.columns)[-1] == "note" and (back["note"] == "x").all()


def test_empty_runs_write_and_summarise(tmp_path):
    run = fake_run(1, n=0, errors=0)
    res = Results.from_runs([run], "")
    # No download at all, but the run's classes keep their rows (of zeros).
    assert len(res.downloads) == 0 and {c: v["downloads"] for c, v in res.summary["classes"].items()} == {"bulk": 0, "web": 0}
    res.write(tmp_path / "e")
    assert len(load(tmp_path / "e").downloads) == 0
    plot(res, tmp_path / "e" / "")


def test_load_missing_dir_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such results directory"):
        load(tmp_path / "nope")
    (tmp_path / "half").mkdir()
    with pytest.raises(FileNotFoundError, match="downloads.parquet"):
        load(tmp_path / "half")


def test_plot_compare_report_on_synthetic(fake_results, tmp_path):
    paths = plot(fake_results, str(tmp_path / "p") + "/")
    assert [p.name for p in paths] == ["ttfb.png", "ttlb.png"]
    assert all(p.read_bytes()[:8] == PNG for p in paths)
    assert [p.name for p in plot(fake_results, tmp_path / "x")] == ["x-ttfb.png", "x-ttlb.png"]

    other = Results.from_runs([fake_run(3, classes=(("web", 320 * 1024, 2.0), ("bulk", 5 << 20, 20.0)))], "")
    other.source = str(tmp_path / "slower")
    fake_results.write(tmp_path / "base")
    table = compare([tmp_path / "base", other], out=tmp_path / "c")
    assert list(table.index) == ["base", "slower"]  # same experiment name: labelled by directory
    assert {"Data (GiB)", "Web (%)", "Bulk (%)", "web ttlb median (s)", "web ttlb p90 (s)"} <= set(table.columns)
    assert table.loc["slower", "web ttlb median (s)"] > table.loc["base", "web ttlb median (s)"]
    assert table.loc["base", "Web (%)"] + table.loc["base", "Bulk (%)"] == pytest.approx(100)
    assert (tmp_path / "c" / "ttfb.png").read_bytes()[:8] == PNG
    assert (tmp_path / "c" / "compare.csv").is_file()
    assert summary_table([fake_results]).shape[0] == 1

    page = report([tmp_path / "base", other], tmp_path / "r" / "report.html").read_text()
    assert page.count('<img alt=') == 2 and '<img alt=\'ttfb CDF\' src="data:image/png;base64,' in page
    assert "<table" in page and "slower" in page and "Resolved config" in page


def test_report_relay_table_reads_only_after_the_warmup_at_the_runs_interval():
    from onionlab.report import relay_table

    run = fake_run(1)
    # Two 2 s intervals per relay before the 10 s warm-up, two after; the loud ones before
    # must not count, and the rate is per 2 s whichever intervals are left.
    run["relays"] = {
        "seed": [1] * 8,
        "relay": ["guard1", "exit1"] * 4,
        "interval_start": [6.0, 6.0, 8.0, 8.0, 10.0, 10.0, 12.0, 12.0],
        "bytes_read": [10**9] * 4 + [2048, 4096, 6144, 8192],
        "bytes_written": [10**9] * 4 + [4096, 8192, 12288, 16384],
        "queued_cells": [999] * 4 + [1, 2, 3, 4],
        "bucket_empty_s": [2.0] * 4 + [0.0, 0.5, 1.0, 0.5],
    }
    res = Results.from_runs([run], config='[experiment]\nname = "fake"\nwarmup = "10 s"\nmetrics_interval = "2 s"\n')
    t = relay_table(res)
    assert t.loc["guard1", "written (KiB/s)"] == pytest.approx((4096 + 12288) / 2 / 2 / 1024)
    assert t.loc["exit1", "read (KiB/s)"] == pytest.approx((4096 + 8192) / 2 / 2 / 1024)
    assert t.loc["guard1", "queued cells (max)"] == 3
    assert t.loc["exit1", "bucket empty (%)"] == pytest.approx(100 * 0.5 / 2)
    # One interval after the warm-up: still per 2 s, from the config (no spacing to read).
    run["relays"] = {k: v[:2] + v[4:6] for k, v in run["relays"].items()}
    one = relay_table(Results.from_runs([run], config=res.config))
    assert one.loc["guard1", "written (KiB/s)"] == pytest.approx(4096 / 2 / 1024)
    # Nothing after the warm-up: no table.
    run["relays"] = {k: v[:2] for k, v in run["relays"].items()}
    assert relay_table(Results.from_runs([run], config=res.config)).empty


def test_wait_split_is_cell_seconds_over_cells_per_relay_and_pooled():
    import pandas as pd

    from onionlab import stats

    relays = pd.DataFrame(
        {
            "relay": ["a", "a", "b", "a"],
            "interval_start": [0.0, 1.0, 1.0, 2.0],
            "cells_queued": [100, 200, 50, 0],
            "queue_wait_cell_s": [9.0, 2.0, 0.5, 1.0],
            "outbuf_wait_cell_s": [9.0, 0.4, 0.0, 0.0],
            "wire_wait_cell_s": [9.0, 4.0, 1.0, 0.0],
            "kernel_wait_cell_s": [0.5, 0.2, 0.2, 0.0],
            "link_wait_cell_s": [0.5, 0.8, 0.8, 0.0],
            "unread_wait_cell_s": [8.0, 3.0, 0.0, 0.0],
        }
    )
    got = stats.wait_split(relays, start=1.0).set_index("relay")
    # a from 1 s: 200 cells, 3 / 0.4 / 4 cell-seconds -> 15 / 2 / 20 ms per cell.
    # The wire's 20 ms at a: 1 ms in the kernel, 4 on the link, 15 unread.
    assert got.loc["a"].tolist() == pytest.approx([200, 15.0, 2.0, 20.0, 37.0, 1.0, 4.0, 15.0])
    assert got.loc["b"].tolist() == pytest.approx([50, 10.0, 0.0, 20.0, 30.0, 4.0, 16.0, 0.0])
    pooled = stats.wait_split(relays, start=1.0, by=())
    assert pooled.iloc[0].tolist() == pytest.approx([250, 14.0, 1.6, 20.0, 35.6, 1.6, 6.4, 12.0])
    with pytest.raises(ValueError, match="wait columns"):
        stats.wait_split(relays.drop(columns=["wire_wait_cell_s"]))


def test_proportion_intervals_match_newcombes_worked_example():
    """Newcombe (1998), "Interval estimation for the difference between independent
    proportions", example (a): 56/70 against 48/80, method 10 gives 0.0524 to 0.3339, built
    from the Wilson intervals (56/70: 0.6918 to 0.8770). At 0 and 1 the Wilson interval
    stays in [0, 1] and is not a point."""
    lo, hi = stats.difference_ci95(56, 70, 48, 80)
    assert (lo, hi) == (pytest.approx(0.0524, abs=5e-4), pytest.approx(0.3339, abs=5e-4))
    assert stats.wilson_ci95(56, 70) == (pytest.approx(0.6918, abs=5e-4), pytest.approx(0.8770, abs=5e-4))
    assert stats.wilson_ci95(0, 10)[0] == 0.0 and 0.25 < stats.wilson_ci95(0, 10)[1] < 0.3
    assert stats.wilson_ci95(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="wilson_ci95: need 0 <= successes <= n and n >= 1, got 3 of 2"):
        stats.wilson_ci95(3, 2)


def test_design_effect_hand_worked_and_the_clustered_interval_built_on_it():
    """Ten clusters of ten trials, all ten successes in one: p = 0.1 over n = 100. The
    cluster-robust variance is (9^2 + 9 x 1^2) / 100^2 = 0.009 against the binomial
    0.1 x 0.9 / 100 = 0.0009: a design effect of 10, so the 100 trials count as 10. One
    success per cluster varies less than binomial trials would, and the floor keeps it at
    1; so do a proportion at 0 or 1 and a single cluster. Trials of one cluster each give
    Newcombe's interval."""
    clumped, spread = [10] + [0] * 9, [1] * 10
    assert stats.design_effect(clumped, [10] * 10) == pytest.approx(10.0)
    assert stats.design_effect(spread, [10] * 10) == 1.0
    assert stats.design_effect([0] * 10, [10] * 10) == stats.design_effect([10] * 10, [10] * 10) == stats.design_effect([3], [10]) == 1.0
    lo, hi = stats.clustered_difference_ci95(clumped, [10] * 10, [0] * 10, [9] * 10)
    assert (lo, hi) == pytest.approx(stats._newcombe(0.1, 10.0, 0.0, 90))
    assert stats.clustered_difference_ci95([1] * 56 + [0] * 14, [1] * 70, [1] * 48 + [0] * 32, [1] * 80) == pytest.approx(stats.difference_ci95(56, 70, 48, 80))
    with pytest.raises(ValueError, match="design_effect: need as many hits as trials"):
        stats.design_effect([3, 1], [2, 1])
    with pytest.raises(ValueError, match="clustered_difference_ci95: group 2 has no trials"):
        stats.clustered_difference_ci95([1], [2], [0], [0])
    # A cap on the effective trials binds where it is below n / design effect.
    assert stats.clustered_difference_ci95([1] * 10, [10] * 10, [0], [90], max_effective=(None, 30)) == pytest.approx(stats._newcombe(0.1, 100, 0.0, 30))
    assert stats.clustered_difference_ci95([1] * 10, [10] * 10, [0], [90], max_effective=(1000, 1000)) == pytest.approx(stats.difference_ci95(10, 100, 0, 90))
    with pytest.raises(ValueError, match="group 2's max_effective must be at least 1, got 0"):
        stats.clustered_difference_ci95([1], [2], [0], [3], max_effective=(None, 0))
    with pytest.raises(ValueError, match="design_effect: need as many hits as trials"):
        stats.design_effect([float("nan")], [2])


def test_t975_is_students_up_to_30_degrees_of_freedom_and_the_normals_beyond():
    """Textbook two-sided 95 % quantiles: 12.706 for 1 degree of freedom, 2.776 for 4
    (five seeds), 2.145 for 14 (fifteen), 2.042 for 30, the table's last; 1.96 from 31."""
    assert [stats.t975(d) for d in (1, 4, 14, 30, 31)] == [12.706, 2.776, 2.145, 2.042, 1.96]
    with pytest.raises(ValueError, match="dof: must be at least 1, got 0"):
        stats.t975(0)


def test_mean_ci95_is_the_mean_with_students_half_width():
    """0, 0 and 3 (NaN left out): mean 1, sample sd sqrt(3), t(2) 4.303, half-width
    4.303 x sqrt(3) / sqrt(3) = 4.303. One value: its mean, no half-width."""
    mean, half = stats.mean_ci95([0.0, float("nan"), 0.0, 3.0])
    assert mean == pytest.approx(1.0) and half == pytest.approx(4.303)
    mean, half = stats.mean_ci95([2.5])
    assert mean == 2.5 and math.isnan(half)


def test_submodules_load_on_first_use():
    # `import onionlab; onionlab.stats...` as the docs write it, in a fresh interpreter
    # (here every submodule is already imported, which would hide the failure).
    import subprocess
    import sys

    code = "import onionlab; onionlab.stats.byte_latency; onionlab.report.relay_table; print(set(dir(onionlab)) >= {'stats', 'sweep'})"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


def test_compare_prints_counts_whole_and_missing_values_as_a_dash(fake_results, tmp_path):
    from onionlab.compare import format_table
    from onionlab.report import report

    web_only = Results.from_runs([fake_run(3, classes=(("web", 320 * 1024, 1.0),))], "")
    web_only.source = str(tmp_path / "webonly")
    table = summary_table([fake_results, web_only])
    assert table["bulk downloads"].dtype == np.float64, "the returned table stays numeric"
    text = format_table(table)
    row = next(l for l in text.splitlines() if l.startswith("bulk downloads"))
    assert row.split()[2:] == ["40", "-"], row  # 20 per seed over two seeds; none without the class
    seeds = next(l for l in text.splitlines() if l.startswith("Seeds"))
    assert seeds.split()[1:] == ["2", "1"], seeds
    page = report([fake_results, web_only], tmp_path / "r.html").read_text()
    assert "<NA>" not in page and "&lt;NA&gt;" not in page and "<td>40</td>" in page
