"""Progress display for experiment runs: one line on stderr, redrawn in place.

**Owns:** turning ``progress(sim_done, sim_total, events)`` callbacks (from one seed in this
process, or several seeds in worker processes) into a single status line with simulated time,
events per second and an ETA. **Must not touch:** the runs themselves.
"""

from __future__ import annotations

import sys
import time
from typing import Hashable, TextIO

WIDTH = 24


def _fmt_secs(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def _fmt_rate(r: float) -> str:
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if r >= div:
            return f"{r / div:.1f}{suf}"
    return f"{r:.0f}"


class Progress:
    """Tracks the progress of one or more runs and draws a status line.

    Runs are keyed by any hashable (a seed, or ``(experiment, seed)`` in a batch; `noun`
    names them in the line). Call :meth:`update` with ``(key, sim_done, sim_total, events)``, :meth:`finish_seed`
    when a seed completes, and :meth:`close` at the end.
    """

    def __init__(self, seeds: list[Hashable], stream: TextIO | None = None, min_interval: float | None = None, noun: str = "seeds"):
        self.seeds = list(seeds)
        self.noun = noun
        self.stream = stream if stream is not None else sys.stderr
        if min_interval is None:
            # Redrawn ten times a second on a terminal; into a log file (CI, nohup), where
            # every redraw stays, every 10 s.
            isatty = getattr(self.stream, "isatty", None)
            min_interval = 0.1 if callable(isatty) and isatty() else 10.0
        self.min_interval = min_interval
        self.start = time.monotonic()
        self.state = {s: (0.0, 0.0, 0) for s in self.seeds}  # seed -> (done, total, events)
        self.finished: set[int] = set()
        self._last_draw = 0.0
        self._width = 0

    def callback(self, seed: Hashable):
        """A ``progress`` callable for ``_core.run_experiment`` running `seed`."""
        return lambda done, total, events: self.update(seed, done, total, events)

    def update(self, seed: Hashable, done: float, total: float, events: int) -> None:
        self.state[seed] = (float(done), float(total), int(events))
        now = time.monotonic()
        if now - self._last_draw >= self.min_interval:
            self._last_draw = now
            self.draw()

    def finish_seed(self, seed: Hashable) -> None:
        done, total, events = self.state.get(seed, (0.0, 0.0, 0))
        self.state[seed] = (total or done, total, events)
        self.finished.add(seed)
        self.draw()

    def fraction(self) -> float:
        fr = []
        for s in self.seeds:
            done, total, _ = self.state[s]
            fr.append(1.0 if s in self.finished else (done / total if total > 0 else 0.0))
        return sum(fr) / len(fr) if fr else 1.0

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        f = min(1.0, max(0.0, self.fraction()))
        bar = "#" * int(round(f * WIDTH))
        events = sum(e for _, _, e in self.state.values())
        rate = events / elapsed if elapsed > 0 else 0.0
        eta = elapsed * (1 - f) / f if f > 0 else float("inf")
        if len(self.seeds) == 1:
            done, total, _ = self.state[self.seeds[0]]
            what = f"{done:.0f}/{total:.0f} sim s"
        else:
            what = f"{self.noun} {len(self.finished)}/{len(self.seeds)} done"
        return (
            f"[{bar:<{WIDTH}}] {100 * f:5.1f}% {what}  {_fmt_rate(rate)} events/s  "
            f"elapsed {_fmt_secs(elapsed)}  ETA {_fmt_secs(eta)}"
        )

    def draw(self) -> None:
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        try:
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if len(self.finished) < len(self.seeds):
            self.draw()
        try:
            self.stream.write("\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass
