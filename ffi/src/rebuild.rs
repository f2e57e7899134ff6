//! Online rebuild of a table (ALTER TABLE ... ALGORITHM=INPLACE, LOCK=NONE for what
//! rewrites rows: FORCE, column type and NOT NULL changes, primary key changes,
//! ADD UNIQUE): a new table (new id, so new families for the rows, every index and
//! the external values) is filled from a snapshot of the old one while other
//! connections go on writing the old one.
//!
//! How the writes made meanwhile reach the new table:
//! - [`Rebuild::begin`] runs while the server holds the table exclusively (before
//!   `prepare_inplace_alter_table` returns), and starts the table's rebuild log
//!   ([`TableShared::start_rebuild_log`]): from then on every `tdb_apply` records
//!   the row keys it writes, before writing them.
//! - The shim then takes its snapshot and converts every row it holds into the
//!   new families ([`Rebuild::put`]).
//! - At the switch (`commit_inplace_alter_table`, the server's exclusive lock
//!   again, so every transaction that wrote the table has ended) the shim takes
//!   the logged keys ([`Rebuild::take_log`]). A row change that is not in the
//!   snapshot was logged (logging started before the snapshot was taken), so for
//!   each logged key the new table's content derived from the snapshot's version
//!   of the row is deleted, and that derived from its latest committed version is
//!   put (all deletes first: a value that moved from one row to another is not a
//!   duplicate). A duplicate among the puts fails the ALTER.
//! - [`Rebuild::commit`] then swaps the table's catalog entry to the new id in
//!   one transaction ([`Catalog::install_rebuilt`]) and drops the old families.
//!   A crash or a failure before it leaves the old table as it was: the new
//!   families are dropped by [`Drop`], or, after a crash, by the next start (no
//!   catalog entry names them). No other transaction ever writes the new
//!   families, so dropping them never breaks another connection's commit.
//! - A REPEATABLE READ snapshot older than the new families' last write would
//!   read them incompletely: its reads of the table are refused, as InnoDB's
//!   ([`TableShared::readable_at`], `tdb_index_readable`).
use std::ffi::{c_char, c_int};
use std::sync::Arc;

use std::time::Duration;

use tidesdb_core::{Cf, Db, Isolation, LockMode, Txn};

use crate::catalog::{Catalog, TableMeta, TableShared, BLOB_INDEX};
use crate::columns::{ColumnVersions, StoredColumn};
use crate::engine::engine;
use crate::index_build::BATCH_BYTES;
use crate::raw;
use crate::status::{guard, FfiError, FfiResult, Status};

/// `tdb_rebuild` of the header.
pub struct Rebuild {
    db: Db,
    name: String,
    shared: Arc<TableShared>,
    meta: TableMeta,
    /// Rows, then the secondary indexes, then the external values.
    cfs: Vec<Cf>,
    txn: Option<Txn>,
    batch_bytes: usize,
    /// The keys of the last [`Rebuild::take_log`].
    replay: Vec<Vec<u8>>,
    committed: bool,
}

impl Rebuild {
    /// Creates the new table's families (its secondary indexes: `sources`, see
    /// [`Catalog::create_rebuild_cfs`]; its columns: version 1 of `columns`) and
    /// starts logging the old table's writes.
    pub fn begin(name: &str, sources: &[u32], columns: Vec<StoredColumn>) -> FfiResult<Rebuild> {
        let e = engine()?;
        let shared = e.catalog.open_table(&e.db, name)?;
        let columns = ColumnVersions::initial(columns)?;
        let (meta, cfs) = e
            .catalog
            .create_rebuild_cfs(&e.db, name, sources, columns)?;
        if let Err(err) = shared.start_rebuild_log() {
            let _ = Catalog::drop_rebuild_cfs(&e.db, &meta);
            return Err(err);
        }
        Ok(Rebuild {
            db: e.db.clone(),
            name: name.to_string(),
            shared,
            meta,
            cfs,
            txn: None,
            batch_bytes: 0,
            replay: Vec::new(),
            committed: false,
        })
    }

