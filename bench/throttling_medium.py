#!/usr/bin/env python3
"""Whole-run benchmark through the Python API: examples/throttling-medium.toml for its
10 simulated minutes, one seed. Prints wall time and peak memory (target: under 10 s wall).

Usage: python3 bench/throttling_medium.py [CONFIG]
"""

import resource
import sys
import time
from pathlib import Path

import onionlab

config = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent.parent / "examples" / "throttling-medium.toml")
t0 = time.perf_counter()
res = onionlab.run(config)
wall = time.perf_counter() - t0
# Seeds may run in worker processes: report the larger of ours and theirs.
peak_mib = max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
runs = res.summary.get("runs", [res.summary])
events = sum(r.get("events", 0) for r in runs)
print(f"throttling-medium benchmark: {config}")
print(f"  wall time (incl. Python)  {wall:.2f} s")
print(f"  events                    {events} ({events / wall / 1e6:.2f} M/s)")
print(f"  downloads reported        {len(res.downloads)}")
print(f"  peak memory (maxrss)      {peak_mib:.1f} MiB")
