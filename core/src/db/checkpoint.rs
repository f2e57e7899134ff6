//! Checkpoints: a consistent image of the database at one commit point, taken
//! while writes go on, in a directory that `Db::open` opens as it is.
//!
//! A checkpoint directory holds
//! * every table, value-log and prepared-spill file the manifest names, hard
//!   linked (they are immutable once written; copied where the destination is
//!   on another filesystem);
//! * the WAL segments not yet purged: closed ones linked, the current one
//!   copied up to its last record (zeros written ahead are left out);
//! * a fresh `MANIFEST-<n>` (and its `.copy`) holding a snapshot of the state, and `CURRENT`;
//! * `CHECKPOINT`, written last (format below).
//!
//! Opening it replays the WAL over the tables exactly as after a crash at the
//! checkpoint's commit point. The image is taken with the write lock (no WAL
//! record can be appended, no segment purged) and the manifest lock (no flush,
//! compaction or value-log collection can change or delete a file the
//! snapshot names) held together, so it sees one commit point. Both locks are
//! held only while linking and copying the WAL tail, never while copying
//! tables (except across filesystems, where linking is impossible).
//!
//! It is written into `<dest>.incomplete` and renamed to `<dest>` once every
//! file and the directory are fsynced: a directory called `<dest>` is always
//! complete, a crash or error leaves at most the `.incomplete` one (removed on
//! error). Files it writes are 0660 and the directory 0700 whatever the umask.
//!
//! `CHECKPOINT` format (text, one `key value` per line, in this order):
//! ```text
//! tidesdb-checkpoint 1
//! sequence <last commit sequence in the image>
//! files <number of files besides CHECKPOINT>
//! bytes <their total size>
//! <caller's note lines, verbatim>
//! ```

use super::database::DbInner;
use crate::error::{Error, Result};
use crate::journal::wal;
use crate::table::sst;
use crate::version::manifest::{self, ManifestWriter};
use crate::Db;
use std::fs::{DirBuilder, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Name of the file written last into a checkpoint.
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";
/// First line of [`CHECKPOINT_FILE`].
const CHECKPOINT_MAGIC: &str = "tidesdb-checkpoint 1";

/// What [`Db::checkpoint`] took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The commit sequence of the image: every commit up to it is in, none after.
    pub sequence: u64,
    /// Files in the checkpoint besides `CHECKPOINT`.
    pub files: u64,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// Reads the `CHECKPOINT` file of a complete checkpoint in `dir`.
pub fn read_checkpoint_info(dir: &Path) -> Result<CheckpointInfo> {
    let path = dir.join(CHECKPOINT_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    let bad = |d: &str| Error::corruption(&path, 0, d.to_string());
    let mut lines = text.lines();
    if lines.next() != Some(CHECKPOINT_MAGIC) {
        return Err(bad("not a TidesDB checkpoint (first line)"));
    }
    let mut field = |name: &str| -> Result<u64> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| bad(&format!("missing or bad '{}' line", name.trim())))
    };
    Ok(CheckpointInfo {
        sequence: field("sequence ")?,
        files: field("files ")?,
        bytes: field("bytes ")?,
    })
}

impl Db {
    /// Writes a checkpoint of the database into `dest`, which must not exist
    /// (its parent must). `note` is appended to the `CHECKPOINT` file (e.g.
    /// the server's binlog position of the same point). See the module doc.
    pub fn checkpoint(&self, dest: &Path, note: &str) -> Result<CheckpointInfo> {
        self.inner().checkpoint(dest, note)
    }
}

/// One file of the image: where it is now, its name in the checkpoint.
struct Piece {
    src: PathBuf,
    name: String,
    /// Copy this many bytes instead of linking (the current WAL segment).
    copy_len: Option<u64>,
}