    /// The new table's column versions, flat as `tdb_table_columns` gives them.
    pub fn columns_flat(&self) -> Vec<u32> {
        self.meta
            .columns
            .as_ref()
            .map(ColumnVersions::flat)
            .unwrap_or_default()
    }

    fn cf(&self, index: u32) -> FfiResult<Cf> {
        let at = if index == BLOB_INDEX {
            self.cfs.len().checked_sub(1)
        } else {
            Some(index as usize).filter(|&i| i + 1 < self.cfs.len())
        };
        at.and_then(|i| self.cfs.get(i).cloned())
            .ok_or_else(|| FfiError::new(Status::Invalid, format!("no rebuilt index {index}")))
    }

    fn txn(&mut self) -> &mut Txn {
        let db = &self.db;
        self.txn
            .get_or_insert_with(|| db.begin(Isolation::ReadCommitted))
    }

    fn account(&mut self, bytes: usize) -> FfiResult<()> {
        self.batch_bytes += bytes;
        if self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits the writes so far.
    pub fn flush(&mut self) -> FfiResult<()> {
        self.batch_bytes = 0;
        if let Some(txn) = self.txn.take() {
            txn.commit()?;
        }
        Ok(())
    }

    /// Puts `key` -> `value` into family `index` of the new table (0 = rows,
    /// 1.. = secondary indexes, `BLOB_INDEX` = external values). With `unique`,
    /// an existing `key` is a duplicate (`Status::Duplicate`).
    pub fn put(&mut self, index: u32, key: &[u8], value: &[u8], unique: bool) -> FfiResult<()> {
        let cf = self.cf(index)?;
        let txn = self.txn();
        if unique && txn.get(&cf, key)?.is_some() {
            return Err(FfiError::quiet(Status::Duplicate));
        }
        txn.put(&cf, key, value)?;
        self.account(key.len() + value.len())
    }

    /// Deletes `key` from family `index` of the new table.
    pub fn delete(&mut self, index: u32, key: &[u8]) -> FfiResult<()> {
        let cf = self.cf(index)?;
        self.txn().delete(&cf, key)?;
        self.account(key.len())
    }

    /// Takes the row keys the old table's writers logged since the last call, in
    /// key order; returns how many ([`Rebuild::logged_key`] reads them).
    pub fn take_log(&mut self) -> usize {
        self.replay = self.shared.take_rebuild_log();
        self.replay.len()
    }

    pub fn logged_key(&self, i: usize) -> FfiResult<&[u8]> {
        self.replay
            .get(i)
            .map(Vec::as_slice)
            .ok_or_else(|| FfiError::new(Status::Invalid, format!("no logged key {i}")))
    }

    /// The switch: the table becomes the rebuilt one. The caller holds the table
    /// exclusively and has replayed the whole log.
    pub fn commit(&mut self, lock_wait: Duration) -> FfiResult<()> {
        Self::commit_group(&mut [self], None, lock_wait)
    }

    /// Everything is written and nothing is left in the log.
    fn check_replayed(&mut self) -> FfiResult<()> {
        self.flush()?;
        if self.take_log() != 0 {
            return Err(FfiError::new(
                Status::Internal,
                "rows were written after the rebuild's last replay",
            ));
        }
        Ok(())
    }

    /// The switch of several rebuilds (the partitions of one partitioned table)
    /// in one catalog transaction ([`Catalog::install_rebuilt_group`]): a crash
    /// or failure before it leaves every old table as it was, after it every
    /// table is the rebuilt one. `marker`: see `install_rebuilt_group`. The
    /// caller holds the tables exclusively and has replayed every log.
    ///
    /// A child row's FOREIGN KEY check locks the referenced value in the
    /// parent's index family without the parent's metadata lock
    /// (`tdb_fk_probe`), so the server's exclusive lock does not keep it out:
    /// the switch first takes a table lock on every old family, waiting (up to
    /// `lock_wait`) for the transactions that hold such locks and keeping new
    /// ones out until the catalog names the new families (a check that waited
    /// then locks the new family: `tdb_fk_probe`).
    pub fn commit_group(
        builds: &mut [&mut Rebuild],
        marker: Option<(&str, &[u8])>,
        lock_wait: Duration,
    ) -> FfiResult<()> {
        for b in builds.iter_mut() {
            b.check_replayed()?;
        }
        // Every entry of the new families is committed by now: a snapshot from
        // here on reads them all; an older one is refused (readable_at).
        let e = engine()?;
        let filled = e.db.latest_sequence();
        let tables: Vec<(&str, &TableMeta)> =
            builds.iter().map(|b| (b.name.as_str(), &b.meta)).collect();
        let old_cfs: Vec<Cf> = builds.iter().flat_map(|b| b.shared.cfs()).collect();
        let mut fence = e.db.begin(Isolation::ReadCommitted);
        if let Err(err) = fence.lock_tables(&old_cfs, LockMode::Exclusive, lock_wait) {
            fence.rollback();
            return Err(err.into());
        }
        // The new definition's keys are recorded after the switch: until then a
        // check resolving against the old ones must not use the new families.
        for (i, b) in builds.iter().enumerate() {
            if let Err(err) = e.fks.keys_pending(&e.db, e.catalog.cf(), &b.name) {
                for done in &builds[..i] {
                    let _ = e.fks.keys_settled(&e.db, e.catalog.cf(), &done.name);
                }
                fence.rollback();
                return Err(err);
            }
        }
        let installed = e.catalog.install_rebuilt_group(&e.db, &tables, marker);
        fence.rollback();
        // The catalog transaction either committed (every table is the rebuilt
        // one; a failure after it only left old families, which the next start
        // drops) or did not (each build's Drop drops its new families).
        let switched = match &installed {
            Ok(()) => true,
            Err(_) => builds
                .first()
                .is_some_and(|b| e.catalog.is_installed(&e.db, &b.name, &b.meta)),
        };
        if switched {
            for b in builds.iter_mut() {
                b.shared.defined_at(filled);
                b.committed = true;
                b.shared.end_rebuild_log();
            }
        } else {
            for b in builds.iter() {
                let _ = e.fks.keys_settled(&e.db, e.catalog.cf(), &b.name);
            }
        }
        installed
    }
}

impl Drop for Rebuild {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            txn.rollback();
        }
        if !self.committed {
            self.shared.end_rebuild_log();
            let _ = Catalog::drop_rebuild_cfs(&self.db, &self.meta);
        }
    }
}

