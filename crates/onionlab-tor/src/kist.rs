//! KIST: Kernel-Informed Socket Transport (Jansen, Geddes, Wacek, Sherr & Syverson, USENIX
//! Security 2014; "KIST: Kernel-Informed Socket Transport for Tor", TOPS 2018), as tor
//! ships it in `scheduler_kist.c` (tor >= 0.3.2), with KISTLite.
//!
//! **Owns:** the relay-level part of KIST: [`KistParams`], the per-socket write limit
//! ([`socket_limit`], [`lite_limit`]) and one scheduling run over all channels of a relay
//! ([`kist_run`]). **Must not touch:** cells, queues or sockets: a run sees the channels
//! through the [`KistChannels`] trait, which [`crate::network`] implements over its
//! channel ends; the per-channel choice of circuit stays with each channel's
//! [`CircuitScheduler`] (tor's circuitmux, always EWMA in tor, so KIST builds
//! [`crate::ewma::EwmaScheduler`] on every channel).
//!
//! How a run works (tor's `kist_scheduler_run`; `../shared/specs/tor-constants.md` 3.3):
//! 1. For every channel with cells, compute the socket's write limit from TCP_INFO and
//!    SIOCOUTQNSD (`update_socket_info_impl`):
//!    `limit = max(0, (cwnd - unacked)·mss + cwnd·mss·KISTSockBufSizeFactor - notsent - outbuf)`,
//!    where the first term is floored at 0 when unacked exceeds cwnd. The transport gives
//!    cwnd and unacked in bytes, which are tor's segment counts times mss.
//!    KISTLite has no kernel information and uses the channel's own outbuf room:
//!    `limit = ceil((OR_CONN_HIGHWATER - outbuf)/514) · (514 + 29)` (`channel_num_cells_writeable`).
//! 2. Repeatedly take the channel whose best circuit has the lowest EWMA count across all
//!    channels of the relay (`circuitmux_compare_muxes`), move **one** cell of that
//!    circuit to the channel's outbuf and charge the channel 514 + 29 bytes (cell plus
//!    TLS overhead, `TLS_PER_CELL_OVERHEAD`). A channel takes a cell only while at least
//!    one whole charge fits in its remaining limit (`socket_can_write`), so the bytes
//!    charged never exceed the limit.
//! 3. The outbufs go to the kernel. When the run switches away from a channel whose
//!    outbuf holds more than 8 cells, that outbuf is written at once
//!    (`channel_should_write_to_kernel`, `channel_write_to_kernel`): one write, so at most
//!    one share of the relay's write bucket ([`KistChannels::write_now`]). The channels the
//!    run reaches first thus take the write tokens first, which matters when the bucket,
//!    not the socket, is the limit. Every other outbuf is written after the run by the
//!    relay's write pass, as tor writes the rest of its outbuf table.
//!
//! Runs happen every `KISTSchedRunInterval` while any channel has cells: when a cell
//! arrives at a relay with no run pending, the run is at `max(now, last run + interval)`
//! (`kist_scheduler_schedule`).
//!
//! Parameters:
//! - `KISTSchedRunInterval`, milliseconds: tor default **10 ms** (consensus; the 2021 live
//!   network used **2 ms**, tornettools#51).
//! - `KISTSockBufSizeFactor`, dimensionless: default **1.0**.
//! - KISTLite: a boolean here (tor picks it when the kernel lacks TCP_INFO).
//!
//! [`CircuitScheduler`]: crate::scheduler::CircuitScheduler

use onionlab_core::{SimDuration, SimTime};
use onionlab_net::SocketInfo;

pub use crate::cell::TLS_PER_CELL_OVERHEAD;
use crate::cell::{CELL_NETWORK_SIZE, CELL_WIRE_BYTES};

/// Default `KISTSchedRunInterval` (tor: 10 ms).
pub const DEFAULT_RUN_INTERVAL: SimDuration = SimDuration::from_millis(10);
/// Default `KISTSockBufSizeFactor`.
pub const DEFAULT_SOCK_BUF_SIZE_FACTOR: f64 = 1.0;
/// What KIST charges a channel for one cell: `CELL_MAX_NETWORK_SIZE + TLS_PER_CELL_OVERHEAD`
/// (514 + 29 = 543 B, the model's wire size of a cell).
pub const KIST_CELL_CHARGE: u64 = CELL_WIRE_BYTES;

