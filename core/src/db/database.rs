//! The database: the `Db` facade, `DbInner` (its parts), column families,
//! reads, memtable rotation and the WAL lifecycle.

use super::background::Background;
use super::commit::{CommitPipeline, DeferredPut};
use super::open::new_wal_segment;
use super::prepared::{PreparedState, PreparedTxn};
use crate::bytes::SharedBytes;
use crate::compaction::leveled as compaction;
use crate::error::{Error, Result};
use crate::key::{Kind, MAX_SEQ};
use crate::memtable::buffer::Memtable;
use crate::options::{CfOptions, CfStats, DbOptions, Isolation, SyncMode};
use crate::table::cache::BlockCache;
use crate::table::sst::{self, Table};
use crate::version::levels::{Cf, CfInner, Levels, SuperVersion};
use crate::version::manifest::{EditOp, ManifestWriter, State};
use crate::version::snapshots::{SnapGuard, Snapshots};
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Immutable memtables per column family before writers stall.
pub(crate) const MAX_IMMS: usize = 4;

/// A table file or value log file quarantined at open (see
/// [`Db::quarantined_files`]).
#[derive(Clone, Debug)]
pub struct QuarantinedFile {
    /// Name of its column family.
    pub cf: String,
    pub path: PathBuf,
    /// The error reads of its key range (of its values) get.
    pub error: String,
    /// A value log file (else a table file).
    pub value_log: bool,
}

/// (column family id, user key).
pub(crate) type LockKey = (u64, Vec<u8>);

/// Conflict-check sequence of a key of a spilled write set: (cf, key) -> seq.
pub(crate) type CheckSeq<'a> = dyn Fn(u64, &[u8]) -> u64 + Sync + 'a;

/// The `.prep` files of a prepared spilled write set: (cf, table).
pub(crate) type PrepFiles = Vec<(u64, Arc<Table>)>;

pub(crate) struct DbInner {
    pub(super) dir: PathBuf,
    pub(super) opts: DbOptions,
    pub(super) uid: u64,
    pub(super) cache: Arc<BlockCache>,
    pub(super) cfs: RwLock<BTreeMap<u64, Arc<CfInner>>>,
    pub(super) ddl: Mutex<()>,
    /// The commit queue, the WAL writer, durability and visibility.
    pub(super) commit: CommitPipeline,
    pub(super) manifest: Mutex<(ManifestWriter, State)>,
    pub(super) next_file: AtomicU64,
    /// Live snapshots (the versions compaction keeps).
    pub(super) snapshots: Arc<Snapshots>,
    pub(super) flush_lock: Mutex<()>,
    /// Called by `flush_pending` after each memtable it flushes.
    #[cfg(test)]
    pub(super) flush_hook: Mutex<Option<super::flush::tests::FlushHook>>,
    /// Background threads, flush requests, the last background failure.
    pub(super) bg: Background,
    pub(super) closed: AtomicBool,
    pub(super) poisoned: AtomicBool,
    /// What the open skipped of a damaged directory (`DbOptions::force_recovery`).
    pub(super) recovery_notes: Vec<String>,
    /// WAL segments of an earlier run kept for families whose key was
    /// unavailable at open (see `Replayed::held`): never removed while this
    /// database is open, copied by checkpoints.
    pub(super) held_wal: Vec<u64>,
    pub(super) lock_file: Mutex<Option<File>>,
    pub(super) locks: Arc<crate::txn::lock::LockManager>,
    pub(super) next_txn_id: AtomicU64,
    pub(super) prepared: Mutex<PreparedState>,
    /// Signalled when a prepared transaction's `Txn` hands it over
    /// (`detach_prepared`), for resolutions waiting on that.
    pub(super) prepared_detached: parking_lot::Condvar,
    /// Default spill threshold of new transactions' write sets (bytes).
    pub(super) spill_threshold: std::sync::atomic::AtomicUsize,
    /// `use_direct_reads` on and accepted by the filesystem.
    pub(super) dio: Option<Arc<crate::fsutil::DirectIo>>,
    /// Garbage ratio (per mille) at which a value log file is collected.
    pub(super) vlog_gc_permille: AtomicU64,
    /// Rate limit of background compaction while no write waits for it.
    pub(super) pacer: crate::compaction::pacer::Pacer,
}

/// Default garbage ratio at which a value log file's live values are
/// relocated (`Db::set_vlog_gc_ratio`).
pub const DEFAULT_VLOG_GC_RATIO: f64 = 0.5;

/// Default write-set spill threshold (accounted in-memory bytes per txn).
pub const DEFAULT_SPILL_THRESHOLD: usize = 32 << 20;

pub(super) static DB_UID: AtomicU64 = AtomicU64::new(1);

