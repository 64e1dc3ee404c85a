"""Networks from real Tor data: the consensus parser, parameter mapping, scaled sampling
(bandwidth distribution by two-sample K-S, position proportions), determinism, the
capacity snapshot, and `onionlab generate` -> `check --load` -> `run` end to end."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import numpy as np
import pytest

from onionlab import generate as gen
from onionlab.cli import main

from conftest import ROOT, needs_core

DATA = ROOT / "data" / "consensus"
STEM = DATA / "stem-samples"
C2010 = DATA / "NetworkConsensus_1-12-10.txt"
C2022 = DATA / "cached-consensus-2022-11-19-1000.xz"


@pytest.fixture(scope="module")
def c2022():
    return gen.read_consensus(C2022)


@pytest.fixture(scope="module")
def c2010():
    return gen.read_consensus(C2010)


def flag_counts(cons):
    return Counter(f for r in cons.relays for f in r.flags)


def test_2010_consensus_as_documented(c2010):
    assert len(c2010.relays) == 1737
    assert c2010.method == 8
    assert c2010.valid_after == "2010-01-12 21:00:00"
    fc = flag_counts(c2010)
    assert (fc["Running"], fc["Valid"], fc["Fast"], fc["Stable"]) == (1737, 1737, 1655, 843)
    assert (fc["Exit"], fc["Guard"], fc["BadExit"], fc["Authority"], fc["Named"]) == (756, 439, 1, 7, 1161)
    bw = [r.bandwidth for r in c2010.relays]
    assert (sum(bw), max(bw), bw.count(0)) == (2_086_391, 91_100, 11)
    assert c2010.bandwidth_weights == {}  # predates bandwidth-weights
    assert c2010.params == {"circwindow": 1000}


def test_2022_consensus_as_documented(c2022):
    assert len(c2022.relays) == 6088
    assert c2022.method == 32
    fc = flag_counts(c2022)
    assert (fc["Guard"], fc["Exit"], fc["BadExit"], fc["Fast"], fc["Stable"]) == (3020, 1438, 11, 5716, 4752)
    assert sum(r.unmeasured for r in c2022.relays) == 9
    assert abs(sum(r.bandwidth for r in c2022.relays) - 94.1e6) < 0.1e6
    w = c2022.bandwidth_weights
    assert (w["Wgg"], w["Wmg"], w["Wee"], w["Wed"], w["Wgd"]) == (9611, 389, 10000, 10000, 0)
    assert len(w) == 19
    assert c2022.params["CircuitPriorityHalflifeMsec"] == 30000
    assert c2022.params["cc_alg"] == 2


def test_stem_samples():
    tiny = gen.read_consensus(STEM / "cached-consensus")
    assert len(tiny.relays) == 3 and tiny.method == 26
    assert "client-versions" in tiny.warnings[0]  # empty in this test-network consensus
    metrics = gen.read_consensus(STEM / "metrics_consensus")  # starts with an @type annotation
    assert len(metrics.relays) == 7 and metrics.method == 12
    tar = STEM / "consensuses-2018-06-cropped.tar"
    import tarfile

    members = sorted(m.name for m in tarfile.open(tar).getmembers() if m.isfile())
    sizes = [len(gen.read_consensus(tar, m).relays) for m in members]
    assert sizes == [208, 35]
    first = gen.read_consensus(tar, members[0])
    assert first.method == 28 and first.bandwidth_weights and first.params


def test_parser_errors_name_the_file(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    with pytest.raises(gen.GenerateError, match="notes.txt.*not a v3"):
        gen.read_consensus(bad)
    with pytest.raises(gen.GenerateError, match="several documents"):
        gen.read_consensus(STEM / "consensuses-2018-06-cropped.tar")
    with pytest.raises(gen.GenerateError, match="no member 'x'"):
        gen.read_consensus(STEM / "consensuses-2018-06-cropped.tar", "x")
    with pytest.raises(gen.GenerateError, match="missing.txt.*cannot read"):
        gen.read_consensus(tmp_path / "missing.txt")
    broken = tmp_path / "broken"
    broken.write_text((STEM / "cached-consensus").read_text().replace("valid-after", "valid-aftr"))
    with pytest.raises(gen.GenerateError, match="broken.*cannot parse"):
        gen.read_consensus(broken)
    snap = tmp_path / "snap.json"
    snap.write_text('{"guards": [1, -2], "middles": [], "exits": []}')
    with pytest.raises(gen.GenerateError, match="snap.json.*guards"):
        gen.read_capacity_snapshot(snap)


def test_params_map_to_config_and_the_rest_is_recorded(c2022, c2010):
    relay, tor, notes = gen.map_params(c2022.params)
    # 2022 relays ran KIST every 2 ms (KISTSchedRunInterval=2) over EWMA circuitmuxes.
    assert relay == {"scheduler": '{ kind = "kist", run_interval = "2 ms", halflife = "30000 ms", tick = "10 s" }'}
    # The 2022 network ran proposal 324's Vegas (cc_alg=2) with these exit parameters.
    vegas = '{ kind = "vegas", cwnd_inc = 1, cwnd_inc_rate = 31, ss_cap = 400, alpha = 155, delta = 310 }'
    assert tor == {"circ_max_cell_queue": 2000, "num_entry_guards": 2, "congestion_control": vegas}
    assert set(notes) == set(c2022.params)
    assert "vegas" in notes["cc_alg"] and "kist, run every 2 ms" in notes["KISTSchedRunInterval"]
    assert "onion" in notes["cc_vegas_beta_onion"] and notes["cc_vegas_alpha_exit"] == "tor.congestion_control.alpha"
    _, tor, notes = gen.map_params({"cc_alg": 0, "cc_vegas_alpha_exit": 155})
    assert "congestion_control" not in tor and "not applied" in notes["cc_vegas_alpha_exit"]
    assert "unsupported" in gen.map_params({"cc_alg": 1})[2]["cc_alg"]
    # KIST disabled (0), or EWMA disabled: no KIST, and the note says why.
    relay, _, notes = gen.map_params({"KISTSchedRunInterval": 0, "CircuitPriorityHalflifeMsec": 30000})
    assert relay["scheduler"].startswith('{ kind = "ewma"') and "disables KIST" in notes["KISTSchedRunInterval"]
    relay, _, notes = gen.map_params({"KISTSchedRunInterval": 2, "CircuitPriorityHalflifeMsec": -1})
    assert relay == {"scheduler": '"round-robin"'} and "not applied" in notes["KISTSchedRunInterval"]
    assert gen.map_params(c2010.params)[1] == {"circ_window": 1000}
    relay, _, notes = gen.map_params({"perconnbwrate": 50_000, "perconnbwburst": 2_000_000, "CircuitPriorityHalflifeMsec": -1})
    assert relay == {"perconn": '{ rate = "50000 B/s", burst = "2000000 B" }', "scheduler": '"round-robin"'}
    assert "both" in gen.map_params({"perconnbwrate": 1})[2]["perconnbwrate"]


def test_a_halflife_of_zero_disables_ewma_in_old_tor_only():
    """tor 0.2.2 turns EWMA off at CircuitPriorityHalflifeMsec <= 0; tor 0.4.8 cannot: it
    clamps the param to its minimum, 1 ms (circuitmux_ewma.c). CircuitPriorityTickSecs
    sets the tick (1..600 s) where tor has it."""
    params = {"CircuitPriorityHalflifeMsec": 0, "KISTSchedRunInterval": 2}
    assert gen.map_params(params, "0.2.2")[0] == {"scheduler": '"round-robin"'}
    relay, _, notes = gen.map_params(params, "0.4.8")
    assert relay == {"scheduler": '{ kind = "kist", run_interval = "2 ms", halflife = "1 ms", tick = "10 s" }'}
    relay, _, notes = gen.map_params({"CircuitPriorityHalflifeMsec": -5}, "0.4.8")
    assert relay == {"scheduler": '{ kind = "ewma", halflife = "1 ms", tick = "10 s" }'}
    assert "-5 clamped to tor 0.4.8's minimum" in notes["CircuitPriorityHalflifeMsec"]
    relay, _, notes = gen.map_params({"CircuitPriorityHalflifeMsec": 30000, "CircuitPriorityTickSecs": 900}, "0.4.8")
    assert relay == {"scheduler": '{ kind = "ewma", halflife = "30000 ms", tick = "600 s" }'}
    assert notes["CircuitPriorityTickSecs"] == "mechanisms.scheduler's tick: 600 s"
    relay, _, notes = gen.map_params({"CircuitPriorityHalflifeMsec": 30000, "CircuitPriorityTickSecs": 5}, "0.2.2")
    assert 'tick = "10 s"' in relay["scheduler"] and "not in tor 0.2.2" in notes["CircuitPriorityTickSecs"]


def test_tor_version_profile_follows_the_recommended_client_versions(c2022, c2010):
    # 2022: newest recommended 0.4.7.11 -> today's tor; 2010: 0.2.2.6-alpha -> the papers' tor.
    assert gen.tor_profile_for(c2022) == ("0.4.8", "newest recommended client version 0.4.7.11")
    assert gen.tor_profile_for(c2010)[0] == "0.2.2"
    tar = STEM / "consensuses-2018-06-cropped.tar"
    import tarfile

    member = sorted(m.name for m in tarfile.open(tar).getmembers() if m.isfile())[0]
    profile, why = gen.tor_profile_for(gen.read_consensus(tar, member))
    assert profile is None and "0.3." in why and "--tor-version" in why, why
    assert gen.tor_profile_for(gen.read_consensus(STEM / "cached-consensus")) == (None, "the consensus recommends no client versions")

    plan = gen.plan_network(c2022, 0.01)
    t = plan.tor_defaults
    assert (t["predicted_circuits"], t["cellq_high"], t["cellq_low"], t["refill_interval"]) == ("true", "256", "10", '"100 ms"')
    assert t["idle_channel_timeout"] == '{ client = ["180 s", "270 s"], relay = ["45 min", "75 min"] }' 
    # Live clients have learned their build times: no test circuits, and cbttestfreq=10
    # says why it is not applied.
    assert "cbt_learning" not in t and "learned their build times" in plan.param_notes["cbttestfreq"]
    assert gen.CBT_TEST_CIRCUITS["0.4.8"] == '{ test_frequency = "10 s", max_clean = 10 }' 
    # A consensus param overrides the profile: guard-n-primary-guards-to-use=2.
    assert t["num_entry_guards"] == 2 and "num_entry_guards" not in plan.tor_sources
    assert set(plan.param_notes) == set(c2022.params)
    # Paths in tor's order: the exit first, then a primary guard (3) that obeys it; 0.4.8
    # samples guards with no /16 rule, 0.2.2 kept them in distinct /16s.
    assert (t["path_order"], t["num_primary_guards"], t["distinct_guard_subnets"]) == ('"exit-first"', "3", "false")
    assert "select_primary_guard_for_circuit" in plan.tor_sources["path_order"]
    old = gen.plan_network(c2010, 0.01).tor_defaults
    assert (old["path_order"], old["num_primary_guards"], old["distinct_guard_subnets"]) == ('"exit-first"', "3", "true")
    # guard-n-primary-guards sets the primaries under 0.4.8 (it is not 0.2.2's), and the
    # guards in use are capped at them (tor looks only among the primaries).
    assert gen.map_params({"guard-n-primary-guards": 4}, "0.4.8")[1] == {"num_primary_guards": 4}
    assert "not in tor 0.2.2" in gen.map_params({"guard-n-primary-guards": 4}, "0.2.2")[2]["guard-n-primary-guards"]
    few = gen.plan_network(dataclasses.replace(c2022, params={**c2022.params, "guard-n-primary-guards": 1}), 0.01)
    assert (few.tor_defaults["num_primary_guards"], few.tor_defaults["num_entry_guards"]) == (1, 1)
    assert "capped" in few.param_notes["guard-n-primary-guards-to-use"]
    assert (old["refill_interval"], old["num_entry_guards"], old["cellq_low"]) == ('"1 s"', "3", "64")
    assert (old["predicted_circuits"], old["circ_window"]) == ("true", 1000) and "cbt_learning" not in old
    # Tor 0.2.2 had no optimistic data; 0.4.8 keeps the default (on).
    assert old["optimistic_data"] == "false" and "optimistic_data" not in t
    # An explicit choice wins over the consensus's era; none leaves onionlab's defaults.
    assert gen.plan_network(c2010, 0.01, tor_version="0.4.8").tor_defaults["cellq_low"] == "10"
    none = gen.plan_network(c2022, 0.01, tor_version="none")
    assert "predicted_circuits" not in none.tor_defaults and "cellq_high" not in none.tor_defaults
    with pytest.raises(gen.GenerateError, match="--tor-version.*0.3.4"):
        gen.plan_network(c2022, 0.01, tor_version="0.3.4")


def test_tor_behaviour_tuning_params():
    tor, sources, notes = gen.tor_behaviour("0.4.8", {"cbttestfreq": 30, "cbtmaxopencircs": 4, "cellq_high": 500, "cellq_low": 50})
    assert (tor["cellq_high"], tor["cellq_low"]) == ("500", "50") and "cbt_learning" not in tor
    assert (notes["cellq_high"], notes["cellq_low"]) == ("tor.cellq_high", "tor.cellq_low")
    assert "its max_clean" in notes["cbtmaxopencircs"] and "its test_frequency" in notes["cbttestfreq"]
    assert sources["predicted_circuits"].startswith("tor 0.4.8")
    # nf_conntimeout_relays sets the relay channels' range to 3/4..5/4 of it (tor 0.4.8).
    tor, _, notes = gen.tor_behaviour("0.4.8", {"nf_conntimeout_relays": 1200})
    assert tor["idle_channel_timeout"] == '{ client = ["180 s", "270 s"], relay = ["900 s", "1500 s"] }'
    assert "3/4" in notes["nf_conntimeout_relays"]
    assert "not applied" in gen.tor_behaviour("0.2.2", {"nf_conntimeout_relays": 1200})[2]["nf_conntimeout_relays"]
    assert "outside" in gen.tor_behaviour("0.4.8", {"nf_conntimeout_relays": 10})[2]["nf_conntimeout_relays"]
    tor, _, notes = gen.tor_behaviour("0.4.8", {"cellq_low": 300})
    assert (tor["cellq_high"], tor["cellq_low"]) == ("256", "10") and "must be below" in notes["cellq_low"]
    tor, sources, notes = gen.tor_behaviour(None, {"cellq_high": 256})
    assert tor == {} and sources == {} and "not applied" in notes["cellq_high"]


def critical(n, m, alpha_c=1.628):  # c(alpha = 0.01)
    return alpha_c * math.sqrt((n + m) / (n * m))


@pytest.mark.parametrize("scale", [0.01, 0.05, 0.2])
def test_sampled_bandwidths_match_the_source(c2022, scale):
    src = [r.bandwidth for r in c2022.relays]
    for seed in (1, 2):
        plan = gen.plan_network(c2022, scale, seed=seed)
        got = [r.bandwidth for r in plan.relays]
        d, p = gen.ks_2samp(got, src)
        # Stratified sampling: far inside the alpha = 0.01 acceptance region.
        assert d < critical(len(got), len(src)) / 2, (scale, seed, d)
        assert p > 0.5
        # Per position class too, and the classes keep their proportions.
        by = Counter(r.position for r in plan.relays)
        full = Counter(r.position for r in c2022.relays)
        for k in full:
            assert abs(by[k] - scale * full[k]) <= 1.0, (k, by[k], scale * full[k])
            cls = [r.bandwidth for r in plan.relays if r.position == k]
            srcc = [r.bandwidth for r in c2022.relays if r.position == k]
            assert gen.ks_2samp(cls, srcc)[0] < critical(len(cls), len(srcc)), k


def test_ks_detects_a_biased_sample(c2022):
    src = np.array([r.bandwidth for r in c2022.relays])
    top = np.sort(src)[-60:]  # the 60 fastest relays: not the distribution
    d, p = gen.ks_2samp(top, src)
    assert d > critical(60, src.size) and p < 1e-6


def test_ks_statistic_known_values():
    assert gen.ks_2samp([1, 2, 3], [1, 2, 3]) == (0.0, 1.0)
    assert gen.ks_2samp([1, 2, 3], [4, 5, 6])[0] == 1.0
    # F_a jumps at 1,2,3,4 (0.25 each), F_b at 2.5, 3.5: max gap 0.5 at x = 2.
    assert gen.ks_2samp([1, 2, 3, 4], [2.5, 3.5])[0] == pytest.approx(0.5)
    scipy = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(size=300), rng.lognormal(0.2, size=500)
    ref = scipy.ks_2samp(a, b, method="asymp")
    d, p = gen.ks_2samp(a, b)
    assert d == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue, rel=0.1, abs=1e-3)


def test_full_scale_takes_every_relay(c2022):
    plan = gen.plan_network(c2022, 1.0)
    assert sorted(r.fingerprint for r in plan.relays) == sorted(r.fingerprint for r in c2022.relays)
    assert plan.users == gen.DEFAULT_TOTAL_USERS and plan.servers == 2000


def test_clients_and_servers_scale(c2022):
    plan = gen.plan_network(c2022, 0.1, load_scale=0.5, total_users=1_000_000)
    assert (plan.users, plan.servers, plan.perf_clients) == (50_000, 50, 10)
    with pytest.raises(gen.GenerateError, match="--network-scale"):
        gen.plan_network(c2022, 0)
    with pytest.raises(gen.GenerateError, match="--load-scale"):
        gen.plan_network(c2022, 0.1, load_scale=-1)


def test_output_is_deterministic_per_seed(c2022, tmp_path):
    def text(seed, d):
        gen.write_network(gen.plan_network(c2022, 0.02, seed=seed), tmp_path / d)
        return (tmp_path / d / "network.toml").read_text()

    a = text(5, "a")
    assert a == text(5, "b")
    assert a != text(6, "c")
    assert "Unsupported consensus params" in a and 'congestion_control = { kind = "vegas"' in a
    meta = json.loads((tmp_path / "a" / "generate.json").read_text())
    unsupported = meta["unsupported_params"]
    assert "cc_vegas_beta_onion" in unsupported and "cc_alg" not in unsupported and "CircuitPriorityHalflifeMsec" not in unsupported


def test_regions_are_stable_and_matrix_is_symmetric():
    slots = gen.location_slots()
    assert len(slots) == gen.LOCATION_SLOTS
    share = Counter(slots)
    for i, (_, _, client_share) in enumerate(gen.REGIONS):
        assert share[i] == round(client_share * gen.LOCATION_SLOTS)
    m = np.array(gen.REGION_LATENCY_MS)
    assert (m == m.T).all() and (m > 0).all()
    # Relay regions follow the relay shares (hash of fingerprints).
    rng = np.random.default_rng(0)
    fps = ["%040X" % rng.integers(1 << 62) for _ in range(20000)]
    got = Counter(gen.region_of(f) for f in fps)
    for i, (_, relay_share, _) in enumerate(gen.REGIONS):
        assert abs(got[i] / 20000 - relay_share) < 0.015


def test_snapshot_source_and_capacity_matching(c2022):
    snap = gen.read_capacity_snapshot(DATA / "tor-consensus-with-observed-weights-2021-04-30.json")
    assert len(snap.relays) == 6481
    plan = gen.plan_network(snap, 0.1)
    assert Counter(r.position for r in plan.relays) == {"guard": 273, "middle": 257, "exit": 118}
    d, _ = gen.ks_2samp([r.bandwidth for r in plan.relays], [r.bandwidth for r in snap.relays])
    assert d < critical(len(plan.relays), len(snap.relays)) / 2
    caps = gen.capacity_by_rank(c2022.relays, snap)
    assert len(caps) == len(c2022.relays)
    guards = [caps[r.fingerprint] for r in c2022.relays if r.position == "guard"]
    pool = [r.bandwidth for r in snap.relays if "Guard" in r.flags]
    assert gen.ks_2samp(guards, pool)[0] < 0.01


@needs_core
def test_generate_check_load_and_run(tmp_path, capsys):
    out = tmp_path / "net1"
    argv = ["generate", "-o", str(out), "--network-scale", "0.01", "--users", "3000", "--seed", "3", "--duration", "40 s", "--warmup", "10 s"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "61 of 6088 relays" in printed and "K-S D" in printed
    exp = out / "experiment.toml"
    assert "tor behaviour: tor 0.4.8 (newest recommended client version 0.4.7.11)" in printed
    # The 2022 consensus's relays run KIST (every 2 ms) over EWMA, and the run below uses it,
    # with today's tor's predicted and build-time test circuits and edge blocking.
    text = (out / "network.toml").read_text()
    assert 'scheduler = { kind = "kist", run_interval = "2 ms"' in text
    # Once, as the network's default, so the experiment's mechanisms.scheduler replaces it on
    # every relay (written on each relay, it silently beat a sweep of the scheduler).
    mechanisms = text.split("[mechanisms]", 1)[1].split("[network]", 1)[0]
    assert text.count("scheduler = ") == 1 and "scheduler = { kind = \"kist\"" in mechanisms
    # The experiment shows where what is studied goes: uncommented, its example replaces the
    # network's scheduler and guard count.
    studied = exp.read_text().replace("# [mechanisms]", "[mechanisms]").replace("# scheduler", "scheduler").replace("# [tor]", "[tor]")
    (out / "studied.toml").write_text(studied.replace("# num_entry_guards", "num_entry_guards"))
    assert main(["show-config", str(out / "studied.toml")]) == 0
    shown = capsys.readouterr().out
    assert shown.count('kind = "ewma"') == 62 and "num_entry_guards = 1" in shown
    assert main(["show-config", str(exp), "--set", "mechanisms.scheduler=ewma"]) == 0
    shown = capsys.readouterr().out
    assert shown.count('kind = "kist"') == 0 and shown.count('kind = "ewma"') == 62, shown.count('kind = "ewma"')
    assert "predicted_circuits = true" in text and "cellq_low = 10" in text and "# Tor behaviour: tor 0.4.8" in text
    assert json.loads((out / "generate.json").read_text())["tor_version"]["profile"] == "0.4.8"
    assert main(["check", "--load", str(exp)]) == 0
    printed = capsys.readouterr().out
    assert "loaded: 61 relays, 31 clients, 1 servers" in printed
    assert main(["run", str(exp), "-o", str(tmp_path / "res"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "markov" in printed
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["classes"]["markov"]["downloads"] > 0
    # Clients built spare circuits: more circuits than the 31 clients' streams need.
    assert summary["counters"]["circuits_built"] > 31, summary["counters"]


def test_generate_without_params_or_profile_says_so(tmp_path, capsys):
    # Nothing from the consensus params or a tor version: the messages and the experiment's
    # examples say what is replaced (not "not modelled", not the consensus's scheduler).
    out = tmp_path / "bare"
    argv = ["generate", "-o", str(out), "--network-scale", "0.005", "--users", "500", "--no-consensus-params", "--tor-version", "none",
            "--duration", "20 s", "--warmup", "5 s"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "not modelled" not in printed and "consensus params not applied (--no-consensus-params)" in printed, printed
    exp = (out / "experiment.toml").read_text()
    assert "in place of the default (network.toml sets none)" in exp and "in place of tor's default (network.toml sets none)" in exp
    assert "[mechanisms]" not in (out / "network.toml").read_text().replace("# [mechanisms]", "")


def test_generate_cli_errors(tmp_path, capsys):
    assert main(["generate", "-o", str(tmp_path / "x"), "--consensus", str(tmp_path / "none")]) == 2
    assert "none" in capsys.readouterr().err
    assert main(["generate", "-o", str(tmp_path / "x"), "--network-scale", "2"]) == 2
    assert "--network-scale" in capsys.readouterr().err


@needs_core
def test_2010_and_snapshot_networks_validate(c2010, tmp_path):
    from onionlab import _core

    gen.write_network(gen.plan_network(c2010, 0.1, seed=2), tmp_path / "n2010")
    text = (tmp_path / "n2010" / "network.toml").read_text()
    assert "[tor]" in text and "circ_window = 1000" in text and "bandwidth_weights" not in text
    assert 'refill_interval = "1 s"' in text and "cellq_low = 64" in text  # tor 0.2.2's behaviour
    # Every relay keeps its consensus address, for tor's same-/16 path restriction.
    assert text.count('address = "') == text.count("[[relays]]") > 0
    resolved = _core.check_config(str(tmp_path / "n2010" / "experiment.toml"))
    assert "circ_window = 1000" in resolved and 'type = "markov"' in resolved
    assert "predicted_circuits = true" in resolved and "cellq_low = 64" in resolved
    assert resolved.count('address = "') == text.count("[[relays]]")
    snap = gen.read_capacity_snapshot(DATA / "tor-consensus-with-observed-weights-2021-04-30.json")
    gen.write_network(gen.plan_network(snap, 0.05), tmp_path / "snap")
    assert _core.load_network(str(tmp_path / "snap" / "experiment.toml"))["relays"] == 324
