//! Live snapshots: the sequences that open readers read at. Compaction and
//! flush keep every version one of them can still see (`oldest`, `live`).

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sequence -> number of live snapshots at it.
#[derive(Default)]
pub(crate) struct Snapshots {
    live: Mutex<BTreeMap<u64, usize>>,
}

/// A registered snapshot; while alive, compaction keeps the versions it sees.
pub(crate) struct SnapGuard {
    set: Arc<Snapshots>,
    pub seq: u64,
}

impl Drop for SnapGuard {
    fn drop(&mut self) {
        let mut s = self.set.live.lock();
        if let Some(c) = s.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                s.remove(&self.seq);
            }
        }
    }
}

impl Snapshots {
    /// Registers a snapshot at the current `visible` sequence (read under
    /// the lock, so compaction never misses it).
    pub(crate) fn take(self: &Arc<Self>, visible: &AtomicU64) -> Arc<SnapGuard> {
        let mut s = self.live.lock();
        let seq = visible.load(Ordering::Acquire);
        *s.entry(seq).or_insert(0) += 1;
        Arc::new(SnapGuard {
            set: self.clone(),
            seq,
        })
    }

    /// Oldest sequence any live snapshot can read at (`visible` when none).
    pub(crate) fn oldest(&self, visible: &AtomicU64) -> u64 {
        let s = self.live.lock();
        let vis = visible.load(Ordering::Acquire);
        s.keys().next().copied().unwrap_or(vis).min(vis)
    }

    /// The sequences of the live snapshots, oldest first.
    pub(crate) fn live(&self) -> Vec<u64> {
        self.live.lock().keys().copied().collect()
    }
}
