#!/usr/bin/env python3
"""Compare `onionlab reproduce throttling` outputs run on different relay samples.

Development tool, run by hand. For each output directory it reads the relay sample the run
used (`configs/throttling-relays.toml`), `table1.csv`, `anonymity_summary.csv` and, where the
output has one, `channels.csv`, and prints three markdown tables: the four throttling
algorithms ordered by web download median and by bulk share at each load (the paper's
findings are orders), attacks 1 and 2's mean information loss, and under vanilla at medium
load the channel end with the most cells waiting (where the sample's bottleneck sits).
Directories are named by their last path component.

Usage: tools/compare_throttling_runs.py OUT_DIR [OUT_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from onionlab.config import tomllib
from onionlab.reproduce.throttling import ALGORITHMS as ALL_CONFIGURATIONS
from onionlab.reproduce.throttling import LOADS, RELAYS_FILE

#: The throttling algorithms the paper's findings order (vanilla is the reference).
ALGORITHMS = [a for a in ALL_CONFIGURATIONS if a != "vanilla"]


def kib_per_s(bandwidth: str) -> float:
    """A relay's bandwidth ("12900 KiB/s", "10 MiB/s", ...) in KiB/s, parsed as the config is."""
    from onionlab._core import parse_byte_rate

    return parse_byte_rate(bandwidth) / 1024


def sample_relays(out: Path) -> list[dict]:
    """The `[[relays]]` tables of the sample the output was run on."""
    return tomllib.loads((out / "configs" / RELAYS_FILE).read_text())["relays"]


def sample_shape(relays: list[dict]) -> dict:
    """Total capacity (MiB/s), the two largest relays' share and the Exit-flagged share (%)."""
    bw = [kib_per_s(r["bandwidth"]) for r in relays]
    total = sum(bw)
    top = sorted(bw, reverse=True)
    exits = sum(b for b, r in zip(bw, relays) if "Exit" in r.get("flags", []))
    return {"capacity": total / 1024, "top2": 100 * (top[0] + top[1]) / total, "exit": 100 * exits / total}


def order(values: pd.Series, digits: int) -> str:
    """`values` (by algorithm) from smallest to largest, e.g. "flag 8.4 < split 9.6"."""
    return " < ".join(f"{alg} {v:.{digits}f}" for alg, v in values.sort_values(kind="stable").items())


def rows(out: Path, relays: list[dict]) -> list[dict]:
    """One row per load: the sample's shape, vanilla's figures and the algorithms' orders."""
    shape = sample_shape(relays)
    t = pd.read_csv(out / "table1.csv").set_index(["load", "algorithm"])
    result = []
    for load in LOADS:
        g = t.loc[load]
        missing = [a for a in ALL_CONFIGURATIONS if a not in g.index]
        if missing:
            raise ValueError(f"{out / 'table1.csv'}: no {load}-load row for {', '.join(missing)}")
        result.append({
            "run": out.name, "load": load, **shape,
            "vanilla_web": g.loc["vanilla", "web_ttlb_median"], "vanilla_bulk": g.loc["vanilla", "bulk_pct"],
            "web_order": order(g.loc[ALGORITHMS, "web_ttlb_median"], 2),
            "bulk_order": order(g.loc[ALGORITHMS, "bulk_pct"], 1),
        })
    return result


def attack_row(out: Path) -> dict:
    """Mean entropy lost (bits) per attack and algorithm, medium load."""
    a = pd.read_csv(out / "anonymity_summary.csv").set_index(["attack", "algorithm"]).mean_loss_bits
    return {"run": out.name, **{f"{attack} {alg}": v for (attack, alg), v in a.items() if attack in ("attack1", "attack2", "attack2-timing")}}


def bottleneck_row(out: Path, relays: list[dict]) -> dict | None:
    """Vanilla's channel end with the most cells waiting at medium load, with the flags of
    the relays at either end; `None` for an output without `channels.csv` (older runs)."""
    path = out / "channels.csv"
    if not path.is_file():
        return None
    c = pd.read_csv(path)
    c = c[c["algorithm"] == "vanilla"].sort_values("queued_cells", ascending=False, kind="stable")
    if c.empty:
        raise ValueError(f"{path}: no vanilla rows")
    by_name = {r["name"]: r for r in relays}

    def who(name: str) -> str:
        r = by_name.get(name, {})
        kind = "exit" if "Exit" in r.get("flags", []) else "guard" if "Guard" in r.get("flags", []) else "middle"
        return f"{name} ({kind}, {kib_per_s(r['bandwidth']):.0f} KiB/s)" if r else name

    top, second = c.iloc[0], c.iloc[1] if len(c) > 1 else None
    return {
        "run": out.name, "end": f"{who(top['relay'])} → {who(top['peer'])}",
        "active": top["active_circuits"], "per_circuit": top["kib_per_s_per_active_circuit"], "queued": top["queued_cells"],
        "ratio": top["queued_cells"] / second["queued_cells"] if second is not None and second["queued_cells"] > 0 else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outs", nargs="+", type=Path, metavar="OUT_DIR", help="an output directory of `onionlab reproduce throttling`")
    args = ap.parse_args(argv)
    try:
        samples = {out: sample_relays(out) for out in args.outs}
        table = pd.DataFrame([r for out in args.outs for r in rows(out, samples[out])])
        attacks = pd.DataFrame([attack_row(out) for out in args.outs])
        bottlenecks = [b for b in (bottleneck_row(out, samples[out]) for out in args.outs) if b is not None]
    except FileNotFoundError as e:
        print(f"compare_throttling_runs: {e.filename}: no such file (not a reproduce throttling output?)", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as e:
        print(f"compare_throttling_runs: {e}", file=sys.stderr)
        return 2
    print("| run | load | capacity (MiB/s) | top 2 (%) | exit (%) | vanilla web (s) | vanilla bulk (%) | web download median (s) | bulk share (%) |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for r in table.itertuples():
        print(f"| {r.run} | {r.load} | {r.capacity:.1f} | {r.top2:.0f} | {r.exit:.0f} | {r.vanilla_web:.2f} | {r.vanilla_bulk:.1f} | {r.web_order} | {r.bulk_order} |")
    print()
    cols = [c for c in attacks.columns if c != "run"]
    print("| run | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for r in attacks.itertuples(index=False):
        print(f"| {r[0]} | " + " | ".join(f"{v:.2f}" for v in r[1:]) + " |")
    if bottlenecks:
        print()
        print("| run | vanilla's channel end with the most cells waiting (medium) | active circuits | KiB/s per active circuit | cells waiting | x the next end's |")
        print("|---|---|---:|---:|---:|---:|")
        for b in bottlenecks:
            print(f"| {b['run']} | {b['end']} | {b['active']:.0f} | {b['per_circuit']:.1f} | {b['queued']:,.0f} | {b['ratio']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