/// The database handle. Cheap to clone (`Arc` inside), `Send + Sync`. The
/// database closes when the last clone is dropped, or explicitly by `close()`.
#[derive(Clone)]
pub struct Db {
    owner: Arc<DbOwner>,
}

pub(super) struct DbOwner {
    inner: Arc<DbInner>,
}

impl Drop for DbOwner {
    fn drop(&mut self) {
        let _ = self.inner.close();
    }
}

impl Db {
    /// Opens (creating if missing) the database in `dir`, replaying the WAL.
    /// Replayed data is flushed to table files before `open` returns.
    pub fn open(dir: impl AsRef<Path>, opts: DbOptions) -> Result<Db> {
        let inner = DbInner::open(dir.as_ref(), opts)?;
        let db = Db {
            owner: Arc::new(DbOwner { inner }),
        };
        db.rewrite_for_family_encryption()?;
        Ok(db)
    }

    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.owner.inner
    }

    /// Creates a column family (durable before returning). An encrypted one
    /// needs its key (`Error::KeyUnavailable`). A family named in
    /// `DbOptions::family_encryption` takes the key given there.
    pub fn create_cf(&self, name: &str, mut opts: CfOptions) -> Result<Cf> {
        if let Some((_, key)) = self
            .inner()
            .opts
            .family_encryption
            .iter()
            .find(|(n, _)| n == name)
        {
            opts.encryption_key = *key;
        }
        self.check_new_encryption(name, &opts)?;
        self.inner().create_cf(name, opts)
    }

    /// Drops a column family (durable, instant); its files are deleted right
    /// after the manifest records the drop (open iterators keep their file
    /// descriptors).
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        self.inner().drop_cf(name)
    }

    /// Renames a column family (durable, atomic).
    pub fn rename_cf(&self, from: &str, to: &str) -> Result<()> {
        self.inner().rename_cf(from, to)
    }

    pub fn cf(&self, name: &str) -> Option<Cf> {
        self.inner().find_cf(name).map(|inner| Cf { inner })
    }

    pub fn list_cfs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .inner()
            .cfs
            .read()
            .values()
            .map(|c| c.name.lock().clone())
            .collect();
        v.sort();
        v
    }

    /// Starts a transaction. Never blocks; on a closed database its operations
    /// fail with `Error::Closed`.
    pub fn begin(&self, isolation: Isolation) -> crate::Txn {
        crate::Txn::new(self.inner().clone(), isolation)
    }

    /// Flushes every memtable written before the call to table files (not
    /// the ones that writes going on meanwhile fill); blocks until done.
    pub fn flush(&self) -> Result<()> {
        self.inner().flush_all()
    }

    /// Flushes `cf`, then merges every table file overlapping the user-key
    /// range `[start, end]` (closed under overlap) into one sorted run at the
    /// deepest level among them; other files are untouched. `None` bounds are
    /// open. Blocks until done.
    pub fn compact_range(&self, cf: &Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner().compact_range(cf, start, end)
    }

    pub fn set_sync_mode(&self, mode: SyncMode) {
        self.inner().commit.set_sync_mode(mode);
        self.inner().bg.notify();
    }

    /// Changes the block cache's byte cap (a smaller one evicts at once).
    pub fn set_block_cache_size(&self, bytes: usize) {
        self.inner().cache.set_capacity(bytes);
    }

    pub fn sync_mode(&self) -> SyncMode {
        self.inner().commit.sync_mode()
    }

    /// fsyncs the current WAL segment.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner().check_open()?;
        self.inner().sync_wal()
    }

    pub fn cf_stats(&self, cf: &Cf) -> CfStats {
        self.inner().cf_stats(cf)
    }

    /// [`Db::cf_stats`] without the per-level lists and the pending compaction
    /// estimate (those stay empty / 0): sizes and counts only, cheap enough to
    /// ask on every statement.
    pub fn cf_sizes(&self, cf: &Cf) -> CfStats {
        self.inner().cf_sizes(cf)
    }

    /// The engine's counters (see [`crate::Metrics`]) and this database's gauges.
    pub fn metrics(&self) -> crate::Metrics {
        self.inner().metrics()
    }

    /// Estimated number of entries in `[start, end)` from memtable walks (capped)
    /// and table index blocks; never scans table data.
    pub fn approximate_keys_in_range(
        &self,
        cf: &Cf,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> u64 {
        self.inner().approximate_keys_in_range(cf, start, end)
    }

    /// About `n` user keys spread evenly (by entries) over the whole key range
    /// of `cf`, in order, from the memtables' skiplist towers and the tables'
    /// index blocks: no data block is read. Seeking to each and reading a few
    /// entries samples the whole range (ANALYZE statistics of a large index),
    /// where the first entries of a scan would be one corner of it.
    pub fn sample_keys(&self, cf: &Cf, n: usize) -> Vec<Vec<u8>> {
        self.inner().sample_keys(cf, n)
    }

    /// Stops background threads and syncs the WAL. Later calls fail with `Closed`.
    pub fn close(&self) -> Result<()> {
        self.inner().close()
    }

    /// Sequence number of the latest visible commit.
    pub fn latest_sequence(&self) -> u64 {
        self.inner().commit.visible_seq()
    }

    /// True if an unresolved prepared (2PC) transaction wrote a key of `cf`.
    pub fn has_prepared_writes(&self, cf: &Cf) -> bool {
        let id = cf.id();
        self.inner()
            .prepared
            .lock()
            .by_xid
            .values()
            .any(|e| e.keys.iter().any(|(c, _)| *c == id))
    }

    /// Prepared (2PC) transactions that no live [`crate::Txn`] owns: found in
    /// the WAL at open (prepared before a crash / shutdown and not resolved),
    /// or whose `Txn` was dropped while prepared. Their keys stay locked
    /// (exclusive) until [`Db::commit_prepared`] / [`Db::rollback_prepared`].
    pub fn recover_prepared(&self) -> Vec<PreparedTxn> {
        let p = self.inner().prepared.lock();
        let mut v: Vec<PreparedTxn> = p
            .by_xid
            .iter()
            .filter_map(|(x, e)| {
                e.ops
                    .as_ref()
                    .filter(|_| !e.resolving)
                    .map(|ops| PreparedTxn {
                        xid: x.clone(),
                        writes: if e.spill.is_empty() {
                            ops.len()
                        } else {
                            e.keys.len()
                        },
                    })
            })
            .collect();
        v.sort_by(|a, b| a.xid.cmp(&b.xid));
        v
    }

    /// Commits a prepared transaction listed by [`Db::recover_prepared`]
    /// (durable per the sync mode, then visible; releases its locks).
    /// `Error::UnknownXid` if no such unresolved, detached xid exists.
    pub fn commit_prepared(&self, xid: &[u8]) -> Result<()> {
        self.inner().resolve_detached(xid, true, Duration::ZERO)
    }

    /// As [`Db::commit_prepared`] (`commit`) or [`Db::rollback_prepared`], but an
    /// xid still owned by a live `Txn` is waited for, up to `wait`, until that
    /// `Txn` is dropped. For a server that lets another session resolve an xid
    /// as soon as its own session starts to go away, before that session's
    /// transaction object is released.
    pub fn resolve_prepared_waiting(&self, xid: &[u8], commit: bool, wait: Duration) -> Result<()> {
        self.inner().resolve_detached(xid, commit, wait)
    }

    /// Rolls back a prepared transaction listed by [`Db::recover_prepared`]
    /// (releases its locks). `Error::UnknownXid` if unknown.
    pub fn rollback_prepared(&self, xid: &[u8]) -> Result<()> {
        self.inner().resolve_detached(xid, false, Duration::ZERO)
    }

    /// Queues a blind put of `key` in `cf` and returns without waiting: no
    /// conflict check, no fsync of its own. The next commit group writes it,
    /// ahead of every commit submitted after this call returns, so it is
    /// durable no later than they are (and always before a spilled commit or
    /// prepare that follows). Meant for counters that must never go back
    /// after a crash: while the put in `pending` has not been taken by a group
    /// yet, a new put of the same key just replaces its value.
    pub fn put_deferred(
        &self,
        cf: &Cf,
        key: &[u8],
        value: &[u8],
        pending: &mut Option<DeferredPut>,
    ) -> Result<()> {
        self.inner().put_deferred(&cf.inner, key, value, pending)
    }

    /// Waits until everything queued for the commit groups before this call
    /// (deferred puts included) has been written to the WAL.
    pub fn write_deferred(&self) {
        self.inner().drain_queue()
    }

    /// Number of WAL fsyncs issued by commit groups since open (statistics).
    pub fn wal_sync_count(&self) -> u64 {
        self.inner().commit.wal_sync_count()
    }

    /// Garbage ratio (0..=1, default 0.5) at which a value log file's live
    /// values are relocated and the file reclaimed.
    pub fn set_vlog_gc_ratio(&self, ratio: f64) {
        let r = if ratio.is_finite() {
            ratio.clamp(0.0, 1.0)
        } else {
            DEFAULT_VLOG_GC_RATIO
        };
        self.inner()
            .vlog_gc_permille
            .store((r * 1000.0).round() as u64, Ordering::Relaxed);
    }

    /// Bytes per second a background compaction may merge while reads wait
    /// on the disk and no write waits for it (default
    /// [`crate::DEFAULT_COMPACTION_RATE`]; 0 = never paced). Without readers
    /// going to disk, from 8 L0 files on, and for 5 s after a flush or a
    /// write stall, compaction runs unpaced; see `pacer.rs`.
    pub fn set_compaction_rate(&self, bytes_per_sec: u64) {
        self.inner().pacer.set_rate(bytes_per_sec);
    }

    /// Runs value log garbage collection of `cf` now (the compaction threads
    /// also do it when no compaction is due): files without pointers are
    /// removed, tables pointing into files above the GC ratio are rewritten
    /// with those values relocated. Returns the number of table rewrites.
    pub fn gc_value_log(&self, cf: &Cf) -> Result<usize> {
        let inner = self.inner();
        inner.check_writable()?;
        inner.check_cf(cf)?;
        inner.compaction().gc_value_log(&cf.inner, None)
    }

    /// `OPTIMIZE TABLE` of one column family: flushes every memtable (so
    /// that no WAL segment stays only because a small column family, such as
    /// the catalog, still has records in it: the WAL is then emptied), merges
    /// all the family's files into one sorted run (as `compact_range(cf,
    /// None, None)`), then relocates the live values of every value log file
    /// holding any garbage (not only those above the GC ratio), so that
    /// afterwards its files hold only what the newest versions and the live
    /// snapshots need. Costs a rewrite of the values of such files; InnoDB's
    /// OPTIMIZE rebuilds the whole table.
    pub fn optimize(&self, cf: &Cf) -> Result<()> {
        let inner = self.inner();
        inner.check_writable()?;
        inner.check_cf(cf)?;
        inner.flush_all()?;
        inner
            .compaction()
            .compact_range_files(&cf.inner, None, None, Some(0))?;
        inner.compaction().gc_value_log(&cf.inner, Some(0))?;
        Ok(())
    }

    /// Whether reads use `O_DIRECT` (`DbOptions::use_direct_reads` and the
    /// filesystem accepted it; `false` after a fallback to buffered reads).
    pub fn direct_reads_active(&self) -> bool {
        self.inner()
            .dio
            .as_ref()
            .is_some_and(|d| d.enabled.load(Ordering::Relaxed))
    }

    /// Number of reads (table blocks, value log records) served with `O_DIRECT`.
    pub fn direct_read_count(&self) -> u64 {
        self.inner()
            .dio
            .as_ref()
            .map_or(0, |d| d.reads.load(Ordering::Relaxed))
    }

    /// Sets the write-set spill threshold of transactions begun from now on
    /// (accounted in-memory bytes of a txn's write set, see
    /// [`crate::Txn::write_set_bytes`]; default 32 MiB). A write set growing
    /// past it is written to sorted run files; such a transaction commits by
    /// adding table files in one manifest edit (no WAL record); its 2PC
    /// prepare writes durable `.prep` files named in the manifest.
    pub fn set_spill_threshold(&self, bytes: usize) {
        self.inner()
            .spill_threshold
            .store(bytes.max(1), Ordering::Relaxed);
    }

    /// Installs (or removes, `None`) the observer of lock waits (see
    /// [`crate::LockWaitObserver`]); transaction ids are [`crate::Txn::id`].
    pub fn set_lock_wait_observer(&self, observer: Option<crate::LockWaitObserver>) {
        self.inner().locks.set_observer(observer);
    }

    /// Sets the lock escalation threshold (0 = never escalate; default
    /// 100000): a transaction holding more row locks than this in one column
    /// family replaces them by one table lock of the strongest mode it holds
    /// there (see [`crate::Txn::lock`]). Takes effect at once.
    pub fn set_lock_escalation_threshold(&self, locks: usize) {
        self.inner().locks.set_escalation_threshold(locks);
    }

    /// Table files set aside when the database opened because their footer,
    /// index, filter or props block could not be read or verified (or the
    /// file was missing), and value log files that could not be opened.
    /// Reads of their key ranges (of the values in them) fail with
    /// `Error::Corruption`; dropping the column family removes them.
    pub fn quarantined_files(&self) -> Vec<QuarantinedFile> {
        let cfs: Vec<Arc<CfInner>> = self.inner().cfs.read().values().cloned().collect();
        let mut out = Vec::new();
        for cf in cfs {
            let sv = cf.current();
            for f in sv.levels.all() {
                if f.table.broken.is_some() {
                    out.push(QuarantinedFile {
                        cf: cf.name.lock().clone(),
                        path: f.table.path.clone(),
                        error: f.table.broken_error().to_string(),
                        value_log: false,
                    });
                }
            }
            for v in sv.levels.vlogs.values() {
                if let Some(why) = v.broken() {
                    out.push(QuarantinedFile {
                        cf: cf.name.lock().clone(),
                        path: v.path.clone(),
                        error: why.to_string(),
                        value_log: true,
                    });
                }
            }
        }
        out
    }

    /// The last failure of a background memtable flush or compaction, while
    /// it lasts (cleared when a background job succeeds again). Such jobs
    /// are retried with a growing pause; meanwhile nothing is lost.
    pub fn background_error(&self) -> Option<String> {
        self.inner().bg.error_text()
    }

    /// One line per thing the open skipped of a damaged directory under
    /// `DbOptions::force_recovery` (a WAL tail, a prepared transaction, manifest
    /// edits), each naming the file; empty otherwise.
    pub fn recovery_notes(&self) -> Vec<String> {
        self.inner().recovery_notes.clone()
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner().dir
    }

    /// The keys of encrypted files (for files the caller writes itself, such as
    /// export files).
    pub fn keyring(&self) -> &crate::Keyring {
        &self.inner().opts.keys
    }
}

