"""`onionlab reproduce throttling --quick`: the whole pipeline on a short run (the `quick` fixture, about 50 s), and the analysis against hand-worked cases. The whole file takes about 4 minutes on one core."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from onionlab import stats
from onionlab.cli import main


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro-throttling")
    # One axis widened, as a researcher would when a choice sits on the edge of its range.
    assert main(["reproduce", "throttling", "--quick", "-o", str(out), "--jobs", "2", "--grid", "thresh.fraction=0.1,0.2,0.4"]) == 0
    return out


def test_writes_every_output(quick):
    for f in ("table1.csv", "figure3.png", "sweep.csv", "chosen.json", "anonymity.csv", "anonymity_summary.csv",
              "anonymity_by_class.csv", "figure4a.png", "figure4b.png", "figure4c.png", "figure4c-flood.png", "summary.json", "attack3.csv", "attack4.csv", "attack4_circuits.csv", "channels.csv", "throttle_state.csv", "findings.csv", "configs/medium-flag.toml"):
        assert (quick / f).is_file(), f
    channels = pd.read_csv(quick / "channels.csv")
    assert set(channels["algorithm"]) == {"vanilla", "static", "split", "flag", "thresh"}
    assert (channels.groupby("algorithm").size() <= 10).all() and (channels["relay"] != channels["peer"]).all()
    chosen = json.loads((quick / "chosen.json").read_text())
    assert set(chosen) == {"vanilla", "static", "split", "flag", "thresh"}


def test_throttle_state_says_whom_each_algorithm_throttles(quick):
    st = pd.read_csv(quick / "throttle_state.csv").set_index(["load", "algorithm"])
    assert len(st) == 15
    vanilla = st.xs("vanilla", level="algorithm")
    assert (vanilla[["guard_samples_throttling_pct", "throttled_connections_per_guard", "web_throttled_pct", "bulk_throttled_pct"]] == 0).all().all()
    # Bit-splitting and static throttle every client connection, all the time.
    for alg in ("split", "static"):
        rows = st.xs(alg, level="algorithm")
        assert (rows[["guard_samples_throttling_pct", "web_throttled_pct", "bulk_throttled_pct"]] == 100).all().all(), alg
    # Only threshold has a floor; its share is a percentage.
    assert st.xs("thresh", level="algorithm")["at_floor_pct"].between(0, 100).all()
    assert st.drop(index="thresh", level="algorithm")["at_floor_pct"].isna().all()
    s = json.loads((quick / "summary.json").read_text())
    assert len(s["throttle_state"]) == 15


def test_table1_has_the_papers_numbers_beside_ours_and_throttling_cuts_the_bulk_share(quick):
    t = pd.read_csv(quick / "table1.csv")
    assert len(t) == 15
    assert t.loc[(t.load == "medium") & (t.algorithm == "vanilla"), "paper_bulk_pct"].item() == 34.2
    # The mean that counts cut-short web downloads at their elapsed time is there (the run's
    # end is known), besides the mean over finished ones.
    assert (t["web_time_mean"] > 0).all() and (t["web_ttlb_mean"] > 0).all()
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
    # The candidates are the sample's Guard-flagged relays (the default --attack-pool).
    from onionlab.config import tomllib

    relays = tomllib.loads((quick / "configs" / "throttling-relays.toml").read_text())["relays"]
    guards = sum("Guard" in r.get("flags", []) for r in relays)
    assert (s["attack_pool"], s["attack_pool_size"]) == ("guards", guards) and 0 < guards < len(relays)
    assert (s["empty_set"], s["vanilla_rate"]) == ("nothing", "bandwidth"), "the analysis' readings are recorded"
    assert a.mean_loss_bits.max() <= math.log2(guards) + 1e-9
    assert pd.read_csv(quick / "anonymity.csv")["set_size"].max() <= guards
    assert (a.mean_correct_loss_bits <= a.mean_loss_bits + 1e-12).all()
    by_class = pd.read_csv(quick / "anonymity_by_class.csv")
    assert set(by_class["class"]) == {"web", "bulk"}
    clients = by_class.groupby(["attack", "algorithm"])["clients"].sum()
    assert clients.to_dict() == a.set_index(["attack", "algorithm"])["clients"].to_dict()


def test_the_sweep_runs_like_the_main_runs(quick):
    from onionlab.config import tomllib

    def timing(name):
        e = tomllib.loads((quick / "configs" / f"{name}.toml").read_text())["experiment"]
        return e["duration"], e["warmup"]

    assert timing("sweep-vanilla-00") == timing("medium-vanilla") == timing("sweep-flag-00")
    s = json.loads((quick / "summary.json").read_text())
    assert (s["sweep"]["duration"], s["sweep"]["warmup"]) == (s["duration"], s["warmup"])


def test_grid_widens_one_axis_and_the_sweep_names_choices_on_an_edge(quick):
    sweep = pd.read_csv(quick / "sweep.csv")
    fractions = sorted(json.loads(p)["fraction"] for p in sweep.loc[sweep.algorithm == "thresh", "params"])
    assert fractions == [0.1, 0.2, 0.4]
    assert (quick / "configs" / "sweep-thresh-02.toml").is_file()
    chosen = json.loads((quick / "chosen.json").read_text())
    edges = json.loads((quick / "sweep_edges.json").read_text())
    named = {(e["algorithm"], e["parameter"]) for e in edges}
    # Only the widened axis has three values in the quick sweep.
    assert named == ({("thresh", "fraction")} if chosen["thresh"]["fraction"] in (0.1, 0.4) else set())
    summary = json.loads((quick / "summary.json").read_text())
    assert summary["sweep"]["grid"] == ["thresh.fraction=0.1,0.2,0.4"] and summary["sweep"]["criterion"] == "median"
    assert {"web_ttlb_mean_of_medians", "web_ttlb_mean_of_means"} <= set(sweep.columns)


def test_the_sweep_writes_each_choices_margin_over_its_runner_up(quick):
    chosen = json.loads((quick / "chosen.json").read_text())
    margins = pd.read_csv(quick / "sweep_margins.csv")
    assert list(margins.columns) == MARGIN_COLUMNS
    # Every algorithm with more than one sweep point (quick: static's two rates, threshold's
    # widened fraction), and its choice is chosen.json's.
    assert set(margins["algorithm"]) == {"static", "thresh"}
    for m in margins.itertuples():
        assert json.loads(m.chosen) == chosen[m.algorithm] and m.runner_up != m.chosen
        assert m.margin >= 0 and m.seeds >= 1 and 0 <= m.seeds_won <= m.seeds


@pytest.fixture(scope="module")
def second_seed(quick, tmp_path_factory):
    """Seed 2 of every main run of the quick reproduction, from its own configs."""
    extra = tmp_path_factory.mktemp("extra-seed")
    for load in ("light", "medium", "heavy"):
        for alg in ("vanilla", "static", "split", "flag", "thresh"):
            name = f"{load}-{alg}"
            assert main(["run", str(quick / "configs" / f"{name}.toml"), "--seed", "2", "-o", str(extra / name), "--no-progress"]) == 0
    return extra


POOL_TOOL = Path(__file__).resolve().parents[2] / "tools" / "throttling_pooled_findings.py"


def test_more_seeds_of_the_medium_load_runs_pool_with_the_directorys_own(quick, second_seed, tmp_path):
    """A second seed of each medium-load config, run from the directory's own configs,
    pools with seed 1: seed 1's rows are the directory's, and the verdicts count two
    seeds. A run of another config, or of a seed already pooled, is refused by name."""
    from onionlab.reproduce.throttling.findings import anonymity_findings
    from onionlab.reproduce.throttling.pooling import pooled_anonymity

    extra = second_seed
    pooled = pooled_anonymity(quick, [extra])
    assert sorted(pooled["seed"].unique()) == [1, 2]
    own = pd.read_csv(quick / "anonymity.csv")
    key = ["attack", "algorithm", "client"]
    mine = pooled[pooled["seed"] == 1].sort_values(key).reset_index(drop=True)
    theirs = own.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine[own.columns], theirs, check_dtype=False)
    verdicts = anonymity_findings(pooled)
    assert list(verdicts["finding"]) == ["attack1_static_nothing", "attack1_vanilla_most", "attack2_flag_most", "attack2_more_than_attack1"]
    assert (verdicts["seeds"] == 2).all()
    r = subprocess.run([sys.executable, str(POOL_TOOL), str(quick), str(extra), "--attacks-only"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("2 seeds (1, 2)") and "attack2_flag_most" in r.stdout and "static_gains_least" not in r.stdout
    # Over every relay instead of the directory's own candidates (the guards): the entropy
    # is counted against all 50, and the tool says the directory's own rows are not.
    every = pooled_anonymity(quick, [extra], "relays")
    kept = every[every["set_size"] > 0]
    assert (kept["entropy_loss_bits"] - (math.log2(50) - kept["set_size"].map(math.log2))).abs().max() < 1e-9
    guards = pooled[pooled["set_size"] > 0]
    assert (guards["entropy_loss_bits"] - (math.log2(json.loads((quick / "summary.json").read_text())["attack_pool_size"])
                                           - guards["set_size"].map(math.log2))).abs().max() < 1e-9
    r = subprocess.run([sys.executable, str(POOL_TOOL), str(quick), str(extra), "--attacks-only", "--attack-pool", "relays"],
                       capture_output=True, text=True, check=True)
    assert "(the directory's own attacks 1 and 2 are over --attack-pool guards, these over relays)" in r.stdout
    # Seed 1 again: counted twice if pooled.
    again = tmp_path / "again"
    assert main(["run", str(quick / "configs" / "medium-vanilla.toml"), "--seed", "1", "-o", str(again / "medium-vanilla"), "--no-progress"]) == 0
    with pytest.raises(FileNotFoundError, match="again/medium-static: not found .*holds medium-load runs of vanilla; a load needs all five"):
        pooled_anonymity(quick, [again])
    for alg in ("static", "split", "flag", "thresh"):
        (again / f"medium-{alg}").symlink_to(extra / f"medium-{alg}")
    with pytest.raises(ValueError, match=r"again/medium-vanilla: seed 1 is also in .*runs/medium-vanilla"):
        pooled_anonymity(quick, [again])
    # Another config (a shorter run) would pool two experiments.
    other = tmp_path / "other"
    assert main(["run", str(quick / "configs" / "medium-vanilla.toml"), "--seed", "3", "--set", 'experiment.duration="2 min"',
                 "-o", str(other / "medium-vanilla"), "--no-progress"]) == 0
    for alg in ("static", "split", "flag", "thresh"):
        (other / f"medium-{alg}").symlink_to(extra / f"medium-{alg}")
    r = subprocess.run([sys.executable, str(POOL_TOOL), str(quick), str(other), "--attacks-only"], capture_output=True, text=True)
    assert r.returncode == 2 and "other/medium-vanilla: its config differs" in r.stderr
    # A directory with nothing to pool is named, not skipped.
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: holds no runs to pool"):
        pooled_anonymity(quick, [tmp_path / "empty"])


def test_more_seeds_of_every_main_run_pool_into_every_finding(quick, second_seed, tmp_path):
    """Seed 2 of all fifteen main runs pools with seed 1: the per-seed numbers of seed 1
    are the directory's own, the pooled data is the mean of the two seeds', and every
    finding judged seed by seed counts two seeds. Seeds that differ between
    configurations (a load pooled, another not) are refused."""
    from onionlab import results
    from onionlab.reproduce.throttling.configs import seconds
    from onionlab.reproduce.throttling.findings import per_seed_numbers
    from onionlab.reproduce.throttling.pooling import pooled_findings

    table, numbers, anon = pooled_findings(quick, [second_seed])
    warmup = seconds(json.loads((quick / "summary.json").read_text())["warmup"])
    own = per_seed_numbers({(load, alg): results.load(quick / "runs" / f"{load}-{alg}")
                            for load in ("light", "medium", "heavy") for alg in ("vanilla", "static", "split", "flag", "thresh")}, warmup)
    key = ["load", "algorithm"]
    mine = numbers[numbers["seed"] == 1].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, own[own["seed"] == 1].sort_values(key).reset_index(drop=True))
    by = numbers.set_index(["load", "algorithm", "seed"])["data_GiB"]
    for load, alg in own[own["seed"] == 1][key].itertuples(index=False):
        assert by[(load, alg, 0)] == pytest.approx((by[(load, alg, 1)] + by[(load, alg, 2)]) / 2)
    written = pd.read_csv(quick / "findings.csv")
    assert list(table["finding"]) == list(written["finding"]) and list(table["load"]) == list(written["load"])
    seeded = table[table["seeds"].notna()]
    assert (seeded["seeds"] == 2).all() and len(seeded) == 7 * 3 + 1 + 4
    # Attacks 3 and 4 are the directory's own, judged pooled only.
    own_only = written[written["seeds"].isna()].reset_index(drop=True)
    pd.testing.assert_frame_equal(table[table["seeds"].isna()].reset_index(drop=True)[["finding", "holds", "detail"]], own_only[["finding", "holds", "detail"]])
    assert sorted(anon["seed"].unique()) == [1, 2]
    out = tmp_path / "pooled"
    r = subprocess.run([sys.executable, str(POOL_TOOL), str(quick), str(second_seed), "--output-dir", str(out)], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("2 seeds (1, 2)") and "static_gains_least" in r.stdout and "| own seeds | 2 seeds |" in r.stdout
    assert pd.read_csv(out / "findings.csv")["holds"].tolist() == table["holds"].tolist()
    assert (out / "numbers.csv").is_file() and (out / "anonymity.csv").is_file()
    # Medium load alone has a second seed: the loads would be judged on different seeds.
    medium_only = tmp_path / "medium-only"
    medium_only.mkdir()
    for alg in ("vanilla", "static", "split", "flag", "thresh"):
        (medium_only / f"medium-{alg}").symlink_to(second_seed / f"medium-{alg}")
    with pytest.raises(ValueError, match=r"medium-vanilla: pooled seeds 1, 2, but light-vanilla has 1; every configuration needs the same seeds"):
        pooled_findings(quick, [medium_only])
    r = subprocess.run([sys.executable, str(POOL_TOOL), str(quick), str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert r.returncode == 2 and "nowhere: not found" in r.stderr


def test_findings_are_judged_in_the_run_and_again_from_its_directory(quick):
    written = pd.read_csv(quick / "findings.csv")
    # Table 1's six per load, the gains' growth, four anonymity, two of attack 3, two of
    # attack 4 on flooded and two on paced targets.
    assert len(written) == 7 * 3 + 1 + 4 + 2 + 2 + 2 and set(written["holds"]) <= {True, False}
    # One seed in the quick run: each seeded verdict is that seed's.
    seeded = written[written["seeds"].notna()]
    assert (seeded["seeds"] == 1).all() and (seeded["seeds_holding"] == seeded["holds"].astype(int)).all()
    s = json.loads((quick / "summary.json").read_text())
    assert [f["finding"] for f in s["findings"]] == list(written["finding"])
    tool = Path(__file__).resolve().parents[2] / "tools" / "throttling_findings.py"
    r = subprocess.run([sys.executable, str(tool), str(quick), "--no-write"], capture_output=True, text=True, check=True)
    assert "static_gains_least" in r.stdout and "flag_thresh_best_web" in r.stdout
    from onionlab.reproduce.throttling.findings import findings_of_directory

    assert findings_of_directory(quick).to_csv(index=False) == (quick / "findings.csv").read_text()
    # Two directories side by side (here the same one twice, named apart).
    matrix_csv = quick.parent / "matrix.csv"
    r = subprocess.run([sys.executable, str(tool), f"a={quick}", f"b={quick}", "--no-write", "--csv", str(matrix_csv)], capture_output=True, text=True, check=True)
    m = pd.read_csv(matrix_csv, keep_default_na=False)
    assert list(m.columns) == ["finding", "load", "a", "b"] and (m["a"] == m["b"]).all()
    assert list(m["finding"]) == list(written["finding"])
    assert "| finding | load | a | b |" in r.stdout
    # The same directory with its empty sets skipped: judged again from anonymity.csv, the
    # directory's own findings.csv left as its own policy's; the summary names the policy.
    assert s["empty_set"] == "nothing"
    before = (quick / "findings.csv").read_text()
    r = subprocess.run([sys.executable, str(tool), f"one={quick}", f"two={quick}", "--empty-set", "skip", "--csv", str(matrix_csv)],
                       capture_output=True, text=True, check=True)
    assert (quick / "findings.csv").read_text() == before
    from onionlab.reproduce.throttling.findings import directory_anonymity

    skipped = directory_anonymity(quick, "skip")
    assert (skipped["set_size"] == 0).any(), "the quick run has empty sets (static's, at least) to skip"
    assert skipped["entropy_loss_bits"].isna().tolist() == (skipped["set_size"] == 0).tolist()
    r = subprocess.run([sys.executable, str(tool), str(quick / "findings.csv"), "--empty-set", "max"], capture_output=True, text=True)
    assert r.returncode == 2 and "--empty-set: a findings.csv is read as it is" in r.stderr


def test_compare_tool_orders_the_algorithms_per_load(quick):
    tool = Path(__file__).resolve().parents[2] / "tools" / "compare_throttling_runs.py"
    r = subprocess.run([sys.executable, str(tool), str(quick)], capture_output=True, text=True, check=True)
    lines = [l for l in r.stdout.splitlines() if l.startswith(f"| {quick.name} |")]
    assert [l.split(" | ")[1] for l in lines[:3]] == ["light", "medium", "heavy"]
    t = pd.read_csv(quick / "table1.csv")
    medium = t[(t.load == "medium") & (t.algorithm != "vanilla")].sort_values("web_ttlb_median", kind="stable")
    web_order = lines[1].split(" | ")[7]
    assert [part.split()[0] for part in web_order.split(" < ")] == list(medium.algorithm)
    assert len(lines) == 5, "three loads, one row of attacks, one bottleneck"
    c = pd.read_csv(quick / "channels.csv")
    top = c[c.algorithm == "vanilla"].sort_values("queued_cells", ascending=False, kind="stable").iloc[0]
    assert lines[4].split(" | ")[1].startswith(f"{top.relay} (") and f"→ {top.peer} (" in lines[4]


def test_bad_arguments_are_clear_errors(tmp_path, capsys):
    assert main(["reproduce", "throttling", "--no-sweep", "-o", str(tmp_path / "x")]) != 0
    assert "--params" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--entry-guards", "0", "-o", str(tmp_path / "y")]) != 0
    assert "--entry-guards" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--grid", "thresh.T=0.1", "-o", str(tmp_path / "z")]) != 0
    assert "--grid 'thresh.T=0.1': thresh has no parameter 'T'" in capsys.readouterr().err
    assert not (tmp_path / "z" / "configs" / "sweep-vanilla-00.toml").exists(), "a bad --grid fails before any run"
    assert main(["reproduce", "throttling", "--no-sweep", "--params", "x.json", "--grid", "thresh.fraction=0.1", "-o", str(tmp_path / "w")]) != 0
    assert "--grid: has no effect with --no-sweep" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--no-sweep", "--params", "x.json", "--criterion", "mean", "-o", str(tmp_path / "u")]) != 0
    assert "--criterion: has no effect with --no-sweep" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--sweep-loads", "medium,extreme", "-o", str(tmp_path / "s")]) != 0
    assert "--sweep-loads: unknown load 'extreme'" in capsys.readouterr().err
    assert not (tmp_path / "s" / "configs" / "sweep-vanilla-00.toml").exists(), "a bad --sweep-loads fails before any run"
    assert main(["reproduce", "throttling", "--no-sweep", "--params", "x.json", "--sweep-loads", "light,heavy", "-o", str(tmp_path / "r")]) != 0
    assert "--sweep-loads: has no effect with --no-sweep" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--reuse-runs-from", str(tmp_path / "nowhere"), "-o", str(tmp_path / "q")]) != 0
    assert f"--reuse-runs-from: {tmp_path / 'nowhere'} has no runs/ directory" in capsys.readouterr().err
    assert not (tmp_path / "q" / "configs" / "sweep-vanilla-00.toml").exists(), "a bad --reuse-runs-from fails before any run"
    # Part of a minute (or second) would have no row in the tables the analysis reads.
    assert main(["reproduce", "throttling", "--duration", "90 s", "--warmup", "30 s", "-o", str(tmp_path / "p")]) != 0
    assert "--duration: '90 s' must be a whole multiple of 1 min (the per-connection table is sampled every minute)" in capsys.readouterr().err
    assert main(["reproduce", "throttling", "--sweep-duration", "90.5 s", "--sweep-warmup", "30 s", "-o", str(tmp_path / "p")]) != 0
    assert "--sweep-duration: '90.5 s' must be a whole multiple of 1 s" in capsys.readouterr().err
    assert not (tmp_path / "p" / "configs" / "sweep-vanilla-00.toml").exists(), "a bad duration fails before any run"
    with pytest.raises(SystemExit):
        main(["reproduce", "throttling", "--criterion", "p90", "-o", str(tmp_path / "t")])
    assert "--criterion" in capsys.readouterr().err
    for arg, value, message in (("--capacity-scale", "0", "must be a positive number"), ("--capacity-scale", "x", "expected a number"),
                                ("--think-median", "0 s", "must be positive"), ("--think-median", "soon", '"soon" does not start with a number'),
                                ("--attack3-sizes", "1 MiB,0 B", "each size must be positive"), ("--attack3-sizes", "1 MiB,lots", "'lots'"),
                                ("--attack3-sizes", "1 MiB,1024 KiB", "'1024 KiB' is repeated")):
        with pytest.raises(SystemExit):
            main(["reproduce", "throttling", arg, value, "-o", str(tmp_path / "v")])
        err = capsys.readouterr().err
        assert arg in err and message in err, err


# ---------------------------------------------------------------- pieces, on hand-made data

from types import SimpleNamespace

import numpy as np

from onionlab.reproduce import throttling as T
from onionlab.reproduce.throttling.anonymity import (
    _guard_rates, _per_minute, _timing_targets, attacks, combined_attack, empty_set_policy, flag_timing_attack, medium_load_attacks, summarise,
    thresh_timing_attack,
)
from onionlab.reproduce.throttling.configs import BUILTIN_RELAYS, all_guards, attack_pool, client_settings, config_text, mechanism_line, relay_sample_text, scale_capacity, THINK
from onionlab.reproduce.throttling.metrics import busiest_channels, medians, throttle_state, web_time_mean
from onionlab.reproduce.throttling.sweep import (
    MARGIN_COLUMNS,
    _sweep_grid,
    choice_margins,
    choose,
    edge_choices,
    grid_overrides,
    margin_lines,
    sweep_axes,
    sweep_loads,
    sweep_settings,
)


def test_choose_takes_the_best_mean_of_per_seed_medians_not_one_lucky_seed():
    rows = [
        # "a" is best on seed 1 only; "b" is better on average.
        ("static", '{"rate": "a"}', 1, 5.0), ("static", '{"rate": "a"}', 2, 20.0),
        ("static", '{"rate": "b"}', 1, 9.0), ("static", '{"rate": "b"}', 2, 10.0),
        ("split", "{}", 1, 7.0), ("split", "{}", 2, 7.0),
    ]
    t = pd.DataFrame(rows, columns=["algorithm", "params", "seed", "web_ttlb_median"])
    t["web_ttfb_median"] = 1.0
    assert choose(t) == {"vanilla": {}, "static": {"rate": "b"}, "split": {}}


def test_choose_by_mean_rejects_a_fast_median_that_starves_the_throttled_clients():
    # "starve": most downloads are fast, a few (the flagged clients') take 300 s. Its median
    # is the best; its mean is not.
    rows = [
        ("flag", '{"flag_rate": "starve"}', 1, 1.0, 30.0), ("flag", '{"flag_rate": "starve"}', 2, 1.2, 32.0),
        ("flag", '{"flag_rate": "fair"}', 1, 2.0, 4.0), ("flag", '{"flag_rate": "fair"}', 2, 2.2, 4.4),
    ]
    t = pd.DataFrame(rows, columns=["algorithm", "params", "seed", "web_ttlb_median", "web_time_mean"])
    t["web_ttfb_median"] = 0.5
    assert choose(t)["flag"] == {"flag_rate": "starve"}
    assert choose(t, "median")["flag"] == {"flag_rate": "starve"}
    assert choose(t, "mean")["flag"] == {"flag_rate": "fair"}
    with pytest.raises(ValueError, match="--criterion: 'p90' is not one of median, mean"):
        choose(t, "p90")


#: Web download medians (s) of threshold at two loads, one seed. "gentle" is the best at
#: light load, "hard" at heavy load. Relative to vanilla (light 1 s, heavy 10 s), averaged
#: over the loads: gentle (0.8 + 0.9) / 2 = 0.85, hard (0.9 + 0.7) / 2 = 0.80, mid (0.85 +
#: 0.78) / 2 = 0.815.
TWO_LOADS = [
    ("light", "vanilla", "{}", 1.0), ("heavy", "vanilla", "{}", 10.0),
    ("light", "thresh", '{"T": "gentle"}', 0.8), ("heavy", "thresh", '{"T": "gentle"}', 9.0),
    ("light", "thresh", '{"T": "hard"}', 0.9), ("heavy", "thresh", '{"T": "hard"}', 7.0),
    ("light", "thresh", '{"T": "mid"}', 0.85), ("heavy", "thresh", '{"T": "mid"}', 7.8),
]


def test_choose_over_several_loads_takes_the_best_gain_over_vanilla_averaged_over_the_loads():
    # TWO_LOADS: one setting serves both loads, hard.
    rows = TWO_LOADS
    t = pd.DataFrame(rows, columns=["load", "algorithm", "params", "web_ttlb_median"])
    t["seed"], t["web_ttfb_median"] = 1, 0.5
    assert choose(t)["thresh"] == {"T": "hard"}
    # Relative, not absolute: a light-load setting 10 % better beats a heavy-load one 5 % better,
    # though the heavy load's 0.5 s is five times the light load's 0.1 s.
    rows = [
        ("light", "vanilla", "{}", 1.0), ("heavy", "vanilla", "{}", 10.0),
        ("light", "static", '{"rate": "a"}', 0.9), ("heavy", "static", '{"rate": "a"}', 10.0),
        ("light", "static", '{"rate": "b"}', 1.0), ("heavy", "static", '{"rate": "b"}', 9.5),
    ]
    t = pd.DataFrame(rows, columns=["load", "algorithm", "params", "web_ttlb_median"])
    t["seed"], t["web_ttfb_median"] = 1, 0.5
    assert choose(t)["static"] == {"rate": "a"}
    # One load only: plain seconds, as always.
    assert choose(t[t["load"] == "heavy"])["static"] == {"rate": "b"}
    with pytest.raises(ValueError, match="vanilla at every load"):
        choose(t[~((t["algorithm"] == "vanilla") & (t["load"] == "heavy"))])


def test_choice_margins_name_the_runner_up_and_whether_the_seeds_resolve_it():
    # Web download medians (s), two seeds. static: "a" beats "b" by 1 s on both seeds, so
    # the seeds' differences (1, 1) have no spread: resolved. flag: "x" (5, 7; mean 6)
    # beats "y" (6.5, 6; mean 6.25) by 0.25 s, but loses on seed 2: differences 1.5 and
    # -1.0, mean 0.25, sd 1.25 * sqrt(2), half-width t(0.975, 1) * 1.25 = 12.706 * 1.25.
    rows = [
        ("static", '{"rate": "a"}', 1, 5.0), ("static", '{"rate": "a"}', 2, 6.0),
        ("static", '{"rate": "b"}', 1, 6.0), ("static", '{"rate": "b"}', 2, 7.0),
        ("static", '{"rate": "c"}', 1, 9.0), ("static", '{"rate": "c"}', 2, 9.0),
        ("flag", '{"flag_rate": "x"}', 1, 5.0), ("flag", '{"flag_rate": "x"}', 2, 7.0),
        ("flag", '{"flag_rate": "y"}', 1, 6.5), ("flag", '{"flag_rate": "y"}', 2, 6.0),
        ("split", "{}", 1, 7.0), ("split", "{}", 2, 7.0),
    ]
    t = pd.DataFrame(rows, columns=["algorithm", "params", "seed", "web_ttlb_median"])
    t["web_ttfb_median"] = 1.0
    m = choice_margins(t).set_index("algorithm")
    assert list(m.reset_index().columns) == MARGIN_COLUMNS
    assert set(m.index) == {"static", "flag"}, "one setting (split) has no runner-up"
    s, f = m.loc["static"], m.loc["flag"]
    assert (s.chosen, s.runner_up, s.unit) == ('{"rate": "a"}', '{"rate": "b"}', "s")
    assert (s.margin, s.seeds, s.seeds_won, s.margin_ci95, bool(s.resolved)) == (1.0, 2, 2, 0.0, True)
    assert s.margin_pct == pytest.approx(100 / 5.5)
    assert json.loads(f.chosen) == choose(t)["flag"] == {"flag_rate": "x"}
    assert (f.runner_up, f.seeds_won, bool(f.resolved)) == ('{"flag_rate": "y"}', 1, False)
    assert f.margin == pytest.approx(0.25) and f.margin_seed_mean == pytest.approx(0.25)
    assert f.margin_ci95 == pytest.approx(12.7062 * 1.25, rel=1e-4)
    lines = margin_lines(choice_margins(t))
    assert len(lines) == 1 and lines[0].startswith("sweep: flag's choice {\"flag_rate\": \"x\"} leads the runner-up {\"flag_rate\": \"y\"} by 0.250 s")
    assert "on 1 of 2 seeds" in lines[0]
    with pytest.raises(ValueError, match="--criterion: 'p90'"):
        choice_margins(t, "p90")


def test_choice_margins_over_several_loads_are_on_the_choices_scale():
    # TWO_LOADS on two identical seeds: "hard" 0.80 x vanilla, runner-up "mid" 0.815: a
    # margin of 0.015 on both seeds, resolved.
    t = pd.concat([pd.DataFrame(TWO_LOADS, columns=["load", "algorithm", "params", "web_ttlb_median"]).assign(seed=s) for s in (1, 2)])
    t["web_ttfb_median"] = 0.5
    m = choice_margins(t).set_index("algorithm").loc["thresh"]
    assert (m.chosen, m.runner_up, m.unit, m.seeds, m.seeds_won) == ('{"T": "hard"}', '{"T": "mid"}', "x vanilla", 2, 2)
    assert m.chosen_key == pytest.approx(0.80) and m.runner_up_key == pytest.approx(0.815)
    assert m.margin_seed_mean == pytest.approx(0.015) and bool(m.resolved)
    assert margin_lines(choice_margins(t)) == []


def test_sweep_loads_parses_the_option_in_load_order_and_rejects_bad_input():
    assert sweep_loads(None) == ["medium"]
    assert sweep_loads("heavy, light,medium") == ["light", "medium", "heavy"]
    with pytest.raises(ValueError, match="--sweep-loads: unknown load 'huge'"):
        sweep_loads("light,huge")
    with pytest.raises(ValueError, match="--sweep-loads: a load is repeated"):
        sweep_loads("light,light")


def test_medians_reports_the_mean_over_finished_web_downloads_only():
    d = pd.DataFrame({
        "seed": [1, 1, 1, 1, 2], "class": ["web", "web", "web", "bulk", "web"],
        "ttfb": [0.5, 0.5, 0.5, 1.0, 0.5], "ttlb": [1.0, 2.0, 9.0, 50.0, 100.0], "error": [None, None, None, None, None],
    })
    d.loc[len(d)] = {"seed": 1, "class": "web", "ttfb": math.nan, "ttlb": math.nan, "error": "timeout"}
    m = medians(SimpleNamespace(downloads=d), seed=1)
    assert m["web_ttlb_median"] == 2.0 and m["web_ttlb_mean"] == 4.0 and m["web_downloads"] == 3
    assert m["web_unfinished_pct"] == 0.0 and m["bulk_unfinished_pct"] == 0.0


def test_medians_reports_the_downloads_the_end_of_the_run_cut_short():
    # A throttle that starves one client: its download never finishes, so the median over
    # finished downloads does not see it; the unfinished share does.
    d = pd.DataFrame({
        "seed": [1] * 5, "class": ["web"] * 4 + ["bulk"],
        "ttfb": [0.5, 0.5, 0.5, 3.0, 1.0], "ttlb": [1.0, 2.0, 3.0, math.nan, math.nan],
        "error": [None, None, None, stats.UNFINISHED, stats.UNFINISHED],
    })
    m = medians(SimpleNamespace(downloads=d))
    assert m["web_ttlb_median"] == 2.0 and m["web_downloads"] == 3
    assert m["web_unfinished_pct"] == 25.0 and m["bulk_unfinished_pct"] == 100.0
    assert math.isnan(m["web_time_mean"]), "without the run's end, no elapsed time"


def test_web_time_mean_counts_cut_short_downloads_at_their_elapsed_time():
    # Finished in 1, 2 and 3 s; one started at 590 s and still running at the end (600 s):
    # it counts as 10 s, so the mean is 4 s, not the finished downloads' 2 s. The failed
    # download and the bulk client's are left out.
    d = pd.DataFrame({
        "seed": [1] * 6, "class": ["web"] * 5 + ["bulk"], "start": [100.0, 200.0, 300.0, 590.0, 400.0, 10.0],
        "ttfb": [0.5, 0.5, 0.5, 3.0, math.nan, 1.0], "ttlb": [1.0, 2.0, 3.0, math.nan, math.nan, math.nan],
        "error": [None, None, None, stats.UNFINISHED, "timeout", stats.UNFINISHED],
    })
    m = medians(SimpleNamespace(downloads=d), end_s=600.0)
    assert m["web_ttlb_mean"] == 2.0 and m["web_time_mean"] == 4.0
    assert web_time_mean(d[d.index != 3], 600.0) == 2.0, "nothing cut short: the mean over finished downloads"


def test_the_sweep_is_spec_9s_ranges_and_grid_replaces_one_axis():
    g = _sweep_grid(False)
    assert {a: len(p) for a, p in g.items()} == {"vanilla": 1, "static": 5, "split": 1, "flag": 27, "thresh": 27}
    assert g["thresh"][0] == {"fraction": 0.05, "refresh": "10 s", "floor": "5 KiB/s"}
    assert g["thresh"][-1] == {"fraction": 0.2, "refresh": "60 s", "floor": "50 KiB/s"}
    wide = _sweep_grid(False, grid_overrides(["thresh.fraction=0.05,0.1,0.2,0.4", "flag.flag_rate=2 KiB/s,5 KiB/s"]))
    assert len(wide["thresh"]) == 4 * 3 * 3 and len(wide["flag"]) == 2 * 3 * 3
    assert {p["fraction"] for p in wide["thresh"]} == {0.05, 0.1, 0.2, 0.4}
    assert {p["flag_rate"] for p in wide["flag"]} == {"2 KiB/s", "5 KiB/s"}
    assert wide["static"] == g["static"]


@pytest.mark.parametrize("arg, message", [
    ("thresh.fraction", "expected ALG.PARAM=V1,V2,..."),
    ("foo.rate=1 KiB/s", "unknown algorithm 'foo'"),
    ("split.rate=1 KiB/s", "unknown algorithm 'split'"),
    ("thresh.T=0.1", "thresh has no parameter 'T'"),
    ("thresh.fraction=0.1,,0.2", "empty value"),
    ("thresh.fraction=0.1,1.5", "fraction: 1.5 is outside [0, 1]"),
    ("thresh.fraction=0.1,lots", "fraction: 'lots' is not a number"),
    ("flag.flag_rate=5", "flag_rate: '5' is not a byte rate"),
    ("thresh.refresh=0 s", "refresh: '0 s' must be positive"),
    ("static.rate=5 KiB/s,5120 B/s", "a value is repeated"),
])
def test_grid_rejects_bad_input_naming_the_argument(arg, message):
    with pytest.raises(ValueError) as e:
        grid_overrides([arg])
    assert f"--grid {arg!r}" in str(e.value) and message in str(e.value)


def test_grid_rejects_one_axis_given_twice():
    with pytest.raises(ValueError, match="thresh.fraction is given twice"):
        grid_overrides(["thresh.fraction=0.1", "thresh.fraction=0.2"])


def test_edge_choices_names_chosen_values_at_either_end_of_an_axis_of_three_or_more():
    axes = sweep_axes(False, grid_overrides(["static.rate=10 KiB/s,20 KiB/s"]))
    chosen = {
        "vanilla": {}, "split": {},
        "static": {"rate": "10 KiB/s"},  # an edge, but of a two-value axis: not named
        "flag": {"flag_rate": "5 KiB/s", "penalty": 0.25, "halflife": "90 s"},
        "thresh": {"fraction": 0.1, "refresh": "30 s", "floor": "20 KiB/s"},
    }
    rows = edge_choices(axes, chosen)
    assert [(r["algorithm"], r["parameter"], r["value"], r["edge"]) for r in rows] == [
        ("flag", "flag_rate", "5 KiB/s", "smallest"), ("flag", "halflife", "90 s", "largest"),
    ]
    assert rows[0]["axis"] == ["5 KiB/s", "20 KiB/s", "50 KiB/s"]


def test_sweep_settings_default_to_the_main_runs_and_can_be_overridden():
    import argparse

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    assert sweep_settings(p.parse_args([])) == ("20 min", "4 min")
    assert sweep_settings(p.parse_args(["--duration", "30 min", "--warmup", "5 min"])) == ("30 min", "5 min")
    assert sweep_settings(p.parse_args(["--sweep-duration", "10 min", "--sweep-warmup", "2 min"])) == ("10 min", "2 min")


def test_all_guards_flags_every_relay_and_changes_nothing_else():
    from onionlab.config import tomllib

    src = BUILTIN_RELAYS.read_text()
    before = tomllib.loads(src)["relays"]
    after = tomllib.loads(all_guards(src))["relays"]
    assert sum("Guard" in r["flags"] for r in before) == 14
    assert len(after) == len(before) == 50
    for b, a in zip(before, after):
        assert "Guard" in a["flags"] and a["flags"].count("Guard") == 1
        assert set(a["flags"]) - {"Guard"} == set(b["flags"]) - {"Guard"}
        assert {k: v for k, v in a.items() if k != "flags"} == {k: v for k, v in b.items() if k != "flags"}


def test_scale_capacity_multiplies_every_relays_bandwidth_and_nothing_else():
    from onionlab._core import parse_byte_rate

    text = relay_sample_text(None)
    scaled = scale_capacity(text, 4)
    first, *after = scaled.splitlines()
    assert first == "# Every bandwidth multiplied by 4 (--capacity-scale)."
    before = text.splitlines()
    assert len(after) == len(before)
    pairs = [(a, b) for a, b in zip(before, after) if a != b]
    assert pairs and all(a.startswith("bandwidth") for a, _ in pairs), "only bandwidth lines change"
    for a, b in pairs:
        assert parse_byte_rate(b.split('"')[1]) == 4 * parse_byte_rate(a.split('"')[1])
    assert "consensus_weight = 12900" in scaled, "weights are relative: left as they are"
    with pytest.raises(ValueError, match="--capacity-scale: the relay sample has no bandwidth lines"):
        scale_capacity("[[relays]]\nname = 'a'\n", 2)
    with pytest.raises(ValueError, match="--capacity-scale: relay bandwidth 'fast'"):
        scale_capacity('bandwidth = "fast"\n', 2)


def test_think_median_replaces_the_median_and_keeps_the_shape():
    import argparse

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    default = client_settings(p.parse_args([]))["think"]
    assert default == THINK["heavy"] == '{ dist = "lognormal", median = "8 s", sigma = 2.0 }'
    assert client_settings(p.parse_args(["--think-median", "2 s"]))["think"] == '{ dist = "lognormal", median = "2 s", sigma = 2.0 }'
    assert client_settings(p.parse_args(["--think", "smooth", "--think-median", "5 s"]))["think"] == '{ dist = "lognormal", median = "5 s", sigma = 1.25 }'


def test_config_text_sets_the_entry_guards_per_client():
    from onionlab.config import tomllib

    text = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", entry_guards=1)
    assert tomllib.loads(text)["tor"]["num_entry_guards"] == 1


def test_config_text_turns_predicted_circuits_on_only_when_asked():
    from onionlab.config import tomllib

    off = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml")
    on = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", predicted_circuits=True)
    assert "predicted_circuits" not in tomllib.loads(off)["tor"]
    assert tomllib.loads(on)["tor"]["predicted_circuits"] is True
    vegas = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", congestion_control="vegas")
    assert tomllib.loads(vegas)["tor"]["congestion_control"] == "vegas"
    assert "congestion_control" not in tomllib.loads(off)["tor"]
    cellq = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", cellq=(256, 64))
    assert (tomllib.loads(cellq)["tor"]["cellq_high"], tomllib.loads(cellq)["tor"]["cellq_low"]) == (256, 64)
    assert "cellq_high" not in tomllib.loads(off)["tor"]
    cbt = tomllib.loads(config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", cbt_learning=True))["tor"]
    assert cbt["predicted_circuits"] is True, "test circuits come with predicted circuits"
    assert cbt["cbt_learning"] == {"test_frequency": "60 s", "max_clean": 12}, "tor 0.2.2's test circuits, not today's"


def test_path_order_option_reaches_the_tor_section():
    import argparse

    from onionlab import config as config_mod
    from onionlab.config import tomllib

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    tors, old = client_settings(p.parse_args([])), client_settings(p.parse_args(["--path-order", "guard-first"]))
    assert (tors["path_order"], old["path_order"]) == ("exit-first", "guard-first"), "tor's order is the default"
    on = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", **tors)
    off = config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", **old)
    assert tomllib.loads(on)["tor"]["path_order"] == "exit-first", "written, though it is the model's default too"
    assert tomllib.loads(off)["tor"]["path_order"] == "guard-first"
    assert on.replace('path_order = "exit-first"', 'path_order = "guard-first"') == off
    args = p.parse_args(["--path-order", "guard-first"])
    resolved = config_mod.parse(T.configs._check_config(mechanism_line("vanilla", {}), relay_sample_text(None), args))
    assert resolved["tor"]["path_order"] == "guard-first", "the option passes the config's own check"
    with pytest.raises(SystemExit):
        p.parse_args(["--path-order", "exit_first"])


def test_config_text_computes_bandwidth_weights_only_when_asked():
    from onionlab.config import tomllib

    off = tomllib.loads(config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml"))
    on = tomllib.loads(config_text("x", 50, mechanism_line("vanilla", {}), "20 min", "4 min", "r.toml", weights="computed"))
    assert "bandwidth_weights" not in off["network"]
    assert on["network"]["bandwidth_weights"] == "computed"
    assert {k: v for k, v in on["network"].items() if k != "bandwidth_weights"} == off["network"]


def test_unthrottled_code_reaches_flagging_and_threshold_only_and_passes_the_config_check():
    from onionlab import config as config_mod
    from onionlab.reproduce.throttling.configs import load_params

    flag, thresh = {"flag_rate": "20 KiB/s", "penalty": 0.25}, {"fraction": 0.1, "refresh": "30 s", "floor": "20 KiB/s"}
    assert "unthrottled" not in mechanism_line("flag", flag) + mechanism_line("thresh", thresh), "the default is not written"
    assert mechanism_line("flag", flag, "code").endswith('burst = "2 MiB", unthrottled = "code" }')
    assert 'unthrottled = "code"' in mechanism_line("thresh", thresh, "code")
    # Static and bit-splitting never lift a throttle, so the option leaves them alone.
    assert mechanism_line("static", {"rate": "20 KiB/s"}, "code") == mechanism_line("static", {"rate": "20 KiB/s"})
    assert mechanism_line("split", {}, "code") == mechanism_line("split", {})
    with pytest.raises(ValueError, match="--unthrottled"):
        mechanism_line("flag", flag, "infinite")
    args = _parsed(["--unthrottled", "code"])
    resolved = config_mod.parse(T.configs._check_config(mechanism_line("thresh", thresh, args.unthrottled), relay_sample_text(None), args))
    assert resolved["mechanisms"]["throttling"]["unthrottled"] == "code"
    # A params file is checked with the option it will run with.
    assert load_params(str(PARAMS_DIR / "builtin.json"), relay_sample_text(None), args)["flag"]
    with pytest.raises(SystemExit):
        _parsed(["--unthrottled", "bandwidth-rate"])


def test_cellq_option_takes_high_comma_low():
    import argparse

    assert T._cellq("256,64") == (256, 64)
    for bad in ("256", "64,256", "a,b", "256,-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            T._cellq(bad)


def _timing_fixture(client_rate: float, flagged_from: float | None, duration: int = 300, slows: tuple[float, float] | None = None,
                    flagged_until: float = math.inf):
    """Three guards whose fair shares are 1, 2 and 100 KB/s; one client sending
    `client_rate` B/s through guard "a" (from `slows`' time on, `slows`' rate), observed
    flagged from `flagged_from` on until `flagged_until`."""
    split = {"a": 1000.0, "b": 2000.0, "c": 100000.0}
    relays = pd.DataFrame(
        [{"seed": 1, "relay": g, "interval_start": float(t), "throttle_rate": s} for g, s in split.items() for t in range(duration)]
    )
    conns = pd.DataFrame(
        [
            {"seed": 1, "relay": "a", "client": "c1", "class": "bulk", "interval_start": float(t),
             "bytes_written": int((slows[1] if slows is not None and t >= slows[0] else client_rate) * 10), "bytes_read": 0,
             "throttle_rate": 5000.0 if flagged_from is not None and t + 10 >= flagged_from and t < flagged_until else np.nan}
            for t in range(0, duration, 10)
        ]
    )
    return SimpleNamespace(relays=relays, connections=conns), {g: 1e6 for g in split}


def test_flag_timing_attack_keeps_only_guards_that_would_have_flagged_when_the_target_was_flagged():
    params = {"flag_rate": "5 KiB/s", "penalty": 0.5, "halflife": "30 s"}
    # A steady 5 KB/s connection flagged within the first seconds: guards a and b
    # (fair shares 1 and 2 KB/s) flag it at once; c (100 KB/s) never would.
    res, bw = _timing_fixture(5000.0, flagged_from=10.0)
    a = flag_timing_attack(res, bw, params, warmup_s=0.0, step_s=10.0)
    assert a["set_size"].tolist() == [2]
    assert not a["true_guard_excluded"].any()
    assert a["entropy_loss_bits"].iloc[0] == pytest.approx(math.log2(3) - 1)
    # The same connection never flagged: only c is consistent ("should have resulted in a
    # throttling but did not"), and the true guard a is wrongly excluded.
    res, bw = _timing_fixture(5000.0, flagged_from=None)
    a = flag_timing_attack(res, bw, params, warmup_s=0.0, step_s=10.0)
    assert a["set_size"].tolist() == [1]
    assert a["true_guard_excluded"].all()


def test_flag_timing_attack_tells_guards_apart_by_when_they_would_unflag():
    """The unflag rule and the timing decide, not only the fair share: the target slows
    from 5 KB/s to 700 B/s at 150 s. Under guard a (P*M about 500 B/s) its EWMA stays
    above P*M, so a keeps it flagged; under b (P*M about 1000 B/s) it falls below about
    two minutes later, and b unflags it; c never flags it."""
    params = {"flag_rate": "5 KiB/s", "penalty": 0.5, "halflife": "30 s"}
    kept = lambda **kw: flag_timing_attack(*_timing_fixture(5000.0, flagged_from=10.0, duration=400, slows=(150.0, 700.0), **kw),
                                           params, warmup_s=0.0, step_s=10.0)
    a = kept()  # observed flagged throughout
    assert a["set_size"].tolist() == [1] and not a["true_guard_excluded"].any()
    b = kept(flagged_until=260.0)  # observed unflagged from when b would unflag it (250-270 s)
    assert b["set_size"].tolist() == [1] and b["true_guard_excluded"].all()


def _thresh_fixture(observed: list[tuple[float, float]], duration: int = 120):
    """Three guards whose threshold rates are a: 20 KB/s, then 30 KB/s from t = 60 s;
    b: always 20 KB/s; c: 50 KB/s. One client on guard "a", sampled every 10 s, throttled
    at the rates in `observed` ((interval start, rate)) and unthrottled otherwise."""
    rates = {"a": lambda t: 20000.0 if t + 1 < 60 else 30000.0, "b": lambda t: 20000.0, "c": lambda t: 50000.0}
    relays = pd.DataFrame(
        [{"seed": 1, "relay": g, "interval_start": float(t), "throttle_rate": f(t)} for g, f in rates.items() for t in range(duration)]
    )
    seen = dict(observed)
    conns = pd.DataFrame(
        [{"seed": 1, "relay": "a", "client": "c1", "class": "bulk", "interval_start": float(t), "bytes_written": 100000,
          "bytes_read": 0, "throttle_rate": seen.get(float(t), np.nan)} for t in range(0, duration, 10)]
    )
    return SimpleNamespace(relays=relays, connections=conns), {g: 1e6 for g in rates}


def test_thresh_timing_attack_keeps_only_guards_whose_rate_matched_at_every_throttled_sample():
    # Throttled at 20 KB/s in the first minute: a and b both had that rate.
    res, bw = _thresh_fixture([(0.0, 20000.0), (30.0, 20000.0)])
    a = thresh_timing_attack(res, bw, warmup_s=0.0)
    assert a["set_size"].tolist() == [2] and not a["true_guard_excluded"].any()
    assert a["entropy_loss_bits"].iloc[0] == pytest.approx(math.log2(3) - 1)
    # Then at 30 KB/s after a's rate changed: only a fits both.
    res, bw = _thresh_fixture([(0.0, 20000.0), (70.0, 30000.0)])
    a = thresh_timing_attack(res, bw, warmup_s=0.0)
    assert a["set_size"].tolist() == [1] and not a["true_guard_excluded"].any()
    assert a["entropy_loss_bits"].iloc[0] == pytest.approx(math.log2(3))
    # Never throttled: the attack learns nothing.
    res, bw = _thresh_fixture([])
    a = thresh_timing_attack(res, bw, warmup_s=0.0)
    assert a["set_size"].tolist() == [3] and a["entropy_loss_bits"].iloc[0] == 0.0
    # Without a flood only samples in which the throttle held the connection back count:
    # the 30 KB/s sample never ran the bucket empty, so a and b both stay.
    res, bw = _thresh_fixture([(0.0, 20000.0), (70.0, 30000.0)])
    assert thresh_timing_attack(res, bw, warmup_s=0.0)["attack"].tolist() == ["attack2-timing"], "no bucket_empty_s recorded: no observed rows"
    res.connections["bucket_empty_s"] = np.where(res.connections["interval_start"] == 0.0, 4.0, 0.0)
    both = thresh_timing_attack(res, bw, warmup_s=0.0)
    assert both["attack"].tolist() == ["attack2-timing", "attack2-observed-timing"]
    assert both["set_size"].iloc[0] == 1, "with a flood, as above"
    a = both[both["attack"] == "attack2-observed-timing"]
    assert a["attack"].tolist() == ["attack2-observed-timing"] and a["set_size"].tolist() == [2]
    assert a["entropy_loss_bits"].iloc[0] == pytest.approx(math.log2(3) - 1) and not a["true_guard_excluded"].any()


def test_combined_attack_keeps_the_guards_both_attacks_keep():
    bw = {g: 1e6 for g in "abcd"}
    m = lambda keep: np.array([g in keep for g in "abcd"])  # noqa: E731
    sets = {
        # Band keeps a, b, c; timing keeps b, c, d: b and c remain, 2 of 4 guards, 1 bit.
        (1, "c1", "attack2-observed"): ("bulk", "b", m("abc")),
        (1, "c1", "attack2-observed-timing"): ("bulk", "b", m("bcd")),
        # The two sets do not meet: an empty set tells the attacker nothing.
        (1, "c2", "attack2-observed"): ("web", "a", m("a")),
        (1, "c2", "attack2-observed-timing"): ("web", "a", m("d")),
        # Both keep only c, not the true guard d: 2 bits, and a false exclusion.
        (1, "c3", "attack2"): ("web", "d", m("cd")),
        (1, "c3", "attack2-timing"): ("web", "d", m("c")),
        # No timing set for this target: no combined row.
        (1, "c4", "attack2-observed"): ("web", "a", m("a")),
    }
    a = combined_attack(sets, bw, "thresh").set_index("client")
    assert a.index.tolist() == ["c1", "c2", "c3"]
    assert a.loc["c1", "attack"] == "attack2-observed-combined" and a.loc["c3", "attack"] == "attack2-combined"
    assert a["set_size"].tolist() == [2, 0, 1]
    assert a["entropy_loss_bits"].tolist() == [1.0, 0.0, 2.0]
    assert a["true_guard_excluded"].tolist() == [False, False, True]
    assert (a["algorithm"] == "thresh").all()


def test_medium_load_attacks_combine_band_and_timing_for_flagging_and_threshold():
    res, bw = _thresh_fixture([(0.0, 20000.0), (70.0, 30000.0)])
    res.connections["bucket_empty_s"] = np.where(res.connections["interval_start"] == 0.0, 4.0, 0.0)
    fres, fbw = _timing_fixture(5000.0, flagged_from=10.0)
    fres.connections["bucket_empty_s"] = 0.0
    flag_params = {"flag_rate": "5 KiB/s", "penalty": 0.5, "halflife": "30 s"}
    for alg, r, b in (("thresh", res, bw), ("flag", fres, fbw)):
        a = medium_load_attacks({alg: r}, b, flag_params, warmup_s=0.0).set_index("attack")
        for combined, band, timing in (("attack2-observed-combined", "attack2-observed", "attack2-observed-timing"),
                                       ("attack2-combined", "attack2", "attack2-timing")):
            n = a.loc[combined, "set_size"]
            assert n <= min(a.loc[band, "set_size"], a.loc[timing, "set_size"]), (alg, combined)
    # No timing attack for the other algorithms, so no combined rows.
    a = medium_load_attacks({"split": res}, bw, flag_params, warmup_s=0.0)
    assert not a["attack"].str.endswith("combined").any()


def test_figure4c_draws_every_attack2_reading_the_findings_judge():
    """Figure 4c: the band per algorithm, then flagging's and threshold's timing (dashed)
    and band and timing combined (dotted); the flood's rows belong to another figure."""
    from onionlab.reproduce.throttling.figures import figure4_lines

    def rows(attack, alg, losses):
        return [{"attack": attack, "algorithm": alg, "entropy_loss_bits": x} for x in losses]

    anon = pd.DataFrame(
        rows("attack2-observed", "vanilla", [1.0, 2.0]) + rows("attack2-observed", "flag", [0.5]) + rows("attack2-observed", "thresh", [3.0])
        + rows("attack2-observed-timing", "thresh", [0.2]) + rows("attack2-observed-timing", "flag", [0.4])
        + rows("attack2-observed-combined", "flag", [2.5, 2.0]) + rows("attack2-combined", "flag", [5.0]) + rows("attack1", "flag", [9.0])
    )
    lines = figure4_lines(anon, "attack2-observed")
    assert [(label, style) for label, _, style in lines] == [
        ("vanilla", "-"), ("flag", "-"), ("thresh", "-"), ("flag, timing", "--"), ("thresh, timing", "--"), ("flag, combined", ":"),
    ]
    assert lines[5][1].tolist() == [2.5, 2.0]
    assert [label for label, _, _ in figure4_lines(anon, "attack1")] == ["flag"]


