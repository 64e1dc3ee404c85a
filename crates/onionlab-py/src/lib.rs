//! PyO3 glue: the simulator as the Python module `onionlab._core`.
//!
//! **Owns:** conversion between Python values and the Rust API, and mapping Rust errors to
//! Python exceptions that name the offending field. **Must not touch:** model logic; every
//! computation happens in the Rust crates, so Python and Rust users get the same results.

use onionlab_core::SimDuration;
use onionlab_net::{jain_index, HostSpec, LatencyModel, TransferRunner, TransportConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn positive(name: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(PyValueError::new_err(format!("{name}: must be a positive number, got {v}")))
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
    flows: u32,
    bottleneck_mbit: f64,
    rtt_ms: f64,
    size_bytes: u64,
    seconds: f64,
    seed: u64,
) -> PyResult<Py<PyDict>> {
    if flows == 0 {
        return Err(PyValueError::new_err("flows: must be at least 1"));
    }
    if size_bytes == 0 {
        return Err(PyValueError::new_err("size_bytes: must be at least 1"));
    }
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
                name: format!("src{i}"),
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
            if d > 0.0 { t.read as f64 * 8.0 / d / 1e6 } else { 0.0 }
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

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(transport_demo, m)?)?;
    Ok(())
}
