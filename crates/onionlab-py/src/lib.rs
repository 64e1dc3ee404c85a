//! PyO3 glue: the simulator as the Python module `onionlab._core`.
//!
//! **Owns:** conversion between Python values and the Rust API, and mapping Rust errors to
//! Python exceptions that name the offending field. **Must not touch:** model logic; every
//! computation happens in the Rust crates, so Python and Rust users get the same results.

use onionlab_core::SimDuration;
use onionlab_net::{jain_index, HostSpec, LatencyModel, TransferRunner, TransportConfig};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// Large arrays on transparent huge pages: a full-scale run is bound by TLB misses
/// otherwise (`onionlab_core::alloc`).
#[global_allocator]
static ALLOC: onionlab_core::HugePageAlloc = onionlab_core::HugePageAlloc;

create_exception!(_core, ConfigError, PyValueError, "The experiment config has problems; args[1] lists them.");

fn positive(name: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(PyValueError::new_err(format!("{name}: must be a positive number, got {v}")))
    }
}

/// `v` as an unsigned `T` if it is at least `min` and fits one; else an error naming `name`.
fn whole<T: TryFrom<i128>>(name: &str, v: i128, min: i128) -> PyResult<T> {
    match T::try_from(v) {
        Ok(x) if v >= min => Ok(x),
        _ => Err(PyValueError::new_err(format!("{name}: must be at least {min} and below 2^{}, got {v}", 8 * std::mem::size_of::<T>()))),
    }
}

/// Runs the built-in transport example: `flows` senders, each on its own 100 Mbit/s host,
/// send `size_bytes` each to one sink whose downlink of `bottleneck_mbit` Mbit/s they share,
/// over a path of round-trip time `rtt_ms`, for at most `seconds` simulated seconds.
///
/// Returns a dict with per-flow lists (`bytes`, `completion_s`, `goodput_mbit`) and the
/// summary figures `jain_index`, `utilisation`, `events`, `sim_seconds`.
#[pyfunction]
#[pyo3(signature = (flows=10, bottleneck_mbit=20.0, rtt_ms=80.0, size_bytes=5_242_880, seconds=60.0, seed=1))]
fn transport_demo(
    py: Python<'_>,
    flows: i128,
    bottleneck_mbit: f64,
    rtt_ms: f64,
    size_bytes: i128,
    seconds: f64,
    seed: i128,
) -> PyResult<Py<PyDict>> {
    // Taken as i128 and range-checked here, so that a negative or huge count is an error
    // naming its argument rather than PyO3's unnamed conversion error.
    let flows: u32 = whole("flows", flows, 1)?;
    let size_bytes: u64 = whole("size_bytes", size_bytes, 1)?;
    let seed: u64 = whole("seed", seed, 0)?;
    let bottleneck = positive("bottleneck_mbit", bottleneck_mbit)?;
    let rtt = positive("rtt_ms", rtt_ms)?;
    let secs = positive("seconds", seconds)?;
    let latency = LatencyModel::constant(SimDuration::from_secs_f64(rtt / 2000.0));
    let mut run = TransferRunner::new(TransportConfig::default(), latency, seed);
    let err = |e: onionlab_net::NetError| PyValueError::new_err(e.to_string());
    let sink = run
        .net
        .add_host(HostSpec {
            name: "sink".into(),
            location: 0,
            up_bits_per_sec: 1_000_000_000,
            down_bits_per_sec: (bottleneck * 1e6).round() as u64,
        })
        .map_err(err)?;
    for i in 0..flows {
        let src = run
            .net
            .add_host(HostSpec {
                name: format!("src{i}").into(),
                location: 0,
                up_bits_per_sec: 100_000_000,
                down_bits_per_sec: 100_000_000,
            })
            .map_err(err)?;
        run.transfer(src, sink, size_bytes).map_err(err)?;
    }
    let end = onionlab_core::SimTime::ZERO + SimDuration::from_secs_f64(secs);
    py.allow_threads(|| run.run_until(end, |_| {}));
    let sim_s = run.q.now().as_secs_f64();
    let bytes: Vec<u64> = run.transfers.iter().map(|t| t.read).collect();
    let completion: Vec<Option<f64>> = run.transfers.iter().map(|t| t.done_at.map(|d| d.as_secs_f64())).collect();
    let goodput: Vec<f64> = run
        .transfers
        .iter()
        .map(|t| {
            let d = t.done_at.map_or(sim_s, |d| d.as_secs_f64());
            if d > 0.0 {
                t.read as f64 * 8.0 / d / 1e6
            } else {
                0.0
            }
        })
        .collect();
    let out = PyDict::new(py);
    out.set_item("bytes", bytes.clone())?;
    out.set_item("completion_s", completion)?;
    out.set_item("goodput_mbit", goodput.clone())?;
    out.set_item("jain_index", jain_index(&goodput))?;
    let total: u64 = bytes.iter().sum();
    out.set_item("utilisation", if sim_s > 0.0 { total as f64 * 8.0 / sim_s / (bottleneck * 1e6) } else { 0.0 })?;
    out.set_item("events", run.q.events_processed())?;
    out.set_item("sim_seconds", sim_s)?;
    Ok(out.unbind())
}

