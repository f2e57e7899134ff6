//! In-memory write buffer: a lock-free skiplist of internal keys
//! (user key asc, seq desc). One mutable memtable per column family plus a list
//! of immutable ones waiting for flush.

use crate::key::{Kind, MAX_SEQ};
use crate::memtable::skiplist::{EntryRef, Probe, RawEntry, SkipList, ValueIn};
use parking_lot::Mutex;
use std::hash::Hasher;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

pub(crate) struct Memtable {
    map: SkipList,
    size: AtomicUsize,
    max_seq: AtomicU64,
    min_seq: AtomicU64,
    entries: AtomicU64,
    /// User keys (a column family's memtable: counted when the key filter
    /// rules the key out, so a filter false positive undercounts by one;
    /// a write set counts every entry).
    keys: AtomicU64,
    /// Bloom filter over the user keys (a column family's memtable; none for
    /// a transaction's write set), allocated at the first insert.
    filter: Option<KeyFilter>,
    /// Point lookups of a large column family memtable (see `PointIndex`);
    /// built once it holds `POINT_INDEX_MIN_ENTRIES` entries.
    point_index: OnceLock<PointIndex>,
    /// Bucket count a point index gets (0: never built, a write set).
    point_index_buckets: usize,
    /// Some value came with its place in the WAL (`insert_shared` with a
    /// location): only then does a flush look for WAL segments to adopt.
    has_wal_locs: AtomicBool,
}

fn key_hash(user: &[u8]) -> u64 {
    let mut h = crate::fxhash::FxHasher::default();
    h.write(user);
    h.finish()
}

/// Entries `count_range` walks before it estimates instead.
const EXACT_COUNT_STEPS: usize = 64;

/// Entries a memtable holds before it gets a point index (below, a search of
/// the skiplist touches few nodes, and a small table costs no index memory).
const POINT_INDEX_MIN_ENTRIES: u64 = 1024;
/// Entries a memtable holds before `warm_inserts` does anything (below, a
/// search's nodes mostly stay in the CPU cache between inserts).
const WARM_MIN_ENTRIES: u64 = 16 * 1024;
/// Versions `get` steps over from a key's newest entry before it searches.
const POINT_INDEX_MAX_STEPS: usize = 8;
/// Slots allocated at a time.
const SLOT_CHUNK: usize = 1024;

/// Hash index from each user key to its newest entry in the skiplist.
/// Profile (sysbench oltp_write_only through mariadbd, 10k rows updated over
/// and over): 20% of samples were `Memtable::get`'s skiplist search, almost
/// all of it the cache miss of each node it visits (~30 per search in a
/// memtable of a few hundred thousand versions, whose nodes lie in arrival
/// order). Here a lookup is a bucket, a slot (hash compared first) and the
/// node; older versions follow the newest in the list, so a snapshot read
/// steps over the few newer ones (or searches, past `POINT_INDEX_MAX_STEPS`).
///
/// One writer (the memtable's inserts are serialized); readers lock-free: a
/// slot is filled before it is published in its bucket (release), a slot's
/// `newest` moves to a new entry after the entry is linked, and both happen
/// before the commit's `visible_seq` store, so a reader whose snapshot sees
/// an entry finds it (or a newer one, skipped by sequence). Slots are never
/// unlinked or freed before the memtable.
struct PointIndex {
    buckets: Box<[AtomicPtr<Slot>]>,
    writer: Mutex<Vec<Box<[Slot]>>>,
    used_in_last_chunk: AtomicUsize,
}

struct Slot {
    hash: u64,
    /// `RawEntry::as_ptr` of the key's newest entry.
    newest: AtomicPtr<()>,
    /// Next slot of the bucket (set before the slot is published).
    next: AtomicPtr<Slot>,
}

impl Slot {
    fn newest<'a>(&self, list: &'a SkipList) -> EntryRef<'a> {
        // SAFETY: `newest` holds an entry of the list the index belongs to,
        // which lives as long as the memtable.
        unsafe { RawEntry::from_ptr(self.newest.load(Ordering::Acquire)).get(list) }
    }
}

impl PointIndex {
    fn new(buckets: usize) -> PointIndex {
        PointIndex {
            buckets: (0..buckets)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            writer: Mutex::new(Vec::new()),
            used_in_last_chunk: AtomicUsize::new(SLOT_CHUNK),
        }
    }

