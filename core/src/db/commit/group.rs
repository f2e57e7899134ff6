//! The two stages of a commit group: writing it (checks, WAL append,
//! memtable inserts, prepared state, rotation; one group at a time under the
//! write lock) and finishing it (the fsync that covers it, then visibility
//! and results in group order). See the pipeline's description in `mod.rs`.

use super::queue::CfOps;
use super::queue::{CommitReq, Group, ReqKind};
use crate::db::database::{DbInner, LockKey, MAX_IMMS};
use crate::db::prepared::PreparedEntry;
use crate::error::{Error, Result};
use crate::journal::batch::{self, Op};
use crate::journal::wal;
use crate::options::SyncMode;
use crate::version::levels::CfInner;
use parking_lot::MutexGuard;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::WriteState;

/// Ops of one column family the group writer warms and then inserts
/// together (`Memtable::warm_inserts`).
const WARM_RUN: usize = 64;

/// A written group waiting to be finished.
pub(super) struct Staged {
    /// Its turn (`CommitPipeline::in_turn`).
    group: u64,
    results: Vec<Result<u64>>,
    /// Indices of the requests written to the WAL (they fail if the fsync does).
    accepted: Vec<usize>,
    /// Acknowledged only after an fsync.
    sync: bool,
    /// The sequence that becomes visible once the group is durable.
    publish: Option<u64>,
}

impl DbInner {
    /// Commits `ops` atomically; returns the commit sequence (group commit,
    /// see `commit/mod.rs`).
    pub(crate) fn commit_ops(&self, ops: CfOps, check_conflicts: bool, sync: bool) -> Result<u64> {
        self.submit(ops, check_conflicts, sync, ReqKind::Commit, 0)
    }

    /// Writes one commit group (stage one, under the write lock): waits for
    /// room in the touched column families, checks and frames every request,
    /// appends the frames as one WAL write (no fsync: `finish_group`),
    /// inserts the accepted ops into the memtables above the visible
    /// sequence, settles prepared transactions and rotates memtables that
    /// are full.
    pub(super) fn write_group(&self, group: &Group) -> Staged {
        let mut w = self.commit.write.lock();
        // Room first, the turn after: waiting for room releases the write
        // lock, and `lock_settled` (a checkpoint, a spilled commit) may take
        // it then and wait, lock held, for every group with a turn to finish.
        let room = self
            .check_writable()
            .and_then(|()| self.wait_for_write_room(&mut w, group));
        let turn = self.commit.next_group(&mut w);
        let mut staged = Staged {
            group: turn,
            results: Vec::new(),
            accepted: Vec::new(),
            sync: false,
            publish: None,
        };
        if let Err(e) = room {
            staged.results = group.iter().map(|_| Err(e.duplicate())).collect();
            return staged;
        }
        let base_seq = w.last_seq;
        let mut plan = self.plan_group(group, base_seq);
        if plan.accepted.is_empty() {
            staged.results = plan.results;
            return staged;
        }
        let sync = self.commit.sync_mode() == SyncMode::Full
            && plan.accepted.iter().any(|(i, _, _)| group[*i].1.sync);
        let logged = match self.append_group(&mut w, &plan.framed, sync) {
            Ok(logged) => logged,
            Err(e) => {
                for (i, _, _) in &plan.accepted {
                    plan.results[*i] = Err(e.duplicate());
                }
                staged.results = plan.results;
                return staged;
            }
        };
        self.commit.appended(turn);
        staged.accepted = plan.accepted.iter().map(|(i, _, _)| *i).collect();
        staged.sync = sync;
        let touched = insert_into_memtables(&mut plan.accepted, &logged);
        let cur_seg = w.wal.as_ref().map_or(0, |x| x.number);
        self.settle_prepared(&plan.resolved, plan.new_prepared, cur_seg);
        if plan.next_seq > base_seq {
            w.last_seq = plan.next_seq;
            w.seg_max_seq = plan.next_seq;
            staged.publish = Some(plan.next_seq);
        }
        for cf in touched {
            if cf.current().mem.size() >= self.opts.write_buffer_size {
                // Data is in the WAL already (and the rotation seals, i.e.
                // fsyncs, its segment). A rotation that could not create the
                // next segment (no space) is tried again at the next commit;
                // a failed fsync poisoned in `new_segment`.
                let _ = self.rotate(&mut w, &cf);
            }
        }
        self.maybe_rotate_for_wal_size(&mut w);
        staged.results = plan.results;
        staged
    }

