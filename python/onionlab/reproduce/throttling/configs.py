"""The throttling paper's experiment matrix as onionlab configs.

**Owns:** the paper's network and workloads (the relay sample, 950 web clients, 25/50/100
bulk clients, 200 servers; the web think time, calibrated to table 1's vanilla split), each
algorithm's ``throttling = ...`` line, the sensitivity switches that change the Tor model
(guards, predicted circuits, congestion control, edge blocking, bandwidth weights, the
network's capacity), where hosts sit (`--latency`: one latency, or the paper's generator's
regions), the parsing of swept parameter values and the checking of a
``--params`` file. **Must not touch:** running anything, or what is measured from a run
(``metrics``, ``anonymity``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Bulk clients per load (950 web clients at every load).
LOADS = {"light": 25, "medium": 50, "heavy": 100}
ALGORITHMS = ["vanilla", "static", "split", "flag", "thresh"]

#: The clients' path orders (`--path-order`): the model's earlier guard first, and tor's
#: exit first, the default.
PATH_ORDERS = ("guard-first", "exit-first")
DEFAULT_PATH_ORDER = "exit-first"

#: PerConnBWBurst of every algorithm, static included (the paper's footnote 3; spec 3).
BURST = "2 MiB"

#: Web think times (the paper's UNC data set may not be redistributed). Both are lognormal
#: stand-ins calibrated to table 1's vanilla medium-load split (65.8 % web / 34.2 % bulk).
#: "heavy" (the default): median 8 s, sigma 2.0 (mean 59 s; 10 % of pauses under 0.6 s,
#: 1 % over 14 min), the dispersed, heavy-tailed shape web think-time traces show.
#: "smooth": median 20 s, sigma 1.25 (mean 44 s), the earlier default, kept as a
#: sensitivity check: with it no static rate in spec 9's range harms web clients.
#: (median, sigma) of each.
THINK_SHAPES = {"heavy": ("8 s", 2.0), "smooth": ("20 s", 1.25)}


def think_text(median: str, sigma: float) -> str:
    """The `think` value of a web workload: a lognormal of this median and sigma."""
    return f'{{ dist = "lognormal", median = "{median}", sigma = {sigma} }}'


THINK = {name: think_text(m, s) for name, (m, s) in THINK_SHAPES.items()}

#: How each swept parameter's values are written: a byte rate, a duration, or a number in
#: [0, 1] (the mechanisms' own ranges for T and P).
AXIS_KINDS = {"rate": "rate", "flag_rate": "rate", "floor": "rate", "halflife": "duration", "refresh": "duration", "penalty": "unit", "fraction": "unit"}


def axis_value_key(param: str, value) -> float:
    """The number a swept value stands for (bytes/s, seconds or the fraction itself), to order
    an axis. Raises ValueError naming the parameter for a value of the wrong form."""
    from onionlab._core import parse_byte_rate

    kind = AXIS_KINDS[param]
    try:
        if kind == "rate":
            x = float(parse_byte_rate(value))
        elif kind == "duration":
            x = seconds(value)
        else:
            x = float(value)
    except (TypeError, ValueError) as e:
        what = {"rate": "byte rate", "duration": "duration", "unit": "number"}[kind]
        raise ValueError(f"{param}: {value!r} is not a {what} ({e})") from None
    if kind == "unit" and not 0.0 <= x <= 1.0:
        raise ValueError(f"{param}: {x:g} is outside [0, 1]")
    if kind != "unit" and not x > 0:
        raise ValueError(f"{param}: {value!r} must be positive")
    return x


def _toml_value(v) -> str:
    return f'"{v}"' if isinstance(v, str) else repr(v)


#: What lifting a throttle leaves (`--unthrottled`): "paper", no bucket (the paper's rate of
#: infinity; the default), or "code", the bucket kept at the relay's BandwidthRate with its
#: tokens and the 2 MiB burst, as the authors' tor code does. Only flagging and threshold
#: lift throttles.
UNTHROTTLED = ("paper", "code")


def mechanism_line(alg: str, params: dict, unthrottled: str = "paper") -> str:
    """The ``throttling = ...`` line of an algorithm with `params`; `unthrottled` (one of
    :data:`UNTHROTTLED`) is written for flagging and threshold where it is not the default."""
    kind = {"vanilla": None, "static": "static", "split": "split", "flag": "flag", "thresh": "threshold"}[alg]
    if kind is None:
        return 'throttling = "none"'
    fields = [f'kind = "{kind}"'] + [f"{k} = {_toml_value(v)}" for k, v in params.items()] + [f'burst = "{BURST}"']
    if alg in ("flag", "thresh") and one_of(unthrottled, UNTHROTTLED, "--unthrottled") != "paper":
        fields.append(f'unthrottled = "{unthrottled}"')
    return "throttling = { " + ", ".join(fields) + " }"


#: Attack 3's response size per malicious server: beta/2 of the constant 2 MiB burst, the paper's.
ATTACK3_RESPONSE = 1 << 20

_LINKING_CLIENTS = """
[[clients]]
name = "link-same"
workload = "link-same"
count = 10
link_up = "$LINK_UP"
link_down = "$LINK_DOWN"
placement = "round_robin"

