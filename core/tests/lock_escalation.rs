//! Lock escalation: past the threshold, a transaction's row locks in one
//! column family become one table lock (see lock.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::{Duration, Instant};
use tidesdb_core::*;

mod common;

const T: Duration = Duration::from_secs(5);
const SHORT: Duration = Duration::from_millis(100);

fn setup(threshold: usize) -> (tempfile::TempDir, Db, Cf) {
    let (d, db, cf) = common::db_with_cf("t");
    db.set_lock_escalation_threshold(threshold);
    (d, db, cf)
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

/// Locks keys `from..to` of `cf` in `mode`.
fn lock_many(t: &mut Txn, cf: &Cf, from: usize, to: usize, mode: LockMode) {
    for i in from..to {
        t.lock(cf, &key(i), mode, T).unwrap();
    }
}

#[test]
fn escalates_past_the_threshold_and_new_locks_are_free() {
    let (_d, db, cf) = setup(10);
    let other = db.create_cf("u", CfOptions::default()).unwrap();
    let before = db.metrics().lock_escalations;
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 10, LockMode::Exclusive);
    lock_many(&mut a, &other, 0, 5, LockMode::Exclusive);
    assert!(!a.has_table_lock(&cf));
    assert_eq!(a.lock_count(), 15);
    assert_eq!(db.metrics().lock_escalations, before);
    a.lock(&cf, &key(10), LockMode::Exclusive, T).unwrap();
    assert!(a.has_table_lock(&cf));
    assert!(
        !a.has_table_lock(&other),
        "only the family past the threshold"
    );
    assert_eq!(a.lock_count(), 5, "row locks of `t` are gone");
    assert!(db.metrics().lock_escalations > before);
    lock_many(&mut a, &cf, 11, 5000, LockMode::Exclusive);
    assert_eq!(a.lock_count(), 5, "covered by the table lock");
    // Threshold 0: never.
    db.set_lock_escalation_threshold(0);
    let mut b = db.begin(Isolation::RepeatableRead);
    lock_many(&mut b, &other, 100, 200, LockMode::Exclusive);
    assert!(!b.has_table_lock(&other));
    assert_eq!(b.lock_count(), 100);
}

#[test]
fn other_writers_wait_time_out_and_go_on_after_commit() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 11, LockMode::Exclusive);
    a.put(&cf, &key(0), b"a").unwrap();
    assert!(a.has_table_lock(&cf));
    // A key `a` never locked: shared and exclusive requests conflict.
    let mut b = db.begin(Isolation::RepeatableRead);
    let t0 = Instant::now();
    assert!(matches!(
        b.lock(&cf, b"zzz", LockMode::Shared, SHORT),
        Err(Error::LockTimeout)
    ));
    assert!(t0.elapsed() >= SHORT);
    assert!(matches!(
        b.lock(&cf, &key(3), LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
    // Range locks conflict with an exclusive table lock too.
    assert!(matches!(
        b.gap_locker().lock_range(&cf, b"x", None, SHORT),
        Err(Error::LockTimeout)
    ));
    // Plain reads never wait.
    assert_eq!(b.get(&cf, &key(0)).unwrap(), None);
    // A waiting request is granted when `a` commits.
    let h = std::thread::spawn(move || {
        let t0 = Instant::now();
        b.lock(&cf, &key(0), LockMode::Exclusive, T).unwrap();
        let waited = t0.elapsed();
        let v = b.get_latest(&cf, &key(0)).unwrap();
        b.put(&cf, &key(0), b"b").unwrap();
        b.commit().unwrap();
        (waited, v)
    });
    std::thread::sleep(Duration::from_millis(200));
    a.commit().unwrap();
    let (waited, v) = h.join().unwrap();
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert_eq!(v.as_deref(), Some(&b"a"[..]));
    let mut c = db.begin(Isolation::RepeatableRead);
    assert_eq!(
        c.get(&db.cf("t").unwrap(), &key(0)).unwrap().as_deref(),
        Some(&b"b"[..])
    );
}

#[test]
fn rollback_releases_the_table_lock() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 20, LockMode::Exclusive);
    assert!(a.has_table_lock(&cf));
    a.rollback();
    let mut b = db.begin(Isolation::RepeatableRead);
    b.lock(&cf, &key(5), LockMode::Exclusive, SHORT).unwrap();
    b.gap_locker().lock_range(&cf, b"", None, SHORT).unwrap();
}

