//! Range (gap) locks: inserts into a locked range wait, range requests wait
//! for uncommitted inserts inside them, deadlocks through gaps are found.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::{Duration, Instant};
use tidesdb_core::*;

mod common;

fn setup() -> (tempfile::TempDir, Db, Cf) {
    common::db_with_cf("t")
}

const SHORT: Duration = Duration::from_millis(100);
const T: Duration = Duration::from_secs(5);

/// Puts `key` and checks it against range locks, as the FFI's insert does;
/// on failure the put is undone (statement rollback).
fn insert(txn: &mut Txn, cf: &Cf, key: &[u8], timeout: Duration) -> Result<()> {
    let sp = txn.savepoint();
    txn.put(cf, key, b"v").unwrap();
    let r = txn.check_insert(cf, key, timeout);
    if r.is_err() {
        txn.rollback_to(sp).unwrap();
    }
    txn.release(sp).unwrap();
    r
}

#[test]
fn insert_into_locked_range_waits_outside_does_not() {
    let (_d, db, cf) = setup();
    let a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    a.gap_locker().lock_range(&cf, b"b", Some(b"d"), T).unwrap();
    // Inside, both ends included: timeout.
    for k in [&b"b"[..], b"c", b"cz", b"d"] {
        let r = insert(&mut b, &cf, k, SHORT);
        assert!(matches!(r, Err(Error::LockTimeout)), "{k:?}: {r:?}");
    }
    // Outside: no wait.
    let t0 = Instant::now();
    insert(&mut b, &cf, b"a", T).unwrap();
    insert(&mut b, &cf, b"da", T).unwrap();
    assert!(t0.elapsed() < SHORT);
    // The owner itself inserts freely.
    let mut a = a;
    insert(&mut a, &cf, b"c", T).unwrap();
    // Released at commit: the waiter goes on.
    let cf2 = cf.clone();
    let h = std::thread::spawn(move || {
        let t0 = Instant::now();
        insert(&mut b, &cf2, b"c1", T).unwrap();
        (b, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(150));
    a.commit().unwrap();
    let (b, waited) = h.join().unwrap();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    b.commit().unwrap();
}

#[test]
fn unbounded_range_and_no_range_means_no_wait() {
    let (_d, db, cf) = setup();
    let mut b = db.begin(Isolation::RepeatableRead);
    insert(&mut b, &cf, b"x", SHORT).unwrap();
    let a = db.begin(Isolation::RepeatableRead);
    // The uncommitted "x" of b is in the range: the request waits for b.
    let r = a.gap_locker().lock_range(&cf, b"m", None, SHORT);
    assert!(matches!(r, Err(Error::LockTimeout)), "{r:?}");
    // A range beside it is granted at once.
    a.gap_locker().lock_range(&cf, b"a", Some(b"w"), T).unwrap();
    b.commit().unwrap();
    a.gap_locker().lock_range(&cf, b"m", None, T).unwrap();
    let mut c = db.begin(Isolation::RepeatableRead);
    let r = insert(&mut c, &cf, b"zzz", SHORT);
    assert!(matches!(r, Err(Error::LockTimeout)), "{r:?}");
    // Rolled-back ranges go: after a's rollback, inserts pass.
    a.rollback();
    insert(&mut c, &cf, b"zzz", SHORT).unwrap();
}

#[test]
fn range_locks_are_compatible_and_waiting_insert_blocks_no_range() {
    let (_d, db, cf) = setup();
    let a = db.begin(Isolation::RepeatableRead);
    let b = db.begin(Isolation::RepeatableRead);
    a.gap_locker().lock_range(&cf, b"b", Some(b"d"), T).unwrap();
    b.gap_locker().lock_range(&cf, b"a", Some(b"c"), T).unwrap();
    let mut c = db.begin(Isolation::RepeatableRead);
    let cf2 = cf.clone();
    let h = std::thread::spawn(move || {
        let r = insert(&mut c, &cf2, b"bb", T);
        (c, r)
    });
    std::thread::sleep(Duration::from_millis(100));
    // c's waiting insert does not make a's repeated range request wait.
    let t0 = Instant::now();
    a.gap_locker().lock_range(&cf, b"b", Some(b"d"), T).unwrap();
    assert!(t0.elapsed() < SHORT);
    a.rollback();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!h.is_finished(), "b's range still holds the insert");
    b.rollback();
    let (c, r) = h.join().unwrap();
    r.unwrap();
    c.commit().unwrap();
}

#[test]
fn deadlock_through_gaps_is_detected() {
    let (_d, db, cf) = setup();
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    a.gap_locker().lock_range(&cf, b"a", Some(b"c"), T).unwrap();
    b.gap_locker().lock_range(&cf, b"a", Some(b"c"), T).unwrap();
    let cf2 = cf.clone();
    let h = std::thread::spawn(move || {
        let r = insert(&mut a, &cf2, b"b", T);
        (a, r)
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    let r = insert(&mut b, &cf, b"bb", T);
    assert!(matches!(r, Err(Error::Deadlock)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    b.rollback();
    let (a, r) = h.join().unwrap();
    r.unwrap();
    a.commit().unwrap();
}

#[test]
fn cancel_wakes_an_insert_waiting_for_a_range() {
    let (_d, db, cf) = setup();
    let a = db.begin(Isolation::RepeatableRead);
    a.gap_locker().lock_range(&cf, b"", None, T).unwrap();
    let mut b = db.begin(Isolation::RepeatableRead);
    let cancel = b.cancel_handle();
    let cf2 = cf.clone();
    let h = std::thread::spawn(move || insert(&mut b, &cf2, b"k", Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    cancel.cancel();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn spilled_write_set_is_seen_by_range_requests() {
    let (_d, db, cf) = setup();
    db.set_spill_threshold(1 << 10);
    let mut b = db.begin(Isolation::RepeatableRead);
    for i in 0..200u32 {
        b.put(&cf, format!("k{i:04}").as_bytes(), &[0u8; 64])
            .unwrap();
    }
    b.put(&cf, b"zz", b"v").unwrap();
    let a = db.begin(Isolation::RepeatableRead);
    // In a spilled run.
    let r = a
        .gap_locker()
        .lock_range(&cf, b"k0100", Some(b"k0100"), SHORT);
    assert!(matches!(r, Err(Error::LockTimeout)), "{r:?}");
    // Between keys of the write set.
    a.gap_locker()
        .lock_range(&cf, b"k01000", Some(b"k01009"), T)
        .unwrap();
    b.rollback();
    a.gap_locker().lock_range(&cf, b"k", None, T).unwrap();
}
