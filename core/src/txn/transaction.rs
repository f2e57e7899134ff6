//! Transactions: snapshot reads, buffered write set with savepoints,
//! first-committer-wins commit, and transaction iterators.
//!
//! The write set of each column family is a private skiplist (same structure
//! as a memtable) whose entries carry the pseudo-sequence `WS_BASE + op`, where
//! `op` increases with each write. All versions are kept, so rolling back to a
//! savepoint removes the entries with `op` above it, and an iterator sees the
//! own writes whose `op` is at most the counter value at its creation / last
//! seek. At commit only the newest version of each key is written.
//!
//! Past the spill threshold the write set is spilled to sorted run files
//! (`spill.rs`) and committed by installing table files (see
//! `DbInner::commit_spilled` and docs/design.md, "Large write sets").

use crate::bytes::SharedBytes;
use crate::db::commit::ReqKind;
use crate::db::database::DbInner;
use crate::error::{Error, Result};
use crate::iter::{MergeIter, Source};
use crate::journal::batch::Op;
use crate::key::Kind;
use crate::txn::lock::{CancelHandle, LockKey, LockMode, WsHandle};
use crate::version::levels::{CfInner, SuperVersion};
use crate::version::snapshots::SnapGuard;

/// Flag bit in a `Txn::locks` value: the lock is exclusive (the rest of the
/// value is the visible sequence when it was granted).
const LOCK_X: u64 = 1 << 63;

/// Row locks of one transaction in one column family (lock escalation).
#[derive(Default)]
struct CfLocks {
    /// Row locks held in `Txn::locks`.
    count: usize,
    /// Next `count` at which escalation is tried (after a refusal).
    next_try: usize,
    /// Table lock held after escalation: mode and the visible sequence then.
    table: Option<(LockMode, u64)>,
    /// Covered puts ([`Txn::put_covered`]) under an escalated exclusive lock
    /// went to this family: the highest such escalation sequence.
    covered_floor: u64,
}

/// What [`check_seq`] needs of a transaction's locks.
struct LockView<'a> {
    locks: &'a crate::fxhash::FxHashMap<LockKey, u64>,
    covered: &'a crate::fxhash::FxHashMap<Box<[u8]>, u64>,
    cfs: &'a crate::fxhash::FxHashMap<u64, CfLocks>,
}

/// Sequence from which a written key is conflict-checked: keys locked
/// exclusively are checked from the lock time on, keys written under another
/// key's exclusive lock ([`Txn::put_covered`]) from that lock's time, others
/// from the snapshot. After escalation to an exclusive table lock the row
/// locks of that family are gone: its keys are checked from the escalation
/// time (nobody can have committed a key we had locked, or can commit one of
/// the family, without the lock), and so are covered keys written under it
/// (`covered_floor`).
fn check_seq(lv: &LockView, buf: &mut Vec<u8>, cf: u64, key: &[u8], snap: u64) -> u64 {
    if lv.locks.is_empty() && lv.cfs.is_empty() {
        return snap;
    }
    crate::txn::lock::encode_key(buf, cf, key);
    if let Some(v) = lv.locks.get(&buf[..]) {
        if v & LOCK_X != 0 {
            return (v & !LOCK_X).max(snap);
        }
    }
    if let Some(at) = lv.covered.get(&buf[..]) {
        return (*at).max(snap);
    }
    match lv.cfs.get(&cf) {
        Some(c) => {
            let table = match c.table {
                Some((LockMode::Exclusive, at)) => at,
                _ => 0,
            };
            table.max(c.covered_floor).max(snap)
        }
        None => snap,
    }
}
use crate::memtable::buffer::{MemIter, Memtable};
use crate::options::{CommitOptions, Isolation, IterOptions};
use crate::table::sst::TableIter;
use crate::txn::spill::{Run, RunIter, WsView};
use crate::version::levels::Cf;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) const WS_BASE: u64 = 1 << 60;

/// A savepoint inside a transaction (cheap `Copy` id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint {
    id: u64,
}

pub(crate) struct WsCf {
    pub cf: Arc<CfInner>,
    pub view: Arc<Mutex<WsView>>,
}

impl WsCf {
    /// Newest own version of `key` (any op), in memory or in a run; a long
    /// value in memory is shared, not copied.
    fn get(&self, key: &[u8]) -> Result<Option<(Kind, SharedBytes)>> {
        view_get(&self.view, key)
    }
}

/// Newest version of `key` (any op) in the write set `view`.
fn view_get(view: &Mutex<WsView>, key: &[u8]) -> Result<Option<(Kind, SharedBytes)>> {
    let v = view.lock();
    if let Some(e) = v.mem.get(key, u64::MAX) {
        return Ok(Some((e.kind(), e.value_bytes())));
    }
    for r in v.runs.iter().rev() {
        if let Some((_, k, val)) = r.table.get(key, r.limit())? {
            return Ok(Some((k, SharedBytes::from_vec(val))));
        }
    }
    Ok(None)
}

/// Sources of other transactions' write sets of one column family, for a
/// READ UNCOMMITTED iterator: every op not rolled back (runs up to their
/// limit). They come after the reader's own write set in the merge, so on a
/// tie its own write wins.
fn uncommitted_sources(views: &[WsHandle]) -> Vec<Source> {
    let mut out = Vec::new();
    for view in views {
        let v = view.lock();
        out.push(Source::new(Box::new(MemIter::new(v.mem.clone())), u64::MAX));
        for r in &v.runs {
            out.push(Source::new(
                Box::new(RunIter::new(r.clone(), WS_BASE)),
                WS_BASE + r.limit(),
            ));
        }
    }
    out
}

/// Write-set sources of `view` for a merge (memory first, then the runs).
fn ws_sources(view: &WsView, op: u64) -> Vec<Source> {
    let mut v = Vec::with_capacity(1 + view.runs.len());
    v.push(Source::new(
        Box::new(MemIter::new(view.mem.clone())),
        WS_BASE + op,
    ));
    for r in &view.runs {
        v.push(Source::new(
            Box::new(RunIter::new(r.clone(), WS_BASE)),
            WS_BASE + op.min(r.limit()),
        ));
    }
    v
}

/// A spilled write set's column family whose runs hold more entries than this is
/// committed as two key ranges (see [`split_key`]).
const SPLIT_MIN_ENTRIES: u64 = 1 << 20;