def test_per_minute_sums_bytes_and_averages_throttled_samples():
    c = pd.DataFrame({"seed": 1, "relay": "g", "client": "x", "class": "web", "interval_start": [0.0, 10.0, 50.0, 60.0],
                      "bytes_written": [1, 2, 3, 4], "bytes_read": 0, "throttle_rate": [np.nan, 100.0, 300.0, np.nan]})
    m = _per_minute(c)
    assert m["interval_start"].tolist() == [0.0, 60.0]
    assert m["bytes_written"].tolist() == [6, 4]
    assert m["throttle_rate"].iloc[0] == 200.0 and math.isnan(m["throttle_rate"].iloc[1])
    assert m["bucket_empty_s"].isna().all(), "results without the column: unknown, not zero"
    c["bucket_empty_s"] = [0.0, 3.0, 4.0, 0.0]
    assert _per_minute(c)["bucket_empty_s"].tolist() == [7.0, 0.0]


def test_attack2_on_an_unthrottled_connection_sees_the_circuit_speed_not_its_guards_bandwidth():
    # Vanilla: guards of 100 KB/s and 1 MB/s; the client's circuit (through the 1 MB/s
    # guard) carries 100 KB/s while busy, idle half of each minute.
    bw = {"slow": 1e5, "fast": 1e6}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": float(t), "throttle_rate": np.nan} for g in bw for t in range(0, 600, 60)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": "fast", "client": "c", "class": "web", "interval_start": float(t),
         "bytes_written": int(1e6) if (t // 10) % 2 == 0 else 0, "bytes_read": 0, "throttle_rate": np.nan}
        for t in range(0, 600, 10)
    ])
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "vanilla", warmup_s=0.0).set_index("attack")
    assert a.loc["attack2", "set_size"] == 1 and a.loc["attack2", "true_guard_excluded"], "the flood sees 100 KB/s: the slow guard"
    # Throttled minutes reveal the throttle rate instead.
    conns["throttle_rate"] = 1e6
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "vanilla", warmup_s=0.0).set_index("attack")
    assert a.loc["attack2", "set_size"] == 1 and not a.loc["attack2", "true_guard_excluded"]


