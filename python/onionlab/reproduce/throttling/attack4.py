"""Attack 4 of the paper's section 5.2, measured: confirming a circuit's guard by opening
many connections to it. The paper argues it but does not simulate it; this is ours.

The argument (spec 7.3): what the adversary cannot control in attack 2 is each guard's
criterion for throttling, ``splitRate = B / N`` for bit-splitting and flagging and
``selectIndex = floor(T N)`` for threshold, and "all of these are controlled by the number
of circuits at the guard", which the adversary raises by opening "a large number of
connections to each guard node until a decrease in the target circuit's throughput is
observed". Static throttling's rate does not depend on N, and vanilla has no throttle, so
neither should show anything (inferred, spec 7.3).

**The experiment.** A medium-load run of each algorithm with the chosen parameters, as the
main runs, plus an attacker: at each of ``STEPS`` times t_k, spread evenly over the measured
part of the run, more attacker clients join (``[[clients]] start``), every circuit of theirs
through the attacked guard X (``path``) and carrying almost nothing (1 KiB a minute, enough
to keep the circuit and its connection open). Each step multiplies X's client connections by
``factor`` (default 2: N0, 2 N0, 4 N0 attacker clients join, so X holds 2, 4 and 8 times its
own N0). N0 is what X held before the attack in the vanilla run; the attacker learns it by
probing (under bit-splitting B/N reveals N, and B is in the consensus). The paper's attacker
opens connections "until a decrease in the target circuit's throughput is observed": a
fixed number per step would not do, since a throttle binds only once B/N falls below what a
target carries anyway. So X's connection count rises in steps and nothing else about the
network changes: a group that joins late leaves every other client's draws as they were
(each client draws from its own random stream; a Rust test checks this).

**Paced targets.** A circuit that already runs at flagging's FlagRate or threshold's floor
(a bulk client's, flooded) has nowhere lower to go when N rises, and one that carries less
than any throttle rate is never touched. So the attacker also serves ``PACED_TARGETS``
clients of its own choosing (``PACED_CLASS``, one endless download each) at a pace just
below X's fair share: ``B_X / (N0 sqrt(factor))``, between the fair share before the first
step and after it, where B_X is X's bandwidth (the consensus) and N0 its client connections
(probed, as above). This is the paper's attack 2 strategy for flagging, "raise the EWMA of
the target circuit at a rate that will allow him to maximally differentiate guards", used
for attack 4: through X the pace is below the meta-EWMA M (never flagged) until the steps
pull M, the EWMA of B/N, below it; through any other guard nothing changes. The pace stands
for the attacker's server sending at that rate: in the model it is the target client's
downlink, which holds the guard's connection to the client to the same rate. The targets
choose their guards as every client does, so those through X are the positives and the
rest the decoys. They load the network by ``PACED_TARGETS`` times the pace from the start:
before t_1 an attack run is the main run plus the targets.

A target whose circuit is held below the pace elsewhere (a loaded middle or exit) cannot
show the throttle at X: its connection's EWMA stays below M whatever N does. The attacker
sees this at its server, which knows what it sends, so it tests only the targets that
carried at least ``TESTABLE`` of the pace in the window before the first step (class
``TESTABLE_CLASS`` in ``attack4.csv``; the class of all paced targets is there too). This
rule came after the first paced runs, on the built-in sample, where a quarter of the
targets carried their pace: among those, bit-splitting and flagging gave an AUC of 1.00.

**What the attacker sees** is each target circuit's throughput at its server: the DATA
cells the circuit delivers (the circuits table, every ``SAMPLE_S`` seconds; a circuit keeps
its guard for life, where a client's traffic moves between its guards as it builds new
circuits). For each step it compares the ``w`` seconds before t_k with the ``w`` seconds
from t_k + w, the step having settled (w = half the gap between steps, so the window after
one step ends where the next step starts): the score of a circuit is the mean over steps of
``log((after + 1) / (before + 1))``, over the steps where it carried cells in both windows
(a circuit without such a step tells nothing and is left out). A circuit through X that
slows at every step scores low. Why the attacker waits w: a throttle set at t_k holds the
connection back only once its 2 MiB burst has drained, burst / (what it carries - the new
rate) later, about 100 s for a target paced at 26 KiB/s that flagging drops to 5 KiB/s.
(The first runs compared the w seconds right after t_k: there the drop came at the
window's end and flagging's paced targets scored an AUC of 0.59 on the built-in sample;
0.68 with the settled window, docs/reproductions/throttling-details.md, "Attack 4".)

**What is measured.** Positives are the circuits through X, negatives every other circuit
in the same run. Per algorithm and client class: the AUC, the chance the attacker ranks a
true-guard circuit below (slower than) a decoy (0.5: no information; 1: always), and the
true and false positive rates of the rule "slowed by at least 20 % on average" (score <
log 0.8). Guards attacked: the ``guards`` guards with the most client connections in the
medium-load vanilla run, one run each.

**Owns:** the attacker's clients, the windows and the scores. **Must not touch:** the
algorithms or the main runs' configs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab._core import CELL_WIRE_BYTES
from onionlab.reproduce import reuse_options, run_many, write_config
from onionlab.reproduce.throttling.configs import ALGORITHMS, LOADS, client_settings, config_text, mechanism_line, seconds

#: Attacker steps per run.
STEPS = 3
#: Circuits-table sampling interval of the attack runs (seconds).
SAMPLE_S = 10.0
#: The detection rule: a circuit whose throughput fell by at least this fraction on average.
DROP = 0.2
#: How much each step multiplies the attacked guard's client connections, by default.
DEFAULT_FACTOR = 2.0
#: Guards attacked, by default: the busiest ones, so that most positives are real targets.
DEFAULT_GUARDS = 2
#: Clients the attacker serves at a pace (module docs), in every attack run.
PACED_TARGETS = 50
#: Their client class in the results.
PACED_CLASS = "attack4-paced"
#: The attacker's own connection-opening clients: ``attack4-1`` .. ``attack4-STEPS``.
ATTACKER_CLASS = r"attack4-\d+"
#: A paced target is testable if it carried at least this share of its pace before the
#: first step (module docs); ``attack4.csv``'s class for those targets.
TESTABLE = 0.9
TESTABLE_CLASS = f"{PACED_CLASS}-testable"


def step_times(duration_s: float, warmup_s: float) -> tuple[list[float], float]:
    """The attacker's step times t_1..t_STEPS, evenly inside (warm-up, end), and the window
    length w, half the gap between steps; both in whole samples (``SAMPLE_S``), so that a
    window holds a fixed number of them."""
    gap = (duration_s - warmup_s) / (STEPS + 1)
    times = [math.floor((warmup_s + k * gap) / SAMPLE_S + 0.5) * SAMPLE_S for k in range(1, STEPS + 1)]
    return times, max(1, math.floor(gap / 2 / SAMPLE_S)) * SAMPLE_S


def step_sizes(n0: int, factor: float) -> list[int]:
    """Attacker clients joining at each step so that a guard holding `n0` client connections
    holds n0 * factor**k after step k (at least one more each step)."""
    held, sizes = n0, []
    for k in range(1, STEPS + 1):
        target = max(held + 1, math.floor(n0 * factor**k + 0.5))
        sizes.append(target - held)
        held = target
    return sizes


def attacker_clients(guard: str, middle: str, exit_: str, times: list[float], sizes: list[int]) -> str:
    """The attacker's client groups: ``sizes[k]`` clients joining at step time ``times[k]``,
    over a 5 s spread, every circuit through (guard, middle, exit), each fetching 1 KiB a
    minute."""
    groups = "".join(
        f"""
