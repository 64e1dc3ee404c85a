//! Tortoise: a universal rate limit at the network's ingress for every connection whose
//! peer is not a Stable and Fast relay (Moore, Wacek, Sherr, "Exploring the Potential
//! Benefits of Expanded Rate Limiting in Tor: Slow and Steady Wins the Race With
//! Tortoise", ACSAC 2011; sections 4-4.1; spec `tortoise.md` section 1).
//!
//! **Owns:** which connections of a relay the universal limit applies to and setting their
//! per-connection buckets. **Must not touch:** flags (the directory computes them,
//! `onionlab_tor::directory`) or relay internals.
//!
//! Rule: only inbound connections (opened by the peer; spec 1.3: "for each incoming OR
//! connection") are considered; one is exempt iff its peer is a relay whose consensus
//! flags include Stable and Fast, or the peer is an operator exempted here
//! ([`Tortoise::with_operator`]: the relay's own operator, a client-relay's own client
//! traffic, which enters the network through its own relay, paper figure 1, right; and
//! the config's `entry = "exempt"` operators, at every relay). Every other connection
//! (plain clients, non-Stable or non-Fast relays) gets a token bucket of `rate` and
//! `burst` in the limited direction(s). Relay-to-relay connections between exempt relays
//! are untouched: "connections between Tor ORs ... are subject only to relay-specific
//! bandwidth limits". A consequence of "inbound": relays share one channel per pair, so a
//! non-exempt relay's circuits into this relay go unlimited over a channel this relay
//! opened to it first. Tor's per-connection buckets are set by the peer's identity
//! whoever opened the connection, so a Tortoise built on them would limit it; in the
//! reproduction every relay is Stable and Fast, so no result depends on it.
//!
//! Parameters:
//! - `rate`: bytes/s, the universal limit; the paper evaluates 100 and 200 KBps.
//! - `burst`: bytes; the paper gives none; default one second of `rate` (spec 1.5).
//! - `directions`: [`Directions::Both`] by default (spec 1.2: the measured effect is on
//!   downloads, so the relay-to-client direction must be limited; tor 0.2.2's
//!   per-connection buckets limit both).
//! - `check_interval`: how often new connections are classified, default 100 ms. Tor
//!   sets a connection's buckets when it opens; here a new connection can be unlimited
//!   until the next check (at most this long; with `tor.refill_phase = "random"` the first
//!   check waits for the relay's shifted grid too, up to one refill interval more) before
//!   its bucket (starting full, as tor's do) applies.
//! - `limit_unit`: [`LimitUnit::Connection`] by default, or [`LimitUnit::Circuit`] (spec
//!   1.2's sensitivity switch), below.
//!
//! **The unit of limiting.** The paper limits "individual client connections" (abstract,
//! section 8: "per-connection rate limits at Tor's ingress points"), and tor's own
//! per-connection buckets (`PerConnBWRate`, 0.2.2) are per OR connection; in tor all
//! circuits of one client to one relay share that connection, so a client gets `rate` at
//! each ingress whatever its number of circuits. Section 6 once says "each circuit may be
//! individually rate limited", which would give a client with k circuits over one
//! connection k times the rate. Spec 1.2 reads the section 6 wording as loose and asks for
//! a switch to measure the other reading. With [`LimitUnit::Circuit`] a limited connection
//! gets no buckets; instead each circuit over it has a read and a write bucket of its
//! own at this relay, of the same `rate` and `burst`
//! ([`RelayControl::set_circuit_limits`]; circuits that join the connection later get them
//! when they are extended over it). Tor has no such buckets; the design here: a circuit's
//! cells pass the connection's reading and writing as any cell does, and its bucket gates
//! them where the relay chooses which circuit's cells go next, at the circuit scheduler of
//! the channel they leave on. Write: cells towards the limited peer (its downloads),
//! charged 543 B each as the scheduler moves them to the connection's outbuf. Read: cells
//! from the peer, charged as they move to the next hop's outbuf. A circuit whose bucket for
//! that direction holds less than a whole cell is held off that scheduler, as a circuit
//! without cells is (`CircuitScheduler::hold`), until the relay's next refill
//! (`tor.refill_interval`); its cells wait in its circuit queue meanwhile, and the read
//! direction's backlog is bounded by the circuit's window. Every scheduler works this way
//! (round robin, EWMA, KIST's runs, HPD's relay-wide runs, which set a held circuit's cells
//! aside with their arrival times). Whole cells only: with 1 s refills and a burst of one
//! second of the rate, the part of a cell left in the bucket is lost at the cap, so a
//! circuit's long-run rate is up to 542 B/s under `rate` (0.5 % at 100 KBps). Cells that end
//! at this relay have no queue and are not limited (at an exit, a non-exempt middle's
//! SENDMEs and BEGINs). The connection-unit default runs none of this and is unchanged.

