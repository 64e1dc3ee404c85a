"""The ``onionlab`` command line.

**Owns:** argument parsing, printing, and turning errors into clean messages and exit codes
(1: the config has problems; 2: bad arguments, missing files or directories, other errors;
130: interrupted). Subcommands: ``run``, ``sweep`` (in :mod:`onionlab.sweep`), ``check``, ``show-config``,
``plot``, ``compare``, ``report``, ``demo``, ``reproduce`` and ``generate`` (in
:mod:`onionlab.generate`). The pandas/matplotlib modules are imported only by the subcommands
that need them. **Must not touch:** the model, statistics or figures themselves.
"""

from __future__ import annotations

import argparse
import os
import sys

from onionlab import ConfigError, __version__, transport_demo


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


class _Problems(Exception):
    """A config with problems, already formatted for stderr."""


def _check(path: str, overrides: list[str] | None = None) -> tuple[str, dict]:
    from onionlab import config

    config.require_file(path)
    try:
        text = config.check(path, overrides or [])
    except ConfigError as e:
        n = len(config.problems(e))
        lines = config.format_problems(e).splitlines()
        raise _Problems(
            f"{path}: {n} problem{'s' if n != 1 else ''} in the config:\n" + "\n".join("  " + l for l in lines)
        ) from None
    return text, config.parse(text)