    /// Finishes a written group (stage two, without the write lock): the
    /// fsync that covers it (`SyncMode::Full`), then in group order its
    /// sequence becomes visible. A failed fsync poisons the database: this
    /// group and every later one fail and nothing more becomes visible.
    pub(super) fn finish_group(&self, staged: Staged) -> Vec<Result<u64>> {
        let Staged {
            group,
            mut results,
            accepted,
            sync,
            publish,
        } = staged;
        let mut failure = None;
        if sync {
            if let Err(e) = self.commit.sync_through(group) {
                self.poison();
                failure = Some(e);
            }
        }
        self.commit.in_turn(group, || {
            if accepted.is_empty() {
                return None;
            }
            if failure.is_none() && self.is_poisoned() {
                failure = Some(Error::Poisoned);
            }
            match failure {
                Some(_) => None,
                None => publish,
            }
        });
        if let Some(e) = failure {
            for i in accepted {
                results[i] = Err(e.duplicate());
            }
        }
        results
    }

    /// Stalls while a column family the group touches has too many unflushed
    /// memtables or L0 files, and slows down briefly near the L0 limit. Fails
    /// when the database stops being writable or the background work that
    /// would end the stall fails on I/O.
    pub(super) fn wait_for_write_room(
        &self,
        w: &mut MutexGuard<'_, WriteState>,
        group: &Group,
    ) -> Result<()> {
        loop {
            let stalled = group.iter().any(|(_, r)| {
                r.ops.lock().iter().any(|(cf, _, _)| {
                    let sv = cf.current();
                    !cf.dropped.load(Ordering::Relaxed)
                        && (sv.imms.len() >= MAX_IMMS
                            || sv.levels.levels[0].len() >= crate::compaction::leveled::L0_STOP)
                })
            });
            if !stalled {
                break;
            }
            self.check_writable()?;
            // The flush / compaction that would end the stall is failing on
            // I/O (a full disk): fail these writes with its error instead of
            // waiting for ever. (A compaction failing on a damaged file does
            // not fail writes: other flushes and compactions go on.)
            if let Some(e) = self.bg.io_error() {
                return Err(e);
            }
            crate::metrics::WRITE_STALLS.inc();
            self.pacer.urge();
            self.request_flush();
            self.commit.wait_stall(w, Duration::from_millis(50));
        }
        let slow = group.iter().any(|(_, r)| {
            r.ops.lock().iter().any(|(cf, _, _)| {
                cf.current().levels.levels[0].len() >= crate::compaction::leveled::L0_SLOWDOWN
            })
        });
        if slow {
            crate::metrics::WRITE_SLOWDOWNS.inc();
            self.pacer.urge();
            self.bg.notify();
            self.commit.wait_stall(w, Duration::from_millis(1));
        }
        Ok(())
    }

    /// Checks every request of the group (in order, each against the ones
    /// accepted before it) and frames the accepted ones' WAL records, giving
    /// commits the sequences after `base_seq`.
    fn plan_group(&self, group: &Group, base_seq: u64) -> GroupPlan {
        let mut plan = GroupPlan {
            results: Vec::with_capacity(group.len()),
            framed: wal::Frames::default(),
            accepted: Vec::new(),
            new_prepared: Vec::new(),
            resolved: Vec::new(),
            next_seq: base_seq,
        };
        let mut group_keys: HashSet<(u64, Vec<u8>)> = HashSet::new();
        for (i, (_, req)) in group.iter().enumerate() {
            let mut ops = std::mem::take(&mut *req.ops.lock());
            let resolving = matches!(
                req.kind,
                ReqKind::CommitPrepared(_) | ReqKind::RollbackPrepared(_)
            );
            if resolving {
                // A prepared txn must be able to commit: ops of a column
                // family dropped since the prepare are simply skipped.
                ops.retain(|(cf, _, _)| !cf.dropped.load(Ordering::Acquire));
            }
            if let Err(e) = self.check_request(req, &ops, &group_keys, &plan.new_prepared) {
                plan.results.push(Err(e));
                continue;
            }
            let framed = &mut plan.framed;
            framed.reserve(batch::encoded_size(ops.iter().map(|(_, o, _)| o)) + 8);
            let last = i + 1 == group.len();
            match &req.kind {
                ReqKind::Commit => {
                    plan.next_seq += 1;
                    let seq = plan.next_seq;
                    framed
                        .frame(|out| batch::encode_commit(out, seq, ops.iter().map(|(_, o, _)| o)));
                    // Only later requests of the group need our keys (not
                    // those of a blind deferred put: it conflicts with none).
                    if !last && !req.detached {
                        for (_, o, _) in &ops {
                            group_keys.insert((o.cf, o.key.clone()));
                        }
                    }
                    plan.results.push(Ok(seq));
                    plan.accepted.push((i, seq, ops));
                }
                ReqKind::Prepare(x) => {
                    framed
                        .frame(|out| batch::encode_prepare(out, x, ops.iter().map(|(_, o, _)| o)));
                    let keys: Vec<(u64, Vec<u8>)> =
                        ops.iter().map(|(_, o, _)| (o.cf, o.key.clone())).collect();
                    group_keys.extend(keys.iter().cloned());
                    plan.new_prepared.push((x.clone(), req.owner, keys));
                    plan.results.push(Ok(0));
                    plan.accepted.push((i, 0, Vec::new()));
                }
                ReqKind::CommitPrepared(x) => {
                    plan.next_seq += 1;
                    let seq = plan.next_seq;
                    framed.frame(|out| batch::encode_commit_prepared(out, seq, x));
                    plan.resolved.push((x.clone(), seq));
                    plan.results.push(Ok(seq));
                    plan.accepted.push((i, seq, ops));
                }
                ReqKind::RollbackPrepared(x) => {
                    framed.frame(|out| batch::encode_rollback_prepared(out, x));
                    plan.resolved.push((x.clone(), 0));
                    plan.results.push(Ok(0));
                    plan.accepted.push((i, 0, Vec::new()));
                }
            }
        }
        plan
    }