def test_vanilla_rate_busiest_reads_each_guards_busiest_connection_per_minute():
    """``--vanilla-rate busiest``: under vanilla a guard's rate in a minute is what its
    busiest client connection carried (bytes / 60 s), summed over the minute's samples,
    not its bandwidth. Two guards of 1 MB/s: at "a", a web client carrying 30 KB/s and a
    bulk one 60 KB/s every minute; at "b", one client carrying 30 KB/s. The target (the
    web client at "a", 30 KB/s every minute, so a band of [30, 30] KB/s) keeps no guard
    by bandwidth and only "b" (a false exclusion: its own guard reads 60 KB/s) by the
    busiest connection. A third guard "c" holds only an idle connection: no reading, so
    never a candidate (not a rate of 0)."""
    bw = {"a": 1e6, "b": 1e6, "c": 1e6}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": float(t), "throttle_rate": np.nan} for g in bw for t in range(0, 300, 60)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": g, "client": c, "class": cls, "interval_start": float(t), "bytes_written": per_s * 30, "bytes_read": 0,
         "throttle_rate": np.nan}
        for g, c, cls, per_s in (("a", "w", "web", 30_000), ("a", "k", "bulk", 60_000), ("b", "x", "web", 30_000), ("c", "z", "web", 0))
        for t in range(0, 300, 30)  # two samples a minute, each half the minute's bytes
    ])
    res = SimpleNamespace(relays=relays, connections=conns)
    rates = _guard_rates(res, bw, "vanilla", "busiest").set_index(["relay", "minute"])["alpha"]
    assert rates.loc[("a", 0)] == 60_000.0 and rates.loc[("b", 4)] == 30_000.0
    assert "c" not in rates.index.get_level_values("relay")
    assert (_guard_rates(res, bw, "vanilla")["alpha"] == 1e6).all(), "the default: the bandwidth"
    assert _guard_rates(res, bw, "split", "busiest")["alpha"].isna().all(), "only vanilla's reading changes"
    by_bw = attacks(res, bw, "vanilla", warmup_s=0.0).set_index(["client", "attack"])
    by_busiest = attacks(res, bw, "vanilla", warmup_s=0.0, vanilla_rate="busiest").set_index(["client", "attack"])
    assert by_bw.loc[("w", "attack1"), "set_size"] == 0
    assert by_busiest.loc[("w", "attack1"), "set_size"] == 1 and by_busiest.loc[("w", "attack1"), "true_guard_excluded"]
    assert by_busiest.loc[("k", "attack1"), "set_size"] == 1 and not by_busiest.loc[("k", "attack1"), "true_guard_excluded"]
    with pytest.raises(ValueError, match="--vanilla-rate: must be one of bandwidth, busiest, got 'probe'"):
        medium_load_attacks({"vanilla": res}, bw, {}, 0.0, vanilla_rate="probe")
    # The pooled tool analyses extra seeds as the directory was analysed: its summary's
    # reading, or the bandwidth for a directory from before the option.
    from onionlab.reproduce.throttling.pooling import summary_vanilla_rate

    assert summary_vanilla_rate({"vanilla_rate": "busiest"}) == "busiest" and summary_vanilla_rate({}) == "bandwidth"


