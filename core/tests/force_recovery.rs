#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `DbOptions::force_recovery`: a read-only open that changes nothing on disk,
//! refuses writes, and at its levels gets past a damaged WAL segment (2) and a
//! damaged manifest (3), naming the file in `Db::recovery_notes`.

use std::collections::BTreeMap;
use std::path::Path;
use tidesdb_core::*;

fn opts(level: u8) -> DbOptions {
    DbOptions {
        sync_mode: SyncMode::Full,
        write_buffer_size: 1 << 20,
        force_recovery: level,
        ..DbOptions::default()
    }
}

fn put(db: &Db, cf: &Cf, from: u32, to: u32) {
    for i in from..to {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(cf, format!("k{i:04}").as_bytes(), b"value").unwrap();
        t.commit().unwrap();
    }
}

fn count(db: &Db, cf: &Cf) -> usize {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    it.seek(b"");
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    n
}

/// Every file but LOCK with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "LOCK")
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).unwrap();
            (n, b)
        })
        .collect()
}

fn overwrite_middle(path: &Path, written: usize) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&[0xab; 16], (written / 2) as u64).unwrap();
}

/// 100 keys flushed to a table file, 100 more only in the WAL (a close does
/// not flush: the next open replays them).
fn populate(dir: &Path) {
    let db = Db::open(dir, opts(0)).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    put(&db, &cf, 0, 100);
    db.flush().unwrap();
    put(&db, &cf, 100, 200);
    db.close().unwrap();
}

#[test]
fn force_recovery_open_is_read_only_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    populate(d.path());
    let before = files(d.path());
    {
        let db = Db::open(d.path(), opts(1)).unwrap();
        let cf = db.cf("t").unwrap();
        assert_eq!(count(&db, &cf), 200, "the WAL's commits are replayed");
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"new", b"v").unwrap();
        assert!(matches!(t.commit(), Err(Error::ReadOnly { level: 1 })));
        assert!(matches!(
            db.create_cf("u", CfOptions::default()),
            Err(Error::ReadOnly { .. })
        ));
        assert!(db.flush().is_err());
        db.close().unwrap();
    }
    assert!(
        files(d.path()) == before,
        "a read-only open changed the directory"
    );
}

#[test]
fn force_recovery_2_replays_a_damaged_wal_up_to_the_damage() {
    let d = tempfile::tempdir().unwrap();
    populate(d.path());
    let wal = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    let written = std::fs::read(&wal)
        .unwrap()
        .iter()
        .rposition(|&b| b != 0)
        .unwrap()
        + 1;
    overwrite_middle(&wal, written);
    assert!(
        Db::open(d.path(), opts(1)).is_err(),
        "level 1 does not skip a damaged WAL"
    );
    let db = Db::open(d.path(), opts(2)).unwrap();
    let cf = db.cf("t").unwrap();
    let n = count(&db, &cf);
    assert!(
        (100..200).contains(&n),
        "flushed keys all there, WAL ones up to the damage: {n}"
    );
    let notes = db.recovery_notes();
    assert!(
        notes.iter().any(|n| n.contains(&*wal.to_string_lossy())),
        "{notes:?}"
    );
}

#[test]
fn force_recovery_3_reads_a_damaged_manifest_from_its_copy() {
    let d = tempfile::tempdir().unwrap();
    populate(d.path());
    {
        // a clean open and close: every key in table files, a fresh manifest
        let db = Db::open(d.path(), opts(0)).unwrap();
        db.close().unwrap();
    }
    let current = std::fs::read_to_string(d.path().join("CURRENT")).unwrap();
    let manifest = d.path().join(current.trim());
    let size = std::fs::metadata(&manifest).unwrap().len() as usize;
    overwrite_middle(&manifest, size);
    assert!(Db::open(d.path(), opts(2)).is_err());
    let db = Db::open(d.path(), opts(3)).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(count(&db, &cf), 200);
    let notes = db.recovery_notes();
    assert!(notes.iter().any(|n| n.contains(".copy")), "{notes:?}");
}
