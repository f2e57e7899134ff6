//! Background scheduling: the flush, sync and compaction threads' shared
//! state (flush requests, shutdown), the last background failure, and the
//! pause before a failed job is retried.
//!
//! The jobs themselves (flush in `database`, compaction in
//! `compaction::leveled`) run on [`DbInner`](super::database::DbInner); this
//! part only says when they run and what they last failed with.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Default)]
struct BgState {
    flush_requested: bool,
    shutdown: bool,
}

#[derive(Default)]
pub(crate) struct Background {
    state: Mutex<BgState>,
    cv: Condvar,
    /// Last failure of a background flush or compaction, until one succeeds
    /// again (stalled writers get it instead of waiting for ever).
    error: Mutex<Option<Error>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    /// Starts a background thread named `name` running `job` (`what`: the
    /// error's context if it cannot be started).
    pub(crate) fn spawn(
        &self,
        name: String,
        what: &'static str,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<()> {
        let t = std::thread::Builder::new()
            .name(name)
            .spawn(job)
            .map_err(|e| Error::io(what, e))?;
        self.threads.lock().push(t);
        Ok(())
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.state.lock().shutdown
    }

    /// Waits on the background condition variable up to `d`; false on shutdown.
    pub(crate) fn wait(&self, d: Duration) -> bool {
        let mut g = self.state.lock();
        if g.shutdown {
            return false;
        }
        self.cv.wait_for(&mut g, d);
        !g.shutdown
    }

    /// Wakes every background thread (new work may be there).
    pub(crate) fn notify(&self) {
        self.cv.notify_all();
    }

    /// Sleeps `d` (not cut short by flush requests, only by shutdown);
    /// false on shutdown.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.state.lock();
        while !g.shutdown {
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
        !g.shutdown
    }

    pub(crate) fn request_flush(&self) {
        self.state.lock().flush_requested = true;
        self.cv.notify_all();
    }

    /// The flush thread's wait: until a flush is requested (or, while a
    /// failed flush is retried, `retrying`), taking the request; false on
    /// shutdown.
    pub(crate) fn take_flush_request(&self, retrying: bool) -> bool {
        let mut g = self.state.lock();
        while !g.flush_requested && !g.shutdown && !retrying {
            self.cv.wait_for(&mut g, Duration::from_millis(500));
        }
        if g.shutdown {
            return false;
        }
        g.flush_requested = false;
        true
    }

    /// Records a failed background job (see `Db::background_error`); false
    /// if it is not one to record (the database is closing).
    pub(crate) fn note_error(&self, e: &Error) -> bool {
        if matches!(e, Error::Closed) {
            return false;
        }
        crate::metrics::BACKGROUND_ERRORS.inc();
        *self.error.lock() = Some(e.duplicate());
        true
    }

    pub(crate) fn clear_error(&self) {
        *self.error.lock() = None;
    }

    /// The last background failure, as text.
    pub(crate) fn error_text(&self) -> Option<String> {
        self.error.lock().as_ref().map(|e| e.to_string())
    }

    /// The last background failure if it was an I/O error (a full disk):
    /// writes stalled on background work fail with it.
    pub(crate) fn io_error(&self) -> Option<Error> {
        match self.error.lock().as_ref() {
            Some(e @ Error::Io { .. }) => Some(e.duplicate()),
            _ => None,
        }
    }

    /// Tells the threads to stop.
    pub(crate) fn shut_down(&self) {
        self.state.lock().shutdown = true;
        self.cv.notify_all();
    }

    /// Joins the threads (except the calling one: the last handle may be
    /// dropped on a background thread).
    pub(crate) fn join(&self) {
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock());
        let me = std::thread::current().id();
        for t in threads {
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}
