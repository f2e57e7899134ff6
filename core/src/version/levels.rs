//! Column family state: the table files by level, the super-version (memtables
//! plus files) readers pin, and the per-family state the database keeps.

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::Kind;
use crate::memtable::buffer::Memtable;
use crate::options::CfOptions;
use crate::table::sst::{Table, TableIter};
use crate::version::manifest::{FileMeta, NUM_LEVELS};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub(crate) struct FileHandle {
    pub meta: FileMeta,
    pub table: Arc<Table>,
}

/// Table files of one column family by level. L0: newest first (may overlap);
/// L1+: sorted by smallest key, non-overlapping, a user key never spans files.
#[derive(Clone, Default)]
pub(crate) struct Levels {
    pub levels: Vec<Vec<Arc<FileHandle>>>,
    pub max_seq: u64,
    /// Value log files the tables of this version may point into. Holding a
    /// version keeps them open (and on disk, see `VlogFile`).
    pub vlogs: crate::vlog::file::VlogSet,
}

impl Levels {
    pub(crate) fn new() -> Levels {
        Levels {
            levels: vec![Vec::new(); NUM_LEVELS],
            max_seq: 0,
            vlogs: crate::vlog::file::VlogSet::new(),
        }
    }
    pub(crate) fn normalize(&mut self) {
        if let Some(l0) = self.levels.get_mut(0) {
            l0.sort_by_key(|f| std::cmp::Reverse(f.meta.max_seq));
        }
        for l in self.levels.iter_mut().skip(1) {
            l.sort_by(|a, b| a.meta.smallest.cmp(&b.meta.smallest));
        }
        self.max_seq = self
            .levels
            .iter()
            .flatten()
            .map(|f| f.meta.max_seq)
            .max()
            .unwrap_or(0);
    }
    /// Files that may contain `key`, in newest-first search order.
    pub(crate) fn candidates<'a>(
        &'a self,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileHandle>> + 'a {
        self.levels
            .iter()
            .enumerate()
            .flat_map(move |(lvl, files)| {
                let r: Box<dyn Iterator<Item = &Arc<FileHandle>>> = if lvl == 0 {
                    Box::new(files.iter().filter(move |f| {
                        f.meta.smallest.as_slice() <= key && key <= f.meta.largest.as_slice()
                    }))
                } else {
                    let i = files.partition_point(|f| f.meta.largest.as_slice() < key);
                    Box::new(
                        files
                            .get(i)
                            .filter(|f| f.meta.smallest.as_slice() <= key)
                            .into_iter(),
                    )
                };
                r
            })
    }
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<FileHandle>> {
        self.levels.iter().flatten()
    }
}

/// Consistent view of a column family: memtables + files.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Oldest first.
    pub imms: Vec<Arc<Memtable>>,
    pub levels: Arc<Levels>,
}

pub(crate) struct CfInner {
    pub id: u64,
    pub name: Mutex<String>,
    pub opts: CfOptions,
    pub dropped: AtomicBool,
    pub sv: RwLock<Arc<SuperVersion>>,
    pub db_uid: u64,
    /// One compaction at a time per column family.
    pub compaction_lock: Mutex<()>,
    /// Round-robin compaction pointer (largest key compacted) per level.
    pub compact_ptr: Mutex<Vec<Vec<u8>>>,
    /// The database's memtable size (sizes each memtable's key filter).
    pub write_buffer_size: usize,
}

impl CfInner {
    pub(crate) fn new(
        id: u64,
        name: String,
        opts: CfOptions,
        levels: Levels,
        db_uid: u64,
        write_buffer_size: usize,
    ) -> CfInner {
        CfInner {
            id,
            name: Mutex::new(name),
            opts,
            dropped: AtomicBool::new(false),
            sv: RwLock::new(Arc::new(SuperVersion {
                mem: Arc::new(Memtable::with_filter(write_buffer_size)),
                imms: Vec::new(),
                levels: Arc::new(levels),
            })),
            db_uid,
            compaction_lock: Mutex::new(()),
            compact_ptr: Mutex::new(vec![Vec::new(); NUM_LEVELS]),
            write_buffer_size,
        }
    }

    /// An empty memtable for this column family.
    pub(crate) fn new_memtable(&self) -> Memtable {
        Memtable::with_filter(self.write_buffer_size)
    }
}

impl CfInner {
    pub(crate) fn current(&self) -> Arc<SuperVersion> {
        self.sv.read().clone()
    }
}

/// Handle to a column family. Cheap to clone; stays valid after the column
/// family is dropped (operations then fail with `ColumnFamilyNotFound`).
#[derive(Clone)]
pub struct Cf {
    pub(crate) inner: Arc<CfInner>,
}

impl Cf {
    /// Current name (follows renames).
    pub fn name(&self) -> String {
        self.inner.name.lock().clone()
    }
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    /// The options the column family was created with.
    pub fn options(&self) -> CfOptions {
        self.inner.opts.clone()
    }
}

impl std::fmt::Debug for Cf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cf({}, {:?})", self.inner.id, self.name())
    }
}

/// Concatenating iterator over the sorted, non-overlapping files of one level
/// (L1+). Opens one table iterator at a time.
pub(crate) struct LevelIter {
    files: Vec<Arc<FileHandle>>,
    idx: usize,
    cur: Option<TableIter>,
    err: Option<Error>,
}

impl LevelIter {
    pub(crate) fn new(files: Vec<Arc<FileHandle>>) -> LevelIter {
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
                self.cur = Some(TableIter::new(f.table.clone()));
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
