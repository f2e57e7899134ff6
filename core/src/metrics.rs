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

impl crate::db::DbInner {
    pub(crate) fn metrics(&self) -> Metrics {
        let mut m = Metrics::counters();
        m.wal_syncs = self.wal_syncs.load(Ordering::Relaxed);
        m.block_cache_bytes = self.cache.bytes() as u64;
        m.table_block_reads = self.cache.table_block_reads.load(Ordering::Relaxed);
        m.table_disk_reads = self.cache.table_disk_reads.load(Ordering::Relaxed);
        m.compaction_paced_millis = self.pacer.slept_ms();
        let cfs: Vec<_> = self.cfs.read().values().cloned().collect();
        for cf in cfs {
            let sv = cf.current();
            m.memtable_bytes += sv.mem.size() as u64;
            m.memtable_bytes += sv.imms.iter().map(|i| i.size() as u64).sum::<u64>();
            for f in sv.levels.all() {
                m.table_files += 1;
                m.table_file_bytes += f.meta.size;
            }
            m.pending_compaction_bytes += self.pending_compaction_bytes(&sv.levels);
        }
        m
    }

    /// What the compaction still has to rewrite (the rule of
    /// `compaction.rs`): all of L0 once it holds `L0_TRIGGER` files, and the
    /// excess of every other level over its target (the last level has none).
    pub(crate) fn pending_compaction_bytes(&self, lv: &crate::db::Levels) -> u64 {
        let mut pending = 0u64;
        for (level, files) in lv.levels.iter().enumerate() {
            let bytes: u64 = files.iter().map(|f| f.meta.size).sum();
            if level == 0 {
                if files.len() >= crate::compaction::L0_TRIGGER {
                    pending += bytes;
                }
            } else if level + 1 < lv.levels.len() {
                pending += bytes.saturating_sub(self.level_target(level));
            }
        }
        pending
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{CfOptions, Db, DbOptions, Error, Isolation, LockMode, SyncMode};
    use std::time::Duration;

    /// Every counter moves when (and by as much as) its event happens. The
    /// counters are process-wide and other tests run in parallel, so each check
    /// is on a delta, and exact only where no other test can add to it.
    #[test]
    fn counters_follow_events() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            DbOptions {
                sync_mode: SyncMode::None,
                ..DbOptions::default()
            },
        )
        .unwrap();
        let cf = db.create_cf("m", CfOptions::default()).unwrap();

        let m0 = db.metrics();
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..100u32 {
            t.put(&cf, &i.to_be_bytes(), &[7u8; 100]).unwrap();
        }
        t.commit().unwrap();
        let m1 = db.metrics();
        assert!(m1.wal_bytes_written >= m0.wal_bytes_written + 100 * 100);
        assert!(m1.memtable_bytes >= 100 * 100);

        db.flush().unwrap();
        let m2 = db.metrics();
        assert!(m2.memtable_flushes > m1.memtable_flushes);
        assert!(m2.table_bytes_written > m1.table_bytes_written);
        assert_eq!(db.cf_stats(&cf).table_files, 1);
        assert!(m2.table_files >= 1 && m2.table_file_bytes > 0);

        // A point read of a flushed key: a block read, from the cache or not.
        let mut r = db.begin(Isolation::RepeatableRead);
        assert!(r.get(&cf, &5u32.to_be_bytes()).unwrap().is_some());
        let m3 = db.metrics();
        assert!(
            m3.block_cache_hits + m3.block_cache_misses
                > m2.block_cache_hits + m2.block_cache_misses
        );
        assert!(m3.block_cache_bytes > 0);
        db.set_block_cache_size(0);
        assert_eq!(db.metrics().block_cache_bytes, 0);
        db.set_block_cache_size(64 << 20);
        assert!(r.get(&cf, &6u32.to_be_bytes()).unwrap().is_some());
        assert!(db.metrics().block_cache_bytes > 0);

        db.compact_range(&cf, None, None).unwrap();
        assert!(db.metrics().compactions > m3.compactions);

        // A lock wait that times out, then a write conflict.
        let mut a = db.begin(Isolation::RepeatableRead);
        a.lock(&cf, b"k", LockMode::Exclusive, Duration::from_secs(1))
            .unwrap();
        let m4 = db.metrics();
        let mut b = db.begin(Isolation::RepeatableRead);
        let e = b.lock(&cf, b"k", LockMode::Exclusive, Duration::from_millis(10));
        assert!(matches!(e, Err(Error::LockTimeout)));
        let m5 = db.metrics();
        assert!(m5.lock_waits > m4.lock_waits);
        assert!(m5.lock_wait_timeouts > m4.lock_wait_timeouts);
        a.rollback();
        b.rollback();

        let mut x = db.begin(Isolation::RepeatableRead);
        let mut y = db.begin(Isolation::RepeatableRead);
        x.put(&cf, b"c", b"1").unwrap();
        y.put(&cf, b"c", b"2").unwrap();
        x.commit().unwrap();
        assert!(matches!(y.commit(), Err(Error::Conflict)));
        assert!(db.metrics().write_conflicts > m5.write_conflicts);
        db.close().unwrap();
    }

    #[test]
    fn cf_options_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let opts = CfOptions {
            compression: crate::Compression::Zstd { level: 5 },
            bloom_bits_per_key: 4,
            block_size: 8192,
            value_separation_threshold: Some(1000),
        };
        {
            let db = Db::open(dir.path(), DbOptions::default()).unwrap();
            let cf = db.create_cf("z", opts.clone()).unwrap();
            assert_eq!(cf.options().compression, opts.compression);
            db.close().unwrap();
        }
        let db = Db::open(dir.path(), DbOptions::default()).unwrap();
        let o = db.cf("z").unwrap().options();
        assert_eq!(o.compression, opts.compression);
        assert_eq!(o.bloom_bits_per_key, 4);
        assert_eq!(o.block_size, 8192);
        assert_eq!(o.value_separation_threshold, Some(1000));
    }
}