    /// One request's checks: a prepare's xid is new; its column families
    /// exist; with conflict checks, no key is written by an earlier request
    /// of the group, by a prepared transaction, or committed after the
    /// key's check sequence (first committer wins).
    fn check_request(
        &self,
        req: &CommitReq,
        ops: &CfOps,
        group_keys: &HashSet<(u64, Vec<u8>)>,
        new_prepared: &[(Vec<u8>, u64, Vec<LockKey>)],
    ) -> Result<()> {
        let prep = self.prepared.lock();
        if let ReqKind::Prepare(x) = &req.kind {
            if prep.by_xid.contains_key(x) || new_prepared.iter().any(|p| &p.0 == x) {
                return Err(Error::InvalidArgument("xid is already prepared".into()));
            }
        }
        for (cf, op, check_seq) in ops {
            if cf.dropped.load(Ordering::Acquire) {
                return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
            }
            if req.check_conflicts {
                // Keys of earlier requests of this group / of prepared txns
                // (skipped when there are none).
                if (!group_keys.is_empty() || !prep.keys.is_empty()) && {
                    let k = (op.cf, op.key.clone());
                    group_keys.contains(&k) || prep.keys.contains(&k)
                } {
                    crate::metrics::WRITE_CONFLICTS.inc();
                    return Err(Error::Conflict);
                }
                if self.newer_than(cf, &op.key, *check_seq)? {
                    crate::metrics::WRITE_CONFLICTS.inc();
                    return Err(Error::Conflict);
                }
            }
        }
        Ok(())
    }

    /// Appends the group's frames to the WAL as one write (`sync`: the group
    /// will be fsynced, so zeros are written ahead); returns where each out-of-line value landed, by the
    /// address of its buffer: kept in the memtable, so a flush can point
    /// into the segment instead of copying the value again (`build_table`).
    fn append_group(
        &self,
        w: &mut WriteState,
        framed: &wal::Frames,
        sync: bool,
    ) -> Result<HashMap<usize, wal::WalLoc>> {
        let mut logged: HashMap<usize, wal::WalLoc> = HashMap::new();
        let wal = w.wal.as_mut().ok_or(Error::Closed)?;
        let (segment, base) = (wal.number, wal.size);
        // Fsynced groups overwrite zeros written ahead (no journal commit
        // per fsync, see `wal::PREFILL_BYTES`).
        wal.prefill = sync;
        // A failed append (no space, ...) is cut back off the segment by
        // the writer: these commits fail, later ones may succeed. Only a
        // failed fsync (or a cut that failed) refuses writes until reopen.
        if let Err(e) = wal.append_frames(framed) {
            if wal.torn {
                self.poison();
            }
            return Err(e);
        }
        for (at, off) in framed.ext_offsets() {
            let offset = base + off;
            logged.insert(at as usize, wal::WalLoc { segment, offset });
        }
        crate::metrics::WAL_BYTES.add(framed.len() as u64);
        crate::metrics::COMMIT_GROUPS.inc();
        Ok(logged)
    }

