#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The WAL segment written ahead with zeros while commits are fsynced
//! (`SyncMode::Full`): a crash leaves a zero tail that replay reads as the
//! end of the log (a torn last record included), rotation and close cut the
//! zeros off, and every acknowledged commit survives.
use std::path::{Path, PathBuf};
use tidesdb_core::*;
mod common;

const MIB: u64 = 1 << 20;

fn opts(sync_mode: SyncMode) -> DbOptions {
    DbOptions {
        sync_mode,
        write_buffer_size: 4 << 20,
        ..DbOptions::default()
    }
}

fn wal_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".wal"))
        .collect();
    v.sort();
    v
}

fn commit_rows(db: &Db, cf: &Cf, from: u32, to: u32) {
    for i in from..to {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(cf, format!("row{i:05}").as_bytes(), &[i as u8; 100])
            .unwrap();
        t.commit().unwrap();
    }
}

fn count(db: &Db) -> usize {
    let cf = db.cf("t").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.key(), format!("row{n:05}").as_bytes());
        n += 1;
        it.next();
    }
    it.status().unwrap();
    n
}

#[test]
fn full_mode_zero_tail_survives_crash_and_is_cut_at_close() {
    let d = tempfile::tempdir().unwrap();
    let (crashed, torn) = {
        let db = Db::open(d.path(), opts(SyncMode::Full)).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let s0 = db.wal_sync_count();
        commit_rows(&db, &cf, 0, 200);
        assert_eq!(db.wal_sync_count(), s0 + 200, "one fsync per commit");
        let w = wal_files(d.path());
        assert_eq!(w.len(), 1);
        let len = std::fs::metadata(&w[0]).unwrap().len();
        assert_eq!(len, MIB, "records, then zeros up to the next MiB");
        // Crash: the zero tail is on disk.
        let crashed = common::crash_copy(d.path());
        // The same crash with the last commit's record half written (its
        // second half still the zeros written ahead).
        let torn = common::crash_copy(d.path());
        let tw = wal_files(torn.path());
        let mut data = std::fs::read(&tw[0]).unwrap();
        let end = data.iter().rposition(|&b| b != 0).unwrap() + 1;
        data[end - 60..end].fill(0);
        std::fs::write(&tw[0], &data).unwrap();
        std::mem::forget(db);
        (crashed, torn)
    };
    {
        let db = Db::open(crashed.path(), opts(SyncMode::Full)).unwrap();
        assert_eq!(count(&db), 200);
        let cf = db.cf("t").unwrap();
        commit_rows(&db, &cf, 200, 250);
        db.close().unwrap();
        // Closed: the segment ends with its last record.
        for w in wal_files(crashed.path()) {
            let len = std::fs::metadata(&w).unwrap().len();
            assert!(len > 0 && len < MIB, "{} is {len} bytes", w.display());
            assert_ne!(std::fs::read(&w).unwrap().last(), Some(&0u8));
        }
    }
    let db = Db::open(crashed.path(), opts(SyncMode::Full)).unwrap();
    assert_eq!(count(&db), 250);
    drop(db);
    let db = Db::open(torn.path(), opts(SyncMode::Full)).unwrap();
    assert_eq!(
        count(&db),
        199,
        "the torn last commit (never acknowledged) is gone"
    );
}

#[test]
fn relaxed_mode_writes_no_zeros() {
    // Not fsynced per commit: nothing to save, the segment grows with its
    // records only. (Rotation's cut is `wal::tests::prefill_zero_tail_and_seal`
    // and the kill -9 test in `crash.rs`, whose 32 KiB write buffer rotates
    // segments throughout.)
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts(SyncMode::None)).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    commit_rows(&db, &cf, 0, 100);
    let w = wal_files(d.path());
    let len = std::fs::metadata(&w[0]).unwrap().len();
    assert!(
        len > 100 * 100 && len < 100 * 200,
        "no zeros written ahead: {len} bytes"
    );
    db.close().unwrap();
}