use std::collections::BTreeSet;

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::{NodeId, NodeKind, PeerConnection, RelayControl, RelayFlags, RelayHook};

use crate::throttling::ThrottlingError;

/// What one bucket pair limits: a whole connection (the paper's reading, the default) or
/// each circuit over it (section 6's wording; spec 1.2's sensitivity switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LimitUnit {
    #[default]
    Connection,
    Circuit,
}

/// Which direction(s) of a limited connection the bucket applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Directions {
    /// Bytes the relay reads from the peer (the client's uploads).
    Read,
    /// Bytes the relay writes to the peer (the client's downloads).
    Write,
    #[default]
    Both,
}

#[derive(Clone, Debug)]
pub struct Tortoise {
    rate: u64,
    burst: u64,
    directions: Directions,
    check_interval: SimDuration,
    unit: LimitUnit,
    /// Clients that operate this relay: their connections are exempt.
    operators: BTreeSet<NodeId>,
}

/// A connection's (read, write) buckets: (rate bytes/s, burst bytes) each, `None` = none.
pub type Limits = (Option<(u64, u64)>, Option<(u64, u64)>);

/// Default classification period.
pub const DEFAULT_CHECK_INTERVAL: SimDuration = SimDuration::from_millis(100);

impl Tortoise {
    pub fn new(rate: u64, burst: u64, directions: Directions, check_interval: SimDuration) -> Result<Self, ThrottlingError> {
        let bad = |name, problem: &str| Err(ThrottlingError::BadParameter { name, problem: problem.into() });
        if rate == 0 {
            return bad("rate", "must be positive");
        }
        if burst == 0 {
            return bad("burst", "must be positive");
        }
        if check_interval == SimDuration::ZERO {
            return bad("check_interval", "must be positive");
        }
        Ok(Tortoise { rate, burst, directions, check_interval, unit: LimitUnit::Connection, operators: BTreeSet::new() })
    }

    /// Limits each circuit over a limited connection instead of the connection.
    pub fn with_limit_unit(mut self, unit: LimitUnit) -> Self {
        self.unit = unit;
        self
    }

    pub fn limit_unit(&self) -> LimitUnit {
        self.unit
    }

    /// Exempts `client`'s connections to this relay: it operates the relay, or it is an
    /// operator the config exempts everywhere (`entry = "exempt"`).
    pub fn with_operator(mut self, client: NodeId) -> Self {
        self.operators.insert(client);
        self
    }

    /// Whether Tortoise leaves connection `c` unlimited. Only inbound connections are
    /// limited: the limit is at the network's ingress ("connections from all other
    /// routers"), so a relay's own outbound connections are never limited by it.
    pub fn is_exempt(&self, c: &PeerConnection) -> bool {
        if !c.inbound {
            return true;
        }
        match c.peer_kind {
            NodeKind::Relay => c.peer_flags.is_some_and(|f| f.contains(RelayFlags::STABLE | RelayFlags::FAST)),
            NodeKind::Client => self.operators.contains(&c.peer),
            // Relays do not connect to servers over OR connections; nothing to limit.
            NodeKind::Server => true,
        }
    }

    /// The (read, write) buckets connection `c` should have, or with
    /// [`LimitUnit::Circuit`] each circuit over it.
    pub fn limits_for(&self, c: &PeerConnection) -> Limits {
        if self.is_exempt(c) {
            return (None, None);
        }
        let l = Some((self.rate, self.burst));
        match self.directions {
            Directions::Read => (l, None),
            Directions::Write => (None, l),
            Directions::Both => (l, l),
        }
    }
}

impl RelayHook for Tortoise {
    fn interval(&self) -> SimDuration {
        self.check_interval
    }

    fn on_tick(&mut self, _now: SimTime, relay: &mut RelayControl<'_>) {
        for c in relay.connections() {
            let want = self.limits_for(&c);
            let (conn, circuits) = match self.unit {
                LimitUnit::Connection => (want, (None, None)),
                LimitUnit::Circuit => ((None, None), want),
            };
            if (c.read_limit, c.write_limit) != conn {
                relay.set_limits(c.chan, conn.0, conn.1);
            }
            if c.circuit_limits != circuits {
                relay.set_circuit_limits(c.chan, circuits.0, circuits.1);
            }
        }
    }

    fn name(&self) -> &'static str {
        "tortoise"
    }

    fn throttle_threshold(&self) -> Option<u64> {
        Some(self.rate)
    }
}