impl DbInner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.opts.force_recovery > 0 {
            return Err(Error::ReadOnly {
                level: self.opts.force_recovery,
            });
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.commit.sync_current().inspect_err(|_| self.poison())
    }

    pub(crate) fn find_cf(&self, name: &str) -> Option<Arc<CfInner>> {
        self.cfs
            .read()
            .values()
            .find(|c| *c.name.lock() == name)
            .cloned()
    }

    /// Validates a handle: belongs to this db and not dropped.
    pub(crate) fn check_cf(&self, cf: &Cf) -> Result<()> {
        if cf.inner.db_uid != self.uid || cf.inner.dropped.load(Ordering::Acquire) {
            return Err(Error::ColumnFamilyNotFound(cf.name()));
        }
        Ok(())
    }

    pub(super) fn create_cf(&self, name: &str, opts: CfOptions) -> Result<Cf> {
        self.check_writable()?;
        if name.is_empty() || name.len() > 1024 {
            return Err(Error::InvalidArgument("column family name length".into()));
        }
        if opts.block_size == 0 || opts.block_size > (64 << 20) {
            return Err(Error::InvalidArgument("block_size".into()));
        }
        let _g = self.ddl.lock();
        if self.find_cf(name).is_some() {
            return Err(Error::ColumnFamilyExists(name.to_string()));
        }
        let id = {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            let id = st.next_cf_id.max(1);
            let ops = vec![
                EditOp::CreateCf {
                    id,
                    name: name.to_string(),
                    opts: opts.clone(),
                },
                EditOp::NextCfId(id + 1),
            ];
            self.apply_manifest(w, st, &ops)?;
            id
        };
        let inner = Arc::new(CfInner::new(
            id,
            name.to_string(),
            opts,
            Levels::new(),
            self.uid,
            self.opts.write_buffer_size,
        ));
        self.cfs.write().insert(id, inner.clone());
        Ok(Cf { inner })
    }

    pub(crate) fn apply_manifest(
        &self,
        w: &mut ManifestWriter,
        st: &mut State,
        ops: &[EditOp],
    ) -> Result<()> {
        let mut st2 = st.clone();
        st2.apply(ops)
            .map_err(|d| Error::InvalidArgument(format!("manifest edit rejected: {d}")))?;
        st2.next_file = st2.next_file.max(self.next_file.load(Ordering::SeqCst));
        let r = w.append(ops, &st2, || self.next_file.fetch_add(1, Ordering::SeqCst));
        // A write the writer could cut back (no space, ...) leaves the
        // manifest whole: the edit simply did not happen. Anything else
        // (fsync) refuses writes until reopen.
        if r.is_err() && w.broken {
            self.poison();
        }
        r?;
        *st = st2;
        Ok(())
    }

    /// Starts a new manifest from the current state (`ManifestWriter::roll`).
    pub(crate) fn roll_manifest(&self) -> Result<()> {
        let mut m = self.manifest.lock();
        let (w, st) = &mut *m;
        let n = self.next_file.fetch_add(1, Ordering::SeqCst);
        let mut st2 = st.clone();
        st2.next_file = st2.next_file.max(self.next_file.load(Ordering::SeqCst));
        let r = w.roll(&st2, n);
        if r.is_err() && w.broken {
            self.poison();
        }
        r?;
        *st = st2;
        Ok(())
    }

    pub(super) fn drop_cf(&self, name: &str) -> Result<()> {
        self.check_writable()?;
        let _g = self.ddl.lock();
        let cf = self
            .find_cf(name)
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.to_string()))?;
        {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            self.apply_manifest(w, st, &[EditOp::DropCf(cf.id)])?;
        }
        cf.dropped.store(true, Ordering::Release);
        self.cfs.write().remove(&cf.id);
        // Reclaim space now: unlinked files stay readable through open descriptors.
        let sv = cf.current();
        for f in sv.levels.all() {
            let _ = crate::io::remove_file(&f.table.path);
            self.cache.evict_file(f.meta.file_no);
        }
        // Value log files go when the last reader of the old version does.
        for v in sv.levels.vlogs.values() {
            v.mark_obsolete();
            self.cache.evict_file(v.no);
        }
        *cf.sv.write() = Arc::new(SuperVersion {
            mem: Arc::new(cf.new_memtable()),
            imms: Vec::new(),
            levels: Arc::new(Levels::new()),
        });
        self.commit.notify_stall();
        self.purge_wal();
        Ok(())
    }

    pub(super) fn rename_cf(&self, from: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        if to.is_empty() || to.len() > 1024 {
            return Err(Error::InvalidArgument("column family name length".into()));
        }
        let _g = self.ddl.lock();
        let cf = self
            .find_cf(from)
            .ok_or_else(|| Error::ColumnFamilyNotFound(from.to_string()))?;
        if self.find_cf(to).is_some() {
            return Err(Error::ColumnFamilyExists(to.to_string()));
        }
        {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            self.apply_manifest(w, st, &[EditOp::RenameCf(cf.id, to.to_string())])?;
        }
        *cf.name.lock() = to.to_string();
        Ok(())
    }

    // ------------------------------------------------------------ snapshots

    pub(crate) fn snapshot(&self) -> Arc<SnapGuard> {
        self.snapshots.take(self.commit.visible_seq_cell())
    }

    /// Oldest sequence any live snapshot can read at.
    pub(crate) fn oldest_snapshot(&self) -> u64 {
        self.snapshots.oldest(self.commit.visible_seq_cell())
    }

    pub(crate) fn live_snapshots(&self) -> Vec<u64> {
        self.snapshots.live()
    }

    // ------------------------------------------------------------ reads

    /// Value of `key` at snapshot `snap` (raw: may be a value pointer). A
    /// memtable's value is shared, not copied (large values stay whole in
    /// memtables until flushed).
    pub(crate) fn get_raw(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        snap: u64,
    ) -> Result<Option<(u64, Kind, SharedBytes)>> {
        // A long memtable value is a shared buffer: handed out without a copy.
        if let Some(e) = sv.mem.get(key, snap) {
            return Ok(Some((e.seq(), e.kind(), e.value_bytes())));
        }
        for m in sv.imms.iter().rev() {
            if let Some(e) = m.get(key, snap) {
                return Ok(Some((e.seq(), e.kind(), e.value_bytes())));
            }
        }
        for f in sv.levels.candidates(key) {
            if f.meta.min_seq > snap {
                continue;
            }
            if let Some((s, k, v)) = f.table.get(key, snap)? {
                return Ok(Some((s, k, SharedBytes::from_vec(v))));
            }
        }
        Ok(None)
    }

    /// The value of `key` at `snap`; a separated value is shared with the
    /// block cache (see `vlog::resolve`), not copied.
    pub(crate) fn get_at(
        &self,
        cf: &CfInner,
        key: &[u8],
        snap: u64,
    ) -> Result<Option<SharedBytes>> {
        // One version for the lookup and the pointer: it keeps the value log
        // file the pointer names alive.
        let sv = cf.current();
        match self.get_raw(&sv, key, snap)? {
            None => Ok(None),
            Some((_, Kind::Delete, _)) => Ok(None),
            Some((_, Kind::Put, v)) => Ok(Some(v)),
            Some((_, Kind::ValuePtr, p)) => {
                crate::vlog::file::resolve(&sv.levels.vlogs, &self.dir, Some(&self.cache), &p)
                    .map(Some)
            }
        }
    }

    /// A resolver of value pointers through the value log files of `levels`
    /// (held by the resolver, so they stay readable while it lives).
    pub(crate) fn resolver(&self, levels: Arc<Levels>) -> Arc<crate::iter::ValueResolver> {
        let dir = self.dir.clone();
        let cache = self.cache.clone();
        Arc::new(move |p: &[u8]| crate::vlog::file::resolve(&levels.vlogs, &dir, Some(&cache), p))
    }

    /// Sequence of the newest version of `key` if it is newer than `snap`.
    pub(in crate::db) fn newer_than(&self, cf: &CfInner, key: &[u8], snap: u64) -> Result<bool> {
        let sv = cf.current();
        if let Some(s) = sv.mem.latest_seq(key) {
            return Ok(s > snap);
        }
        for m in sv.imms.iter().rev() {
            if let Some(s) = m.latest_seq(key) {
                return Ok(s > snap);
            }
        }
        if sv.levels.max_seq <= snap {
            return Ok(false);
        }
        for f in sv.levels.candidates(key) {
            if let Some((s, _, _)) = f.table.get(key, MAX_SEQ)? {
                return Ok(s > snap);
            }
        }
        Ok(false)
    }

    // ------------------------------------------------------------ commit

    /// Moves the memtable of `cf` to the immutable list and starts a new WAL
    /// segment. Caller holds the write lock.
    pub(in crate::db) fn rotate(
        &self,
        w: &mut crate::db::commit::WriteState,
        cf: &Arc<CfInner>,
    ) -> Result<()> {
        if cf.current().mem.is_empty() {
            return Ok(());
        }
        self.new_segment(w)?;
        {
            let mut g = cf.sv.write();
            let mut imms = g.imms.clone();
            imms.push(g.mem.clone());
            *g = Arc::new(SuperVersion {
                mem: Arc::new(cf.new_memtable()),
                imms,
                levels: g.levels.clone(),
            });
        }
        self.request_flush();
        Ok(())
    }

    pub(super) fn new_segment(&self, w: &mut crate::db::commit::WriteState) -> Result<()> {
        let Some(old) = w.wal.as_mut() else {
            return Err(Error::Closed);
        };
        if old.size == 0 {
            return Ok(());
        }
        if let Err(e) = old.seal() {
            self.poison();
            return Err(e);
        }
        let no = self.next_file.fetch_add(1, Ordering::SeqCst);
        let nw = new_wal_segment(&self.dir, no, &self.opts)?;
        self.commit.switch_segment(w, nw);
        Ok(())
    }

    pub(in crate::db) fn maybe_rotate_for_wal_size(&self, w: &mut crate::db::commit::WriteState) {
        let limit = (self.opts.write_buffer_size as u64)
            .saturating_mul(4)
            .max(64 << 20);
        let oldest_max = {
            let segs = self.commit.closed_segments();
            if segs.len() < 2 || segs.iter().map(|s| s.bytes).sum::<u64>() < limit {
                return;
            }
            segs.first().map_or(0, |s| s.max_seq)
        };
        let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
        for cf in cfs {
            let sv = cf.current();
            if !sv.mem.is_empty() && sv.mem.min_seq() <= oldest_max {
                let _ = self.rotate(w, &cf);
            }
        }
    }

    pub(crate) fn request_flush(&self) {
        self.bg.request_flush();
    }

    // ------------------------------------------------------------ flush

    // ------------------------------------------------------------ stats

    pub(super) fn cf_stats(&self, cf: &Cf) -> CfStats {
        let mut st = self.cf_sizes(cf);
        let sv = cf.inner.current();
        for l in &sv.levels.levels {
            st.files_per_level.push(l.len() as u64);
            st.bytes_per_level
                .push(l.iter().map(|f| f.meta.size).sum::<u64>());
            st.file_names_per_level
                .push(l.iter().map(|f| sst::table_name(f.meta.file_no)).collect());
        }
        st.pending_compaction_bytes = self.pending_compaction_bytes(&sv.levels);
        st
    }

    /// The sizes and counts of [`CfStats`] (no per-level lists, no pending
    /// compaction): cheap enough for every statement (the handler's `info()`).
    /// The manifest lock is taken only if the family has value log files.
    pub(super) fn cf_sizes(&self, cf: &Cf) -> CfStats {
        let sv = cf.inner.current();
        let mut st = CfStats {
            memtable_bytes: sv.mem.size() as u64,
            immutable_memtables: sv.imms.len() as u64,
            ..CfStats::default()
        };
        for m in sv.imms.iter().chain(std::iter::once(&sv.mem)) {
            st.approx_keys += m.entries();
            st.approx_bytes += m.size() as u64;
        }
        st.memtable_bytes += sv.imms.iter().map(|m| m.size() as u64).sum::<u64>();
        if !sv.levels.vlogs.is_empty() {
            let m = self.manifest.lock();
            for (n, v) in &m.1.vlog_files {
                if sv.levels.vlogs.contains_key(n) {
                    st.vlog_files += 1;
                    st.vlog_bytes += v.size;
                    st.vlog_garbage_bytes += v.garbage;
                    if v.format == crate::vlog::file::VlogFormat::WalSegment {
                        st.vlog_wal_files += 1;
                    }
                }
            }
        }
        for f in sv.levels.all() {
            st.table_files += 1;
            st.approx_keys += f.meta.num_entries;
            st.approx_bytes += f.meta.size;
        }
        st
    }

    pub(super) fn sample_keys(&self, cf: &Cf, n: usize) -> Vec<Vec<u8>> {
        if n == 0 {
            return Vec::new();
        }
        let sv = cf.inner.current();
        // Candidates from every source (twice as many as wanted, so that
        // none stands for more than a step), each weighted by the entries it
        // stands for, then one every (total / n) entries in key order.
        let mut cands: Vec<(&[u8], u64)> = Vec::new();
        for m in sv.imms.iter().chain(std::iter::once(&sv.mem)) {
            let (keys, w) = m.spread_keys(2 * n);
            cands.extend(keys.into_iter().map(|k| (k, w)));
        }
        for f in sv.levels.all() {
            let (keys, w) = f.table.spread_keys(2 * n);
            cands.extend(keys.into_iter().map(|k| (k, w)));
        }
        cands.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let total: u64 = cands.iter().map(|c| c.1).sum();
        let step = (total / n as u64).max(1);
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(n);
        let mut acc = 0u64;
        let mut next = 0u64;
        for (k, w) in cands {
            if acc >= next && out.last().map_or(true, |l| l.as_slice() != k) {
                out.push(k.to_vec());
                next = acc + step;
            }
            acc += w;
        }
        out
    }

    pub(super) fn approximate_keys_in_range(
        &self,
        cf: &Cf,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> u64 {
        let sv = cf.inner.current();
        let mut n = 0;
        for m in sv.imms.iter().chain(std::iter::once(&sv.mem)) {
            n += m.count_range(start, end, 100_000);
        }
        for f in sv.levels.all() {
            if let Some(s) = start {
                if f.meta.largest.as_slice() < s {
                    continue;
                }
            }
            if let Some(e) = end {
                if f.meta.smallest.as_slice() >= e {
                    continue;
                }
            }
            n += Table::entries_in_range(&f.table, start, end);
        }
        n
    }

    // ------------------------------------------------------------ close

    pub(crate) fn close(&self) -> Result<()> {
        if !self.closed.load(Ordering::SeqCst) {
            // Write what is still queued (deferred puts).
            self.drain_queue();
        }
        if self.closed.swap(true, Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        self.bg.shut_down();
        self.commit.notify_stall();
        self.bg.join();
        // Wait out an in-flight commit group, then sync.
        let mut w = self.commit.lock_settled();
        let r = self.commit.close_wal(&mut w);
        drop(w);
        self.lock_file.lock().take();
        r
    }

    pub(crate) fn compact_range(
        &self,
        cf: &Cf,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.check_writable()?;
        self.check_cf(cf)?;
        self.flush_cf(&cf.inner)?;
        self.compaction()
            .compact_range_files(&cf.inner, start, end, None)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
        self.commit.notify_stall();
    }
}

impl DbInner {
    /// The parts of the database a compaction job works with.
    pub(crate) fn compaction(&self) -> compaction::Ctx<'_> {
        compaction::Ctx {
            opts: &self.opts,
            dir: &self.dir,
            cache: &self.cache,
            dio: &self.dio,
            next_file: &self.next_file,
            manifest: &self.manifest,
            vlog_gc_permille: &self.vlog_gc_permille,
            pacer: &self.pacer,
            host: self,
        }
    }
}