def test_a_set_is_a_false_exclusion_when_the_true_guard_is_not_a_candidate_at_all():
    """A target whose guard lies outside the candidates (not in the attack pool) cannot be
    in any set the attacker keeps: a non-empty set excludes it. 1 of 2 candidates kept:
    1 bit. An empty set still counts as nothing learnt."""
    from onionlab.reproduce.throttling.anonymity import _set_row

    gi = {"a": 0, "b": 1}
    row = _set_row(1, "c", "web", "attack1", "split", np.array([True, False]), "elsewhere", gi)
    assert (row["set_size"], row["entropy_loss_bits"], row["true_guard_excluded"]) == (1, 1.0, True)
    assert not _set_row(1, "c", "web", "attack1", "split", np.array([False, False]), "elsewhere", gi)["true_guard_excluded"]


def test_an_empty_anonymity_set_counts_as_nothing_skipped_or_the_maximum_as_asked():
    """Spec 7.4: "If A_c = ∅, report max loss or skip; state the policy used". Three targets
    over 8 candidates: a set of 2 with the true guard (2 bits), a set of 1 without it (3
    bits, a false exclusion), and an empty set."""
    anon = pd.DataFrame({
        "seed": 1, "client": ["a", "b", "c"], "class": "web", "attack": "attack1", "algorithm": "split",
        "set_size": [2, 1, 0], "entropy_loss_bits": [2.0, 3.0, 0.0], "true_guard_excluded": [False, True, False],
    })
    nothing = empty_set_policy(anon, "nothing", 8)
    pd.testing.assert_frame_equal(nothing, anon)
    skip = empty_set_policy(anon, "skip", None)
    assert skip["entropy_loss_bits"].tolist()[:2] == [2.0, 3.0] and math.isnan(skip["entropy_loss_bits"].iloc[2])
    assert skip["true_guard_excluded"].tolist() == [False, True, False], "a skipped target has no set to exclude its guard from"
    most = empty_set_policy(anon, "max", 8)
    assert most["entropy_loss_bits"].tolist() == [2.0, 3.0, 3.0] and most["true_guard_excluded"].tolist() == [False, True, True]
    # The policy reads set_size, not the loss written: any policy's rows can be counted again.
    pd.testing.assert_frame_equal(empty_set_policy(most, "nothing", None), anon)
    pd.testing.assert_frame_equal(empty_set_policy(skip, "max", 8), most)
    s = {p: summarise(f, ["algorithm"]).iloc[0] for p, f in (("nothing", nothing), ("skip", skip), ("max", most))}
    assert [s[p]["clients"] for p in s] == [3, 3, 3] and all(s[p]["empty_set_rate"] == pytest.approx(1 / 3) for p in s)
    assert s["nothing"]["mean_loss_bits"] == pytest.approx(5 / 3) and s["nothing"]["false_exclusion_rate"] == pytest.approx(1 / 3)
    # Skipped: the mean and the exclusions over the two targets with a set.
    assert s["skip"]["mean_loss_bits"] == pytest.approx(2.5) and s["skip"]["false_exclusion_rate"] == pytest.approx(0.5)
    assert s["skip"]["mean_correct_loss_bits"] == pytest.approx(1.0)
    assert s["max"]["mean_loss_bits"] == pytest.approx(8 / 3) and s["max"]["false_exclusion_rate"] == pytest.approx(2 / 3)
    # Every target skipped: nothing learnt, 0 bits, as the findings count it (not NaN);
    # no set, so no false exclusion rate.
    all_empty = empty_set_policy(anon.assign(set_size=0, algorithm="static"), "skip", None)
    t = summarise(pd.concat([skip, all_empty]), ["algorithm"]).set_index("algorithm")
    assert t.loc["static", "mean_loss_bits"] == 0.0 and t.loc["static", "median_loss_bits"] == 0.0
    assert t.loc["static", "mean_correct_loss_bits"] == 0.0 and t.loc["static", "empty_set_rate"] == 1.0
    assert math.isnan(t.loc["static", "false_exclusion_rate"]) and t.loc["split", "mean_loss_bits"] == pytest.approx(2.5)
    with pytest.raises(ValueError, match="--empty-set: must be one of nothing, skip, max, got 'zero'"):
        empty_set_policy(anon, "zero", 8)
    with pytest.raises(ValueError, match="--empty-set max: needs the number of candidate guards"):
        empty_set_policy(anon, "max", None)


