#!/usr/bin/env python3
"""Attacks 1 and 2 of a finished ``onionlab reproduce throttling`` output directory over
more seeds: its medium-load runs pooled with more seeds of the same configs, for verdicts
that five seeds leave unresolved ("(n.s.)" in the findings matrix). Prints the mean
entropy lost per attack and algorithm, and the attack 1 and 2 findings with their margins
over all the seeds; ``--output FILE`` also writes the per-client rows (as ``anonymity.csv``).

Run the extra seeds from the directory's own configs, one results directory per algorithm
under one EXTRA directory, then pool:

    for alg in vanilla static split flag thresh; do
        onionlab run DIR/configs/medium-$alg.toml --seed 6 7 8 9 10 -o EXTRA/medium-$alg
    done
    python tools/throttling_pooled_anonymity.py DIR EXTRA
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path, metavar="DIR", help="an `onionlab reproduce throttling` output directory")
    p.add_argument("extras", type=Path, nargs="+", metavar="EXTRA", help="a directory of medium-ALG results with other seeds of DIR's configs")
    p.add_argument("--output", type=Path, metavar="FILE", help="also write the per-client attack rows to FILE (CSV)")
    args = p.parse_args(argv)
    from onionlab.reproduce.throttling.anonymity import pooled_anonymity, summarise
    from onionlab.reproduce.throttling.findings import anonymity_findings, print_findings

    try:
        anon = pooled_anonymity(args.directory, args.extras)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seeds = sorted(int(s) for s in anon["seed"].unique())
    print(f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); mean entropy lost (bits), false exclusion rate:")
    shown = anon[anon["attack"].isin(["attack1", "attack2-observed", "attack2-observed-timing", "attack2-observed-combined"])]
    table = summarise(shown, ["attack", "algorithm"])[["attack", "algorithm", "clients", "mean_loss_bits", "false_exclusion_rate"]]
    print(table.round(3).to_string(index=False))
    print_findings(anonymity_findings(anon))
    if args.output:
        anon.to_csv(args.output, index=False)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