/// Loads and validates the config at `path` with `overrides` (`PATH=VALUE`, applied in
/// order; see `onionlab_config::overrides`). Every problem, an unparsable override's
/// included, is raised at once as `ConfigError`.
fn load_config(py: Python<'_>, path: &str, overrides: &[String]) -> PyResult<onionlab_config::model::ExperimentConfig> {
    let mut parsed = Vec::with_capacity(overrides.len());
    let mut bad = Vec::new();
    for o in overrides {
        match onionlab_config::Override::parse(o) {
            Ok(o) => parsed.push(o),
            Err(e) => bad.push(e),
        }
    }
    let loaded = if bad.is_empty() {
        onionlab_config::load_file_with(std::path::Path::new(path), &parsed)
    } else {
        Err(onionlab_config::ConfigErrors(bad))
    };
    loaded.map_err(|errs| {
        let problems = PyList::empty(py);
        for e in &errs.0 {
            let d = PyDict::new(py);
            let _ = d.set_item("path", &e.path);
            let _ = d.set_item("message", &e.message);
            let _ = d.set_item("hint", e.hint.as_deref());
            let _ = problems.append(d);
        }
        ConfigError::new_err((errs.to_string(), problems.unbind()))
    })
}

/// Validates the experiment file at `path` with `overrides` (a list of `PATH=VALUE`
/// strings); returns the fully resolved config as TOML. Raises `ConfigError` listing every
/// problem.
#[pyfunction]
#[pyo3(signature = (path, overrides=Vec::new()))]
fn check_config(py: Python<'_>, path: &str, overrides: Vec<String>) -> PyResult<String> {
    let cfg = load_config(py, path, &overrides)?;
    Ok(onionlab_config::to_toml(&cfg))
}

// ---------------------------------------------------------------- result columns
//
// A result table goes to Python as a dict of columns. A numeric column is one bytes object
// of little-endian values with its NumPy type string, `(dtype, bytes)`; a column of names
// (relays, clients, classes) is dictionary-encoded, `("dict", codes, names)`: `<u4` codes
// into the list of distinct names. Neither builds a Python object per value, which a list
// would (a 20-minute medium-load run with 1 s connection samples has a million rows).
// Free-text columns (paths, errors) stay lists. `onionlab.results.table` reads all three.

/// A float column; `None` becomes NaN, which the tables read as missing.
fn f64_column<'py>(d: &Bound<'py, PyDict>, name: &str, values: impl ExactSizeIterator<Item = Option<f64>>) -> PyResult<()> {
    let mut buf = Vec::with_capacity(values.len() * 8);
    for v in values {
        buf.extend_from_slice(&v.unwrap_or(f64::NAN).to_le_bytes());
    }
    d.set_item(name, ("<f8", PyBytes::new(d.py(), &buf)))
}

/// An integer column (the tables' int64); a value beyond int64 is an error naming the column.
fn i64_column<'py>(d: &Bound<'py, PyDict>, name: &str, values: impl ExactSizeIterator<Item = u64>) -> PyResult<()> {
    let mut buf = Vec::with_capacity(values.len() * 8);
    for v in values {
        let v = i64::try_from(v).map_err(|_| PyValueError::new_err(format!("result column {name}: {v} does not fit in int64")))?;
        buf.extend_from_slice(&v.to_le_bytes());
    }
    d.set_item(name, ("<i8", PyBytes::new(d.py(), &buf)))
}

fn bool_column<'py>(d: &Bound<'py, PyDict>, name: &str, values: impl ExactSizeIterator<Item = bool>) -> PyResult<()> {
    let buf: Vec<u8> = values.map(u8::from).collect();
    d.set_item(name, ("|b1", PyBytes::new(d.py(), &buf)))
}

