"""A finished reproduction's runs pooled with more seeds of its own configs, for verdicts
that its five seeds leave unresolved ("(n.s.)" in the findings matrix).

The extra seeds are run from the output directory's own configs, one results directory
per configuration, named as the reproduction names its runs (``LOAD-ALG``), under one or
more EXTRA directories:

    onionlab run OUT/configs/light-flag.toml --seed 6 7 8 9 10 -o EXTRA/light-flag

An EXTRA directory may hold some loads and not others, but a load it holds it holds for
all five algorithms, so that every seed compares the algorithms on the same network.
After pooling, every configuration pooled has the same seeds.

**Owns:** finding, checking and joining those runs, and judging the findings on them.
**Must not touch:** the numbers or the verdicts themselves (``metrics``, ``anonymity``,
``findings`` compute them); the reproduction's own output files (it writes nothing).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from onionlab.reproduce.throttling.anonymity import medium_load_attacks
from onionlab.reproduce.throttling.configs import ALGORITHMS, LOADS, attack_pool, seconds
from onionlab.reproduce.throttling.findings import attack_tables, findings, main_run_dir, output_summary, per_seed_numbers


def _sources(out: Path, extras: list[Path], loads: tuple[str, ...]) -> dict[tuple[str, str], list[Path]]:
    """The results directories of each (load, algorithm): ``out``'s own run, then each
    extra's. Checks every directory before any is read."""
    sources = {(load, alg): [main_run_dir(out, load, alg)] for load in loads for alg in ALGORITHMS}
    for extra in map(Path, extras):
        if not extra.is_dir():
            raise FileNotFoundError(f"{extra}: not found")
        held = 0
        for load in loads:
            have = [alg for alg in ALGORITHMS if (extra / f"{load}-{alg}").is_dir()]
            if not have:
                continue
            if len(have) < len(ALGORITHMS):
                missing = next(alg for alg in ALGORITHMS if alg not in have)
                raise FileNotFoundError(f"{extra / f'{load}-{missing}'}: not found ({extra} holds {load}-load runs of {', '.join(have)}; a load needs all five algorithms)")
            for alg in ALGORITHMS:
                sources[(load, alg)].append(extra / f"{load}-{alg}")
            held += 1
        if not held:
            raise FileNotFoundError(f"{extra}: holds no runs to pool (expected {' or '.join(f'{load}-ALG' for load in loads)} directories)")
    return sources


def _pooled_config(out: Path, load: str, alg: str, dirs: list[Path]) -> tuple[SimpleNamespace, list[int], list[dict]]:
    """One configuration's runs joined over ``dirs`` (``out``'s first): (the ``relays``,
    ``connections`` and ``downloads`` tables of every seed; its seeds; the config's
    ``[[relays]]`` tables). Raises ValueError as :func:`pooled_runs` says."""
    from onionlab import config as config_mod
    from onionlab import results as results_mod

    parts, body, owner, relays = [], None, {}, []
    for d in dirs:
        res = results_mod.load(d)
        mine = config_mod.with_seeds(config_mod.without_name(res.config), [])
        if body is None:
            body = mine
            relays = config_mod.parse(res.config)["relays"]
        elif mine != body:
            raise ValueError(f"{d}: its config differs from {dirs[0]}'s beyond the seeds; run it from {out / 'configs' / f'{load}-{alg}.toml'}")
        for seed in sorted(int(x) for x in res.connections["seed"].unique()):
            if seed in owner:
                raise ValueError(f"{d}: seed {seed} is also in {owner[seed]}; each seed may be pooled once")
            owner[seed] = d
        parts.append(res)
    runs = SimpleNamespace(**{table: pd.concat([getattr(p, table) for p in parts], ignore_index=True) for table in ("relays", "connections", "downloads")})
    return runs, sorted(owner), relays


def _iter_pooled(out: Path, extras: list[Path], loads: tuple[str, ...]):
    """Each configuration of ``loads`` pooled (:func:`_pooled_config`), one at a time, as
    ((load, algorithm), runs, the config's ``[[relays]]`` tables): a caller that keeps
    only what it needs of each holds one configuration's tables at a time. Raises as
    :func:`pooled_runs`."""
    sources = _sources(out, extras, loads)
    first = None
    for (load, alg), dirs in sources.items():
        runs, seeds, relays = _pooled_config(out, load, alg, dirs)
        if first is None:
            first = (f"{load}-{alg}", seeds)
        elif seeds != first[1]:
            raise ValueError(f"{load}-{alg}: pooled seeds {_seed_text(seeds)}, but {first[0]} has {_seed_text(first[1])}; every configuration needs the same seeds")
        yield (load, alg), runs, relays


