//! Shared test helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;
use tidesdb_core::{Cf, CfOptions, Db, DbOptions, SyncMode};

/// Options of a test database: `sync_mode`, a small `write_buffer_size` (so
/// that a test's few writes reach table files), the rest default.
pub fn opts(sync_mode: SyncMode, write_buffer_size: usize) -> DbOptions {
    DbOptions {
        sync_mode,
        write_buffer_size,
        ..DbOptions::default()
    }
}

/// Simulated crash: copies the database files as they are on disk right now
/// (without LOCK) into a fresh directory; the original handle is left open
/// (or leaked), so nothing is closed or synced.
pub fn crash_copy(src: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" && e.path().is_file() {
            // A file may vanish between listing and copying (background purge).
            let _ = std::fs::copy(e.path(), d.path().join(e.file_name()));
        }
    }
    d
}

/// A fresh database (no syncs, default buffers) in a temporary directory
/// with one column family `cf`.
pub fn db_with_cf(cf: &str) -> (tempfile::TempDir, Db, Cf) {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        opts(SyncMode::None, DbOptions::default().write_buffer_size),
    )
    .unwrap();
    let cf = db.create_cf(cf, CfOptions::default()).unwrap();
    (d, db, cf)
}
