"""Experiment config files as seen from Python.

**Owns:** calling the Rust validator (``_core.check_config``), parsing the resolved TOML it
returns, and presenting :class:`ConfigError` problems as text. **Must not touch:** validation
rules, defaults or unit conversion; those live in the Rust ``onionlab-config`` crate, so that
Python and Rust users see the same config.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Sequence

from onionlab import _core

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

#: Raised by :func:`check` (and :func:`onionlab.run`) when an experiment file has problems.
#: A subclass of ``ValueError``; ``err.args[1]`` is a list of ``{"path", "message", "hint"}``.
ConfigError = _core.ConfigError


def _config_error_str(self: BaseException) -> str:
    # The Rust side raises ConfigError(message, problems); show the message, not the tuple.
    return str(self.args[0]) if self.args else ""


ConfigError.__str__ = _config_error_str  # type: ignore[method-assign]
ConfigError.problems = property(lambda self: problems(self))  # type: ignore[attr-defined]


def require_file(path: str | os.PathLike) -> None:
    """Raises FileNotFoundError unless `path` is a config file one can read: missing, or
    something other than a file (a directory, a device such as /dev/null)."""
    if os.path.isfile(path):
        return
    if os.path.exists(path):
        raise FileNotFoundError(f"{os.fspath(path)}: not a config file (a directory or a device, not a TOML file)")
    raise FileNotFoundError(f"{os.fspath(path)}: no such config file")


def check(path: str | os.PathLike, overrides: Sequence[str] = ()) -> str:
    """Validates the experiment file at `path`, with `overrides` (``PATH=VALUE`` strings,
    applied in order before validation; ``docs/config.md``), and returns its fully resolved
    TOML text."""
    if isinstance(overrides, str):
        raise TypeError(f"overrides: give a list of PATH=VALUE strings, e.g. [{overrides!r}]")
    return _core.check_config(os.fspath(path), list(overrides))


def parse(resolved_toml: str) -> dict[str, Any]:
    """Parses resolved TOML text (as returned by :func:`check`) into a dict."""
    return tomllib.loads(resolved_toml)


def client_names(resolved_toml: str) -> list[tuple[str, str]]:
    """(group, client) for every client of a resolved config, as the run names them: group
    g's clients are g0, g1, ..."""
    groups = parse(resolved_toml).get("clients", [])
    return [(g["name"], f"{g['name']}{i}") for g in groups for i in range(int(g.get("count", 0)))]


def problems(err: BaseException) -> list[dict[str, Any]]:
    """The problems of a :class:`ConfigError` as a list of ``{"path", "message", "hint"}``."""
    args = getattr(err, "args", ())
    if len(args) >= 2 and isinstance(args[1], list):
        return [dict(p) for p in args[1]]
    return [{"path": "", "message": str(args[0]) if args else str(err), "hint": None}]


def format_problems(err: BaseException) -> str:
    """One line per problem, ``path: message (hint: ...)``."""
    lines = []
    for p in problems(err):
        line = f"{p['path']}: {p['message']}" if p.get("path") else str(p["message"])
        if p.get("hint"):
            line += f" (hint: {p['hint']})"
        lines.append(line)
    return "\n".join(lines)


#: The name line a resolved config opens with: a TOML basic string (escapes and all) or,
#: when the name holds double quotes (a sweep's names hold its values), a literal one.
_EXPERIMENT_NAME = re.compile(r'''^(\[experiment\]\n)name = (?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*')\n''', re.M)


def without_name(resolved_toml: str) -> str:
    """A resolved config with its experiment name taken out: two runs whose configs agree
    on this agree on everything the simulation reads (its random streams are keyed by the
    seed and the hosts' names, never by the experiment's)."""
    return _EXPERIMENT_NAME.sub(r"\1", resolved_toml, count=1)


def with_seeds(resolved_toml: str, seeds: list[int]) -> str:
    """The resolved TOML text with ``[experiment].seeds`` replaced by `seeds`, so that the
    ``config.toml`` written next to results reproduces them exactly."""
    pat = re.compile(r"^seeds = \[[^\]\n]*\]$", re.M)
    if len(pat.findall(resolved_toml)) != 1:
        return resolved_toml
    return pat.sub("seeds = [" + ", ".join(str(int(s)) for s in seeds) + "]", resolved_toml)


def describe(cfg: dict[str, Any]) -> str:
    """A one-line summary of a parsed resolved config, for ``onionlab check``."""
    exp = cfg.get("experiment", {})
    relays = cfg.get("relays", [])
    groups = cfg.get("clients", [])
    clients = sum(int(g.get("count", 0)) for g in groups)
    servers = cfg.get("servers", {}).get("count", 0)
    seeds = exp.get("seeds", [])
    return (
        f"{exp.get('name', '?')}: {len(relays)} relays, {clients} clients in {len(groups)} "
        f"group{'s' if len(groups) != 1 else ''} ({', '.join(g.get('name', '?') for g in groups)}), "
        f"{servers} servers, duration {exp.get('duration', '?')} (warm-up {exp.get('warmup', '0 s')}), "
        f"seeds {seeds}"
    )
