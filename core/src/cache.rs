//! Sharded block cache with a byte cap. Keys are (table file number, block
//! offset); values are decoded blocks shared through `Arc`.
//!
//! Each shard is a hash map plus a CLOCK ring: a hit only sets the entry's
//! reference bit (no reordering), eviction sweeps the ring from its head,
//! giving referenced entries a second chance. Shard selection and the map use
//! an allocation-free multiplicative hash of the two integers.

use crate::sst::Block;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const SHARDS: usize = 16;

type Key = (u64, u64);

/// Hasher for `(u64, u64)` keys: multiply-xorshift per written integer.
#[derive(Default)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        let h = self.0;
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

fn hash_key(k: Key) -> u64 {
    let mut h = IntHasher::default();
    h.write_u64(k.0);
    h.write_u64(k.1);
    h.finish()
}

struct Entry {
    block: Arc<Block>,
    referenced: bool,
}

struct Shard {
    map: HashMap<Key, Entry, BuildHasherDefault<IntHasher>>,
    /// CLOCK ring; may hold keys no longer in `map` (skipped when swept).
    ring: VecDeque<Key>,
    bytes: usize,
}

pub(crate) struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    /// Byte cap of each shard; changed at run time by `set_capacity`.
    cap_per_shard: AtomicUsize,
}

impl BlockCache {
    pub(crate) fn new(capacity: usize) -> BlockCache {
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::default(),
                        ring: VecDeque::new(),
                        bytes: 0,
                    })
                })
                .collect(),
            cap_per_shard: AtomicUsize::new(capacity / SHARDS),
        }
    }

    fn shard(&self, key: Key) -> &Mutex<Shard> {
        let i = (hash_key(key) >> 32) as usize % SHARDS;
        // `i < SHARDS == shards.len()`.
        &self.shards[i]
    }

    pub(crate) fn get(&self, file: u64, off: u64) -> Option<Arc<Block>> {
        let mut s = self.shard((file, off)).lock();
        let Some(e) = s.map.get_mut(&(file, off)) else {
            crate::metrics::BLOCK_CACHE_MISSES.inc();
            return None;
        };
        crate::metrics::BLOCK_CACHE_HITS.inc();
        e.referenced = true;
        Some(e.block.clone())
    }

    pub(crate) fn insert(&self, file: u64, off: u64, block: Arc<Block>) {
        let charge = block.charge();
        let cap = self.cap_per_shard.load(Ordering::Relaxed);
        if charge > cap {
            return;
        }
        let mut evicted = Vec::new();
        let mut s = self.shard((file, off)).lock();
        let s = &mut *s;
        match s.map.insert(
            (file, off),
            Entry {
                block,
                referenced: false,
            },
        ) {
            Some(old) => {
                s.bytes -= old.block.charge();
                evicted.push(old.block);
            }
            None => s.ring.push_back((file, off)),
        }
        s.bytes += charge;
        // CLOCK sweep; bounded so a ring full of referenced entries ends.
        let mut budget = s.ring.len() * 2 + 1;
        while s.bytes > cap && budget > 0 {
            budget -= 1;
            let Some(k) = s.ring.pop_front() else {
                break;
            };
            match s.map.get_mut(&k) {
                None => {}
                Some(e) if e.referenced && k != (file, off) => {
                    e.referenced = false;
                    s.ring.push_back(k);
                }
                Some(_) => {
                    if let Some(e) = s.map.remove(&k) {
                        s.bytes -= e.block.charge();
                        evicted.push(e.block);
                    }
                }
            }
        }
        // Compact the ring if stale keys pile up.
        if s.ring.len() > 2 * s.map.len() + 64 {
            let map = &s.map;
            s.ring.retain(|k| map.contains_key(k));
        }
        // `evicted` is freed after the shard lock (declared before it).
    }

    /// Drops every block of a file (after the file is deleted).
    pub(crate) fn evict_file(&self, file: u64) {
        for sh in &self.shards {
            let mut s = sh.lock();
            let s = &mut *s;
            let mut freed = 0;
            s.map.retain(|k, e| {
                if k.0 == file {
                    freed += e.block.charge();
                    false
                } else {
                    true
                }
            });
            s.bytes -= freed;
            if freed > 0 {
                let map = &s.map;
                s.ring.retain(|k| map.contains_key(k));
            }
        }
    }

    /// Changes the byte cap; a smaller cap evicts at once (oldest first).
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let cap = capacity / SHARDS;
        self.cap_per_shard.store(cap, Ordering::Relaxed);
        for sh in &self.shards {
            let mut evicted = Vec::new();
            let mut s = sh.lock();
            let s = &mut *s;
            while s.bytes > cap {
                let Some(k) = s.ring.pop_front() else {
                    break;
                };
                if let Some(e) = s.map.remove(&k) {
                    s.bytes -= e.block.charge();
                    evicted.push(e.block);
                }
            }
            drop(evicted);
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}
