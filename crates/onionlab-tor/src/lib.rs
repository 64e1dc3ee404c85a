//! # onionlab-tor
//!
//! The Tor model: what every mechanism in the papers plugs into.
//!
//! **Owns:** cells and their run-length queues ([`cell`]), token buckets
//! ([`token_bucket`]), channels ([`channel`]), circuits and streams ([`circuit`]), relays,
//! clients and servers ([`node`]), circuit schedulers ([`scheduler`]), end-to-end flow
//! control ([`flow_control`]), path selection ([`path`]), relay hooks ([`hooks`]) and the
//! network that runs them ([`network`]).
//!
//! **Must not touch:** transport internals (it uses `onionlab-net`'s public API) and
//! experiment configuration or workloads (layers above).
//!
//! Constants are tor's (0.4.8 source, `../shared/specs/tor-constants.md`), named after the
//! tor identifiers they come from; the papers' values are parameters.

pub mod cell;
pub mod directory;
pub mod channel;
pub mod circuit;
pub mod ewma;
pub mod flow_control;
pub mod hooks;
pub mod kist;
pub mod network;
pub mod node;
pub mod path;
pub mod scheduler;
pub mod token_bucket;

pub use circuit::{CircuitState, StreamRecord};
pub use hooks::{ClientConnection, PeerConnection, RelayControl, RelayHook};
pub use network::{TorConfig, TorCounters, TorError, TorEvent, TorNetwork, TorSim};
pub use node::{EndpointSpec, NodeId, NodeKind, NodeStats, RelaySpec};
pub use path::{BandwidthWeights, PathSelector, Position, RelayFlags, RelayInfo};
pub use scheduler::{CircuitScheduler, RoundRobin, SchedulerKind};
pub use token_bucket::TokenBucket;
