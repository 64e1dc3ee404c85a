//! Seeded random streams, one per entity.
//!
//! Every entity that draws random numbers gets its own stream, derived from
//! (run seed, entity kind, entity name). Adding, removing or reordering entities therefore
//! never changes another entity's draws, and a run is reproducible from its seed alone.
//!
//! The generator is **ChaCha12** (`rand_chacha::ChaCha12Rng`): portable, fast, and its output
//! is fixed by the algorithm rather than by a library version. The 256-bit key is derived
//! with a stable hash (FNV-1a 64 over length-prefixed fields, widened with SplitMix64) that
//! is written out here so it can never change with a compiler or crate upgrade.

use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

/// The PRNG type every entity uses.
pub type SimRng = ChaCha12Rng;

/// A random stream at rest: its key and the position of its next 32-bit word (40 bytes).
///
/// A live [`SimRng`] also carries a 256-byte block of output, which for the two million
/// clients of a full-scale network (a path-selection stream and a workload stream each) is
/// a gigabyte. Entities that exist by the million and draw now and then keep their stream
/// parked; [`ParkedRng::with`] rebuilds the generator at the parked position, so the draws
/// are exactly those of a stream kept live (a test checks it draw for draw). Rebuilding
/// costs one ChaCha block: a draw session (rebuild, draw, park) takes about 150 ns on the
/// project machine, against 2.4 ns for a draw from a live stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedRng {
    key: [u8; 32],
    word_pos: u64,
}

impl ParkedRng {
    /// Parks `rng` where it stands.
    pub fn park(rng: &SimRng) -> Self {
        // Streams are made by `from_seed`, which leaves ChaCha's stream number at 0.
        debug_assert_eq!(rng.get_stream(), 0, "a parked stream is rebuilt with stream number 0");
        let word_pos = u64::try_from(rng.get_word_pos()).expect("fewer than 2^64 words drawn from one stream");
        ParkedRng { key: rng.get_seed(), word_pos }
    }

    /// A live generator at the parked position.
    pub fn unpark(&self) -> SimRng {
        let mut rng = ChaCha12Rng::from_seed(self.key);
        if self.word_pos > 0 {
            rng.set_word_pos(u128::from(self.word_pos));
        }
        rng
    }

    /// Draws with the stream live, then parks it where `f` left it.
    pub fn with<T>(&mut self, f: impl FnOnce(&mut SimRng) -> T) -> T {
        let mut rng = self.unpark();
        let out = f(&mut rng);
        *self = ParkedRng::park(&rng);
        out
    }
}

impl From<SimRng> for ParkedRng {
    fn from(rng: SimRng) -> Self {
        ParkedRng::park(&rng)
    }
}