/// A user key near the middle of a spilled write set's keys (the middle of its
/// largest run, from the run's index alone), when its runs hold at least
/// [`SPLIT_MIN_ENTRIES`] entries.
fn split_key(view: &WsView) -> Option<Vec<u8>> {
    let total: u64 = view.runs.iter().map(|r| r.table.props.num_entries).sum();
    if total < SPLIT_MIN_ENTRIES {
        return None;
    }
    let big = view.runs.iter().max_by_key(|r| r.table.props.num_entries)?;
    let (keys, _) = big.table.spread_keys(2);
    keys.get(1).map(|k| k.to_vec())
}

/// Accounted bytes of one buffered write (skiplist entry + undo entry).
fn write_charge(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + 64 + key.len() + 48
}

/// The in-memory write set's writes in op order, (column family, key,
/// sequence) each, for `rollback_to`: the keys in one buffer, so a write costs
/// no allocation of its own.
#[derive(Default)]
struct UndoLog {
    /// (column family, start of the key in `keys`, sequence).
    entries: Vec<(u64, usize, u64)>,
    keys: Vec<u8>,
}

impl UndoLog {
    fn push(&mut self, cf: u64, key: &[u8], seq: u64) {
        self.entries.push((cf, self.keys.len(), seq));
        self.keys.extend_from_slice(key);
    }

    fn last_seq(&self) -> Option<u64> {
        self.entries.last().map(|e| e.2)
    }

    /// The newest write.
    fn last(&self) -> Option<(u64, &[u8], u64)> {
        let &(cf, at, seq) = self.entries.last()?;
        Some((cf, self.keys.get(at..)?, seq))
    }

    fn pop(&mut self) {
        if let Some((_, at, _)) = self.entries.pop() {
            self.keys.truncate(at);
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.keys.clear();
    }
}

/// A transaction. `Send`, not `Sync`; owns everything it needs. Dropping it
/// without `commit` rolls it back.
pub struct Txn {
    pub(crate) db: Arc<DbInner>,
    iso: Isolation,
    snap: Arc<SnapGuard>,
    pub(crate) ws: BTreeMap<u64, WsCf>,
    /// Undo log of the in-memory part of the write set (spilled writes are
    /// undone by run limits).
    undo: UndoLog,
    op: Arc<AtomicU64>,
    /// (savepoint id, op counter when it was made).
    savepoints: Vec<(u64, u64)>,
    /// Accounted bytes of the in-memory write set (skiplists + undo log).
    ws_bytes: usize,
    /// Highest `ws_bytes` seen (statistics, tests).
    ws_bytes_peak: usize,
    /// Buffered writes not rolled back.
    live_writes: u64,
    /// Some write set was spilled to runs.
    spilled: bool,
    /// Spill when `ws_bytes` exceeds this.
    spill_threshold: usize,
    next_sp: u64,
    done: bool,
    pub(crate) id: u64,
    /// Locks held: encoded (cf, key) (shared with the lock table) -> visible
    /// sequence when acquired, `LOCK_X` set if exclusive.
    locks: crate::fxhash::FxHashMap<LockKey, u64>,
    /// Keys written by [`Txn::put_covered`]: encoded (cf, key) -> grant
    /// sequence of the exclusive lock that covers them.
    covered: crate::fxhash::FxHashMap<Box<[u8]>, u64>,
    /// Per column family lock counts and escalated table locks.
    cf_locks: crate::fxhash::FxHashMap<u64, CfLocks>,
    /// Scratch buffer for encoding lock keys.
    lock_buf: Vec<u8>,
    cancel: Arc<std::sync::atomic::AtomicBool>,
    /// Xid once `prepare` succeeded.
    prepared: Option<Vec<u8>>,
    /// Timeout of lock waits the engine makes on the txn's behalf (prepare).
    lock_timeout: Duration,
    /// Row locks may be replaced by a table lock (see `escalate`).
    may_escalate: bool,
}

impl Txn {
    pub(crate) fn new(db: Arc<DbInner>, iso: Isolation) -> Txn {
        let snap = db.snapshot();
        let id = db.new_txn_id();
        let spill_threshold = db.spill_threshold();
        Txn {
            id,
            locks: crate::fxhash::FxHashMap::default(),
            covered: crate::fxhash::FxHashMap::default(),
            cf_locks: crate::fxhash::FxHashMap::default(),
            may_escalate: true,
            lock_buf: Vec::new(),
            cancel: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            db,
            iso,
            snap,
            ws: BTreeMap::new(),
            undo: UndoLog::default(),
            op: Arc::new(AtomicU64::new(0)),
            savepoints: Vec::new(),
            ws_bytes: 0,
            ws_bytes_peak: 0,
            live_writes: 0,
            spilled: false,
            spill_threshold,
            next_sp: 1,
            done: false,
            prepared: None,
            lock_timeout: Duration::from_secs(50),
        }
    }

    fn check(&self, cf: &Cf) -> Result<()> {
        if self.done {
            return Err(Error::TransactionDone);
        }
        self.db.check_open()?;
        self.db.check_cf(cf)
    }

    pub fn isolation(&self) -> Isolation {
        self.iso
    }

    /// Sequence number the transaction currently reads at.
    pub fn snapshot_seq(&self) -> u64 {
        self.snap.seq
    }

    /// Reads `key`: own writes first, then the snapshot.
    pub fn get(&mut self, cf: &Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_shared(cf, key)?.map(SharedBytes::into_vec))
    }

    /// As [`Txn::get`], without copying a value held by the block cache (a
    /// separated value: the cache and the caller share its buffer).
    pub fn get_shared(&mut self, cf: &Cf, key: &[u8]) -> Result<Option<SharedBytes>> {
        self.check(cf)?;
        if let Some(own) = self.own_write(cf, key)? {
            return Ok(own);
        }
        if self.iso == Isolation::ReadUncommitted {
            if let Some(dirty) = self.uncommitted_write(cf, key)? {
                return Ok(dirty);
            }
            return self.get_latest_shared(cf, key);
        }
        self.db.get_at(&cf.inner, key, self.snap.seq)
    }

    /// Another transaction's uncommitted write of `key` (READ UNCOMMITTED):
    /// `Some(None)` for a delete, `None` if no active transaction wrote it.
    /// Row keys have at most one uncommitted writer (the exclusive row lock).
    fn uncommitted_write(&self, cf: &Cf, key: &[u8]) -> Result<Option<Option<SharedBytes>>> {
        for view in self.db.locks().uncommitted_write_sets(self.id, cf.id()) {
            if let Some((kind, v)) = view_get(&view, key)? {
                return Ok(Some((kind != Kind::Delete).then_some(v)));
            }
        }
        Ok(None)
    }