#[test]
fn deadlock_through_the_table_lock() {
    let (_d, db, cf) = setup(10);
    let cf2 = db.create_cf("u", CfOptions::default()).unwrap();
    let mut a = db.begin(Isolation::RepeatableRead);
    let mut b = db.begin(Isolation::RepeatableRead);
    b.lock(&cf2, b"y", LockMode::Exclusive, T).unwrap();
    lock_many(&mut a, &cf, 0, 11, LockMode::Exclusive);
    assert!(a.has_table_lock(&cf));
    let cf_b = cf.clone();
    let h = std::thread::spawn(move || {
        // Waits for a's table lock.
        let r = b.lock(&cf_b, b"zzz", LockMode::Exclusive, T);
        (b, r)
    });
    std::thread::sleep(Duration::from_millis(200));
    // a waiting for b closes the cycle: a is the victim at once.
    let t0 = Instant::now();
    let r = a.lock(&cf2, b"y", LockMode::Exclusive, T);
    assert!(matches!(r, Err(Error::Deadlock)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    a.rollback();
    let (_b, r) = h.join().unwrap();
    r.unwrap();
}

#[test]
fn kill_cancels_a_wait_for_the_table_lock() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 11, LockMode::Exclusive);
    let mut b = db.begin(Isolation::RepeatableRead);
    let ch = b.cancel_handle();
    let h = std::thread::spawn(move || {
        b.lock(&cf, b"zzz", LockMode::Exclusive, Duration::from_secs(30))
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    ch.cancel();
    let r = h.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn shared_table_lock_coexists_with_shared_row_locks() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 11, LockMode::Shared);
    assert!(a.has_table_lock(&cf));
    let mut b = db.begin(Isolation::RepeatableRead);
    b.lock(&cf, &key(3), LockMode::Shared, SHORT).unwrap();
    b.lock(&cf, b"zzz", LockMode::Shared, SHORT).unwrap();
    b.gap_locker().lock_range(&cf, b"", None, SHORT).unwrap();
    assert!(matches!(
        b.lock(&cf, &key(4), LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
    // `a` may still take exclusive row locks (not held by others).
    a.lock(&cf, b"yyy", LockMode::Exclusive, SHORT).unwrap();
    assert!(matches!(
        a.lock(&cf, &key(3), LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
    b.commit().unwrap();
    a.lock(&cf, &key(3), LockMode::Exclusive, SHORT).unwrap();
}

#[test]
fn escalation_waits_for_no_one_and_is_retried() {
    let (_d, db, cf) = setup(10);
    let mut b = db.begin(Isolation::RepeatableRead);
    b.lock(&cf, b"b-row", LockMode::Exclusive, T).unwrap();
    let mut a = db.begin(Isolation::RepeatableRead);
    lock_many(&mut a, &cf, 0, 20, LockMode::Exclusive);
    assert!(!a.has_table_lock(&cf), "b holds a row lock in the family");
    assert_eq!(a.lock_count(), 20);
    b.commit().unwrap();
    lock_many(&mut a, &cf, 20, 200, LockMode::Exclusive);
    assert!(a.has_table_lock(&cf), "retried later");
    assert_eq!(a.lock_count(), 0);
}

#[test]
fn writes_are_conflict_checked_from_the_escalation() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    // Committed after a's snapshot, before a locks it: a reads it under the
    // lock and overwrites it without a conflict (as with row locks).
    let mut b = db.begin(Isolation::RepeatableRead);
    b.put(&cf, b"late", b"b").unwrap();
    b.commit().unwrap();
    lock_many(&mut a, &cf, 0, 11, LockMode::Exclusive);
    assert!(a.has_table_lock(&cf));
    a.lock(&cf, b"late", LockMode::Exclusive, T).unwrap();
    assert_eq!(
        a.get_latest(&cf, b"late").unwrap().as_deref(),
        Some(&b"b"[..])
    );
    a.put(&cf, b"late", b"a").unwrap();
    for i in 0..11 {
        a.put(&cf, &key(i), b"a").unwrap();
    }
    a.commit().unwrap();
    let mut c = db.begin(Isolation::RepeatableRead);
    assert_eq!(c.get(&cf, b"late").unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(c.get(&cf, &key(7)).unwrap().as_deref(), Some(&b"a"[..]));
}

#[test]
fn covered_puts_under_an_escalated_lock() {
    let (_d, db, cf) = setup(10);
    let idx = db.create_cf("t.i1", CfOptions::default()).unwrap();
    let mut a = db.begin(Isolation::RepeatableRead);
    // An index entry committed after a's snapshot, before a's lock.
    let mut b = db.begin(Isolation::RepeatableRead);
    b.put(&idx, b"20|500", b"").unwrap();
    b.commit().unwrap();
    for i in 0..600 {
        let k = format!("{i}");
        a.lock(&cf, k.as_bytes(), LockMode::Exclusive, T).unwrap();
        a.put(&cf, k.as_bytes(), b"row").unwrap();
        let ik = format!("20|{i}");
        a.put_covered(&idx, ik.as_bytes(), b"", &cf, k.as_bytes())
            .unwrap();
    }
    assert!(a.has_table_lock(&cf));
    a.commit().unwrap();
}

#[test]
fn savepoint_rollback_keeps_the_table_lock_and_the_data_right() {
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    for i in 0..8 {
        a.lock(&cf, &key(i), LockMode::Exclusive, T).unwrap();
        a.put(&cf, &key(i), b"1").unwrap();
    }
    let sp = a.savepoint();
    for i in 8..30 {
        a.lock(&cf, &key(i), LockMode::Exclusive, T).unwrap();
        a.put(&cf, &key(i), b"2").unwrap();
    }
    assert!(a.has_table_lock(&cf));
    a.rollback_to(sp).unwrap();
    // Locks stay after a savepoint rollback (as in InnoDB).
    assert!(a.has_table_lock(&cf));
    let mut b = db.begin(Isolation::RepeatableRead);
    assert!(matches!(
        b.lock(&cf, &key(20), LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
    a.lock(&cf, &key(40), LockMode::Exclusive, T).unwrap();
    a.put(&cf, &key(40), b"3").unwrap();
    a.commit().unwrap();
    let mut c = db.begin(Isolation::RepeatableRead);
    for i in 0..8 {
        assert_eq!(c.get(&cf, &key(i)).unwrap().as_deref(), Some(&b"1"[..]));
    }
    for i in 8..30 {
        assert_eq!(c.get(&cf, &key(i)).unwrap(), None, "{i}");
    }
    assert_eq!(c.get(&cf, &key(40)).unwrap().as_deref(), Some(&b"3"[..]));
    b.lock(&cf, &key(20), LockMode::Exclusive, SHORT).unwrap();
}

/// A transaction with escalation off (a replication applier) keeps its row
/// locks past the threshold, so another writer of other rows goes on.
#[test]
fn a_transaction_with_escalation_off_keeps_its_row_locks() {
    // The escalation counter is process-wide (other tests of this binary move
    // it concurrently): the transaction's own lock state is what is checked.
    let (_d, db, cf) = setup(10);
    let mut a = db.begin(Isolation::RepeatableRead);
    a.set_lock_escalation(false);
    lock_many(&mut a, &cf, 0, 100, LockMode::Exclusive);
    assert!(!a.has_table_lock(&cf));
    assert_eq!(a.lock_count(), 100);
    let mut b = db.begin(Isolation::RepeatableRead);
    b.lock(&cf, &key(500), LockMode::Exclusive, SHORT).unwrap();
    assert!(matches!(
        b.lock(&cf, &key(5), LockMode::Exclusive, SHORT),
        Err(Error::LockTimeout)
    ));
}

#[test]
fn table_locks_wait_for_row_holders_then_block_row_requests() {
    let (_d, db, cf) = setup(0);
    let other = db.create_cf("u", CfOptions::default()).unwrap();
    let mut reader = db.begin(Isolation::RepeatableRead);
    reader.lock(&other, b"v", LockMode::Shared, T).unwrap();
    // All or none: `cf` is free, `other` is not, so neither is taken.
    let mut ddl = db.begin(Isolation::RepeatableRead);
    let started = Instant::now();
    let err = ddl
        .lock_tables(&[cf.clone(), other.clone()], LockMode::Exclusive, SHORT)
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout), "{err:?}");
    assert!(started.elapsed() >= SHORT);
    assert!(!ddl.has_table_lock(&cf));
    let mut writer = db.begin(Isolation::RepeatableRead);
    writer.lock(&cf, b"w", LockMode::Exclusive, SHORT).unwrap();
    writer.rollback();
    // Granted once the holder ends; new row requests then wait for the DDL.
    let release = std::thread::spawn(move || {
        std::thread::sleep(SHORT);
        reader.commit().unwrap();
    });
    ddl.lock_tables(&[cf.clone(), other.clone()], LockMode::Exclusive, T)
        .unwrap();
    release.join().unwrap();
    assert!(ddl.has_table_lock(&cf) && ddl.has_table_lock(&other));
    let mut late = db.begin(Isolation::RepeatableRead);
    let err = late
        .lock(&other, b"v", LockMode::Shared, SHORT)
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout), "{err:?}");
    ddl.rollback();
    late.lock(&other, b"v", LockMode::Shared, SHORT).unwrap();
}

/// A DDL-like transaction on its own thread taking an exclusive table lock on `cf`
/// (waiting up to `T`), released at once.
fn spawn_table_lock(db: &Db, cf: &Cf) -> std::thread::JoinHandle<Result<()>> {
    let (db, cf) = (db.clone(), cf.clone());
    std::thread::spawn(move || {
        let mut ddl = db.begin(Isolation::RepeatableRead);
        let r = ddl.lock_tables(&[cf], LockMode::Exclusive, T);
        ddl.rollback();
        r
    })
}

#[test]
fn a_waiting_table_lock_holds_back_new_transactions_only() {
    let (_d, db, cf) = setup(0);
    let mut holder = db.begin(Isolation::RepeatableRead);
    holder.lock(&cf, b"a", LockMode::Shared, T).unwrap();
    let ddl = spawn_table_lock(&db, &cf);
    std::thread::sleep(SHORT);
    // A transaction with no lock in the family waits behind the request ...
    let mut fresh = db.begin(Isolation::RepeatableRead);
    let err = fresh.lock(&cf, b"b", LockMode::Shared, SHORT).unwrap_err();
    assert!(matches!(err, Error::LockTimeout), "{err:?}");
    // ... one that holds a lock there goes on (the request waits for it).
    holder.lock(&cf, b"c", LockMode::Shared, SHORT).unwrap();
    let started = Instant::now();
    holder.commit().unwrap();
    ddl.join().unwrap().unwrap();
    assert!(started.elapsed() < T);
    fresh.lock(&cf, b"b", LockMode::Shared, SHORT).unwrap();
}

#[test]
fn a_holder_waiting_for_a_transaction_held_back_makes_it_the_victim() {
    let (_d, db, cf) = setup(0);
    let other = db.create_cf("u", CfOptions::default()).unwrap();
    let mut holder = db.begin(Isolation::RepeatableRead);
    holder.lock(&cf, b"a", LockMode::Shared, T).unwrap();
    let mut fresh = db.begin(Isolation::RepeatableRead);
    fresh.lock(&other, b"x", LockMode::Exclusive, T).unwrap();
    let ddl = spawn_table_lock(&db, &cf);
    std::thread::sleep(SHORT);
    // holder waits for fresh (x), fresh for the request, the request for holder.
    let waiter = std::thread::spawn(move || {
        let r = holder.lock(&other, b"x", LockMode::Exclusive, T);
        holder.rollback();
        r
    });
    std::thread::sleep(SHORT);
    let err = fresh.lock(&cf, b"b", LockMode::Shared, T).unwrap_err();
    assert!(matches!(err, Error::Deadlock), "{err:?}");
    fresh.rollback();
    waiter.join().unwrap().unwrap();
    ddl.join().unwrap().unwrap();
}
