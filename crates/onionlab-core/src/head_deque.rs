//! [`HeadDeque`]: a FIFO whose first element lives inline.
//!
//! **Owns:** nothing but its elements. **Must not touch:** anything else; it is a plain
//! container.
//!
//! Why: the models keep many small per-object queues (a connection's batches waiting at a
//! downlink, its acknowledgements in flight, a circuit's cells) that hold one element most
//! of the time and are touched once per batch. A `VecDeque` keeps even that one element in
//! a heap block of its own, and at full-network sizes every such block is a cache miss.
//! Keeping the first element inline makes the common case touch only the owning object.

use std::collections::VecDeque;

/// A double-ended queue used as a FIFO (push at the back, pop at the front), with the
/// front element stored inline and the rest in a `VecDeque`.
///
/// Invariant: `head` is `None` only when the queue is empty.
#[derive(Clone, Debug)]
pub struct HeadDeque<T> {
    head: Option<T>,
    rest: VecDeque<T>,
}

impl<T> Default for HeadDeque<T> {
    fn default() -> Self {
        HeadDeque { head: None, rest: VecDeque::new() }
    }
}

impl<T> HeadDeque<T> {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.head.is_some() as usize + self.rest.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.head.as_ref()
    }

    #[inline]
    pub fn front_mut(&mut self) -> Option<&mut T> {
        self.head.as_mut()
    }

    #[inline]
    pub fn back(&self) -> Option<&T> {
        self.rest.back().or(self.head.as_ref())
    }

    #[inline]
    pub fn back_mut(&mut self) -> Option<&mut T> {
        match self.rest.back_mut() {
            Some(b) => Some(b),
            None => self.head.as_mut(),
        }
    }

    #[inline]
    pub fn push_back(&mut self, x: T) {
        if self.head.is_none() {
            self.head = Some(x);
        } else {
            self.rest.push_back(x);
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        let out = self.head.take()?;
        self.head = self.rest.pop_front();
        Some(out)
    }

    /// The element at position `i` from the front.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i == 0 {
            self.head.as_ref()
        } else {
            self.rest.get(i - 1)
        }
    }

    /// The index of the first element for which `pred` is false, given that the queue is
    /// partitioned (all `true` elements first), as [`slice::partition_point`].
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        match &self.head {
            None => 0,
            Some(h) if !pred(h) => 0,
            Some(_) => 1 + self.rest.partition_point(pred),
        }
    }

    /// Keeps the elements for which `keep` is true, in order. `keep` sees every element
    /// once, front to back (as `VecDeque::retain`), so it may count positions.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let Some(head) = &self.head else { return };
        let keep_head = keep(head);
        self.rest.retain(&mut keep);
        if !keep_head {
            self.head = self.rest.pop_front();
        }
    }

    /// Removes and returns the element at position `i` from the front.
    pub fn remove(&mut self, i: usize) -> Option<T> {
        if i == 0 {
            self.pop_front()
        } else {
            self.rest.remove(i - 1)
        }
    }

    /// Moves the first `n` elements to the back, in order (`n` at most the length).
    pub fn rotate_left(&mut self, n: usize) {
        assert!(n <= self.len(), "rotate_left({n}) on a queue of {}", self.len());
        for _ in 0..n {
            let x = self.pop_front().expect("n <= len");
            self.push_back(x);
        }
    }

    pub fn clear(&mut self) {
        self.head = None;
        self.rest.clear();
    }

    pub fn contains(&self, x: &T) -> bool
    where
        T: PartialEq,
    {
        self.iter().any(|y| y == x)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.head.iter().chain(self.rest.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8),
        Pop,
        Retain(u8),
        /// Keeps every k-th element by position: `retain` must visit in order.
        RetainEvery(u8),
        AddToBack(u8),
        Remove(u8),
        Rotate(u8),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Push),
            2 => Just(Op::Pop),
            1 => (1..4u8).prop_map(Op::Retain),
            1 => (1..4u8).prop_map(Op::RetainEvery),
            1 => any::<u8>().prop_map(Op::AddToBack),
            1 => any::<u8>().prop_map(Op::Remove),
            1 => any::<u8>().prop_map(Op::Rotate),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Against `VecDeque` as the model: same elements in the same order after every
        /// operation, and the same answers from every query.
        #[test]
        fn behaves_as_a_vecdeque(ops in proptest::collection::vec(op(), 0..80), probe in any::<u8>()) {
            let mut q = HeadDeque::new();
            let mut m: VecDeque<u8> = VecDeque::new();
            for o in ops {
                match o {
                    Op::Push(x) => { q.push_back(x); m.push_back(x); }
                    Op::Pop => prop_assert_eq!(q.pop_front(), m.pop_front()),
                    Op::Retain(k) => { q.retain(|x| x % k != 0); m.retain(|x| x % k != 0); }
                    Op::RetainEvery(k) => {
                        let (mut i, mut j) = (0u8, 0u8);
                        q.retain(|_| { i = i.wrapping_add(1); i % k == 0 });
                        m.retain(|_| { j = j.wrapping_add(1); j % k == 0 });
                    }
                    Op::Remove(i) => {
                        let i = i as usize % (m.len() + 1);
                        prop_assert_eq!(q.remove(i), m.remove(i));
                    }
                    Op::Rotate(n) => {
                        let n = n as usize % (m.len() + 1);
                        q.rotate_left(n);
                        m.rotate_left(n);
                    }
                    Op::Clear => { q.clear(); m.clear(); }
                    Op::AddToBack(x) => {
                        if let Some(b) = q.back_mut() { *b = b.wrapping_add(x); }
                        if let Some(b) = m.back_mut() { *b = b.wrapping_add(x); }
                    }
                }
                prop_assert_eq!(q.iter().copied().collect::<Vec<_>>(), m.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(q.len(), m.len());
                prop_assert_eq!(q.is_empty(), m.is_empty());
                prop_assert_eq!(q.front(), m.front());
                prop_assert_eq!(q.back(), m.back());
                prop_assert_eq!(q.contains(&probe), m.contains(&probe));
                for i in 0..=m.len() {
                    prop_assert_eq!(q.get(i), m.get(i));
                }
                // Where the queue is partitioned by `x < probe`, both find the same point.
                let pred = |x: &u8| *x < probe;
                if m.iter().skip_while(|x| pred(x)).all(|x| !pred(x)) {
                    prop_assert_eq!(q.partition_point(pred), m.partition_point(pred));
                }
            }
        }

        /// On a sorted queue every threshold partitions it: the point is where `VecDeque`'s is.
        #[test]
        fn partition_point_of_a_sorted_queue(mut xs in proptest::collection::vec(any::<u8>(), 0..20), probe in any::<u8>()) {
            xs.sort();
            let mut q = HeadDeque::new();
            for &x in &xs { q.push_back(x); }
            prop_assert_eq!(q.partition_point(|x| *x < probe), xs.partition_point(|x| *x < probe));
        }
    }
}
