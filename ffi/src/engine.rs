//! The process-wide engine: one `tidesdb_core::Db` under the server's data directory,
//! opened by the plugin's init and closed by its deinit.
use std::ffi::{c_char, c_int};
use std::sync::Arc;

use parking_lot::RwLock;
use tidesdb_core::{Db, DbOptions, SyncMode};

use crate::catalog::Catalog;
use crate::foreign_keys::ForeignKeys;
use crate::raw;
use crate::status::{guard, FfiError, FfiResult, Status};

/// The open engine: the database and the table catalog over it.
pub struct Engine {
    pub db: Db,
    pub catalog: Catalog,
    /// FOREIGN KEY constraints and the key definitions they resolve against.
    pub fks: ForeignKeys,
    /// `tidesdb_force_recovery` the engine was opened with; above 0 it is read-only.
    pub force_recovery: u32,
}

static ENGINE: RwLock<Option<Arc<Engine>>> = RwLock::new(None);

/// The open engine, or TDB_NOT_OPEN.
pub fn engine() -> FfiResult<Arc<Engine>> {
    ENGINE.read().clone().ok_or_else(|| {
        FfiError::new(
            Status::NotOpen,
            "the TidesDB engine is not open (see the server's error log)",
        )
    })
}

/// `struct tdb_engine_options` of the header.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    pub write_buffer_size: u64,
    pub block_cache_size: u64,
    pub sync_mode: u32,
    pub sync_interval_ms: u32,
    pub background_threads: u32,
    pub use_direct_reads: u32,
    /// `tidesdb_force_recovery`: 0 = off; 1..=3 open a damaged directory read-only,
    /// skipping more of what cannot be read at each level (README, "Forcing recovery").
    pub force_recovery: u32,
    /// `tidesdb_encrypt_log`: 1 = new WAL segments (and prepared spill files
    /// of unencrypted tables) are encrypted with key `encryption::LOG_KEY_ID`.
    pub encrypt_log: u32,
    /// `tidesdb_encrypt_tables` != OFF at start: 1 = the catalog's families
    /// (table names and definitions) are written with key
    /// `encryption::LOG_KEY_ID`; 0 = in the clear (files written otherwise
    /// are rewritten at open either way).
    pub encrypt_catalog: u32,
    /// The server's key management (NULL: no plugin; encrypted tables refused).
    pub key_latest_version: Option<crate::encryption::LatestVersionFn>,
    pub key_get: Option<crate::encryption::KeyGetFn>,
}

/// The highest `tidesdb_force_recovery` level.
pub const MAX_FORCE_RECOVERY: u32 = 3;

/// True if the engine was opened with `tidesdb_force_recovery` (read-only).
pub fn read_only() -> bool {
    ENGINE.read().as_ref().is_some_and(|e| e.force_recovery > 0)
}

/// Refuses a write (DML, DDL, ANALYZE, OPTIMIZE, XA) of an engine opened with
/// `tidesdb_force_recovery`: its files stay as they were found.
pub fn writable() -> FfiResult<()> {
    let e = engine()?;
    if e.force_recovery > 0 {
        return Err(FfiError::new(
            Status::ReadOnly,
            format!(
                "the engine was started with tidesdb_force_recovery={} and is read-only \
                 (dump the tables, then restart without it)",
                e.force_recovery
            ),
        ));
    }
    Ok(())
}

pub fn sync_mode(mode: u32, interval_ms: u32) -> SyncMode {
    match mode {
        0 => SyncMode::None,
        1 => SyncMode::Interval {
            millis: u64::from(interval_ms.max(1)),
        },
        _ => SyncMode::Full,
    }
}

