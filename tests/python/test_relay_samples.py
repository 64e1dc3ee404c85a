"""Relay samples: `tools/relays_from_consensus.py` regenerates the shipped samples from the
consensus in `data/`, and `reproduce throttling --relays` checks a sample before any run."""

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from onionlab.cli import main
from onionlab.config import tomllib
from onionlab.reproduce import throttling as T
from onionlab.reproduce.throttling.configs import BUILTIN_RELAYS, check_relay_sample, relay_sample_text

ROOT = Path(__file__).resolve().parents[2]
CONSENSUS = ROOT / "data" / "consensus" / "NetworkConsensus_1-12-10.txt"
#: The throttling paper's own consensus (its footnote 6: "Retrieved on 2011-04-27 and valid
#: from 03-06:00:00").
PAPER_CONSENSUS = ROOT / "data" / "consensus" / "consensus-2011-04-27-03-00-00"
SAMPLES = ROOT / "examples" / "relay-samples"


def derive(*args: str, consensus: Path = CONSENSUS) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "relays_from_consensus.py"), str(consensus), "50", *args],
        check=True, capture_output=True, text=True,
    ).stdout


def flag_class(r: dict) -> tuple[bool, bool]:
    return "Guard" in r["flags"], "Exit" in r["flags"]


def shipped_samples() -> dict[int, Path]:
    """The seeded samples in examples/relay-samples, by seed."""
    found = {int(p.stem.rsplit("seed", 1)[1]): p for p in SAMPLES.glob("throttling-2010-seed*.toml")}
    assert found, "examples/relay-samples has no samples"
    return found


def test_the_tool_regenerates_the_built_in_sample_and_every_shipped_one():
    assert derive() == BUILTIN_RELAYS.read_text()
    for seed, path in shipped_samples().items():
        assert derive("--seed", str(seed)) == path.read_text(), path.name


def test_a_seeded_sample_keeps_the_flag_proportions_but_picks_other_relays():
    mid = tomllib.loads(BUILTIN_RELAYS.read_text())["relays"]
    for seed, path in shipped_samples().items():
        other = tomllib.loads(path.read_text())["relays"]
        assert len(other) == 50
        assert Counter(map(flag_class, other)) == Counter(map(flag_class, mid))
        assert {r["name"] for r in other} != {r["name"] for r in mid}


def test_the_tool_rejects_a_bad_count():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "relays_from_consensus.py"), str(CONSENSUS), "0"], capture_output=True, text=True)
    assert r.returncode != 0 and "n: must be at least 1" in r.stderr


def parsed_args(*argv: str):
    """`reproduce throttling`'s arguments as its own parser makes them."""
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    return p.parse_args(list(argv))


def test_a_shipped_sample_passes_the_check():
    path = str(SAMPLES / "throttling-2010-seed5.toml")
    relays = check_relay_sample(relay_sample_text(path), parsed_args("--relays", path))
    assert len(relays) == 50 and any("Guard" in r["flags"] for r in relays)


