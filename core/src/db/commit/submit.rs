//! Submitting to the commit queue and running it: a committer queues its
//! request and, whenever no group is being written (and fewer than
//! `MAX_IN_FLIGHT` are unfinished), takes everything queued as the next group
//! and writes it (`group`), then waits for its own result.

use super::queue::{CfOps, CommitReq, DeferredPut, Queue, ReqKind, GROUP_OPS};
use crate::db::database::DbInner;
use crate::error::Result;
use crate::journal::batch::Op;
use crate::key::Kind;
use crate::version::levels::CfInner;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::Arc;

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
            wake: Condvar::new(),
        });
        let mut q = self.commit.queue.lock();
        let ticket = q.push(req.clone());
        self.run_queue_until(q, Some((ticket, &req)), 0)
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
            wake: Condvar::new(),
        });
        self.commit.queue.lock().push(req.clone());
        *pending = Some(DeferredPut { req });
        Ok(())
    }

    /// Waits until every request queued before the call (deferred puts
    /// included) is written and finished, writing groups as needed. For
    /// commit paths that bypass the queue (spilled write sets) and for close.
    pub(crate) fn drain_queue(&self) {
        let mut q = self.commit.queue.lock();
        let upto = q.next_ticket;
        q.drainers += 1;
        let mut q = self.run_queue_until_locked(q, None, upto).1;
        q.drainers -= 1;
    }

    /// Waits for the result of `ticket` (or, with `None`, until no request
    /// before ticket `upto` is open), writing a group whenever no one else
    /// is: a group is everything queued (bounded), so requests that arrive
    /// while a group is written form the next group, which is written while
    /// the previous one is being fsynced.
    fn run_queue_until<'a>(
        &'a self,
        q: MutexGuard<'a, Queue>,
        ticket: Option<(u64, &CommitReq)>,
        upto: u64,
    ) -> Result<u64> {
        self.run_queue_until_locked(q, ticket, upto).0
    }

    /// [`DbInner::run_queue_until`], handing the queue's lock back.
    fn run_queue_until_locked<'a>(
        &'a self,
        mut q: MutexGuard<'a, Queue>,
        ticket: Option<(u64, &CommitReq)>,
        upto: u64,
    ) -> (Result<u64>, MutexGuard<'a, Queue>) {
        let pipeline = &self.commit;
        loop {
            match ticket {
                Some((t, _)) => {
                    if let Some(r) = q.results.remove(&t) {
                        return (r, q);
                    }
                }
                None => {
                    if q.oldest_open() >= upto {
                        return (Ok(0), q);
                    }
                }
            }
            if !q.may_write() {
                match ticket {
                    Some((_, req)) => req.wake.wait(&mut q),
                    None => pipeline.queue_cv.wait(&mut q),
                }
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
            q.wake_next(&pipeline.queue_cv);
            drop(q);
            let results = self.finish_group(staged);
            q = pipeline.queue.lock();
            q.in_flight.remove(&first);
            for ((t, req), r) in group.iter().zip(results) {
                if !req.detached {
                    q.results.insert(*t, r);
                    req.wake.notify_one();
                }
            }
            q.wake_next(&pipeline.queue_cv);
        }
    }
}
