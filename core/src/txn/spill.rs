//! Spilled transaction write sets: when a transaction's in-memory write set
//! exceeds the spill threshold, each column family's write-set skiplist is
//! written to a sorted *run* file and the in-memory part starts empty.
//!
//! ## Format
//! `NNNNNN.spill` (number from the database's file counter) is a table file
//! in the `sst.rs` format, private to one transaction: every entry's sequence
//! is the transaction's *op number* (the pseudo-sequence minus `WS_BASE`),
//! all versions are kept (savepoints), no compression, 64 KiB blocks, bloom
//! filter 10 bits/key. Spill files are never referenced by the manifest and
//! are not durable (no crash needs them): they are deleted when the last
//! reader of the run goes away and at every open. A run of an encrypted
//! column family, or any run when the WAL is encrypted
//! (`DbOptions::log_encryption_key`), is an encrypted table (version 2)
//! under a random key of its own that only this process knows.
//!
//! A run carries a *limit*: entries with an op above it were rolled back
//! (`rollback_to` lowers the limit instead of rewriting the file; runs made
//! entirely after the savepoint are dropped).
//!
//! ## Prepared spilled write sets
//! `Txn::prepare` of a spilled write set writes, per column family, the
//! merged write set (newest own version of each key, tombstones kept, whole
//! values) to `NNNNNN.prep`: the same table format, every entry at sequence
//! 1, 64 KiB blocks, no compression, bloom 10 bits/key, *fsynced*,
//! encrypted (version 2) with the column family's key, else with
//! `DbOptions::log_encryption_key`, when either is set. The files
//! are named in the manifest (`PrepareSpilled {xid, (cf, file)*}`) and live
//! until the xid is resolved (`ResolveSpilled`), across restarts: at open
//! they are reopened, their keys locked, and the xid is listed by
//! `Db::recover_prepared`. Unreferenced `.prep` files are deleted at open.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{Kind, MAX_SEQ};
use crate::memtable::buffer::Memtable;
use crate::options::Compression;
use crate::table::cache::BlockCache;
use crate::table::sst::{Table, TableBuilder, TableIter};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The write set of one column family: the in-memory skiplist (newest ops)
/// plus spilled runs (older ops, oldest first). Shared with iterators, which
/// rebuild their write-set sources when `gen` changes (spill, dropped run).
pub(crate) struct WsView {
    pub mem: Arc<Memtable>,
    pub runs: Vec<Arc<Run>>,
    pub gen: u64,
}

/// True if the write set `ws` has a key `lo <= k <= hi` not in `skip`
/// (range lock requests; rolled-back entries of spilled runs count too).
pub(crate) fn ws_has_key_in(
    ws: &Mutex<WsView>,
    lo: &[u8],
    hi: Option<&[u8]>,
    skip: &[&[u8]],
) -> bool {
    let v = ws.lock();
    if v.mem.any_in(lo, hi, skip) {
        return true;
    }
    for r in &v.runs {
        let mut it = TableIter::new(r.table.clone());
        it.seek(lo, MAX_SEQ);
        while it.valid() {
            let k = it.user_key();
            if hi.is_some_and(|h| k > h) {
                break;
            }
            if !skip.contains(&k) {
                return true;
            }
            it.next();
        }
        if it.status().is_err() {
            // Unreadable run: assume a conflict (waiting is safe).
            return true;
        }
    }
    false
}

pub(crate) fn spill_path(dir: &Path, no: u64) -> PathBuf {
    dir.join(format!("{no:06}.spill"))
}

pub(crate) fn prep_path(dir: &Path, no: u64) -> PathBuf {
    dir.join(format!("{no:06}.prep"))
}

pub(crate) fn parse_prep_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".prep")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub(crate) fn parse_spill_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".spill")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// One spilled, sorted run of a write set.
pub(crate) struct Run {
    pub table: Arc<Table>,
    pub min_op: u64,
    /// Entries with op > limit are rolled back.
    pub limit: AtomicU64,
    cache: Arc<BlockCache>,
}

impl Run {
    /// Writes `mem` (entries at `base + op`) to a new run file `no`.
    pub(crate) fn write(
        dir: &Path,
        no: u64,
        mem: &Memtable,
        base: u64,
        cache: &Arc<BlockCache>,
        encrypt: bool,
    ) -> Result<Run> {
        let path = spill_path(dir, no);
        // Encrypted under a key of this process only: a run is never read
        // after it ends (its files are deleted at the next open).
        let (cipher, keys) = match encrypt {
            true => {
                let (c, k) = crate::crypto::FileCipher::ephemeral()?;
                (Some(c), k)
            }
            false => (None, crate::crypto::Keyring::default()),
        };
        let mut b = TableBuilder::create(path.clone(), 64 << 10, Compression::None, 10, cipher)?;
        let r = mem.for_each(|e| {
            b.add(
                e.user(),
                e.seq().saturating_sub(base).min(MAX_SEQ),
                e.kind(),
                e.value(),
            )
        });
        let fin = r.and_then(|_| b.finish_unsynced());
        let res = fin.and_then(|(_, props)| {
            Table::open(path.clone(), no, cache.clone(), &keys).map(|t| (t, props))
        });
        match res {
            Ok((t, props)) => Ok(Run {
                table: Arc::new(t),
                min_op: props.min_seq,
                limit: AtomicU64::new(props.max_seq),
                cache: cache.clone(),
            }),
            Err(e) => {
                let _ = crate::io::remove_file(&path);
                Err(e)
            }
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Number of entries with op in `(lo, hi]` (scan; used by `rollback_to`).
    pub(crate) fn count_ops(&self, lo: u64, hi: u64) -> Result<u64> {
        let mut it = TableIter::new(self.table.clone());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            let s = it.seq();
            if s > lo && s <= hi {
                n += 1;
            }
            it.next();
        }
        it.status()?;
        Ok(n)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = crate::io::remove_file(&self.table.path);
        self.cache.evict_file(self.table.file_no);
    }
}

/// A run seen with sequences shifted by `base` (so it merges with the
/// in-memory write set, whose entries carry `base + op`).
pub(crate) struct RunIter {
    it: TableIter,
    base: u64,
    _run: Arc<Run>,
}

impl RunIter {
    pub(crate) fn new(run: Arc<Run>, base: u64) -> RunIter {
        RunIter {
            it: TableIter::new(run.table.clone()),
            base,
            _run: run,
        }
    }
    fn map(&self, seq: u64) -> u64 {
        seq.saturating_sub(self.base).min(MAX_SEQ)
    }
}

impl InternalIterator for RunIter {
    fn valid(&self) -> bool {
        self.it.valid()
    }
    fn seek(&mut self, user: &[u8], seq: u64) {
        let s = self.map(seq);
        self.it.seek(user, s)
    }
    fn seek_for_prev(&mut self, user: &[u8], seq: u64) {
        let s = self.map(seq);
        self.it.seek_for_prev(user, s)
    }
    fn seek_to_first(&mut self) {
        self.it.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.it.seek_to_last()
    }
    fn next(&mut self) {
        self.it.next()
    }
    fn prev(&mut self) {
        self.it.prev()
    }
    fn user_key(&self) -> &[u8] {
        self.it.user_key()
    }
    fn seq(&self) -> u64 {
        self.it.seq().saturating_add(self.base)
    }
    fn kind(&self) -> Kind {
        self.it.kind()
    }
    fn value(&self) -> &[u8] {
        self.it.value()
    }
    fn status(&self) -> Result<()> {
        self.it.status()
    }
}
