//! # onionlab-tor
//!
//! The Tor model: what every mechanism in the papers plugs into.
//!
//! **Owns:** cells and their run-length queues ([`cell`]), token buckets
//! ([`token_bucket`]), channels ([`channel`]), circuits and streams ([`circuit`]), relays,
//! clients and servers ([`node`]), circuit schedulers ([`scheduler`], BRAIDS's [`hpd`], the per-circuit
//! budgets of [`shaped`]), service classes and the
//! incentive-scheme hook ([`incentive`]), data cells in transit ([`transit`]), end-to-end flow
//! control ([`flow_control`]), path selection ([`path`]), relay hooks ([`hooks`]) and the
//! network that runs them ([`network`]).
//!
//! **Must not touch:** transport internals (it uses `onionlab-net`'s public API) and
//! experiment configuration or workloads (layers above).
//!
//! Constants are tor's (0.4.8 source, `../shared/specs/tor-constants.md`), named after the
//! tor identifiers they come from; the papers' values are parameters.

pub mod cell;
pub mod channel;
pub mod circuit;
pub mod directory;
pub mod ewma;
pub mod flow_control;
pub mod hooks;
pub mod hpd;
pub mod incentive;
pub mod kist;
pub mod network;
pub mod node;
pub mod path;
pub mod scheduler;
pub mod shaped;
pub mod token_bucket;
pub mod transit;
pub mod vegas;
pub mod wait;

pub use channel::RelayChannelEnd;
pub use circuit::{CircuitState, StreamRecord, UNFINISHED};
pub use flow_control::CongestionControlKind;
pub use hooks::{ClientConnection, PeerConnection, ReadWriteLimits, RelayCircuit, RelayControl, RelayHook};
pub use hpd::{HpdParams, HpdScheduler};
pub use incentive::{ClassSplit, IncentiveScheme, ServiceClass};
pub use network::{
    CbtLearning, ChannelIdleTimeout, CircuitTransit, PathOrder, RefillPhase, TorConfig, TorCounters, TorError, TorEvent, TorNetwork, TorSim,
};
pub use node::{EndpointSpec, NodeId, NodeKind, NodeStats, RelaySpec};
pub use path::{BandwidthTotals, BandwidthWeights, PathSelector, Position, RelayFlags, RelayInfo, WeightsMethod};
pub use scheduler::{CircuitScheduler, ClassDelays, RoundRobin, SchedulerKind};
pub use token_bucket::TokenBucket;
pub use transit::{TransitLedger, TransitSnapshot};
pub use vegas::VegasParams;

/// The hot-path structs keep the fields one batch touches in one cache line each (see
/// `docs/performance.md`); these checks fail if an edit moves one out of its line.
#[cfg(test)]
mod layout {
    use std::mem::{offset_of, size_of};

    /// Which 64-byte line of its struct a field starts and ends in.
    fn lines(offset: usize, size: usize) -> (usize, usize) {
        (offset / 64, (offset + size - 1) / 64)
    }

    #[test]
    fn hot_fields_share_their_cache_lines() {
        use crate::cell::CellFifo;
        use crate::channel::ChanEnd;
        use crate::circuit::{Circuit, HopQueue};
        use crate::node::{NodeId, NodeStats, TorNode};
        // A relayed run reads the circuit's first line, then one hop queue's line.
        assert_eq!(size_of::<HopQueue>(), 64);
        assert_eq!(offset_of!(Circuit, queues) % 64, 0);
        for (offset, size) in [
            (offset_of!(Circuit, nodes), size_of::<[u32; 4]>()),
            (offset_of!(Circuit, chans), size_of::<[Option<u32>; 3]>()),
            (offset_of!(Circuit, state), 1),
            (offset_of!(Circuit, cells_out), 4),
            (offset_of!(Circuit, built), size_of::<usize>()),
            (offset_of!(Circuit, lower_initiates), 3),
            (offset_of!(Circuit, limited), 1),
        ] {
            assert_eq!(lines(offset, size), (0, 0), "circuit header field past the first line");
        }
        // A channel end's read side in its first line; the outbuf with its tail in the
        // second; the circuitmux inline from the third, the write limits and the count of
        // bytes written after it in the fourth; the wire in the fifth.
        assert_eq!(lines(offset_of!(ChanEnd, conn_read), size_of::<Option<crate::token_bucket::TokenBucket>>()), (0, 0));
        // ... with the copies of the channel's header a batch's arrival needs.
        assert_eq!(lines(offset_of!(ChanEnd, closed), 1), (0, 0));
        assert_eq!(lines(offset_of!(ChanEnd, conn), size_of::<onionlab_net::ConnId>()), (0, 0));
        assert_eq!(lines(offset_of!(ChanEnd, node), size_of::<NodeId>()), (0, 0));
        assert_eq!(lines(offset_of!(ChanEnd, outbuf), size_of::<CellFifo>()), (1, 1));
        assert_eq!(lines(offset_of!(ChanEnd, tail_unwritten), 8), (1, 1));
        assert_eq!(offset_of!(ChanEnd, sched), 128);
        assert!(size_of::<crate::scheduler::CircuitMux>() <= 80, "the circuitmux outgrew a line and a quarter");
        assert_eq!(lines(offset_of!(ChanEnd, conn_write), size_of::<Option<crate::token_bucket::TokenBucket>>()), (3, 3));
        assert_eq!(lines(offset_of!(ChanEnd, in_write_ring), 1), (3, 3));
        assert_eq!(lines(offset_of!(ChanEnd, open), 1), (3, 3));
        assert_eq!(lines(offset_of!(ChanEnd, write_conn), size_of::<onionlab_net::ConnId>()), (3, 3));
        assert_eq!(lines(offset_of!(ChanEnd, wire), size_of::<CellFifo>()), (4, 4));
        assert_eq!(lines(offset_of!(ChanEnd, bytes_written), 8), (3, 3));
        assert_eq!(size_of::<ChanEnd>(), 5 * 64);
        // A node's pump flags, KIST switch and batch counters in its third line.
        let stats = offset_of!(TorNode, stats);
        assert_eq!(lines(offset_of!(TorNode, dirty), 1).0, 2);
        assert_eq!(lines(offset_of!(TorNode, runs_hpd), 1).0, 2);
        assert_eq!(lines(stats + offset_of!(NodeStats, cells_relayed), 8), (2, 2));
        assert_eq!(lines(stats + offset_of!(NodeStats, bytes_read), 8), (2, 2));
        // The refill phase, read only when a refill is scheduled, in the fourth.
        assert_eq!(lines(offset_of!(TorNode, refill_phase), 8), (3, 3));
    }
}
