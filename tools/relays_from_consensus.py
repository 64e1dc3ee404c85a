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
bandwidth authorities' measurement where they had one, else the relay's self-advertised
bandwidth: the document does not say which) in KiB/s.

--method deciles --seed S draws the way the throttling paper's own network was built instead:
Shadow's 2011 Tor network generator (scallion's contrib/generate.py, May 2011, the tool and
year of the paper's experiments) took 40 % exits (Exit flag, not BadExit) and 60 % other
relays, each group restricted to bandwidths above 20 KB/s, sorted by bandwidth and cut into
ten equal deciles (the len % 10 smallest left out), and drew one relay uniformly from each
decile in turn (1, 2, ..., 10, 1, ...). It ignores the Guard flag and flag proportions, so
the sample's guards are whichever drawn relays have the flag. One deviation: the generator
drew with replacement (random.choice) and so could pick a relay twice; here a decile's draws
are without replacement, so every relay is distinct.

--flags voted (with --method deciles) replaces the consensus's Guard, Fast and Stable flags
with those the paper's simulated network voted itself. Its one directory authority ran tor
0.2.2 (the authors' patches are on 0.2.2.15-alpha) and judged the drawn relays as a new
network, by dirserv.c's rules (`voted_flags`), on the relays' bandwidths and on the order the
generator started them (`generator_start_times`). The generator started the exits first and
each group's first draws (one from each of the top deciles) last, so the six non-exits drawn
first had known the authority the shortest time and never got the Guard flag. --authority
adds that authority as a relay: the generator ran it at 102400 KB/s with tor's default exit
policy (its torrc's ExitPolicy line is commented out), which accepts the simulated web
servers' port, so it was the network's largest exit. Both are inferences from the generator
and torrc files, not statements of the paper.

Usage: tools/relays_from_consensus.py CONSENSUS N [--seed S] [--method quantiles|deciles]
       [--flags consensus|voted] [--authority] > relays.toml
"""

import argparse
import random
import sys
from dataclasses import dataclass

from stem.descriptor import DocumentHandler, parse_file


def load_consensus(path):
    """The consensus document at `path`, parsed by stem."""
    return next(parse_file(path, "network-status-consensus-3 1.0", document_handler=DocumentHandler.DOCUMENT))


def unique_names(chosen) -> list:
    """Each of `chosen`'s nicknames, made unique with "_" in list order (the names the
    relay tables give)."""
    names, out = set(), []
    for r in chosen:
        name = r.nickname
        while name in names:
            name += "_"
        names.add(name)
        out.append(name)
    return out


def print_relays(chosen, flags_of) -> None:
    """[[relays]] tables for `chosen` router entries (anything with a nickname and a
    bandwidth in KB/s); nicknames made unique with "_"."""
    for r, name in zip(chosen, unique_names(chosen)):
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
        per_decile = [rng.sample(deciles[i], k) for i, k in enumerate(draws)]
        # The generator's list order: draw j came from decile j % 10, its (j // 10)-th draw.
        chosen += [per_decile[j % DECILES][j // DECILES] for j in range(want)]
    return chosen


#: When Shadow's 2011 generator started each kind of relay, seconds into the simulation: the
#: directory authority; the exits' five groups (60, 90, ..., 180 s) and their remainder; the
#: other relays' five groups (240, ..., 360 s) and their remainder. Clients started from
#: 1200 s, when the flags below are judged.
AUTHORITY_START, EXIT_STARTS, RELAY_STARTS, GROUP_GAP, CLIENTS_START = 1, (60, 210), (240, 390), 30, 1200


def generator_start_times(chosen) -> list:
    """Each of `chosen` (as `decile_sample` returns it: exits then non-exits, each in the
    generator's draw order) with the time the generator started it. The generator popped each
    list from its end, `len // 5` relays per group at 30 s intervals, and started the
    remaining `len % 5` (the list's head) last."""
    timed = []
    for group_is_exit, (first, rest) in ((True, EXIT_STARTS), (False, RELAY_STARTS)):
        group = [r for r in chosen if is_exit(r) == group_is_exit]
        each = len(group) // 5
        for i, r in enumerate(group):
            from_end = len(group) - 1 - i
            timed.append((r, first + GROUP_GAP * (from_end // each) if each and from_end < 5 * each else rest))
    return timed


#: tor 0.2.2.15-alpha's dirserv.c constants: ROUTER_REQUIRED_MIN_BANDWIDTH (bytes/s; the Fast
#: threshold's fallback is half of it and its cap, BANDWIDTH_TO_GUARANTEE_FAST, all of it)
#: and BANDWIDTH_TO_GUARANTEE_GUARD (bytes/s).
ROUTER_REQUIRED_MIN_BANDWIDTH, BANDWIDTH_TO_GUARANTEE_GUARD = 20 * 1024, 250 * 1024


def voted_flags(relays) -> list:
    """The flags tor 0.2.2.15-alpha's directory authority votes for `relays`, a list of
    (bandwidth in KB/s, is an exit, start time in s), judged at `CLIENTS_START`
    (`dirserv_compute_performance_thresholds` and `set_routerstatus_from_routerinfo`):
    - advertised bandwidth: the scallion plug-in reported `bandwidth * 1000` bytes/s;
    - Fast: bandwidth at least the n/8-th smallest (the n/4-th when that is under 10 KiB/s),
      the threshold capped at 20 KiB/s;
    - Stable: uptime at least the median (tor uses uptime until it has 4 hours of MTBF data);
    - Guard: Fast; bandwidth at least 250 KiB/s or at least the smaller of the median
      bandwidth with and without exits; known at least as long as the n/8-th shortest-known
      relay (known since its start: the authority tests a new relay's reachability at once);
      weighted fractional uptime at least the median, capped at 0.98, which every relay of a
      network that never lost one meets.
    Returns each relay's flags in the order the relay tables list them."""
    n = len(relays)
    bws = sorted(bw * 1000 for bw, _, _ in relays)
    fast = bws[n // 8]
    if fast < ROUTER_REQUIRED_MIN_BANDWIDTH // 2:
        fast = bws[n // 4]
    fast = min(fast, ROUTER_REQUIRED_MIN_BANDWIDTH)
    nonexit = sorted(bw * 1000 for bw, ex, _ in relays if not ex)
    guard_bw = min(bws[(n - 1) // 2], nonexit[(len(nonexit) - 1) // 2] if nonexit else 0)
    known = sorted(CLIENTS_START - start for _, _, start in relays)
    guard_tk, stable_uptime = known[n // 8], known[(n - 1) // 2]
    flags = []
    for bw, ex, start in relays:
        bw, up = bw * 1000, CLIENTS_START - start
        is_fast = bw >= fast
        guard = is_fast and (bw >= BANDWIDTH_TO_GUARANTEE_GUARD or bw >= guard_bw) and up >= guard_tk
        flags.append([f for f, on in (("Guard", guard), ("Exit", ex), ("Fast", is_fast), ("Stable", up >= stable_uptime)) if on])
    return flags


@dataclass(frozen=True)
class Authority:
    """The simulated network's directory authority as a relay (--authority): the generator's
    `dirauth 102400` (KB/s), with tor's default exit policy."""

    nickname: str = "4uthority"
    bandwidth: int = 102400
    flags: tuple = ("Exit",)


def draw(path, n, seed=None, method="quantiles", flag_source="consensus", authority=False):
    """The sample `main` prints, for tools that need more of each drawn router than the table
    holds (its address, say): (the consensus, the chosen routers in the table's order, each
    one's flags by `id`, the source line, the how line). Raises ValueError when the
    consensus has too few relays for `n` by deciles."""
    rng = random.Random(seed) if seed is not None else None
    doc = load_consensus(path)
    if method == "deciles":
        relays = [r for r in doc.routers.values() if r.bandwidth]
        chosen = decile_sample(relays, n, rng)
        source = f"{len(relays)} relays with bandwidth > 0 ({sum(r.bandwidth > DECILE_MIN_BANDWIDTH for r in relays)} above {DECILE_MIN_BANDWIDTH} KB/s)"
        how = f"Shadow 2011's selection: {int(n * DECILE_EXIT_FRACTION)} exits, one relay per bandwidth decile in turn, --seed {seed}"
    else:
        relays = [r for r in doc.routers.values() if r.bandwidth and {"Fast", "Running", "Valid"} <= set(r.flags)]
        chosen = quantile_sample(relays, n, rng)
        source = f"{len(relays)} Fast+Running+Valid with bandwidth > 0"
        kind = "evenly spaced bandwidth quantiles" if rng is None else f"one relay drawn per quantile bin, --seed {seed}"
        how = f"stratified by flag class, {kind}"
    if flag_source == "voted":
        timed = generator_start_times(chosen) + ([(Authority(), AUTHORITY_START)] if authority else [])
        voted = voted_flags([(r.bandwidth, is_exit(r), start) for r, start in timed])
        flags = {id(r): f for (r, _), f in zip(timed, voted)}
        chosen = [r for r, _ in timed]
        how += ", flags voted as the simulated tor 0.2.2 authority did" + (", its authority a relay" if authority else "")
    else:
        flags = {id(r): [f for f in ("Guard", "Exit", "Fast", "Stable") if f in r.flags] for r in chosen}
    chosen.sort(key=lambda r: (-r.bandwidth, r.nickname))
    return doc, chosen, flags, source, how


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
    ap.add_argument(
        "--flags", choices=("consensus", "voted"), default="consensus",
        help="consensus (default): the consensus's Guard/Exit/Fast/Stable flags; voted (--method deciles only): the "
        "Guard, Fast and Stable flags the paper's simulated tor 0.2.2 authority voted the drawn network",
    )
    ap.add_argument("--authority", action="store_true", help="add the simulated network's directory authority as a relay (needs --flags voted)")
    args = ap.parse_args()
    path, n = args.consensus, args.n
    if n < 1:
        ap.error(f"n: must be at least 1, got {n}")
    if args.method == "deciles" and args.seed is None:
        ap.error("--seed: required by --method deciles (its draws are random)")
    if args.flags == "voted" and args.method != "deciles":
        ap.error("--flags voted: needs --method deciles (the vote depends on the order Shadow's generator started its draws)")
    if args.authority and args.flags != "voted":
        ap.error("--authority: needs --flags voted (the authority is in no consensus)")
    try:
        doc, chosen, flags, source, how = draw(path, n, args.seed, args.method, args.flags, args.authority)
    except ValueError as e:
        ap.error(f"n: {e}")
    print(f"# {len(chosen)} relays derived from {path.split('/')[-1]} (valid-after {doc.valid_after})")
    print(f"# by tools/relays_from_consensus.py: {how}.")
    print(f"# Source relays: {source}.")
    print_relays(chosen, lambda r: flags[id(r)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
