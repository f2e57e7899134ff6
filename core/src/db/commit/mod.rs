//! The commit pipeline: how commits reach the WAL, become durable and become
//! visible, in order.
//!
//! Owns: the commit queue (requests, their results, who writes the next
//! group), the WAL writer's state (current segment, the last sequence given
//! out), the list of closed segments, the fsync of groups (`SyncMode`, the
//! fsync count), and the visible sequence readers take snapshots at.
//!
//! A group goes through two stages. *Write* (one group at a time, under the
//! write lock, `DbInner::write_group` in `group`): checks, WAL append, memtable
//! inserts (invisible: above the visible sequence), prepared-state changes,
//! memtable rotation. *Durable* (`DbInner::finish_group`): the fsync that
//! covers the group (`CommitPipeline::sync_through`, one fsync at a time; a
//! group appended before an fsync started needs no fsync of its own), then in
//! group order (`CommitPipeline::in_turn`) the visible sequence moves to the
//! group's last sequence and the waiters get their results. While one group
//! is in its fsync, the next is written: group N+1's records reach the WAL
//! during group N's fsync, as InnoDB writes its log while the previous write
//! is being flushed. A failed fsync poisons the database; no later group is
//! made visible or acknowledged.
//!
//! May use: `journal` (the WAL writer), `options`, `error`; the checks and
//! inserts of the write stage are `DbInner`'s (`group`). Other modules read
//! the visible sequence and the fsync count through the methods below; the
//! write lock and the segment list are for `db/` only.

mod group;
mod queue;
mod submit;
#[cfg(test)]
mod tests;

pub use queue::DeferredPut;
pub(crate) use queue::{CfOps, ReqKind};

use crate::error::{Error, Result};
use crate::journal::wal::{SegmentSync, WalWriter};
use crate::options::SyncMode;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The WAL writer and the sequence/group counters, under the write lock: one
/// group is written at a time, and nothing else appends, rotates or gives
/// out sequences meanwhile.
/// A sealed WAL segment still on disk (until every sequence in it is flushed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClosedSegment {
    pub(in crate::db) number: u64,
    /// Highest sequence written to it (raised when a prepared transaction
    /// logged there commits later).
    pub(in crate::db) max_seq: u64,
    /// Its length once sealed (the seal cuts the zeros written ahead), kept
    /// so that the WAL-size check after each group needs no file metadata.
    pub(in crate::db) bytes: u64,
}

pub(crate) struct WriteState {
    pub(in crate::db) wal: Option<WalWriter>,
    /// Highest sequence written into the current segment.
    pub(in crate::db) seg_max_seq: u64,
    /// Highest sequence given out (visible once its group is durable).
    pub(in crate::db) last_seq: u64,
    /// Number of the last group given a turn (`CommitPipeline::in_turn`).
    last_group: u64,
}

pub(crate) struct CommitPipeline {
    queue: Mutex<queue::Queue>,
    /// `drain_queue` waits here (committers wait on their own request).
    queue_cv: Condvar,
    write: Mutex<WriteState>,
    /// Writers waiting for room (flush, compaction) or for the database to
    /// stop being writable.
    stall_cv: Condvar,
    visible_seq: AtomicU64,
    /// Closed WAL segments, oldest first.
    wal_segments: Mutex<Vec<ClosedSegment>>,
    /// Fsync handle of the segment being written (`None` once closed).
    current: Mutex<Option<SegmentSync>>,
    /// Last group whose WAL append completed (set under the write lock).
    appended_group: AtomicU64,
    /// Every group up to this one is durable. Held through an fsync, so
    /// fsyncs run one at a time.
    synced_group: Mutex<u64>,
    /// An fsync of a group failed: no later fsync is trusted.
    sync_failed: AtomicBool,
    /// Last group that finished its turn (made visible or failed).
    finished_group: Mutex<u64>,
    finished_cv: Condvar,
    wal_syncs: AtomicU64,
    sync_mode: Mutex<SyncMode>,
    #[cfg(test)]
    observer: Mutex<Option<tests::Observer>>,
}

impl CommitPipeline {
    pub(crate) fn new(wal: Option<WalWriter>, last_seq: u64, sync_mode: SyncMode) -> Self {
        let current = wal.as_ref().map(WalWriter::sync_handle);
        CommitPipeline {
            queue: Mutex::new(queue::Queue::default()),
            queue_cv: Condvar::new(),
            write: Mutex::new(WriteState {
                wal,
                seg_max_seq: 0,
                last_seq,
                last_group: 0,
            }),
            stall_cv: Condvar::new(),
            visible_seq: AtomicU64::new(last_seq),
            wal_segments: Mutex::new(Vec::new()),
            current: Mutex::new(current),
            appended_group: AtomicU64::new(0),
            synced_group: Mutex::new(0),
            sync_failed: AtomicBool::new(false),
            finished_group: Mutex::new(0),
            finished_cv: Condvar::new(),
            wal_syncs: AtomicU64::new(0),
            sync_mode: Mutex::new(sync_mode),
            #[cfg(test)]
            observer: Mutex::new(None),
        }
    }

    /// Sequence of the latest commit readers may see.
    pub(crate) fn visible_seq(&self) -> u64 {
        self.visible_seq.load(Ordering::Acquire)
    }

    /// The visible sequence itself, for snapshots taken against it.
    pub(crate) fn visible_seq_cell(&self) -> &AtomicU64 {
        &self.visible_seq
    }

    pub(crate) fn sync_mode(&self) -> SyncMode {
        *self.sync_mode.lock()
    }

    pub(crate) fn set_sync_mode(&self, mode: SyncMode) {
        *self.sync_mode.lock() = mode;
    }

