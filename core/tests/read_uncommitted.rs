#![allow(clippy::unwrap_used, clippy::expect_used)]
//! READ UNCOMMITTED: plain reads see other transactions' uncommitted writes
//! (puts and deletes, in memory and spilled), minus what they rolled back, and
//! the latest committed state elsewhere; the other levels never do.

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

fn scan(t: &mut Txn, cf: &Cf) -> Vec<(String, String)> {
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
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

fn get(t: &mut Txn, cf: &Cf, k: &str) -> Option<String> {
    t.get(cf, k.as_bytes())
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn sees_uncommitted_puts_and_deletes_of_others() {
    let dir = tempfile::tempdir().unwrap();
    let (db, cf) = open(dir.path());
    put(&db, &cf, "a", "1");
    put(&db, &cf, "b", "2");

    let mut ru = db.begin(Isolation::ReadUncommitted);
    let mut rc = db.begin(Isolation::ReadCommitted);
    let mut w = db.begin(Isolation::RepeatableRead);
    w.put(&cf, b"c", b"3").unwrap();
    w.put(&cf, b"a", b"1'").unwrap();
    w.delete(&cf, b"b").unwrap();

    assert_eq!(get(&mut ru, &cf, "c").as_deref(), Some("3"));
    assert_eq!(get(&mut ru, &cf, "a").as_deref(), Some("1'"));
    assert_eq!(get(&mut ru, &cf, "b"), None);
    assert_eq!(scan(&mut ru, &cf), pairs(&[("a", "1'"), ("c", "3")]));
    // READ COMMITTED does not.
    assert_eq!(get(&mut rc, &cf, "c"), None);
    assert_eq!(scan(&mut rc, &cf), pairs(&[("a", "1"), ("b", "2")]));

    // Own writes win over the other's.
    ru.put(&cf, b"d", b"own").unwrap();
    assert_eq!(
        scan(&mut ru, &cf),
        pairs(&[("a", "1'"), ("c", "3"), ("d", "own")])
    );

    // Rolled back: gone again.
    w.rollback();
    assert_eq!(get(&mut ru, &cf, "c"), None);
    assert_eq!(
        scan(&mut ru, &cf),
        pairs(&[("a", "1"), ("b", "2"), ("d", "own")])
    );
    ru.rollback();
    rc.rollback();
}

#[test]
fn savepoint_rollback_and_commit_seen_at_each_seek() {
    let dir = tempfile::tempdir().unwrap();
    let (db, cf) = open(dir.path());
    put(&db, &cf, "a", "1");
    let mut ru = db.begin(Isolation::ReadUncommitted);
    let mut it = ru.iter(&cf, IterOptions::default()).unwrap();

    let mut w = db.begin(Isolation::RepeatableRead);
    w.put(&cf, b"b", b"2").unwrap();
    let sp = w.savepoint();
    w.put(&cf, b"c", b"3").unwrap();
    // A writer that appeared after the iterator was made is seen at the next seek.
    it.seek(b"b");
    assert!(it.valid());
    assert_eq!(it.key(), b"b");
    it.next();
    assert_eq!(it.key(), b"c");

    w.rollback_to(sp).unwrap();
    it.seek(b"b");
    assert_eq!(it.key(), b"b");
    it.next();
    assert!(!it.valid());

    // Committed: still there, now from the committed state.
    w.commit().unwrap();
    it.seek(b"b");
    assert_eq!(it.key(), b"b");
    assert_eq!(it.value(), b"2");
    drop(it);
    assert_eq!(get(&mut ru, &cf, "b").as_deref(), Some("2"));
}

#[test]
fn spilled_write_sets_are_read_up_to_their_rollback_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (db, cf) = open(dir.path());
    let mut w = db.begin(Isolation::RepeatableRead);
    w.set_spill_threshold(1);
    w.put(&cf, b"k1", b"v1").unwrap();
    w.put(&cf, b"k2", b"v2").unwrap();
    assert!(w.is_spilled());
    let sp = w.savepoint();
    w.put(&cf, b"k3", b"v3").unwrap();
    w.rollback_to(sp).unwrap();
    w.delete(&cf, b"k1").unwrap();

    let mut ru = db.begin(Isolation::ReadUncommitted);
    assert_eq!(scan(&mut ru, &cf), pairs(&[("k2", "v2")]));
    assert_eq!(get(&mut ru, &cf, "k1"), None);
    assert_eq!(get(&mut ru, &cf, "k2").as_deref(), Some("v2"));
    assert_eq!(get(&mut ru, &cf, "k3"), None);
    let mut rr = db.begin(Isolation::RepeatableRead);
    assert_eq!(scan(&mut rr, &cf), Vec::new());
    drop(w);
}