[[clients]]
name = "link-diff"
workload = "link-diff"
count = 40
link_up = "$LINK_UP"
link_down = "$LINK_DOWN"
placement = "round_robin"

[workloads.link-same]
type = "web"
size = "$SAME_SIZE"
think = { dist = "fixed", value = "120 s" }

[workloads.link-diff]
type = "web"
size = "$DIFF_SIZE"
think = { dist = "fixed", value = "120 s" }
"""


def size_text(n: int) -> str:
    """A byte count as a config size: whole MiB or KiB where it is one, else bytes."""
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def linking_clients(response_bytes: int = ATTACK3_RESPONSE) -> str:
    """Attack 3's clients: two malicious servers each send `response_bytes`. On one client's
    connection both responses pass one burst bucket ("link-same": one response of twice the
    size); on two clients' connections each passes its own ("link-diff")."""
    return _LINKING_CLIENTS.replace("$SAME_SIZE", size_text(2 * response_bytes)).replace("$DIFF_SIZE", size_text(response_bytes))


def config_text(
    name: str, bulk: int, throttling: str, duration: str, warmup: str, relays_file: str, conn_metrics: bool = True, extra_clients: str = "", conn_interval: str = "60 s",
    think: str = THINK["heavy"], entry_guards: int = 3, predicted_circuits: bool = False, congestion_control: str = "fixed-window",
    cellq: tuple | None = None, cbt_learning: bool = False, weights: str = "uniform", chan_interval: str | None = None, circ_interval: str | None = None,
    path_order: str = DEFAULT_PATH_ORDER, client_links: tuple[str, str] = ("10 Mbit", "20 Mbit"), latency: str = "constant",
    optimistic_data: bool = True, refill_phase: str = "aligned",
) -> str:
    extra = f'\nconnection_metrics_interval = "{conn_interval}"' if conn_metrics else ""
    if chan_interval:
        extra += f'\nchannel_metrics_interval = "{chan_interval}"'
    if circ_interval:
        extra += f'\ncircuit_metrics_interval = "{circ_interval}"'
    # [tor] lines beyond the defaults: sensitivities only, so the main runs' configs stay as they were.
    tor_extra = "\npredicted_circuits = true" if predicted_circuits or cbt_learning else ""
    if cbt_learning:
        # Tor 0.2.2's test circuits: one a minute, up to 12 clean (`true` is tor 0.4.8's).
        tor_extra += '\ncbt_learning = { test_frequency = "60 s", max_clean = 12 }'
    if congestion_control != "fixed-window":
        tor_extra += f'\ncongestion_control = "{congestion_control}"'
    if cellq:
        tor_extra += f"\ncellq_high = {cellq[0]}\ncellq_low = {cellq[1]}"
    if not optimistic_data:
        # Tor 0.2.2.15 (Shadow's): no optimistic data; the request follows CONNECTED.
        tor_extra += "\noptimistic_data = false"
    if refill_phase != "aligned":
        # Each relay's once-a-second refill at its own offset, as separate tor processes.
        tor_extra += f'\nrefill_phase = "{one_of(refill_phase, REFILL_PHASES, "--refill-phase")}"'
    # Always written, so a config says which order it ran: this reproduction's numbers
    # until 2026-11-28 ran guard-first, and `--path-order guard-first` still runs it.
    # Exit-first (the default, as the model's) is tor 0.2.2's order: the exit, then a guard
    # outside its family and /16 among every entry guard (num_primary_guards defaults to
    # num_entry_guards when that is larger, so all three are used, as 0.2.2 did).
    tor_extra += f'\npath_order = "{path_order}"'
    # The 2010 consensus has no bandwidth-weights line: uniform weights, or what tor's
    # directory authorities would compute for these relays ("computed", or "computed-v9" as
    # the paper's tor 0.2.2.15 authority did).
    network_extra = f'\nbandwidth_weights = "{weights}"' if weights != "uniform" else ""
    link_up, link_down = client_links
    extra_clients = extra_clients.replace("$LINK_UP", link_up).replace("$LINK_DOWN", link_down)
    one_of(latency, LATENCIES, "--latency")  # an unknown model is an error, not the constant one
    if latency == "regions":
        # Clients round robin over the nine regions (the generator put each batch of clients
        # in a region drawn uniformly); servers in its four server regions only.
        latency_line = f'{{ matrix = "{REGION_LATENCY_FILE}" }}'
        server_placement = "[" + ", ".join(str(REGIONS.index(r)) for r in SERVER_REGIONS) + "]"
    else:
        latency_line, server_placement = '{ constant = "40 ms" }', '"round_robin"'

    return f"""# Generated by `onionlab reproduce throttling`: {name}.
relays_file = "{relays_file}"

[experiment]
name = "{name}"
duration = "{duration}"
warmup = "{warmup}"
seeds = [1]{extra}

[tor]
refill_interval = "1 s"
num_entry_guards = {entry_guards}{tor_extra}

[network]
latency = {latency_line}{network_extra}

[[clients]]
name = "web"
workload = "web"
count = 950
link_up = "{link_up}"
link_down = "{link_down}"
placement = "round_robin"

[[clients]]
name = "bulk"
workload = "bulk"
count = {bulk}
link_up = "{link_up}"
link_down = "{link_down}"
placement = "round_robin"

[servers]
count = 200
link = "1 Gbit"
placement = {server_placement}

[workloads.web]
type = "web"
size = "320 KiB"
think = {think}

[workloads.bulk]
type = "bulk"
size = "5 MiB"

[mechanisms]
scheduler = "round-robin"
{throttling}
{extra_clients}"""