    /// Number of fsyncs issued by commit groups.
    pub(crate) fn wal_sync_count(&self) -> u64 {
        self.wal_syncs.load(Ordering::Relaxed)
    }

    /// The write lock, with every group given a turn before it finished
    /// (made visible or failed): for the paths that write without the queue
    /// (spilled commits and prepares, checkpoints, close), so that nothing
    /// they publish overtakes a group still in its fsync.
    pub(in crate::db) fn lock_settled(&self) -> MutexGuard<'_, WriteState> {
        let w = self.write.lock();
        let mut f = self.finished_group.lock();
        while *f < w.last_group {
            self.finished_cv.wait(&mut f);
        }
        drop(f);
        w
    }

    /// The write lock (rotation, WAL purge: nothing that publishes).
    pub(in crate::db) fn lock_write(&self) -> MutexGuard<'_, WriteState> {
        self.write.lock()
    }

    /// Publishes `seq` from a path holding the settled write lock.
    pub(in crate::db) fn publish_settled(&self, w: &mut WriteState, seq: u64) {
        w.last_seq = seq;
        w.seg_max_seq = seq;
        self.visible_seq.store(seq, Ordering::Release);
    }

    /// Waits on the stall condition with the write lock released meanwhile.
    pub(in crate::db) fn wait_stall(&self, w: &mut MutexGuard<'_, WriteState>, d: Duration) {
        self.stall_cv.wait_for(w, d);
    }

    pub(crate) fn notify_stall(&self) {
        self.stall_cv.notify_all();
    }

    /// Closed segments, oldest first.
    pub(in crate::db) fn closed_segments(&self) -> MutexGuard<'_, Vec<ClosedSegment>> {
        self.wal_segments.lock()
    }

    /// Replaces the segment being written (under the write lock); the old
    /// one, sealed by the caller, joins the closed segments.
    pub(in crate::db) fn switch_segment(&self, w: &mut WriteState, next: WalWriter) {
        *self.current.lock() = Some(next.sync_handle());
        if let Some(old) = w.wal.replace(next) {
            self.wal_segments.lock().push(ClosedSegment {
                number: old.number,
                max_seq: w.seg_max_seq,
                bytes: old.size,
            });
        }
    }

    /// Closes the WAL (close): seals the segment being written.
    pub(in crate::db) fn close_wal(&self, w: &mut WriteState) -> Result<()> {
        let r = match w.wal.take() {
            Some(mut wal) => wal.seal(),
            None => Ok(()),
        };
        *self.current.lock() = None;
        r
    }

    /// Fsyncs the segment being written (`SyncMode::Interval`, `Db::sync_wal`).
    pub(in crate::db) fn sync_current(&self) -> Result<()> {
        let cur = self.current.lock().clone();
        match cur {
            Some(c) => c.sync(),
            None => Ok(()),
        }
    }

    /// Waits until the visible sequence reaches `seq` (a flush of a memtable
    /// whose last groups are still in their fsync), or fails when the group
    /// that would publish it failed.
    pub(in crate::db) fn wait_visible(&self, seq: u64, poisoned: &dyn Fn() -> bool) -> Result<()> {
        let mut f = self.finished_group.lock();
        while self.visible_seq() < seq {
            if poisoned() || self.sync_failed.load(Ordering::Acquire) {
                return Err(Error::Poisoned);
            }
            self.finished_cv.wait_for(&mut f, Duration::from_millis(10));
        }
        Ok(())
    }

    /// Gives the group being written (under the write lock) its turn number.
    fn next_group(&self, w: &mut WriteState) -> u64 {
        w.last_group += 1;
        w.last_group
    }

    /// Records that group `g` is in the WAL (under the write lock, after the
    /// append).
    fn appended(&self, g: u64) {
        self.appended_group.store(g, Ordering::SeqCst);
    }

    /// Makes group `g` durable: returns once an fsync that started after its
    /// append has succeeded. Fsyncs run one at a time; one started after
    /// later groups were appended covers them too (they return at once).
    fn sync_through(&self, g: u64) -> Result<()> {
        let mut synced = self.synced_group.lock();
        if self.sync_failed.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        if *synced >= g {
            return Ok(());
        }
        // Read together under `current`'s lock: a segment switch (which
        // seals, i.e. fsyncs, the old segment) takes it too, so every group
        // up to `covers` is in this segment or in a sealed one.
        let (handle, covers) = {
            let cur = self.current.lock();
            (cur.clone(), self.appended_group.load(Ordering::SeqCst))
        };
        let Some(handle) = handle else {
            return Err(Error::Closed);
        };
        #[cfg(test)]
        self.observe(tests::Event::SyncStart { covers })?;
        let r = handle.sync();
        #[cfg(test)]
        let r = r.and_then(|()| self.observe(tests::Event::SyncEnd { covers }));
        if let Err(e) = r {
            self.sync_failed.store(true, Ordering::Release);
            return Err(e);
        }
        self.wal_syncs.fetch_add(1, Ordering::Relaxed);
        *synced = covers.max(g);
        Ok(())
    }

    /// Runs `f` in group `g`'s turn: after every earlier group's turn, before
    /// any later one's. `f` returns the sequence to publish, if any.
    fn in_turn(&self, g: u64, f: impl FnOnce() -> Option<u64>) {
        let mut done = self.finished_group.lock();
        while *done + 1 < g {
            self.finished_cv.wait(&mut done);
        }
        if let Some(seq) = f() {
            #[cfg(test)]
            let _ = self.observe(tests::Event::Publish { group: g, seq });
            self.visible_seq.fetch_max(seq, Ordering::AcqRel);
        }
        *done = g;
        self.finished_cv.notify_all();
    }
}
