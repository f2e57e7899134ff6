#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Two-phase commit: `Txn::prepare`, `Db::recover_prepared`,
//! `Db::commit_prepared`, `Db::rollback_prepared`.
use std::time::Duration;
use tidesdb_core::*;
mod common;

fn opts() -> DbOptions {
    common::opts(SyncMode::Full, 64 << 10)
}

const SHORT: Duration = Duration::from_millis(100);

fn get(db: &Db, cf: &Cf, k: &[u8]) -> Option<Vec<u8>> {
    db.begin(Isolation::RepeatableRead).get(cf, k).unwrap()
}

#[test]
fn prepare_then_commit() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"a", b"1").unwrap();
    t.put(&cf, b"b", b"2").unwrap();
    t.prepare(b"xid-1").unwrap();
    assert_eq!(t.prepared_xid(), Some(&b"xid-1"[..]));
    assert!(t.put(&cf, b"c", b"3").is_err(), "no writes after prepare");
    assert_eq!(get(&db, &cf, b"a"), None, "prepared writes are invisible");
    // Its own reads still see them.
    assert_eq!(t.get(&cf, b"a").unwrap().unwrap(), b"1");
    // A second transaction writing a prepared key blocks on the lock ...
    let mut t2 = db.begin(Isolation::RepeatableRead);
    assert!(matches!(
        t2.lock(&cf, b"a", LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
    // ... and an optimistic writer cannot commit over it.
    t2.put(&cf, b"b", b"x").unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict)));
    // The same xid cannot be prepared twice.
    let mut t3 = db.begin(Isolation::RepeatableRead);
    t3.put(&cf, b"z", b"z").unwrap();
    assert!(t3.prepare(b"xid-1").is_err());
    t3.rollback();
    assert!(db.recover_prepared().is_empty(), "attached to a live Txn");
    assert!(matches!(
        db.commit_prepared(b"xid-1"),
        Err(Error::InvalidArgument(_))
    ));
    t.commit().unwrap();
    assert_eq!(get(&db, &cf, b"a").unwrap(), b"1");
    assert_eq!(get(&db, &cf, b"b").unwrap(), b"2");
    // Lock released.
    let mut t4 = db.begin(Isolation::RepeatableRead);
    t4.lock(&cf, b"a", LockMode::Exclusive, SHORT).unwrap();
    t4.put(&cf, b"a", b"4").unwrap();
    t4.commit().unwrap();
    assert!(matches!(
        db.commit_prepared(b"xid-1"),
        Err(Error::UnknownXid(_))
    ));
}

#[test]
fn prepare_then_rollback() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"a", b"1").unwrap();
    t.prepare(b"x").unwrap();
    t.rollback();
    assert_eq!(get(&db, &cf, b"a"), None);
    let mut t2 = db.begin(Isolation::RepeatableRead);
    t2.lock(&cf, b"a", LockMode::Exclusive, SHORT).unwrap();
    t2.put(&cf, b"a", b"2").unwrap();
    t2.commit().unwrap();
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    assert!(db.recover_prepared().is_empty());
    assert_eq!(get(&db, &cf_of(&db), b"a").unwrap(), b"2");
}

fn cf_of(db: &Db) -> Cf {
    db.cf("t").unwrap()
}

/// Prepares `xid` writing k0..k9 and crashes; returns the crashed copy.
fn prepare_and_crash(xid: &[u8]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"before", b"yes").unwrap();
    t.commit().unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..10 {
        t.put(&cf, format!("k{i}").as_bytes(), b"prepared").unwrap();
    }
    t.delete(&cf, b"before").unwrap();
    t.prepare(xid).unwrap();
    let c = common::crash_copy(d.path());
    std::mem::forget(t);
    std::mem::forget(db);
    c
}

