//! Table DDL and per-handler table handles: atomic row changes and point reads.
use std::ffi::{c_char, c_int};
use std::sync::Arc;
use std::time::Duration;

use tidesdb_core::{Cf, CfOptions, Compression, IterOptions, LockMode, SharedBytes, Txn};

use crate::catalog::{building_slot, TableShared};
use crate::columns::{ColumnVersions, StoredColumn};
use crate::engine::engine;
use crate::fulltext;
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};
use crate::trx::Trx;

/// `tdb_table` of the header: one per open handler.
pub struct Table {
    pub shared: Arc<TableShared>,
    /// Holds the value of the last `tdb_get` for the caller to read (a
    /// cached value is shared with the block cache, not copied).
    scratch: SharedBytes,
}

impl Table {
    /// Keeps `bytes` in the handle and points the caller's out-parameters at them
    /// (valid until the next call on this handle).
    ///
    /// # Safety
    /// `ptr` and `len` must be valid for writes.
    unsafe fn hand_out(
        &mut self,
        bytes: SharedBytes,
        ptr: *mut *const u8,
        len: *mut usize,
    ) -> FfiResult<()> {
        self.scratch = bytes;
        // SAFETY: writable by the caller's contract.
        unsafe {
            raw::write_out(ptr, self.scratch.as_ptr())?;
            raw::write_out(len, self.scratch.len())
        }
    }
}

/// `struct tdb_op` of the header.
#[repr(C)]
pub struct Op {
    pub index: u32,
    pub kind: u32,
    pub lock: u32,
    pub key: *const u8,
    pub key_len: usize,
    pub value: *const u8,
    pub value_len: usize,
    pub unique_len: usize,
}

const OP_PUT: u32 = 0;
const OP_DELETE: u32 = 1;
/// FULLTEXT index ops: key = primary key, value = the row's document (see
/// `fulltext`); the postings it implies are added / removed.
const OP_FT_PUT: u32 = 2;
const OP_FT_DELETE: u32 = 3;

/// The smallest key greater than every key that starts with `prefix`, or None when
/// there is none (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last != 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// True if a key other than `key` that starts with `key[..unique_len]` is visible to
/// the transaction (or `key` itself when the whole key is the unique part). A key the
/// transaction has locked is checked against the latest committed data: the lock
/// holder before us may have committed it after our snapshot.
fn violates_unique(
    txn: &mut Txn,
    cf: &Cf,
    key: &[u8],
    unique_len: usize,
    locked: bool,
) -> FfiResult<bool> {
    let unique = key
        .get(..unique_len)
        .ok_or_else(|| FfiError::new(Status::Invalid, "unique_len is longer than the key"))?;
    if unique_len == key.len() {
        let existing = if locked {
            txn.get_latest(cf, key)?
        } else {
            txn.get(cf, key)?
        };
        return Ok(existing.is_some());
    }
    let opts = IterOptions {
        lower_bound: Some(unique.to_vec()),
        upper_bound: prefix_successor(unique),
    };
    let mut it = txn.iter(cf, opts)?;
    it.seek(unique);
    while it.valid() && it.key().starts_with(unique) {
        if it.key() != key {
            return Ok(true);
        }
        it.next();
    }
    it.status()?;
    Ok(false)
}

