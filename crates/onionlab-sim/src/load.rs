//! Loading a network without running it: what `onionlab check --load` measures.
//!
//! **Owns:** building everything a run starts from (the Tor network with its relays,
//! clients and servers, and every client's workload state) and reporting its size.
//! **Must not touch:** the run loop.

use onionlab_config::model::ExperimentConfig;
use onionlab_core::RngStreams;

use crate::build::build;
use crate::run::{behaviours, SimError};

/// What was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadSummary {
    pub relays: usize,
    pub clients: usize,
    pub servers: usize,
    pub nodes: usize,
}

/// Builds the network of `cfg` for `seed` as a run would, then drops it.
pub fn load(cfg: &ExperimentConfig, seed: u64) -> Result<LoadSummary, SimError> {
    let built = build(cfg, seed)?;
    let b = behaviours(cfg, &built.clients, &built.tor, &RngStreams::new(seed));
    Ok(LoadSummary { relays: built.tor.relays().len(), clients: b.len(), servers: built.servers.len(), nodes: built.tor.num_nodes() })
}
