"""The anonymity analysis of the paper's section 5 (spec section 7): probing a guard's
throttle rate (figure 4a), attacks 1 and 2 on the medium-load runs (figures 4b, 4c; spec
7.4's band procedure, the paper's timing attack on flagging and rate-signature attack on
threshold, with and without a flood), and attack 3, linking two streams through the shared
burst bucket, as a measured true/false positive rate.

**Owns:** the attacker's view of a run (what it can observe: per-minute throughput, throttle
rates where they show, guards' rates over time) and the entropy each attack takes from a
circuit's guard. **Must not touch:** the algorithms or the main runs' configs; attack 3 and
the probe run their own small experiments.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from onionlab.reproduce import reuse_options, run_many, write_config
from onionlab.stats import clustered_difference_ci95
from onionlab.reproduce.throttling.configs import (
    ATTACK3_RESPONSE, ALGORITHMS, LOADS, client_settings, config_text, linking_clients, mechanism_line, one_of, seconds, size_text,
)
from onionlab.reproduce.throttling.figures import figure4a

#: Sampling interval (seconds) of the per-connection table of the medium-load flagging
#: runs: the timing resolution of attack 2's flag-timing variant, one algorithm tick (the
#: paper: the attacker learns the flag times "precisely"). Other medium-load runs sample
#: every PEAK_STEP_S, the rest every minute.
TIMING_STEP_S = 1.0

#: Attack 2 reads an unthrottled circuit's speed as its busiest PEAK_STEP_S seconds in a minute.
PEAK_STEP_S = 10.0


#: What the attacker of attacks 1 and 2 reads as a guard's rate under vanilla, which
#: throttles nobody (``--vanilla-rate``; spec 7.4):
#:
#: * ``bandwidth`` (default): the guard's bandwidth, B_g. The paper: "the distribution on
#:   guard bandwidth leaks more information than throttled circuits' throughputs".
#: * ``busiest``: what the busiest client connection through the guard carried in the
#:   minute (its bytes / 60 s), a stand-in for spec 7.4's alternative, "a measured probe
#:   throughput through g": a probe that downloads as hard as any client through g would
#:   see about that. No probe is run (probes through every guard would add load to the
#:   runs they measure). A guard whose client connections carried nothing in a minute has
#:   no reading for it (open but idle connections show no rate). The busiest connection
#:   may be the target's own, which hands the attacker its own throughput at its own
#:   guard: the reading favours the attacker.
VANILLA_RATES = ("bandwidth", "busiest")


def check_vanilla_rate(reading: str) -> str:
    """``reading`` if it is one of :data:`VANILLA_RATES`; otherwise ValueError naming ``--vanilla-rate``."""
    return one_of(reading, VANILLA_RATES, "--vanilla-rate")


def _guard_rates(res, relay_bw: dict[str, float], alg: str, vanilla_rate: str = "bandwidth") -> pd.DataFrame:
    """Per (seed, relay, minute): the rate at which a connection would become throttled;
    for vanilla what ``vanilla_rate`` says (:data:`VANILLA_RATES`)."""
    if alg == "vanilla" and check_vanilla_rate(vanilla_rate) == "busiest":
        c = res.connections
        c = c.assign(minute=(c["interval_start"] // 60).astype(int))
        per_conn = c.groupby(["seed", "relay", "client", "minute"], as_index=False)["bytes_written"].sum()
        per_conn = per_conn[per_conn["bytes_written"] > 0]  # an idle connection shows no rate
        per_conn["alpha"] = per_conn["bytes_written"] / 60.0
        return per_conn.groupby(["seed", "relay", "minute"], as_index=False)["alpha"].max()
    r = res.relays.copy()
    r["minute"] = (r["interval_start"] // 60).astype(int)
    if alg == "vanilla":
        r["alpha"] = r["relay"].map(relay_bw)
    else:
        r["alpha"] = r["throttle_rate"]
    return r.groupby(["seed", "relay", "minute"], as_index=False)["alpha"].mean()


def _per_minute(c: pd.DataFrame) -> pd.DataFrame:
    """The per-connection table in one-minute rows (the paper's "circuit throughputs over
    each minute"), whatever its sampling interval: bytes summed, the throttle rate the mean
    of the minute's throttled samples (missing if never throttled in the minute), and
    ``peak_rate``, the highest throughput over PEAK_STEP_S seconds (or one sample, if
    samples are longer) in the minute (bytes/s): what the circuit carries while busy; and
    ``bucket_empty_s``, the time in the minute the throttle held the connection back (NaN
    for results recorded before that column existed)."""
    c = c.copy()
    starts = np.unique(c["interval_start"].to_numpy())
    gaps = np.diff(starts)
    step = max(PEAK_STEP_S, float(gaps[gaps > 0].min()) if (gaps > 0).any() else 60.0)
    keys = ["seed", "relay", "client", "class"]
    c["bin"] = (c["interval_start"] // step) * step
    c["sample_rate"] = c.groupby(keys + ["bin"], sort=False)["bytes_written"].transform("sum") / step
    c["interval_start"] = (c["interval_start"] // 60) * 60.0
    sums = {"bytes_written": ("bytes_written", "sum"), "bytes_read": ("bytes_read", "sum"), "throttle_rate": ("throttle_rate", "mean"), "peak_rate": ("sample_rate", "max")}
    if "bucket_empty_s" in c:  # not in results from before the column existed
        sums["bucket_empty_s"] = ("bucket_empty_s", "sum")
    m = c.groupby(["seed", "relay", "client", "class", "interval_start"], as_index=False, sort=True).agg(**sums)
    if "bucket_empty_s" not in m:
        m["bucket_empty_s"] = np.nan
    return m


def attacks(res, relay_bw: dict[str, float], alg: str, warmup_s: float, sets: dict | None = None, vanilla_rate: str = "bandwidth") -> pd.DataFrame:
    """Attacks 1 and 2 per target client (spec 7.4): the anonymity set of guards whose mean
    throttle rate lies within one standard deviation of the client's per-minute throughput
    (attack 1) or of its connection's throttle rate (attack 2). An empty set tells the
    attacker nothing (entropy loss 0; :func:`empty_set_policy` may count it otherwise); a
    set without the true guard is a false exclusion.

    Rows ``attack1-any`` and ``attack2-any`` apply spec 7.4's variant rule to the same band:
    a guard stays if its rate in *any* minute lies in the band. The paper's "remove any guard
    whose throttle rate is outside a range" fits both readings when a guard's rate moves
    over time (B/N does); the variant never drops a guard for a rate it actually had.

    Rows ``attack2-observed`` (and ``-any``) estimate the target's throttle rate from its
    own traffic only, as the paper's simulation did ("using the same data set as Attack
    1"): the throttle rate counts only in minutes it held the connection back; other
    minutes show what the circuit carried in its busiest PEAK_STEP_S seconds.
    ``attack2-observed-throughput`` (and ``-any``), a sensitivity, reads those other
    minutes as attack 1 does (the minute's throughput). ``attack2`` is the flood the paper
    describes, which reveals the rate whether or not it binds.
    Results recorded before the connection table had ``bucket_empty_s`` have no such rows.
    With ``sets``, each target's candidate mask is also recorded there, for
    :func:`combined_attack`. ``vanilla_rate`` is the guards' rate under vanilla
    (:data:`VANILLA_RATES`)."""
    guards = sorted(relay_bw)
    gi = {name: i for i, name in enumerate(guards)}
    g = _guard_rates(res, relay_bw, alg, vanilla_rate)
    g = g[g["minute"] * 60 >= warmup_s]
    rho = g.groupby(["seed", "relay"])["alpha"].mean()
    # Per seed: every guard's mean rate (NaN if it has none) and its minutes' rates, sorted,
    # so that "any minute in the band" is two binary searches.
    rho_by_seed = {seed: rho.loc[seed].reindex(guards).to_numpy(dtype=float) for seed in rho.index.get_level_values(0).unique()}
    minutes = {k: np.sort(v.dropna().to_numpy(dtype=float)) for k, v in g.groupby(["seed", "relay"])["alpha"]}
    c = _per_minute(res.connections)
    c = c[c["interval_start"] >= warmup_s]
    rows = []
    for seed, target in _band_targets(c):
        rho_s = rho_by_seed.get(seed, np.full(len(guards), np.nan))
        known = ~np.isnan(rho_s)
        mins = [minutes.get((seed, name), np.empty(0)) for name in guards]
        for client, cls, true_guard, bw, th, peak, held in target:
            # Attack 1: throughput. Attack 2: the rate a flood would reveal (Eq. 2): the
            # connection's throttle rate in minutes it is throttled; otherwise what the
            # circuit carries while busy (the minute's peak sample), since an unthrottled
            # flood runs at the circuit's own speed. (The guard's bandwidth itself is not
            # observable through the target circuit; using it would hand the attacker the
            # answer.)
            lam = bw[bw > 0] / 60.0
            seen = (bw > 0) | ~np.isnan(th)
            est = np.where(np.isnan(th[seen]), peak[seen], th[seen])
            # Attack 2 as the paper simulated it, "using the same data set as Attack 1"
            # (no flood): the circuit's own traffic shows its throttle rate (Eq. 2) only in
            # minutes the throttle held it back (its bucket ran empty); otherwise it shows
            # what the circuit carried while busy, and a minute without traffic nothing.
            estimates = [("attack1", lam), ("attack2", est)]
            if not np.isnan(held).any():
                bound = (held > 0) & ~np.isnan(th)
                shown = (bw > 0) | bound
                estimates.append(("attack2-observed", np.where(bound[shown], th[shown], peak[shown])))
                # A sensitivity of the reading above: the unthrottled minutes read as
                # attack 1 reads them (the minute's throughput), the paper's "same data
                # set" taken to the letter; only minutes the throttle held back differ.
                estimates.append(("attack2-observed-throughput", np.where(bound[shown], th[shown], bw[shown] / 60.0)))
            for attack, x in estimates:
                mu, sd = float(np.mean(x)), float(np.std(x))
                lo, hi = mu - sd, mu + sd
                with np.errstate(invalid="ignore"):
                    by_mean = known & (lo <= rho_s) & (rho_s <= hi)
                by_any = np.array([np.searchsorted(a, hi, "right") > np.searchsorted(a, lo, "left") for a in mins])
                for name, cand in ((attack, by_mean), (f"{attack}-any", by_any)):
                    if sets is not None:
                        sets[(seed, client, name)] = (cls, true_guard, cand)
                    rows.append(_set_row(seed, client, cls, name, alg, cand, true_guard, gi))
    return pd.DataFrame(rows)


#: The columns of ``anonymity.csv``'s per-target rows.
ANONYMITY_COLUMNS = ["seed", "client", "class", "attack", "algorithm", "set_size", "entropy_loss_bits", "true_guard_excluded"]


def _set_row(seed, client, cls, attack: str, alg: str, cand: np.ndarray, true_guard: str, gi: dict[str, int]) -> dict:
    """One target's row of an attack on its guard: ``cand`` marks the guards (in ``gi``'s
    order) the attacker keeps. An empty set tells the attacker nothing (loss 0; see
    :func:`empty_set_policy`); a set
    without the true guard is a false exclusion (and its loss is counted, as the paper's
    entropy counts it)."""
    n = int(cand.sum())
    if n:
        loss = math.log2(len(gi)) - math.log2(n)
        excluded = true_guard not in gi or not bool(cand[gi[true_guard]])
    else:
        loss, excluded = 0.0, False
    return {"seed": seed, "client": client, "class": cls, "attack": attack, "algorithm": alg,
            "set_size": n, "entropy_loss_bits": loss, "true_guard_excluded": excluded}


#: What attacks 1 and 2 count for a target whose anonymity set is empty (``--empty-set``),
#: where spec 7.4 says "report max loss or skip; state the policy used":
#:
#: * ``nothing`` (default): the attacker learns nothing, loss 0 bits, and the true guard is
#:   not counted as excluded. The paper: "if a circuit consistently falls below the
#:   throttling rate of all guards, an attacker can learn nothing about its possible entry
#:   guard from this attack"; an attacker whose rule rules out every guard falls back on
#:   its prior. The mean is over every target.
#: * ``skip``: the target is left out of the entropy (its loss is NaN in ``anonymity.csv``);
#:   the mean and the CDF are over the targets the attack gives a set for.
#: * ``max``: the maximum loss, log2 of the candidates' number, with the true guard excluded.
#:   It contradicts the paper's "the static algorithm actually loses no information" (under
#:   static every guard's rate is one number, so a target's set is every guard or none).
EMPTY_SETS = ("nothing", "skip", "max")


def check_empty_set(policy: str) -> str:
    """``policy`` if it is one of :data:`EMPTY_SETS`; otherwise ValueError naming ``--empty-set``."""
    return one_of(policy, EMPTY_SETS, "--empty-set")


def empty_set_policy(anon: pd.DataFrame, policy: str, candidates: int | None) -> pd.DataFrame:
    """``anon``'s attack rows (:func:`attacks`, the timing and combined attacks;
    ``anonymity.csv``, written under any policy) with the empty sets counted by ``policy``
    (:data:`EMPTY_SETS`) over ``candidates`` candidate guards (needed for ``max`` only);
    other rows as they are. Raises ValueError naming ``--empty-set`` for an unknown policy
    or ``max`` without the candidates' number."""
    if check_empty_set(policy) == "max" and not candidates:
        raise ValueError("--empty-set max: needs the number of candidate guards")
    if anon.empty:
        return anon
    empty = anon["set_size"] == 0
    loss = math.log2(candidates) if policy == "max" else {"nothing": 0.0, "skip": np.nan}[policy]
    out = anon.copy()
    out["entropy_loss_bits"] = out["entropy_loss_bits"].astype(float).mask(empty, loss)
    out["true_guard_excluded"] = out["true_guard_excluded"].astype(bool).mask(empty, policy == "max")
    return out


