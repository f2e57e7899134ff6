//! The engine's file operations, in one narrow layer a test can make fail.
//!
//! Every open, write, read, fsync, rename, remove, truncate and hard link of
//! the engine's own files (WAL, table files, value logs, manifest, spill
//! files, prepared-transaction records, checkpoints) goes through a function
//! here (or through [`Writer`] / [`Reader`] for buffered streams). Each asks
//! [`faults::check`] first: one relaxed atomic load while no fault is armed,
//! so release builds keep the plain system call path. Functions are
//! `#[track_caller]`, so a fault plan can name the engine's call site
//! (`file:line`) rather than this module's.

pub mod faults;

use faults::{Injected, Op};
use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::panic::Location;
use std::path::{Path, PathBuf};

type IoResult<T> = std::io::Result<T>;

fn errno(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

/// Fails if a fault is armed for this operation (a partial fault is a plain
/// failure for operations that write no bytes).
#[track_caller]
#[inline]
fn gate(op: Op, path: &Path) -> IoResult<()> {
    match faults::check(op, path, Location::caller()) {
        None => Ok(()),
        Some(Injected::Fail(e) | Injected::Partial(e)) => Err(errno(e)),
    }
}

/// `opts.open(path)`.
#[track_caller]
pub(crate) fn open(opts: &OpenOptions, path: &Path) -> IoResult<File> {
    gate(Op::Open, path)?;
    opts.open(path)
}

/// `File::open(path)` (read-only).
#[track_caller]
pub(crate) fn open_read(path: impl AsRef<Path>) -> IoResult<File> {
    let path = path.as_ref();
    gate(Op::Open, path)?;
    File::open(path)
}

/// `builder.create(path)`.
#[track_caller]
pub(crate) fn create_dir(builder: &DirBuilder, path: &Path) -> IoResult<()> {
    gate(Op::Open, path)?;
    builder.create(path)
}

/// `std::fs::read(path)`.
#[track_caller]
pub(crate) fn read(path: impl AsRef<Path>) -> IoResult<Vec<u8>> {
    let path = path.as_ref();
    gate(Op::Open, path)?;
    gate(Op::Read, path)?;
    std::fs::read(path)
}

/// `file.read_to_end(buf)`.
#[track_caller]
pub(crate) fn read_to_end(file: &mut File, buf: &mut Vec<u8>, path: &Path) -> IoResult<usize> {
    use std::io::Read;
    gate(Op::Read, path)?;
    file.read_to_end(buf)
}

/// `file.read_exact_at(buf, off)`.
#[track_caller]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], off: u64, path: &Path) -> IoResult<()> {
    gate(Op::Read, path)?;
    file.read_exact_at(buf, off)
}

/// Fails if a read fault is armed (for reads done by hand, `pread`).
#[track_caller]
pub(crate) fn before_read(path: &Path) -> IoResult<()> {
    gate(Op::Read, path)
}

/// `file.write_all_at(buf, off)`.
#[track_caller]
pub(crate) fn write_all_at(file: &File, buf: &[u8], off: u64, path: &Path) -> IoResult<()> {
    match faults::check(Op::Write, path, Location::caller()) {
        None => file.write_all_at(buf, off),
        Some(Injected::Fail(e)) => Err(errno(e)),
        Some(Injected::Partial(e)) => {
            let _ = file.write_all_at(&buf[..buf.len() / 2], off);
            Err(errno(e))
        }
    }
}

/// Writes all of `pieces` at `off` with `raw` (a vectored write); a partial
/// fault writes the first half of their bytes.
#[track_caller]
pub(crate) fn write_pieces_at(
    file: &File,
    pieces: &[&[u8]],
    off: u64,
    path: &Path,
    raw: fn(&File, &[&[u8]], u64) -> IoResult<()>,
) -> IoResult<()> {
    match faults::check(Op::Write, path, Location::caller()) {
        None => raw(file, pieces, off),
        Some(Injected::Fail(e)) => Err(errno(e)),
        Some(Injected::Partial(e)) => {
            let all = pieces.concat();
            let _ = file.write_all_at(&all[..all.len() / 2], off);
            Err(errno(e))
        }
    }
}

/// `file.sync_data()` (fdatasync).
#[track_caller]
pub(crate) fn sync_data(file: &File, path: &Path) -> IoResult<()> {
    gate(Op::Sync, path)?;
    file.sync_data()
}

