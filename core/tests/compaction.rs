#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::time::{Duration, Instant};
use tidesdb_core::*;

fn opts() -> DbOptions {
    common::opts(SyncMode::None, 32 << 10)
}

/// Table files in the database directory.
fn sst_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count()
}

fn count(db: &Db, cf: &Cf) -> usize {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    n
}

#[test]
fn background_compaction_bounds_l0_and_keeps_data() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    for round in 0..30u32 {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..500u32 {
            t.put(
                &cf,
                format!("k{:06}", (i * 7919 + round * 13) % 3000).as_bytes(),
                &[round as u8; 60],
            )
            .unwrap();
        }
        t.commit().unwrap();
    }
    db.flush().unwrap();
    let t0 = Instant::now();
    while db.cf_stats(&cf).files_per_level[0] >= 4 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = db.cf_stats(&cf);
    assert!(st.files_per_level[0] < 4, "{st:?}");
    assert!(st.files_per_level[1..].iter().sum::<u64>() > 0, "{st:?}");
    let n = count(&db, &cf);
    assert!(n > 2000 && n <= 3000);
    db.close().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(count(&db, &cf), n);
}

#[test]
fn gc_respects_snapshots_and_drops_tombstones() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let put = |k: &[u8], v: &[u8]| {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, k, v).unwrap();
        t.commit().unwrap();
    };
    for i in 0..100u32 {
        put(format!("k{i:03}").as_bytes(), b"v1");
    }
    let mut old = db.begin(Isolation::RepeatableRead);
    for i in 0..100u32 {
        put(format!("k{i:03}").as_bytes(), b"v2");
    }
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..50u32 {
        t.delete(&cf, format!("k{i:03}").as_bytes()).unwrap();
    }
    t.commit().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    // the old snapshot still sees v1 everywhere
    assert_eq!(old.get(&cf, b"k010").unwrap().unwrap(), b"v1");
    assert_eq!(old.get(&cf, b"k090").unwrap().unwrap(), b"v1");
    assert_eq!(count(&db, &cf), 50);
    let keys_with_snapshot = db.cf_stats(&cf).approx_keys;
    // per key: the version seen by `old` (v1) + the newest (v2 or tombstone)
    assert_eq!(keys_with_snapshot, 200);
    old.rollback();
    db.compact_range(&cf, None, None).unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.approx_keys, 50, "{st:?}");
    assert_eq!(count(&db, &cf), 50);
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&cf, b"k060").unwrap().unwrap(), b"v2");
    assert_eq!(t.get(&cf, b"k010").unwrap(), None);
}

#[test]
fn dropped_cf_space_reclaimed() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("big", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..5000u32 {
        t.put(&cf, format!("k{i:06}").as_bytes(), &[1u8; 100])
            .unwrap();
    }
    t.commit().unwrap();
    db.flush().unwrap();
    assert!(sst_count(d.path()) > 0);
    db.drop_cf("big").unwrap();
    assert_eq!(sst_count(d.path()), 0);
}

/// A flush writes only the versions a reader can see: the newest of each key,
/// plus the newest one each live snapshot sees.
#[test]
fn flush_drops_versions_no_snapshot_sees() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::None,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let put = |v: u32| {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"k", &v.to_le_bytes()).unwrap();
        t.put(&cf, &v.to_be_bytes(), b"x").unwrap();
        t.commit().unwrap();
    };
    for v in 0..50 {
        put(v);
    }
    let mut snap = db.begin(Isolation::RepeatableRead);
    assert_eq!(snap.get(&cf, b"k").unwrap().unwrap(), 49u32.to_le_bytes());
    for v in 50..100 {
        put(v);
    }
    db.flush().unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.memtable_bytes, 0);
    // "k": versions 99 and 49 (the snapshot's), plus the 100 one-version keys
    assert_eq!(st.approx_keys, 102);
    assert_eq!(snap.get(&cf, b"k").unwrap().unwrap(), 49u32.to_le_bytes());
    let mut now = db.begin(Isolation::RepeatableRead);
    assert_eq!(now.get(&cf, b"k").unwrap().unwrap(), 99u32.to_le_bytes());
    assert_eq!(count(&db, &cf), 101);
    drop(snap);
}

/// Compaction reads its inputs without filling the block cache (their files
/// are deleted afterwards): caching them evicted the blocks readers use.
#[test]
fn compaction_does_not_evict_cached_blocks() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            block_cache_size: 1 << 20,
            ..opts()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let hot = db.create_cf("hot", CfOptions::default()).unwrap();
    let put_all = |cf: &Cf, keys: &mut dyn Iterator<Item = u32>| {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in keys {
            t.put(cf, format!("k{i:06}").as_bytes(), &[7u8; 100])
                .unwrap();
        }
        t.commit().unwrap();
        db.flush().unwrap();
    };
    put_all(&hot, &mut (0..2000u32));
    let tables = || sst_count(d.path());
    // The hot family's blocks (~250 KB) enter the 1 MiB cache.
    let read_hot = || {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..2000u32 {
            assert_eq!(
                t.get(&hot, format!("k{i:06}").as_bytes()).unwrap(),
                Some(vec![7u8; 100])
            );
        }
    };
    read_hot();
    let before = db.metrics().block_cache_bytes;
    assert!(before > 200_000, "{before}");
    // Compacting the four tables of `t` reads ~900 KB of blocks: going
    // through the cache, they evicted most of the hot blocks.
    for round in 0..4u32 {
        put_all(&cf, &mut (0..2000u32).map(|i| i * 4 + round));
    }
    db.compact_range(&cf, None, None).unwrap();
    assert_eq!(tables(), 2, "the four tables of t were merged");
    assert_eq!(db.metrics().block_cache_bytes, before);
    read_hot();
    assert_eq!(db.metrics().block_cache_bytes, before);
    assert_eq!(count(&db, &cf), 8000);
}
