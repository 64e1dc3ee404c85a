#!/usr/bin/env python3
"""Judge the paper's findings on a finished ``onionlab reproduce throttling`` output
directory, without rerunning anything: reads its main runs, ``anonymity.csv``,
``attack3.csv`` and ``summary.json``, prints the verdicts and writes
``DIR/findings.csv`` (what the reproduction itself writes since findings were added;
:mod:`onionlab.reproduce.throttling.findings` says what each finding means).

    python tools/throttling_findings.py results/repro-throttling
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directory", type=Path, help="an `onionlab reproduce throttling` output directory")
    p.add_argument("--no-write", action="store_true", help="print only; do not write DIR/findings.csv")
    args = p.parse_args(argv)
    from onionlab.reproduce.throttling.findings import findings_of_directory, print_findings

    try:
        table = findings_of_directory(args.directory)
    except (FileNotFoundError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_findings(table)
    if not args.no_write:
        table.to_csv(args.directory / "findings.csv", index=False)
        print(f"wrote {args.directory / 'findings.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