/// `file.sync_all()` (fsync; of a directory too).
#[track_caller]
pub(crate) fn sync_all(file: &File, path: &Path) -> IoResult<()> {
    gate(Op::Sync, path)?;
    file.sync_all()
}

/// `file.set_len(len)` (ftruncate).
#[track_caller]
pub(crate) fn set_len(file: &File, len: u64, path: &Path) -> IoResult<()> {
    gate(Op::SetLen, path)?;
    file.set_len(len)
}

/// `std::fs::rename(from, to)`.
#[track_caller]
pub(crate) fn rename(from: &Path, to: &Path) -> IoResult<()> {
    gate(Op::Rename, from)?;
    std::fs::rename(from, to)
}

/// `std::fs::remove_file(path)`.
#[track_caller]
pub(crate) fn remove_file(path: impl AsRef<Path>) -> IoResult<()> {
    let path = path.as_ref();
    gate(Op::Remove, path)?;
    std::fs::remove_file(path)
}

/// `std::fs::remove_dir_all(path)`.
#[track_caller]
pub(crate) fn remove_dir_all(path: impl AsRef<Path>) -> IoResult<()> {
    let path = path.as_ref();
    gate(Op::Remove, path)?;
    std::fs::remove_dir_all(path)
}

/// `std::fs::hard_link(from, to)` (the fault is looked up for `to`).
#[track_caller]
pub(crate) fn hard_link(from: &Path, to: &Path) -> IoResult<()> {
    gate(Op::Link, to)?;
    std::fs::hard_link(from, to)
}

/// A file written as a stream (under a `BufWriter`), its writes gated.
/// The call site of a fault is where the `Writer` was made.
pub(crate) struct Writer {
    file: File,
    path: PathBuf,
    site: &'static Location<'static>,
}

impl Writer {
    #[track_caller]
    pub(crate) fn new(file: File, path: &Path) -> Writer {
        Writer {
            file,
            path: path.to_path_buf(),
            site: Location::caller(),
        }
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// `sync_all` of the file.
    #[track_caller]
    pub(crate) fn sync_all(&self) -> IoResult<()> {
        sync_all(&self.file, &self.path)
    }
}

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        match faults::check(Op::Write, &self.path, self.site) {
            None => self.file.write(buf),
            Some(Injected::Fail(e)) => Err(errno(e)),
            Some(Injected::Partial(e)) => {
                let _ = self.file.write_all(&buf[..buf.len() / 2]);
                Err(errno(e))
            }
        }
    }

    fn flush(&mut self) -> IoResult<()> {
        self.file.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::faults::{self, Fault, Op, Plan};
    use super::*;

    /// The nth write under the plan's directory fails; writes elsewhere and
    /// the other writes there do not; a torn write leaves half the bytes
    /// and fails everything after it until disarmed.
    #[test]
    fn nth_write_fails_and_torn_write_stops_everything() {
        let _g = crate::io::tests::serial();
        let d = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        faults::arm(Plan {
            dir: d.path().to_path_buf(),
            op: Op::Write,
            fault: Fault::Torn,
            nth: 2,
            site: None,
        });
        let q = other.path().join("g");
        let g = File::create(&q).unwrap();
        write_all_at(&g, b"elsewhere", 0, &q).unwrap();
        write_all_at(&f, b"one", 0, &p).unwrap();
        assert!(!faults::fired());
        let e = write_all_at(&f, b"twotwo", 3, &p).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert!(faults::fired());
        assert_eq!(
            sync_all(&f, &p).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        write_all_at(&g, b"!", 9, &q).unwrap();
        faults::disarm();
        assert_eq!(std::fs::read(&p).unwrap(), b"onetwo");
        sync_all(&f, &p).unwrap();
    }

    /// Recording counts per call site without failing.
    #[test]
    fn record_counts_call_sites() {
        let _g = crate::io::tests::serial();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        faults::record(d.path());
        for i in 0..3 {
            write_all_at(&f, b"x", i, &p).unwrap();
        }
        sync_data(&f, &p).unwrap();
        let r = faults::recorded();
        faults::disarm();
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r
            .iter()
            .any(|s| s.op == Op::Write && s.count == 3 && s.site.starts_with("io/mod.rs:")));
        assert!(r.iter().any(|s| s.op == Op::Sync && s.count == 1));
    }

    /// Unit tests arming faults run one at a time (the plan is global; its
    /// directory keeps other tests' files out of it, but not these tests'
    /// plans out of each other).
    pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }
}
