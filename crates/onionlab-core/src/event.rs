//! The event queue and its total order.
//!
//! Events are ordered by the key **(time, class, sequence number)**:
//! 1. earlier [`SimTime`] first;
//! 2. at equal time, lower [`EventClass`] first, so a layer can say, for example, that
//!    deliveries at an instant are handled before timers at that instant;
//! 3. at equal time and class, the event scheduled first runs first (the sequence number is
//!    a counter of `schedule` calls).
//!
//! The key is unique, so the order is total and does not depend on the heap's internals:
//! one seed, one order. Scheduling before the current time is refused with
//! [`ScheduleError::InPast`]. There is no cancellation: a handler that may be superseded
//! carries a generation number and ignores stale events, which is cheaper than a removable heap.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::{SimDuration, SimTime};

/// Tie-breaker among events at the same instant: lower runs first. Layers above define
/// their own constants; the engine gives the number no meaning beyond the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventClass(pub u8);

/// Why an event could not be scheduled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("cannot schedule an event at {at} before the current time {now}")]
    InPast { now: SimTime, at: SimTime },
    #[error("event sequence numbers exhausted (2^56 events scheduled)")]
    SequenceExhausted,
}

/// An event popped from the queue, with the time and class it was scheduled at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled<E> {
    pub time: SimTime,
    pub class: EventClass,
    pub event: E,
}

const SEQ_BITS: u32 = 56;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A heap entry: the ordering key and the slot of the event payload. Payloads live in a
/// slab so the heap moves 32-byte entries, not whole events, when it sifts.
struct Entry {
    /// time (64 bits) | class (8 bits) | sequence (56 bits): one integer comparison.
    key: u128,
    slot: u32,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: `BinaryHeap` is a max-heap and we want the smallest key on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// A priority queue of future events and the simulation clock it drives.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    now: SimTime,
    next_seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::with_capacity(1024)
    }

    pub fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            slab: Vec::with_capacity(n),
            free: Vec::new(),
            now: SimTime::ZERO,
            next_seq: 0,
            popped: 0,
        }
    }

    /// The current simulated time: the time of the last event popped.
    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at absolute time `at`. Refuses times before [`now`](Self::now).
    #[inline]
    pub fn schedule(&mut self, at: SimTime, class: EventClass, event: E) -> Result<(), ScheduleError> {
        if at < self.now {
            return Err(ScheduleError::InPast { now: self.now, at });
        }
        if self.next_seq > SEQ_MASK {
            return Err(ScheduleError::SequenceExhausted);
        }
        let key = ((at.as_nanos() as u128) << 64) | ((class.0 as u128) << SEQ_BITS) | self.next_seq as u128;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(event);
                i
            }
            None => {
                self.slab.push(Some(event));
                (self.slab.len() - 1) as u32
            }
        };
        self.heap.push(Entry { key, slot });
        Ok(())
    }

    /// Schedules `event` after `delay` from now. Cannot be in the past, so it cannot fail
    /// except by exhausting 2^56 sequence numbers, which is treated as a bug.
    #[inline]
    pub fn schedule_in(&mut self, delay: SimDuration, class: EventClass, event: E) {
        self.schedule(self.now + delay, class, event).expect("event sequence numbers exhausted")
    }

    /// Removes the next event in (time, class, sequence) order and advances the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        let Entry { key, slot } = self.heap.pop()?;
        let event = self.slab[slot as usize].take().expect("every heap entry has its payload");
        self.free.push(slot);
        let time = SimTime::from_nanos((key >> 64) as u64);
        debug_assert!(time >= self.now);
        self.now = time;
        self.popped += 1;
        Some(Scheduled { time, class: EventClass(((key as u64) >> SEQ_BITS) as u8), event })
    }

    /// Pops the next event only if it is due at or before `limit`.
    #[inline]
    pub fn pop_until(&mut self, limit: SimTime) -> Option<Scheduled<E>> {
        match self.peek_time() {
            Some(t) if t <= limit => self.pop(),
            _ => None,
        }
    }

    /// Time of the next event, if any.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| SimTime::from_nanos((e.key >> 64) as u64))
    }

    /// Moves the clock forward to `t` without an event (e.g. to the end of a run).
    /// Refuses to move past a pending event or backwards.
    pub fn advance_to(&mut self, t: SimTime) -> Result<(), ScheduleError> {
        if t < self.now || self.peek_time().is_some_and(|next| next < t) {
            return Err(ScheduleError::InPast { now: self.now, at: t });
        }
        self.now = t;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Number of events popped so far (the engine's own event counter).
    pub fn events_processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn refuses_the_past() {
        let mut q = EventQueue::new();
        q.schedule(SimTime::from_nanos(10), EventClass(0), 'a').unwrap();
        q.pop().unwrap();
        assert_eq!(
            q.schedule(SimTime::from_nanos(9), EventClass(0), 'b'),
            Err(ScheduleError::InPast { now: SimTime::from_nanos(10), at: SimTime::from_nanos(9) })
        );
        // The present is allowed.
        q.schedule(SimTime::from_nanos(10), EventClass(0), 'c').unwrap();
    }

    #[test]
    fn ties_break_by_class_then_insertion() {
        let mut q = EventQueue::new();
        let t = SimTime::from_nanos(5);
        q.schedule(t, EventClass(2), "c2-first").unwrap();
        q.schedule(t, EventClass(1), "c1-first").unwrap();
        q.schedule(t, EventClass(2), "c2-second").unwrap();
        q.schedule(t, EventClass(1), "c1-second").unwrap();
        q.schedule(SimTime::from_nanos(4), EventClass(9), "earlier").unwrap();
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|s| s.event)).collect();
        assert_eq!(order, ["earlier", "c1-first", "c1-second", "c2-first", "c2-second"]);
    }

    proptest! {
        /// Time never decreases and the pop order is exactly the sorted (time, class, seq) order.
        #[test]
        fn pops_in_total_order(evs in prop::collection::vec((0u64..1000, 0u8..4), 1..300)) {
            let mut q = EventQueue::new();
            for (i, &(t, c)) in evs.iter().enumerate() {
                q.schedule(SimTime::from_nanos(t), EventClass(c), i).unwrap();
            }
            let mut expected: Vec<_> = evs.iter().enumerate().map(|(i, &(t, c))| (t, c, i)).collect();
            expected.sort();
            let mut last = SimTime::ZERO;
            for (t, c, i) in expected {
                let s = q.pop().unwrap();
                prop_assert!(s.time >= last);
                last = s.time;
                prop_assert_eq!((s.time.as_nanos(), s.class.0, s.event), (t, c, i));
            }
            prop_assert!(q.pop().is_none());
        }

        /// Events scheduled from inside handlers (hold model) keep time monotone.
        #[test]
        fn hold_model_time_is_monotone(delays in prop::collection::vec(0u64..50, 1..500)) {
            let mut q = EventQueue::new();
            q.schedule(SimTime::ZERO, EventClass(0), 0usize).unwrap();
            let mut last = SimTime::ZERO;
            let mut i = 0;
            while let Some(s) = q.pop() {
                prop_assert!(s.time >= last);
                last = s.time;
                if i < delays.len() {
                    q.schedule_in(SimDuration::from_nanos(delays[i]), EventClass((i % 3) as u8), i);
                    i += 1;
                }
            }
        }
    }
}