[[clients]]
name = "attack4-{k + 1}"
workload = "attack4"
count = {n}
link_up = "$LINK_UP"
link_down = "$LINK_DOWN"
path = ["{guard}", "{middle}", "{exit_}"]
start = "{t:g} s"
start_spread = "5 s"
"""
        for k, (t, n) in enumerate(zip(times, sizes))
    )
    return groups + """
[workloads.attack4]
type = "web"
size = "1 KiB"
think = { dist = "fixed", value = "60 s" }
"""


def pace_rate(bandwidth: float, n0: int, factor: float) -> int:
    """The paced targets' rate (bytes/s) against a guard of `bandwidth` (bytes/s) holding
    `n0` client connections: ``B / (N0 sqrt(factor))``, the geometric middle of the fair
    share before the first step (B/N0) and after it (B/(factor N0)). At least 1."""
    return max(1, math.floor(bandwidth / (n0 * math.sqrt(factor))))


def paced_targets(rate: int, count: int = PACED_TARGETS) -> str:
    """The attacker's paced targets: `count` clients, each one endless download (16 GiB)
    through its own guards, held to `rate` bytes/s (module docs)."""
    return f"""
[[clients]]
name = "{PACED_CLASS}"
workload = "{PACED_CLASS}"
count = {count}
link_up = "$LINK_UP"
link_down = "{rate} B/s"
placement = "round_robin"

