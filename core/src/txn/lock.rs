//! Pessimistic row locks (shared / exclusive) with wait-for-graph deadlock
//! detection, timeouts and cancellation.
//!
//! Locks are keyed by (column family id, key) and work for keys that do not
//! exist. A transaction that would close a cycle in the wait-for graph is the
//! victim and gets `Error::Deadlock` immediately. Waiters re-check every 50 ms
//! (timeouts, cancellation) and are woken when a lock they wait for is
//! released. Locks are held until commit / rollback / drop of the transaction.
//!
//! Cost model (a large INSERT ... SELECT takes millions of locks in one txn):
//! the (cf, key) pair is encoded once into one shared allocation
//! ([`LockKey`], varint cf + key bytes) referenced by both the global table
//! and the transaction's own lock map; the holder of an uncontended lock is
//! stored inline in the table entry; an uncontended lock takes one shard
//! mutex, one hash probe and one allocation and never touches the wait-for
//! graph. Tables hash with [`crate::fxhash`].
//!
//! Range (gap) locks, InnoDB's next-key locking: a locking cursor in
//! REPEATABLE READ / SERIALIZABLE locks every key interval it scans,
//! `[lo, hi]` (both ends inclusive, `hi = None` is +infinity), in one
//! column family. Range locks never conflict with each other (like InnoDB's
//! gap locks, whose only purpose is to keep inserts out). A PUT of a key
//! waits while another transaction holds a range containing it
//! ([`LockManager::check_insert`]). A range lock waits while another
//! transaction's uncommitted write set has a key inside the range (so a
//! locking read does not skip an insert that is not yet committed, as
//! InnoDB's read waits for the record's implicit lock); for that, every
//! transaction's write set of a column family is registered here when it is
//! created ([`LockManager::register_writer`]). A writer puts its key first
//! and checks the ranges after: with the range counter read after the put,
//! either the writer sees the range or the range locker sees the key. All
//! range state sits behind one mutex; a PUT with no range lock anywhere
//! costs one atomic load. Waits share the wait-for graph, timeouts and
//! cancellation with row locks.
//!
//! Lock escalation (bounded memory for huge statements): a transaction that
//! holds more than the escalation threshold of row locks in one column
//! family trades them for one table lock on that family in the strongest
//! mode it held there ([`LockManager::try_escalate`], called by the
//! transaction). A table lock conflicts with other transactions' row lock
//! requests on the family like a lock on every key (shared with shared
//! coexists) and an exclusive one also with their range lock requests; the
//! waits go through the same wait-for graph, timeouts and cancellation.
//! Escalation never waits: it is refused (and retried later by the
//! transaction) while another transaction holds a conflicting row or table
//! lock on the family. It takes every shard mutex for one pass over the
//! table, so a row lock is granted either before (and seen by the pass) or
//! after (and sees the table lock). Table locks are released when the
//! transaction ends. Row requests cost one atomic load while no table lock
//! exists anywhere.

use crate::error::{Error, Result};
use crate::fxhash::{FxBuildHasher, FxHashMap};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::collections::hash_map::Entry as MapEntry;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// Default of [`crate::Db::set_lock_escalation_threshold`].
pub(crate) const DEFAULT_ESCALATION_THRESHOLD: usize = 100_000;

/// Lock mode for [`crate::Txn::lock`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// Encoded (cf, key): varint cf id followed by the key bytes (the varint is
/// prefix-free, so the encoding is unambiguous). Shared between the global
/// table and the owning transaction's lock map.
pub(crate) type LockKey = Arc<[u8]>;

/// Encodes (cf, key) into `buf` (cleared first).
pub(crate) fn encode_key(buf: &mut Vec<u8>, cf: u64, key: &[u8]) {
    buf.clear();
    crate::coding::put_varint(buf, cf);
    buf.extend_from_slice(key);
}

/// Holders of one key. The first holder is inline (no allocation for the
/// common single-holder case); further (shared) holders go to `more`.
/// Invariant: `first.is_none()` implies `more` is empty.
struct Entry {
    first: Option<(u64, LockMode)>,
    more: Option<Box<More>>,
    waiters: u32,
}

/// Shared holders beyond the first (rare; boxed to keep `Entry` small).
struct More(Vec<(u64, LockMode)>);

impl Entry {
    fn new(me: u64, mode: LockMode) -> Entry {
        Entry {
            first: Some((me, mode)),
            more: None,
            waiters: 0,
        }
    }

    fn holders(&self) -> impl Iterator<Item = &(u64, LockMode)> {
        self.first
            .iter()
            .chain(self.more.iter().flat_map(|m| m.0.iter()))
    }

    fn blocks(me: u64, mode: LockMode, h: &(u64, LockMode)) -> bool {
        h.0 != me && (mode == LockMode::Exclusive || h.1 == LockMode::Exclusive)
    }

