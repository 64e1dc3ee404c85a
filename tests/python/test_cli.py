"""The command line's argument handling and error reporting (the runner is stubbed where a
simulation would be needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import onionlab
import onionlab.runner
from onionlab.cli import main

from conftest import TINY


@pytest.fixture
def captured_run(monkeypatch, fake_results):
    calls = []

    def fake(path, seeds=None, out=None, jobs=None, progress=False, ray_address=None):
        calls.append(dict(path=path, seeds=seeds, out=out, jobs=jobs, progress=progress, ray_address=ray_address))
        return fake_results

    monkeypatch.setattr(onionlab.runner, "run", fake)
    return calls


def test_run_seeds_n_counts_from_the_configs_first_seed(tmp_path, captured_run, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY.read_text().replace("seeds = [1]", "seeds = [7, 9]"))
    assert main(["run", str(cfg), "-o", str(tmp_path / "o"), "--seeds", "3", "--no-progress"]) == 0
    assert captured_run[-1]["seeds"] == [7, 8, 9]
    assert captured_run[-1]["progress"] is False
    assert "web" in capsys.readouterr().out


def test_run_explicit_seeds_jobs_and_ray(tmp_path, captured_run):
    assert main(["run", str(TINY), "-o", str(tmp_path), "--seed", "4", "5", "--seed", "11", "--jobs", "2", "--ray", "auto"]) == 0
    c = captured_run[-1]
    assert c["seeds"] == [4, 5, 11] and c["jobs"] == 2 and c["ray_address"] == "auto" and c["progress"] is True
    assert main(["run", str(TINY), "-o", str(tmp_path)]) == 0
    assert captured_run[-1]["seeds"] is None


def test_seeds_and_seed_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", str(TINY), "-o", str(tmp_path), "--seeds", "2", "--seed", "1"])
    assert e.value.code == 2


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--jobs", "0"]])
def test_bad_counts_are_errors(tmp_path, captured_run, capsys, argv):
    assert main(["run", str(TINY), "-o", str(tmp_path)] + argv) == 2
    assert "must be at least 1" in capsys.readouterr().err
    assert not captured_run


@pytest.fixture
def no_runs(monkeypatch):
    """Any run a test's command starts fails the test: refusals must come first."""

    def no_run(*a, **k):
        raise AssertionError("a run started")

    monkeypatch.setattr(onionlab.runner, "run_jobs", no_run)


@pytest.mark.parametrize(
    "argv, named",
    [
        # Each was once accepted: EWMA's --seeds 0 or -1 ran one seed, the reproductions'
        # --jobs 0 or -3 meant "the CPUs", generate wrote an experiment it could not run.
        (["reproduce", "ewma", "--quick", "--seeds", "0"], "--seeds"),
        (["reproduce", "ewma", "--seeds", "-1"], "--seeds"),
        (["reproduce", "ewma", "--jobs", "0"], "--jobs"),
        (["reproduce", "tortoise", "--jobs", "0"], "--jobs"),
        (["reproduce", "predictor", "--jobs", "-3"], "--jobs"),
        (["reproduce", "throttling", "--jobs", "0"], "--jobs"),
        (["reproduce", "predictor", "--random-duration", "0 s"], "--random-duration"),
        (["reproduce", "predictor", "--lead", "30"], "--lead"),
        (["reproduce", "predictor", "--random-duration", "5 s"], "--random-lead"),
        (["reproduce", "throttling", "--duration", "-3"], "--duration"),
        (["reproduce", "throttling", "--warmup", "banana"], "--warmup"),
        (["reproduce", "throttling", "--warmup", "30 min"], "--warmup"),
        (["reproduce", "throttling", "--sweep-duration", "1 min"], "--sweep-warmup"),
        (["reproduce", "tortoise", "--duration", "3 min"], "--warmup"),
        (["generate", "--duration", "banana"], "--duration"),
        (["generate", "--seed", "-1"], "--seed"),
        (["generate", "--warmup", "-1 s"], "--warmup"),
        (["generate", "--duration", "1 min", "--warmup", "2 min"], "--warmup"),
        # A run's last part without a row in a metrics table the command writes or reads.
        (["generate", "--duration", "90.5 s"], "--duration"),
        (["generate", "--snapshot", "--capacity-from"], "--capacity-from"),
        (["reproduce", "throttling", "--duration", "90 s", "--warmup", "30 s"], "--duration"),
        (["reproduce", "predictor", "--duration", "7.55 s"], "--duration"),
        (["reproduce", "tortoise", "--duration", "300.5 s"], "--duration"),
        # --quick sets only what was not given: a warm-up longer than the given run is refused,
        # not replaced by --quick's (it once ran 6 minutes with a 1-minute warm-up unasked).
        (["reproduce", "tortoise", "--quick", "--only", "E0", "--duration", "1 min", "--warmup", "2 min"], "--warmup"),
        (["reproduce", "throttling", "--quick", "--duration", "2 min", "--warmup", "2 min"], "--warmup"),
    ],
)
def test_bad_options_are_refused_naming_the_option_before_anything_runs(tmp_path, capsys, no_runs, argv, named):
    try:
        code = main(argv + ["-o", str(tmp_path / "out")])
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists(), "a refused command leaves no output directory behind"


