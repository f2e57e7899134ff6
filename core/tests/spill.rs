#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Write sets larger than the spill threshold: spilled to sorted runs, read
//! back through get / iterators, savepoints, conflicts, commit by table
//! install (atomic across crashes).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use tidesdb_core::*;

fn opts() -> DbOptions {
    common::opts(SyncMode::None, 256 << 10)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn check_reads(t: &mut Txn, cf: &Cf, model: &Model, rng: &mut StdRng) {
    // Point reads (present and absent keys).
    for _ in 0..300 {
        let k = format!("k{:06}", rng.gen_range(0..30_000)).into_bytes();
        assert_eq!(t.get(cf, &k).unwrap(), model.get(&k).cloned(), "get {k:?}");
    }
    for latest in [false, true] {
        let mut it = if latest {
            t.iter_latest(cf, IterOptions::default()).unwrap()
        } else {
            t.iter(cf, IterOptions::default()).unwrap()
        };
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "forward scan differs (latest={latest})");
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        it.status().unwrap();
        back.reverse();
        assert!(back == want, "backward scan differs (latest={latest})");
        // Random seeks both ways.
        for _ in 0..50 {
            let k = format!("k{:06}", rng.gen_range(0..30_000)).into_bytes();
            it.seek(&k);
            let w = model.range(k.clone()..).next();
            assert_eq!(it.valid(), w.is_some());
            if let Some((wk, wv)) = w {
                assert_eq!((it.key(), it.value()), (wk.as_slice(), wv.as_slice()));
            }
            it.seek_for_prev(&k);
            let w = model.range(..=k.clone()).next_back();
            assert_eq!(it.valid(), w.is_some());
            if let Some((wk, _)) = w {
                assert_eq!(it.key(), wk.as_slice());
            }
            // Direction changes: a few steps back from a forward seek, then
            // forward again past where it started.
            it.seek(&k);
            if !it.valid() {
                continue;
            }
            let mut want: Vec<&Vec<u8>> = model
                .range(..k.clone())
                .rev()
                .take(3)
                .map(|(k, _)| k)
                .collect();
            for w in &want {
                it.prev();
                assert!(it.valid());
                assert_eq!(it.key(), w.as_slice(), "prev after seek");
            }
            want.reverse();
            let ahead: Vec<&Vec<u8>> = model
                .range(want.first().map_or(k.clone(), |w| (*w).clone())..)
                .skip(1)
                .take(6)
                .map(|(k, _)| k)
                .collect();
            for w in ahead {
                it.next();
                assert!(it.valid());
                assert_eq!(it.key(), w.as_slice(), "next after prev");
            }
        }
    }
}

fn committed(db: &Db, cf: &Cf) -> Model {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut m = Model::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    m
}

fn spill_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".spill")
        })
        .count()
}