/// What transactions (`txn/`) use of the database besides reads and
/// commits: named operations, not its fields.
impl DbInner {
    /// A fresh transaction id (lock owner).
    pub(crate) fn new_txn_id(&self) -> u64 {
        self.next_txn_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Default spill threshold of new transactions' write sets (bytes).
    pub(crate) fn spill_threshold(&self) -> usize {
        self.spill_threshold.load(Ordering::Relaxed)
    }

    pub(crate) fn locks(&self) -> &Arc<crate::txn::lock::LockManager> {
        &self.locks
    }

    /// The background compaction pacer (tests set its thresholds).
    #[cfg(test)]
    pub(crate) fn pacer(&self) -> &crate::compaction::pacer::Pacer {
        &self.pacer
    }

    /// The newest sequence number visible to readers.
    pub(crate) fn visible_seq(&self) -> u64 {
        self.commit.visible_seq()
    }

    /// Writes `mem` (a write set) to a new spill run file; `cf_encrypted`:
    /// its family is encrypted (the run is also encrypted when the log is).
    pub(crate) fn write_spill_run(
        &self,
        mem: &Memtable,
        base: u64,
        cf_encrypted: bool,
    ) -> Result<crate::txn::spill::Run> {
        let no = self.next_file.fetch_add(1, Ordering::SeqCst);
        crate::txn::spill::Run::write(
            &self.dir,
            no,
            mem,
            base,
            &self.cache,
            cf_encrypted || self.opts.log_encryption_key.is_some(),
        )
    }
}

impl compaction::Host for DbInner {
    fn apply_manifest(&self, w: &mut ManifestWriter, st: &mut State, ops: &[EditOp]) -> Result<()> {
        DbInner::apply_manifest(self, w, st, ops)
    }
    fn is_poisoned(&self) -> bool {
        DbInner::is_poisoned(self)
    }
    fn live_snapshots(&self) -> Vec<u64> {
        DbInner::live_snapshots(self)
    }
    fn oldest_snapshot(&self) -> u64 {
        DbInner::oldest_snapshot(self)
    }
    fn notify_stall(&self) {
        self.commit.notify_stall();
    }
    fn is_shutdown(&self) -> bool {
        self.bg.is_shutdown()
    }
}
