//! The memtable's ordered map: a skiplist with one writer at a time and any
//! number of lock-free readers, its nodes carved out of an arena (RocksDB's
//! `InlineSkipList` is the model).
//!
//! Why not `crossbeam_skiplist`: it allocates every node (and the key and the
//! value) with `malloc`, keeps reference counts that readers bump, and always
//! searches from the top. In an iibench profile through mariadbd, the commit
//! leader's memtable inserts were about half of all samples: the search
//! (pointer chasing, 22%), `malloc` / page faults of the nodes (about 20%).
//! Here:
//! - a node is one arena allocation: header, tower of next pointers, user key
//!   and (up to `INLINE_VALUE_MAX` bytes) the value, so a search step loads one
//!   cache line, and nothing is freed before the whole list is dropped (readers
//!   never count references);
//! - arena chunks of `POOL_CHUNK_BYTES` go back to a process-wide pool when a
//!   memtable is dropped, so the next memtable reuses warm pages instead of
//!   faulting in fresh ones;
//! - the writer keeps a *splice* (the predecessors and successors of its
//!   last insert at every level): a key that lands near the previous one (a
//!   commit group's keys arrive in key order per column family, a sequential
//!   primary key always does) is placed by a short walk from there instead of
//!   a search from the top.
//!
//! Concurrency: inserts and removals are serialized by the writer mutex (the
//! memtable's callers serialize them already: the commit leader under the
//! write lock, recovery, a transaction's own write set under its lock). A new
//! node is filled in completely, then linked bottom-up with release stores;
//! readers follow links with acquire loads, so they see a node either not at
//! all or complete. A removed node (a transaction's write set rolled back to
//! a savepoint) is unlinked but its memory stays until the list is dropped,
//! so a reader standing on it can still step forward.
//!
//! Order: user key ascending, then sequence descending (the internal-key
//! order of `crate::key`). Each node also holds `head`, the user key's first
//! 8 bytes big-endian, which settles most comparisons without reading the key.

use crate::key::{compare_parts, Kind};
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Tallest tower. With a branching factor of 4, 12 levels keep searches
/// logarithmic up to 4^12 = 16M entries (a memtable holds far fewer).
const MAX_HEIGHT: usize = 12;

/// Values up to this many bytes live in the node; longer ones are kept as a
/// shared buffer (`Arc<[u8]>`, held by the list) so a 1 MiB value does not
/// waste a chunk, is not copied when it comes in shared (a write set's value
/// moving to the column family's memtable) and can be handed out without a
/// copy (`EntryRef::shared_value`).
const INLINE_VALUE_MAX: usize = 2048;

/// Chunk size the arena grows to (it starts at `FIRST_CHUNK_BYTES` and
/// doubles, so a write set or a memtable of a few keys stays small).
const POOL_CHUNK_BYTES: usize = 1 << 20;
const FIRST_CHUNK_BYTES: usize = 4096;
/// Chunks of `POOL_CHUNK_BYTES` kept for reuse (64 MiB at most).
const POOL_MAX_CHUNKS: usize = 64;

static CHUNK_POOL: Mutex<Vec<Box<[u64]>>> = Mutex::new(Vec::new());

/// Searches `SkipList::warm_paths` interleaves.
const WARM_PARALLEL: usize = 16;

/// Asks the CPU to load the cache line at `p` (a node's key head, a filter
/// word) without waiting.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address (null included).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[inline]
pub(crate) fn head_of(user: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = user.len().min(8);
    w[..n].copy_from_slice(&user[..n]);
    u64::from_be_bytes(w)
}

/// A node's fixed part. In memory it is followed by `height` next pointers
/// (`AtomicPtr<Node>`), then `key_len` bytes of user key, then the value if it
/// is inline. All of it is written before the node is linked and never after
/// (except the next pointers, which are atomics).
#[repr(C)]
struct Node {
    /// `head_of(user key)`: if two heads differ, their order is the order of
    /// the user keys (the zero pad never sorts a shorter key after a longer
    /// one it is a prefix of); if equal, the user keys decide.
    head: u64,
    seq: u64,
    /// The node before this one at level 0 (the head for the first), kept by
    /// the writer for `insert_before`; null until linked. Readers do not use it.
    prev0: AtomicPtr<Node>,
    value: *const u8,
    value_len: usize,
    key_len: u32,
    kind: u8,
    height: u8,
    /// `value` is the data of an `Arc<[u8]>` in `Arena::large`: `SHARED`,
    /// `SHARED_CRC` if the value's crc32 follows the key (4 bytes, unaligned),
    /// `SHARED_CRC_LOC` if the crc is followed by the value's place in the
    /// WAL (`wal::WalLoc`: segment u64 LE, offset u64 LE, unaligned).
    /// 0: inline (or empty).
    shared: u8,
}

const SHARED: u8 = 1;
const SHARED_CRC: u8 = 2;
const SHARED_CRC_LOC: u8 = 3;
/// Bytes after the key of a node whose value is not inline: room for the
/// crc and the WAL location (used only if known).
const LONG_VALUE_TAIL: usize = 4 + 16;

const NODE_BYTES: usize = std::mem::size_of::<Node>();

impl Node {
    /// # Safety
    /// `level < self.height`, and `self` was laid out by `SkipList::new_node`.
    #[inline]
    unsafe fn next_slot(&self, level: usize) -> &AtomicPtr<Node> {
        // SAFETY: the tower follows the header and has `height` slots.
        unsafe {
            let tower =
                (self as *const Node as *const u8).add(NODE_BYTES) as *const AtomicPtr<Node>;
            &*tower.add(level)
        }
    }

    #[inline]
    fn next(&self, level: usize) -> *mut Node {
        debug_assert!(level < self.height as usize);
        // SAFETY: every caller passes a level below the node's height.
        unsafe { self.next_slot(level).load(Ordering::Acquire) }
    }