@pytest.mark.parametrize("text, message", [
    ("relays = [", "TOML syntax error"),
    ("relays = 3\n", "relays: expected an array of [[relays]] tables"),
    ('[[relays]]\nname = "a"\nbandwidth = "fast"\nflags = ["Guard", "Exit", "Fast"]\n', 'relays[0].bandwidth: bad rate: "fast"'),
    ('[[relays]]\nname = "a"\nbandwidth = "1 MiB/s"\nflags = ["Guard", "Fast"]\n', "no relay has both the Exit and Fast flags"),
])
def test_a_bad_sample_is_an_error_naming_relays_and_the_field(tmp_path, capsys, text, message):
    f = tmp_path / "sample.toml"
    f.write_text(text)
    out = tmp_path / "out"
    assert main(["reproduce", "throttling", "--relays", str(f), "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert f"--relays {f}" in err and message in err
    assert not (out / "configs" / "sweep-vanilla-00.toml").exists(), "a bad sample fails before any run"


def test_a_missing_sample_is_an_error(tmp_path, capsys):
    assert main(["reproduce", "throttling", "--relays", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "out")]) != 0
    assert "no such file" in capsys.readouterr().err


def test_the_compare_tool_names_a_directory_that_is_not_an_output(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "compare_throttling_runs.py"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "not a reproduce throttling output" in r.stderr and str(tmp_path) in r.stderr


def test_the_deciles_method_draws_as_shadow_2011_did():
    """40 % exits; every relay above 20 KB/s; each group's deciles (largest first, ties by
    fingerprint) give their draws in turn: 2 exits and 3 non-exits from each of the ten; no
    relay twice."""
    from stem.descriptor import DocumentHandler, parse_file

    relays = tomllib.loads(derive("--method", "deciles", "--seed", "1"))["relays"]
    assert len(relays) == 50
    assert len({(r["name"].rstrip("_"), r["consensus_weight"]) for r in relays}) == 50, "a relay drawn twice"
    assert all(r["consensus_weight"] > 20 for r in relays)
    doc = next(parse_file(str(CONSENSUS), "network-status-consensus-3 1.0", document_handler=DocumentHandler.DOCUMENT))
    routers = [r for r in doc.routers.values() if r.bandwidth and r.bandwidth > 20]
    for is_exit, per_decile in ((True, 2), (False, 3)):
        group = sorted((r for r in routers if ("Exit" in r.flags and "BadExit" not in r.flags) == is_exit), key=lambda r: (-r.bandwidth, r.fingerprint))
        size = len(group) // 10
        rank = {(g.nickname, g.bandwidth): i for i, g in reversed(list(enumerate(group)))}
        drawn = [r for r in relays if ("Exit" in r["flags"]) == is_exit]
        deciles = Counter(rank[(r["name"].rstrip("_"), r["consensus_weight"])] // size for r in drawn)
        assert deciles == Counter({d: per_decile for d in range(10)}), (is_exit, deciles)


def test_the_deciles_method_is_seeded():
    a, b = derive("--method", "deciles", "--seed", "1"), derive("--method", "deciles", "--seed", "2")
    assert a != b and a == derive("--method", "deciles", "--seed", "1")


@pytest.mark.parametrize("n, args, message", [
    ("50", ["--method", "deciles"], "--seed: required by --method deciles"),
    ("5000", ["--method", "deciles", "--seed", "1"], "n: exits: 492 relays above 20 KB/s are too few for 2000 drawn by decile"),
])
def test_the_deciles_method_names_a_bad_request(n, args, message):
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "relays_from_consensus.py"), str(CONSENSUS), n, *args], capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr


def test_the_deciles_sample_is_built_in_with_its_own_think_time():
    """`--sample deciles` runs the package's copy of the tool's deciles draw with the think time
    calibrated on it in the path order in use (2.5 s in tor's order, 1.8 s guard-first, which
    its guard-first section ran); --think-median overrides either; a shape never calibrated
    there, or --sample beside --relays, is an error."""
    from onionlab.reproduce.throttling.configs import SAMPLES, client_settings

    assert SAMPLES["deciles"].path.read_text() == derive("--method", "deciles", "--seed", "1")
    args = parsed_args("--sample", "deciles")
    relays = check_relay_sample(relay_sample_text(args.relays, args.sample), args)
    assert len(relays) == 50 and sum("Exit" in r["flags"] for r in relays) == 20
    assert client_settings(args)["think"] == '{ dist = "lognormal", median = "2.5 s", sigma = 2.0 }'
    guard_first = parsed_args("--sample", "deciles", "--path-order", "guard-first")
    assert client_settings(guard_first)["think"] == '{ dist = "lognormal", median = "1.8 s", sigma = 2.0 }'
    for order in ("exit-first", "guard-first"):
        given = parsed_args("--sample", "deciles", "--path-order", order, "--think-median", "3 s")
        assert client_settings(given)["think"].startswith('{ dist = "lognormal", median = "3 s"')
    # Samples calibrated to one median in both orders keep it guard-first.
    for sample, median in (("quantiles", "8 s"), ("shadow", "1.7 s"), ("paper", "1 s")):
        for order in ("exit-first", "guard-first"):
            think = client_settings(parsed_args("--sample", sample, "--path-order", order))["think"]
            assert f'median = "{median}"' in think, (sample, order, think)
    with pytest.raises(ValueError, match="--think smooth: not calibrated on --sample deciles; give --think-median"):
        client_settings(parsed_args("--sample", "deciles", "--think", "smooth"))


def test_sample_beside_relays_is_an_error(tmp_path, capsys):
    path = str(SAMPLES / "throttling-2010-seed5.toml")
    assert main(["reproduce", "throttling", "--sample", "deciles", "--relays", path, "-o", str(tmp_path / "out")]) != 0
    assert "--sample: has no effect with --relays" in capsys.readouterr().err


def load_tool():
    """tools/relays_from_consensus.py as a module, for its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("relays_from_consensus", ROOT / "tools" / "relays_from_consensus.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_voted_flags_follow_tor_0_2_2s_authority_on_a_hand_worked_network():
    """Nine relays (KB/s, exit, start s), judged at 1200 s. Bandwidths x 1000: the n/8-th
    smallest is 30000, so Fast needs 20 KiB (the cap): all are Fast. The median with exits
    (index 4 of 9) is 100000, without (index 2 of 5) 80000: Guard needs 80000 (or 250 KiB).
    Known since start: 900, 930, 930, 960, 960, 1110, 1140, 1140, 1199 s, so Guard needs
    930 s (index n/8 = 1) and Stable 960 s (the median). The 80 KB/s relay started at
    270 s sits on both Guard thresholds and is a guard; the 25 KB/s one started last."""
    tool = load_tool()
    relays = [
        (102400, True, 1), (500, True, 60), (100, True, 60), (30, True, 90),
        (1000, False, 240), (300, False, 240), (80, False, 270), (40, False, 270), (25, False, 300),
    ]
    got = tool.voted_flags(relays)
    want = [
        ["Guard", "Exit", "Fast", "Stable"], ["Guard", "Exit", "Fast", "Stable"], ["Guard", "Exit", "Fast", "Stable"],
        ["Exit", "Fast", "Stable"], ["Guard", "Fast", "Stable"], ["Guard", "Fast", "Stable"], ["Guard", "Fast"], ["Fast"], ["Fast"],
    ]
    assert got == want
    # Bandwidth alone does not make a guard: the largest relay, started last, is none.
    late_giant = relays[:8] + [(91100, False, 300)]
    assert tool.voted_flags(late_giant)[8] == ["Fast"]


def test_the_generator_started_each_list_from_its_end_in_five_groups():
    """30 non-exits in draw order (decile 1, 2, ..., 10, 1, ...): the first six drawn (the
    largest decile of each of six) start last, at 360 s; 20 exits in groups of four from
    60 s, the first four drawn at 180 s."""
    from types import SimpleNamespace

    tool = load_tool()
    exits = [SimpleNamespace(flags=["Exit"], i=i) for i in range(20)]
    others = [SimpleNamespace(flags=[], i=i) for i in range(30)]
    start = {(bool(r.flags), r.i): t for r, t in tool.generator_start_times(exits + others)}
    assert [start[(False, i)] for i in range(0, 30, 6)] == [360, 330, 300, 270, 240]
    assert {start[(False, i)] for i in range(6)} == {360} and {start[(False, i)] for i in range(24, 30)} == {240}
    assert [start[(True, i)] for i in range(0, 20, 4)] == [180, 150, 120, 90, 60]
    # A remainder (len % 5, the list's head) starts last of all.
    seven = [SimpleNamespace(flags=["Exit"], i=i) for i in range(7)]
    assert [t for _, t in tool.generator_start_times(seven)] == [210, 210, 180, 150, 120, 90, 60]


def test_the_shadow_sample_is_the_decile_draw_as_its_network_voted_it():
    """`--flags voted --authority` keeps the 50 relays of the seed-1 decile draw, adds the
    authority as a Guard+Exit relay, and takes the Guard flag from the six first-drawn
    non-exits (hippiesVServer, 91100 KB/s, among them); the shipped sample is its output."""
    from onionlab.reproduce.throttling.configs import SAMPLES

    voted = derive("--method", "deciles", "--seed", "1", "--flags", "voted", "--authority")
    assert SAMPLES["shadow"].path.read_text() == voted
    plain = {r["name"]: r for r in tomllib.loads(derive("--method", "deciles", "--seed", "1"))["relays"]}
    relays = {r["name"]: r for r in tomllib.loads(voted)["relays"]}
    assert set(relays) - set(plain) == {"4uthority"}
    assert relays["4uthority"]["flags"] == ["Guard", "Exit", "Fast", "Stable"] and relays["4uthority"]["bandwidth"] == "102400 KiB/s"
    assert all(relays[n]["bandwidth"] == plain[n]["bandwidth"] and ("Exit" in relays[n]["flags"]) == ("Exit" in plain[n]["flags"]) for n in plain)
    assert "Guard" in plain["hippiesVServer"]["flags"] and "Guard" not in relays["hippiesVServer"]["flags"]
    assert sum("Guard" in r["flags"] for r in relays.values()) == 21


@pytest.mark.parametrize("args, message", [
    (["--flags", "voted"], "--flags voted: needs --method deciles"),
    (["--method", "deciles", "--seed", "1", "--authority"], "--authority: needs --flags voted"),
])
def test_voted_flags_name_a_bad_request(args, message):
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "relays_from_consensus.py"), str(CONSENSUS), "50", *args], capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr


def test_the_shadow_sample_brings_its_weights_links_and_think_time():
    """`--sample shadow` runs with consensus method 9's weights, the generator's client links
    (attack 3's linking clients too) and its own think time; `--weights` overrides the
    sample's weights; other samples keep theirs."""
    from onionlab.reproduce.throttling.configs import LOADS, client_settings, config_text, linking_clients, mechanism_line

    args = parsed_args("--sample", "shadow")
    relays = check_relay_sample(relay_sample_text(args.relays, args.sample), args)
    assert len(relays) == 51
    settings = client_settings(args)
    assert settings["think"] == '{ dist = "lognormal", median = "1.7 s", sigma = 2.0 }'
    assert settings["weights"] == "computed-v9" and settings["client_links"] == ("1024 KiB/s", "3584 KiB/s")
    cfg = tomllib.loads(config_text("x", LOADS["medium"], mechanism_line("vanilla", {}), "1 min", "0 s", "r.toml", extra_clients=linking_clients(), **settings))
    assert cfg["network"]["bandwidth_weights"] == "computed-v9"
    assert {(c["name"], c["link_up"], c["link_down"]) for c in cfg["clients"]} == {
        (n, "1024 KiB/s", "3584 KiB/s") for n in ("web", "bulk", "link-same", "link-diff")
    }
    assert client_settings(parsed_args("--sample", "shadow", "--weights", "uniform"))["weights"] == "uniform"
    default = client_settings(parsed_args())
    assert default["weights"] == "uniform" and default["client_links"] == ("10 Mbit", "20 Mbit")
    plain = tomllib.loads(config_text("x", 50, mechanism_line("vanilla", {}), "1 min", "0 s", "r.toml", extra_clients=linking_clients(), **default))
    assert {(c["link_up"], c["link_down"]) for c in plain["clients"]} == {("10 Mbit", "20 Mbit")}


def test_the_papers_own_consensus_is_shipped_whole():
    """data/ holds the consensus the paper names (footnote 6), byte for byte as scallion's
    generator read it: valid-after 2011-04-27 03:00:00, 2,261 relays, bwauth-measured weights."""
    import hashlib

    from stem.descriptor import DocumentHandler, parse_file

    blob = PAPER_CONSENSUS.read_bytes()
    assert hashlib.sha256(blob).hexdigest() == "5f74682d73ad0dfb7f54e397e920b61013ce8cf9ee36e6a5e160ffa90618fa3e"
    doc = next(parse_file(str(PAPER_CONSENSUS), "network-status-consensus-3 1.0", document_handler=DocumentHandler.DOCUMENT))
    assert str(doc.valid_after) == "2011-04-27 03:00:00" and str(doc.valid_until) == "2011-04-27 06:00:00"
    assert len(doc.routers) == 2261


def test_the_paper_sample_is_the_papers_consensus_drawn_and_voted_as_shadow_did():
    """`--sample paper` is the tool's seed-1 decile draw of the paper's own consensus, flags
    voted as its simulated authority did, the authority a relay: 20 exits, 21 guards, the
    authority the largest relay; it runs with method-9 weights, the generator's client links
    and its own think time."""
    from onionlab.reproduce.throttling.configs import SAMPLES, client_settings

    voted = derive("--method", "deciles", "--seed", "1", "--flags", "voted", "--authority", consensus=PAPER_CONSENSUS)
    assert SAMPLES["paper"].path.read_text() == voted
    relays = tomllib.loads(voted)["relays"]
    assert len(relays) == 51 and relays[0]["name"] == "4uthority"
    assert sum("Exit" in r["flags"] for r in relays) == 21  # 20 drawn, and the authority
    assert sum("Guard" in r["flags"] for r in relays) == 21
    args = parsed_args("--sample", "paper")
    assert len(check_relay_sample(relay_sample_text(args.relays, args.sample), args)) == 51
    settings = client_settings(args)
    assert settings["think"] == '{ dist = "lognormal", median = "1 s", sigma = 2.0 }'
    assert settings["weights"] == "computed-v9" and settings["client_links"] == ("1024 KiB/s", "3584 KiB/s")


def test_refill_phase_reaches_every_run_and_is_checked(tmp_path):
    # `--refill-phase random`: each relay's refill grid at its own offset, in the [tor]
    # table of every config; by default the line is absent (aligned, the model's default).
    from onionlab import config as config_mod
    from onionlab.reproduce.throttling.configs import LOADS, RELAYS_FILE, client_settings, config_text, mechanism_line, tor_settings

    rand = parsed_args("--refill-phase", "random")
    assert tor_settings(rand)["refill_phase"] == "random" and tor_settings(parsed_args())["refill_phase"] == "aligned"
    text = config_text("x", LOADS["medium"], mechanism_line("vanilla", {}), "1 min", "0 s", RELAYS_FILE, **client_settings(rand))
    assert tomllib.loads(text)["tor"]["refill_phase"] == "random"
    # The resolved config says so too (written into the reproduction's configs directory,
    # where the relay sample's relative path resolves).
    path = tmp_path / "x.toml"
    path.write_text(text.replace(f'relays_file = "{RELAYS_FILE}"', f'relays_file = "{(T.configs._DATA / RELAYS_FILE).as_posix()}"'))
    assert config_mod.parse(config_mod.check(str(path)))["tor"]["refill_phase"] == "random"
    default = config_text("x", LOADS["medium"], mechanism_line("flag", {}), "1 min", "0 s", RELAYS_FILE, **client_settings(parsed_args()))
    assert "refill_phase" not in tomllib.loads(default)["tor"]
    with pytest.raises(SystemExit):
        parsed_args("--refill-phase", "staggered")
    with pytest.raises(ValueError, match="--refill-phase"):
        config_text("x", LOADS["medium"], mechanism_line("flag", {}), "1 min", "0 s", RELAYS_FILE, refill_phase="staggered")


def test_no_optimistic_data_reaches_every_run_and_the_summary():
    # `--no-optimistic-data`: tor 0.2.2's request after CONNECTED, in the [tor] table of
    # every config the reproduction writes; by default the line is absent (tor's default on).
    from onionlab.reproduce.throttling.configs import LOADS, RELAYS_FILE, client_settings, config_text, mechanism_line, tor_settings

    off = parsed_args("--no-optimistic-data")
    assert tor_settings(off)["optimistic_data"] is False and tor_settings(parsed_args())["optimistic_data"] is True
    text = config_text("x", LOADS["medium"], mechanism_line("flag", {}), "1 min", "0 s", RELAYS_FILE, **client_settings(off))
    assert tomllib.loads(text)["tor"]["optimistic_data"] is False
    default = config_text("x", LOADS["medium"], mechanism_line("flag", {}), "1 min", "0 s", RELAYS_FILE, **client_settings(parsed_args()))
    assert "optimistic_data" not in tomllib.loads(default)["tor"]