/// A column of names, dictionary-encoded; codes follow the names' first appearance.
fn name_column<'py, 'a>(d: &Bound<'py, PyDict>, name: &str, values: impl ExactSizeIterator<Item = &'a str>) -> PyResult<()> {
    let mut codes = Vec::with_capacity(values.len() * 4);
    let mut index: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    for v in values {
        let code = *index.entry(v).or_insert_with(|| {
            names.push(v);
            (names.len() - 1) as u32
        });
        codes.extend_from_slice(&code.to_le_bytes());
    }
    d.set_item(name, ("dict", PyBytes::new(d.py(), &codes), names))
}

/// Runs one seed of the experiment at `path` with `overrides` (`PATH=VALUE` strings, as for
/// `check_config`). `progress(sim_done_s, sim_total_s, events)`
/// is called about 100 times. Returns {"downloads": {column: ...}, "relays": {...},
/// "connections": {...}, "channels": {...}, "summary": {...}}, each column encoded as the
/// "result columns" comment above says.
#[pyfunction]
#[pyo3(signature = (path, seed, progress=None, overrides=Vec::new()))]
fn run_experiment(py: Python<'_>, path: &str, seed: u64, progress: Option<PyObject>, overrides: Vec<String>) -> PyResult<Py<PyDict>> {
    let cfg = load_config(py, path, &overrides)?;
    let mut cb_err: Option<PyErr> = None;
    let out = {
        let mut cb = |done: f64, total: f64, events: u64| {
            if let (Some(p), None) = (progress.as_ref(), cb_err.as_ref()) {
                if let Err(e) = p.call1(py, (done, total, events)) {
                    cb_err = Some(e);
                }
            }
            // Let Ctrl-C interrupt long runs.
            if cb_err.is_none() {
                if let Err(e) = py.check_signals() {
                    cb_err = Some(e);
                }
            }
        };
        onionlab_sim::run(&cfg, seed, Some(&mut cb))
    };
    if let Some(e) = cb_err {
        return Err(e);
    }
    let out = out.map_err(|e| PyValueError::new_err(e.to_string()))?;

    let dl = PyDict::new(py);
    let d = &out.downloads;
    i64_column(&dl, "seed", d.iter().map(|r| r.seed))?;
    name_column(&dl, "client", d.iter().map(|r| &*r.client))?;
    name_column(&dl, "class", d.iter().map(|r| &*r.class))?;
    i64_column(&dl, "size", d.iter().map(|r| r.size))?;
    i64_column(&dl, "received", d.iter().map(|r| r.received))?;
    f64_column(&dl, "start", d.iter().map(|r| Some(r.start)))?;
    f64_column(&dl, "begin", d.iter().map(|r| r.begin))?;
    f64_column(&dl, "connected", d.iter().map(|r| r.connected))?;
    f64_column(&dl, "ttfb", d.iter().map(|r| r.ttfb))?;
    f64_column(&dl, "ttlb", d.iter().map(|r| r.ttlb))?;
    f64_column(&dl, "goodput", d.iter().map(|r| r.goodput))?;
    f64_column(&dl, "circuit_build_time", d.iter().map(|r| r.circuit_build_time))?;
    dl.set_item("path", d.iter().map(|r| r.path.as_str()).collect::<Vec<_>>())?;
    dl.set_item("error", d.iter().map(|r| r.error.as_deref()).collect::<Vec<_>>())?;

    let rl = PyDict::new(py);
    let r = &out.relays;
    i64_column(&rl, "seed", r.iter().map(|x| x.seed))?;
    name_column(&rl, "relay", r.iter().map(|x| &*x.relay))?;
    f64_column(&rl, "interval_start", r.iter().map(|x| Some(x.interval_start)))?;
    i64_column(&rl, "bytes_read", r.iter().map(|x| x.bytes_read))?;
    i64_column(&rl, "bytes_written", r.iter().map(|x| x.bytes_written))?;
    i64_column(&rl, "queued_cells", r.iter().map(|x| x.queued_cells))?;
    f64_column(&rl, "bucket_empty_s", r.iter().map(|x| Some(x.bucket_empty_s)))?;
    i64_column(&rl, "client_connections", r.iter().map(|x| x.client_connections))?;
    i64_column(&rl, "throttled_connections", r.iter().map(|x| x.throttled_connections))?;
    // Whole bytes/s, exact in a float (the table's type) below 2^53.
    f64_column(&rl, "throttle_rate", r.iter().map(|x| x.throttle_rate.map(|v| v as f64)))?;
    i64_column(&rl, "cells_queued", r.iter().map(|x| x.cells_queued))?;
    f64_column(&rl, "queue_wait_cell_s", r.iter().map(|x| Some(x.queue_wait_cell_s)))?;
    f64_column(&rl, "outbuf_wait_cell_s", r.iter().map(|x| Some(x.outbuf_wait_cell_s)))?;
    f64_column(&rl, "wire_wait_cell_s", r.iter().map(|x| Some(x.wire_wait_cell_s)))?;
    f64_column(&rl, "kernel_wait_cell_s", r.iter().map(|x| x.kernel_wait_cell_s))?;
    f64_column(&rl, "link_wait_cell_s", r.iter().map(|x| x.link_wait_cell_s))?;
    f64_column(&rl, "unread_wait_cell_s", r.iter().map(|x| x.unread_wait_cell_s))?;

    let cl = PyDict::new(py);
    let c = &out.connections;
    i64_column(&cl, "seed", c.iter().map(|x| x.seed))?;
    name_column(&cl, "relay", c.iter().map(|x| &*x.relay))?;
    name_column(&cl, "client", c.iter().map(|x| &*x.client))?;
    name_column(&cl, "class", c.iter().map(|x| &*x.class))?;
    f64_column(&cl, "interval_start", c.iter().map(|x| Some(x.interval_start)))?;
    i64_column(&cl, "bytes_written", c.iter().map(|x| x.bytes_written))?;
    i64_column(&cl, "bytes_read", c.iter().map(|x| x.bytes_read))?;
    f64_column(&cl, "throttle_rate", c.iter().map(|x| x.throttle_rate.map(|v| v as f64)))?;
    f64_column(&cl, "bucket_empty_s", c.iter().map(|x| Some(x.bucket_empty_s)))?;
    f64_column(&cl, "circuit_throttle_rate", c.iter().map(|x| x.circuit_throttle_rate.map(|v| v as f64)))?;

    let ch = PyDict::new(py);
    let c = &out.channels;
    i64_column(&ch, "seed", c.iter().map(|x| x.seed))?;
    name_column(&ch, "relay", c.iter().map(|x| &*x.relay))?;
    name_column(&ch, "peer", c.iter().map(|x| &*x.peer))?;
    bool_column(&ch, "initiator", c.iter().map(|x| x.initiator))?;
    f64_column(&ch, "interval_start", c.iter().map(|x| Some(x.interval_start)))?;
    i64_column(&ch, "bytes_written", c.iter().map(|x| x.bytes_written))?;
    i64_column(&ch, "bytes_read", c.iter().map(|x| x.bytes_read))?;
    i64_column(&ch, "circuits", c.iter().map(|x| x.circuits))?;
    i64_column(&ch, "active_circuits", c.iter().map(|x| x.active_circuits))?;
    i64_column(&ch, "queued_cells", c.iter().map(|x| x.queued_cells))?;

    let cr = PyDict::new(py);
    let c = &out.circuits;
    i64_column(&cr, "seed", c.iter().map(|x| x.seed))?;
    name_column(&cr, "client", c.iter().map(|x| &*x.client))?;
    name_column(&cr, "class", c.iter().map(|x| &*x.class))?;
    i64_column(&cr, "circuit", c.iter().map(|x| x.circuit))?;
    f64_column(&cr, "created", c.iter().map(|x| Some(x.created)))?;
    name_column(&cr, "path", c.iter().map(|x| x.path.as_str()))?;
    f64_column(&cr, "interval_start", c.iter().map(|x| Some(x.interval_start)))?;
    i64_column(&cr, "cells_packaged", c.iter().map(|x| x.cells_packaged))?;
    i64_column(&cr, "cells_forwarded", c.iter().map(|x| x.cells_forwarded))?;
    i64_column(&cr, "cells_delivered", c.iter().map(|x| x.cells_delivered))?;
    i64_column(&cr, "exit_queued_cells", c.iter().map(|x| x.exit_queued_cells))?;
    i64_column(&cr, "backlog_cells", c.iter().map(|x| x.backlog_cells))?;
    f64_column(&cr, "exit_wait_cell_s", c.iter().map(|x| Some(x.exit_wait_cell_s)))?;
    f64_column(&cr, "transit_cell_s", c.iter().map(|x| Some(x.transit_cell_s)))?;

    let s = &out.summary;
    let sm = PyDict::new(py);
    sm.set_item("experiment", &s.experiment)?;
    sm.set_item("seed", s.seed)?;
    sm.set_item("sim_seconds", s.sim_seconds)?;
    sm.set_item("warmup_seconds", s.warmup_seconds)?;
    sm.set_item("events", s.events)?;
    sm.set_item("wall_seconds", s.wall_seconds)?;
    let counters = PyDict::new(py);
    for (k, v) in &s.counters {
        counters.set_item(k, v)?;
    }
    sm.set_item("counters", counters)?;
    let classes = PyDict::new(py);
    for (k, v) in &s.classes {
        let c = PyDict::new(py);
        c.set_item("downloads", v.downloads)?;
        c.set_item("errors", v.errors)?;
        c.set_item("unfinished", v.unfinished)?;
        c.set_item("bytes", v.bytes)?;
        classes.set_item(k, c)?;
    }
    sm.set_item("classes", classes)?;

    let res = PyDict::new(py);
    res.set_item("downloads", dl)?;
    res.set_item("relays", rl)?;
    res.set_item("connections", cl)?;
    res.set_item("channels", ch)?;
    res.set_item("circuits", cr)?;
    res.set_item("summary", sm)?;
    Ok(res.unbind())
}

