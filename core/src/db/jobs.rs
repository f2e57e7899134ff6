//! Background work: the flush, compaction and periodic-sync threads.

use super::database::DbInner;
use crate::compaction::pacer::next_backoff;
use crate::error::{Error, Result};
use crate::options::SyncMode;
use crate::version::levels::CfInner;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl DbInner {
    pub(super) fn start_threads(self: &Arc<Self>) -> Result<()> {
        let me = self.clone();
        self.bg
            .spawn("tidesdb-flush".into(), "spawn flush thread", move || {
                me.flush_thread()
            })?;
        let me = self.clone();
        self.bg
            .spawn("tidesdb-sync".into(), "spawn sync thread", move || {
                me.sync_thread()
            })?;
        for i in 0..self.opts.background_threads.max(1) {
            let me = self.clone();
            self.bg.spawn(
                format!("tidesdb-compact-{i}"),
                "spawn compaction thread",
                move || me.compaction_thread(),
            )?;
        }
        Ok(())
    }

    pub(super) fn flush_thread(self: Arc<Self>) {
        let mut backoff = Duration::ZERO;
        loop {
            if !self.bg.take_flush_request(!backoff.is_zero()) {
                return;
            }
            match self.flush_pending() {
                Ok(()) => {
                    backoff = Duration::ZERO;
                    self.bg.clear_error();
                }
                Err(e) => {
                    // Nothing is lost: the memtable stays (readable, its WAL
                    // kept) and is flushed again after a pause that grows
                    // while the failure lasts (a full disk: no busy loop).
                    self.note_bg_error(&e);
                    backoff = next_backoff(backoff);
                    if !self.bg.sleep(backoff) {
                        return;
                    }
                }
            }
        }
    }

    /// Records a failed background job (see `Db::background_error`);
    /// stalled writers wake up to see it.
    pub(crate) fn note_bg_error(&self, e: &Error) {
        if self.bg.note_error(e) {
            self.commit.notify_stall();
        }
    }

    pub(super) fn compaction_thread(self: Arc<Self>) {
        let mut backoff = Duration::ZERO;
        loop {
            let mut did = false;
            let mut failed = false;
            let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
            for cf in cfs {
                if self.bg.is_shutdown() || self.is_poisoned() {
                    break;
                }
                match self.compaction().maybe_compact(&cf) {
                    Ok(true) => did = true,
                    Ok(false) => {}
                    Err(e) => {
                        // Compaction failures lose nothing (the inputs stay,
                        // partial outputs are removed); retry after a pause
                        // that grows while they last (a full disk).
                        self.note_bg_error(&e);
                        failed = true;
                    }
                }
            }
            if failed {
                backoff = next_backoff(backoff);
                if !self.bg.sleep(backoff) {
                    return;
                }
                continue;
            }
            backoff = Duration::ZERO;
            if did {
                self.bg.clear_error();
            }
            if !did && !self.bg.wait(Duration::from_millis(200)) {
                return;
            }
            if self.bg.is_shutdown() {
                return;
            }
        }
    }

    pub(super) fn sync_thread(self: Arc<Self>) {
        loop {
            let mode = self.commit.sync_mode();
            let wait = match mode {
                SyncMode::Interval { millis } => Duration::from_millis(millis.max(1)),
                _ => Duration::from_millis(200),
            };
            if !self.bg.wait(wait) {
                return;
            }
            if let SyncMode::Interval { .. } = self.commit.sync_mode() {
                if self.sync_wal().is_err() {
                    self.poisoned.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}