/// Applies `ops` atomically: on any error none of them stays applied (locks taken
/// stay, as in InnoDB). On a failed unique check the error is TDB_DUPLICATE and
/// `failed` is that op's position.
pub fn apply(trx: &mut Trx, table: &Table, ops: &[Op], failed: &mut usize) -> FfiResult<()> {
    let timeout = trx.lock_wait_timeout;
    // A document's postings are removed only after the adds before them are in.
    if ops.iter().any(|op| op.kind == OP_FT_DELETE) {
        trx.flush_fulltext()?;
    }
    let (txn, deferred) = trx.txn_and_deferred()?;
    let deferred_mark = deferred.mark();
    let sp = txn.savepoint();
    // An online rebuild replays the rows these ops write (rebuild.rs).
    table.shared.note_row_writes(
        ops.iter()
            .filter(|op| op.index == 0 && matches!(op.kind, OP_PUT | OP_DELETE))
            // SAFETY: the shim passes key buffers valid for the call.
            .filter_map(|op| unsafe { raw::bytes(op.key, op.key_len) }.ok()),
    );
    let result = (|| -> FfiResult<()> {
        // An unlocked put after a locked first op on the rows index is written under
        // that row's lock (see `struct tdb_op` in the header).
        let mut cover: Option<(Cf, &[u8])> = None;
        // Ops in the order their indexes were created (the rows first): the
        // first unique key a row clashes on is InnoDB's, which decides the
        // duplicate REPLACE / ON DUPLICATE KEY UPDATE acts on. A stable sort:
        // the ops of one index keep their order (an UPDATE's delete, then put).
        let mut order: Vec<usize> = (0..ops.len()).collect();
        if let Some(ranks) = table.shared.creation_ranks() {
            let rank = |index: u32| match index {
                0 => 0,
                i => ranks.get(i as usize - 1).copied().unwrap_or(u32::MAX),
            };
            order.sort_by_key(|&i| ops.get(i).map_or(u32::MAX, |op| rank(op.index)));
        }
        for &i in &order {
            let Some(op) = ops.get(i) else { continue };
            *failed = i;
            let cf = match building_slot(op.index) {
                // An index an online ADD INDEX builds. Its build may have ended
                // (rolled back) since the shim saw it: the op then has nothing
                // left to maintain.
                Some(slot) => match table.shared.building_cf(slot) {
                    Some(cf) => cf,
                    None => continue,
                },
                None => table.shared.cf(op.index)?,
            };
            // SAFETY: the shim passes key/value buffers valid for the call.
            let key = unsafe { raw::bytes(op.key, op.key_len) }?;
            let locked = op.lock != 0;
            if locked {
                txn.lock(&cf, key, LockMode::Exclusive, timeout)?;
                if i == 0 && op.index == 0 {
                    cover = Some((cf.clone(), key));
                }
            }
            match op.kind {
                OP_PUT => {
                    // SAFETY: as above.
                    let value = unsafe { raw::bytes(op.value, op.value_len) }?;
                    if op.unique_len > 0 && violates_unique(txn, &cf, key, op.unique_len, locked)? {
                        return Err(FfiError::quiet(Status::Duplicate));
                    }
                    match cover {
                        Some((ref row_cf, row_key)) if !locked => {
                            txn.put_covered(&cf, key, value, row_cf, row_key)?
                        }
                        _ => txn.put(&cf, key, value)?,
                    }
                    // Next-key locking: wait while another transaction has locked
                    // a range holding this key (one atomic load if none exists).
                    txn.check_insert(&cf, key, timeout)?;
                }
                OP_DELETE => txn.delete(&cf, key)?,
                OP_FT_PUT => {
                    // SAFETY: as above.
                    let doc = unsafe { raw::bytes(op.value, op.value_len) }?;
                    let settings = fulltext::settings::of_index(txn, &cf)?;
                    fulltext::defer_document(deferred, &cf, &settings, key, doc)?;
                }
                OP_FT_DELETE => {
                    // SAFETY: as above.
                    let doc = unsafe { raw::bytes(op.value, op.value_len) }?;
                    let settings = fulltext::settings::of_index(txn, &cf)?;
                    fulltext::apply_document(txn, &cf, &settings, key, doc, false)?;
                }
                other => {
                    return Err(FfiError::new(
                        Status::Invalid,
                        format!("unknown op kind {other}"),
                    ))
                }
            }
        }
        Ok(())
    })();
    if result.is_err() {
        deferred.truncate(deferred_mark);
        txn.rollback_to(sp)?;
    }
    txn.release(sp)?;
    if result.is_ok() && deferred.bytes() >= fulltext::deferred::FLUSH_BYTES {
        deferred.flush(txn)?;
    }
    result
}

// ---- DDL ----------------------------------------------------------------------------

