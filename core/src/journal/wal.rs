//! Write-ahead log: append-only numbered segment files.
//!
//! ## Format
//! A segment is the file `<number:06>.wal` in the database directory, holding a
//! sequence of physical records:
//!
//! ```text
//! +-------------+-------------+------------------+
//! | len: u32 LE | crc: u32 LE | payload: len B   |
//! +-------------+-------------+------------------+
//! crc = crc32(len as 4 LE bytes ++ payload)
//! ```
//!
//! One physical record holds one logical record (no fragmentation), so every
//! commit is one record and replays all-or-nothing. Logical payloads are
//! described in `batch.rs` (commit batches, 2PC prepare / resolve records).
//!
//! Replay rules: in the *last* segment a partial header, a payload cut short by
//! end-of-file, a checksum mismatch on the final record (the last one before
//! end-of-file or before an all-zero tail), or an all-zero tail is a torn
//! tail: replay stops cleanly there (those commits were never acknowledged).
//! The segment being written may end in zeros written ahead of the appends
//! (`PREFILL_BYTES`); a segment is cut back to its last record when it is
//! rotated or the database closes. Anything else (bad checksum followed by more data, a torn
//! record in a non-last segment, a zero header followed by non-zero bytes) is
//! reported as `Error::Corruption`. Segments are fsynced when rotated, so only
//! the last one can legitimately be torn.
//!
//! *Encrypted segment* (`DbOptions::log_encryption_key`): the segment starts
//! with its 64-byte encryption header (`crypto/mod.rs`: key id, key version,
//! nonce); the records follow at offset 64, each encrypted in place (AES-CTR
//! at its file offset; the crc is over the plaintext). A reader knows it by
//! the header's magic and checksum. No zeros are written ahead
//! (`PREFILL_BYTES`): a torn tail is a partial or mismatching final record.
//! Record offsets are file offsets either way (value locations, `WalLoc`).
//! An encrypted segment cannot be replayed without its key, and which
//! families its records belong to is unknown until it is: the open fails
//! (`Error::KeyUnavailable` naming the segment), unless nothing follows the
//! header (no record to replay).
//!
//! How the commit leader writes a group (the bytes above do not depend on it):
//! [`Frames`] holds the group's records in one buffer, except values of at
//! least [`OUT_OF_LINE`] bytes, which stay in the write set's shared buffers
//! and are only referenced (position in the buffer + value). The checksum is
//! computed over the pieces in order (a value's own crc32, computed once when
//! the transaction wrote it, is combined in instead of reading the value
//! again: see `skiplist::ValueIn`), and the append is one `pwritev` of
//! buffer slices and values (more if over `IOV_MAX` pieces or partial). So a
//! large value is copied by the kernel only, not into a frame buffer first.

use crate::coding::{crc32, u32_at};
use crate::crypto::{FileCipher, Keyring, HEADER_LEN};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) const HEADER: usize = 8;
/// Refuse to allocate absurd lengths while replaying (bigger = corruption).
pub(crate) const MAX_RECORD: u64 = 1 << 34;

pub(crate) fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.wal"))
}

pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".wal")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Encodes one physical record around `payload` into `out`.
pub(crate) fn frame_record(out: &mut Vec<u8>, payload: &[u8]) {
    let len = payload.len() as u32;
    let lb = len.to_le_bytes();
    out.extend_from_slice(&lb);
    out.extend_from_slice(&crc32(&[&lb, payload]).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Frames a record whose payload `encode` appends straight into `out` (no
/// intermediate payload buffer): the header is patched afterwards.
pub(crate) fn frame_with(out: &mut Vec<u8>, encode: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 8]);
    encode(out);
    let len = (out.len() - start - 8) as u32;
    let lb = len.to_le_bytes();
    let c = crc32(&[&lb, out.get(start + 8..).unwrap_or(&[])]);
    if let Some(h) = out.get_mut(start..start + 8) {
        h[..4].copy_from_slice(&lb);
        h[4..].copy_from_slice(&c.to_le_bytes());
    }
}

pub(crate) use super::batch::OUT_OF_LINE;

/// Most iovecs one `pwritev` takes (Linux `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// WAL records assembled for one append: `buf` holds every byte except the
/// out-of-line values, each of which belongs at offset `.0` of `buf` (before
/// the byte there).
#[derive(Default)]
pub(crate) struct Frames {
    buf: Vec<u8>,
    /// (position in `buf`, value, crc32 of the value if known).
    ext: Vec<(usize, Arc<[u8]>, Option<u32>)>,
    ext_bytes: usize,
}

impl crate::journal::batch::Sink for Frames {
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
    fn value(&mut self, v: &Arc<[u8]>, crc: Option<u32>) {
        if v.len() < OUT_OF_LINE {
            crate::coding::put_bytes(&mut self.buf, v);
        } else {
            crate::coding::put_varint(&mut self.buf, v.len() as u64);
            self.ext.push((self.buf.len(), v.clone(), crc));
            self.ext_bytes += v.len();
        }
    }
}

/// Where a value's bytes are in the WAL: segment number and the file offset
/// of its first byte. A memtable keeps it with a large value so the flush can
/// point into the (sealed) segment instead of copying the value to a new value
/// log file (see `vlog.rs`, "WAL segments kept as value logs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WalLoc {
    pub segment: u64,
    pub offset: u64,
}

impl Frames {
    pub(crate) fn reserve(&mut self, n: usize) {
        self.buf.reserve(n);
    }

    /// Total bytes of the records.
    pub(crate) fn len(&self) -> usize {
        self.buf.len() + self.ext_bytes
    }

    /// Appends one physical record whose payload `encode` writes into `self`
    /// (header patched afterwards, checksum over the pieces in place).
    pub(crate) fn frame(&mut self, encode: impl FnOnce(&mut Frames)) {
        let start = self.buf.len();
        let (ext0, ext_bytes0) = (self.ext.len(), self.ext_bytes);
        self.buf.extend_from_slice(&[0u8; 8]);
        encode(self);
        let len = (self.buf.len() - start - 8 + self.ext_bytes - ext_bytes0) as u32;
        let lb = len.to_le_bytes();
        let mut h = crc32fast::Hasher::new();
        h.update(&lb);
        let mut pos = start + 8;
        for (at, v, crc) in self.ext.get(ext0..).unwrap_or(&[]) {
            h.update(self.buf.get(pos..*at).unwrap_or(&[]));
            match crc {
                Some(c) => crate::coding::crc32_combine(&mut h, *c, v.len()),
                None => h.update(v),
            }
            pos = *at;
        }
        h.update(self.buf.get(pos..).unwrap_or(&[]));
        let c = h.finalize();
        if let Some(hd) = self.buf.get_mut(start..start + 8) {
            hd[..4].copy_from_slice(&lb);
            hd[4..].copy_from_slice(&c.to_le_bytes());
        }
    }

    /// Each out-of-line value (by the address of its buffer) with the offset
    /// of its first byte from the start of these records.
    pub(crate) fn ext_offsets(&self) -> impl Iterator<Item = (*const u8, u64)> + '_ {
        let mut before = 0u64;
        self.ext.iter().map(move |(at, v, _)| {
            let off = *at as u64 + before;
            before += v.len() as u64;
            (v.as_ptr(), off)
        })
    }

    /// The records as slices, in file order.
    fn pieces(&self) -> Vec<&[u8]> {
        let mut v = Vec::with_capacity(2 * self.ext.len() + 1);
        let mut pos = 0;
        for (at, val, _) in &self.ext {
            if *at > pos {
                v.push(self.buf.get(pos..*at).unwrap_or(&[]));
            }
            v.push(&val[..]);
            pos = *at;
        }
        if pos < self.buf.len() {
            v.push(self.buf.get(pos..).unwrap_or(&[]));
        }
        v
    }

    /// The records as one buffer (an encrypted segment's append, tests).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }
}