    #[inline]
    fn user(&self) -> &[u8] {
        // SAFETY: the key bytes follow the tower (see `SkipList::new_node`)
        // and stay until the arena is dropped, which outlives `&self`.
        unsafe {
            let p = (self as *const Node as *const u8)
                .add(NODE_BYTES + self.height as usize * std::mem::size_of::<AtomicPtr<Node>>());
            std::slice::from_raw_parts(p, self.key_len as usize)
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        if self.value_len == 0 {
            return &[];
        }
        // SAFETY: `value` points into the arena or into a buffer in
        // `Writer::large`, both kept until the list is dropped.
        unsafe { std::slice::from_raw_parts(self.value, self.value_len) }
    }

    /// crc32 of the value, if it was stored with the node (see `ValueIn`).
    #[inline]
    fn value_crc(&self) -> Option<u32> {
        if self.shared != SHARED_CRC && self.shared != SHARED_CRC_LOC {
            return None;
        }
        // SAFETY: a `SHARED_CRC` node has 4 bytes of crc right after its key
        // (laid out by `SkipList::new_node`), in the arena like the key.
        unsafe {
            let p = self.user().as_ptr().add(self.key_len as usize) as *const [u8; 4];
            Some(u32::from_le_bytes(p.read_unaligned()))
        }
    }

    /// Where the value is in the WAL, if it was stored with the node.
    #[inline]
    fn wal_loc(&self) -> Option<crate::journal::wal::WalLoc> {
        if self.shared != SHARED_CRC_LOC {
            return None;
        }
        // SAFETY: a `SHARED_CRC_LOC` node has 4 bytes of crc and 16 of
        // location right after its key (laid out by `SkipList::new_node`).
        unsafe {
            let p = self.user().as_ptr().add(self.key_len as usize + 4) as *const [u8; 8];
            Some(crate::journal::wal::WalLoc {
                segment: u64::from_le_bytes(p.read_unaligned()),
                offset: u64::from_le_bytes(p.add(1).read_unaligned()),
            })
        }
    }

    /// The value as the shared buffer it is kept in (values longer than
    /// `INLINE_VALUE_MAX`), without copying it.
    fn shared_value(&self) -> Option<std::sync::Arc<[u8]>> {
        if self.shared == 0 {
            return None;
        }
        let fat = ptr::slice_from_raw_parts(self.value, self.value_len);
        // SAFETY: `value`/`value_len` are the data of an `Arc<[u8]>` that
        // `Arena::large` holds until the list is dropped (which outlives
        // `&self`); taking one more count and wrapping it hands out a clone.
        unsafe {
            std::sync::Arc::increment_strong_count(fat);
            Some(std::sync::Arc::from_raw(fat))
        }
    }

    #[inline]
    fn kind(&self) -> Kind {
        Kind::from_u8(self.kind).unwrap_or(Kind::Delete)
    }

    /// Order of this node against the key (`head`, `user`, `seq`).
    #[inline]
    fn cmp_key(&self, head: u64, user: &[u8], seq: u64) -> CmpOrdering {
        match self.head.cmp(&head) {
            CmpOrdering::Equal => compare_parts(self.user(), self.seq, user, seq),
            o => o,
        }
    }
}

/// A search key with its head computed once.
#[derive(Clone, Copy)]
pub(crate) struct Probe<'a> {
    head: u64,
    user: &'a [u8],
    seq: u64,
}

impl<'a> Probe<'a> {
    #[inline]
    pub(crate) fn new(user: &'a [u8], seq: u64) -> Probe<'a> {
        Probe {
            head: head_of(user),
            user,
            seq,
        }
    }
}

/// A reference to one entry of the list, valid while the list lives.
#[derive(Clone, Copy)]
pub(crate) struct EntryRef<'a> {
    node: &'a Node,
}

impl<'a> EntryRef<'a> {
    pub(crate) fn user(&self) -> &'a [u8] {
        self.node.user()
    }
    pub(crate) fn seq(&self) -> u64 {
        self.node.seq
    }
    pub(crate) fn kind(&self) -> Kind {
        self.node.kind()
    }
    pub(crate) fn value(&self) -> &'a [u8] {
        self.node.value()
    }
    /// The value without a copy if it is kept as a shared buffer (longer
    /// than `INLINE_VALUE_MAX`); `None` for short values (copy `value()`).
    pub(crate) fn shared_value(&self) -> Option<std::sync::Arc<[u8]>> {
        self.node.shared_value()
    }
    /// crc32 of the value when it was computed before the insert (a long
    /// value written by a transaction, see `ValueIn`), else `None`.
    pub(crate) fn value_crc(&self) -> Option<u32> {
        self.node.value_crc()
    }
    /// Where the value is in the WAL, if the commit that wrote it said so
    /// (`ValueIn::Logged`).
    pub(crate) fn wal_loc(&self) -> Option<crate::journal::wal::WalLoc> {
        self.node.wal_loc()
    }
    /// The value as `SharedBytes`: the shared buffer of a long value (no
    /// copy), a copy of a short one.
    pub(crate) fn value_bytes(&self) -> crate::bytes::SharedBytes {
        match self.shared_value() {
            Some(a) => crate::bytes::SharedBytes::from_arc(a),
            None => crate::bytes::SharedBytes::from_vec(self.value().to_vec()),
        }
    }
}

