//! Observability: the counters behind `SHOW GLOBAL STATUS LIKE 'tidesdb%'`
//! (`tdb_engine_counters_get`) and the text of `SHOW ENGINE TIDESDB STATUS`
//! (`tdb_engine_status`).
//!
//! The engine's own counters come from [`tidesdb_core::Metrics`]; transaction
//! outcomes are counted here, where a connection's transaction ends.
use std::cell::RefCell;
use std::ffi::c_char;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::LocalKey;

use tidesdb_core::{CfOptions, CfStats, Compression, Metrics};

use crate::engine::engine;
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};

/// Transactions committed (that had begun in the engine).
pub static COMMITS: AtomicU64 = AtomicU64::new(0);
/// Transactions rolled back (that had begun in the engine).
pub static ROLLBACKS: AtomicU64 = AtomicU64::new(0);

/// `struct tdb_engine_counters` of the header; the field order must match.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    pub commits: u64,
    pub rollbacks: u64,
    pub lock_waits: u64,
    pub lock_wait_timeouts: u64,
    pub deadlocks: u64,
    pub lock_escalations: u64,
    pub write_conflicts: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub block_cache_bytes: u64,
    pub wal_bytes_written: u64,
    pub wal_syncs: u64,
    pub commit_groups: u64,
    pub table_bytes_written: u64,
    pub memtable_flushes: u64,
    pub compactions: u64,
    pub write_stalls: u64,
    pub write_slowdowns: u64,
    pub table_files: u64,
    pub live_bytes: u64,
    pub memtable_bytes: u64,
    pub pending_compaction_bytes: u64,
    pub table_block_reads: u64,
    pub table_disk_reads: u64,
    pub compaction_paced_millis: u64,
}

impl EngineCounters {
    pub fn collect(m: &Metrics) -> EngineCounters {
        EngineCounters {
            commits: COMMITS.load(Ordering::Relaxed),
            rollbacks: ROLLBACKS.load(Ordering::Relaxed),
            lock_waits: m.lock_waits,
            lock_wait_timeouts: m.lock_wait_timeouts,
            deadlocks: m.deadlocks,
            lock_escalations: m.lock_escalations,
            write_conflicts: m.write_conflicts,
            block_cache_hits: m.block_cache_hits,
            block_cache_misses: m.block_cache_misses,
            block_cache_bytes: m.block_cache_bytes,
            wal_bytes_written: m.wal_bytes_written,
            wal_syncs: m.wal_syncs,
            commit_groups: m.commit_groups,
            table_bytes_written: m.table_bytes_written,
            memtable_flushes: m.memtable_flushes,
            compactions: m.compactions,
            write_stalls: m.write_stalls,
            write_slowdowns: m.write_slowdowns,
            table_files: m.table_files,
            live_bytes: m.table_file_bytes + m.memtable_bytes,
            memtable_bytes: m.memtable_bytes,
            pending_compaction_bytes: m.pending_compaction_bytes,
            table_block_reads: m.table_block_reads,
            table_disk_reads: m.table_disk_reads,
            compaction_paced_millis: m.compaction_paced_millis,
        }
    }