/// The max-min fair rates of `circuits` (each a list of node indices) over nodes of
/// `capacities`, by progressive filling (PredicTor's reference allocation,
/// `onionlab_mech::predictor::maxmin`). Raises ValueError for a negative or non-finite
/// capacity, an empty circuit or an unknown node.
#[pyfunction]
fn max_min_fair(capacities: Vec<f64>, circuits: Vec<Vec<usize>>) -> PyResult<Vec<f64>> {
    onionlab_mech::predictor::maxmin::max_min_fair(&capacities, &circuits).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The PredicTor paper's fairness index `F = 1 - sum |fair - observed| / sum fair`
/// (`onionlab_mech::predictor::maxmin::fairness_index`). Raises ValueError if the lengths
/// differ.
#[pyfunction]
fn fairness_index(fair: Vec<f64>, observed: Vec<f64>) -> PyResult<f64> {
    onionlab_mech::predictor::maxmin::fairness_index(&fair, &observed).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Bytes in a size string ("320 KiB"), as configs read it.
#[pyfunction]
fn parse_size(s: &str) -> PyResult<u64> {
    onionlab_core::units::parse_size(s).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Bytes per second in a rate string ("20 Mbit", "5 MiB/s"), as token-bucket rates read it.
#[pyfunction]
fn parse_byte_rate(s: &str) -> PyResult<u64> {
    onionlab_core::units::parse_bandwidth(s).map(|b| b / 8).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Seconds in a duration string ("10 min").
#[pyfunction]
fn parse_duration(s: &str) -> PyResult<f64> {
    onionlab_core::units::parse_duration(s).map(|d| d.as_secs_f64()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Nanoseconds in a duration string, exactly as the config reads it (for divisibility
/// checks that seconds as a float would round).
#[pyfunction]
fn parse_duration_ns(s: &str) -> PyResult<u64> {
    onionlab_core::units::parse_duration(s).map(|d| d.as_nanos()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Loads the experiment at `path` and builds its network (relays, clients, servers and the
/// clients' workload state) for `seed` without running it. Returns {"relays", "clients",
/// "servers", "nodes", "parse_seconds", "build_seconds"}. Raises `ConfigError` like
/// `check_config`.
#[pyfunction]
#[pyo3(signature = (path, seed=1, overrides=Vec::new()))]
fn load_network(py: Python<'_>, path: &str, seed: u64, overrides: Vec<String>) -> PyResult<Py<PyDict>> {
    let t0 = std::time::Instant::now();
    let cfg = load_config(py, path, &overrides)?;
    let parse_s = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let s = py.allow_threads(|| onionlab_sim::load::load(&cfg, seed)).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let build_s = t1.elapsed().as_secs_f64();
    let d = PyDict::new(py);
    d.set_item("relays", s.relays)?;
    d.set_item("clients", s.clients)?;
    d.set_item("servers", s.servers)?;
    d.set_item("nodes", s.nodes)?;
    d.set_item("parse_seconds", parse_s)?;
    d.set_item("build_seconds", build_s)?;
    Ok(d.unbind())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    // What one cell costs on a link (514 bytes and TLS framing): rates in bytes to cells.
    m.add("CELL_WIRE_BYTES", onionlab_tor::cell::CELL_WIRE_BYTES)?;
    m.add_function(wrap_pyfunction!(transport_demo, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(run_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(parse_byte_rate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration_ns, m)?)?;
    m.add_function(wrap_pyfunction!(load_network, m)?)?;
    m.add_function(wrap_pyfunction!(max_min_fair, m)?)?;
    m.add_function(wrap_pyfunction!(fairness_index, m)?)?;
    Ok(())
}
