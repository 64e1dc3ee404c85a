#!/usr/bin/env python3
"""The paper's findings on a finished ``onionlab reproduce throttling`` output directory
over more seeds: its main runs pooled with more seeds of the same configs, for verdicts
that five seeds leave unresolved ("(n.s.)" in the findings matrix). Prints the verdicts
over all the seeds beside the directory's own seeds' (judged again, as
``tools/throttling_findings.py`` judges them); ``--output-dir OUT``
writes them (``findings.csv``), the per-seed numbers they were judged on
(``numbers.csv``) and the attack 1 and 2 rows (``anonymity.csv``).

Run the extra seeds from the directory's own configs, one results directory per
configuration under one or more EXTRA directories, then pool:

    for load in light medium heavy; do for alg in vanilla static split flag thresh; do
        onionlab run DIR/configs/$load-$alg.toml --seed 6 7 8 9 10 -o EXTRA/$load-$alg
    done; done
    python tools/throttling_pooled_findings.py DIR EXTRA

``--attacks-only`` pools the medium-load runs alone and judges attacks 1 and 2, which
read only those (a third of the runs to add). ``--attack-pool`` sets attacks 1 and 2's
candidate guards as ``onionlab reproduce throttling --attack-pool`` does (default: the
pool DIR's own attacks used; "relays" for a directory written before the option), and
``--empty-set`` how they count an empty anonymity set (default: as DIR did; "nothing"
before the option); DIR's own seeds are then judged again under the same policy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from onionlab.reproduce.throttling.anonymity import EMPTY_SETS
    from onionlab.reproduce.throttling.configs import ATTACK_POOLS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path, metavar="DIR", help="an `onionlab reproduce throttling` output directory")
    p.add_argument("extras", type=Path, nargs="+", metavar="EXTRA", help="a directory of LOAD-ALG results with other seeds of DIR's configs")
    p.add_argument("--attacks-only", action="store_true", help="pool the medium-load runs only and judge attacks 1 and 2")
    p.add_argument("--attack-pool", choices=ATTACK_POOLS, help="attacks 1 and 2's candidate guards (default: DIR's own)")
    p.add_argument("--empty-set", choices=EMPTY_SETS, help="how attacks 1 and 2 count an empty anonymity set (default: as DIR did)")
    p.add_argument("--output-dir", type=Path, metavar="OUT", help="also write findings.csv, numbers.csv and anonymity.csv there")
    args = p.parse_args(argv)
    import pandas as pd

    from onionlab.reproduce import markdown_table
    from onionlab.reproduce.throttling.anonymity import summarise
    from onionlab.reproduce.throttling.findings import anonymity_findings, directory_anonymity, findings_matrix, findings_of_directory, output_summary, print_findings
    from onionlab.reproduce.throttling.pooling import pooled_anonymity, pooled_findings, summary_attack_pool

    try:
        if args.attacks_only:
            anon, numbers = pooled_anonymity(args.directory, args.extras, args.attack_pool, args.empty_set), None
            table = anonymity_findings(anon)
        else:
            table, numbers, anon = pooled_findings(args.directory, args.extras, args.attack_pool, args.empty_set)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seeds = sorted(int(s) for s in anon["seed"].unique())
    print(f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); attacks 1 and 2, mean entropy lost (bits), false exclusion rate:")
    shown = anon[anon["attack"].isin(["attack1", "attack2-observed", "attack2-observed-timing", "attack2-observed-combined"])]
    losses = summarise(shown, ["attack", "algorithm"])[["attack", "algorithm", "clients", "mean_loss_bits", "false_exclusion_rate"]]
    print(losses.round(3).to_string(index=False))
    print_findings(table)
    try:  # the directory's own seeds judged again by the same code (its findings.csv may be older)
        if args.attacks_only:  # from its anonymity.csv alone, without loading its main runs
            own = anonymity_findings(directory_anonymity(args.directory, args.empty_set))
        else:
            own = findings_of_directory(args.directory, args.empty_set)
    except (FileNotFoundError, KeyError, ValueError) as e:
        print(f"\nnot set beside the directory's own seeds: {e}", file=sys.stderr)
    else:
        own = own[own["finding"].isin(set(table["finding"]))]
        own_pool = summary_attack_pool(output_summary(args.directory))
        if args.attack_pool and args.attack_pool != own_pool:  # its attack rows are over its own candidates
            print(f"\n(the directory's own attacks 1 and 2 are over --attack-pool {own_pool}, these over {args.attack_pool})")
        print(f"\nThe directory's own seeds beside all {len(seeds)}:\n")
        print(markdown_table(findings_matrix({"own seeds": own, f"{len(seeds)} seeds": table})))
    if args.output_dir:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.output_dir / "findings.csv", index=False)
        anon.to_csv(args.output_dir / "anonymity.csv", index=False)
        if numbers is not None:
            numbers.to_csv(args.output_dir / "numbers.csv", index=False)
        print(f"\nwrote {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
