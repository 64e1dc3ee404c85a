//! Tor nodes: relays and clients (one tor process each), and the servers they reach.
//!
//! **Owns:** a node's role, its global read and write token buckets, its per-connection
//! bucket settings (PerConnBWRate/Burst), the rings of connections ready to read and to
//! write, and its statistics. **Must not touch:** circuits or cells; [`crate::network`]
//! moves them.

use std::collections::VecDeque;

use onionlab_core::rng::ParkedRng;
use onionlab_net::{HostId, Side};

use crate::path::RelayFlags;
use crate::scheduler::SchedulerKind;
use crate::token_bucket::TokenBucket;

/// Index of a node in its [`crate::TorNetwork`].
pub type NodeId = u32;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A tor relay (onion router).
    Relay,
    /// A tor client (onion proxy) with its application.
    Client,
    /// A destination server outside Tor; it answers a request with the bytes asked for.
    Server,
}

/// A connection a node reads from or writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoRef {
    /// One end of a channel.
    Chan(u32, Side),
    /// An exit's connection to a server, by stream id.
    Edge(u32),
}

/// What a relay is configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct RelaySpec {
    pub name: String,
    pub location: u32,
    /// Access link capacity, bits per second.
    pub up_bits_per_sec: u64,
    pub down_bits_per_sec: u64,
    /// `BandwidthRate`, bytes per second (tor default 1 GB: effectively unlimited).
    pub bandwidth_rate: u64,
    /// `BandwidthBurst`, bytes.
    pub bandwidth_burst: u64,
    /// Consensus weight ("w Bandwidth="), used for path selection.
    pub consensus_weight: u64,
    pub flags: RelayFlags,
    /// `PerConnBWRate` and `PerConnBWBurst` (bytes/s, bytes) on connections from clients;
    /// `None` (tor's default 0) means off.
    pub perconn: Option<(u64, u64)>,
    pub scheduler: SchedulerKind,
    /// The relay's IPv4 address, for tor's same-/16 path restriction
    /// (`EnforceDistinctSubnets`); `None`: unknown, never restricted.
    pub address: Option<std::net::Ipv4Addr>,
}

/// A client or a server: a host without tor relay configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointSpec {
    pub name: String,
    pub location: u32,
    pub up_bits_per_sec: u64,
    pub down_bits_per_sec: u64,
}

/// Per-node counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Bytes read from connections (channels and exit connections).
    pub bytes_read: u64,
    /// Bytes written to connections.
    pub bytes_written: u64,
    /// Cells this node relayed (received and queued for the next hop).
    pub cells_relayed: u64,
    /// Refill intervals that began with the read bucket empty.
    pub read_bucket_empty_intervals: u64,
    /// Refill intervals that began with the write bucket empty.
    pub write_bucket_empty_intervals: u64,
}