#: `--latency`: one 40 ms between any two hosts (the default), or the regions of the paper's
#: network generator with PlanetLab-measured latencies between them.
LATENCIES = ("constant", "regions")
#: `tor.refill_phase`: every relay's refill grid at 0 s (the default), or each its own.
REFILL_PHASES = ("aligned", "random")

#: The regions of Shadow's 2011 network generator (scallion's `contrib/generate.py`), in
#: the order of `REGION_LATENCY_FILE`'s locations.
REGIONS = ("US_WEST", "US_CENTRAL", "US_EAST", "NORTH", "SOUTH", "EU_WEST", "EU_EAST", "ASIA", "AUSTRALIA")
#: The regions the generator spread its file servers over (an equal share each).
SERVER_REGIONS = ("US_WEST", "US_CENTRAL", "US_EAST", "EU_WEST")
#: The one-way latency (ms) between the regions: the median of the PlanetLab-measured links
#: between their clusters in Shadow's 2012 topology (`tools/shadow_region_latency.py`).
REGION_LATENCY_FILE = "throttling-latency-regions.csv"


def _relay_regions() -> dict:
    return json.loads((_DATA / "throttling-relay-regions.json").read_text(encoding="utf-8"))


def place_network(relays_text: str, args) -> tuple[str, dict[str, str]]:
    """The relay sample as `--latency` places it, and the files its configs need beside them
    (file name -> text). With "regions" every relay gets the `location` of its region: a
    built-in sample's from `throttling-relay-regions.json` (`tools/relay_regions.py`: its
    address's country, as the generator placed relays), a `--relays` file's from its own
    `location` lines, which every relay must then have. Raises ValueError naming
    `--latency` and the relay otherwise."""
    if args.latency == "constant":
        return relays_text, {}
    one_of(args.latency, LATENCIES, "--latency")
    names = re.findall(r'^name\s*=\s*"([^"]*)"', relays_text, re.M)
    if args.relays:
        blocks = re.split(r"^\[\[relays\]\]", relays_text, flags=re.M)[1:]
        missing = [n for n, b in zip(names, blocks) if not re.search(r"^location\s*=", b, re.M)]
        if missing:
            raise ValueError(
                f"--latency regions: --relays {args.relays}: relay {missing[0]!r} has no location; give every relay "
                f"location = N, its region among " + ", ".join(f"{i} {r}" for i, r in enumerate(REGIONS))
            )
        placed = relays_text
    else:
        regions = _relay_regions()[args.sample]
        unplaced = [n for n in names if n not in regions]
        if unplaced:
            raise ValueError(f"--latency regions: relay {unplaced[0]!r} of --sample {args.sample} has no region in throttling-relay-regions.json")

        def locate(m: re.Match) -> str:
            return f"{m.group(0)}\nlocation = {REGIONS.index(regions[m.group(1)])}"

        placed = "# Each relay at its region's location (--latency regions).\n" + re.sub(r'^name\s*=\s*"([^"]*)"', locate, relays_text, flags=re.M)
    return placed, {REGION_LATENCY_FILE: (_DATA / REGION_LATENCY_FILE).read_text(encoding="utf-8")}