#[test]
fn spilled_write_set_reads_savepoints_and_commit() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let a = db.create_cf("a", CfOptions::default()).unwrap();
    let b = db.create_cf("b", CfOptions::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    // Committed base data (some flushed).
    let mut base = Model::new();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in (0..30_000).step_by(3) {
        let k = format!("k{i:06}").into_bytes();
        t.put(&a, &k, b"base").unwrap();
        base.insert(k, b"base".to_vec());
    }
    t.commit().unwrap();
    db.flush().unwrap();

    db.set_spill_threshold(256 << 10);
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut model = base.clone();
    let mut model_b = Model::new();
    let mut sps: Vec<(Savepoint, Model, Model, u64)> = Vec::new();
    for round in 0..6 {
        for _ in 0..4000 {
            let k = format!("k{:06}", rng.gen_range(0..30_000)).into_bytes();
            if rng.gen_bool(0.2) {
                t.delete(&a, &k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("r{round}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                t.put(&a, &k, &v).unwrap();
                model.insert(k.clone(), v.clone());
                t.put(&b, &k, &v).unwrap();
                model_b.insert(k, v);
            }
        }
        if round % 2 == 0 {
            sps.push((
                t.savepoint(),
                model.clone(),
                model_b.clone(),
                t.write_count(),
            ));
        }
        assert!(t.write_set_bytes() <= (256 << 10) + 1024);
    }
    assert!(t.is_spilled());
    assert!(spill_files(d.path()) > 0);
    check_reads(&mut t, &a, &model, &mut rng);
    check_reads(&mut t, &b, &model_b, &mut rng);

    // An iterator made before a rollback sees it after its next seek.
    let mut it = t.iter(&a, IterOptions::default()).unwrap();
    // Roll back to the middle savepoint, across spilled runs.
    let (sp, m, mb, wc) = sps[1].clone();
    t.rollback_to(sp).unwrap();
    model = m;
    model_b = mb;
    assert_eq!(t.write_count(), wc);
    check_reads(&mut t, &a, &model, &mut rng);
    check_reads(&mut t, &b, &model_b, &mut rng);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, model.len());
    drop(it);
    // More writes after the rollback, then commit.
    for _ in 0..3000 {
        let k = format!("k{:06}", rng.gen_range(0..30_000)).into_bytes();
        t.put(&a, &k, b"after").unwrap();
        model.insert(k, b"after".to_vec());
    }
    check_reads(&mut t, &a, &model, &mut rng);
    let seq_before = db.latest_sequence();
    t.commit().unwrap();
    assert_eq!(db.latest_sequence(), seq_before + 1);
    assert_eq!(spill_files(d.path()), 0);
    assert!(committed(&db, &a) == model);
    assert!(committed(&db, &b) == model_b);
    // Later small commits still win over the installed tables.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&a, b"k000000", b"later").unwrap();
    t.commit().unwrap();
    model.insert(b"k000000".to_vec(), b"later".to_vec());
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    let a = db.cf("a").unwrap();
    let b = db.cf("b").unwrap();
    assert!(committed(&db, &a) == model);
    assert!(committed(&db, &b) == model_b);
    db.compact_range(&a, None, None).unwrap();
    assert!(committed(&db, &a) == model);
}

#[test]
fn spilled_commit_conflicts_and_locks() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    db.set_spill_threshold(64 << 10);
    // Conflict: another txn commits a key we wrote, after our snapshot.
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..5000 {
        t.put(&cf, format!("k{i:05}").as_bytes(), b"big").unwrap();
    }
    assert!(t.is_spilled());
    let mut o = db.begin(Isolation::RepeatableRead);
    o.put(&cf, b"k04321", b"other").unwrap();
    o.commit().unwrap();
    let seq = db.latest_sequence();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    assert_eq!(db.latest_sequence(), seq);
    let m = committed(&db, &cf);
    assert_eq!(m.len(), 1);
    assert_eq!(spill_files(d.path()), 0);

    // Locked key: conflicts only from the lock time on.
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut o = db.begin(Isolation::RepeatableRead);
    o.put(&cf, b"k00007", b"other").unwrap();
    o.commit().unwrap();
    t.lock(
        &cf,
        b"k00007",
        LockMode::Exclusive,
        std::time::Duration::from_secs(1),
    )
    .unwrap();
    assert_eq!(t.get_latest(&cf, b"k00007").unwrap().unwrap(), b"other");
    for i in 0..5000 {
        t.put(&cf, format!("k{i:05}").as_bytes(), b"big").unwrap();
    }
    assert!(t.is_spilled());
    // A writer of a locked key waits / times out while we hold it.
    let mut w = db.begin(Isolation::RepeatableRead);
    assert!(matches!(
        w.lock(
            &cf,
            b"k00007",
            LockMode::Exclusive,
            std::time::Duration::from_millis(50)
        ),
        Err(Error::LockTimeout)
    ));
    drop(w);
    t.commit().unwrap();
    let m = committed(&db, &cf);
    assert_eq!(m.len(), 5000);
    assert!(m.values().all(|v| v == b"big"));
    // Commits writing those keys with an older snapshot now conflict.
    let mut t2 = db.begin(Isolation::RepeatableRead);
    let mut t3 = db.begin(Isolation::RepeatableRead);
    t3.put(&cf, b"k00001", b"t3").unwrap();
    t3.commit().unwrap();
    t2.put(&cf, b"k00001", b"t2").unwrap();
    assert!(matches!(t2.commit(), Err(Error::Conflict)));
    // Rolled-back spilled txns leave no files.
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..5000 {
        t.put(&cf, format!("z{i:05}").as_bytes(), b"big").unwrap();
    }
    assert!(spill_files(d.path()) > 0);
    t.rollback();
    assert_eq!(spill_files(d.path()), 0);
}