#: The combined attacks (:func:`combined_attack`): (row name, band attack, timing attack).
COMBINED_ATTACKS = (
    ("attack2-observed-combined", "attack2-observed", "attack2-observed-timing"),
    ("attack2-combined", "attack2", "attack2-timing"),
)


def combined_attack(sets: dict, relay_bw: dict[str, float], alg: str) -> pd.DataFrame:
    """Attack 2 against flagging or threshold with everything the paper's attacker has: the
    guards the band procedure keeps (:func:`attacks`), narrowed to those the timing attack
    keeps (:func:`flag_timing_attack`, :func:`thresh_timing_attack`). The paper describes
    this narrowing: for flagging "we assume here that the set of possible guards is already
    narrowed to those whose bandwidth is consistent with the target circuit's throughput",
    and timing then lets it "eliminate from the anonymity set any guard" that would have
    throttled otherwise; threshold's leak is "a combination of the potential in each". A
    target whose two sets do not meet gives an empty set (loss 0, as an empty band does).

    ``sets`` is what those functions recorded for ``alg``'s run: ``{(seed, client, attack):
    (class, true guard, candidate mask)}``. Rows as :func:`attacks`, attacks
    ``attack2-observed-combined`` (the circuits' own traffic: ``attack2-observed`` and
    ``attack2-observed-timing``) and ``attack2-combined`` (with a flood: ``attack2`` and
    ``attack2-timing``), for the targets both attacks have."""
    gi = {name: i for i, name in enumerate(sorted(relay_bw))}
    rows = []
    for name, band, timing in COMBINED_ATTACKS:
        for (seed, client, attack), (cls, true_guard, cand) in sets.items():
            other = sets.get((seed, client, timing)) if attack == band else None
            if other is not None:
                rows.append(_set_row(seed, client, cls, name, alg, cand & other[2], true_guard, gi))
    return pd.DataFrame(rows, columns=ANONYMITY_COLUMNS)


