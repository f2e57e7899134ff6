//! Pessimistic row locks (shared / exclusive) with wait-for-graph deadlock
//! detection, timeouts and cancellation.
//!
//! Locks are keyed by (column family id, key) and work for keys that do not
//! exist. A transaction that would close a cycle in the wait-for graph is the
//! victim and gets `Error::Deadlock` immediately. Waiters re-check every 50 ms
//! (timeouts, cancellation) and are woken on every release in their shard.
//! Locks are held until commit / rollback / drop of the transaction.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// Lock mode for [`crate::Txn::lock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

type LockKey = (u64, Vec<u8>);

#[derive(Default)]
struct Entry {
    holders: Vec<(u64, LockMode)>,
    waiters: usize,
}

struct Shard {
    map: Mutex<HashMap<LockKey, Entry>>,
    cv: Condvar,
}

pub(crate) struct LockManager {
    shards: Vec<Shard>,
    waits_for: Mutex<HashMap<u64, Vec<u64>>>,
}

impl LockManager {
    pub(crate) fn new() -> LockManager {
        LockManager {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    map: Mutex::new(HashMap::new()),
                    cv: Condvar::new(),
                })
                .collect(),
            waits_for: Mutex::new(HashMap::new()),
        }
    }

    fn shard(&self, cf: u64, key: &[u8]) -> &Shard {
        let h = crate::coding::hash64(key) ^ cf.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.shards[(h % SHARDS as u64) as usize]
    }

    fn would_deadlock(&self, me: u64, blockers: &[u64]) -> bool {
        let wf = self.waits_for.lock();
        let mut stack: Vec<u64> = blockers.to_vec();
        let mut seen = HashSet::new();
        while let Some(t) = stack.pop() {
            if t == me {
                return true;
            }
            if !seen.insert(t) {
                continue;
            }
            if let Some(next) = wf.get(&t) {
                stack.extend_from_slice(next);
            }
        }
        false
    }

    /// Acquires (or upgrades) a lock for transaction `me`.
    pub(crate) fn lock(
        &self,
        me: u64,
        cf: u64,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let deadline = Instant::now().checked_add(timeout);
        let sh = self.shard(cf, key);
        let mut map = sh.map.lock();
        let k: LockKey = (cf, key.to_vec());
        let mut waiting = false;
        let res = loop {
            let e = map.entry(k.clone()).or_default();
            let blockers: Vec<u64> = e
                .holders
                .iter()
                .filter(|(t, m)| {
                    *t != me && (mode == LockMode::Exclusive || *m == LockMode::Exclusive)
                })
                .map(|(t, _)| *t)
                .collect();
            if blockers.is_empty() {
                match e.holders.iter_mut().find(|(t, _)| *t == me) {
                    Some(h) => {
                        if mode == LockMode::Exclusive {
                            h.1 = LockMode::Exclusive;
                        }
                    }
                    None => e.holders.push((me, mode)),
                }
                break Ok(());
            }
            if !waiting {
                e.waiters += 1;
                waiting = true;
            }
            if self.would_deadlock(me, &blockers) {
                break Err(Error::Deadlock);
            }
            self.waits_for.lock().insert(me, blockers);
            if cancel.swap(false, Ordering::SeqCst) {
                break Err(Error::Cancelled);
            }
            let now = Instant::now();
            let wake = match deadline {
                Some(d) if now >= d => break Err(Error::LockTimeout),
                Some(d) => d.min(now + Duration::from_millis(50)),
                None => now + Duration::from_millis(50),
            };
            sh.cv.wait_until(&mut map, wake);
        };
        self.waits_for.lock().remove(&me);
        if waiting {
            if let Some(e) = map.get_mut(&k) {
                e.waiters -= 1;
            }
        }
        if res.is_err() {
            if let Some(e) = map.get(&k) {
                if e.holders.is_empty() && e.waiters == 0 {
                    map.remove(&k);
                }
            }
        }
        res
    }

    pub(crate) fn unlock_all(&self, me: u64, keys: &[(u64, Vec<u8>)]) {
        for (cf, key) in keys {
            let sh = self.shard(*cf, key);
            let mut map = sh.map.lock();
            let k = (*cf, key.clone());
            if let Some(e) = map.get_mut(&k) {
                e.holders.retain(|(t, _)| *t != me);
                if e.holders.is_empty() && e.waiters == 0 {
                    map.remove(&k);
                }
            }
            sh.cv.notify_all();
        }
        self.waits_for.lock().remove(&me);
    }

    pub(crate) fn wake_all(&self) {
        for s in &self.shards {
            let _g = s.map.lock();
            s.cv.notify_all();
        }
    }
}

/// Cancels lock waits of one transaction from another thread (KILL QUERY).
/// A cancelled wait returns `Error::Cancelled`; if the transaction is not
/// waiting, its next wait is cancelled instead.
#[derive(Clone)]
pub struct CancelHandle {
    pub(crate) flag: Arc<AtomicBool>,
    pub(crate) db: std::sync::Weak<crate::db::DbInner>,
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(db) = self.db.upgrade() {
            db.locks.wake_all();
        }
    }
}