def test_attack_pool_is_the_relays_clients_may_take_as_guards_unless_asked_for_every_relay():
    relays = [
        {"name": "g1", "bandwidth": "1 MB/s", "flags": ["Guard", "Fast"]},
        {"name": "g2", "bandwidth": "2 MB/s", "flags": ["Guard", "Exit"]},
        {"name": "m", "bandwidth": "100 kB/s", "flags": ["Fast"]},
    ]
    assert attack_pool(relays, "guards") == {"g1": 1e6, "g2": 2e6}
    assert attack_pool(relays, "relays") == {"g1": 1e6, "g2": 2e6, "m": 1e5}
    with pytest.raises(ValueError, match="--attack-pool guards: the relay sample has no Guard-flagged relay"):
        attack_pool([relays[2]], "guards")
    with pytest.raises(ValueError, match="--attack-pool: must be one of guards, relays, got 'all'"):
        attack_pool(relays, "all")
    # Vanilla: the client's circuit (through g1) carries 100 and 200 kB/s in turn, minute
    # by minute (band 140 +- 49 kB/s), which only the middle-only relay m's bandwidth
    # matches. Over every relay the attacker keeps m (log2(3) bits, the true guard
    # excluded); over the guards it keeps none (nothing learnt).
    rel = pd.DataFrame([{"seed": 1, "relay": r["name"], "interval_start": float(t), "throttle_rate": np.nan} for r in relays for t in range(0, 300, 60)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": "g1", "client": "c", "class": "web", "interval_start": float(t), "bytes_written": int(1e6) * (1 + (t // 60) % 2),
         "bytes_read": 0, "throttle_rate": np.nan}
        for t in range(0, 300, 10)
    ])
    res = SimpleNamespace(relays=rel, connections=conns)
    every = attacks(res, attack_pool(relays, "relays"), "vanilla", warmup_s=0.0).set_index("attack")
    assert every.loc["attack1", "set_size"] == 1 and every.loc["attack1", "true_guard_excluded"]
    assert every.loc["attack1", "entropy_loss_bits"] == pytest.approx(math.log2(3))
    guards = attacks(res, attack_pool(relays, "guards"), "vanilla", warmup_s=0.0).set_index("attack")
    assert guards.loc["attack1", "set_size"] == 0 and guards.loc["attack1", "entropy_loss_bits"] == 0
    assert not guards.loc["attack1", "true_guard_excluded"]


def test_attack_variant_keeps_a_guard_whose_rate_was_in_the_band_in_some_minute():
    # Split: the target's connection (at g1) is throttled at 10, 10, 12, 12 KB/s in minutes
    # 0-3, so its band is 11 +- 1 KB/s. g1's rate is the same; g2's is 11 KB/s in minute 0
    # and 30 KB/s after (mean 25.25, outside the band); g3's is 50 KB/s throughout.
    rates = {"g1": [10e3, 10e3, 12e3, 12e3], "g2": [11e3, 30e3, 30e3, 30e3], "g3": [50e3] * 4}
    bw = {g: 1e6 for g in rates}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": 60.0 * m, "throttle_rate": r[m]} for g, r in rates.items() for m in range(4)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": "g1", "client": "c", "class": "bulk", "interval_start": float(t),
         "bytes_written": 1000, "bytes_read": 0, "throttle_rate": rates["g1"][t // 60]}
        for t in range(0, 240, 10)
    ])
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=0.0).set_index("attack")
    assert a.loc["attack2", "set_size"] == 1, "by the mean rule only g1 is left"
    assert a.loc["attack2", "entropy_loss_bits"] == pytest.approx(math.log2(3))
    assert a.loc["attack2-any", "set_size"] == 2, "g2's 11 KB/s minute keeps it"
    assert a.loc["attack2-any", "entropy_loss_bits"] == pytest.approx(math.log2(3) - 1)
    assert not a.loc["attack2-any", "true_guard_excluded"]