def all_guards(relays_text: str) -> str:
    """The relay sample with the Guard flag on every relay (`--guards all`).

    The paper's anonymity analysis says "Since there are 50 guards, the maximum entropy is
    log2(50)", so in its Shadow network every relay could be a client's first hop; a sample
    that keeps the consensus's flag proportions (spec section 5) has 14 guards. Everything
    else (bandwidths, Exit flags, order) is unchanged."""
    def add_guard(m: re.Match) -> str:
        flags = [f.strip().strip('"') for f in m.group(1).split(",") if f.strip()]
        if "Guard" not in flags:
            flags.insert(0, "Guard")
        return "flags = [" + ", ".join(f'"{f}"' for f in flags) + "]"

    text, n = re.subn(r"^flags = \[([^\]]*)\]", add_guard, relays_text, flags=re.M)
    if n == 0:
        raise ValueError("--guards all: the relay sample has no flags lines")
    return "# Every relay made a guard (`--guards all`).\n" + text


_DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class RelaySample:
    """A built-in relay sample (`--sample`) and the web think-time medians calibrated on it.

    A median is calibrated so that vanilla at medium load splits as table 1 does (65.8 % web
    / 34.2 % bulk); a network of another capacity needs another median for the same split,
    and so may the other path order (`--path-order`), which moves load between relays.
    `tools/calibrate_think_time.py --sample NAME --medians ...` runs that calibration."""

    path: Path
    #: The think time's median per `--think` shape, calibrated in tor's path order (the
    #: default); a shape missing here was not calibrated.
    think_medians: dict
    #: Where guard-first (`--path-order guard-first`) was calibrated to another median: that
    #: median per shape, so that the guard-first runs of the docs rerun as they were made.
    #: A shape missing here keeps `think_medians`' median.
    guard_first_think_medians: dict = field(default_factory=dict)
    #: The path-selection weights (`--weights` overrides them): "uniform", "computed" or
    #: "computed-v9".
    weights: str = "uniform"
    #: Every client's access link, (up, down).
    client_links: tuple[str, str] = ("10 Mbit", "20 Mbit")


