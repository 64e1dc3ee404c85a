//! Helpers shared by the transport tests.

#![allow(dead_code)]

use onionlab_core::SimDuration;
use onionlab_net::*;

pub fn host(name: &str, up_bits: u64, down_bits: u64) -> HostSpec {
    HostSpec { name: name.into(), location: 0, up_bits_per_sec: up_bits, down_bits_per_sec: down_bits }
}

pub type Harness = TransferRunner;

pub fn constant(one_way_ms: u64) -> Harness {
    TransferRunner::new(TransportConfig::default(), LatencyModel::constant(SimDuration::from_millis(one_way_ms)), 1)
}

/// Textbook completion time of one transfer of `s` bytes over a path of bottleneck `c`
/// bit/s and round-trip time `rtt`, with slow start from `w0` bytes: one RTT of handshake,
/// then rounds of a doubling window; a round lasts an RTT unless the window covers the
/// path (window/c >= rtt), after which the rest moves at `c`; the last byte then needs half
/// an RTT to arrive.
pub fn textbook_time(s: u64, c_bits: u64, rtt: f64, w0: u64) -> f64 {
    let c = c_bits as f64 / 8.0;
    let mut t = rtt; // SYN, SYN-ACK: data leaves after one RTT
    let mut sent = 0u64;
    let mut w = w0;
    loop {
        let burst = w.min(s - sent);
        sent += burst;
        if sent == s {
            return t + burst as f64 / c + rtt / 2.0;
        }
        let round = burst as f64 / c;
        if round >= rtt {
            // The window now covers the path: the rest streams at capacity.
            return t + (s - sent + burst) as f64 / c + rtt / 2.0;
        }
        t += rtt;
        w *= 2;
    }
}
