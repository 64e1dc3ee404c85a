//! End-to-end circuit flow control behind the [`CongestionControl`] trait.
//!
//! **Owns:** the circuit-level package and deliver windows of one circuit edge (client or
//! exit), and [`FixedWindow`], tor's legacy SENDME windows (`relay.c`,
//! `sendme.c`): CIRCWINDOW_START 1000 cells, a circuit SENDME per CIRCWINDOW_INCREMENT
//! 100 delivered cells. **Must not touch:** stream windows (fixed at 500/50 in
//! [`crate::circuit`]) or how cells move.
//!
//! Proposal 324's Vegas ([`crate::vegas`]) replaces [`FixedWindow`] through the same
//! trait ([`CongestionControlKind`] picks one per network), as PredicTor would.

use onionlab_core::SimTime;

/// `CIRCWINDOW_START` (or.h; consensus `circwindow`, range 100-1000).
pub const CIRCWINDOW_START: u64 = 1000;
/// `CIRCWINDOW_INCREMENT` (or.h).
pub const CIRCWINDOW_INCREMENT: u64 = 100;
/// `STREAMWINDOW_START` (or.h).
pub const STREAMWINDOW_START: u64 = 500;
/// `STREAMWINDOW_INCREMENT` (or.h).
pub const STREAMWINDOW_INCREMENT: u64 = 50;

/// Circuit-level flow or congestion control at one edge of a circuit.
pub trait CongestionControl {
    /// DATA cells this edge may package onto the circuit now.
    fn package_allowance(&self) -> u64;
    /// `cells` DATA cells were packaged.
    fn on_packaged(&mut self, cells: u64, now: SimTime);
    /// A circuit SENDME from the other edge arrived.
    fn on_sendme(&mut self, now: SimTime);
    /// `cells` DATA cells were delivered at this edge; returns how many circuit SENDMEs
    /// to send back.
    fn on_delivered(&mut self, cells: u64, now: SimTime) -> u64;
    /// Current package window in cells (for invariant checks and metrics).
    fn package_window(&self) -> u64;
    /// The edge's streams were blocked (true) or unblocked (false) on a full circuit queue
    /// (`circuit_blocked_on_p_chan`). Fixed windows ignore it; Vegas takes it as a
    /// congestion signal.
    fn set_blocked(&mut self, _blocked: bool) {}
    /// Whether streams keep their SENDME windows (500 cells, a SENDME per 50). Tor
    /// replaces them by XON/XOFF once congestion control is on (proposal 324 section 4).
    fn stream_windows(&self) -> bool {
        true
    }
    /// This controller's own invariants (the run fuzzers check them after every event).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    fn name(&self) -> &'static str;
}

/// Which circuit-level controller the circuits' edges run.
#[derive(Clone, Debug, PartialEq)]
pub enum CongestionControlKind {
    /// Tor's SENDME windows ([`FixedWindow`], `cc_alg` 0): `circ_window` cells, a SENDME
    /// per `circ_window_increment` (the network's [`crate::TorConfig`]).
    FixedWindow,
    /// Proposal 324's Vegas ([`crate::vegas::Vegas`], `cc_alg` 2), with its parameters,
    /// which every circuit edge's controller shares (`Arc::new(VegasParams::default())`).
    Vegas(std::sync::Arc<crate::vegas::VegasParams>),
}

impl CongestionControlKind {
    /// A controller for one circuit edge.
    pub fn build(&self, circ_window: u64, circ_window_increment: u64) -> Box<dyn CongestionControl> {
        match self {
            CongestionControlKind::FixedWindow => Box::new(FixedWindow::new(circ_window, circ_window_increment)),
            CongestionControlKind::Vegas(p) => Box::new(crate::vegas::Vegas::new(std::sync::Arc::clone(p))),
        }
    }
    /// Whether streams keep SENDME windows under this controller.
    pub fn stream_windows(&self) -> bool {
        matches!(self, CongestionControlKind::FixedWindow)
    }
}

/// Tor's fixed SENDME windows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    package: u64,
    deliver: u64,
    start: u64,
    increment: u64,
}

impl FixedWindow {
    /// A window of `start` cells with a SENDME per `increment` delivered cells.
    pub fn new(start: u64, increment: u64) -> Self {
        FixedWindow { package: start, deliver: start, start, increment }
    }
}

impl Default for FixedWindow {
    fn default() -> Self {
        FixedWindow::new(CIRCWINDOW_START, CIRCWINDOW_INCREMENT)
    }
}

impl CongestionControl for FixedWindow {
    fn package_allowance(&self) -> u64 {
        self.package
    }
    fn on_packaged(&mut self, cells: u64, _now: SimTime) {
        debug_assert!(cells <= self.package, "packaged beyond the window");
        self.package -= cells.min(self.package);
    }
    fn on_sendme(&mut self, _now: SimTime) {
        // Tor closes a circuit whose window would exceed its start; we cap instead and
        // never send such a SENDME ourselves.
        self.package = (self.package + self.increment).min(self.start);
    }
    fn on_delivered(&mut self, cells: u64, _now: SimTime) -> u64 {
        self.deliver = self.deliver.saturating_sub(cells);
        // sendme.c: send when the deliver window has dropped by at least an increment.
        let mut sendmes = 0;
        while self.deliver <= self.start - self.increment {
            self.deliver += self.increment;
            sendmes += 1;
        }
        sendmes
    }
    fn package_window(&self) -> u64 {
        self.package
    }
    fn check(&self) -> Result<(), String> {
        if self.package > self.start || self.deliver > self.start {
            return Err(format!("fixed window: package {} / deliver {} above the start {}", self.package, self.deliver, self.start));
        }
        Ok(())
    }
    fn name(&self) -> &'static str {
        "fixed-window"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sendme_per_hundred_delivered_cells() {
        let t = SimTime::ZERO;
        let mut w = FixedWindow::default();
        assert_eq!(w.on_delivered(99, t), 0);
        assert_eq!(w.on_delivered(1, t), 1);
        assert_eq!(w.on_delivered(250, t), 2);
        assert_eq!(w.on_delivered(50, t), 1);
    }

    #[test]
    fn package_window_opens_by_increment() {
        let t = SimTime::ZERO;
        let mut w = FixedWindow::default();
        w.on_packaged(1000, t);
        assert_eq!(w.package_allowance(), 0);
        w.on_sendme(t);
        assert_eq!(w.package_allowance(), 100);
    }

    #[test]
    fn a_sendme_never_opens_the_window_beyond_its_start() {
        // CIRCWINDOW_START 1000: tor closes a circuit whose SENDME would lift the package
        // window above it; the model caps it there. 50 cells out, a SENDME of 100: 1000.
        let t = SimTime::ZERO;
        let mut w = FixedWindow::default();
        w.on_packaged(50, t);
        w.on_sendme(t);
        assert_eq!(w.package_allowance(), 1000);
        w.check().unwrap();
    }

    /// The invariant the run fuzzers rely on: either window above its start is an error.
    #[test]
    fn check_rejects_a_window_above_its_start() {
        let check = |package, deliver| FixedWindow { package, deliver, ..FixedWindow::default() }.check();
        assert!(check(1000, 1000).is_ok() && check(0, 900).is_ok());
        assert!(check(1001, 1000).is_err());
        assert!(check(1000, 1001).is_err());
    }
}
