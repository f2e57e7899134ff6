#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Txn::commit_with(CommitOptions { sync: false })`.
use tidesdb_core::*;
mod common;

fn opts() -> DbOptions {
    common::opts(SyncMode::Full, 1 << 20)
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

// ---------------------------------------------------------------- put_deferred

fn get(db: &Db, cf: &Cf, k: &[u8]) -> Option<Vec<u8>> {
    let mut r = db.begin(Isolation::ReadCommitted);
    r.get(cf, k).unwrap()
}

/// A deferred put waits in the commit queue (invisible, not in the WAL) until
/// the next commit group, which writes it ahead of that commit; puts of the
/// same key made meanwhile collapse into one (the last value).
#[test]
fn deferred_put_rides_with_the_next_commit() {
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let mut pending = None;
        let seq0 = db.latest_sequence();
        for i in 1..=100u32 {
            db.put_deferred(&cf, b"counter", &i.to_le_bytes(), &mut pending)
                .unwrap();
        }
        assert_eq!(get(&db, &cf, b"counter"), None, "not written yet");
        assert_eq!(db.latest_sequence(), seq0);
        let s0 = db.wal_sync_count();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"row", b"data").unwrap();
        t.commit().unwrap();
        assert_eq!(db.wal_sync_count(), s0 + 1, "one fsync covers both");
        assert_eq!(
            db.latest_sequence(),
            seq0 + 2,
            "one record for the 100 puts, then the commit"
        );
        assert_eq!(get(&db, &cf, b"counter").unwrap(), 100u32.to_le_bytes());
        // Taken by a group: the next put is a new request.
        db.put_deferred(&cf, b"counter", &101u32.to_le_bytes(), &mut pending)
            .unwrap();
        let c = common::crash_copy(d.path());
        std::mem::forget(db);
        c
    };
    // The crash lost only the put no commit followed.
    let db = Db::open(crashed.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(get(&db, &cf, b"counter").unwrap(), 100u32.to_le_bytes());
    assert_eq!(get(&db, &cf, b"row").unwrap(), b"data");
}

/// Close writes what is still queued; write_deferred writes it on demand.
#[test]
fn deferred_put_is_written_at_close_and_on_demand() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let mut pending = None;
        db.put_deferred(&cf, b"a", b"1", &mut pending).unwrap();
        db.write_deferred();
        assert_eq!(get(&db, &cf, b"a").unwrap(), b"1");
        // Another key: not merged into the (already written) put.
        db.put_deferred(&cf, b"b", b"2", &mut pending).unwrap();
        assert_eq!(get(&db, &cf, b"b"), None);
        db.close().unwrap();
    }
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(get(&db, &cf, b"a").unwrap(), b"1");
    assert_eq!(get(&db, &cf, b"b").unwrap(), b"2");
}

/// A blind deferred put never makes a transaction conflict: one that deletes the
/// key, committed in the same group, wins (it comes later in the WAL).
#[test]
fn deferred_put_does_not_conflict() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.delete(&cf, b"k").unwrap();
    let mut pending = None;
    db.put_deferred(&cf, b"k", b"v", &mut pending).unwrap();
    t.commit().unwrap();
    assert_eq!(get(&db, &cf, b"k"), None);
}

/// A spilled commit (which bypasses the WAL) first writes the queued puts, so it
/// never becomes durable without them.
#[test]
fn deferred_put_precedes_a_spilled_commit() {
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        db.set_spill_threshold(64 << 10);
        let mut pending = None;
        db.put_deferred(&cf, b"counter", b"5000", &mut pending)
            .unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..5000 {
            t.put(&cf, format!("k{i:05}").as_bytes(), b"big").unwrap();
        }
        assert!(t.is_spilled());
        t.commit().unwrap();
        let c = common::crash_copy(d.path());
        std::mem::forget(db);
        c
    };
    let db = Db::open(crashed.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(get(&db, &cf, b"counter").unwrap(), b"5000");
    assert_eq!(get(&db, &cf, b"k04999").unwrap(), b"big");
}

/// The AUTO_INCREMENT pattern under concurrency: each thread moves a shared
/// counter (persisting it by a deferred put under the counter's lock), then
/// commits a row keyed by the value. After a crash the persisted counter is past
/// every committed row.
#[test]
fn deferred_counter_is_past_every_committed_row_after_a_crash() {
    use std::sync::{Arc, Mutex};
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let counter = Arc::new(Mutex::new((0u64, None::<DeferredPut>)));
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (db, cf, counter) = (db.clone(), cf.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        let v = {
                            let mut g = counter.lock().unwrap();
                            g.0 += 1;
                            let v = g.0;
                            db.put_deferred(&cf, b"counter", &(v + 1).to_be_bytes(), &mut g.1)
                                .unwrap();
                            v
                        };
                        let mut t = db.begin(Isolation::RepeatableRead);
                        t.put(&cf, &v.to_be_bytes(), b"row").unwrap();
                        t.commit().unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let c = common::crash_copy(d.path());
        std::mem::forget(db);
        c
    };
    let db = Db::open(crashed.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let next = u64::from_be_bytes(get(&db, &cf, b"counter").unwrap().try_into().unwrap());
    for v in 1..=800u64 {
        assert_eq!(get(&db, &cf, &v.to_be_bytes()).unwrap(), b"row");
    }
    assert_eq!(next, 801);
}