#[test]
fn prepare_crash_recover_commit() {
    let c = prepare_and_crash(b"xa-commit");
    {
        let db = Db::open(c.path(), opts()).unwrap();
        let cf = cf_of(&db);
        let p = db.recover_prepared();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].xid(), b"xa-commit");
        assert_eq!(p[0].write_count(), 11);
        assert_eq!(get(&db, &cf, b"k0"), None);
        assert_eq!(get(&db, &cf, b"before").unwrap(), b"yes");
        // keys are locked again
        let mut t = db.begin(Isolation::RepeatableRead);
        assert!(matches!(
            t.lock(&cf, b"k3", LockMode::Exclusive, SHORT),
            Err(Error::LockTimeout)
        ));
        t.put(&cf, b"k4", b"other").unwrap();
        assert!(matches!(t.commit(), Err(Error::Conflict)));
        assert!(matches!(
            db.commit_prepared(b"nope"),
            Err(Error::UnknownXid(_))
        ));
        db.commit_prepared(b"xa-commit").unwrap();
        assert!(db.recover_prepared().is_empty());
        assert_eq!(get(&db, &cf, b"k9").unwrap(), b"prepared");
        assert_eq!(get(&db, &cf, b"before"), None);
        let mut t = db.begin(Isolation::RepeatableRead);
        t.lock(&cf, b"k3", LockMode::Exclusive, SHORT).unwrap();
        drop(t);
        // crash again right after the commit
        let c2 = common::crash_copy(c.path());
        std::mem::forget(db);
        let db = Db::open(c2.path(), opts()).unwrap();
        assert!(db.recover_prepared().is_empty());
        assert_eq!(get(&db, &cf_of(&db), b"k9").unwrap(), b"prepared");
    }
}

#[test]
fn prepare_crash_rollback_prepared() {
    let c = prepare_and_crash(b"xa-rb");
    let db = Db::open(c.path(), opts()).unwrap();
    let cf = cf_of(&db);
    assert_eq!(db.recover_prepared().len(), 1);
    db.rollback_prepared(b"xa-rb").unwrap();
    assert!(matches!(
        db.rollback_prepared(b"xa-rb"),
        Err(Error::UnknownXid(_))
    ));
    assert_eq!(get(&db, &cf, b"k0"), None);
    assert_eq!(get(&db, &cf, b"before").unwrap(), b"yes");
    let mut t = db.begin(Isolation::RepeatableRead);
    t.lock(&cf, b"k3", LockMode::Exclusive, SHORT).unwrap();
    t.put(&cf, b"k3", b"mine").unwrap();
    t.commit().unwrap();
    db.close().unwrap();
    drop(db);
    let db = Db::open(c.path(), opts()).unwrap();
    assert!(db.recover_prepared().is_empty());
    assert_eq!(get(&db, &cf_of(&db), b"k3").unwrap(), b"mine");
    assert_eq!(get(&db, &cf_of(&db), b"k0"), None);
}

#[test]
fn prepared_survives_flushes_compactions_and_reopens() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"p-key", b"p-val").unwrap();
        t.prepare(b"long").unwrap();
        drop(t); // detached: stays prepared
        assert_eq!(db.recover_prepared().len(), 1);
    }
    for round in 0..4u32 {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = cf_of(&db);
        assert_eq!(db.recover_prepared().len(), 1, "round {round}");
        // Enough writes to rotate memtables and WAL segments many times.
        for i in 0..300u32 {
            let mut t = db.begin(Isolation::RepeatableRead);
            t.put(&cf, format!("r{round}-{i:04}").as_bytes(), &[b'v'; 600])
                .unwrap();
            t.commit_with(CommitOptions { sync: false }).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(&cf, None, None).unwrap();
        assert_eq!(get(&db, &cf, b"p-key"), None);
        if round % 2 == 0 {
            db.close().unwrap();
        } else {
            // crash
            db.sync_wal().unwrap();
            let fresh = common::crash_copy(d.path());
            std::mem::forget(db);
            // continue in `fresh` from now on
            let db = Db::open(fresh.path(), opts()).unwrap();
            assert_eq!(db.recover_prepared().len(), 1);
            db.commit_prepared(b"long").unwrap();
            assert_eq!(get(&db, &cf_of(&db), b"p-key").unwrap(), b"p-val");
            assert_eq!(get(&db, &cf_of(&db), b"r1-0299").unwrap(), vec![b'v'; 600]);
            db.close().unwrap();
            drop(db);
            let db = Db::open(fresh.path(), opts()).unwrap();
            assert!(db.recover_prepared().is_empty());
            assert_eq!(get(&db, &cf_of(&db), b"p-key").unwrap(), b"p-val");
            return;
        }
    }
    unreachable!("round 1 returns");
}

