//! Status codes (the `tdb_status` enum of the header), the thread's last error
//! message, and [`guard`], which every exported function runs its body in.
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use tidesdb_core::Error as CoreError;

/// `enum tdb_status` of `tidesdb_ffi.h`; the values must match.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    NotFound = 1,
    End = 2,
    Duplicate = 3,
    Conflict = 4,
    LockTimeout = 5,
    Deadlock = 6,
    NoSuchTable = 7,
    TableExists = 8,
    Corruption = 9,
    IoError = 10,
    ReadOnly = 11,
    Invalid = 12,
    NotOpen = 13,
    Internal = 14,
    Aborted = 15,
    DiskFull = 16,
    /// A FOREIGN KEY definition the engine cannot enforce (InnoDB's errno 150).
    FkMalformed = 17,
    /// An encrypted table's key is not available from the key management plugin.
    KeyUnavailable = 18,
    /// The table's data was discarded (DISCARD TABLESPACE; InnoDB's ER_TABLESPACE_DISCARDED).
    Discarded = 19,
    /// IMPORT TABLESPACE of a table that still has its data (ER_TABLESPACE_EXISTS).
    NotDiscarded = 20,
    /// Exported files that do not fit the table's definition (ER_TABLE_SCHEMA_MISMATCH).
    SchemaMismatch = 21,
    /// What the caller resolved against changed (a FOREIGN KEY check's parent
    /// family, `tdb_fk_probe`): resolve again and retry.
    Stale = 22,
}

/// An error on its way to the C side: a status and a message for `tdb_last_error`.
#[derive(Debug)]
pub struct FfiError {
    pub status: Status,
    pub message: String,
}

impl FfiError {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        FfiError {
            status,
            message: message.into(),
        }
    }

    /// A status that is an expected outcome (end of data, missing key), not a failure.
    pub fn quiet(status: Status) -> Self {
        FfiError {
            status,
            message: String::new(),
        }
    }
}

pub type FfiResult<T> = Result<T, FfiError>;

impl From<CoreError> for FfiError {
    fn from(e: CoreError) -> Self {
        let status = match &e {
            CoreError::Io { source, .. } if is_disk_full(source) => Status::DiskFull,
            CoreError::Io { .. } => Status::IoError,
            e if e.is_corruption() => Status::Corruption,
            CoreError::KeyUnavailable { .. } => Status::KeyUnavailable,
            CoreError::ColumnFamilyNotFound(_) => Status::NoSuchTable,
            CoreError::ColumnFamilyExists(_) => Status::TableExists,
            CoreError::Conflict => Status::Conflict,
            CoreError::LockTimeout => Status::LockTimeout,
            CoreError::Deadlock => Status::Deadlock,
            CoreError::Poisoned | CoreError::ReadOnly { .. } => Status::ReadOnly,
            CoreError::Closed => Status::NotOpen,
            CoreError::Cancelled => Status::Aborted,
            CoreError::UnknownXid(_) => Status::NotFound,
            CoreError::InvalidArgument(_) | CoreError::TransactionDone => Status::Invalid,
            _ => Status::Internal,
        };
        FfiError::new(status, client_text(&e))
    }
}

/// The message of `e` as the server passes it on: a damaged file is named by its
/// file name (all of the engine's files are in `<datadir>/#tidesdb/`), not by its
/// path, so that the reason fits in the 192 bytes the server keeps of an engine's
/// message wherever the data directory is.
fn client_text(e: &CoreError) -> String {
    let name = |file: &std::path::Path| {
        file.file_name().map_or_else(
            || file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    match e {
        CoreError::Corruption {
            file,
            offset,
            detail,
        } => format!("corruption in {} at offset {offset}: {detail}", name(file)),
        CoreError::ChecksumMismatch {
            file,
            offset,
            expected,
            got,
        } => format!(
            "checksum mismatch in {} at offset {offset}: expected {expected:#010x}, got {got:#010x}",
            name(file)
        ),
        e => e.to_string(),
    }
}

/// ENOSPC (no space left on device) or EDQUOT (quota exceeded).
fn is_disk_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28 | 122))
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|cell| *cell.borrow_mut() = c);
}

/// The message of the last non-OK status on this thread (empty if none).
#[no_mangle]
pub extern "C" fn tdb_last_error() -> *const c_char {
    // The pointer stays valid until the next failing call on this thread.
    LAST_ERROR.with(|cell| cell.borrow().as_ptr())
}

/// Runs `body`, turning its error or a panic into a status code. A panic is a bug in the
/// engine: its message is kept for `tdb_last_error` and the server gets TDB_INTERNAL.
pub fn guard(body: impl FnOnce() -> FfiResult<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Status::Ok as c_int,
        Ok(Err(e)) => {
            if !e.message.is_empty() {
                set_last_error(&e.message);
            }
            e.status as c_int
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            set_last_error(&format!("internal error in the TidesDB engine: {what}"));
            Status::Internal as c_int
        }
    }
}

/// Like [`guard`] for functions that return a value instead of a status: `fallback`
/// is returned on error or panic.
pub fn guard_value<T>(fallback: T, body: impl FnOnce() -> FfiResult<T>) -> T {
    let mut out = None;
    let status = guard(|| {
        out = Some(body()?);
        Ok(())
    });
    match out {
        Some(v) if status == 0 => v,
        _ => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn a_panic_becomes_internal_with_its_message() {
        let code = guard(|| panic!("boom"));
        assert_eq!(code, Status::Internal as c_int);
        // SAFETY: tdb_last_error returns a valid NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(tdb_last_error()) };
        assert!(msg.to_string_lossy().contains("boom"));
    }

    #[test]
    fn errors_map_to_their_status() {
        let code = guard(|| Err(CoreError::Conflict.into()));
        assert_eq!(code, Status::Conflict as c_int);
        assert_eq!(guard(|| Ok(())), 0);
        let io = |e: std::io::Error| CoreError::Io {
            context: "write".into(),
            source: e,
        };
        let full = guard(|| Err(io(std::io::Error::from_raw_os_error(28)).into()));
        assert_eq!(full, Status::DiskFull as c_int);
        let other = guard(|| Err(io(std::io::Error::from_raw_os_error(5)).into()));
        assert_eq!(other, Status::IoError as c_int);
    }
}