def test_a_directory_or_device_is_not_a_config_file(tmp_path, capsys):
    # Once reported as "no such config file", which a path that exists is not.
    for argv in (["show-config", str(tmp_path)], ["check", "/dev/null"], ["sweep", str(tmp_path), "-o", str(tmp_path / "s"), "--vary", "tor.circ_window=100,200"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "not a config file" in err and "Traceback" not in err, err


def test_an_output_path_that_is_a_file_fails_before_anything_runs(tmp_path, capsys, no_runs):
    # Once found only when the results were written, after the whole simulation.
    f = tmp_path / "afile"
    f.write_text("")
    for argv in (
        ["run", str(TINY), "--no-progress"],
        ["sweep", str(TINY), "--vary", "tor.circ_window=100,200", "--no-progress"],
        ["reproduce", "ewma", "--quick"],
        ["generate"],
    ):
        assert main(argv + ["-o", str(f)]) == 2, argv
        err = capsys.readouterr().err
        assert f"--output: {f} exists and is not a directory" in err, err
    with pytest.raises(NotADirectoryError, match="out: .* exists and is not a directory"):
        onionlab.runner.run(TINY, seeds=[1], out=f)


def test_a_failed_command_removes_only_the_empty_directory_it_created(tmp_path, capsys):
    bad = ["reproduce", "throttling", "--warmup", "30 min", "-o"]
    kept = tmp_path / "existing"
    kept.mkdir()
    assert main(bad + [str(kept)]) == 2
    assert kept.is_dir(), "a directory that was there before stays"
    assert main(bad + [str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()
    # From Python too: a sweep whose runs fail (no path: every guard weighs 0) leaves none.
    zero_guards = "network.bandwidth_weights={" + ",".join(f"{k}={0 if k.startswith('Wg') else 10000}" for k in
                                                            ["Wgg", "Wgm", "Wgd", "Wmg", "Wmm", "Wme", "Wmd", "Weg", "Wem", "Wee", "Wed"]) + "}"
    with pytest.raises(ValueError, match="no path"):
        onionlab.run_sweep(TINY, {"tor.circ_window": [100, 200]}, seeds=[1], out=tmp_path / "sw", overrides=[zero_guards])
    assert not (tmp_path / "sw").exists()
    assert main(["run", str(TINY), "-o", str(tmp_path / "ok"), "--no-progress"]) == 0
    assert (tmp_path / "ok" / "summary.json").is_file()


def test_missing_inputs_exit_2_cleanly(tmp_path, capsys):
    for argv in (
        ["check", str(tmp_path / "nope.toml")],
        ["run", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "o")],
        ["plot", str(tmp_path / "nope")],
        ["compare", str(tmp_path / "a"), str(tmp_path / "b")],
        ["report", str(tmp_path / "a"), "-o", str(tmp_path / "r.html")],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("onionlab: error:") and "Traceback" not in err, err


def test_check_and_show_config(capsys):
    assert main(["check", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: tiny: 6 relays, 22 clients") and "seeds [1]" in out
    assert main(["show-config", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert 'metrics_interval = "1 s"' in out and "[[relays]]" in out


def test_check_lists_every_problem_without_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.read_text().replace("count = 20", "count = -1").replace('workload = "bulk"', 'workload = "bulkk"'))
    for cmd in ("check", "show-config", "run"):
        argv = [sys.executable, "-m", "onionlab", cmd, str(bad)] + (["-o", str(tmp_path / "o")] if cmd == "run" else [])
        p = subprocess.run(argv, capture_output=True, text=True)
        assert p.returncode == 1, (cmd, p.stderr)
        assert "2 problems" in p.stderr and "clients[0].count" in p.stderr and "clients[1].workload" in p.stderr
        assert "hint: did you mean `bulk`?" in p.stderr
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()


def test_plot_compare_report_commands(fake_results, tmp_path, capsys):
    fake_results.write(tmp_path / "a")
    fake_results.write(tmp_path / "b")
    assert main(["plot", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "ttfb.png").is_file() and (tmp_path / "a" / "ttlb.png").is_file()
    assert main(["plot", str(tmp_path / "a"), "-o", str(tmp_path / "figs")]) == 0
    assert (tmp_path / "figs" / "ttlb.png").is_file()
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "Data (GiB)" in out and "Web (%)" in out and "web ttlb median (s)" in out
    assert (tmp_path / "cmp" / "compare.csv").is_file()
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "r.html")]) == 0
    assert "data:image/png;base64," in (tmp_path / "r.html").read_text()
    # A sweep directory: plot says what to run instead (compare and report take it).
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "sweep.json").write_text("{}")
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "sw")]) == 2
    err = capsys.readouterr().err
    assert "a sweep directory" in err and f"onionlab compare {tmp_path / 'sw'} -o OUTDIR" in err, err


def test_ray_missing_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["run", str(TINY), "-o", str(tmp_path / "o"), "--ray", "auto", "--no-progress"]) == 2
    assert "pip install" in capsys.readouterr().err


