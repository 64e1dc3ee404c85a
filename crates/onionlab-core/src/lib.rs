//! # onionlab-core
//!
//! The deterministic discrete-event engine every other onionlab layer stands on.
//!
//! **Owns:** simulated time ([`SimTime`], [`SimDuration`], integer nanoseconds), the
//! [`EventQueue`] and its total order, seeded random streams ([`RngStreams`]), run
//! [`Counters`] and the optional event [`Trace`].
//!
//! **Must not touch:** anything about networks or Tor. This crate knows nothing of hosts,
//! bytes, cells or circuits; it orders opaque events in time and hands out randomness.
//!
//! Determinism rules that start here: no wall clock, no `HashMap` iteration where order
//! matters, and every random draw comes from a stream named by (run seed, entity kind,
//! entity name).

pub mod alloc;
pub mod counters;
pub mod event;
pub mod head_deque;
pub mod little;
pub mod rng;
pub mod time;
pub mod trace;

pub use alloc::HugePageAlloc;
pub use counters::Counters;
pub use event::{EventClass, EventQueue, ScheduleError, Scheduled};
pub use head_deque::HeadDeque;
pub use rng::{ParkedRng, RngStreams, SimRng};
pub use time::{SimDuration, SimTime};
pub use trace::{Trace, TraceRecord};
pub mod units;
pub use units::{parse_bandwidth, parse_duration, parse_size, UnitError};

/// A host's, node's or group's name, shared: the transport's host, the Tor node and every
/// result row that names it hold one allocation between them (a full-scale network has two
/// million clients, and a `String` per holder would cost a copy of each name per holder).
pub type Name = std::sync::Arc<str>;
