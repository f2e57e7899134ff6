#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use tidesdb_core::*;

fn opts() -> DbOptions {
    common::opts(SyncMode::None, 64 << 10)
}

fn collect(it: &mut TxnIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = Vec::new();
    it.seek_to_first();
    while it.valid() {
        v.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    v
}

#[test]
fn put_get_delete_across_flush_and_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        assert!(matches!(
            db.create_cf("t", CfOptions::default()),
            Err(Error::ColumnFamilyExists(_))
        ));
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..5000u32 {
            t.put(
                &cf,
                format!("k{i:06}").as_bytes(),
                format!("v{i}").as_bytes(),
            )
            .unwrap();
        }
        assert_eq!(t.write_count(), 5000);
        t.commit().unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.delete(&cf, b"k000010").unwrap();
        t.commit().unwrap();
        db.flush().unwrap();
        assert!(db.cf_stats(&cf).table_files >= 1);
        let mut t = db.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&cf, b"k000011").unwrap().unwrap(), b"v11");
        assert_eq!(t.get(&cf, b"k000010").unwrap(), None);
        t.put(&cf, b"k000011", b"new").unwrap();
        t.commit().unwrap();
        db.close().unwrap();
        assert!(matches!(db.close(), Err(Error::Closed)));
    }
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&cf, b"k000011").unwrap().unwrap(), b"new");
    assert_eq!(t.get(&cf, b"k000010").unwrap(), None);
    assert_eq!(t.get(&cf, b"k004999").unwrap().unwrap(), b"v4999");
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    assert_eq!(collect(&mut it).len(), 4999);
    let est = db.approximate_keys_in_range(&cf, Some(b"k001000"), Some(b"k002000"));
    assert!((500..3000).contains(&est), "{est}");
}

#[test]
fn snapshot_isolation_and_conflict() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t0 = db.begin(Isolation::RepeatableRead);
    t0.put(&cf, b"a", b"1").unwrap();
    t0.commit().unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    let mut rc = db.begin(Isolation::ReadCommitted);
    let mut w1 = db.begin(Isolation::RepeatableRead);
    let mut w2 = db.begin(Isolation::RepeatableRead);
    w1.put(&cf, b"a", b"2").unwrap();
    w2.put(&cf, b"a", b"3").unwrap();
    w1.commit().unwrap();
    assert!(matches!(w2.commit(), Err(Error::Conflict)));
    assert_eq!(r.get(&cf, b"a").unwrap().unwrap(), b"1");
    assert_eq!(rc.get(&cf, b"a").unwrap().unwrap(), b"1");
    rc.refresh_snapshot();
    assert_eq!(rc.get(&cf, b"a").unwrap().unwrap(), b"2");
    assert!(Error::Conflict.is_retryable());
}

#[test]
fn savepoints_and_iter_own_writes() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"b", b"1").unwrap();
    let sp = t.savepoint();
    t.put(&cf, b"c", b"2").unwrap();
    t.put(&cf, b"b", b"9").unwrap();
    let sp2 = t.savepoint();
    t.delete(&cf, b"b").unwrap();
    assert_eq!(t.get(&cf, b"b").unwrap(), None);
    t.rollback_to(sp2).unwrap();
    assert_eq!(t.get(&cf, b"b").unwrap().unwrap(), b"9");
    t.rollback_to(sp).unwrap();
    assert_eq!(t.get(&cf, b"b").unwrap().unwrap(), b"1");
    assert_eq!(t.get(&cf, b"c").unwrap(), None);
    assert!(t.rollback_to(sp2).is_err());
    t.put(&cf, b"d", b"4").unwrap();
    t.rollback_to(sp).unwrap();
    t.put(&cf, b"a", b"0").unwrap();
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    assert_eq!(
        collect(&mut it),
        vec![
            (b"a".to_vec(), b"0".to_vec()),
            (b"b".to_vec(), b"1".to_vec())
        ]
    );
    t.release(sp).unwrap();
    t.commit().unwrap();
}

