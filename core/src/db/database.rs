//! The database: open/recovery, column families, commit pipeline (group
//! commit), reads, memtable rotation, flush and WAL lifecycle.

use super::background::Background;
use super::commit::{CfOps, CommitPipeline, DeferredPut, ReqKind};
use crate::bytes::SharedBytes;
use crate::compaction::leveled as compaction;
use crate::compaction::output::{create_table, finish_table, finish_vlog, VlogOutFile};
use crate::compaction::pacer::next_backoff;
use crate::error::{Error, Result};
use crate::journal::batch::{self, Op, Record};
use crate::journal::wal::{self, WalWriter};
use crate::key::{Kind, MAX_SEQ};
use crate::memtable::buffer::Memtable;
use crate::options::{CfOptions, CfStats, Compression, DbOptions, Isolation, SyncMode};
use crate::table::cache::BlockCache;
use crate::table::sst::{self, Table, TableBuilder};
use crate::version::levels::{Cf, CfInner, FileHandle, Levels, SuperVersion};
use crate::version::manifest::{self, EditOp, FileMeta, ManifestWriter, State};
use crate::version::snapshots::{SnapGuard, Snapshots};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, HashSet};
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
pub(crate) type CheckSeq<'a> = dyn Fn(u64, &[u8]) -> u64 + 'a;

/// The `.prep` files of a prepared spilled write set: (cf, table).
pub(crate) type PrepFiles = Vec<(u64, Arc<Table>)>;

/// A prepared (2PC), unresolved transaction known to the database.
pub(crate) struct PreparedEntry {
    /// Lock owner id (the `Txn` id, or a fresh id for recovered ones).
    pub(super) owner: u64,
    /// WAL segment holding its prepare record (pinned until resolution).
    pub(super) segment: u64,
    pub(super) keys: Vec<(u64, Vec<u8>)>,
    /// Write set, once no live `Txn` owns it (recovered after a restart, or
    /// the `Txn` was dropped while prepared). `None` while attached.
    pub(super) ops: Option<Vec<Op>>,
    /// A resolution is in flight.
    pub(super) resolving: bool,
    /// Prepared spilled write set: its durable `.prep` files (cf, table);
    /// empty for a prepare record in the WAL.
    pub(super) spill: Vec<(u64, Arc<Table>)>,
}

#[derive(Default)]
pub(crate) struct PreparedState {
    pub(super) by_xid: HashMap<Vec<u8>, PreparedEntry>,
    /// Keys written by prepared transactions: other commits writing them fail
    /// with `Conflict` (and their locks are held).
    pub(super) keys: HashSet<(u64, Vec<u8>)>,
}

/// A prepared, unresolved transaction (see [`Db::recover_prepared`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedTxn {
    xid: Vec<u8>,
    writes: usize,
}

impl PreparedTxn {
    /// The XA transaction id given to `Txn::prepare`.
    pub fn xid(&self) -> &[u8] {
        &self.xid
    }
    /// Number of keys it writes.
    pub fn write_count(&self) -> usize {
        self.writes
    }
}

pub(crate) struct DbInner {
    pub(super) dir: PathBuf,
    pub(super) opts: DbOptions,
    pub(super) uid: u64,
    pub(super) cache: Arc<BlockCache>,
    pub(super) cfs: RwLock<BTreeMap<u64, Arc<CfInner>>>,
    ddl: Mutex<()>,
    /// The commit queue, the WAL writer, durability and visibility.
    pub(super) commit: CommitPipeline,
    pub(super) manifest: Mutex<(ManifestWriter, State)>,
    pub(super) next_file: AtomicU64,
    /// Live snapshots (the versions compaction keeps).
    snapshots: Arc<Snapshots>,
    flush_lock: Mutex<()>,
    /// Background threads, flush requests, the last background failure.
    pub(super) bg: Background,
    closed: AtomicBool,
    poisoned: AtomicBool,
    /// What the open skipped of a damaged directory (`DbOptions::force_recovery`).
    recovery_notes: Vec<String>,
    /// WAL segments of an earlier run kept for families whose key was
    /// unavailable at open (see `Replayed::held`): never removed while this
    /// database is open, copied by checkpoints.
    pub(super) held_wal: Vec<u64>,
    lock_file: Mutex<Option<File>>,
    pub(super) locks: Arc<crate::txn::lock::LockManager>,
    pub(super) next_txn_id: AtomicU64,
    pub(super) prepared: Mutex<PreparedState>,
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

static DB_UID: AtomicU64 = AtomicU64::new(1);

/// The database handle. Cheap to clone (`Arc` inside), `Send + Sync`. The
/// database closes when the last clone is dropped, or explicitly by `close()`.
#[derive(Clone)]
pub struct Db {
    owner: Arc<DbOwner>,
}

struct DbOwner {
    inner: Arc<DbInner>,
}

impl Drop for DbOwner {
    fn drop(&mut self) {
        let _ = self.inner.close();
    }
}

/// The keys a prepared transaction wrote: (column family id, key).
type PreparedKeys = Vec<(u64, Vec<u8>)>;

/// Opens the `.prep` files of one prepared spilled write set and reads the keys
/// they hold (locked again for the prepared transaction).
fn open_prepared_spill(
    dir: &Path,
    files: &[(u64, u64)],
    cache: &Arc<BlockCache>,
    keyring: &crate::crypto::Keyring,
) -> Result<(PrepFiles, PreparedKeys)> {
    use crate::iter::InternalIterator;
    let mut tables = Vec::new();
    let mut keys = Vec::new();
    for (cf, no) in files {
        let t = Arc::new(Table::open(
            crate::txn::spill::prep_path(dir, *no),
            *no,
            cache.clone(),
            keyring,
        )?);
        let mut it = crate::table::sst::TableIter::new(t.clone());
        it.seek_to_first();
        while it.valid() {
            keys.push((*cf, it.user_key().to_vec()));
            it.next();
        }
        it.status()?;
        tables.push((*cf, t));
    }
    Ok((tables, keys))
}

fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        if let Some(n) = e.file_name().to_str() {
            v.push(n.to_string());
        }
    }
    Ok(v)
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

    /// Flushes every memtable to table files; blocks until done.
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
        self.inner().resolve_detached(xid, true)
    }

    /// Rolls back a prepared transaction listed by [`Db::recover_prepared`]
    /// (releases its locks). `Error::UnknownXid` if unknown.
    pub fn rollback_prepared(&self, xid: &[u8]) -> Result<()> {
        self.inner().resolve_detached(xid, false)
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

/// Unresolved prepares found in the WAL (xid -> write set), in xid order.
type WalPrepares = BTreeMap<Vec<u8>, Vec<Op>>;

/// Recovery phase 1: the manifest (salvaged at force_recovery >= 3), or an
/// empty state for a new directory; refuses a directory whose CURRENT is
/// gone while its files are there.
fn recover_manifest(
    dir: &Path,
    names: &[String],
    level: u8,
    notes: &mut Vec<String>,
) -> Result<(State, Option<u64>)> {
    let loaded = if level >= 3 {
        manifest::load_salvaging(dir, notes)?
    } else {
        manifest::load(dir)?
    };
    Ok(match loaded {
        Some((s, n)) => (s, Some(n)),
        None => {
            // A manifest alone is an unfinished creation (a crash, or a
            // failed write, before CURRENT first named it: the WAL comes
            // after): nothing in it to lose.
            let has_data = names.iter().any(|n| {
                sst::parse_table_name(n).is_some() || wal::parse_segment_name(n).is_some()
            });
            if has_data && names.iter().any(|n| n.starts_with("MANIFEST-"))
                || names.iter().any(|n| sst::parse_table_name(n).is_some())
            {
                return Err(Error::corruption(
                    dir.join("CURRENT"),
                    0,
                    "CURRENT missing but database files exist",
                ));
            }
            (State::default(), None)
        }
    })
}

/// Highest file number any engine file in the directory carries, so that new
/// files never reuse one (the manifest's counter may lag behind).
fn max_file_no_on_disk(names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| {
            wal::parse_segment_name(n)
                .or_else(|| sst::parse_table_name(n))
                .or_else(|| crate::vlog::file::parse_vlog_name(n))
                .or_else(|| crate::txn::spill::parse_spill_name(n))
                .or_else(|| crate::txn::spill::parse_prep_name(n))
                .or_else(|| n.strip_prefix("MANIFEST-").and_then(|s| s.parse().ok()))
        })
        .max()
        .unwrap_or(0)
}

