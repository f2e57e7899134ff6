//! Transportable tables, as InnoDB's: `FLUSH TABLES t FOR EXPORT` writes the
//! table's data beside its definition in the data directory, a DBA copies the files
//! to another server, and there `ALTER TABLE t DISCARD TABLESPACE` + `ALTER TABLE t
//! IMPORT TABLESPACE` make them the table's data.
//!
//! The files, in the table's database directory (the server's working directory is
//! the data directory, and the shim passes the table's path `./db/t`):
//! - `t.tdb`: every entry of the table's families (rows, each secondary / FULLTEXT /
//!   SPATIAL index, external BLOB/TEXT values) at one snapshot, in the export file
//!   format of the core (`core/src/export`), encrypted with the table's key when
//!   the table is encrypted;
//! - `t.cfg`: what `t.tdb` holds and the definition it fits ([`description`]).
//!
//! Both are written (mode 0660) when the table is locked for export and removed at
//! UNLOCK TABLES, as InnoDB removes its `.cfg`; the DBA copies them while the lock is
//! held. An import reads them from the same place in the importing server and
//! removes them once the table has adopted the data.
//!
//! Why a copy and not hard links of the table's own files: a table's rows live in
//! sorted table files shared by nothing else, but their large values live in value
//! log files that hold other tables' values too, and the files' entries carry
//! sequence numbers of the exporting database, which mean nothing in another one.
//! A self-contained copy of the resolved entries needs neither: it costs one read of
//! the table and one write of its size at export (the lock is held meanwhile; writes
//! to the table wait, as they do for InnoDB), and the import writes the entries as
//! new writes, so they get the importing database's sequence numbers and every
//! later snapshot there sees them. Compaction and value-log GC go on during an
//! export: the export reads a snapshot, whose versions they keep.
//!
//! An import checks, before it writes anything: the table is discarded; the `.cfg`
//! describes the same definition (columns, indexes, their order and types, the row
//! format: the column definition versions) as the table's; the `.tdb` file's key is
//! available (an encrypted export needs the same key in the importing server's key
//! management plugin). The entries go to fresh families no catalog entry names;
//! one catalog transaction then points the table at them, so a failure at any point
//! (a damaged or cut `.tdb`, a full disk, a crash) leaves the table discarded and
//! unchanged.
pub mod description;

use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};

use tidesdb_core::{ExportItem, ExportReader, ExportWriter, Isolation, IterOptions};

use crate::catalog::BLOB_INDEX;
use crate::engine::{engine, Engine};
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};
use crate::table::Table;
use description::{definition_mismatch, Description};

/// Bytes of entries an import writes per engine transaction.
const IMPORT_BATCH_BYTES: usize = 4 << 20;

fn files(base: &str) -> (PathBuf, PathBuf) {
    (
        PathBuf::from(format!("{base}.tdb")),
        PathBuf::from(format!("{base}.cfg")),
    )
}

fn io(what: &str, path: &Path, e: std::io::Error) -> FfiError {
    let status = if e.raw_os_error() == Some(28) {
        Status::DiskFull
    } else {
        Status::IoError
    };
    FfiError::new(status, format!("{what} {}: {e}", path.display()))
}

fn remove_if_present(path: &Path) -> FfiResult<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("remove", path, e)),
    }
}

fn discarded(name: &str) -> FfiError {
    FfiError::new(
        Status::Discarded,
        format!("the data of table {name} was discarded (DISCARD TABLESPACE)"),
    )
}

