//! Result rows of one run, named as in tornettools where a name exists.
//!
//! **Owns:** the row types and the per-run summary. **Must not touch:** how they are
//! written to disk (the Python layer writes Parquet and JSON).

use std::collections::BTreeMap;

/// A relay's, client's or client group's name in a result row. Every row that names the
/// same node or group shares one allocation with the network's own copy
/// ([`onionlab_core::Name`]): a run with per-second connection samples has a million rows,
/// and a `String` each would cost three allocations per row.
pub use onionlab_core::Name;

/// One download (tornettools: a "transfer"). Times in seconds from the start of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct DownloadRow {
    pub seed: u64,
    pub client: Name,
    /// The client's group name, e.g. "web" or "bulk".
    pub class: Name,
    pub size: u64,
    /// Response bytes the client had received: `size` for a completed download, fewer for
    /// a failed or unfinished one.
    pub received: u64,
    pub start: f64,
    /// Time until the client sent BEGIN, seconds from `start`: the wait for an open circuit.
    pub begin: Option<f64>,
    /// Time until CONNECTED reached the client, seconds from `start`.
    pub connected: Option<f64>,
    /// Time to first byte, seconds from `start`.
    pub ttfb: Option<f64>,
    /// Time to last byte, seconds from `start`.
    pub ttlb: Option<f64>,
    /// size / ttlb, bytes per second.
    pub goodput: Option<f64>,
    pub circuit_build_time: Option<f64>,
    /// "guard,middle,exit" relay names.
    pub path: String,
    /// Why the download did not complete: a failure, or `onionlab_tor::UNFINISHED` for
    /// one still in progress when the run ended (its time to last byte is only known to
    /// exceed the time it ran for). `None`: completed.
    pub error: Option<String>,
}

/// One relay over one metrics interval.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayRow {
    pub seed: u64,
    pub relay: Name,
    pub interval_start: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Cells in the relay's circuit queues and outbufs at the end of the interval.
    pub queued_cells: u64,
    /// Time the relay's read or write bucket was empty at a refill, in the interval
    /// (refill intervals found empty x refill interval).
    pub bucket_empty_s: f64,
    /// Client connections open at the end of the interval, and how many of them had a
    /// per-connection throttle.
    pub client_connections: u64,
    pub throttled_connections: u64,
    /// The relay's throttling policy's current threshold rate (bytes/s): the rate above
    /// which it would throttle a client connection (`RelayHook::throttle_threshold`).
    pub throttle_rate: Option<u64>,
    /// Cells that entered the relay's circuit queues in the interval (relayed from the
    /// previous hop, or packaged at an exit).
    pub cells_queued: u64,
    /// Cell-seconds the relay's cells spent in the interval in its circuit queues, its
    /// outbufs, and on the wire from it (kernel, link, the next node's unread buffer): the
    /// design's queue-time split (`onionlab_tor::wait`). Divided by `cells_queued`, each is
    /// Little's law's mean wait per cell there.
    pub queue_wait_cell_s: f64,
    pub outbuf_wait_cell_s: f64,
    pub wire_wait_cell_s: f64,
    /// `wire_wait_cell_s` in parts, on channels to relays (byte-seconds over a cell's 543
    /// bytes; clients read what arrives at once, and channels to them are not split): in
    /// the relay's kernel send buffer, on the link (serialisation, propagation, the next
    /// relay's downlink), and unread in the next relay's receive buffer (its read bucket
    /// held them back).
    /// `None` unless `experiment.wire_waits`.
    pub kernel_wait_cell_s: Option<f64>,
    pub link_wait_cell_s: Option<f64>,
    pub unread_wait_cell_s: Option<f64>,
}