/// Writes all of `pieces` at `off` (`pwritev`, retried on partial writes and
/// `EINTR`, at most `IOV_MAX` pieces a call).
fn pwrite_all(file: &File, pieces: &[&[u8]], mut off: u64) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let (mut i, mut skip) = (0usize, 0usize);
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(pieces.len().min(IOV_MAX));
    while i < pieces.len() {
        iov.clear();
        for (j, p) in pieces[i..].iter().take(IOV_MAX).enumerate() {
            let p = if j == 0 { &p[skip..] } else { p };
            iov.push(libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            });
        }
        let off_t = libc::off_t::try_from(off)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: every iovec points into a live slice of `pieces`, read only.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as i32, off_t) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
        }
        let mut n = n as usize;
        off += n as u64;
        while n > 0 && i < pieces.len() {
            let left = pieces[i].len() - skip;
            if n >= left {
                n -= left;
                i += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
        while i < pieces.len() && pieces[i].len() == skip {
            i += 1;
            skip = 0;
        }
    }
    Ok(())
}

pub(crate) struct WalWriter {
    pub number: u64,
    pub path: PathBuf,
    pub file: Arc<File>,
    pub size: u64,
    /// A failed append could not be cut back off the file: the segment may
    /// end in a partial record, so nothing more may be appended to it.
    pub torn: bool,
    /// Writeback of the segment has been started up to here (see
    /// `WRITEBACK_BYTES`).
    written_back: u64,
    /// The file's length: `size` plus zeros written ahead (`PREFILL_BYTES`).
    allocated: u64,
    /// Write zeros ahead of the appends (set by the commit leader for groups
    /// it fsyncs, see `PREFILL_BYTES`).
    pub prefill: bool,
    /// Encrypts the segment when set (header at offset 0).
    cipher: Option<FileCipher>,
}

/// Zeros written ahead of the appends, in this many bytes, while commits are
/// fsynced one group at a time (`SyncMode::Full`). On ext4 (and XFS) an
/// `fdatasync` after an append that grew the file also commits the file
/// system journal (new size, block allocation): two more device writes and a
/// cache flush in every commit's wait. Over blocks already written (the
/// zeros) it only writes the data pages and flushes, as InnoDB's
/// preallocated redo log does. So one group per `PREFILL_BYTES` pays the
/// journal commit (and the zeros' write) instead of every group. The segment
/// is cut back to its records when it is rotated or the database closes; a
/// crash leaves a zero tail, which replay reads as the end of the log
/// (module doc). Appends of this size or more are written as they are (their
/// own write dwarfs the journal's).
pub(crate) const PREFILL_BYTES: u64 = 1 << 20;

/// Unsynced bytes after which an append starts their writeback
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait), like
/// RocksDB's `wal_bytes_per_sync`. A segment is fsynced when it is rotated
/// (in the commit path, under the write lock): without this, that fsync
/// wrote the whole segment (16 MiB with the default write buffer) while every
/// writer waited; `write_1m` strace: 17 rotation fdatasyncs, ~30 % of the
/// writer thread's time. Durability is unchanged (only the fsync makes bytes
/// durable; this just lets the disk start earlier).
pub(crate) const WRITEBACK_BYTES: u64 = 1 << 20;

impl WalWriter {
    #[cfg(test)]
    pub(crate) fn create(dir: &Path, number: u64) -> Result<WalWriter> {
        WalWriter::create_encrypted(dir, number, None)
    }

