//! Sharded LRU block cache with a byte cap. Keys are (table file number, block
//! offset); values are decoded blocks shared through `Arc`.

use crate::sst::Block;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const SHARDS: usize = 16;

type Key = (u64, u64);

struct Shard {
    map: HashMap<Key, (Arc<Block>, u64)>,
    lru: BTreeMap<u64, Key>,
    tick: u64,
    bytes: usize,
}

pub(crate) struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    cap_per_shard: usize,
}

impl BlockCache {
    pub(crate) fn new(capacity: usize) -> BlockCache {
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::new(),
                        lru: BTreeMap::new(),
                        tick: 0,
                        bytes: 0,
                    })
                })
                .collect(),
            cap_per_shard: capacity / SHARDS,
        }
    }

    fn shard(&self, key: Key) -> &Mutex<Shard> {
        let h = crate::coding::hash64(&[key.0.to_le_bytes(), key.1.to_le_bytes()].concat());
        &self.shards[(h % SHARDS as u64) as usize]
    }

    pub(crate) fn get(&self, file: u64, off: u64) -> Option<Arc<Block>> {
        let mut s = self.shard((file, off)).lock();
        let s = &mut *s;
        s.tick += 1;
        let tick = s.tick;
        let (b, t) = s.map.get_mut(&(file, off))?;
        let old = std::mem::replace(t, tick);
        let b = b.clone();
        s.lru.remove(&old);
        s.lru.insert(tick, (file, off));
        Some(b)
    }

    pub(crate) fn insert(&self, file: u64, off: u64, block: Arc<Block>) {
        let charge = block.charge();
        if charge > self.cap_per_shard {
            return;
        }
        let mut s = self.shard((file, off)).lock();
        let s = &mut *s;
        s.tick += 1;
        let tick = s.tick;
        if let Some((old, t)) = s.map.insert((file, off), (block, tick)) {
            s.lru.remove(&t);
            s.bytes -= old.charge();
        }
        s.lru.insert(tick, (file, off));
        s.bytes += charge;
        while s.bytes > self.cap_per_shard {
            let Some((&t, &k)) = s.lru.iter().next() else {
                break;
            };
            s.lru.remove(&t);
            if let Some((b, _)) = s.map.remove(&k) {
                s.bytes -= b.charge();
            }
        }
    }

    /// Drops every block of a file (after the file is deleted).
    pub(crate) fn evict_file(&self, file: u64) {
        for sh in &self.shards {
            let mut s = sh.lock();
            let s = &mut *s;
            let keys: Vec<(Key, u64)> = s
                .map
                .iter()
                .filter(|(k, _)| k.0 == file)
                .map(|(k, v)| (*k, v.1))
                .collect();
            for (k, t) in keys {
                s.lru.remove(&t);
                if let Some((b, _)) = s.map.remove(&k) {
                    s.bytes -= b.charge();
                }
            }
        }
    }

    #[allow(dead_code)]
    pub(crate) fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}