def test_the_band_is_the_mean_plus_minus_the_population_sd_of_measured_active_minutes():
    """Attack 1's band, edge by edge. Split, four guards, warm-up 60 s (minute 0 is before
    it and wildly off; minute 1 starts exactly at 60 s and counts). The target (at g1)
    carries 10, 10, 14 and 14 kB/s in minutes 1-4 and nothing in minute 5: an idle minute
    shows no rate. Mean 12 kB/s, population sd 2 kB/s (deviations all +-2), so the band
    is [10, 14] kB/s, both ends inclusive. (Sample sd, sqrt(16/3) = 2.31, would give
    [9.69, 14.31]; the idle minute read as 0 would give mean 9.6, sd 5.12.)
    Guards' rates in minutes 1-4, by the mean rule:
    - g0 10 kB/s throughout: mean 10, on the band's lower edge: kept;
    - g1 12 kB/s: kept (the true guard);
    - g2 16.6 then 13.4 x 3: mean 56.8 / 4 = 14.2, outside (inside by sample sd; 13.4
      if minute 1 were dropped);
    - g3 14, 14, 14 and 158: mean 50, outside (its median, 14, would be inside).
    Set {g0, g1}: log2(4) - log2(2) = 1 bit. By the any-minute rule every guard has a
    minute in [10, 14] (g3's 14 on the upper edge): all four, 0 bits."""
    rates = {"g0": [10_000] * 4, "g1": [12_000] * 4, "g2": [16_600, 13_400, 13_400, 13_400], "g3": [14_000, 14_000, 14_000, 158_000]}
    bw = {g: 1e6 for g in rates}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": 60.0 * m, "throttle_rate": float(([1e6] + r)[m])}
                           for g, r in rates.items() for m in range(5)])
    per_minute = [6_000_000, 600_000, 600_000, 840_000, 840_000, 0]  # bytes in minutes 0-5
    conns = pd.DataFrame([{"seed": 1, "relay": "g1", "client": "c", "class": "bulk", "interval_start": 60.0 * m, "bytes_written": b,
                           "bytes_read": 0, "throttle_rate": np.nan} for m, b in enumerate(per_minute)])
    sets: dict = {}
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=60.0, sets=sets).set_index("attack")
    assert sets[(1, "c", "attack1")][2].tolist() == [True, True, False, False]
    assert a.loc["attack1", "set_size"] == 2 and a.loc["attack1", "entropy_loss_bits"] == pytest.approx(1.0)
    assert not a.loc["attack1", "true_guard_excluded"]
    assert sets[(1, "c", "attack1-any")][2].tolist() == [True, True, True, True]
    assert a.loc["attack1-any", "entropy_loss_bits"] == 0.0


def test_attack2_observed_learns_a_throttle_rate_only_where_it_held_the_connection_back():
    # Split: guards at 5, 10, 30 and 100 KB/s per connection; the target's connection (at
    # g1, 10 KB/s) carries 20 KB in each of its busiest 10 s in minutes 0-3, spending burst
    # tokens, and nothing in minutes 4-5: its own traffic never shows the throttle. A flood
    # would (attack2: g1 only); the circuit's traffic shows 2 KB/s peaks, below every guard
    # (attack2-observed: no set, nothing learned). Once the bucket runs empty in every
    # active minute, the traffic shows 10 KB/s: g1 only. The idle minutes show nothing; were
    # they read as 0 B/s, the band would stretch to 2-11 KB/s and keep g0 too.
    rates = {"g0": 5e3, "g1": 10e3, "g2": 30e3, "g3": 100e3}
    bw = {g: 1e6 for g in rates}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": 60.0 * m, "throttle_rate": r} for g, r in rates.items() for m in range(6)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": "g1", "client": "c", "class": "web", "interval_start": float(t), "bytes_written": 20_000 if t < 240 else 0,
         "bytes_read": 0, "throttle_rate": 10e3, "bucket_empty_s": 0.0}
        for t in range(0, 360, 10)
    ])
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=0.0).set_index("attack")
    assert a.loc["attack2", "set_size"] == 1 and not a.loc["attack2", "true_guard_excluded"]
    assert a.loc["attack2-observed", "set_size"] == 0 and a.loc["attack2-observed", "entropy_loss_bits"] == 0.0
    conns["bucket_empty_s"] = np.where(conns["bytes_written"] > 0, 5.0, 0.0)
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=0.0).set_index("attack")
    assert a.loc["attack2-observed", "set_size"] == 1 and not a.loc["attack2-observed", "true_guard_excluded"]
    assert a.loc["attack2-observed", "entropy_loss_bits"] == pytest.approx(2.0)
    assert a.loc["attack2-observed-any", "set_size"] == 1


def test_attack2_observed_throughput_reads_unthrottled_minutes_as_attack1_does():
    # Split guards at 5, 10, 30 and 100 KB/s per connection; the target (at g1) sends
    # 300 KB in one 10 s burst a minute and its bucket never runs empty. Its busiest 10 s
    # show 30 KB/s (attack2-observed: g2), its minutes 5 KB/s (attack 1 and the throughput
    # variant: g0). Both sets miss the true guard. Once a minute shows the bucket empty,
    # both variants read the throttle rate there.
    rates = {"g0": 5e3, "g1": 10e3, "g2": 30e3, "g3": 100e3}
    bw = {g: 1e6 for g in rates}
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": 60.0 * m, "throttle_rate": r} for g, r in rates.items() for m in range(4)])
    conns = pd.DataFrame([
        {"seed": 1, "relay": "g1", "client": "c", "class": "web", "interval_start": float(t), "bytes_written": 300_000 if t % 60 == 0 else 0,
         "bytes_read": 0, "throttle_rate": 10e3, "bucket_empty_s": 0.0}
        for t in range(0, 240, 10)
    ])
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=0.0).set_index("attack")
    assert a.loc["attack1", "set_size"] == 1 and a.loc["attack1", "true_guard_excluded"]
    assert a.loc["attack2-observed", "set_size"] == 1 and a.loc["attack2-observed", "true_guard_excluded"]
    assert a.loc["attack2-observed-throughput", "set_size"] == 1 and a.loc["attack2-observed-throughput", "true_guard_excluded"]
    assert a.loc["attack2-observed-throughput", "entropy_loss_bits"] == a.loc["attack1", "entropy_loss_bits"] == pytest.approx(2.0)
    # Throttled (bucket empty) in every active minute: the rate shows, 10 KB/s, g1 alone.
    conns["bucket_empty_s"] = np.where(conns["bytes_written"] > 0, 5.0, 0.0)
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "split", warmup_s=0.0).set_index("attack")
    for attack in ("attack2-observed", "attack2-observed-throughput"):
        assert a.loc[attack, "set_size"] == 1 and not a.loc[attack, "true_guard_excluded"], attack


def test_attack_targets_are_each_clients_main_guard_connection_with_two_active_minutes():
    # After a 60 s warm-up: "two" gets more bytes from "b" than from "a" (and "a" before the
    # warm-up does not count); "tie" gets as much from "a" as from "b" (the first by name
    # is its main guard); "once" is active in one minute only; "idle" sends nothing.
    rows = [
        ("two", "a", 0.0, 10**6), ("two", "a", 60.0, 10), ("two", "a", 120.0, 10), ("two", "b", 60.0, 500), ("two", "b", 180.0, 500),
        ("tie", "b", 60.0, 100), ("tie", "b", 120.0, 100), ("tie", "a", 60.0, 100), ("tie", "a", 180.0, 100),
        ("once", "a", 60.0, 100), ("once", "a", 70.0, 100),
        ("idle", "a", 60.0, 0), ("idle", "a", 120.0, 0),
    ]
    conns = pd.DataFrame([{"seed": 1, "relay": g, "client": c, "class": "web", "interval_start": t, "bytes_written": b, "bytes_read": 0,
                           "throttle_rate": np.nan} for c, g, t, b in rows])
    relays = pd.DataFrame([{"seed": 1, "relay": g, "interval_start": float(t), "throttle_rate": np.nan} for g in "ab" for t in range(0, 240, 60)])
    bw = {"a": 1e5, "b": 1e6}
    a = attacks(SimpleNamespace(relays=relays, connections=conns), bw, "vanilla", warmup_s=60.0)
    assert sorted(set(a["client"])) == ["tie", "two"]
    assert (a.groupby("client").size() == 4).all(), "attacks 1 and 2, each by both rules"
    targets = {client: (guard, rows_["interval_start"].tolist()) for client, _, guard, rows_ in _timing_targets(conns, 60.0, {"a": 0, "b": 1})}
    assert targets == {"tie": ("a", [60.0, 180.0]), "two": ("b", [60.0, 180.0])}
    # A main guard the attacker does not know is not a target of the timing attacks.
    assert [t[0] for t in _timing_targets(conns, 60.0, {"a": 0})] == ["tie"]


def test_throttle_state_hand_worked():
    # Warm-up 10 s. Guard g2 has no client connection at 30 s: that sample is left out.
    relays = pd.DataFrame({
        "relay": ["g1", "g1", "g1", "g1", "g2", "g2", "g2"],
        "interval_start": [0.0, 10.0, 20.0, 30.0, 10.0, 20.0, 30.0],
        "client_connections": [3, 3, 3, 3, 2, 2, 0],
        "throttled_connections": [3, 2, 1, 0, 1, 0, 0],
        "throttle_rate": [20480.0, 20480.0, 30000.0, float("nan"), 20480.0, float("nan"), 50.0],
    })
    conns = pd.DataFrame({
        "class": ["bulk", "web", "web", "web", "web", "bulk", "bulk"],
        "interval_start": [0.0, 10.0, 10.0, 20.0, 30.0, 10.0, 20.0],
        "throttle_rate": [20480.0, 20480.0, float("nan"), float("nan"), float("nan"), 20480.0, 30000.0],
    })
    res = SimpleNamespace(relays=relays, connections=conns)
    s = throttle_state(res, "thresh", {"floor": "20 KiB/s"}, warmup_s=10.0)
    assert s["guard_samples_throttling_pct"] == pytest.approx(60.0)  # 3 of 5 samples
    assert s["throttled_connections_per_guard"] == pytest.approx(0.8)  # (2+1+0+1+0)/5
    assert s["at_floor_pct"] == pytest.approx(200 / 3)  # 20480, 30000, 20480
    assert s["web_throttled_pct"] == pytest.approx(25.0)
    assert s["bulk_throttled_pct"] == pytest.approx(100.0)
    assert s["web_pct_of_throttled"] == pytest.approx(100 / 3)
    assert math.isnan(throttle_state(res, "flag", {}, warmup_s=10.0)["at_floor_pct"])
    empty = throttle_state(SimpleNamespace(relays=relays.iloc[:0], connections=conns.iloc[:0]), "thresh", {"floor": "5 KiB/s"}, 0.0)
    assert all(math.isnan(v) for k, v in empty.items() if k != "algorithm")


def test_busiest_channels_averages_over_samples_and_ranks_by_queued_cells():
    # Relay X writes to Y and Z over two 10 s samples after the warm-up (one before it is
    # ignored). X->Y: 10 circuits, 8 active, 400 then 600 cells queued, 40 KiB each
    # sample; X->Z: open only in the second sample, 1 circuit, 20 KiB. Z->X: idle.
    rows = [
        (0.0, "X", "Y", 99 * 1024, 99, 99, 9999),
        (10.0, "X", "Y", 40 * 1024, 10, 8, 400),
        (20.0, "X", "Y", 40 * 1024, 10, 8, 600),
        (20.0, "X", "Z", 20 * 1024, 1, 1, 50),
        (10.0, "Z", "X", 0, 1, 0, 0),
        (20.0, "Z", "X", 0, 1, 0, 0),
    ]
    ch = pd.DataFrame(rows, columns=["interval_start", "relay", "peer", "bytes_written", "circuits", "active_circuits", "queued_cells"]).assign(seed=1)
    t = busiest_channels(SimpleNamespace(channels=ch), warmup_s=10.0)
    assert list(zip(t["relay"], t["peer"])) == [("X", "Y"), ("X", "Z"), ("Z", "X")]
    xy, xz, zx = (t.iloc[i] for i in range(3))
    assert xy["kib_per_s"] == pytest.approx(80 / 20) and xy["queued_cells"] == 500 and xy["active_circuits"] == 8
    assert xy["kib_per_s_per_active_circuit"] == pytest.approx(0.5) and xy["share_of_relay"] == pytest.approx(80 / 100)
    # Absent from the first sample: it counts as empty then.
    assert xz["kib_per_s"] == pytest.approx(1.0) and xz["active_circuits"] == 0.5 and xz["queued_cells"] == 25
    assert math.isnan(zx["kib_per_s_per_active_circuit"]) and zx["circuits"] == 1
    assert len(busiest_channels(SimpleNamespace(channels=ch), warmup_s=10.0, top=1)) == 1
    assert busiest_channels(SimpleNamespace(channels=ch.iloc[:0]), warmup_s=10.0).empty


def test_a_sweep_at_two_loads_runs_each_point_at_each_and_chooses_once(tmp_path, capsys):
    import argparse

    from onionlab.reproduce.throttling import add_arguments
    from onionlab.reproduce.throttling.configs import RELAYS_FILE
    from onionlab.reproduce.throttling.sweep import sweep

    p = argparse.ArgumentParser()
    add_arguments(p)
    # Seed 7: held out from the main runs (seed 1 in --quick), so no note says otherwise.
    args = p.parse_args(["--quick", "--sweep-loads", "heavy,light", "--jobs", "2", "--grid", "static.rate=10 KiB/s", "--sweep-first-seed", "7"])
    args.duration, args.warmup, args.sweep_seeds, args.criterion, args.seeds = "2 min", "1 min", 1, "median", 1
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / RELAYS_FILE).write_text(relay_sample_text(None))
    chosen = sweep(tmp_path, args, RELAYS_FILE, grid_overrides(args.grid))
    assert set(pd.read_csv(tmp_path / "sweep_per_seed.csv")["seed"]) == {7}
    assert "also main-run seeds" not in capsys.readouterr().out
    assert chosen["static"] == {"rate": "10 KiB/s"} and set(chosen) == {"vanilla", "static", "split", "flag", "thresh"}
    t = pd.read_csv(tmp_path / "sweep.csv")
    # vanilla, split, one static, one flag and one thresh point, at each load.
    assert len(t) == 10 and sorted(t["load"].unique()) == ["heavy", "light"]
    assert (t.groupby("algorithm")["load"].nunique() == 2).all()
    assert (t.loc[t["algorithm"] == "vanilla", "criterion_vs_vanilla"] == 1.0).all()
    for name, bulk in (("sweep-light-vanilla-00", 25), ("sweep-heavy-thresh-00", 100)):
        text = (tmp_path / "configs" / f"{name}.toml").read_text()
        assert f'name = "bulk"\nworkload = "bulk"\ncount = {bulk}' in text, name


