//! Small, fast, non-cryptographic hasher (FxHash-style, 8 bytes per step with
//! a folded 64x64->128 multiply) for in-memory tables whose keys are not
//! attacker-chosen in a way that matters (lock table, per-txn lock map, the
//! fulltext code's sets and maps of words). Re-exported for `tidesdb-ffi`.

use std::hash::{BuildHasherDefault, Hasher};

const K: u64 = 0xf135_7aea_2e62_a9c5;
const SEED: u64 = 0x2d35_8dcc_aa6c_78a5;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let f = u128::from(a) * u128::from(b);
    (f as u64) ^ ((f >> 64) as u64)
}

#[derive(Clone, Copy)]
pub struct FxHasher {
    h: u64,
}

impl Default for FxHasher {
    #[inline]
    fn default() -> Self {
        FxHasher { h: SEED }
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.h;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = fold_mul(h ^ u64::from_le_bytes(w), K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = fold_mul(h ^ u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59), K);
        }
        self.h = h;
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.h = fold_mul(self.h ^ i, K);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.h
    }
}

pub type FxBuildHasher = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;
pub type FxHashSet<T> = std::collections::HashSet<T, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn spreads_similar_keys() {
        let b = FxBuildHasher::default();
        let mut seen = std::collections::HashSet::new();
        let mut top = std::collections::HashSet::new();
        for i in 0u64..10_000 {
            let h = b.hash_one(i.to_be_bytes().as_slice());
            assert!(seen.insert(h));
            top.insert(h >> 57);
        }
        // High bits (hashbrown's tag) and low bits both vary.
        assert_eq!(top.len(), 128);
        assert_ne!(b.hash_one(b"ab".as_slice()), b.hash_one(b"ab\0".as_slice()));
    }
}