[workloads.{PACED_CLASS}]
type = "bulk"
size = "16 GiB"
"""


def busiest_guards(res, n: int, start_s: float, end_s: float) -> list[tuple[str, int]]:
    """The `n` relays with the most distinct client connections carrying bytes in
    [start_s, end_s) of a run's connection table (its first seed), most first (ties by name),
    each with that count."""
    c = res.connections
    c = c[(c["interval_start"] >= start_s) & (c["interval_start"] < end_s) & (c["seed"] == c["seed"].min())]
    counts = c.groupby("relay")["client"].nunique().reset_index()
    counts = counts.sort_values(["client", "relay"], ascending=[False, True])
    return [(r.relay, int(r.client)) for r in counts.head(n).itertuples()]


def helpers_for(guard: str, relays: list[dict], relay_bw: dict[str, float]) -> tuple[str, str]:
    """The attacker's middle and exit for circuits through `guard`: the largest exit and the
    largest other relay, neither of them the guard."""
    by_bw = sorted((r for r in relays if r["name"] != guard), key=lambda r: (-relay_bw[r["name"]], r["name"]))
    exit_ = next((r["name"] for r in by_bw if "Exit" in r.get("flags", [])), None)
    if exit_ is None:
        raise ValueError(f"attack 4: no exit relay besides {guard!r} in the sample")
    middle = next((r["name"] for r in by_bw if r["name"] != exit_), None)
    if middle is None:
        raise ValueError(f"attack 4: the sample needs three relays for a path through {guard!r}")
    return middle, exit_


def circuit_scores(res, times: list[float], window: float) -> pd.DataFrame:
    """Per circuit of the run's own clients and the paced targets (not the attacker's
    connection-opening clients): its ``relay`` (the guard),
    ``score``, the mean over steps of log((after + 1) / (before + 1)) DATA cells delivered
    in [t_k - window, t_k) (before) and [t_k + window, t_k + 2 window) (after, the step
    settled: module docs), over the steps where the circuit was open through both windows
    and carried cells in both, and ``steps``, how many did; ``pre_cells_per_s``, the DATA
    cells a second it delivered in the window before the first step (NaN unless it was open
    all through it). The table must be sampled every ``SAMPLE_S``."""
    c = res.circuits
    keys = ["seed", "client", "class", "circuit", "created", "relay"]
    none = pd.DataFrame(columns=[*keys, "score", "steps", "pre_cells_per_s"])
    if c.empty:
        return none
    c = c[~c["class"].str.fullmatch(ATTACKER_CLASS)].assign(relay=lambda d: d["path"].str.split(",").str[0])
    t = c["interval_start"].to_numpy()
    parts = []
    # A window counts only if the circuit was open all through it (a row for each of its
    # samples): one that opened or closed inside a window would look faster or slower.
    samples = round(window / SAMPLE_S)
    for k, tk in enumerate(times):
        for side, mask in (("before", (t >= tk - window) & (t < tk)), ("after", (t >= tk + window) & (t < tk + 2 * window))):
            g = c[mask].groupby(keys, sort=False)["cells_delivered"]
            s = g.sum().where(g.size() == samples).rename(side)
            parts.append(s.to_frame().assign(step=k).set_index("step", append=True))
    w = pd.concat(parts).groupby(level=list(range(len(keys) + 1))).sum(min_count=1).dropna()
    w = w[(w["before"] > 0) & (w["after"] > 0)]
    if w.empty:
        return none
    w["log_ratio"] = np.log((w["after"] + 1.0) / (w["before"] + 1.0))
    g = w.groupby(level=list(range(len(keys))))["log_ratio"]
    out = pd.DataFrame({"score": g.mean(), "steps": g.size()})
    # parts[0]: the first step's window before, summed where the circuit was open all through it.
    out["pre_cells_per_s"] = parts[0]["before"].droplevel("step").reindex(out.index) / window
    return out.reset_index()


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a positive scores below a negative), ties counted half: the Mann-Whitney U over
    the product of the sizes. NaN if either side is empty."""
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    allv = np.concatenate([pos, neg])
    ranks = pd.Series(allv).rank(method="average").to_numpy()
    # Sum of the positives' ranks counts pairs where the positive is larger; flip for "below".
    u_above = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return 1.0 - u_above / (len(pos) * len(neg))


def auc_se(a: float, n_pos: int, n_neg: int) -> float:
    """The standard error of an AUC `a` from `n_pos` positives and `n_neg` negatives
    (Hanley and McNeil, Radiology 143, 1982, eq. 2): how far from 0.5 an AUC on a handful of
    positives may land by chance. NaN if either side is empty."""
    if n_pos == 0 or n_neg == 0 or math.isnan(a):
        return math.nan
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return math.sqrt((a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg))


