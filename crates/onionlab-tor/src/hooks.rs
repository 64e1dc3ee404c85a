//! Hooks through which mechanisms act on a relay without touching its internals.
//!
//! **Owns:** the [`RelayHook`] trait (a periodic per-relay tick) and [`RelayControl`], the
//! narrow view a hook gets: the relay's client connections with their byte counters, and
//! the per-connection throttle (rate and burst of the connection's token buckets) it may
//! set, or buckets for each circuit over a connection ([`RelayControl::set_circuit_limits`]). Guard throttling (static, bit-splitting, flagging, threshold) and Tortoise are
//! hooks. **Must not touch:** queues, schedulers or the transport.

use onionlab_core::{SimDuration, SimTime};

use crate::network::TorNetwork;
use crate::node::NodeId;
use crate::token_bucket::TokenBucket;

/// A policy that runs on a relay every `interval`.
pub trait RelayHook {
    fn interval(&self) -> SimDuration;
    fn on_tick(&mut self, now: SimTime, relay: &mut RelayControl<'_>);
    fn name(&self) -> &'static str;
    /// The per-connection rate (bytes/s) above which this relay would throttle a client
    /// connection right now, if the policy has one: what a guard-probing adversary
    /// estimates (throttling paper section 5, technique T1). Recorded per relay per
    /// metrics interval. `None` for policies without such a rate.
    fn throttle_threshold(&self) -> Option<u64> {
        None
    }
}

/// One connection from a client to this relay, as a hook sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConnection {
    /// Channel id: pass it back to [`RelayControl::set_throttle`].
    pub chan: u32,
    pub client: NodeId,
    /// Bytes this relay has read from / written to the connection so far.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Current per-connection throttle (rate bytes/s, burst bytes), if any: the read
    /// bucket's, or the write bucket's where only writes are limited.
    pub throttle: Option<(u64, u64)>,
    /// Refills so far at which the connection's own read or write bucket was empty: how
    /// often its throttle actually held it back (a throttle above what the connection
    /// sends never does).
    pub bucket_empty_intervals: u64,
    /// Buckets each circuit over the connection has at this relay (rate bytes/s, burst
    /// bytes; [`RelayControl::set_circuit_limits`], Tortoise's `limit_unit = "circuit"`),
    /// if any: the read buckets', or the write buckets' where only writes are limited.
    pub circuit_throttle: Option<(u64, u64)>,
}

/// Any connection of this relay (to a relay or a client), as a hook sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConnection {
    pub chan: u32,
    pub peer: NodeId,
    pub peer_kind: crate::node::NodeKind,
    /// The peer's consensus flags when it is a relay.
    pub peer_flags: Option<crate::path::RelayFlags>,
    /// The peer opened the connection (an inbound connection: this relay is its ingress).
    pub inbound: bool,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Per-connection read and write buckets (rate bytes/s, burst bytes), if any.
    pub read_limit: Option<(u64, u64)>,
    pub write_limit: Option<(u64, u64)>,
    /// The (read, write) buckets each circuit over the connection gets of its own
    /// ([`RelayControl::set_circuit_limits`]), if any.
    pub circuit_limits: ReadWriteLimits,
}

/// A (read, write) pair of bucket settings, (rate bytes/s, burst bytes) each; `None`: no
/// bucket in that direction.
pub type ReadWriteLimits = (Option<(u64, u64)>, Option<(u64, u64)>);

/// One open circuit through a relay, in the direction data flows (exit towards client),
/// as a per-circuit controller sees it ([`RelayControl::circuits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayCircuit {
    pub circ: u32,
    /// The relay's position on the circuit: 1 guard, 2 middle, 3 exit.
    pub pos: usize,
    /// Where the data comes from: the next relay towards the exit; `None` at the exit
    /// (the server).
    pub from: Option<NodeId>,
    /// Where the data goes: the previous relay, or the client at the guard.
    pub to: NodeId,
    /// Cells queued here towards the client.
    pub queued: u64,
    /// At the exit: cells of response data its streams have still to package.
    pub source_cells: Option<u64>,
}

/// What a hook may see and change on its relay.
pub struct RelayControl<'a> {
    net: &'a mut TorNetwork,
    node: NodeId,
    now: SimTime,
}