/// O_DIRECT: on if asked for and the filesystem accepts it (probed on the
/// LOCK file); otherwise reads stay buffered.
fn probe_direct_io(dir: &Path, opts: &DbOptions) -> Result<Option<Arc<crate::fsutil::DirectIo>>> {
    Ok(if opts.use_direct_reads {
        crate::fsutil::open_direct(&dir.join("LOCK"))?.map(|_| {
            Arc::new(crate::fsutil::DirectIo {
                enabled: AtomicBool::new(true),
                reads: AtomicU64::new(0),
            })
        })
    } else {
        None
    })
}

/// Recovery phase 2: each column family of the manifest with its table and
/// value log files open (damaged ones quarantined).
fn open_column_families(
    dir: &Path,
    state: &State,
    cache: &Arc<BlockCache>,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    uid: u64,
    opts: &DbOptions,
) -> BTreeMap<u64, Arc<CfInner>> {
    let mut cfs = BTreeMap::new();
    for (id, meta) in &state.cfs {
        let mut levels = Levels::new();
        for (lvl, files) in meta.levels.iter().enumerate() {
            for fm in files {
                let path = sst::table_path(dir, fm.file_no);
                // A file whose footer, index, filter or props is damaged
                // (or that is missing) does not stop the engine: it is
                // quarantined, its key range answering with the error
                // (`Db::quarantined_files`). Nothing on disk changes.
                let t = match Table::open_with(
                    path.clone(),
                    fm.file_no,
                    cache.clone(),
                    dio,
                    &opts.keys,
                ) {
                    Ok(t) => t,
                    Err(e) => {
                        // An encrypted file's range is in the file only:
                        // unreadable, it covers every key.
                        let (lo, hi) = match fm.encrypted {
                            true => (&[][..], &sst::UNKNOWN_RANGE_END[..]),
                            false => (&fm.smallest[..], &fm.largest[..]),
                        };
                        Table::quarantined(path, fm.file_no, cache.clone(), lo, hi, &e)
                    }
                };
                let mut meta = fm.clone();
                if fm.encrypted {
                    (meta.smallest, meta.largest) = match &t.broken {
                        None => (
                            t.props.smallest_user().to_vec(),
                            t.props.largest_user().to_vec(),
                        ),
                        Some(b) => (b.smallest.clone(), b.largest.clone()),
                    };
                }
                levels.levels[lvl].push(Arc::new(FileHandle {
                    meta,
                    table: Arc::new(t),
                }));
            }
        }
        for (no, v) in &state.vlog_files {
            if v.cf == *id {
                // A missing or unreadable value log file does not stop
                // the engine: only reads of its values fail (as with a
                // quarantined table file).
                let f = crate::vlog::file::VlogFile::open(dir, *no, v.format, dio, &opts.keys)
                    .unwrap_or_else(|e| {
                        crate::vlog::file::VlogFile::quarantined(dir, *no, v.format, &e)
                    });
                levels.vlogs.insert(*no, Arc::new(f));
            }
        }
        levels.normalize();
        cfs.insert(
            *id,
            Arc::new(CfInner::new(
                *id,
                meta.name.clone(),
                meta.opts.clone(),
                levels,
                uid,
                opts.write_buffer_size,
            )),
        );
    }
    cfs
}

/// What replaying the WAL found.
struct Replayed {
    last_seq: u64,
    /// Prepares left unresolved.
    prepared: WalPrepares,
    /// Segments kept as they are (not removed after the replay): from the first
    /// one holding a commit of a family whose encryption key is unavailable (its
    /// memtable could not be flushed, so those records stay only in the log) to
    /// the last, so every prepare they hold keeps its outcome beside it.
    held: Vec<u64>,
}

/// Recovery phase 3: replays the WAL segments into the memtables (records
/// below a column family's flushed sequence skipped); returns the last
/// sequence seen and the prepares left unresolved. At force_recovery >= 2 a
/// damaged segment is noted and its rest skipped. The records of an encrypted
/// family whose key is unavailable are left in the log (`Replayed::held`): the
/// family's table is refused by name until the key is back, the others open.
fn replay_wal(
    dir: &Path,
    names: &[String],
    state: &State,
    cfs: &BTreeMap<u64, Arc<CfInner>>,
    level: u8,
    notes: &mut Vec<String>,
    keys: &crate::crypto::Keyring,
) -> Result<Replayed> {
    let keyless: HashSet<u64> = cfs
        .iter()
        .filter(|(_, cf)| {
            cf.opts
                .encryption_key
                .is_some_and(|id| keys.latest_version(id).is_none())
        })
        .map(|(&id, _)| id)
        .collect();
    let mut first_held: Option<usize> = None;
    // Valid bytes of the last segment (its tail may be torn or zero-filled).
    let mut last_len: Option<u64> = None;
    let mut segs: Vec<u64> = names
        .iter()
        .filter_map(|n| wal::parse_segment_name(n))
        .collect();
    segs.sort_unstable();
    let mut last_seq = state.last_seq;
    // Unresolved prepares (xid -> write set), in xid order.
    let mut prepared: WalPrepares = BTreeMap::new();
    for (i, &n) in segs.iter().enumerate() {
        let path = wal::segment_path(dir, n);
        let replayed = wal::read_segment_with(&path, i + 1 == segs.len(), keys, |payload, off| {
            let rec = batch::decode(payload)
                .ok_or_else(|| Error::corruption(&path, off, "undecodable WAL record"))?;
            let mut apply = |seq: u64, ops: Vec<Op>| {
                for op in ops {
                    let Some(cf) = cfs.get(&op.cf) else { continue };
                    let flushed = state.cfs.get(&op.cf).map_or(0, |m| m.flushed_seq);
                    if seq > flushed && keyless.contains(&op.cf) {
                        first_held.get_or_insert(i);
                    } else if seq > flushed {
                        cf.sv
                            .read()
                            .mem
                            .insert_shared(&op.key, seq, op.kind, op.value, None, None);
                    }
                }
            };
            match rec {
                Record::Commit { seq, ops } => {
                    last_seq = last_seq.max(seq);
                    apply(seq, ops);
                }
                Record::Prepare { xid, ops } => {
                    prepared.insert(xid, ops);
                }
                Record::CommitPrepared { seq, xid } => {
                    last_seq = last_seq.max(seq);
                    // Unknown xid: its prepare segment was purged, which
                    // happens only once `seq` is flushed.
                    if let Some(ops) = prepared.remove(&xid) {
                        apply(seq, ops);
                    }
                }
                Record::RollbackPrepared { xid } => {
                    prepared.remove(&xid);
                }
            }
            Ok(())
        });
        match replayed {
            Ok(n) => {
                if i + 1 == segs.len() {
                    last_len = Some(n);
                }
            }
            Err(e) if level >= 2 && e.is_corruption() => notes.push(format!(
                "damaged write-ahead log segment {} ({e}): its records from the damage \
                 on are skipped (the commits they hold are lost)",
                path.display()
            )),
            Err(e) => return Err(e),
        }
    }
    let held: Vec<u64> = first_held.map_or_else(Vec::new, |i| segs[i..].to_vec());
    // A kept segment is no longer the last one at the next open, where only the
    // last may end in a torn or zero-filled tail: cut it back to its records now.
    if let (Some(&last), Some(len), 0) = (held.last(), last_len, level) {
        let path = wal::segment_path(dir, last);
        let f = crate::io::open(std::fs::OpenOptions::new().write(true), &path)
            .and_then(|f| crate::io::set_len(&f, len, &path).map(|()| f))
            .and_then(|f| crate::io::sync_all(&f, &path))
            .map_err(|e| Error::io(format!("cut back {}", path.display()), e));
        f?;
    }
    if let Some(first) = held.first() {
        notes.push(format!(
            "write-ahead log segments from {} on are kept: they hold commits of a table \
             whose encryption key is not available (the table is refused until the key \
             is back; its rows are replayed then)",
            wal::segment_path(dir, *first).display()
        ));
    }
    Ok(Replayed {
        last_seq,
        prepared,
        held,
    })
}

