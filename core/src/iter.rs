//! Iterators: the internal iterator trait implemented by memtables, table files
//! and transaction write sets, a per-source MVCC "visible view", and the merging
//! user-level iterator used by [`crate::TxnIter`].

use crate::error::Result;
use crate::key::{successor, Kind};

/// Bidirectional iterator over internal entries (user key asc, seq desc).
pub(crate) trait InternalIterator: Send {
    fn valid(&self) -> bool;
    /// First entry >= (user, seq). `seq = u64::MAX` positions before every version of `user`.
    fn seek(&mut self, user: &[u8], seq: u64);
    /// Last entry <= (user, seq). `seq = 0` positions after every version of `user`.
    fn seek_for_prev(&mut self, user: &[u8], seq: u64);
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    fn next(&mut self);
    fn prev(&mut self);
    fn user_key(&self) -> &[u8];
    fn seq(&self) -> u64;
    fn kind(&self) -> Kind;
    fn value(&self) -> &[u8];
    fn status(&self) -> Result<()>;
}

/// Steps over versions of one user key before a source seeks past them instead
/// (a seek costs a few steps; a key updated thousands of times in the memtable
/// would otherwise cost thousands).
pub(crate) const SEQUENTIAL_SKIPS: usize = 8;

/// A forward merge of at least this many sources keeps them in a heap: a step
/// then compares O(log n) keys instead of every source's twice (the commit of a
/// spilled write set merges one run per spill, dozens for a large ALTER TABLE).
const HEAP_MIN_SOURCES: usize = 6;

#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub user: Vec<u8>,
    pub seq: u64,
    pub kind: Kind,
    pub value: Vec<u8>,
}

/// One source seen through a snapshot: `cur` is the newest version with
/// seq <= snap of the current user key of this source.
///
/// Forward mode: the inner iterator sits on `cur`'s entry, so only the key is
/// copied (`fwd_next` compares with it while it steps) and the value is read
/// from the inner iterator. Backward mode: the inner iterator sits on the
/// oldest entry of the next (smaller) user key, so the value is copied too.
/// `buf` is reused for every entry (no allocation per step).
pub(crate) struct Source {
    it: Box<dyn InternalIterator>,
    pub snap: u64,
    has: bool,
    buf: Resolved,
    /// `buf.value` holds the current value (backward mode).
    value_in_buf: bool,
    scratch: Vec<u8>,
}

