#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Regression tests of what the fault model test (`fault_model.rs`) found,
//! one named test each.

mod common;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tidesdb_core::faults::{self, Fault, Op, Plan};
use tidesdb_core::*;

/// Plans are process-wide: the tests of this file arm one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn plan(dir: &Path, op: Op, fault: Fault, nth: u64) -> Plan {
    Plan {
        dir: dir.to_path_buf(),
        op,
        fault,
        nth,
        site: None,
    }
}

fn manifest_of(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("MANIFEST-") && !n.ends_with(".copy"))
        })
        .expect("a manifest")
}

fn commit(db: &Db, cf: &Cf, k: &[u8], v: &[u8]) -> Result<()> {
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(cf, k, v)?;
    t.commit()
}

/// Creating a database whose CURRENT cannot be written (the rename fails)
/// fails, and leaves no manifest behind that would make the next open
/// refuse the directory as "CURRENT missing but database files exist".
#[test]
fn failed_creation_of_current_leaves_an_openable_directory() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    faults::arm(plan(d.path(), Op::Rename, Fault::Eio, 1));
    let r = Db::open(d.path(), common::opts(SyncMode::Full, 1 << 20));
    assert!(faults::fired());
    faults::disarm();
    assert!(r.is_err(), "open succeeded without CURRENT");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    assert!(left.is_empty(), "manifest left behind: {left:?}");
    let db = Db::open(d.path(), common::opts(SyncMode::Full, 1 << 20)).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    commit(&db, &cf, b"k", b"v").unwrap();
}

/// A crash right after a new database's first manifest was written, before
/// CURRENT named it, leaves only that manifest: the directory opens as a
/// new, empty database (it holds no data to lose).
#[test]
fn manifest_without_current_from_an_unfinished_creation_opens_empty() {
    let src = tempfile::tempdir().unwrap();
    drop(Db::open(src.path(), common::opts(SyncMode::Full, 1 << 20)).unwrap());
    let m = manifest_of(src.path());
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(&m, d.path().join(m.file_name().unwrap())).unwrap();
    let db = Db::open(d.path(), common::opts(SyncMode::Full, 1 << 20)).unwrap();
    assert!(db.list_cfs().iter().all(|n| n != "t"));
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    commit(&db, &cf, b"k", b"v").unwrap();
    db.close().unwrap();
    drop(db);
    // A directory with data and no CURRENT is still refused.
    let src2 = tempfile::tempdir().unwrap();
    {
        let db = Db::open(src2.path(), common::opts(SyncMode::Full, 1 << 20)).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        commit(&db, &cf, b"k", b"v").unwrap();
        db.flush().unwrap();
    }
    std::fs::remove_file(src2.path().join("CURRENT")).unwrap();
    assert!(Db::open(src2.path(), common::opts(SyncMode::Full, 1 << 20)).is_err());
}

/// A flush whose manifest edit was written but whose fsync failed poisons
/// the database and keeps the new table file: the edit may be on disk (it
/// is, here), and after a reopen its rows are read from that file.
/// (Deleting the file on the error made the reopened database report the
/// table as unreadable.)
#[test]
fn failed_manifest_fsync_in_flush_keeps_the_table_it_names() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let opts = || common::opts(SyncMode::Full, 64 << 20);
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        for i in 0..50u32 {
            commit(&db, &cf, format!("k{i:03}").as_bytes(), b"value").unwrap();
        }
        faults::arm(plan(&manifest_of(d.path()), Op::Sync, Fault::Eio, 1));
        let r = db.flush();
        assert!(faults::fired());
        assert!(r.is_err(), "flush succeeded over a failed manifest fsync");
        assert!(
            commit(&db, &cf, b"later", b"x").is_err(),
            "a write succeeded after a failed manifest fsync"
        );
        drop(cf);
        drop(db);
    }
    faults::disarm();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..50u32 {
        let k = format!("k{i:03}");
        assert_eq!(
            t.get(&cf, k.as_bytes()).unwrap().as_deref(),
            Some(&b"value"[..]),
            "{k}"
        );
    }
    assert_eq!(t.get(&cf, b"later").unwrap(), None);
}
