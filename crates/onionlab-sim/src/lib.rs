//! # onionlab-sim
//!
//! Runs an experiment: builds the network a validated config describes, drives its
//! clients' workloads over the Tor model, and collects the result tables.
//!
//! **Owns:** the mapping from config to model objects ([`build`]), the run loop with
//! workload timers and metric sampling ([`run`](mod@run)), and the result rows ([`results`]).
//! **Must not touch:** parsing (onionlab-config) or model internals (it uses the public
//! APIs of onionlab-tor and onionlab-net).

pub mod build;
pub mod load;
pub mod results;
pub mod run;

pub use results::{ChannelRow, CircuitRow, ConnectionRow, DownloadRow, Name, RelayRow, RunOutput, RunSummary};
pub use run::{run, run_inspected, SimError};