/// One client connection at one relay over one connection-metrics interval.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionRow {
    pub seed: u64,
    pub relay: Name,
    pub client: Name,
    /// The client's group name.
    pub class: Name,
    pub interval_start: f64,
    /// Bytes the relay sent to / received from the client in the interval (on the wire).
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// The connection's throttle rate at the end of the interval, bytes/s; `None`:
    /// unthrottled.
    pub throttle_rate: Option<u64>,
    /// Time in the interval that the throttle actually held the connection back: refills
    /// at which its own read or write bucket was empty, times the refill interval. Zero
    /// while a throttle rate sits above what the connection sends.
    pub bucket_empty_s: f64,
    /// The rate of the buckets each circuit over the connection has at the relay at the
    /// end of the interval, bytes/s (Tortoise's `limit_unit = "circuit"`); `None`: its
    /// circuits are not limited one by one.
    pub circuit_throttle_rate: Option<u64>,
}

/// One relay's end of a channel to another relay over one channel-metrics interval: the
/// per-channel view of where a relay's traffic and queues sit (which neighbour a saturated
/// relay's bandwidth goes to, and how many circuits share it).
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelRow {
    pub seed: u64,
    /// The relay at this end, and the relay at the other.
    pub relay: Name,
    pub peer: Name,
    /// `relay` opened the channel.
    pub initiator: bool,
    pub interval_start: f64,
    /// Bytes written to / read from the kernel at this end in the interval. A channel
    /// that closed during the interval has no row for it: bytes since its last sample are
    /// not reported.
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// At the end of the interval: circuits over the channel, those with cells waiting to
    /// be written at this end, and the cells waiting (circuit queues plus outbuf).
    pub circuits: u64,
    pub active_circuits: u64,
    pub queued_cells: u64,
}

/// One circuit over one circuit-metrics interval: its downstream DATA cells packaged at the
/// exit, forwarded by the exit into the overlay, and delivered at the client, and the time
/// they spent in between ([`onionlab_tor::transit`]). The byte-wise latency of the
/// PredicTor paper over the interval is `transit_cell_s / cells_delivered` seconds, its mean
/// backlog `transit_cell_s / interval` cells; `exit_wait_cell_s` adds the time in the
/// exit's queue.
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitRow {
    pub seed: u64,
    pub client: Name,
    /// The client's group name.
    pub class: Name,
    /// The circuit's slot, and when it was created (a slot is reused once a circuit has
    /// closed): together they name one circuit within a seed.
    pub circuit: u64,
    pub created: f64,
    /// Guard, middle and exit, comma-separated.
    pub path: String,
    pub interval_start: f64,
    /// DATA cells packaged at the exit / forwarded by it / delivered at the client in the
    /// interval.
    pub cells_packaged: u64,
    pub cells_forwarded: u64,
    pub cells_delivered: u64,
    /// At the end of the interval: cells in the exit's queue, and cells forwarded and not
    /// yet delivered (the paper's backlog, definition 1, in cells).
    pub exit_queued_cells: u64,
    pub backlog_cells: u64,
    /// Cells waiting at the exit / in the overlay integrated over the interval, in
    /// cell-seconds.
    pub exit_wait_cell_s: f64,
    pub transit_cell_s: f64,
}

/// Per-class totals of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassTotals {
    /// Downloads started in the measured window: completed + errors + unfinished.
    pub downloads: u64,
    /// Downloads that failed (their circuit closed).
    pub errors: u64,
    /// Downloads still in progress when the run ended.
    pub unfinished: u64,
    /// Bytes of completed downloads.
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub experiment: String,
    pub seed: u64,
    pub sim_seconds: f64,
    pub warmup_seconds: f64,
    pub events: u64,
    /// Wall-clock seconds of the run (not deterministic; kept out of result files).
    pub wall_seconds: f64,
    pub counters: BTreeMap<String, u64>,
    pub classes: BTreeMap<String, ClassTotals>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunOutput {
    pub downloads: Vec<DownloadRow>,
    pub relays: Vec<RelayRow>,
    /// Empty unless `experiment.connection_metrics_interval` is set.
    pub connections: Vec<ConnectionRow>,
    /// Empty unless `experiment.channel_metrics_interval` is set.
    pub channels: Vec<ChannelRow>,
    /// Empty unless `experiment.circuit_metrics_interval` is set.
    pub circuits: Vec<CircuitRow>,
    pub summary: RunSummary,
}
