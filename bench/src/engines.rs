//! The engines under test behind one small trait: transactional writes, a
//! snapshot reader with point gets and seek + next scans, and an explicit flush.

use std::path::Path;

pub type Res<T> = Result<T, String>;

/// Engine settings shared by every engine of a run (same sizes for all).
#[derive(Clone, Debug)]
pub struct EngineOpts {
    pub cache_bytes: usize,
    pub write_buffer_bytes: usize,
    /// Open for commits that are durable on return (fsync per commit / group).
    pub sync_commits: bool,
    /// Key-value separation: values of at least this many bytes go to value
    /// log / blob files (ours: `value_separation_threshold`; fjall:
    /// `KvSeparationOptions::separation_threshold`). `None` = off.
    pub value_separation: Option<usize>,
}

pub trait Engine: Send + Sync {
    fn name(&self) -> &'static str;
    /// One transaction that puts every pair, then commits.
    fn write_txn(&self, kvs: &[(&[u8], &[u8])]) -> Res<()>;
    /// A reader over one snapshot.
    fn reader(&self) -> Res<Box<dyn Reader + '_>>;
    /// Writes the memtables to table files and waits for it.
    fn flush(&self) -> Res<()>;
    /// Clean shutdown.
    fn close(self: Box<Self>) -> Res<()>;
}

pub trait Reader {
    /// Copies the value of `key` into `out`; false when absent.
    fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Res<bool>;
    /// Visits up to `limit` pairs from the first key >= `start` (from the first
    /// key when `None`); returns how many were visited.
    fn scan(
        &mut self,
        start: Option<&[u8]>,
        limit: usize,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Res<usize>;
}

/// Engines run by default (`BENCH_ENGINES` overrides).
pub const ENGINES: &[&str] = &[
    "tidesdb",
    "fjall",
    "fjall_sw",
    #[cfg(feature = "rocksdb")]
    "rocksdb",
];

pub fn open(engine: &str, dir: &Path, opts: &EngineOpts) -> Res<Box<dyn Engine>> {
    match engine {
        "tidesdb" => Ok(Box::new(tides::Tides::open(dir, opts)?)),
        "fjall" => Ok(Box::new(fj::Fjall::open(dir, opts)?)),
        "fjall_sw" => Ok(Box::new(fj::FjallSw::open(dir, opts)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocks::Rocks::open(dir, opts)?)),
        other => Err(format!("unknown engine {other:?} (built: {ENGINES:?})")),
    }
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

mod tides {
    use super::*;
    use tidesdb_core::{Cf, CfOptions, Db, DbOptions, Isolation, IterOptions, SyncMode, Txn};

    pub struct Tides {
        db: Db,
        cf: Cf,
    }

    impl Tides {
        pub fn open(dir: &Path, o: &EngineOpts) -> Res<Self> {
            let opts = DbOptions {
                sync_mode: if o.sync_commits {
                    SyncMode::Full
                } else {
                    SyncMode::None
                },
                write_buffer_size: o.write_buffer_bytes,
                block_cache_size: o.cache_bytes,
                ..DbOptions::default()
            };
            let db = Db::open(dir, opts).map_err(e2s)?;
            let cf = match db.cf("bench") {
                Some(cf) => cf,
                None => db
                    .create_cf(
                        "bench",
                        CfOptions {
                            value_separation_threshold: o.value_separation,
                            ..CfOptions::default()
                        },
                    )
                    .map_err(e2s)?,
            };
            Ok(Tides { db, cf })
        }
    }

    impl Engine for Tides {
        fn name(&self) -> &'static str {
            "tidesdb"
        }
        fn write_txn(&self, kvs: &[(&[u8], &[u8])]) -> Res<()> {
            let mut t = self.db.begin(Isolation::ReadCommitted);
            for (k, v) in kvs {
                t.put(&self.cf, k, v).map_err(e2s)?;
            }
            t.commit().map_err(e2s)
        }
        fn reader(&self) -> Res<Box<dyn Reader + '_>> {
            Ok(Box::new(TidesReader {
                txn: self.db.begin(Isolation::RepeatableRead),
                cf: &self.cf,
            }))
        }
        fn flush(&self) -> Res<()> {
            self.db.flush().map_err(e2s)
        }
        fn close(self: Box<Self>) -> Res<()> {
            self.db.close().map_err(e2s)
        }
    }

