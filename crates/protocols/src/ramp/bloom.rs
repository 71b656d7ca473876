//! The Bloom filter RAMP-H's versions carry: a summary of their transaction's write set (Bailis et al. §4.3).
//!
//! Written by hand because it is part of the protocol: its bits travel in every version a writer prepares
//! and are read by every reader, possibly in another process, so the hash must be the same everywhere and
//! stable across builds (FNV-1a, then the double hashing of Kirsch and Mitzenmacher: the `i`th index is
//! `h1 + i·h2` modulo the filter's size). A filter carries its own size and hash count, so a reader whose
//! configuration differs still reads it correctly.
//!
//! No false negatives: a key inserted is always reported as possibly present. False positives cost RAMP-H a
//! second-round request that finds nothing new (the client keeps its first-round version).

use serde::{Deserialize, Serialize};

/// The largest filter a server accepts, in 64-bit words (64 Ki bits).
pub const MAX_WORDS: usize = 1024;
/// The most hash functions a filter may use.
pub const MAX_HASHES: u8 = 32;

/// A Bloom filter over keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bloom {
    words: Vec<u64>,
    hashes: u8,
}

impl Bloom {
    /// An empty filter of `bits` bits (rounded up to a multiple of 64, at least 64, at most
    /// [`MAX_WORDS`]·64) and `hashes` hash functions (clamped to 1..=[`MAX_HASHES`]).
    pub fn new(bits: usize, hashes: u32) -> Self {
        let words = bits.div_ceil(64).clamp(1, MAX_WORDS);
        let hashes = hashes.clamp(1, u32::from(MAX_HASHES)) as u8;
        Self { words: vec![0; words], hashes }
    }

    /// A filter of `keys`.
    pub fn of<'k>(keys: impl IntoIterator<Item = &'k str>, bits: usize, hashes: u32) -> Self {
        let mut b = Self::new(bits, hashes);
        for k in keys {
            b.insert(k);
        }
        b
    }

    /// The filter's size in bits.
    pub fn bits(&self) -> usize {
        self.words.len() * 64
    }

    /// Its number of hash functions.
    pub fn hashes(&self) -> u8 {
        self.hashes
    }

    pub fn insert(&mut self, key: &str) {
        for i in self.indexes(key) {
            self.words[i / 64] |= 1 << (i % 64);
        }
    }

    /// Whether `key` may have been inserted (always true when it was).
    pub fn may_contain(&self, key: &str) -> bool {
        self.indexes(key).all(|i| self.words[i / 64] & (1 << (i % 64)) != 0)
    }

    /// Whether a filter received from the network is well-formed: a size and hash count this module makes.
    pub fn well_formed(&self) -> bool {
        (1..=MAX_WORDS).contains(&self.words.len()) && (1..=MAX_HASHES).contains(&self.hashes)
    }

    fn indexes(&self, key: &str) -> impl Iterator<Item = usize> + use<> {
        let m = self.bits().max(1) as u64;
        let h = fnv1a(key.as_bytes());
        let h1 = splitmix(h);
        let h2 = splitmix(h ^ 0x9e37_79b9_7f4a_7c15) | 1;
        (0..u64::from(self.hashes)).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % m) as usize)
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64's finaliser: spreads FNV's bits.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives() {
        for (bits, hashes) in [(64, 1), (256, 4), (1000, 7), (64, 32)] {
            let keys: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();
            let b = Bloom::of(keys.iter().map(String::as_str), bits, hashes);
            assert!(keys.iter().all(|k| b.may_contain(k)), "{bits} bits, {hashes} hashes");
            assert!(b.well_formed());
        }
        // The empty key too.
        assert!(Bloom::of([""], 256, 4).may_contain(""));
    }

    #[test]
    fn few_false_positives_at_the_default_size() {
        // 8 keys in 256 bits with 4 hashes: about 0.1% false positives in theory; allow 2%.
        let b = Bloom::of((0..8).map(|i| format!("w{i}")).collect::<Vec<_>>().iter().map(String::as_str), 256, 4);
        let fp = (0..10_000).filter(|i| b.may_contain(&format!("other-{i}"))).count();
        assert!(fp < 200, "{fp} false positives in 10000");
        assert!(!Bloom::new(256, 4).may_contain("anything"), "an empty filter contains nothing");
    }

    #[test]
    fn sizes_are_rounded_and_clamped_and_survive_serialization() {
        let b = Bloom::new(100, 0);
        assert_eq!((b.bits(), b.hashes()), (128, 1));
        assert_eq!(Bloom::new(0, 99).bits(), 64);
        assert_eq!(Bloom::new(usize::MAX, 99).hashes(), MAX_HASHES);
        let b = Bloom::of(["a", "b"], 256, 4);
        let back: Bloom = postcard::from_bytes(&postcard::to_stdvec(&b).unwrap()).unwrap();
        assert_eq!(back, b);
        assert!(back.may_contain("a") && back.may_contain("b"));
        assert!(!Bloom { words: vec![], hashes: 1 }.well_formed());
        assert!(!Bloom { words: vec![0], hashes: 0 }.well_formed());
    }
}
