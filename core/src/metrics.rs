//! Engine counters (statistics), read through [`crate::Db::metrics`].
//!
//! The counters are process-wide: they count events of every database open in
//! the process (the server opens one), since the start of the process. Each is
//! a relaxed atomic bumped at the one place where its event happens, so reading
//! them never blocks the engine. Tests that open several databases in one process
//! compare deltas, never absolute values.

use std::sync::atomic::{AtomicU64, Ordering};

/// One monotonically increasing counter.
pub(crate) struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn inc(&self) {
        self.add(1);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Bytes appended to WAL segments (framed records).
pub(crate) static WAL_BYTES: Counter = Counter::new();
/// WAL appends by commit-group leaders (one per group; a group holds every
/// commit queued while the previous group was written).
pub(crate) static COMMIT_GROUPS: Counter = Counter::new();
/// Bytes of table files written (memtable flushes, compactions, spills).
pub(crate) static TABLE_BYTES: Counter = Counter::new();
/// Memtables flushed to a table file.
pub(crate) static MEMTABLE_FLUSHES: Counter = Counter::new();
/// Compactions finished (merges and trivial moves).
pub(crate) static COMPACTIONS: Counter = Counter::new();
/// Commit groups that waited because a column family had too many immutable
/// memtables or L0 files (write stall).
pub(crate) static WRITE_STALLS: Counter = Counter::new();
/// Commit groups slowed down (1 ms) by many L0 files.
pub(crate) static WRITE_SLOWDOWNS: Counter = Counter::new();
/// Block reads answered by the block cache.
pub(crate) static BLOCK_CACHE_HITS: Counter = Counter::new();
/// Block reads that went to the file.
pub(crate) static BLOCK_CACHE_MISSES: Counter = Counter::new();
/// Lock requests that had to wait for another transaction.
pub(crate) static LOCK_WAITS: Counter = Counter::new();
/// Lock waits that ended with `Error::LockTimeout`.
pub(crate) static LOCK_WAIT_TIMEOUTS: Counter = Counter::new();
/// Lock requests refused with `Error::Deadlock`.
pub(crate) static DEADLOCKS: Counter = Counter::new();
/// Row locks of one transaction and column family replaced by a table lock.
pub(crate) static LOCK_ESCALATIONS: Counter = Counter::new();
/// Commits refused with `Error::Conflict` (first committer wins).
pub(crate) static WRITE_CONFLICTS: Counter = Counter::new();
/// Background memtable flushes and compactions that failed (each is tried
/// again later, with a growing pause).
pub(crate) static BACKGROUND_ERRORS: Counter = Counter::new();

/// A snapshot of the engine's counters and gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    pub wal_bytes_written: u64,
    /// fsyncs of the WAL issued by commit groups of this database.
    pub wal_syncs: u64,
    /// Commit groups written to the WAL (commits / groups = group size).
    pub commit_groups: u64,
    pub table_bytes_written: u64,
    pub memtable_flushes: u64,
    pub compactions: u64,
    pub write_stalls: u64,
    pub write_slowdowns: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Bytes currently held by the block cache (gauge).
    pub block_cache_bytes: u64,
    pub lock_waits: u64,
    pub lock_wait_timeouts: u64,
    pub deadlocks: u64,
    pub lock_escalations: u64,
    pub write_conflicts: u64,
    /// Background flushes / compactions that failed and wait to be retried.
    pub background_errors: u64,
    /// Table files of every column family of this database (gauge).
    pub table_files: u64,
    /// Bytes of those table files (gauge).
    pub table_file_bytes: u64,
    /// Bytes in memtables, mutable and immutable (gauge).
    pub memtable_bytes: u64,
    /// Bytes the compaction still has to rewrite to bring every level under its
    /// target (gauge, an estimate).
    pub pending_compaction_bytes: u64,
    /// Data blocks that reads and scans of this database read from table
    /// files (block cache misses; not compaction inputs). A point read that
    /// misses the cache costs one (plus one per bloom false positive).
    pub table_block_reads: u64,
    /// Those of them that waited on the disk (not all in the OS page cache;
    /// `preadv2(RWF_NOWAIT)` tells).
    pub table_disk_reads: u64,
    /// Milliseconds background compactions of this database waited for
    /// their pace (`Db::set_compaction_rate`).
    pub compaction_paced_millis: u64,
}

impl Metrics {
    /// The process-wide counters; the database fills in its own gauges.
    pub(crate) fn counters() -> Metrics {
        Metrics {
            wal_bytes_written: WAL_BYTES.get(),
            commit_groups: COMMIT_GROUPS.get(),
            table_bytes_written: TABLE_BYTES.get(),
            memtable_flushes: MEMTABLE_FLUSHES.get(),
            compactions: COMPACTIONS.get(),
            write_stalls: WRITE_STALLS.get(),
            write_slowdowns: WRITE_SLOWDOWNS.get(),
            block_cache_hits: BLOCK_CACHE_HITS.get(),
            block_cache_misses: BLOCK_CACHE_MISSES.get(),
            lock_waits: LOCK_WAITS.get(),
            lock_wait_timeouts: LOCK_WAIT_TIMEOUTS.get(),
            deadlocks: DEADLOCKS.get(),
            lock_escalations: LOCK_ESCALATIONS.get(),
            write_conflicts: WRITE_CONFLICTS.get(),
            background_errors: BACKGROUND_ERRORS.get(),
            ..Metrics::default()
        }
    }
}