fn with_name(name: *const c_char, f: impl FnOnce(&str) -> FfiResult<()>) -> c_int {
    guard(|| {
        // SAFETY: the shim passes NUL-terminated names.
        let name = unsafe { raw::str(name) }?;
        f(name)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_create(
    name: *const c_char,
    n_indexes: u32,
    auto_increment: u64,
    opts: *const TableOptions,
) -> c_int {
    with_name(name, |name| {
        crate::engine::writable()?;
        // SAFETY: NULL or a valid struct, by contract.
        let cf_opts = match unsafe { opts.as_ref() } {
            Some(o) => o.to_cf_options()?,
            None => CfOptions::default(),
        };
        let e = engine()?;
        e.catalog
            .create_with(&e.db, name, n_indexes, auto_increment, &cf_opts)
    })
}

/// # Safety
/// As `tdb_table_create`; `ids` and `flags` NULL or `n_columns` values each.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_create_columns(
    name: *const c_char,
    n_indexes: u32,
    auto_increment: u64,
    opts: *const TableOptions,
    ids: *const u32,
    flags: *const u8,
    n_columns: usize,
) -> c_int {
    with_name(name, |name| {
        crate::engine::writable()?;
        // SAFETY: NULL or a valid struct, by contract.
        let cf_opts = match unsafe { opts.as_ref() } {
            Some(o) => o.to_cf_options()?,
            None => CfOptions::default(),
        };
        // SAFETY: `n_columns` values each, by contract.
        let ids = unsafe { raw::slice(ids, n_columns) }?;
        // SAFETY: as above.
        let flags = unsafe { raw::slice(flags, n_columns) }?;
        let columns = ColumnVersions::initial(
            ids.iter()
                .zip(flags)
                .map(|(&id, &flags)| StoredColumn { id, flags })
                .collect(),
        )?;
        let e = engine()?;
        e.catalog.create_versioned(
            &e.db,
            name,
            n_indexes,
            auto_increment,
            &cf_opts,
            Some(columns),
        )
    })
}

/// # Safety
/// `table` must be a live handle, `out` NULL or valid for `cap` writes, `n` for one.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_columns(
    table: *const Table,
    out: *mut u32,
    cap: usize,
    n: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let t = unsafe { table.as_ref() }
            .ok_or_else(|| FfiError::new(Status::Invalid, "NULL table"))?;
        let flat = t.shared.columns().map(|c| c.flat()).unwrap_or_default();
        if !out.is_null() && cap >= flat.len() {
            // SAFETY: valid for `cap` writes by contract.
            unsafe { std::ptr::copy_nonoverlapping(flat.as_ptr(), out, flat.len()) };
        }
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(n, flat.len()) }
    })
}

/// `struct tdb_table_options` of the header: the options of every column family
/// of a new table.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    pub compression: u32,
    pub compression_level: i32,
    pub bloom_bits_per_key: u32,
    pub block_size: u32,
    pub value_separation_threshold: u64,
    /// 1: the table's files are encrypted with key `encryption_key_id`.
    pub encrypted: u32,
    pub encryption_key_id: u32,
}

/// `TDB_COMPRESSION_*` of the header.
pub const COMPRESSION_NONE: u32 = 0;
pub const COMPRESSION_ZSTD: u32 = 1;

