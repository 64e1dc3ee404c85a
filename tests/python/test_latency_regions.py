"""`reproduce throttling --latency regions`: the region latency matrix
(`tools/shadow_region_latency.py`), the relays' regions (`tools/relay_regions.py`) and how
the reproduction places hosts with them."""

import argparse
import json
import sys
from pathlib import Path

import pytest

from onionlab.config import tomllib
from onionlab.reproduce import throttling as T
from onionlab.reproduce.throttling import configs as C

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import relay_regions  # noqa: E402
import shadow_region_latency as SRL  # noqa: E402

DATA = ROOT / "python" / "onionlab" / "reproduce" / "data"


def args_for(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    T.add_arguments(p)
    return p.parse_args(list(argv))


def shipped_matrix() -> list[list[float]]:
    lines = (DATA / C.REGION_LATENCY_FILE).read_text(encoding="utf-8").splitlines()
    return [[float(x) for x in ln.split(",")] for ln in lines if ln and not ln.startswith("#")]


# ---- the matrix ----


def test_clusters_go_to_the_generators_regions_by_true_geography():
    # A US cluster by its state, Canada's and Alaska's to NORTH, other countries by the
    # generator's lists, Mexico in its AUSTRALIA list, a country in no list nowhere.
    cases = {"USCA": "US_WEST", "USTX": "US_CENTRAL", "USNY": "US_EAST", "USAK": "NORTH", "CANB": "NORTH", "CABC": "NORTH",
             "DEDE": "EU_WEST", "RURU": "EU_EAST", "JPJP": "ASIA", "BRBR": "SOUTH", "MXMX": "AUSTRALIA", "ININ": None, "US00": None}
    assert {c: SRL.cluster_region(c) for c in cases} == cases


def one_cluster_per_region() -> dict[str, str]:
    return {"US_WEST": "USCA", "US_CENTRAL": "USTX", "US_EAST": "USNY", "NORTH": "CANB", "SOUTH": "BRBR",
            "EU_WEST": "DEDE", "EU_EAST": "RURU", "ASIA": "JPJP", "AUSTRALIA": "AUAU"}


def test_region_latency_is_the_median_over_both_directions():
    names = list(SRL.REGIONS)
    cl = one_cluster_per_region()
    # Every ordered pair (i, j) one link of 10*i + j ms: the pair's median pools (i, j) and
    # (j, i), so entry (i, j) is their mean, 5.5 * (i + j); a pair within a region has its one.
    links = [(cl[a], cl[b], 10.0 * i + j) for i, a in enumerate(names) for j, b in enumerate(names)]
    # Two more EU_WEST-EU_WEST links (one from a second cluster) and an unplaced one.
    links += [("DEDE", "FRFR", 100.0), ("FRFR", "DEDE", 200.0), ("ININ", "DEDE", 1.0)]
    m, counts = SRL.region_matrix(links)
    for i in range(9):
        for j in range(9):
            assert m[i][j] == m[j][i]
            if i != j:
                assert m[i][j] == pytest.approx(5.5 * (i + j))
    eu = names.index("EU_WEST")
    assert m[eu][eu] == 100.0  # the median of 55, 100 and 200
    assert counts[("EU_WEST", "EU_WEST")] == 3 and counts[("US_WEST", "US_CENTRAL")] == 2


def test_a_pair_of_regions_without_a_link_is_an_error_naming_it():
    cl = one_cluster_per_region()
    names = list(SRL.REGIONS)
    links = [(cl[a], cl[b], 50.0) for a in names for b in names if {a, b} != {"ASIA", "SOUTH"}]
    with pytest.raises(ValueError, match="SOUTH cluster and a ASIA cluster"):
        SRL.region_matrix(links)


def test_the_tool_reads_shadows_xml_and_writes_a_matrix_the_config_takes(tmp_path):
    names = list(SRL.REGIONS)
    cl = one_cluster_per_region()
    xml = "<topology>\n" + "".join(
        f'  <link id="l{i}-{j}" clusters="{cl[a]} {cl[b]}" latency="{20 + i + j}" jitter="1" packetloss="0"/>\n'
        for i, a in enumerate(names) for j, b in enumerate(names)
    ) + "</topology>\n"
    (tmp_path / "topology.xml").write_text(xml)
    assert SRL.main([str(tmp_path / "topology.xml"), "-o", str(tmp_path / "m.csv")]) == 0
    rows = [ln for ln in (tmp_path / "m.csv").read_text().splitlines() if not ln.startswith("#")]
    assert rows[0].split(",")[:3] == ["20", "21", "22"]
    (tmp_path / "bad.xml").write_text('<topology><link id="x" clusters="USCA"/></topology>')
    assert SRL.main([str(tmp_path / "bad.xml"), "-o", str(tmp_path / "b.csv")]) == 1
    assert not (tmp_path / "b.csv").exists()


def test_the_shipped_matrix_is_square_symmetric_and_in_the_reproductions_order():
    m = shipped_matrix()
    assert len(m) == 9 and all(len(r) == 9 for r in m)
    assert all(m[i][j] == m[j][i] for i in range(9) for j in range(9))
    # One way, not round trips: coast to coast in the US under 50 ms, nothing over 250.
    r = {n: i for i, n in enumerate(C.REGIONS)}
    assert all(5 <= x <= 250 for row in m for x in row)
    assert m[r["US_WEST"]][r["US_EAST"]] < 50 < m[r["US_WEST"]][r["EU_WEST"]]
    assert tuple(SRL.REGIONS) == C.REGIONS
    header = (DATA / C.REGION_LATENCY_FILE).read_text().splitlines()[2]
    assert header == "# " + ", ".join(f"{i} {n}" for i, n in enumerate(C.REGIONS))


# ---- the relays' regions ----


class FakeGeoIp:
    def __init__(self, by_ip):
        self.by_ip = by_ip

    def country(self, ip):
        return self.by_ip[ip]


def test_relays_go_where_the_generators_dictionary_puts_their_country():
    geo = FakeGeoIp({"1.0.0.1": "US", "1.0.0.2": "DE", "1.0.0.3": "CA", "1.0.0.4": "MD", "1.0.0.5": "IS"})
    assert relay_regions.region_of("a", "1.0.0.1", geo) == "US_CENTRAL"  # no state: the code "US"
    assert relay_regions.region_of("b", "1.0.0.2", geo) == "EU_WEST"  # Germany, not Delaware: the later list wins
    assert relay_regions.region_of("c", "1.0.0.3", geo) == "NORTH"  # Canada, not California
    assert relay_regions.region_of("d", "1.0.0.4", geo) == "US_EAST"  # Moldova's code is Maryland's: the generator's own quirk
    assert relay_regions.region_of("4uthority", None, geo) == "US_CENTRAL"
    with pytest.raises(ValueError, match="'e'.*'IS'.*none of the generator's region lists"):
        relay_regions.region_of("e", "1.0.0.5", geo)


def test_geoip_ranges_are_looked_up_inclusively(tmp_path):
    (tmp_path / "geoip").write_text("# tor geoip\n16777216,16777471,AU\n16777472,16778239,CN\n")
    g = relay_regions.GeoIp(tmp_path / "geoip")
    assert [g.country(ip) for ip in ("1.0.0.0", "1.0.0.255", "1.0.1.0", "1.0.3.255", "1.0.4.0", "0.255.255.255")] == ["AU", "AU", "CN", "CN", None, None]
    (tmp_path / "bad").write_text("16777216,16777471,AU\n16777472;16778239;CN\n")
    with pytest.raises(ValueError, match="line 2: expected INTIPLOW,INTIPHIGH,CC"):
        relay_regions.GeoIp(tmp_path / "bad")


def test_every_sample_relay_has_a_region_and_the_draws_match_the_samples():
    regions = json.loads((DATA / "throttling-relay-regions.json").read_text())
    assert tuple(regions["regions"]) == C.REGIONS
    for sample in C.SAMPLES:
        drawn = relay_regions.drawn_addresses(sample)  # raises if the draw is not the shipped file
        assert set(regions[sample]) == set(drawn), sample
        assert set(regions[sample].values()) <= set(C.REGIONS)
        assert sum(ip is None for ip in drawn.values()) == (1 if sample in ("shadow", "paper") else 0)


# ---- the reproduction ----


def test_constant_latency_leaves_the_sample_alone():
    text = C.relay_sample_text(None)
    assert C.place_network(text, args_for()) == (text, {})


def test_an_unknown_latency_model_is_an_error_naming_the_option():
    with pytest.raises(ValueError, match="--latency: must be one of constant, regions, got 'geo'"):
        C.config_text("t", 50, C.mechanism_line("vanilla", {}), "2 min", "1 min", C.RELAYS_FILE, latency="geo")


def test_regions_place_every_relay_servers_in_four_regions_and_pass_the_validator(tmp_path):
    from onionlab import config as config_mod

    args = args_for("--latency", "regions")
    text, files = C.place_network(C.relay_sample_text(None), args)
    assert list(files) == [C.REGION_LATENCY_FILE]
    regions = json.loads((DATA / "throttling-relay-regions.json").read_text())["quantiles"]
    relays = tomllib.loads(text)["relays"]
    assert len(relays) == 50
    assert all(r["location"] == C.REGIONS.index(regions[r["name"]]) for r in relays)
    cfg = C.config_text("t", 50, C.mechanism_line("vanilla", {}), "2 min", "1 min", C.RELAYS_FILE, **C.client_settings(args))
    doc = tomllib.loads(cfg)
    assert doc["network"]["latency"] == {"matrix": C.REGION_LATENCY_FILE}
    assert doc["servers"]["placement"] == [0, 1, 2, 5]
    assert [C.REGIONS[i] for i in doc["servers"]["placement"]] == list(C.SERVER_REGIONS)
    assert {c["placement"] for c in doc["clients"]} == {"round_robin"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    (tmp_path / C.RELAYS_FILE).write_text(text)
    (tmp_path / "t.toml").write_text(cfg)
    resolved = config_mod.parse(config_mod.check(tmp_path / "t.toml"))
    assert resolved["servers"]["placement"] == [0, 1, 2, 5]
    # The whole check the reproduction makes before any run.
    assert len(C.check_relay_sample(C.relay_sample_text(None), args)) == 50


def test_a_relays_file_without_locations_is_an_error_naming_the_relay(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text('[[relays]]\nname = "a"\nbandwidth = "1 MiB/s"\nflags = ["Guard", "Fast"]\nlocation = 5\n\n'
                 '[[relays]]\nname = "b"\nbandwidth = "1 MiB/s"\nflags = ["Exit", "Fast"]\n')
    args = args_for("--latency", "regions", "--relays", str(f))
    with pytest.raises(ValueError, match=r"--latency regions: --relays .*relay 'b' has no location.*5 EU_WEST"):
        C.place_network(f.read_text(), args)
    f.write_text(f.read_text() + "location = 1\n")
    text, files = C.place_network(f.read_text(), args)
    assert text == f.read_text() and list(files) == [C.REGION_LATENCY_FILE]