/// Recovery phase 4: flushes the replayed memtables to level-0 tables so the
/// old WAL segments can go (not called read-only: they stay in memory).
fn flush_replayed_memtables(
    dir: &Path,
    cfs: &BTreeMap<u64, Arc<CfInner>>,
    state: &mut State,
    next_file: &AtomicU64,
    cache: &Arc<BlockCache>,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    keys: &crate::crypto::Keyring,
) -> Result<()> {
    for (id, cf) in cfs.iter() {
        let mem = cf.current().mem.clone();
        if mem.is_empty() {
            continue;
        }
        let no = next_file.fetch_add(1, Ordering::SeqCst);
        let alloc = || next_file.fetch_add(1, Ordering::SeqCst);
        let (fm, table, vlogs) =
            build_table(dir, no, &cf.opts, &mem, cache, &[], dio, &alloc, None, keys)?;
        if let Some(m) = state.cfs.get_mut(id) {
            m.levels[0].push(fm.clone());
            m.flushed_seq = m.flushed_seq.max(mem.max_seq());
        }
        let mut levels = (*cf.current().levels).clone();
        for v in vlogs {
            state.vlog_files.insert(
                v.file.no,
                manifest::VlogMeta {
                    cf: *id,
                    size: v.size,
                    garbage: v.garbage,
                    format: v.file.format,
                },
            );
            levels.vlogs.insert(v.file.no, v.file);
        }
        levels.levels[0].push(Arc::new(FileHandle { meta: fm, table }));
        levels.normalize();
        *cf.sv.write() = Arc::new(SuperVersion {
            mem: Arc::new(cf.new_memtable()),
            imms: Vec::new(),
            levels: Arc::new(levels),
        });
    }
    Ok(())
}

/// Recovery phase 5: the unresolved prepares re-logged (fsynced) at the start
/// of the fresh WAL segment, before the replayed segments are deleted.
fn relog_prepares(w: Option<&mut WalWriter>, prepared: &WalPrepares) -> Result<()> {
    if let Some(w) = w.filter(|_| !prepared.is_empty()) {
        let mut framed = Vec::new();
        for (xid, ops) in prepared {
            wal::frame_with(&mut framed, |out| {
                batch::encode_prepare(out, xid, ops.iter())
            });
        }
        w.append(&framed)?;
        w.sync()?;
    }
    Ok(())
}

/// Recovery phase 6: removes obsolete files: old manifests, replayed WAL
/// segments, orphan tables, value logs and spill files (not called read-only).
fn remove_obsolete_files(dir: &Path, names: &[String], state: &State, mnum: u64, held: &[u64]) {
    let live: HashSet<u64> = state
        .cfs
        .values()
        .flat_map(|c| c.levels.iter().flatten().map(|f| f.file_no))
        .collect();
    for n in names.iter() {
        let remove = if let Some(no) = sst::parse_table_name(n) {
            !live.contains(&no)
        } else if let Some(no) = crate::vlog::file::parse_vlog_name(n) {
            !state.vlog_files.contains_key(&no)
        } else if let Some(no) = crate::txn::spill::parse_prep_name(n) {
            !state
                .prepared_spills
                .values()
                .flatten()
                .any(|(_, f)| *f == no)
        } else if let Some(no) = wal::parse_segment_name(n) {
            !held.contains(&no)
        } else if crate::txn::spill::parse_spill_name(n).is_some() {
            true
        } else if let Some(m) = n.strip_prefix("MANIFEST-") {
            // the new one and its copy stay
            let m = m.strip_suffix(".copy").unwrap_or(m);
            m.parse::<u64>().ok() != Some(mnum)
        } else {
            n.ends_with(".tmp")
        };
        if remove {
            let _ = crate::io::remove_file(dir.join(n));
        }
    }
}

