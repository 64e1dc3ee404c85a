//! Named run counters with array-indexed increments.
//!
//! A counter is registered once by name and then bumped through its [`CounterId`], an index
//! into a vector, so counting on the hot path costs one addition.

/// Handle to a registered counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CounterId(u32);

/// A set of named `u64` counters, reported in registration order.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    names: Vec<&'static str>,
    values: Vec<u64>,
}

impl Counters {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `name`, or returns the existing id if it is already registered.
    pub fn register(&mut self, name: &'static str) -> CounterId {
        if let Some(i) = self.names.iter().position(|n| *n == name) {
            return CounterId(i as u32);
        }
        self.names.push(name);
        self.values.push(0);
        CounterId((self.names.len() - 1) as u32)
    }

    #[inline]
    pub fn add(&mut self, id: CounterId, n: u64) {
        self.values[id.0 as usize] += n;
    }

    #[inline]
    pub fn incr(&mut self, id: CounterId) {
        self.add(id, 1)
    }

    pub fn get(&self, id: CounterId) -> u64 {
        self.values[id.0 as usize]
    }

    pub fn get_by_name(&self, name: &str) -> Option<u64> {
        self.names.iter().position(|n| *n == name).map(|i| self.values[i])
    }

    /// (name, value) pairs in registration order.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        self.names.iter().copied().zip(self.values.iter().copied()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_is_idempotent_and_counts() {
        let mut c = Counters::new();
        let a = c.register("a");
        let b = c.register("b");
        assert_eq!(c.register("a"), a);
        c.incr(a);
        c.add(b, 5);
        c.add(a, 2);
        assert_eq!(c.snapshot(), vec![("a", 3), ("b", 5)]);
        assert_eq!(c.get_by_name("b"), Some(5));
        assert_eq!(c.get_by_name("zzz"), None);
    }
}
