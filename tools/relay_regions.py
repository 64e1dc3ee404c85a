#!/usr/bin/env python3
"""Each built-in throttling relay sample's relays placed in the regions of Shadow's 2011
network generator, for `reproduce throttling --latency regions`.

The generator (scallion's `contrib/generate.py`) looked every relay's address up in a
GeoIP city database and put the relay in the region its "geocode" maps to: the US state
for an address in the US, the country code otherwise, through one dictionary built from
the region lists in order, so that a later list wins a code two lists share ("CA" is
California in US_WEST and Canada in NORTH: NORTH; "DE", "IL" and "AR" likewise go to
EU_WEST, EU_EAST and SOUTH). A relay whose code was in no list was dropped from its
selection. Its directory authority ran in US_CENTRAL.

This tool does the same with what is at hand: each relay's address from the consensus
its sample was drawn from (the sample drawn again, exactly, by
`tools/relays_from_consensus.py`'s `draw`, and checked name by name against the shipped
file), and the country of that address from tor's own `geoip` file (IP ranges to
country codes; tor's `src/config/geoip` of April 2011, built from MaxMind's GeoLite
Country, the month of the paper's consensus). A country database has no states, so
every US relay is in US_CENTRAL, the generator's region for the bare code "US". A relay
whose country is in none of the generator's lists (which the generator would not have
drawn; no built-in sample has one) is an error naming it.

    tools/relay_regions.py --geoip GEOIP -o python/onionlab/reproduce/data/throttling-relay-regions.json

Reads the consensuses in `data/consensus/` (with stem, as `relays_from_consensus.py` does)
and the samples in `python/onionlab/reproduce/data/`; the geoip file is given (it is not
shipped).
"""

from __future__ import annotations

import argparse
import bisect
import ipaddress
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relays_from_consensus import draw, unique_names  # noqa: E402
from shadow_region_latency import REGIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "python" / "onionlab" / "reproduce" / "data"
CONSENSUS = ROOT / "data" / "consensus"

#: Each built-in sample (reproduce throttling --sample): its file, and the consensus and
#: `draw` arguments it was made with (data/README.md).
SAMPLES = {
    "quantiles": ("throttling-relays.toml", "NetworkConsensus_1-12-10.txt", dict(n=50)),
    "deciles": ("throttling-relays-deciles.toml", "NetworkConsensus_1-12-10.txt", dict(n=50, seed=1, method="deciles")),
    "shadow": ("throttling-relays-shadow.toml", "NetworkConsensus_1-12-10.txt", dict(n=50, seed=1, method="deciles", flag_source="voted", authority=True)),
    "paper": ("throttling-relays-paper.toml", "consensus-2011-04-27-03-00-00", dict(n=50, seed=1, method="deciles", flag_source="voted", authority=True)),
}

#: The simulated directory authority's name in the samples that have one, and its region.
AUTHORITY = ("4uthority", "US_CENTRAL")

#: The generator's code -> region dictionary: its lists in order, a later one winning.
GEOCODE_REGION = {code: region for region, codes in REGIONS.items() for code in codes}


class GeoIp:
    """tor's geoip file: lines `INTIPLOW,INTIPHIGH,CC`, sorted and disjoint."""

    def __init__(self, path: Path):
        self.lows, self.highs, self.codes = [], [], []
        for i, line in enumerate(path.read_text(encoding="ascii").splitlines(), 1):
            if not line or line.startswith("#"):
                continue
            try:
                lo, hi, cc = line.split(",")
                self.lows.append(int(lo))
                self.highs.append(int(hi))
            except ValueError:
                raise ValueError(f"{path} line {i}: expected INTIPLOW,INTIPHIGH,CC, got {line!r}") from None
            self.codes.append(cc.strip())
        if not self.lows:
            raise ValueError(f"{path}: no ranges")

    def country(self, ip: str) -> str | None:
        n = int(ipaddress.IPv4Address(ip))
        i = bisect.bisect_right(self.lows, n) - 1
        return self.codes[i] if i >= 0 and n <= self.highs[i] else None


def sample_relays(path: Path) -> list[tuple[str, int]]:
    """(name, consensus_weight) of a sample's relays, in its order."""
    text = path.read_text(encoding="utf-8")
    names = re.findall(r'^name = "([^"]*)"', text, re.M)
    weights = [int(w) for w in re.findall(r"^consensus_weight = (\d+)", text, re.M)]
    if len(names) != len(weights):
        raise ValueError(f"{path}: {len(names)} names but {len(weights)} consensus_weight lines")
    return list(zip(names, weights))


def drawn_addresses(sample: str) -> dict[str, str | None]:
    """name -> address of a built-in sample's relays (None for the authority), drawn again and
    checked against the shipped file. Raises ValueError where the draw and the file differ."""
    file, consensus, kwargs = SAMPLES[sample]
    _, chosen, _, _, _ = draw(str(CONSENSUS / consensus), **kwargs)
    drawn = [(name, r.bandwidth, getattr(r, "address", None)) for r, name in zip(chosen, unique_names(chosen))]
    shipped = sample_relays(DATA / file)
    if [(n, w) for n, w, _ in drawn] != shipped:
        raise ValueError(f"{file}: the relays drawn again from {consensus} are not the file's (was it drawn with other options?)")
    return {name: ip for name, _, ip in drawn}


def region_of(name: str, ip: str | None, geoip: GeoIp) -> str:
    """The generator's region for one relay at `ip` (None: the authority)."""
    if ip is None:
        if name != AUTHORITY[0]:
            raise ValueError(f"relay {name!r}: no address")
        return AUTHORITY[1]
    cc = geoip.country(ip)
    if cc == "US":
        return "US_CENTRAL"  # no state in a country database: the generator's region for "US"
    if cc in GEOCODE_REGION:
        return GEOCODE_REGION[cc]
    raise ValueError(f"relay {name!r} ({ip}): country {cc!r} is in none of the generator's region lists (it would not have drawn the relay)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--geoip", type=Path, required=True, help="tor's geoip file (lines INTIPLOW,INTIPHIGH,CC)")
    p.add_argument("-o", "--out", type=Path, required=True, help="the JSON to write")
    args = p.parse_args(argv)
    try:
        geoip = GeoIp(args.geoip)
        result: dict = {"regions": list(REGIONS)}
        for sample in SAMPLES:
            result[sample] = {name: region_of(name, ip, geoip) for name, ip in drawn_addresses(sample).items()}
    except (OSError, ValueError) as e:
        print(f"relay_regions: {e}", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for sample in SAMPLES:
        counts = {r: list(result[sample].values()).count(r) for r in REGIONS}
        print(f"{sample}: " + ", ".join(f"{r} {n}" for r, n in counts.items() if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