/// Recovery phase 7: prepared spilled write sets (manifest) with their files
/// reopened. Their keys are read now: a damaged file stops the open, or with
/// force_recovery leaves that prepared transaction out.
fn open_spilled_prepares(
    dir: &Path,
    state: &State,
    cache: &Arc<BlockCache>,
    read_only: bool,
    notes: &mut Vec<String>,
    keys: &crate::crypto::Keyring,
) -> Result<Vec<(Vec<u8>, PrepFiles, PreparedKeys)>> {
    let mut spilled_prepares: Vec<(Vec<u8>, PrepFiles, PreparedKeys)> = Vec::new();
    for (xid, files) in &state.prepared_spills {
        match open_prepared_spill(dir, files, cache, keys) {
            Ok((v, keys)) => spilled_prepares.push((xid.clone(), v, keys)),
            Err(e) if read_only => notes.push(format!(
                "unreadable prepared-transaction file ({e}): that prepared transaction \
                 (xid {xid:02x?}) is left out; its writes were never visible"
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(spilled_prepares)
}

impl DbInner {
    /// Opens (or creates) the database in `dir`: the recovery phases run in
    /// order, each in its own step below; then the background threads start.
    fn open(dir: &Path, opts: DbOptions) -> Result<Arc<DbInner>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let lock = crate::fsutil::lock_dir(dir)?;
        let cache = Arc::new(BlockCache::new(opts.block_cache_size));
        let names = list_dir(dir)?;
        // force_recovery: what a damaged directory made the open skip.
        let level = opts.force_recovery;
        let read_only = level > 0;
        let mut notes = Vec::new();
        let (mut state, old_manifest) = recover_manifest(dir, &names, level, &mut notes)?;
        if !read_only {
            crate::db::encryption::set_family_encryption(dir, &mut state, &opts)?;
        }
        let max_on_disk = max_file_no_on_disk(&names);
        let next_file = AtomicU64::new(state.next_file.max(max_on_disk + 1).max(1));
        let uid = DB_UID.fetch_add(1, Ordering::Relaxed);
        let dio = probe_direct_io(dir, &opts)?;
        let cfs = open_column_families(dir, &state, &cache, dio.as_ref(), uid, &opts);
        let Replayed {
            last_seq,
            prepared,
            held: held_wal,
        } = replay_wal(dir, &names, &state, &cfs, level, &mut notes, &opts.keys)?;
        if !read_only {
            flush_replayed_memtables(
                dir,
                &cfs,
                &mut state,
                &next_file,
                &cache,
                dio.as_ref(),
                &opts.keys,
            )?;
        }
        state.last_seq = last_seq;
        let mnum = next_file.fetch_add(1, Ordering::SeqCst);
        state.next_file = next_file.load(Ordering::SeqCst);
        let mw = if read_only {
            ManifestWriter::read_only(dir, old_manifest.unwrap_or(mnum))
        } else {
            ManifestWriter::create(dir, mnum, &state)?
        };

        // The fresh WAL segment starts with the unresolved prepares (re-logged,
        // fsynced) before the replayed segments are deleted.
        let wal_no = next_file.fetch_add(1, Ordering::SeqCst);
        let mut w = if read_only {
            None
        } else {
            Some(new_wal_segment(dir, wal_no, &opts)?)
        };
        relog_prepares(w.as_mut(), &prepared)?;
        if !read_only {
            remove_obsolete_files(dir, &names, &state, mnum, &held_wal);
        }
        let spilled_prepares =
            open_spilled_prepares(dir, &state, &cache, read_only, &mut notes, &opts.keys)?;

        let inner = Arc::new(DbInner {
            dir: dir.to_path_buf(),
            commit: CommitPipeline::new(w, last_seq, opts.sync_mode),
            opts,
            uid,
            cache,
            cfs: RwLock::new(cfs),
            ddl: Mutex::new(()),
            manifest: Mutex::new((mw, state)),
            next_file,
            snapshots: Arc::default(),
            flush_lock: Mutex::new(()),
            bg: Background::default(),
            closed: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            recovery_notes: notes,
            held_wal,
            lock_file: Mutex::new(Some(lock)),
            locks: Arc::new(crate::txn::lock::LockManager::new()),
            next_txn_id: AtomicU64::new(1),
            prepared: Mutex::new(PreparedState::default()),
            spill_threshold: std::sync::atomic::AtomicUsize::new(DEFAULT_SPILL_THRESHOLD),
            dio,
            vlog_gc_permille: AtomicU64::new((DEFAULT_VLOG_GC_RATIO * 1000.0) as u64),
            pacer: crate::compaction::pacer::Pacer::new(
                crate::compaction::pacer::DEFAULT_COMPACTION_RATE,
            ),
        });
        inner.register_recovered_prepares(prepared, wal_no, spilled_prepares)?;
        if !read_only {
            inner.start_threads()?;
        }
        Ok(inner)
    }

    /// Recovered prepared transactions (WAL and spilled): registered, keys
    /// locked again, so that they wait for the server's commit or rollback.
    fn register_recovered_prepares(
        &self,
        prepared: BTreeMap<Vec<u8>, Vec<Op>>,
        wal_no: u64,
        spilled_prepares: Vec<(Vec<u8>, PrepFiles, PreparedKeys)>,
    ) -> Result<()> {
        {
            let mut p = self.prepared.lock();
            let never = AtomicBool::new(false);
            for (xid, ops) in prepared {
                let owner = self.next_txn_id.fetch_add(1, Ordering::Relaxed);
                let mut keys = Vec::new();
                for o in &ops {
                    let k = (o.cf, o.key.clone());
                    self.locks.lock(
                        owner,
                        o.cf,
                        &o.key,
                        crate::txn::lock::LockMode::Exclusive,
                        Duration::ZERO,
                        &never,
                    )?;
                    keys.push(k);
                }
                p.keys.extend(keys.iter().cloned());
                p.by_xid.insert(
                    xid,
                    PreparedEntry {
                        owner,
                        segment: wal_no,
                        keys,
                        ops: Some(ops),
                        resolving: false,
                        spill: Vec::new(),
                    },
                );
            }
            for (xid, spill, keys) in spilled_prepares {
                let owner = self.next_txn_id.fetch_add(1, Ordering::Relaxed);
                for (cf, key) in &keys {
                    self.locks.lock(
                        owner,
                        *cf,
                        key,
                        crate::txn::lock::LockMode::Exclusive,
                        Duration::ZERO,
                        &never,
                    )?;
                }
                p.keys.extend(keys.iter().cloned());
                p.by_xid.insert(
                    xid,
                    PreparedEntry {
                        owner,
                        segment: u64::MAX,
                        keys,
                        ops: Some(Vec::new()),
                        resolving: false,
                        spill,
                    },
                );
            }
        }
        Ok(())
    }

    fn start_threads(self: &Arc<Self>) -> Result<()> {
        let me = self.clone();
        self.bg
            .spawn("tidesdb-flush".into(), "spawn flush thread", move || {
                me.flush_thread()
            })?;
        let me = self.clone();
        self.bg
            .spawn("tidesdb-sync".into(), "spawn sync thread", move || {
                me.sync_thread()
            })?;
        for i in 0..self.opts.background_threads.max(1) {
            let me = self.clone();
            self.bg.spawn(
                format!("tidesdb-compact-{i}"),
                "spawn compaction thread",
                move || me.compaction_thread(),
            )?;
        }
        Ok(())
    }

    fn flush_thread(self: Arc<Self>) {
        let mut backoff = Duration::ZERO;
        loop {
            if !self.bg.take_flush_request(!backoff.is_zero()) {
                return;
            }
            match self.flush_pending() {
                Ok(()) => {
                    backoff = Duration::ZERO;
                    self.bg.clear_error();
                }
                Err(e) => {
                    // Nothing is lost: the memtable stays (readable, its WAL
                    // kept) and is flushed again after a pause that grows
                    // while the failure lasts (a full disk: no busy loop).
                    self.note_bg_error(&e);
                    backoff = next_backoff(backoff);
                    if !self.bg.sleep(backoff) {
                        return;
                    }
                }
            }
        }
    }

    /// Records a failed background job (see `Db::background_error`);
    /// stalled writers wake up to see it.
    pub(crate) fn note_bg_error(&self, e: &Error) {
        if self.bg.note_error(e) {
            self.commit.notify_stall();
        }
    }

    fn compaction_thread(self: Arc<Self>) {
        let mut backoff = Duration::ZERO;
        loop {
            let mut did = false;
            let mut failed = false;
            let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
            for cf in cfs {
                if self.bg.is_shutdown() || self.is_poisoned() {
                    break;
                }
                match self.compaction().maybe_compact(&cf) {
                    Ok(true) => did = true,
                    Ok(false) => {}
                    Err(e) => {
                        // Compaction failures lose nothing (the inputs stay,
                        // partial outputs are removed); retry after a pause
                        // that grows while they last (a full disk).
                        self.note_bg_error(&e);
                        failed = true;
                    }
                }
            }
            if failed {
                backoff = next_backoff(backoff);
                if !self.bg.sleep(backoff) {
                    return;
                }
                continue;
            }
            backoff = Duration::ZERO;
            if did {
                self.bg.clear_error();
            }
            if !did && !self.bg.wait(Duration::from_millis(200)) {
                return;
            }
            if self.bg.is_shutdown() {
                return;
            }
        }
    }

    fn sync_thread(self: Arc<Self>) {
        loop {
            let mode = self.commit.sync_mode();
            let wait = match mode {
                SyncMode::Interval { millis } => Duration::from_millis(millis.max(1)),
                _ => Duration::from_millis(200),
            };
            if !self.bg.wait(wait) {
                return;
            }
            if let SyncMode::Interval { .. } = self.commit.sync_mode() {
                if self.sync_wal().is_err() {
                    self.poisoned.store(true, Ordering::SeqCst);
                }
            }
        }
    }

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

    fn create_cf(&self, name: &str, opts: CfOptions) -> Result<Cf> {
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

    fn drop_cf(&self, name: &str) -> Result<()> {
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

    fn rename_cf(&self, from: &str, to: &str) -> Result<()> {
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

    /// Commits a spilled write set (`parts`: per column family, a merge of
    /// the write set yielding the newest own version of each key, tombstones
    /// included; `check(cf, key)` is the conflict-check sequence of a key).
    ///
    /// Under the flush lock and the commit write lock (so no other commit,
    /// flush or WAL purge interleaves): conflict check of every key, rotate
    /// and flush the touched column families' memtables (so no memtable
    /// holds an older version of a key that will live in an L0 table, and
    /// `FlushedSeq` can move to the commit sequence), write the stream as L0
    /// tables carrying the new sequence, and install them with one manifest
    /// edit (`AddFile`* + `FlushedSeq` + `LastSeq`): the atomic commit point.
    /// A crash before it leaves orphan tables (deleted at open); after it the
    /// whole transaction is in tables. No WAL record is written. Commits
    /// stall while the tables are written.
    pub(crate) fn commit_spilled(
        &self,
        mut parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)>,
        check: Option<&CheckSeq<'_>>,
        extra: Vec<EditOp>,
    ) -> Result<u64> {
        self.check_writable()?;
        // Deferred puts queued before must reach the WAL first.
        self.drain_queue();
        let _fl = self.flush_lock.lock();
        let mut w = self.commit.lock_settled();
        self.check_writable()?;
        // None: commit of a prepared write set (checked at prepare).
        if let Some(check) = check {
            self.check_spilled_conflicts(&mut parts, check)?;
        }
        for (cf, _) in &parts {
            self.empty_memtables(&mut w, cf)?;
        }
        let seq = w.last_seq + 1;
        let mut out = SpilledTables::default();
        if let Err(e) = self.write_spilled_tables(&mut parts, seq, &mut out) {
            out.remove(&self.dir);
            return Err(e);
        }
        if let Err(e) = self.install_spilled(&parts, &out, seq, extra) {
            // Poisoned: the edit may be on disk (see `flush_one`'s discard).
            if !self.is_poisoned() {
                out.remove(&self.dir);
            }
            return Err(e);
        }
        self.commit.publish_settled(&mut w, seq);
        drop(w);
        drop(_fl);
        self.bg.notify();
        self.commit.notify_stall();
        self.purge_wal();
        Ok(seq)
    }

    /// Conflict check of every key of a spilled write set (first committer
    /// wins; keys of prepared transactions conflict).
    fn check_spilled_conflicts(
        &self,
        parts: &mut [(Arc<CfInner>, crate::iter::MergeIter)],
        check: &CheckSeq<'_>,
    ) -> Result<()> {
        let prep = self.prepared.lock();
        for (cf, it) in parts.iter_mut() {
            if cf.dropped.load(Ordering::Acquire) {
                return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
            }
            it.seek_to_first();
            while it.valid() {
                let k = it.key();
                if (!prep.keys.is_empty() && prep.keys.contains(&(cf.id, k.to_vec())))
                    || self.newer_than(cf, k, check(cf.id, k))?
                {
                    crate::metrics::WRITE_CONFLICTS.inc();
                    return Err(Error::Conflict);
                }
                it.next();
            }
            it.status()?;
        }
        Ok(())
    }

    /// Rotates and flushes the memtables of `cf` (write lock held), so none
    /// holds a version older than the L0 tables a spilled commit adds.
    fn empty_memtables(
        &self,
        w: &mut crate::db::commit::WriteState,
        cf: &Arc<CfInner>,
    ) -> Result<()> {
        self.rotate(w, cf)?;
        while self.flush_one(cf)? {}
        if !cf.current().imms.is_empty() {
            return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
        }
        Ok(())
    }

    /// Writes each column family's stream as L0 tables (and value log
    /// files for large values) carrying sequence `seq`, into `out`.
    fn write_spilled_tables(
        &self,
        parts: &mut [(Arc<CfInner>, crate::iter::MergeIter)],
        seq: u64,
        out: &mut SpilledTables,
    ) -> Result<()> {
        let alloc = || self.next_file.fetch_add(1, Ordering::SeqCst);
        for (cf, it) in parts.iter_mut() {
            // Large values go to a value log, as in a flush.
            let mut vo = crate::vlog::file::VlogOut::new(
                &self.dir,
                &alloc,
                cf.opts.value_separation_threshold,
            )
            .encrypted_with(&self.opts.keys, cf.opts.encryption_key);
            let mut b: Option<(u64, TableBuilder)> = None;
            if let Err(e) = self.write_spilled_cf(cf, it, seq, &mut vo, &mut b, out) {
                vo.abort();
                if let Some((_, tb)) = b.take() {
                    let p = tb.path().to_path_buf();
                    drop(tb);
                    let _ = crate::io::remove_file(p);
                }
                return Err(e);
            }
            // The value log is durable before the tables pointing into it.
            if let Some(v) = finish_vlog(vo, &self.dir, self.dio.as_ref(), &self.opts.keys)? {
                out.vlogs.push((cf.id, v));
            }
            if let Some((no, tb)) = b.take() {
                let (fm, t) =
                    finish_table(tb, no, &self.cache, self.dio.as_ref(), &self.opts.keys)?;
                out.tables.push((cf.id, fm, t));
            }
        }
        Ok(())
    }

    /// One column family's stream: tables of about a write buffer each (the
    /// last one left open in `b`), large values into `vo`.
    fn write_spilled_cf(
        &self,
        cf: &CfInner,
        it: &mut crate::iter::MergeIter,
        seq: u64,
        vo: &mut crate::vlog::file::VlogOut<'_>,
        b: &mut Option<(u64, TableBuilder)>,
        out: &mut SpilledTables,
    ) -> Result<()> {
        let target = (self.opts.write_buffer_size as u64).clamp(1 << 20, 64 << 20);
        it.seek_to_first();
        while it.valid() {
            if b.is_none() {
                let no = self.next_file.fetch_add(1, Ordering::SeqCst);
                let tb = create_table(&self.dir, no, &cf.opts, &self.opts.keys)?;
                *b = Some((no, tb));
            }
            if let Some((_, tb)) = b.as_mut() {
                if it.kind() == Kind::Put && vo.separates(it.value()) {
                    let p = vo.put(it.key(), it.value())?;
                    tb.add(it.key(), seq, Kind::ValuePtr, p)?;
                } else {
                    tb.add(it.key(), seq, it.kind(), it.value())?;
                }
                if tb.estimated_size() >= target {
                    if let Some((no, tb)) = b.take() {
                        let (fm, t) =
                            finish_table(tb, no, &self.cache, self.dio.as_ref(), &self.opts.keys)?;
                        out.tables.push((cf.id, fm, t));
                    }
                }
            }
            it.next();
        }
        it.status()
    }

    /// The commit point of a spilled write set: one manifest edit adding its
    /// tables and value logs (`AddFile`* + `FlushedSeq` + `LastSeq`), then
    /// the new files installed into each column family's super-version.
    fn install_spilled(
        &self,
        parts: &[(Arc<CfInner>, crate::iter::MergeIter)],
        out: &SpilledTables,
        seq: u64,
        extra: Vec<EditOp>,
    ) -> Result<()> {
        let mut m = self.manifest.lock();
        let (mw, st) = &mut *m;
        if let Some((cf, _)) = parts
            .iter()
            .find(|(c, _)| c.dropped.load(Ordering::Acquire))
        {
            return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
        }
        let mut ops = Vec::new();
        for (cf, (vf, size)) in &out.vlogs {
            ops.push(EditOp::VlogAdd {
                cf: *cf,
                file_no: vf.no,
                size: *size,
            });
        }
        for (cf, fm, _) in &out.tables {
            ops.push(EditOp::AddFile {
                cf: *cf,
                level: 0,
                meta: fm.clone(),
            });
        }
        for (cf, _) in parts {
            ops.push(EditOp::FlushedSeq(cf.id, seq));
        }
        ops.push(EditOp::LastSeq(seq));
        ops.push(EditOp::NextFile(self.next_file.load(Ordering::SeqCst)));
        ops.extend(extra);
        self.apply_manifest(mw, st, &ops)?;
        for (cf, _) in parts {
            let mut g = cf.sv.write();
            let mut levels = (*g.levels).clone();
            for (id, fm, t) in &out.tables {
                if *id == cf.id {
                    levels.levels[0].push(Arc::new(FileHandle {
                        meta: fm.clone(),
                        table: t.clone(),
                    }));
                }
            }
            for (id, (vf, _)) in &out.vlogs {
                if *id == cf.id {
                    levels.vlogs.insert(vf.no, vf.clone());
                }
            }
            levels.normalize();
            *g = Arc::new(SuperVersion {
                mem: g.mem.clone(),
                imms: g.imms.clone(),
                levels: Arc::new(levels),
            });
        }
        Ok(())
    }

    /// Resolves a detached / recovered prepared transaction.
    fn resolve_detached(&self, xid: &[u8], commit: bool) -> Result<()> {
        self.check_writable()?;
        let (owner, keys, ops) = {
            let mut p = self.prepared.lock();
            let e = match p.by_xid.get_mut(xid) {
                Some(e) if !e.resolving => e,
                _ => return Err(Error::UnknownXid(xid.to_vec())),
            };
            let Some(ops) = e.ops.clone() else {
                return Err(Error::InvalidArgument(
                    "prepared transaction is owned by a live Txn; resolve it through the Txn"
                        .into(),
                ));
            };
            if !e.spill.is_empty() {
                let (owner, keys) = (e.owner, e.keys.clone());
                drop(p);
                self.resolve_spilled(xid, commit)?;
                self.locks.unlock_all(owner, &keys);
                return Ok(());
            }
            e.resolving = true;
            (e.owner, e.keys.clone(), ops)
        };
        let cfs = self.cfs.read().clone();
        let cfops: CfOps = ops
            .into_iter()
            .filter_map(|o| cfs.get(&o.cf).map(|c| (c.clone(), o, 0)))
            .collect();
        let kind = if commit {
            ReqKind::CommitPrepared(xid.to_vec())
        } else {
            ReqKind::RollbackPrepared(xid.to_vec())
        };
        let r = self.submit(cfops, false, true, kind, owner);
        match &r {
            Ok(_) => self.locks.unlock_all(owner, &keys),
            Err(_) => {
                if let Some(e) = self.prepared.lock().by_xid.get_mut(xid) {
                    e.resolving = false;
                }
            }
        }
        r.map(|_| ())
    }

    /// Phase one of 2PC for a spilled write set (`parts`: per column family
    /// the merged write set, as for `commit_spilled`; keys already locked by
    /// the caller). Under the commit write lock: xid unused, conflict check
    /// of every key while writing it to a durable `.prep` file per column
    /// family (fsynced), then one manifest edit `PrepareSpilled` (the
    /// prepare point), then registration (keys conflict for other commits).
    pub(crate) fn prepare_spilled(
        &self,
        xid: &[u8],
        owner: u64,
        mut parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)>,
        check: &dyn Fn(u64, &[u8]) -> u64,
    ) -> Result<()> {
        self.check_writable()?;
        // Deferred puts queued before must be durable with the prepare.
        self.drain_queue();
        let w = self.commit.lock_settled();
        self.check_writable()?;
        let mut files: Vec<(u64, Arc<Table>)> = Vec::new();
        let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut cur: Option<PathBuf> = None;
        let r = (|| -> Result<()> {
            let prep = self.prepared.lock();
            if prep.by_xid.contains_key(xid) {
                return Err(Error::InvalidArgument("xid is already prepared".into()));
            }
            for (cf, it) in parts.iter_mut() {
                if cf.dropped.load(Ordering::Acquire) {
                    return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
                }
                let no = self.next_file.fetch_add(1, Ordering::SeqCst);
                let path = crate::txn::spill::prep_path(&self.dir, no);
                cur = Some(path.clone());
                let cipher = crate::crypto::FileCipher::for_new_file_if(
                    &self.opts.keys,
                    cf.opts.encryption_key.or(self.opts.log_encryption_key),
                    &path,
                )?;
                let mut b =
                    TableBuilder::create(path.clone(), 64 << 10, Compression::None, 10, cipher)?;
                it.seek_to_first();
                while it.valid() {
                    let k = it.key();
                    if prep.keys.contains(&(cf.id, k.to_vec()))
                        || self.newer_than(cf, k, check(cf.id, k))?
                    {
                        return Err(Error::Conflict);
                    }
                    b.add(k, 1, it.kind(), it.value())?;
                    keys.push((cf.id, k.to_vec()));
                    it.next();
                }
                it.status()?;
                if b.num_entries() == 0 {
                    drop(b);
                    let _ = crate::io::remove_file(&path);
                    cur = None;
                    continue;
                }
                b.finish()?;
                let t = Table::open(path, no, self.cache.clone(), &self.opts.keys)?;
                cur = None;
                files.push((cf.id, Arc::new(t)));
            }
            Ok(())
        })();
        let cleanup = |files: &[(u64, Arc<Table>)], cur: &Option<PathBuf>| {
            for (_, t) in files {
                let _ = crate::io::remove_file(&t.path);
            }
            if let Some(p) = cur {
                let _ = crate::io::remove_file(p);
            }
        };
        if let Err(e) = r {
            cleanup(&files, &cur);
            return Err(e);
        }
        {
            let mut m = self.manifest.lock();
            let (mw, st) = &mut *m;
            let op = EditOp::PrepareSpilled {
                xid: xid.to_vec(),
                files: files.iter().map(|(cf, t)| (*cf, t.file_no)).collect(),
            };
            if let Err(e) = self.apply_manifest(mw, st, &[op]) {
                // Poisoned: the edit may be on disk (see `flush_one`'s discard).
                if !self.is_poisoned() {
                    cleanup(&files, &None);
                }
                return Err(e);
            }
        }
        let mut p = self.prepared.lock();
        p.keys.extend(keys.iter().cloned());
        p.by_xid.insert(
            xid.to_vec(),
            PreparedEntry {
                owner,
                segment: u64::MAX,
                keys,
                ops: None,
                resolving: false,
                spill: files,
            },
        );
        drop(w);
        Ok(())
    }

    /// True if `xid` is a prepared spilled write set.
    pub(crate) fn is_spilled_prepare(&self, xid: &[u8]) -> bool {
        self.prepared
            .lock()
            .by_xid
            .get(xid)
            .is_some_and(|e| !e.spill.is_empty())
    }

    /// Resolves a prepared spilled write set: commit streams its `.prep`
    /// files into L0 tables at a new sequence (`commit_spilled` without a
    /// conflict check) with `ResolveSpilled` in the same manifest edit;
    /// rollback is a manifest edit `ResolveSpilled`. Then unregisters it and
    /// deletes its files. Locks are the caller's to release.
    pub(crate) fn resolve_spilled(&self, xid: &[u8], commit: bool) -> Result<()> {
        self.check_writable()?;
        let spill = {
            let mut p = self.prepared.lock();
            match p.by_xid.get_mut(xid) {
                Some(e) if !e.resolving && !e.spill.is_empty() => {
                    e.resolving = true;
                    e.spill.clone()
                }
                _ => return Err(Error::UnknownXid(xid.to_vec())),
            }
        };
        let r = if commit {
            let cfs = self.cfs.read().clone();
            // Column families dropped since the prepare are skipped.
            let parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)> = spill
                .iter()
                .filter_map(|(cf, t)| {
                    let c = cfs.get(cf).filter(|c| !c.dropped.load(Ordering::Acquire))?;
                    let src = crate::iter::Source::new(
                        Box::new(crate::table::sst::TableIter::new(t.clone())),
                        MAX_SEQ,
                    );
                    Some((
                        c.clone(),
                        crate::iter::MergeIter::new(vec![src], None, None, None).keep_deletes(),
                    ))
                })
                .collect();
            self.commit_spilled(parts, None, vec![EditOp::ResolveSpilled(xid.to_vec())])
                .map(|_| ())
        } else {
            let mut m = self.manifest.lock();
            let (mw, st) = &mut *m;
            self.apply_manifest(mw, st, &[EditOp::ResolveSpilled(xid.to_vec())])
        };
        let mut p = self.prepared.lock();
        match r {
            Ok(()) => {
                if let Some(e) = p.by_xid.remove(xid) {
                    for k in &e.keys {
                        p.keys.remove(k);
                    }
                }
                drop(p);
                for (_, t) in &spill {
                    let _ = crate::io::remove_file(&t.path);
                    self.cache.evict_file(t.file_no);
                }
                Ok(())
            }
            Err(e) => {
                if let Some(en) = p.by_xid.get_mut(xid) {
                    en.resolving = false;
                }
                Err(e)
            }
        }
    }

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

    fn new_segment(&self, w: &mut crate::db::commit::WriteState) -> Result<()> {
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
        let segs = self.commit.closed_segments().clone();
        if segs.len() < 2 {
            return;
        }
        let total: u64 = segs
            .iter()
            .map(|(n, _)| {
                std::fs::metadata(wal::segment_path(&self.dir, *n))
                    .map(|m| m.len())
                    .unwrap_or(0)
            })
            .sum();
        if total < limit {
            return;
        }
        let oldest_max = segs.first().map_or(0, |s| s.1);
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

    /// Flushes all immutable memtables of all column families (oldest first).
    pub(crate) fn flush_pending(&self) -> Result<()> {
        let _g = self.flush_lock.lock();
        loop {
            let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
            let mut did = false;
            for cf in cfs {
                while self.flush_one(&cf)? {
                    did = true;
                }
            }
            if !did {
                break;
            }
        }
        self.purge_wal();
        Ok(())
    }

    /// The value log GC ratio (`Db::set_vlog_gc_ratio`).
    fn vlog_gc_ratio(&self) -> f64 {
        self.vlog_gc_permille.load(Ordering::Relaxed) as f64 / 1000.0
    }

    fn flush_one(&self, cf: &Arc<CfInner>) -> Result<bool> {
        let sv = cf.current();
        let Some(imm) = sv.imms.first().cloned() else {
            return Ok(false);
        };
        if cf.dropped.load(Ordering::Acquire) {
            return Ok(false);
        }
        // The groups that wrote it may still be in their fsync: the table
        // and the manifest name only sequences already visible.
        self.commit
            .wait_visible(imm.max_seq(), &|| self.is_poisoned())?;
        let no = self.next_file.fetch_add(1, Ordering::SeqCst);
        let alloc = || self.next_file.fetch_add(1, Ordering::SeqCst);
        let built = if imm.is_empty() {
            None
        } else {
            // Taken after the memtable stopped taking writes: a snapshot made
            // later sees all of it, so it splits no stripe.
            let snaps = self.live_snapshots();
            // The memtable's data is in segments sealed when it was rotated
            // (listed until purged, which waits for this flush).
            let adopt = WalAdoption {
                sealed: self.commit.closed_segments().iter().map(|s| s.0).collect(),
                max_garbage_ratio: self.vlog_gc_ratio(),
            };
            Some(build_table(
                &self.dir,
                no,
                &cf.opts,
                &imm,
                &self.cache,
                &snaps,
                self.dio.as_ref(),
                &alloc,
                // An encrypted family's values must not stay in a WAL
                // segment written in the clear.
                (cf.opts.encryption_key.is_none() || self.opts.log_encryption_key.is_some())
                    .then_some(&adopt),
                &self.opts.keys,
            )?)
        };
        {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            let discard = |built: &Option<(FileMeta, Arc<Table>, Vec<FlushVlog>)>| {
                // A failed manifest fsync (poisoned) may have left the edit naming these fi
                // es on disk: they stay; the next open removes what the manifest does not name.
                if self.is_poisoned() {
                    return;
                }
                if let Some((fm, _, vlogs)) = built {
                    let _ = crate::io::remove_file(sst::table_path(&self.dir, fm.file_no));
                    for v in vlogs {
                        v.file.mark_obsolete();
                    }
                }
            };
            if cf.dropped.load(Ordering::Acquire) {
                discard(&built);
                return Ok(false);
            }
            let mut ops = Vec::new();
            if let Some((fm, _, vlogs)) = &built {
                ops.extend(vlogs.iter().map(|v| v.edit(cf.id)));
                ops.push(EditOp::AddFile {
                    cf: cf.id,
                    level: 0,
                    meta: fm.clone(),
                });
            }
            ops.push(EditOp::FlushedSeq(cf.id, imm.max_seq()));
            ops.push(EditOp::LastSeq(self.commit.visible_seq()));
            ops.push(EditOp::NextFile(self.next_file.load(Ordering::SeqCst)));
            if let Err(e) = self.apply_manifest(w, st, &ops) {
                discard(&built);
                return Err(e);
            }
            let mut g = cf.sv.write();
            let mut levels = (*g.levels).clone();
            if let Some((fm, t, vlogs)) = built {
                for v in vlogs {
                    levels.vlogs.insert(v.file.no, v.file);
                }
                levels.levels[0].push(Arc::new(FileHandle { meta: fm, table: t }));
            }
            levels.normalize();
            let imms: Vec<Arc<Memtable>> = g
                .imms
                .iter()
                .filter(|m| !Arc::ptr_eq(m, &imm))
                .cloned()
                .collect();
            *g = Arc::new(SuperVersion {
                mem: g.mem.clone(),
                imms,
                levels: Arc::new(levels),
            });
        }
        crate::metrics::MEMTABLE_FLUSHES.inc();
        // Writes are coming in: compaction keeps up with them unpaced.
        self.pacer.urge();
        self.commit.notify_stall();
        self.bg.notify();
        Ok(true)
    }

    /// Deletes closed WAL segments whose every record is in table files and
    /// that hold no unresolved prepare record.
    pub(crate) fn purge_wal(&self) {
        let w = self.commit.lock_write();
        self.purge_wal_locked(&w);
    }

    /// `purge_wal` with the write lock held (so no commit interleaves between
    /// reading the memtables, the prepared pins and the segment list).
    pub(crate) fn purge_wal_locked(&self, _w: &crate::db::commit::WriteState) {
        let pinned: HashSet<u64> = self
            .prepared
            .lock()
            .by_xid
            .values()
            .map(|e| e.segment)
            .collect();
        let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
        let mut min_unflushed = u64::MAX;
        for cf in &cfs {
            let sv = cf.current();
            for m in sv.imms.iter().chain(std::iter::once(&sv.mem)) {
                if !m.is_empty() {
                    min_unflushed = min_unflushed.min(m.min_seq());
                }
            }
        }
        let mut segs = self.commit.closed_segments();
        let mut keep = Vec::new();
        for (n, max) in segs.drain(..) {
            if max < min_unflushed && !pinned.contains(&n) {
                let _ = crate::io::remove_file(wal::segment_path(&self.dir, n));
            } else {
                keep.push((n, max));
            }
        }
        *segs = keep;
    }

    fn flush_all(&self) -> Result<()> {
        self.check_writable()?;
        {
            let mut w = self.commit.lock_write();
            let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
            for cf in cfs {
                self.rotate(&mut w, &cf)?;
            }
        }
        self.flush_pending()
    }

    pub(crate) fn flush_cf(&self, cf: &Arc<CfInner>) -> Result<()> {
        {
            let mut w = self.commit.lock_write();
            self.rotate(&mut w, cf)?;
        }
        self.flush_pending()
    }

    // ------------------------------------------------------------ stats

    fn cf_stats(&self, cf: &Cf) -> CfStats {
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
    fn cf_sizes(&self, cf: &Cf) -> CfStats {
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

    fn sample_keys(&self, cf: &Cf, n: usize) -> Vec<Vec<u8>> {
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

    fn approximate_keys_in_range(&self, cf: &Cf, start: Option<&[u8]>, end: Option<&[u8]>) -> u64 {
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

    /// Hands the write set `ops` of the prepared transaction `xid` to the
    /// database (its `Txn` goes away unresolved). False when `xid` is not
    /// prepared here.
    pub(crate) fn detach_prepared(&self, xid: &[u8], ops: Vec<Op>) -> bool {
        match self.prepared.lock().by_xid.get_mut(xid) {
            Some(e) => {
                e.ops = Some(ops);
                true
            }
            None => false,
        }
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

/// The files a spilled commit has written so far: (cf, meta, table) and
/// (cf, value log file).
#[derive(Default)]
struct SpilledTables {
    tables: Vec<(u64, FileMeta, Arc<Table>)>,
    vlogs: Vec<(u64, VlogOutFile)>,
}

impl SpilledTables {
    /// Deletes them (the commit failed before its manifest edit).
    fn remove(&self, dir: &Path) {
        for (_, fm, _) in &self.tables {
            let _ = crate::io::remove_file(sst::table_path(dir, fm.file_no));
        }
        for (_, (vf, _)) in &self.vlogs {
            vf.mark_obsolete();
        }
    }
}

/// A value log file a flush produced: written by it (`Records`) or a sealed
/// WAL segment it adopted (`WalSegment`), with the bytes no pointer of the
/// flush's table names (always 0 for a written one).
pub(crate) struct FlushVlog {
    pub file: Arc<crate::vlog::file::VlogFile>,
    pub size: u64,
    pub garbage: u64,
}

impl FlushVlog {
    /// The manifest op that adds the file.
    fn edit(&self, cf: u64) -> EditOp {
        match self.file.format {
            crate::vlog::file::VlogFormat::Records => EditOp::VlogAdd {
                cf,
                file_no: self.file.no,
                size: self.size,
            },
            crate::vlog::file::VlogFormat::WalSegment => EditOp::VlogAddWal {
                cf,
                file_no: self.file.no,
                size: self.size,
                garbage: self.garbage,
            },
        }
    }
}

/// What a flush may point into instead of copying values (see `vlog.rs`,
/// "WAL segments kept as value logs").
pub(crate) struct WalAdoption {
    /// Segments no longer written (sealed: fsynced and cut to their records).
    pub sealed: HashSet<u64>,
    /// Garbage ratio the adopted file may start with (the GC ratio: a file at
    /// or above it would be relocated by the next compaction anyway).
    pub max_garbage_ratio: f64,
}

/// Sealed segments worth adopting for `mem`: those where the values the
/// flush separates and whose place in the WAL it knows make up enough of the
/// segment. (An estimate: versions the flush drops are counted; the garbage
/// recorded is exact.)
fn segments_to_adopt(
    dir: &Path,
    mem: &Memtable,
    vo: &crate::vlog::file::VlogOut<'_>,
    adopt: &WalAdoption,
) -> Vec<u64> {
    let mut bytes: BTreeMap<u64, u64> = BTreeMap::new();
    let _ = mem.for_each(|e| {
        if let Some(l) = e.wal_loc() {
            if e.kind() == Kind::Put && vo.separates(e.value()) && adopt.sealed.contains(&l.segment)
            {
                *bytes.entry(l.segment).or_default() += e.value().len() as u64;
            }
        }
        Ok(())
    });
    bytes
        .into_iter()
        .filter(|&(seg, used)| {
            std::fs::metadata(wal::segment_path(dir, seg)).is_ok_and(|m| {
                let size = m.len();
                size > 0 && (size - used.min(size)) as f64 / (size as f64) < adopt.max_garbage_ratio
            })
        })
        .map(|(seg, _)| seg)
        .collect()
}

/// Writes `mem` to a new table file `no`; values of at least the column
/// family's separation threshold go to a new value log file (numbered by
/// `alloc`), fsynced before the table, or, with `adopt`, stay where they are
/// in sealed WAL segments that become value log files. Of each key only the
/// newest version per snapshot stripe is kept, as compaction does (`snaps`:
/// the live snapshots, ascending): versions no reader can see do not reach the
/// disk, so a row updated many times costs reads one version, not all of
/// them. Tombstones stay (older files may hold the key).
#[allow(clippy::too_many_arguments)] // each is a distinct input of one flush
pub(crate) fn build_table(
    dir: &Path,
    no: u64,
    opts: &CfOptions,
    mem: &Memtable,
    cache: &Arc<BlockCache>,
    snaps: &[u64],
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    alloc: &dyn Fn() -> u64,
    adopt: Option<&WalAdoption>,
    keys: &crate::crypto::Keyring,
) -> Result<(FileMeta, Arc<Table>, Vec<FlushVlog>)> {
    let path = sst::table_path(dir, no);
    let mut vo = crate::vlog::file::VlogOut::new(dir, alloc, opts.value_separation_threshold)
        .encrypted_with(keys, opts.encryption_key);
    // Adopted segments: segment -> (value log file, bytes referenced).
    let mut adopted: BTreeMap<u64, (Arc<crate::vlog::file::VlogFile>, u64)> = BTreeMap::new();
    let drop_adopted = |adopted: &BTreeMap<u64, (Arc<crate::vlog::file::VlogFile>, u64)>| {
        for (f, _) in adopted.values() {
            f.mark_obsolete();
        }
    };
    if let Some(a) = adopt.filter(|_| vo.threshold.is_some() && mem.has_wal_locs()) {
        for seg in segments_to_adopt(dir, mem, &vo, a) {
            match crate::vlog::file::adopt_wal_segment(dir, seg, alloc(), dio, keys) {
                Ok(f) => {
                    adopted.insert(seg, (Arc::new(f), 0));
                }
                // Not adopted: its values are copied as without adoption.
                Err(_) => continue,
            }
        }
        if !adopted.is_empty() {
            if let Err(e) = crate::fsutil::sync_dir(dir) {
                drop_adopted(&adopted);
                return Err(e);
            }
        }
    }
    let mut b = match crate::crypto::FileCipher::for_new_file_if(keys, opts.encryption_key, &path)
        .and_then(|cipher| {
            TableBuilder::create(
                path.clone(),
                opts.block_size,
                opts.compression,
                opts.bloom_bits_per_key,
                cipher,
            )
        }) {
        Ok(b) => b,
        Err(e) => {
            drop_adopted(&adopted);
            return Err(e);
        }
    };
    let mut ptr_buf = Vec::new();
    // Versions come newest first within a key.
    let mut last: Option<(Vec<u8>, usize)> = None;
    let r = mem.for_each(|e| {
        let (user, seq, value) = (e.user(), e.seq(), e.value());
        let stripe = snaps.partition_point(|&x| x < seq);
        if let Some((last_user, st)) = &mut last {
            if last_user.as_slice() == user {
                if *st == stripe {
                    return Ok(());
                }
                *st = stripe;
            } else {
                last_user.clear();
                last_user.extend_from_slice(user);
                *st = stripe;
            }
        } else {
            last = Some((user.to_vec(), stripe));
        }
        if e.kind() == Kind::Put && vo.separates(value) {
            let in_wal = e
                .wal_loc()
                .zip(e.value_crc())
                .and_then(|(l, crc)| adopted.get_mut(&l.segment).map(|a| (l, crc, a)));
            if let Some((l, crc, (f, used))) = in_wal {
                ptr_buf.clear();
                crate::value_ptr::Ptr {
                    file: f.no,
                    offset: l.offset,
                    len: value.len() as u64,
                    crc,
                }
                .encode(&mut ptr_buf);
                *used += value.len() as u64;
                return b.add(user, seq, Kind::ValuePtr, &ptr_buf);
            }
            // The value's crc from its write, if kept (checksum once).
            let p = vo.put_crc(user, value, e.value_crc())?;
            b.add(user, seq, Kind::ValuePtr, p)
        } else {
            b.add(user, seq, e.kind(), value)
        }
    });
    if let Err(e) = r {
        drop(b);
        vo.abort();
        drop_adopted(&adopted);
        let _ = crate::io::remove_file(&path);
        return Err(e);
    }
    let written = match finish_vlog(vo, dir, dio, keys) {
        Ok(v) => v,
        Err(e) => {
            drop(b);
            drop_adopted(&adopted);
            let _ = crate::io::remove_file(&path);
            return Err(e);
        }
    };
    let mut vlogs: Vec<FlushVlog> = written
        .into_iter()
        .map(|(file, size)| FlushVlog {
            file,
            size,
            garbage: 0,
        })
        .collect();
    for (f, used) in adopted.into_values() {
        if used == 0 {
            // Every value it was adopted for was a version the flush dropped.
            f.mark_obsolete();
            continue;
        }
        let size = f.size();
        vlogs.push(FlushVlog {
            file: f,
            size,
            garbage: size - used.min(size),
        });
    }
    match finish_table(b, no, cache, dio, keys) {
        Ok((fm, t)) => Ok((fm, t, vlogs)),
        Err(e) => {
            for v in &vlogs {
                v.file.mark_obsolete();
            }
            Err(e)
        }
    }
}

/// A new WAL segment, encrypted with `DbOptions::log_encryption_key` if set.
fn new_wal_segment(dir: &Path, no: u64, opts: &DbOptions) -> Result<WalWriter> {
    let path = wal::segment_path(dir, no);
    let cipher =
        crate::crypto::FileCipher::for_new_file_if(&opts.keys, opts.log_encryption_key, &path)?;
    WalWriter::create_encrypted(dir, no, cipher)
}