    /// This transaction's own latest write of `key`: `Some(None)` for a
    /// delete, `None` if it has not written the key.
    fn own_write(&self, cf: &Cf, key: &[u8]) -> Result<Option<Option<SharedBytes>>> {
        let Some(w) = self.ws.get(&cf.id()) else {
            return Ok(None);
        };
        Ok(w.get(key)?.map(|(k, v)| (k != Kind::Delete).then_some(v)))
    }

    fn check_not_prepared(&self) -> Result<()> {
        if self.prepared.is_some() {
            return Err(Error::InvalidArgument(
                "transaction is prepared; only commit or rollback are allowed".into(),
            ));
        }
        Ok(())
    }

    fn write(&mut self, cf: &Cf, key: &[u8], kind: Kind, value: &[u8]) -> Result<()> {
        self.check(cf)?;
        self.check_not_prepared()?;
        if key.len() > u32::MAX as usize || value.len() > u32::MAX as usize {
            return Err(Error::InvalidArgument("key or value too large".into()));
        }
        let op = self.op.fetch_add(1, Ordering::SeqCst) + 1;
        let seq = WS_BASE + op;
        let (db, id) = (&self.db, self.id);
        let w = self.ws.entry(cf.id()).or_insert_with(|| {
            let view = Arc::new(Mutex::new(WsView {
                mem: Arc::new(Memtable::new()),
                runs: Vec::new(),
                gen: 0,
            }));
            // Range lock requests look into it (see lock.rs).
            db.locks().register_writer(id, cf.id(), view.clone());
            WsCf {
                cf: cf.inner.clone(),
                view,
            }
        });
        w.view.lock().mem.insert(key, seq, kind, value);
        self.undo.push(cf.id(), key, seq);
        self.live_writes += 1;
        self.ws_bytes += write_charge(key, value);
        self.ws_bytes_peak = self.ws_bytes_peak.max(self.ws_bytes);
        if self.ws_bytes > self.spill_threshold {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the in-memory write set of every column family to a sorted
    /// run file (see `spill.rs`) and empties it.
    fn spill(&mut self) -> Result<()> {
        for w in self.ws.values() {
            let mut v = w.view.lock();
            if v.mem.is_empty() {
                continue;
            }
            let run =
                self.db
                    .write_spill_run(&v.mem, WS_BASE, w.cf.opts.encryption_key.is_some())?;
            v.runs.push(Arc::new(run));
            v.mem = Arc::new(Memtable::new());
            v.gen += 1;
        }
        // Kept allocated: refilled up to the next spill.
        self.undo.clear();
        self.ws_bytes = 0;
        self.spilled = true;
        Ok(())
    }

    /// Accounted bytes of the transaction's in-memory write set (skiplists
    /// and undo log). Bounded by the spill threshold (see
    /// [`crate::Db::set_spill_threshold`]) plus one write: beyond it the
    /// write set is spilled to sorted run files.
    pub fn write_set_bytes(&self) -> usize {
        self.ws_bytes
    }

    /// Highest [`Txn::write_set_bytes`] so far.
    pub fn write_set_bytes_peak(&self) -> usize {
        self.ws_bytes_peak
    }

    /// True once part of the write set was spilled to disk (such a
    /// transaction cannot be prepared).
    pub fn is_spilled(&self) -> bool {
        self.spilled
    }

    /// Overrides the spill threshold of this transaction (bytes; default
    /// from [`crate::Db::set_spill_threshold`]).
    pub fn set_spill_threshold(&mut self, bytes: usize) {
        self.spill_threshold = bytes.max(1);
    }

    pub fn put(&mut self, cf: &Cf, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(cf, key, Kind::Put, value)
    }

    /// [`Txn::put`] of a key that, by the caller's own rules, nobody writes
    /// without holding the exclusive lock this transaction holds on
    /// (`lock_cf`, `lock_key`) (e.g. an index entry that contains its row's
    /// primary key, under the row's lock). The key is then checked for write
    /// conflicts from the moment that lock was granted, as a locked key is,
    /// without being locked itself (no lock table traffic). Without that lock
    /// held it is a plain `put` (checked from the snapshot).
    pub fn put_covered(
        &mut self,
        cf: &Cf,
        key: &[u8],
        value: &[u8],
        lock_cf: &Cf,
        lock_key: &[u8],
    ) -> Result<()> {
        self.check(lock_cf)?;
        crate::txn::lock::encode_key(&mut self.lock_buf, lock_cf.id(), lock_key);
        let at = match self.locks.get(&self.lock_buf[..]) {
            Some(v) if v & LOCK_X != 0 => Some(v & !LOCK_X),
            _ => None,
        };
        let escalated = match self.cf_locks.get(&lock_cf.id()) {
            Some(CfLocks {
                table: Some((LockMode::Exclusive, t)),
                ..
            }) if at.is_none() => Some(*t),
            _ => None,
        };
        self.put(cf, key, value)?;
        if let Some(at) = escalated {
            // No per-key entry (bounded memory): the family's floor.
            let c = self.cf_locks.entry(cf.id()).or_default();
            c.covered_floor = c.covered_floor.max(at);
        } else if let Some(at) = at {
            crate::txn::lock::encode_key(&mut self.lock_buf, cf.id(), key);
            self.covered.insert(self.lock_buf[..].into(), at);
        }
        Ok(())
    }

    pub fn delete(&mut self, cf: &Cf, key: &[u8]) -> Result<()> {
        self.write(cf, key, Kind::Delete, &[])
    }

    /// Iterator over `cf` merging the snapshot with this transaction's writes.
    pub fn iter(&mut self, cf: &Cf, opts: IterOptions) -> Result<TxnIter> {
        self.make_iter(cf, opts, false)
    }

    /// Like [`Txn::iter`], but reads the *latest committed* state instead of
    /// the transaction snapshot (still merged with the transaction's own
    /// writes): the visible sequence at creation, re-read at every `seek*`
    /// (InnoDB-style locking reads: UPDATE / DELETE / SELECT ... FOR UPDATE
    /// see rows committed after the snapshot). What it reads is pinned
    /// against compaction like a snapshot iterator (it registers the
    /// sequence it reads at). `next`/`prev` continue at the sequence of the
    /// last seek.
    pub fn iter_latest(&mut self, cf: &Cf, opts: IterOptions) -> Result<TxnIter> {
        self.make_iter(cf, opts, true)
    }

    fn make_iter(&mut self, cf: &Cf, opts: IterOptions, latest: bool) -> Result<TxnIter> {
        self.check(cf)?;
        let mut sources = Vec::new();
        let ws = self.ws.get(&cf.id()).map(|w| w.view.clone());
        let mut ws_runs = Vec::new();
        let mut ws_gen = 0;
        if let Some(view) = &ws {
            let v = view.lock();
            sources = ws_sources(&v, self.op.load(Ordering::SeqCst));
            ws_runs = v.runs.clone();
            ws_gen = v.gen;
        }
        let ws_sources = sources.len();
        // READ UNCOMMITTED reads the latest state, with the other writers'
        // write sets taken before the sequence (see `uncommitted_write_sets`).
        let read_uncommitted = self.iso == Isolation::ReadUncommitted;
        let latest = latest || read_uncommitted;
        if read_uncommitted {
            let views = self.db.locks().uncommitted_write_sets(self.id, cf.id());
            sources.extend(uncommitted_sources(&views));
        }
        // Snapshot first, then the super version: everything visible at the
        // sequence is in it (memtables are filled before the sequence is
        // published, and a flushed memtable leaves only with its table in).
        let snap = if latest {
            self.db.snapshot()
        } else {
            self.snap.clone()
        };
        let sv = cf.inner.current();
        sources.extend(db_sources(
            &sv,
            snap.seq,
            &opts.lower_bound,
            &opts.upper_bound,
        ));
        // Pointers resolve through this version's value log files (kept
        // alive by the resolver as long as the sources that may name them).
        let resolver = self.db.resolver(sv.levels.clone());
        let latest = latest.then(|| LatestState {
            db: self.db.clone(),
            cf: cf.inner.clone(),
            sv,
            lower: opts.lower_bound.clone(),
            upper: opts.upper_bound.clone(),
            uncommitted_reader: read_uncommitted.then_some(self.id),
        });
        Ok(TxnIter {
            merge: MergeIter::new(sources, opts.lower_bound, opts.upper_bound, Some(resolver)),
            snap,
            op: self.op.clone(),
            ws,
            ws_runs,
            ws_gen,
            ws_sources,
            latest,
        })
    }

    /// Marks a savepoint; savepoints nest.
    pub fn savepoint(&mut self) -> Savepoint {
        let id = self.next_sp;
        self.next_sp += 1;
        self.savepoints.push((id, self.op.load(Ordering::SeqCst)));
        Savepoint { id }
    }

    /// Undoes the writes made after `sp` (later savepoints are discarded; `sp`
    /// stays valid).
    pub fn rollback_to(&mut self, sp: Savepoint) -> Result<()> {
        if self.done {
            return Err(Error::TransactionDone);
        }
        self.check_not_prepared()?;
        let pos = self
            .savepoints
            .iter()
            .position(|s| s.0 == sp.id)
            .ok_or_else(|| Error::InvalidArgument("unknown savepoint".into()))?;
        let sp_op = self.savepoints[pos].1;
        self.savepoints.truncate(pos + 1);
        // In memory: the undo log is in op order.
        while self.undo.last_seq().is_some_and(|s| s > WS_BASE + sp_op) {
            if let Some((cf, key, seq)) = self.undo.last() {
                if let Some(w) = self.ws.get(&cf) {
                    let v = w.view.lock();
                    let val_len = v.mem.get(key, seq).map_or(0, |e| e.value().len());
                    v.mem.remove(key, seq);
                    self.ws_bytes = self.ws_bytes.saturating_sub(key.len() * 2 + val_len + 112);
                }
                self.live_writes = self.live_writes.saturating_sub(1);
            }
            self.undo.pop();
        }
        // Spilled runs: drop runs made entirely after the savepoint, lower
        // the limit of the one straddling it.
        for w in self.ws.values() {
            let mut v = w.view.lock();
            let mut removed = 0u64;
            let mut dropped = false;
            let mut err = None;
            v.runs.retain(|r| {
                if r.min_op > sp_op {
                    match r.count_ops(0, r.limit()) {
                        Ok(n) => removed += n,
                        Err(e) => err = Some(e),
                    }
                    dropped = true;
                    false
                } else {
                    true
                }
            });
            for r in &v.runs {
                let lim = r.limit();
                if lim > sp_op {
                    match r.count_ops(sp_op, lim) {
                        Ok(n) => removed += n,
                        Err(e) => err = Some(e),
                    }
                    r.limit.store(sp_op, Ordering::Release);
                }
            }
            if dropped {
                v.gen += 1;
            }
            self.live_writes = self.live_writes.saturating_sub(removed);
            if let Some(e) = err {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Forgets `sp` (and savepoints made after it); writes are kept.
    pub fn release(&mut self, sp: Savepoint) -> Result<()> {
        if self.done {
            return Err(Error::TransactionDone);
        }
        let pos = self
            .savepoints
            .iter()
            .position(|s| s.0 == sp.id)
            .ok_or_else(|| Error::InvalidArgument("unknown savepoint".into()))?;
        self.savepoints.truncate(pos);
        Ok(())
    }

    /// Takes a new snapshot (READ COMMITTED statement start). For the other
    /// levels this is also allowed and simply moves the snapshot forward.
    pub fn refresh_snapshot(&mut self) {
        if !self.done {
            self.snap = self.db.snapshot();
        }
    }

    /// Newest version of every written key, grouped per column family.
    pub(crate) fn collect_ops(&self) -> Result<crate::db::commit::CfOps> {
        let mut ops = Vec::new();
        let mut buf = Vec::new();
        let op_now = self.op.load(Ordering::SeqCst);
        for (id, w) in &self.ws {
            // Values are shared with the write set, not copied.
            let mut push = |ops: &mut crate::db::commit::CfOps,
                            key: &[u8],
                            kind: Kind,
                            value: Arc<[u8]>,
                            crc: Option<u32>| {
                let check = check_seq(&self.lock_view(), &mut buf, *id, key, self.snap.seq);
                ops.push((
                    w.cf.clone(),
                    Op {
                        cf: *id,
                        kind,
                        key: key.to_vec(),
                        value,
                        crc,
                    },
                    check,
                ));
            };
            if self.spilled {
                // Spilled runs plus memory, newest version per key (2PC of a
                // large write set: the prepare record carries all of it).
                let v = w.view.lock();
                let mut m = MergeIter::new(ws_sources(&v, op_now), None, None, None).keep_deletes();
                drop(v);
                m.seek_to_first();
                while m.valid() {
                    push(&mut ops, m.key(), m.kind(), Arc::from(m.value()), None);
                    m.next();
                }
                m.status()?;
                continue;
            }
            // Newest version of each key first: a key equal to the last one
            // pushed for this column family is an older version (compared with
            // that op's key, not a copy of it: no allocation per key).
            let first = ops.len();
            let mem = w.view.lock().mem.clone();
            mem.for_each(|e| {
                let older =
                    ops.len() > first && ops.last().is_some_and(|(_, op, _)| op.key == e.user());
                if !older {
                    // A long value is shared with the write set, not copied.
                    let v = e.shared_value().unwrap_or_else(|| Arc::from(e.value()));
                    // With its crc if computed at the put (checksum once).
                    push(&mut ops, e.user(), e.kind(), v, e.value_crc());
                }
                Ok(())
            })?;
        }
        Ok(ops)
    }

    /// Commits atomically across column families. `Error::Conflict` if another
    /// transaction committed one of our written keys after our snapshot.
    pub fn commit(self) -> Result<()> {
        self.commit_with(CommitOptions::default())
    }

    /// [`Txn::commit`] with options: `CommitOptions { sync: false }` appends
    /// the commit to the WAL (ordered before any later commit) and makes it
    /// visible without waiting for an fsync, even in `SyncMode::Full`. A
    /// later synced commit makes it durable as well (the WAL is a prefix). A
    /// prepared transaction's commit record is then not waited for either: until
    /// it is durable, a crash leaves the transaction prepared (its prepare is).
    pub fn commit_with(mut self, opts: CommitOptions) -> Result<()> {
        if self.done {
            return Err(Error::TransactionDone);
        }
        self.done = true;
        if let Some(xid) = self.prepared.clone() {
            if self.db.is_spilled_prepare(&xid) {
                let r = self.db.resolve_spilled(&xid, true);
                if r.is_err() {
                    self.done = false;
                    return r;
                }
                self.release_locks();
                return r;
            }
            let ops = self.collect_ops()?;
            let r = self
                .db
                .submit(ops, false, opts.sync, ReqKind::CommitPrepared(xid), self.id)
                .map(|_| ());
            if r.is_err() {
                // Still prepared (durably): hand it over to the database so
                // it can be resolved with Db::commit_prepared later.
                self.done = false;
                return r;
            }
            self.release_locks();
            return r;
        }
        if self.live_writes == 0 {
            return self.db.check_open();
        }
        if self.spilled {
            let r = self.commit_spilled().map(|_| ());
            self.release_locks();
            return r;
        }
        let ops = self.collect_ops()?;
        let r = self.db.commit_ops(ops, true, opts.sync).map(|_| ());
        self.release_locks();
        r
    }

    /// Rolls back (for a prepared transaction: writes a "rollback xid" WAL
    /// record; if that fails the database is poisoned and the transaction is
    /// listed by `Db::recover_prepared` at the next open).
    pub fn rollback(mut self) {
        if let Some(xid) = self.prepared.take() {
            if self.db.is_spilled_prepare(&xid) {
                if self.db.resolve_spilled(&xid, false).is_err() {
                    // Still prepared durably: detach (keep the locks) so
                    // Db::rollback_prepared can resolve it.
                    self.db.detach_prepared(&xid, Vec::new());
                    self.done = true;
                    self.locks.clear();
                    self.cf_locks.clear();
                    return;
                }
                self.done = true;
                self.release_locks();
                return;
            }
            let _ = self.db.submit(
                Vec::new(),
                false,
                true,
                ReqKind::RollbackPrepared(xid),
                self.id,
            );
        }
        self.done = true;
        self.release_locks();
    }

    /// Phase one of a two-phase commit (XA PREPARE, binlog group commit).
    /// Locks every written key exclusively (waiting up to the txn's lock
    /// timeout, see [`Txn::set_lock_timeout`]), checks write conflicts
    /// exactly like `commit`, then writes a prepare record with the xid and
    /// the write set to the WAL (fsynced per the sync mode). The writes stay
    /// invisible; the keys stay locked, and other transactions committing
    /// them fail with `Conflict`. Then `commit()` makes it visible (it cannot
    /// fail with `Conflict`) and `rollback()` discards it. If the process
    /// stops first, the txn is listed by `Db::recover_prepared` after reopen.
    /// Dropping a prepared `Txn` detaches it the same way (locks kept).
    ///
    /// On error (`Conflict`, `LockTimeout`, xid already in use, ...) the
    /// transaction stays active and unprepared.
    ///
    /// A spilled write set (see [`Txn::is_spilled`]) is written to durable
    /// `.prep` files named by a manifest edit instead of a WAL record (the
    /// commit write lock is held meanwhile, so other commits stall).
    pub fn prepare(&mut self, xid: &[u8]) -> Result<()> {
        if self.done {
            return Err(Error::TransactionDone);
        }
        self.check_not_prepared()?;
        self.db.check_writable()?;
        if xid.is_empty() || xid.len() > 1024 {
            return Err(Error::InvalidArgument("xid length must be 1..=1024".into()));
        }
        if self.spilled {
            return self.prepare_spilled(xid);
        }
        let keys: Vec<(Cf, Vec<u8>)> = {
            let mut v = Vec::new();
            for w in self.ws.values() {
                let cf = Cf {
                    inner: w.cf.clone(),
                };
                let mut last: Option<Vec<u8>> = None;
                let mem = w.view.lock().mem.clone();
                mem.for_each(|e| {
                    if last.as_deref() != Some(e.user()) {
                        last = Some(e.user().to_vec());
                        v.push((cf.clone(), e.user().to_vec()));
                    }
                    Ok(())
                })?;
            }
            v
        };
        let timeout = self.lock_timeout;
        for (cf, key) in &keys {
            self.lock(cf, key, LockMode::Exclusive, timeout)?;
        }
        let ops = self.collect_ops()?;
        self.db
            .submit(ops, true, true, ReqKind::Prepare(xid.to_vec()), self.id)?;
        self.prepared = Some(xid.to_vec());
        Ok(())
    }

    /// The xid if the transaction is prepared.
    pub fn prepared_xid(&self) -> Option<&[u8]> {
        self.prepared.as_deref()
    }

    /// Timeout of lock waits made by the engine itself (at `prepare`).
    /// Default 50 s.
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
    }

    /// Whether this transaction's row locks may become a table lock. Off for
    /// a replication applier: a table lock covers rows that no certification
    /// key orders, so a parallel applier earlier in the commit order could wait
    /// for it while the holder waits for its commit turn.
    pub fn set_lock_escalation(&mut self, allowed: bool) {
        self.may_escalate = allowed;
    }

    fn lock_view(&self) -> LockView<'_> {
        LockView {
            locks: &self.locks,
            covered: &self.covered,
            cfs: &self.cf_locks,
        }
    }

    fn release_locks(&mut self) {
        if !self.locks.is_empty() {
            let locks = std::mem::take(&mut self.locks);
            self.db.locks().unlock_keys(self.id, locks.into_keys());
        }
        if std::mem::take(&mut self.cf_locks)
            .values()
            .any(|c| c.table.is_some())
        {
            self.db.locks().release_tables(self.id);
        }
        if !self.ws.is_empty() || self.db.locks().any_range() {
            self.db.locks().end_gaps(self.id);
        }
    }

    /// Next-key locking for inserts: call after putting `key`, a key that
    /// may not have existed. Waits (like [`Txn::lock`]) while another
    /// transaction holds a range lock ([`GapLocker::lock_range`]) containing
    /// it. One atomic load when no range lock exists.
    pub fn check_insert(&mut self, cf: &Cf, key: &[u8], timeout: Duration) -> Result<()> {
        self.db
            .locks()
            .check_insert(self.id, cf.id(), key, timeout, &self.cancel)
    }

    /// A handle that takes range locks for this transaction (for cursors,
    /// which do not borrow the transaction). The locks last until the
    /// transaction ends.
    pub fn gap_locker(&self) -> GapLocker {
        GapLocker {
            db: self.db.clone(),
            id: self.id,
            cancel: self.cancel.clone(),
        }
    }

    /// Locks `key` (which need not exist) until commit / rollback. Blocks up to
    /// `timeout`; `Error::LockTimeout` after it, `Error::Deadlock` at once if
    /// waiting would close a cycle (this transaction is the victim),
    /// `Error::Cancelled` if [`CancelHandle::cancel`] was called. Re-locking a
    /// held key is cheap; Shared -> Exclusive upgrades. A key locked
    /// exclusively is checked for write conflicts only from the moment the
    /// lock was granted (so locking reads + writes never fail with `Conflict`
    /// against commits that happened before the lock).
    ///
    /// Past [`crate::Db::set_lock_escalation_threshold`] row locks in one
    /// column family the transaction tries to escalate them to one table
    /// lock (see lock.rs); row locks the table lock covers are then free.
    pub fn lock(&mut self, cf: &Cf, key: &[u8], mode: LockMode, timeout: Duration) -> Result<()> {
        self.check(cf)?;
        let cfid = cf.id();
        if let Some(CfLocks {
            table: Some((held, _)),
            ..
        }) = self.cf_locks.get(&cfid)
        {
            if *held == LockMode::Exclusive || mode == LockMode::Shared {
                return Ok(());
            }
        }
        crate::txn::lock::encode_key(&mut self.lock_buf, cfid, key);
        if let Some(v) = self.locks.get(&self.lock_buf[..]) {
            if v & LOCK_X != 0 || mode == LockMode::Shared {
                return Ok(());
            }
        }
        let fresh = !self
            .cf_locks
            .get(&cfid)
            .is_some_and(|c| c.count > 0 || c.table.is_some());
        let k = self.db.locks().lock_key(
            self.id,
            cfid,
            &self.lock_buf,
            mode,
            timeout,
            &self.cancel,
            fresh,
        )?;
        let at = self.db.visible_seq() & !LOCK_X;
        let v = match mode {
            LockMode::Exclusive => at | LOCK_X,
            LockMode::Shared => at,
        };
        match self.locks.entry(k) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if mode == LockMode::Exclusive {
                    *o.get_mut() = v;
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                let threshold = self.db.locks().escalation_threshold();
                let c = self.cf_locks.entry(cfid).or_default();
                c.count += 1;
                if self.may_escalate
                    && threshold > 0
                    && c.count > threshold
                    && c.count >= c.next_try
                {
                    self.escalate(cfid, threshold);
                }
            }
        }
        Ok(())
    }

    /// Replaces this transaction's row locks on `cf` by one table lock in
    /// the strongest mode among them, if no other transaction holds a
    /// conflicting lock there; otherwise tries again after more locks.
    fn escalate(&mut self, cf: u64, threshold: usize) {
        let mut prefix = Vec::new();
        crate::txn::lock::encode_key(&mut prefix, cf, &[]);
        let exclusive = self
            .locks
            .iter()
            .any(|(k, v)| v & LOCK_X != 0 && k.starts_with(&prefix));
        let mode = if exclusive {
            LockMode::Exclusive
        } else {
            LockMode::Shared
        };
        let at = self.db.visible_seq() & !LOCK_X;
        let Some(c) = self.cf_locks.get_mut(&cf) else {
            return;
        };
        if !self.db.locks().try_escalate(self.id, cf, mode) {
            c.next_try = c.count + (threshold / 8).max(64);
            return;
        }
        // Shared: the row locks go too (a table S lock covers them; an
        // exclusive row lock would have made the table lock exclusive).
        self.record_table_lock(cf, mode, at);
        self.locks.shrink_to_fit();
        // `covered` keeps its entries (precise); new covered puts under the
        // table lock add none (see `put_covered`).
    }

    /// Books a table lock in `mode` on family `cf`, granted with the visible
    /// sequence `at` (an exclusive one held already stays): the family's row
    /// locks go, the table lock covers them, and escalation starts counting
    /// again.
    fn record_table_lock(&mut self, cf: u64, mode: LockMode, at: u64) {
        let c = self.cf_locks.entry(cf).or_default();
        c.table = match c.table {
            Some((LockMode::Exclusive, a)) => Some((LockMode::Exclusive, a)),
            _ => Some((mode, at)),
        };
        c.count = 0;
        c.next_try = 0;
        let mut prefix = Vec::new();
        crate::txn::lock::encode_key(&mut prefix, cf, &[]);
        self.locks.retain(|k, _| !k.starts_with(&prefix));
    }

    /// Takes a table lock in `mode` on every family of `cfs` (held until the
    /// transaction ends; see lock.rs), all at once: waits up to `timeout`
    /// while other transactions hold conflicting row or table locks on any of
    /// them (`Error::LockTimeout` after it, `Error::Cancelled` if cancelled);
    /// meanwhile transactions that hold no lock in those families wait behind
    /// it, so new ones cannot starve it. Holding none of them while it waits,
    /// it closes no deadlock. A DDL statement uses it to wait for the
    /// transactions that locked keys of families it is about to replace.
    pub fn lock_tables(&mut self, cfs: &[Cf], mode: LockMode, timeout: Duration) -> Result<()> {
        for cf in cfs {
            self.check(cf)?;
        }
        let ids: Vec<u64> = cfs.iter().map(Cf::id).collect();
        self.db
            .locks()
            .wait_table_locks(self.id, &ids, mode, timeout, &self.cancel)?;
        let at = self.db.visible_seq() & !LOCK_X;
        for &cf in &ids {
            self.record_table_lock(cf, mode, at);
        }
        Ok(())
    }

    /// True if this transaction holds an escalated table lock on `cf`.
    pub fn has_table_lock(&self, cf: &Cf) -> bool {
        matches!(
            self.cf_locks.get(&cf.id()),
            Some(CfLocks { table: Some(_), .. })
        )
    }

    /// Reads the latest committed value (ignoring the snapshot; own writes
    /// still win). Use after `lock` for locking reads.
    pub fn get_latest(&mut self, cf: &Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_latest_shared(cf, key)?.map(SharedBytes::into_vec))
    }

    /// As [`Txn::get_latest`], without copying a cached value (see
    /// [`Txn::get_shared`]).
    pub fn get_latest_shared(&mut self, cf: &Cf, key: &[u8]) -> Result<Option<SharedBytes>> {
        self.check(cf)?;
        if let Some(own) = self.own_write(cf, key)? {
            return Ok(own);
        }
        let latest = self.db.visible_seq();
        self.db.get_at(&cf.inner, key, latest)
    }

    /// This transaction's id, as lock wait observers see it (unique in the
    /// database's lifetime).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Handle to cancel this transaction's lock waits from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            flag: self.cancel.clone(),
            locks: Arc::downgrade(self.db.locks()),
        }
    }

    /// Number of locks held.
    pub fn lock_count(&self) -> usize {
        self.locks.len()
    }

    pub fn is_read_only(&self) -> bool {
        self.live_writes == 0
    }

    /// Number of buffered (not rolled back) write operations.
    pub fn write_count(&self) -> u64 {
        self.live_writes
    }

    /// Prepare of a spilled write set: locks every key (streaming the merged
    /// write set), then `DbInner::prepare_spilled` writes it to durable
    /// `.prep` files named by a manifest edit.
    fn prepare_spilled(&mut self, xid: &[u8]) -> Result<()> {
        let op = self.op.load(Ordering::SeqCst);
        let merges = |ws: &BTreeMap<u64, WsCf>| -> Vec<(Arc<CfInner>, MergeIter)> {
            ws.values()
                .map(|w| {
                    let v = w.view.lock();
                    let m = MergeIter::new(ws_sources(&v, op), None, None, None).keep_deletes();
                    (w.cf.clone(), m)
                })
                .collect()
        };
        let timeout = self.lock_timeout;
        for (cfi, mut it) in merges(&self.ws) {
            let cf = Cf { inner: cfi };
            it.seek_to_first();
            while it.valid() {
                let k = it.key().to_vec();
                self.lock(&cf, &k, LockMode::Exclusive, timeout)?;
                it.next();
            }
            it.status()?;
        }
        let parts = merges(&self.ws);
        let snap = self.snap.seq;
        let lv = self.lock_view();
        let buf = std::cell::RefCell::new(Vec::new());
        let check =
            |cf: u64, key: &[u8]| -> u64 { check_seq(&lv, &mut buf.borrow_mut(), cf, key, snap) };
        self.db.prepare_spilled(xid, self.id, parts, &check)?;
        self.prepared = Some(xid.to_vec());
        Ok(())
    }

    /// Commit of a write set with spilled runs: streams the merge of runs and
    /// memory (newest version per key, tombstones kept) into table files
    /// installed by one manifest edit (see `DbInner::commit_spilled`).
    fn commit_spilled(&mut self) -> Result<u64> {
        let op = self.op.load(Ordering::SeqCst);
        let mut parts = Vec::new();
        for w in self.ws.values() {
            let v = w.view.lock();
            // A large family in two key ranges, whose tables are written side by
            // side (`DbInner::write_spilled_tables`).
            match split_key(&v) {
                Some(mid) => {
                    let lo = MergeIter::new(ws_sources(&v, op), None, Some(mid.clone()), None);
                    let hi = MergeIter::new(ws_sources(&v, op), Some(mid), None, None);
                    parts.push((w.cf.clone(), lo.keep_deletes()));
                    parts.push((w.cf.clone(), hi.keep_deletes()));
                }
                None => {
                    let m = MergeIter::new(ws_sources(&v, op), None, None, None).keep_deletes();
                    parts.push((w.cf.clone(), m));
                }
            }
        }
        let snap = self.snap.seq;
        let lv = self.lock_view();
        // Called from the threads that check the parts (`DbInner::commit_spilled`).
        thread_local! {
            static CHECK_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let check = |cf: u64, key: &[u8]| -> u64 {
            CHECK_BUF.with(|buf| check_seq(&lv, &mut buf.borrow_mut(), cf, key, snap))
        };
        self.db.commit_spilled(parts, Some(&check), Vec::new())
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if let (false, Some(xid)) = (self.done, self.prepared.take()) {
            if self.spilled {
                // Spilled: the write set is in the durable .prep files.
                if self.db.detach_prepared(&xid, Vec::new()) {
                    return;
                }
            }
            // Prepared and unresolved: detach (keep locks, keep the write set
            // in the database's registry) so `Db::commit_prepared` /
            // `rollback_prepared` can resolve it.
            let ops = self
                .collect_ops()
                .map(|v| v.into_iter().map(|(_, o, _)| o).collect::<Vec<_>>());
            if let Ok(ops) = ops {
                if self.db.detach_prepared(&xid, ops) {
                    return;
                }
            }
        }
        self.release_locks();
    }
}

