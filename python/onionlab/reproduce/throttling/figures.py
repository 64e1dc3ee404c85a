"""The paper's figures as the reproduction draws them: figure 3 (nine CDF panels), figures
4b/4c (entropy lost per attack) and figure 4a (probing a static throttle).

**Owns:** drawing. **Must not touch:** computing what is drawn (``metrics``, ``anonymity``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab.reproduce.throttling.configs import ALGORITHMS, LOADS
from onionlab.reproduce.throttling.metrics import completed_of_class
from onionlab.stats import ecdf

COLORS = dict(zip(ALGORITHMS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")))


def _cdf(ax, values, label):
    x, y = ecdf(values)
    if len(x):
        ax.step(x, y, where="post", label=f"{label} (n={len(x)})", lw=1.2, color=COLORS.get(label))


def figure3(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(3, 3, figsize=(13, 11))
    panels = [("web", "ttfb", "time to first byte (s), web"), ("web", "ttlb", "download time (s), web"), ("bulk", "ttlb", "download time (s), bulk")]
    for i, load in enumerate(LOADS):
        for j, (cls, metric, xl) in enumerate(panels):
            ax = axes[i][j]
            for alg in ALGORITHMS:
                res = results.get((load, alg))
                if res is not None:
                    _cdf(ax, completed_of_class(res.downloads, cls)[metric], alg)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel(xl)
            ax.set_ylabel("cumulative fraction")
            ax.set_title(f"({'abcdefghi'[3 * i + j]}) {'320 KiB' if cls == 'web' else '5 MiB'} clients, {load} load")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: Attack 2's readings beside the band procedure (``anonymity.csv``'s ``ATTACK-VARIANT``
#: rows), each drawn in its algorithm's colour with its own line style.
FIGURE4_VARIANTS = (("timing", "--"), ("combined", ":"))


def figure4_lines(anon: pd.DataFrame, attack: str) -> list[tuple[str, pd.Series, str]]:
    """The CDFs figure 4b/4c draws for ``attack`` (an attack name of ``anonymity.csv``):
    (legend label, entropy lost per client, line style), the attack itself per algorithm,
    then each of :data:`FIGURE4_VARIANTS` for the algorithms that have it (flagging and
    threshold), so the figure shows every reading the findings judge."""
    lines = []
    for alg in ALGORITHMS:
        a = anon[(anon["attack"] == attack) & (anon["algorithm"] == alg)]
        if len(a):
            lines.append((alg, a["entropy_loss_bits"], "-"))
    for variant, style in FIGURE4_VARIANTS:
        rows = anon[anon["attack"] == f"{attack}-{variant}"]
        for alg, t in rows.groupby("algorithm", sort=True):
            lines.append((f"{alg}, {variant}", t["entropy_loss_bits"], style))
    return lines


def figure4(anon: pd.DataFrame, attack: str, path: Path, title: str, candidates: int) -> None:
    """Figure 4b/4c: the CDF of entropy lost per target, one line per algorithm and
    reading; ``candidates``, the attacker's candidate guards, sets the maximum."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values, style in figure4_lines(anon, attack):
        x, y = ecdf(values)
        if len(x):
            ax.step(x, y, where="post", label=f"{label} (n={len(x)})", lw=1.2, ls=style, color=COLORS[label.split(",")[0]])
    ax.set_xlabel(f"entropy lost (bits; maximum log2({candidates}) = {math.log2(candidates):.2f})")
    ax.set_ylabel("cumulative fraction of clients")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure4a(t: np.ndarray, lam: np.ndarray, alpha: np.ndarray, path: Path) -> None:
    """Figure 4a: the probe's throughput ``lam`` (bytes/s at times ``t``) and the estimate
    ``alpha`` of the throttle rate (the paper's Eq. 2) against the true 5 KiB/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, lam / 1024, lw=0.8, label="throughput λ (KiB/s)")
    ax.plot(t, alpha / 1024, lw=1.5, label="estimate α (eq. 2)")
    ax.axhline(5, color="k", ls="--", lw=0.8, label="true rate 5 KiB/s")
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KiB/s")
    ax.set_title("Figure 4a: probing a guard's throttle rate (static, 5 KiB/s, 2 MiB burst)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
