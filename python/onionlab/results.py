"""Experiment results: the :class:`Results` container and its on-disk form.

**Owns:** the table schemas of the ``downloads`` and ``relays`` tables, turning the column
dicts returned by ``_core.run_experiment`` into DataFrames, and writing/reading a results
directory. **Must not touch:** the simulation; statistics live in :mod:`onionlab.stats`.

A results directory holds::

    downloads.parquet   one row per download started after the warm-up (all seeds), sorted by
                        (seed, start, client): completed, failed, or still in progress when
                        the run ended (``error`` is ``stats.UNFINISHED``, ``received`` the
                        bytes it got)
    relays.parquet      one row per relay per metrics interval (all seeds): bytes, cells
                        queued, bucket-empty time, client connections, throttle rate, and
                        where its cells waited (cell-seconds in circuit queues, outbufs and
                        on the wire; ``stats.wait_split``)
    connections.parquet one row per client connection per relay per interval, when the config
                        sets experiment.connection_metrics_interval (else absent)
    channels.parquet    one row per relay-to-relay channel end per interval, when the config
                        sets experiment.channel_metrics_interval (else absent)
    circuits.parquet    one row per circuit (open or being built) per interval: downstream DATA cells
                        packaged and forwarded at the exit and delivered at the client, and
                        their time at the exit and in the overlay (byte-wise latency,
                        backlog), when the config sets experiment.circuit_metrics_interval
    summary.json        pooled per-class figures and per-seed run summaries (sorted keys)
    config.toml         the fully resolved config that produced them; the files it names
                        (a latency matrix, Markov models, empirical CDFs) are copied beside
                        it under the same relative names, so that ``onionlab run
                        DIR/config.toml`` runs it again (a name that leaves the directory,
                        ``../x.csv``, is not copied and must still resolve from there)
    timing.json         wall-clock seconds per seed (the only non-deterministic file)

Everything but ``timing.json`` is byte-identical for the same config, seeds and versions.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from onionlab import stats

#: Per download: its times are seconds from ``start`` (the client's request), in the order
#: they happen: ``begin`` (BEGIN sent: the wait for an open circuit, 0 on one already
#: open), ``connected`` (CONNECTED back at the client), ``ttfb`` and ``ttlb`` (first and
#: last byte of the response); null where the download did not get that far.
#: ``circuit_build_time`` is the build time of the circuit it used, whenever that was built.
DOWNLOADS_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("client", pa.string()),
        ("class", pa.string()),
        ("size", pa.int64()),
        ("received", pa.int64()),
        ("start", pa.float64()),
        ("begin", pa.float64()),
        ("connected", pa.float64()),
        ("ttfb", pa.float64()),
        ("ttlb", pa.float64()),
        ("goodput", pa.float64()),
        ("circuit_build_time", pa.float64()),
        ("path", pa.string()),
        ("error", pa.string()),
    ]
)

RELAYS_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("relay", pa.string()),
        ("interval_start", pa.float64()),
        ("bytes_read", pa.int64()),
        ("bytes_written", pa.int64()),
        ("queued_cells", pa.int64()),
        ("bucket_empty_s", pa.float64()),
        ("client_connections", pa.int64()),
        ("throttled_connections", pa.int64()),
        ("throttle_rate", pa.float64()),
        ("cells_queued", pa.int64()),
        ("queue_wait_cell_s", pa.float64()),
        ("outbuf_wait_cell_s", pa.float64()),
        ("wire_wait_cell_s", pa.float64()),
        ("kernel_wait_cell_s", pa.float64()),
        ("link_wait_cell_s", pa.float64()),
        ("unread_wait_cell_s", pa.float64()),
    ]
)

CONNECTIONS_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("relay", pa.string()),
        ("client", pa.string()),
        ("class", pa.string()),
        ("interval_start", pa.float64()),
        ("bytes_written", pa.int64()),
        ("bytes_read", pa.int64()),
        ("throttle_rate", pa.float64()),
        ("bucket_empty_s", pa.float64()),
        ("circuit_throttle_rate", pa.float64()),
    ]
)

CHANNELS_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("relay", pa.string()),
        ("peer", pa.string()),
        ("initiator", pa.bool_()),
        ("interval_start", pa.float64()),
        ("bytes_written", pa.int64()),
        ("bytes_read", pa.int64()),
        ("circuits", pa.int64()),
        ("active_circuits", pa.int64()),
        ("queued_cells", pa.int64()),
    ]
)

CIRCUITS_SCHEMA = pa.schema(
    [
        ("seed", pa.int64()),
        ("client", pa.string()),
        ("class", pa.string()),
        ("circuit", pa.int64()),
        ("created", pa.float64()),
        ("path", pa.string()),
        ("interval_start", pa.float64()),
        ("cells_packaged", pa.int64()),
        ("cells_forwarded", pa.int64()),
        ("cells_delivered", pa.int64()),
        ("exit_queued_cells", pa.int64()),
        ("backlog_cells", pa.int64()),
        ("exit_wait_cell_s", pa.float64()),
        ("transit_cell_s", pa.float64()),
    ]
)

#: The tables a run has only when its config asks for them: attribute (and file stem) and schema.
OPTIONAL_TABLES = {"connections": CONNECTIONS_SCHEMA, "channels": CHANNELS_SCHEMA, "circuits": CIRCUITS_SCHEMA}

FILES = ("downloads.parquet", "relays.parquet", "summary.json", "config.toml")

#: Every table a run may return: name -> schema.
RUN_TABLES = {"downloads": DOWNLOADS_SCHEMA, "relays": RELAYS_SCHEMA, **OPTIONAL_TABLES}


def table(columns: Mapping[str, Any], schema: pa.Schema) -> pd.DataFrame:
    """A DataFrame with exactly `schema`'s columns and types from a dict of columns
    (missing columns are filled with nulls; extra columns are kept at the end). A column is
    a list of values, or one of the forms ``_core.run_experiment`` sends (no Python object
    per value): ``(dtype, bytes)``, little-endian numbers NumPy reads as they are (a float
    NaN is missing), or ``("dict", codes, names)``, ``<u4`` codes into a list of names."""
    n = max((_column_len(v) for v in columns.values()), default=0)
    arrays = {}
    for f in schema:
        arrays[f.name] = _column(columns[f.name], f.type) if f.name in columns else pa.nulls(n, type=f.type)
    t = pa.table(arrays, schema=schema)
    df = t.to_pandas()
    for k, v in columns.items():
        if k not in df.columns:
            df[k] = _column(v, None).to_pandas()
    return df


#: NumPy type of the codes of a dictionary-encoded column (``("dict", codes, names)``).
_CODES = "<u4"


def _column_len(value: Any) -> int:
    if isinstance(value, tuple):
        return len(value[1]) // np.dtype(_CODES if value[0] == "dict" else value[0]).itemsize
    return len(value)


def _column(value: Any, typ: pa.DataType | None) -> pa.Array:
    """One column (a list, or an encoded form; :func:`table`) as an Arrow array of `typ`."""
    if not isinstance(value, tuple):
        return pa.array(list(value), type=typ)
    kind, data = value[0], value[1]
    if kind == "dict":
        names = pa.array(value[2], type=pa.string())
        return names.take(pa.array(np.frombuffer(data, dtype=_CODES))).cast(typ or pa.string())
    return pa.array(np.frombuffer(data, dtype=kind), type=typ, from_pandas=True)


def typed_run(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` (a ``_core.run_experiment`` return value) with each table as a DataFrame of
    its schema, as :meth:`Results.from_runs` would build it. A worker process calls this
    before sending its run back: a DataFrame pickles in a tenth of the time of the column
    lists, and the parent then does not convert every run one after another."""
    return {k: _frame(v, RUN_TABLES[k]) if k in RUN_TABLES else v for k, v in run.items()}


