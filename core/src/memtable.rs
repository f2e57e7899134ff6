//! In-memory write buffer: a lock-free skiplist of internal keys
//! (user key asc, seq desc). One mutable memtable per column family plus a list
//! of immutable ones waiting for flush.

use crate::key::{IKey, Kind, MAX_SEQ};
use crossbeam_skiplist::map::Entry;
use crossbeam_skiplist::SkipMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub(crate) struct MemValue {
    pub kind: Kind,
    pub value: Arc<[u8]>,
}

pub(crate) struct Memtable {
    map: SkipMap<IKey, MemValue>,
    size: AtomicUsize,
    max_seq: AtomicU64,
    min_seq: AtomicU64,
    entries: AtomicU64,
}

impl Memtable {
    pub(crate) fn new() -> Memtable {
        Memtable {
            map: SkipMap::new(),
            size: AtomicUsize::new(0),
            max_seq: AtomicU64::new(0),
            min_seq: AtomicU64::new(u64::MAX),
            entries: AtomicU64::new(0),
        }
    }

    pub(crate) fn insert(&self, user: &[u8], seq: u64, kind: Kind, value: &[u8]) {
        self.size
            .fetch_add(user.len() + value.len() + 64, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        self.min_seq.fetch_min(seq, Ordering::Relaxed);
        self.entries.fetch_add(1, Ordering::Relaxed);
        self.map.insert(
            IKey {
                user: user.to_vec(),
                seq,
            },
            MemValue {
                kind,
                value: Arc::from(value),
            },
        );
    }

    /// `insert` taking ownership of the key buffer (commit path: no copy).
    pub(crate) fn insert_owned(&self, user: Vec<u8>, seq: u64, kind: Kind, value: &[u8]) {
        self.size
            .fetch_add(user.len() + value.len() + 64, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        self.min_seq.fetch_min(seq, Ordering::Relaxed);
        self.entries.fetch_add(1, Ordering::Relaxed);
        self.map.insert(
            IKey { user, seq },
            MemValue {
                kind,
                value: Arc::from(value),
            },
        );
    }

    pub(crate) fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }
    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Relaxed)
    }
    pub(crate) fn min_seq(&self) -> u64 {
        self.min_seq.load(Ordering::Relaxed)
    }
    /// Removes one exact entry (transaction write sets: rollback to savepoint).
    pub(crate) fn remove(&self, user: &[u8], seq: u64) {
        if let Some(e) = self.map.remove(&IKey {
            user: user.to_vec(),
            seq,
        }) {
            let sz = user.len() + e.value().value.len() + 64;
            self.size.fetch_sub(sz, Ordering::Relaxed);
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Newest version of `user` with seq <= snap.
    pub(crate) fn get(&self, user: &[u8], snap: u64) -> Option<(u64, MemValue)> {
        let probe = IKey {
            user: user.to_vec(),
            seq: snap,
        };
        let e = self.map.lower_bound(Bound::Included(&probe))?;
        if e.key().user == user {
            Some((e.key().seq, e.value().clone()))
        } else {
            None
        }
    }

    /// Sequence of the newest version of `user`, any snapshot.
    pub(crate) fn latest_seq(&self, user: &[u8]) -> Option<u64> {
        self.get(user, MAX_SEQ).map(|x| x.0)
    }

    /// All entries in internal-key order (for flush).
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(&IKey, &MemValue) -> crate::Result<()>,
    ) -> crate::Result<()> {
        for e in self.map.iter() {
            f(e.key(), e.value())?;
        }
        Ok(())
    }

    /// True if some entry's user key `k` has `lo <= k <= hi` (`hi = None`:
    /// unbounded) and is not in `skip` (range lock checks).
    pub(crate) fn any_in(&self, lo: &[u8], hi: Option<&[u8]>, skip: &[&[u8]]) -> bool {
        let from = IKey {
            user: lo.to_vec(),
            seq: MAX_SEQ,
        };
        let mut e = self.map.lower_bound(Bound::Included(&from));
        while let Some(x) = e {
            let k = x.key().user.as_slice();
            if hi.is_some_and(|h| k > h) {
                return false;
            }
            if !skip.contains(&k) {
                return true;
            }
            e = x.next();
        }
        false
    }

    /// Rough count of user keys between two user keys (the optimizer's row
    /// estimate): walks the range, seeking past a key's older versions after a
    /// few steps, so a row updated thousands of times counts once and costs
    /// one seek, not thousands of steps. Stops at `cap` keys.
    pub(crate) fn count_range(&self, start: Option<&[u8]>, end: Option<&[u8]>, cap: u64) -> u64 {
        let mut n = 0;
        let mut e = match start {
            Some(s) => self.map.lower_bound(Bound::Included(&IKey {
                user: s.to_vec(),
                seq: MAX_SEQ,
            })),
            None => self.map.front(),
        };
        while let Some(x) = e {
            let user = x.key().user.as_slice();
            if end.is_some_and(|end| user >= end) {
                break;
            }
            n += 1;
            if n >= cap {
                // extrapolate: stop walking
                break;
            }
            let mut next = x.next();
            let mut steps = 0;
            while let Some(y) = next.as_ref() {
                if y.key().user.as_slice() != user {
                    break;
                }
                if steps == 8 {
                    // (user, 0) sorts after every version of `user`.
                    next = self.map.lower_bound(Bound::Excluded(&IKey {
                        user: user.to_vec(),
                        seq: 0,
                    }));
                    break;
                }
                next = y.next();
                steps += 1;
            }
            e = next;
        }
        n
    }
}