    /// `create`, the segment encrypted with `cipher` if given.
    pub(crate) fn create_encrypted(
        dir: &Path,
        number: u64,
        cipher: Option<FileCipher>,
    ) -> Result<WalWriter> {
        let path = segment_path(dir, number);
        let file = crate::io::open(OpenOptions::new().create_new(true).write(true), &path)
            .map_err(|e| Error::io(format!("create WAL {}", path.display()), e))?;
        let mut size = 0;
        if let Some(c) = &cipher {
            let header = crate::io::write_all_at(&file, &c.header(), 0, &path)
                .and_then(|_| crate::io::sync_data(&file, &path));
            if let Err(e) = header {
                drop(file);
                let _ = crate::io::remove_file(&path);
                return Err(Error::io(format!("write WAL {}", path.display()), e));
            }
            size = HEADER_LEN as u64;
        }
        if let Err(e) = crate::fsutil::sync_dir(dir) {
            drop(file);
            let _ = crate::io::remove_file(&path);
            return Err(e);
        }
        Ok(WalWriter {
            number,
            path,
            file: Arc::new(file),
            size,
            torn: false,
            written_back: 0,
            allocated: size,
            prefill: false,
            cipher,
        })
    }

    /// After an append: if it went past the zeros written ahead (or there
    /// are none), writes the next `PREFILL_BYTES` boundary's worth. Advisory
    /// like `start_writeback`: a failed write (no space) leaves at most a
    /// shorter zero tail, which replay reads as the end of the log.
    fn prefill_after(&mut self, appended: u64) {
        if self.size <= self.allocated {
            return;
        }
        self.allocated = self.size;
        // Zeros decrypt to garbage: an encrypted segment is not prefilled.
        if !self.prefill || appended >= PREFILL_BYTES || self.cipher.is_some() {
            return;
        }
        let end = self.size.div_ceil(PREFILL_BYTES) * PREFILL_BYTES;
        let zeros = vec![0u8; (end - self.size) as usize];
        if crate::io::write_all_at(&self.file, &zeros, self.size, &self.path).is_ok() {
            self.allocated = end;
        }
    }

    /// Cuts the zeros written ahead off the segment and fsyncs it (rotation,
    /// close): a finished segment ends with its last record.
    pub(crate) fn seal(&mut self) -> Result<()> {
        if self.allocated > self.size {
            crate::io::set_len(&self.file, self.size, &self.path)
                .map_err(|e| Error::io(format!("truncate WAL {}", self.path.display()), e))?;
            self.allocated = self.size;
        }
        self.sync()
    }

    /// Starts writeback of what was appended since the last call, once it
    /// is `WRITEBACK_BYTES` or more. Advisory: an error here is left to the
    /// fsync that makes the bytes durable.
    fn start_writeback(&mut self) {
        let n = self.size.saturating_sub(self.written_back);
        if n >= WRITEBACK_BYTES {
            crate::fsutil::start_writeback(&self.file, self.written_back, n);
            self.written_back = self.size;
        }
    }

    /// Appends already-framed bytes at the end of the segment. A failed
    /// write (ENOSPC, EDQUOT, EIO) may have written part of the bytes: the
    /// file is cut back to its previous size, so the segment still ends with
    /// a whole record and later appends (once there is space) follow it. If
    /// even that fails the writer is `torn` and refuses further appends.
    pub(crate) fn append(&mut self, framed: &[u8]) -> Result<()> {
        if self.torn {
            return Err(Error::Poisoned);
        }
        let sealed;
        let framed = match &self.cipher {
            Some(c) => {
                let mut v = framed.to_vec();
                c.apply(self.size, &mut v);
                sealed = v;
                &sealed[..]
            }
            None => framed,
        };
        if let Err(e) = crate::io::write_all_at(&self.file, framed, self.size, &self.path) {
            self.cut_back();
            return Err(Error::io(format!("write WAL {}", self.path.display()), e));
        }
        self.size += framed.len() as u64;
        self.prefill_after(framed.len() as u64);
        self.start_writeback();
        Ok(())
    }

    /// After a failed append: the file back to its records (zeros written
    /// ahead go too: the failed write may have left bytes in them).
    fn cut_back(&mut self) {
        if crate::io::set_len(&self.file, self.size, &self.path).is_err() {
            self.torn = true;
        }
        self.allocated = self.size;
    }

