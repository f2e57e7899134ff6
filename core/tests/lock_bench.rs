//! Micro-benchmark of the pessimistic lock path: 1M exclusive locks in one
//! transaction (what the MariaDB plugin does for a large INSERT ... SELECT).
//! Run with `cargo test --release -p tidesdb-core --test lock_bench -- --ignored --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tidesdb_core::*;

/// Counts live heap bytes and allocation calls of this test binary.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
#[ignore]
fn million_locks_one_txn() {
    const N: u64 = 1_000_000;
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::None,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db.create_cf("t", CfOptions::default()).unwrap();
    let t = Duration::from_secs(5);
    // Row-key-like keys: 4-byte index id + 8-byte big-endian row id.
    let key = |i: u64| {
        let mut k = [0u8; 12];
        k[..4].copy_from_slice(&7u32.to_be_bytes());
        k[4..].copy_from_slice(&i.to_be_bytes());
        k
    };
    let mut txn = db.begin(Isolation::RepeatableRead);
    let live0 = LIVE.load(Ordering::Relaxed);
    let allocs0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    for i in 0..N {
        txn.lock(&cf, &key(i), LockMode::Exclusive, t).unwrap();
    }
    let lock_t = t0.elapsed();
    let live = LIVE.load(Ordering::Relaxed) - live0;
    let allocs = ALLOCS.load(Ordering::Relaxed) - allocs0;
    let t1 = Instant::now();
    for i in 0..N {
        txn.lock(&cf, &key(i), LockMode::Exclusive, t).unwrap();
    }
    let relock_t = t1.elapsed();
    assert_eq!(txn.lock_count(), N as usize);
    let t2 = Instant::now();
    txn.rollback();
    let unlock_t = t2.elapsed();
    println!(
        "1M locks: lock {:?} ({:.0} ns/lock), re-lock {:?}, unlock_all {:?}, \
         {} allocations ({:.2}/lock), {:.0} live heap bytes/lock (12-byte keys)",
        lock_t,
        lock_t.as_nanos() as f64 / N as f64,
        relock_t,
        unlock_t,
        allocs,
        allocs as f64 / N as f64,
        live as f64 / N as f64
    );
    let live_after = LIVE.load(Ordering::Relaxed) - live0;
    println!(
        "heap still held after unlock_all: {:.1} bytes/lock",
        live_after as f64 / N as f64
    );
    assert!(
        live_after < (N as isize) * 4,
        "locks not freed: {live_after}"
    );
}
