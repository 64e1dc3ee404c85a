"""End to end over the real simulator: running the tiny example through the API and the CLI,
config validation errors, the resolved-config round trip, determinism, and the figures,
comparison and report of real results."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import onionlab
from onionlab import _core, stats
from onionlab.compare import compare
from onionlab.config import parse
from onionlab.plot import plot
from onionlab.report import report

from conftest import TINY, needs_core

PNG = b"\x89PNG\r\n\x1a\n"

# ------------------------------------------------------------------ running


@needs_core
def test_api_run_tiny(tiny_dir):
    res = onionlab.load(tiny_dir)
    d = res.downloads
    assert len(d) > 50 and set(d["class"]) == {"web", "bulk"} and set(d["seed"]) == {1, 2}
    assert len(res.relays) > 0 and set(res.relays["relay"]) >= {"guard1", "exit1"}
    assert res.summary["seeds"] == [1, 2] and len(res.summary["runs"]) == 2
    web = res.summary["classes"]["web"]
    ttlb, ttfb = web["time_to_last_byte_recv"]["median"], web["time_to_first_byte_recv"]["median"]
    # 320 KiB over an idle-ish network: a few seconds at most.
    assert 0.3 < ttlb < 10.0
    assert 0 < ttfb < ttlb
    ok = d.dropna(subset=["ttlb"])
    assert (ok["ttfb"] <= ok["ttlb"]).all()
    assert (ok["start"] >= res.summary["warmup_seconds"]).all()
    bulk = res.summary["classes"]["bulk"]["time_to_last_byte_recv"]["median"]
    assert bulk > ttlb
    # The pooled counts agree with the simulator's own per-seed counts.
    for cls in ("web", "bulk"):
        assert res.summary["classes"][cls]["downloads"] == sum(r["classes"][cls]["downloads"] for r in res.summary["runs"])
        assert res.summary["classes"][cls]["bytes"] == sum(r["classes"][cls]["bytes"] for r in res.summary["runs"])
        for k in ("errors", "unfinished"):
            assert res.summary["classes"][cls][k] == sum(r["classes"][cls][k] for r in res.summary["runs"]), (cls, k)
    # Both bulk clients fetch back to back: each seed ends with two bulk downloads cut short,
    # recorded with what they had received.
    assert res.summary["classes"]["bulk"]["unfinished"] == 4
    cut = d[d["error"] == stats.UNFINISHED]
    assert len(cut) == res.summary["unfinished"] and cut["ttlb"].isna().all()
    assert ((0 <= cut["received"]) & (cut["received"] < cut["size"])).all()
    assert (ok["received"] == ok["size"]).all()
    assert 'seeds = [1, 2]' in res.config


@needs_core
def test_cli_run_tiny_and_determinism(tmp_path, tiny_dir):
    """The CLI (in-process, one seed) and the API (worker processes) give identical files."""
    out = tmp_path / "cli"
    p = subprocess.run(
        [sys.executable, "-m", "onionlab", "run", str(TINY), "-o", str(out), "--seed", "1", "--no-progress"],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "web" in p.stdout and f"wrote {out}" in p.stdout
    a = onionlab.run(TINY, seeds=[1], out=tmp_path / "api", jobs=1)
    for f in ("downloads.parquet", "relays.parquet", "summary.json", "config.toml"):
        assert (out / f).read_bytes() == (tmp_path / "api" / f).read_bytes(), f
    assert len(a.downloads) > 0
    # The same seed inside a multi-seed run gives the same rows.
    both = onionlab.load(tiny_dir).downloads
    one = both[both["seed"] == 1].reset_index(drop=True)
    assert one.equals(onionlab.load(out).downloads)


@needs_core
def test_channel_table_is_written_and_read_back(tmp_path):
    """`experiment.channel_metrics_interval` adds channels.parquet: relay-to-relay channel
    ends, both ends of a channel present, bytes a relay wrote to relays within what the
    relay table says it wrote, and the same rows after a write/load round trip."""
    text = TINY.read_text(encoding="utf-8").replace('seeds = [1]', 'seeds = [1]\nchannel_metrics_interval = "20 s"')
    cfg = tmp_path / "tiny-channels.toml"
    cfg.write_text(text, encoding="utf-8")
    res = onionlab.run(cfg, seeds=[2], out=tmp_path / "out", jobs=1)
    ch = res.channels
    assert len(ch) > 0 and (tmp_path / "out" / "channels.parquet").is_file()
    relays = set(res.relays["relay"])
    assert set(ch["relay"]) <= relays and set(ch["peer"]) <= relays and (ch["relay"] != ch["peer"]).all()
    assert sorted(ch["interval_start"].unique()) == [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    ends = set(zip(ch["relay"], ch["peer"], ch["initiator"]))
    assert all((peer, relay, not init) in ends for relay, peer, init in ends), "both ends of each channel"
    assert ((ch["active_circuits"] <= ch["circuits"]) & (ch["queued_cells"] >= ch["active_circuits"])).all()
    to_relays = ch.groupby("relay")["bytes_written"].sum()
    written = res.relays.groupby("relay")["bytes_written"].sum()
    assert (to_relays <= written[to_relays.index]).all() and to_relays.sum() > 0
    back = onionlab.load(tmp_path / "out").channels
    pd.testing.assert_frame_equal(back, ch, check_dtype=False)
    # Without the setting there is no table and no file.
    plain = onionlab.run(TINY, seeds=[2], out=tmp_path / "plain", jobs=1)
    assert plain.channels.empty and not (tmp_path / "plain" / "channels.parquet").exists()


@needs_core
def test_braids_example_runs_and_reports_its_ledger_and_class_delays(tmp_path):
    """examples/braids.toml through the API: the ticket ledger balances, HPD's mean delays
    fall in the class order, and paying web clients finish sooner than legacy ones."""
    res = onionlab.run(TINY.parent / "braids.toml", out=tmp_path / "braids", jobs=1)
    k = res.summary["runs"][0]["counters"]
    held = k["braids_tickets_held_by_clients"] + k["braids_tickets_held_by_relays"]
    assert k["braids_tickets_issued_free"] == held + k["braids_tickets_taxed"] + k["braids_tickets_earned_unused"]
    assert k["braids_tickets_spent"] > 0 and k["braids_tickets_earned_by_operators"] > 0
    delay = {c: k[f"hpd_delay_us_{c}"] / k[f"hpd_cells_{c}"] for c in ("low_latency", "high_throughput", "normal")}
    assert delay["low_latency"] < delay["high_throughput"] < delay["normal"], delay
    med = res.downloads.dropna(subset=["ttlb"]).groupby("class")["ttlb"].median()
    assert med["web"] < med["legacy"] and med["web-relay"] < med["legacy"], med
    assert 'service = "low-latency"' in res.config and "[mechanisms.braids]" in res.config


@needs_core
def test_progress_line_and_seeds_override(tmp_path, capsys):
    res = onionlab.run(TINY, seeds=[3], progress=True)
    err = capsys.readouterr().err
    assert "100.0%" in err and "events/s" in err and "ETA" in err
    assert set(res.downloads["seed"]) == {3}


def test_bad_seeds_argument():
    with pytest.raises(ValueError, match="seeds"):
        onionlab.run(TINY, seeds=[-1])
    with pytest.raises(ValueError, match="duplicates"):
        onionlab.run(TINY, seeds=[1, 1])


# ------------------------------------------------------------------ validation

BASE = TINY.read_text()

BAD = {
    "unknown key": (BASE.replace('duration = "2 min"', 'duration = "2 min"\ndurration = "1 s"'), "experiment.durration", "duration"),
    "bad unit": (BASE.replace('bandwidth = "2 MiB/s"', 'bandwidth = "2 Mfoo/s"', 1), "relays[0].bandwidth", "unit"),
    "bare number": (BASE.replace('bandwidth = "2 MiB/s"', "bandwidth = 2", 1), "relays[0].bandwidth", "bare number"),
    "negative rate": (BASE.replace('bandwidth = "2 MiB/s"', 'bandwidth = "-2 MiB/s"', 1), "relays[0].bandwidth", "negative"),
    "missing latency file": (
        BASE.replace('latency = { constant = "20 ms" }', 'latency = { matrix = "no-such-latency.csv" }'),
        "network.latency.matrix",
        "no-such-latency.csv",
    ),
    "undefined workload": (BASE.replace('workload = "bulk"', 'workload = "bulkk"'), "clients[1].workload", "bulkk"),
    "float seed": (BASE.replace("seeds = [1]", "seeds = [1.5]"), "experiment.seeds[0]", "integer"),
    "negative count": (BASE.replace("count = 20", "count = -3"), "clients[0].count", "negative"),
    "service without braids": (BASE.replace("count = 20", 'count = 20\nservice = "low-latency"'), "clients[0].service", "mechanisms.braids"),
    "predictor with ewma": (
        BASE.replace('scheduler = "round-robin"', 'scheduler = "ewma"\npredictor = { dt = "40 ms" }'),
        "mechanisms.scheduler",
        "PredicTor",
    ),
    "hpd f out of range": (
        BASE.replace('scheduler = "round-robin"', 'scheduler = { kind = "hpd", f = 1.5 }'),
        "mechanisms.scheduler.f",
        "between 0 and 1",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_validation_errors_name_the_field(tmp_path, case):
    text, field, word = BAD[case]
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(onionlab.ConfigError) as e:
        onionlab.check_config(cfg)
    assert isinstance(e.value, ValueError)
    problems = e.value.args[1]
    assert [p["path"] for p in problems] == [field]
    assert word in problems[0]["message"] + (problems[0]["hint"] or "")
    assert field in str(e.value)
    assert str(e.value).startswith(f"{len(problems)} problem"), "str(err) is the message, not the args tuple"
    assert e.value.problems == problems
    with pytest.raises(onionlab.ConfigError, match=re.escape(field)):
        onionlab.run(cfg, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ resolved-config round trip

SIZE_UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
PARSE_SIZE_UNITS = {**SIZE_UNITS, "TB": 1000**4, "TiB": 1024**4}
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
PREFIX = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def size_bytes(s: str) -> float:
    v, u = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]+)\s*", s).groups()
    return float(v) * PARSE_SIZE_UNITS[u]


def seconds(s: str) -> float:
    v, u = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-zµ]+)\s*", s).groups()
    return float(v) * TIME_UNITS[u]


def rate_bytes_per_s(s: str) -> float:
    v, p, kind = re.fullmatch(r"\s*([0-9.]+)\s*([KkMGT]i?|)(bit|B)(?:/s|ps)?\s*", s).groups()
    return float(v) * PREFIX[p] / (8 if kind == "bit" else 1)


def sized(units: dict, lo: int, hi: int):
    return st.tuples(st.integers(lo, hi), st.sampled_from(sorted(units)))


@st.composite
def configs(draw):
    dur_s = draw(st.integers(10, 4 * 3600))
    dur = draw(st.sampled_from([f"{dur_s} s", f"{dur_s * 1000} ms"] + ([f"{dur_s // 60} min"] if dur_s % 60 == 0 else [])))
    warm_ms = draw(st.integers(0, dur_s * 1000 - 1))
    warm = draw(st.sampled_from([f"{warm_ms} ms"] + ([f"{warm_ms // 1000} s"] if warm_ms % 1000 == 0 else [])))
    # A metrics interval must divide the run (a row covers a whole interval).
    interval = draw(st.sampled_from([(n, u) for u, ms in (("ms", 1), ("s", 1000)) for n in range(1, 10) if (dur_s * 1000) % (n * ms) == 0]))
    seeds = draw(st.lists(st.integers(0, 2**31), min_size=1, max_size=4, unique=True))
    web_count, bulk_count = draw(st.integers(1, 500)), draw(st.integers(1, 50))
    servers = draw(st.integers(1, 100))
    web_size, bulk_size = draw(sized(SIZE_UNITS, 1, 4096)), draw(sized(SIZE_UNITS, 1, 4096))
    bw = draw(st.tuples(st.integers(1, 1000), st.sampled_from(["KiB/s", "MiB/s", "Mbit", "Kbit", "KBps", "MB/s"])))
    return dict(
        duration=dur, warmup=warm, interval=f"{interval[0]} {interval[1]}", seeds=seeds, web_count=web_count,
        bulk_count=bulk_count, servers=servers, web_size=f"{web_size[0]} {web_size[1]}",
        bulk_size=f"{bulk_size[0]} {bulk_size[1]}", bw=f"{bw[0]} {bw[1]}",
    )


def render(c: dict) -> str:
    text = BASE
    text = text.replace('duration = "2 min"', f'duration = "{c["duration"]}"\nmetrics_interval = "{c["interval"]}"')
    text = text.replace('warmup = "10 s"', f'warmup = "{c["warmup"]}"')
    text = text.replace("seeds = [1]", f"seeds = {c['seeds']}")
    text = text.replace("count = 20\n", "count = @WEB@\n").replace("count = 2\n", "count = @BULK@\n")
    text = text.replace("count = 4\n", "count = @SERVERS@\n")
    text = text.replace("@WEB@", str(c["web_count"])).replace("@BULK@", str(c["bulk_count"]))
    text = text.replace("@SERVERS@", str(c["servers"]))
    # Through placeholders, as the counts: a web size of "5 MiB" must not then be taken
    # for the bulk workload's default (hypothesis found that case).
    text = text.replace('size = "320 KiB"', "size = @WEBSIZE@").replace('size = "5 MiB"', "size = @BULKSIZE@")
    text = text.replace("@WEBSIZE@", f'"{c["web_size"]}"').replace("@BULKSIZE@", f'"{c["bulk_size"]}"')
    text = text.replace('bandwidth = "1536 KiB/s"', f'bandwidth = "{c["bw"]}"')
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=configs())
@example(c={"duration": "10 s", "warmup": "1 ms", "interval": "1 ms", "seeds": [0], "web_count": 1, "bulk_count": 1, "servers": 1,
            "web_size": "5 MiB", "bulk_size": "1 B", "bw": "1 KiB/s"})
def test_resolved_config_round_trips(tmp_path, c):
    path = tmp_path / "gen.toml"
    path.write_text(render(c))
    resolved = parse(_core.check_config(str(path)))
    again = tmp_path / "again.toml"
    again.write_text(_core.check_config(str(path)))
    assert parse(_core.check_config(str(again))) == resolved  # resolving is idempotent
    e = resolved["experiment"]
    assert seconds(e["duration"]) == pytest.approx(seconds(c["duration"]), rel=1e-12)
    assert seconds(e["warmup"]) == pytest.approx(seconds(c["warmup"]), rel=1e-12, abs=1e-12)
    assert seconds(e["metrics_interval"]) == pytest.approx(seconds(c["interval"]), rel=1e-12)
    assert e["seeds"] == c["seeds"]
    groups = {g["name"]: g for g in resolved["clients"]}
    assert groups["web"]["count"] == c["web_count"] and groups["bulk"]["count"] == c["bulk_count"]
    assert resolved["servers"]["count"] == c["servers"]
    assert size_bytes(resolved["workloads"]["web"]["size"]) == size_bytes(c["web_size"])
    assert size_bytes(resolved["workloads"]["bulk"]["size"]) == size_bytes(c["bulk_size"])
    middle = next(r for r in resolved["relays"] if r["name"] == "middle1")
    assert rate_bytes_per_s(middle["bandwidth"]) == pytest.approx(rate_bytes_per_s(c["bw"]), rel=1e-12)


# ------------------------------------------------------------------ figures over real results


@needs_core
def test_plot_compare_report_real(tiny_dir, tmp_path):
    paths = plot(tiny_dir, str(tmp_path / "figs") + "/")
    assert all(p.read_bytes()[:8] == PNG for p in paths)
    other = onionlab.run(TINY, seeds=[5], out=tmp_path / "seed5")
    table = compare([tiny_dir, other], out=tmp_path / "cmp")
    assert table.shape[0] == 2 and table["Web (%)"].between(0, 100).all()
    assert (tmp_path / "cmp" / "ttlb.png").read_bytes()[:8] == PNG
    page = report([tiny_dir, tmp_path / "seed5"], tmp_path / "report.html").read_text()
    assert '<img alt=\'ttlb CDF\' src="data:image/png;base64,' in page and "guard1" in page
    assert "queue wait (ms/cell)" in page and "wire wait (ms/cell)" in page
    assert "wire: unread" not in page, "the wire is split only with experiment.wire_waits"


def test_run_many_writes_each_experiment_when_its_last_seed_finishes(tmp_path, monkeypatch):
    """A reproduction stopped part-way keeps what it finished: with one worker, the first
    experiment's results are on disk before the second experiment's run comes back."""
    import onionlab.reproduce as reproduce
    import onionlab.runner as runner

    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY.read_text().replace('duration = "2 min"', 'duration = "20 s"'))
    seen = []
    real_run = runner._run_in_process

    def run_in_process(*args, **kwargs):
        seen.append({name for name in ("first", "second") if (tmp_path / "runs" / name / "summary.json").is_file()})
        return real_run(*args, **kwargs)

    monkeypatch.setattr(runner, "_run_in_process", run_in_process)
    got = reproduce.run_many([("first", cfg, [1]), ("second", cfg, [2])], tmp_path, jobs=1)
    assert seen == [set(), {"first"}]
    assert set(got) == {"first", "second"} and (tmp_path / "runs" / "second" / "summary.json").is_file()


def _state(pid: int):
    """(parent pid, state letter) of a process from /proc, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers end with their parent through Linux's PR_SET_PDEATHSIG")
def test_workers_end_when_the_process_that_started_them_is_killed():
    """A batch killed outright (SIGKILL: no cleanup runs) must not leave its workers running
    their simulations to the end."""
    import os
    import signal
    import time

    tiny = Path(__file__).resolve().parents[2] / "examples" / "tiny.toml"
    # Two seeds of ten simulated hours: minutes of work each, far longer than this test.
    script = (
        "from onionlab import runner\n"
        f"runner.run_jobs([runner.Job('long', {str(tiny)!r}, (1, 2), ('experiment.duration=10 h',))], workers=2)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def workers() -> list[int]:
        found = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and (st := _state(int(d.name))) and st[0] == parent.pid:
                try:
                    if b"spawn_main" in (d / "cmdline").read_bytes():
                        found.append(int(d.name))
                except OSError:
                    pass
        return found

    found: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(found := workers()) < 2:
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.2)
        time.sleep(1.0)  # both are inside a run now
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        alive = found
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [p for p in found if (st := _state(p)) and st[1] != "Z"]
        assert not alive, f"workers {alive} outlived their parent"
    finally:
        parent.kill()
        for p in found:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
