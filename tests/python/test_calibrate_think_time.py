"""`tools/calibrate_think_time.py`: how a relay sample's think-time median is calibrated to
table 1's vanilla split."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from onionlab.config import tomllib

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "calibrate_think_time.py"
spec = importlib.util.spec_from_file_location("calibrate_think_time", TOOL)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_the_crossing_is_interpolated_between_the_bracketing_pair():
    # The paper sample's calibration: 25.6 % at 0.8 s, 33.8 % at 1 s, 43.3 % at 1.3 s; 34.2 %
    # lies between 1 s and 1.3 s: 1 + (34.2 - 33.8) * 0.3 / 9.5 = 1.0126 s.
    assert tool.crossing([(0.8, 25.6), (1.0, 33.8), (1.3, 43.3)]) == pytest.approx(1.0126, abs=1e-4)
    assert tool.crossing([(1.0, 40.0), (2.0, 30.0)]) == pytest.approx(1.58, abs=1e-9)
    assert tool.crossing([(1.0, 20.0), (2.0, 30.0)]) is None


@pytest.mark.parametrize("text, message", [
    ("1 s", "give at least two durations"),
    ("1 s,,2 s", "give at least two durations"),
    ("1 s,fast", "'fast' is not a duration"),
    ("2 s,1 s", "the durations must increase"),
])
def test_bad_medians_are_an_error_naming_the_option(text, message):
    with pytest.raises(ValueError, match="--medians") as e:
        tool.parse_medians(text)
    assert message in str(e.value)
    r = subprocess.run([sys.executable, str(TOOL), "--sample", "paper", "--medians", text, "-o", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr


def test_each_median_gets_a_vanilla_medium_load_config_with_the_samples_settings(tmp_path):
    from onionlab import config as config_mod

    made = tool.configs(tmp_path, ["0.8 s", "1 s"], "1 min", "0 s", ["--sample", "paper"])
    assert [name for name, _ in made] == ["vanilla-medium-think-0.8s", "vanilla-medium-think-1s"]
    for (name, path), median in zip(made, ("0.8 s", "1 s")):
        config_mod.check(path)
        cfg = tomllib.loads(path.read_text())
        assert cfg["mechanisms"]["throttling"] == "none"
        assert cfg["network"]["bandwidth_weights"] == "computed-v9"
        assert {(c["name"], c["count"], c["link_down"]) for c in cfg["clients"]} == {("web", 950, "3584 KiB/s"), ("bulk", 50, "3584 KiB/s")}
        assert cfg["workloads"]["web"]["think"] == {"dist": "lognormal", "median": median, "sigma": 2.0}
        assert cfg["tor"]["path_order"] == "exit-first"
    (name, path), = tool.configs(tmp_path / "gf", ["1.8 s"], "1 min", "0 s", ["--sample", "deciles", "--path-order", "guard-first"])
    assert tomllib.loads(path.read_text())["tor"]["path_order"] == "guard-first"
    # --latency regions: the matrix beside the configs, every relay placed, as the reproduction does.
    (name, path), = tool.configs(tmp_path / "rg", ["1.7 s"], "1 min", "0 s", ["--sample", "shadow", "--latency", "regions"])
    config_mod.check(path)
    cfg = tomllib.loads(path.read_text())
    assert cfg["network"]["latency"] == {"matrix": "throttling-latency-regions.csv"} and cfg["servers"]["placement"] == [0, 1, 2, 5]
    relays = tomllib.loads((path.parent / "throttling-relays.toml").read_text())["relays"]
    assert len(relays) == 51 and all("location" in r for r in relays)


def test_a_short_calibration_runs_and_prints_each_share(tmp_path):
    r = subprocess.run(
        [sys.executable, str(TOOL), "--sample", "quantiles", "--medians", "2 s,8 s", "--seeds", "1", "--duration", "5 min", "--warmup", "1 min",
         "--jobs", "1", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("quantiles: vanilla, medium load, exit-first, seeds 1-1; target 34.2 % bulk")
    assert lines[1].startswith("  median 2 s: ") and lines[2].startswith("  median 8 s: ")
    shares = [float(l.split(": ")[1].split(" %")[0]) for l in lines[1:3]]
    assert all(0 < s < 100 for s in shares)
    assert lines[3].startswith("  crossing: ") or lines[3].startswith("  no two candidates")


def test_a_run_too_short_to_measure_is_an_error(tmp_path):
    def calibrate(duration, warmup):
        return subprocess.run(
            [sys.executable, str(TOOL), "--sample", "quantiles", "--medians", "2 s,8 s", "--seeds", "1", "--duration", duration, "--warmup", warmup,
             "--jobs", "1", "-o", str(tmp_path / duration.replace(" ", ""))],
            capture_output=True, text=True, timeout=600,
        )

    # The one minute's row starts before the warm-up ends: nothing to measure.
    r = calibrate("1 min", "30 s")
    assert r.returncode == 1 and "no data delivered after the warm-up; lengthen --duration" in r.stderr
    # Part of a minute would have no row at all: refused before anything runs.
    r = calibrate("90 s", "30 s")
    assert r.returncode == 2 and "--duration: '90 s' must be a whole multiple of 1 min" in r.stderr, r.stderr
    assert not (tmp_path / "90s").exists()
    r = calibrate("abc", "30 s")
    assert r.returncode == 2 and "argument --duration" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_capacity_scale_multiplies_every_relays_bandwidth_as_the_reproduction_does(tmp_path):
    from onionlab.reproduce.throttling.configs import RELAYS_FILE, relay_bandwidths

    def bandwidths(out):
        return relay_bandwidths(tomllib.loads((out / "configs" / RELAYS_FILE).read_text())["relays"])

    tool.configs(tmp_path / "x1", ["8 s"], "1 min", "0 s")
    tool.configs(tmp_path / "x2", ["2 s"], "1 min", "0 s", ["--capacity-scale", "2"])
    one, two = bandwidths(tmp_path / "x1"), bandwidths(tmp_path / "x2")
    assert one.keys() == two.keys() and len(one) == 50
    assert all(two[r] == pytest.approx(2 * one[r], abs=0.5) for r in one)
    r = subprocess.run([sys.executable, str(TOOL), "--sample", "paper", "--medians", "1 s,2 s", "--capacity-scale", "0", "-o", str(tmp_path / "bad")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--capacity-scale" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "bad").exists()


def test_the_reproductions_network_options_reach_the_runs(tmp_path):
    # --guards all: every relay flagged Guard, as the reproduction's network; --weights and
    # the clients' Tor options reach the config.
    (name, path), = tool.configs(
        tmp_path, ["10 s"], "1 min", "0 s",
        ["--guards", "all", "--weights", "computed", "--entry-guards", "1", "--predicted-circuits", "--cellq", "256,64"],
    )
    cfg = tomllib.loads(path.read_text())
    assert cfg["network"]["bandwidth_weights"] == "computed"
    assert cfg["tor"]["num_entry_guards"] == 1 and cfg["tor"]["predicted_circuits"] is True
    assert (cfg["tor"]["cellq_high"], cfg["tor"]["cellq_low"]) == (256, 64)
    relays = tomllib.loads((path.parent / "throttling-relays.toml").read_text())["relays"]
    assert len(relays) == 50 and all("Guard" in r["flags"] for r in relays)
    (name, path), = tool.configs(tmp_path / "consensus", ["10 s"], "1 min", "0 s")
    relays = tomllib.loads((path.parent / "throttling-relays.toml").read_text())["relays"]
    assert sum("Guard" in r["flags"] for r in relays) == 14


@pytest.mark.parametrize("args, message", [
    (["--criterion", "mean"], "--criterion: not a calibration option (it has no effect on a vanilla run)"),
    (["--think-median", "2 s"], "--think-median: not a calibration option (give the candidates as --medians)"),
    (["--attack4-guards", "0"], "--attack4-guards: not a calibration option"),
    (["--entry-guards", "0"], "--entry-guards: must be at least 1, got 0"),
    (["--relays", "nowhere.toml"], "--relays nowhere.toml: no such file"),
    (["--guards", "some"], "argument --guards: invalid choice: 'some'"),
])
def test_options_that_do_not_shape_the_run_or_are_bad_are_errors_naming_them(tmp_path, args, message):
    r = subprocess.run([sys.executable, str(TOOL), "--medians", "1 s,2 s", "-o", str(tmp_path / "out"), *args], capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_the_report_names_the_network_it_was_calibrated_on():
    a = tool.reproduction_args(["--sample", "deciles", "--guards", "all", "--path-order", "guard-first"])
    assert tool.label(["--sample", "deciles", "--guards", "all", "--path-order", "guard-first"], a) == "deciles, --guards all"
    assert tool.label([], tool.reproduction_args([])) == "quantiles"