    fn conflicts(&self, me: u64, mode: LockMode) -> bool {
        self.holders().any(|h| Self::blocks(me, mode, h))
    }

    fn blockers(&self, me: u64, mode: LockMode) -> Vec<u64> {
        self.holders()
            .filter(|h| Self::blocks(me, mode, h))
            .map(|h| h.0)
            .collect()
    }

    /// Adds / upgrades `me` (caller checked there is no conflict).
    fn grant(&mut self, me: u64, mode: LockMode) {
        let found = match &mut self.first {
            None => {
                self.first = Some((me, mode));
                return;
            }
            Some(h) if h.0 == me => Some(h),
            Some(_) => self
                .more
                .as_mut()
                .and_then(|m| m.0.iter_mut().find(|h| h.0 == me)),
        };
        match found {
            Some(h) => {
                if mode == LockMode::Exclusive {
                    h.1 = LockMode::Exclusive;
                }
            }
            None => {
                self.more
                    .get_or_insert_with(|| Box::new(More(Vec::new())))
                    .0
                    .push((me, mode));
            }
        }
    }

    fn release(&mut self, me: u64) {
        let Some(mut more) = self.more.take() else {
            if matches!(self.first, Some((t, _)) if t == me) {
                self.first = None;
            }
            return;
        };
        if matches!(self.first, Some((t, _)) if t == me) {
            self.first = more.0.pop();
        } else {
            more.0.retain(|h| h.0 != me);
        }
        if !more.0.is_empty() {
            self.more = Some(more);
        }
    }

    fn is_free(&self) -> bool {
        self.first.is_none() && self.waiters == 0
    }
}

struct Shard {
    map: Mutex<FxHashMap<LockKey, Entry>>,
    cv: Condvar,
}

/// A transaction's write set of one column family (see `spill.rs`).
pub(crate) type WsHandle = Arc<Mutex<crate::txn::spill::WsView>>;

/// One range lock: keys `lo <= k <= hi` (`hi = None`: no upper end).
struct RangeLock {
    owner: u64,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
}

impl RangeLock {
    fn contains(&self, k: &[u8]) -> bool {
        self.lo.as_slice() <= k && self.hi.as_deref().map_or(true, |h| k <= h)
    }

    /// Merges `[lo, hi]` into `self` if the two overlap (adjacent scan steps
    /// share their boundary key, so a scan keeps one range).
    fn absorb(&mut self, lo: &[u8], hi: Option<&[u8]>) -> bool {
        let starts_before_end = self.hi.as_deref().map_or(true, |h| lo <= h);
        let ends_after_start = hi.map_or(true, |h| self.lo.as_slice() <= h);
        if !(starts_before_end && ends_after_start) {
            return false;
        }
        if lo < self.lo.as_slice() {
            self.lo = lo.to_vec();
        }
        match (&self.hi, hi) {
            (None, _) => {}
            (Some(_), None) => self.hi = None,
            (Some(a), Some(b)) => {
                if b > a.as_slice() {
                    self.hi = Some(b.to_vec());
                }
            }
        }
        true
    }
}

/// Range locks, registered write sets and waiting inserts.
#[derive(Default)]
struct Gaps {
    /// cf -> range locks.
    ranges: FxHashMap<u64, Vec<RangeLock>>,
    /// cf -> (owner, write set).
    writers: FxHashMap<u64, Vec<(u64, WsHandle)>>,
    /// Inserts waiting for a range lock: (owner, cf, key). Their keys are in
    /// the owner's write set but, like InnoDB's waiting insert intention,
    /// block no range lock.
    pending: Vec<(u64, u64, Vec<u8>)>,
}

/// Told when a transaction has to wait for locks other transactions hold:
/// (waiting transaction's id, the holders' ids), again whenever the set of
/// holders changes. It runs on the waiter's thread with no lock-manager mutex
/// held, so it may cancel a holder's own wait ([`CancelHandle::cancel`]) or
/// have a holder rolled back; the waiter then re-checks the lock. Used by a
/// replication applier that must not wait for local transactions (Galera's
/// brute-force abort): the policy is the observer's, not the lock manager's.
/// It returns the waiter's [`WaiterRole`].
pub type LockWaitObserver = Arc<dyn Fn(u64, &[u64]) -> WaiterRole + Send + Sync>;

/// What a [`LockWaitObserver`] says of a waiting transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaiterRole {
    /// Waits like any transaction: the victim if its wait would close a cycle.
    Ordinary,
    /// Never the victim of a deadlock: its wait stays in the wait-for graph, so
    /// the other transactions of a cycle find the cycle and one of them gives
    /// way (a replication applier, whose failure would stop the node; the
    /// observer has already asked its local holders to abort).
    NeverVictim,
}

