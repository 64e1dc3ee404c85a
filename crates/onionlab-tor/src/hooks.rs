//! Hooks through which mechanisms act on a relay without touching its internals.
//!
//! **Owns:** the [`RelayHook`] trait (a periodic per-relay tick) and [`RelayControl`], the
//! narrow view a hook gets: the relay's client connections with their byte counters, and
//! the per-connection throttle (rate and burst of the connection's token buckets) it may
//! set. Guard throttling (static, bit-splitting, flagging, threshold) and Tortoise are
//! hooks. **Must not touch:** queues, schedulers or the transport.

use onionlab_core::{SimDuration, SimTime};

use crate::node::NodeId;
use crate::network::TorNetwork;
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
    /// Current per-connection throttle (rate bytes/s, burst bytes), if any.
    pub throttle: Option<(u64, u64)>,
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

    /// Open OR connections of this relay, to relays and clients alike (the `N` of the
    /// throttling paper's bit-splitting, as its code counts it).
    pub fn or_connection_count(&mut self) -> usize {
        self.net.node_mut(self.node).chans.len()
    }

    /// Sets (or with `None` removes) the read and write buckets of client connection
    /// `chan`: rate in bytes/s, burst in bytes. A new bucket starts full; changing an
    /// existing one keeps its tokens, capped at the new burst (tor's behaviour on reload).
    pub fn set_throttle(&mut self, chan: u32, throttle: Option<(u64, u64)>) {
        let side = self
            .net
            .node_mut(self.node)
            .chans
            .iter()
            .find(|(c, _)| *c == chan)
            .map(|&(_, s)| s)
            .expect("set_throttle on a connection of another relay");
        let end = self.net.chan_end_mut(chan, side);
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
}