impl<'a> RelayControl<'a> {
    pub(crate) fn new(net: &'a mut TorNetwork, node: NodeId, now: SimTime) -> Self {
        RelayControl { net, node, now }
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The relay's BandwidthRate (bytes/s).
    pub fn bandwidth_rate(&mut self) -> u64 {
        self.net.node_mut(self.node).read_bucket.rate()
    }

    /// Connections from clients (not relays) to this relay, in channel order.
    pub fn client_connections(&mut self) -> Vec<ClientConnection> {
        self.net.client_connections(self.node)
    }

    /// Every connection of this relay, to relays and clients, with the peer's flags.
    pub fn connections(&mut self) -> Vec<PeerConnection> {
        self.net.connections(self.node)
    }

    /// Sets (or with `None` removes) the read and the write bucket of connection `chan`
    /// separately: (rate bytes/s, burst bytes). Same semantics as [`Self::set_throttle`].
    pub fn set_limits(&mut self, chan: u32, read: Option<(u64, u64)>, write: Option<(u64, u64)>) {
        let side = self.side_of(chan);
        let end = self.net.chan_end_mut(chan, side);
        end.conn_released = false;
        for (b, want) in [(&mut end.conn_read, read), (&mut end.conn_write, write)] {
            match (b.as_mut(), want) {
                (Some(b), Some((rate, burst))) => b.set(rate, burst),
                (None, Some((rate, burst))) => *b = Some(TokenBucket::new(rate, burst)),
                (_, None) => *b = None,
            }
        }
    }

    /// Gives each circuit over connection `chan` at this relay, those on it now and those
    /// that come, a read and a write bucket of its own, (rate bytes/s, burst bytes) each, or
    /// with `None` removes them: the unit of limiting is the circuit, not the connection
    /// (Tortoise's `limit_unit = "circuit"`). A circuit whose bucket for a direction holds
    /// less than a cell is held off the scheduler of the channel it leaves on until the
    /// relay's next refill: read, cells that came in over `chan`, as they leave for the
    /// next hop; write, cells for `chan`, as they leave for its outbuf. Independent of the
    /// connection's own buckets ([`Self::set_limits`]). Walks every circuit of the network
    /// once: call it when a connection's setting changes, not at every tick.
    pub fn set_circuit_limits(&mut self, chan: u32, read: Option<(u64, u64)>, write: Option<(u64, u64)>) {
        let _ = self.side_of(chan);
        self.net.set_circuit_limits(self.now, self.node, chan, (read, write));
    }

    fn side_of(&mut self, chan: u32) -> onionlab_net::Side {
        self.net
            .node_mut(self.node)
            .chans
            .iter()
            .find(|(c, _)| *c == chan)
            .map(|&(_, s)| s)
            .expect("a hook only changes its own relay's connections")
    }

    /// How often the relay's token buckets refill (tor's TokenBucketRefillInterval).
    pub fn refill_interval(&self) -> SimDuration {
        self.net.cfg.refill_interval
    }

    /// The open circuits through this relay, in the direction data flows.
    pub fn circuits(&mut self) -> Vec<RelayCircuit> {
        self.net.relay_circuits(self.node)
    }

    /// Limits `circ` to `cells` more cells towards the client until the next call
    /// (`None`: unlimited); has an effect where the relay's scheduler shapes circuits.
    pub fn set_circuit_budget(&mut self, circ: u32, cells: Option<u64>) {
        self.net.set_circuit_budget(self.node, circ, cells);
    }

    /// At the circuit's exit: lets the relay package `cells` more cells of the server's
    /// data onto it until the next call (`None`: unlimited); a grant per control step, not
    /// refilled between calls.
    pub fn set_exit_read_budget(&mut self, circ: u32, cells: Option<u64>) {
        self.net.set_exit_read_budget(self.node, circ, cells);
    }

    /// Open OR connections of this relay, to relays and clients alike (the `N` of the
    /// throttling paper's bit-splitting, as its code counts it).
    pub fn or_connection_count(&mut self) -> usize {
        self.net.node_mut(self.node).chans.len()
    }

    /// Sets (or with `None` removes) the read and write buckets of client connection
    /// `chan`: rate in bytes/s, burst in bytes. A new bucket starts full; changing an
    /// existing one keeps its tokens, capped at the new burst (tor's behaviour on reload).
    /// Without a bucket the connection is unthrottled: the throttling paper's rate of
    /// infinity, under which a later throttle starts from a full burst.
    pub fn set_throttle(&mut self, chan: u32, throttle: Option<(u64, u64)>) {
        let side = self.side_of(chan);
        let end = self.net.chan_end_mut(chan, side);
        end.conn_released = false;
        match throttle {
            Some((rate, burst)) => {
                for b in [&mut end.conn_read, &mut end.conn_write] {
                    match b {
                        Some(b) => b.set(rate, burst),
                        None => *b = Some(TokenBucket::new(rate, burst)),
                    }
                }
            }
            None => {
                end.conn_read = None;
                end.conn_write = None;
            }
        }
    }

    /// Lifts the throttle of client connection `chan` the way the throttling authors' tor
    /// code does (spec section 3, "(code)"): its buckets stay, at `rate` (the relay's
    /// BandwidthRate) and `burst` (PerConnBWBurst), keeping their tokens, so a throttle set
    /// again later starts from what the connection left of them rather than from a full
    /// burst (tor 0.2.2's `connection_or_update_token_buckets_helper` never refills on a
    /// rate change). The connection is reported as unthrottled
    /// ([`ClientConnection::throttle`] is `None`) until the next [`Self::set_throttle`].
    /// A connection without buckets (never throttled) keeps none: tor's own would sit at
    /// BandwidthRate and BandwidthBurst, which one connection never outruns.
    pub fn release_throttle(&mut self, chan: u32, rate: u64, burst: u64) {
        let side = self.side_of(chan);
        let end = self.net.chan_end_mut(chan, side);
        if end.conn_read.is_none() && end.conn_write.is_none() {
            return;
        }
        for b in [&mut end.conn_read, &mut end.conn_write].into_iter().flatten() {
            b.set(rate, burst);
        }
        end.conn_released = true;
    }
}
