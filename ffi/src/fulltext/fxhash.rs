//! A small, fast, non-cryptographic hasher for the fulltext code's in-memory sets
//! and maps of words (a statement's interned words, stopword lists): 8 bytes per
//! step with a folded 64x64->128 multiply (FxHash-style), instead of SipHash.
use std::collections::{HashMap, HashSet};
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
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.h = fold_mul(self.h ^ i, K);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.h
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
pub type FxHashMap<K, V> = HashMap<K, V, FxBuild>;
pub type FxHashSet<T> = HashSet<T, FxBuild>;