#: The built-in samples, from the consensuses in `data/`:
#: - "quantiles" (the default): 50 relays stratified by flag class at evenly spaced
#:   bandwidth quantiles, keeping the consensus's flag proportions (spec 5's reading;
#:   35.6 MiB/s);
#: - "deciles": 50 relays drawn the way the paper's own network was, by Shadow's 2011
#:   generator (`tools/relays_from_consensus.py --method deciles --seed 1`: 40 % exits,
#:   relays above 20 KB/s, one per bandwidth decile in turn; 143 MiB/s, four times the
#:   capacity), with the consensus's flags;
#: - "shadow": the same draw as the paper's Shadow network ran it (`... --flags voted
#:   --authority`): Guard, Fast and Stable as its tor 0.2.2.15 directory authority voted
#:   them (the six non-exits drawn first, started last, are no guards), that authority a
#:   102400 KB/s Guard+Exit relay (tor's default exit policy), the bandwidth weights its
#:   consensus method 9 computed, and the generator's client links (1024 KiB/s up, 3584
#:   KiB/s down); 51 relays, 243 MiB/s;
#: - "paper": the paper's own consensus (2011-04-27 03:00, its footnote 6) drawn and run
#:   the same way as "shadow" (`... --method deciles --seed 1 --flags voted --authority` on
#:   `consensus-2011-04-27-03-00-00`); 51 relays, 360 MiB/s, 21 guards.
SAMPLES = {
    # "heavy", vanilla, medium load, seeds 1-2, tor's path order (2026-11-29): 28.4 % bulk with
    # a 6 s median, 31.6 % with 7 s, 34.9 % with 8 s (guard-first calibrated to 8 s as well);
    # 31.8 % and 35.2 % with 7 s and 8 s since the exit's request write is charged (4b50163).
    "quantiles": RelaySample(_DATA / "throttling-relays.toml", {shape: median for shape, (median, _) in THINK_SHAPES.items()}),
    # Vanilla, medium load, seeds 1-2, tor's path order (2026-11-29): 26.5 % bulk with a
    # 1.8 s median, 28.7 % with 2 s, 33.7 % with 2.5 s, 38.4 % with 3 s. Guard-first: 22.9 %
    # with 1 s, 36.0 % with 2 s, so 1.8 s.
    "deciles": RelaySample(_DATA / "throttling-relays-deciles.toml", {"heavy": "2.5 s"}, guard_first_think_medians={"heavy": "1.8 s"}),
    # Vanilla, medium load, seeds 1-2: guard-first 26.9 % bulk with a 1.4 s median, 42.3 %
    # with 2 s; tor's order 32.6 % with 1.7 s, 35.5 % with 1.8 s (2026-11-29), so 1.7 s in both.
    "shadow": RelaySample(_DATA / "throttling-relays-shadow.toml", {"heavy": "1.7 s"}, weights="computed-v9", client_links=("1024 KiB/s", "3584 KiB/s")),
    # Vanilla, medium load, seeds 1-2: 25.6 % bulk with 0.8 s, 33.8 % with 1 s, 43.3 % with 1.3 s
    # guard-first; 27.3, 33.4 and 43.6 % in tor's order (2026-11-29).
    "paper": RelaySample(_DATA / "throttling-relays-paper.toml", {"heavy": "1 s"}, weights="computed-v9", client_links=("1024 KiB/s", "3584 KiB/s")),
}
BUILTIN_RELAYS = SAMPLES["quantiles"].path

#: The relay sample's name under ``configs/``, where every generated config refers to it.
RELAYS_FILE = "throttling-relays.toml"


def relay_sample_text(path: str | None, sample: str = "quantiles") -> str:
    """The text of the relay sample: `path` (`--relays`) or the built-in `sample` (`--sample`)."""
    if path is None:
        return SAMPLES[sample].path.read_text(encoding="utf-8")
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"--relays {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--relays {path}: cannot read it ({e})") from None


def network_relays_text(args) -> str:
    """The relay sample a reproduction runs on, before placement: `--relays` or the built-in
    `--sample`, every relay a guard with `--guards all`, bandwidths times
    `--capacity-scale`. One function, so that `tools/calibrate_think_time.py` calibrates on
    exactly the network the reproduction then runs. Raises ValueError naming `--sample`
    given beside `--relays`."""
    if args.relays and args.sample != "quantiles":
        raise ValueError("--sample: has no effect with --relays (the relays come from the file)")
    text = relay_sample_text(args.relays, args.sample)
    if args.guards == "all":
        text = all_guards(text)
    if args.capacity_scale != 1.0:
        text = scale_capacity(text, args.capacity_scale)
    return text


_BANDWIDTH_LINE = re.compile(r'^(\s*bandwidth\s*=\s*)"([^"]*)"', re.MULTILINE)


