//! One transaction per connection, as the handlerton sees it.
//!
//! The server's unit of atomicity is the statement inside the transaction: a failing
//! statement must undo only its own changes. So each statement opens an engine
//! savepoint ([`Trx::stmt_begin`]) that is released when it succeeds and rolled back
//! to when it fails. User savepoints (SAVEPOINT / ROLLBACK TO / RELEASE) are engine
//! savepoints too, named by ids the shim keeps in the server's savepoint area.
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tidesdb_core::{CancelHandle, CommitOptions, Isolation, Savepoint, Txn};

use crate::engine::engine;
use crate::fulltext::deferred::DeferredPostings;
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};

/// `tdb_trx` of the header.
pub struct Trx {
    txn: Option<Txn>,
    isolation: Isolation,
    stmt: Option<Savepoint>,
    user: BTreeMap<u64, Savepoint>,
    next_user_id: u64,
    /// How long a lock wait may last.
    pub lock_wait_timeout: Duration,
    /// SKIP LOCKED: row locks are tried without waiting (a row another
    /// transaction holds is skipped by the shim) and no gap is locked.
    pub skip_locked: bool,
    /// Cancels the active transaction's lock wait; shared with KILL QUERY's thread.
    cancel: Arc<Mutex<Option<CancelHandle>>>,
    /// The wsrep position slot this transaction writes (wsrep.rs), if any.
    wsrep_slot: Option<u32>,
    /// The engine transaction listed for brute-force aborts (wsrep.rs).
    wsrep_member: Option<u64>,
    /// The outcome of [`Trx::commit_ordered`], which the server's `commit()` that
    /// follows it reports ([`Trx::commit`]).
    ordered_outcome: Option<FfiResult<()>>,
    /// The statement's new FULLTEXT postings, not yet in `txn` (see
    /// `fulltext/deferred.rs`).
    ft_deferred: DeferredPostings,
}

/// InnoDB's default innodb_lock_wait_timeout.
const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(50);

/// `enum tdb_isolation` to the engine's levels. READ UNCOMMITTED also sees other
/// transactions' uncommitted writes; SERIALIZABLE runs as snapshot isolation plus the
/// shim's locking reads (see the README's isolation table).
pub fn isolation(level: u32) -> Isolation {
    match level {
        0 => Isolation::ReadUncommitted,
        1 => Isolation::ReadCommitted,
        2 => Isolation::RepeatableRead,
        _ => Isolation::Serializable,
    }
}

impl Default for Trx {
    fn default() -> Self {
        Trx {
            txn: None,
            isolation: Isolation::RepeatableRead,
            stmt: None,
            user: BTreeMap::new(),
            next_user_id: 1,
            lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
            skip_locked: false,
            cancel: Arc::new(Mutex::new(None)),
            wsrep_slot: None,
            wsrep_member: None,
            ordered_outcome: None,
            ft_deferred: DeferredPostings::default(),
        }
    }
}

impl Trx {
    pub fn begin(&mut self, level: Isolation) -> FfiResult<()> {
        if self.txn.is_none() {
            self.ordered_outcome = None;
            let txn = engine()?.db.begin(level);
            *self.cancel.lock() = Some(txn.cancel_handle());
            self.txn = Some(txn);
            self.isolation = level;
        }
        Ok(())
    }

    /// Locking reads lock gaps too (next-key locking): REPEATABLE READ and
    /// SERIALIZABLE, as InnoDB.
    pub fn gap_locking(&self) -> bool {
        self.txn.is_some()
            && matches!(
                self.isolation,
                Isolation::RepeatableRead | Isolation::Serializable
            )
            && !self.skip_locked
    }

    /// How long a row lock taken by a locking read may be waited for.
    pub fn read_lock_timeout(&self) -> Duration {
        if self.skip_locked {
            Duration::ZERO
        } else {
            self.lock_wait_timeout
        }
    }

    /// The active engine transaction and the statement's deferred FULLTEXT postings.
    pub fn txn_and_deferred(&mut self) -> FfiResult<(&mut Txn, &mut DeferredPostings)> {
        let txn = self
            .txn
            .as_mut()
            .ok_or_else(|| FfiError::new(Status::Invalid, "no active transaction"))?;
        Ok((txn, &mut self.ft_deferred))
    }

    /// Writes the deferred FULLTEXT postings to the transaction: before anything
    /// reads or removes postings through it, and before its statement or itself ends.
    pub fn flush_fulltext(&mut self) -> FfiResult<()> {
        if self.ft_deferred.is_empty() {
            return Ok(());
        }
        match self.txn.as_mut() {
            Some(txn) => self.ft_deferred.flush(txn),
            None => {
                self.ft_deferred.clear();
                Ok(())
            }
        }
    }

