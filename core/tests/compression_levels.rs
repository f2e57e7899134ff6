#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A compressed family writes level 0 (flushes) uncompressed and compresses
//! what compactions write to level 1 and below; both read back alike, also
//! after a reopen.
use tidesdb_core::*;

fn open(dir: &std::path::Path) -> Db {
    Db::open(
        dir,
        DbOptions {
            sync_mode: SyncMode::None,
            write_buffer_size: 4 << 20,
            ..DbOptions::default()
        },
    )
    .unwrap()
}

/// Compressible rows: a key and a value of digits and dashes, as sysbench's.
fn value(i: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(120);
    let mut x = i.wrapping_mul(2_654_435_761);
    while v.len() < 120 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push(b'0' + (x % 10) as u8);
        if v.len() % 12 == 11 {
            v.push(b'-');
        }
    }
    v
}

fn load(db: &Db, cf: &Cf) {
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..20_000u32 {
        t.put(cf, format!("k{i:08}").as_bytes(), &value(i)).unwrap();
    }
    t.commit().unwrap();
    db.flush().unwrap();
}

fn check(db: &Db, cf: &Cf) {
    let mut r = db.begin(Isolation::RepeatableRead);
    for i in (0..20_000u32).step_by(97) {
        assert_eq!(
            r.get(cf, format!("k{i:08}").as_bytes()).unwrap().unwrap(),
            value(i)
        );
    }
}

#[test]
fn level_zero_is_uncompressed_and_compactions_compress() {
    let d = tempfile::tempdir().unwrap();
    let zstd = CfOptions {
        compression: Compression::Zstd { level: 3 },
        ..CfOptions::default()
    };
    let (l0_zstd, l1_zstd) = {
        let db = open(d.path());
        let cf = db.create_cf("z", zstd.clone()).unwrap();
        let plain = db.create_cf("p", CfOptions::default()).unwrap();
        load(&db, &cf);
        load(&db, &plain);
        let z0 = db.cf_stats(&cf);
        let p0 = db.cf_stats(&plain);
        assert_eq!(z0.files_per_level[0], 1, "{z0:?}");
        // The flush wrote both families alike: no compression at level 0.
        let ratio = z0.bytes_per_level[0] as f64 / p0.bytes_per_level[0] as f64;
        assert!((0.95..1.05).contains(&ratio), "L0 zstd/none {ratio}");
        check(&db, &cf);
        db.compact_range(&cf, None, None).unwrap();
        db.compact_range(&plain, None, None).unwrap();
        let z1 = db.cf_stats(&cf);
        let p1 = db.cf_stats(&plain);
        assert_eq!(z1.files_per_level[0], 0, "{z1:?}");
        let l1: u64 = z1.bytes_per_level[1..].iter().sum();
        let p1b: u64 = p1.bytes_per_level[1..].iter().sum();
        // Digits compress to well under 3/4 of their size.
        assert!(
            (l1 as f64) < 0.75 * p1b as f64,
            "compacted zstd {l1} vs none {p1b}"
        );
        check(&db, &cf);
        (z0.bytes_per_level[0], l1)
    };
    let db = open(d.path());
    let cf = db.cf("z").unwrap();
    assert_eq!(
        cf.options().compression,
        Compression::Zstd { level: 3 },
        "the family's compression is kept"
    );
    check(&db, &cf);
    assert!(l1_zstd < l0_zstd);
    // New rows flush uncompressed again over the compressed level 1.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"k00000005", b"new").unwrap();
    t.commit().unwrap();
    db.flush().unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"k00000005").unwrap().unwrap(), b"new");
    assert_eq!(r.get(&cf, b"k00000097").unwrap().unwrap(), value(97));
}

/// A full compaction writes the oldest version every snapshot sees with sequence
/// 0 at the bottom: older snapshots still read their versions, a writer whose
/// snapshot predates a newer committed version still conflicts, and a version
/// written after the compaction is newer than the zeroed one, also after a
/// reopen.
#[test]
fn bottommost_sequence_zero_keeps_snapshots_and_conflicts() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = open(d.path());
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let put = |k: &[u8], v: &[u8]| {
            let mut t = db.begin(Isolation::RepeatableRead);
            t.put(&cf, k, v).unwrap();
            t.commit().unwrap();
        };
        put(b"a", b"1");
        put(b"b", b"1");
        let mut old = db.begin(Isolation::RepeatableRead);
        assert_eq!(old.get(&cf, b"a").unwrap().unwrap(), b"1");
        let mut writer = db.begin(Isolation::RepeatableRead);
        assert_eq!(writer.get(&cf, b"b").unwrap().unwrap(), b"1");
        put(b"a", b"2");
        put(b"b", b"2");
        db.flush().unwrap();
        db.compact_range(&cf, None, None).unwrap();
        assert_eq!(old.get(&cf, b"a").unwrap().unwrap(), b"1");
        let mut now = db.begin(Isolation::RepeatableRead);
        assert_eq!(now.get(&cf, b"a").unwrap().unwrap(), b"2");
        writer.put(&cf, b"b", b"3").unwrap();
        assert!(matches!(writer.commit(), Err(Error::Conflict)));
        drop(old);
        drop(now);
        // Nothing holds an older snapshot now: both keys' versions go to sequence 0.
        db.compact_range(&cf, None, None).unwrap();
        put(b"a", b"3");
        let mut r = db.begin(Isolation::RepeatableRead);
        assert_eq!(r.get(&cf, b"a").unwrap().unwrap(), b"3");
        assert_eq!(r.get(&cf, b"b").unwrap().unwrap(), b"2");
        db.flush().unwrap();
        db.compact_range(&cf, None, None).unwrap();
        assert_eq!(r.get(&cf, b"a").unwrap().unwrap(), b"3");
    }
    let db = open(d.path());
    let cf = db.cf("t").unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"a").unwrap().unwrap(), b"3");
    assert_eq!(r.get(&cf, b"b").unwrap().unwrap(), b"2");
    // A write after the reopen is newer than the zeroed versions.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"b", b"4").unwrap();
    t.commit().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"b").unwrap().unwrap(), b"4");
}
