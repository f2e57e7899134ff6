#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Txn::commit_with(CommitOptions { sync: false })`.
use tidesdb_core::*;
mod common;

fn opts() -> DbOptions {
    DbOptions {
        sync_mode: SyncMode::Full,
        write_buffer_size: 1 << 20,
        ..DbOptions::default()
    }
}

#[test]
fn nosync_commit_is_visible_and_durable_after_later_synced_commit() {
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let s0 = db.wal_sync_count();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"autoinc", b"42").unwrap();
        t.commit_with(CommitOptions { sync: false }).unwrap();
        assert_eq!(db.wal_sync_count(), s0, "no fsync for a sync:false commit");
        // visible at once
        let mut r = db.begin(Isolation::RepeatableRead);
        assert_eq!(r.get(&cf, b"autoinc").unwrap().unwrap(), b"42");
        drop(r);
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"row", b"data").unwrap();
        t.commit().unwrap();
        assert_eq!(db.wal_sync_count(), s0 + 1, "synced commit fsyncs");
        // Default options follow the sync mode.
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"row2", b"data").unwrap();
        t.commit_with(CommitOptions::default()).unwrap();
        assert_eq!(db.wal_sync_count(), s0 + 2);
        // Simulated crash: no close, no final sync.
        let c = common::crash_copy(d.path());
        std::mem::forget(db);
        c
    };
    let db = Db::open(crashed.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"autoinc").unwrap().unwrap(), b"42");
    assert_eq!(r.get(&cf, b"row").unwrap().unwrap(), b"data");
    assert_eq!(r.get(&cf, b"row2").unwrap().unwrap(), b"data");
}

#[test]
fn nosync_commits_keep_wal_order_and_many_are_cheap() {
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let s0 = db.wal_sync_count();
        for i in 0..200u32 {
            let mut t = db.begin(Isolation::RepeatableRead);
            t.put(&cf, b"counter", i.to_string().as_bytes()).unwrap();
            t.commit_with(CommitOptions { sync: false }).unwrap();
        }
        assert_eq!(db.wal_sync_count(), s0);
        db.sync_wal().unwrap();
        let c = common::crash_copy(d.path());
        std::mem::forget(db);
        c
    };
    let db = Db::open(crashed.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&cf, b"counter").unwrap().unwrap(), b"199");
}