/// A relay, client or server in the Tor model. The fields a batch touches come first,
/// grouped one cache line a group (`repr(C)` keeps the order); names, guards and the
/// path-selection stream (parked, [`onionlab_core::ParkedRng`]) come after them.
#[repr(C, align(64))]
pub(crate) struct TorNode {
    // Line 1: the global buckets.
    pub read_bucket: TokenBucket,
    pub write_bucket: TokenBucket,
    // Line 2: connections waiting to be read and written.
    pub read_ring: VecDeque<IoRef>,
    pub write_ring: VecDeque<IoRef>,
    // Line 3: pump state and the hot counters (the first three fields of `stats`, the
    // ones a batch updates, end this line; a test checks it).
    /// Queued for a pump at the end of the current event.
    pub dirty: bool,
    /// A refill timer is pending.
    pub refill_pending: bool,
    /// KIST: a circuit gained cells since the last run was scheduled.
    pub kist_wanted: bool,
    /// KIST: a run is scheduled.
    pub kist_pending: bool,
    /// Whether `hpd` is set, kept in this line (in what was padding) so that every other
    /// relay's write pass tests it without reading the line `hpd` is in.
    pub runs_hpd: bool,
    pub kind: NodeKind,
    pub host: HostId,
    /// KIST relays: the relay-level scheduler's parameters ([`crate::kist`]).
    pub kist: Option<crate::kist::KistParams>,
    pub stats: NodeStats,
    // Line 4: what refills and KIST runs read.
    pub kist_last_run: Option<onionlab_core::SimTime>,
    pub perconn: Option<(u64, u64)>,
    /// Offset of this node's refill grid ([`crate::RefillPhase`]); zero unless random.
    pub refill_phase: onionlab_core::SimDuration,
    // The rest.
    /// Shared with the node's host ([`onionlab_net::HostSpec::name`]).
    pub name: onionlab_core::Name,
    pub scheduler: SchedulerKind,
    /// Channels this node is an end of (for per-connection bucket refills).
    pub chans: Vec<(u32, Side)>,
    /// KIST relays: the channel ends that may have circuits with cells (tor's
    /// `channels_pending`): every end whose scheduler has an active circuit is here, so a
    /// run need not visit the relay's other channels (a guard has one per client).
    pub kist_ends: Vec<(u32, Side)>,
    /// HPD relays: the relay-wide scheduler's state ([`crate::hpd`]); their write pass is
    /// its run. Boxed: other nodes pay a pointer.
    pub hpd: Option<Box<HpdRelayState>>,
    /// Clients: persistent entry guards (relay indices in the directory).
    pub guards: Vec<usize>,
    /// Clients: a relay (index in the directory) every circuit enters through, as a
    /// bridge: the client's own relay (Tortoise's client-relays). Overrides guards.
    pub bridge: Option<usize>,
    /// Clients: the path (guard, middle, exit; relay indices in the directory) of every
    /// circuit, set by an experiment instead of path selection. Overrides guards and bridge.
    pub fixed_path: Option<[usize; 3]>,
    /// Clients: their circuits that are not closed, oldest first.
    pub circs: Vec<u32>,
    /// Clients: predicted-circuit state.
    pub predict: Prediction,
    /// Clients: path selection randomness.
    pub rng: Option<ParkedRng>,
    /// Relays: where their cells wait ([`crate::wait`]); boxed and only on relays, so a
    /// client costs a pointer (a full network has millions).
    pub waits: Option<Box<crate::wait::WaitLedger>>,
    /// Relays: connections whose circuits get buckets of their own here
    /// ([`crate::RelayControl::set_circuit_limits`]): channel, (read, write) (rate, burst).
    /// Empty unless a hook limits circuits.
    pub circuit_limits: Vec<(u32, CircuitLimitSpec)>,
    /// Relays: circuits with buckets of their own here, refilled with the relay's.
    pub limited_circs: Vec<u32>,
    /// Exits: streams whose request write to the server waits for the write bucket's
    /// refill (each flagged `request_waits_for_refill`, once; dropped when it ends).
    pub request_waits: Vec<u32>,
}

/// The (read, write) buckets, (rate bytes/s, burst bytes) each, that a connection's
/// circuits get one by one.
pub(crate) type CircuitLimitSpec = crate::hooks::ReadWriteLimits;

/// A relay's relay-wide HPD scheduler ([`crate::hpd::HpdRelay`]) and the list of its
/// channel ends a run goes over (the write ring's ends, kept to reuse its allocation).
#[derive(Debug)]
pub(crate) struct HpdRelayState {
    pub sched: crate::hpd::HpdRelay,
    pub ends: Vec<(u32, Side)>,
    /// Per end of the run: it stopped for its socket or its own bucket (it leaves the ring).
    pub blocked: Vec<bool>,
}

/// A client's predicted-circuit state (tor's `circuit_predict_and_launch_new`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Prediction {
    /// When the client's tor started (its first stream): its once-a-second checks run
    /// at whole seconds after this.
    pub started: Option<onionlab_core::SimTime>,
    /// The port is predicted until then (an hour after the last stream).
    pub until: onionlab_core::SimTime,
    /// The time of the scheduled check, if any (an earlier need schedules another; the
    /// event whose time is not this one is stale).
    pub check_at: Option<onionlab_core::SimTime>,
    /// Circuit-build-timeout learning: circuits launched (last at `last_launch`) and
    /// completed.
    pub last_launch: onionlab_core::SimTime,
    pub built: u32,
}

