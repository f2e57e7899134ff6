#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Db::compact_range` only touches files overlapping its range.
use tidesdb_core::*;

#[test]
fn compact_range_honours_its_range() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::None,
            write_buffer_size: 1 << 20,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    // Three L0 files with disjoint key ranges (below the L0 trigger).
    for p in ["a", "m", "x"] {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..100u32 {
            t.put(&cf, format!("{p}{i:04}").as_bytes(), b"v").unwrap();
        }
        t.commit().unwrap();
        db.flush().unwrap();
    }
    assert_eq!(db.cf_stats(&cf).files_per_level[0], 3);
    db.compact_range(&cf, Some(b"m0000"), Some(b"m9999"))
        .unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.files_per_level[0], 2, "{st:?}");
    assert_eq!(st.files_per_level[1], 1, "{st:?}");
    // A range overlapping nothing changes nothing.
    db.compact_range(&cf, Some(b"q"), Some(b"r")).unwrap();
    assert_eq!(db.cf_stats(&cf).files_per_level, st.files_per_level);
    // Overwrite in L0 then compact a range including an L1 file: newest wins.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"m0005", b"new").unwrap();
    t.commit().unwrap();
    db.compact_range(&cf, Some(b"m0005"), Some(b"m0005"))
        .unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.files_per_level[0], 2, "{st:?}");
    assert_eq!(st.files_per_level[1], 1, "{st:?}");
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"m0005").unwrap().unwrap(), b"new");
    assert_eq!(r.get(&cf, b"a0042").unwrap().unwrap(), b"v");
    assert_eq!(r.get(&cf, b"x0099").unwrap().unwrap(), b"v");
    // Unbounded: everything into one run.
    db.compact_range(&cf, None, None).unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.files_per_level[0], 0, "{st:?}");
    assert_eq!(st.table_files, 1, "{st:?}");
    assert_eq!(r.get(&cf, b"m0005").unwrap().unwrap(), b"new");
    assert_eq!(r.get(&cf, b"x0000").unwrap().unwrap(), b"v");
}