/// Takes range (gap) locks on behalf of a transaction; see lock.rs.
pub struct GapLocker {
    db: Arc<DbInner>,
    id: u64,
    cancel: Arc<std::sync::atomic::AtomicBool>,
}

impl GapLocker {
    /// Locks the keys `lo <= k <= hi` of `cf` (`hi = None`: no upper end)
    /// against inserts by other transactions until the transaction ends.
    /// Range locks do not conflict with each other; a request waits while
    /// another transaction has an uncommitted write inside the range.
    /// Errors as [`Txn::lock`]. Must not be used after the transaction ended.
    pub fn lock_range(
        &self,
        cf: &Cf,
        lo: &[u8],
        hi: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<()> {
        self.db.check_open()?;
        self.db
            .locks()
            .lock_range(self.id, cf.id(), lo, hi, timeout, &self.cancel)
    }

    /// Sequence of the latest visible commit (compare with
    /// [`TxnIter::read_seq`]: equal means a position read is still current).
    pub fn latest_seq(&self) -> u64 {
        self.db.visible_seq()
    }
}

/// Sources reading the committed state of a column family at `snap`.
fn db_sources(
    sv: &SuperVersion,
    snap: u64,
    lower: &Option<Vec<u8>>,
    upper: &Option<Vec<u8>>,
) -> Vec<Source> {
    let mut sources = Vec::new();
    sources.push(Source::new(Box::new(MemIter::new(sv.mem.clone())), snap));
    for m in sv.imms.iter().rev() {
        sources.push(Source::new(Box::new(MemIter::new(m.clone())), snap));
    }
    let in_range = |f: &crate::version::levels::FileHandle| {
        upper
            .as_ref()
            .map_or(true, |u| f.meta.smallest.as_slice() < u.as_slice())
            && lower
                .as_ref()
                .map_or(true, |l| f.meta.largest.as_slice() >= l.as_slice())
    };
    for (lvl, files) in sv.levels.levels.iter().enumerate() {
        if lvl == 0 {
            for f in files {
                if f.meta.min_seq <= snap && in_range(f) {
                    sources.push(Source::new(Box::new(TableIter::new(f.table.clone())), snap));
                }
            }
        } else {
            let fs: Vec<_> = files.iter().filter(|f| in_range(f)).cloned().collect();
            if !fs.is_empty() {
                sources.push(Source::new(
                    Box::new(crate::version::levels::LevelIter::new(fs)),
                    snap,
                ));
            }
        }
    }
    sources
}

/// What a latest-reading iterator needs to move to a newer sequence.
struct LatestState {
    db: Arc<DbInner>,
    cf: Arc<CfInner>,
    sv: Arc<SuperVersion>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// READ UNCOMMITTED: the reading transaction's id; other writers' write
    /// sets are merged in again at each seek (writers come and go).
    uncommitted_reader: Option<u64>,
}

/// Iterator of a transaction. `'static + Send`; holds its own snapshot and a
/// reference to the write set (sees the transaction's writes made before its
/// creation or last seek). Made by [`Txn::iter`] (snapshot reads) or
/// [`Txn::iter_latest`] (latest committed state, re-read at each seek).
pub struct TxnIter {
    merge: MergeIter,
    /// Registered snapshot the committed sources read at (pins versions
    /// against compaction GC).
    snap: Arc<SnapGuard>,
    op: Arc<AtomicU64>,
    /// The write set of the iterated column family (if it had one at creation).
    ws: Option<Arc<Mutex<WsView>>>,
    ws_runs: Vec<Arc<Run>>,
    ws_gen: u64,
    /// Number of leading write-set sources in `merge`.
    ws_sources: usize,
    latest: Option<LatestState>,
}

impl TxnIter {
    fn refresh_ws(&mut self) {
        if let Some(view) = &self.ws {
            let op = self.op.load(Ordering::SeqCst);
            let v = view.lock();
            if v.gen != self.ws_gen {
                let fresh = ws_sources(&v, op);
                let n = fresh.len();
                self.merge.sources_mut().splice(0..self.ws_sources, fresh);
                self.ws_sources = n;
                self.ws_runs = v.runs.clone();
                self.ws_gen = v.gen;
            } else {
                let srcs = self.merge.sources_mut();
                if let Some(src) = srcs.first_mut() {
                    src.snap = WS_BASE + op;
                }
                for (i, r) in self.ws_runs.iter().enumerate() {
                    if let Some(src) = srcs.get_mut(1 + i) {
                        src.snap = WS_BASE + op.min(r.limit());
                    }
                }
            }
        }
        if let Some(l) = &mut self.latest {
            let dirty = l
                .uncommitted_reader
                .map(|me| uncommitted_sources(&l.db.locks().uncommitted_write_sets(me, l.cf.id)));
            let g = l.db.snapshot();
            let sv = l.cf.current();
            if dirty.is_some() || g.seq != self.snap.seq || !Arc::ptr_eq(&sv, &l.sv) {
                let fresh = db_sources(&sv, g.seq, &l.lower, &l.upper);
                let srcs = self.merge.sources_mut();
                srcs.truncate(self.ws_sources);
                srcs.extend(dirty.into_iter().flatten());
                srcs.extend(fresh);
                self.merge.set_resolver(l.db.resolver(sv.levels.clone()));
                l.sv = sv;
                self.snap = g;
            }
        }
    }
    /// Sequence the committed part of the iterator reads at (the txn
    /// snapshot, or for [`Txn::iter_latest`] the latest sequence at the last
    /// seek).
    pub fn read_seq(&self) -> u64 {
        self.snap.seq
    }
    /// Positions at the first key >= `key`.
    pub fn seek(&mut self, key: &[u8]) {
        self.refresh_ws();
        self.merge.seek(key)
    }
    /// Positions at the last key <= `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        self.refresh_ws();
        self.merge.seek_for_prev(key)
    }
    pub fn seek_to_first(&mut self) {
        self.refresh_ws();
        self.merge.seek_to_first()
    }
    pub fn seek_to_last(&mut self) {
        self.refresh_ws();
        self.merge.seek_to_last()
    }
    pub fn next(&mut self) {
        self.merge.next()
    }
    pub fn prev(&mut self) {
        self.merge.prev()
    }
    pub fn valid(&self) -> bool {
        self.merge.valid()
    }
    /// Current key; empty when not valid.
    pub fn key(&self) -> &[u8] {
        self.merge.key()
    }
    /// Current value; empty when not valid.
    pub fn value(&self) -> &[u8] {
        self.merge.value()
    }
    /// An I/O or corruption error met while iterating (the iterator then
    /// becomes invalid).
    pub fn status(&self) -> Result<()> {
        self.merge.status()
    }
}