pub(crate) struct LockManager {
    shards: Vec<Shard>,
    /// See [`LockWaitObserver`]; `has_observer` spares waits the read lock.
    observer: RwLock<Option<LockWaitObserver>>,
    has_observer: AtomicBool,
    hasher: FxBuildHasher,
    waits_for: Mutex<FxHashMap<u64, Vec<u64>>>,
    gaps: Mutex<Gaps>,
    gaps_cv: Condvar,
    /// Number of range locks (plus range lock requests in progress); 0 lets
    /// inserts skip the range check.
    ranges: AtomicUsize,
    /// Table locks from escalation: cf -> holders. Lock order: a shard
    /// mutex, or the range mutex, before this one.
    tables: Mutex<FxHashMap<u64, Vec<(u64, LockMode)>>>,
    /// Number of table locks held; 0 lets row requests skip the table check.
    n_tables: AtomicUsize,
    /// Table lock requests waiting ([`LockManager::wait_table_locks`]): cf ->
    /// requesters. A row request of a transaction that holds no lock in such a
    /// family yet waits behind them, so that a stream of new transactions
    /// cannot keep the table lock from ever being granted; one that holds
    /// some goes on (it is what the request waits for). Lock order: a shard
    /// mutex before this one; never held with the table mutex.
    pending_tables: Mutex<FxHashMap<u64, Vec<u64>>>,
    /// Number of entries in `pending_tables`; 0 lets row requests skip it.
    n_pending: AtomicUsize,
    /// Row locks per transaction and column family before escalation to a
    /// table lock (0 = never).
    escalation_threshold: AtomicUsize,
}

impl LockManager {
    pub(crate) fn new() -> LockManager {
        LockManager {
            observer: RwLock::new(None),
            has_observer: AtomicBool::new(false),
            shards: (0..SHARDS)
                .map(|_| Shard {
                    map: Mutex::new(FxHashMap::default()),
                    cv: Condvar::new(),
                })
                .collect(),
            hasher: FxBuildHasher::default(),
            waits_for: Mutex::new(FxHashMap::default()),
            gaps: Mutex::new(Gaps::default()),
            gaps_cv: Condvar::new(),
            ranges: AtomicUsize::new(0),
            tables: Mutex::new(FxHashMap::default()),
            n_tables: AtomicUsize::new(0),
            pending_tables: Mutex::new(FxHashMap::default()),
            n_pending: AtomicUsize::new(0),
            escalation_threshold: AtomicUsize::new(DEFAULT_ESCALATION_THRESHOLD),
        }
    }

    /// Row locks a transaction may hold in one column family before it
    /// escalates them to a table lock (0 = never).
    pub(crate) fn escalation_threshold(&self) -> usize {
        self.escalation_threshold.load(Ordering::Relaxed)
    }

    pub(crate) fn set_escalation_threshold(&self, locks: usize) {
        self.escalation_threshold.store(locks, Ordering::Relaxed);
    }

    pub(crate) fn set_observer(&self, observer: Option<LockWaitObserver>) {
        let on = observer.is_some();
        *self.observer.write() = observer;
        self.has_observer.store(on, Ordering::SeqCst);
    }