/// A value to insert: borrowed (copied into the list) or already shared
/// (kept as is if long, copied into the node if short), with its crc32 if
/// known.
///
/// Checksum once: a borrowed value of at least `wal::OUT_OF_LINE` bytes is
/// checksummed while it is copied into its shared buffer (a transaction's
/// `put` into its write set), and the crc is kept in the node; it travels with
/// the value (`EntryRef::value_crc` -> `batch::Op::crc` -> the column family's
/// memtable) so the WAL record and the value-log record that hold the value
/// combine it into their checksums instead of reading 1 MiB again each.
///
/// `Logged`: a shared value with its crc and where the commit wrote it in the
/// WAL (kept in the node, read back by the flush: `EntryRef::wal_loc`).
pub(crate) enum ValueIn<'a> {
    Borrowed(&'a [u8]),
    Shared(std::sync::Arc<[u8]>, Option<u32>),
    Logged(std::sync::Arc<[u8]>, u32, crate::journal::wal::WalLoc),
}

impl ValueIn<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            ValueIn::Borrowed(b) => b,
            ValueIn::Shared(a, _) | ValueIn::Logged(a, _, _) => a,
        }
    }
}

/// Bump allocator of 8-byte-aligned blocks. Only the writer allocates.
struct Arena {
    chunks: Vec<Box<[u64]>>,
    /// Free space of the last chunk: `[cur, cur + left)`.
    cur: *mut u8,
    left: usize,
    next_chunk: usize,
    /// Values longer than `INLINE_VALUE_MAX`.
    large: Vec<std::sync::Arc<[u8]>>,
}

impl Arena {
    fn new() -> Arena {
        Arena {
            chunks: Vec::new(),
            cur: ptr::null_mut(),
            left: 0,
            next_chunk: FIRST_CHUNK_BYTES,
            large: Vec::new(),
        }
    }

    /// `bytes` (a multiple of 8) of uninitialized, 8-aligned memory that stays
    /// put until the arena is dropped.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        debug_assert_eq!(bytes % 8, 0);
        if bytes > self.left {
            let size = self.next_chunk.max(bytes);
            let mut chunk = if size == POOL_CHUNK_BYTES {
                CHUNK_POOL.lock().pop()
            } else {
                None
            }
            .unwrap_or_else(|| vec![0u64; size / 8].into_boxed_slice());
            self.cur = chunk.as_mut_ptr() as *mut u8;
            self.left = size;
            self.chunks.push(chunk);
            if self.next_chunk < POOL_CHUNK_BYTES {
                self.next_chunk *= 2;
            }
        }
        let p = self.cur;
        // SAFETY: `bytes <= left`, so the result stays inside the chunk.
        self.cur = unsafe { self.cur.add(bytes) };
        self.left -= bytes;
        p
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let mut pool = CHUNK_POOL.lock();
        for c in self.chunks.drain(..) {
            if c.len() * 8 == POOL_CHUNK_BYTES && pool.len() < POOL_MAX_CHUNKS {
                pool.push(c);
            }
        }
    }
}

impl Writer {
    /// Geometric with p = 1/4.
    fn random_height(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let mut r = self.rng;
        let mut h = 1;
        while h < MAX_HEIGHT && r & 3 == 0 {
            h += 1;
            r >>= 2;
        }
        h
    }
}

/// The writer's state: the arena, the splice of the last insert and the
/// random height generator.
struct Writer {
    arena: Arena,
    /// `prev[i] < last inserted key <= next[i]` at level `i`, adjacent
    /// (`prev[i].next(i) == next[i]`), for levels below `splice_height`;
    /// `prev[splice_height]` is the head and `next[splice_height]` null.
    prev: [*mut Node; MAX_HEIGHT + 1],
    next: [*mut Node; MAX_HEIGHT + 1],
    /// 0: no splice (after a removal, or before the first insert).
    splice_height: usize,
    rng: u64,
}