    /// (name, value) pairs, in the header's order (the status report prints them).
    pub fn named(&self) -> [(&'static str, u64); 25] {
        [
            ("commits", self.commits),
            ("rollbacks", self.rollbacks),
            ("lock_waits", self.lock_waits),
            ("lock_wait_timeouts", self.lock_wait_timeouts),
            ("deadlocks", self.deadlocks),
            ("lock_escalations", self.lock_escalations),
            ("write_conflicts", self.write_conflicts),
            ("block_cache_hits", self.block_cache_hits),
            ("block_cache_misses", self.block_cache_misses),
            ("block_cache_bytes", self.block_cache_bytes),
            ("wal_bytes_written", self.wal_bytes_written),
            ("wal_syncs", self.wal_syncs),
            ("commit_groups", self.commit_groups),
            ("table_bytes_written", self.table_bytes_written),
            ("memtable_flushes", self.memtable_flushes),
            ("compactions", self.compactions),
            ("write_stalls", self.write_stalls),
            ("write_slowdowns", self.write_slowdowns),
            ("table_files", self.table_files),
            ("live_bytes", self.live_bytes),
            ("memtable_bytes", self.memtable_bytes),
            ("pending_compaction_bytes", self.pending_compaction_bytes),
            ("table_block_reads", self.table_block_reads),
            ("table_disk_reads", self.table_disk_reads),
            ("compaction_paced_millis", self.compaction_paced_millis),
        ]
    }
}

/// The engine's counters now.
pub fn counters() -> FfiResult<EngineCounters> {
    Ok(EngineCounters::collect(&engine()?.db.metrics()))
}

/// # Safety
/// `out` must be NULL or valid for a write of the struct.
#[no_mangle]
pub unsafe extern "C" fn tdb_engine_counters_get(out: *mut EngineCounters) -> i32 {
    guard(|| {
        let c = counters()?;
        // SAFETY: NULL or writable, by contract.
        unsafe { raw::write_out(out, c) }
    })
}

fn describe_options(o: &CfOptions) -> String {
    let comp = match o.compression {
        Compression::None => "NONE".to_string(),
        Compression::Zstd { level } => format!("ZSTD level {level}"),
    };
    let vsep = o
        .value_separation_threshold
        .map_or("off".to_string(), |t| format!("{t} bytes"));
    format!(
        "compression {comp}, bloom {} bits/key, block {} bytes, value separation {vsep}",
        o.bloom_bits_per_key, o.block_size
    )
}

fn describe_levels(out: &mut String, s: &CfStats) {
    for (level, files) in s.files_per_level.iter().enumerate() {
        if *files == 0 {
            continue;
        }
        let bytes = s.bytes_per_level.get(level).copied().unwrap_or(0);
        let names = s
            .file_names_per_level
            .get(level)
            .map(|v| v.join(" "))
            .unwrap_or_default();
        let _ = writeln!(out, "    L{level}: {files} files, {bytes} bytes: {names}");
    }
}

/// The text of SHOW ENGINE TIDESDB STATUS: the global counters, then every table's
/// column families (rows first, then its secondary indexes by number) with their
/// options, levels, files and pending compaction, then the engine's own families.
pub fn status_text() -> FfiResult<String> {
    let e = engine()?;
    let mut out = String::new();
    let m = e.db.metrics();
    let c = EngineCounters::collect(&m);
    let _ = writeln!(out, "=== counters ===");
    for (name, v) in c.named() {
        let _ = writeln!(out, "{name}: {v}");
    }
    // Failed background flushes / compactions (retried with a growing pause).
    let _ = writeln!(
        out,
        "background errors: {} (last: {})",
        m.background_errors,
        e.db.background_error().as_deref().unwrap_or("none")
    );
    let tables = e.catalog.tables(&e.db)?;
    let _ = writeln!(out, "=== tables: {} ===", tables.len());
    let mut listed = std::collections::HashSet::new();
    for (table, cf_names) in &tables {
        for (i, cf_name) in cf_names.iter().enumerate() {
            listed.insert(cf_name.clone());
            let what = if i == 0 {
                format!("{table} rows")
            } else if cf_name.ends_with(".b") {
                format!("{table} external values")
            } else {
                format!("{table} index {i}")
            };
            describe_cf(&mut out, &e.db, &what, cf_name);
        }
    }
    for cf_name in e.db.list_cfs() {
        if !listed.contains(&cf_name) {
            describe_cf(&mut out, &e.db, "engine", &cf_name);
        }
    }
    let damaged = damaged_text()?;
    if !damaged.is_empty() {
        let _ = writeln!(out, "=== damaged table files ===");
        out.push_str(&damaged);
    }
    Ok(out)
}

/// One line per table file the engine set aside when it opened (damaged
/// footer / index / filter / props, or missing) and per value log file it
/// could not open: which table it belongs to and the error reads get. Empty
/// when there is none.
pub fn damaged_text() -> FfiResult<String> {
    let e = engine()?;
    let damaged = e.db.quarantined_files();
    let mut out = String::new();
    for note in
        e.db.recovery_notes()
            .into_iter()
            .chain(e.catalog.recovery_notes())
    {
        let _ = writeln!(out, "{note}");
    }
    if damaged.is_empty() {
        return Ok(out);
    }
    let tables = e.catalog.tables(&e.db)?;
    for q in damaged {
        let mut what = format!("column family {}", q.cf);
        for (table, cf_names) in &tables {
            if let Some(i) = cf_names.iter().position(|n| *n == q.cf) {
                what = if i == 0 {
                    format!("table {table} (rows)")
                } else if i + 1 == cf_names.len() {
                    // The last family holds the external BLOB/TEXT values.
                    format!("table {table} (BLOB/TEXT values)")
                } else {
                    format!("table {table} (index {i})")
                };
            }
        }
        if q.value_log {
            let _ = writeln!(
                out,
                "unreadable value log file {} of {what} set aside; reads of the rows whose values it holds fail until it is restored (then restart) or the table is dropped: {}",
                q.path.display(),
                q.error
            );
        } else {
            let _ = writeln!(
                out,
                "damaged table file of {what} set aside; reads of its rows fail until the table is dropped: {}",
                q.error
            );
        }
    }
    Ok(out)
}

thread_local! {
    static DAMAGED_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
    static STATUS_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Stores `text()` NUL-terminated in `cell` (this thread's buffer of one FFI
/// function) and writes a pointer to it to `out`: valid until that function
/// is called again on this thread. Returns the length without the NUL.
///
/// # Safety
/// `out` must be NULL or valid for a pointer write.
unsafe fn hand_out_text(
    cell: &'static LocalKey<RefCell<String>>,
    out: *mut *const c_char,
    text: impl FnOnce() -> FfiResult<String>,
) -> usize {
    guard_value(0, || {
        if out.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL out-pointer"));
        }
        let mut text = text()?;
        text.push('\0');
        let len = text.len() - 1;
        cell.with(|c| *c.borrow_mut() = text);
        let ptr = cell.with(|c| c.borrow().as_ptr());
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, ptr.cast::<c_char>()) }?;
        Ok(len)
    })
}

/// # Safety
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_engine_damaged_files(out: *mut *const c_char) -> usize {
    // SAFETY: forwarded contract.
    unsafe { hand_out_text(&DAMAGED_TEXT, out, damaged_text) }
}

fn describe_cf(out: &mut String, db: &tidesdb_core::Db, what: &str, cf_name: &str) {
    let Some(cf) = db.cf(cf_name) else {
        let _ = writeln!(out, "{what} (column family {cf_name}): missing");
        return;
    };
    let s = db.cf_stats(&cf);
    let _ = writeln!(
        out,
        "{what} (column family {cf_name}): {}; ~{} entries, {} bytes in memtables, {} table files, {} bytes pending compaction",
        describe_options(&cf.options()),
        s.approx_keys,
        s.memtable_bytes,
        s.table_files,
        s.pending_compaction_bytes
    );
    describe_levels(out, &s);
}

/// # Safety
/// `out` must be valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_engine_status(out: *mut *const c_char) -> usize {
    // SAFETY: forwarded contract.
    unsafe { hand_out_text(&STATUS_TEXT, out, status_text) }
}
