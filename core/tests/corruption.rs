#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Damaged files must give clean errors (or a consistent prefix for a torn
//! WAL tail), never a panic.

mod common;
use std::path::{Path, PathBuf};
use tidesdb_core::*;

fn opts() -> DbOptions {
    common::opts(SyncMode::None, 1 << 20)
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    v.sort();
    v
}

fn populate(dir: &Path, flush: bool) {
    let db = Db::open(dir, opts()).unwrap();
    let cf = db
        .create_cf(
            "t",
            CfOptions {
                block_size: 256,
                ..CfOptions::default()
            },
        )
        .unwrap();
    for i in 0..50u32 {
        let mut t = db.begin(Isolation::RepeatableRead);
        for j in 0..10u32 {
            t.put(&cf, format!("k{i:03}-{j}").as_bytes(), &[i as u8; 40])
                .unwrap();
        }
        t.commit().unwrap();
    }
    if flush {
        db.flush().unwrap();
    }
    // Simulate a crash: leak the handle so close() never runs.
    std::mem::forget(db);
}

/// Reads everything; returns Err on the first error.
fn read_all(dir: &Path) -> Result<usize> {
    let db = Db::open(dir, opts())?;
    let cf = db.cf("t").ok_or(Error::ColumnFamilyNotFound("t".into()))?;
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default())?;
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status()?;
    it.seek_to_last();
    while it.valid() {
        it.prev();
    }
    it.status()?;
    for i in 0..50u32 {
        t.get(&cf, format!("k{i:03}-3").as_bytes())?;
    }
    Ok(n)
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn wal_truncation_gives_prefix_and_midlog_flip_is_error() {
    let base = tempfile::tempdir().unwrap();
    populate(base.path(), false);
    let wal = files(base.path(), ".wal");
    assert_eq!(wal.len(), 1);
    let len = std::fs::metadata(&wal[0]).unwrap().len();
    // Truncations: always opens, a prefix of whole commits survives.
    for cut in [1u64, 17, len / 3, len / 2, len - 1] {
        let d = tempfile::tempdir().unwrap();
        copy_dir(base.path(), d.path());
        let w = files(d.path(), ".wal");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&w[0])
            .unwrap()
            .set_len(len - cut)
            .unwrap();
        let n = read_all(d.path()).unwrap();
        assert!(n < 500 && n % 10 == 0, "cut {cut}: {n}");
    }
    // A flipped byte in the middle: a clean corruption error.
    let d = tempfile::tempdir().unwrap();
    copy_dir(base.path(), d.path());
    let w = files(d.path(), ".wal");
    let mut data = std::fs::read(&w[0]).unwrap();
    data[(len / 2) as usize] ^= 0x10;
    std::fs::write(&w[0], &data).unwrap();
    let e = read_all(d.path()).unwrap_err();
    assert!(e.is_corruption(), "{e}");
}

#[test]
fn sst_byte_flips_never_panic() {
    let base = tempfile::tempdir().unwrap();
    populate(base.path(), true);
    let sst = files(base.path(), ".sst");
    assert!(!sst.is_empty());
    let len = std::fs::metadata(&sst[0]).unwrap().len() as usize;
    let mut errors = 0;
    for i in 0..60 {
        let d = tempfile::tempdir().unwrap();
        copy_dir(base.path(), d.path());
        let s = files(d.path(), ".sst");
        let mut data = std::fs::read(&s[0]).unwrap();
        let pos = (i * 7919 + 13) % len;
        data[pos] ^= 0x5a;
        std::fs::write(&s[0], &data).unwrap();
        match read_all(d.path()) {
            Ok(n) => assert_eq!(n, 500),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 30, "{errors}");
    // truncated table: open fails cleanly
    let d = tempfile::tempdir().unwrap();
    copy_dir(base.path(), d.path());
    let s = files(d.path(), ".sst");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s[0])
        .unwrap()
        .set_len((len / 2) as u64)
        .unwrap();
    assert!(read_all(d.path()).is_err());
}

#[test]
fn manifest_damage_is_error() {
    let base = tempfile::tempdir().unwrap();
    populate(base.path(), true);
    let m = files(base.path(), "")
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    // Damage inside the first record (a damaged *final* record is
    // indistinguishable from a torn write and is tolerated).
    let data = std::fs::read(&m).unwrap();
    let first_len = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize + 8;
    assert!(first_len < data.len());
    for pos in [1usize, 5, 9, first_len / 2, first_len - 1] {
        let d = tempfile::tempdir().unwrap();
        copy_dir(base.path(), d.path());
        let m2 = d.path().join(m.file_name().unwrap());
        let mut data = std::fs::read(&m2).unwrap();
        data[pos] ^= 0x22;
        std::fs::write(&m2, &data).unwrap();
        let r = read_all(d.path());
        assert!(r.is_err(), "flip at {pos} accepted");
    }
    let d = tempfile::tempdir().unwrap();
    copy_dir(base.path(), d.path());
    std::fs::remove_file(d.path().join("CURRENT")).unwrap();
    assert!(read_all(d.path()).unwrap_err().is_corruption());
}
