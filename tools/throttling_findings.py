#!/usr/bin/env python3
"""Judge the paper's findings on a finished ``onionlab reproduce throttling`` output
directory, without rerunning anything: reads its main runs, ``anonymity.csv``,
``attack3.csv`` and ``summary.json``, prints the verdicts and writes
``DIR/findings.csv`` (what the reproduction itself writes since findings were added;
:mod:`onionlab.reproduce.throttling.findings` says what each finding means).

Given several directories, it judges each (writing each one's ``findings.csv``) and then
prints the verdicts side by side as a markdown table, one column per directory: which of
the paper's findings hold under which setup. ``NAME=DIR`` names a column; a bare ``DIR``
is named by its last path component. ``--csv FILE`` also writes that table.

A ``findings.csv`` file in place of a directory is read as it is, neither judged again
nor written: the verdicts of ``tools/throttling_pooled_findings.py --output-dir OUT``
(``OUT/findings.csv``, over more seeds than the directory holds) then take a column of
their own. Such a column is named by its directory, as a bare directory would be.

``--empty-set`` judges attacks 1 and 2 with their empty anonymity sets counted another way
than each directory counted them (``onionlab reproduce throttling --empty-set``), from the
same ``anonymity.csv``; it implies ``--no-write``, since a directory's ``findings.csv``
is its own policy's.

    python tools/throttling_findings.py results/repro-throttling
    python tools/throttling_findings.py built-in=results/repro-throttling paper=results/paper --csv matrix.csv
    python tools/throttling_findings.py paper=results/paper paper-15=pooled/findings.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def named(arg: str) -> tuple[str, Path]:
    """``NAME=DIR`` or ``DIR`` (named by its last component; a ``findings.csv`` file by
    its directory's) as (name, path)."""
    name, sep, path = arg.partition("=")
    if sep and name and path:
        return name, Path(path)
    p = Path(arg)
    return (p.parent if p.suffix == ".csv" else p).name or arg, p


def read_findings(path: Path):
    """A ``findings.csv`` written earlier, checked to be one (FileNotFoundError,
    ValueError naming the file otherwise)."""
    import pandas as pd

    from onionlab.reproduce.throttling.findings import check_findings_table

    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    return check_findings_table(pd.read_csv(path), str(path))


def main(argv: list[str] | None = None) -> int:
    from onionlab.reproduce.throttling.anonymity import EMPTY_SETS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("directories", nargs="+", metavar="[NAME=]DIR", help="`onionlab reproduce throttling` output directories, or findings.csv files read as they are")
    p.add_argument("--no-write", action="store_true", help="print only; do not write DIR/findings.csv")
    p.add_argument("--empty-set", choices=EMPTY_SETS, help="count attacks 1 and 2's empty anonymity sets this way (implies --no-write)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="with several directories, also write the side-by-side table to FILE")
    args = p.parse_args(argv)
    from onionlab.reproduce import markdown_table
    from onionlab.reproduce.throttling.findings import findings_matrix, findings_of_directory, print_findings

    dirs = [named(a) for a in args.directories]
    names = [n for n, _ in dirs]
    if len(set(names)) != len(names):
        print(f"error: two directories share a name ({', '.join(names)}); name them with NAME=DIR", file=sys.stderr)
        return 2
    if args.csv and len(dirs) < 2:
        print("error: --csv: needs two or more directories to set side by side", file=sys.stderr)
        return 2
    if args.empty_set and any(d.suffix == ".csv" for _, d in dirs):
        print("error: --empty-set: a findings.csv is read as it is (judge its runs again with tools/throttling_pooled_findings.py --empty-set)", file=sys.stderr)
        return 2
    tables = {}
    for name, d in dirs:
        given = d.suffix == ".csv"
        try:
            table = read_findings(d) if given else findings_of_directory(d, args.empty_set)
        except (FileNotFoundError, KeyError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if len(dirs) == 1:
            print_findings(table)
        if not (args.no_write or args.empty_set or given):
            table.to_csv(d / "findings.csv", index=False)
            print(f"wrote {d / 'findings.csv'}")
        tables[name] = table
    if len(dirs) > 1:
        matrix = findings_matrix(tables)
        print("\nThe paper's findings side by side (yes/no pooled; then how many seeds, each judged alone, agree):\n")
        print(markdown_table(matrix))
        if args.csv:
            matrix.to_csv(args.csv, index=False)
            print(f"\nwrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