def test_reuse_runs_loads_matching_runs_whatever_their_name_and_reruns_the_rest(quick, tmp_path, capsys):
    import shutil

    out = tmp_path / "again"
    shutil.copytree(quick, out)
    # A run saved under another name is found by its config; a run whose config no longer
    # matches (its directory now holds another config) is run again.
    (out / "runs" / "medium-split").rename(out / "runs" / "saved-under-another-name")
    cfg = out / "runs" / "light-static" / "config.toml"
    cfg.write_text(cfg.read_text().replace('duration = "3 min"', 'duration = "4 min"'))
    # A damaged run is run again, not the end of the command.
    (out / "runs" / "heavy-flag" / "relays.parquet").write_bytes(b"cut short")
    args = ["reproduce", "throttling", "--quick", "-o", str(out), "--jobs", "2", "--grid", "thresh.fraction=0.1,0.2,0.4", "--reuse-runs"]
    assert main(args) == 0
    err = capsys.readouterr().err
    # 15 main configurations, two (light-static, heavy-flag) run again.
    assert "heavy-flag cannot be read" in err and "reusing 13 of 15 configurations" in err
    copied = json.loads((out / "runs" / "medium-split" / "summary.json").read_text())
    assert copied["experiment"] == "medium-split" and {r["experiment"] for r in copied["runs"]} == {"medium-split"}
    for f in ("table1.csv", "sweep.csv", "findings.csv", "anonymity_summary.csv", "attack3.csv"):
        assert (out / f).read_text() == (quick / f).read_text(), f


def test_reuse_runs_from_another_output_reads_it_and_copies_its_runs(quick, tmp_path, capsys):
    """A new output directory built from an earlier one's runs: nothing runs again, the
    outputs are the earlier ones, and the earlier directory is not written to."""
    before = {f: f.stat().st_mtime_ns for f in (quick / "runs").rglob("*") if f.is_file()}
    out = tmp_path / "from-quick"
    args = ["reproduce", "throttling", "--quick", "-o", str(out), "--jobs", "2", "--grid", "thresh.fraction=0.1,0.2,0.4", "--reuse-runs-from", str(quick)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "reusing 15 of 15 configurations" in err and f"{quick / 'runs'}" in err
    assert " runs, " not in err, "nothing was run"
    for f in ("table1.csv", "sweep.csv", "findings.csv", "anonymity_summary.csv", "attack3.csv"):
        assert (out / f).read_text() == (quick / f).read_text(), f
    assert (out / "runs" / "medium-flag" / "downloads.parquet").is_file()
    assert {f: f.stat().st_mtime_ns for f in (quick / "runs").rglob("*") if f.is_file()} == before


def test_linking_rates_hand_worked():
    """Attack 3 on hand-made tables, 5 s connection samples, a 1200 s run. At guard g1:
    - s1's first response ends at 12 s; in the next interval its throttle is set but its
      bucket never runs empty (a fresh burst): the guard's state says throttled, the test
      response is not held back;
    - s1's second response ends at 212 s, and in that interval the bucket runs empty: both
      readings say throttled;
    - s2's response never finishes: its throttle was set at 400 s (outside the window) and
      its bucket runs empty in the run's last-but-one interval: both say throttled;
    - s3's response never finishes either; its throttle was set and its bucket ran empty at
      400 s only, long before the run's end: neither reading counts it (the test response
      goes out when the run ends);
    - s4's response starts in the run's last 10 s and is cut short: it cannot be tested
      and is left out of the rates;
    - two link-diff responses from different clients start 10 s apart, both throttle-set
      by their end but only d1's bucket empty (a false-positive pair by the state, not by
      the test response); d3 starts 100 s later (no pair)."""
    from onionlab.reproduce.throttling.anonymity import _linking_rates

    downloads = pd.DataFrame({
        "seed": 1, "client": ["s1", "s1", "s2", "s3", "s4", "d1", "d2", "d3"], "class": ["link-same"] * 5 + ["link-diff"] * 3,
        "path": "g1,m,x", "start": [5.0, 200.0, 300.0, 350.0, 1195.0, 500.0, 510.0, 610.0], "ttlb": [7.0, 12.0, np.nan, np.nan, np.nan, 3.0, 4.0, 2.0],
    })
    samples = [("s1", 15.0, 0.0), ("s1", 210.0, 2.0), ("s2", 400.0, 0.0), ("s2", 1190.0, 1.0), ("s3", 400.0, 3.0), ("s4", 1195.0, 5.0),
               ("d1", 505.0, 1.0), ("d2", 515.0, 0.0)]
    connections = pd.DataFrame({"seed": 1, "relay": "g1", "client": [c for c, _, _ in samples], "interval_start": [t for _, t, _ in samples],
                                "throttle_rate": 5120.0, "bucket_empty_s": [e for _, _, e in samples]})
    rates = _linking_rates(SimpleNamespace(connections=connections, downloads=downloads), run_end=1200.0)
    assert rates["same_client_responses"] == 4 and rates["unfinished_responses"] == 3 and rates["different_client_pairs"] == 1
    # The test response held back (the attacker's reading): s1's second and s2.
    assert rates["true_positive_rate"] == pytest.approx(2 / 4) and rates["false_positive_rate"] == 0.0
    assert rates["single_response_throttled_rate"] == pytest.approx(1 / 3)
    # The guard's throttle state (the paper's reasoning; not observable): s1 twice and s2.
    assert rates["state_true_positive_rate"] == pytest.approx(3 / 4) and rates["state_false_positive_rate"] == 1.0
    assert rates["state_single_response_throttled_rate"] == pytest.approx(2 / 3)
    # Every response met one guard in one run: one cell, so no design effect to estimate,
    # and the interval is Newcombe's over the four responses and the one pair.
    from onionlab.stats import difference_ci95

    assert (rates["difference_ci95_low"], rates["difference_ci95_high"]) == pytest.approx(difference_ci95(2, 4, 0, 1))
    assert (rates["state_difference_ci95_low"], rates["state_difference_ci95_high"]) == pytest.approx(difference_ci95(3, 4, 1, 1))
    # Runs from before the bucket column have the state reading only.
    old = _linking_rates(SimpleNamespace(connections=connections.drop(columns=["bucket_empty_s"]), downloads=downloads), run_end=1200.0)
    assert math.isnan(old["true_positive_rate"]) and old["state_true_positive_rate"] == pytest.approx(3 / 4) and old["different_client_pairs"] == 1


def test_attack3_interval_counts_responses_at_one_guard_as_fewer():
    """Ten same-client responses in each of ten (seed, guard) cells, and nine pairs in each.
    If one cell's ten responses are all held back (TPR 0.10), they rose and fell with that
    guard's state: the interval is wider than Newcombe's over 100 independent responses.
    Spread over the ten cells, one each, the same TPR is Newcombe's interval exactly (the
    design effect's floor of 1), as is every interval without a held-back response. A pair
    held back counts in its own cell: all in one cell widens the interval too."""
    from onionlab.reproduce.throttling.anonymity import _linking_difference_ci95
    from onionlab.stats import difference_ci95

    same_cell, pair_cell = np.repeat(np.arange(10), 10), np.repeat(np.arange(10), 9)
    no_pair = np.zeros(90, dtype=bool)
    one_cell = same_cell == 0
    lo, hi = _linking_difference_ci95(same_cell, one_cell, pair_cell, no_pair, 180)
    newcombe = difference_ci95(10, 100, 0, 90)
    assert lo < newcombe[0] and hi > newcombe[1]
    spread = np.zeros(100, dtype=bool)
    spread[::10] = True  # each cell's first response
    assert _linking_difference_ci95(same_cell, spread, pair_cell, no_pair, 180) == pytest.approx(newcombe)
    assert _linking_difference_ci95(same_cell, np.zeros(100, dtype=bool), pair_cell, no_pair, 180) == pytest.approx(difference_ci95(0, 100, 0, 90))
    # 90 pairs made of 30 responses are at most 30 independent trials, held back or not.
    from onionlab.stats import _newcombe

    assert _linking_difference_ci95(same_cell, spread, pair_cell, no_pair, 30) == pytest.approx(_newcombe(0.1, 100, 0.0, 30))
    # Nine false-positive pairs: spread over nine cells, or all in cell 3.
    spread_pairs = pair_cell.copy() == -1
    spread_pairs[::10] = True
    clumped = pair_cell == 3
    assert _linking_difference_ci95(same_cell, spread, pair_cell, spread_pairs, 180) == pytest.approx(difference_ci95(10, 100, 9, 90))
    clumped_lo, clumped_hi = _linking_difference_ci95(same_cell, spread, pair_cell, clumped, 180)
    assert clumped_lo < difference_ci95(10, 100, 9, 90)[0] and clumped_hi > difference_ci95(10, 100, 9, 90)[1]
    assert all(math.isnan(x) for x in _linking_difference_ci95(same_cell[:0], one_cell[:0], pair_cell, no_pair, 180))


def test_linking_pairs_are_different_clients_starting_at_most_30_s_apart():
    """Attack 3's false-positive pairs at one guard: d1 (client x) at 500 s, d2 (x again)
    at 510 s, d3 (y) at 530 s, d4 (z) at 561 s. Pairs: d1-d3 (30 s apart: within) and
    d2-d3 (20 s); not d1-d2 (one client), nor d4 with anyone (31 s and more). Each response
    ends 2 s after it starts; d1's and d3's buckets run empty then, so d1-d3 is held back
    and d2-d3 is not: FPR 1/2."""
    from onionlab.reproduce.throttling.anonymity import _linking_rates

    rows = [("d1", "x", 500.0, 1.0), ("d2", "x", 510.0, 0.0), ("d3", "y", 530.0, 1.0), ("d4", "z", 561.0, 0.0)]
    downloads = pd.DataFrame({"seed": 1, "client": [c for _, c, _, _ in rows], "class": "link-diff", "path": "g1,m,x",
                              "start": [t for _, _, t, _ in rows], "ttlb": 2.0})
    connections = pd.DataFrame({"seed": 1, "relay": "g1", "client": [c for _, c, _, _ in rows], "interval_start": [(t + 2.0) // 5 * 5 for _, _, t, _ in rows],
                                "throttle_rate": 5120.0, "bucket_empty_s": [e for *_, e in rows]})
    rates = _linking_rates(SimpleNamespace(connections=connections, downloads=downloads), run_end=1200.0)
    assert rates["different_client_pairs"] == 2
    assert rates["false_positive_rate"] == pytest.approx(0.5)


def test_linking_rates_cluster_by_guard_and_seed():
    """Four same-client responses, two at each of guards g1 and g2 (seed 1), the two at g1
    held back; two different-client pairs, one at each guard, neither held back. TPR 2/4
    with one cell all held back and one none: a design effect of 2, so the four responses
    count as two; the two pairs, made of four responses, count as two."""
    from onionlab.reproduce.throttling.anonymity import _linking_rates
    from onionlab.stats import _newcombe

    rows = [("s1", "link-same", "g1", 100.0), ("s2", "link-same", "g1", 300.0), ("s3", "link-same", "g2", 100.0), ("s4", "link-same", "g2", 300.0),
            ("d1", "link-diff", "g1", 500.0), ("d2", "link-diff", "g1", 505.0), ("d3", "link-diff", "g2", 500.0), ("d4", "link-diff", "g2", 505.0)]
    downloads = pd.DataFrame({"seed": 1, "client": [c for c, *_ in rows], "class": [k for _, k, *_ in rows], "path": [f"{g},m,x" for _, _, g, _ in rows],
                              "start": [t for *_, t in rows], "ttlb": 2.0})
    # Each response ends at start + 2 s; its connection's bucket ran dry then for s1 and s2.
    connections = pd.DataFrame({"seed": 1, "relay": [g for _, _, g, _ in rows], "client": [c for c, *_ in rows],
                                "interval_start": [(t + 2.0) // 5 * 5 for *_, t in rows], "throttle_rate": 5120.0,
                                "bucket_empty_s": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]})
    rates = _linking_rates(SimpleNamespace(connections=connections, downloads=downloads), run_end=1200.0)
    assert (rates["same_client_responses"], rates["different_client_pairs"]) == (4, 2)
    assert (rates["true_positive_rate"], rates["false_positive_rate"]) == (0.5, 0.0)
    assert (rates["difference_ci95_low"], rates["difference_ci95_high"]) == pytest.approx(_newcombe(0.5, 2.0, 0.0, 2.0))


def test_attack3_runs_each_response_size_and_names_the_papers_as_before(tmp_path):
    """`--attack3-sizes "1 MiB,4 MiB"`: the paper's size keeps its run names, 4 MiB sends
    8 MiB to the same client and 4 MiB to each of two; by the guard's state bit-splitting
    and static throttle every response, vanilla none, and no response is held back under
    vanilla (it has no bucket)."""
    import argparse
    import tomllib

    from onionlab.reproduce.throttling import add_arguments
    from onionlab.reproduce.throttling.anonymity import attack3
    from onionlab.reproduce.throttling.configs import RELAYS_FILE

    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--quick", "--jobs", "2", "--attack3-sizes", "1 MiB,4 MiB"])
    args.duration, args.warmup = "8 min", "1 min"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / RELAYS_FILE).write_text(relay_sample_text(None))
    chosen = {"vanilla": {}, "static": {"rate": "50 KiB/s"}, "split": {}, "flag": {"flag_rate": "5 KiB/s", "penalty": 0.25, "halflife": "30 s"},
              "thresh": {"fraction": 0.1, "refresh": "30 s", "floor": "20 KiB/s"}}
    t = attack3(tmp_path, args, RELAYS_FILE, chosen, [1])
    assert list(t["response_size"]) == ["1 MiB"] * 5 + ["4 MiB"] * 5
    assert (tmp_path / "runs" / "attack3-flag").is_dir() and (tmp_path / "runs" / "attack3-4MiB-flag").is_dir()
    cfg = tomllib.loads((tmp_path / "configs" / "attack3-4MiB-thresh.toml").read_text())
    assert (cfg["workloads"]["link-same"]["size"], cfg["workloads"]["link-diff"]["size"]) == ("8 MiB", "4 MiB")
    assert pd.read_csv(tmp_path / "attack3.csv").equals(t)
    assert (t.loc[t["response_size"] == "1 MiB", "same_client_responses"] > 0).all()
    assert (t["different_client_pairs"] > 0).all()
    state = ["state_true_positive_rate", "state_false_positive_rate", "state_single_response_throttled_rate"]
    # At 1 MiB every algorithm has same-client responses and different-client pairs, so
    # every rate there is a number: a NaN would be a reading that failed, not a gap.
    one = t[t["response_size"] == "1 MiB"]
    assert not one[state + ["true_positive_rate", "false_positive_rate", "difference_ci95_low", "difference_ci95_high"]].isna().any().any()
    for alg, expected in (("vanilla", 0.0), ("static", 1.0), ("split", 1.0)):
        got = t.loc[t["algorithm"] == alg, state].to_numpy().ravel()
        assert (got[~np.isnan(got)] == expected).all(), alg
    held = t[["true_positive_rate", "false_positive_rate", "single_response_throttled_rate"]]
    assert (held.loc[t["algorithm"] == "vanilla"].fillna(0.0) == 0.0).all().all()
    values = held.to_numpy().ravel()
    assert ((values[~np.isnan(values)] >= 0) & (values[~np.isnan(values)] <= 1)).all()


def test_anonymity_summary_counts_a_misled_attacker_as_learning_nothing():
    """Three web targets: 4 bits with the true guard kept, 2 bits with it excluded, and an
    empty set (0 bits); one bulk target, 5 bits, kept. Correct loss counts the excluded
    set as 0."""
    from onionlab.reproduce.throttling.anonymity import summarise

    anon = pd.DataFrame({
        "attack": ["attack1"] * 4, "algorithm": ["flag"] * 4, "client": ["w1", "w2", "w3", "b1"],
        "class": ["web", "web", "web", "bulk"], "entropy_loss_bits": [4.0, 2.0, 0.0, 5.0],
        "true_guard_excluded": [False, True, False, False], "set_size": [2, 8, 0, 1],
    })
    t = summarise(anon, ["attack", "algorithm"]).iloc[0]
    assert (t.clients, t.mean_loss_bits, t.false_exclusion_rate, t.mean_correct_loss_bits) == (4, 11 / 4, 0.25, 9 / 4)
    assert t.empty_set_rate == 0.25 and t.median_loss_bits == 3.0  # the median of 0, 2, 4 and 5
    by = summarise(anon, ["attack", "algorithm", "class"]).set_index("class")
    assert by.at["web", "mean_loss_bits"] == 2.0 and by.at["web", "mean_correct_loss_bits"] == pytest.approx(4 / 3)
    assert by.at["bulk", "mean_correct_loss_bits"] == 5.0 and by.at["bulk", "clients"] == 1


def test_attack4_steps_up_the_attacked_guards_connections_and_scores_every_algorithm(quick):
    from onionlab.config import tomllib
    from onionlab.reproduce.throttling.attack4 import ATTACKER_CLASS
    from onionlab.reproduce.throttling.configs import seconds

    a4 = pd.read_csv(quick / "attack4.csv")
    assert set(a4["algorithm"]) == {"vanilla", "static", "split", "flag", "thresh"}
    assert {"all", "bulk", "web", "attack4-paced"} <= set(a4["class"])
    assert ((a4["auc"].isna()) | a4["auc"].between(0, 1)).all()
    assert (a4["positives"] > 0).any()
    cfgs = sorted((quick / "configs").glob("attack4-split-*.toml"))
    assert len(cfgs) == 2, cfgs  # the two busiest guards, one run each
    cfg = tomllib.loads(cfgs[0].read_text())
    attackers = [g for g in cfg["clients"] if re.fullmatch(ATTACKER_CLASS, g["name"])]
    guard = cfgs[0].stem.removeprefix("attack4-split-")
    # The paced targets: their own guards, their downlink the pace, below the guard's fair share.
    (paced,) = [g for g in cfg["clients"] if g["name"] == "attack4-paced"]
    assert "path" not in paced and paced["count"] == 50
    relays = {r["name"]: r for r in tomllib.loads((quick / "configs" / cfg["relays_file"]).read_text())["relays"]}
    from onionlab._core import parse_byte_rate
    pace, bw = parse_byte_rate(paced["link_down"]), parse_byte_rate(relays[guard]["bandwidth"])
    n0 = attackers[0]["count"]  # at factor 2 the first step adds N0
    assert bw / (2 * n0) < pace < bw / n0
    assert [g["path"][0] for g in attackers] == [guard] * 3
    counts = [g["count"] for g in attackers]
    assert counts[1] == 2 * counts[0] and counts[2] == 4 * counts[0]  # N0, 2 N0, 4 N0: the guard's count doubles each step
    starts = [seconds(g["start"]) for g in attackers]
    assert starts == sorted(starts) and starts[0] > 60  # after the quick run's 1-minute warm-up
    f = pd.read_csv(quick / "findings.csv")
    assert {"attack4_adaptive", "attack4_static_vanilla_nothing", "attack4_paced_adaptive", "attack4_paced_static_vanilla_nothing"} <= set(f["finding"])


# ---------------------------------------------------------------- --params

def _parsed(argv: list[str]):
    import argparse

    p = argparse.ArgumentParser()
    T.add_arguments(p)
    return p.parse_args(argv)


PARAMS_DIR = Path(__file__).resolve().parents[2] / "examples" / "throttling-params"


SHIPPED_PARAMS = ["builtin", "builtin-once", "builtin-once-mean", "paper-mean", "paper-once", "paper-once-static300",
                  "builtin-exit-first", "builtin-once-exit-first", "builtin-once-mean-exit-first", "paper-mean-exit-first",
                  "paper-once-exit-first", "paper-once-static300-exit-first"]


def shipped_path_order(name: str) -> str:
    """The order a shipped file's sweep ran: every file not named for tor's order was tuned guard-first."""
    return "exit-first" if name.endswith("exit-first") else "guard-first"


def test_every_shipped_params_file_is_tested():
    assert sorted(p.stem for p in PARAMS_DIR.glob("*.json")) == sorted(SHIPPED_PARAMS)


@pytest.mark.parametrize("name", SHIPPED_PARAMS)
def test_every_shipped_choice_passes_params_on_its_sample(name):
    from onionlab.reproduce.throttling.configs import load_params

    args = _parsed((["--sample", "paper"] if name.startswith("paper") else []) + ["--path-order", shipped_path_order(name)])
    chosen = load_params(str(PARAMS_DIR / f"{name}.json"), relay_sample_text(None, args.sample), args)
    assert sorted(chosen) == sorted(T.ALGORITHMS) and chosen["vanilla"] == {} and chosen["split"] == {}
    # Each file is named in the README with the command that regenerates its column, in
    # the path order its sweep ran.
    assert f"--path-order {shipped_path_order(name)} --no-sweep --params examples/throttling-params/{name}.json" in (PARAMS_DIR / "README.md").read_text()


def test_a_bad_params_file_fails_before_any_run_naming_every_problem(tmp_path):
    from onionlab.reproduce.throttling.configs import load_params

    args = _parsed([])
    relays = relay_sample_text(None)
    good = json.loads((PARAMS_DIR / "builtin.json").read_text())

    def err(content) -> str:
        f = tmp_path / "p.json"
        f.write_text(content if isinstance(content, str) else json.dumps(content))
        with pytest.raises(ValueError) as e:
            load_params(str(f), relays, args)
        assert str(e.value).startswith(f"--params {f}:")
        return str(e.value)

    assert "not JSON" in err("{")
    assert "one entry per algorithm" in err("[]")
    assert "unknown algorithm 'statik'" in err({**good, "statik": {}})
    assert "no parameters for thresh" in err({k: v for k, v in good.items() if k != "thresh"})
    msg = err({**good, "vanilla": {"rate": "1 KiB/s"}, "static": {"rat": "5 KiB/s"}, "flag": {**good["flag"], "penalty": 2}, "thresh": 3})
    assert "vanilla: takes no parameters, got rate" in msg
    assert "static: mechanisms.throttling.rat: unknown key `rat`" in msg and "did you mean `rate`" in msg
    assert "flag: mechanisms.throttling.penalty: must be between 0 and 1, found 2" in msg
    assert "thresh: expected an object of parameters, got 3" in msg
    with pytest.raises(ValueError, match="cannot read it"):
        load_params(str(tmp_path / "missing.json"), relays, args)


def test_a_bad_params_file_stops_the_command_before_any_config_is_written(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"vanilla": {}, "static": {"rate": "0 KiB/s"}, "split": {}, "flag": {}, "thresh": {}}))
    assert main(["reproduce", "throttling", "--no-sweep", "--params", str(f), "-o", str(tmp_path / "o")]) != 0
    assert f"--params {f}:\nstatic: mechanisms.throttling.rate" in capsys.readouterr().err
    assert not list((tmp_path / "o" / "configs").glob("medium-*.toml"))


