//! Time spent in a place without a time per item: Little's law, exactly.
//!
//! **Owns:** [`Tally`], the count of items (cells, bytes) that crossed a boundary and the sum
//! of their crossing times, and [`area`], the item-nanoseconds spent between two
//! boundaries. **Must not touch:** what the items are or where the boundaries lie; the
//! Tor model's wait ledgers and the transport's flow wait ledgers use it.
//!
//! Over items that have left a place, the time they spent in it is the sum of their
//! leaving times minus the sum of their arrival times, whatever order they left in; an item
//! still there has spent `now` minus its arrival. So the item-nanoseconds spent in a place
//! up to `now` are `left.time_sum - entered.time_sum + in_place x now`: one multiply-add
//! per crossing (of a run of items at one instant), no per-item state, no periodic update.

use std::ops::Add;

use crate::SimTime;

/// Items that crossed a boundary and the sum of their crossing times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    /// Sum over the items of their crossing times, in item-nanoseconds.
    pub time_sum: u128,
}

impl Tally {
    /// `n` items cross at `now`.
    #[inline]
    pub fn cross(&mut self, now: SimTime, n: u64) {
        self.count += n;
        self.time_sum += u128::from(now.as_nanos()) * u128::from(n);
    }
}

impl Add for Tally {
    type Output = Tally;
    /// Two boundaries taken as one (a place left two ways).
    fn add(self, o: Tally) -> Tally {
        Tally { count: self.count + o.count, time_sum: self.time_sum + o.time_sum }
    }
}

/// The items in the place between `into` and `out_of` and the item-nanoseconds spent there
/// up to `now` (no earlier than the last crossing).
pub fn area(into: Tally, out_of: Tally, now: SimTime) -> (u64, u128) {
    debug_assert!(out_of.count <= into.count, "more items left a place than entered it");
    let inside = into.count - out_of.count;
    // Every sum is of times no later than `now`: in this order nothing underflows.
    (inside, out_of.time_sum + u128::from(inside) * u128::from(now.as_nanos()) - into.time_sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimDuration;

    fn at(ms: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_millis(ms)
    }

    /// Two items in at 0 and 10 ms, one out at 30 ms (either of them), the other still in
    /// at 50 ms: 30 + 40 or 40 + 30 = 70 item-ms either way.
    #[test]
    fn area_is_the_time_items_spent_inside() {
        let (mut i, mut o) = (Tally::default(), Tally::default());
        i.cross(at(0), 1);
        i.cross(at(10), 1);
        o.cross(at(30), 1);
        assert_eq!(area(i, o, at(50)), (1, 70 * 1_000_000));
        assert_eq!(area(i, Tally::default() + o, at(30)), (1, 50 * 1_000_000));
    }

    /// A run of items crossing at one instant counts each item's time.
    #[test]
    fn a_run_of_items_counts_each() {
        let (mut i, mut o) = (Tally::default(), Tally::default());
        i.cross(at(10), 3);
        o.cross(at(30), 2);
        // 2 items x 20 ms + 1 item x 40 ms.
        assert_eq!(area(i, o, at(50)), (1, 80 * 1_000_000));
    }
}
