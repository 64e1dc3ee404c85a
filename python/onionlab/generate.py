"""Networks from real Tor data: consensus parsing and scaled network generation.

**Owns:** reading v3 network-status consensuses (with stem) and the 2021 capacity snapshot,
sampling a network at a given scale the way tornettools' ``generate`` step does (relays
stratified by position class and bandwidth; clients and servers in proportion), the
synthetic geography behind the latency matrix, the mapping of consensus parameters onto
onionlab's config, and writing the network directory (``network.toml``, ``latency.csv``, the
Markov models, ``experiment.toml``, ``generate.json``). **Must not touch:** the simulator;
the written files are ordinary config that ``onionlab check``/``run`` validate.

Method and assumptions: docs/generate.md.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import gzip
import ipaddress
import math
import re
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from onionlab.argtypes import at_least, check_warmup, check_whole_steps, duration, positive_duration

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
DEFAULT_CONSENSUS = REPO_DATA / "consensus" / "cached-consensus-2022-11-19-1000.xz"
DEFAULT_SNAPSHOT = REPO_DATA / "consensus" / "tor-consensus-with-observed-weights-2021-04-30.json"
TRAFFIC = REPO_DATA / "traffic"

#: Tor Metrics' estimate of daily directly connecting users in November 2022 (about two
#: million; metrics.torproject.org "userstats-relay-country"). Not shipped data: an
#: assumption, override with ``--users``. See docs/generate.md.
DEFAULT_TOTAL_USERS = 2_000_000
#: Servers per user. tornettools runs one tgen client process per 100 users
#: (process_scale 0.01) and 0.1 servers per tgen client (server_scale 0.1): 0.001.
DEFAULT_SERVER_SCALE = 0.001
#: onionperf-like clients per unit of network scale (tornettools measures with its own perf clients).
PERF_CLIENTS_AT_FULL_SCALE = 100

#: Synthetic regions: (name, share of relays, share of clients). Rough shares from Tor Metrics'
#: relays-by-country and users-by-country pages, rounded; not measured data (docs/generate.md).
REGIONS = [
    ("eu-west", 0.55, 0.30),
    ("eu-east", 0.10, 0.20),
    ("na-east", 0.12, 0.15),
    ("na-west", 0.08, 0.10),
    ("asia", 0.08, 0.15),
    ("south-oceania", 0.07, 0.10),
]
#: One-way latency between regions, ms (symmetric, synthetic).
REGION_LATENCY_MS = [
    [5, 20, 45, 75, 110, 100],
    [20, 8, 60, 90, 100, 120],
    [45, 60, 8, 35, 110, 70],
    [75, 90, 35, 8, 80, 80],
    [110, 100, 110, 80, 20, 130],
    [100, 120, 70, 80, 130, 30],
]
#: Locations of the latency matrix: each region repeated in proportion to its client share,
#: so that ``placement = "round_robin"`` spreads clients and servers like users.
LOCATION_SLOTS = 20


class GenerateError(ValueError):
    """Bad input data or arguments; the message names the file or option."""


@dataclass
class Relay:
    nickname: str
    fingerprint: str
    flags: frozenset
    #: ``w Bandwidth=``: KB/s (self-advertised before bwauths, bwauth-measured weight later).
    bandwidth: int
    unmeasured: bool = False
    address: str = ""

    @property
    def position(self) -> str:
        g = "Guard" in self.flags
        e = "Exit" in self.flags and "BadExit" not in self.flags
        return {(True, True): "exitguard", (False, True): "exit", (True, False): "guard", (False, False): "middle"}[(g, e)]


@dataclass
class Consensus:
    path: str
    valid_after: str
    method: int | None
    relays: list
    bandwidth_weights: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    known_flags: list = field(default_factory=list)
    #: The recommended client versions (``client-versions``), as (major, minor, micro, patch).
    client_versions: list = field(default_factory=list)
    #: Problems a lenient parse tolerated.
    warnings: list = field(default_factory=list)


def _open_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    if path.suffix == ".gz":
        return gzip.decompress(data)
    return data


def read_consensus(path, member: str | None = None) -> Consensus:
    """Reads a v3 network-status consensus (ns or microdesc flavour, any consensus method)
    with stem. ``path`` may be ``.xz``/``.gz`` compressed or a tar (then ``member`` names the
    document inside it). Raises :class:`GenerateError` naming the file on failure."""
    from stem.descriptor import DocumentHandler, parse_file

    path = Path(path)
    name = f"{path}:{member}" if member else str(path)
    try:
        if member is not None or path.suffix == ".tar":
            with tarfile.open(path) as tar:
                names = [m.name for m in tar.getmembers() if m.isfile()]
                if member is None:
                    raise GenerateError(f"{path}: a tar holds several documents; name one of {names}")
                try:
                    raw = tar.extractfile(member).read()
                except KeyError:
                    raise GenerateError(f"{path}: no member {member!r}; members: {names}") from None
        else:
            raw = _open_bytes(path)
    except OSError as e:
        raise GenerateError(f"{name}: cannot read: {e}") from None
    text = raw.lstrip()
    if text.startswith(b"@type"):
        text = text.split(b"\n", 1)[1]
    desc = "network-status-microdesc-consensus-3 1.0" if b"\nnetwork-status-version 3 microdesc" in b"\n" + text[:200] else "network-status-consensus-3 1.0"
    if not text.startswith(b"network-status-version 3"):
        raise GenerateError(f"{name}: not a v3 network-status consensus (it does not start with 'network-status-version 3')")
    warnings = []
    try:
        doc = next(parse_file(io.BytesIO(text), desc, document_handler=DocumentHandler.DOCUMENT, validate=True))
    except (ValueError, StopIteration) as strict:
        # Lenient second pass (e.g. test networks leave client-versions empty); the document
        # must still have its header and relays.
        try:
            doc = next(parse_file(io.BytesIO(text), desc, document_handler=DocumentHandler.DOCUMENT, validate=False))
        except (ValueError, StopIteration):
            doc = None
        if doc is None or doc.valid_after is None or not doc.routers:
            raise GenerateError(f"{name}: cannot parse the consensus: {strict}") from None
        warnings.append(f"parsed leniently: {strict}")
    relays = [
        Relay(r.nickname, r.fingerprint, frozenset(r.flags), int(r.bandwidth or 0), bool(r.is_unmeasured), r.address or "")
        for r in doc.routers.values()
    ]
    relays.sort(key=lambda r: r.fingerprint)
    return Consensus(
        path=name,
        valid_after=str(doc.valid_after),
        method=doc.consensus_method,
        relays=relays,
        bandwidth_weights=dict(doc.bandwidth_weights or {}),
        params=dict(doc.params or {}),
        known_flags=list(doc.known_flags or []),
        client_versions=sorted((v.major, v.minor, v.micro, v.patch or 0) for v in (doc.client_versions or [])),
        warnings=warnings,
    )


def read_capacity_snapshot(path) -> Consensus:
    """The 2021 capacity snapshot (JSON ``{"guards": [...], "middles": [...], "exits": [...]}``,
    bytes/s) as a flag-less consensus: guards get Guard, exits Exit, all Fast/Running/Valid.
    Bandwidths become KiB/s. There are no weights and no params."""
    path = Path(path)
    try:
        d = json.loads(_open_bytes(path))
    except (OSError, ValueError) as e:
        raise GenerateError(f"{path}: cannot read the capacity snapshot: {e}") from None
    relays = []
    base = {"Fast", "Running", "Valid"}
    for key, flags in (("guards", {"Guard"}), ("middles", set()), ("exits", {"Exit"})):
        vals = d.get(key) if isinstance(d, dict) else None
        if not isinstance(vals, list) or not all(isinstance(v, (int, float)) and v >= 0 for v in vals):
            raise GenerateError(f"{path}: `{key}` must be a list of non-negative numbers (bytes/s)")
        for i, v in enumerate(vals):
            relays.append(Relay(f"{key[:-1]}{i}", hashlib.sha1(f"{key}{i}".encode()).hexdigest().upper(), frozenset(base | flags), max(1, round(v / 1024))))
    return Consensus(path=str(path), valid_after="2021-04-30 (snapshot)", method=None, relays=relays)


# ---------------------------------------------------------------------------------------
# Sampling


def apportion(total: int, sizes: dict) -> dict:
    """Largest-remainder apportionment of ``total`` over classes of the given sizes."""
    n = sum(sizes.values())
    quotas = {k: total * v / n for k, v in sizes.items()}
    counts = {k: math.floor(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: (-(quotas[k] - counts[k]), k))[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


def sample_relays(relays: list, scale: float, rng: np.random.Generator) -> list:
    """Relays for a network of ``scale`` times the size, like tornettools: per position class
    (guard, exit, exitguard, middle) a share proportional to the class size, taken by
    stratified sampling over the class sorted by bandwidth (class split into equal bins, one
    relay drawn uniformly from each). At scale 1 every relay is taken."""
    if not 0 < scale <= 1:
        raise GenerateError(f"--network-scale: must be in (0, 1], got {scale}")
    classes: dict = {}
    for r in relays:
        classes.setdefault(r.position, []).append(r)
    n = max(2, round(scale * len(relays)))
    counts = apportion(n, {k: len(v) for k, v in classes.items()})
    # Circuits need an entry and an exit: keep at least one of each when the data has them.
    for need in (("guard", "exitguard"), ("exit", "exitguard")):
        if sum(counts.get(k, 0) for k in need) == 0:
            k = max((k for k in need if k in classes), key=lambda k: len(classes[k]), default=None)
            if k is not None:
                counts[k] = 1
    chosen = []
    for k in sorted(classes):
        members = sorted(classes[k], key=lambda r: (r.bandwidth, r.fingerprint))
        m, size = counts.get(k, 0), len(members)
        for i in range(m):
            lo, hi = (i * size) // m, ((i + 1) * size) // m
            chosen.append(members[lo + int(rng.integers(hi - lo))])
    chosen.sort(key=lambda r: (-r.bandwidth, r.fingerprint))
    return chosen


def region_of(fingerprint: str) -> int:
    """A relay's synthetic region: a hash of its fingerprint against the regions' relay
    shares, so a relay keeps its region at every scale and seed."""
    u = int(hashlib.sha256(fingerprint.encode()).hexdigest()[:13], 16) / 16**13
    acc = 0.0
    for i, (_, share, _) in enumerate(REGIONS):
        acc += share
        if u < acc:
            return i
    return len(REGIONS) - 1


def location_slots() -> list:
    """Region of each latency-matrix location (regions repeated by client share)."""
    counts = apportion(LOCATION_SLOTS, {i: r[2] for i, r in enumerate(REGIONS)})
    return [i for i in range(len(REGIONS)) for _ in range(counts[i])]


def latency_matrix(slots: list) -> list:
    return [[REGION_LATENCY_MS[a][b] for b in slots] for a in slots]


# ---------------------------------------------------------------------------------------
# Consensus parameters


#: Consensus parameters of proposal 324's Vegas at exits -> `tor.congestion_control` keys.
VEGAS_PARAMS = {
    "cc_sendme_inc": "sendme_inc",
    "cc_cwnd_init": "cwnd_init",
    "cc_cwnd_min": "cwnd_min",
    "cc_cwnd_inc": "cwnd_inc",
    "cc_cwnd_inc_rate": "cwnd_inc_rate",
    "cc_cwnd_inc_pct_ss": "cwnd_inc_pct_ss",
    "cc_vegas_alpha_exit": "alpha",
    "cc_vegas_beta_exit": "beta",
    "cc_vegas_gamma_exit": "gamma",
    "cc_vegas_delta_exit": "delta",
    "cc_sscap_exit": "ss_cap",
    "cc_ss_max": "ss_max",
}


def _map_congestion_control(params: dict, tor: dict, notes: dict) -> None:
    """`cc_alg` 2 (Vegas) becomes `tor.congestion_control`, with the consensus's exit
    parameters; 0 keeps tor's fixed SENDME windows (onionlab's default)."""
    alg = params.get("cc_alg", 0)
    vegas = {}
    for k, v in sorted(params.items()):
        if not k.startswith("cc_") or k == "cc_alg":
            continue
        if alg != 2:
            notes[k] = f"not applied: cc_alg is {alg}, not Vegas (2)"
        elif k in VEGAS_PARAMS:
            vegas[VEGAS_PARAMS[k]] = v
            notes[k] = f"tor.congestion_control.{VEGAS_PARAMS[k]}"
        elif k.endswith("_onion") or k.endswith("_sbws"):
            notes[k] = "not modelled: onion-service and bandwidth-scanner circuits"
        else:
            notes[k] = "not modelled: onionlab keeps this Vegas parameter at tor's code default"
    if "cc_alg" not in params:
        return
    if alg == 2:
        table = ", ".join(f"{k} = {v}" for k, v in vegas.items())
        tor["congestion_control"] = f'{{ kind = "vegas"{", " if table else ""}{table} }}'
        notes["cc_alg"] = "tor.congestion_control: vegas (proposal 324)"
    elif alg == 0:
        notes["cc_alg"] = "tor.congestion_control: fixed-window (tor's SENDME windows, onionlab's default)"
    else:
        notes["cc_alg"] = f"unsupported: cc_alg {alg}; onionlab has fixed windows (0) and Vegas (2)"


# Tor's own behaviour of an era, which no consensus param carries: `[tor]` settings per
# profile, each with where it comes from. Consensus params (map_params) override them.
# Build-time learning is not in them: a live network's clients keep their learned build
# times in their state file, so they build no test circuits (CBT_TEST_CIRCUITS says how to
# model fresh clients, as simulators start them).
# Tor 0.4.8's idle timeout of channels with a client end (CONNTIMEOUT_CLIENTS_BASE, plus
# up to half of it); no consensus param changes it.
CLIENT_IDLE_RANGE = '["180 s", "270 s"]'
TOR_PROFILES = {
    "0.2.2": {
        "refill_interval": ('"1 s"', "tokens once a second (TokenBucketRefillInterval came in 0.2.3.5-alpha)"),
        "refill_phase": ('"random"', "each relay's once-a-second timer (second_elapsed_callback) runs from its own start"),
        "num_entry_guards": ("3", "NumEntryGuards 3"),
        "path_order": ('"exit-first"', "the exit first, then a live entry guard outside its family and /16 (choose_random_entry)"),
        "num_primary_guards": ("3", "choose_random_entry looks among all NumEntryGuards (3) guards"),
        "distinct_guard_subnets": ("true", "choose_good_entry_server keeps a new guard out of the current guards' /16s"),
        "idle_channel_timeout": ('"180 s"', "IDLE_OR_CONN_TIMEOUT"),
        "predicted_circuits": ("true", "circuit_predict_and_launch_new"),
        "cellq_high": ("256", "CELL_QUEUE_HIGHWATER_SIZE"),
        "cellq_low": ("64", "CELL_QUEUE_LOWWATER_SIZE"),
        "optimistic_data": ("false", "the client sends a stream's request once CONNECTED arrives (optimistic data came in 0.2.3.3-alpha)"),
    },
    "0.4.8": {
        "refill_interval": ('"100 ms"', "TokenBucketRefillInterval"),
        "refill_phase": ('"random"', "each relay's refill timer runs from its own start"),
        "num_entry_guards": ("1", "guard-n-primary-guards-to-use's default"),
        "path_order": ('"exit-first"', "the exit first, then a primary guard that obeys it (select_primary_guard_for_circuit)"),
        "num_primary_guards": ("3", "guard-n-primary-guards's default"),
        "distinct_guard_subnets": ("false", "guards are sampled by weight with no /16 rule (select_and_add_guard_item_for_sample)"),
        "idle_channel_timeout": (
            f'{{ client = {CLIENT_IDLE_RANGE}, relay = ["45 min", "75 min"] }}',
            "channelpadding_get_channel_idle_timeout: 180-270 s with a client, 3/4 to 5/4 of nf_conntimeout_relays (3600 s) between relays",
        ),
        "predicted_circuits": ("true", "circuit_predict_and_launch_new"),
        "cellq_high": ("256", "cellq_high"),
        "cellq_low": ("10", "cellq_low"),
    },
}
TOR_VERSION_CHOICES = ("auto", *TOR_PROFILES, "none")
#: `tor.cbt_learning` of each profile's fresh clients (an experiment's choice, not written).
CBT_TEST_CIRCUITS = {"0.2.2": '{ test_frequency = "60 s", max_clean = 12 }', "0.4.8": '{ test_frequency = "10 s", max_clean = 10 }'}


def tor_profile_for(cons: Consensus) -> tuple:
    """(profile or None, why): the tor behaviour `--tor-version auto` picks for a consensus,
    from its newest recommended client version: tor <= 0.2.2 gets "0.2.2" (the tor of the
    2010-2012 papers), tor >= 0.4.7 gets "0.4.8" (Vegas-era tor; 0.4.7 and 0.4.8 share these
    behaviours). Other series get no profile (onionlab's defaults), as does a consensus
    without client-versions; the 2021 capacity snapshot gets "0.4.8"."""
    if cons.method is None:
        return "0.4.8", "the capacity snapshot is of 2021"
    if not cons.client_versions:
        return None, "the consensus recommends no client versions"
    newest = cons.client_versions[-1]
    name = ".".join(str(x) for x in newest)
    if newest[:3] <= (0, 2, 2):
        return "0.2.2", f"newest recommended client version {name}"
    if newest[:3] >= (0, 4, 7):
        return "0.4.8", f"newest recommended client version {name}"
    return None, f"newest recommended client version {name}: no profile for its series (choose one with --tor-version)"


def tor_behaviour(profile: str | None, params: dict) -> tuple:
    """([tor] settings, their sources, param notes) of a tor version profile, with the
    consensus params that tune it (`cellq_high`, `cellq_low`, `nf_conntimeout_relays`)
    applied. The notes say where each of those and of the build-time learning params
    (`cbttestfreq`, `cbtmaxopencircs`) went, or why not."""
    tor: dict = {}
    sources: dict = {}
    notes: dict = {}
    if profile is not None:
        if profile not in TOR_PROFILES:
            raise GenerateError(f"--tor-version: unknown profile {profile!r}; one of {', '.join(TOR_VERSION_CHOICES)}")
        for k, (v, why) in TOR_PROFILES[profile].items():
            tor[k] = v
            sources[k] = f"tor {profile}: {why}"
    for k, key in (("cbttestfreq", "test_frequency"), ("cbtmaxopencircs", "max_clean")):
        if k in params:
            notes[k] = (
                "not applied: a live network's clients have learned their build times and build no test circuits; "
                f"for fresh clients an experiment sets tor.cbt_learning (this param is its {key})"
            )
    if "nf_conntimeout_relays" in params:
        v = params["nf_conntimeout_relays"]
        if profile != "0.4.8":
            notes["nf_conntimeout_relays"] = "not applied: relay channels' idle timeout is tor 0.4.8's (--tor-version)"
        elif not 60 <= v <= 604800:
            notes["nf_conntimeout_relays"] = f"ignored: {v} is outside tor's range 60..604800"
        else:
            tor["idle_channel_timeout"] = f'{{ client = {CLIENT_IDLE_RANGE}, relay = ["{3 * v // 4} s", "{5 * v // 4} s"] }}'
            notes["nf_conntimeout_relays"] = "tor.idle_channel_timeout.relay: 3/4 to 5/4 of it"
    if "cellq_high" in params or "cellq_low" in params:
        if "cellq_high" not in tor:
            for k in ("cellq_high", "cellq_low"):
                if k in params:
                    notes[k] = "not applied: no edge blocking without a tor version profile"
        else:
            high, low = params.get("cellq_high", int(tor["cellq_high"])), params.get("cellq_low", int(tor["cellq_low"]))
            ok = 0 < high and 0 <= low < high
            for k in ("cellq_high", "cellq_low"):
                if k in params:
                    notes[k] = f"tor.{k}" if ok else f"ignored: cellq_low ({low}) must be below cellq_high ({high})"
            if ok:
                tor["cellq_high"], tor["cellq_low"] = str(high), str(low)
    return tor, sources, notes


def _ewma_halflife_ms(params: dict, profile: str | None) -> int | None:
    """The circuit EWMA half-life (ms) tor runs under `params`, or None where the param
    disables EWMA. Tor up to 0.2.x (and onionlab's profile-less reading) disables it at a
    half-life <= 0; tor 0.4.8 cannot be disabled: ``get_circuit_priority_halflife`` clamps
    the consensus value to CMUX_PRIORITY_HALFLIFE_MSEC_MIN, 1 ms (default 30000 ms)."""
    v = params.get("CircuitPriorityHalflifeMsec", 30000)
    if profile == "0.4.8":
        return max(v, 1)
    return v if v > 0 else None


def _ewma_tick_s(params: dict, profile: str | None) -> int:
    """The EWMA tick (s): CircuitPriorityTickSecs clamped to tor's 1..600, default 10;
    tor 0.2.2 had no such param (EWMA_TICK_LEN 10)."""
    if profile == "0.2.2" or "CircuitPriorityTickSecs" not in params:
        return 10
    return min(max(params["CircuitPriorityTickSecs"], 1), 600)


def map_params(params: dict, profile: str | None = None) -> tuple:
    """(relay defaults, [tor] defaults, notes): consensus params onionlab models under the
    tor version `profile` (None: no profile), and a note for every param, saying where it
    went or that onionlab does not model it."""
    relay: dict = {}
    tor: dict = {}
    notes: dict = {}
    halflife, tick = _ewma_halflife_ms(params, profile), _ewma_tick_s(params, profile)
    for k, v in sorted(params.items()):
        if k == "CircuitPriorityHalflifeMsec":
            if halflife is not None:
                relay["scheduler"] = f'{{ kind = "ewma", halflife = "{halflife} ms", tick = "{tick} s" }}'
                clamped = f" ({v} clamped to tor 0.4.8's minimum)" if halflife != v else ""
                notes[k] = f"mechanisms.scheduler: ewma, halflife {halflife} ms{clamped} (tick {tick} s, tor's)"
            else:
                relay["scheduler"] = '"round-robin"'
                notes[k] = f"{v} disables EWMA in tor 0.2.x: mechanisms.scheduler round-robin"
        elif k == "CircuitPriorityTickSecs":
            notes[k] = "not in tor 0.2.2 (tick 10 s)" if profile == "0.2.2" else f"mechanisms.scheduler's tick: {tick} s"
        elif k in ("perconnbwrate", "perconnbwburst"):
            rate, burst = params.get("perconnbwrate"), params.get("perconnbwburst")
            if rate and burst and rate > 0 and burst > 0:
                relay["perconn"] = f'{{ rate = "{rate} B/s", burst = "{burst} B" }}'
                notes[k] = "relays' perconn (PerConnBWRate/Burst on client connections)"
            else:
                notes[k] = "unsupported alone: onionlab's perconn needs both perconnbwrate and perconnbwburst > 0"
        elif k == "circwindow":
            if 100 <= v <= 1000:
                tor["circ_window"] = v
                notes[k] = "tor.circ_window"
            else:
                notes[k] = f"ignored: {v} is outside tor's range 100..1000"
        elif k == "circ_max_cell_queue_size":
            tor["circ_max_cell_queue"] = v
            notes[k] = "tor.circ_max_cell_queue"
        elif k == "guard-n-primary-guards-to-use":
            tor["num_entry_guards"] = v
            notes[k] = "tor.num_entry_guards (guards a client spreads its circuits over)"
        elif k == "guard-n-primary-guards":
            if profile == "0.2.2":
                notes[k] = "not in tor 0.2.2 (every entry guard is a primary one)"
            elif v >= 1:
                tor["num_primary_guards"] = v
                notes[k] = "tor.num_primary_guards (the guards an exit-first circuit looks among)"
            else:
                notes[k] = f"ignored: {v} is outside tor's range 1..INT32_MAX"
        elif k.startswith("cc_"):
            pass  # below, with cc_alg
        elif k == "sendme_emit_min_version":
            notes[k] = "not modelled: SENDMEs carry no version or digest here"
        elif k == "KISTSchedRunInterval":
            pass  # with the circuit priority below: KIST's circuitmux is EWMA
        elif k in ("cbttestfreq", "cbtmaxopencircs", "cellq_high", "cellq_low", "nf_conntimeout_relays"):
            # They tune the tor version profile; tor_behaviour replaces this note.
            notes[k] = "tunes the tor version profile (tor_behaviour)"
        else:
            notes[k] = "not modelled (no onionlab counterpart)"
    _map_congestion_control(params, tor, notes)
    kist = params.get("KISTSchedRunInterval")
    if kist is not None:
        # Tor's default Schedulers list is KIST,KISTLite,Vanilla: KIST runs every
        # KISTSchedRunInterval ms (1..100); 0 disables KIST, and tor falls back to KISTLite
        # run at once, which onionlab's kist-lite (a positive interval) does not model.
        if 1 <= kist <= 100 and halflife is not None:
            relay["scheduler"] = f'{{ kind = "kist", run_interval = "{kist} ms", halflife = "{halflife} ms", tick = "{tick} s" }}'
            notes["KISTSchedRunInterval"] = f"mechanisms.scheduler: kist, run every {kist} ms (tor's default scheduler on Linux)"
            if "CircuitPriorityHalflifeMsec" in params:
                notes["CircuitPriorityHalflifeMsec"] = f"mechanisms.scheduler: kist's circuitmux is ewma, halflife {halflife} ms (tick {tick} s, tor's)"
        elif 1 <= kist <= 100:
            notes["KISTSchedRunInterval"] = (
                "not applied: EWMA is disabled, and onionlab's KIST always orders circuits by EWMA; mechanisms.scheduler round-robin"
            )
        else:
            notes["KISTSchedRunInterval"] = f"not applied: {kist} disables KIST in tor (KISTLite run at once, not modelled)"
    return relay, tor, notes


# ---------------------------------------------------------------------------------------
# Writing


def _ipv4(address: str) -> bool:
    """Whether `address` is a dotted-quad IPv4 address (what a consensus's r lines hold)."""
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return False
    return True


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _unique_names(relays: list) -> list:
    seen: set = set()
    out = []
    for r in relays:
        name = r.nickname or "relay"
        # Client and server hosts are named <group><i> and server<i>; a relay must not
        # take one of those names (the 2022 consensus has a relay called "server1").
        if name in seen or re.fullmatch(r"(server|markov|perf)\d+", name):
            name = f"{name}_{r.fingerprint[:8]}"
        while name in seen:
            name += "_"
        seen.add(name)
        out.append(name)
    return out


@dataclass
class Plan:
    """What a network will hold (also recorded in generate.json)."""

    source: str
    valid_after: str
    network_scale: float
    load_scale: float
    seed: int
    relays: list
    users: int
    perf_clients: int
    servers: int
    relay_defaults: dict
    tor_defaults: dict
    param_notes: dict
    bandwidth_weights: dict
    source_relays: int
    capacity_from: str | None = None
    capacities: dict = field(default_factory=dict)
    #: The tor version profile (`TOR_PROFILES`) or None, why it was chosen, and where each
    #: of its `[tor]` settings comes from.
    tor_profile: str | None = None
    tor_profile_why: str = ""
    tor_sources: dict = field(default_factory=dict)


def plan_network(
    cons: Consensus,
    network_scale: float,
    load_scale: float = 1.0,
    seed: int = 1,
    total_users: int = DEFAULT_TOTAL_USERS,
    server_scale: float = DEFAULT_SERVER_SCALE,
    perf_clients: int | None = None,
    consensus_params: bool = True,
    capacity: Consensus | None = None,
    tor_version: str = "auto",
) -> Plan:
    if load_scale <= 0:
        raise GenerateError(f"--load-scale: must be positive, got {load_scale}")
    if total_users < 1:
        raise GenerateError(f"--users: must be at least 1, got {total_users}")
    if server_scale <= 0:
        raise GenerateError(f"--server-scale: must be positive, got {server_scale}")
    if not cons.relays:
        raise GenerateError(f"{cons.path}: has no relays")
    rng = np.random.default_rng([seed, 8])
    relays = sample_relays(cons.relays, network_scale, rng)
    users = max(1, round(total_users * network_scale * load_scale))
    perf = perf_clients if perf_clients is not None else max(1, round(PERF_CLIENTS_AT_FULL_SCALE * network_scale))
    if perf < 0:
        raise GenerateError(f"--perf-clients: must not be negative, got {perf}")
    servers = max(1, round(users * server_scale))
    if tor_version == "auto":
        profile, why = tor_profile_for(cons)
    elif tor_version == "none":
        profile, why = None, "--tor-version none"
    else:
        profile, why = tor_version, "--tor-version"
    relay_d, tor_d, notes = (
        map_params(cons.params, profile) if consensus_params else ({}, {}, {k: "not applied (--no-consensus-params)" for k in cons.params})
    )
    behaviour, sources, tuned = tor_behaviour(profile, cons.params if consensus_params else {})
    notes.update(tuned)
    # The consensus params (e.g. guard-n-primary-guards-to-use) override the profile.
    for k in tor_d:
        sources.pop(k, None)
    tor_d = {**behaviour, **tor_d}
    if "num_primary_guards" in tor_d and "num_entry_guards" in tor_d:
        n, p = int(tor_d["num_entry_guards"]), int(tor_d["num_primary_guards"])
        if n > p and profile == "0.2.2":
            tor_d["num_primary_guards"] = n
            sources["num_primary_guards"] = "tor 0.2.2: every entry guard is a primary one"
        elif n > p:
            # select_primary_guard_for_circuit walks only the primary guards.
            tor_d["num_entry_guards"] = p
            sources.pop("num_entry_guards", None)
            notes["guard-n-primary-guards-to-use"] = f"tor.num_entry_guards: {n} capped at the {p} primary guards tor looks among"
    caps = capacity_by_rank(cons.relays, capacity) if capacity is not None else {}
    return Plan(
        source=cons.path,
        valid_after=cons.valid_after,
        network_scale=network_scale,
        load_scale=load_scale,
        seed=seed,
        relays=relays,
        users=users,
        perf_clients=perf,
        servers=servers,
        relay_defaults=relay_d,
        tor_defaults=tor_d,
        param_notes=notes,
        bandwidth_weights=dict(cons.bandwidth_weights),
        source_relays=len(cons.relays),
        capacity_from=capacity.path if capacity is not None else None,
        capacities=caps,
        tor_profile=profile,
        tor_profile_why=why,
        tor_sources=sources,
    )


def capacity_by_rank(relays: list, snapshot: Consensus) -> dict:
    """Fingerprint -> capacity (KiB/s): each relay gets the snapshot capacity at its rank
    quantile within its position (guard -> guards, exit and exitguard -> exits, middle ->
    middles), ranking by consensus bandwidth."""
    pools = {"guard": [], "exit": [], "middle": []}
    for r in snapshot.relays:
        pools["guard" if "Guard" in r.flags else "exit" if "Exit" in r.flags else "middle"].append(r.bandwidth)
    pools = {k: np.sort(np.asarray(v, dtype=float)) for k, v in pools.items()}
    out = {}
    by_class: dict = {}
    for r in relays:
        by_class.setdefault(r.position, []).append(r)
    for k, members in by_class.items():
        pool = pools["exit" if k in ("exit", "exitguard") else k]
        if pool.size == 0:
            continue
        members.sort(key=lambda r: (r.bandwidth, r.fingerprint))
        n = len(members)
        for i, r in enumerate(members):
            out[r.fingerprint] = max(1, int(round(np.quantile(pool, (i + 0.5) / n))))
    return out


def write_network(plan: Plan, out: Path, duration: str = "10 min", warmup: str = "2 min") -> dict:
    """Writes the network directory; returns the metadata written to generate.json."""
    out.mkdir(parents=True, exist_ok=True)
    slots = location_slots()
    first_slot = {reg: slots.index(reg) for reg in set(slots)}
    with open(out / "latency.csv", "w") as f:
        f.write(f"# one-way latency (ms) between {len(slots)} locations; location i is region {[REGIONS[s][0] for s in slots]}[i]\n")
        for row in latency_matrix(slots):
            f.write(",".join(str(x) for x in row) + "\n")
    for m in ("stream_model.json", "packet_model.json"):
        src = TRAFFIC / m
        if not src.is_file():
            raise GenerateError(f"{src}: the PrivCount model is missing (it ships in the repository's data/traffic/)")
        shutil.copyfile(src, out / m)

    # Params onionlab has no counterpart for (those left out by --no-consensus-params are
    # not applied, which is another matter).
    unsupported = {
        k: v for k, v in plan.param_notes.items() if not v.startswith(("relays'", "mechanisms.", "tor.", "0 disables", "-1 disables", "not applied"))
    }
    lines = [
        f"# Network generated by `onionlab generate` from {Path(plan.source).name} (valid-after {plan.valid_after}).",
        f"# network scale {plan.network_scale:g}, load scale {plan.load_scale:g}, seed {plan.seed}: "
        f"{len(plan.relays)} of {plan.source_relays} relays, {plan.users} Markov users, {plan.perf_clients} perf clients, {plan.servers} servers.",
        "# Method and assumptions: docs/generate.md. Metadata: generate.json.",
        "# Latency: synthetic geography (regions drawn from relay fingerprints), not measured.",
    ]
    if plan.capacity_from:
        lines.append(f"# Relay bandwidth (capacity) rank-matched to {Path(plan.capacity_from).name}; consensus_weight from the consensus.")
    if plan.tor_profile:
        lines.append(f"# Tor behaviour: tor {plan.tor_profile} ({plan.tor_profile_why}); docs/generate.md lists it.")
        for k, v in plan.tor_sources.items():
            lines.append(f"#   tor.{k}: {v}")
    else:
        lines.append(f"# Tor behaviour: onionlab's defaults ({plan.tor_profile_why}).")
    for k, v in plan.param_notes.items():
        lines.append(f"# consensus param {k}: {v}")
    if unsupported:
        lines.append(f"# Unsupported consensus params (not modelled): {', '.join(sorted(unsupported))}")
    lines.append("")
    if plan.tor_defaults:
        lines.append("[tor]  # from the tor version profile and the consensus params; an experiment's [tor] overrides")
        lines += [f"{k} = {v}" for k, v in plan.tor_defaults.items()]
        lines.append("")
    # The network's scheduler is its [mechanisms] default, not each relay's own, so an
    # experiment's mechanisms.scheduler (or --set, or a sweep's --vary) replaces it.
    relay_keys = {k: v for k, v in plan.relay_defaults.items() if k != "scheduler"}
    if "scheduler" in plan.relay_defaults:
        lines.append("[mechanisms]  # the network's circuit scheduler, from the consensus params; an experiment's mechanisms.scheduler overrides")
        lines.append(f"scheduler = {plan.relay_defaults['scheduler']}")
        lines.append("")
    lines.append("[network]")
    lines.append('latency = { matrix = "latency.csv" }')
    if plan.bandwidth_weights:
        w = ", ".join(f"{k} = {v}" for k, v in sorted(plan.bandwidth_weights.items()))
        lines.append(f"bandwidth_weights = {{ {w} }}")
    lines.append("")
    names = _unique_names(plan.relays)
    for r, name in zip(plan.relays, names):
        bw = plan.capacities.get(r.fingerprint, max(1, r.bandwidth))
        flags = [f for f in ("Guard", "Exit", "BadExit", "Fast", "Stable", "Running", "Valid") if f in r.flags]
        lines.append("[[relays]]")
        lines.append(f"name = {_toml_str(name)}")
        lines.append(f'bandwidth = "{bw} KiB/s"')
        lines.append(f"consensus_weight = {r.bandwidth}")
        lines.append("flags = [" + ", ".join(_toml_str(f) for f in flags) + "]")
        lines.append(f"location = {first_slot[region_of(r.fingerprint)]}")
        if _ipv4(r.address):
            # Tor keeps two relays of one /16 off the same path (EnforceDistinctSubnets).
            lines.append(f'address = "{r.address}"')
        for k, v in relay_keys.items():
            lines.append(f"{k} = {v}")
        lines.append("")
    lines += [
        "[[clients]]",
        'name = "markov"',
        'workload = "markov"',
        f"count = {plan.users}",
        'placement = "round_robin"',
        "",
    ]
    if plan.perf_clients:
        lines += ["[[clients]]", 'name = "perf"', 'workload = "perf"', f"count = {plan.perf_clients}", 'placement = "round_robin"', ""]
    lines += [
        "[servers]",
        f"count = {plan.servers}",
        'placement = "round_robin"',
        "",
        "[workloads.markov]",
        'type = "markov"',
        'stream_model = "stream_model.json"',
        'packet_model = "packet_model.json"',
        "",
        "[workloads.perf]",
        'type = "perf"',
        'pause = "60 s"',
        "",
    ]
    (out / "network.toml").write_text("\n".join(lines))
    (out / "experiment.toml").write_text(
        "# A ready experiment on the generated network; copy it and change what you study.\n"
        'network_file = "network.toml"\n\n[experiment]\n'
        f'name = "{out.name}"\nduration = "{duration}"\nwarmup = "{warmup}"\nseeds = [1]\n'
        "\n# What you study goes below; a key here replaces network.toml's (docs/config.md), e.g.:\n"
        "# [mechanisms]\n"
        + ('# scheduler = "ewma"      # on every relay, in place of network.toml\'s scheduler\n'
           if "scheduler" in plan.relay_defaults
           else '# scheduler = "ewma"      # on every relay, in place of the default (network.toml sets none)\n')
        + '# throttling = { kind = "flag", flag_rate = "50 KiB/s", penalty = 0.25 }\n'
        "# [tor]\n"
        + ('# num_entry_guards = 1   # in place of network.toml\'s [tor] num_entry_guards\n'
           if "num_entry_guards" in plan.tor_defaults
           else "# num_entry_guards = 1   # in place of tor's default (network.toml sets none)\n")
    )
    meta = {
        "source": plan.source,
        "valid_after": plan.valid_after,
        "network_scale": plan.network_scale,
        "load_scale": plan.load_scale,
        "seed": plan.seed,
        "relays": len(plan.relays),
        "source_relays": plan.source_relays,
        "positions": {k: sum(1 for r in plan.relays if r.position == k) for k in ("guard", "exit", "exitguard", "middle")},
        "markov_users": plan.users,
        "perf_clients": plan.perf_clients,
        "servers": plan.servers,
        "capacity_from": plan.capacity_from,
        "tor_version": {"profile": plan.tor_profile, "why": plan.tor_profile_why, "settings": plan.tor_sources},
        "consensus_params": plan.param_notes,
        "unsupported_params": sorted(unsupported),
        "latency": "synthetic regions " + ", ".join(r[0] for r in REGIONS),
        "files": ["network.toml", "latency.csv", "stream_model.json", "packet_model.json", "experiment.toml"],
    }
    (out / "generate.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ---------------------------------------------------------------------------------------
# Statistics used by the tests and the report


def ks_2samp(a, b) -> tuple:
    """Two-sample Kolmogorov-Smirnov statistic D and its asymptotic p-value (Kolmogorov
    distribution with Stephens' small-sample correction), in numpy so that onionlab does
    not depend on scipy."""
    a = np.sort(np.asarray(a, dtype=float))
    b = np.sort(np.asarray(b, dtype=float))
    n, m = a.size, b.size
    if n == 0 or m == 0:
        raise ValueError("ks_2samp: both samples must be non-empty")
    x = np.concatenate([a, b])
    d = float(np.max(np.abs(np.searchsorted(a, x, side="right") / n - np.searchsorted(b, x, side="right") / m)))
    en = math.sqrt(n * m / (n + m))
    lam = (en + 0.12 + 0.11 / en) * d
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return d, float(min(1.0, max(0.0, p))) if lam > 0 else 1.0


# ---------------------------------------------------------------------------------------
# CLI


def add_parser(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="generate a network at any scale from a Tor consensus (relays, clients, servers, latency)",
        description="Generate a network from real Tor data (docs/generate.md). Writes DIR/network.toml "
        "(include it with network_file = ...), DIR/latency.csv, the Markov models, DIR/experiment.toml and DIR/generate.json.",
    )
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the network to")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--consensus", metavar="FILE", help=f"v3 consensus (.xz/.gz read transparently; default {DEFAULT_CONSENSUS.relative_to(REPO_DATA.parent)})")
    src.add_argument("--snapshot", metavar="FILE", nargs="?", const=str(DEFAULT_SNAPSHOT), help="generate from the 2021 capacity snapshot instead (guards/middles/exits JSON)")
    g.add_argument("--network-scale", type=float, default=0.01, metavar="S", help="fraction of the relays and users (default 0.01)")
    g.add_argument("--load-scale", type=float, default=1.0, metavar="L", help="multiplies the number of users (default 1)")
    g.add_argument("--users", type=int, default=DEFAULT_TOTAL_USERS, metavar="N", help=f"users of the whole network before scaling (default {DEFAULT_TOTAL_USERS:,})")
    g.add_argument("--server-scale", type=float, default=DEFAULT_SERVER_SCALE, metavar="F", help=f"servers per user (default {DEFAULT_SERVER_SCALE})")
    g.add_argument("--perf-clients", type=int, metavar="N", help=f"onionperf-like clients (default {PERF_CLIENTS_AT_FULL_SCALE} x network scale, at least 1)")
    g.add_argument("--capacity-from", metavar="SNAPSHOT", nargs="?", const=str(DEFAULT_SNAPSHOT), help="rank-match relay capacities to a capacity snapshot (default file: the 2021 one)")
    g.add_argument("--no-consensus-params", action="store_true", help="do not turn consensus params into relay and [tor] defaults")
    g.add_argument(
        "--tor-version",
        choices=TOR_VERSION_CHOICES,
        default="auto",
        help="tor behaviour no consensus param carries (predicted and build-time test circuits, edge blocking, "
        "refill interval, guards): 0.2.2 (the 2010-2012 papers' tor), 0.4.8 (today's), none (onionlab's defaults); "
        "auto (default) picks by the consensus's newest recommended client version",
    )
    g.add_argument("--seed", type=at_least(0), default=1, help="sampling seed (default 1)")
    g.add_argument("--duration", type=positive_duration, default="10 min", help="duration in the written experiment.toml (default \"10 min\")")
    g.add_argument("--warmup", type=duration, default="2 min", help="warmup in the written experiment.toml (default \"2 min\")")
    g.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from onionlab.results import output_dir

    check_warmup(args.duration, args.warmup)
    if args.snapshot and args.capacity_from and Path(args.snapshot).resolve() == Path(args.capacity_from).resolve():
        # A snapshot's bandwidths are its capacities: matching them to themselves changes
        # them only by rounding.
        raise ValueError("--capacity-from: the --snapshot network's bandwidths are already this snapshot's capacities; drop it")
    check_whole_steps(args.duration, 1.0, "--duration", "the relays table is sampled every second, experiment.metrics_interval's default")
    with output_dir(args.output, "--output"):  # before minutes of planning at full scale
        return _generate(args)


def _generate(args: argparse.Namespace) -> int:
    import resource

    t0 = time.perf_counter()
    if args.snapshot:
        cons = read_capacity_snapshot(args.snapshot)
    else:
        path = Path(args.consensus) if args.consensus else DEFAULT_CONSENSUS
        cons = read_consensus(path)
    t_read = time.perf_counter() - t0
    capacity = read_capacity_snapshot(args.capacity_from) if args.capacity_from else None
    plan = plan_network(
        cons,
        args.network_scale,
        load_scale=args.load_scale,
        seed=args.seed,
        total_users=args.users,
        server_scale=args.server_scale,
        perf_clients=args.perf_clients,
        consensus_params=not args.no_consensus_params,
        capacity=capacity,
        tor_version=args.tor_version,
    )
    out = Path(args.output)
    meta = write_network(plan, out, duration=args.duration, warmup=args.warmup)
    elapsed = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    d, p = ks_2samp([r.bandwidth for r in plan.relays], [r.bandwidth for r in cons.relays])
    print(
        f"wrote {out}/network.toml: {meta['relays']} of {meta['source_relays']} relays {meta['positions']}, "
        f"{meta['markov_users']:,} Markov users, {meta['perf_clients']} perf clients, {meta['servers']:,} servers"
    )
    print(f"bandwidth vs source: two-sample K-S D = {d:.4f} (p = {p:.3g})")
    print(f"tor behaviour: {'tor ' + plan.tor_profile if plan.tor_profile else 'onionlab defaults'} ({plan.tor_profile_why})")
    if meta["unsupported_params"]:
        print(f"{len(meta['unsupported_params'])} consensus params are not modelled; network.toml and generate.json list them")
    if args.no_consensus_params:
        print("consensus params not applied (--no-consensus-params); network.toml and generate.json list them")
    print(f"generation took {elapsed:.2f} s (parse {t_read:.2f} s), peak memory {peak_mib:.0f} MiB")
    print(f"run it: onionlab run {out / 'experiment.toml'} -o results/{out.name}")
    return 0


def load_only(path: str, seed: int = 1, overrides: Sequence[str] = ()) -> dict:
    """Parses, validates (with `overrides`, ``PATH=VALUE`` strings) and builds the network
    of an experiment without running it; adds wall time and peak memory (MiB) to the
    simulator's counts."""
    import resource

    from onionlab import _core

    t0 = time.perf_counter()
    res = dict(_core.load_network(path, seed, list(overrides)))
    res["seconds"] = time.perf_counter() - t0
    res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res
