"""The ``onionlab`` command line."""

from __future__ import annotations

import argparse
import sys

from onionlab import __version__, transport_demo


def _demo(args: argparse.Namespace) -> int:
    res = transport_demo(
        flows=args.flows,
        bottleneck_mbit=args.bottleneck_mbit,
        rtt_ms=args.rtt_ms,
        size_bytes=args.size_bytes,
        seconds=args.seconds,
        seed=args.seed,
    )
    print(
        f"transport demo: {args.flows} flows of {args.size_bytes} B sharing a "
        f"{args.bottleneck_mbit:g} Mbit/s downlink, RTT {args.rtt_ms:g} ms, seed {args.seed}"
    )
    print(f"{'flow':>5} {'bytes':>12} {'done (s)':>10} {'goodput (Mbit/s)':>17}")
    for i, (b, c, g) in enumerate(zip(res["bytes"], res["completion_s"], res["goodput_mbit"])):
        done = f"{c:.3f}" if c is not None else "-"
        print(f"{i:>5} {b:>12} {done:>10} {g:>17.3f}")
    print(
        f"Jain's fairness index {res['jain_index']:.4f}, bottleneck utilisation "
        f"{res['utilisation']:.3f}, {res['events']} events, {res['sim_seconds']:.3f} simulated s"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onionlab", description=__doc__)
    p.add_argument("--version", action="version", version=f"onionlab {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the built-in transport example (flows sharing a bottleneck)")
    d.add_argument("--flows", type=int, default=10, help="number of competing flows (default 10)")
    d.add_argument("--bottleneck-mbit", type=float, default=20.0, help="shared downlink, Mbit/s (default 20)")
    d.add_argument("--rtt-ms", type=float, default=80.0, help="round-trip time, ms (default 80)")
    d.add_argument("--size-bytes", type=int, default=5 * 1024 * 1024, help="bytes per flow (default 5 MiB)")
    d.add_argument("--seconds", type=float, default=60.0, help="simulated time limit (default 60)")
    d.add_argument("--seed", type=int, default=1, help="run seed (default 1)")
    d.set_defaults(func=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OverflowError) as e:
        print(f"onionlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