/// 2M rows of ~100 bytes in one transaction: write-set RAM stays bounded
/// (accounted bytes), and the commit is all there.
#[test]
fn two_million_row_txn_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::None,
            write_buffer_size: 16 << 20,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let n: u64 = 2_000_000;
    let t0 = std::time::Instant::now();
    let mut t = db.begin(Isolation::RepeatableRead);
    let val = [b'v'; 84];
    for i in 0..n {
        t.put(&cf, format!("row{i:012}").as_bytes(), &val).unwrap();
    }
    let peak = t.write_set_bytes_peak();
    assert!(peak < 64 << 20, "peak accounted write set {peak}");
    assert!(t.is_spilled());
    assert_eq!(t.write_count(), n);
    assert_eq!(t.get(&cf, b"row000001234567").unwrap().unwrap(), val);
    let t1 = std::time::Instant::now();
    t.commit().unwrap();
    let t2 = std::time::Instant::now();
    let mut r = db.begin(Isolation::RepeatableRead);
    let mut it = r.iter(&cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut c = 0u64;
    while it.valid() {
        c += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(c, n);
    eprintln!(
        "2M rows: writes {:?}, commit {:?}, scan {:?}, peak write set {} MiB",
        t1 - t0,
        t2 - t1,
        t2.elapsed(),
        peak >> 20
    );
}

#[test]
fn spilled_commit_crash_before_and_after_commit_point() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut s = db.begin(Isolation::RepeatableRead);
    s.put(&cf, b"small", b"1").unwrap();
    s.commit().unwrap();
    db.set_spill_threshold(64 << 10);
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..5000 {
        t.put(&cf, format!("k{i:05}").as_bytes(), b"big").unwrap();
    }
    assert!(spill_files(d.path()) > 0);
    // Crash with the write set spilled but not committed: nothing of it.
    let before = common::crash_copy(d.path());
    t.commit().unwrap();
    let after = common::crash_copy(d.path());
    {
        let db = Db::open(before.path(), opts()).unwrap();
        let cf = db.cf("t").unwrap();
        let m = committed(&db, &cf);
        assert_eq!(m.len(), 1);
        assert_eq!(spill_files(before.path()), 0);
    }
    {
        let db = Db::open(after.path(), opts()).unwrap();
        let cf = db.cf("t").unwrap();
        let m = committed(&db, &cf);
        assert_eq!(m.len(), 5001);
        // The sequence does not go backwards after recovery.
        let mut s = db.begin(Isolation::RepeatableRead);
        s.put(&cf, b"k00000", b"newer").unwrap();
        s.commit().unwrap();
        assert_eq!(s_get(&db, &cf, b"k00000"), b"newer");
    }
}

fn s_get(db: &Db, cf: &Cf, k: &[u8]) -> Vec<u8> {
    db.begin(Isolation::RepeatableRead)
        .get(cf, k)
        .unwrap()
        .unwrap()
}

/// A real crash (SIGKILL) at a random moment of a spilled commit: after
/// reopening, either all of it or none of it is visible, and all of it if
/// the commit returned.
#[test]
fn spilled_commit_sigkill() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    const N: u64 = 60_000;
    if let Ok(dir) = std::env::var("TIDESDB_SPILL_CHILD") {
        let db = Db::open(&dir, opts()).unwrap();
        let cf = db
            .cf("t")
            .unwrap_or_else(|| db.create_cf("t", CfOptions::default()).unwrap());
        db.set_spill_threshold(512 << 10);
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..N {
            t.put(&cf, format!("k{i:07}").as_bytes(), &[b'v'; 100])
                .unwrap();
        }
        let mut o = std::io::stdout().lock();
        writeln!(o, "COMMIT").unwrap();
        o.flush().unwrap();
        t.commit().unwrap();
        writeln!(o, "ACK").unwrap();
        o.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(60));
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let (mut none, mut all) = (0, 0);
    for round in 0..6 {
        let d = tempfile::tempdir().unwrap();
        let mut child = Command::new(&exe)
            .args(["--exact", "spilled_commit_sigkill", "--nocapture"])
            .env("TIDESDB_SPILL_CHILD", d.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let l = lines.next().unwrap().unwrap();
            if l == "COMMIT" {
                break;
            }
        }
        // Kill somewhere inside the commit (or right after it, last round).
        let delay = if round == 5 {
            3000
        } else {
            rng.gen_range(0..400)
        };
        std::thread::sleep(std::time::Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = lines.any(|l| l.map(|l| l == "ACK").unwrap_or(false));
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.cf("t").unwrap();
        let m = committed(&db, &cf);
        assert!(
            m.is_empty() || m.len() as u64 == N,
            "partial commit visible: {} rows",
            m.len()
        );
        if acked {
            assert_eq!(m.len() as u64, N);
        }
        assert_eq!(spill_files(d.path()), 0);
        if m.is_empty() {
            none += 1;
        } else {
            all += 1;
        }
    }
    eprintln!("sigkill rounds: {none} none, {all} all");
}