def test_the_sweep_seeds_can_be_held_out_from_the_main_runs(tmp_path, capsys):
    """By default the sweep's seeds (1-2) are main-run seeds too; ``--sweep-first-seed``
    moves them, and below 1 is an error naming it."""
    import argparse

    from onionlab.reproduce.throttling import add_arguments
    from onionlab.reproduce.throttling.sweep import seeds_shared_with_main_runs, sweep_seed_list

    p = argparse.ArgumentParser()
    add_arguments(p)
    default = p.parse_args([])
    assert sweep_seed_list(default) == [1, 2] and seeds_shared_with_main_runs(default) == [1, 2]
    moved = p.parse_args(["--sweep-first-seed", "5", "--sweep-seeds", "3"])
    assert sweep_seed_list(moved) == [5, 6, 7] and seeds_shared_with_main_runs(moved) == [5]
    assert seeds_shared_with_main_runs(p.parse_args(["--sweep-first-seed", "6"])) == []
    assert main(["reproduce", "throttling", "--quick", "--sweep-first-seed", "0", "-o", str(tmp_path / "o")]) != 0
    assert "--sweep-first-seed: must be at least 1, got 0" in capsys.readouterr().err


# ---------------------------------------------------------------- pooling, on empty directories and stand-in results


def _main_runs(out: Path) -> None:
    for load in T.configs.LOADS:
        for alg in T.configs.ALGORITHMS:
            (out / "runs" / f"{load}-{alg}").mkdir(parents=True)


def test_an_extra_directory_must_hold_a_load_for_all_five_algorithms(tmp_path):
    """A load pooled for some algorithms only would compare them on different networks:
    refused, naming the first missing run. Whole, it joins after the directory's own run,
    and a load it does not hold keeps the directory's run alone."""
    from onionlab.reproduce.throttling.pooling import _sources

    out, extra = tmp_path / "out", tmp_path / "extra"
    _main_runs(out)
    (extra / "medium-flag").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=re.escape(f"{extra / 'medium-vanilla'}: not found ({extra} holds medium-load runs of flag; a load needs all five")):
        _sources(out, [extra], ("light", "medium"))
    for alg in T.configs.ALGORITHMS:
        (extra / f"medium-{alg}").mkdir(exist_ok=True)
    got = _sources(out, [extra], ("light", "medium"))
    assert got[("medium", "flag")] == [out / "runs" / "medium-flag", extra / "medium-flag"]
    assert got[("light", "flag")] == [out / "runs" / "light-flag"]


def test_every_pooled_configuration_must_have_the_same_seeds(tmp_path, monkeypatch):
    """Threshold's medium-load runs pooled to seeds 1-3 and every other configuration's to
    1-2: the algorithms would be compared on different networks."""
    from onionlab.reproduce.throttling import pooling

    _main_runs(tmp_path)
    monkeypatch.setattr(pooling, "_pooled_config", lambda out, load, alg, dirs: (None, [1, 2, 3] if (load, alg) == ("medium", "thresh") else [1, 2], []))
    with pytest.raises(ValueError, match="medium-thresh: pooled seeds 1, 2, 3, but light-vanilla has 1, 2; every configuration needs the same seeds"):
        list(pooling._iter_pooled(tmp_path, [], ("light", "medium")))


def test_a_seed_is_pooled_once_and_defaults_are_those_of_old_directories(tmp_path, monkeypatch):
    """Two results directories of one config: seeds 1, 2 and 3, 4 join (four rows, one per
    seed); 1, 2 and 3, 2 would count seed 2 twice. A summary written before the options
    existed analysed every relay as a candidate, counted an empty set as nothing learnt,
    and read vanilla's rate as the bandwidth."""
    from onionlab import results
    from onionlab.reproduce.throttling.pooling import _pooled_config, summary_attack_pool, summary_empty_set, summary_vanilla_rate

    seeds = {"a": [1, 2], "b": [3, 4], "c": [3, 2]}

    def load(d):
        s = seeds[Path(d).name]
        config = f'[experiment]\nname = "{Path(d).name}"\nseeds = {s}\n\n[[relays]]\nname = "g"\n'
        return SimpleNamespace(config=config, **{t: pd.DataFrame({"seed": s}) for t in ("relays", "connections", "downloads")})

    monkeypatch.setattr(results, "load", load)
    runs, got, relays = _pooled_config(tmp_path, "medium", "flag", [tmp_path / "a", tmp_path / "b"])
    assert got == [1, 2, 3, 4] and runs.connections["seed"].tolist() == [1, 2, 3, 4] and relays == [{"name": "g"}]
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'c'}: seed 2 is also in {tmp_path / 'a'}; each seed may be pooled once")):
        _pooled_config(tmp_path, "medium", "flag", [tmp_path / "a", tmp_path / "c"])
    assert (summary_attack_pool({}), summary_empty_set({}), summary_vanilla_rate({})) == ("relays", "nothing", "bandwidth")
    assert (summary_attack_pool({"attack_pool": "guards"}), summary_empty_set({"empty_set": "skip"})) == ("guards", "skip")