def _fmt(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def _print_run_summary(res) -> None:
    s = res.summary
    seeds = s.get("seeds", [])
    print(
        f"{s.get('experiment')}: {len(seeds)} seed{'s' if len(seeds) != 1 else ''} {seeds}, "
        f"{s.get('events', 0):,} events, {s.get('downloads', 0)} downloads, {s.get('errors', 0)} errors, "
        f"{s.get('unfinished', 0)} unfinished, {_fmt(s.get('data_gib'))} GiB"
    )
    hdr = f"{'class':<10} {'downloads':>9} {'errors':>6} {'unfin.':>6} {'share %':>7} {'ttfb med':>9} {'ttlb med':>9} {'ttlb p90':>9}"
    print(hdr)
    for cls, c in s.get("classes", {}).items():
        fb, lb = c["time_to_first_byte_recv"], c["time_to_last_byte_recv"]
        print(
            f"{cls:<10} {c['downloads']:>9} {c['errors']:>6} {c.get('unfinished', 0):>6} {_fmt(c['data_share_pct'], '.1f'):>7} "
            f"{_fmt(fb['median']):>9} {_fmt(lb['median']):>9} {_fmt(lb['p90']):>9}"
        )


def _run(args: argparse.Namespace) -> int:
    from onionlab.runner import run, seeds_from_options

    _, cfg = _check(args.file, args.set)
    seeds = seeds_from_options(args.seed, args.seeds, cfg)
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs: must be at least 1, got {args.jobs}")
    from onionlab.results import output_dir

    kwargs = {"overrides": args.set} if args.set else {}
    with output_dir(args.output, "--output"):
        res = run(args.file, seeds=seeds, out=args.output, jobs=args.jobs, progress=not args.no_progress, ray_address=args.ray, **kwargs)
    _print_run_summary(res)
    print(f"wrote {args.output}")
    return 0


def _check_cmd(args: argparse.Namespace) -> int:
    from onionlab import config

    _, cfg = _check(args.file, args.set)
    print(f"ok: {config.describe(cfg)}")
    if args.load:
        from onionlab.generate import load_only

        r = load_only(args.file, overrides=args.set or [])
        print(
            f"loaded: {r['relays']:,} relays, {r['clients']:,} clients, {r['servers']:,} servers in {r['seconds']:.2f} s "
            f"(parse+validate {r['parse_seconds']:.2f} s, build {r['build_seconds']:.2f} s), peak memory {r['peak_rss_mib']:.0f} MiB"
        )
    return 0


def _show_config(args: argparse.Namespace) -> int:
    text, _ = _check(args.file, args.set)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from onionlab.plot import plot
    from onionlab.results import load

    if os.path.isfile(os.path.join(args.dir, "sweep.json")):
        # A sweep's figures hold every point; plot draws one experiment's classes.
        raise ValueError(
            f"{args.dir}: a sweep directory (its ttfb.png, ttlb.png and sweep.png show every point); "
            f"`onionlab compare {args.dir} -o OUTDIR` draws its points again, `onionlab plot {os.path.join(args.dir, 'points', 'NAME')}` one point"
        )
    res = load(args.dir)
    out = args.output if args.output is not None else args.dir
    for p in plot(res, os.path.join(out, "")):
        print(f"wrote {p}")
    return 0


def _results_dirs(dirs: list[str]) -> list:
    """The results in `dirs`; a sweep directory (``onionlab sweep``) stands for its points,
    labelled by their settings."""
    from onionlab.results import load
    from onionlab.sweep import load as load_sweep

    out = []
    for d in dirs:
        if os.path.isfile(os.path.join(d, "sweep.json")):
            sw = load_sweep(d)
            for p in sw.info["points"]:
                res = sw.results[p["name"]]
                res.summary["experiment"] = p["label"]
                out.append(res)
        else:
            out.append(load(d))
    return out


def _compare(args: argparse.Namespace) -> int:
    from onionlab.compare import compare, format_table

    results = _results_dirs(args.dirs)
    table = compare(results, out=args.output)
    print(format_table(table))
    if args.output is not None:
        print(f"wrote {os.path.join(args.output, 'ttfb.png')}, ttlb.png and compare.csv")
    return 0


def _report(args: argparse.Namespace) -> int:
    from onionlab.report import report

    results = _results_dirs(args.dirs)
    print(f"wrote {report(results, args.output)}")
    return 0


SET_HELP = (
    "set a config field before validation, as if the file said so (repeatable): "
    "tor.circ_window=500, mechanisms.scheduler=ewma, clients[bulk].count=100, experiment.duration=\"5 min\""
)


def _add_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", metavar="PATH=VALUE", help=SET_HELP)


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

    r = sub.add_parser("run", help="run an experiment (one run per seed) and write its results directory")
    r.add_argument("file", help="experiment config (TOML; see docs/config.md)")
    r.add_argument("-o", "--output", required=True, metavar="DIR", help="results directory to write")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--seeds", type=int, metavar="N", help="N runs with seeds s, s+1, ..., s+N-1 (s: the config's first seed)")
    g.add_argument("--seed", type=int, nargs="+", action="extend", metavar="S", help="run exactly these seeds")
    r.add_argument("--jobs", type=int, metavar="J", help="parallel worker processes (default: one per seed, at most the CPUs); with --ray local, the local cluster's CPUs")
    r.add_argument("--ray", metavar="ADDRESS", help="run the seeds on the ray cluster at ADDRESS (needs ray installed; 'auto': the one `ray start` made here, 'local': a new one for this command)")
    r.add_argument("--no-progress", action="store_true", help="do not draw the progress line on stderr")
    _add_set(r)
    r.set_defaults(func=_run)

    from onionlab import sweep

    sweep.add_parser(sub)

    c = sub.add_parser("check", help="validate an experiment config and list every problem")
    c.add_argument("file")
    c.add_argument("--load", action="store_true", help="also build the network in the simulator (no run); report time and memory")
    _add_set(c)
    c.set_defaults(func=_check_cmd)

    sc = sub.add_parser("show-config", help="print the fully resolved config (defaults filled in)")
    sc.add_argument("file")
    _add_set(sc)
    sc.set_defaults(func=_show_config)

    pl = sub.add_parser("plot", help="CDFs of time to first/last byte per client class (ttfb.png, ttlb.png)")
    pl.add_argument("dir", help="results directory")
    pl.add_argument("-o", "--output", metavar="OUTDIR", help="where to write the PNGs (default: DIR)")
    pl.set_defaults(func=_plot)

    cp = sub.add_parser("compare", help="compare several results directories (table and overlaid CDFs)")
    cp.add_argument("dirs", nargs="+", metavar="DIR", help="results directories; a sweep directory stands for all its points")
    cp.add_argument("-o", "--output", metavar="OUTDIR", help="write ttfb.png, ttlb.png and compare.csv here")
    cp.set_defaults(func=_compare)

    rp = sub.add_parser("report", help="one self-contained HTML page about one or more results directories")
    rp.add_argument("dirs", nargs="+", metavar="DIR", help="results directories; a sweep directory stands for all its points")
    rp.add_argument("-o", "--output", required=True, metavar="FILE.html")
    rp.set_defaults(func=_report)

    from onionlab import reproduce

    rr = sub.add_parser("reproduce", help="reproduce a paper's experiments: tables and figures in a directory")
    papers = rr.add_subparsers(dest="paper", required=True, metavar="PAPER")
    for name in sorted(reproduce.PAPERS):
        mod = reproduce.module(name)
        pp = papers.add_parser(name, help=mod.DESCRIPTION, description=mod.DESCRIPTION)
        pp.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for configs, results, tables and figures")
        pp.add_argument("--ray", metavar="ADDRESS", help="run on the ray cluster at ADDRESS (needs ray; DIR on a filesystem its workers share)")
        mod.add_arguments(pp)
        pp.set_defaults(func=_reproduce)

    from onionlab import generate

    generate.add_parser(sub)
    return p


def _reproduce(args: argparse.Namespace) -> int:
    from onionlab import reproduce
    from onionlab.results import output_dir

    if getattr(args, "ray", None):
        from onionlab.runner import require_ray

        require_ray(args.ray)  # before the output directory and its configs are written
    with output_dir(args.output, "--output") as out:
        return reproduce.module(args.paper).main(out, args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except _Problems as e:
        print(f"onionlab: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        from onionlab.config import format_problems

        print(f"onionlab: the config has problems:\n{format_problems(e)}", file=sys.stderr)
        return 1
    except (FileNotFoundError, NotADirectoryError) as e:
        print(f"onionlab: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OverflowError, TypeError, RuntimeError, OSError) as e:
        print(f"onionlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nonionlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