    /// [`WalWriter::append`] of assembled records (large values written from
    /// their own buffers, see [`Frames`]).
    pub(crate) fn append_frames(&mut self, frames: &Frames) -> Result<()> {
        if frames.ext.is_empty() {
            return self.append(&frames.buf);
        }
        if self.cipher.is_some() {
            // Encrypted in one buffer (the values are copied once).
            return self.append(&frames.to_vec());
        }
        if self.torn {
            return Err(Error::Poisoned);
        }
        if let Err(e) = crate::io::write_pieces_at(
            &self.file,
            &frames.pieces(),
            self.size,
            &self.path,
            pwrite_all,
        ) {
            self.cut_back();
            return Err(Error::io(format!("write WAL {}", self.path.display()), e));
        }
        self.size += frames.len() as u64;
        self.prefill_after(frames.len() as u64);
        self.start_writeback();
        Ok(())
    }

    pub(crate) fn sync(&self) -> Result<()> {
        crate::io::sync_data(&self.file, &self.path)
            .map_err(|e| Error::io(format!("fsync WAL {}", self.path.display()), e))
    }

    /// A handle that fsyncs this segment without the writer, so a commit
    /// group's fsync can run while the next group is appended.
    pub(crate) fn sync_handle(&self) -> SegmentSync {
        SegmentSync {
            file: self.file.clone(),
            path: self.path.clone(),
        }
    }
}

/// Fsyncs one WAL segment (see [`WalWriter::sync_handle`]).
#[derive(Clone)]
pub(crate) struct SegmentSync {
    file: Arc<File>,
    path: PathBuf,
}

impl SegmentSync {
    pub(crate) fn sync(&self) -> Result<()> {
        crate::io::sync_data(&self.file, &self.path)
            .map_err(|e| Error::io(format!("fsync WAL {}", self.path.display()), e))
    }
}

