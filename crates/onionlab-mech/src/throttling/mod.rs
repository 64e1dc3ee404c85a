//! Adaptive throttling of client connections at guards (Jansen, Syverson, Hopper,
//! "Throttling Tor Bandwidth Parasites", USENIX Security 2012; sections 3-4).
//!
//! **Owns:** the framework every algorithm shares (section 3 of the paper): a policy
//! decides, once per tick, which client connections of a guard are throttled and at what
//! rate; the throttle is the connection's per-connection token buckets (PerConnBWRate,
//! PerConnBWBurst) with a constant burst. **Must not touch:** relay internals; policies see
//! a [`GuardState`] snapshot and return [`ThrottleDecision`]s, which [`ThrottleHook`]
//! applies through `RelayControl::set_throttle`.
//!
//! Algorithms, one file each: [`StaticThrottle`] (tor's PerConnBWRate), [`BitSplitting`]
//! (algorithm 1), [`Flagging`] (algorithm 2) and [`Threshold`] (algorithm 3), with the
//! per-connection cell EWMA they share in [`conn_ewma`].
//!
//! Shared behaviour, from the paper and the authors' tor branch where the paper is silent:
//! - **Tick:** every algorithm runs once a second (the authors' code runs them inside
//!   tor 0.2.2's once-a-second bucket refill); threshold acts every `R` seconds.
//! - **Burst:** constant, 2 MiB by default ("a 2 MiB burst is ideal", footnote 3).
//! - **Unthrottled** means no per-connection bucket at all (the paper's rate of infinity),
//!   so a throttle set again starts from a full burst. The authors' code keeps the buckets
//!   at the relay's BandwidthRate with the burst kept, tokens and all ([`Unthrottled::Code`],
//!   for flagging and threshold, the algorithms that lift throttles).
//! - **A rate change** keeps the connection's tokens, capped at the new burst, and takes
//!   effect from the next refill (tor's behaviour on reconfiguration).
//! - **Client connection:** an OR connection whose peer is not a relay. Relay-to-relay
//!   connections are never throttled (footnote 4).
//! - **Cells:** rates and EWMAs count cells as bytes on the wire divided by
//!   `CELL_WIRE_BYTES` (514-byte cell plus TLS overhead), the unit the model's token
//!   buckets count, so "EWMA above the meta-EWMA" means "faster than the fair share" exactly
//!   as in the paper's 512-byte-cell arithmetic.

pub mod bit_splitting;
pub mod conn_ewma;
pub mod flagging;
pub mod static_throttle;
pub mod threshold;

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::{ClientConnection, RelayControl, RelayHook};

pub use bit_splitting::{BitSplitting, SplitDenominator};
pub use flagging::{FlagParams, Flagging};
pub use static_throttle::StaticThrottle;
pub use threshold::{Threshold, ThresholdParams, ThresholdSemantics, ThresholdThroughput};

/// PerConnBWBurst used by every algorithm unless configured: 2 MiB (paper, footnote 3).
pub const DEFAULT_BURST: u64 = 2 << 20;
/// Half-life of the per-connection EWMA when not configured: 30 s, the authors' code
/// default ("somewhat arbitrarily chosen"); the paper does not give its tuned value.
pub const DEFAULT_HALFLIFE: SimDuration = SimDuration::from_secs(30);
/// How often the policies run: once a second, as in the authors' code.
pub const TICK: SimDuration = SimDuration::from_secs(1);

/// A parameter outside its domain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThrottlingError {
    #[error("{name}: {problem}")]
    BadParameter { name: &'static str, problem: String },
}

pub(crate) fn check(ok: bool, name: &'static str, problem: impl FnOnce() -> String) -> Result<(), ThrottlingError> {
    if ok {
        Ok(())
    } else {
        Err(ThrottlingError::BadParameter { name, problem: problem() })
    }
}

/// What a policy sees of its guard at a tick.
#[derive(Clone, Debug)]
pub struct GuardState<'a> {
    pub now: SimTime,
    /// The relay's BandwidthRate, bytes/s (the paper's `B`).
    pub bandwidth_rate: u64,
    /// Open OR connections, to relays and clients.
    pub or_connections: usize,
    /// Client connections with their cumulative byte counters and current throttle.
    pub clients: &'a [ClientConnection],
}

/// Set (`Some((rate bytes/s, burst bytes))`) or remove (`None`) a connection's throttle.
pub type ThrottleDecision = (u32, Option<(u64, u64)>);

/// A throttling algorithm: once per tick, which client connections to throttle and how.
pub trait ThrottlePolicy {
    /// Decisions for this tick; connections not mentioned keep their throttle.
    fn tick(&mut self, guard: &GuardState<'_>) -> Vec<ThrottleDecision>;
    /// The per-connection rate above which a connection would be throttled now (bytes/s),
    /// what a probing adversary estimates (section 5, T1).
    fn threshold_rate(&self) -> Option<u64>;
    fn name(&self) -> &'static str;
}

/// What lifting a connection's throttle does to its per-connection buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unthrottled {
    /// The paper's "throttleRate = infinity": the buckets go; a later throttle starts
    /// from a full burst. The default.
    #[default]
    Paper,
    /// The authors' tor code (spec section 3, "(code)"): the buckets stay at the relay's
    /// BandwidthRate with this burst (PerConnBWBurst, bytes), keeping their tokens, so a
    /// connection throttled again starts from what it left of them.
    Code { burst: u64 },
}

/// Runs a [`ThrottlePolicy`] on a relay every [`TICK`].
pub struct ThrottleHook<P> {
    policy: P,
    unthrottled: Unthrottled,
}

impl<P: ThrottlePolicy> ThrottleHook<P> {
    /// The policy with the paper's [`Unthrottled::Paper`].
    pub fn new(policy: P) -> Self {
        ThrottleHook { policy, unthrottled: Unthrottled::Paper }
    }
    /// The same, with lifted throttles handled as `unthrottled` says.
    pub fn with_unthrottled(policy: P, unthrottled: Unthrottled) -> Self {
        ThrottleHook { policy, unthrottled }
    }
    pub fn policy(&self) -> &P {
        &self.policy
    }
}

impl<P: ThrottlePolicy> RelayHook for ThrottleHook<P> {
    fn interval(&self) -> SimDuration {
        TICK
    }

    fn on_tick(&mut self, now: SimTime, relay: &mut RelayControl<'_>) {
        let clients = relay.client_connections();
        let state =
            GuardState { now, bandwidth_rate: relay.bandwidth_rate(), or_connections: relay.or_connection_count(), clients: &clients };
        for (chan, throttle) in self.policy.tick(&state) {
            let current = clients.iter().find(|c| c.chan == chan).map(|c| c.throttle);
            debug_assert!(current.is_some(), "policies only decide about the connections they were shown");
            if current == Some(throttle) {
                continue;
            }
            match (throttle, self.unthrottled) {
                (None, Unthrottled::Code { burst }) => relay.release_throttle(chan, state.bandwidth_rate, burst),
                _ => relay.set_throttle(chan, throttle),
            }
        }
    }

    fn name(&self) -> &'static str {
        self.policy.name()
    }

    fn throttle_threshold(&self) -> Option<u64> {
        self.policy.threshold_rate()
    }
}
