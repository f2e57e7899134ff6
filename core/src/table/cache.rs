//! Sharded block cache with a byte cap. Keys are (file number, offset):
//! data blocks of table files as read (`block::RawBlock`: searched in place by
//! point reads, decoded by iterators), and values read from value-log files (file
//! numbers come from one counter, so the two never collide), shared through
//! `Arc` / [`SharedBytes`]. Caching large values spares a hot set of them a
//! pread and a CRC of the whole value per read, as InnoDB's buffer pool keeps
//! off-page columns; a hit hands out the cached buffer itself (no copy), and
//! a value is charged the memory of the buffer that holds it.
//!
//! Each shard is a hash map plus a CLOCK ring: a hit only sets the entry's
//! reference bit (no reordering), eviction sweeps the ring from its head,
//! giving referenced entries a second chance. Shard selection and the map use
//! an allocation-free multiplicative hash of the two integers.

use crate::bytes::SharedBytes;
use crate::table::block::RawBlock;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Most shards (lock striping for many threads).
const MAX_SHARDS: usize = 16;
/// Fewest bytes per shard at creation: a small cache gets fewer shards, so a
/// shard holds several large values (each entry must fit one shard: a 25 MiB
/// cache in 16 shards of 1.6 MiB kept at most 16 of its 1 MiB values, one per
/// shard, where InnoDB's 25 MiB pool kept 20-25).
const MIN_SHARD_BYTES: usize = 8 << 20;

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

/// What an entry caches.
enum Item {
    Block(Arc<RawBlock>),
    /// A value-log value, checked against its record's CRC when read.
    Value(SharedBytes),
}

impl Item {
    fn charge(&self) -> usize {
        match self {
            Item::Block(b) => b.charge(),
            Item::Value(v) => v.allocated() + 64,
        }
    }
}

struct Entry {
    item: Item,
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
    /// Data blocks the database's reads and scans read from table files
    /// (cache misses and uncached reads; compaction inputs are not counted).
    /// Per database, unlike the process-wide hit / miss counters: it is the
    /// figure a point read's disk cost is checked with.
    pub(crate) table_block_reads: AtomicU64,
    /// Those of them that waited on the disk (not all in the OS page cache,
    /// see `fsutil::read_at_noting_disk`): compaction is paced while this
    /// moves.
    pub(crate) table_disk_reads: AtomicU64,
}

impl BlockCache {
    pub(crate) fn new(capacity: usize) -> BlockCache {
        let nshards = (capacity / MIN_SHARD_BYTES).clamp(1, MAX_SHARDS);
        BlockCache {
            shards: (0..nshards)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::default(),
                        ring: VecDeque::new(),
                        bytes: 0,
                    })
                })
                .collect(),
            cap_per_shard: AtomicUsize::new(capacity / nshards),
            table_block_reads: AtomicU64::new(0),
            table_disk_reads: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: Key) -> &Mutex<Shard> {
        let i = (hash_key(key) >> 32) as usize % self.shards.len();
        &self.shards[i]
    }

    fn lookup<T>(&self, file: u64, off: u64, pick: impl Fn(&Item) -> Option<T>) -> Option<T> {
        let mut s = self.shard((file, off)).lock();
        let found = s.map.get_mut(&(file, off)).and_then(|e| {
            let v = pick(&e.item)?;
            e.referenced = true;
            Some(v)
        });
        if found.is_some() {
            crate::metrics::BLOCK_CACHE_HITS.inc();
        } else {
            crate::metrics::BLOCK_CACHE_MISSES.inc();
        }
        found
    }

    pub(crate) fn get(&self, file: u64, off: u64) -> Option<Arc<RawBlock>> {
        self.lookup(file, off, |i| match i {
            Item::Block(b) => Some(b.clone()),
            Item::Value(_) => None,
        })
    }

    pub(crate) fn get_value(&self, file: u64, off: u64) -> Option<SharedBytes> {
        self.lookup(file, off, |i| match i {
            Item::Value(v) => Some(v.clone()),
            Item::Block(_) => None,
        })
    }

    pub(crate) fn insert(&self, file: u64, off: u64, block: Arc<RawBlock>) {
        self.insert_item(file, off, Item::Block(block));
    }

    pub(crate) fn insert_value(&self, file: u64, off: u64, value: SharedBytes) {
        self.insert_item(file, off, Item::Value(value));
    }

    fn insert_item(&self, file: u64, off: u64, item: Item) {
        let charge = item.charge();
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
                item,
                referenced: false,
            },
        ) {
            Some(old) => {
                s.bytes -= old.item.charge();
                evicted.push(old.item);
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
                        s.bytes -= e.item.charge();
                        evicted.push(e.item);
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

    /// Drops every block or value of a file (after the file is deleted).
    pub(crate) fn evict_file(&self, file: u64) {
        for sh in &self.shards {
            let mut s = sh.lock();
            let s = &mut *s;
            let mut freed = 0;
            s.map.retain(|k, e| {
                if k.0 == file {
                    freed += e.item.charge();
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
        let cap = capacity / self.shards.len();
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
                    s.bytes -= e.item.charge();
                    evicted.push(e.item);
                }
            }
            drop(evicted);
        }
    }

    /// A read or scan read a table block from its file; `waited`: the
    /// bytes were not all in the OS page cache.
    pub(crate) fn note_table_read(&self, waited: bool) {
        self.table_block_reads.fetch_add(1, Ordering::Relaxed);
        if waited {
            self.table_disk_reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}
