"""onionlab: a laboratory for Tor traffic management.

The simulator is written in Rust (``onionlab._core``); this package is its command line and
Python API. No model logic lives in Python.

Modules: :mod:`~onionlab.config` (validating and reading experiment files),
:mod:`~onionlab.runner` (running seeds in parallel), :mod:`~onionlab.sweep` (parameter
sweeps), :mod:`~onionlab.results` (the results
tables and their directory), :mod:`~onionlab.stats` (statistics over result tables),
:mod:`~onionlab.plot`, :mod:`~onionlab.compare`, :mod:`~onionlab.report` (figures, tables,
HTML), :mod:`~onionlab.progress` and :mod:`~onionlab.cli`.

    import onionlab
    res = onionlab.run("examples/tiny.toml", seeds=[1, 2], out="results/tiny")
    res.summary["classes"]["web"]["time_to_last_byte_recv"]["median"]
    sw = onionlab.run_sweep("examples/tiny.toml", {"mechanisms.scheduler": ["round-robin", "ewma"]},
                            seeds=[1, 2], out="results/tiny-sweep")
    sw.table           # one row per point and client class
"""

from onionlab._core import __version__, transport_demo
from onionlab.config import ConfigError  # str(err) is the problem list (see config.py)

__all__ = ["__version__", "transport_demo", "ConfigError", "run", "Results", "load", "check_config", "run_sweep", "load_sweep"]

# The pandas-based parts load on first use, so `onionlab demo` and worker processes start fast.
_LAZY = {
    "run": ("onionlab.runner", "run"),
    "Results": ("onionlab.results", "Results"),
    "load": ("onionlab.results", "load"),
    "check_config": ("onionlab.config", "check"),
    "run_sweep": ("onionlab.sweep", "sweep"),
    "load_sweep": ("onionlab.sweep", "load"),
}


# Submodules the docs name as `onionlab.stats` etc.: imported on first use as well, so
# `import onionlab; onionlab.stats.byte_latency(...)` works without importing them first.
_SUBMODULES = ("config", "runner", "sweep", "results", "stats", "plot", "compare", "report", "progress", "generate", "reproduce", "cli")


def __getattr__(name):
    import importlib

    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"onionlab.{name}")
    raise AttributeError(f"module 'onionlab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