impl Source {
    pub(crate) fn new(it: Box<dyn InternalIterator>, snap: u64) -> Source {
        Source {
            it,
            snap,
            has: false,
            buf: Resolved {
                user: Vec::new(),
                seq: 0,
                kind: Kind::Delete,
                value: Vec::new(),
            },
            value_in_buf: false,
            scratch: Vec::new(),
        }
    }
    /// The current entry's key, sequence and kind (`value` is not kept
    /// there in forward mode: use [`Source::value`]).
    fn cur(&self) -> Option<&Resolved> {
        self.has.then_some(&self.buf)
    }
    /// The current entry's value.
    fn value(&self) -> &[u8] {
        if self.value_in_buf {
            &self.buf.value
        } else {
            self.it.value()
        }
    }
    /// Records the entry the inner iterator is on as the current one; the
    /// value is copied only when the iterator will move off it (backward).
    fn capture_at(&mut self, copy_value: bool) {
        self.buf.user.clear();
        self.buf.user.extend_from_slice(self.it.user_key());
        self.buf.seq = self.it.seq();
        self.buf.kind = self.it.kind();
        self.value_in_buf = copy_value;
        if copy_value {
            self.buf.value.clear();
            self.buf.value.extend_from_slice(self.it.value());
        }
    }
    fn fwd_settle(&mut self) {
        let mut steps = 0;
        while self.it.valid() && self.it.seq() > self.snap {
            if steps < SEQUENTIAL_SKIPS {
                self.it.next();
                steps += 1;
                continue;
            }
            // Many versions newer than the snapshot: one seek to the newest
            // visible one (or the next user key).
            self.scratch.clear();
            self.scratch.extend_from_slice(self.it.user_key());
            self.it.seek(&self.scratch, self.snap);
            steps = 0;
        }
        self.has = self.it.valid();
        if self.has {
            self.capture_at(false);
        }
    }
    fn fwd_seek(&mut self, target: &[u8]) {
        self.it.seek(target, u64::MAX);
        self.fwd_settle();
    }
    fn fwd_first(&mut self) {
        self.it.seek_to_first();
        self.fwd_settle();
    }
    fn fwd_next(&mut self) {
        if self.has {
            self.has = false;
            let mut steps = 0;
            while self.it.valid() && self.it.user_key() == self.buf.user.as_slice() {
                if steps == SEQUENTIAL_SKIPS {
                    // Many older versions: seek past them at once (to the
                    // oldest possible one; the loop steps over it if present).
                    self.it.seek(&self.buf.user, 0);
                } else {
                    self.it.next();
                }
                steps += 1;
            }
            self.fwd_settle();
        }
    }
    fn bwd_settle(&mut self) {
        loop {
            if !self.it.valid() {
                self.has = false;
                return;
            }
            let mut u = std::mem::take(&mut self.scratch);
            u.clear();
            u.extend_from_slice(self.it.user_key());
            let mut found = false;
            let mut steps = 0;
            while self.it.valid() && self.it.user_key() == u.as_slice() {
                if self.it.seq() > self.snap {
                    break;
                }
                if steps == SEQUENTIAL_SKIPS {
                    // Many visible versions: seek to the newest one directly.
                    self.it.seek(&u, self.snap);
                    if self.it.valid() && self.it.user_key() == u.as_slice() {
                        self.capture_at(true);
                    }
                    break;
                }
                self.capture_at(true);
                found = true;
                self.it.prev();
                steps += 1;
            }
            // Versions newer than the snapshot, then the previous user key.
            let mut steps = 0;
            while self.it.valid() && self.it.user_key() == u.as_slice() {
                if steps == SEQUENTIAL_SKIPS {
                    self.it.seek_for_prev(&u, u64::MAX);
                    break;
                }
                self.it.prev();
                steps += 1;
            }
            self.scratch = u;
            if found {
                self.has = true;
                return;
            }
        }
    }
    /// Last user key <= target (inclusive) or < target.
    fn bwd_seek(&mut self, target: &[u8], inclusive: bool) {
        if inclusive {
            self.it.seek_for_prev(target, 0);
        } else {
            self.it.seek_for_prev(target, u64::MAX);
            while self.it.valid() && self.it.user_key() >= target {
                self.it.prev();
            }
        }
        self.bwd_settle();
    }
    fn bwd_last(&mut self) {
        self.it.seek_to_last();
        self.bwd_settle();
    }
    fn status(&self) -> Result<()> {
        self.it.status()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dir {
    Forward,
    Backward,
}

pub(crate) type ValueResolver = dyn Fn(&[u8]) -> Result<crate::bytes::SharedBytes> + Send + Sync;

/// Merges sources; for each user key the version with the highest sequence
/// wins; tombstones hide the key. Bounds: `[lower, upper)`.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    dir: Dir,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    key: Vec<u8>,
    /// The source whose entry is current: its value is read from it (the
    /// sources do not move until the next positioning call).
    cur_src: usize,
    /// The current value when it is a resolved pointer (shared with the block
    /// cache).
    resolved: Option<crate::bytes::SharedBytes>,
    valid: bool,
    err: Option<crate::Error>,
    resolver: Option<std::sync::Arc<ValueResolver>>,
    /// Also stop at tombstones (commit of a spilled write set).
    keep_deletes: bool,
    kind: Kind,
    scratch: Vec<u8>,
    /// Forward mode with [`HEAP_MIN_SOURCES`] or more: the indexes of the sources
    /// that have an entry, a binary min-heap in [`fwd_before`] order (its top is
    /// what `pick(true)` returns). Valid while `heap_ok`: every move of the
    /// sources other than [`MergeIter::step_past`] clears it, and
    /// `find_forward` rebuilds it.
    heap: Vec<usize>,
    heap_ok: bool,
}

/// Source `a`'s entry comes before source `b`'s in a forward merge: smaller
/// user key, then higher sequence, then lower index (the order `pick(true)`
/// chooses in); a source without an entry comes last.
fn fwd_before(sources: &[Source], a: usize, b: usize) -> bool {
    match (
        sources.get(a).and_then(Source::cur),
        sources.get(b).and_then(Source::cur),
    ) {
        (Some(x), Some(y)) => match x.user.as_slice().cmp(y.user.as_slice()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => x.seq > y.seq || (x.seq == y.seq && a < b),
        },
        (Some(_), None) => true,
        _ => false,
    }
}

fn sift_down(heap: &mut [usize], sources: &[Source], mut i: usize) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < heap.len() && fwd_before(sources, heap[l], heap[m]) {
            m = l;
        }
        if r < heap.len() && fwd_before(sources, heap[r], heap[m]) {
            m = r;
        }
        if m == i {
            return;
        }
        heap.swap(i, m);
        i = m;
    }
}