/// # Safety
/// `name` NUL-terminated; `sources` `n_indexes` values; `ids` and `flags`
/// `n_columns` values each; `out` valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_begin(
    name: *const c_char,
    sources: *const u32,
    n_indexes: usize,
    ids: *const u32,
    flags: *const u8,
    n_columns: usize,
    out: *mut *mut Rebuild,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        // SAFETY: `n_indexes` values by contract.
        let sources = unsafe { raw::slice(sources, n_indexes) }?;
        // SAFETY: `n_columns` values each by contract.
        let ids = unsafe { raw::slice(ids, n_columns) }?;
        // SAFETY: as above.
        let flags = unsafe { raw::slice(flags, n_columns) }?;
        let columns = ids
            .iter()
            .zip(flags)
            .map(|(&id, &flags)| StoredColumn { id, flags })
            .collect();
        let build = Box::new(Rebuild::begin(name, sources, columns)?);
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, Box::into_raw(build)) }
    })
}

/// # Safety
/// `build` a live handle, `out` NULL or valid for `cap` writes, `n` for one.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_columns(
    build: *mut Rebuild,
    out: *mut u32,
    cap: usize,
    n: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        let flat = build.columns_flat();
        if !out.is_null() && cap >= flat.len() {
            // SAFETY: valid for `cap` writes by contract.
            unsafe { std::ptr::copy_nonoverlapping(flat.as_ptr(), out, flat.len()) };
        }
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(n, flat.len()) }
    })
}