def test_reproductions_take_a_ray_address(tmp_path, capsys, monkeypatch):
    """--ray reaches the batch runner of every reproduction; without ray it is a clear error."""
    import onionlab.runner

    seen = []

    def run_jobs(jobs, workers=None, progress=False, ray_address=None, on_result=None, resolved=None):
        seen.append(ray_address)
        raise RuntimeError("stop here")

    monkeypatch.setattr(onionlab.runner, "run_jobs", run_jobs)
    monkeypatch.setattr(onionlab.runner, "_check_ray_address", lambda address: None)  # no cluster at "head"
    for paper in ("tortoise", "throttling", "predictor"):
        assert main(["reproduce", paper, "--quick", "-o", str(tmp_path / paper), "--ray", "ray://head:10001"]) == 2
        assert "stop here" in capsys.readouterr().err
    assert seen == ["ray://head:10001"] * 3
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["reproduce", "ewma", "--quick", "-o", str(tmp_path / "ewma"), "--ray", "auto"]) == 2
    assert "pip install" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--quick", "-o", str(tmp_path / "thr"), "--ray", "local"]) == 2
    assert "pip install" in capsys.readouterr().err
    assert not (tmp_path / "thr").exists(), "refused before the output directory and its configs"


def test_an_unreachable_ray_address_is_refused_at_once(tmp_path, capsys):
    """ray retries an address where nothing listens for minutes; onionlab asks the port first."""
    import socket

    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port, dead = listening.getsockname()[1], closed.getsockname()[1]
        from onionlab.runner import _check_ray_address

        for ok in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}", "local", "auto"):
            _check_ray_address(ok)
        for bad, says in ((f"127.0.0.1:{dead}", "nothing answers"), ("head", "is not"), ("head:port", "is not")):
            with pytest.raises(RuntimeError, match=says):
                _check_ray_address(bad)
        out = tmp_path / "thr"
        assert main(["reproduce", "throttling", "--quick", "-o", str(out), "--ray", f"127.0.0.1:{dead}"]) == 2
        assert f"ray: nothing answers at 127.0.0.1:{dead}" in capsys.readouterr().err
        assert not out.exists(), "refused before the output directory"
        assert main(["run", str(TINY), "-o", str(tmp_path / "run"), "--ray", f"ray://127.0.0.1:{dead}", "--no-progress"]) == 2
        assert "nothing answers" in capsys.readouterr().err


def test_jobs_sizes_a_local_ray_cluster_and_is_refused_for_a_running_one(tmp_path, capsys, monkeypatch):
    """--jobs with --ray local becomes the new cluster's CPUs (ray took them all, so --jobs 1
    still ran every seed at once); with the address of a running cluster it cannot apply."""
    import types

    inits = []
    fake = types.SimpleNamespace(
        is_initialized=lambda: False,
        init=lambda **kw: inits.append(kw) or (_ for _ in ()).throw(RuntimeError("stop after init")),
    )
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert main(["run", str(TINY), "-o", str(tmp_path / "a"), "--seeds", "2", "--jobs", "1", "--ray", "local", "--no-progress"]) == 2
    assert "stop after init" in capsys.readouterr().err
    assert inits and inits[0]["address"] == "local" and inits[0]["num_cpus"] == 1
    assert main(["run", str(TINY), "-o", str(tmp_path / "b"), "--jobs", "2", "--ray", "ray://head:10001", "--no-progress"]) == 2
    assert "jobs: has no effect on the ray cluster at 'ray://head:10001'" in capsys.readouterr().err
    assert len(inits) == 1, "refused before connecting"


def test_quick_keeps_the_options_given_beside_it(tmp_path, monkeypatch):
    """--quick sets each of its values only where the command line left the option to it."""
    import onionlab.reproduce.predictor as predictor

    seen = []

    def fake_run_many(exps, out, jobs=None, **kw):
        seen.extend(exps)
        raise RuntimeError("stop after the configs")

    monkeypatch.setattr(predictor, "run_many", fake_run_many)
    argv = ["reproduce", "predictor", "--quick", "--seeds", "2", "--circuits", "none", "--fuzziness", "none", "--mixed-circuits", "0",
            "-o", str(tmp_path / "p")]
    assert main(argv) == 2
    assert seen and {name.split("-")[0] for name, _, _ in seen} == {"toy"}, "no random, fuzziness or mixed networks"
    assert all(seeds == [1, 2] for _, _, seeds in seen)
    assert all('duration = "10 s"' in path.read_text() for _, path, _ in seen), "--quick's duration where none was given"

