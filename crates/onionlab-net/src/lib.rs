//! # onionlab-net
//!
//! Hosts, latency and transport: the layer that moves bytes and knows nothing of Tor.
//!
//! **Owns:** hosts with upstream and downstream capacity ([`host`]), latency between
//! locations ([`latency`], from a constant, a matrix or a Shadow-style [`gml`] graph), and
//! reliable in-order byte streams between hosts with send buffers, backpressure and TCP-like
//! congestion windows ([`flow`], [`network`]).
//!
//! **Must not touch:** cells, circuits, relays or any meaning of the bytes it carries. The
//! layer above keeps its own ordered record of what it wrote and reads it back against the
//! byte counts this layer delivers.

pub mod flow;
pub mod gml;
pub mod host;
pub mod latency;
pub mod network;
pub mod transfers;

pub use flow::{FlowWaits, SocketInfo, TransportConfig};
pub use host::{HostId, HostSpec};
pub use latency::LatencyModel;
pub use network::{jain_index, ConnId, LinkRecord, NetError, NetEvent, NetNotice, Network, Side, NET_EVENT_CLASS};
pub use transfers::{Transfer, TransferRunner};