pub(crate) struct SkipList {
    head: *mut Node,
    /// Height of the tallest tower linked so far (readers start there).
    height: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: nodes are immutable once linked except for their atomic next
// pointers; all mutation goes through `writer` (a mutex), and node memory
// lives as long as the list (see the module comment).
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

impl SkipList {
    pub(crate) fn new() -> SkipList {
        let mut arena = Arena::new();
        let head = Self::new_node(
            &mut arena,
            MAX_HEIGHT,
            &[],
            0,
            Kind::Delete,
            ValueIn::Borrowed(&[]),
        );
        SkipList {
            head,
            height: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                arena,
                prev: [ptr::null_mut(); MAX_HEIGHT + 1],
                next: [ptr::null_mut(); MAX_HEIGHT + 1],
                splice_height: 0,
                rng: 0x2545_f491_4f6c_dd1d,
            }),
        }
    }

    /// Lays out a node (header, `height` null next pointers, key, inline
    /// value) in the arena; large values are copied to a buffer of their own.
    fn new_node(
        arena: &mut Arena,
        height: usize,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value_in: ValueIn<'_>,
    ) -> *mut Node {
        let value_len = value_in.bytes().len();
        let inline = value_len <= INLINE_VALUE_MAX;
        let tower = height * std::mem::size_of::<AtomicPtr<Node>>();
        let mut bytes = NODE_BYTES + tower + user.len();
        if inline {
            bytes += value_len;
        } else {
            bytes += LONG_VALUE_TAIL;
        }
        let bytes = (bytes + 7) & !7;
        let p = arena.alloc(bytes);
        // SAFETY: `p` is `bytes` bytes of 8-aligned memory owned by the arena;
        // the header, tower, key and value written below fit in it.
        unsafe {
            let key_at = p.add(NODE_BYTES + tower);
            ptr::copy_nonoverlapping(user.as_ptr(), key_at, user.len());
            let mut crc = None;
            let mut loc = None;
            let value_ptr = if value_len == 0 {
                ptr::null()
            } else if inline {
                let value = value_in.bytes();
                let at = key_at.add(user.len());
                ptr::copy_nonoverlapping(value.as_ptr(), at, value_len);
                at as *const u8
            } else {
                let (shared, c) = match value_in {
                    ValueIn::Shared(a, c) => (a, c),
                    ValueIn::Logged(a, c, l) => {
                        loc = Some(l);
                        (a, Some(c))
                    }
                    ValueIn::Borrowed(b) => (
                        std::sync::Arc::from(b),
                        (b.len() >= crate::journal::wal::OUT_OF_LINE).then(|| crc32fast::hash(b)),
                    ),
                };
                crc = c;
                let at = shared.as_ptr();
                arena.large.push(shared);
                at
            };
            if let Some(c) = crc {
                let at = key_at.add(user.len()) as *mut [u8; 4];
                at.write_unaligned(c.to_le_bytes());
            }
            if let Some(l) = loc {
                let at = key_at.add(user.len() + 4) as *mut [u8; 8];
                at.write_unaligned(l.segment.to_le_bytes());
                at.add(1).write_unaligned(l.offset.to_le_bytes());
            }
            let node = p as *mut Node;
            node.write(Node {
                head: head_of(user),
                seq,
                prev0: AtomicPtr::new(ptr::null_mut()),
                value: value_ptr,
                value_len,
                key_len: user.len() as u32,
                kind: kind as u8,
                height: height as u8,
                shared: match (value_len > 0 && !inline, crc.is_some(), loc.is_some()) {
                    (false, _, _) => 0,
                    (true, false, _) => SHARED,
                    (true, true, false) => SHARED_CRC,
                    (true, true, true) => SHARED_CRC_LOC,
                },
            });
            let slots = p.add(NODE_BYTES) as *mut AtomicPtr<Node>;
            for i in 0..height {
                slots.add(i).write(AtomicPtr::new(ptr::null_mut()));
            }
            node
        }
    }

    #[inline]
    fn node(&self, p: *mut Node) -> Option<&Node> {
        // SAFETY: non-null pointers in the list point at complete nodes that
        // live as long as the list.
        unsafe { p.as_ref() }
    }

    #[inline]
    fn head(&self) -> &Node {
        // SAFETY: the head node is allocated in `new` and never freed before
        // the list.
        unsafe { &*self.head }
    }

    /// True if `n` is null (the end) or its key is >= the probe.
    #[inline]
    fn at_or_after(&self, n: *mut Node, k: &Probe<'_>) -> bool {
        match self.node(n) {
            None => true,
            Some(n) => n.cmp_key(k.head, k.user, k.seq) != CmpOrdering::Less,
        }
    }

    /// Loads into the CPU cache the nodes a search for each of `keys` visits
    /// (a hint: the list is not changed), running up to `WARM_PARALLEL`
    /// searches interleaved, one step each in turn, and prefetching the node
    /// each will read next. In a large list nearly every step of a search is
    /// a cache miss (the node's key head, `insert_locked`'s hot spot); one
    /// search at a time waits for each miss in turn, interleaved searches
    /// wait for several at once. An insert of the same key that follows finds
    /// its nodes cached: the splice walk visits, at each level it walks, the
    /// nodes a search from the top does.
    pub(crate) fn warm_paths(&self, keys: &[Probe<'_>]) {
        self.search_interleaved(keys, |_, _| {});
    }

    /// The searches of `warm_paths`; calls `found(i, node)` with the last
    /// node before `keys[i]` (the head if none) when search `i` ends.
    fn search_interleaved(&self, keys: &[Probe<'_>], mut found: impl FnMut(usize, *mut Node)) {
        let top = self.height.load(Ordering::Acquire);
        if top == 0 {
            for i in 0..keys.len() {
                found(i, self.head);
            }
            return;
        }
        for (ci, chunk) in keys.chunks(WARM_PARALLEL).enumerate() {
            // Per search: the node it stands on, its level, and that node's
            // next at the level (the candidate read in its next step).
            let mut at = [(self.head, 0usize, ptr::null_mut::<Node>()); WARM_PARALLEL];
            for c in at.iter_mut().take(chunk.len()) {
                let cand = self.head().next(top - 1);
                prefetch(cand);
                *c = (self.head, top - 1, cand);
            }
            let mut live = chunk.len();
            while live > 0 {
                live = 0;
                for (i, (c, k)) in at.iter_mut().zip(chunk).enumerate() {
                    let (x, level, cand) = *c;
                    if x.is_null() {
                        continue;
                    }
                    live += 1;
                    let (x, level) = if !self.at_or_after(cand, k) {
                        (cand, level)
                    } else if level > 0 {
                        (x, level - 1)
                    } else {
                        found(ci * WARM_PARALLEL + i, x);
                        *c = (ptr::null_mut(), 0, ptr::null_mut());
                        continue;
                    };
                    // SAFETY: `x` is the head or a linked node whose tower
                    // reaches `level` (it was found at that level or above).
                    let next = unsafe { (*x).next(level) };
                    prefetch(next);
                    *c = (x, level, next);
                }
            }
        }
    }

    /// Inserts an entry and returns it. An entry of the same (user key,
    /// sequence) already in the list is shadowed: the new one sorts right
    /// before it.
    pub(crate) fn insert(
        &self,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value: ValueIn<'_>,
    ) -> EntryRef<'_> {
        let mut w = self.writer.lock();
        let height = w.random_height();
        self.insert_locked(&mut w, height, user, seq, kind, value)
    }

    /// `insert` of an entry that sorts right before `newest`, an entry of
    /// this list that has the same user key and a sequence <= `seq` (the
    /// newest version of the key, found by the memtable's point index). Most
    /// nodes are one or two levels tall, and their neighbours are found from
    /// `newest` through the level-0 back links instead of by a search from
    /// the top, whose node visits are cache misses in a large memtable.
    pub(crate) fn insert_before<'a>(
        &'a self,
        newest: EntryRef<'a>,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value: ValueIn<'_>,
    ) -> EntryRef<'a> {
        let mut w = self.writer.lock();
        let height = w.random_height();
        let n = newest.node as *const Node as *mut Node;
        if let Some(preds) = self.preds_before(n, height) {
            if newest.user() == user && newest.seq() <= seq {
                return self.link_before(&mut w, n, preds, height, user, seq, kind, value);
            }
        }
        self.insert_locked(&mut w, height, user, seq, kind, value)
    }

    /// The predecessors at levels 0 and 1 of a node inserted right before
    /// `n`: the level-0 back link, then back links until a node of two or more
    /// levels. `None` if the node is taller or the walk is long (search instead).
    fn preds_before(&self, n: *mut Node, height: usize) -> Option<[*mut Node; 2]> {
        if height > 2 {
            return None;
        }
        // SAFETY: `n` is a linked node of this list (caller), so its back
        // link is set; nodes live as long as the list.
        let p0 = unsafe { (*n).prev0.load(Ordering::Relaxed) };
        let p0_node = self.node(p0)?;
        if p0_node.next(0) != n {
            return None;
        }
        let mut p1 = p0;
        if height == 2 {
            let mut steps = 0;
            // SAFETY: back links point at live nodes (the head has none but
            // is two or more levels tall, so the walk stops there).
            while unsafe { (*p1).height } < 2 {
                steps += 1;
                if steps > 16 {
                    return None;
                }
                p1 = unsafe { (*p1).prev0.load(Ordering::Relaxed) };
                self.node(p1)?;
            }
        }
        Some([p0, p1])
    }

    #[allow(clippy::too_many_arguments)]
    fn link_before<'a>(
        &'a self,
        w: &mut Writer,
        n: *mut Node,
        preds: [*mut Node; 2],
        height: usize,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value: ValueIn<'_>,
    ) -> EntryRef<'a> {
        if height > self.height.load(Ordering::Relaxed) {
            self.height.store(height, Ordering::Release);
        }
        let node = Self::new_node(&mut w.arena, height, user, seq, kind, value);
        // SAFETY: `node` is ours until linked; `preds[level]` is a live node
        // whose tower reaches `level` and which precedes `n` with no node of
        // `level` or more levels between them (see `preds_before`).
        unsafe {
            for (level, &p) in preds.iter().enumerate().take(height) {
                (*node)
                    .next_slot(level)
                    .store((*p).next(level), Ordering::Relaxed);
            }
            (*node).prev0.store(preds[0], Ordering::Relaxed);
            for (level, &p) in preds.iter().enumerate().take(height) {
                (*p).next_slot(level).store(node, Ordering::Release);
            }
            (*n).prev0.store(node, Ordering::Relaxed);
        }
        // The splice may no longer bracket its key: `insert_locked` checks
        // adjacency before it trusts a level, which catches that.
        // SAFETY: `node` is linked and lives as long as the list.
        EntryRef {
            node: unsafe { &*node },
        }
    }

    fn insert_locked(
        &self,
        w: &mut Writer,
        height: usize,
        user: &[u8],
        seq: u64,
        kind: Kind,
        value: ValueIn<'_>,
    ) -> EntryRef<'_> {
        let k = Probe::new(user, seq);
        let list_height = self.height.load(Ordering::Relaxed);
        let max_height = list_height.max(height);
        if height > list_height {
            // Readers that see the new height before the node find null
            // links at the new levels of the head and drop down.
            self.height.store(height, Ordering::Release);
        }
        // Lowest level whose splice still brackets the key (every level above
        // it does too: towers nest).
        let mut recompute = max_height;
        if w.splice_height >= max_height {
            recompute = 0;
            while recompute < max_height {
                let (p, n) = (w.prev[recompute], w.next[recompute]);
                // SAFETY: splice pointers are live nodes of this list.
                let prev = unsafe { &*p };
                let brackets = prev.next(recompute) == n
                    && (p == self.head || prev.cmp_key(k.head, k.user, k.seq) == CmpOrdering::Less)
                    && self.at_or_after(n, &k);
                if brackets {
                    break;
                }
                recompute += 1;
            }
        }
        if recompute == max_height {
            w.prev[max_height] = self.head;
            w.next[max_height] = ptr::null_mut();
            w.splice_height = max_height;
        }
        for level in (0..recompute).rev() {
            let (mut before, after) = (w.prev[level + 1], w.next[level + 1]);
            loop {
                // SAFETY: `before` is a live node (the head or a linked one).
                let n = unsafe { (*before).next(level) };
                if n == after || self.at_or_after(n, &k) {
                    w.prev[level] = before;
                    w.next[level] = n;
                    break;
                }
                before = n;
            }
        }
        let node = Self::new_node(&mut w.arena, height, user, seq, kind, value);
        // SAFETY: `node` is ours until linked; `prev[0]` and `next[0]` are
        // its neighbours at level 0 (`next[0]` null at the end).
        unsafe {
            (*node).prev0.store(w.prev[0], Ordering::Relaxed);
            if let Some(next) = w.next[0].as_ref() {
                next.prev0.store(node, Ordering::Relaxed);
            }
        }
        for level in 0..height {
            // SAFETY: `node` is ours until linked; `prev[level]` is a live
            // node whose tower reaches `level` (it was found at that level).
            unsafe {
                (*node)
                    .next_slot(level)
                    .store(w.next[level], Ordering::Relaxed);
                (*w.prev[level])
                    .next_slot(level)
                    .store(node, Ordering::Release);
            }
            w.prev[level] = node;
        }
        // SAFETY: `node` is linked and lives as long as the list.
        EntryRef {
            node: unsafe { &*node },
        }
    }

    /// Unlinks the entry (`user`, `seq`) if present. Its memory stays until
    /// the list is dropped (a reader may stand on it).
    pub(crate) fn remove(&self, user: &[u8], seq: u64) -> Option<usize> {
        let mut w = self.writer.lock();
        w.splice_height = 0;
        let k = Probe::new(user, seq);
        let mut preds = [self.head; MAX_HEIGHT];
        let mut x = self.head;
        for level in (0..self.height.load(Ordering::Relaxed)).rev() {
            loop {
                // SAFETY: `x` is a live node whose tower reaches `level`.
                let n = unsafe { (*x).next(level) };
                if self.at_or_after(n, &k) {
                    break;
                }
                x = n;
            }
            preds[level] = x;
        }
        // SAFETY: as above.
        let target = unsafe { (*preds[0]).next(0) };
        let t = self.node(target)?;
        if t.cmp_key(k.head, k.user, k.seq) != CmpOrdering::Equal {
            return None;
        }
        for level in (0..t.height as usize).rev() {
            // SAFETY: `preds[level]` precedes `target` at `level`.
            unsafe {
                let p = &*preds[level];
                if p.next(level) == target {
                    p.next_slot(level).store(t.next(level), Ordering::Release);
                }
            }
        }
        if let Some(next) = self.node(t.next(0)) {
            next.prev0.store(preds[0], Ordering::Relaxed);
        }
        Some(t.value_len)
    }

    /// Walks down from the top: at each level moves right while the next
    /// node satisfies `go_right` (which must hold for a prefix of the list),
    /// and returns the last node it stood on (the head if none).
    fn descend(&self, go_right: impl Fn(&Node) -> bool) -> *mut Node {
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Acquire) - 1;
        loop {
            // SAFETY: `x` is the head or a linked node, and its tower reaches
            // `level` (it was reached at a level >= `level`).
            let n = unsafe { (*x).next(level) };
            if self.node(n).is_some_and(&go_right) {
                x = n;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    /// `x` as an entry, `None` for the head.
    fn entry_at(&self, x: *mut Node) -> Option<EntryRef<'_>> {
        if x == self.head {
            return None;
        }
        self.node(x).map(|node| EntryRef { node })
    }

    /// First entry >= the probe.
    pub(crate) fn seek(&self, k: &Probe<'_>) -> Option<EntryRef<'_>> {
        let x = self.descend(|n| n.cmp_key(k.head, k.user, k.seq) == CmpOrdering::Less);
        // SAFETY: `x` is the head or a linked node.
        self.node(unsafe { (*x).next(0) })
            .map(|node| EntryRef { node })
    }

    /// Last entry < the probe (`or_equal`: <=).
    pub(crate) fn seek_before(&self, k: &Probe<'_>, or_equal: bool) -> Option<EntryRef<'_>> {
        self.entry_at(self.descend(|n| match n.cmp_key(k.head, k.user, k.seq) {
            CmpOrdering::Less => true,
            CmpOrdering::Equal => or_equal,
            CmpOrdering::Greater => false,
        }))
    }

    pub(crate) fn first(&self) -> Option<EntryRef<'_>> {
        self.node(self.head().next(0)).map(|node| EntryRef { node })
    }

    /// Estimated number of entries in `[lo, hi)` (`hi` None: to the end).
    /// Descends from the top; at each level counts the nodes of that level in
    /// the range (at most `RANGE_SAMPLE_MAX` steps), and at the first level
    /// with at least `RANGE_SAMPLE_MIN` of them (or level 0, exact) returns
    /// the count times 4^level: towers are geometric with p = 1/4, so a level
    /// samples about one entry in 4^level. A few dozen node visits however
    /// wide the range.
    pub(crate) fn estimate_range(&self, lo: &Probe<'_>, hi: Option<&Probe<'_>>) -> u64 {
        const RANGE_SAMPLE_MIN: u64 = 16;
        const RANGE_SAMPLE_MAX: u64 = 256;
        let before_hi = |n: *mut Node| match (self.node(n), hi) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(node), Some(h)) => node.cmp_key(h.head, h.user, h.seq) == CmpOrdering::Less,
        };
        let mut x = self.head;
        let mut level = self.height.load(Ordering::Acquire) - 1;
        loop {
            // SAFETY: `x` is the head or a linked node whose tower reaches
            // `level` (it was reached at a level >= `level`).
            let mut n = unsafe { (*x).next(level) };
            while !self.at_or_after(n, lo) {
                x = n;
                // SAFETY: as above; `n` was reached at `level`.
                n = unsafe { (*x).next(level) };
            }
            let mut count = 0u64;
            while count < RANGE_SAMPLE_MAX && before_hi(n) {
                count += 1;
                // SAFETY: `n` is a linked node reached at `level`.
                n = unsafe { (*n).next(level) };
            }
            if count >= RANGE_SAMPLE_MIN || level == 0 {
                return count.saturating_mul(1u64 << (2 * level as u32));
            }
            level -= 1;
        }
    }

    /// User keys spread evenly over the list, with the number of entries each
    /// stands for: the nodes of the highest level that has at least `want` of
    /// them (level `l` holds about one entry in 4^l, see `estimate_range`), or
    /// every node. Used to pick where a sample of the whole key range starts
    /// (`Db::sample_keys`); the level above has fewer than `want` nodes, so
    /// this walks about 4 * `want` nodes.
    pub(crate) fn spread_keys(&self, want: usize) -> (Vec<&[u8]>, u64) {
        let want = want.max(1);
        let mut level = self.height.load(Ordering::Acquire) - 1;
        loop {
            let mut keys = Vec::new();
            let mut n = self.head().next(level);
            while let Some(node) = self.node(n) {
                keys.push(node.user());
                n = node.next(level);
            }
            if keys.len() >= want || level == 0 {
                return (keys, 1u64 << (2 * level as u32));
            }
            level -= 1;
        }
    }

    pub(crate) fn last(&self) -> Option<EntryRef<'_>> {
        self.entry_at(self.descend(|_| true))
    }

    /// The entry after `e`.
    pub(crate) fn next<'a>(&'a self, e: EntryRef<'a>) -> Option<EntryRef<'a>> {
        self.node(e.node.next(0)).map(|node| EntryRef { node })
    }

    /// The entry before `e` (a search: nodes have no back links).
    pub(crate) fn prev<'a>(&'a self, e: EntryRef<'a>) -> Option<EntryRef<'a>> {
        self.seek_before(&Probe::new(e.user(), e.seq()), false)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head().next(0).is_null()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = EntryRef<'_>> {
        let mut cur = self.first();
        std::iter::from_fn(move || {
            let e = cur?;
            cur = self.next(e);
            Some(e)
        })
    }
}