def _frame(columns: Mapping[str, list] | pd.DataFrame, schema: pa.Schema) -> pd.DataFrame:
    return columns if isinstance(columns, pd.DataFrame) else table(columns, schema)


def _conform(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """An Arrow table of `df` in `schema` order and types, without the pandas index."""
    cols = {f.name: (df[f.name] if f.name in df.columns else pd.Series([None] * len(df))) for f in schema}
    extra = [c for c in df.columns if c not in cols]
    arrays = [_arrow_column(cols[f.name], f.type) for f in schema]
    fields = list(schema)
    for c in extra:
        a = pa.array(df[c].tolist())
        arrays.append(a)
        fields.append(pa.field(str(c), a.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _arrow_column(col: pd.Series, typ: pa.DataType) -> pa.Array:
    """`col` as an Arrow array of `typ`, missing values (None, NaN) as nulls. Converted
    column-wise; a column Arrow cannot take that way (say, whole floats in an integer
    column) goes value by value, as Python objects."""
    try:
        return pa.Array.from_pandas(col, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.array(col.astype(object).where(col.notna(), None).tolist(), type=typ)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, default=stats._clean) + "\n"


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return stats._clean(obj)


@dataclass
class Results:
    """The results of one experiment (one or more seeds).

    ``downloads`` and ``relays`` hold every seed's rows (a ``seed`` column tells them apart);
    ``connections`` is the per-client-connection table (empty unless the config sets
    ``experiment.connection_metrics_interval``); ``channels`` the per-channel table of
    relay-to-relay channels (empty unless it sets ``experiment.channel_metrics_interval``);
    ``circuits`` the per-circuit transit table (empty unless it sets
    ``experiment.circuit_metrics_interval``; :func:`onionlab.stats.byte_latency` reads it);
    ``summary`` holds pooled per-class figures and per-seed summaries under ``"runs"`` (see
    :mod:`onionlab.stats`); ``config`` is the resolved TOML; ``timing`` maps seed to wall
    seconds (not part of the deterministic output).
    """

    downloads: pd.DataFrame
    relays: pd.DataFrame
    summary: dict
    config: str
    timing: dict = field(default_factory=dict)
    source: str | None = None
    connections: pd.DataFrame = field(default_factory=lambda: table({}, CONNECTIONS_SCHEMA))
    channels: pd.DataFrame = field(default_factory=lambda: table({}, CHANNELS_SCHEMA))
    circuits: pd.DataFrame = field(default_factory=lambda: table({}, CIRCUITS_SCHEMA))
    #: The directory the config's relative file names resolve against (the experiment
    #: file's, or a results directory's): :meth:`write` copies the files from there.
    files_dir: str | None = None

    @classmethod
    def from_runs(cls, runs: list[dict[str, Any]], config: str) -> "Results":
        """Builds Results from ``_core.run_experiment`` return values (one per seed), as
        returned or after :func:`typed_run`."""
        runs = sorted(runs, key=lambda r: int(r["summary"]["seed"]))
        dls = [_frame(r["downloads"], DOWNLOADS_SCHEMA) for r in runs] or [table({}, DOWNLOADS_SCHEMA)]
        rls = [_frame(r["relays"], RELAYS_SCHEMA) for r in runs] or [table({}, RELAYS_SCHEMA)]
        downloads = pd.concat(dls, ignore_index=True)
        downloads = downloads.sort_values(["seed", "start", "client"], kind="mergesort").reset_index(drop=True)
        relays = pd.concat(rls, ignore_index=True)
        relays = relays.sort_values(["seed"], kind="mergesort").reset_index(drop=True)
        optional = {
            name: pd.concat([_frame(r.get(name, {}), schema) for r in runs] or [table({}, schema)], ignore_index=True)
            .sort_values(["seed"], kind="mergesort")
            .reset_index(drop=True)
            for name, schema in OPTIONAL_TABLES.items()
        }
        per_seed = []
        timing = {}
        for r in runs:
            s = dict(r["summary"])
            wall = s.pop("wall_seconds", None)
            timing[str(s["seed"])] = wall
            per_seed.append(_json_safe(s))
        summary = _json_safe(stats.pooled_summary(downloads, per_seed))
        return cls(
            downloads=downloads,
            relays=relays,
            summary=summary,
            config=config,
            timing=timing,
            **optional,
        )

    @property
    def label(self) -> str:
        """The experiment name (or the directory it was loaded from)."""
        return str(self.summary.get("experiment") or (Path(self.source).name if self.source else "experiment"))

    def write(self, directory: str | os.PathLike) -> Path:
        """Writes the results directory (see the module docstring); returns its path.

        Each file is written beside its final name and then renamed over it, so a file
        is never half-written under its name, and a file shared with another directory
        by a hard link (``cp -al`` of an earlier output, to reuse its runs) is replaced
        rather than overwritten: the other directory keeps its own results."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        # config.toml goes first and comes back last: a write cut short leaves no config,
        # so `--reuse-runs` (which finds runs by their config) never pairs an old config
        # with new tables.
        (d / "config.toml").unlink(missing_ok=True)
        for name, df, schema in (
            ("downloads.parquet", self.downloads, DOWNLOADS_SCHEMA),
            ("relays.parquet", self.relays, RELAYS_SCHEMA),
        ):
            _replace(d / name, lambda tmp, df=df, schema=schema: pq.write_table(_conform(df, schema), tmp, compression="zstd"))
        for name, schema in OPTIONAL_TABLES.items():
            df = getattr(self, name)
            if len(df):
                _replace(d / f"{name}.parquet", lambda tmp, df=df, schema=schema: pq.write_table(_conform(df, schema), tmp, compression="zstd"))
            else:  # an earlier write's table must not be read back as this one's
                (d / f"{name}.parquet").unlink(missing_ok=True)
        summary, timing = _json(_json_safe(self.summary)), _json(_json_safe({"wall_seconds": self.timing}))
        _replace(d / "summary.json", lambda tmp: tmp.write_text(summary, encoding="utf-8"))
        _replace(d / "timing.json", lambda tmp: tmp.write_text(timing, encoding="utf-8"))
        if self.files_dir is not None:
            _copy_config_files(self.config, Path(self.files_dir), d)
        cfg = self.config if self.config.endswith("\n") else self.config + "\n"
        _replace(d / "config.toml", lambda tmp: tmp.write_text(cfg, encoding="utf-8"))
        return d


def config_files(config_text: str) -> list[str]:
    """The file names a resolved config holds, as the loader reads them: the latency matrix
    or GML topology, ``relays_file``, and every ``file``, ``stream_model`` and
    ``packet_model`` inside ``[workloads]``."""
    from onionlab import config as config_mod

    try:
        cfg = config_mod.parse(config_text)
    except ValueError:  # not TOML (a hand-made Results): nothing to copy
        return []
    names = []
    latency = cfg.get("network", {}).get("latency", {})
    if isinstance(latency, dict):
        names += [latency[k] for k in ("matrix", "gml") if isinstance(latency.get(k), str)]
    if isinstance(cfg.get("relays_file"), str):
        names.append(cfg["relays_file"])

    def walk(t: dict) -> None:
        for k, v in t.items():
            if isinstance(v, dict):
                walk(v)
            elif k in ("file", "stream_model", "packet_model") and isinstance(v, str):
                names.append(v)

    walk(cfg.get("workloads", {}))
    return names


def _copy_config_files(config_text: str, src_dir: Path, dest_dir: Path) -> None:
    """Copies the config's relative file names from `src_dir` to the same names under
    `dest_dir`; names that would leave `dest_dir` (``../x``) are left where they are."""
    import shutil

    dest_root = dest_dir.resolve()
    for name in config_files(config_text):
        if os.path.isabs(name):
            continue
        src, dest = (src_dir / name).resolve(), (dest_root / name).resolve()
        if dest_root not in dest.parents or src == dest or not src.is_file():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        _replace(dest, lambda tmp, src=src: shutil.copyfile(src, tmp))


def ensure_output_dir(directory: str | os.PathLike, name: str = "out") -> Path:
    """Creates the output directory `directory` (and its parents) if missing, before a
    command does its work: a path that is a file, or that cannot be created, is an error
    naming `name` now, not after hours of simulation."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise NotADirectoryError(f"{name}: {d} exists and is not a directory")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise type(e)(f"{name}: cannot create the directory {d}: {e.strerror or e}") from None
    return d


@contextlib.contextmanager
def output_dir(directory: str | os.PathLike, name: str = "out") -> Iterator[Path]:
    """:func:`ensure_output_dir` around a block of work: if the block fails and the directory
    is one it created and still empty (a refused option, a run that failed before writing),
    it is removed again, so a failed command leaves nothing behind."""
    created = not Path(directory).exists()
    d = ensure_output_dir(directory, name)
    try:
        yield d
    except BaseException:
        if created:
            with contextlib.suppress(OSError):  # not empty: keep what was written
                d.rmdir()
        raise


def _replace(path: Path, write) -> None:
    """Calls ``write(tmp)`` for a temporary path beside ``path``, then renames it over
    ``path`` (a new inode: a hard link to the old file keeps the old contents). The
    temporary file is removed if ``write`` fails."""
    tmp = path.with_name(f".{path.name}.partial")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load(directory: str | os.PathLike) -> Results:
    """Reads a results directory written by :meth:`Results.write`. Raises
    ``FileNotFoundError`` naming what is missing."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such results directory")
    missing = [f for f in FILES if not (d / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{d}: not a results directory (missing {', '.join(missing)})")
    downloads = pq.read_table(d / "downloads.parquet").to_pandas()
    relays = pq.read_table(d / "relays.parquet").to_pandas()
    optional = {
        name: pq.read_table(d / f"{name}.parquet").to_pandas() if (d / f"{name}.parquet").is_file() else table({}, schema)
        for name, schema in OPTIONAL_TABLES.items()
    }
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    config = (d / "config.toml").read_text(encoding="utf-8")
    timing = {}
    if (d / "timing.json").is_file():
        timing = json.loads((d / "timing.json").read_text(encoding="utf-8")).get("wall_seconds", {})
    return Results(
        downloads=downloads,
        relays=relays,
        summary=summary,
        config=config,
        timing=timing,
        source=str(d),
        files_dir=str(d),
        **optional,
    )


def load_for_reuse(directory: str | os.PathLike, what: str) -> "Results | None":
    """:func:`load`, for a run found to reuse (`what` names the option, ``resume``): a
    directory that cannot be read (a damaged or truncated table) is reported on stderr and
    gives None, so its run is done again rather than ending the whole command."""
    import sys

    try:
        return load(directory)
    except Exception as e:  # pyarrow, json and OS errors alike: the run is simply redone
        print(f"{what}: {directory} cannot be read ({type(e).__name__}: {e}); running it again", file=sys.stderr)
        return None


def as_results(x: "Results | str | os.PathLike") -> Results:
    """`x` itself if it is a :class:`Results`, else the results loaded from directory `x`."""
    return x if isinstance(x, Results) else load(x)