/// Derives independent random streams from one run seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RngStreams {
    seed: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl RngStreams {
    pub fn new(seed: u64) -> Self {
        RngStreams { seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 256-bit ChaCha key for (seed, kind, name). Fields are length-prefixed so that
    /// ("ab", "c") and ("a", "bc") differ.
    pub fn key(&self, kind: &str, name: &str) -> [u8; 32] {
        let mut h = fnv1a(FNV_OFFSET, &self.seed.to_le_bytes());
        h = fnv1a(h, &(kind.len() as u64).to_le_bytes());
        h = fnv1a(h, kind.as_bytes());
        h = fnv1a(h, &(name.len() as u64).to_le_bytes());
        h = fnv1a(h, name.as_bytes());
        // A second, differently seeded pass gives a 128-bit state to widen from.
        let mut h2 = fnv1a(FNV_PRIME ^ self.seed.rotate_left(17), kind.as_bytes());
        h2 = fnv1a(h2, &[0xff]);
        h2 = fnv1a(h2, name.as_bytes());
        let mut state = h ^ h2.rotate_left(32);
        let mut key = [0u8; 32];
        for chunk in key.chunks_exact_mut(8) {
            chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        key
    }

    /// The random stream of entity `name` of kind `kind` (e.g. `("host", "relay12")`).
    pub fn stream(&self, kind: &str, name: &str) -> SimRng {
        ChaCha12Rng::from_seed(self.key(kind, name))
    }

    /// The same stream as [`RngStreams::stream`], parked at its start.
    pub fn parked(&self, kind: &str, name: &str) -> ParkedRng {
        ParkedRng { key: self.key(kind, name), word_pos: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn draws(r: &mut SimRng) -> Vec<u64> {
        (0..8).map(|_| r.random()).collect()
    }

    #[test]
    fn same_inputs_same_stream() {
        let a = draws(&mut RngStreams::new(7).stream("host", "relay1"));
        let b = draws(&mut RngStreams::new(7).stream("host", "relay1"));
        assert_eq!(a, b);
    }

    #[test]
    fn streams_differ_by_seed_kind_and_name() {
        let base = draws(&mut RngStreams::new(7).stream("host", "relay1"));
        assert_ne!(base, draws(&mut RngStreams::new(8).stream("host", "relay1")));
        assert_ne!(base, draws(&mut RngStreams::new(7).stream("client", "relay1")));
        assert_ne!(base, draws(&mut RngStreams::new(7).stream("host", "relay2")));
        // Length prefixes keep field boundaries apart.
        assert_ne!(RngStreams::new(7).key("ab", "c"), RngStreams::new(7).key("a", "bc"));
    }

    #[test]
    fn stream_is_pinned_to_the_algorithm() {
        // Guards against an accidental change of key derivation or generator: results
        // published with one onionlab version must be reproducible with the next.
        let k = RngStreams::new(1).key("host", "a");
        let again = RngStreams::new(1).key("host", "a");
        assert_eq!(k, again);
        let first: u64 = RngStreams::new(1).stream("host", "a").random();
        assert_eq!(first, PINNED_FIRST_DRAW);
    }

    /// Parking between draws of every width (u32, u64, f64, ranges, odd-length byte
    /// fills, which round up to whole words) leaves the stream's draws unchanged, across
    /// ChaCha's 64-word block boundaries too.
    #[test]
    fn a_parked_stream_draws_as_a_live_one() {
        use rand::RngCore;
        let streams = RngStreams::new(3);
        let mut live = streams.stream("client", "c1");
        let mut parked = streams.parked("client", "c1");
        let mut script = RngStreams::new(99).stream("script", "");
        let draw = |op: u32, r: &mut SimRng| -> Vec<u64> {
            match op {
                0 => vec![r.next_u32() as u64],
                1 => vec![r.next_u64()],
                2 => vec![r.random::<f64>().to_bits()],
                3 => vec![r.random_range(0..1000u64)],
                _ => {
                    let mut b = [0u8; 7];
                    r.fill_bytes(&mut b);
                    b.iter().map(|&x| x as u64).collect()
                }
            }
        };
        for _ in 0..2000 {
            let op = script.random_range(0..5u32);
            let n = script.random_range(1..6usize);
            let want: Vec<u64> = (0..n).flat_map(|_| draw(op, &mut live)).collect();
            let got: Vec<u64> = parked.with(|r| (0..n).flat_map(|_| draw(op, r)).collect());
            assert_eq!(got, want);
            assert_eq!(u128::from(parked.word_pos), live.get_word_pos());
        }
        assert!(live.get_word_pos() > 64 * 20, "the script crosses many blocks");
    }

    /// A stream parked after a single 32-bit draw (word position 1) resumes there.
    #[test]
    fn a_stream_parked_after_one_word_resumes_there() {
        use rand::RngCore;
        let mut live = RngStreams::new(5).stream("client", "c2");
        let mut parked = RngStreams::new(5).parked("client", "c2");
        assert_eq!(parked.with(|r| r.next_u32()), live.next_u32());
        assert_eq!(parked.with(|r| r.next_u64()), live.next_u64());
    }

    // Filled from the first run of this exact derivation; see `stream_is_pinned_to_the_algorithm`.
    const PINNED_FIRST_DRAW: u64 = 16_884_036_108_063_597_500;
}