impl TableOptions {
    /// Checks the values (the server checks the ranges it knows; this is the engine's
    /// own line of defence) and converts them.
    pub fn to_cf_options(&self) -> FfiResult<CfOptions> {
        let invalid = |what: String| FfiError::new(Status::Invalid, what);
        let compression = match self.compression {
            COMPRESSION_NONE => Compression::None,
            COMPRESSION_ZSTD if (-7..=22).contains(&self.compression_level) => Compression::Zstd {
                level: self.compression_level,
            },
            COMPRESSION_ZSTD => {
                return Err(invalid(format!(
                    "zstd compression level {} is outside -7..22",
                    self.compression_level
                )))
            }
            c => return Err(invalid(format!("unknown compression {c}"))),
        };
        if !(512..=1 << 20).contains(&self.block_size) {
            return Err(invalid(format!(
                "block size {} is outside 512..1048576",
                self.block_size
            )));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(invalid(format!(
                "{} bloom bits per key is more than 64",
                self.bloom_bits_per_key
            )));
        }
        Ok(CfOptions {
            compression,
            bloom_bits_per_key: self.bloom_bits_per_key,
            block_size: self.block_size as usize,
            value_separation_threshold: match self.value_separation_threshold {
                0 => None,
                t => Some(usize::try_from(t).map_err(|_| {
                    invalid(format!("value separation threshold {t} is too large"))
                })?),
            },
            encryption_key: (self.encrypted != 0).then_some(self.encryption_key_id),
        })
    }
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_drop(name: *const c_char) -> c_int {
    with_name(name, |name| {
        crate::engine::writable()?;
        let e = engine()?;
        // The table's constraint entries go in the catalog's transaction.
        let dropped = e.fks.dropped(&e.db, e.catalog.cf(), name, |w| {
            e.catalog.drop_table_with(&e.db, name, w)
        });
        e.fks.end_fences(name, None);
        dropped
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_rename(
    from: *const c_char,
    to: *const c_char,
    lock_wait_ms: u64,
) -> c_int {
    with_name(from, |from| {
        crate::engine::writable()?;
        // SAFETY: NUL-terminated by contract.
        let to = unsafe { raw::str(to) }?;
        let e = engine()?;
        // A table that does not open is locked by no check either.
        let families = || {
            e.catalog
                .open_table(&e.db, from)
                .map(|t| t.cfs())
                .unwrap_or_default()
        };
        let fence = e.fks.fence_rename(
            &e.db,
            e.catalog.cf(),
            from,
            to,
            families,
            Duration::from_millis(lock_wait_ms),
        )?;
        // Held before the name is gone: a check resolving the constraint once
        // it is gone waits for the fence (ForeignKeys::wait_while_renamed_away).
        let fenced = fence.is_some();
        if let Some(txn) = fence {
            e.fks.hold_fence(from, to, txn);
        }
        // The constraint entries follow in the catalog's transaction.
        let renamed = e.fks.rename(&e.db, e.catalog.cf(), from, to, |w| {
            e.catalog.rename_with(&e.db, from, to, w)
        });
        match &renamed {
            Ok(()) => e.fks.end_fences(from, Some(to)),
            // This rename's own fence (its backup name is `to`).
            Err(_) if fenced => e.fks.end_fences(to, None),
            Err(_) => {}
        }
        renamed
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_truncate(name: *const c_char) -> c_int {
    with_name(name, |name| {
        crate::engine::writable()?;
        let e = engine()?;
        e.catalog.truncate(&e.db, name)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_database_drop(db_path: *const c_char) -> c_int {
    with_name(db_path, |path| {
        crate::engine::writable()?;
        let e = engine()?;
        e.catalog.drop_database(&e.db, path)
    })
}

// ---- Table handles -------------------------------------------------------------------

/// # Safety
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_open(name: *const c_char, out: *mut *mut Table) -> c_int {
    with_name(name, |name| {
        let e = engine()?;
        let shared = e.catalog.open_table(&e.db, name)?;
        let table = Box::new(Table {
            shared,
            scratch: SharedBytes::default(),
        });
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, Box::into_raw(table)) }
    })
}

/// # Safety
/// `table` must be NULL or a handle from `tdb_table_open`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_close(table: *mut Table) {
    guard(|| {
        if !table.is_null() {
            // SAFETY: made by Box::into_raw in tdb_table_open and freed once.
            drop(unsafe { Box::from_raw(table) });
        }
        Ok(())
    });
}

/// # Safety
/// `table` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_index_count(table: *const Table) -> u32 {
    guard_value(0, || {
        // SAFETY: NULL or a live handle by contract.
        Ok(unsafe { table.as_ref() }.map_or(0, |t| t.shared.index_count()))
    })
}

/// # Safety
/// `table` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_version(table: *const Table) -> u64 {
    guard_value(0, || {
        // SAFETY: NULL or a live handle by contract.
        Ok(unsafe { table.as_ref() }.map_or(0, |t| t.shared.definition_version()))
    })
}

/// # Safety
/// `table` must be NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_has_prepared_writes(table: *const Table) -> c_int {
    // SAFETY: NULL or a live handle by contract.
    let Some(t) = (unsafe { table.as_ref() }) else {
        return 0;
    };
    guard_value(0, || {
        let rows = t.shared.cf(0)?;
        Ok(c_int::from(engine()?.db.has_prepared_writes(&rows)))
    })
}

/// # Safety
/// `trx` and `table` live handles.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_readable(trx: *mut Trx, table: *mut Table, index: u32) -> c_int {
    guard(|| {
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        match trx.snapshot_seq() {
            Some(seq) if !table.shared.readable_at(index, seq)? => Err(FfiError::new(
                Status::SchemaMismatch,
                "the table was rebuilt or the index added after the transaction's snapshot",
            )),
            _ => Ok(()),
        }
    })
}

/// # Safety
/// `name` must be NUL-terminated and `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_version_by_name(name: *const c_char, out: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        let e = engine()?;
        let v = e.catalog.definition_version(&e.db, name)?;
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, v) }
    })
}

