//! The pipeline's ordering rules, observed from inside: an observer sees
//! every fsync start and end and every publication, and can hold an fsync
//! (to write the next group meanwhile) or fail it.

#![allow(clippy::unwrap_used)]

use super::CommitPipeline;
use crate::error::{Error, Result};
use crate::journal::batch::Op;
use crate::key::Kind;
use crate::{CfOptions, Db, DbOptions, Isolation, SyncMode};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// An fsync starts; groups up to `covers` are in the WAL.
    SyncStart { covers: u64 },
    /// That fsync succeeded.
    SyncEnd { covers: u64 },
    /// Group `group` made `seq` visible.
    Publish { group: u64, seq: u64 },
}

pub(super) type Observer = Arc<dyn Fn(Event) -> Result<()> + Send + Sync>;

impl CommitPipeline {
    pub(super) fn observe(&self, e: Event) -> Result<()> {
        let o = self.observer.lock().clone();
        match o {
            Some(f) => f(e),
            None => Ok(()),
        }
    }
}

/// Records every event; holds (and optionally fails) the next fsync while
/// armed.
#[derive(Default)]
struct Probe {
    log: Mutex<Vec<Event>>,
    /// Hold the next fsync until `release`.
    armed: AtomicBool,
    /// Fail the held fsync instead of doing it.
    fail: AtomicBool,
    held: Mutex<bool>,
    held_cv: Condvar,
    released: Mutex<bool>,
    released_cv: Condvar,
}

impl Probe {
    fn install(db: &Db) -> Arc<Probe> {
        let p = Arc::new(Probe::default());
        let q = p.clone();
        *db.inner().commit.observer.lock() = Some(Arc::new(move |e| q.on(e)));
        p
    }

    fn on(&self, e: Event) -> Result<()> {
        self.log.lock().push(e);
        if let Event::SyncStart { .. } = e {
            if self.armed.swap(false, Ordering::SeqCst) {
                *self.held.lock() = true;
                self.held_cv.notify_all();
                let mut r = self.released.lock();
                while !*r {
                    self.released_cv.wait(&mut r);
                }
                if self.fail.load(Ordering::SeqCst) {
                    return Err(Error::io(
                        "fsync WAL (injected)",
                        std::io::Error::from_raw_os_error(5),
                    ));
                }
            }
        }
        Ok(())
    }

    fn wait_held(&self) {
        let mut h = self.held.lock();
        while !*h {
            assert!(
                !self
                    .held_cv
                    .wait_for(&mut h, Duration::from_secs(30))
                    .timed_out(),
                "no fsync started"
            );
        }
    }

    fn release(&self) {
        *self.released.lock() = true;
        self.released_cv.notify_all();
    }

    /// Every publication comes after an fsync that covered its group, and
    /// groups publish in order with increasing sequences.
    fn check_order(&self) {
        let log = self.log.lock();
        let mut synced = 0u64;
        let mut last = (0u64, 0u64);
        for e in log.iter() {
            match *e {
                Event::SyncStart { .. } => {}
                Event::SyncEnd { covers } => synced = synced.max(covers),
                Event::Publish { group, seq } => {
                    assert!(group <= synced, "group {group} published unsynced: {log:?}");
                    assert!(group > last.0 && seq > last.1, "out of order: {log:?}");
                    last = (group, seq);
                }
            }
        }
    }
}

fn full_db(dir: &std::path::Path) -> Db {
    Db::open(
        dir,
        DbOptions {
            sync_mode: SyncMode::Full,
            ..DbOptions::default()
        },
    )
    .unwrap()
}

/// One blind put through the commit queue, waiting for its fsync.
fn put(db: &Db, cf: &crate::Cf, key: &[u8], value: &[u8]) -> Result<u64> {
    let op = Op {
        cf: cf.inner.id,
        kind: Kind::Put,
        key: key.to_vec(),
        value: Arc::from(value),
        crc: None,
    };
    db.inner()
        .commit_ops(vec![(cf.inner.clone(), op, 0)], false, true)
}

fn read(db: &Db, cf: &crate::Cf, key: &[u8]) -> Option<Vec<u8>> {
    db.begin(Isolation::RepeatableRead).get(cf, key).unwrap()
}

