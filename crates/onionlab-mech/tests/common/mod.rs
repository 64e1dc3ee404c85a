//! Small networks shared by the mechanism tests.

#![allow(dead_code)]

use onionlab_core::{SimDuration, SimTime};
use onionlab_tor::{EndpointSpec, RelayFlags, RelaySpec, SchedulerKind};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GBIT: u64 = 1_000_000_000;

pub fn t(s: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_secs(s)
}

/// A relay on a 1 Gbit link with BandwidthRate = BandwidthBurst = `rate` and exactly `flags`.
pub fn relay(name: &str, rate: u64, flags: RelayFlags) -> RelaySpec {
    RelaySpec {
        name: name.into(),
        location: 0,
        up_bits_per_sec: GBIT,
        down_bits_per_sec: GBIT,
        bandwidth_rate: rate,
        bandwidth_burst: rate,
        consensus_weight: (rate / 1024).max(1),
        flags,
        perconn: None,
        scheduler: SchedulerKind::RoundRobin,
        address: None,
    }
}

pub fn endpoint(name: &str) -> EndpointSpec {
    EndpointSpec { name: name.into(), location: 0, up_bits_per_sec: GBIT, down_bits_per_sec: GBIT }
}
