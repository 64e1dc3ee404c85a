//! An optional trace of events for debugging.
//!
//! Off by default. When off, [`Trace::record`] is one predictable branch and the closure
//! that would format the record is never called, so a disabled trace costs nothing
//! measurable. When on, records are kept in memory up to a cap (oldest kept, then counted
//! as dropped) so a runaway trace cannot exhaust memory.

use crate::time::SimTime;

/// One traced event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub time: SimTime,
    /// Which layer or entity emitted it, e.g. `"net"`.
    pub source: &'static str,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct Trace {
    enabled: bool,
    cap: usize,
    records: Vec<TraceRecord>,
    dropped: u64,
}

impl Trace {
    /// A disabled trace.
    pub fn off() -> Self {
        Trace::default()
    }

    /// An enabled trace keeping at most `cap` records.
    pub fn on(cap: usize) -> Self {
        Trace { enabled: true, cap, records: Vec::new(), dropped: 0 }
    }

    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records a message built by `message` if tracing is on.
    #[inline(always)]
    pub fn record(&mut self, time: SimTime, source: &'static str, message: impl FnOnce() -> String) {
        if self.enabled {
            self.push(time, source, message());
        }
    }

    #[cold]
    fn push(&mut self, time: SimTime, source: &'static str, message: String) {
        if self.records.len() < self.cap {
            self.records.push(TraceRecord { time, source, message });
        } else {
            self.dropped += 1;
        }
    }

    pub fn records(&self) -> &[TraceRecord] {
        &self.records
    }

    /// Records that did not fit under the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_formats() {
        let mut t = Trace::off();
        t.record(SimTime::ZERO, "x", || panic!("formatted while off"));
        assert!(t.records().is_empty());
    }

    #[test]
    fn on_keeps_up_to_cap() {
        let mut t = Trace::on(2);
        for i in 0..5 {
            t.record(SimTime::from_nanos(i), "x", || format!("e{i}"));
        }
        assert_eq!(t.records().len(), 2);
        assert_eq!(t.records()[1].message, "e1");
        assert_eq!(t.dropped(), 3);
    }
}
