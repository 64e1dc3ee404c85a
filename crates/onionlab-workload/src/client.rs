//! Client behaviours as small state machines.
//!
//! **Owns:** what a client fetches next and how long it waits first, per workload:
//! - **web** (the throttling paper, section 4): download a file, think, repeat forever;
//!   optionally in browsing sessions separated by breaks (the Tortoise paper);
//! - **bulk**: download files back to back without pausing;
//! - **perf** (onionperf-like): pause, then download a file of 50 KiB, 1 MiB or 5 MiB
//!   (weights 12:2:1 by default), repeat;
//! - **markov** (PrivCount, tornettools' background traffic): streams and gaps from a
//!   stream model, sizes from a packet model (see [`crate::markov`]).
//!
//! A failed download counts as done: the client carries on as a browser would.
//! **Must not touch:** servers, circuits or time itself; the driver schedules.

use std::sync::Arc;

use onionlab_config::model::Workload;
use onionlab_core::rng::{ParkedRng, SimRng};
use onionlab_core::{SimDuration, SimTime};

use crate::dist::{sample_size, sample_time};
use crate::markov::{sample_stream_packets, secs, MarkovUser};

/// What a client does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Fetch `bytes` after waiting `after`.
    Fetch { after: SimDuration, bytes: u64 },
}

/// One client's behaviour and its own random stream.
pub struct ClientBehaviour {
    /// Shared by all clients of a group (a Markov model is tens of kilobytes).
    workload: Arc<Workload>,
    /// Parked between actions: a full-scale network has two million clients, and a live
    /// stream's 256-byte output block each would be half a gigabyte.
    rng: ParkedRng,
    /// Web sessions: when the current session started.
    session_started: Option<SimTime>,
    markov: MarkovUser,
}

impl ClientBehaviour {
    /// A behaviour drawing from `rng` (a [`SimRng`] is parked where it stands).
    pub fn new(workload: impl Into<Arc<Workload>>, rng: impl Into<ParkedRng>) -> Self {
        ClientBehaviour { workload: workload.into(), rng: rng.into(), session_started: None, markov: MarkovUser::default() }
    }

    /// The first action, `offset` after the start of the run (clients start staggered so
    /// that they do not move in lockstep). Web and bulk clients fetch at once; perf
    /// clients pause first.
    pub fn first(&mut self, offset: SimDuration) -> Next {
        let mut rng = self.rng.unpark();
        let next = self.first_with(offset, &mut rng);
        self.rng = ParkedRng::park(&rng);
        next
    }

    fn first_with(&mut self, offset: SimDuration, rng: &mut SimRng) -> Next {
        match &*self.workload {
            Workload::Web { size, .. } | Workload::Bulk { size } => {
                // `first` is called at time 0: the first session starts with the first fetch.
                self.session_started = Some(SimTime::ZERO + offset);
                Next::Fetch { after: offset, bytes: sample_size(size, rng) }
            }
            Workload::Perf { .. } | Workload::Markov { .. } => match self.next_with(SimTime::ZERO, rng) {
                Next::Fetch { after, bytes } => Next::Fetch { after: after + offset, bytes },
            },
        }
    }

    /// The action after a download finished (or failed).
    /// `now` is when it finished (web sessions need it).
    pub fn next_after_done(&mut self, now: SimTime) -> Next {
        let mut rng = self.rng.unpark();
        let next = self.next_with(now, &mut rng);
        self.rng = ParkedRng::park(&rng);
        next
    }

    fn next_with(&mut self, now: SimTime, rng: &mut SimRng) -> Next {
        match &*self.workload {
            Workload::Web { size, think, session } => {
                let mut after = sample_time(think, rng);
                if let Some(s) = session {
                    let started = *self.session_started.get_or_insert(now);
                    if now.saturating_since(started) >= s.length {
                        // The session is over: a break, then a new session.
                        after = sample_time(&s.pause, rng);
                        self.session_started = Some(now + after);
                    }
                }
                Next::Fetch { after, bytes: sample_size(size, rng) }
            }
            Workload::Bulk { size } => Next::Fetch { after: SimDuration::ZERO, bytes: sample_size(size, rng) },
            Workload::Perf { size, pause } => {
                let after = sample_time(pause, rng);
                Next::Fetch { after, bytes: sample_size(size, rng) }
            }
            Workload::Markov { stream_model, packet_model, packet_bytes, pause } => {
                let gap = self.markov.next_stream(stream_model, rng, |rng| sample_time(pause, rng).as_secs_f64());
                let (down, _up) = sample_stream_packets(packet_model, rng);
                Next::Fetch { after: secs(gap), bytes: down.max(1).saturating_mul(*packet_bytes) }
            }
        }
    }

