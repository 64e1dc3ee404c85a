"""The Python API and CLI over the transport example."""

import subprocess
import sys

import pytest

import onionlab
from onionlab.cli import main


def test_demo_is_fair_and_fills_the_bottleneck():
    res = onionlab.transport_demo(flows=5, bottleneck_mbit=10.0, rtt_ms=40.0, size_bytes=1_000_000, seconds=30.0)
    assert res["bytes"] == [1_000_000] * 5
    assert all(c is not None for c in res["completion_s"])
    assert res["jain_index"] >= 0.99
    # Five 1 MB flows over 10 Mbit/s need at least 4 s; slow start and RTTs add a little.
    assert 4.0 <= max(res["completion_s"]) <= 4.0 * 1.1
    assert 0.9 <= res["utilisation"] <= 1.0


def test_same_seed_same_result():
    a = onionlab.transport_demo(flows=3, seconds=5.0, seed=3)
    b = onionlab.transport_demo(flows=3, seconds=5.0, seed=3)
    assert a == b


def test_time_limit_stops_unfinished_flows():
    res = onionlab.transport_demo(flows=2, bottleneck_mbit=1.0, size_bytes=10_000_000, seconds=2.0)
    assert res["completion_s"] == [None, None]
    assert res["sim_seconds"] <= 2.0
    assert 0 < sum(res["bytes"]) <= 1_000_000 / 8 * 2.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"flows": 0}, "flows"),
        ({"bottleneck_mbit": -1.0}, "bottleneck_mbit"),
        ({"rtt_ms": float("nan")}, "rtt_ms"),
        ({"seconds": 0.0}, "seconds"),
        ({"size_bytes": 0}, "size_bytes"),
        # Negative or oversized counts, which the binding's own conversion once refused
        # without naming the argument.
        ({"flows": -2}, "flows"),
        ({"flows": 2**32}, "flows"),
        ({"size_bytes": -5}, "size_bytes"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        onionlab.transport_demo(**kwargs)


def test_cli_demo_prints_a_table(capsys):
    assert main(["demo", "--flows", "3", "--seconds", "5"]) == 0
    out = capsys.readouterr().out
    assert "Jain's fairness index" in out
    assert len([l for l in out.splitlines() if l.strip().split(" ")[0].isdigit()]) == 3


def test_cli_reports_bad_input_without_a_traceback():
    p = subprocess.run(
        [sys.executable, "-m", "onionlab", "demo", "--rtt-ms", "-5"], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert "rtt_ms" in p.stderr and "Traceback" not in p.stderr