#[test]
fn cf_ddl_durable() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let a = db.create_cf("a", CfOptions::default()).unwrap();
        let b = db
            .create_cf(
                "b",
                CfOptions {
                    compression: Compression::Zstd { level: 1 },
                    ..CfOptions::default()
                },
            )
            .unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&a, b"k", b"va").unwrap();
        t.put(&b, b"k", b"vb").unwrap();
        t.commit().unwrap();
        db.rename_cf("a", "a2").unwrap();
        assert_eq!(a.name(), "a2");
        db.drop_cf("b").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        assert!(matches!(
            t.get(&b, b"k"),
            Err(Error::ColumnFamilyNotFound(_))
        ));
        assert!(matches!(
            db.drop_cf("b"),
            Err(Error::ColumnFamilyNotFound(_))
        ));
        assert_eq!(db.list_cfs(), vec!["a2".to_string()]);
        // recreate with same name: empty
        let b2 = db.create_cf("b", CfOptions::default()).unwrap();
        assert_ne!(b2.id(), b.id());
        assert_eq!(
            db.begin(Isolation::RepeatableRead).get(&b2, b"k").unwrap(),
            None
        );
    }
    let db = Db::open(d.path(), opts()).unwrap();
    assert_eq!(db.list_cfs(), vec!["a2".to_string(), "b".to_string()]);
    let a = db.cf("a2").unwrap();
    let b = db.cf("b").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&a, b"k").unwrap().unwrap(), b"va");
    assert_eq!(t.get(&b, b"k").unwrap(), None);
}

#[test]
fn group_commit_full_sync_many_threads() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::Full,
            ..opts()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let hs: Vec<_> = (0..8)
        .map(|th| {
            let db = db.clone();
            let cf = cf.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let mut t = db.begin(Isolation::RepeatableRead);
                    t.put(&cf, format!("{th}-{i}").as_bytes(), b"x").unwrap();
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    assert_eq!(collect(&mut it).len(), 400);
    db.set_sync_mode(SyncMode::Interval { millis: 5 });
    db.sync_wal().unwrap();
}

/// A range within one or two blocks of a table file is counted, not estimated
/// from the block index: a five-row table's one-row range is one row (the
/// optimizer compares this with the table's row count to pick an index).
#[test]
fn small_ranges_in_table_files_are_counted() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for k in [&b"a"[..], b"ab", b"b", b"c", b"d"] {
        t.put(&cf, k, b"v").unwrap();
    }
    t.commit().unwrap();
    db.flush().unwrap();
    assert!(db.cf_stats(&cf).table_files >= 1);
    let count = |s: &[u8], e: &[u8]| db.approximate_keys_in_range(&cf, Some(s), Some(e));
    assert_eq!(count(b"ab", b"ab\0"), 1);
    assert_eq!(count(b"a", b"c"), 3);
    assert_eq!(count(b"x", b"z"), 0);
    assert_eq!(db.approximate_keys_in_range(&cf, None, None), 5);
    // A wide range of a large table is still estimated from the index.
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..20_000u32 {
        t.put(&cf, format!("k{i:06}").as_bytes(), &[7u8; 100])
            .unwrap();
    }
    t.commit().unwrap();
    db.flush().unwrap();
    let est = count(b"k001000", b"k011000");
    assert!((5_000..15_000).contains(&est), "{est}");
    assert_eq!(count(b"k001000", b"k001003"), 3);
}

/// `sample_keys` spreads its keys over the whole range, whether the entries are
/// in the memtable, in tables, or both: each tenth of the key range gets about a
/// tenth of the samples.
#[test]
fn sample_keys_spread_over_the_range() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    assert!(db.sample_keys(&cf, 64).is_empty());
    let put = |from: u32, to: u32| {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in from..to {
            t.put(&cf, format!("k{i:06}").as_bytes(), b"v").unwrap();
        }
        t.commit().unwrap();
    };
    let check = |what: &str, total: u32| {
        let keys = db.sample_keys(&cf, 64);
        // (A table offers one key per data block: ~35 blocks here.)
        assert!(
            (30..=80).contains(&keys.len()),
            "{what}: {} keys",
            keys.len()
        );
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{what}: not in order");
        let mut deciles = [0usize; 10];
        for k in &keys {
            let i: u32 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            deciles[(i * 10 / total) as usize] += 1;
        }
        let per = keys.len() / 10;
        assert!(
            deciles
                .iter()
                .all(|&n| n + 4 >= per / 2 && n <= per * 2 + 4),
            "{what}: {deciles:?}"
        );
    };
    put(0, 20000);
    check("memtable", 20000);
    db.flush().unwrap();
    check("tables", 20000);
    put(20000, 40000);
    check("tables and memtable", 40000);
}