    /// Tells the observer, if any, that `me` waits for `blockers`, with `guard`
    /// (a lock-manager mutex) released meanwhile. Its answer if it was told (the
    /// caller re-checks: the holders may be gone); `told` remembers the set.
    fn notify_wait<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        me: u64,
        blockers: &[u64],
        told: &mut Vec<u64>,
    ) -> Option<WaiterRole> {
        if !self.has_observer.load(Ordering::SeqCst) || told.as_slice() == blockers {
            return None;
        }
        let obs = self.observer.read().clone()?;
        told.clear();
        told.extend_from_slice(blockers);
        Some(MutexGuard::unlocked(guard, || obs(me, blockers)))
    }

    /// Other transactions whose table lock on `cf` conflicts with `mode`, and,
    /// for a transaction that holds no lock in `cf` yet (`fresh`), those whose
    /// table lock request on `cf` waits.
    fn table_blockers(&self, me: u64, cf: u64, mode: LockMode, fresh: bool) -> Vec<u64> {
        let mut blockers = Vec::new();
        if self.n_tables.load(Ordering::SeqCst) != 0 {
            blockers.extend(
                self.tables
                    .lock()
                    .get(&cf)
                    .into_iter()
                    .flatten()
                    .filter(|h| Entry::blocks(me, mode, h))
                    .map(|h| h.0),
            );
        }
        if fresh && self.n_pending.load(Ordering::SeqCst) != 0 {
            for &t in self.pending_tables.lock().get(&cf).into_iter().flatten() {
                if t != me && !blockers.contains(&t) {
                    blockers.push(t);
                }
            }
        }
        blockers
    }

    /// Tries to replace `me`'s row locks on `cf` by one table lock in `mode`
    /// (see the module doc). Refused (false) while another transaction holds
    /// a conflicting row or table lock on `cf`. On success `me`'s row locks
    /// on `cf` are gone from the table (the caller drops its own copies).
    pub(crate) fn try_escalate(&self, me: u64, cf: u64, mode: LockMode) -> bool {
        let granted = self.try_table_locks(me, &[cf], mode).is_empty();
        if granted {
            crate::metrics::LOCK_ESCALATIONS.inc();
        }
        granted
    }

    /// Takes table locks on every family of `cfs` for `me` as
    /// [`LockManager::try_table_locks`] does, waiting up to `timeout` while
    /// other transactions hold conflicting locks there; meanwhile transactions
    /// that hold no lock in those families wait behind the request (see
    /// `pending_tables`), and the wait-for graph has the request waiting for
    /// the holders, so a holder that comes to wait for such a transaction
    /// makes that transaction the deadlock victim.
    pub(crate) fn wait_table_locks(
        &self,
        me: u64,
        cfs: &[u64],
        mode: LockMode,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<()> {
        {
            let mut pending = self.pending_tables.lock();
            for &cf in cfs {
                pending.entry(cf).or_default().push(me);
            }
            self.n_pending.fetch_add(cfs.len(), Ordering::SeqCst);
        }
        let deadline = Instant::now().checked_add(timeout);
        let res = loop {
            let holders = self.try_table_locks(me, cfs, mode);
            if holders.is_empty() {
                break Ok(());
            }
            self.waits_for.lock().insert(me, holders);
            if cancel.swap(false, Ordering::SeqCst) {
                break Err(Error::Cancelled);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                crate::metrics::LOCK_WAIT_TIMEOUTS.inc();
                break Err(Error::LockTimeout);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.waits_for.lock().remove(&me);
        {
            let mut pending = self.pending_tables.lock();
            for &cf in cfs {
                if let Some(v) = pending.get_mut(&cf) {
                    if let Some(i) = v.iter().position(|&t| t == me) {
                        v.swap_remove(i);
                        self.n_pending.fetch_sub(1, Ordering::SeqCst);
                    }
                    if v.is_empty() {
                        pending.remove(&cf);
                    }
                }
            }
        }
        // The requests that waited behind this one.
        self.wake_all();
        res
    }

    /// Gives `me` a table lock in `mode` on every family of `cfs`, in place of
    /// its row locks there, or none of them while another transaction holds a
    /// conflicting row or table lock on any (those transactions are returned;
    /// empty: granted): all at once, so that a transaction taking several
    /// never holds some while it waits for others.
    pub(crate) fn try_table_locks(&self, me: u64, cfs: &[u64], mode: LockMode) -> Vec<u64> {
        let prefixes: Vec<Vec<u8>> = cfs
            .iter()
            .map(|&cf| {
                let mut prefix = Vec::new();
                encode_key(&mut prefix, cf, &[]);
                prefix
            })
            .collect();
        let covered = |k: &[u8]| prefixes.iter().any(|p| k.starts_with(p));
        let mut maps: Vec<_> = self.shards.iter().map(|s| s.map.lock()).collect();
        let mut tables = self.tables.lock();
        let mut holders: Vec<u64> = Vec::new();
        let mut add = |t: u64| {
            if !holders.contains(&t) {
                holders.push(t);
            }
        };
        for h in cfs
            .iter()
            .flat_map(|cf| tables.get(cf).into_iter().flatten())
        {
            if Entry::blocks(me, mode, h) {
                add(h.0);
            }
        }
        for map in &maps {
            for (k, e) in map.iter() {
                if covered(k) {
                    for h in e.holders().filter(|h| Entry::blocks(me, mode, h)) {
                        add(h.0);
                    }
                }
            }
        }
        if !holders.is_empty() {
            return holders;
        }
        for map in maps.iter_mut() {
            map.retain(|k, e| {
                if covered(k) {
                    e.release(me);
                    return !e.is_free();
                }
                true
            });
            let (len, cap) = (map.len(), map.capacity());
            if cap > 1024 && len * 8 < cap {
                map.shrink_to(len * 2);
            }
        }
        for &cf in cfs {
            let holders = tables.entry(cf).or_default();
            match holders.iter_mut().find(|h| h.0 == me) {
                Some(h) => {
                    if mode == LockMode::Exclusive {
                        h.1 = mode;
                    }
                }
                None => {
                    holders.push((me, mode));
                    self.n_tables.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        drop(tables);
        drop(maps);
        // Waiters for the released row locks now wait for the table lock.
        for s in &self.shards {
            s.cv.notify_all();
        }
        Vec::new()
    }

    /// Releases `me`'s table locks (transaction end) and wakes all waiters.
    pub(crate) fn release_tables(&self, me: u64) {
        if self.n_tables.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut removed = 0;
        {
            let mut t = self.tables.lock();
            for v in t.values_mut() {
                let before = v.len();
                v.retain(|h| h.0 != me);
                removed += before - v.len();
            }
            t.retain(|_, v| !v.is_empty());
        }
        if removed > 0 {
            self.n_tables.fetch_sub(removed, Ordering::SeqCst);
            self.wake_all();
        }
    }

    fn shard(&self, k: &[u8]) -> &Shard {
        // Bits 40..46: disjoint from the low bits (bucket index) and the top
        // 7 bits (control tag) hashbrown uses inside a shard.
        let h = self.hasher.hash_one(k);
        &self.shards[((h >> 40) as usize) % SHARDS]
    }

    fn would_deadlock(&self, me: u64, blockers: &[u64]) -> bool {
        let wf = self.waits_for.lock();
        let mut stack: Vec<u64> = blockers.to_vec();
        let mut seen: Vec<u64> = Vec::new();
        while let Some(t) = stack.pop() {
            if t == me {
                return true;
            }
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            if let Some(next) = wf.get(&t) {
                stack.extend_from_slice(next);
            }
        }
        false
    }

    /// Acquires (or upgrades) a lock on (cf, key) for transaction `me`.
    pub(crate) fn lock(
        &self,
        me: u64,
        cf: u64,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let mut k = Vec::with_capacity(key.len() + 10);
        encode_key(&mut k, cf, key);
        self.lock_key(me, cf, &k, mode, timeout, cancel, false)
            .map(|_| ())
    }

    /// Acquires (or upgrades) a lock on an encoded key (see [`encode_key`],
    /// `cf` is its column family); returns the table's shared copy of the key.
    /// `fresh`: `me` holds no lock in `cf` yet (it then waits behind table
    /// lock requests, see `pending_tables`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lock_key(
        &self,
        me: u64,
        cf: u64,
        k: &[u8],
        mode: LockMode,
        timeout: Duration,
        cancel: &AtomicBool,
        fresh: bool,
    ) -> Result<LockKey> {
        let sh = self.shard(k);
        let mut map = sh.map.lock();
        // Checked under the shard mutex: an escalation holds them all.
        let table_blocked = !self.table_blockers(me, cf, mode, fresh).is_empty();
        // Fast path: free key (one probe, one allocation) or no conflict.
        let key = match map.entry(Arc::from(k)) {
            MapEntry::Vacant(v) if table_blocked => v.key().clone(),
            MapEntry::Vacant(v) => {
                let key = v.key().clone();
                v.insert(Entry::new(me, mode));
                return Ok(key);
            }
            MapEntry::Occupied(mut o) => {
                if !table_blocked && !o.get().conflicts(me, mode) {
                    o.get_mut().grant(me, mode);
                    return Ok(o.key().clone());
                }
                o.key().clone()
            }
        };
        // Slow path: wait.
        let (res, waited) = self.wait_until_free(
            &mut map,
            &sh.cv,
            me,
            timeout,
            cancel,
            |map| {
                // The entry stays (waiters > 0) while the mutex is released.
                if let Some(e) = map.get_mut(&*key) {
                    e.waiters += 1;
                }
            },
            |map| {
                let e = map.entry(key.clone()).or_insert_with(|| Entry {
                    first: None,
                    more: None,
                    waiters: 0,
                });
                let mut blockers = e.blockers(me, mode);
                for t in self.table_blockers(me, cf, mode, fresh) {
                    if !blockers.contains(&t) {
                        blockers.push(t);
                    }
                }
                if blockers.is_empty() {
                    e.grant(me, mode);
                }
                blockers
            },
        );
        if let Some(e) = map.get_mut(&*key) {
            if waited {
                e.waiters -= 1;
            }
            if res.is_err() && e.is_free() {
                map.remove(&*key);
            }
        }
        res.map(|()| key)
    }

    /// Releases `me`'s lock on one encoded key; wakes waiters of that key.
    fn release(&self, me: u64, k: &[u8]) {
        let sh = self.shard(k);
        let mut map = sh.map.lock();
        let Some(e) = map.get_mut(k) else {
            return;
        };
        e.release(me);
        if e.waiters > 0 {
            sh.cv.notify_all();
        } else if e.first.is_none() {
            map.remove(k);
            // Give memory back after a large transaction (amortized O(1)).
            let (len, cap) = (map.len(), map.capacity());
            if cap > 1024 && len * 8 < cap {
                map.shrink_to(len * 2);
            }
        }
    }

    /// Releases `me`'s locks on encoded keys (a transaction's own lock map).
    pub(crate) fn unlock_keys(&self, me: u64, keys: impl IntoIterator<Item = LockKey>) {
        for k in keys {
            self.release(me, &k);
        }
        self.waits_for.lock().remove(&me);
    }

    /// Releases `me`'s locks on (cf, key) pairs (detached prepared txns).
    pub(crate) fn unlock_all(&self, me: u64, keys: &[(u64, Vec<u8>)]) {
        let mut k = Vec::new();
        for (cf, key) in keys {
            encode_key(&mut k, *cf, key);
            self.release(me, &k);
        }
        self.waits_for.lock().remove(&me);
        self.end_gaps(me);
        self.release_tables(me);
    }

    pub(crate) fn wake_all(&self) {
        for s in &self.shards {
            let _g = s.map.lock();
            s.cv.notify_all();
        }
        let _g = self.gaps.lock();
        self.gaps_cv.notify_all();
    }

    /// Registers transaction `me`'s write set of column family `cf` (once,
    /// when it is created); range lock requests look into it.
    pub(crate) fn register_writer(&self, me: u64, cf: u64, ws: WsHandle) {
        self.gaps
            .lock()
            .writers
            .entry(cf)
            .or_default()
            .push((me, ws));
    }

    /// The write sets of `cf` of transactions other than `me` (READ
    /// UNCOMMITTED reads look into them). A writer leaves this registry only
    /// after its commit is visible, so a reader that finds no write set here
    /// and then reads the latest committed state misses no write.
    pub(crate) fn uncommitted_write_sets(&self, me: u64, cf: u64) -> Vec<WsHandle> {
        self.gaps
            .lock()
            .writers
            .get(&cf)
            .map(|v| {
                v.iter()
                    .filter(|w| w.0 != me)
                    .map(|w| w.1.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Drops everything `me` has in the range state (its range locks and
    /// write sets); wakes range waiters. Called when a transaction ends.
    pub(crate) fn end_gaps(&self, me: u64) {
        let mut g = self.gaps.lock();
        let mut removed = 0;
        for v in g.ranges.values_mut() {
            let before = v.len();
            v.retain(|r| r.owner != me);
            removed += before - v.len();
        }
        g.ranges.retain(|_, v| !v.is_empty());
        for v in g.writers.values_mut() {
            v.retain(|w| w.0 != me);
        }
        g.writers.retain(|_, v| !v.is_empty());
        if removed > 0 {
            self.ranges.fetch_sub(removed, Ordering::SeqCst);
        }
        self.gaps_cv.notify_all();
    }

    /// Waits (up to `timeout`) until `attempt` finds no blocker; `attempt`
    /// runs under the range mutex and returns the transactions `me` waits for
    /// (empty: done).
    fn gap_wait(
        &self,
        me: u64,
        timeout: Duration,
        cancel: &AtomicBool,
        on_wait: impl FnMut(&mut Gaps),
        attempt: impl FnMut(&mut Gaps) -> Vec<u64>,
    ) -> Result<()> {
        let mut g = self.gaps.lock();
        let (res, waited) =
            self.wait_until_free(&mut g, &self.gaps_cv, me, timeout, cancel, on_wait, attempt);
        if waited {
            g.pending.retain(|p| p.0 != me);
        }
        res
    }

    /// The wait of every lock request (row, range, insert into a locked
    /// range): runs `attempt` under `guard` (the mutex `cv` is signalled
    /// under) until it returns no blocker, telling the observer of new
    /// blockers, failing with `Deadlock` when waiting would close a cycle
    /// of the wait-for graph (unless the observer made it
    /// [`WaiterRole::NeverVictim`]), `Cancelled` on cancellation and `LockTimeout`
    /// after `timeout`; waits, deadlocks and timeouts are counted in the
    /// metrics. `on_wait` runs once, when the first blocker is found.
    /// Returns the outcome and whether the request waited.
    #[allow(clippy::too_many_arguments)]
    fn wait_until_free<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        cv: &Condvar,
        me: u64,
        timeout: Duration,
        cancel: &AtomicBool,
        mut on_wait: impl FnMut(&mut T),
        mut attempt: impl FnMut(&mut T) -> Vec<u64>,
    ) -> (Result<()>, bool) {
        let deadline = Instant::now().checked_add(timeout);
        let mut waiting = false;
        let mut told = Vec::new();
        let mut never_victim = false;
        let res = loop {
            let blockers = attempt(&mut **guard);
            if blockers.is_empty() {
                break Ok(());
            }
            if !waiting {
                crate::metrics::LOCK_WAITS.inc();
                on_wait(&mut **guard);
                waiting = true;
            }
            if let Some(role) = self.notify_wait(guard, me, &blockers, &mut told) {
                never_victim |= role == WaiterRole::NeverVictim;
                continue;
            }
            if !never_victim && self.would_deadlock(me, &blockers) {
                crate::metrics::DEADLOCKS.inc();
                break Err(Error::Deadlock);
            }
            self.waits_for.lock().insert(me, blockers);
            if cancel.swap(false, Ordering::SeqCst) {
                break Err(Error::Cancelled);
            }
            let now = Instant::now();
            let wake = match deadline {
                Some(d) if now >= d => {
                    crate::metrics::LOCK_WAIT_TIMEOUTS.inc();
                    break Err(Error::LockTimeout);
                }
                Some(d) => d.min(now + Duration::from_millis(50)),
                None => now + Duration::from_millis(50),
            };
            cv.wait_until(guard, wake);
        };
        if waiting {
            self.waits_for.lock().remove(&me);
        }
        (res, waiting)
    }

    /// True if a range lock exists anywhere (inserts skip the check if not).
    pub(crate) fn any_range(&self) -> bool {
        self.ranges.load(Ordering::SeqCst) != 0
    }

    /// Called after `me` put `key` into its write set of `cf`: waits while
    /// another transaction holds a range lock containing `key`.
    pub(crate) fn check_insert(
        &self,
        me: u64,
        cf: u64,
        key: &[u8],
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<()> {
        if !self.any_range() {
            return Ok(());
        }
        self.gap_wait(
            me,
            timeout,
            cancel,
            |g| g.pending.push((me, cf, key.to_vec())),
            |g| {
                let mut owners: Vec<u64> = g
                    .ranges
                    .get(&cf)
                    .into_iter()
                    .flatten()
                    .filter(|r| r.owner != me && r.contains(key))
                    .map(|r| r.owner)
                    .collect();
                owners.dedup();
                owners
            },
        )
    }

    /// Locks keys `lo <= k <= hi` of `cf` for `me` (see the module doc).
    pub(crate) fn lock_range(
        &self,
        me: u64,
        cf: u64,
        lo: &[u8],
        hi: Option<&[u8]>,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<()> {
        // Counted before the write sets are looked at: a writer that puts a
        // key after this sees a range and takes the slow path.
        self.ranges.fetch_add(1, Ordering::SeqCst);
        let mut stored = false;
        let res = self.gap_wait(
            me,
            timeout,
            cancel,
            |_| {},
            |g| {
                // Another transaction's exclusive table lock covers the range.
                let mut blockers = self.table_blockers(me, cf, LockMode::Shared, false);
                for (owner, ws) in g.writers.get(&cf).into_iter().flatten() {
                    if *owner == me || blockers.contains(owner) {
                        continue;
                    }
                    let skip: Vec<&[u8]> = g
                        .pending
                        .iter()
                        .filter(|p| p.0 == *owner && p.1 == cf)
                        .map(|p| p.2.as_slice())
                        .collect();
                    if crate::txn::spill::ws_has_key_in(ws, lo, hi, &skip) {
                        blockers.push(*owner);
                    }
                }
                if blockers.is_empty() {
                    let v = g.ranges.entry(cf).or_default();
                    // Merge with one of our recent ranges (a scan's steps).
                    let merged = v
                        .iter_mut()
                        .rev()
                        .filter(|r| r.owner == me)
                        .take(4)
                        .any(|r| r.absorb(lo, hi));
                    if !merged {
                        v.push(RangeLock {
                            owner: me,
                            lo: lo.to_vec(),
                            hi: hi.map(|h| h.to_vec()),
                        });
                        stored = true;
                    }
                }
                blockers
            },
        );
        if !stored {
            self.ranges.fetch_sub(1, Ordering::SeqCst);
        }
        res
    }
}

/// Cancels lock waits of one transaction from another thread (KILL QUERY).
/// A cancelled wait returns `Error::Cancelled`; if the transaction is not
/// waiting, its next wait is cancelled instead.
#[derive(Clone)]
pub struct CancelHandle {
    pub(crate) flag: Arc<AtomicBool>,
    pub(crate) locks: std::sync::Weak<LockManager>,
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Some(locks) = self.locks.upgrade() {
            locks.wake_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The observer learns who waits for whom, with no mutex held: here it
    /// releases the holder's lock itself (as a brute-force abort rolls the
    /// holder back), and the waiter gets the lock long before its timeout.
    #[test]
    fn wait_observer_sees_holders_and_may_free_them() -> Result<()> {
        let locks = Arc::new(LockManager::new());
        type Seen = Vec<(u64, Vec<u64>)>;
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let weak = Arc::downgrade(&locks);
        let seen2 = seen.clone();
        locks.set_observer(Some(Arc::new(move |me: u64, holders: &[u64]| {
            seen2.lock().push((me, holders.to_vec()));
            if let Some(l) = weak.upgrade() {
                l.unlock_all(holders[0], &[(7, b"k".to_vec())]);
            }
            WaiterRole::Ordinary
        })));
        let no = AtomicBool::new(false);
        locks.lock(1, 7, b"k", LockMode::Exclusive, Duration::ZERO, &no)?;
        let t = Instant::now();
        locks.lock(
            2,
            7,
            b"k",
            LockMode::Exclusive,
            Duration::from_secs(30),
            &no,
        )?;
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(*seen.lock(), vec![(2, vec![1])]);
        locks.set_observer(None);
        Ok(())
    }

    /// A waiter the observer calls `NeverVictim` (a replication applier) is
    /// not failed when its wait closes a cycle: the other member of the cycle
    /// finds it on its next check and is the victim; once that one's locks are
    /// released the applier gets its lock.
    #[test]
    fn a_never_victim_waiter_leaves_the_deadlock_to_the_other() -> Result<()> {
        let lm = Arc::new(LockManager::new());
        const APPLIER: u64 = 2;
        lm.set_observer(Some(Arc::new(|me: u64, _: &[u64]| {
            if me == APPLIER {
                WaiterRole::NeverVictim
            } else {
                WaiterRole::Ordinary
            }
        })));
        let no = AtomicBool::new(false);
        lm.lock(APPLIER, 7, b"k2", LockMode::Exclusive, Duration::ZERO, &no)?;
        lm.lock(1, 7, b"k1", LockMode::Exclusive, Duration::ZERO, &no)?;
        let local = {
            let lm = lm.clone();
            std::thread::spawn(move || {
                let cancel = AtomicBool::new(false);
                let r = lm.lock(
                    1,
                    7,
                    b"k2",
                    LockMode::Exclusive,
                    Duration::from_secs(60),
                    &cancel,
                );
                lm.unlock_all(1, &[(7, b"k1".to_vec())]);
                r
            })
        };
        while !lm.waits_for.lock().contains_key(&1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        lm.lock(
            APPLIER,
            7,
            b"k1",
            LockMode::Exclusive,
            Duration::from_secs(60),
            &no,
        )?;
        let r = local.join().expect("local thread");
        assert!(matches!(r, Err(Error::Deadlock)), "{r:?}");
        lm.unlock_all(APPLIER, &[(7, b"k1".to_vec()), (7, b"k2".to_vec())]);
        Ok(())
    }

    /// A range lock wait is counted like a row lock wait: an insert into
    /// another transaction's range that times out counts a timeout, one that
    /// would close a cycle of the wait-for graph counts a deadlock.
    #[test]
    fn range_waits_count_timeouts_and_deadlocks() -> Result<()> {
        let lm = Arc::new(LockManager::new());
        let no_cancel = AtomicBool::new(false);
        lm.lock_range(2, 7, b"a", Some(b"z"), Duration::ZERO, &no_cancel)?;
        lm.lock(1, 7, b"k", LockMode::Exclusive, Duration::ZERO, &no_cancel)?;
        let timeouts = crate::metrics::Metrics::counters().lock_wait_timeouts;
        let r = lm.check_insert(1, 7, b"m", Duration::from_millis(20), &no_cancel);
        assert!(matches!(r, Err(Error::LockTimeout)), "{r:?}");
        assert!(crate::metrics::Metrics::counters().lock_wait_timeouts > timeouts);
        // Transaction 2 waits for 1's row lock; 1 then waits for 2's range.
        let waiter = {
            let lm = lm.clone();
            std::thread::spawn(move || {
                let cancel = AtomicBool::new(false);
                lm.lock(
                    2,
                    7,
                    b"k",
                    LockMode::Exclusive,
                    Duration::from_secs(60),
                    &cancel,
                )
            })
        };
        while !lm.waits_for.lock().contains_key(&2) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let deadlocks = crate::metrics::Metrics::counters().deadlocks;
        let r = lm.check_insert(1, 7, b"m", Duration::from_secs(60), &no_cancel);
        assert!(matches!(r, Err(Error::Deadlock)), "{r:?}");
        assert!(crate::metrics::Metrics::counters().deadlocks > deadlocks);
        lm.unlock_all(1, &[(7, b"k".to_vec())]);
        waiter.join().expect("waiter thread")?;
        Ok(())
    }

    #[test]
    fn entry_holders() {
        assert!(std::mem::size_of::<Entry>() <= 32);
        let mut e = Entry::new(1, LockMode::Shared);
        assert!(!e.conflicts(2, LockMode::Shared));
        e.grant(2, LockMode::Shared);
        e.grant(3, LockMode::Shared);
        assert_eq!(e.blockers(4, LockMode::Exclusive), vec![1, 2, 3]);
        e.release(1);
        assert_eq!(e.blockers(4, LockMode::Exclusive).len(), 2);
        e.release(3);
        e.grant(2, LockMode::Exclusive);
        assert!(e.more.is_none());
        assert_eq!(e.first, Some((2, LockMode::Exclusive)));
        e.release(2);
        assert!(e.is_free());
        let mut a = Vec::new();
        let mut b = Vec::new();
        encode_key(&mut a, 1, &[0x80]);
        encode_key(&mut b, 0x80, &[]);
        assert_ne!(a, b);
    }
}