/// # Safety
/// `table` must be NULL or a live handle, `unique` NULL or `n` readable u32s.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_dup_keys_not_in_order(
    table: *const Table,
    unique: *const u32,
    n: u32,
) -> c_int {
    guard_value(0, || {
        // SAFETY: NULL or a live handle by contract.
        let Some(ranks) = unsafe { table.as_ref() }.and_then(|t| t.shared.creation_ranks()) else {
            return Ok(0);
        };
        if unique.is_null() || n < 2 {
            return Ok(0);
        }
        // SAFETY: n readable u32s by contract.
        let unique = unsafe { std::slice::from_raw_parts(unique, n as usize) };
        // Only the unique keys' relative order matters (non-unique ones report no
        // duplicates): a table whose one unique key was added last is in order.
        let rank = |index: u32| match index {
            0 => 0,
            i => ranks.get(i as usize - 1).copied().unwrap_or(u32::MAX),
        };
        Ok(c_int::from(
            !unique.windows(2).all(|w| rank(w[0]) < rank(w[1])),
        ))
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_next_rowid(table: *mut Table) -> u64 {
    guard_value(0, || {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        table.shared.next_rowid(&engine()?.db)
    })
}

/// Runs `f` on a table handle; `fallback` on a bad handle or an error (whose
/// message is kept for `tdb_last_error`).
fn with_table<T>(table: *mut Table, fallback: T, f: impl FnOnce(&Table) -> FfiResult<T>) -> T {
    guard_value(fallback, || {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        f(table)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_autoinc_peek(table: *mut Table) -> u64 {
    with_table(table, 0, |t| Ok(t.shared.autoinc_peek()))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_autoinc_seed(table: *mut Table, next: u64) -> u64 {
    with_table(table, 0, |t| t.shared.autoinc_seed(next))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_autoinc_reserve(
    table: *mut Table,
    n: u64,
    offset: u64,
    increment: u64,
    max: u64,
) -> u64 {
    // u64::MAX tells the server that no value could be reserved.
    with_table(table, u64::MAX, |t| {
        t.shared.autoinc_reserve(n, offset, increment, max)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_autoinc_observe(table: *mut Table, value: u64, max: u64) {
    with_table(table, (), |t| t.shared.autoinc_observe(value, max))
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_autoinc_persist(table: *mut Table, value: u64, max: u64) {
    with_table(table, (), |t| t.shared.autoinc_persist_past(value, max))
}

/// # Safety
/// `table` must be a live handle and `blob` point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_stats_save(
    table: *mut Table,
    blob: *const u8,
    len: usize,
    durable: c_int,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: a live handle and a valid buffer by contract.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let blob = unsafe { raw::bytes(blob, len) }?;
        table.shared.save_stats(blob, durable != 0)
    })
}

/// # Safety
/// `table` must be a live handle; `blob`/`len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_stats_load(
    table: *mut Table,
    blob: *mut *const u8,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        match table.shared.load_stats()? {
            // SAFETY: writable by contract.
            Some(v) => unsafe { table.hand_out(v.into(), blob, len) },
            None => Err(FfiError::quiet(Status::NotFound)),
        }
    })
}

/// `struct tdb_table_stats` of the header.
#[repr(C)]
pub struct TableStats {
    pub approx_rows: u64,
    pub data_bytes: u64,
    pub index_bytes: u64,
    pub free_bytes: u64,
    pub committed_seq: u64,
}

/// # Safety
/// `out` must be valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_stats(table: *mut Table, out: *mut TableStats) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        let db = engine()?.db.clone();
        let mut stats = TableStats {
            approx_rows: 0,
            data_bytes: 0,
            index_bytes: 0,
            free_bytes: 0,
            committed_seq: db.latest_sequence(),
        };
        // Value-log files hold the large values: they are the table's bytes as
        // much as its table files are (InnoDB counts off-page columns too).
        let bytes = |s: &tidesdb_core::CfStats| s.approx_bytes + s.memtable_bytes + s.vlog_bytes;
        for (i, cf) in table.shared.cfs().iter().enumerate() {
            let s = db.cf_sizes(cf);
            if i == 0 {
                stats.approx_rows = s.approx_keys;
                stats.data_bytes = bytes(&s);
            } else {
                stats.index_bytes += bytes(&s);
            }
            stats.free_bytes += s.vlog_garbage_bytes;
        }
        // external BLOB/TEXT values are row data
        let b = db.cf_sizes(&table.shared.blob_cf());
        stats.data_bytes += bytes(&b);
        stats.free_bytes += b.vlog_garbage_bytes;
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, stats) }
    })
}

/// # Safety
/// `lo`/`hi` must be NULL or point to `lo_len`/`hi_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_keys_in_range(
    table: *mut Table,
    index: u32,
    lo: *const u8,
    lo_len: usize,
    hi: *const u8,
    hi_len: usize,
) -> u64 {
    guard_value(0, || {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        let cf = table.shared.cf(index)?;
        // SAFETY: NULL or valid buffers by contract.
        let lo = (!lo.is_null())
            .then(|| unsafe { raw::bytes(lo, lo_len) })
            .transpose()?;
        // SAFETY: as above.
        let hi = (!hi.is_null())
            .then(|| unsafe { raw::bytes(hi, hi_len) })
            .transpose()?;
        Ok(engine()?.db.approximate_keys_in_range(&cf, lo, hi))
    })
}