/// A write set spilled to disk (larger than the spill threshold) prepares:
/// the prepare record carries all of it (runs and memory, rolled-back
/// writes excluded), it survives a crash between prepare and commit, and
/// commits (live, or by xid after the crash) with every key.
#[test]
fn spilled_write_set_prepares_and_survives_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    db.set_spill_threshold(64 << 10);
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let fill = |t: &mut Txn, tag: &[u8]| {
        for i in 0..3000 {
            t.put(&cf, format!("k{i:05}").as_bytes(), tag).unwrap();
        }
    };
    // Live: prepare, then commit.
    let mut t = db.begin(Isolation::RepeatableRead);
    fill(&mut t, b"live");
    assert!(t.write_set_bytes_peak() >= 64 << 10);
    t.prepare(b"big-live").unwrap();
    assert_eq!(get(&db, &cf, b"k00000"), None, "invisible while prepared");
    t.commit().unwrap();
    assert_eq!(get(&db, &cf, b"k02999").unwrap(), b"live");
    // Crash between prepare and commit.
    let mut t = db.begin(Isolation::RepeatableRead);
    fill(&mut t, b"crash");
    let sp = t.savepoint();
    t.put(&cf, b"rolled-back", b"x").unwrap();
    t.rollback_to(sp).unwrap();
    t.delete(&cf, b"k00001").unwrap();
    t.prepare(b"big-crash").unwrap();
    let c = common::crash_copy(d.path());
    std::mem::forget(t);
    std::mem::forget(db);
    let db = Db::open(c.path(), opts()).unwrap();
    let cf = cf_of(&db);
    let p = db.recover_prepared();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].xid(), b"big-crash");
    assert_eq!(p[0].write_count(), 3000);
    assert_eq!(get(&db, &cf, b"k00002").unwrap(), b"live");
    db.commit_prepared(b"big-crash").unwrap();
    db.close().unwrap();
    drop(db);
    let db = Db::open(c.path(), opts()).unwrap();
    let cf = cf_of(&db);
    assert!(db.recover_prepared().is_empty());
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), b"crash", "{:?}", it.key());
        n += 1;
        it.next();
    }
    assert_eq!(n, 2999);
    assert_eq!(get(&db, &cf, b"k00001"), None);
    assert_eq!(get(&db, &cf, b"rolled-back"), None);
}

#[test]
fn prepared_writes_are_known_per_column_family() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let other = db.create_cf("u", CfOptions::default()).unwrap();
    assert!(!db.has_prepared_writes(&cf));
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"a", b"1").unwrap();
    t.prepare(b"xid-p").unwrap();
    assert!(db.has_prepared_writes(&cf), "attached");
    assert!(!db.has_prepared_writes(&other));
    drop(t); // detached: still prepared
    assert!(db.has_prepared_writes(&cf), "detached");
    db.commit_prepared(b"xid-p").unwrap();
    assert!(!db.has_prepared_writes(&cf), "resolved");
}

/// A server may let another session resolve an xid as soon as the owning session
/// starts to go away, before that session's `Txn` is dropped (MariaDB marks the
/// xid recovered in `trans_xa_detach`, then closes the connection's engine
/// state): the resolution waits for the hand-over instead of failing, which the
/// server would not report, leaving the transaction prepared after an
/// acknowledged XA COMMIT.
#[test]
fn resolution_waits_for_the_owner_to_let_go() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    for (xid, commit) in [(&b"xid-w1"[..], true), (&b"xid-w2"[..], false)] {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, xid, b"v").unwrap();
        t.prepare(xid).unwrap();
        let owner = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(t);
        });
        let started = std::time::Instant::now();
        db.resolve_prepared_waiting(xid, commit, Duration::from_secs(30))
            .unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "it waited for the owner"
        );
        owner.join().unwrap();
        assert_eq!(get(&db, &cf, xid).is_some(), commit);
        assert!(!db.has_prepared_writes(&cf));
        assert!(db.recover_prepared().is_empty());
    }
    // An owner that never lets go: the wait ends with the same error as before.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"k", b"v").unwrap();
    t.prepare(b"xid-held").unwrap();
    assert!(matches!(
        db.resolve_prepared_waiting(b"xid-held", true, Duration::from_millis(200)),
        Err(Error::InvalidArgument(_))
    ));
    // An owner that resolves it itself: the waiter learns the xid is gone.
    let db2 = db.clone();
    let waiter = std::thread::spawn(move || {
        db2.resolve_prepared_waiting(b"xid-held", true, Duration::from_secs(30))
    });
    std::thread::sleep(Duration::from_millis(200));
    t.commit().unwrap();
    assert!(matches!(waiter.join().unwrap(), Err(Error::UnknownXid(_))));
    assert_eq!(get(&db, &cf, b"k").unwrap(), b"v");
}