def summarise(scores: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and client class (and "all"): positives, negatives, AUC and its
    standard error (:func:`auc_se`), the detection rule's true and false positive rates,
    and the mean throughput ratio (after / before) of each side. ``scores`` has one row
    per circuit with ``algorithm``, ``attacked`` (the guard attacked in its run) and
    ``relay``; with ``pace_cells_per_s`` (the paced targets' pace in its run) and
    ``pre_cells_per_s``, the paced targets that carried their pace (``TESTABLE``) are also
    summed up as ``TESTABLE_CLASS``."""
    rows = []
    cut = math.log(1 - DROP)
    testable = None
    if {"pace_cells_per_s", "pre_cells_per_s"} <= set(scores.columns):
        testable = (scores["class"] == PACED_CLASS) & (scores["pre_cells_per_s"] >= TESTABLE * scores["pace_cells_per_s"])
    for alg in ALGORITHMS:
        mine = scores["algorithm"] == alg
        a = scores[mine]
        subsets = {cls: a[a["class"] == cls] for cls in a["class"].unique()}
        if testable is not None and (mine & testable).any():
            subsets[TESTABLE_CLASS] = scores[mine & testable]
        for cls in ["all", *sorted(subsets)]:
            s = a if cls == "all" else subsets[cls]
            is_pos = (s["relay"] == s["attacked"]).to_numpy()
            pos, neg = s["score"].to_numpy()[is_pos], s["score"].to_numpy()[~is_pos]
            rows.append({
                "algorithm": alg, "class": cls, "positives": len(pos), "negatives": len(neg),
                "auc": (area := auc(pos, neg)),
                "auc_se": auc_se(area, len(pos), len(neg)),
                "true_positive_rate": float((pos < cut).mean()) if len(pos) else math.nan,
                "false_positive_rate": float((neg < cut).mean()) if len(neg) else math.nan,
                "positive_ratio": float(np.exp(pos.mean())) if len(pos) else math.nan,
                "negative_ratio": float(np.exp(neg.mean())) if len(neg) else math.nan,
            })
    return pd.DataFrame(rows)


def attack4(out: Path, args, relays_file: str, relays: list[dict], relay_bw: dict[str, float], chosen: dict, seeds: list[int], vanilla_medium) -> pd.DataFrame:
    """Runs attack 4 (see the module docs) at medium load for every algorithm against the
    busiest ``args.attack4_guards`` guards, `seeds` each, and writes ``attack4.csv`` (the
    summary, which it returns) and ``attack4_circuits.csv`` (every scored circuit)."""
    duration_s, warmup_s = seconds(args.duration), seconds(args.warmup)
    times, window = step_times(duration_s, warmup_s)
    guards = busiest_guards(vanilla_medium, args.attack4_guards, times[0] - window, times[0])
    if not guards:
        raise ValueError(f"attack 4: the medium-load vanilla run has no client connection between {times[0] - window:g} s and {times[0]:g} s to attack")
    exps, meta = [], {}
    paces = {guard: pace_rate(relay_bw[guard], n0, args.attack4_factor) for guard, n0 in guards}
    for guard, n0 in guards:
        middle, exit_ = helpers_for(guard, relays, relay_bw)
        sizes = step_sizes(n0, args.attack4_factor)
        extra = attacker_clients(guard, middle, exit_, times, sizes) + paced_targets(paces[guard])
        for alg in ALGORITHMS:
            name = f"attack4-{alg}-{guard}"
            text = config_text(
                name, LOADS["medium"], mechanism_line(alg, chosen[alg], args.unthrottled), args.duration, args.warmup, relays_file,
                extra_clients=extra, circ_interval=f"{SAMPLE_S:g} s", **client_settings(args),
            )
            exps.append((name, write_config(out, name, text), seeds))
            meta[name] = (alg, guard, n0)
    print(f"attack 4: {len(exps)} configurations x {len(seeds)} seeds; each of {STEPS} steps multiplies the guard's client "
          f"connections by {args.attack4_factor:g}: " + "; ".join(f"{g} (N0 {n0}, {PACED_TARGETS} targets paced at {paces[g] / 1024:.1f} KiB/s)" for g, n0 in guards),
          flush=True)
    runs = run_many(exps, out, args.jobs, **reuse_options(args))
    parts = []
    for name, (alg, guard, n0) in meta.items():
        parts.append(circuit_scores(runs[name], times, window).assign(
            algorithm=alg, attacked=guard, attacked_n0=n0, pace_cells_per_s=paces[guard] / CELL_WIRE_BYTES))
    scores = pd.concat(parts, ignore_index=True)
    scores.to_csv(out / "attack4_circuits.csv", index=False)
    summary = summarise(scores)
    summary["factor"] = args.attack4_factor
    summary["guards"] = "; ".join(
        f"{g} N0 {n0} +{'+'.join(str(k) for k in step_sizes(n0, args.attack4_factor))} pace {paces[g] / 1024:.1f} KiB/s" for g, n0 in guards)
    summary = summary.round(3)
    summary.to_csv(out / "attack4.csv", index=False)
    return summary
