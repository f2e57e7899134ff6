//! The commit queue: requests wait here for a group to take them; whoever
//! waits while no group is being written writes the next one (`submit`).

use crate::error::Result;
use crate::journal::batch::Op;
use crate::version::levels::CfInner;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// (column family, op, conflict-check sequence: a committed version of the
/// key newer than this is a conflict).
pub(crate) type CfOps = Vec<(Arc<CfInner>, Op, u64)>;

/// Ops per group at most (a group is everything queued, up to this).
pub(super) const GROUP_OPS: usize = 100_000;

/// Groups written and not finished at most: one in its fsync and one
/// written behind it. Requests that arrive meanwhile gather in the queue and
/// are written as one group when the fsync ends (writing each as it came
/// would make a group, a WAL write and a memtable round per commit).
const MAX_IN_FLIGHT: usize = 2;

/// What a commit-queue request does.
pub(crate) enum ReqKind {
    /// Ordinary commit: ops get a new sequence, become visible.
    Commit,
    /// 2PC prepare: conflict check, durable prepare record, no visibility.
    Prepare(Vec<u8>),
    /// Commit of a prepared xid (no conflict check: done at prepare).
    CommitPrepared(Vec<u8>),
    /// Rollback of a prepared xid.
    RollbackPrepared(Vec<u8>),
}

pub(crate) struct CommitReq {
    pub ops: Mutex<CfOps>,
    pub check_conflicts: bool,
    /// Wait for an fsync (in `SyncMode::Full`).
    pub sync: bool,
    pub kind: ReqKind,
    /// Lock owner (transaction id) of a prepare.
    pub owner: u64,
    /// Nobody waits for the result (a [`crate::Db::put_deferred`]).
    pub detached: bool,
    /// Its waiter sleeps here (with the queue's mutex): woken for its result
    /// or to write the next group, so a state change wakes one thread, not
    /// every committer.
    pub(super) wake: Condvar,
}

/// A blind put queued by [`crate::Db::put_deferred`]; while no commit group
/// has taken it, a later `put_deferred` of the same key rewrites it in place.
pub struct DeferredPut {
    pub(super) req: Arc<CommitReq>,
}

/// A group taken from the queue: (ticket, request).
pub(super) type Group = [(u64, Arc<CommitReq>)];

#[derive(Default)]
pub(super) struct Queue {
    pub(super) reqs: VecDeque<(u64, Arc<CommitReq>)>,
    pub(super) results: HashMap<u64, Result<u64>>,
    pub(super) next_ticket: u64,
    /// A group is in its write stage; any waiter writes the next one once
    /// this is false.
    pub(super) writing: bool,
    /// First tickets of the groups written and not finished (in their fsync
    /// or waiting for their turn).
    pub(super) in_flight: BTreeSet<u64>,
    /// Threads in `drain_queue` (they wait on the pipeline's `queue_cv`).
    pub(super) drainers: usize,
}

impl Queue {
    /// Oldest ticket not finished (queued or in flight).
    pub(super) fn oldest_open(&self) -> u64 {
        let queued = self.reqs.front().map_or(u64::MAX, |f| f.0);
        let flying = self.in_flight.first().copied().unwrap_or(u64::MAX);
        queued.min(flying)
    }

    /// A group may be written now.
    pub(super) fn may_write(&self) -> bool {
        !self.writing && !self.reqs.is_empty() && self.in_flight.len() < MAX_IN_FLIGHT
    }

    /// After a change of state: wakes the waiter of the first queued request
    /// if it may write the next group now, and the drainers.
    pub(super) fn wake_next(&self, drain_cv: &Condvar) {
        if self.may_write() {
            if let Some((_, r)) = self.reqs.iter().find(|(_, r)| !r.detached) {
                r.wake.notify_one();
            }
        }
        if self.drainers > 0 {
            drain_cv.notify_all();
        }
    }

    pub(super) fn push(&mut self, req: Arc<CommitReq>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.reqs.push_back((ticket, req));
        ticket
    }
}
