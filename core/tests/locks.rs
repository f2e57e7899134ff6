#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidesdb_core::*;

mod common;

fn setup() -> (tempfile::TempDir, Db, Cf) {
    common::db_with_cf("t")
}

const T: Duration = Duration::from_secs(5);

#[test]
fn exclusive_blocks_until_commit_and_get_latest() {
    let (_d, db, cf) = setup();
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    a.lock(&cf, b"new-key", LockMode::Exclusive, T).unwrap();
    assert!(matches!(
        b.lock(
            &cf,
            b"new-key",
            LockMode::Shared,
            Duration::from_millis(100)
        ),
        Err(Error::LockTimeout)
    ));
    a.put(&cf, b"new-key", b"1").unwrap();
    let h = std::thread::spawn(move || {
        let t0 = Instant::now();
        b.lock(&cf, b"new-key", LockMode::Exclusive, T).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(50));
        // snapshot read misses it, locking read sees it
        assert_eq!(b.get(&cf, b"new-key").unwrap(), None);
        assert_eq!(b.get_latest(&cf, b"new-key").unwrap().unwrap(), b"1");
        b.put(&cf, b"new-key", b"2").unwrap();
        b.commit().unwrap(); // no Conflict: checked from lock time
    });
    std::thread::sleep(Duration::from_millis(100));
    a.commit().unwrap();
    h.join().unwrap();
    let mut c = db.begin(Isolation::RepeatableRead);
    assert_eq!(
        c.get(&db.cf("t").unwrap(), b"new-key").unwrap().unwrap(),
        b"2"
    );
}

#[test]
fn shared_locks_coexist_and_upgrade() {
    let (_d, db, cf) = setup();
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    a.lock(&cf, b"k", LockMode::Shared, T).unwrap();
    b.lock(&cf, b"k", LockMode::Shared, T).unwrap();
    assert!(matches!(
        a.lock(&cf, b"k", LockMode::Exclusive, Duration::from_millis(50)),
        Err(Error::LockTimeout)
    ));
    b.rollback();
    a.lock(&cf, b"k", LockMode::Exclusive, T).unwrap();
    assert_eq!(a.lock_count(), 1);
}

#[test]
fn deadlock_detected_for_victim() {
    let (_d, db, cf) = setup();
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    a.lock(&cf, b"x", LockMode::Exclusive, T).unwrap();
    b.lock(&cf, b"y", LockMode::Exclusive, T).unwrap();
    let cf2 = cf.clone();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = a.lock(&cf2, b"y", LockMode::Exclusive, T);
        tx.send(()).unwrap();
        (a, r)
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let r = b.lock(&cf, b"x", LockMode::Exclusive, T);
    assert!(matches!(r, Err(Error::Deadlock)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert!(Error::Deadlock.is_retryable());
    drop(b); // releases y
    rx.recv_timeout(Duration::from_secs(3)).unwrap();
    let (_a, r) = h.join().unwrap();
    r.unwrap();
}

#[test]
fn cancel_wait() {
    let (_d, db, cf) = setup();
    let mut a = db.begin(Isolation::RepeatableRead);
    a.lock(&cf, b"k", LockMode::Exclusive, T).unwrap();
    let mut b = db.begin(Isolation::RepeatableRead);
    let ch = b.cancel_handle();
    let h =
        std::thread::spawn(move || b.lock(&cf, b"k", LockMode::Exclusive, Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    ch.cancel();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
}

/// A key written under another key's exclusive lock (`put_covered`) is
/// conflict-checked from that lock's grant, not from the snapshot: a commit of
/// the key between the snapshot and the lock does not fail ours, one after the
/// lock (by a writer that ignores the rule) still does; without the lock held it
/// is a plain put (checked from the snapshot).
#[test]
fn put_covered_checks_from_the_lock() {
    let (_d, db, cf) = setup();
    let idx = db.create_cf("t.i1", CfOptions::default()).unwrap();
    // written after a's snapshot, before a's row lock: no conflict
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    b.put(&idx, b"20|5", b"").unwrap();
    b.commit().unwrap();
    a.lock(&cf, b"5", LockMode::Exclusive, T).unwrap();
    a.put(&cf, b"5", b"row").unwrap();
    a.put_covered(&idx, b"20|5", b"", &cf, b"5").unwrap();
    a.commit().unwrap();
    // written after the lock: conflict
    let mut a = db.begin(Isolation::RepeatableRead);
    a.lock(&cf, b"5", LockMode::Exclusive, T).unwrap();
    let mut b = db.begin(Isolation::RepeatableRead);
    b.put(&idx, b"30|5", b"").unwrap();
    b.commit().unwrap();
    a.put_covered(&idx, b"30|5", b"", &cf, b"5").unwrap();
    assert!(matches!(a.commit(), Err(Error::Conflict)));
    // no lock held on the row: checked from the snapshot
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    b.put(&idx, b"40|6", b"").unwrap();
    b.commit().unwrap();
    a.lock(&cf, b"other", LockMode::Exclusive, T).unwrap();
    a.put_covered(&idx, b"40|6", b"", &cf, b"6").unwrap();
    assert!(matches!(a.commit(), Err(Error::Conflict)));
}