/// Waits (bounded) until group `g` is in the WAL.
fn wait_appended(db: &Db, g: u64) {
    let t = Instant::now();
    while db.inner().commit.appended_group.load(Ordering::SeqCst) < g {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "group {g} not written"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

type Commit = std::thread::JoinHandle<Result<u64>>;

/// Commits `a` = `1` as group N, holds its fsync, runs `while_held`, then commits
/// `b` = `2`, which the pipeline writes as group N+1 behind the held fsync.
fn pipelined_pair(
    db: &Db,
    cf: &crate::Cf,
    probe: &Probe,
    g0: u64,
    while_held: impl FnOnce(),
) -> (Commit, Commit) {
    probe.armed.store(true, Ordering::SeqCst);
    let a = {
        let (db, cf) = (db.clone(), cf.clone());
        std::thread::spawn(move || put(&db, &cf, b"a", b"1"))
    };
    probe.wait_held();
    while_held();
    let b = {
        let (db, cf) = (db.clone(), cf.clone());
        std::thread::spawn(move || put(&db, &cf, b"b", b"2"))
    };
    wait_appended(db, g0 + 2);
    (a, b)
}

/// A database with one committed key and a probe installed: (its directory,
/// the database, family `t`, the probe, the last group appended, the visible
/// sequence).
fn held_pair_setup() -> (tempfile::TempDir, Db, crate::Cf, Arc<Probe>, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = full_db(dir.path());
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    put(&db, &cf, b"k0", b"v0").unwrap();
    let probe = Probe::install(&db);
    let g0 = db.inner().commit.appended_group.load(Ordering::SeqCst);
    let before = db.latest_sequence();
    (dir, db, cf, probe, g0, before)
}

#[test]
fn next_group_is_written_while_an_fsync_runs_and_waits_for_it() {
    let (_dir, db, cf, probe, g0, before) = held_pair_setup();
    // Group N+1 reaches the WAL while group N's fsync is held...
    let (a, b) = pipelined_pair(&db, &cf, &probe, g0, || {});
    // ...and neither is acknowledged nor visible before that fsync ends.
    std::thread::sleep(Duration::from_millis(20));
    assert!(!a.is_finished() && !b.is_finished());
    assert_eq!(db.latest_sequence(), before);
    assert_eq!(read(&db, &cf, b"a"), None);
    assert_eq!(read(&db, &cf, b"b"), None);
    probe.release();
    let sa = a.join().unwrap().unwrap();
    let sb = b.join().unwrap().unwrap();
    assert!(before < sa && sa < sb);
    assert_eq!(db.latest_sequence(), sb);
    assert_eq!(read(&db, &cf, b"a").as_deref(), Some(&b"1"[..]));
    assert_eq!(read(&db, &cf, b"b").as_deref(), Some(&b"2"[..]));
    probe.check_order();
    // The held fsync covered only group N: N+1 had its own.
    let log = probe.log.lock().clone();
    let syncs: Vec<u64> = log
        .iter()
        .filter_map(|e| match e {
            Event::SyncEnd { covers } => Some(*covers),
            _ => None,
        })
        .collect();
    assert_eq!(syncs, vec![g0 + 1, g0 + 2], "{log:?}");
}

#[test]
fn failed_fsync_fails_its_group_and_the_one_written_behind_it() {
    let (_dir, db, cf, probe, g0, before) = held_pair_setup();
    probe.fail.store(true, Ordering::SeqCst);
    let (a, b) = pipelined_pair(&db, &cf, &probe, g0, || {});
    probe.release();
    let ea = a.join().unwrap().unwrap_err();
    let eb = b.join().unwrap().unwrap_err();
    assert!(matches!(ea, Error::Io { .. }), "{ea}");
    assert!(matches!(eb, Error::Poisoned), "{eb}");
    // Nothing of either became visible; the database refuses writes.
    assert_eq!(db.latest_sequence(), before);
    assert_eq!(read(&db, &cf, b"a"), None);
    assert_eq!(read(&db, &cf, b"b"), None);
    assert!(matches!(
        put(&db, &cf, b"c", b"3").unwrap_err(),
        Error::Poisoned
    ));
    probe.check_order();
    assert!(!probe
        .log
        .lock()
        .iter()
        .any(|e| matches!(e, Event::Publish { group, .. } if *group > g0)));
}

#[test]
fn concurrent_committers_ack_in_order_after_fsync_against_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = full_db(dir.path());
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let probe = Probe::install(&db);
    let stop = Arc::new(AtomicBool::new(false));
    // A reader never sees the visible sequence go back.
    let watcher = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last = 0;
            let mut samples = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let v = db.latest_sequence();
                assert!(v >= last, "visible sequence went back {last} -> {v}");
                last = v;
                samples += 1;
            }
            samples
        })
    };
    const THREADS: u64 = 8;
    const PER: u64 = 150;
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, cf, done) = (db.clone(), cf.clone(), done.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..PER {
                    let key = format!("k{:02}", (t * 7 + i * 13) % 40);
                    let value = format!("{t}:{i}");
                    let seq = put(&db, &cf, key.as_bytes(), value.as_bytes()).unwrap();
                    // Visible (hence fsynced, see check_order) when acknowledged.
                    assert!(db.latest_sequence() >= seq);
                    assert!(read(&db, &cf, key.as_bytes()).is_some());
                    mine.push((seq, key, value));
                }
                done.fetch_add(1, Ordering::SeqCst);
                mine
            })
        })
        .collect();
    let mut all: Vec<(u64, String, String)> = Vec::new();
    for w in workers {
        all.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    assert!(watcher.join().unwrap() > 0);
    all.sort();
    let n = all.len();
    all.dedup_by_key(|c| c.0);
    assert_eq!(all.len(), n, "two commits got one sequence");
    let mut model = BTreeMap::new();
    for (_, k, v) in &all {
        model.insert(k.clone(), v.clone());
    }
    for (k, v) in &model {
        assert_eq!(read(&db, &cf, k.as_bytes()).as_deref(), Some(v.as_bytes()));
    }
    assert_eq!(db.latest_sequence(), all.last().unwrap().0);
    probe.check_order();
    drop(db);
    // And the same after a reopen.
    let db = full_db(dir.path());
    let cf = db.cf("t").unwrap();
    for (k, v) in &model {
        assert_eq!(read(&db, &cf, k.as_bytes()).as_deref(), Some(v.as_bytes()));
    }
}

