"""Paper reproductions: ``onionlab reproduce NAME -o DIR``.

**Owns:** the registry of reproductions and the shared plumbing they use (writing generated
configs next to their results, running them, collecting tables). Each paper is one module
here that builds its experiments as TOML configs (so every run goes through the same
validation as a user's file), runs them with :func:`onionlab.run`, and writes tables and
figures with the paper's numbers beside ours. **Must not touch:** model logic; a
reproduction only configures, runs and summarises.

A reproduction module defines::

    DESCRIPTION: str                          # one line for --help
    def add_arguments(parser) -> None         # its own options (e.g. --quick, --seeds)
    def main(out: pathlib.Path, args) -> int  # writes everything under `out`
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: name -> module. Add a paper here when its module exists.
PAPERS: dict[str, str] = {"ewma": "onionlab.reproduce.ewma"}


def module(name: str) -> ModuleType:
    if name not in PAPERS:
        known = ", ".join(sorted(PAPERS)) or "none yet"
        raise ValueError(f"unknown reproduction {name!r} (available: {known})")
    return importlib.import_module(PAPERS[name])
