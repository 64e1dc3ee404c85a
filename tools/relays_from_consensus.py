#!/usr/bin/env python3
"""Derive an onionlab relay list ([[relays]] TOML) from a Tor v3 consensus.

Development tool, run by hand; the examples commit its output. Uses stem (pip install stem)
to parse the consensus. Selection keeps the bandwidth distribution and the flag proportions:
relays are split by position class (Guard only, Exit only, Guard+Exit, neither), each class
gets a share of the N relays proportional to its size, and within a class relays are taken
at evenly spaced bandwidth quantiles (the relay at rank (i + 0.5) / k of the sorted class).
With --seed S the sample is a stratified random one instead: the class is cut into the same k
equal-count bins and one relay is drawn uniformly from each (rank (i + u_i) / k, u_i uniform
in [0, 1) from Python's seeded Mersenne Twister), so other seeds give other samples with the
same flag proportions, for checking how much a finding depends on the one sample.
BandwidthRate is the consensus bandwidth ("w Bandwidth=", KB/s; in the 2010 consensus the
relay's self-advertised bandwidth) in KiB/s.

Usage: tools/relays_from_consensus.py CONSENSUS N [--seed S] > relays.toml
"""

import argparse
import random
import sys

from stem.descriptor import DocumentHandler, parse_file


def load_consensus(path):
    """The consensus document at `path`, parsed by stem."""
    return next(parse_file(path, "network-status-consensus-3 1.0", document_handler=DocumentHandler.DOCUMENT))


def print_relays(chosen, flags_of) -> None:
    """[[relays]] tables for `chosen` router entries; nicknames made unique with "_"."""
    names = set()
    for r in chosen:
        name = r.nickname
        while name in names:
            name += "_"
        names.add(name)
        print()
        print("[[relays]]")
        print(f'name = "{name}"')
        print(f'bandwidth = "{r.bandwidth} KiB/s"')
        print(f"consensus_weight = {r.bandwidth}")
        print(f"flags = {flags_of(r)!r}".replace("'", '"'))


def main() -> int:
    ap = argparse.ArgumentParser(description="Derive an onionlab [[relays]] list from a Tor v3 consensus.")
    ap.add_argument("consensus", help="path to a v3 consensus document")
    ap.add_argument("n", type=int, help="number of relays to pick")
    ap.add_argument("--seed", type=int, help="draw one relay at random from each quantile bin (default: each bin's midpoint)")
    args = ap.parse_args()
    path, n = args.consensus, args.n
    if n < 1:
        ap.error(f"n: must be at least 1, got {n}")
    rng = random.Random(args.seed) if args.seed is not None else None
    doc = load_consensus(path)
    relays = [
        r
        for r in doc.routers.values()
        if r.bandwidth and {"Fast", "Running", "Valid"} <= set(r.flags)
    ]
    classes = {}
    for r in relays:
        key = ("Guard" in r.flags, "Exit" in r.flags and "BadExit" not in r.flags)
        classes.setdefault(key, []).append(r)
    total = len(relays)
    # Largest-remainder apportionment of n over the classes.
    quotas = {k: n * len(v) / total for k, v in classes.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: quotas[k] - counts[k], reverse=True)[: n - sum(counts.values())]:
        counts[k] += 1
    chosen = []
    for k in sorted(classes):
        members = sorted(classes[k], key=lambda r: (r.bandwidth, r.fingerprint))
        m = counts[k]
        chosen += [members[int((i + (0.5 if rng is None else rng.random())) * len(members) / m)] for i in range(m)]
    chosen.sort(key=lambda r: (-r.bandwidth, r.nickname))
    print(f"# {n} relays derived from {path.split('/')[-1]} (valid-after {doc.valid_after})")
    how = "evenly spaced bandwidth quantiles" if rng is None else f"one relay drawn per quantile bin, --seed {args.seed}"
    print(f"# by tools/relays_from_consensus.py: stratified by flag class, {how}.")
    print(f"# Source relays: {total} Fast+Running+Valid with bandwidth > 0.")
    print_relays(chosen, lambda r: [f for f in ("Guard", "Exit", "Fast", "Stable") if f in r.flags])
    return 0


if __name__ == "__main__":
    sys.exit(main())