/// Copies the database's files (a crash image: what the page cache holds).
fn crash_copy(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" && e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn crash_during_a_pipelined_pair_keeps_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = full_db(dir.path());
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    for i in 0..50u32 {
        put(&db, &cf, format!("ack{i:02}").as_bytes(), b"v").unwrap();
    }
    let probe = Probe::install(&db);
    let g0 = db.inner().commit.appended_group.load(Ordering::SeqCst);
    // The end of group N in the WAL (N+1 is appended after it).
    let mut end_of_group_n = None;
    let (a, b) = pipelined_pair(&db, &cf, &probe, g0, || {
        let w = db.inner().commit.lock_write();
        let wal = w.wal.as_ref().unwrap();
        end_of_group_n = Some((wal.path.clone(), wal.size));
    });
    let (seg_path, end_of_a) = end_of_group_n.unwrap();
    let whole = tempfile::tempdir().unwrap();
    crash_copy(dir.path(), whole.path());
    let torn = tempfile::tempdir().unwrap();
    crash_copy(dir.path(), torn.path());
    // The second group's record cut in the middle.
    let seg = torn.path().join(seg_path.file_name().unwrap());
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(end_of_a + 5).unwrap();
    drop(f);
    probe.release();
    a.join().unwrap().unwrap();
    b.join().unwrap().unwrap();
    drop(db);

    for (image, b_survives) in [(whole.path(), true), (torn.path(), false)] {
        let db = full_db(image);
        let cf = db.cf("t").unwrap();
        for i in 0..50u32 {
            assert!(read(&db, &cf, format!("ack{i:02}").as_bytes()).is_some());
        }
        // Neither was acknowledged when the image was taken: each is there
        // whole or not at all.
        assert_eq!(read(&db, &cf, b"a").as_deref(), Some(&b"1"[..]));
        let got_b = read(&db, &cf, b"b");
        if b_survives {
            assert_eq!(got_b.as_deref(), Some(&b"2"[..]));
        } else {
            assert_eq!(got_b, None);
        }
        put(&db, &cf, b"after", b"x").unwrap();
        assert!(read(&db, &cf, b"after").is_some());
        drop(db);
        // Writes after the recovery survive another reopen.
        let db = full_db(image);
        let cf = db.cf("t").unwrap();
        assert!(read(&db, &cf, b"after").is_some());
    }
}