/// A position in a list that owns nothing: the memtable iterator keeps one
/// next to the `Arc` of the memtable that keeps the list alive.
#[derive(Clone, Copy)]
pub(crate) struct RawEntry(*const Node);

// SAFETY: a `RawEntry` is only turned back into a reference while the list it
// came from is alive (see `RawEntry::get`); nodes are immutable but for
// atomics.
unsafe impl Send for RawEntry {}
unsafe impl Sync for RawEntry {}

impl RawEntry {
    pub(crate) fn of(e: EntryRef<'_>) -> RawEntry {
        RawEntry(e.node)
    }

    /// The node's address (to keep in an atomic pointer).
    pub(crate) fn as_ptr(self) -> *mut () {
        self.0 as *mut ()
    }

    /// # Safety
    /// `p` came from [`RawEntry::as_ptr`].
    pub(crate) unsafe fn from_ptr(p: *mut ()) -> RawEntry {
        RawEntry(p as *const Node)
    }

    /// # Safety
    /// `list` is the list this entry came from.
    pub(crate) unsafe fn get<'a>(&self, _list: &'a SkipList) -> EntryRef<'a> {
        // SAFETY: the caller guarantees the node's list is alive.
        EntryRef {
            node: unsafe { &*self.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn collect(l: &SkipList) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
        l.iter()
            .map(|e| (e.user().to_vec(), e.seq(), e.value().to_vec()))
            .collect()
    }

    /// Random inserts (short and long keys and values, runs of nearby keys
    /// that exercise the splice), removals and every kind of seek, checked
    /// against a `BTreeMap` ordered the same way.
    /// The interleaved searches of `warm_paths` end at the node before each
    /// key (what an insert of that key links after), including keys before
    /// the first entry, after the last, equal to an entry, and more keys than
    /// one batch of parallel searches, in an empty and a large list.
    #[test]
    fn interleaved_searches_find_each_predecessor() {
        let l = SkipList::new();
        let mut model: BTreeMap<(Vec<u8>, std::cmp::Reverse<u64>), ()> = BTreeMap::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let check = |l: &SkipList,
                     model: &BTreeMap<(Vec<u8>, std::cmp::Reverse<u64>), ()>,
                     keys: &[(Vec<u8>, u64)]| {
            let probes: Vec<Probe<'_>> = keys.iter().map(|(k, s)| Probe::new(k, *s)).collect();
            let mut got = vec![None; keys.len()];
            l.search_interleaved(&probes, |i, n| {
                assert!(got[i].is_none(), "search {i} ended twice");
                got[i] = Some(if n == l.head {
                    None
                } else {
                    // SAFETY: a linked node of `l`.
                    let n = unsafe { &*n };
                    Some((n.user().to_vec(), n.seq))
                });
            });
            for ((k, s), g) in keys.iter().zip(got) {
                let want = model
                    .range(..(k.clone(), std::cmp::Reverse(*s)))
                    .next_back()
                    .map(|((u, r), _)| (u.clone(), r.0));
                assert_eq!(g, Some(want), "key {k:?} seq {s}");
            }
        };
        check(&l, &model, &[(b"a".to_vec(), 1), (Vec::new(), 0)]);
        for _ in 0..20_000 {
            let k = format!("k{:07}", next() % 1_000_000).into_bytes();
            let seq = next() % 4;
            if model
                .insert((k.clone(), std::cmp::Reverse(seq)), ())
                .is_none()
            {
                l.insert(&k, seq, Kind::Put, ValueIn::Borrowed(b"v"));
            }
        }
        let mut keys: Vec<(Vec<u8>, u64)> = (0..1000)
            .map(|_| {
                (
                    format!("k{:07}", next() % 1_000_001).into_bytes(),
                    next() % 5,
                )
            })
            .collect();
        keys.extend(model.keys().take(40).map(|(k, s)| (k.clone(), s.0)));
        keys.push((Vec::new(), 0));
        keys.push((b"a".to_vec(), 0));
        keys.push((b"z".to_vec(), 0));
        check(&l, &model, &keys);
        keys.sort();
        check(&l, &model, &keys);
    }

    #[test]
    fn matches_btreemap_model() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let l = SkipList::new();
        // Key: (user, Reverse(seq)) gives the list's order.
        let mut model: BTreeMap<(Vec<u8>, std::cmp::Reverse<u64>), Vec<u8>> = BTreeMap::new();
        let mut base = 0u64;
        for round in 0..6000u64 {
            let op = next() % 10;
            if round % 500 == 0 {
                base = next() % 5000;
            }
            let k = if op < 6 {
                // A run of nearby keys.
                base += next() % 3;
                format!("key{base:06}").into_bytes()
            } else {
                let len = (next() % 12) as usize;
                (0..len)
                    .map(|_| [0u8, 1, 7, 255][(next() % 4) as usize])
                    .collect()
            };
            let seq = next() % 50;
            if op == 9 {
                let removed = l.remove(&k, seq).is_some();
                assert_eq!(
                    removed,
                    model.remove(&(k, std::cmp::Reverse(seq))).is_some()
                );
                continue;
            }
            let vlen = [0usize, 3, 100, 3000][(next() % 4) as usize];
            let v: Vec<u8> = (0..vlen).map(|i| (i as u64 ^ round) as u8).collect();
            let key = (k.clone(), std::cmp::Reverse(seq));
            if model.contains_key(&key) {
                continue; // the memtable never inserts an entry twice
            }
            l.insert(&k, seq, Kind::Put, ValueIn::Borrowed(&v));
            if vlen > INLINE_VALUE_MAX {
                let e = l.seek(&Probe::new(&k, seq)).expect("just inserted");
                assert_eq!(e.shared_value().as_deref(), Some(&v[..]));
            }
            model.insert(key, v);
        }
        let want: Vec<_> = model
            .iter()
            .map(|((k, s), v)| (k.clone(), s.0, v.clone()))
            .collect();
        assert_eq!(collect(&l), want);
        assert_eq!(
            l.last().map(|e| (e.user().to_vec(), e.seq())),
            want.last().map(|x| (x.0.clone(), x.1))
        );
        for _ in 0..3000 {
            let k = format!("key{:06}", next() % 5200).into_bytes();
            let seq = next() % 60;
            let pos =
                want.partition_point(|x| compare_parts(&x.0, x.1, &k, seq) == CmpOrdering::Less);
            let got = l
                .seek(&Probe::new(&k, seq))
                .map(|e| (e.user().to_vec(), e.seq()));
            assert_eq!(got, want.get(pos).map(|x| (x.0.clone(), x.1)));
            let before = l
                .seek_before(&Probe::new(&k, seq), false)
                .map(|e| (e.user().to_vec(), e.seq()));
            assert_eq!(
                before,
                pos.checked_sub(1).map(|p| (want[p].0.clone(), want[p].1))
            );
            let le =
                want.partition_point(|x| compare_parts(&x.0, x.1, &k, seq) != CmpOrdering::Greater);
            let got = l
                .seek_before(&Probe::new(&k, seq), true)
                .map(|e| (e.user().to_vec(), e.seq()));
            assert_eq!(
                got,
                le.checked_sub(1).map(|p| (want[p].0.clone(), want[p].1))
            );
            if let Some(e) = l.seek(&Probe::new(&k, seq)) {
                let p = l.prev(e).map(|e| (e.user().to_vec(), e.seq()));
                assert_eq!(
                    p,
                    pos.checked_sub(1).map(|p| (want[p].0.clone(), want[p].1))
                );
            }
        }
    }

    /// Readers on other threads walk the list while it grows: every walk is in
    /// order and sees a prefix-closed set of what was inserted before it began.
    #[test]
    fn long_values_keep_their_crc() {
        let l = SkipList::new();
        let big: Vec<u8> = (0..crate::journal::wal::OUT_OF_LINE + 5)
            .map(|i| i as u8)
            .collect();
        let mid = vec![7u8; INLINE_VALUE_MAX + 1];
        // Keys of every length modulo 8: the crc follows the key unaligned.
        for (i, k) in [
            "a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg", "hhhhhhhh",
        ]
        .iter()
        .enumerate()
        {
            let k = k.as_bytes();
            let seq = i as u64 * 10;
            l.insert(k, seq + 1, Kind::Put, ValueIn::Borrowed(&big));
            l.insert(k, seq + 2, Kind::Put, ValueIn::Borrowed(&mid));
            l.insert(k, seq + 3, Kind::Put, ValueIn::Borrowed(b"short"));
            let shared: std::sync::Arc<[u8]> = big.clone().into();
            l.insert(
                k,
                seq + 4,
                Kind::Put,
                ValueIn::Shared(shared.clone(), Some(0xdead_beef)),
            );
            l.insert(k, seq + 5, Kind::Put, ValueIn::Shared(shared.clone(), None));
            let loc = crate::journal::wal::WalLoc {
                segment: 0x0102_0304_0506_0708 + i as u64,
                offset: u64::MAX - i as u64,
            };
            l.insert(
                k,
                seq + 6,
                Kind::Put,
                ValueIn::Logged(shared, 0xfeed_f00d, loc),
            );
            let at = |s: u64| l.seek(&Probe::new(k, s)).expect("inserted");
            // Copied in and long enough for the WAL to keep it out of line:
            // checksummed while copied.
            assert_eq!(at(seq + 1).value_crc(), Some(crc32fast::hash(&big)));
            assert_eq!(at(seq + 1).value(), &big[..]);
            assert_eq!(
                at(seq + 2).value_crc(),
                None,
                "shared but under OUT_OF_LINE"
            );
            assert_eq!(at(seq + 3).value_crc(), None, "inline");
            assert_eq!(at(seq + 4).value_crc(), Some(0xdead_beef), "given crc kept");
            assert_eq!(at(seq + 5).value_crc(), None);
            assert_eq!(at(seq + 5).user(), k);
            assert_eq!(at(seq + 6).value_crc(), Some(0xfeed_f00d));
            assert_eq!(at(seq + 6).wal_loc(), Some(loc), "location kept");
            assert_eq!(at(seq + 6).value(), &big[..]);
            assert_eq!(at(seq + 4).wal_loc(), None);
        }
    }

    #[test]
    fn concurrent_readers_see_complete_ordered_nodes() {
        let l = std::sync::Arc::new(SkipList::new());
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (l, done) = (l.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut walks = 0;
                    while !done.load(Ordering::Relaxed) || walks == 0 {
                        let mut last: Option<Vec<u8>> = None;
                        for e in l.iter() {
                            let k = e.user().to_vec();
                            assert_eq!(e.value(), &k[..], "a complete node");
                            if let Some(p) = &last {
                                assert!(p < &k, "in order");
                            }
                            last = Some(k);
                        }
                        walks += 1;
                    }
                })
            })
            .collect();
        for i in 0..20_000u64 {
            let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16).to_be_bytes();
            l.insert(&k, 1, Kind::Put, ValueIn::Borrowed(&k));
        }
        done.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().expect("reader");
        }
        assert_eq!(l.iter().count(), 20_000);
    }
}
