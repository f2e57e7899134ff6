#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Db::checkpoint`: a consistent image at one commit point while writes,
//! flushes and compactions go on; never complete-looking when it failed.
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tidesdb_core::*;

mod common;

fn opts() -> DbOptions {
    // Small memtables: flushes and compactions run during the test.
    common::opts(SyncMode::None, 32 << 10)
}

const ACCOUNTS: u32 = 50;
const START: i64 = 1000;

fn balance(t: &mut Txn, cf: &Cf, a: u32) -> i64 {
    let v = t
        .get(cf, format!("acct{a:03}").as_bytes())
        .unwrap()
        .unwrap();
    std::str::from_utf8(&v).unwrap().parse().unwrap()
}

fn total(db: &Db) -> i64 {
    let cf = db.cf("bank").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    (0..ACCOUNTS).map(|a| balance(&mut t, &cf, a)).sum()
}

/// Keys `log<n>` present, in order.
fn log_entries(db: &Db) -> Vec<u64> {
    let cf = db.cf("log").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    let mut v = Vec::new();
    it.seek_to_first();
    while it.valid() {
        let k = std::str::from_utf8(it.key()).unwrap();
        v.push(k.trim_start_matches("log").parse().unwrap());
        it.next();
    }
    it.status().unwrap();
    v
}

#[test]
fn checkpoint_under_load_is_one_commit_point() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), opts()).unwrap();
    let bank = db.create_cf("bank", CfOptions::default()).unwrap();
    let log = db.create_cf("log", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for a in 0..ACCOUNTS {
        t.put(
            &bank,
            format!("acct{a:03}").as_bytes(),
            START.to_string().as_bytes(),
        )
        .unwrap();
    }
    t.commit().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    // Transfers (total must hold) from several threads.
    let mut threads = Vec::new();
    for th in 0..3u32 {
        let (db, bank, stop) = (db.clone(), bank.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = th;
            while !stop.load(Ordering::Relaxed) {
                i = i.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let (a, b) = (i % ACCOUNTS, (i / 7) % ACCOUNTS);
                if a == b {
                    continue;
                }
                let mut t = db.begin(Isolation::RepeatableRead);
                let (x, y) = (balance(&mut t, &bank, a), balance(&mut t, &bank, b));
                t.put(
                    &bank,
                    format!("acct{a:03}").as_bytes(),
                    (x - 7).to_string().as_bytes(),
                )
                .unwrap();
                t.put(
                    &bank,
                    format!("acct{b:03}").as_bytes(),
                    (y + 7).to_string().as_bytes(),
                )
                .unwrap();
                let _ = t.commit(); // a conflict just loses this transfer
            }
        }));
    }
    // One writer of consecutive log entries with large values (value log).
    let acked = Arc::new(AtomicU64::new(0));
    {
        let (db, log, stop, acked) = (db.clone(), log.clone(), stop.clone(), acked.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut t = db.begin(Isolation::RepeatableRead);
                let value = vec![b'x'; if n % 3 == 0 { 8 << 10 } else { 100 }];
                t.put(&log, format!("log{n:08}").as_bytes(), &value)
                    .unwrap();
                t.commit().unwrap();
                n += 1;
                acked.store(n, Ordering::SeqCst);
            }
        }));
    }
    while acked.load(Ordering::SeqCst) < 2000 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut checkpoints = Vec::new();
    for i in 0..3 {
        let before = acked.load(Ordering::SeqCst);
        let dest = d.path().join(format!("ckpt{i}"));
        let info = db.checkpoint(&dest, "origin test").unwrap();
        let after = acked.load(Ordering::SeqCst);
        assert!(info.files > 0 && info.bytes > 0);
        checkpoints.push((dest, info, before, after));
        if i == 1 {
            db.flush().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let live_total = total(&db);
    assert_eq!(live_total, i64::from(ACCOUNTS) * START);
    db.close().unwrap();

    for (dest, info, before, after) in checkpoints {
        assert_eq!(read_checkpoint_info(&dest).unwrap(), info);
        let text = std::fs::read_to_string(dest.join(CHECKPOINT_FILE)).unwrap();
        assert!(text.ends_with("origin test\n"), "{text}");
        assert!(!dest.with_extension("incomplete").exists());
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "checkpoint directory mode");
        for e in std::fs::read_dir(&dest).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let m = e.metadata().unwrap().permissions().mode() & 0o777;
            // Files the checkpoint writes are 0660; linked ones keep the
            // engine's own mode (the server's umask makes those 0660 too).
            if name == CHECKPOINT_FILE || name == "CURRENT" || name.starts_with("MANIFEST-") {
                assert_eq!(m, 0o660, "{name}");
            }
        }
        let cdb = Db::open(&dest, opts()).unwrap();
        assert_eq!(total(&cdb), i64::from(ACCOUNTS) * START, "{dest:?}");
        // The log is a prefix: every entry acknowledged before the checkpoint
        // began is in, and nothing that was not yet written when it ended.
        let entries = log_entries(&cdb);
        let n = entries.len() as u64;
        assert!(entries.iter().copied().eq(0..n), "{dest:?}: log has holes");
        assert!(
            n >= before && n <= after + 1,
            "{dest:?}: {n} not in {before}..={after}"
        );
        cdb.close().unwrap();
    }
}

