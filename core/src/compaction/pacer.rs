//! Compaction pacing: a background compaction is rate limited while reads
//! wait on the disk and no write depends on it, and runs at full speed
//! otherwise.
//!
//! A compaction that runs while nothing is being written (the debt a bulk
//! load left behind, merged at the next open) shares the disk with the reads
//! that follow. Unpaced, it reads and writes as fast as the disk allows, and
//! every read that misses the caches queues behind it (core-bench `readcold`
//! right after `fillrandom`: 0.69-0.90x fjall, against 1.0-1.16x on a
//! compacted database). Pacing is RocksDB's rate limiter idea, with the debt
//! and the readers deciding whether it applies: a compaction job calls
//! [`Pacer::pace`] with the bytes it merged, and is held to `rate` bytes per
//! second only while all of these hold:
//!
//! * **reads wait on the disk:** a read or scan read a table block that was
//!   not in the OS page cache within the last [`READ_WINDOW`] (a block read
//!   first tries `preadv2(RWF_NOWAIT)`, which refuses to wait for I/O; where
//!   the file system does not support it, a read taking [`crate::fsutil::DISK_READ`] or
//!   more counts). Reads served by the page cache do not compete with
//!   compaction for the disk, so with only such readers, or none, it runs
//!   unpaced. (A timing threshold alone took page cache reads of a thread
//!   preempted on a busy machine for disk reads, and paced the compaction
//!   during page-cache-bound workloads: core-bench `scan` read 8 sources
//!   instead of 2 because the debt lived on);
//! * **the debt is small:** the family has fewer than [`L0_PACE_MAX`] L0
//!   files (well below `L0_SLOWDOWN` = 12, where writers are slowed);
//! * **no write waits:** no memtable flush finished, no writer was slowed or
//!   stalled, and no manual compaction asked for the family's compaction
//!   lock, within the last [`WRITE_QUIET`] (writes coming in: compaction
//!   keeps up with them as if unpaced, so write throughput is unchanged).
//!
//! The condition is checked at every call and during every wait, so a job
//! speeds up as soon as a write needs it, and L0 never grows toward the stall
//! threshold because of pacing: from `L0_PACE_MAX` files on, compaction runs
//! exactly as it would without it. Manual compactions (`compact_range`,
//! `OPTIMIZE`, value log GC on request) and flushes are never paced.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Default pace of compaction while it is paced (bytes merged per second:
/// each byte is read once and written about once): 0, pacing off. A paced
/// compaction leaves L0 files in place for longer, and every point read
/// checks them: core-bench `readhot` after `fillrandom` (its warm-up reads
/// the disk, so the merge ran paced) fell from 369k-385k to 253k-374k ops/s
/// at 24 MiB/s, and unpaced it stays at 380k (session 7). Pacing pays only
/// while reads keep going to the disk; `Db::set_compaction_rate` turns it on.
pub const DEFAULT_COMPACTION_RATE: u64 = 0;

/// L0 files from which compaction is never paced (writers are slowed at
/// `L0_SLOWDOWN` = 12 and stall at `L0_STOP` = 20).
pub(crate) const L0_PACE_MAX: usize = 8;

/// A flush or a write stall this recent means writes depend on compaction.
pub(crate) const WRITE_QUIET: Duration = Duration::from_secs(5);

/// A read that waited on the disk this recently makes compaction paced.
pub(crate) const READ_WINDOW: Duration = Duration::from_secs(1);

/// Longest single sleep of a paced job: the condition is re-checked at least
/// this often, so a job speeds up soon after writes resume.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// Most bytes a job may merge ahead of its pace (a burst after a pause).
const BURST: f64 = (1 << 20) as f64;

/// What a paced job looks at, read at each check.
pub(crate) struct Probe<'a> {
    /// L0 files of the job's family now.
    pub l0_files: &'a dyn Fn() -> usize,
    /// Table block reads of readers that waited on the disk (a counter).
    pub disk_reads: &'a dyn Fn() -> u64,
    /// The database is closing.
    pub stop: &'a dyn Fn() -> bool,
}

pub(crate) struct Pacer {
    /// Bytes per second while paced; 0 = never paced.
    rate: AtomicU64,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last `urge` (`u64::MAX`: none).
    last_urge: AtomicU64,
    /// The disk read counter as last seen, and when it last moved
    /// (milliseconds since `epoch`, `u64::MAX`: never).
    reads_seen: AtomicU64,
    reads_moved: AtomicU64,
    /// Token bucket: (bytes allowed now, when it was last refilled).
    bucket: Mutex<(f64, Instant)>,
    /// Microseconds compaction jobs slept for the pace (statistics).
    slept_us: AtomicU64,
    /// How long an `urge` lifts the pace ([`WRITE_QUIET`]; tests set 0).
    quiet_ms: AtomicU64,
    /// Tests: act as if reads always waited on the disk.
    #[cfg(test)]
    force_readers: std::sync::atomic::AtomicBool,
}

