//! The papers' mechanisms, each a policy behind one of the Tor model's hooks.
//!
//! **Owns:** the mechanisms proposed by the papers this project reproduces, one file each,
//! with their parameters, defaults and sources: [`throttling`] (adaptive guard throttling,
//! Jansen, Syverson and Hopper, "Throttling Tor Bandwidth Parasites", 2012),
//! [`tortoise`] (universal ingress rate limiting, Moore, Wacek and Sherr, 2011) and
//! [`braids`] (tickets for priority service, Jansen, Hopper and Kim, 2010; its relay
//! scheduler, HPD, is a circuit scheduler in `onionlab_tor::hpd`), and [`predictor`]
//! (PredicTor, Döpmann et al. 2022: each relay's model-predictive controller in closed loop,
//! and the max-min fair reference).
//! **Must not touch:** relay internals. A mechanism sees and changes a relay only through
//! `onionlab_tor::RelayControl` (and the other hooks of `onionlab_tor`); Tor's own
//! deployed mechanisms (round robin, EWMA, token buckets, SENDMEs) live in `onionlab-tor`.

pub mod braids;
pub mod predictor;
pub mod throttling;
pub mod tortoise;

pub use braids::{Braids, BraidsError, BraidsParams, TicketCounters};
pub use throttling::{
    BitSplitting, FlagParams, Flagging, GuardState, SplitDenominator, StaticThrottle, Threshold, ThresholdParams, ThresholdSemantics,
    ThresholdThroughput, ThrottleDecision, ThrottleHook, ThrottlePolicy, ThrottlingError, Unthrottled, DEFAULT_BURST, DEFAULT_HALFLIFE,
};