def pooled_runs(out: Path, extras: list[Path], loads: tuple[str, ...] = tuple(LOADS)) -> tuple[dict, list[dict], dict]:
    """The runs of ``out`` (an ``onionlab reproduce throttling`` output directory) at
    ``loads``, each joined with the same configuration's runs in ``extras``: (runs by
    (load, algorithm), each with the ``relays``, ``connections`` and ``downloads`` tables of
    every seed; the config's ``[[relays]]`` tables; ``out``'s summary).

    Raises FileNotFoundError naming a missing directory; ValueError naming the results
    directory whose config differs from ``out``'s beyond its seeds (pooling two
    experiments), whose seed another directory already has (counting a run twice), or
    the configuration that ends with other seeds than the first (comparing algorithms on
    different networks)."""
    out = Path(out)
    summary = output_summary(out)
    runs, relays = {}, []
    for key, res, relays in _iter_pooled(out, extras, loads):
        runs[key] = res
    return runs, relays, summary


def _seed_text(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds))


def summary_attack_pool(summary: dict) -> str:
    """The attack pool (``--attack-pool``) an output directory's attacks used: its
    summary's, or "relays" for a directory written before the option existed (every relay
    was a candidate then)."""
    return summary.get("attack_pool", "relays")


def summary_empty_set(summary: dict) -> str:
    """How an output directory's attacks counted empty anonymity sets (``--empty-set``): its
    summary's, or "nothing" (loss 0) for a directory written before the option existed."""
    return summary.get("empty_set", "nothing")


def summary_vanilla_rate(summary: dict) -> str:
    """What an output directory's attacks read as a guard's rate under vanilla
    (``--vanilla-rate``): its summary's, or "bandwidth" for a directory written before the
    option existed."""
    return summary.get("vanilla_rate", "bandwidth")


def _directory_attacks(medium: dict, relays: list[dict], summary: dict, pool: str | None, empty_set: str | None) -> pd.DataFrame:
    """Attacks 1 and 2 on ``medium`` (algorithm -> medium-load runs) as the directory of
    ``summary`` analysed its own: its warm-up, flagging's parameters and vanilla's rate
    reading; candidates from ``pool`` and empty sets counted as ``empty_set`` says, or by
    default as that directory did."""
    return medium_load_attacks(medium, attack_pool(relays, pool or summary_attack_pool(summary)), summary["chosen"]["flag"], seconds(summary["warmup"]),
                               empty_set or summary_empty_set(summary), summary_vanilla_rate(summary))


def pooled_anonymity(out: Path, extras: list[Path], pool: str | None = None, empty_set: str | None = None) -> pd.DataFrame:
    """Attacks 1 and 2 (``anonymity.csv``'s rows) over the medium-load runs of ``out``
    pooled with those of ``extras`` (:func:`pooled_runs`), over the candidate guards of
    ``pool`` (``configs.attack_pool``; default: the one ``out`` used), empty sets counted
    as ``empty_set`` says (``anonymity.EMPTY_SETS``; default: as ``out`` counted them),
    vanilla's guards' rate read as ``out`` read it (``--vanilla-rate``).
    The anonymity analysis reads only the medium-load runs, a third of the main runs."""
    runs, relays, summary = pooled_runs(out, extras, ("medium",))
    return _directory_attacks({alg: runs[("medium", alg)] for alg in ALGORITHMS}, relays, summary, pool, empty_set)


def pooled_findings(out: Path, extras: list[Path], pool: str | None = None, empty_set: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every finding (``findings.csv``'s table) judged on ``out``'s main runs at all three
    loads pooled with ``extras`` (:func:`pooled_runs`): (findings, the per-seed numbers
    they were judged on, the attack 1 and 2 rows). Attacks 3 and 4 are judged pooled only
    from ``out``'s own tables, as the reproduction judges them: their runs are their own.
    ``pool`` and ``empty_set`` as in :func:`pooled_anonymity`."""
    out = Path(out)
    summary = output_summary(out)
    warmup_s = seconds(summary["warmup"])
    # One configuration's tables at a time (15 seeds of all fifteen held at once take
    # about 11 GB): each is reduced to its numbers, and the medium-load runs kept for the
    # attacks.
    numbers, medium, relays = [], {}, []
    for (load, alg), res, relays in _iter_pooled(out, extras, tuple(LOADS)):
        numbers.append(per_seed_numbers({(load, alg): res}, warmup_s))
        if load == "medium":
            medium[alg] = SimpleNamespace(relays=res.relays, connections=res.connections)
    numbers = pd.concat(numbers, ignore_index=True)
    anon = _directory_attacks(medium, relays, summary, pool, empty_set)
    return findings(numbers, anon, *attack_tables(out)), numbers, anon