/// # Safety
/// `build` a live handle; `key` / `value` valid buffers of their lengths.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_put(
    build: *mut Rebuild,
    index: u32,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    unique: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle and valid buffers by contract.
        let build = unsafe { raw::handle(build) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        // SAFETY: as above.
        let value = unsafe { raw::bytes(value, value_len) }?;
        build.put(index, key, value, unique != 0)
    })
}

/// # Safety
/// `build` a live handle; `key` a valid buffer of its length.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_delete(
    build: *mut Rebuild,
    index: u32,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle and a valid buffer by contract.
        let build = unsafe { raw::handle(build) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        build.delete(index, key)
    })
}

/// # Safety
/// `build` a live handle; `n` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_take_log(build: *mut Rebuild, n: *mut usize) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        let count = build.take_log();
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(n, count) }
    })
}

/// # Safety
/// `build` a live handle; `key` and `len` valid for a write each. The key stays
/// valid until the next `tdb_rebuild_take_log` or `tdb_rebuild_free`.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_logged_key(
    build: *mut Rebuild,
    i: usize,
    key: *mut *const u8,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        let k = build.logged_key(i)?;
        // SAFETY: valid for writes by contract.
        unsafe { raw::write_out(key, k.as_ptr()) }?;
        // SAFETY: as above.
        unsafe { raw::write_out(len, k.len()) }
    })
}

/// # Safety
/// `build` a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_commit(build: *mut Rebuild, lock_wait_ms: u64) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        build.commit(Duration::from_millis(lock_wait_ms))
    })
}

/// # Safety
/// `builds` `n` live handles; `path` NULL or NUL-terminated; `version` NULL or
/// `version_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_commit_group(
    builds: *const *mut Rebuild,
    n: usize,
    path: *const c_char,
    version: *const u8,
    version_len: usize,
    lock_wait_ms: u64,
) -> c_int {
    guard(|| {
        // SAFETY: `n` handles by contract.
        let handles = unsafe { raw::slice(builds, n) }?;
        let distinct: std::collections::HashSet<usize> =
            handles.iter().map(|&h| h as usize).collect();
        if distinct.len() != handles.len() {
            return Err(FfiError::new(Status::Invalid, "a rebuild named twice"));
        }
        let mut group = Vec::with_capacity(n);
        for &h in handles {
            // SAFETY: a live handle by contract, each named once (checked above).
            group.push(unsafe { raw::handle(h) }?);
        }
        let marker = if path.is_null() {
            None
        } else {
            // SAFETY: NUL-terminated by contract.
            let path = unsafe { raw::str(path) }?;
            // SAFETY: `version_len` bytes by contract.
            let version = unsafe { raw::bytes(version, version_len) }?;
            Some((path, version))
        };
        Rebuild::commit_group(&mut group, marker, Duration::from_millis(lock_wait_ms))
    })
}

/// # Safety
/// `path` NUL-terminated; `version` `version_len` bytes; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_group_committed(
    path: *const c_char,
    version: *const u8,
    version_len: usize,
    out: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: NUL-terminated by contract.
        let path = unsafe { raw::str(path) }?;
        // SAFETY: `version_len` bytes by contract.
        let version = unsafe { raw::bytes(version, version_len) }?;
        let e = engine()?;
        let done = e.catalog.group_switch_committed(&e.db, path, version)?;
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, c_int::from(done)) }
    })
}

/// # Safety
/// `build` NULL or a handle from `tdb_rebuild_begin`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_rebuild_free(build: *mut Rebuild) {
    guard(|| {
        if !build.is_null() {
            // SAFETY: made by Box::into_raw in tdb_rebuild_begin and freed once.
            drop(unsafe { Box::from_raw(build) });
        }
        Ok(())
    });
}