impl TorNode {
    /// The buckets this relay gives each circuit over channel `chan`, if it limits them.
    pub fn circuit_limit_spec(&self, chan: u32) -> Option<CircuitLimitSpec> {
        self.circuit_limits.iter().find(|(c, _)| *c == chan).map(|&(_, spec)| spec)
    }

    pub fn finite_buckets(&self) -> bool {
        !self.read_bucket.is_unlimited() || !self.write_bucket.is_unlimited() || self.perconn.is_some()
    }
}

/// Tor's per-transaction share of a bucket (`connection_bucket_get_share`, connection.c;
/// `connection_bucket_round_robin` in 0.2.2): one eighth of the global bucket, rounded
/// down to whole `BASE` units, clamped to 4..32 units, then bounded by the global bucket
/// itself and by the connection's own bucket. Tor's unit is a cell on the network for an
/// OR connection ([`channel_share`]) and a relay payload for an edge connection
/// ([`edge_share`]); every connection here has tor's high priority (only directory
/// connections get the low one, 2..16 units).
#[inline]
fn share_in_units<const BASE: u64>(global: &TokenBucket, conn: Option<&TokenBucket>) -> u64 {
    let g = global.tokens();
    let eighth = g / 8;
    let mut n = (eighth - eighth % BASE).clamp(4 * BASE, 32 * BASE).min(g);
    if let Some(c) = conn {
        n = n.min(c.tokens());
    }
    n
}

/// A channel's (OR connection's) share of `global`: units of `CELL_NETWORK_SIZE` (514 B).
#[inline]
pub(crate) fn channel_share(global: &TokenBucket, conn: Option<&TokenBucket>) -> u64 {
    share_in_units::<{ crate::cell::CELL_NETWORK_SIZE }>(global, conn)
}

/// An exit's edge connection's share of `global` (reading a server's reply, writing a
/// request to it): units of `RELAY_PAYLOAD_SIZE` (498 B). Edge connections have no bucket
/// of their own.
#[inline]
pub(crate) fn edge_share(global: &TokenBucket) -> u64 {
    share_in_units::<{ crate::cell::RELAY_PAYLOAD_SIZE }>(global, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(tokens: u64) -> TokenBucket {
        let mut b = TokenBucket::new(1, 10_000_000);
        b.take(10_000_000 - tokens);
        b
    }

    #[test]
    fn a_channels_share_is_an_eighth_in_whole_cells_clamped_to_4_and_32() {
        let b = bucket;
        // 80,000 / 8 = 10,000 B, rounded down to 19 cells of 514 B (tor: `at_most -= at_most % base`).
        assert_eq!(channel_share(&b(80_000), None), 19 * 514);
        assert_eq!(channel_share(&b(1_000_000), None), 32 * 514, "16 KiB cap (tor: 32 cells)");
        assert_eq!(channel_share(&b(4_000), None), 4 * 514, "floor of 4 cells");
        assert_eq!(channel_share(&b(1_000), None), 1_000, "never more than the bucket holds");
        assert_eq!(channel_share(&b(80_000), Some(&b(300))), 300, "connection bucket bounds it");
        assert_eq!(channel_share(&TokenBucket::unlimited(), None), 32 * 514);
    }

    #[test]
    fn an_edges_share_counts_relay_payloads() {
        let b = bucket;
        // 80,000 / 8 = 10,000 B, rounded down to 20 payloads of 498 B.
        assert_eq!(edge_share(&b(80_000)), 20 * 498);
        assert_eq!(edge_share(&b(1_000_000)), 32 * 498, "cap of 32 payloads");
        assert_eq!(edge_share(&b(12_000)), 4 * 498, "floor of 4 payloads (1,500 B rounds to 3)");
        assert_eq!(edge_share(&b(1_000)), 1_000, "never more than the bucket holds");
        assert_eq!(edge_share(&b(0)), 0);
    }
}
