//! A minimal application on top of the transport: bulk transfers.
//!
//! **Owns:** a driver loop and per-transfer progress: senders write a fixed number of bytes
//! as fast as their send buffer allows (resuming on [`NetNotice::Writable`]); receivers read
//! everything as soon as it arrives. Used by the transport's tests and benchmark and by the
//! Python demo. **Must not touch:** transport internals; it uses only the public API.

use onionlab_core::{EventQueue, SimTime};

use crate::{ConnId, HostId, LatencyModel, NetError, NetEvent, NetNotice, Network, Side, TransportConfig};

/// One bulk transfer and its progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    pub conn: ConnId,
    pub total: u64,
    pub written: u64,
    pub read: u64,
    pub done_at: Option<SimTime>,
}

/// Drives a set of transfers over a [`Network`].
pub struct TransferRunner {
    pub net: Network,
    pub q: EventQueue<NetEvent>,
    pub transfers: Vec<Transfer>,
    notices: Vec<NetNotice>,
}

impl TransferRunner {
    pub fn new(cfg: TransportConfig, latency: LatencyModel, seed: u64) -> Self {
        TransferRunner { net: Network::new(cfg, latency, seed), q: EventQueue::new(), transfers: Vec::new(), notices: Vec::new() }
    }

    /// Starts a transfer of `bytes` from `a` to `b`; returns its index.
    pub fn transfer(&mut self, a: HostId, b: HostId, bytes: u64) -> Result<usize, NetError> {
        let conn = self.net.connect(&mut self.q, a, b)?;
        let written = self.net.write(&mut self.q, conn, Side::Initiator, bytes);
        self.transfers.push(Transfer { conn, total: bytes, written, read: 0, done_at: None });
        Ok(self.transfers.len() - 1)
    }

    fn by_conn(&mut self, conn: ConnId) -> &mut Transfer {
        // Every connection of this network is one transfer, created in order.
        &mut self.transfers[conn.0 as usize]
    }

    /// Runs until `until` or until no events remain; `check` runs after every event.
    pub fn run_until(&mut self, until: SimTime, mut check: impl FnMut(&Network)) {
        while let Some(ev) = self.q.pop_until(until) {
            self.net.handle(&mut self.q, ev.event);
            self.net.drain_notices(&mut self.notices);
            for n in std::mem::take(&mut self.notices) {
                match n {
                    NetNotice::Writable { conn, side: Side::Initiator } => {
                        let t = self.by_conn(conn);
                        let (c, left) = (t.conn, t.total - t.written);
                        let w = self.net.write(&mut self.q, c, Side::Initiator, left);
                        self.by_conn(conn).written += w;
                    }
                    NetNotice::Readable { conn, side: Side::Acceptor } => {
                        let r = self.net.read(&mut self.q, conn, Side::Acceptor, u64::MAX);
                        let now = self.q.now();
                        let t = self.by_conn(conn);
                        t.read += r;
                        if t.read == t.total && t.done_at.is_none() {
                            t.done_at = Some(now);
                        }
                    }
                    _ => {}
                }
            }
            check(&self.net);
        }
    }

    pub fn run(&mut self) {
        self.run_until(SimTime::MAX, |_| {});
    }
}
