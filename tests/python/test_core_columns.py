"""What crosses from the simulator into Python (``_core``): each result column under its own
name and unit, missing values as missing (not 0 or ""), and the summary's counts, checked
on a network small enough to reason about: three 1 MiB/s relays, one web client fetching
100 KiB pages, one bulk client whose 1 GiB download the end cuts short."""

from __future__ import annotations

import math

import pytest

from onionlab import _core, stats
from onionlab.results import typed_run

from conftest import needs_core

CONFIG = """
[experiment]
duration = "6 s"
warmup = "1 s"
seeds = [1]
metrics_interval = "2 s"
connection_metrics_interval = "2 s"
channel_metrics_interval = "2 s"
circuit_metrics_interval = "2 s"

[network]
latency = { constant = "20 ms" }

[[relays]]
name = "guard"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast", "Stable"]

[[relays]]
name = "middle"
bandwidth = "1 MiB/s"
flags = ["Fast"]

[[relays]]
name = "exit"
bandwidth = "1 MiB/s"
flags = ["Exit", "Fast"]

[[clients]]
name = "web"
workload = "page"
count = 1
start = "1 s"
start_spread = "1 ns"

[[clients]]
name = "bulk"
workload = "bulk"
count = 1
start = "1 s"
start_spread = "1 ns"

[servers]
count = 1

[workloads.page]
type = "web"
size = "100 KiB"
think = "1 s"

[workloads.bulk]
type = "bulk"
size = "1 GiB"
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("core") / "small.toml"
    path.write_text(CONFIG)
    return path, typed_run(_core.run_experiment(str(path), 1))


@needs_core
def test_download_columns(small):
    _, run = small
    d = run["downloads"]
    web, bulk = d[d["class"] == "web"], d[d["class"] == "bulk"]
    done = web[web["error"].isna()]
    assert len(done) >= 2 and (d["client"].isin(["web0", "bulk0"])).all()
    # Completed pages: all 100 KiB received, no error (missing, not ""), goodput in bytes/s.
    assert (done["size"] == 102_400).all() and (done["received"] == 102_400).all()
    assert (done["goodput"] == done["size"] / done["ttlb"]).all()
    assert (done["ttfb"] < done["ttlb"]).all() and (done["circuit_build_time"] > 0).all()
    # The stream's timeline, in order: BEGIN (the first download waits for its circuit,
    # later ones go at once), CONNECTED, first byte (with optimistic data it can come in
    # the same read as CONNECTED).
    assert done["begin"].iloc[0] == done["circuit_build_time"].iloc[0] and (done["begin"].iloc[1:] == 0).all()
    assert (done["begin"] < done["connected"]).all() and (done["connected"] <= done["ttfb"]).all()
    assert (done["path"] == "guard,middle,exit").all()
    # The bulk download started at the warm-up and was cut short: some bytes and a first
    # byte, no last byte, so no goodput.
    (b,) = bulk.itertuples()
    assert b.start == 1.0 and b.error == stats.UNFINISHED and 0 < b.received < b.size == 1 << 30
    assert b.ttfb > 0 and math.isnan(b.ttlb) and math.isnan(b.goodput)
    s = run["summary"]
    assert (s["sim_seconds"], s["warmup_seconds"]) == (6.0, 1.0)
    c = s["classes"]
    assert (c["bulk"]["downloads"], c["bulk"]["unfinished"], c["bulk"]["errors"], c["bulk"]["bytes"]) == (1, 1, 0, 0)
    assert c["web"]["downloads"] == len(web) and c["web"]["bytes"] == 102_400 * len(done)
    assert c["web"]["unfinished"] == len(web) - len(done)


@needs_core
def test_relay_connection_channel_and_circuit_columns(small):
    _, run = small
    r, cl, ch, cr = run["relays"], run["connections"], run["channels"], run["circuits"]
    # No throttling and no wire split: those columns are missing, not 0.
    assert r["throttle_rate"].isna().all() and cl["throttle_rate"].isna().all()
    assert r["kernel_wait_cell_s"].isna().all() and r["unread_wait_cell_s"].isna().all()
    # The bulk download holds the relays at their rate: the buckets run dry, for at most
    # the 2 s of an interval and its edge's refill (seconds, not refills).
    assert (r["bucket_empty_s"] > 0).any() and (r["bucket_empty_s"] <= 2.1).all()
    # The guard reads only from the middle (channel table) and its clients (connection
    # table), interval by interval; to its clients it writes more than it reads from them.
    for t, row in r[r["relay"] == "guard"].set_index("interval_start").iterrows():
        from_middle = ch[(ch["relay"] == "guard") & (ch["interval_start"] == t)]["bytes_read"].sum()
        from_clients = cl[(cl["relay"] == "guard") & (cl["interval_start"] == t)]["bytes_read"].sum()
        assert row["bytes_read"] == from_middle + from_clients, t
    busy = cl[cl["bytes_written"] + cl["bytes_read"] > 0]
    assert len(busy) and (busy["bytes_written"] > busy["bytes_read"]).all()
    # The exit reads the server's payload and writes it as cells (543 wire bytes per 498).
    exit_busy = r[(r["relay"] == "exit") & (r["bytes_read"] > 0)]
    assert len(exit_busy) and (exit_busy["bytes_written"] > exit_busy["bytes_read"]).all()
    # Downstream dominates each channel too, and what the guard read from the middle the
    # middle had written to it.
    down, up = ch[(ch["relay"] == "middle") & (ch["peer"] == "guard")], ch[(ch["relay"] == "guard") & (ch["peer"] == "middle")]
    assert down["bytes_written"].sum() > down["bytes_read"].sum()
    assert up["bytes_read"].sum() <= down["bytes_written"].sum()
    # Circuits are extended outward: the guard opened its channel to the middle.
    assert ch[(ch["relay"] == "guard") & (ch["peer"] == "middle")]["initiator"].all()
    assert not ch[(ch["relay"] == "middle") & (ch["peer"] == "guard")]["initiator"].any()
    # Circuit rows carry the client's group, and both circuits leave through the one exit:
    # their exit waits add up to the exit's circuit-queue wait.
    assert set(cr["class"]) == {"web", "bulk"}
    exit_rows = r[r["relay"] == "exit"].set_index("interval_start")
    for t, g in cr.groupby("interval_start"):
        assert g["exit_wait_cell_s"].sum() == pytest.approx(exit_rows.loc[t, "queue_wait_cell_s"], abs=1e-9), t
    assert (cr["transit_cell_s"] > 0).any()


@needs_core
def test_load_network_counts_and_byte_rates(small):
    path, _ = small
    n = _core.load_network(str(path), 1)
    assert (n["relays"], n["clients"], n["servers"], n["nodes"]) == (3, 2, 1, 6)
    assert _core.parse_byte_rate("8 Mbit") == 1_000_000 and _core.parse_byte_rate("1 MiB/s") == 1 << 20