    fn bucket(&self, hash: u64) -> &AtomicPtr<Slot> {
        // Bucket count is a power of two; the high bits mix better in FxHash.
        &self.buckets[(hash.rotate_left(29) as usize) & (self.buckets.len() - 1)]
    }

    /// The slot of `user` and its newest entry, if it has one.
    fn find<'a>(
        &'a self,
        list: &'a SkipList,
        user: &[u8],
        hash: u64,
    ) -> Option<(&'a Slot, EntryRef<'a>)> {
        let mut s = self.bucket(hash).load(Ordering::Acquire);
        // SAFETY: published slots live as long as the index and are immutable
        // but for their atomics.
        while let Some(slot) = unsafe { s.as_ref() } {
            if slot.hash == hash {
                let e = slot.newest(list);
                if e.user() == user {
                    return Some((slot, e));
                }
            }
            s = slot.next.load(Ordering::Acquire);
        }
        None
    }

    /// Adds a slot for a key that has none, whose newest entry is `e`.
    /// Called by the memtable's only writer.
    fn add(&self, hash: u64, e: EntryRef<'_>) {
        let mut chunks = self.writer.lock();
        let mut used = self.used_in_last_chunk.load(Ordering::Relaxed);
        if used == SLOT_CHUNK {
            chunks.push(
                (0..SLOT_CHUNK)
                    .map(|_| Slot {
                        hash: 0,
                        newest: AtomicPtr::new(ptr::null_mut()),
                        next: AtomicPtr::new(ptr::null_mut()),
                    })
                    .collect(),
            );
            used = 0;
        }
        let Some(chunk) = chunks.last_mut() else {
            return;
        };
        let slot: *mut Slot = &mut chunk[used];
        self.used_in_last_chunk.store(used + 1, Ordering::Relaxed);
        let bucket = self.bucket(hash);
        // SAFETY: the slot is not published yet: only this writer sees it.
        unsafe {
            (*slot).hash = hash;
            (*slot)
                .newest
                .store(RawEntry::of(e).as_ptr(), Ordering::Relaxed);
            (*slot)
                .next
                .store(bucket.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        bucket.store(slot, Ordering::Release);
    }
}

/// Blocked bloom filter over user keys: all probes of a key fall in one
/// 64-bit word (one cache miss per lookup). A key's bits are set before its
/// entry enters the skiplist, and bits are never cleared, so "absent" is
/// exact for every entry whose insert happened before the lookup: the commit
/// leader's conflict check (inserts and checks are both under the write lock)
/// and snapshot reads (inserts precede the `visible_seq` release store).
/// Profile (iibench through mariadbd): `newer_than`'s skiplist search for
/// keys that are not in the memtable was ~22% of samples; this answers those
/// with one hash and one word.
///
/// Sized to the keys it holds (a memtable of a few keys costs a few hundred
/// bytes, not a filter for a full write buffer): tier `i` has `64 * 4^i`
/// words; when the keys exceed 1 per 16 bits of the active tier, the next tier
/// is filled from the skiplist and then published through `active`. The
/// inserts into one memtable are serialized (the commit leader under the
/// write lock, or recovery), so no key is added while a tier is filled.
/// Older tiers stay (readers may be using them): at most 1/3 more memory.
struct KeyFilter {
    tiers: [OnceLock<Box<[AtomicU64]>>; FILTER_TIERS],
    /// Index of the tier in use (0 before the first key: tier 0 is empty).
    active: AtomicUsize,
    /// Keys added (the writer's count, to decide when to grow).
    keys: AtomicUsize,
    /// Last tier this filter may grow to (bounded by the write buffer size).
    top: usize,
}

/// Probes per key (bits set in the key's word).
const FILTER_PROBES: u32 = 4;
const FILTER_TIERS: usize = 8;

fn tier_words(i: usize) -> usize {
    64 << (2 * i)
}

impl KeyFilter {
    /// Grows up to about 16 bits per key of a memtable of `write_buffer_size`
    /// bytes (every entry counts at least 64 bytes: at most `size / 64` keys).
    fn new(write_buffer_size: usize) -> KeyFilter {
        let want_words = write_buffer_size / 256;
        let top = (0..FILTER_TIERS)
            .find(|&i| tier_words(i) >= want_words)
            .unwrap_or(FILTER_TIERS - 1);
        KeyFilter {
            tiers: Default::default(),
            active: AtomicUsize::new(0),
            keys: AtomicUsize::new(0),
            top,
        }
    }

    #[inline]
    fn probe(user: &[u8], nwords: usize) -> (usize, u64) {
        let mut h = crate::fxhash::FxHasher::default();
        h.write(user);
        let h = h.finish();
        let word = ((h >> 32) as usize) % nwords;
        let mut mask = 0u64;
        for i in 0..FILTER_PROBES {
            mask |= 1u64 << ((h >> (6 * i)) & 63);
        }
        (word, mask)
    }

    fn set(words: &[AtomicU64], user: &[u8]) {
        let (w, mask) = Self::probe(user, words.len());
        words[w].fetch_or(mask, Ordering::Release);
    }

    /// Adds `user` (called by the memtable's only writer, before the entry is
    /// inserted into `map`, which holds every key added before).
    fn add(&self, user: &[u8], map: &SkipList) {
        let keys = self.keys.fetch_add(1, Ordering::Relaxed) + 1;
        let cur = self.active.load(Ordering::Relaxed);
        let full = |i: usize| keys * 16 > tier_words(i) * 64;
        if self.tiers[cur].get().is_none() || (cur < self.top && full(cur)) {
            let mut next = if self.tiers[cur].get().is_none() {
                cur
            } else {
                cur + 1
            };
            while next < self.top && full(next) {
                next += 1;
            }
            let words: Box<[AtomicU64]> =
                (0..tier_words(next)).map(|_| AtomicU64::new(0)).collect();
            for e in map.iter() {
                Self::set(&words, e.user());
            }
            Self::set(&words, user);
            if self.tiers[next].set(words).is_ok() {
                self.active.store(next, Ordering::Release);
                return;
            }
        }
        if let Some(words) = self.tiers[self.active.load(Ordering::Relaxed)].get() {
            Self::set(words, user);
        }
    }

    /// Loads the word `user` maps to into the CPU cache (a hint, see
    /// `Memtable::warm_inserts`).
    fn prefetch(&self, user: &[u8]) {
        if let Some(words) = self.tiers[self.active.load(Ordering::Acquire)].get() {
            let (w, _) = Self::probe(user, words.len());
            if let Some(word) = words.get(w) {
                crate::memtable::skiplist::prefetch(word as *const AtomicU64);
            }
        }
    }

    /// False only if `user` was never added.
    fn may_contain(&self, user: &[u8]) -> bool {
        let Some(words) = self.tiers[self.active.load(Ordering::Acquire)].get() else {
            return false;
        };
        let (w, mask) = Self::probe(user, words.len());
        words[w].load(Ordering::Acquire) & mask == mask
    }
}

impl Memtable {
    /// A transaction's write set (no key filter).
    pub(crate) fn new() -> Memtable {
        Memtable {
            map: SkipList::new(),
            size: AtomicUsize::new(0),
            max_seq: AtomicU64::new(0),
            min_seq: AtomicU64::new(u64::MAX),
            entries: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            filter: None,
            point_index: OnceLock::new(),
            point_index_buckets: 0,
            has_wal_locs: AtomicBool::new(false),
        }
    }

    /// A column family's memtable, with a key filter sized for
    /// `write_buffer_size` (and, once large, a point index: one bucket per
    /// 256 bytes of write buffer).
    pub(crate) fn with_filter(write_buffer_size: usize) -> Memtable {
        Memtable {
            filter: Some(KeyFilter::new(write_buffer_size)),
            point_index_buckets: (write_buffer_size / 256)
                .clamp(1024, 1 << 20)
                .next_power_of_two(),
            ..Memtable::new()
        }
    }

    pub(crate) fn insert(&self, user: &[u8], seq: u64, kind: Kind, value: &[u8]) {
        self.insert_value(user, seq, kind, ValueIn::Borrowed(value));
    }

    /// Before inserting a run of keys (a commit group's keys of this column
    /// family, each with its sequence): loads the skiplist nodes their
    /// inserts will visit, several searches at once (`SkipList::warm_paths`).
    /// Only in a list large enough for its nodes to miss the CPU cache; the
    /// inserts' results do not depend on it.
    pub(crate) fn warm_inserts<'a>(&self, keys: impl Iterator<Item = (&'a [u8], u64)>) {
        if self.entries.load(Ordering::Relaxed) < WARM_MIN_ENTRIES {
            return;
        }
        let probes: Vec<crate::memtable::skiplist::Probe<'_>> = keys
            .map(|(k, seq)| {
                // The key filter's word too (each insert consults it).
                if let Some(f) = &self.filter {
                    f.prefetch(k);
                }
                crate::memtable::skiplist::Probe::new(k, seq)
            })
            .collect();
        self.map.warm_paths(&probes);
    }

    /// `insert` of a value already in a shared buffer: a long one is kept
    /// without a copy (a write set's value moving to the memtable at commit),
    /// with its crc32 if known (kept for the flush, see `ValueIn`) and its
    /// place in the WAL if the commit gives it (a flush may then point there).
    pub(crate) fn insert_shared(
        &self,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value: Arc<[u8]>,
        crc: Option<u32>,
        loc: Option<crate::journal::wal::WalLoc>,
    ) {
        let v = match (crc, loc) {
            (Some(c), Some(l)) => {
                self.has_wal_locs.store(true, Ordering::Relaxed);
                ValueIn::Logged(value, c, l)
            }
            _ => ValueIn::Shared(value, crc),
        };
        self.insert_value(user, seq, kind, v);
    }

    fn insert_value(&self, user: &[u8], seq: u64, kind: Kind, value: ValueIn<'_>) {
        let value_len = value.bytes().len();
        // A key the filter rules out is new to this memtable (no false
        // negatives): the point index has nothing to do for it.
        let mut new_key = false;
        if let Some(f) = &self.filter {
            new_key = !f.may_contain(user);
            f.add(user, &self.map);
        }
        if new_key || self.filter.is_none() {
            self.keys.fetch_add(1, Ordering::Relaxed);
        }
        self.size
            .fetch_add(user.len() + value_len + 64, Ordering::Relaxed);
        let max_seq_before = self.max_seq.fetch_max(seq, Ordering::Relaxed);
        self.min_seq.fetch_min(seq, Ordering::Relaxed);
        let entries = self.entries.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(ix) = self.point_index.get() else {
            self.map.insert(user, seq, kind, value);
            if self.point_index_buckets > 0 && entries >= POINT_INDEX_MIN_ENTRIES {
                self.build_point_index();
            }
            return;
        };
        if new_key {
            self.map.insert(user, seq, kind, value);
            return;
        }
        let hash = key_hash(user);
        match ix.find(&self.map, user, hash) {
            // A new version of a key (the usual case): it goes right before
            // the newest one, found without a search. Same sequence: the new
            // entry shadows the old one and sorts before it too.
            Some((slot, newest)) if newest.seq() <= seq => {
                let e = self.map.insert_before(newest, user, seq, kind, value);
                slot.newest
                    .store(RawEntry::of(e).as_ptr(), Ordering::Release);
            }
            // An older version than the newest (not on the commit path).
            Some(_) => {
                self.map.insert(user, seq, kind, value);
            }
            // A key's second version (its first went in without a slot), or
            // a key from before the index: indexed from now on if this entry
            // is its newest, which it is if no entry has a higher sequence.
            None => {
                let e = self.map.insert(user, seq, kind, value);
                if seq >= max_seq_before {
                    ix.add(hash, e);
                }
            }
        }
    }

    /// Indexes every key's newest entry (its first in list order), then
    /// publishes the index. The only writer runs it, so no entry comes in
    /// meanwhile.
    fn build_point_index(&self) {
        let ix = PointIndex::new(self.point_index_buckets);
        let mut prev: Option<&[u8]> = None;
        for e in self.map.iter() {
            if prev != Some(e.user()) {
                ix.add(key_hash(e.user()), e);
                prev = Some(e.user());
            }
        }
        let _ = self.point_index.set(ix);
    }

    /// True if some value carries its WAL location (see `has_wal_locs`).
    pub(crate) fn has_wal_locs(&self) -> bool {
        self.has_wal_locs.load(Ordering::Relaxed)
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
    /// Removes one exact entry (transaction write sets: rollback to savepoint;
    /// they never get a point index, which does not follow removals).
    pub(crate) fn remove(&self, user: &[u8], seq: u64) {
        if let Some(value_len) = self.map.remove(user, seq) {
            let sz = user.len() + value_len + 64;
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
    pub(crate) fn get(&self, user: &[u8], snap: u64) -> Option<EntryRef<'_>> {
        if self.filter.as_ref().is_some_and(|f| !f.may_contain(user)) {
            return None;
        }
        // Keys with one version (or none) in the memtable have no slot: search.
        if let Some((_, mut e)) = self
            .point_index
            .get()
            .and_then(|ix| ix.find(&self.map, user, key_hash(user)))
        {
            for _ in 0..POINT_INDEX_MAX_STEPS {
                if e.seq() <= snap {
                    return Some(e);
                }
                e = self.map.next(e)?;
                if e.user() != user {
                    return None;
                }
            }
        }
        let e = self.map.seek(&Probe::new(user, snap))?;
        (e.user() == user).then_some(e)
    }

    /// Sequence of the newest version of `user`, any snapshot.
    pub(crate) fn latest_seq(&self, user: &[u8]) -> Option<u64> {
        self.get(user, MAX_SEQ).map(|e| e.seq())
    }

    /// All entries in internal-key order (for flush).
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(EntryRef<'_>) -> crate::Result<()>,
    ) -> crate::Result<()> {
        for e in self.map.iter() {
            f(e)?;
        }
        Ok(())
    }

    /// True if some entry's user key `k` has `lo <= k <= hi` (`hi = None`:
    /// unbounded) and is not in `skip` (range lock checks).
    pub(crate) fn any_in(&self, lo: &[u8], hi: Option<&[u8]>, skip: &[&[u8]]) -> bool {
        let mut e = self.map.seek(&Probe::new(lo, MAX_SEQ));
        while let Some(x) = e {
            let k = x.user();
            if hi.is_some_and(|h| k > h) {
                return false;
            }
            if !skip.contains(&k) {
                return true;
            }
            e = self.map.next(x);
        }
        false
    }

    /// See [`SkipList::spread_keys`].
    pub(crate) fn spread_keys(&self, want: usize) -> (Vec<&[u8]>, u64) {
        self.map.spread_keys(want)
    }

    /// Rough count of user keys between two user keys (the optimizer's row
    /// estimate), at most `cap`. A range of up to `EXACT_COUNT_STEPS` entries
    /// is walked and its keys counted; a longer one is estimated from the
    /// skiplist's towers (`SkipList::estimate_range`) and scaled by this
    /// memtable's keys per entry, so a row updated thousands of times counts about once and a
    /// wide range costs a few dozen node visits, not a walk. (The walk, with a search
    /// past each key's versions, was 11 % of sysbench `oltp_read_write`'s
    /// samples: every range query asks for an estimate first.)
    pub(crate) fn count_range(&self, start: Option<&[u8]>, end: Option<&[u8]>, cap: u64) -> u64 {
        let mut n = 0;
        let mut e = match start {
            Some(s) => self.map.seek(&Probe::new(s, MAX_SEQ)),
            None => self.map.first(),
        };
        let mut last: Option<&[u8]> = None;
        for _ in 0..EXACT_COUNT_STEPS {
            let Some(x) = e else {
                return n;
            };
            let user = x.user();
            if end.is_some_and(|end| user >= end) {
                return n;
            }
            if last != Some(user) {
                n += 1;
                if n >= cap {
                    return n;
                }
                last = Some(user);
            }
            e = self.map.next(x);
        }
        if e.is_none() {
            return n;
        }
        let lo = Probe::new(start.unwrap_or(&[]), MAX_SEQ);
        let hi = end.map(|e| Probe::new(e, MAX_SEQ));
        let entries_in_range = self.map.estimate_range(&lo, hi.as_ref());
        let (keys, entries) = (self.keys.load(Ordering::Relaxed), self.entries().max(1));
        let estimate =
            (entries_in_range as u128 * keys.min(entries) as u128 / entries as u128) as u64;
        estimate.max(n).min(cap)
    }
}

/// Iterator over one memtable (`crate::iter::InternalIterator`).
pub(crate) struct MemIter {
    /// Current entry, a node of `mem`'s list (kept alive by the `Arc`).
    cur: Option<RawEntry>,
    mem: Arc<Memtable>,
}

impl MemIter {
    pub(crate) fn new(mem: Arc<Memtable>) -> MemIter {
        MemIter { cur: None, mem }
    }

    fn entry(&self) -> Option<EntryRef<'_>> {
        // SAFETY: `cur` only ever holds entries of `self.mem.map`, which the
        // `Arc` keeps alive for as long as `self`.
        self.cur.map(|c| unsafe { c.get(&self.mem.map) })
    }
}

