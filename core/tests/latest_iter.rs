#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Txn::iter_latest`: reads the latest committed state (re-read at each
//! seek), merged with the transaction's own writes, pinned against compaction.

use tidesdb_core::*;

fn open(dir: &std::path::Path) -> (Db, Cf) {
    let db = Db::open(
        dir,
        DbOptions {
            sync_mode: SyncMode::None,
            write_buffer_size: 64 << 10,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    (db, cf)
}

fn put(db: &Db, cf: &Cf, k: &str, v: &str) {
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(cf, k.as_bytes(), v.as_bytes()).unwrap();
    t.commit().unwrap();
}

fn del(db: &Db, cf: &Cf, k: &str) {
    let mut t = db.begin(Isolation::RepeatableRead);
    t.delete(cf, k.as_bytes()).unwrap();
    t.commit().unwrap();
}

fn collect_fwd(it: &mut TxnIter) -> Vec<(String, String)> {
    let mut v = Vec::new();
    it.seek_to_first();
    while it.valid() {
        v.push((
            String::from_utf8(it.key().to_vec()).unwrap(),
            String::from_utf8(it.value().to_vec()).unwrap(),
        ));
        it.next();
    }
    it.status().unwrap();
    v
}

fn collect_bwd(it: &mut TxnIter) -> Vec<(String, String)> {
    let mut v = Vec::new();
    it.seek_to_last();
    while it.valid() {
        v.push((
            String::from_utf8(it.key().to_vec()).unwrap(),
            String::from_utf8(it.value().to_vec()).unwrap(),
        ));
        it.prev();
    }
    it.status().unwrap();
    v.reverse();
    v
}

fn kv(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn latest_sees_commits_after_snapshot_and_own_writes() {
    let d = tempfile::tempdir().unwrap();
    let (db, cf) = open(d.path());
    put(&db, &cf, "a", "1");
    put(&db, &cf, "b", "1");
    put(&db, &cf, "c", "1");
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"d", b"own").unwrap();
    // Commits after t's snapshot.
    put(&db, &cf, "b", "2");
    del(&db, &cf, "c");
    put(&db, &cf, "e", "2");

    let mut snap = t.iter(&cf, IterOptions::default()).unwrap();
    assert_eq!(
        collect_fwd(&mut snap),
        kv(&[("a", "1"), ("b", "1"), ("c", "1"), ("d", "own")])
    );
    let mut lat = t.iter_latest(&cf, IterOptions::default()).unwrap();
    let want = kv(&[("a", "1"), ("b", "2"), ("d", "own"), ("e", "2")]);
    assert_eq!(collect_fwd(&mut lat), want);
    assert_eq!(collect_bwd(&mut lat), want);
    assert_eq!(lat.read_seq(), db.latest_sequence());

    // Own writes win over newer commits; a seek re-reads the latest state.
    t.put(&cf, b"b", b"mine").unwrap();
    t.delete(&cf, b"a").unwrap();
    put(&db, &cf, "f", "3");
    let want = kv(&[("b", "mine"), ("d", "own"), ("e", "2"), ("f", "3")]);
    assert_eq!(collect_fwd(&mut lat), want);
    assert_eq!(collect_bwd(&mut lat), want);
    lat.seek(b"e");
    assert_eq!(lat.key(), b"e");
    lat.seek_for_prev(b"c");
    assert_eq!(lat.key(), b"b");

    // Bounds work as for snapshot iterators.
    let mut b = t
        .iter_latest(
            &cf,
            IterOptions {
                lower_bound: Some(b"c".to_vec()),
                upper_bound: Some(b"f".to_vec()),
            },
        )
        .unwrap();
    assert_eq!(collect_fwd(&mut b), kv(&[("d", "own"), ("e", "2")]));
    // The snapshot of the transaction itself did not move.
    assert_eq!(t.get(&cf, b"c").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn latest_rereads_across_flush_and_compaction() {
    let d = tempfile::tempdir().unwrap();
    let (db, cf) = open(d.path());
    for i in 0..2000 {
        put(&db, &cf, &format!("k{i:05}"), "old");
    }
    let t = db.begin(Isolation::RepeatableRead);
    let mut t = t;
    let mut lat = t.iter_latest(&cf, IterOptions::default()).unwrap();
    lat.seek_to_first();
    assert_eq!(lat.value(), b"old");
    // Overwrite everything, flush and compact: memtables rotate, tables change.
    for i in 0..2000 {
        put(&db, &cf, &format!("k{i:05}"), "new");
    }
    // The positioned iterator keeps reading the version it started on.
    let mut n = 0;
    while lat.valid() {
        assert_eq!(lat.value(), b"old", "pinned read at the first sequence");
        n += 1;
        lat.next();
    }
    lat.status().unwrap();
    assert_eq!(n, 2000);
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    // A seek moves to the latest state, read from the new tables.
    let all = collect_fwd(&mut lat);
    assert_eq!(all.len(), 2000);
    assert!(all.iter().all(|(_, v)| v == "new"));
    let mut snap = t.iter(&cf, IterOptions::default()).unwrap();
    let all = collect_fwd(&mut snap);
    assert!(all.iter().all(|(_, v)| v == "old"));
}

#[test]
fn latest_iterator_pins_its_sequence_against_compaction() {
    let d = tempfile::tempdir().unwrap();
    let (db, cf) = open(d.path());
    for i in 0..500 {
        put(&db, &cf, &format!("k{i:04}"), "v1");
    }
    let mut t = db.begin(Isolation::RepeatableRead);
    // The txn snapshot is older; the latest iterator reads at a newer seq.
    for i in 0..500 {
        put(&db, &cf, &format!("k{i:04}"), "v2");
    }
    let mut lat = t.iter_latest(&cf, IterOptions::default()).unwrap();
    lat.seek_to_first();
    // Newer versions and deletes arrive, then everything is compacted.
    for i in 0..500 {
        if i % 2 == 0 {
            del(&db, &cf, &format!("k{i:04}"));
        } else {
            put(&db, &cf, &format!("k{i:04}"), "v3");
        }
    }
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let mut n = 0;
    while lat.valid() {
        assert_eq!(lat.value(), b"v2");
        n += 1;
        lat.next();
    }
    lat.status().unwrap();
    assert_eq!(n, 500);
    // Backward at the pinned sequence (prev after a direction switch
    // re-seeks the sources, not the sequence).
    lat.seek_to_last();
    assert_eq!(lat.key(), b"k0499");
    assert_eq!(lat.value(), b"v3");
    drop(lat);
    let mut snap = t.iter(&cf, IterOptions::default()).unwrap();
    assert!(collect_fwd(&mut snap).iter().all(|(_, v)| v == "v1"));
}