/// A relay's KIST configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KistParams {
    /// `KISTSchedRunInterval`.
    pub run_interval: SimDuration,
    /// `KISTSockBufSizeFactor` (>= 0).
    pub sock_buf_size_factor: f64,
    /// KISTLite: limit writes by the outbuf's room, without kernel information.
    pub lite: bool,
}

impl Default for KistParams {
    fn default() -> Self {
        KistParams { run_interval: DEFAULT_RUN_INTERVAL, sock_buf_size_factor: DEFAULT_SOCK_BUF_SIZE_FACTOR, lite: false }
    }
}

/// KIST's per-socket write limit in bytes (`update_socket_info_impl`).
pub fn socket_limit(info: &SocketInfo, outbuf_bytes: u64, sock_buf_size_factor: f64) -> u64 {
    let cwnd = info.cwnd_bytes as i128;
    let tcp_space = (cwnd - info.unacked as i128).max(0);
    let extra = (info.cwnd_bytes as f64 * sock_buf_size_factor).floor() as i128 - info.unsent as i128 - outbuf_bytes as i128;
    (tcp_space + extra).max(0) as u64
}

/// KISTLite's limit (`channel_num_cells_writeable` times the per-cell charge).
pub fn lite_limit(outbuf_bytes: u64, outbuf_high_water: u64) -> u64 {
    outbuf_high_water.saturating_sub(outbuf_bytes).div_ceil(CELL_NETWORK_SIZE) * KIST_CELL_CHARGE
}

/// The channels of one relay as a KIST run sees them. Indices are stable for one run.
pub trait KistChannels {
    /// Number of channel ends of the relay.
    fn len(&self) -> usize;
    /// Whether the relay has no channel ends.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the channel may carry cells and has a circuit with cells for it.
    fn has_cells(&self, i: usize) -> bool;
    /// The channel's write limit for this run, bytes.
    fn limit(&self, i: usize, params: &KistParams) -> u64;
    /// The EWMA count of the channel's best circuit at `now`, comparable across the
    /// relay's channels (lower goes first); `None` when its policy has no such count.
    fn priority(&mut self, i: usize, now: SimTime) -> Option<f64>;
    /// Moves one cell of the channel's best circuit to its outbuf; false if it had none.
    fn flush_one(&mut self, i: usize, now: SimTime) -> bool;
    /// Bytes in the channel's outbuf (`channel_outbuf_length`), at the model's 543 B a cell.
    fn outbuf_bytes(&self, i: usize) -> u64;
    /// Writes the channel's outbuf to the kernel now (`channel_write_to_kernel`: one
    /// write, bounded by the relay's write bucket share and the socket).
    fn write_now(&mut self, i: usize);
}

/// A run writes a channel's outbuf when it moves on to another channel if the outbuf
/// holds more than this many cells (`CELL_MAX_NETWORK_SIZE * 8` in
/// `channel_should_write_to_kernel`).
pub const WRITE_WHEN_SWITCHING_ABOVE_CELLS: u64 = 8;

/// What one run did, per channel: cells moved to the outbuf and the limit they were
/// charged against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KistRun {
    /// `(channel index, limit, cells moved)` for every channel that had cells.
    pub channels: Vec<(usize, u64, u64)>,
    /// Channels written during the run, in order, when the run switched away from them.
    pub written_when_switching: Vec<usize>,
}

impl KistRun {
    /// Cells moved to outbufs in the run, over all channels.
    pub fn cells_moved(&self) -> u64 {
        self.channels.iter().map(|c| c.2).sum()
    }
}

/// A channel in a run's queue: its best circuit's count, then its index in the run (ties
/// go to the lower index). Tor's `channels_pending` is a heap too, but it compares each
/// mux's head count as of that mux's last transmission (not rescaled to now) and breaks
/// ties in heap order; here counts are brought to the run's time first.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ready(f64, usize);

impl Eq for Ready {}