fn prep_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".prep")
        })
        .count()
}

/// Writes a spilled write set (5000 puts, every 7th value separated into
/// the value log, 100 deletes of committed keys) and prepares it.
fn spilled_prepare(db: &Db, cf: &Cf, xid: &[u8], tag: &str) -> Txn {
    let mut t = db.begin(Isolation::RepeatableRead);
    t.set_spill_threshold(64 << 10);
    for i in 0..5000 {
        let v = if i % 7 == 0 {
            format!("{tag}-{i}-{}", "L".repeat(2000))
        } else {
            format!("{tag}-{i}")
        };
        t.put(cf, format!("k{i:05}").as_bytes(), v.as_bytes())
            .unwrap();
    }
    for i in 0..100 {
        t.delete(cf, format!("old{i:03}").as_bytes()).unwrap();
    }
    assert!(t.is_spilled());
    t.prepare(xid).unwrap();
    t
}

fn check_spilled_committed(db: &Db, cf: &Cf, tag: &str) {
    let m = committed(db, cf);
    assert_eq!(m.len(), 5000 + 100, "5000 new keys + old100..old199");
    for i in (0..5000).step_by(13) {
        let exp = if i % 7 == 0 {
            format!("{tag}-{i}-{}", "L".repeat(2000))
        } else {
            format!("{tag}-{i}")
        };
        assert_eq!(m[format!("k{i:05}").as_bytes()], exp.as_bytes());
    }
    assert!(!m.contains_key(b"old000".as_slice()));
    assert!(m.contains_key(b"old100".as_slice()));
}

/// 2PC of a spilled write set: prepare is durable (manifest + .prep files),
/// survives a crash between prepare and commit, and resolves either way
/// (through the Txn, or detached through Db::commit_prepared /
/// rollback_prepared).
#[test]
fn spilled_prepare_crash_commit_rollback() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db
        .create_cf(
            "t",
            CfOptions {
                value_separation_threshold: Some(1024),
                ..CfOptions::default()
            },
        )
        .unwrap();
    let mut s = db.begin(Isolation::RepeatableRead);
    for i in 0..200 {
        s.put(&cf, format!("old{i:03}").as_bytes(), b"o").unwrap();
    }
    s.commit().unwrap();
    let t = spilled_prepare(&db, &cf, b"xs1", "one");
    assert!(prep_files(d.path()) > 0);
    // Invisible; keys locked and conflicting.
    assert_eq!(committed(&db, &cf).len(), 200);
    let mut o = db.begin(Isolation::RepeatableRead);
    assert!(matches!(
        o.lock(
            &cf,
            b"k00010",
            LockMode::Exclusive,
            std::time::Duration::from_millis(50)
        ),
        Err(Error::LockTimeout)
    ));
    drop(o);
    // Crash between prepare and commit.
    drop(t); // detach (a crash loses the Txn anyway)
    let crashed = common::crash_copy(d.path());
    {
        let db2 = Db::open(crashed.path(), opts()).unwrap();
        let cf2 = db2.cf("t").unwrap();
        let rec = db2.recover_prepared();
        assert_eq!(rec.len(), 1);
        assert_eq!(rec[0].xid(), b"xs1");
        assert_eq!(rec[0].write_count(), 5100);
        assert_eq!(committed(&db2, &cf2).len(), 200);
        // Keys still locked after recovery.
        let mut o = db2.begin(Isolation::RepeatableRead);
        assert!(o
            .lock(
                &cf2,
                b"k04999",
                LockMode::Exclusive,
                std::time::Duration::from_millis(50)
            )
            .is_err());
        drop(o);
        db2.commit_prepared(b"xs1").unwrap();
        assert!(matches!(
            db2.commit_prepared(b"xs1"),
            Err(Error::UnknownXid(_))
        ));
        check_spilled_committed(&db2, &cf2, "one");
        assert_eq!(prep_files(crashed.path()), 0);
        // Committed for good: survives a reopen (and a crash right after).
        let after = common::crash_copy(crashed.path());
        db2.close().unwrap();
        let db3 = Db::open(after.path(), opts()).unwrap();
        assert!(db3.recover_prepared().is_empty());
        check_spilled_committed(&db3, &db3.cf("t").unwrap(), "one");
    }
    // The original database rolls the same prepare back instead.
    assert_eq!(db.recover_prepared().len(), 1);
    db.rollback_prepared(b"xs1").unwrap();
    assert_eq!(prep_files(d.path()), 0);
    assert_eq!(committed(&db, &cf).len(), 200);
    // Through the Txn: rollback, then prepare + commit.
    let t = spilled_prepare(&db, &cf, b"xs2", "two");
    t.rollback();
    assert_eq!(committed(&db, &cf).len(), 200);
    assert_eq!(prep_files(d.path()), 0);
    let t = spilled_prepare(&db, &cf, b"xs3", "three");
    // A concurrent commit of a prepared key fails instead of overwriting.
    let mut o = db.begin(Isolation::RepeatableRead);
    o.put(&cf, b"k00001", b"x").unwrap();
    assert!(o.commit().is_err());
    t.commit().unwrap();
    check_spilled_committed(&db, &cf, "three");
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    assert!(db.recover_prepared().is_empty());
    check_spilled_committed(&db, &db.cf("t").unwrap(), "three");
    db.compact_range(&db.cf("t").unwrap(), None, None).unwrap();
    check_spilled_committed(&db, &db.cf("t").unwrap(), "three");
}

