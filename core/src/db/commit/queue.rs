//! The commit queue: requests wait here for a group to take them; whoever
//! waits while no group is being written writes the next one.

use crate::db::database::{CfOps, DbInner};
use crate::error::Result;
use crate::journal::batch::Op;
use crate::key::Kind;
use crate::version::levels::CfInner;
use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// Ops per group at most (a group is everything queued, up to this).
const GROUP_OPS: usize = 100_000;

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
}

/// A blind put queued by [`crate::Db::put_deferred`]; while no commit group
/// has taken it, a later `put_deferred` of the same key rewrites it in place.
pub struct DeferredPut {
    req: Arc<CommitReq>,
}

/// A group taken from the queue: (ticket, request).
pub(super) type Group = [(u64, Arc<CommitReq>)];

#[derive(Default)]
pub(super) struct Queue {
    reqs: VecDeque<(u64, Arc<CommitReq>)>,
    results: HashMap<u64, Result<u64>>,
    next_ticket: u64,
    /// A group is in its write stage; any waiter writes the next one once
    /// this is false.
    writing: bool,
    /// First tickets of the groups written and not finished (in their fsync
    /// or waiting for their turn).
    in_flight: BTreeSet<u64>,
}

impl Queue {
    /// Oldest ticket not finished (queued or in flight).
    fn oldest_open(&self) -> u64 {
        let queued = self.reqs.front().map_or(u64::MAX, |f| f.0);
        let flying = self.in_flight.first().copied().unwrap_or(u64::MAX);
        queued.min(flying)
    }

    fn push(&mut self, req: Arc<CommitReq>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.reqs.push_back((ticket, req));
        ticket
    }
}

impl DbInner {
    /// Queues a request for a commit group; returns its sequence (0 for
    /// prepare / rollback records).
    pub(crate) fn submit(
        &self,
        ops: CfOps,
        check_conflicts: bool,
        sync: bool,
        kind: ReqKind,
        owner: u64,
    ) -> Result<u64> {
        self.check_writable()?;
        let req = Arc::new(CommitReq {
            ops: Mutex::new(ops),
            check_conflicts,
            sync,
            kind,
            owner,
            detached: false,
        });
        let mut q = self.commit.queue.lock();
        let ticket = q.push(req);
        self.run_queue_until(q, Some(ticket), 0)
    }

    /// Queues a blind put (no conflict check, no fsync of its own) and returns
    /// at once: the next commit group writes it, ahead of every commit
    /// submitted after this returns (so it is durable no later than they are).
    /// While `pending` holds a put of the same key no group has taken yet,
    /// that put's value is replaced instead (one record per group at most).
    pub(crate) fn put_deferred(
        &self,
        cf: &Arc<CfInner>,
        key: &[u8],
        value: &[u8],
        pending: &mut Option<DeferredPut>,
    ) -> Result<()> {
        self.check_writable()?;
        if let Some(p) = pending.as_ref() {
            // A group takes the ops (leaving them empty) under this lock.
            let mut ops = p.req.ops.lock();
            if let Some((c, op, _)) = ops.first_mut() {
                if Arc::ptr_eq(c, cf) && op.key == key {
                    op.value = Arc::from(value);
                    op.crc = None;
                    return Ok(());
                }
            }
        }
        let op = Op {
            cf: cf.id,
            kind: Kind::Put,
            key: key.to_vec(),
            value: Arc::from(value),
            crc: None,
        };
        let req = Arc::new(CommitReq {
            ops: Mutex::new(vec![(cf.clone(), op, 0)]),
            check_conflicts: false,
            sync: false,
            kind: ReqKind::Commit,
            owner: 0,
            detached: true,
        });
        self.commit.queue.lock().push(req.clone());
        *pending = Some(DeferredPut { req });
        Ok(())
    }

    /// Waits until every request queued before the call (deferred puts
    /// included) is written and finished, writing groups as needed. For
    /// commit paths that bypass the queue (spilled write sets) and for close.
    pub(crate) fn drain_queue(&self) {
        let q = self.commit.queue.lock();
        let upto = q.next_ticket;
        let _ = self.run_queue_until(q, None, upto);
    }

    /// Waits for the result of `ticket` (or, with `None`, until no request
    /// before ticket `upto` is open), writing a group whenever no one else
    /// is: a group is everything queued (bounded), so requests that arrive
    /// while a group is written form the next group, which is written while
    /// the previous one is being fsynced.
    fn run_queue_until<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        ticket: Option<u64>,
        upto: u64,
    ) -> Result<u64> {
        let pipeline = &self.commit;
        loop {
            match ticket {
                Some(t) => {
                    if let Some(r) = q.results.remove(&t) {
                        return r;
                    }
                }
                None => {
                    if q.oldest_open() >= upto {
                        return Ok(0);
                    }
                }
            }
            if q.writing || q.reqs.is_empty() {
                pipeline.queue_cv.wait(&mut q);
                continue;
            }
            q.writing = true;
            let mut group = Vec::new();
            let mut ops = 0usize;
            while let Some((t, r)) = q.reqs.pop_front() {
                ops += r.ops.lock().len();
                group.push((t, r));
                if ops > GROUP_OPS {
                    break;
                }
            }
            let first = group[0].0;
            q.in_flight.insert(first);
            drop(q);
            let staged = self.write_group(&group);
            q = pipeline.queue.lock();
            q.writing = false;
            pipeline.queue_cv.notify_all();
            drop(q);
            let results = self.finish_group(staged);
            q = pipeline.queue.lock();
            q.in_flight.remove(&first);
            for ((t, req), r) in group.iter().zip(results) {
                if !req.detached {
                    q.results.insert(*t, r);
                }
            }
            pipeline.queue_cv.notify_all();
        }
    }
}
