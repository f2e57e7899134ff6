//! In-place ADD INDEX: building new index column families from a table's rows, and
//! committing a table's new index list.
//!
//! The shim scans the rows (through an ordinary snapshot cursor), encodes each new
//! index's entry and hands it to [`IndexBuild::put`]. Entries go into the new,
//! still unreferenced families through engine transactions committed every
//! [`BATCH_BYTES`], so memory stays bounded whatever the table's size. Nothing is
//! visible until [`IndexBuild::commit`] swaps the table's index list in the catalog
//! in one transaction; a failed or abandoned build drops its families, and a crash
//! leaves families no catalog entry names, which the next open drops.
//!
//! Entries of a non-unique index come in row (primary key) order, i.e. in random
//! order for the index; put at once, each would cost a full skiplist search with a
//! cache miss per step, in the write set and in the memtable (the largest cost of
//! sysbench's `prepare`). They are buffered and written sorted per batch
//! ([`SortedPuts`]). A unique index's entries go in at once: a duplicate must be
//! reported while the shim still holds the row that has it.
//!
//! An online build ([`IndexBuild::publish`], ALTER ... LOCK=NONE) lets other
//! connections write the table meanwhile: its families are published on the
//! table's shared state, every row change then maintains them too (ops of index
//! `TDB_BUILDING_INDEX | slot`), and the shim fills them with `tdb_apply` under row
//! locks instead of `put` (see `inplace_alter.cc` for why that is correct).
use std::ffi::{c_char, c_int};
use std::time::Duration;

use tidesdb_core::{Cf, Db, Isolation, LockMode, Txn};

use std::sync::Arc;

use crate::catalog::{IndexSource, TableShared};
use crate::columns::ColumnVersions;
use crate::engine::engine;
use crate::raw;
use crate::sorted_puts::SortedPuts;
use crate::status::{guard, FfiError, FfiResult, Status};

/// Bytes of entries written before a batch is committed.
pub const BATCH_BYTES: usize = 4 << 20;

/// Marks a layout element of `tdb_index_build_commit` as a built index (its slot in
/// the low bits); other elements are existing indexes, 1-based.
pub const LAYOUT_BUILT: u32 = 0x8000_0000;

/// `tdb_index_build` of the header.
pub struct IndexBuild {
    db: Db,
    built: Vec<(u32, Cf)>,
    txn: Option<Txn>,
    batch_bytes: usize,
    /// Buffered entries of non-unique indexes, by built index slot.
    sorted: SortedPuts,
    /// The catalog names the families: they must outlive the handle.
    committed: bool,
    /// The table's name, and its shared state once the build is published.
    name: String,
    published: Option<Arc<TableShared>>,
    /// The column definition version the commit installs (`set_columns`).
    columns: Option<ColumnVersions>,
}

impl IndexBuild {
    pub fn begin(name: &str, count: u32) -> FfiResult<IndexBuild> {
        let e = engine()?;
        let built = e.catalog.create_index_cfs(&e.db, name, count)?;
        Ok(IndexBuild {
            db: e.db.clone(),
            built,
            txn: None,
            batch_bytes: 0,
            sorted: SortedPuts::default(),
            committed: false,
            name: name.to_string(),
            published: None,
            columns: None,
        })
    }

    /// Publishes the families on the table's shared state, so that row changes of
    /// every handler of the table can write them (ops of index
    /// `TDB_BUILDING_INDEX | slot`) until the build commits or is freed.
    pub fn publish(&mut self) -> FfiResult<()> {
        let e = engine()?;
        let shared = e.catalog.open_table(&e.db, &self.name)?;
        shared.set_building(self.built.iter().map(|(_, cf)| cf.clone()).collect());
        self.published = Some(shared);
        Ok(())
    }

    /// Makes the commit install the table's next column definition version
    /// ([`ColumnVersions::derive`] of `sources`); returns it.
    pub fn set_columns(&mut self, sources: &[(u32, u8)]) -> FfiResult<&ColumnVersions> {
        let e = engine()?;
        let shared = e.catalog.open_table(&e.db, &self.name)?;
        let current = shared.columns().ok_or_else(|| {
            FfiError::new(
                Status::Invalid,
                "the table's rows carry no column definition version",
            )
        })?;
        Ok(self.columns.insert(current.derive(sources)?))
    }