impl crate::iter::InternalIterator for MemIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn seek(&mut self, user: &[u8], seq: u64) {
        self.cur = self.mem.map.seek(&Probe::new(user, seq)).map(RawEntry::of);
    }
    fn seek_for_prev(&mut self, user: &[u8], seq: u64) {
        self.cur = self
            .mem
            .map
            .seek_before(&Probe::new(user, seq), true)
            .map(RawEntry::of);
    }
    fn seek_to_first(&mut self) {
        self.cur = self.mem.map.first().map(RawEntry::of);
    }
    fn seek_to_last(&mut self) {
        self.cur = self.mem.map.last().map(RawEntry::of);
    }
    fn next(&mut self) {
        self.cur = self
            .entry()
            .and_then(|e| self.mem.map.next(e))
            .map(RawEntry::of);
    }
    fn prev(&mut self) {
        self.cur = self
            .entry()
            .and_then(|e| self.mem.map.prev(e))
            .map(RawEntry::of);
    }
    fn user_key(&self) -> &[u8] {
        self.entry().map_or(&[], |e| e.user())
    }
    fn seq(&self) -> u64 {
        self.entry().map_or(0, |e| e.seq())
    }
    fn kind(&self) -> Kind {
        self.entry().map_or(Kind::Delete, |e| e.kind())
    }
    fn value(&self) -> &[u8] {
        self.entry().map_or(&[], |e| e.value())
    }
    fn status(&self) -> crate::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;

    /// A memtable past the point-index threshold answers every `get` as a
    /// plain skiplist search does: keys with many versions (more than the
    /// index steps over), snapshots between versions, versions inserted out of
    /// order and shadowed ones (same sequence), absent keys; before and after
    /// the index is built.
    #[test]
    fn point_index_matches_search() {
        let m = Memtable::with_filter(1 << 20);
        let plain = Memtable::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let check = |m: &Memtable, plain: &Memtable, max_seq: u64| {
            for k in 0..320u64 {
                let key = format!("key{k:05}");
                for snap in [
                    0,
                    1,
                    max_seq / 3,
                    max_seq / 2,
                    max_seq - 1,
                    max_seq,
                    MAX_SEQ,
                ] {
                    let a = m
                        .get(key.as_bytes(), snap)
                        .map(|e| (e.seq(), e.value().to_vec()));
                    let b = plain
                        .get(key.as_bytes(), snap)
                        .map(|e| (e.seq(), e.value().to_vec()));
                    assert_eq!(a, b, "{key} at {snap}");
                }
                assert_eq!(
                    m.latest_seq(key.as_bytes()),
                    plain.latest_seq(key.as_bytes())
                );
                // The list itself (inserts through `insert_before` link the
                // upper levels too): searches from the top agree.
                for snap in [1, max_seq / 2, MAX_SEQ] {
                    let p = Probe::new(key.as_bytes(), snap);
                    assert_eq!(
                        m.map.seek(&p).map(|e| (e.user().to_vec(), e.seq())),
                        plain.map.seek(&p).map(|e| (e.user().to_vec(), e.seq())),
                    );
                }
            }
            let all = |m: &Memtable| {
                m.map
                    .iter()
                    .map(|e| (e.user().to_vec(), e.seq(), e.value().to_vec()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(all(m), all(plain));
        };
        let mut seq = 0u64;
        for round in 0..6000u64 {
            // Keys 0..300; a few hot ones get most versions.
            let k = if next() % 4 == 0 {
                next() % 5
            } else {
                next() % 300
            };
            let key = format!("key{k:05}");
            // Mostly increasing sequences; now and then an older one (a
            // version below the newest) or the same one again (shadowing).
            let s = match next() % 20 {
                0 => seq / 2 + 1,
                1 => seq.max(1),
                _ => {
                    seq += 1;
                    seq
                }
            };
            let v = format!("v{round}");
            m.insert(key.as_bytes(), s, Kind::Put, v.as_bytes());
            plain.insert(key.as_bytes(), s, Kind::Put, v.as_bytes());
            if round == 500 {
                assert!(m.point_index.get().is_none());
                check(&m, &plain, seq);
            }
        }
        assert!(m.point_index.get().is_some());
        check(&m, &plain, seq);
    }

    /// The key filter never hides a key that was inserted (past the size it
    /// may grow to, and while it grows), answers like an unfiltered memtable,
    /// stays small for a few keys, and does rule out most absent keys.
    #[test]
    fn key_filter_no_false_negatives() {
        // 4 KiB write buffer: the smallest filter (64 words), overfilled 10x.
        let m = Memtable::with_filter(4096);
        let plain = Memtable::new();
        assert!(m.get(b"k0", MAX_SEQ).is_none());
        for i in 0..10_000u64 {
            m.insert(format!("k{i}").as_bytes(), i + 1, Kind::Put, b"v");
        }
        for i in 0..10_000u64 {
            plain.insert(format!("k{i}").as_bytes(), i + 1, Kind::Put, b"v");
        }
        for i in 0..20_000u64 {
            let k = format!("k{i}");
            let got = m.get(k.as_bytes(), MAX_SEQ).map(|x| x.seq());
            assert_eq!(
                got,
                plain.get(k.as_bytes(), MAX_SEQ).map(|x| x.seq()),
                "{k}"
            );
            assert_eq!(got.is_some(), i < 10_000, "{k}");
        }
        // Properly sized (64 MiB buffer, 10,000 keys): absent keys are ruled out
        // by the filter itself (not by the skiplist) nearly always.
        let big = Memtable::with_filter(64 << 20);
        let f = big
            .filter
            .as_ref()
            .expect("a column family memtable has a filter");
        big.insert(b"k0", 1, Kind::Put, b"v");
        assert_eq!(f.active.load(Ordering::Relaxed), 0, "one key: 64 words");
        for i in 1..10_000u64 {
            big.insert(format!("k{i}").as_bytes(), i + 1, Kind::Put, b"v");
            if i % 997 == 0 {
                // Every key so far is found after each growth step.
                assert!((0..=i).all(|j| big.get(format!("k{j}").as_bytes(), MAX_SEQ).is_some()));
            }
        }
        assert!(
            f.active.load(Ordering::Relaxed) >= 3,
            "grew to >= 16 bits per key"
        );
        let fp = (10_000..110_000u64)
            .filter(|i| f.may_contain(format!("k{i}").as_bytes()))
            .count();
        assert!(fp < 1_000, "{fp} false positives in 100,000");
        assert!((0..10_000u64).all(|i| f.may_contain(format!("k{i}").as_bytes())));
    }

    /// Row estimates count keys, not versions; iteration sees every version.
    /// A short range is counted exactly; a long one (past the walk's budget)
    /// is estimated from the towers and still counts keys, not versions.
    #[test]
    fn count_range_counts_keys_not_versions() {
        let m = Arc::new(Memtable::with_filter(64 << 20));
        let mut seq = 0;
        for round in 0..15u32 {
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

        // 2,000 keys x 20 versions, interleaved as updates arrive.
        let big = Memtable::with_filter(64 << 20);
        let key = |i: u32| format!("k{i:06}");
        let mut seq = 0;
        for _ in 0..20 {
            for i in 0..2000 {
                seq += 1;
                big.insert(key(i).as_bytes(), seq, Kind::Put, b"v");
            }
        }
        let all = big.count_range(None, None, 100_000);
        assert!((1500..=2600).contains(&all), "{all}");
        let hundred = big.count_range(
            Some(key(500).as_bytes()),
            Some(key(600).as_bytes()),
            100_000,
        );
        assert!((50..=200).contains(&hundred), "{hundred}");
        let few = big.count_range(
            Some(key(500).as_bytes()),
            Some(key(503).as_bytes()),
            100_000,
        );
        assert_eq!(few, 3);
        assert_eq!(big.count_range(Some(b"z"), None, 100_000), 0);
        let mut it = MemIter::new(m.clone());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        assert_eq!(n, 46);
        it.seek(b"c", MAX_SEQ);
        assert_eq!((it.user_key(), it.kind()), (&b"c"[..], Kind::Put));
        assert_eq!(it.value(), &14u32.to_le_bytes());
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
