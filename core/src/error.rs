//! Typed errors of the engine.

use std::fmt;
use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Every failure the engine can report. Corruption of on-disk data is always an
/// `Err(Error::Corruption { .. })`, never a panic.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// On-disk data failed validation (checksum, bounds, magic, ...).
    Corruption {
        file: PathBuf,
        offset: u64,
        detail: String,
    },
    ColumnFamilyNotFound(String),
    ColumnFamilyExists(String),
    /// Write-write conflict (first committer wins). Retryable.
    Conflict,
    /// A lock wait exceeded its timeout. Retryable.
    LockTimeout,
    /// This transaction was chosen as deadlock victim. Retryable.
    Deadlock,
    /// A durable write (fsync / flush / manifest) failed earlier; the database
    /// refuses writes until it is reopened.
    Poisoned,
    /// The database was closed.
    Closed,
    /// The database was opened read-only (`DbOptions::force_recovery`).
    ReadOnly {
        level: u8,
    },
    InvalidArgument(String),
    /// Use of a committed / rolled back (or prepared) transaction.
    TransactionDone,
    /// A lock wait was cancelled through a [`crate::CancelHandle`].
    Cancelled,
    /// `Db::commit_prepared` / `Db::rollback_prepared` for a xid that is not a
    /// prepared, unresolved transaction.
    UnknownXid(Vec<u8>),
    /// A checksum did not match (used inside WAL / table / manifest readers,
    /// usually converted to [`Error::Corruption`] by the public API).
    ChecksumMismatch {
        file: PathBuf,
        offset: u64,
        expected: u32,
        got: u32,
    },
    /// An encrypted file's key is not available (no key provider, the key
    /// management plugin does not have that key id or version), or the key
    /// it has does not match the one the file was written with.
    KeyUnavailable {
        file: PathBuf,
        key_id: u32,
        key_version: u32,
        detail: String,
    },
}

impl Error {
    /// True for errors after which retrying the whole transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict | Error::LockTimeout | Error::Deadlock)
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        detail: impl Into<String>,
    ) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }

    /// True for `Corruption` and `ChecksumMismatch`.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::ChecksumMismatch { .. }
        )
    }

    /// Clone-ish copy used to hand one error to several waiters (io::Error is not Clone).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                // Keep the errno (ENOSPC, EDQUOT, ...) where there is one.
                source: match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption {
                file,
                offset,
                detail,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                detail: detail.clone(),
            },
            Error::ColumnFamilyNotFound(s) => Error::ColumnFamilyNotFound(s.clone()),
            Error::ColumnFamilyExists(s) => Error::ColumnFamilyExists(s.clone()),
            Error::Conflict => Error::Conflict,
            Error::LockTimeout => Error::LockTimeout,
            Error::Deadlock => Error::Deadlock,
            Error::Poisoned => Error::Poisoned,
            Error::Closed => Error::Closed,
            Error::ReadOnly { level } => Error::ReadOnly { level: *level },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::TransactionDone => Error::TransactionDone,
            Error::Cancelled => Error::Cancelled,
            Error::UnknownXid(x) => Error::UnknownXid(x.clone()),
            Error::ChecksumMismatch {
                file,
                offset,
                expected,
                got,
            } => Error::ChecksumMismatch {
                file: file.clone(),
                offset: *offset,
                expected: *expected,
                got: *got,
            },
            Error::KeyUnavailable {
                file,
                key_id,
                key_version,
                detail,
            } => Error::KeyUnavailable {
                file: file.clone(),
                key_id: *key_id,
                key_version: *key_version,
                detail: detail.clone(),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error ({context}): {source}"),
            Error::Corruption {
                file,
                offset,
                detail,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {detail}",
                file.display()
            ),
            Error::ColumnFamilyNotFound(n) => write!(f, "column family not found: {n}"),
            Error::ColumnFamilyExists(n) => write!(f, "column family already exists: {n}"),
            Error::Conflict => write!(f, "write-write conflict, retry the transaction"),
            Error::LockTimeout => write!(f, "lock wait timeout"),
            Error::Deadlock => write!(f, "deadlock detected, transaction chosen as victim"),
            Error::Poisoned => write!(
                f,
                "a durable write failed earlier; database refuses writes until reopened"
            ),
            Error::Closed => write!(f, "database is closed"),
            Error::ReadOnly { level } => write!(
                f,
                "the database was opened read-only to recover a damaged directory \
                 (force recovery level {level})"
            ),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::TransactionDone => write!(f, "transaction already finished"),
            Error::Cancelled => write!(f, "lock wait cancelled"),
            Error::UnknownXid(x) => write!(f, "unknown or already resolved xid {x:02x?}"),
            Error::ChecksumMismatch {
                file,
                offset,
                expected,
                got,
            } => write!(
                f,
                "checksum mismatch in {} at offset {offset}: expected {expected:#010x}, got {got:#010x}",
                file.display()
            ),
            Error::KeyUnavailable {
                file,
                key_id,
                key_version,
                detail,
            } => write!(
                f,
                "encryption key {key_id} version {key_version} of {} is not available: {detail}",
                file.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