    struct TidesReader<'a> {
        txn: Txn,
        cf: &'a Cf,
    }

    impl Reader for TidesReader<'_> {
        fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Res<bool> {
            // The shared read (no copy inside the engine), then one copy into
            // `out`, as fjall's adapter copies its `Slice`.
            match self.txn.get_shared(self.cf, key).map_err(e2s)? {
                Some(v) => {
                    out.clear();
                    out.extend_from_slice(&v);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
        fn scan(
            &mut self,
            start: Option<&[u8]>,
            limit: usize,
            f: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Res<usize> {
            let mut it = self
                .txn
                .iter(self.cf, IterOptions::default())
                .map_err(e2s)?;
            match start {
                Some(k) => it.seek(k),
                None => it.seek_to_first(),
            }
            let mut n = 0;
            while n < limit && it.valid() {
                f(it.key(), it.value());
                n += 1;
                it.next();
            }
            it.status().map_err(e2s)?;
            Ok(n)
        }
    }
}

mod fj {
    use super::*;
    use fjall::KvSeparationOptions;

    fn sep(o: &EngineOpts) -> Option<KvSeparationOptions> {
        o.value_separation.map(|t| {
            KvSeparationOptions::default()
                .separation_threshold(u32::try_from(t).unwrap_or(u32::MAX))
        })
    }
    use fjall::{
        Keyspace, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, PersistMode,
        Readable, SingleWriterTxDatabase, SingleWriterTxKeyspace, Snapshot,
    };

    pub struct Fjall {
        db: OptimisticTxDatabase,
        ks: OptimisticTxKeyspace,
        sync: bool,
    }

    impl Fjall {
        pub fn open(dir: &Path, o: &EngineOpts) -> Res<Self> {
            let db = OptimisticTxDatabase::builder(dir)
                .cache_size(o.cache_bytes as u64)
                .open()
                .map_err(e2s)?;
            let wb = o.write_buffer_bytes as u64;
            // Defaults otherwise: 4 KiB blocks, bloom filters, leveled
            // compaction; compression is off (crate built without lz4).
            let ks = db
                .keyspace("bench", || {
                    KeyspaceCreateOptions::default()
                        .max_memtable_size(wb)
                        .with_kv_separation(sep(o))
                })
                .map_err(e2s)?;
            Ok(Fjall {
                db,
                ks,
                sync: o.sync_commits,
            })
        }
    }

    impl Engine for Fjall {
        fn name(&self) -> &'static str {
            "fjall"
        }
        fn write_txn(&self, kvs: &[(&[u8], &[u8])]) -> Res<()> {
            let mut t = self.db.write_tx().map_err(e2s)?;
            if self.sync {
                t = t.durability(Some(PersistMode::SyncAll));
            }
            for (k, v) in kvs {
                t.insert(&self.ks, *k, *v);
            }
            match t.commit().map_err(e2s)? {
                Ok(()) => Ok(()),
                Err(c) => Err(format!("fjall conflict: {c:?}")),
            }
        }
        fn reader(&self) -> Res<Box<dyn Reader + '_>> {
            Ok(Box::new(FjallReader {
                snap: self.db.read_tx(),
                ks: self.ks.inner(),
            }))
        }
        fn flush(&self) -> Res<()> {
            self.ks.inner().rotate_memtable_and_wait().map_err(e2s)
        }
        fn close(self: Box<Self>) -> Res<()> {
            self.db.persist(PersistMode::SyncAll).map_err(e2s)
        }
    }

    /// fjall's single-writer transactions: writers serialized by a mutex, no
    /// conflict tracking (cheaper than the optimistic flavour, but not what
    /// our engine offers: only for the write workloads, as a reference).
    pub struct FjallSw {
        db: SingleWriterTxDatabase,
        ks: SingleWriterTxKeyspace,
        sync: bool,
    }

    impl FjallSw {
        pub fn open(dir: &Path, o: &EngineOpts) -> Res<Self> {
            let db = SingleWriterTxDatabase::builder(dir)
                .cache_size(o.cache_bytes as u64)
                .open()
                .map_err(e2s)?;
            let wb = o.write_buffer_bytes as u64;
            let ks = db
                .keyspace("bench", || {
                    KeyspaceCreateOptions::default()
                        .max_memtable_size(wb)
                        .with_kv_separation(sep(o))
                })
                .map_err(e2s)?;
            Ok(FjallSw {
                db,
                ks,
                sync: o.sync_commits,
            })
        }
    }

    impl Engine for FjallSw {
        fn name(&self) -> &'static str {
            "fjall_sw"
        }
        fn write_txn(&self, kvs: &[(&[u8], &[u8])]) -> Res<()> {
            let mut t = self.db.write_tx();
            if self.sync {
                t = t.durability(Some(PersistMode::SyncAll));
            }
            for (k, v) in kvs {
                t.insert(&self.ks, *k, *v);
            }
            t.commit().map_err(e2s)
        }
        fn reader(&self) -> Res<Box<dyn Reader + '_>> {
            Ok(Box::new(FjallReader {
                snap: self.db.read_tx(),
                ks: self.ks.inner(),
            }))
        }
        fn flush(&self) -> Res<()> {
            self.ks.inner().rotate_memtable_and_wait().map_err(e2s)
        }
        fn close(self: Box<Self>) -> Res<()> {
            self.db.persist(PersistMode::SyncAll).map_err(e2s)
        }
    }

    struct FjallReader<'a> {
        snap: Snapshot,
        ks: &'a Keyspace,
    }

    impl Reader for FjallReader<'_> {
        fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Res<bool> {
            match self.snap.get(self.ks, key).map_err(e2s)? {
                Some(v) => {
                    out.clear();
                    out.extend_from_slice(&v);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
        fn scan(
            &mut self,
            start: Option<&[u8]>,
            limit: usize,
            f: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Res<usize> {
            let it = match start {
                Some(k) => self.snap.range::<&[u8], _>(self.ks, k..),
                None => self.snap.iter(self.ks),
            };
            let mut n = 0;
            for g in it.take(limit) {
                let (k, v) = g.into_inner().map_err(e2s)?;
                f(&k, &v);
                n += 1;
            }
            Ok(n)
        }
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;
    use rocksdb::{
        BlockBasedOptions, Cache, DBCompressionType, OptimisticTransactionDB,
        OptimisticTransactionOptions, Options, ReadOptions, SnapshotWithThreadMode, WriteOptions,
    };

    type Db = OptimisticTransactionDB;

    pub struct Rocks {
        db: Db,
        sync: bool,
    }

    impl Rocks {
        pub fn open(dir: &Path, o: &EngineOpts) -> Res<Self> {
            let mut opts = Options::default();
            opts.create_if_missing(true);
            opts.set_compression_type(DBCompressionType::None);
            opts.set_write_buffer_size(o.write_buffer_bytes);
            opts.increase_parallelism(2);
            let mut bb = BlockBasedOptions::default();
            bb.set_block_cache(&Cache::new_lru_cache(o.cache_bytes));
            bb.set_block_size(4096);
            bb.set_bloom_filter(10.0, false);
            opts.set_block_based_table_factory(&bb);
            let db = Db::open(&opts, dir).map_err(e2s)?;
            Ok(Rocks {
                db,
                sync: o.sync_commits,
            })
        }
    }

    impl Engine for Rocks {
        fn name(&self) -> &'static str {
            "rocksdb"
        }
        fn write_txn(&self, kvs: &[(&[u8], &[u8])]) -> Res<()> {
            let mut wo = WriteOptions::default();
            wo.set_sync(self.sync);
            let t = self
                .db
                .transaction_opt(&wo, &OptimisticTransactionOptions::default());
            for (k, v) in kvs {
                t.put(k, v).map_err(e2s)?;
            }
            t.commit().map_err(e2s)
        }
        fn reader(&self) -> Res<Box<dyn Reader + '_>> {
            Ok(Box::new(RocksReader {
                db: &self.db,
                snap: self.db.snapshot(),
            }))
        }
        fn flush(&self) -> Res<()> {
            self.db.flush().map_err(e2s)
        }
        fn close(self: Box<Self>) -> Res<()> {
            self.db.flush_wal(true).map_err(e2s)
        }
    }

    struct RocksReader<'a> {
        db: &'a Db,
        snap: SnapshotWithThreadMode<'a, Db>,
    }

    impl Reader for RocksReader<'_> {
        fn get(&mut self, key: &[u8], out: &mut Vec<u8>) -> Res<bool> {
            let mut ro = ReadOptions::default();
            ro.set_snapshot(&self.snap);
            match self.db.get_pinned_opt(key, &ro).map_err(e2s)? {
                Some(v) => {
                    out.clear();
                    out.extend_from_slice(&v);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
        fn scan(
            &mut self,
            start: Option<&[u8]>,
            limit: usize,
            f: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Res<usize> {
            let mut ro = ReadOptions::default();
            ro.set_snapshot(&self.snap);
            let mut it = self.db.raw_iterator_opt(ro);
            match start {
                Some(k) => it.seek(k),
                None => it.seek_to_first(),
            }
            let mut n = 0;
            while n < limit && it.valid() {
                if let (Some(k), Some(v)) = (it.key(), it.value()) {
                    f(k, v);
                }
                n += 1;
                it.next();
            }
            it.status().map_err(e2s)?;
            Ok(n)
        }
    }
}
