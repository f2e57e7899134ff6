//! Small filesystem helpers.

use crate::error::{Error, Result};
use std::fs::File;
use std::path::Path;

#[track_caller]
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let f = crate::io::open_read(dir)
        .map_err(|e| Error::io(format!("open dir {}", dir.display()), e))?;
    crate::io::sync_all(&f, dir).map_err(|e| Error::io(format!("fsync dir {}", dir.display()), e))
}

/// Writes `data` to `dir/name` atomically: temp file, fsync, rename, fsync dir.
#[track_caller]
pub(crate) fn atomic_write(dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    {
        let create = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .clone();
        let f = crate::io::open(&create, &tmp)
            .map_err(|e| Error::io(format!("create {}", tmp.display()), e))?;
        crate::io::write_all_at(&f, data, 0, &tmp)
            .map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
        crate::io::sync_all(&f, &tmp)
            .map_err(|e| Error::io(format!("fsync {}", tmp.display()), e))?;
    }
    crate::io::rename(&tmp, &dst)
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
/// buffer (an over-allocated `Vec` used from its first aligned address).
/// Returns the buffer and the range of the requested bytes in it (no copy;
/// see `SharedBytes`). `Err` with `EINVAL` means the file system refused the
/// direct read (the caller falls back to buffered reads).
pub(crate) fn pread_direct(
    f: &File,
    off: u64,
    len: usize,
) -> std::io::Result<(Vec<u8>, std::ops::Range<usize>)> {
    let a = DIRECT_ALIGN;
    let start = off - off % a;
    let end = (off + len as u64).div_ceil(a) * a;
    let span = (end - start) as usize;
    let mut raw: Vec<u8> = Vec::with_capacity(span + a as usize);
    let shift = raw.as_ptr().align_offset(a as usize);
    raw.resize(shift, 0); // the few bytes before the aligned start
    let need = (off - start) as usize + len;
    let mut got = 0usize;
    while got < need {
        // Keep offset and length aligned: restart at an aligned position.
        let pos = got - got % a as usize;
        let n = pread_uninit(f, &mut raw, shift + pos, span - pos, start + pos as u64)?;
        if pos + n <= got {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        got = pos + n;
    }
    let s = shift + (off - start) as usize;
    Ok((raw, s..s + len))
}

/// One `pread` of up to `n` bytes at file offset `off` into `buf`'s spare
/// capacity at `at <= buf.len()` (no zero-fill first: a large value's buffer
/// is written once, by the kernel); `buf`'s length becomes `at` + the bytes
/// read.
fn pread_uninit(
    f: &File,
    buf: &mut Vec<u8>,
    at: usize,
    n: usize,
    off: u64,
) -> std::io::Result<usize> {
    use std::os::unix::io::AsRawFd;
    if at > buf.len() || at.saturating_add(n) > buf.capacity() {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    let off = libc::off_t::try_from(off)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    loop {
        // SAFETY: `at + n <= capacity`, so the kernel writes inside the
        // allocation; the fd is valid for the call.
        let r = unsafe { libc::pread(f.as_raw_fd(), buf.as_mut_ptr().add(at).cast(), n, off) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let r = r as usize;
        // SAFETY: the bytes below `at <= len` were initialised before, those
        // in `at..at + r` by this read; `at + r <= capacity`.
        unsafe { buf.set_len(at + r) };
        return Ok(r);
    }
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
/// `pread` on `file`. Returns a buffer and the range of the bytes in it.
#[track_caller]
pub(crate) fn read_at_range(
    file: &File,
    direct: Option<(&File, &DirectIo)>,
    off: u64,
    len: usize,
    path: &Path,
) -> Result<(Vec<u8>, std::ops::Range<usize>)> {
    use std::sync::atomic::Ordering;
    crate::io::before_read(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
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
    let mut buf = Vec::with_capacity(len);
    fill_from(file, &mut buf, len, off, path)?;
    Ok((buf, 0..len))
}

/// Reads into `buf` (which holds the first `buf.len()` bytes of the range
/// already) until it holds the `len` bytes at `off`; a file that ends first
/// is an error.
fn fill_from(file: &File, buf: &mut Vec<u8>, len: usize, off: u64, path: &Path) -> Result<()> {
    let rerr = |e| Error::io(format!("read {}", path.display()), e);
    while buf.len() < len {
        let got = buf.len();
        let n = pread_uninit(file, buf, got, len - got, off + got as u64).map_err(rerr)?;
        if n == 0 {
            return Err(rerr(std::io::Error::from(
                std::io::ErrorKind::UnexpectedEof,
            )));
        }
    }
    Ok(())
}

/// Where `RWF_NOWAIT` is refused: a table block read taking this long
/// waited on the disk (a page cache hit takes a few microseconds).
pub(crate) const DISK_READ: std::time::Duration = std::time::Duration::from_micros(50);

/// As [`read_at`] (without `O_DIRECT`), and whether the read waited on the
/// disk: it first asks for the bytes with `preadv2(RWF_NOWAIT)`, which
/// fails with `EAGAIN` (or returns short) instead of starting I/O when they
/// are not all in the page cache; the rest is then read as usual. Where the
/// file system refuses `RWF_NOWAIT`, a read taking `slow` or more counts as
/// one that waited.
#[track_caller]
pub(crate) fn read_at_noting_disk(
    file: &File,
    off: u64,
    len: usize,
    path: &Path,
    slow: std::time::Duration,
) -> Result<(Vec<u8>, bool)> {
    use std::os::unix::io::AsRawFd;
    crate::io::before_read(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let start = std::time::Instant::now();
    let mut nowait_ok = true;
    if let Ok(o) = libc::off_t::try_from(off) {
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: len,
        };
        // SAFETY: the iovec covers the vector's capacity; the fd is valid.
        let r = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, o, libc::RWF_NOWAIT) };
        if r > 0 {
            // SAFETY: the kernel initialised the first `r <= len` bytes.
            unsafe { buf.set_len(r as usize) };
            if r as usize == len {
                return Ok((buf, false));
            }
        } else if r < 0 {
            let e = std::io::Error::last_os_error();
            nowait_ok = e.raw_os_error() == Some(libc::EAGAIN);
        }
    }
    fill_from(file, &mut buf, len, off, path)?;
    Ok((buf, nowait_ok || start.elapsed() >= slow))
}

/// As [`read_at_range`], the bytes in a vector of their own.
#[track_caller]
pub(crate) fn read_at(
    file: &File,
    direct: Option<(&File, &DirectIo)>,
    off: u64,
    len: usize,
    path: &Path,
) -> Result<Vec<u8>> {
    let (mut buf, r) = read_at_range(file, direct, off, len, path)?;
    if r.start == 0 && r.end <= buf.len() {
        buf.truncate(r.end);
        return Ok(buf);
    }
    buf.get(r).map(<[u8]>::to_vec).ok_or_else(|| {
        let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        Error::io(format!("read {}", path.display()), e)
    })
}

/// Starts writeback of `len` bytes at `off` of `f` without waiting for it
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so a later fsync finds most
/// of them on disk already. Advisory: errors are left to that fsync.
pub(crate) fn start_writeback(f: &File, off: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain syscall on a descriptor we own; no memory is passed.
    unsafe {
        libc::sync_file_range(
            f.as_raw_fd(),
            off as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A read served by the page cache reports no disk wait and the right
    /// bytes; after the file is evicted (where the file system evicts: not
    /// tmpfs) the same read reports one.
    #[test]
    fn read_noting_disk_tells_page_cache_from_disk() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..64 << 10).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = File::open(&p).unwrap();
        f.sync_all().unwrap();
        let slow = Duration::from_secs(3600);
        let (b, _) = read_at_noting_disk(&f, 8192, 5000, &p, slow).unwrap();
        let (b2, waited) = read_at_noting_disk(&f, 8192, 5000, &p, slow).unwrap();
        assert_eq!(b, &data[8192..13192]);
        assert_eq!(b2, b);
        assert!(!waited, "a page cache hit counted as a disk read");
        // Whether this file system takes RWF_NOWAIT (else timing decides).
        let mut one = [0u8; 1];
        let iov = libc::iovec {
            iov_base: one.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: one-byte buffer; the fd is valid.
        let nowait = unsafe { libc::preadv2(f.as_raw_fd(), &iov, 1, 0, libc::RWF_NOWAIT) } == 1;
        // Eviction is advice: the kernel may keep a page another reader (or
        // readahead) holds at that moment, so a few tries are allowed.
        let mut waited = false;
        for _ in 0..5 {
            // SAFETY: plain syscall on a descriptor we own.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            let (b3, w) = read_at_noting_disk(&f, 8192, 5000, &p, slow).unwrap();
            assert_eq!(b3, b);
            if w {
                waited = true;
                break;
            }
        }
        let fs_evicts = std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
            !m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some("/tmp") && l.contains("tmpfs"))
        });
        if nowait && fs_evicts && std::env::temp_dir() == Path::new("/tmp") {
            assert!(waited, "a read after eviction counted as a page cache hit");
        }
    }
}
