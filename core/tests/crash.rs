#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Real crash test: a child process (this test binary re-executed with
//! TIDESDB_CRASH_CHILD set) commits multi-key, multi-CF transactions in Full
//! sync mode and prints an ACK line after each commit returns; the parent
//! SIGKILLs it at a random time, reopens, and checks that every acknowledged
//! commit is present and no commit is partially visible.

mod common;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tidesdb_core::*;

const KEYS_PER_TXN: u64 = 4;

/// The value of key `j` of commit `n`: ~108 bytes, except in "b" (odd `j`) of
/// every third commit, 6000 bytes: large enough for the WAL to hold it out of
/// line, so flushes point into sealed WAL segments (`vlog.rs`) and the crash
/// also hits that.
fn value(n: u64, j: u64) -> Vec<u8> {
    if j % 2 == 1 && n % 3 == 0 {
        format!("{n}-{}", "L".repeat(6000)).into_bytes()
    } else {
        format!("{n}-{}", "v".repeat(100)).into_bytes()
    }
}

fn db_opts() -> DbOptions {
    common::opts(SyncMode::Full, 32 << 10)
}

#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var("TIDESDB_CRASH_CHILD") else {
        return;
    };
    let start: u64 = std::env::var("TIDESDB_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    let db = Db::open(&dir, db_opts()).unwrap();
    let a = db
        .cf("a")
        .unwrap_or_else(|| db.create_cf("a", CfOptions::default()).unwrap());
    // "b" separates its values (~108 bytes, some 6000) into value log files,
    // so the crash also hits flushes writing value logs or adopting WAL
    // segments as value logs.
    let b = db.cf("b").unwrap_or_else(|| {
        db.create_cf(
            "b",
            CfOptions {
                value_separation_threshold: Some(64),
                ..CfOptions::default()
            },
        )
        .unwrap()
    });
    let out = std::io::stdout();
    let mut n = start;
    // Several committer threads would also be fine; one keeps ACK order simple.
    loop {
        let mut t = db.begin(Isolation::RepeatableRead);
        for j in 0..KEYS_PER_TXN {
            let cf = if j % 2 == 0 { &a } else { &b };
            t.put(cf, format!("n{n:08}-{j}").as_bytes(), &value(n, j))
                .unwrap();
        }
        t.commit().unwrap();
        let mut o = out.lock();
        writeln!(o, "ACK {n}").unwrap();
        o.flush().unwrap();
        n += 1;
    }
}

#[test]
fn crash_kill9_recovery() {
    if std::env::var("TIDESDB_CRASH_CHILD").is_ok() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let exe = std::env::current_exe().unwrap();
    let mut next_start = 0u64;
    let rounds = if std::env::var("TIDESDB_LONG_TESTS").is_ok_and(|v| v == "1") {
        20
    } else {
        3
    };
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TIDESDB_CRASH_CHILD", d.path())
            .env("TIDESDB_CRASH_START", next_start.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ACK ") {
                    let _ = tx.send(n.trim().parse().unwrap());
                }
            }
        });
        // wait for some progress, then kill at a random moment
        let t0 = Instant::now();
        let mut acked: Vec<u64> = Vec::new();
        while acked.len() < 20 && t0.elapsed() < Duration::from_secs(20) {
            if let Ok(n) = rx.recv_timeout(Duration::from_millis(50)) {
                acked.push(n);
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(10..300)));
        // SAFETY: sending SIGKILL to our own child process.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        child.wait().unwrap();
        reader.join().unwrap();
        acked.extend(rx.try_iter());
        assert!(!acked.is_empty(), "child made no progress in round {round}");
        let max_ack = *acked.iter().max().unwrap();

        let db = Db::open(d.path(), db_opts()).unwrap();
        let a = db.cf("a").unwrap();
        let b = db.cf("b").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        let mut n = next_start;
        loop {
            let mut present = 0;
            for j in 0..KEYS_PER_TXN {
                let cf = if j % 2 == 0 { &a } else { &b };
                if let Some(v) = t.get(cf, format!("n{n:08}-{j}").as_bytes()).unwrap() {
                    assert_eq!(v, value(n, j), "commit {n} key {j}");
                    present += 1;
                }
            }
            assert!(
                present == 0 || present == KEYS_PER_TXN,
                "partial txn {n}: {present} keys"
            );
            if present == 0 {
                assert!(
                    n > max_ack,
                    "acknowledged commit {n} lost (max ack {max_ack})"
                );
                break;
            }
            n += 1;
        }
        // nothing beyond the first gap
        for m in n..n + 5 {
            assert!(t
                .get(&a, format!("n{m:08}-0").as_bytes())
                .unwrap()
                .is_none());
        }
        next_start = n;
        drop(t);
        db.close().unwrap();
    }
}
