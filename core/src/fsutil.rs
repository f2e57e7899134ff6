//! Small filesystem helpers.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::path::Path;

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io(format!("open dir {}", dir.display()), e))?;
    f.sync_all()
        .map_err(|e| Error::io(format!("fsync dir {}", dir.display()), e))
}

/// Writes `data` to `dir/name` atomically: temp file, fsync, rename, fsync dir.
pub(crate) fn atomic_write(dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    {
        let mut f =
            File::create(&tmp).map_err(|e| Error::io(format!("create {}", tmp.display()), e))?;
        f.write_all(data)
            .map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
        f.sync_all()
            .map_err(|e| Error::io(format!("fsync {}", tmp.display()), e))?;
    }
    std::fs::rename(&tmp, &dst)
        .map_err(|e| Error::io(format!("rename {} -> {}", tmp.display(), dst.display()), e))?;
    sync_dir(dir)
}

/// Exclusive advisory lock on `dir/LOCK` (flock), released when the file is closed.
pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    use std::os::unix::io::AsRawFd;
    let p = dir.join("LOCK");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| Error::io(format!("open {}", p.display()), e))?;
    // SAFETY: flock on a valid, owned file descriptor.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Error::io(
            format!("lock {} (database already open?)", p.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(f)
}