pub(crate) struct MemIter {
    // Declared before `mem`: fields drop in order, and `cur` borrows the map
    // owned by `mem`.
    cur: Option<Entry<'static, IKey, MemValue>>,
    mem: Arc<Memtable>,
    /// Reused seek key (no allocation per seek).
    probe: IKey,
}

impl MemIter {
    pub(crate) fn new(mem: Arc<Memtable>) -> MemIter {
        MemIter {
            cur: None,
            mem,
            probe: IKey {
                user: Vec::new(),
                seq: 0,
            },
        }
    }

    /// `e`, borrowing the skiplist inside `self.mem`, as an entry to keep in
    /// `self.cur`.
    fn extend(e: Option<Entry<'_, IKey, MemValue>>) -> Option<Entry<'static, IKey, MemValue>> {
        // SAFETY: only called on entries of `self.mem.map`, and the result is
        // only stored in `self.cur`. The map is behind an `Arc` this iterator
        // holds for at least as long as `cur` (fields drop in declaration
        // order, `mem` is never replaced), so it neither moves nor drops while
        // the entry lives.
        e.map(|e| unsafe {
            std::mem::transmute::<Entry<'_, IKey, MemValue>, Entry<'static, IKey, MemValue>>(e)
        })
    }

    fn probe(&mut self, user: &[u8], seq: u64) {
        self.probe.user.clear();
        self.probe.user.extend_from_slice(user);
        self.probe.seq = seq;
    }
}

impl crate::iter::InternalIterator for MemIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn seek(&mut self, user: &[u8], seq: u64) {
        self.probe(user, seq);
        self.cur = Self::extend(self.mem.map.lower_bound(Bound::Included(&self.probe)));
    }
    fn seek_for_prev(&mut self, user: &[u8], seq: u64) {
        self.probe(user, seq);
        self.cur = Self::extend(self.mem.map.upper_bound(Bound::Included(&self.probe)));
    }
    fn seek_to_first(&mut self) {
        self.cur = Self::extend(self.mem.map.front());
    }
    fn seek_to_last(&mut self) {
        self.cur = Self::extend(self.mem.map.back());
    }
    fn next(&mut self) {
        if let Some(c) = self.cur.take() {
            self.cur = c.next();
        }
    }
    fn prev(&mut self) {
        if let Some(c) = self.cur.take() {
            self.cur = c.prev();
        }
    }
    fn user_key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.key().user.as_slice())
    }
    fn seq(&self) -> u64 {
        self.cur.as_ref().map_or(0, |c| c.key().seq)
    }
    fn kind(&self) -> Kind {
        self.cur.as_ref().map_or(Kind::Delete, |c| c.value().kind)
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| &*c.value().value)
    }
    fn status(&self) -> crate::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;

    /// Row estimates count keys, not versions; iteration sees every version.
    #[test]
    fn count_range_counts_keys_not_versions() {
        let m = Arc::new(Memtable::new());
        let mut seq = 0;
        for round in 0..500u32 {
            for k in [b"a", b"b", b"c", b"d"] {
                seq += 1;
                if k != b"b" || round == 0 {
                    m.insert(k, seq, Kind::Put, &round.to_le_bytes());
                }
            }
        }
        assert_eq!(m.count_range(None, None, 100_000), 4);
        assert_eq!(m.count_range(Some(b"b"), Some(b"d"), 100_000), 2);
        assert_eq!(m.count_range(Some(b"a"), Some(b"c"), 100_000), 2);
        assert_eq!(m.count_range(Some(b"a0"), None, 100_000), 3);
        assert_eq!(m.count_range(None, None, 2), 2);
        let mut it = MemIter::new(m.clone());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        assert_eq!(n, 1501);
        it.seek(b"c", MAX_SEQ);
        assert_eq!((it.user_key(), it.kind()), (&b"c"[..], Kind::Put));
        assert_eq!(it.value(), &499u32.to_le_bytes());
        it.prev();
        assert_eq!(it.user_key(), b"b");
        it.seek_for_prev(b"b", 0);
        assert_eq!(it.user_key(), b"b");
        it.seek_to_last();
        assert_eq!(
            (it.user_key(), it.value()),
            (&b"d"[..], &0u32.to_le_bytes()[..])
        );
    }
}
