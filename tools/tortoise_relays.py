#!/usr/bin/env python3
"""The Tortoise paper's relays: 15 bandwidths sampled from the top 300 listed ones.

The paper sampled "from only the highest 300 bandwidths listed by the Tor directory server"
of May 2011; that consensus is not available, so this samples the shipped 2010-01-12 one the
same way (seeded, without replacement). The bandwidths are the consensus's `w Bandwidth=`
values, not the descriptors' advertised bandwidths, which the shipped data does not hold:
since consensus method 5 (2009) that value is the bandwidth authorities' measurement where
enough of them measured the relay, else the advertised one, and this consensus does not say
which. Every relay is a potential exit ("all relays are
potential exit relays") and Stable+Fast, as the paper's dedicated relays were. Development
tool (needs stem); the reproduction ships its output.

Usage: tools/tortoise_relays.py data/consensus/NetworkConsensus_1-12-10.txt > python/onionlab/reproduce/data/tortoise-relays.toml
"""

import random
import sys

from relays_from_consensus import load_consensus, print_relays


def main() -> int:
    path = sys.argv[1]
    doc = load_consensus(path)
    relays = sorted((r for r in doc.routers.values() if r.bandwidth and "Running" in r.flags), key=lambda r: (-r.bandwidth, r.fingerprint))
    top = relays[:300]
    chosen = random.Random(2011).sample(top, 15)
    chosen.sort(key=lambda r: (-r.bandwidth, r.nickname))
    print(f"# 15 relays sampled (seed 2011) from the 300 highest bandwidths of {path.split('/')[-1]}")
    print(f"# (valid-after {doc.valid_after}) by tools/tortoise_relays.py, for the Tortoise reproduction.")
    print_relays(chosen, lambda r: ["Guard", "Exit", "Fast", "Stable"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