/// Opens the engine in `dir` (Rust entry point of `tdb_engine_open`, used by tests).
pub fn open(dir: &str, opts: &EngineOptions) -> FfiResult<()> {
    let mut slot = ENGINE.write();
    if slot.is_some() {
        return Err(FfiError::new(Status::Invalid, "the engine is already open"));
    }
    let defaults = DbOptions::default();
    let options = DbOptions {
        sync_mode: sync_mode(opts.sync_mode, opts.sync_interval_ms),
        write_buffer_size: usize::try_from(opts.write_buffer_size)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(defaults.write_buffer_size),
        block_cache_size: usize::try_from(opts.block_cache_size)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(defaults.block_cache_size),
        background_threads: usize::try_from(opts.background_threads)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(defaults.background_threads),
        use_direct_reads: opts.use_direct_reads != 0,
        force_recovery: u8::try_from(opts.force_recovery).unwrap_or(u8::MAX),
        keys: crate::encryption::keyring(opts.key_latest_version, opts.key_get),
        log_encryption_key: (opts.encrypt_log != 0).then_some(crate::encryption::LOG_KEY_ID),
        family_encryption: crate::catalog::CATALOG_FAMILIES
            .iter()
            .map(|name| {
                let key = (opts.encrypt_catalog != 0).then_some(crate::encryption::LOG_KEY_ID);
                (name.to_string(), key)
            })
            .collect(),
    };
    let key1 = options
        .keys
        .latest_version(crate::encryption::LOG_KEY_ID)
        .is_some();
    for (on, what) in [
        (
            opts.encrypt_catalog != 0,
            "tidesdb_encrypt_tables=ON or FORCE encrypts the engine's catalog with",
        ),
        (opts.encrypt_log != 0, "tidesdb_encrypt_log=ON needs"),
    ] {
        if on && !key1 {
            return Err(FfiError::new(
                Status::KeyUnavailable,
                format!(
                    "{what} encryption key {} from a key management plugin \
                     (e.g. file_key_management), and there is none",
                    crate::encryption::LOG_KEY_ID
                ),
            ));
        }
    }
    if opts.force_recovery > MAX_FORCE_RECOVERY {
        return Err(FfiError::new(
            Status::Invalid,
            format!(
                "tidesdb_force_recovery={} is above the highest level {MAX_FORCE_RECOVERY}",
                opts.force_recovery
            ),
        ));
    }
    let read_only = opts.force_recovery > 0;
    let db = Db::open(dir, options).map_err(|e| {
        let wal = matches!(&e, tidesdb_core::Error::KeyUnavailable { file, .. }
            if file.extension().is_some_and(|x| x == "wal"));
        let e = FfiError::from(e);
        match wal {
            true => FfiError::new(
                e.status,
                format!(
                    "{}; it was written with tidesdb_encrypt_log=ON: start with the key \
                     management plugin and key {} (then once with tidesdb_encrypt_log=OFF \
                     to leave the log in the clear)",
                    e.message,
                    crate::encryption::LOG_KEY_ID
                ),
            ),
            false => e,
        }
    })?;
    let catalog_key_error = |e: FfiError| match e.status {
        Status::KeyUnavailable => FfiError::new(
            e.status,
            format!(
                "the catalog (table names and definitions) is encrypted, written while \
                 tidesdb_encrypt_tables was ON or FORCE, and cannot be read: {}",
                e.message
            ),
        ),
        _ => e,
    };
    for name in crate::catalog::CATALOG_FAMILIES {
        if let Some(cf) = db.cf(name) {
            db.check_encryption(&cf)
                .map_err(|e| catalog_key_error(e.into()))?;
        }
    }
    let catalog = Catalog::open(&db, read_only).map_err(catalog_key_error)?;
    let fks = ForeignKeys::default();
    if !read_only {
        fks.purge_orphans(&db, catalog.cf(), &catalog.list_tables(&db)?)?;
    }
    *slot = Some(Arc::new(Engine {
        db,
        catalog,
        fks,
        force_recovery: opts.force_recovery,
    }));
    Ok(())
}

/// Closes the engine (Rust entry point of `tdb_engine_close`).
pub fn close() -> FfiResult<()> {
    let engine = ENGINE.write().take();
    match engine {
        Some(e) => Ok(e.db.close()?),
        None => Ok(()),
    }
}

/// # Safety
/// `dir` must be a NUL-terminated string and `opts` NULL or a valid options struct.
#[no_mangle]
pub unsafe extern "C" fn tdb_engine_open(dir: *const c_char, opts: *const EngineOptions) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated path.
        let dir = unsafe { raw::str(dir) }?;
        // SAFETY: NULL or a valid struct, by contract.
        let opts = unsafe { opts.as_ref() }
            .copied()
            .ok_or_else(|| FfiError::new(Status::Invalid, "NULL options"))?;
        open(dir, &opts)
    })
}

#[no_mangle]
pub extern "C" fn tdb_engine_close() -> c_int {
    guard(close)
}

#[no_mangle]
pub extern "C" fn tdb_engine_set_block_cache_size(bytes: u64) {
    guard(|| {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        engine()?.db.set_block_cache_size(bytes);
        Ok(())
    });
}

#[no_mangle]
pub extern "C" fn tdb_engine_set_lock_escalation_threshold(locks: u64) {
    guard(|| {
        let locks = usize::try_from(locks).unwrap_or(usize::MAX);
        engine()?.db.set_lock_escalation_threshold(locks);
        Ok(())
    });
}

#[no_mangle]
pub extern "C" fn tdb_engine_set_sync_mode(mode: u32, interval_ms: u32) {
    guard(|| {
        engine()?.db.set_sync_mode(sync_mode(mode, interval_ms));
        Ok(())
    });
}
