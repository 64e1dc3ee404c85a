#!/usr/bin/env python3
"""Derive an onionlab relay list ([[relays]] TOML) from a Tor v3 consensus.

Development tool, run by hand; the examples commit its output. Uses stem (pip install stem)
to parse the consensus. The default selection (--method quantiles) keeps the bandwidth
distribution and the flag proportions: relays are split by position class (Guard only, Exit
only, Guard+Exit, neither), each class gets a share of the N relays proportional to its
size, and within a class relays are taken at evenly spaced bandwidth quantiles (the relay at
rank (i + 0.5) / k of the sorted class).
With --seed S the sample is a stratified random one instead: the class is cut into the same k
equal-count bins and one relay is drawn uniformly from each (rank (i + u_i) / k, u_i uniform
in [0, 1) from Python's seeded Mersenne Twister), so other seeds give other samples with the
same flag proportions, for checking how much a finding depends on the one sample.
BandwidthRate is the consensus bandwidth ("w Bandwidth=", KB/s; in the 2010 consensus the
relay's self-advertised bandwidth) in KiB/s.

--method deciles --seed S draws the way the throttling paper's own network was built instead:
Shadow's 2011 Tor network generator (scallion's contrib/generate.py, May 2011, the tool and
year of the paper's experiments) took 40 % exits (Exit flag, not BadExit) and 60 % other
relays, each group restricted to bandwidths above 20 KB/s, sorted by bandwidth and cut into
ten equal deciles (the len % 10 smallest left out), and drew one relay uniformly from each
decile in turn (1, 2, ..., 10, 1, ...). It ignores the Guard flag and flag proportions, so
the sample's guards are whichever drawn relays have the flag. One deviation: the generator
drew with replacement (random.choice) and so could pick a relay twice; here a decile's draws
are without replacement, so every relay is distinct.

Usage: tools/relays_from_consensus.py CONSENSUS N [--seed S] [--method quantiles|deciles] > relays.toml
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


#: `--method deciles`: the share of exits, the bandwidth cut (KB/s) and the bins of Shadow's
#: 2011 generator.
DECILE_EXIT_FRACTION = 0.4
DECILE_MIN_BANDWIDTH = 20
DECILES = 10


def is_exit(r) -> bool:
    return "Exit" in r.flags and "BadExit" not in r.flags


def quantile_sample(relays, n, rng):
    """Stratified by flag class: each class's share of `n` by largest remainder, then relays at
    evenly spaced bandwidth quantiles of the class (or one drawn per bin with `rng`)."""
    classes = {}
    for r in relays:
        classes.setdefault(("Guard" in r.flags, is_exit(r)), []).append(r)
    total = len(relays)
    quotas = {k: n * len(v) / total for k, v in classes.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: quotas[k] - counts[k], reverse=True)[: n - sum(counts.values())]:
        counts[k] += 1
    chosen = []
    for k in sorted(classes):
        members = sorted(classes[k], key=lambda r: (r.bandwidth, r.fingerprint))
        m = counts[k]
        chosen += [members[int((i + (0.5 if rng is None else rng.random())) * len(members) / m)] for i in range(m)]
    return chosen


def decile_sample(relays, n, rng):
    """Shadow 2011's selection (module docstring): `int(0.4 n)` exits and the rest non-exits, each
    group's relays above 20 KB/s cut into deciles from the largest down, drawn one per decile in
    turn, without replacement within a decile. Raises ValueError when a group has too few relays."""
    n_exits = int(n * DECILE_EXIT_FRACTION)
    chosen = []
    for name, want, members in (
        ("exits", n_exits, [r for r in relays if is_exit(r)]),
        ("non-exits", n - n_exits, [r for r in relays if not is_exit(r)]),
    ):
        members = sorted((r for r in members if r.bandwidth > DECILE_MIN_BANDWIDTH), key=lambda r: (-r.bandwidth, r.fingerprint))
        size = len(members) // DECILES
        # How many each decile gives: decile i gets the draws i, i + 10, i + 20, ... < want.
        draws = [len(range(i, want, DECILES)) for i in range(DECILES)]
        if size < draws[0]:
            raise ValueError(f"{name}: {len(members)} relays above {DECILE_MIN_BANDWIDTH} KB/s are too few for {want} drawn by decile")
        deciles = [members[i * size : (i + 1) * size] for i in range(DECILES)]
        for i, k in enumerate(draws):
            chosen += rng.sample(deciles[i], k)
    return chosen


def main() -> int:
    ap = argparse.ArgumentParser(description="Derive an onionlab [[relays]] list from a Tor v3 consensus.")
    ap.add_argument("consensus", help="path to a v3 consensus document")
    ap.add_argument("n", type=int, help="number of relays to pick")
    ap.add_argument("--seed", type=int, help="draw one relay at random from each bin (default: each quantile bin's midpoint; required by --method deciles)")
    ap.add_argument(
        "--method", choices=("quantiles", "deciles"), default="quantiles",
        help="quantiles (default): stratified by flag class at bandwidth quantiles; deciles: as Shadow's 2011 generator "
        "drew the throttling paper's network (40 %% exits, one relay per bandwidth decile in turn)",
    )
    args = ap.parse_args()
    path, n = args.consensus, args.n
    if n < 1:
        ap.error(f"n: must be at least 1, got {n}")
    if args.method == "deciles" and args.seed is None:
        ap.error("--seed: required by --method deciles (its draws are random)")
    rng = random.Random(args.seed) if args.seed is not None else None
    doc = load_consensus(path)
    if args.method == "deciles":
        relays = [r for r in doc.routers.values() if r.bandwidth]
        try:
            chosen = decile_sample(relays, n, rng)
        except ValueError as e:
            ap.error(f"n: {e}")
        source = f"{len(relays)} relays with bandwidth > 0 ({sum(r.bandwidth > DECILE_MIN_BANDWIDTH for r in relays)} above {DECILE_MIN_BANDWIDTH} KB/s)"
        how = f"Shadow 2011's selection: {int(n * DECILE_EXIT_FRACTION)} exits, one relay per bandwidth decile in turn, --seed {args.seed}"
    else:
        relays = [r for r in doc.routers.values() if r.bandwidth and {"Fast", "Running", "Valid"} <= set(r.flags)]
        chosen = quantile_sample(relays, n, rng)
        source = f"{len(relays)} Fast+Running+Valid with bandwidth > 0"
        kind = "evenly spaced bandwidth quantiles" if rng is None else f"one relay drawn per quantile bin, --seed {args.seed}"
        how = f"stratified by flag class, {kind}"
    chosen.sort(key=lambda r: (-r.bandwidth, r.nickname))
    print(f"# {n} relays derived from {path.split('/')[-1]} (valid-after {doc.valid_after})")
    print(f"# by tools/relays_from_consensus.py: {how}.")
    print(f"# Source relays: {source}.")
    print_relays(chosen, lambda r: [f for f in ("Guard", "Exit", "Fast", "Stable") if f in r.flags])
    return 0


if __name__ == "__main__":
    sys.exit(main())