def scale_capacity(relays_text: str, factor: float) -> str:
    """The relay sample with every relay's `bandwidth` (its token-bucket rate) multiplied
    by `factor` (`--capacity-scale`). Consensus weights are left as they are: scaling them
    all alike would not change which paths clients pick."""
    from onionlab._core import parse_byte_rate

    def scaled(m: re.Match) -> str:
        try:
            rate = parse_byte_rate(m.group(2))
        except ValueError as e:
            raise ValueError(f"--capacity-scale: relay bandwidth {m.group(2)!r}: {e}") from None
        return f'{m.group(1)}"{round(rate * factor)} B/s"'

    text, n = _BANDWIDTH_LINE.subn(scaled, relays_text)
    if n == 0:
        raise ValueError("--capacity-scale: the relay sample has no bandwidth lines to scale")
    return f"# Every bandwidth multiplied by {factor:g} (--capacity-scale).\n" + text


def _check_config(mechanism: str, relays_text: str, args) -> str:
    """The resolved TOML of a one-minute medium-load run with the ``throttling = ...`` line
    `mechanism` on the relay sample, or ``config.ConfigError`` with every problem."""
    import tempfile

    from onionlab import config as config_mod

    text = config_text("check", LOADS["medium"], mechanism, "1 min", "0 s", RELAYS_FILE, **client_settings(args))
    relays_text, files = place_network(relays_text, args)
    with tempfile.TemporaryDirectory() as d:
        for fname, body in files.items():
            (Path(d) / fname).write_text(body, encoding="utf-8")
        (Path(d) / RELAYS_FILE).write_text(relays_text, encoding="utf-8")
        (Path(d) / "check.toml").write_text(text, encoding="utf-8")
        return config_mod.check(Path(d) / "check.toml")


def check_relay_sample(relays_text: str, args) -> list[dict]:
    """The sample's `[[relays]]` tables, after the config validator has passed a medium-load
    run on it (so a bad sample fails before any run starts, with `--relays` and the field
    named)."""
    from onionlab import config as config_mod

    label = f"--relays {args.relays}" if args.relays else f"the built-in relay sample {args.sample!r}"
    try:
        resolved = _check_config(mechanism_line("vanilla", {}), relays_text, args)
    except config_mod.ConfigError as e:
        raise ValueError(f"{label}:\n" + config_mod.format_problems(e)) from None
    return config_mod.parse(resolved)["relays"]


def relay_bandwidths(relays: list[dict]) -> dict[str, float]:
    """Each relay's bandwidth (bytes/s) by name, from a config's ``[[relays]]`` tables: the
    rate the attacks read as a guard's under vanilla (spec 7.4)."""
    from onionlab._core import parse_byte_rate

    return {r["name"]: float(parse_byte_rate(r["bandwidth"])) for r in relays}


#: The attacker's candidate guards in attacks 1 and 2 (``--attack-pool``): the relays
#: that clients may take as entry guards (Guard-flagged), or every relay of the sample
#: (spec 7.4 to the letter: "The paper treats all 50 relays as potential guards").
ATTACK_POOLS = ("guards", "relays")