impl MergeIter {
    pub(crate) fn new(
        sources: Vec<Source>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        resolver: Option<std::sync::Arc<ValueResolver>>,
    ) -> MergeIter {
        MergeIter {
            sources,
            dir: Dir::Forward,
            lower,
            upper,
            key: Vec::new(),
            cur_src: 0,
            resolved: None,
            valid: false,
            err: None,
            resolver,
            keep_deletes: false,
            kind: Kind::Put,
            scratch: Vec::new(),
            heap: Vec::new(),
            heap_ok: false,
        }
    }

    fn uses_heap(&self) -> bool {
        self.sources.len() >= HEAP_MIN_SOURCES
    }

    /// Builds the forward heap from the sources' current entries.
    fn rebuild_heap(&mut self) {
        self.heap.clear();
        self.heap
            .extend((0..self.sources.len()).filter(|&i| self.sources[i].cur().is_some()));
        for i in (0..self.heap.len() / 2).rev() {
            sift_down(&mut self.heap, &self.sources, i);
        }
        self.heap_ok = true;
    }

    /// Forward: steps every source whose entry is at user key `k` (the
    /// smallest of all) past it.
    fn step_past(&mut self, k: &[u8]) {
        // The sources at `k` come first in heap order: step the top while it is
        // at `k`, putting it back in its place (or out, when it has no entry).
        while self.heap_ok {
            let Some(&top) = self.heap.first() else {
                return;
            };
            let Some(s) = self.sources.get_mut(top) else {
                // Not a source: the sources changed under the heap; step them
                // all below, and the next positioning rebuilds it.
                self.heap_ok = false;
                break;
            };
            if !s.cur().is_some_and(|c| c.user == k) {
                break;
            }
            s.fwd_next();
            if s.cur().is_none() {
                self.heap.swap_remove(0);
            }
            sift_down(&mut self.heap, &self.sources, 0);
        }
        if !self.heap_ok {
            for s in &mut self.sources {
                if s.cur().is_some_and(|c| c.user == k) {
                    s.fwd_next();
                }
            }
        }
    }

    /// Makes the iterator stop at tombstones too (see [`MergeIter::kind`]).
    pub(crate) fn keep_deletes(mut self) -> MergeIter {
        self.keep_deletes = true;
        self
    }

    /// Kind of the current entry (`Delete` only with `keep_deletes`).
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Replaces the value pointer resolver (sources rebuilt on a newer version).
    pub(crate) fn set_resolver(&mut self, r: std::sync::Arc<ValueResolver>) {
        self.resolver = Some(r);
    }

    pub(crate) fn sources_mut(&mut self) -> &mut Vec<Source> {
        self.heap_ok = false;
        &mut self.sources
    }

    fn check_status(&mut self) -> bool {
        if self.err.is_some() {
            self.valid = false;
            return false;
        }
        // A source with an error is invalid, so only those can have one.
        for s in self.sources.iter().filter(|s| !s.has) {
            if let Err(e) = s.status() {
                self.err = Some(e);
                self.valid = false;
                return false;
            }
        }
        true
    }

    /// Makes source `i`'s current entry the iterator's current entry.
    fn set_current(&mut self, i: usize) -> bool {
        let Some((r, value)) = self
            .sources
            .get(i)
            .and_then(|s| s.cur().map(|r| (r, s.value())))
        else {
            self.valid = false;
            return false;
        };
        self.key.clear();
        self.key.extend_from_slice(&r.user);
        self.kind = r.kind;
        if r.kind == Kind::ValuePtr && !self.keep_deletes {
            let res = match &self.resolver {
                Some(f) => f(value),
                None => Err(crate::Error::corruption(
                    "",
                    0,
                    "value pointer without value log",
                )),
            };
            match res {
                Ok(v) => self.resolved = Some(v),
                Err(e) => {
                    self.err = Some(e);
                    self.valid = false;
                    return false;
                }
            }
        } else {
            self.resolved = None;
        }
        self.cur_src = i;
        self.valid = true;
        true
    }

    /// Index of the source holding the winning version of the smallest
    /// (forward) / largest (backward) current user key: the highest
    /// sequence among the sources at that key.
    fn pick(&self, forward: bool) -> Option<usize> {
        if forward && self.heap_ok {
            return self.heap.first().copied();
        }
        let mut best: Option<(usize, &Resolved)> = None;
        for (i, s) in self.sources.iter().enumerate() {
            let Some(c) = s.cur() else { continue };
            best = match best {
                None => Some((i, c)),
                Some((bi, b)) => {
                    let ord = c.user.as_slice().cmp(b.user.as_slice());
                    let better = if forward {
                        ord == std::cmp::Ordering::Less
                    } else {
                        ord == std::cmp::Ordering::Greater
                    };
                    if better || (ord == std::cmp::Ordering::Equal && c.seq > b.seq) {
                        Some((i, c))
                    } else {
                        Some((bi, b))
                    }
                }
            };
        }
        best.map(|(i, _)| i)
    }