def summarise(anon: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per-client attack rows (:func:`attacks` and the timing attacks) summed up per ``by``
    (e.g. attack and algorithm, or those and the client class): clients, the share whose
    anonymity set is empty, mean and median entropy loss (bits), the false exclusion rate
    (the true guard outside the set), and ``mean_correct_loss_bits``, the mean loss
    counting a client whose set excludes its true guard as 0: what the attacker learns that
    is true, where the paper's entropy (which it reported alone) also counts sets that would
    mislead it. A client whose loss is NaN (an empty set under ``--empty-set skip``) counts
    in ``clients`` and ``empty_set_rate`` only; a group whose every client is left out
    lost nothing to the attack (0 bits, as the findings count it: the paper's "an attacker
    can learn nothing"), and its false exclusion rate stays NaN (no set to exclude from)."""
    measured = anon["entropy_loss_bits"].notna()
    excluded = anon["true_guard_excluded"].astype(bool)
    a = anon.assign(
        correct=anon["entropy_loss_bits"].where(~excluded, 0.0).where(measured),
        excluded=excluded.astype(float).where(measured),
        empty=(anon["set_size"] == 0).astype(float),
    )
    s = (
        a.groupby(by)
        .agg(clients=("client", "size"), empty_set_rate=("empty", "mean"), mean_loss_bits=("entropy_loss_bits", "mean"),
             median_loss_bits=("entropy_loss_bits", "median"), false_exclusion_rate=("excluded", "mean"), mean_correct_loss_bits=("correct", "mean"))
        .reset_index()
    )
    # A loss is NaN only where a target was skipped, so these are NaN only where every one was.
    losses = ["mean_loss_bits", "median_loss_bits", "mean_correct_loss_bits"]
    s[losses] = s[losses].fillna(0.0)
    return s


def _main_guards(c: pd.DataFrame) -> pd.DataFrame:
    """Each (seed, client)'s main guard: the relay it received the most bytes from in
    ``c`` (ties: the first relay by name), with those bytes. Columns seed, client, relay,
    total."""
    sums = c.groupby(["seed", "client", "relay"], sort=True, as_index=False)["bytes_written"].sum()
    sums = sums.rename(columns={"bytes_written": "total"})
    sums = sums.sort_values(["seed", "client", "total", "relay"], ascending=[True, True, False, True], kind="stable")
    return sums.drop_duplicates(["seed", "client"], keep="first")


def _band_targets(c: pd.DataFrame):
    """Targets of the band procedure (:func:`attacks`), from the per-minute connection
    table after the warm-up: each client whose main guard sent it bytes, on at least two
    active minutes. Yields (seed, list of (client, class, guard, bytes written, throttle
    rate, peak rate, time held back by the throttle)), the arrays in minute order."""
    main = _main_guards(c)
    main = main[main["total"] > 0]
    mine = c.merge(main[["seed", "client", "relay"]], on=["seed", "client", "relay"], how="inner")
    mine = mine.sort_values(["seed", "client", "interval_start"], kind="stable")
    for seed, cs in mine.groupby("seed", sort=True):
        out = []
        client = cs["client"].to_numpy()
        bounds = np.flatnonzero(client[1:] != client[:-1]) + 1
        bw_all = cs["bytes_written"].to_numpy()
        th_all = cs["throttle_rate"].to_numpy(dtype=float)
        pk_all = cs["peak_rate"].to_numpy(dtype=float)
        held_all = cs["bucket_empty_s"].to_numpy(dtype=float)
        cls_all, relay_all = cs["class"].to_numpy(), cs["relay"].to_numpy()
        for a, b in zip(np.r_[0, bounds], np.r_[bounds, len(cs)]):
            bw = bw_all[a:b]
            if int((bw > 0).sum()) < 2:
                continue
            out.append((client[a], cls_all[a], relay_all[a], bw, th_all[a:b], pk_all[a:b], held_all[a:b]))
        yield seed, out


def _ewma_factor(halflife_s: float, dt: float = 1.0) -> float:
    return math.exp(-math.log(2) * dt / halflife_s)


def _timing_targets(cs: pd.DataFrame, warmup_s: float, gi: dict[str, int]):
    """Targets of the timing attacks, as in :func:`attacks`: each client's main guard
    connection (most bytes after the warm-up), if that guard is known and the connection
    was active in at least two minutes after the warm-up. Yields (client, class, guard,
    the connection's rows: ``interval_start``, ``bytes_written``, ``throttle_rate`` and,
    where recorded, ``bucket_empty_s``, all samples), clients in order."""
    after = cs[cs["interval_start"] >= warmup_s]
    main = _main_guards(after)
    main = main[(main["total"] > 0) & main["relay"].isin(gi)]
    mine = after.merge(main[["seed", "client", "relay"]], on=["seed", "client", "relay"], how="inner")
    per_minute = mine.groupby(["client", mine["interval_start"] // 60])["bytes_written"].sum()
    active = (per_minute > 0).groupby(level=0).sum()
    keep = main[main["client"].map(active).fillna(0).to_numpy() >= 2]
    rows_of = cs.groupby(["client", "relay"], sort=False).indices
    first_class = cs.drop_duplicates("client").set_index("client")["class"]
    # Numeric columns only: taking rows of the Arrow-backed string columns costs more than
    # the attacks themselves.
    numeric = cs[[k for k in ("interval_start", "bytes_written", "throttle_rate", "bucket_empty_s") if k in cs]]
    for client, g in zip(keep["client"], keep["relay"]):
        yield client, first_class[client], g, numeric.iloc[rows_of[(client, g)]]


def flag_timing_attack(res, relay_bw: dict[str, float], params: dict, warmup_s: float, step_s: float, slack_s: float | None = None, sets: dict | None = None) -> pd.DataFrame:
    """Attack 2 against flagging by *timing* (paper section 5.2; spec 7.3), beside spec
    7.4's band procedure. The paper's attacker raises the target's EWMA and learns when
    each guard would start or stop throttling it; "we can eliminate from the anonymity set
    any guard such that the EWMA of the target circuit should have resulted in a throttling
    but did not" and "any guard that would not have throttled at precisely those times".

    The attacker knows (i) every guard g's meta-EWMA threshold over time: the fair-share
    rate B_g/N_g(t) that probing reveals (the relay table's per-second ``throttle_rate``
    under flagging), from which ``M_g(t)`` follows by the same EWMA; (ii) the system-wide
    flagging policy (H, P); (iii) the target connection's downstream bytes over time (what
    the attacker's server sends, per ``step_s`` interval of the connection table), hence
    its cell EWMA ``E(t)``; and (iv) when the target was flagged (the paper: "this
    determination must be made after the fact to account for the burst bucket ... but it
    can still be made precisely"; here the connection's throttle state sampled every
    ``step_s``). For each guard it replays algorithm 2 (flag when ``E > M_g``, unflag when
    ``E < P M_g``) and keeps the guard only if, at every sample after the warm-up, the
    observed state occurs in the replay within ``slack_s`` (default one sample: the bytes
    within a sample are spread evenly, so the replay's timing is only that precise).

    Output rows as :func:`attacks`, attack ``attack2-timing``. An empty set tells the
    attacker nothing (loss 0); a set without the true guard is a false exclusion.
    ``sets`` as in :func:`attacks` (under both attack 2 variants' names)."""
    slack_s = step_s if slack_s is None else slack_s
    h = seconds(params.get("halflife", "30 s")) if isinstance(params.get("halflife", "30 s"), str) else float(params["halflife"])
    pen = float(params.get("penalty", 0.0))
    f = _ewma_factor(h)
    guards = sorted(relay_bw)
    gi = {g: i for i, g in enumerate(guards)}
    per = int(round(step_s))
    slack_blocks = max(1, int(math.ceil(slack_s / step_s)))
    rows = []
    for seed, cs in res.connections.groupby("seed", sort=True):
        rs = res.relays[res.relays["seed"] == seed]
        t_end = int(math.ceil(max(cs["interval_start"].max() + step_s, rs["interval_start"].max() + 1)))
        nsec = t_end + 1
        # Split rate per guard per second: the row at interval_start k is the value at k+1.
        split = np.zeros((len(guards), nsec))
        have = np.zeros((len(guards), nsec), dtype=bool)
        k = (rs["interval_start"].to_numpy() + 1).round().astype(int)
        ok = (k < nsec) & rs["relay"].isin(gi).to_numpy()
        gidx = rs["relay"].map(gi).to_numpy()
        val = rs["throttle_rate"].to_numpy(dtype=float)
        split[gidx[ok].astype(int), k[ok]] = np.nan_to_num(val[ok])
        have[gidx[ok].astype(int), k[ok]] = ~np.isnan(val[ok])
        meta = np.zeros((len(guards), nsec))
        m = np.zeros(len(guards))
        for s in range(1, nsec):
            m = m * f + split[:, s]
            meta[:, s] = m
        targets = list(_timing_targets(cs, warmup_s, gi))
        if not targets:
            continue
        nb = int(math.ceil(nsec / per)) + 1
        nc = len(targets)
        byts = np.zeros((nc, nb))
        obs = np.full((nc, nb), -1, dtype=np.int8)  # -1 unknown, 0 unflagged, 1 flagged
        for i, (_, _, _, mine) in enumerate(targets):
            b = (mine["interval_start"].to_numpy() / step_s).round().astype(int)
            byts[i, b] = mine["bytes_written"].to_numpy(dtype=float)
            after = mine["interval_start"].to_numpy() >= warmup_s
            obs[i, b[after]] = mine["throttle_rate"].notna().to_numpy()[after].astype(np.int8)
        # Replay algorithm 2 for every (target, guard), once a second.
        e = np.zeros(nc)
        flagged = np.zeros((nc, len(guards)), dtype=bool)
        any_on = np.zeros((nb, nc, len(guards)), dtype=bool)
        any_off = np.zeros((nb, nc, len(guards)), dtype=bool)
        for s in range(1, nsec):
            blk = (s - 1) // per  # the sample interval this second belongs to
            if blk < nb:
                e = e * f + byts[:, blk] / per
            mg = meta[:, s]
            live = have[:, s]
            over = (e[:, None] > mg[None, :]) & live[None, :]
            under = (e[:, None] < pen * mg[None, :]) & live[None, :]
            flagged = over | (flagged & ~under)
            # The state sampled at the end of interval j (second (j+1)*per) is compared
            # with the replay's states within slack of that second.
            j = s // per - 1
            for d in range(-slack_blocks, slack_blocks + 1):
                jj = j + d
                if 0 <= jj < nb and abs(s - (jj + 1) * per) <= slack_s:
                    any_on[jj] |= flagged
                    any_off[jj] |= ~flagged
        known_on = obs == 1
        known_off = obs == 0
        bad = (known_on.T[:, :, None] & ~any_on) | (known_off.T[:, :, None] & ~any_off)
        consistent = ~bad.any(axis=0)
        for i, (client, cls, g, _) in enumerate(targets):
            if sets is not None:
                # Flagging's timing needs no flood, so the same set stands for both variants.
                for attack in ("attack2-timing", "attack2-observed-timing"):
                    sets[(seed, client, attack)] = (cls, g, consistent[i])
            rows.append(_set_row(seed, client, cls, "attack2-timing", "flag", consistent[i], g, gi))
    return pd.DataFrame(rows)


def _sample_step(starts: np.ndarray, default: float) -> float:
    """The sampling interval of a table: the smallest gap between its interval starts."""
    u = np.unique(starts)
    gaps = np.diff(u)
    return float(gaps[gaps > 0].min()) if (gaps > 0).any() else default


def thresh_timing_attack(res, relay_bw: dict[str, float], warmup_s: float, slack_s: float = 1.0, rel_tol: float = 0.01, sets: dict | None = None) -> pd.DataFrame:
    """Attack 2 against threshold throttling by the *signature of its rate over time*
    (paper section 5.2: "once the circuit has been throttled, then any fluctuation in the
    throttling rate that separates out the guard nodes can be used to further narrow the
    set"), beside spec 7.4's band procedure.

    The attacker knows every guard's threshold rate over time (what probing reveals: the
    relay table's ``throttle_rate``, absent while a guard throttles nobody) and, by
    flooding the target circuit, the rate the target is throttled at whenever it is
    throttled (the connection table's ``throttle_rate`` at each sample). It keeps a guard
    only if, at every throttled sample after the warm-up, the guard's own rate within
    ``slack_s`` of the sample equals the observed one (within ``rel_tol``). Samples in
    which the target is not throttled tell it nothing here: whether the target should have
    been depends on the ranking of the guard's other connections, which it does not know.
    Targets are those of :func:`attacks` (each client's main guard connection, at least two
    active minutes); a target never throttled leaves every guard in the set (loss 0).

    Rows ``attack2-observed-timing`` give the same attack without a flood, from the
    target's own traffic only (as in :func:`attacks`' ``attack2-observed``): a throttled
    sample shows its rate only if the throttle held the connection back in it
    (``bucket_empty_s`` > 0). Results recorded before that column existed have no such rows.

    Output rows as :func:`attacks`, attacks ``attack2-timing`` and
    ``attack2-observed-timing``, algorithm ``thresh``. ``sets`` as in :func:`attacks`."""
    guards = sorted(relay_bw)
    gi = {g: i for i, g in enumerate(guards)}
    recorded = "bucket_empty_s" in res.connections
    out = []
    for seed, cs in res.connections.groupby("seed", sort=True):
        rs = res.relays[(res.relays["seed"] == seed) & res.relays["relay"].isin(gi)]
        if rs.empty:
            continue
        relay_step = _sample_step(rs["interval_start"].to_numpy(), 1.0)
        conn_step = _sample_step(cs["interval_start"].to_numpy(), 60.0)
        # rate[g, t]: guard g's rate at second t (a row is the value at its interval's end).
        t_rel = np.rint(rs["interval_start"].to_numpy() + relay_step).astype(int)
        nsec = int(max(t_rel.max(), math.ceil(cs["interval_start"].max() + conn_step))) + 2
        rate = np.full((len(guards), nsec), np.nan)
        rate[rs["relay"].map(gi).to_numpy().astype(int), t_rel] = rs["throttle_rate"].to_numpy(dtype=float)
        slack = int(math.ceil(slack_s))
        for client, cls, g, rows in _timing_targets(cs, warmup_s, gi):
            mine = rows[rows["interval_start"] >= warmup_s]
            seen = mine[mine["throttle_rate"].notna()]
            # matches[k, g]: guard g's rate matched the target's at throttled sample k.
            matches = np.ones((len(seen), len(guards)), dtype=bool)
            for k, (t, r) in enumerate(zip(np.rint(seen["interval_start"].to_numpy() + conn_step).astype(int), seen["throttle_rate"].to_numpy(dtype=float))):
                window = rate[:, max(0, t - slack): min(nsec, t + slack + 1)]
                with np.errstate(invalid="ignore"):
                    matches[k] = (np.abs(window - r) <= rel_tol * r).any(axis=1)
            variants = [("attack2-timing", matches)]
            if recorded:
                variants.append(("attack2-observed-timing", matches[seen["bucket_empty_s"].to_numpy() > 0]))
            for attack, m in variants:
                consistent = m.all(axis=0)
                if sets is not None:
                    sets[(seed, client, attack)] = (cls, g, consistent)
                out.append(_set_row(seed, client, cls, attack, "thresh", consistent, g, gi))
    return pd.DataFrame(out)


def medium_load_attacks(runs: dict, relay_bw: dict[str, float], flag_params: dict, warmup_s: float, empty_set: str = "nothing",
                        vanilla_rate: str = "bandwidth") -> pd.DataFrame:
    """Attacks 1 and 2 on the medium-load runs, one per algorithm (``runs``: algorithm ->
    results), every variant: ``anonymity.csv``'s rows. The band procedure for every
    algorithm (:func:`attacks`), flagging's timing (:func:`flag_timing_attack`, whose rows
    stand for both attack 2 variants: it needs no flood, since "this determination must be
    made after the fact to account for the burst bucket of the target circuit, but it can
    still be made precisely", section 5.2), threshold's rate signature
    (:func:`thresh_timing_attack`), and for those two the band and timing combined
    (:func:`combined_attack`). Empty sets count as ``empty_set`` says
    (:func:`empty_set_policy`); vanilla's guards' rate is ``vanilla_rate``'s
    (:data:`VANILLA_RATES`)."""
    check_empty_set(empty_set)  # before the attacks' minutes of work, not after
    check_vanilla_rate(vanilla_rate)
    frames = []
    for alg, res in runs.items():
        sets: dict = {}
        frames.append(attacks(res, relay_bw, alg, warmup_s, sets=sets, vanilla_rate=vanilla_rate))
        if alg == "flag":
            timing = flag_timing_attack(res, relay_bw, flag_params, warmup_s, TIMING_STEP_S, sets=sets)
            frames += [timing, timing.assign(attack="attack2-observed-timing")]
        elif alg == "thresh":
            frames.append(thresh_timing_attack(res, relay_bw, warmup_s, sets=sets))
        else:
            continue
        frames.append(combined_attack(sets, relay_bw, alg))
    return empty_set_policy(pd.concat([f for f in frames if not f.empty], ignore_index=True), empty_set, len(relay_bw))


def attack3_name(alg: str, response_bytes: int) -> str:
    """The runs of attack 3 for `alg` at one response size: ``attack3-ALG`` at the paper's
    beta/2, ``attack3-SIZE-ALG`` (e.g. ``attack3-4MiB-flag``) at any other."""
    if response_bytes == ATTACK3_RESPONSE:
        return f"attack3-{alg}"
    return f"attack3-{size_text(response_bytes).replace(' ', '')}-{alg}"


def attack3(out: Path, args, relays_file: str, chosen: dict, seeds: list[int]) -> pd.DataFrame:
    """Attack 3 (section 5.2), measured: linking two streams of one client through the
    shared burst bucket. The paper gives no simulation; this is ours. Two malicious servers
    each send S bytes, the paper's beta/2 = 1 MiB by default (``--attack3-sizes`` adds
    others); on one client connection that is 2S through one bucket (clients "link-same":
    one response of 2S), on two clients' connections S each ("link-diff"). Then small
    "test" responses go out, and "If the throughput of each circuit when downloading the
    'test' response is consistently throttled, then it is possible that the requests are
    coming from the same client": the attacker sees a test response slowed, which it is
    when the connection's burst bucket has run dry (the paper's Eq. 1: a connection is
    throttled once it has used its burst). Here a test response is throttled if the
    connection's bucket ran empty (``bucket_empty_s`` > 0) in the 5 s interval the response
    ends in or the next, the time the test response goes out. The ``state_`` columns read
    the same intervals for the guard's throttle state instead (a throttle rate set), the
    paper's own reasoning ("This attack is intended to indicate if and when a circuit is
    throttled ... It will therefore not be effective against bit splitting"), which the
    attacker cannot see: a connection throttled just now starts with a full bucket, and
    under static and bit-splitting every connection always has a rate. A response still
    being sent when the run ends is judged on the run's last two intervals. True positive:
    a link-same response followed by throttling. False positive: two link-diff responses at
    the same guard starting within 30 s of each other, both followed by throttling. Medium
    load, every algorithm, every size: one row per (size, algorithm). Its
    ``unfinished_responses`` counts the responses of both kinds, link-same and link-diff,
    still being sent when the run ended.

    Each linking client asks again 120 s after its response ends, so a later response can
    find its connection still throttled, or its bucket still low, from the previous one (the
    paper's attack is one-shot); the rates are over every response.

    Why sizes beyond the paper's: under flagging a connection is throttled once its cell
    EWMA passes the guard's meta-EWMA M, which is about B/N * H / ln 2 bytes' worth of cells
    (spec 4.5's steady state), so 2S links only where 2S is above that and S is not; under
    threshold, where 2S ranks among the loudest fraction T of the guard's connections. On a
    network whose guards' fair share B/N is far above 2 MiB / (H / ln 2), beta/2 throttles
    nobody."""
    sizes = args.attack3_sizes or [ATTACK3_RESPONSE]
    exps = []
    for size in sizes:
        for alg in ALGORITHMS:
            name = attack3_name(alg, size)
            text = config_text(name, LOADS["medium"], mechanism_line(alg, chosen[alg], args.unthrottled), args.duration, args.warmup, relays_file, extra_clients=linking_clients(size), conn_interval="5 s", **client_settings(args))
            exps.append((name, write_config(out, name, text), seeds))
    print(f"attack 3: {len(exps)} configurations x {len(seeds)} seeds", flush=True)
    runs = run_many(exps, out, args.jobs, **reuse_options(args))
    run_end = seconds(args.duration)
    rows = []
    for size in sizes:
        for alg in ALGORITHMS:
            rows.append({"response_size": size_text(size), "algorithm": alg, **_linking_rates(runs[attack3_name(alg, size)], run_end)})
    t = pd.DataFrame(rows)
    t.to_csv(out / "attack3.csv", index=False)
    return t


#: Attack 3's two readings of "the test response is throttled" (:func:`_linking_rates`):
#: the column prefix in ``attack3.csv`` ("" for the attacker's own reading) and what counts.
LINKING_READINGS = {
    "": "held back",  # the bucket ran empty: the test response is slowed (observable)
    "state_": "throttle set",  # the guard has a throttle on the connection (not observable)
}


def _linking_difference_ci95(same_cell: np.ndarray, same_hit: np.ndarray, pair_cell: np.ndarray, pair_hit: np.ndarray,
                             pair_responses: int) -> tuple[float, float]:
    """The 95 % interval of attack 3's TPR - FPR, the responses and pairs clustered by the
    (seed, guard) they met: ``same_cell`` numbers the cell of each same-client response and
    ``same_hit`` says whether its test response was held back; ``pair_cell`` and
    ``pair_hit`` the same for each different-client pair (both of whose responses met one
    guard), and ``pair_responses`` counts the distinct responses the pairs are made of.
    Newcombe's interval with each count divided by its design effect, the pairs' then
    capped at ``pair_responses`` (``stats.clustered_difference_ci95``): pairs that share
    responses are no more independent trials than the responses, and where no pair (or
    every pair) is held back the design effect cannot be estimated and the cap is all
    that counts them as fewer.

    Why cells: whether a test response is held back depends on the guard's state (its B/N,
    its meta-EWMA M, its ranking), which the responses at one guard in one run share, and
    a response stands in as many pairs as it has neighbours within 30 s. Where the held-back
    responses crowd into a few guards, the design effect makes them count as fewer; where
    they do not, or none is held back, the interval is Newcombe's over every response and
    pair, with the pairs capped as above (never narrower than Newcombe's). TPR and FPR are
    taken as independent, though they share guards, and a client's responses at several
    guards as independent of one another.
    (NaN, NaN) without a response or a pair."""
    if len(same_hit) == 0 or len(pair_hit) == 0:
        return math.nan, math.nan
    cells = int(max(same_cell.max(), pair_cell.max())) + 1

    def per_cell(cell: np.ndarray, hit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.bincount(cell, weights=hit.astype(float), minlength=cells), np.bincount(cell, minlength=cells).astype(float)

    return clustered_difference_ci95(*per_cell(same_cell, same_hit), *per_cell(pair_cell, pair_hit), max_effective=(None, pair_responses))


def _linking_rates(res, run_end: float) -> dict:
    """Attack 3's true and false positive rates on one run (see :func:`attack3`), under both
    readings of :data:`LINKING_READINGS`, with the counts they rest on. A response's test
    response goes out in the 5 s interval the response ends in or the next; for a response
    still being sent when the run ends, the run's last two intervals. A response with no
    such pair of intervals inside the run (one ending in the run's last 5 s, or one cut
    short that started in its last 10 s) cannot be tested and is left out of the rates
    (``unfinished_responses`` still counts every one cut short). ``difference_ci95_low``
    and ``_high`` bound TPR - FPR (:func:`_linking_difference_ci95`: clustered by guard)."""
    c = res.connections
    d = res.downloads
    d = d[d["class"].isin(["link-same", "link-diff"])].copy()
    unfinished = int(d["ttlb"].isna().sum())
    d["guard"] = d["path"].str.split(",").str[0]
    d["end"] = d["start"] + d["ttlb"]
    last = int(run_end // 5) - 1  # the run's last 5 s interval
    # The 5 s interval in which each response's test response would start.
    d["slot"] = [last - 1 if pd.isna(e) else int(e // 5) for e in d["end"]]
    d = d[(d["slot"] < last) & (d["ttlb"].notna() | (d["start"] < (last - 1) * 5))]

    def slots(rows: pd.DataFrame) -> pd.Series:
        return rows.groupby(["seed", "relay", "client"])["interval_start"].apply(lambda x: set((x // 5).astype(int)))

    readings = {"state_": slots(c[c["throttle_rate"].notna()])}
    if "bucket_empty_s" in c:  # runs from before the column have the state reading only
        readings[""] = slots(c[c["bucket_empty_s"] > 0])
    d = d.reset_index(drop=True)
    same = d.index[d["class"] == "link-same"]
    diff = d[d["class"] == "link-diff"].sort_values(["seed", "guard", "start"])
    # The different-client pairs (row labels of d): at one guard, starting within 30 s.
    pairs = []
    for _, g in diff.groupby(["seed", "guard"]):
        st, cl, rows = g["start"].to_numpy(), g["client"].to_numpy(), g.index.to_numpy()
        for i in range(len(g)):
            for j in range(i + 1, len(g)):
                if st[j] - st[i] > 30:
                    break
                if cl[i] != cl[j]:
                    pairs.append((rows[i], rows[j]))
    out = {"same_client_responses": len(same), "unfinished_responses": unfinished, "different_client_pairs": len(pairs)}
    # The (seed, guard) cell of every response, one numbering for both kinds; a pair's two
    # responses share theirs.
    cell = pd.factorize(pd.MultiIndex.from_frame(d[["seed", "guard"]]))[0] if len(d) else np.empty(0, dtype=int)
    pair_rows = np.array(pairs, dtype=int).reshape(-1, 2)
    for prefix in LINKING_READINGS:
        held = readings.get(prefix)
        if held is None:
            out.update({f"{prefix}{k}": math.nan for k in ("true_positive_rate", "false_positive_rate", "single_response_throttled_rate",
                                                          "difference_ci95_low", "difference_ci95_high")})
            continue
        th = np.array([bool(held.get((r.seed, r.guard, r.client), set()) & {r.slot, r.slot + 1}) for r in d.itertuples()], dtype=bool)
        pair_hit = th[pair_rows[:, 0]] & th[pair_rows[:, 1]]
        out[f"{prefix}true_positive_rate"] = float(th[same].mean()) if len(same) else math.nan
        out[f"{prefix}false_positive_rate"] = float(pair_hit.mean()) if pairs else math.nan
        out[f"{prefix}single_response_throttled_rate"] = float(th[diff.index].mean()) if len(diff) else math.nan
        out[f"{prefix}difference_ci95_low"], out[f"{prefix}difference_ci95_high"] = _linking_difference_ci95(
            cell[same], th[same], cell[pair_rows[:, 0]], pair_hit, len(np.unique(pair_rows)))
    return out


def probe(out: Path, args, relays_file: str) -> dict:
    """Figure 4a: probing a guard with static throttling at 5 KiB/s and a 2 MiB burst. One
    client downloads 10 MiB through the guard over fast middle and exit relays."""
    text = f"""# Generated by `onionlab reproduce throttling`: figure 4a probe.
[experiment]
name = "probe"
duration = "{'5 min' if args.quick else '20 min'}"
connection_metrics_interval = "1 s"

[tor]
refill_interval = "1 s"

[network]
latency = {{ constant = "40 ms" }}

[[relays]]
name = "target-guard"
bandwidth = "1 MiB/s"
flags = ["Guard", "Fast", "Stable"]
throttling = {{ kind = "static", rate = "5 KiB/s", burst = "2 MiB" }}

[[relays]]
name = "fast-middle"
bandwidth = "50 MiB/s"
flags = ["Fast", "Stable"]

[[relays]]
name = "fast-exit"
bandwidth = "50 MiB/s"
flags = ["Exit", "Fast", "Stable"]

[[clients]]
name = "probe"
workload = "probe"
count = 1

[servers]
count = 1

[workloads.probe]
type = "bulk"
size = "10 MiB"
"""
    res = run_many([("probe", write_config(out, "probe", text), [1])], out, 1, **reuse_options(args))["probe"]
    c = res.connections.sort_values("interval_start")
    lam = c["bytes_written"].to_numpy(dtype=float)  # bytes in each 1 s interval
    t = c["interval_start"].to_numpy() + 1.0
    cum = np.cumsum(lam)
    beta = 2 * 2**20
    i1 = int(np.searchsorted(cum, beta))
    alpha = np.full_like(lam, np.nan)
    for i in range(i1 + 1, len(lam)):
        alpha[i] = (cum[i] - cum[i1]) / (t[i] - t[i1])
    est = float(alpha[-1]) if len(alpha) and not np.isnan(alpha[-1]) else math.nan
    figure4a(t, lam, alpha, out / "figure4a.png")
    return {"burst_done_s": float(t[i1]) if i1 < len(t) else math.nan, "estimated_rate_KiBps": est / 1024, "true_rate_KiBps": 5.0}