/// Called once per key by [`tdb_table_sample_keys`].
pub type KeyCallback = unsafe extern "C" fn(ctx: *mut std::ffi::c_void, key: *const u8, len: usize);

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_table_sample_keys(
    table: *mut Table,
    index: u32,
    n: u32,
    found: Option<KeyCallback>,
    ctx: *mut std::ffi::c_void,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        let cf = table.shared.cf(index)?;
        let keys = engine()?.db.sample_keys(&cf, n as usize);
        if let Some(found) = found {
            for k in &keys {
                // SAFETY: the caller's callback, called with a buffer valid for the call.
                unsafe { found(ctx, k.as_ptr(), k.len()) };
            }
        }
        Ok(())
    })
}

/// # Safety
/// `table` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_compact_external(table: *mut Table) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        Ok(engine()?.db.optimize(&table.shared.blob_cf())?)
    })
}

/// # Safety
/// `table` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_compact_index(table: *mut Table, index: u32) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        let cf = table.shared.cf(index)?;
        Ok(engine()?.db.optimize(&cf)?)
    })
}

// ---- Row changes and point reads -----------------------------------------------------

/// # Safety
/// `ops` must point to `n_ops` ops whose buffers are valid; `failed_op` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tdb_apply(
    trx: *mut Trx,
    table: *mut Table,
    ops: *const Op,
    n_ops: usize,
    failed_op: *mut usize,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        let ops: &[Op] = if n_ops == 0 {
            &[]
        } else if ops.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL ops"));
        } else {
            // SAFETY: `n_ops` valid ops by contract.
            unsafe { std::slice::from_raw_parts(ops, n_ops) }
        };
        let mut failed = 0;
        let result = apply(trx, table, ops, &mut failed);
        if !failed_op.is_null() {
            // SAFETY: non-NULL and writable by contract.
            unsafe { failed_op.write(failed) };
        }
        result
    })
}

/// The value of `key` in index `index` through the transaction: its snapshot,
/// or with `latest` the latest committed version (own writes win either way).
fn read_value(
    trx: &mut Trx,
    table: &Table,
    index: u32,
    key: &[u8],
    latest: bool,
) -> FfiResult<SharedBytes> {
    let cf = table.shared.cf(index)?;
    let txn = trx.txn()?;
    let found = if latest {
        txn.get_latest_shared(&cf, key)?
    } else {
        txn.get_shared(&cf, key)?
    };
    found.ok_or_else(|| FfiError::quiet(Status::NotFound))
}

/// Point read for `tdb_get` (snapshot) and `tdb_get_latest` (latest committed).
///
/// # Safety
/// `key` must point to `key_len` bytes; `value`/`value_len` valid for writes.
#[allow(clippy::too_many_arguments)] // the C signature plus the one switch
unsafe fn point_read(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    key: *const u8,
    key_len: usize,
    value: *mut *const u8,
    value_len: *mut usize,
    latest: bool,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        let v = read_value(trx, table, index, key, latest)?;
        // SAFETY: writable by contract.
        unsafe { table.hand_out(v, value, value_len) }
    })
}

/// `tdb_value` of the header: a value read by `tdb_get_pinned`, kept alive
/// (and unchanged) until `tdb_value_release`.
pub struct PinnedValue {
    /// Held, never read: it keeps the bytes handed out alive.
    _bytes: SharedBytes,
}

