//! Engine checkpoints for backups (`SET GLOBAL tidesdb_checkpoint`, and the one
//! `tidesdb-backup` arms for the next BACKUP STAGE; handler-shim/backup.cc).
//! The checkpoint itself, its layout and guarantees: tidesdb-core's
//! `Db::checkpoint`.
use std::ffi::{c_char, c_int};
use std::path::{Component, Path};

use crate::engine::engine;
use crate::raw;
use crate::status::{guard, FfiError, FfiResult, Status};

/// A checkpoint destination must be absolute and plain: no `..` parts (a `.` in
/// the middle is dropped by `Path::components`, harmlessly), so
/// the privilege checks on its text (secure_file_priv, the data directory)
/// are checks of where the files really go.
pub fn check_destination(path: &str) -> FfiResult<()> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(FfiError::new(
            Status::Invalid,
            format!("checkpoint path '{path}' is not absolute"),
        ));
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(FfiError::new(
            Status::Invalid,
            format!("checkpoint path '{path}' must not contain '.' or '..'"),
        ));
    }
    if p.file_name().is_none() {
        return Err(FfiError::new(
            Status::Invalid,
            format!("checkpoint path '{path}' names no directory"),
        ));
    }
    Ok(())
}

/// Whether `path`'s parent directory is `dir` or inside it (both resolved;
/// `path` itself need not exist yet).
pub fn is_inside(path: &str, dir: &str) -> bool {
    let parent = Path::new(path).parent().and_then(|p| p.canonicalize().ok());
    let dir = Path::new(dir).canonicalize().ok();
    matches!((parent, dir), (Some(p), Some(d)) if p.starts_with(&d))
}

/// Takes a checkpoint of the open engine into `path` with `note` appended to
/// its CHECKPOINT file; returns its commit sequence.
pub fn checkpoint(path: &str, note: &str) -> FfiResult<u64> {
    check_destination(path)?;
    let info = engine()?.db.checkpoint(Path::new(path), note)?;
    Ok(info.sequence)
}

/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tdb_checkpoint_check_path(path: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated string.
        let path = unsafe { raw::str(path) }?;
        check_destination(path)
    })
}

/// 1 if `path` would be inside `dir` (e.g. the data directory), else 0.
///
/// # Safety
/// `path` and `dir` must be NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn tdb_checkpoint_in_dir(path: *const c_char, dir: *const c_char) -> c_int {
    let mut inside = false;
    guard(|| {
        // SAFETY: the caller passes NUL-terminated strings.
        let (path, dir) = unsafe { (raw::str(path)?, raw::str(dir)?) };
        inside = is_inside(path, dir);
        Ok(())
    });
    c_int::from(inside)
}

/// # Safety
/// `path` and `note` must be NUL-terminated strings; `sequence` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tdb_engine_checkpoint(
    path: *const c_char,
    note: *const c_char,
    sequence: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NUL-terminated strings.
        let (path, note) = unsafe { (raw::str(path)?, raw::str(note)?) };
        let seq = checkpoint(path, note)?;
        // SAFETY: NULL or writable, by contract.
        if let Some(out) = unsafe { sequence.as_mut() } {
            *out = seq;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn destinations_must_be_absolute_and_plain() {
        assert!(check_destination("/var/backups/tidesdb-1").is_ok());
        for bad in ["relative/dir", "/a/../etc", "/a/b/..", "./x", "", "/"] {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn inside_resolves_the_parent() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::os::unix::fs::symlink("/tmp", data.join("out")).unwrap();
        let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
        assert!(is_inside(&s(&data.join("ckpt")), &s(&data)));
        assert!(!is_inside(&s(&d.path().join("ckpt")), &s(&data)));
        // A symlink out of the data directory is outside it.
        assert!(!is_inside(&s(&data.join("out").join("ckpt")), &s(&data)));
    }
}