    /// Ends the publication (row changes stop maintaining the families).
    fn unpublish(&mut self) {
        if let Some(shared) = self.published.take() {
            shared.set_building(Vec::new());
        }
    }

    /// Adds one entry to built index `slot`. With `unique`, an existing `key` is a
    /// duplicate (`Status::Duplicate`): a unique entry is keyed by its columns
    /// alone, so two rows with the same value meet on the same key.
    pub fn put(&mut self, slot: u32, key: &[u8], value: &[u8], unique: bool) -> FfiResult<()> {
        let cf = self
            .built
            .get(slot as usize)
            .map(|(_, cf)| cf.clone())
            .ok_or_else(|| FfiError::new(Status::Invalid, format!("no built index {slot}")))?;
        if unique {
            let db = &self.db;
            let txn = self
                .txn
                .get_or_insert_with(|| db.begin(Isolation::ReadCommitted));
            if txn.get(&cf, key)?.is_some() {
                return Err(FfiError::quiet(Status::Duplicate));
            }
            txn.put(&cf, key, value)?;
        } else {
            self.sorted.push(slot, key, value)?;
        }
        self.batch_bytes += key.len() + value.len();
        if self.batch_bytes >= BATCH_BYTES {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> FfiResult<()> {
        self.batch_bytes = 0;
        if !self.sorted.is_empty() {
            let db = &self.db;
            let txn = self
                .txn
                .get_or_insert_with(|| db.begin(Isolation::ReadCommitted));
            let built = &self.built;
            self.sorted.write_sorted(|slot, key, value| {
                let (_, cf) = built.get(slot as usize).ok_or_else(|| {
                    FfiError::new(Status::Invalid, format!("no built index {slot}"))
                })?;
                Ok(txn.put(cf, key, value)?)
            })?;
        }
        if let Some(txn) = self.txn.take() {
            txn.commit()?;
        }
        Ok(())
    }

    /// Commits the last batch, then the table's new index list (see
    /// `tdb_index_build_commit` for `layout`).
    pub fn commit(&mut self, name: &str, layout: &[u32], lock_wait: Duration) -> FfiResult<()> {
        self.flush_batch()?;
        let layout: Vec<IndexSource> = layout
            .iter()
            .map(|&l| {
                if l & LAYOUT_BUILT != 0 {
                    IndexSource::Built((l & !LAYOUT_BUILT) as usize)
                } else {
                    IndexSource::Existing(l)
                }
            })
            .collect();
        // The built indexes' entries are all committed by now (concurrent
        // writers' too: the server holds the table exclusively).
        let filled = self.db.latest_sequence();
        let e = engine()?;
        let temporary = crate::catalog::is_temporary_table(name);
        // A child's FOREIGN KEY check locks the referenced value in the parent's
        // family without the parent's metadata lock. A new key before the one a
        // constraint resolves to (a UNIQUE key before a non-unique one) moves it
        // and may take its place: a parent's change after the switch would lock
        // the new key's family, where no check's lock is. So the switch first
        // waits for the checks holding locks in the families (up to
        // `lock_wait`) and keeps new ones out until the catalog names the new
        // list; a check that waited finds its family moved and resolves again
        // (`tdb_fk_probe`). Keys that keep their positions keep every
        // constraint's resolution: no wait.
        let moves = kept_keys_move(&layout);
        let mut fence = None;
        if !temporary && moves && e.fks.is_referenced(&e.db, e.catalog.cf(), name)? {
            let old_cfs = e.catalog.open_table(&e.db, name)?.cfs();
            let mut txn = e.db.begin(Isolation::ReadCommitted);
            if let Err(err) = txn.lock_tables(&old_cfs, LockMode::Exclusive, lock_wait) {
                txn.rollback();
                return Err(err.into());
            }
            fence = Some(txn);
        }
        // Positions of the kept indexes may move: until the new keys are
        // recorded, a check resolving against the old ones must not use them.
        if !temporary {
            if let Err(err) = e.fks.keys_pending(&e.db, e.catalog.cf(), name) {
                if let Some(txn) = fence {
                    txn.rollback();
                }
                return Err(err);
            }
        }
        let altered = e
            .catalog
            .alter_table(&e.db, name, &layout, &self.built, self.columns.take());
        if let Some(txn) = fence {
            txn.rollback();
        }
        if altered.is_err() && !temporary {
            let _ = e.fks.keys_settled(&e.db, e.catalog.cf(), name);
        }
        altered?;
        let nos: Vec<u32> = self.built.iter().map(|(no, _)| *no).collect();
        if !nos.is_empty() {
            e.catalog
                .open_table(&e.db, name)?
                .indexes_defined_at(&nos, filled);
        }
        self.committed = true;
        self.unpublish();
        Ok(())
    }
}

/// Whether a kept index of the new list `layout` (secondary indexes, engine
/// index 1 first) is at another engine index than before.
fn kept_keys_move(layout: &[IndexSource]) -> bool {
    layout.iter().enumerate().any(|(i, source)| match source {
        IndexSource::Existing(old) => *old as usize != i + 1,
        IndexSource::Built(_) => false,
    })
}

impl Drop for IndexBuild {
    fn drop(&mut self) {
        if let Some(txn) = self.txn.take() {
            txn.rollback();
        }
        // Published and not committed (a failed online build): the server rolls
        // back without locking the table, so a transaction of another connection
        // may still hold writes to the families, and dropping them would make its
        // commit fail. They stay, unnamed, until the next build of the table
        // (Catalog::create_index_cfs) or the next start drops them.
        let keep = self.committed || self.published.is_some();
        self.unpublish();
        if !keep {
            for (_, cf) in &self.built {
                let _ = self.db.drop_cf(&cf.name());
            }
        }
    }
}

/// # Safety
/// `name` must be a NUL-terminated string and `out` valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_begin(
    name: *const c_char,
    count: u32,
    out: *mut *mut IndexBuild,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        let build = Box::new(IndexBuild::begin(name, count)?);
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, Box::into_raw(build)) }
    })
}