def one_of(value: str, choices: tuple[str, ...], option: str) -> str:
    """``value`` if it is one of ``choices``; otherwise ValueError naming ``option`` (e.g.
    ``--attack-pool``) and the choices. For the analysis options that functions take as
    well as the command line (whose parser checks its own)."""
    if value not in choices:
        raise ValueError(f"{option}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def attack_pool(relays: list[dict], pool: str) -> dict[str, float]:
    """The candidate guards of attacks 1 and 2 with their bandwidths (bytes/s), from a
    config's ``[[relays]]`` tables: the Guard-flagged relays for ``"guards"``, every relay
    for ``"relays"``. The paper's attacker "probes all guards", and in its network every
    one of the 50 relays was a possible guard ("Since there are 50 guards, the maximum
    entropy is log2(50)"); where only some relays are, a relay no client can take as its
    guard is not a candidate, and the maximum entropy is log2 of the guards' number.
    ``--guards all`` makes the two pools the same. Raises ValueError naming
    ``--attack-pool`` for an unknown pool or a sample without Guard-flagged relays."""
    one_of(pool, ATTACK_POOLS, "--attack-pool")
    bw = relay_bandwidths(relays)
    if pool == "relays":
        return bw
    guards = {r["name"]: bw[r["name"]] for r in relays if "Guard" in r.get("flags", [])}
    if not guards:
        raise ValueError("--attack-pool guards: the relay sample has no Guard-flagged relay (use --guards all or --attack-pool relays)")
    return guards


def load_params(path: str, relays_text: str, args) -> dict:
    """``--params FILE``: each algorithm's parameters (a ``chosen.json``, or one of
    ``examples/throttling-params/``), checked before any run: an object with exactly the
    five algorithms, vanilla and split without parameters, and every algorithm's medium-load
    config passing the config validator. Raises ValueError naming the file, the algorithm
    and the field."""
    from onionlab import config as config_mod

    label = f"--params {path}"
    try:
        chosen = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{label}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{label}: not JSON ({e})") from None
    if not isinstance(chosen, dict):
        raise ValueError(f"{label}: expected an object with one entry per algorithm ({', '.join(ALGORITHMS)})")
    unknown = [a for a in chosen if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"{label}: unknown algorithm {unknown[0]!r} (known: {', '.join(ALGORITHMS)})")
    missing = [a for a in ALGORITHMS if a not in chosen]
    if missing:
        raise ValueError(f"{label}: no parameters for {', '.join(missing)}")
    problems = []  # every algorithm's, so that one fix-and-retry mends the whole file
    for alg in ALGORITHMS:
        params = chosen[alg]
        if not isinstance(params, dict):
            problems.append(f"{alg}: expected an object of parameters, got {params!r}")
        elif alg in ("vanilla", "split") and params:
            problems.append(f"{alg}: takes no parameters, got {', '.join(params)}")
        else:
            try:
                _check_config(mechanism_line(alg, params, args.unthrottled), relays_text, args)
            except config_mod.ConfigError as e:
                problems.append(f"{alg}: " + config_mod.format_problems(e).replace("\n", f"\n{alg}: "))
    if problems:
        raise ValueError(f"{label}:\n" + "\n".join(problems))
    return chosen


def client_settings(args) -> dict:
    """The `config_text` settings every run of one reproduction shares: the web think time,
    the clients' access links, the entry guards per client, whether clients build predicted
    circuits (and build-time test circuits), the circuits' congestion control, the exits'
    edge-blocking watermarks, the path-selection weights and the latency model."""
    return {
        "think": think_text(think_median(args), THINK_SHAPES[args.think][1]), "client_links": sample_in_use(args)[1].client_links,
        **tor_settings(args), "latency": args.latency,
    }


def sample_in_use(args) -> tuple[str, RelaySample]:
    """The built-in sample whose settings (think time, client links, weights) a run uses, and
    its name: `--sample`, or the default sample for a `--relays` file."""
    name = "quantiles" if args.relays else args.sample
    return name, SAMPLES[name]


def think_median(args) -> str:
    """The web think time's median: `--think-median`, else the one calibrated on the built-in
    sample in use (`--sample`; a `--relays` file keeps the default sample's) in the path
    order in use (`--path-order`). Raises ValueError for a `--think` shape never calibrated
    on that sample."""
    if args.think_median:
        return args.think_median
    name, sample = sample_in_use(args)
    if args.think not in sample.think_medians:
        raise ValueError(f"--think {args.think}: not calibrated on --sample {name}; give --think-median")
    if args.path_order == "guard-first" and args.think in sample.guard_first_think_medians:
        return sample.guard_first_think_medians[args.think]
    return sample.think_medians[args.think]


def tor_settings(args) -> dict:
    """The settings of `client_settings` beyond the think time: the `[tor]` lines and the
    path-selection weights (also recorded in summary.json). Raises ValueError naming
    `--entry-guards` below 1."""
    if args.entry_guards < 1:
        raise ValueError(f"--entry-guards: must be at least 1, got {args.entry_guards}")
    return {
        "entry_guards": args.entry_guards, "predicted_circuits": args.predicted_circuits,
        "congestion_control": args.congestion_control, "cellq": args.cellq, "cbt_learning": args.cbt_learning,
        "path_order": args.path_order, "weights": args.weights or sample_in_use(args)[1].weights,
        "optimistic_data": args.optimistic_data, "refill_phase": args.refill_phase,
    }


def seconds(s: str) -> float:
    """A duration ("30 s", "20 min") in seconds, as the config parser reads it."""
    from onionlab._core import parse_duration

    return float(parse_duration(s))