impl DbInner {
    pub(crate) fn checkpoint(&self, dest: &Path, note: &str) -> Result<CheckpointInfo> {
        self.check_open()?;
        let invalid = |d: String| Error::InvalidArgument(d);
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| invalid(format!("checkpoint path {} has no name", dest.display())))?;
        if note.lines().any(|l| l.starts_with("tidesdb-checkpoint")) {
            return Err(invalid("checkpoint note must not repeat the header".into()));
        }
        if dest.symlink_metadata().is_ok() {
            return Err(invalid(format!("{} already exists", dest.display())));
        }
        let parent = dest.parent().filter(|p| !p.as_os_str().is_empty());
        let parent = parent.unwrap_or(Path::new("."));
        let tmp = parent.join(format!("{name}.incomplete"));
        if tmp.symlink_metadata().is_ok() {
            return Err(invalid(format!(
                "{} exists: another checkpoint is being written there, or one failed \
                 (remove it)",
                tmp.display()
            )));
        }
        crate::io::create_dir(DirBuilder::new().mode(0o700), &tmp)
            .map_err(|e| Error::io(format!("create {}", tmp.display()), e))?;
        // The umask may only narrow it; 0700 whatever it is.
        if let Err(e) = set_mode(&tmp, 0o700) {
            let _ = crate::io::remove_dir_all(&tmp);
            return Err(e);
        }
        match self.write_checkpoint(&tmp, note) {
            Ok(info) => {
                let done = crate::io::rename(&tmp, dest)
                    .map_err(|e| {
                        Error::io(format!("rename {} -> {}", tmp.display(), dest.display()), e)
                    })
                    .and_then(|()| crate::fsutil::sync_dir(parent));
                if let Err(e) = done {
                    let _ = crate::io::remove_dir_all(&tmp);
                    return Err(e);
                }
                Ok(info)
            }
            Err(e) => {
                let _ = crate::io::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    fn write_checkpoint(&self, tmp: &Path, note: &str) -> Result<CheckpointInfo> {
        // Deferred puts queued before the checkpoint belong in it.
        self.drain_queue();
        let (sequence, mnum, mut files, mut bytes) = {
            // Lock order as in the commit path: write, then manifest.
            let w = self.commit.lock_settled();
            let m = self.manifest.lock();
            let mut state = m.1.clone();
            let sequence = w.last_seq.max(state.last_seq);
            state.last_seq = sequence;
            state.next_file = self.next_file.load(Ordering::SeqCst).max(state.next_file);
            let mut pieces = Vec::new();
            for meta in state.cfs.values() {
                for f in meta.levels.iter().flatten() {
                    pieces.push(piece(sst::table_path(&self.dir, f.file_no), None)?);
                }
            }
            for no in state.vlog_files.keys() {
                pieces.push(piece(crate::vlog::file::vlog_path(&self.dir, *no), None)?);
            }
            for (_, no) in state.prepared_spills.values().flatten() {
                pieces.push(piece(crate::txn::spill::prep_path(&self.dir, *no), None)?);
            }
            for no in &self.held_wal {
                pieces.push(piece(wal::segment_path(&self.dir, *no), None)?);
            }
            for s in self.commit.closed_segments().iter() {
                pieces.push(piece(wal::segment_path(&self.dir, s.number), None)?);
            }
            if let Some(cur) = &w.wal {
                pieces.push(piece(cur.path.clone(), Some(cur.size))?);
            }
            let mut files = 0u64;
            let mut bytes = 0u64;
            for p in &pieces {
                bytes += place(p, tmp)?;
                files += 1;
            }
            // The snapshot manifest, numbered above every file it names.
            let mnum = state.next_file;
            state.next_file += 1;
            drop(ManifestWriter::create(tmp, mnum, &state)?);
            (sequence, mnum, files, bytes)
        };
        let manifest_path = tmp.join(manifest::manifest_name(mnum));
        let written = [
            manifest::copy_path(&manifest_path),
            manifest_path,
            tmp.join("CURRENT"),
        ];
        for extra in &written {
            let md = std::fs::metadata(extra)
                .map_err(|e| Error::io(format!("stat {}", extra.display()), e))?;
            set_mode(extra, 0o660)?;
            bytes += md.len();
            files += 1;
        }
        let mut text =
            format!("{CHECKPOINT_MAGIC}\nsequence {sequence}\nfiles {files}\nbytes {bytes}\n");
        for line in note.lines() {
            text.push_str(line);
            text.push('\n');
        }
        write_new(&tmp.join(CHECKPOINT_FILE), text.as_bytes())?;
        crate::fsutil::sync_dir(tmp)?;
        Ok(CheckpointInfo {
            sequence,
            files,
            bytes,
        })
    }
}

fn piece(src: PathBuf, copy_len: Option<u64>) -> Result<Piece> {
    let name = src
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| Error::InvalidArgument(format!("file name of {}", src.display())))?;
    Ok(Piece {
        src,
        name,
        copy_len,
    })
}

/// Links (or copies) one file into the checkpoint; returns its size.
fn place(p: &Piece, tmp: &Path) -> Result<u64> {
    let dst = tmp.join(&p.name);
    if let Some(len) = p.copy_len {
        return copy_prefix(&p.src, &dst, len);
    }
    match crate::io::hard_link(&p.src, &dst) {
        Ok(()) => std::fs::metadata(&dst)
            .map(|m| m.len())
            .map_err(|e| Error::io(format!("stat {}", dst.display()), e)),
        // Another filesystem: the file is immutable, a copy is as good.
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            let len = std::fs::metadata(&p.src)
                .map_err(|e| Error::io(format!("stat {}", p.src.display()), e))?
                .len();
            copy_prefix(&p.src, &dst, len)
        }
        Err(e) => Err(Error::io(
            format!("link {} -> {}", p.src.display(), dst.display()),
            e,
        )),
    }
}

/// Copies the first `len` bytes of `src` into a new file `dst` (0660), fsynced.
fn copy_prefix(src: &Path, dst: &Path, len: u64) -> Result<u64> {
    let mut from =
        crate::io::open_read(src).map_err(|e| Error::io(format!("open {}", src.display()), e))?;
    let to = crate::io::open(
        OpenOptions::new().write(true).create_new(true).mode(0o660),
        dst,
    )
    .map_err(|e| Error::io(format!("create {}", dst.display()), e))?;
    let mut to = crate::io::Writer::new(to, dst);
    let copied = std::io::copy(&mut (&mut from).take(len), &mut to)
        .map_err(|e| Error::io(format!("copy {} -> {}", src.display(), dst.display()), e))?;
    if copied != len {
        return Err(Error::corruption(
            src,
            copied,
            format!("file shorter than its {len} bytes"),
        ));
    }
    to.sync_all()
        .map_err(|e| Error::io(format!("fsync {}", dst.display()), e))?;
    set_mode(dst, 0o660)?;
    Ok(len)
}

fn write_new(path: &Path, data: &[u8]) -> Result<()> {
    let f = crate::io::open(
        OpenOptions::new().write(true).create_new(true).mode(0o660),
        path,
    )
    .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    crate::io::write_all_at(&f, data, 0, path)
        .and_then(|()| crate::io::sync_all(&f, path))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    set_mode(path, 0o660)
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(format!("chmod {}", path.display()), e))
}
