#!/usr/bin/env python3
"""The one-way latency between the nine regions of Shadow's 2011 network generator, from
PlanetLab ping measurements, as a latency matrix for `reproduce throttling --latency regions`.

The throttling paper's network "configure[d] our network topology and latency between nodes
according to the geographical distribution of relays and pairwise PlanetLab node ping
times". Its generator (scallion's `contrib/generate.py`, shadow/shadow history, 2011) put
every host in one of nine regions (US_WEST, US_CENTRAL, US_EAST, NORTH, SOUTH, EU_WEST,
EU_EAST, ASIA, AUSTRALIA) and gave each pair of regions a latency CDF from files that were
never in the repository. The nearest measured data that is: Shadow's `resource/topology.xml`
(commit 1cfa13071, 2012-01-16, "Real-life data from planetlab ping measurements"), links
between 240 clusters (a country, or a US state or Canadian province) with a one-way latency
in ms. This tool groups those clusters into the generator's regions (its own country and
state lists, read by true geography: cluster USCA is California, so US_WEST; CA... clusters
are Canada, so NORTH) and writes, for every pair of regions, the median latency of the
links between their clusters (both directions pooled, so the matrix is symmetric).

Jitter and packet loss in the file are not used: the model's latency is one fixed number
per pair of locations.

    tools/shadow_region_latency.py topology.xml.xz -o python/onionlab/reproduce/data/throttling-latency-regions.csv

Reads the file given (xz-compressed or not); never the network at run time.
"""

from __future__ import annotations

import argparse
import lzma
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: The generator's regions, in its order, with its lists (ShadowGeo): US states for the
#: three US regions (and AK in NORTH), country codes for the rest ("US" itself is in
#: US_CENTRAL: an address GeoIP places in the US without a state).
REGIONS = {
    "US_WEST": ["WA", "ID", "MT", "WY", "OR", "NV", "CA", "UT", "CO", "NM", "AZ", "HI"],
    "US_CENTRAL": ["ND", "MN", "WI", "SD", "IA", "IL", "NE", "KS", "MO", "OK", "AR", "LA", "TX", "MI", "IN", "OH", "KY", "TN", "MS", "US"],
    "US_EAST": ["AL", "GA", "FL", "SC", "NC", "VA", "WV", "PA", "NY", "VT", "NH", "ME", "MA", "RI", "CT", "NJ", "DE", "MD", "DC"],
    "NORTH": ["CA", "AK"],
    "SOUTH": ["BR", "VE", "AR", "UY", "AQ", "BB", "RE", "CI", "CL", "EG", "ZA", "CR"],
    "EU_WEST": ["BE", "FR", "DE", "HU", "FI", "NL", "PT", "NO", "AT", "RO", "PL", "CH", "GR", "IT", "CZ", "IE", "ES", "SE", "GB", "LU", "EE", "HR", "DK", "BG", "BA", "JE", "BY", "LV", "LT", "SK", "UA", "SI", "EU"],
    "EU_EAST": ["JO", "RU", "TR", "PK", "IL", "GE", "SA"],
    "ASIA": ["JP", "HK", "TW", "CN", "KR", "SG", "VN", "TH", "MY"],
    "AUSTRALIA": ["NZ", "AU", "MX"],
}
US_REGIONS = ("US_WEST", "US_CENTRAL", "US_EAST")


def cluster_region(cluster: str) -> str | None:
    """The generator's region of a topology cluster ("USCA", "CANB", "DEDE"), by true
    geography: a US cluster by its state (Alaska in NORTH), a Canadian one in NORTH, any other
    by its country in the non-US lists; None for a country in no list."""
    country, sub = cluster[:2], cluster[2:]
    if country == "US":
        if sub == "AK":
            return "NORTH"
        return next((r for r in US_REGIONS if sub in REGIONS[r]), None)
    if country == "CA":
        return "NORTH"
    return next((r for r, codes in REGIONS.items() if r not in US_REGIONS and country in codes), None)


def read_links(path: Path) -> list[tuple[str, str, float]]:
    """(cluster, cluster, one-way ms) of every `<link>` in a Shadow topology.xml."""
    raw = path.read_bytes()
    if raw[:6] == b"\xfd7zXZ\x00":
        raw = lzma.decompress(raw)
    links = []
    for el in ET.fromstring(raw).iter("link"):
        try:
            a, b = el.attrib["clusters"].split()
            links.append((a, b, float(el.attrib["latency"])))
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: link {el.attrib.get('id', '?')}: expected clusters=\"A B\" and a latency ({e})") from None
    if not links:
        raise ValueError(f"{path}: no <link> elements")
    return links


def region_matrix(links: list[tuple[str, str, float]]) -> tuple[list[list[float]], dict]:
    """The median one-way latency (ms) between every pair of regions, in REGIONS' order, and
    per pair the number of links behind it. Raises ValueError for a pair with no link."""
    names = list(REGIONS)
    samples: dict[tuple[int, int], list[float]] = {}
    for a, b, ms in links:
        ra, rb = cluster_region(a), cluster_region(b)
        if ra is None or rb is None:
            continue
        i, j = sorted((names.index(ra), names.index(rb)))
        samples.setdefault((i, j), []).append(ms)
    matrix = [[0.0] * len(names) for _ in names]
    counts = {}
    for i in range(len(names)):
        for j in range(i, len(names)):
            xs = samples.get((i, j))
            if not xs:
                raise ValueError(f"no link between a {names[i]} cluster and a {names[j]} cluster")
            matrix[i][j] = matrix[j][i] = statistics.median(xs)
            counts[(names[i], names[j])] = len(xs)
    return matrix, counts


def csv_text(matrix: list[list[float]]) -> str:
    names = list(REGIONS)
    head = [
        "# One-way latency (ms) between the nine regions of Shadow's 2011 network generator",
        "# (scallion contrib/generate.py), locations 0-8 in this order:",
        "# " + ", ".join(f"{i} {n}" for i, n in enumerate(names)),
        "# The median of the PlanetLab-measured links between the regions' clusters in Shadow's",
        "# resource/topology.xml (shadow/shadow commit 1cfa13071, 2012-01-16; GPL-3.0).",
        "# Written by tools/shadow_region_latency.py.",
    ]
    rows = [",".join(f"{x:g}" for x in row) for row in matrix]
    return "\n".join(head + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("topology", type=Path, help="Shadow's topology.xml or topology.xml.xz")
    p.add_argument("-o", "--out", type=Path, required=True, help="the CSV to write")
    args = p.parse_args(argv)
    try:
        matrix, counts = region_matrix(read_links(args.topology))
    except (OSError, ValueError, ET.ParseError, lzma.LZMAError) as e:
        print(f"shadow_region_latency: {e}", file=sys.stderr)
        return 1
    args.out.write_text(csv_text(matrix), encoding="utf-8")
    fewest = min(counts.items(), key=lambda kv: kv[1])
    print(f"wrote {args.out}: 9 regions, {sum(counts.values())} links; fewest behind a pair: {fewest[1]} ({fewest[0][0]}-{fewest[0][1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
