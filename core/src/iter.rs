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
/// Forward mode: the inner iterator sits on `cur`'s entry. Backward mode: the
/// inner iterator sits on the oldest entry of the next (smaller) user key.
pub(crate) struct Source {
    it: Box<dyn InternalIterator>,
    pub snap: u64,
    cur: Option<Resolved>,
}

impl Source {
    pub(crate) fn new(it: Box<dyn InternalIterator>, snap: u64) -> Source {
        Source {
            it,
            snap,
            cur: None,
        }
    }
    fn capture(&self) -> Resolved {
        Resolved {
            user: self.it.user_key().to_vec(),
            seq: self.it.seq(),
            kind: self.it.kind(),
            value: self.it.value().to_vec(),
        }
    }
    fn fwd_settle(&mut self) {
        while self.it.valid() && self.it.seq() > self.snap {
            self.it.next();
        }
        self.cur = if self.it.valid() {
            Some(self.capture())
        } else {
            None
        };
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
        if let Some(c) = self.cur.take() {
            while self.it.valid() && self.it.user_key() == c.user.as_slice() {
                self.it.next();
            }
            self.fwd_settle();
        }
    }
    fn bwd_settle(&mut self) {
        loop {
            if !self.it.valid() {
                self.cur = None;
                return;
            }
            let u = self.it.user_key().to_vec();
            let mut best = None;
            while self.it.valid() && self.it.user_key() == u.as_slice() {
                if self.it.seq() <= self.snap {
                    best = Some(self.capture());
                } else {
                    break;
                }
                self.it.prev();
            }
            while self.it.valid() && self.it.user_key() == u.as_slice() {
                self.it.prev();
            }
            if best.is_some() {
                self.cur = best;
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

pub(crate) type ValueResolver = dyn Fn(&[u8]) -> Result<Vec<u8>> + Send + Sync;

/// Merges sources; for each user key the version with the highest sequence
/// wins; tombstones hide the key. Bounds: `[lower, upper)`.
pub(crate) struct MergeIter {
    sources: Vec<Source>,
    dir: Dir,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    key: Vec<u8>,
    value: Vec<u8>,
    valid: bool,
    err: Option<crate::Error>,
    resolver: Option<std::sync::Arc<ValueResolver>>,
    /// Also stop at tombstones (commit of a spilled write set).
    keep_deletes: bool,
    kind: Kind,
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
            value: Vec::new(),
            valid: false,
            err: None,
            resolver,
            keep_deletes: false,
            kind: Kind::Put,
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

    pub(crate) fn sources_mut(&mut self) -> &mut Vec<Source> {
        &mut self.sources
    }

    fn check_status(&mut self) -> bool {
        if self.err.is_some() {
            self.valid = false;
            return false;
        }
        for s in &self.sources {
            if let Err(e) = s.status() {
                self.err = Some(e);
                self.valid = false;
                return false;
            }
        }
        true
    }

    fn set_current(&mut self, r: &Resolved) -> bool {
        self.key.clear();
        self.key.extend_from_slice(&r.user);
        self.kind = r.kind;
        if r.kind == Kind::ValuePtr && !self.keep_deletes {
            let res = match &self.resolver {
                Some(f) => f(&r.value),
                None => Err(crate::Error::corruption(
                    "",
                    0,
                    "value pointer without value log",
                )),
            };
            match res {
                Ok(v) => self.value = v,
                Err(e) => {
                    self.err = Some(e);
                    self.valid = false;
                    return false;
                }
            }
        } else {
            self.value.clear();
            self.value.extend_from_slice(&r.value);
        }
        self.valid = true;
        true
    }

    fn find_forward(&mut self) {
        loop {
            if !self.check_status() {
                return;
            }
            let mut min: Option<&[u8]> = None;
            for s in &self.sources {
                if let Some(c) = &s.cur {
                    if min.map_or(true, |m| c.user.as_slice() < m) {
                        min = Some(&c.user);
                    }
                }
            }
            let Some(min) = min.map(|m| m.to_vec()) else {
                self.valid = false;
                return;
            };
            if let Some(u) = &self.upper {
                if min.as_slice() >= u.as_slice() {
                    self.valid = false;
                    return;
                }
            }
            let mut win: Option<Resolved> = None;
            for s in &self.sources {
                if let Some(c) = &s.cur {
                    if c.user == min && win.as_ref().map_or(true, |w| c.seq > w.seq) {
                        win = Some(c.clone());
                    }
                }
            }
            match win {
                Some(w) if w.kind != Kind::Delete || self.keep_deletes => {
                    self.set_current(&w);
                    return;
                }
                _ => {
                    for s in &mut self.sources {
                        if s.cur.as_ref().is_some_and(|c| c.user == min) {
                            s.fwd_next();
                        }
                    }
                }
            }
        }
    }

    fn find_backward(&mut self) {
        loop {
            if !self.check_status() {
                return;
            }
            let mut max: Option<&[u8]> = None;
            for s in &self.sources {
                if let Some(c) = &s.cur {
                    if max.map_or(true, |m| c.user.as_slice() > m) {
                        max = Some(&c.user);
                    }
                }
            }
            let Some(max) = max.map(|m| m.to_vec()) else {
                self.valid = false;
                return;
            };
            if let Some(l) = &self.lower {
                if max.as_slice() < l.as_slice() {
                    self.valid = false;
                    return;
                }
            }
            let mut win: Option<Resolved> = None;
            for s in &self.sources {
                if let Some(c) = &s.cur {
                    if c.user == max && win.as_ref().map_or(true, |w| c.seq > w.seq) {
                        win = Some(c.clone());
                    }
                }
            }
            match win {
                Some(w) if w.kind != Kind::Delete || self.keep_deletes => {
                    self.set_current(&w);
                    return;
                }
                _ => {
                    for s in &mut self.sources {
                        if s.cur.as_ref().is_some_and(|c| c.user == max) {
                            s.bwd_settle();
                        }
                    }
                }
            }
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
        self.dir = Dir::Backward;
        self.find_backward();
    }

    pub(crate) fn next(&mut self) {
        if !self.valid {
            return;
        }
        let k = self.key.clone();
        if self.dir == Dir::Forward {
            for s in &mut self.sources {
                if s.cur.as_ref().is_some_and(|c| c.user == k) {
                    s.fwd_next();
                }
            }
        } else {
            let t = successor(&k);
            for s in &mut self.sources {
                s.fwd_seek(&t);
            }
            self.dir = Dir::Forward;
        }
        self.find_forward();
    }

    pub(crate) fn prev(&mut self) {
        if !self.valid {
            return;
        }
        let k = self.key.clone();
        if self.dir == Dir::Backward {
            for s in &mut self.sources {
                if s.cur.as_ref().is_some_and(|c| c.user == k) {
                    s.bwd_settle();
                }
            }
        } else {
            for s in &mut self.sources {
                s.bwd_seek(&k, false);
            }
            self.dir = Dir::Backward;
        }
        self.find_backward();
    }

    pub(crate) fn valid(&self) -> bool {
        self.valid
    }
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }
    pub(crate) fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

/// Concatenating iterator over the sorted, non-overlapping files of one level
/// (L1+). Opens one table iterator at a time.
pub(crate) struct LevelIter {
    files: Vec<std::sync::Arc<crate::db::FileHandle>>,
    idx: usize,
    cur: Option<crate::sst::TableIter>,
    err: Option<crate::Error>,
}

impl LevelIter {
    pub(crate) fn new(files: Vec<std::sync::Arc<crate::db::FileHandle>>) -> LevelIter {
        LevelIter {
            files,
            idx: 0,
            cur: None,
            err: None,
        }
    }
    fn open(&mut self, i: usize) -> bool {
        self.idx = i;
        match self.files.get(i) {
            Some(f) => {
                self.cur = Some(crate::sst::TableIter::new(f.table.clone()));
                true
            }
            None => {
                self.cur = None;
                false
            }
        }
    }
    fn cur_valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }
    fn capture_err(&mut self) -> bool {
        if let Some(c) = &self.cur {
            if let Err(e) = c.status() {
                self.err = Some(e);
                self.cur = None;
                return true;
            }
        }
        false
    }
    fn skip_fwd(&mut self) {
        while !self.cur_valid() {
            if self.capture_err() || self.cur.is_none() {
                return;
            }
            if !self.open(self.idx + 1) {
                return;
            }
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first();
            }
        }
    }
    fn skip_bwd(&mut self) {
        while !self.cur_valid() {
            if self.capture_err() || self.cur.is_none() {
                return;
            }
            if self.idx == 0 {
                self.cur = None;
                return;
            }
            self.open(self.idx - 1);
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.cur_valid()
    }
    fn seek(&mut self, user: &[u8], seq: u64) {
        self.err = None;
        let i = self
            .files
            .partition_point(|f| f.meta.largest.as_slice() < user);
        if self.open(i) {
            if let Some(c) = self.cur.as_mut() {
                c.seek(user, seq);
            }
            self.skip_fwd();
        }
    }
    fn seek_for_prev(&mut self, user: &[u8], seq: u64) {
        self.err = None;
        let i = self
            .files
            .partition_point(|f| f.meta.smallest.as_slice() <= user);
        if i == 0 {
            self.cur = None;
            return;
        }
        self.open(i - 1);
        if let Some(c) = self.cur.as_mut() {
            c.seek_for_prev(user, seq);
        }
        self.skip_bwd();
    }
    fn seek_to_first(&mut self) {
        self.err = None;
        if self.open(0) {
            if let Some(c) = self.cur.as_mut() {
                c.seek_to_first();
            }
            self.skip_fwd();
        }
    }
    fn seek_to_last(&mut self) {
        self.err = None;
        if self.files.is_empty() {
            self.cur = None;
            return;
        }
        self.open(self.files.len() - 1);
        if let Some(c) = self.cur.as_mut() {
            c.seek_to_last();
        }
        self.skip_bwd();
    }
    fn next(&mut self) {
        if let Some(c) = self.cur.as_mut() {
            c.next();
        }
        self.skip_fwd();
    }
    fn prev(&mut self) {
        if let Some(c) = self.cur.as_mut() {
            c.prev();
        }
        self.skip_bwd();
    }
    fn user_key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.user_key())
    }
    fn seq(&self) -> u64 {
        self.cur.as_ref().map_or(0, |c| c.seq())
    }
    fn kind(&self) -> Kind {
        self.cur.as_ref().map_or(Kind::Delete, |c| c.kind())
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.value())
    }
    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