    /// The sequence the active transaction reads at (None: no transaction).
    pub fn snapshot_seq(&self) -> Option<u64> {
        self.txn.as_ref().map(Txn::snapshot_seq)
    }

    /// The active engine transaction.
    pub fn txn(&mut self) -> FfiResult<&mut Txn> {
        self.txn
            .as_mut()
            .ok_or_else(|| FfiError::new(Status::Invalid, "no active transaction"))
    }

    pub fn stmt_begin(&mut self) -> FfiResult<()> {
        if self.stmt.is_some() {
            return Ok(());
        }
        let isolation = self.isolation;
        let txn = self.txn()?;
        if matches!(
            isolation,
            Isolation::ReadCommitted | Isolation::ReadUncommitted
        ) {
            txn.refresh_snapshot();
        }
        self.stmt = Some(txn.savepoint());
        Ok(())
    }

    pub fn stmt_commit(&mut self) -> FfiResult<()> {
        self.flush_fulltext()?;
        if let Some(sp) = self.stmt.take() {
            self.txn()?.release(sp)?;
        }
        Ok(())
    }

    pub fn stmt_rollback(&mut self) -> FfiResult<()> {
        self.ft_deferred.clear();
        if let Some(sp) = self.stmt.take() {
            let txn = self.txn()?;
            txn.rollback_to(sp)?;
            txn.release(sp)?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Option<Txn> {
        if let Some(slot) = self.wsrep_slot.take() {
            crate::wsrep::release_slot(slot);
        }
        if let Some(id) = self.wsrep_member.take() {
            crate::wsrep::unregister(id);
        }
        self.stmt = None;
        self.user.clear();
        self.ft_deferred.clear();
        *self.cancel.lock() = None;
        self.txn.take()
    }

    pub fn commit(&mut self) -> FfiResult<()> {
        if let Some(outcome) = self.ordered_outcome.take() {
            return outcome;
        }
        self.commit_with(CommitOptions::default())
    }

    fn commit_with(&mut self, opts: CommitOptions) -> FfiResult<()> {
        if let Err(e) = self.flush_fulltext() {
            self.rollback();
            return Err(e);
        }
        match self.finish() {
            Some(txn) => {
                txn.commit_with(opts)?;
                crate::stats::COMMITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// The server's `commit_ordered()`: called in the order transactions commit in
    /// every engine and the binlog (serialised by the server), it makes the commit
    /// visible, so a snapshot taken under the same order (START TRANSACTION WITH
    /// CONSISTENT SNAPSHOT) sees one commit point in every engine. A prepared
    /// transaction's commit is written without waiting for an fsync: its prepare
    /// is durable and the coordinator (binlog or tc log) commits it again at
    /// recovery, until the engine says it is durable (`tdb_sync_wal` answering
    /// the server's commit checkpoint request). The outcome is kept for the
    /// `commit()` that follows: this call may run in another session's thread.
    pub fn commit_ordered(&mut self) {
        let prepared = self
            .txn
            .as_ref()
            .is_some_and(|t| t.prepared_xid().is_some());
        let outcome = self.commit_with(CommitOptions { sync: !prepared });
        self.ordered_outcome = Some(outcome);
    }

    pub fn rollback(&mut self) {
        if let Some(txn) = self.finish() {
            txn.rollback();
        }
    }

    /// Stores the cluster position `xid` with this transaction's writes
    /// (replicated commits, wsrep.rs); once per transaction.
    pub fn write_position(&mut self, xid: &[u8]) -> FfiResult<()> {
        self.flush_fulltext()?;
        // Stored already (at prepare), or nothing of the transaction is in
        // this engine.
        if self.wsrep_slot.is_some() || self.ordered_outcome.is_some() {
            return Ok(());
        }
        let txn = self.txn()?;
        if txn.prepared_xid().is_some() || txn.is_read_only() {
            return Ok(());
        }
        let slot = crate::wsrep::write_position(self.txn()?, xid)?;
        self.wsrep_slot = Some(slot);
        Ok(())
    }

    pub fn prepare(&mut self, xid: &[u8]) -> FfiResult<()> {
        self.flush_fulltext()?;
        Ok(self.txn()?.prepare(xid)?)
    }

    pub fn savepoint_set(&mut self) -> FfiResult<u64> {
        self.flush_fulltext()?;
        let sp = self.txn()?.savepoint();
        let id = self.next_user_id;
        self.next_user_id += 1;
        self.user.insert(id, sp);
        Ok(id)
    }

    pub fn savepoint_rollback(&mut self, id: u64) -> FfiResult<()> {
        self.ft_deferred.clear();
        let sp = *self.user.get(&id).ok_or_else(|| unknown_savepoint(id))?;
        self.txn()?.rollback_to(sp)?;
        // Savepoints set after this one are gone, as in the server.
        self.user.retain(|&k, _| k <= id);
        Ok(())
    }

    pub fn savepoint_release(&mut self, id: u64) -> FfiResult<()> {
        let sp = self.user.remove(&id).ok_or_else(|| unknown_savepoint(id))?;
        self.txn()?.release(sp)?;
        self.user.retain(|&k, _| k < id);
        Ok(())
    }
}

fn unknown_savepoint(id: u64) -> FfiError {
    FfiError::new(Status::Invalid, format!("unknown savepoint {id}"))
}

/// Runs `f` on the transaction behind a handle.
fn with_trx(trx: *mut Trx, f: impl FnOnce(&mut Trx) -> FfiResult<()>) -> c_int {
    guard(|| {
        // SAFETY: the shim passes a live handle made by tdb_trx_new.
        let trx = unsafe { raw::handle(trx) }?;
        f(trx)
    })
}

#[no_mangle]
pub extern "C" fn tdb_trx_new() -> *mut Trx {
    guard_value(std::ptr::null_mut(), || {
        Ok(Box::into_raw(Box::<Trx>::default()))
    })
}

/// # Safety
/// `trx` must be NULL or a handle from `tdb_trx_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_free(trx: *mut Trx) {
    guard(|| {
        if !trx.is_null() {
            // SAFETY: made by Box::into_raw in tdb_trx_new and freed once.
            let mut boxed = unsafe { Box::from_raw(trx) };
            // A prepared transaction outlives its connection (XA): dropping it
            // detaches it in the engine. Anything else is rolled back.
            if boxed
                .txn
                .as_ref()
                .is_some_and(|t| t.prepared_xid().is_some())
            {
                // Its position slot stays locked by the detached transaction:
                // never handed out again.
                boxed.wsrep_slot = None;
                boxed.finish();
            } else {
                boxed.rollback();
            }
        }
        Ok(())
    });
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_begin(trx: *mut Trx, level: u32) -> c_int {
    with_trx(trx, |t| t.begin(isolation(level)))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_snapshot(trx: *mut Trx) -> c_int {
    with_trx(trx, |t| {
        t.txn()?.refresh_snapshot();
        Ok(())
    })
}

/// # Safety
/// `trx` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_is_active(trx: *const Trx) -> c_int {
    guard_value(0, || {
        // SAFETY: NULL or a live handle by contract.
        Ok(c_int::from(
            unsafe { trx.as_ref() }.is_some_and(|t| t.txn.is_some()),
        ))
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_stmt_begin(trx: *mut Trx) -> c_int {
    with_trx(trx, Trx::stmt_begin)
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_stmt_commit(trx: *mut Trx) -> c_int {
    with_trx(trx, Trx::stmt_commit)
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_stmt_rollback(trx: *mut Trx) -> c_int {
    with_trx(trx, Trx::stmt_rollback)
}

/// # Safety
/// `trx` must be a live handle (its session's `commit()` is not running).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_commit_ordered(trx: *mut Trx) {
    with_trx(trx, |t| {
        t.commit_ordered();
        Ok(())
    });
}

/// Makes every commit written so far durable (the server's commit checkpoint).
#[no_mangle]
pub extern "C" fn tdb_sync_wal() -> c_int {
    guard(|| Ok(engine()?.db.sync_wal()?))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_commit(trx: *mut Trx) -> c_int {
    with_trx(trx, Trx::commit)
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_rollback(trx: *mut Trx) -> c_int {
    with_trx(trx, |t| {
        // Counted here, where the server asks for it (the shim's private
        // transactions that read statistics end in tdb_trx_free instead).
        if t.txn.is_some() {
            crate::stats::ROLLBACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        t.rollback();
        Ok(())
    })
}

/// # Safety
/// `out_id` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_savepoint_set(trx: *mut Trx, out_id: *mut u64) -> c_int {
    with_trx(trx, |t| {
        let id = t.savepoint_set()?;
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out_id, id) }
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_savepoint_rollback(trx: *mut Trx, id: u64) -> c_int {
    with_trx(trx, |t| t.savepoint_rollback(id))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_savepoint_release(trx: *mut Trx, id: u64) -> c_int {
    with_trx(trx, |t| t.savepoint_release(id))
}

/// # Safety
/// `trx` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_set_lock_wait_timeout(trx: *mut Trx, millis: u64) -> c_int {
    with_trx(trx, |t| {
        t.lock_wait_timeout = Duration::from_millis(millis);
        Ok(())
    })
}

/// # Safety
/// `trx` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_set_skip_locked(trx: *mut Trx, on: c_int) -> c_int {
    with_trx(trx, |t| {
        t.skip_locked = on != 0;
        Ok(())
    })
}

/// # Safety
/// `trx` must be NULL or a live handle. Only the cancel slot is touched, which is
/// shared behind a mutex, so this may run on another thread than the owner's.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_cancel(trx: *const Trx) {
    guard(|| {
        // SAFETY: NULL or a live handle by contract; only the shared slot is read.
        if let Some(t) = unsafe { trx.as_ref() } {
            if let Some(handle) = t.cancel.lock().as_ref() {
                handle.cancel();
            }
        }
        Ok(())
    });
}

/// # Safety
/// `trx` must be NULL or a live handle; `xid` must point to `xid_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_prepare(trx: *mut Trx, xid: *const u8, xid_len: usize) -> c_int {
    with_trx(trx, |t| {
        crate::engine::writable()?;
        // SAFETY: a valid buffer by contract.
        let xid = unsafe { raw::bytes(xid, xid_len) }?;
        t.prepare(xid)
    })
}

/// # Safety
/// `trx` must be NULL or a live handle; `thd` the session's THD, alive until
/// the transaction ends.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_set_wsrep(trx: *mut Trx, thd: *mut c_void, bf: c_int) -> c_int {
    with_trx(trx, |t| {
        let txn = t.txn()?;
        txn.set_lock_escalation(bf == 0);
        let (id, cancel) = (txn.id(), txn.cancel_handle());
        crate::wsrep::register(id, thd as usize, bf != 0, cancel);
        t.wsrep_member = Some(id);
        Ok(())
    })
}

/// # Safety
/// `trx` must be NULL or a live handle; `xid` must point to `xid_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_trx_write_wsrep_position(
    trx: *mut Trx,
    xid: *const u8,
    xid_len: usize,
) -> c_int {
    with_trx(trx, |t| {
        // SAFETY: a valid buffer by contract.
        let xid = unsafe { raw::bytes(xid, xid_len) }?;
        t.write_position(xid)
    })
}

/// How long XA COMMIT / ROLLBACK of a detached xid waits for the session that
/// prepared it to release its transaction. The server makes the xid visible to
/// other sessions (`trans_xa_detach`) before it closes the session's engine state
/// (`close_connection`), and ignores what `commit_by_xid` returns: resolving it
/// in that window must wait, or the XA COMMIT is acknowledged and lost.
const XID_OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// # Safety
/// `xid` must point to `xid_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_xa_commit(xid: *const u8, xid_len: usize) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: a valid buffer by contract.
        let xid = unsafe { raw::bytes(xid, xid_len) }?;
        Ok(engine()?
            .db
            .resolve_prepared_waiting(xid, true, XID_OWNER_WAIT)?)
    })
}

/// # Safety
/// `xid` must point to `xid_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_xa_rollback(xid: *const u8, xid_len: usize) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: a valid buffer by contract.
        let xid = unsafe { raw::bytes(xid, xid_len) }?;
        Ok(engine()?
            .db
            .resolve_prepared_waiting(xid, false, XID_OWNER_WAIT)?)
    })
}

/// The callback `tdb_xa_recover` reports each prepared xid to.
pub type XidCallback = unsafe extern "C" fn(ctx: *mut c_void, xid: *const u8, xid_len: usize);

/// # Safety
/// `found` must be a valid function that accepts `ctx`.
#[no_mangle]
pub unsafe extern "C" fn tdb_xa_recover(found: Option<XidCallback>, ctx: *mut c_void) -> usize {
    crate::status::guard_value(0, || {
        let e = engine()?;
        if e.force_recovery > 0 {
            // Read-only: the server must not resolve them now; they stay prepared
            // on disk for the next normal start.
            return Ok(0);
        }
        let prepared = e.db.recover_prepared();
        if let Some(found) = found {
            for p in &prepared {
                // SAFETY: the caller's callback, called with a buffer valid for the call.
                unsafe { found(ctx, p.xid().as_ptr(), p.xid().len()) };
            }
        }
        Ok(prepared.len())
    })
}