impl Pacer {
    pub(crate) fn new(rate: u64) -> Pacer {
        let now = Instant::now();
        Pacer {
            rate: AtomicU64::new(rate),
            epoch: now,
            last_urge: AtomicU64::new(u64::MAX),
            reads_seen: AtomicU64::new(0),
            reads_moved: AtomicU64::new(u64::MAX),
            bucket: Mutex::new((BURST, now)),
            slept_us: AtomicU64::new(0),
            quiet_ms: AtomicU64::new(WRITE_QUIET.as_millis() as u64),
            #[cfg(test)]
            force_readers: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn set_rate(&self, bytes_per_sec: u64) {
        self.rate.store(bytes_per_sec, Ordering::Relaxed);
    }

    pub(crate) fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    pub(crate) fn slept_ms(&self) -> u64 {
        self.slept_us.load(Ordering::Relaxed) / 1000
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// Something waits for compaction: a memtable flush just added an L0
    /// file, a writer was slowed or stalled by L0 / the memtables, or a
    /// manual compaction waits for the family's compaction lock. Compaction
    /// runs unpaced for the next [`WRITE_QUIET`].
    pub(crate) fn urge(&self) {
        self.last_urge.store(self.now_ms(), Ordering::Relaxed);
    }

    fn writes_waiting(&self, now: u64) -> bool {
        let last = self.last_urge.load(Ordering::Relaxed);
        last != u64::MAX && now.saturating_sub(last) < self.quiet_ms.load(Ordering::Relaxed)
    }

    fn readers_waiting(&self, now: u64, disk_reads: u64) -> bool {
        #[cfg(test)]
        if self.force_readers.load(Ordering::Relaxed) {
            return true;
        }
        if self.reads_seen.swap(disk_reads, Ordering::Relaxed) != disk_reads {
            self.reads_moved.store(now, Ordering::Relaxed);
            return true;
        }
        let moved = self.reads_moved.load(Ordering::Relaxed);
        moved != u64::MAX && now.saturating_sub(moved) < READ_WINDOW.as_millis() as u64
    }

    #[cfg(test)]
    pub(crate) fn set_quiet(&self, d: Duration) {
        self.quiet_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }

    #[cfg(test)]
    pub(crate) fn set_force_readers(&self, on: bool) {
        self.force_readers.store(on, Ordering::Relaxed);
    }

    /// Whether a background compaction is held to the rate now.
    pub(crate) fn paced(&self, p: &Probe<'_>) -> bool {
        if self.rate() == 0 || (p.l0_files)() >= L0_PACE_MAX {
            return false;
        }
        let now = self.now_ms();
        !self.writes_waiting(now) && self.readers_waiting(now, (p.disk_reads)())
    }

    /// Accounts `bytes` merged by a background compaction and sleeps as long
    /// as the pace requires. Returns the time slept.
    pub(crate) fn pace(&self, bytes: u64, p: &Probe<'_>) -> Duration {
        let mut slept = Duration::ZERO;
        loop {
            let rate = self.rate();
            let paced = self.paced(p);
            let mut b = self.bucket.lock();
            let now = Instant::now();
            if !paced {
                // Unpaced work does not build up credit or debt.
                *b = (BURST, now);
                return slept;
            }
            let refill = now.duration_since(b.1).as_secs_f64() * rate as f64;
            b.0 = (b.0 + refill).min(BURST);
            b.1 = now;
            if b.0 >= 0.0 {
                b.0 -= bytes as f64;
                return slept;
            }
            // In debt: wait until the bucket is back to zero (in steps, so
            // a change of condition is seen), then take the bytes.
            let wait = Duration::from_secs_f64(-b.0 / rate as f64).min(MAX_SLEEP);
            drop(b);
            if (p.stop)() {
                return slept;
            }
            std::thread::sleep(wait);
            slept += wait;
            self.slept_us
                .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
        }
    }
}

/// Pause before retrying a failed background job: 100 ms, doubling, at most 5 s.
pub(crate) fn next_backoff(prev: Duration) -> Duration {
    (prev * 2).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::compaction::leveled::L0_STOP;
    use crate::{CfOptions, Db, DbOptions, Isolation, SyncMode};

    /// Sustained writes (about 1.2 MB/s into 64 KiB memtables: a flush every
    /// 50 ms) against a compaction paced at 128 KiB/s, with flushes and
    /// stalls not lifting the pace and readers counted as waiting on the disk
    /// all along, so that only the L0 limit lifts it: L0 goes up to that
    /// limit, never to the slowdown (let alone the stall) threshold, and
    /// every write finishes. (The same writes unpaced peak at 4 L0 files.)
    #[test]
    fn sustained_writes_under_a_slow_pace_never_stall() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            DbOptions {
                sync_mode: SyncMode::None,
                write_buffer_size: 64 << 10,
                ..DbOptions::default()
            },
        )
        .unwrap();
        db.set_compaction_rate(128 << 10);
        db.inner().pacer().set_quiet(Duration::ZERO);
        db.inner().pacer().set_force_readers(true);
        let cf = db.create_cf("p", CfOptions::default()).unwrap();
        let cfi = db.inner().find_cf("p").unwrap();
        let n = 30_000u64;
        let key = |i: u64| format!("{:012}", i.wrapping_mul(2_654_435_761) % n).into_bytes();
        let t0 = Instant::now();
        let mut max_l0 = 0;
        for start in (0..n).step_by(50) {
            let mut t = db.begin(Isolation::ReadCommitted);
            for i in start..start + 50 {
                t.put(&cf, &key(i), &[b'v'; 100]).unwrap();
            }
            t.commit().unwrap();
            max_l0 = max_l0.max(cfi.current().levels.levels[0].len());
            assert!(t0.elapsed() < Duration::from_secs(300), "writes stuck");
            std::thread::sleep(Duration::from_millis(5));
        }
        let paced = db.metrics().compaction_paced_millis;
        eprintln!("max L0 {max_l0}, paced {paced} ms, {:?}", t0.elapsed());
        assert!(paced > 0, "never paced");
        // Writers never stalled. Slowed writers (L0_SLOWDOWN on) are allowed:
        // when other work holds the cores even an unpaced compaction falls
        // that far behind, so the bound says nothing about pacing. That
        // pacing stops from L0_PACE_MAX files on is checked by
        // `paced_only_while_readers_wait_and_nothing_else_does`.
        assert!(max_l0 < L0_STOP, "L0 reached {max_l0}");
        let mut r = db.begin(Isolation::RepeatableRead);
        for i in (0..n).step_by(97) {
            assert_eq!(r.get(&cf, &key(i)).unwrap(), Some(vec![b'v'; 100]));
        }
        drop(r);
        db.close().unwrap();
    }

    fn probe<'a>(l0: &'a dyn Fn() -> usize, reads: &'a dyn Fn() -> u64) -> Probe<'a> {
        Probe {
            l0_files: l0,
            disk_reads: reads,
            stop: &|| false,
        }
    }

    #[test]
    fn paced_only_while_readers_wait_and_nothing_else_does() {
        let p = Pacer::new(1 << 20);
        let reads = std::sync::atomic::AtomicU64::new(0);
        let r = || reads.load(Ordering::Relaxed);
        // No reader has waited on the disk yet: unpaced.
        assert!(!p.paced(&probe(&|| 0, &r)));
        reads.store(3, Ordering::Relaxed);
        assert!(p.paced(&probe(&|| 0, &r)));
        // Still within the window without new disk reads.
        assert!(p.paced(&probe(&|| L0_PACE_MAX - 1, &r)));
        assert!(!p.paced(&probe(&|| L0_PACE_MAX, &r)));
        p.urge();
        assert!(!p.paced(&probe(&|| 0, &r)));
        p.set_quiet(Duration::ZERO);
        assert!(p.paced(&probe(&|| 0, &r)));
        p.set_rate(0);
        assert!(!p.paced(&probe(&|| 0, &r)));
    }

    #[test]
    fn pace_holds_to_the_rate() {
        // 1 MiB/s, 3 MiB merged in 64 KiB steps: at least 2 s (the first
        // MiB is the burst allowance).
        let p = Pacer::new(1 << 20);
        p.set_force_readers(true);
        let t = Instant::now();
        let mut slept = Duration::ZERO;
        for _ in 0..48 {
            slept += p.pace(64 << 10, &probe(&|| 0, &|| 0));
        }
        let el = t.elapsed();
        assert!(el >= Duration::from_millis(1900), "{el:?}");
        assert!(el < Duration::from_secs(20), "{el:?}");
        // Sleeps may overrun on a busy machine (then fewer are needed).
        assert!(slept >= Duration::from_millis(500), "{slept:?}");
        assert!(p.slept_ms() >= 500);
        // Unpaced (L0 at the limit): no wait at all.
        let t = Instant::now();
        for _ in 0..48 {
            let d = p.pace(64 << 10, &probe(&|| L0_PACE_MAX, &|| 0));
            assert_eq!(d, Duration::ZERO);
        }
        assert!(t.elapsed() < Duration::from_millis(200));
    }

    #[test]
    fn a_waiting_job_speeds_up_when_writes_resume() {
        let p = std::sync::Arc::new(Pacer::new(64 << 10));
        p.set_force_readers(true);
        // Deep in debt: 10 MiB at 64 KiB/s would take 160 s.
        p.pace(10 << 20, &probe(&|| 0, &|| 0));
        let q = p.clone();
        let h = std::thread::spawn(move || {
            let t = Instant::now();
            q.pace(64 << 10, &probe(&|| 0, &|| 0));
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        p.urge();
        let waited = h.join().unwrap();
        assert!(waited < Duration::from_secs(2), "{waited:?}");
    }
}