    /// After a durable group: forgets the prepared transactions it resolved
    /// (their keys free again) and registers those it prepared, pinned to
    /// WAL segment `cur_seg`.
    fn settle_prepared(
        &self,
        resolved: &[(Vec<u8>, u64)],
        new_prepared: Vec<(Vec<u8>, u64, Vec<LockKey>)>,
        cur_seg: u64,
    ) {
        if !resolved.is_empty() {
            // A committed prepare's segment must live until the commit's
            // sequence is flushed: raise its max sequence *before* unpinning.
            let segs_to_bump: Vec<(u64, u64)> = {
                let p = self.prepared.lock();
                resolved
                    .iter()
                    .filter_map(|(x, seq)| p.by_xid.get(x).map(|e| (e.segment, *seq)))
                    .collect()
            };
            {
                let mut segs = self.commit.closed_segments();
                for (n, seq) in segs_to_bump {
                    if let Some(s) = segs.iter_mut().find(|s| s.number == n) {
                        s.max_seq = s.max_seq.max(seq);
                    }
                }
            }
            let mut p = self.prepared.lock();
            for (x, _) in resolved {
                if let Some(e) = p.by_xid.remove(x) {
                    for k in &e.keys {
                        p.keys.remove(k);
                    }
                }
            }
            drop(p);
            // A resolution waiting for the xid's owner learns it is gone.
            self.prepared_detached.notify_all();
        }
        if !new_prepared.is_empty() {
            let mut p = self.prepared.lock();
            for (x, owner, keys) in new_prepared {
                p.keys.extend(keys.iter().cloned());
                p.by_xid.insert(
                    x,
                    PreparedEntry {
                        owner,
                        segment: cur_seg,
                        keys,
                        ops: None,
                        resolving: false,
                        spill: Vec::new(),
                    },
                );
            }
        }
    }
}

/// What the group writer made of a group before writing it: every request's
/// result so far, the WAL frames of the accepted ones, and what those change
/// once durable.
struct GroupPlan {
    results: Vec<Result<u64>>,
    framed: wal::Frames,
    /// (index in the group, commit sequence or 0, ops to insert).
    accepted: Vec<(usize, u64, CfOps)>,
    /// (xid, lock owner, keys) of the group's prepares.
    new_prepared: Vec<(Vec<u8>, u64, Vec<LockKey>)>,
    /// (xid, commit sequence or 0 for a rollback) of resolved prepares.
    resolved: Vec<(Vec<u8>, u64)>,
    /// Highest sequence the group gives out.
    next_seq: u64,
}

/// An op with the sequence of the commit it belongs to.
type SeqOp = (u64, Op);

/// Inserts a durable group's ops into the memtables; returns the column
/// families touched. The group's ops are gathered per column family first
/// (commit order kept, each commit's in key order), then inserted in runs of
/// up to WARM_RUN, the memtable first loading what a run's inserts will visit
/// (several cache misses at once). Gathering across the group's commits lets
/// a group of small commits (one key per family each, as autocommit INSERTs
/// are) warm its keys together instead of missing the cache one key at a
/// time, inside the write lock the next group waits for. (The memtable cannot
/// be rotated meanwhile: that takes the write lock, which the group writer
/// holds.)
pub(super) fn insert_into_memtables(
    accepted: &mut [(usize, u64, CfOps)],
    logged: &HashMap<usize, wal::WalLoc>,
) -> Vec<Arc<CfInner>> {
    let mut per_cf: Vec<(Arc<CfInner>, Vec<SeqOp>)> = Vec::new();
    for (_, seq, ops) in accepted.iter_mut() {
        for (cf, op, _) in ops.drain(..) {
            // A commit's ops of one family are adjacent: the last family is
            // the usual match.
            match per_cf.iter_mut().rev().find(|(c, _)| Arc::ptr_eq(c, &cf)) {
                Some((_, family_ops)) => family_ops.push((*seq, op)),
                None => per_cf.push((cf, vec![(*seq, op)])),
            }
        }
    }
    let mut touched = Vec::with_capacity(per_cf.len());
    for (cf, family_ops) in per_cf {
        let mem = cf.sv.read().mem.clone();
        let mut family_ops = family_ops.into_iter().peekable();
        let mut run: Vec<SeqOp> = Vec::with_capacity(WARM_RUN);
        while family_ops.peek().is_some() {
            run.extend(family_ops.by_ref().take(WARM_RUN));
            if run.len() > 1 {
                mem.warm_inserts(run.iter().map(|(seq, o)| (o.key.as_slice(), *seq)));
            }
            for (seq, op) in run.drain(..) {
                // The value's buffer is shared with the write set (no copy).
                let loc = if logged.is_empty() {
                    None
                } else {
                    logged.get(&(op.value.as_ptr() as usize)).copied()
                };
                mem.insert_shared(&op.key, seq, op.kind, op.value, op.crc, loc);
            }
        }
        touched.push(cf);
    }
    touched
}