/// Reads every complete record of one segment, calling `f(payload, offset)`.
/// `is_last` enables torn-tail tolerance. Returns the number of valid bytes.
pub(crate) fn read_segment(
    path: &Path,
    is_last: bool,
    f: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<u64> {
    read_segment_with(path, is_last, &Keyring::default(), f)
}

/// `read_segment`; an encrypted segment takes its key from `keys`.
pub(crate) fn read_segment_with(
    path: &Path,
    is_last: bool,
    keys: &Keyring,
    mut f: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<u64> {
    let mut file = crate::io::open_read(path)
        .map_err(|e| Error::io(format!("open WAL {}", path.display()), e))?;
    let mut data = Vec::new();
    crate::io::read_to_end(&mut file, &mut data, path)
        .map_err(|e| Error::io(format!("read WAL {}", path.display()), e))?;
    let total = data.len() as u64;
    let mut pos: usize = 0;
    if data.len() >= HEADER_LEN && FileCipher::is_header(&data) {
        let c = match FileCipher::from_header(keys, &data[..HEADER_LEN], path, 0) {
            // No record after the header: nothing to read, with or without
            // the key (a segment started and closed without a commit).
            Err(Error::KeyUnavailable { .. }) if data.len() == HEADER_LEN => {
                return Ok(HEADER_LEN as u64)
            }
            Err(Error::KeyUnavailable {
                file,
                key_id,
                key_version,
                detail,
            }) => {
                return Err(Error::KeyUnavailable {
                    file,
                    key_id,
                    key_version,
                    detail: format!(
                        "{detail} (an encrypted write-ahead log segment, which may hold \
                         commits not yet in table files: the database cannot open without its \
                         key)"
                    ),
                })
            }
            r => r?,
        };
        c.apply(HEADER_LEN as u64, &mut data[HEADER_LEN..]);
        pos = HEADER_LEN;
    }
    let torn = |pos: usize, what: &str| -> Result<u64> {
        if is_last {
            Ok(pos as u64)
        } else {
            Err(Error::corruption(
                path,
                pos as u64,
                format!("{what} in a non-final WAL segment"),
            ))
        }
    };
    loop {
        let remaining = data.len() - pos;
        if remaining == 0 {
            return Ok(pos as u64);
        }
        if remaining < HEADER {
            return torn(pos, "partial record header");
        }
        let (Some(len), Some(crc)) = (u32_at(&data, pos), u32_at(&data, pos + 4)) else {
            return torn(pos, "partial record header");
        };
        if len == 0 && crc == 0 {
            // Zero-filled tail (e.g. preallocated blocks after a crash).
            if data[pos..].iter().all(|&b| b == 0) {
                return torn(pos, "zero-filled tail");
            }
            return Err(Error::corruption(
                path,
                pos as u64,
                "zero record header followed by data",
            ));
        }
        let len64 = u64::from(len);
        if len64 > MAX_RECORD || pos as u64 + HEADER as u64 + len64 > total {
            return torn(pos, "record extends past end of file");
        }
        let start = pos + HEADER;
        let end = start + len as usize;
        let payload = &data[start..end];
        let got = crc32(&[&len.to_le_bytes(), payload]);
        if got != crc {
            // The last record, or one followed only by zeros written ahead
            // (`PREFILL_BYTES`): a write the crash cut short.
            if end == data.len() || data[end..].iter().all(|&b| b == 0) {
                return torn(pos, "checksum mismatch on final record");
            }
            return Err(Error::ChecksumMismatch {
                file: path.to_path_buf(),
                offset: pos as u64,
                expected: crc,
                got,
            });
        }
        f(payload, pos as u64)?;
        pos = end;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write_records(dir: &Path, n: u64, recs: &[&[u8]]) -> PathBuf {
        let mut w = WalWriter::create(dir, n).unwrap();
        let mut buf = Vec::new();
        for r in recs {
            frame_record(&mut buf, r);
        }
        w.append(&buf).unwrap();
        w.sync().unwrap();
        w.path.clone()
    }

    fn read_all(p: &Path, last: bool) -> Result<Vec<Vec<u8>>> {
        let mut v = Vec::new();
        read_segment(p, last, |r, _| {
            v.push(r.to_vec());
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn roundtrip_and_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = write_records(d.path(), 1, &[b"hello", b"world", b"third record"]);
        assert_eq!(read_all(&p, true).unwrap().len(), 3);
        let len = std::fs::metadata(&p).unwrap().len();
        // Truncate inside the last record: torn tail, two records survive.
        for cut in [len - 1, len - 5, len - 12 - 8 + 3] {
            let f = OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(cut).unwrap();
            let recs = read_all(&p, true).unwrap();
            assert_eq!(recs.len(), 2, "cut {cut}");
            assert!(read_all(&p, false).is_err());
        }
    }

    #[test]
    fn mid_log_corruption_is_error() {
        let d = tempfile::tempdir().unwrap();
        let p = write_records(d.path(), 1, &[b"hello", b"world", b"third record"]);
        let mut data = std::fs::read(&p).unwrap();
        data[HEADER + 1] ^= 0x40; // inside first payload
        std::fs::write(&p, &data).unwrap();
        let e = read_all(&p, true).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        // Flip in the last record only: torn tail.
        let p2 = write_records(d.path(), 2, &[b"hello", b"world"]);
        let mut data = std::fs::read(&p2).unwrap();
        let n = data.len();
        data[n - 1] ^= 1;
        std::fs::write(&p2, &data).unwrap();
        assert_eq!(read_all(&p2, true).unwrap().len(), 1);
    }

    #[test]
    fn zero_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = write_records(d.path(), 1, &[b"a"]);
        let mut data = std::fs::read(&p).unwrap();
        data.extend_from_slice(&[0u8; 100]);
        std::fs::write(&p, &data).unwrap();
        assert_eq!(read_all(&p, true).unwrap().len(), 1);
        data.push(7);
        std::fs::write(&p, &data).unwrap();
        assert!(read_all(&p, true).is_err());
    }

    /// Ops with values on both sides of `OUT_OF_LINE` (and empty ones).
    fn mixed_ops(n: usize, salt: u8) -> Vec<crate::journal::batch::Op> {
        (0..n)
            .map(|i| {
                let len = match i % 4 {
                    0 => 0,
                    1 => OUT_OF_LINE - 1,
                    2 => OUT_OF_LINE,
                    _ => OUT_OF_LINE + 7 * i,
                };
                let v: Vec<u8> = (0..len).map(|j| (j as u8) ^ (i as u8) ^ salt).collect();
                crate::journal::batch::Op {
                    cf: i as u64 % 3,
                    kind: crate::key::Kind::Put,
                    key: format!("k{i}").into_bytes(),
                    // Most large values with their crc known (combined into
                    // the record's crc), some without (read again).
                    crc: if i % 8 == 3 {
                        None
                    } else {
                        (v.len() >= OUT_OF_LINE).then(|| crc32fast::hash(&v))
                    },
                    value: v.into(),
                }
            })
            .collect()
    }

    #[test]
    fn frames_match_contiguous_encoding() {
        use crate::journal::batch;
        let ops = mixed_ops(9, 1);
        let mut want = Vec::new();
        let mut f = Frames::default();
        frame_with(&mut want, |o| batch::encode_commit(o, 7, ops.iter()));
        f.frame(|o| batch::encode_commit(o, 7, ops.iter()));
        frame_with(&mut want, |o| batch::encode_rollback_prepared(o, b"x"));
        f.frame(|o| batch::encode_rollback_prepared(o, b"x"));
        frame_with(&mut want, |o| {
            batch::encode_prepare(o, b"xid", ops[1..].iter())
        });
        f.frame(|o| batch::encode_prepare(o, b"xid", ops[1..].iter()));
        assert!(!f.ext.is_empty());
        assert_eq!(f.len(), want.len());
        assert_eq!(f.to_vec(), want);
    }

    #[test]
    fn append_frames_roundtrip_many_pieces() {
        use crate::journal::batch;
        let d = tempfile::tempdir().unwrap();
        let mut w = WalWriter::create(d.path(), 1).unwrap();
        // A small record first (contiguous append), then a group of more
        // pieces than one pwritev takes (IOV_MAX).
        let mut first = Frames::default();
        first.frame(|o| batch::encode_rollback_prepared(o, b"x"));
        w.append_frames(&first).unwrap();
        let ops = mixed_ops(1200, 2);
        let mut f = Frames::default();
        f.frame(|o| batch::encode_commit(o, 1, ops[..700].iter()));
        f.frame(|o| batch::encode_commit(o, 2, ops[700..].iter()));
        assert!(f.pieces().len() > IOV_MAX);
        w.append_frames(&f).unwrap();
        w.sync().unwrap();
        assert_eq!(w.size, (first.len() + f.len()) as u64);
        let mut got = Vec::new();
        read_segment(&w.path, false, |p, _| {
            got.push(batch::decode(p).unwrap());
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), 3);
        let mut seen = Vec::new();
        for r in got.into_iter().skip(1) {
            match r {
                batch::Record::Commit { ops, .. } => seen.extend(ops),
                _ => panic!("not a commit"),
            }
        }
        assert_eq!(seen.len(), ops.len());
        for (a, b) in seen.iter().zip(&ops) {
            assert_eq!((a.cf, &a.key, &a.value), (b.cf, &b.key, &b.value));
        }
    }

    #[test]
    fn ext_offsets_locate_values_in_the_segment() {
        use crate::journal::batch;
        let d = tempfile::tempdir().unwrap();
        let mut w = WalWriter::create(d.path(), 1).unwrap();
        let mut first = Frames::default();
        first.frame(|o| batch::encode_rollback_prepared(o, b"x"));
        w.append_frames(&first).unwrap();
        let ops = mixed_ops(60, 3);
        let mut f = Frames::default();
        f.frame(|o| batch::encode_commit(o, 1, ops[..25].iter()));
        f.frame(|o| batch::encode_commit(o, 2, ops[25..].iter()));
        let base = w.size;
        w.append_frames(&f).unwrap();
        w.seal().unwrap();
        let data = std::fs::read(&w.path).unwrap();
        let mut found = 0;
        for (ptr, off) in f.ext_offsets() {
            let op = ops.iter().find(|o| o.value.as_ptr() == ptr).unwrap();
            let at = (base + off) as usize;
            assert_eq!(
                &data[at..at + op.value.len()],
                &op.value[..],
                "{:?}",
                op.key
            );
            found += 1;
        }
        let large = ops.iter().filter(|o| o.value.len() >= OUT_OF_LINE).count();
        assert!(large > 20);
        assert_eq!(found, large);
    }

    #[test]
    fn prefill_zero_tail_and_seal() {
        let d = tempfile::tempdir().unwrap();
        let mut w = WalWriter::create(d.path(), 1).unwrap();
        w.prefill = true;
        let mut recs = Vec::new();
        let mut total = 0u64;
        // Small appends: zeros written ahead to the next MiB boundary, the
        // file stays one MiB until an append crosses it.
        for i in 0..3000u32 {
            let mut buf = Vec::new();
            let r = format!("record {i} {}", "x".repeat(i as usize % 700));
            frame_record(&mut buf, r.as_bytes());
            w.append(&buf).unwrap();
            total += buf.len() as u64;
            recs.push(r.into_bytes());
            let len = std::fs::metadata(&w.path).unwrap().len();
            assert_eq!(
                len,
                total.div_ceil(PREFILL_BYTES) * PREFILL_BYTES,
                "after {i}"
            );
        }
        assert!(total > PREFILL_BYTES, "crossed a boundary: {total}");
        w.sync().unwrap();
        // A crash here leaves the zero tail: the records, then the end.
        assert_eq!(read_all(&w.path, true).unwrap(), recs);
        // A torn last record (its second half still zeros) before the tail.
        let mut data = std::fs::read(&w.path).unwrap();
        let n = total as usize;
        let last = recs.last().unwrap().len();
        data[n - last / 2..n].fill(0);
        let torn = d.path().join("000002.wal");
        std::fs::write(&torn, &data).unwrap();
        assert_eq!(read_all(&torn, true).unwrap(), recs[..recs.len() - 1]);
        assert!(read_all(&torn, false).unwrap_err().is_corruption());
        // The same damage with a record after it is corruption.
        data[n + 100] = 1;
        std::fs::write(&torn, &data).unwrap();
        assert!(read_all(&torn, true).unwrap_err().is_corruption());
        // A large append is written as it is (no zeros after it).
        let mut big = Vec::new();
        frame_record(&mut big, &vec![7u8; PREFILL_BYTES as usize]);
        w.append(&big).unwrap();
        total += big.len() as u64;
        assert_eq!(std::fs::metadata(&w.path).unwrap().len(), total);
        // Without prefill (relaxed groups) the file grows with the records.
        w.prefill = false;
        w.append(&buf_of(b"tail")).unwrap();
        total += buf_of(b"tail").len() as u64;
        assert_eq!(std::fs::metadata(&w.path).unwrap().len(), total);
        w.prefill = true;
        w.append(&buf_of(b"more")).unwrap();
        total += buf_of(b"more").len() as u64;
        assert!(std::fs::metadata(&w.path).unwrap().len() > total);
        // Sealed (rotation, close): cut back to the last record, which a
        // non-final segment must end with.
        w.seal().unwrap();
        assert_eq!(std::fs::metadata(&w.path).unwrap().len(), total);
        assert_eq!(read_all(&w.path, false).unwrap().len(), recs.len() + 3);
    }

    fn buf_of(r: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        frame_record(&mut b, r);
        b
    }

    #[test]
    fn names() {
        assert_eq!(parse_segment_name("000012.wal"), Some(12));
        assert_eq!(parse_segment_name("x.wal"), None);
        assert_eq!(parse_segment_name("000012.sst"), None);
    }
}