    fn find_forward(&mut self) {
        if !self.heap_ok && self.uses_heap() {
            self.rebuild_heap();
        }
        loop {
            if !self.check_status() {
                return;
            }
            let Some(wi) = self.pick(true) else {
                self.valid = false;
                return;
            };
            let Some(w) = self.sources.get(wi).and_then(|s| s.cur()) else {
                self.valid = false;
                return;
            };
            if let Some(u) = &self.upper {
                if w.user.as_slice() >= u.as_slice() {
                    self.valid = false;
                    return;
                }
            }
            if w.kind != Kind::Delete || self.keep_deletes {
                self.set_current(wi);
                return;
            }
            // Tombstone: step every source past this key.
            let mut k = std::mem::take(&mut self.scratch);
            k.clear();
            k.extend_from_slice(&w.user);
            self.step_past(&k);
            self.scratch = k;
        }
    }

    fn find_backward(&mut self) {
        loop {
            if !self.check_status() {
                return;
            }
            let Some(wi) = self.pick(false) else {
                self.valid = false;
                return;
            };
            let Some(w) = self.sources.get(wi).and_then(|s| s.cur()) else {
                self.valid = false;
                return;
            };
            if let Some(l) = &self.lower {
                if w.user.as_slice() < l.as_slice() {
                    self.valid = false;
                    return;
                }
            }
            if w.kind != Kind::Delete || self.keep_deletes {
                self.set_current(wi);
                return;
            }
            let mut k = std::mem::take(&mut self.scratch);
            k.clear();
            k.extend_from_slice(&w.user);
            for s in &mut self.sources {
                if s.cur().is_some_and(|c| c.user == k) {
                    s.bwd_settle();
                }
            }
            self.scratch = k;
        }
    }

    pub(crate) fn seek(&mut self, key: &[u8]) {
        self.err = None;
        let target = match &self.lower {
            Some(l) if l.as_slice() > key => l.clone(),
            _ => key.to_vec(),
        };
        for s in &mut self.sources {
            s.fwd_seek(&target);
        }
        self.heap_ok = false;
        self.dir = Dir::Forward;
        self.find_forward();
    }

    pub(crate) fn seek_to_first(&mut self) {
        self.err = None;
        match self.lower.clone() {
            Some(l) => self.seek(&l),
            None => {
                for s in &mut self.sources {
                    s.fwd_first();
                }
                self.heap_ok = false;
                self.dir = Dir::Forward;
                self.find_forward();
            }
        }
    }

    pub(crate) fn seek_for_prev(&mut self, key: &[u8]) {
        self.err = None;
        match self.upper.clone() {
            Some(u) if key >= u.as_slice() => {
                for s in &mut self.sources {
                    s.bwd_seek(&u, false);
                }
            }
            _ => {
                for s in &mut self.sources {
                    s.bwd_seek(key, true);
                }
            }
        }
        self.heap_ok = false;
        self.dir = Dir::Backward;
        self.find_backward();
    }

    pub(crate) fn seek_to_last(&mut self) {
        self.err = None;
        match self.upper.clone() {
            Some(u) => {
                for s in &mut self.sources {
                    s.bwd_seek(&u, false);
                }
            }
            None => {
                for s in &mut self.sources {
                    s.bwd_last();
                }
            }
        }
        self.heap_ok = false;
        self.dir = Dir::Backward;
        self.find_backward();
    }

    pub(crate) fn next(&mut self) {
        if !self.valid {
            return;
        }
        let k = std::mem::take(&mut self.key);
        if self.dir == Dir::Forward {
            self.step_past(&k);
        } else {
            let t = successor(&k);
            for s in &mut self.sources {
                s.fwd_seek(&t);
            }
            self.heap_ok = false;
            self.dir = Dir::Forward;
        }
        self.key = k;
        self.find_forward();
    }

    pub(crate) fn prev(&mut self) {
        if !self.valid {
            return;
        }
        let k = std::mem::take(&mut self.key);
        if self.dir == Dir::Backward {
            for s in &mut self.sources {
                if s.cur().is_some_and(|c| c.user == k) {
                    s.bwd_settle();
                }
            }
        } else {
            for s in &mut self.sources {
                s.bwd_seek(&k, false);
            }
            self.heap_ok = false;
            self.dir = Dir::Backward;
        }
        self.key = k;
        self.find_backward();
    }

    pub(crate) fn valid(&self) -> bool {
        self.valid
    }
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
    pub(crate) fn value(&self) -> &[u8] {
        match &self.resolved {
            Some(v) => v,
            None => self.sources.get(self.cur_src).map_or(&[], |s| s.value()),
        }
    }
    pub(crate) fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