    /// Draws from the client's stream (the run picks servers with it).
    pub fn with_rng<T>(&mut self, f: impl FnOnce(&mut SimRng) -> T) -> T {
        self.rng.with(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onionlab_config::model::{SizeDist, TimeDist};
    use onionlab_core::RngStreams;

    fn behaviour(w: Workload) -> ClientBehaviour {
        ClientBehaviour::new(w, RngStreams::new(1).stream("client", "c0"))
    }

    #[test]
    fn web_fetches_at_once_then_thinks() {
        let think = SimDuration::from_secs(20);
        let mut c =
            behaviour(Workload::Web { size: SizeDist::Fixed { bytes: 87_000 }, think: TimeDist::Fixed { value: think }, session: None });
        let off = SimDuration::from_secs(3);
        assert_eq!(c.first(off), Next::Fetch { after: off, bytes: 87_000 });
        assert_eq!(c.next_after_done(SimTime::ZERO + off), Next::Fetch { after: think, bytes: 87_000 });
    }

    #[test]
    fn web_sessions_end_with_a_break() {
        // 15-minute sessions, fixed 10-minute breaks, 11 s think time.
        let s = |m: u64| SimDuration::from_secs(m * 60);
        let think = SimDuration::from_secs(11);
        let mut c = behaviour(Workload::Web {
            size: SizeDist::Fixed { bytes: 1000 },
            think: TimeDist::Fixed { value: think },
            session: Some(onionlab_config::model::Session { length: s(15), pause: TimeDist::Fixed { value: s(10) } }),
        });
        let t0 = SimTime::ZERO + SimDuration::from_secs(2);
        c.first(SimDuration::from_secs(2));
        // Within the session: think time.
        assert_eq!(c.next_after_done(t0 + s(14)), Next::Fetch { after: think, bytes: 1000 });
        // At 15 minutes: the break.
        assert_eq!(c.next_after_done(t0 + s(15)), Next::Fetch { after: s(10), bytes: 1000 });
        // The next session starts after the break: 14 minutes into it, still browsing.
        assert_eq!(c.next_after_done(t0 + s(25) + s(14)), Next::Fetch { after: think, bytes: 1000 });
        assert_eq!(c.next_after_done(t0 + s(25) + s(15)), Next::Fetch { after: s(10), bytes: 1000 });
    }

    #[test]
    fn bulk_never_pauses_and_perf_always_does() {
        let mut b = behaviour(Workload::Bulk { size: SizeDist::Fixed { bytes: 5 << 20 } });
        assert_eq!(b.next_after_done(SimTime::ZERO), Next::Fetch { after: SimDuration::ZERO, bytes: 5 << 20 });
        let pause = SimDuration::from_secs(60);
        let mut p = behaviour(Workload::Perf {
            size: SizeDist::Choice { sizes: vec![51_200, 1 << 20, 5 << 20], weights: vec![12.0, 2.0, 1.0] },
            pause: TimeDist::Fixed { value: pause },
        });
        let Next::Fetch { after, bytes } = p.first(SimDuration::from_secs(1));
        assert_eq!(after, pause + SimDuration::from_secs(1));
        assert!([51_200, 1 << 20, 5 << 20].contains(&bytes));
    }

    /// A packet model with exactly two packets towards the client and one towards the server.
    const TWO_DOWN_ONE_UP: &str = r#"{"nodes": [{"id": "start"}, {"id": "d1", "type": "state"}, {"id": "d2", "type": "state"},
        {"id": "u", "type": "state"}, {"id": "f", "type": "state"}, {"id": "-", "type": "observation"},
        {"id": "+", "type": "observation"}, {"id": "F", "type": "observation"}],
      "links": [{"source": "start", "target": "d1", "type": "transition", "weight": 1},
        {"source": "d1", "target": "d2", "type": "transition", "weight": 1},
        {"source": "d2", "target": "u", "type": "transition", "weight": 1},
        {"source": "u", "target": "f", "type": "transition", "weight": 1},
        {"source": "d1", "target": "-", "type": "emission", "weight": 1},
        {"source": "d2", "target": "-", "type": "emission", "weight": 1},
        {"source": "u", "target": "+", "type": "emission", "weight": 1},
        {"source": "f", "target": "F", "type": "emission", "weight": 1}]}"#;

    /// A packet model whose streams end before any `-` packet half of the time.
    const OFTEN_EMPTY: &str = r#"{"nodes": [{"id": "start"}, {"id": "a", "type": "state"}, {"id": "-", "type": "observation"},
        {"id": "+", "type": "observation"}, {"id": "F", "type": "observation"}],
      "links": [{"source": "start", "target": "a", "type": "transition", "weight": 1},
        {"source": "a", "target": "a", "type": "transition", "weight": 1},
        {"source": "a", "target": "-", "type": "emission", "weight": 1},
        {"source": "a", "target": "F", "type": "emission", "weight": 1}]}"#;

    fn markov(packets: &str) -> Workload {
        use onionlab_config::markov::MarkovModel;
        Workload::Markov {
            stream_model: MarkovModel::parse(crate::markov::tests::TWO_SECOND_FLOWS, "s.json", &["$", "F"]).unwrap(),
            packet_model: MarkovModel::parse(packets, "p.json", &["-", "+", "F"]).unwrap(),
            packet_bytes: 1000,
            pause: TimeDist::Fixed { value: SimDuration::from_secs(10) },
        }
    }

    #[test]
    fn markov_downloads_the_down_packets_after_the_flow_gap_and_pause() {
        let mut c = behaviour(markov(TWO_DOWN_ONE_UP));
        // Two `-` packets of the configured 1000 B; the `+` packet is not downloaded.
        let off = SimDuration::from_secs(3);
        assert_eq!(c.first(off), Next::Fetch { after: off, bytes: 2000 });
        for _ in 0..3 {
            let Next::Fetch { after, bytes } = c.next_after_done(SimTime::ZERO + off);
            // The flow's 2 s end delay plus the workload's 10 s pause (to the nanosecond
            // after the float round trip of exp(ln(2e6))).
            assert!(after.as_nanos().abs_diff(12_000_000_000) <= 1, "{after:?}");
            assert_eq!(bytes, 2000);
        }
    }

    #[test]
    fn a_markov_stream_without_down_packets_downloads_one() {
        let mut c = behaviour(markov(OFTEN_EMPTY));
        let sizes: Vec<u64> = (0..200)
            .map(|_| {
                let Next::Fetch { bytes, .. } = c.next_after_done(SimTime::ZERO);
                bytes
            })
            .collect();
        // Half the streams have no `-` packet and a quarter one: both download 1000 B.
        assert_eq!(sizes.iter().min(), Some(&1000), "{sizes:?}");
        assert!(sizes.iter().filter(|&&b| b == 1000).count() > 100, "{sizes:?}");
    }
}
