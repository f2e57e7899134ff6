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

/// Alignment of `O_DIRECT` reads (offset, length and buffer address). 4 KiB
/// covers every common logical block size (512 B and 4 KiB sectors).
pub(crate) const DIRECT_ALIGN: u64 = 4096;

/// Opens `path` read-only with `O_DIRECT`. `Ok(None)` if the filesystem
/// refuses `O_DIRECT` (`EINVAL`, e.g. some FUSE or older tmpfs): the caller
/// then reads through the page cache.
pub(crate) fn open_direct(path: &Path) -> Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(Error::io(format!("open {} (O_DIRECT)", path.display()), e)),
    }
}

/// Reads `len` bytes at `off` from an `O_DIRECT` file with ONE aligned
/// positioned read (more only if the kernel returns a short count): the
/// range is widened to `DIRECT_ALIGN` boundaries and read into an aligned
/// buffer (an over-allocated `Vec` sliced at its first aligned address), and
/// the requested bytes are copied out. `Err` with `EINVAL` means the file
/// system refused the direct read (the caller falls back to buffered reads).
pub(crate) fn pread_direct(f: &File, off: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let a = DIRECT_ALIGN;
    let start = off - off % a;
    let end = (off + len as u64).div_ceil(a) * a;
    let span = (end - start) as usize;
    let mut raw = vec![0u8; span + a as usize];
    let shift = raw.as_ptr().align_offset(a as usize);
    let buf = &mut raw[shift..shift + span];
    let need = (off - start) as usize + len;
    let mut got = 0usize;
    while got < need {
        // Keep offset and length aligned: restart at an aligned position.
        let pos = got - got % a as usize;
        let n = f.read_at(&mut buf[pos..], start + pos as u64)?;
        if pos + n <= got {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        got = pos + n;
    }
    let s = (off - start) as usize;
    Ok(buf[s..s + len].to_vec())
}

/// Shared state of `DbOptions::use_direct_reads`: present only when the
/// option is on and the directory's filesystem accepted an `O_DIRECT` open.
#[derive(Debug, Default)]
pub(crate) struct DirectIo {
    /// Cleared (for the rest of the session) if a direct read ever fails with
    /// `EINVAL`; reads then go through the page cache.
    pub enabled: std::sync::atomic::AtomicBool,
    /// Number of reads served with `O_DIRECT` (tests, statistics).
    pub reads: std::sync::atomic::AtomicU64,
}

/// Reads exactly `len` bytes at `off`: with `O_DIRECT` through `direct` when
/// given and still enabled (one aligned `pread`), else with one buffered
/// `pread` on `file`.
pub(crate) fn read_at(
    file: &File,
    direct: Option<(&File, &DirectIo)>,
    off: u64,
    len: usize,
    path: &Path,
) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::Ordering;
    if let Some((df, dio)) = direct {
        if dio.enabled.load(Ordering::Relaxed) {
            match pread_direct(df, off, len) {
                Ok(v) => {
                    dio.reads.fetch_add(1, Ordering::Relaxed);
                    return Ok(v);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    dio.enabled.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(Error::io(format!("read {} (O_DIRECT)", path.display()), e)),
            }
        }
    }
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, off)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    Ok(buf)
}