impl Ord for Ready {
    /// Reversed, so that `BinaryHeap`'s maximum is the lowest count.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One KIST scheduling run over a relay's channels at `now`.
///
/// The channels that can take a cell wait in a heap by their best circuit's count (tor
/// keeps `channels_pending` sorted by `circuitmux_compare_muxes`): moving a cell changes
/// only its own channel's count, so a cell costs O(log channels), not a scan of them all.
/// Channels whose circuitmux has no count (none in tor, whose KIST always runs EWMA) are
/// served after those with one, in turns.
pub fn kist_run(chans: &mut dyn KistChannels, params: &KistParams, now: SimTime) -> KistRun {
    // (index, limit, charged, cells)
    let mut pending: Vec<(usize, u64, u64, u64)> =
        (0..chans.len()).filter(|&i| chans.has_cells(i)).map(|i| (i, chans.limit(i, params), 0, 0)).collect();
    let mut heap = std::collections::BinaryHeap::with_capacity(pending.len());
    // Channels without a count, in index order.
    let mut unordered: Vec<usize> = Vec::new();
    for (k, &(i, limit, _, _)) in pending.iter().enumerate() {
        if limit >= KIST_CELL_CHARGE {
            match chans.priority(i, now) {
                Some(p) => heap.push(Ready(p, k)),
                None => unordered.push(k),
            }
        }
    }
    // Moves one cell for run entry `k`; true if the channel can take another.
    let flush = |chans: &mut dyn KistChannels, pending: &mut [(usize, u64, u64, u64)], k: usize| -> bool {
        let e = &mut pending[k];
        if !chans.flush_one(e.0, now) {
            return false;
        }
        e.2 += KIST_CELL_CHARGE;
        e.3 += 1;
        debug_assert!(e.2 <= e.1, "KIST charged past the socket limit");
        e.1 - e.2 >= KIST_CELL_CHARGE && chans.has_cells(e.0)
    };
    // The channel served last: switching away from it may write its outbuf.
    let mut prev: Option<usize> = None;
    let mut written = Vec::new();
    let mut switch_to = |chans: &mut dyn KistChannels, pending: &[(usize, u64, u64, u64)], k: usize| {
        if let Some(p) = prev.filter(|&p| p != k) {
            let i = pending[p].0;
            if chans.outbuf_bytes(i) > WRITE_WHEN_SWITCHING_ABOVE_CELLS * KIST_CELL_CHARGE {
                chans.write_now(i);
                written.push(i);
            }
        }
        prev = Some(k);
    };
    while let Some(Ready(_, k)) = heap.pop() {
        loop {
            switch_to(chans, &pending, k);
            if !flush(chans, &mut pending, k) {
                break;
            }
            match chans.priority(pending[k].0, now) {
                Some(p) => {
                    // If the channel still goes before every other, the heap would hand it
                    // straight back (its order is total): serve it without the round trip.
                    if heap.peek().is_none_or(|top| Ready(p, k) > *top) {
                        continue;
                    }
                    heap.push(Ready(p, k));
                }
                None => {
                    let at = unordered.partition_point(|&u| u < k);
                    unordered.insert(at, k);
                }
            }
            break;
        }
    }
    // With no counts (a round-robin circuitmux), channels take turns.
    let mut turn = 0usize;
    while !unordered.is_empty() {
        turn %= unordered.len();
        let r = turn;
        turn += 1;
        switch_to(chans, &pending, unordered[r]);
        if !flush(chans, &mut pending, unordered[r]) {
            unordered.remove(r);
        }
    }
    KistRun { channels: pending.into_iter().map(|(i, limit, _, cells)| (i, limit, cells)).collect(), written_when_switching: written }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_charged_its_wire_size() {
        // tor charges each flushed cell 514 bytes plus 29 of TLS overhead (tor-constants.md).
        assert_eq!(KIST_CELL_CHARGE, 514 + 29);
    }
    use crate::ewma::EwmaScheduler;
    use crate::scheduler::{CircPolicyData, CircuitScheduler};
    use proptest::prelude::*;

    fn info(cwnd: u64, unacked: u64, unsent: u64) -> SocketInfo {
        SocketInfo { cwnd_bytes: cwnd, mss: 1448, unacked, unsent, sndbuf_free: 1 << 20, srtt: None, min_rtt: None }
    }

    #[test]
    fn limit_follows_tors_formula() {
        // cwnd 10 segments of 1448 B, 4 unacked, 2000 B unsent, 1000 B in the outbuf:
        // (10 - 4)·1448 + 10·1448·1.0 - 2000 - 1000 = 8688 + 14480 - 3000 = 20168.
        assert_eq!(socket_limit(&info(14_480, 5_792, 2_000), 1_000, 1.0), 20_168);
        // Factor 0.5 halves the kernel-buffer term: 8688 + 7240 - 3000.
        assert_eq!(socket_limit(&info(14_480, 5_792, 2_000), 1_000, 0.5), 12_928);
        // More unacked than the window: the TCP term is 0, not negative.
        assert_eq!(socket_limit(&info(14_480, 20_000, 0), 0, 1.0), 14_480);
        // A full kernel buffer: limit 0.
        assert_eq!(socket_limit(&info(14_480, 14_480, 20_000), 0, 1.0), 0);
    }

    #[test]
    fn lite_limit_is_the_outbufs_room_in_cells() {
        assert_eq!(lite_limit(0, 32 * 1024), 64 * KIST_CELL_CHARGE, "32 KiB / 514 B rounds up to 64 cells");
        assert_eq!(lite_limit(32 * 1024, 32 * 1024), 0);
        assert_eq!(lite_limit(40_000, 32 * 1024), 0);
    }

    /// Channels for tests: each has an EWMA circuitmux and queues of cells per circuit.
    struct Fake {
        limits: Vec<u64>,
        muxes: Vec<EwmaScheduler>,
        queues: Vec<std::collections::BTreeMap<u32, u64>>,
        /// Policy data per (channel, circuit).
        data: std::collections::BTreeMap<(usize, u32), CircPolicyData>,
        moved: Vec<Vec<u32>>,
        /// Every cell moved, in order: (channel, circuit).
        order: Vec<(usize, u32)>,
        /// Cells in each outbuf, and every write: (channel, cells written).
        outbuf: Vec<u64>,
        writes: Vec<(usize, u64)>,
    }

    impl Fake {
        fn new(limits: Vec<u64>, queues: Vec<Vec<(u32, u64)>>) -> Self {
            let mut muxes = vec![];
            let mut qs = vec![];
            let mut data = std::collections::BTreeMap::new();
            for (i, q) in queues.iter().enumerate() {
                let mut m = EwmaScheduler::new(SimDuration::from_secs(30), SimDuration::from_secs(10));
                let mut map = std::collections::BTreeMap::new();
                for &(c, n) in q {
                    if n > 0 {
                        m.activate(c, SimTime::ZERO, data.entry((i, c)).or_default());
                        map.insert(c, n);
                    }
                }
                muxes.push(m);
                qs.push(map);
            }
            let n = limits.len();
            Fake { limits, muxes, queues: qs, data, moved: vec![vec![]; n], order: vec![], outbuf: vec![0; n], writes: vec![] }
        }
    }

    impl KistChannels for Fake {
        fn len(&self) -> usize {
            self.limits.len()
        }
        fn has_cells(&self, i: usize) -> bool {
            self.muxes[i].active() > 0
        }
        fn limit(&self, i: usize, _: &KistParams) -> u64 {
            self.limits[i]
        }
        fn priority(&mut self, i: usize, now: SimTime) -> Option<f64> {
            self.muxes[i].head_priority(now)
        }
        fn flush_one(&mut self, i: usize, now: SimTime) -> bool {
            let Some((c, _)) = self.muxes[i].pick(now) else { return false };
            let left = self.queues[i].get_mut(&c).expect("active circuits have cells");
            *left -= 1;
            self.muxes[i].on_cells_sent(c, 1, now);
            if *left == 0 {
                self.muxes[i].deactivate(c, self.data.entry((i, c)).or_default());
            }
            self.moved[i].push(c);
            self.order.push((i, c));
            self.outbuf[i] += 1;
            true
        }
        fn outbuf_bytes(&self, i: usize) -> u64 {
            self.outbuf[i] * KIST_CELL_CHARGE
        }
        fn write_now(&mut self, i: usize) {
            self.writes.push((i, self.outbuf[i]));
            self.outbuf[i] = 0;
        }
    }

    #[test]
    fn switching_away_writes_an_outbuf_of_more_than_8_cells() {
        // Channel 1's new circuit (count 0) goes first; channel 0's circuit has sent 20
        // cells. Channel 1 moves its 20 cells, then the run switches to channel 0 and
        // writes channel 1's outbuf at once (20 > 8 cells); channel 0's is left for the
        // relay's write pass after the run.
        let mut f = Fake::new(vec![100 * KIST_CELL_CHARGE; 2], vec![vec![(1, 50)], vec![(2, 20)]]);
        f.muxes[0].on_cells_sent(1, 20, SimTime::ZERO);
        let run = kist_run(&mut f, &KistParams::default(), SimTime::ZERO);
        assert_eq!(f.writes, vec![(1, 20)]);
        assert_eq!(run.written_when_switching, vec![1]);
        assert_eq!(f.outbuf, vec![50, 0]);
        // With 8 cells, channel 1's outbuf waits for the write pass too.
        let mut f = Fake::new(vec![100 * KIST_CELL_CHARGE; 2], vec![vec![(1, 50)], vec![(2, 8)]]);
        f.muxes[0].on_cells_sent(1, 20, SimTime::ZERO);
        let run = kist_run(&mut f, &KistParams::default(), SimTime::ZERO);
        assert!(f.writes.is_empty() && run.written_when_switching.is_empty(), "{:?}", f.writes);
        assert_eq!(f.outbuf, vec![50, 8]);
    }

    #[test]
    fn equal_channels_take_turns_without_writing_each_cell() {
        // Two new circuits with equal counts alternate cell by cell; each switch finds at
        // most 8 cells in the other outbuf until it passes 8, then writes it (tor's reason
        // for the threshold: no write per cell when two channels bounce).
        let mut f = Fake::new(vec![100 * KIST_CELL_CHARGE; 2], vec![vec![(1, 30)], vec![(2, 30)]]);
        // 30 cells each: three writes of 9 per channel, alternating, and 3 left in each.
        kist_run(&mut f, &KistParams::default(), SimTime::ZERO);
        assert_eq!(f.writes, vec![(0, 9), (1, 9), (0, 9), (1, 9), (0, 9), (1, 9)]);
        assert_eq!(f.outbuf, vec![3, 3]);
    }

    #[test]
    fn the_quiet_circuit_goes_first_across_channels() {
        // Channel 0 carries circuit 1, which has sent a lot; channel 1 carries a new circuit 2.
        let mut f = Fake::new(vec![100 * KIST_CELL_CHARGE, 100 * KIST_CELL_CHARGE], vec![vec![(1, 50)], vec![(2, 3)]]);
        for _ in 0..20 {
            f.muxes[0].on_cells_sent(1, 1, SimTime::ZERO);
        }
        let run = kist_run(&mut f, &KistParams::default(), SimTime::ZERO);
        assert_eq!(run.cells_moved(), 53);
        // Circuit 2's three cells (count 0, 1, 2) all precede circuit 1's (count >= 20).
        assert_eq!(f.moved[1], vec![2, 2, 2]);
        assert_eq!(f.moved[0].len(), 50);
    }

    #[test]
    fn a_channel_takes_cells_while_a_whole_cell_charge_fits() {
        // A channel moves a cell while at least KIST_CELL_CHARGE (543 bytes) of its limit is
        // left: exactly one charge moves one cell, exactly three move three, one byte short
        // of a charge moves none. Every channel has five cells queued.
        let c = KIST_CELL_CHARGE;
        let mut f = Fake::new(vec![c, 3 * c, c - 1, 2 * c - 1], vec![vec![(1, 5)], vec![(2, 5)], vec![(3, 5)], vec![(4, 5)]]);
        let run = kist_run(&mut f, &KistParams::default(), SimTime::ZERO);
        let moved: Vec<usize> = f.moved.iter().map(Vec::len).collect();
        assert_eq!(moved, vec![1, 3, 0, 1]);
        assert_eq!(run.cells_moved(), 5);
    }

    /// The run as a scan of every ready channel per cell (the definition the heap must
    /// match cell for cell): lowest count first, ties to the lower index.
    fn scan_run(chans: &mut dyn KistChannels, params: &KistParams, now: SimTime) {
        let mut pending: Vec<(usize, u64, u64)> =
            (0..chans.len()).filter(|&i| chans.has_cells(i)).map(|i| (i, chans.limit(i, params), 0)).collect();
        let mut ready: Vec<usize> = (0..pending.len()).filter(|&k| pending[k].1 >= KIST_CELL_CHARGE).collect();
        while !ready.is_empty() {
            let mut best: Option<(usize, f64)> = None;
            for (r, &k) in ready.iter().enumerate() {
                let p = chans.priority(pending[k].0, now).expect("EWMA muxes");
                if best.is_none_or(|(_, b)| p < b) {
                    best = Some((r, p));
                }
            }
            let r = best.unwrap().0;
            let e = &mut pending[ready[r]];
            if !chans.flush_one(e.0, now) {
                ready.remove(r);
                continue;
            }
            e.2 += KIST_CELL_CHARGE;
            if e.1 - e.2 < KIST_CELL_CHARGE || !chans.has_cells(e.0) {
                ready.remove(r);
            }
        }
    }

    proptest! {
        /// The heap serves the same cells in the same order as a scan of all channels per
        /// cell, including ties (new circuits all count 0, so ties are common).
        #[test]
        fn heap_run_moves_what_a_scan_moves(
            chans in prop::collection::vec((0u64..40_000, prop::collection::vec((0u32..5, 0u64..60), 0..4)), 1..8),
            warm in prop::collection::vec((0usize..8, 0u32..5, 1u32..30), 0..6),
        ) {
            let limits: Vec<u64> = chans.iter().map(|c| c.0).collect();
            let queues: Vec<Vec<(u32, u64)>> = chans.iter().map(|c| {
                let mut seen = std::collections::BTreeSet::new();
                c.1.iter().filter(|(id, _)| seen.insert(*id)).copied().collect()
            }).collect();
            let (mut a, mut b) = (Fake::new(limits.clone(), queues.clone()), Fake::new(limits, queues));
            // Some circuits have sent cells before: unequal counts.
            for &(i, c, n) in &warm {
                if i < a.muxes.len() && a.muxes[i].count(c).is_some() {
                    a.muxes[i].on_cells_sent(c, n, SimTime::ZERO);
                    b.muxes[i].on_cells_sent(c, n, SimTime::ZERO);
                }
            }
            let now = SimTime::ZERO + SimDuration::from_secs(3);
            kist_run(&mut a, &KistParams::default(), now);
            scan_run(&mut b, &KistParams::default(), now);
            prop_assert_eq!(a.order, b.order);
        }
    }

    proptest! {
        /// KIST never charges a channel past its limit, and it is work-conserving: when a
        /// run ends, every channel with cells left has less than one cell of room.
        #[test]
        fn never_exceeds_the_limit_and_never_idles_with_room(
            chans in prop::collection::vec((0u64..40_000, prop::collection::vec((0u32..5, 0u64..60), 0..4)), 1..6),
        ) {
            let limits = chans.iter().map(|c| c.0).collect();
            let queues = chans.iter().map(|c| {
                let mut seen = std::collections::BTreeSet::new();
                c.1.iter().filter(|(id, _)| seen.insert(*id)).copied().collect()
            }).collect();
            let mut f = Fake::new(limits, queues);
            let run = kist_run(&mut f, &KistParams::default(), SimTime::ZERO + SimDuration::from_secs(3));
            for &(i, limit, cells) in &run.channels {
                prop_assert!(cells * KIST_CELL_CHARGE <= limit, "channel {i}: {cells} cells over limit {limit}");
                prop_assert_eq!(cells as usize, f.moved[i].len());
                if f.has_cells(i) {
                    prop_assert!(limit - cells * KIST_CELL_CHARGE < KIST_CELL_CHARGE, "channel {i} idle with room");
                }
            }
        }
    }

    #[test]
    fn default_params_are_tors() {
        // KISTSchedRunInterval 10 ms (tor default), KISTSockBufSizeFactor 1.0, full KIST.
        let p = KistParams::default();
        assert_eq!(p.run_interval, SimDuration::from_millis(10));
        assert_eq!(p.sock_buf_size_factor, 1.0);
        assert!(!p.lite);
    }
}