/// # Safety
/// `key` must point to `key_len` bytes; `pin`, `value` and `value_len` must be
/// valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature
pub unsafe extern "C" fn tdb_get_pinned(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    key: *const u8,
    key_len: usize,
    latest: c_int,
    pin: *mut *mut PinnedValue,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        if pin.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL out-pointer"));
        }
        let v = read_value(trx, table, index, key, latest != 0)?;
        let (ptr, len) = (v.as_ptr(), v.len());
        // SAFETY: writable by contract; the bytes live in the boxed value's
        // buffer, which the caller owns until tdb_value_release.
        unsafe {
            raw::write_out(value, ptr)?;
            raw::write_out(value_len, len)?;
            raw::write_out(pin, Box::into_raw(Box::new(PinnedValue { _bytes: v })))
        }
    })
}

/// # Safety
/// `pin` must be NULL or a value from `tdb_get_pinned`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_value_release(pin: *mut PinnedValue) {
    guard(|| {
        if !pin.is_null() {
            // SAFETY: made by Box::into_raw in tdb_get_pinned and freed once.
            drop(unsafe { Box::from_raw(pin) });
        }
        Ok(())
    });
}

/// # Safety
/// `key` must point to `key_len` bytes; `value`/`value_len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_get(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    key: *const u8,
    key_len: usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { point_read(trx, table, index, key, key_len, value, value_len, false) }
}

/// # Safety
/// `key` must point to `key_len` bytes; `value`/`value_len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_get_latest(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    key: *const u8,
    key_len: usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { point_read(trx, table, index, key, key_len, value, value_len, true) }
}

/// # Safety
/// `key` must point to `key_len` bytes; `value`/`value_len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_lock_row(
    trx: *mut Trx,
    table: *mut Table,
    key: *const u8,
    key_len: usize,
    mode: u32,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        let cf = table.shared.cf(0)?;
        let mode = if mode == 0 {
            LockMode::Shared
        } else {
            LockMode::Exclusive
        };
        let timeout = trx.read_lock_timeout();
        let gap_locking = trx.gap_locking();
        let txn = trx.txn()?;
        if gap_locking && txn.get_latest(&cf, key)?.is_none() {
            // No such row: lock the gap it would go into instead (as InnoDB in
            // REPEATABLE READ), so it cannot appear until this transaction ends.
            lock_gap_around(txn, &cf, key, timeout)?;
            if txn.get_latest(&cf, key)?.is_none() {
                return Err(FfiError::quiet(Status::NotFound));
            }
            // Committed before the gap was locked: lock and read it below.
        }
        txn.lock(&cf, key, mode, timeout)?;
        match txn.get_latest_shared(&cf, key)? {
            // SAFETY: writable by contract.
            Some(v) => unsafe { table.hand_out(v, value, value_len) },
            None => Err(FfiError::quiet(Status::NotFound)),
        }
    })
}

/// Locks the range from the key before `key` to the key after it (latest committed
/// state), both included: the gap a missing `key` would be inserted into.
fn lock_gap_around(
    txn: &mut Txn,
    cf: &Cf,
    key: &[u8],
    timeout: std::time::Duration,
) -> FfiResult<()> {
    let mut it = txn.iter_latest(cf, IterOptions::default())?;
    crate::cursor::seek(&mut it, crate::cursor::SeekMode::Lt, key);
    it.status()?;
    let lo = if it.valid() {
        it.key().to_vec()
    } else {
        Vec::new()
    };
    it.seek(key);
    it.status()?;
    let hi = it.valid().then(|| it.key().to_vec());
    txn.gap_locker()
        .lock_range(cf, &lo, hi.as_deref(), timeout)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prefix_successor;
    use crate::catalog::align_auto_increment;

    #[test]
    fn auto_increment_alignment_follows_the_server() {
        assert_eq!(align_auto_increment(1, 1, 1), 1);
        assert_eq!(align_auto_increment(7, 1, 1), 7);
        assert_eq!(align_auto_increment(1, 3, 10), 3);
        assert_eq!(align_auto_increment(4, 3, 10), 13);
        assert_eq!(align_auto_increment(13, 3, 10), 13);
        assert_eq!(align_auto_increment(14, 20, 10), 21);
    }

    #[test]
    fn successor_of_prefixes() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
