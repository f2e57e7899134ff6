#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A real full disk: the database lives on a small tmpfs (mounted by the test;
//! skipped with a SKIP line when mount is refused, e.g. not root) that a filler
//! file fills. Commits fail with ENOSPC and leave the WAL whole; nothing
//! committed is lost; the database is not poisoned; a memtable flush that cannot
//! be written is retried later (with a pause, not a busy loop); once space is
//! freed, commits and the flush succeed without a reopen; after a reopen every
//! committed key is there.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tidesdb_core::*;

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazy: a leaked (crashed) handle may still hold files open.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount_tmpfs(dir: &Path, size: &str) -> Option<Mount> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tidesdb_test"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mount(dir.to_path_buf()))
}

/// Writes zeros to `path` until the filesystem is full (to the last page).
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    for chunk in [1usize << 20, 4096, 512] {
        let buf = vec![0u8; chunk];
        while f.write_all(&buf).is_ok() {}
    }
}

fn is_disk_full(e: &Error) -> bool {
    match e {
        // The errno survives `Error::duplicate` (one error, several waiters).
        Error::Io { source, .. } => source.raw_os_error() == Some(libc_enospc()),
        _ => false,
    }
}

fn libc_enospc() -> i32 {
    28
}

fn commit_row(db: &Db, cf: &Cf, k: u32, len: usize) -> Result<()> {
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(
        cf,
        format!("k{k:07}").as_bytes(),
        &vec![(k % 251) as u8; len],
    )?;
    t.commit()
}

fn check_all(db: &Db, cf: &Cf, model: &BTreeMap<u32, usize>) {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    drop(it);
    assert_eq!(n, model.len());
    for (k, len) in model.iter().step_by(97) {
        let v = t.get(cf, format!("k{k:07}").as_bytes()).unwrap().unwrap();
        assert_eq!(v, vec![(k % 251) as u8; *len]);
    }
}

#[test]
fn full_disk_fails_commits_cleanly_and_recovers_without_reopen() {
    let base = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_tmpfs(base.path(), "12m") else {
        eprintln!("SKIP: mount -t tmpfs refused (needs root / CAP_SYS_ADMIN)");
        return;
    };
    let dir = base.path().join("db");
    let filler = base.path().join("filler");
    let opts = DbOptions {
        sync_mode: SyncMode::Full,
        write_buffer_size: 1 << 20,
        ..DbOptions::default()
    };
    let mut model: BTreeMap<u32, usize> = BTreeMap::new();
    let db = Db::open(&dir, opts.clone()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    // Committed before the disk fills: a few flushed files and a memtable.
    for k in 0..6000u32 {
        commit_row(&db, &cf, k, 200).unwrap();
        model.insert(k, 200);
    }
    let flushes_before = db.metrics().memtable_flushes;
    fill(&filler);

    // Commits fail with ENOSPC; a few may still fit into the last pages.
    let mut k = 100_000u32;
    let err = loop {
        match commit_row(&db, &cf, k, 3000) {
            Ok(()) => {
                model.insert(k, 3000);
                k += 1;
                assert!(k < 110_000, "commits kept succeeding on a full disk");
            }
            Err(e) => break e,
        }
    };
    assert!(is_disk_full(&err), "{err}");
    // Not poisoned: a later commit fails the same way, reads work.
    let e = commit_row(&db, &cf, k, 3000).unwrap_err();
    assert!(is_disk_full(&e), "{e}");
    check_all(&db, &cf, &model);

    // A flush that cannot be written: the memtable stays, readable; the
    // background retry pauses between attempts.
    let e = db.flush().unwrap_err();
    assert!(is_disk_full(&e), "{e}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.background_error().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bg = db.background_error().expect("background flush error");
    assert!(bg.contains("No space left"), "{bg}");
    let errs0 = db.metrics().background_errors;
    std::thread::sleep(Duration::from_secs(3));
    let retries = db.metrics().background_errors - errs0;
    assert!(
        (1..=10).contains(&retries),
        "{retries} background retries in 3 s"
    );
    check_all(&db, &cf, &model);

    // Space returns: commits and the pending flush succeed, no reopen.
    std::fs::remove_file(&filler).unwrap();
    for k in 200_000..200_200u32 {
        commit_row(&db, &cf, k, 200).unwrap();
        model.insert(k, 200);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while (db.background_error().is_some() || db.metrics().memtable_flushes == flushes_before)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(db.background_error().is_none());
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    check_all(&db, &cf, &model);
    db.close().unwrap();
    drop(db);

    // Reopen: every committed key, WAL replay not confused by the failures.
    let db = Db::open(&dir, opts).unwrap();
    let cf = db.cf("t").unwrap();
    check_all(&db, &cf, &model);
    commit_row(&db, &cf, 300_000, 10).unwrap();
    db.close().unwrap();
}

#[test]
fn torn_append_is_cut_back_and_replay_is_clean() {
    // Crash (no close) right after failed commits on a full disk: the WAL
    // must replay every acknowledged commit and nothing of the failed ones.
    let base = tempfile::tempdir().unwrap();
    let Some(_mount) = mount_tmpfs(base.path(), "4m") else {
        eprintln!("SKIP: mount -t tmpfs refused (needs root / CAP_SYS_ADMIN)");
        return;
    };
    let dir = base.path().join("db");
    let filler = base.path().join("filler");
    let opts = DbOptions {
        sync_mode: SyncMode::Full,
        write_buffer_size: 64 << 20,
        ..DbOptions::default()
    };
    let mut model: BTreeMap<u32, usize> = BTreeMap::new();
    let db = Db::open(&dir, opts.clone()).unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    for k in 0..100u32 {
        commit_row(&db, &cf, k, 100).unwrap();
        model.insert(k, 100);
    }
    fill(&filler);
    // Records larger than the free space: each one fails part-way. (The
    // first land in the zeros written ahead of the appends in Full mode,
    // space already allocated, as in InnoDB's preallocated redo log: 5 MB of
    // records go past them and the 4 MiB file system.)
    let mut failures = 0;
    for k in 1000..1100u32 {
        match commit_row(&db, &cf, k, 50_000) {
            Ok(()) => {
                model.insert(k, 50_000);
            }
            Err(e) => {
                assert!(is_disk_full(&e), "{e}");
                failures += 1;
            }
        }
    }
    assert!(failures > 0);
    // Small commits that fit after the cut still land in the same segment.
    std::fs::remove_file(&filler).unwrap();
    for k in 2000..2010u32 {
        commit_row(&db, &cf, k, 100).unwrap();
        model.insert(k, 100);
    }
    // "Crash": leak the handle, recover a copy of the files (the leaked
    // handle keeps its directory lock).
    std::mem::forget(db);
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
        }
    }
    let db = Db::open(copy.path(), opts).unwrap();
    let cf = db.cf("t").unwrap();
    check_all(&db, &cf, &model);
}