/// Writes `<base>.tdb` and `<base>.cfg` for `table` (see the module doc).
pub fn export(e: &Engine, table: &Table, base: &str, definition: Vec<String>) -> FfiResult<()> {
    let shared = &table.shared;
    if shared.is_discarded() {
        return Err(discarded(base));
    }
    let (tdb, cfg) = files(base);
    // Files of an earlier export that was not ended (a crash while locked).
    remove_if_present(&tdb)?;
    remove_if_present(&cfg)?;
    let written = (|| -> FfiResult<()> {
        let mut families = shared.cfs();
        families.push(shared.blob_cf());
        let key_id = families[0].options().encryption_key;
        let mut w = ExportWriter::create(&tdb, e.db.keyring(), key_id)?;
        // The table is locked for export: the snapshot is its committed state.
        let mut txn = e.db.begin(Isolation::RepeatableRead);
        let last = families.len() - 1;
        for (i, cf) in families.iter().enumerate() {
            w.section(if i == last { BLOB_INDEX } else { i as u32 })?;
            let mut it = txn.iter(cf, IterOptions::default())?;
            it.seek_to_first();
            while it.valid() {
                w.entry(it.key(), it.value())?;
                it.next();
            }
            it.status()?;
        }
        txn.rollback();
        let encryption = w.encryption();
        let summary = w.finish()?;
        let values = e.catalog.export_values(&e.db, shared.table_id())?;
        let d = Description {
            table: base.to_string(),
            families: families.len() as u32,
            entries: summary.entries,
            bytes: summary.bytes,
            crc: summary.crc,
            encryption,
            columns: shared.columns().map(|c| {
                let mut v = Vec::new();
                c.encode_into(&mut v);
                v
            }),
            autoinc: values.autoinc,
            extent: values.extent,
            definition,
        };
        write_file(&cfg, d.encode().as_bytes())
    })();
    if written.is_err() {
        let _ = remove_if_present(&tdb);
        let _ = remove_if_present(&cfg);
    }
    written
}

/// A new file (0660) with `data`, durable.
fn write_file(path: &Path, data: &[u8]) -> FfiResult<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o660)
        .open(path)
        .map_err(|err| io("create", path, err))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
            .map_err(|err| io("chmod", path, err))?;
    }
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(|err| io("write", path, err))
}

/// Makes the entries of `<base>.tdb` the data of discarded table `name` (see the
/// module doc), then removes the two files.
pub fn import(
    e: &Engine,
    table: &Table,
    name: &str,
    base: &str,
    definition: Vec<String>,
) -> FfiResult<()> {
    let shared = &table.shared;
    if !shared.is_discarded() {
        return Err(FfiError::new(
            Status::NotDiscarded,
            format!("table {name} has its data: DISCARD TABLESPACE before IMPORT TABLESPACE"),
        ));
    }
    let (tdb, cfg) = files(base);
    let text = std::fs::read_to_string(&cfg).map_err(|err| {
        io(
            "IMPORT TABLESPACE needs the .cfg and .tdb files FLUSH TABLES ... FOR EXPORT wrote; read",
            &cfg,
            err,
        )
    })?;
    let d = Description::decode(&cfg.display().to_string(), &text)?;
    if let Some(why) = definition_mismatch(&definition, &d.definition) {
        return Err(FfiError::new(Status::SchemaMismatch, why));
    }
    let columns = shared.columns().map(|c| {
        let mut v = Vec::new();
        c.encode_into(&mut v);
        v
    });
    if columns != d.columns {
        return Err(FfiError::new(
            Status::SchemaMismatch,
            "the exported table's rows were written under other column definition versions \
             (an instant ALTER TABLE changed its columns): rebuild it with ALTER TABLE ... \
             FORCE before the export",
        ));
    }
    let families = shared.index_count() + 2;
    if d.families != families {
        return Err(FfiError::new(
            Status::SchemaMismatch,
            format!(
                "the exported table has {} index families, the table {families}",
                d.families
            ),
        ));
    }
    let mut reader = ExportReader::open(&tdb, e.db.keyring())?;
    let target = e.catalog.import_begin(&e.db, name)?;
    let filled = fill(e, &mut reader, target.cfs(), &d);
    if let Err(err) = filled {
        e.catalog.import_abort(&e.db, target);
        return Err(err);
    }
    let values = crate::catalog::ExportedValues {
        autoinc: d.autoinc.clone(),
        extent: d.extent.clone(),
    };
    e.catalog.import_commit(&e.db, name, target, &values)?;
    remove_if_present(&tdb)?;
    remove_if_present(&cfg)
}