#[test]
fn prepared_transactions_are_in_the_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"a", b"1").unwrap();
    t.prepare(b"xid-1").unwrap();
    let dest = d.path().join("ckpt");
    db.checkpoint(&dest, "").unwrap();
    drop(t);
    db.close().unwrap();
    let cdb = Db::open(&dest, opts()).unwrap();
    let xids: Vec<Vec<u8>> = cdb
        .recover_prepared()
        .iter()
        .map(|p| p.xid().to_vec())
        .collect();
    assert_eq!(xids, vec![b"xid-1".to_vec()]);
    cdb.commit_prepared(b"xid-1").unwrap();
    let cf = cdb.cf("t").unwrap();
    let mut t = cdb.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&cf, b"a").unwrap().unwrap(), b"1");
}

#[test]
fn failed_or_refused_checkpoint_leaves_nothing_complete() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), opts()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"a", b"1").unwrap();
    t.commit().unwrap();
    // An existing destination is refused and left alone.
    let dest = d.path().join("taken");
    std::fs::create_dir(&dest).unwrap();
    assert!(matches!(
        db.checkpoint(&dest, ""),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(std::fs::read_dir(&dest).unwrap().count(), 0);
    // A leftover `.incomplete` (a crashed checkpoint, or one running) is refused.
    let dest = d.path().join("again");
    std::fs::create_dir(d.path().join("again.incomplete")).unwrap();
    assert!(db.checkpoint(&dest, "").is_err());
    assert!(!dest.exists());
    // A destination whose parent is a file: an I/O error, nothing created.
    std::fs::write(d.path().join("file"), b"").unwrap();
    let dest = d.path().join("file").join("ckpt");
    assert!(matches!(db.checkpoint(&dest, ""), Err(Error::Io { .. })));
    // A destination on another filesystem is copied, not linked (when /dev/shm exists).
    if std::path::Path::new("/dev/shm").is_dir() {
        let other = tempfile::tempdir_in("/dev/shm").unwrap();
        let dest = other.path().join("ckpt");
        db.flush().unwrap();
        let info = db.checkpoint(&dest, "").unwrap();
        assert!(info.files >= 3);
        let cdb = Db::open(&dest, opts()).unwrap();
        let cf = cdb.cf("t").unwrap();
        let mut t = cdb.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&cf, b"a").unwrap().unwrap(), b"1");
    }
    // A note may not forge the header.
    assert!(db
        .checkpoint(&d.path().join("n"), "tidesdb-checkpoint 1")
        .is_err());
    // A directory without CHECKPOINT is not a checkpoint.
    assert!(read_checkpoint_info(&d.path().join("again.incomplete")).is_err());
}
