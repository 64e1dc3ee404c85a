"""Argument types for the command line's options: each parses one option's text or raises
:class:`argparse.ArgumentTypeError`, which argparse reports with the option's name
(``argument --seeds: must be at least 1, got 0``) before anything runs. **Owns:** the
checks of numbers, counts and durations given as options. **Must not touch:** what an
option means; configs are checked by :mod:`onionlab.config`, not here.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable


def at_least(low: int) -> Callable[[str], int]:
    """A whole number of at least `low` (e.g. ``--seeds``, ``--jobs``)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {v}")
        return v

    parse.__name__ = f"whole number >= {low}"  # argparse names the type in some messages
    return parse


def positive_float(text: str) -> float:
    """A finite number above 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return v


def _seconds(text: str) -> float:
    from onionlab._core import parse_duration

    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def duration(text: str) -> str:
    """A duration with its unit, 0 or more (e.g. ``--warmup "2 min"``); returned as given,
    for the config it is written into."""
    _seconds(text)
    return text


def positive_duration(text: str) -> str:
    """A duration with its unit, above 0 (e.g. ``--duration "20 min"``); returned as given."""
    if not _seconds(text) > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return text


def check_warmup(duration_text: str, warmup_text: str, duration_flag: str = "--duration", warmup_flag: str = "--warmup") -> None:
    """Raises ValueError naming `warmup_flag` unless the warm-up is shorter than the run (the
    config would refuse it later, after work the command did first)."""
    if _seconds(warmup_text) >= _seconds(duration_text):
        raise ValueError(f"{warmup_flag}: {warmup_text!r} must be shorter than {duration_flag} ({duration_text!r})")


def check_whole_steps(duration_text: str, step_s: float, flag: str, why: str) -> None:
    """Raises ValueError naming `flag` unless the duration is a whole number of `step_s`
    seconds: a run's metrics tables have one row per whole interval, so a config whose
    interval does not divide the run is refused (`why` says which interval the command
    uses)."""
    from onionlab._core import parse_duration_ns

    _seconds(duration_text)  # a bad duration: argparse's error
    step_ns = round(step_s * 1e9)
    # In integer nanoseconds, as the config's own check: seconds as a float round long runs.
    if parse_duration_ns(duration_text) % step_ns:
        step = f"{step_s:g} s" if step_s < 60 else f"{step_s / 60:g} min"
        raise ValueError(f"{flag}: {duration_text!r} must be a whole multiple of {step} ({why})")