/// Writes every entry of `reader` to its family of `cfs` (rows, indexes, external
/// values), in batches; checks the file against its description.
fn fill(
    e: &Engine,
    reader: &mut ExportReader,
    cfs: &[tidesdb_core::Cf],
    d: &Description,
) -> FfiResult<()> {
    let corrupt = |what: String| FfiError::new(Status::Corruption, what);
    let mut cf: Option<&tidesdb_core::Cf> = None;
    let mut txn = e.db.begin(Isolation::ReadCommitted);
    let mut batch = 0usize;
    while let Some(item) = reader.next_item()? {
        match item {
            ExportItem::Section(no) => {
                let idx = if no == BLOB_INDEX {
                    cfs.len() - 1
                } else {
                    no as usize
                };
                if no != BLOB_INDEX && idx + 1 >= cfs.len() {
                    return Err(corrupt(format!("the export file has a section {no}")));
                }
                cf = Some(&cfs[idx]);
            }
            ExportItem::Entry(k, v) => {
                let cf = cf.ok_or_else(|| corrupt("an entry before any section".into()))?;
                txn.put(cf, &k, &v)?;
                batch += k.len() + v.len();
                if batch >= IMPORT_BATCH_BYTES {
                    txn.commit()?;
                    txn = e.db.begin(Isolation::ReadCommitted);
                    batch = 0;
                }
            }
        }
    }
    txn.commit()?;
    let s = reader
        .summary()
        .ok_or_else(|| corrupt("the export file has no end".into()))?;
    if s.entries != d.entries || s.crc != d.crc || s.bytes != d.bytes {
        return Err(corrupt(format!(
            "the .tdb file ({} entries, {} bytes) is not the one its .cfg describes ({} entries, \
             {} bytes)",
            s.entries, s.bytes, d.entries, d.bytes
        )));
    }
    Ok(())
}

/// The shim's definition lines.
///
/// # Safety
/// `lines` NULL or `n` NUL-terminated strings.
unsafe fn definition_lines(lines: *const *const c_char, n: usize) -> FfiResult<Vec<String>> {
    // SAFETY: by contract.
    let ptrs = unsafe { raw::slice(lines, n) }?;
    ptrs.iter()
        .map(|&p| {
            // SAFETY: NUL-terminated by contract.
            unsafe { raw::str(p) }.map(str::to_string)
        })
        .collect()
}

/// # Safety
/// `table` a live handle; `base` a NUL-terminated path; `lines` `n` strings.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_export(
    table: *mut Table,
    base: *const c_char,
    lines: *const *const c_char,
    n: usize,
) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: by contract.
        let base = unsafe { raw::str(base) }?;
        // SAFETY: by contract.
        let definition = unsafe { definition_lines(lines, n) }?;
        export(&*engine()?, table, base, definition)
    })
}

/// # Safety
/// `base` a NUL-terminated path.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_export_end(base: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let base = unsafe { raw::str(base) }?;
        let (tdb, cfg) = files(base);
        remove_if_present(&cfg)?;
        remove_if_present(&tdb)
    })
}

/// # Safety
/// `name` a NUL-terminated table path.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_discard(name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let name = unsafe { raw::str(name) }?;
        crate::engine::writable()?;
        let e = engine()?;
        e.catalog.discard(&e.db, name)
    })
}

/// # Safety
/// `table` a live handle; `name` a NUL-terminated table path (also the base of the
/// files); `lines` `n` strings.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_import(
    table: *mut Table,
    name: *const c_char,
    lines: *const *const c_char,
    n: usize,
) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: by contract.
        let name = unsafe { raw::str(name) }?;
        // SAFETY: by contract.
        let definition = unsafe { definition_lines(lines, n) }?;
        crate::engine::writable()?;
        import(&*engine()?, table, name, name, definition)
    })
}

/// 1 if the table's data was discarded, 0 otherwise (or on a bad handle).
///
/// # Safety
/// `table` a live handle.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_is_discarded(table: *mut Table) -> c_int {
    guard_value(0, || {
        // SAFETY: by contract.
        let table = unsafe { raw::handle(table) }?;
        Ok(c_int::from(table.shared.is_discarded()))
    })
}