/// A spilled write set with more than a million entries in one column family is
/// committed as two key ranges whose tables are written side by side: random keys
/// overwritten and deleted, two families, the committed data against a model
/// (before and after a reopen).
#[test]
fn large_spilled_commit_in_key_ranges() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let a = db.create_cf("a", CfOptions::default()).unwrap();
    let b = db.create_cf("b", CfOptions::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    // Committed base data, some of which the large transaction deletes.
    let mut model = Model::new();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in (0..700_000u32).step_by(7) {
        let k = format!("{:08x}", i.wrapping_mul(2_654_435_761)).into_bytes();
        t.put(&a, &k, b"base").unwrap();
        model.insert(k, b"base".to_vec());
    }
    t.commit().unwrap();
    db.set_spill_threshold(8 << 20);
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut model_b = Model::new();
    for n in 0..1_300_000u32 {
        let i = rng.gen_range(0..700_000u32);
        let k = format!("{:08x}", i.wrapping_mul(2_654_435_761)).into_bytes();
        if n % 11 == 0 {
            t.delete(&a, &k).unwrap();
            model.remove(&k);
        } else {
            let v = n.to_le_bytes();
            t.put(&a, &k, &v).unwrap();
            model.insert(k.clone(), v.to_vec());
        }
        if n % 5 == 0 {
            t.put(&b, &k, b"b").unwrap();
            model_b.insert(k, b"b".to_vec());
        }
    }
    assert!(t.is_spilled());
    t.commit().unwrap();
    assert!(committed(&db, &a) == model);
    assert!(committed(&db, &b) == model_b);
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    let a = db.cf("a").unwrap();
    assert!(committed(&db, &a) == model);
    let mut r = db.begin(Isolation::RepeatableRead);
    for (k, v) in model.iter().step_by(997) {
        assert_eq!(r.get(&a, k).unwrap().as_ref(), Some(v));
    }
}

/// A conflict in any part of a spilled write set checked side by side (two column
/// families) fails the commit and leaves nothing of it.
#[test]
fn spilled_commit_conflict_in_second_family() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let a = db.create_cf("a", CfOptions::default()).unwrap();
    let b = db.create_cf("b", CfOptions::default()).unwrap();
    db.set_spill_threshold(64 << 10);
    for conflict_in_a in [false, true] {
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..5_000 {
            let k = format!("k{i:06}").into_bytes();
            t.put(&a, &k, b"t").unwrap();
            t.put(&b, &k, b"t").unwrap();
        }
        assert!(t.is_spilled());
        let mut o = db.begin(Isolation::RepeatableRead);
        o.put(if conflict_in_a { &a } else { &b }, b"k004321", b"other")
            .unwrap();
        o.commit().unwrap();
        assert!(matches!(t.commit(), Err(Error::Conflict)));
        let mut r = db.begin(Isolation::RepeatableRead);
        assert_eq!(r.get(&a, b"k000001").unwrap(), None);
        assert_eq!(r.get(&b, b"k000001").unwrap(), None);
        let mut o = db.begin(Isolation::RepeatableRead);
        o.delete(if conflict_in_a { &a } else { &b }, b"k004321")
            .unwrap();
        o.commit().unwrap();
    }
}
