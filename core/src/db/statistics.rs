//! Statistics: the engine's process-wide counters (`crate::metrics`) plus this
//! database's gauges (memory, files, compaction debt), read through
//! `Db::metrics`.

use super::database::DbInner;
use crate::metrics::Metrics;
use crate::version::levels::Levels;
use std::sync::atomic::Ordering;

impl DbInner {
    pub(crate) fn metrics(&self) -> Metrics {
        let mut m = Metrics::counters();
        m.wal_syncs = self.commit.wal_sync_count();
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
    pub(crate) fn pending_compaction_bytes(&self, lv: &Levels) -> u64 {
        let mut pending = 0u64;
        for (level, files) in lv.levels.iter().enumerate() {
            let bytes: u64 = files.iter().map(|f| f.meta.size).sum();
            if level == 0 {
                if files.len() >= crate::compaction::leveled::L0_TRIGGER {
                    pending += bytes;
                }
            } else if level + 1 < lv.levels.len() {
                pending += bytes
                    .saturating_sub(crate::compaction::leveled::level_target(&self.opts, level));
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
            encryption_key: None,
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
