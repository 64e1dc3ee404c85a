//! # onionlab-workload
//!
//! What clients do: the web, bulk and perf (onionperf-like) behaviours of the papers, and
//! the size and time distributions they draw from.
//!
//! **Owns:** sampling ([`dist`]) and per-client state machines ([`client`]) that say what to
//! fetch next and when. **Must not touch:** Tor or the network; the simulation driver asks
//! a client what to do and carries it out.

pub mod client;
pub mod dist;
pub mod markov;

pub use client::{ClientBehaviour, Next};
pub use dist::{sample_size, sample_time};