/// # Safety
/// `build` must be a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_publish(build: *mut IndexBuild) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        build.publish()
    })
}

/// # Safety
/// `build` must be a live handle; `key`/`value` valid buffers of their lengths.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_put(
    build: *mut IndexBuild,
    slot: u32,
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
        build.put(slot, key, value, unique != 0)
    })
}

/// # Safety
/// `build` must be a live handle, `name` NUL-terminated, `layout` `n` values.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_commit(
    build: *mut IndexBuild,
    name: *const c_char,
    layout: *const u32,
    n: usize,
    lock_wait_ms: u64,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        let layout: &[u32] = if n == 0 {
            &[]
        } else if layout.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL layout"));
        } else {
            // SAFETY: `n` values by contract.
            unsafe { std::slice::from_raw_parts(layout, n) }
        };
        build.commit(name, layout, Duration::from_millis(lock_wait_ms))
    })
}

/// # Safety
/// `build` must be a live handle; `sources`, `flags` and `ids` `n` values each,
/// `version` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_set_columns(
    build: *mut IndexBuild,
    sources: *const u32,
    flags: *const u8,
    n: usize,
    ids: *mut u32,
    version: *mut u32,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let build = unsafe { raw::handle(build) }?;
        // SAFETY: `n` values each by contract.
        let sources = unsafe { raw::slice(sources, n) }?;
        // SAFETY: as above.
        let flags = unsafe { raw::slice(flags, n) }?;
        if n > 0 && ids.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL ids"));
        }
        let pairs: Vec<(u32, u8)> = sources.iter().copied().zip(flags.iter().copied()).collect();
        let columns = build.set_columns(&pairs)?;
        for (i, c) in columns.current_columns().iter().enumerate().take(n) {
            // SAFETY: `n` writable values by contract.
            unsafe { ids.add(i).write(c.id) };
        }
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(version, columns.current) }
    })
}

/// # Safety
/// `build` must be NULL or a handle from `tdb_index_build_begin`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_index_build_free(build: *mut IndexBuild) {
    guard(|| {
        if !build.is_null() {
            // SAFETY: made by Box::into_raw in tdb_index_build_begin and freed once.
            drop(unsafe { Box::from_raw(build) });
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_keys_move_when_a_new_key_comes_before_them() {
        use IndexSource::{Built, Existing};
        assert!(!kept_keys_move(&[]));
        // new keys after the kept ones
        assert!(!kept_keys_move(&[Existing(1), Existing(2), Built(0)]));
        // a new UNIQUE key sorted before a non-unique one
        assert!(kept_keys_move(&[Built(0), Existing(1)]));
        assert!(kept_keys_move(&[Existing(1), Built(0), Existing(2)]));
        // a dropped key moves the ones after it
        assert!(kept_keys_move(&[Existing(2)]));
    }
}