/// A group's ops go into the memtables per column family across its
/// commits, warmed together once a memtable is large enough
/// (`insert_into_memtables`): every commit's version of every key lands under
/// its own sequence, and a key written by two commits of one group reads as
/// the later one, in both families, against a model.
#[test]
fn group_inserts_across_commits_and_families_match_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = full_db(dir.path());
    let cfs = [
        db.create_cf("a", CfOptions::default()).unwrap(),
        db.create_cf("b", CfOptions::default()).unwrap(),
    ];
    // Past the memtable's warm threshold (16k entries) in both families.
    for cf in &cfs {
        let ops = (0..20_000u32)
            .map(|i| {
                let op = Op {
                    cf: cf.inner.id,
                    kind: Kind::Put,
                    key: format!("base{i:06}").into_bytes(),
                    value: Arc::from(&b"v"[..]),
                    crc: None,
                };
                (cf.inner.clone(), op, 0)
            })
            .collect();
        db.inner().commit_ops(ops, false, true).unwrap();
    }
    let base = db.latest_sequence();
    // One group of 100 commits, each one key per family (as autocommit
    // INSERTs with a secondary index are); every fourth rewrites a key an
    // earlier commit of the group wrote.
    let mut model: BTreeMap<(usize, Vec<u8>), (u64, Vec<u8>)> = BTreeMap::new();
    let mut accepted = Vec::new();
    for c in 0..100u64 {
        let seq = base + 1 + c;
        let slot = if c % 4 == 3 { c - 3 } else { c };
        let mut ops = Vec::new();
        for (f, cf) in cfs.iter().enumerate() {
            let key = format!("k{:05}", (slot * 7919 + f as u64 * 31) % 100_000).into_bytes();
            let value = format!("{c}:{f}").into_bytes();
            model.insert((f, key.clone()), (seq, value.clone()));
            let op = Op {
                cf: cf.inner.id,
                kind: Kind::Put,
                key,
                value: Arc::from(value.as_slice()),
                crc: None,
            };
            ops.push((cf.inner.clone(), op, 0));
        }
        accepted.push((c as usize, seq, ops));
    }
    let touched = super::group::insert_into_memtables(&mut accepted, &Default::default());
    assert_eq!(touched.len(), 2, "each family touched once");
    assert!(accepted.iter().all(|(_, _, ops)| ops.is_empty()));
    for ((f, key), (seq, value)) in &model {
        let mem = cfs[*f].inner.current().mem.clone();
        let e = mem.get(key, crate::key::MAX_SEQ).expect("inserted");
        assert_eq!(e.seq(), *seq, "newest version of {key:?} in family {f}");
        assert_eq!(e.value(), value.as_slice());
    }
}

/// Waits up to `secs` for `t` to end; its result, or `None` if it did not.
fn join_within<T>(t: std::thread::JoinHandle<T>, secs: u64) -> Option<T> {
    let start = Instant::now();
    while !t.is_finished() {
        if start.elapsed() > Duration::from_secs(secs) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Some(t.join().unwrap())
}

/// A group waiting for room (too many immutable memtables) releases the
/// write lock while it waits. A path taking the settled write lock then (a
/// checkpoint, spilled commit or prepare whose queue drain ended before the
/// group came; close) holds that lock while it waits for every group that
/// has a turn to finish: had the waiting group taken its turn, the two would
/// wait on each other for ever.
#[test]
fn settled_lock_while_a_group_waits_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let db = full_db(dir.path());
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let inner = db.inner().clone();
    // No flush runs while this is held: the memtables stay immutable.
    let no_flush = inner.flush_lock.lock();
    for i in 0..crate::db::database::MAX_IMMS {
        put(&db, &cf, format!("k{i}").as_bytes(), b"v").unwrap();
        let mut w = inner.commit.lock_write();
        inner.rotate(&mut w, &cf.inner).unwrap();
    }
    let writer = {
        let (db, cf) = (db.clone(), cf.clone());
        std::thread::spawn(move || put(&db, &cf, b"late", b"v"))
    };
    // Its group is being written, that is waiting for room.
    let start = Instant::now();
    while !inner.commit.queue.lock().writing {
        assert!(start.elapsed() < Duration::from_secs(30), "no group");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    let settled = {
        let inner = inner.clone();
        std::thread::spawn(move || drop(inner.commit.lock_settled()))
    };
    // The settled lock is taken (or waited for); then room is made.
    std::thread::sleep(Duration::from_millis(200));
    drop(no_flush);
    let done = (join_within(settled, 10), join_within(writer, 10));
    let (Some(()), Some(w)) = done else {
        // Stuck threads hold the database: no close (it would wait too).
        std::mem::forget(db);
        std::mem::forget(inner);
        panic!("the settled write lock and a group waiting for room deadlocked");
    };
    w.unwrap();
    assert_eq!(read(&db, &cf, b"late"), Some(b"v".to_vec()));
    db.close().unwrap();
}
