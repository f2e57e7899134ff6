//! Value log: key-value separation (values of at least
//! `CfOptions::value_separation_threshold` bytes live outside the table files).
//!
//! ## Format
//! File `<number:06>.vlog`, append-only, written once by one flush, one
//! compaction (relocated values) or one spilled commit, fsynced before the
//! manifest edit that references it, immutable afterwards. No header: a
//! sequence of records
//!
//! ```text
//! record  = crc: u32 LE | key_len: varint | key | value
//!           crc = crc32(key_len varint ++ key ++ value)
//! ```
//!
//! *Encrypted* (a column family with `CfOptions::encryption_key`): the file
//! starts with its 64-byte encryption header (`crypto/mod.rs`: key id, key
//! version, nonce), the records follow at offset 64, each encrypted in place
//! (AES-CTR at its file offset; crcs are over the plaintext). A reader knows
//! the file by the header's magic and checksum. Pointers hold file offsets,
//! so they are the same either way.
//!
//! A table entry of kind 2 (`Kind::ValuePtr`) has as value a *pointer*:
//!
//! ```text
//! pointer = file_no: varint | offset: varint | len: varint | crc: u32 LE
//!           (offset, len) = the whole record; crc = the record's crc
//! ```
//!
//! A read is ONE positioned read of `len` bytes at `offset` (with
//! `use_direct_reads`: one aligned `O_DIRECT` read of the covering 4 KiB
//! blocks); the record's crc is checked against its bytes and against the
//! pointer, the record must fit the file, and the key is skipped: any
//! mismatch is `Error::Corruption`, never a panic.
//!
//! ## Lifecycle
//! The manifest records per file `(cf, size, garbage)` (`VlogAdd`,
//! `VlogGarbage`, `VlogRemove`, see `manifest.rs`). Separation happens at
//! memtable flush (and when a spilled write set is written as tables):
//! the WAL, memtables, transaction write sets, spill runs and 2PC prepare
//! records always hold whole values. Compaction copies pointers unchanged; a
//! pointer it drops (overwritten / deleted version no snapshot needs) adds
//! its record length to its file's garbage. When a file's garbage ratio
//! reaches the GC ratio, compactions *relocate* the values they keep that
//! point into it (append them to the compaction's own new vlog file, new
//! pointer, same sequence), and a background GC pass rewrites in place the
//! table files that still reference such a file (only live values move:
//! liveness = the pointer survived compaction). A file whose garbage reaches
//! its size has no pointer left in the current version: it is removed from
//! the manifest and unlinked once the last reader of an older version (an
//! iterator, a snapshot read in flight) drops it. Dropping the column family
//! does the same for all its files.
//!
//! ## WAL segments kept as value logs
//! A large value (at least `wal::OUT_OF_LINE` bytes, written by a commit) is
//! already in the WAL, whole and checksummed, when its memtable is flushed,
//! and the segment holding it has been fsynced (segments are sealed when
//! rotated). So instead of copying it to a new value log file, the flush may
//! point into the segment: the memtable keeps each such value's place in the
//! WAL (`wal::WalLoc`), and when a column family's separated values make up
//! enough of a sealed segment (its garbage ratio would stay under the GC
//! ratio) the flush *adopts* it: a hard link `<new number>.vlog` to
//! `<segment>.wal` (no byte copied), listed in the manifest as a value log of
//! format `WalSegment` (`VlogAddWal`, with the bytes no pointer of this flush
//! names as garbage). Its pointers name bare values:
//!
//! ```text
//! pointer = file_no | offset | len | crc    (offset, len) = the value's bytes; crc = crc32(value)
//! ```
//!
//! Reads check the crc against the bytes as for records. The WAL purge
//! unlinks `<segment>.wal` as usual; the data stays under the `.vlog` name
//! until garbage collection removes that file like any other. A crash between
//! the link and the manifest edit leaves an orphan `.vlog` (deleted at open)
//! and the segment (replayed). A large value is so written once (the WAL),
//! not twice (WAL, then value log).

use crate::bytes::SharedBytes;
use crate::coding::{crc32, put_varint, Reader};
use crate::crypto::{FileCipher, Keyring, HEADER_LEN};
use crate::error::{Error, Result};
use crate::fsutil::DirectIo;
use crate::table::cache::BlockCache;
use crate::value_ptr::Ptr;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Largest record accepted by the reader (a pointer claiming more is corrupt).
const MAX_RECORD: u64 = 1 << 32;

pub(crate) fn vlog_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.vlog"))
}

pub(crate) fn parse_vlog_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".vlog")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// What a value log file holds (kept per file in the manifest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum VlogFormat {
    /// Records as above, written by a flush, compaction or spilled commit.
    #[default]
    Records,
    /// A sealed WAL segment kept as a value log: pointers name bare value
    /// bytes inside it (`offset`, `len` = the value; `crc` = crc32 of the
    /// value), see "WAL segments kept as value logs".
    WalSegment,
}

/// Writes one vlog file.
pub(crate) struct VlogWriter {
    pub no: u64,
    path: PathBuf,
    out: BufWriter<crate::io::Writer>,
    offset: u64,
    /// Writeback started up to here (as the WAL does, see
    /// `wal::WRITEBACK_BYTES`: the flush's fsync of a 16 MiB value log then
    /// waits for the last MiB, not all of it).
    written_back: u64,
    scratch: Vec<u8>,
    /// Encrypts the file when set (header at offset 0).
    cipher: Option<FileCipher>,
    sealed: Vec<u8>,
}

impl VlogWriter {
    #[cfg(test)]
    pub(crate) fn create(dir: &Path, no: u64) -> Result<VlogWriter> {
        VlogWriter::create_encrypted(dir, no, None)
    }

    /// `create`, encrypted with `cipher` if given.
    pub(crate) fn create_encrypted(
        dir: &Path,
        no: u64,
        cipher: Option<FileCipher>,
    ) -> Result<VlogWriter> {
        let path = vlog_path(dir, no);
        let f = crate::io::open(
            std::fs::OpenOptions::new().write(true).create_new(true),
            &path,
        )
        .map_err(|e| Error::io(format!("create value log {}", path.display()), e))?;
        let f = crate::io::Writer::new(f, &path);
        let mut w = VlogWriter {
            no,
            path,
            out: BufWriter::with_capacity(1 << 20, f),
            offset: 0,
            written_back: 0,
            scratch: Vec::new(),
            cipher,
            sealed: Vec::new(),
        };
        if let Some(c) = &w.cipher {
            let h = c.header();
            w.out
                .write_all(&h)
                .map_err(|e| Error::io(format!("write value log {}", w.path.display()), e))?;
            w.offset = HEADER_LEN as u64;
        }
        Ok(w)
    }

    /// Appends a record; returns its pointer. `value_crc`: crc32 of `value`
    /// if known (computed when it was written, see `skiplist::ValueIn`): the
    /// record's crc is then combined from it instead of reading the value
    /// again. The bytes written are the same either way.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8], value_crc: Option<u32>) -> Result<Ptr> {
        self.scratch.clear();
        put_varint(&mut self.scratch, key.len() as u64);
        self.scratch.extend_from_slice(key);
        let crc = match value_crc {
            Some(c) => {
                let mut h = crc32fast::Hasher::new();
                h.update(&self.scratch);
                crate::coding::crc32_combine(&mut h, c, value.len());
                h.finalize()
            }
            None => crc32(&[&self.scratch, value]),
        };
        let werr = |e| Error::io(format!("write value log {}", self.path.display()), e);
        if let Some(c) = &self.cipher {
            self.sealed.clear();
            self.sealed.extend_from_slice(&crc.to_le_bytes());
            self.sealed.extend_from_slice(&self.scratch);
            self.sealed.extend_from_slice(value);
            c.apply(self.offset, &mut self.sealed);
            self.out.write_all(&self.sealed).map_err(werr)?;
        } else {
            self.out.write_all(&crc.to_le_bytes()).map_err(werr)?;
            self.out.write_all(&self.scratch).map_err(werr)?;
            self.out.write_all(value).map_err(werr)?;
        }
        let len = 4 + self.scratch.len() as u64 + value.len() as u64;
        let p = Ptr {
            file: self.no,
            offset: self.offset,
            len,
            crc,
        };
        self.offset += len;
        // Only what left `out`'s buffer is in the file.
        let in_file = self.offset - self.out.buffer().len() as u64;
        let n = in_file.saturating_sub(self.written_back);
        if n >= crate::journal::wal::WRITEBACK_BYTES {
            crate::fsutil::start_writeback(self.out.get_ref().file(), self.written_back, n);
            self.written_back = in_file;
        }
        Ok(p)
    }

    /// Flushes and fsyncs; returns the file size.
    pub(crate) fn finish(self) -> Result<u64> {
        let f = self.out.into_inner().map_err(|e| {
            Error::io(
                format!("flush value log {}", self.path.display()),
                e.into_error(),
            )
        })?;
        f.sync_all()
            .map_err(|e| Error::io(format!("fsync value log {}", self.path.display()), e))?;
        Ok(self.offset)
    }

    pub(crate) fn abort(self) {
        let p = self.path.clone();
        drop(self);
        let _ = crate::io::remove_file(p);
    }
}

/// Output side of separation for one job (flush, compaction, spilled
/// commit): values of at least `threshold` bytes go to a vlog file created on
/// first use (number from `alloc`).
pub(crate) struct VlogOut<'a> {
    dir: &'a Path,
    alloc: &'a dyn Fn() -> u64,
    pub threshold: Option<usize>,
    w: Option<VlogWriter>,
    scratch: Vec<u8>,
    /// Encrypt the file with this key (the column family's).
    encryption: Option<(&'a Keyring, u32)>,
}

impl<'a> VlogOut<'a> {
    pub(crate) fn new(
        dir: &'a Path,
        alloc: &'a dyn Fn() -> u64,
        threshold: Option<usize>,
    ) -> VlogOut<'a> {
        VlogOut {
            dir,
            alloc,
            threshold,
            w: None,
            scratch: Vec::new(),
            encryption: None,
        }
    }

    /// The file is encrypted with key `key_id` of `keys` when given (a
    /// column family's `CfOptions::encryption_key`).
    pub(crate) fn encrypted_with(mut self, keys: &'a Keyring, key_id: Option<u32>) -> Self {
        self.encryption = key_id.map(|id| (keys, id));
        self
    }

    /// True if `value` is to be separated.
    pub(crate) fn separates(&self, value: &[u8]) -> bool {
        self.threshold.is_some_and(|t| value.len() >= t.max(1))
    }

    /// Appends `(key, value)`; returns the encoded pointer (borrowed until
    /// the next call).
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<&[u8]> {
        self.put_crc(key, value, None)
    }

    /// `put` of a value whose crc32 is `value_crc` if known (see
    /// `VlogWriter::add`).
    pub(crate) fn put_crc(
        &mut self,
        key: &[u8],
        value: &[u8],
        value_crc: Option<u32>,
    ) -> Result<&[u8]> {
        if self.w.is_none() {
            let no = (self.alloc)();
            let cipher = match self.encryption {
                Some((keys, id)) => Some(FileCipher::for_new_file(
                    keys,
                    id,
                    &vlog_path(self.dir, no),
                )?),
                None => None,
            };
            self.w = Some(VlogWriter::create_encrypted(self.dir, no, cipher)?);
        }
        let p = match self.w.as_mut() {
            Some(w) => w.add(key, value, value_crc)?,
            None => return Err(Error::Closed),
        };
        self.scratch.clear();
        p.encode(&mut self.scratch);
        Ok(&self.scratch)
    }

    /// Fsyncs the file; `(file_no, size)` if one was written.
    pub(crate) fn finish(self) -> Result<Option<(u64, u64)>> {
        match self.w {
            Some(w) => {
                let no = w.no;
                match w.finish() {
                    Ok(size) => Ok(Some((no, size))),
                    Err(e) => {
                        let _ = crate::io::remove_file(vlog_path(self.dir, no));
                        Err(e)
                    }
                }
            }
            None => Ok(None),
        }
    }

    /// Deletes the file (job failed).
    pub(crate) fn abort(self) {
        if let Some(w) = self.w {
            w.abort();
        }
    }
}

/// An open vlog file (reader). Unlinked on drop once marked obsolete, so a
/// file leaves the disk only after the last version (`Levels`) naming it,
/// and with it every iterator or read that could follow a pointer into it,
/// is gone.
pub(crate) struct VlogFile {
    pub no: u64,
    pub path: PathBuf,
    pub format: VlogFormat,
    /// `None`: quarantined at open (see `broken`).
    file: Option<File>,
    direct: Option<(File, Arc<DirectIo>)>,
    size: u64,
    obsolete: AtomicBool,
    /// Why the file could not be opened (missing, unreadable): reads of its
    /// values fail with this, other values and tables are unaffected.
    broken: Option<String>,
    /// An encrypted file's cipher.
    cipher: Option<FileCipher>,
}

impl std::fmt::Debug for VlogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VlogFile({})", self.no)
    }
}

impl VlogFile {
    /// Opens file `no`; an encrypted one takes its key from `keys`.
    pub(crate) fn open(
        dir: &Path,
        no: u64,
        format: VlogFormat,
        dio: Option<&Arc<DirectIo>>,
        keys: &Keyring,
    ) -> Result<VlogFile> {
        let path = vlog_path(dir, no);
        let file = crate::io::open_read(&path)
            .map_err(|e| Error::io(format!("open value log {}", path.display()), e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io(format!("stat value log {}", path.display()), e))?
            .len();
        let mut header = [0u8; HEADER_LEN];
        let cipher = if size >= HEADER_LEN as u64 {
            crate::io::read_exact_at(&file, &mut header, 0, &path)
                .map_err(|e| Error::io(format!("read value log {}", path.display()), e))?;
            match FileCipher::is_header(&header) {
                true => Some(FileCipher::from_header(keys, &header, &path, 0)?),
                false => None,
            }
        } else {
            None
        };
        let direct = match dio {
            Some(d) if d.enabled.load(Ordering::Relaxed) => {
                crate::fsutil::open_direct(&path)?.map(|f| (f, d.clone()))
            }
            _ => None,
        };
        Ok(VlogFile {
            no,
            path,
            format,
            file: Some(file),
            direct,
            size,
            obsolete: AtomicBool::new(false),
            broken: None,
            cipher,
        })
    }

    /// A file the manifest lists that could not be opened (missing,
    /// unreadable): it does not stop the database from opening. Reads of the
    /// values in it fail with `Error::Corruption` naming `err`; GC never
    /// reads it; nothing on disk changes, so a restored file is used again at
    /// the next open (`Db::quarantined_files` lists it meanwhile).
    pub(crate) fn quarantined(dir: &Path, no: u64, format: VlogFormat, err: &Error) -> VlogFile {
        VlogFile {
            no,
            path: vlog_path(dir, no),
            format,
            file: None,
            direct: None,
            size: 0,
            obsolete: AtomicBool::new(false),
            broken: Some(err.to_string()),
            cipher: None,
        }
    }

    /// Why the file was quarantined at open, if it was.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Bytes of the file (when it was opened; it never grows after).
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The file is no longer referenced by the current version: unlink it
    /// when the last handle drops.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// Reads and verifies the record `p` points to; returns its value (a
    /// range of the buffer the read filled, not a copy).
    pub(crate) fn read(&self, p: &Ptr) -> Result<SharedBytes> {
        let bad = |d: &str| Error::corruption(&self.path, p.offset, format!("value log: {d}"));
        let Some(file) = &self.file else {
            let why = self.broken.as_deref().unwrap_or("not open");
            return Err(bad(&format!("file quarantined at open: {why}")));
        };
        let min_len = match self.format {
            VlogFormat::Records => 5,
            VlogFormat::WalSegment => 1,
        };
        if p.len < min_len || p.len > MAX_RECORD || p.offset.saturating_add(p.len) > self.size {
            return Err(bad("pointer out of range"));
        }
        let (mut buf, range) = crate::fsutil::read_at_range(
            file,
            self.direct.as_ref().map(|(f, d)| (f, &**d)),
            p.offset,
            p.len as usize,
            &self.path,
        )?;
        if let Some(c) = &self.cipher {
            let bytes = buf
                .get_mut(range.clone())
                .ok_or_else(|| bad("short read"))?;
            c.apply(p.offset, bytes);
        }
        let rec = SharedBytes::from_range(buf, range).ok_or_else(|| bad("short read"))?;
        if self.format == VlogFormat::WalSegment {
            let got = crc32(&[&rec]);
            if got != p.crc {
                return Err(Error::corruption(
                    &self.path,
                    p.offset,
                    format!(
                        "value log (WAL segment) checksum mismatch (computed {got:#x}, pointer {:#x})",
                        p.crc
                    ),
                ));
            }
            return Ok(tight(rec));
        }
        let stored = crate::coding::u32_at(&rec, 0).ok_or_else(|| bad("short record"))?;
        let body = rec.get(4..).ok_or_else(|| bad("short record"))?;
        let got = crc32(&[body]);
        if got != stored || stored != p.crc {
            return Err(Error::corruption(
                &self.path,
                p.offset,
                format!(
                    "value log checksum mismatch (record {stored:#x}, computed {got:#x}, pointer {:#x})",
                    p.crc
                ),
            ));
        }
        let mut r = Reader::new(body);
        let klen = r.varint_usize().ok_or_else(|| bad("bad key length"))?;
        r.bytes(klen).ok_or_else(|| bad("key past record end"))?;
        let v = rec
            .slice(4 + r.pos()..rec.len())
            .ok_or_else(|| bad("key past record end"))?;
        Ok(tight(v))
    }
}

/// The value is kept (and cached) in the buffer the read filled. An O_DIRECT
/// read's buffer is up to 12 KiB wider than the record: a small value is
/// copied to a tight one instead, not to cache slack.
fn tight(v: SharedBytes) -> SharedBytes {
    if v.allocated() - v.len() > v.len() / 8 {
        return SharedBytes::from_vec(v.to_vec());
    }
    v
}

/// Makes the sealed WAL segment `segment` value log file `no`: a hard link
/// `<no>.vlog` to it (see "WAL segments kept as value logs"), opened. Its data
/// is durable already: a segment is listed as sealed only after its fsync
/// (`DbInner::new_segment`). The caller fsyncs the directory before the
/// manifest names the file.
pub(crate) fn adopt_wal_segment(
    dir: &Path,
    segment: u64,
    no: u64,
    dio: Option<&Arc<DirectIo>>,
    keys: &Keyring,
) -> Result<VlogFile> {
    let from = crate::journal::wal::segment_path(dir, segment);
    let to = vlog_path(dir, no);
    crate::io::hard_link(&from, &to).map_err(|e| {
        Error::io(
            format!("link WAL {} as value log {}", from.display(), to.display()),
            e,
        )
    })?;
    let opened = VlogFile::open(dir, no, VlogFormat::WalSegment, dio, keys);
    if opened.is_err() {
        let _ = crate::io::remove_file(&to);
    }
    opened
}

impl Drop for VlogFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            let _ = crate::io::remove_file(&self.path);
        }
    }
}

/// Vlog files of one column family, by number (part of a version).
pub(crate) type VlogSet = std::collections::BTreeMap<u64, Arc<VlogFile>>;

/// Resolves an encoded pointer through `set`. The value is shared with the
/// cache, not copied: a hit costs no copy of a large value, a miss one read
/// into the buffer the cache then keeps.
pub(crate) fn resolve(
    set: &VlogSet,
    dir: &Path,
    cache: Option<&BlockCache>,
    ptr: &[u8],
) -> Result<SharedBytes> {
    let p = Ptr::decode(ptr).ok_or_else(|| Error::corruption(dir, 0, "malformed value pointer"))?;
    // The record was checked against its CRC when it entered the cache.
    if let Some(v) = cache.and_then(|c| c.get_value(p.file, p.offset)) {
        return Ok(v);
    }
    let v = match set.get(&p.file) {
        Some(f) => f.read(&p)?,
        None => {
            return Err(Error::corruption(
                vlog_path(dir, p.file),
                p.offset,
                "value pointer to a value log file that is not live",
            ))
        }
    };
    if let Some(c) = cache {
        c.insert_value(p.file, p.offset, v.clone());
    }
    Ok(v)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_corruption() {
        let d = tempfile::tempdir().unwrap();
        let mut w = VlogWriter::create(d.path(), 7).unwrap();
        let mut ptrs = Vec::new();
        for i in 0..50u32 {
            let v: Vec<u8> = (0..100 + i as usize * 37)
                .map(|j| (j ^ i as usize) as u8)
                .collect();
            // Every other record with the value's crc given (combined, not
            // read again): same bytes, same pointer crc, checked on read.
            let crc = (i % 2 == 1).then(|| crc32fast::hash(&v));
            let p = w.add(format!("k{i}").as_bytes(), &v, crc).unwrap();
            if i % 2 == 1 {
                let mut key = Vec::new();
                put_varint(&mut key, format!("k{i}").len() as u64);
                key.extend_from_slice(format!("k{i}").as_bytes());
                assert_eq!(p.crc, crc32(&[&key, &v]), "record {i}");
            }
            ptrs.push((p, v));
        }
        let size = w.finish().unwrap();
        let f = VlogFile::open(
            d.path(),
            7,
            VlogFormat::Records,
            None,
            &crate::crypto::Keyring::default(),
        )
        .unwrap();
        for (p, v) in &ptrs {
            let mut e = Vec::new();
            p.encode(&mut e);
            assert_eq!(Ptr::decode(&e), Some(*p));
            assert_eq!(&*f.read(p).unwrap(), v.as_slice());
        }
        // Pointers with bad ranges / checksums.
        let p = ptrs[3].0;
        for bad in [
            Ptr { len: 2, ..p },
            Ptr { offset: size, ..p },
            Ptr {
                len: p.len + 1,
                ..p
            },
            Ptr {
                crc: p.crc ^ 1,
                ..p
            },
            Ptr {
                offset: p.offset + 1,
                ..p
            },
        ] {
            assert!(
                matches!(f.read(&bad), Err(Error::Corruption { .. })),
                "{bad:?}"
            );
        }
        drop(f);
        // Every flipped byte of a record is caught.
        let path = vlog_path(d.path(), 7);
        let orig = std::fs::read(&path).unwrap();
        // (10: crc computed from the bytes; 11: combined from the value's.)
        for &(p, _) in &ptrs[10..12] {
            for i in p.offset..p.offset + p.len {
                let mut data = orig.clone();
                data[i as usize] ^= 0x20;
                std::fs::write(&path, &data).unwrap();
                let f = VlogFile::open(
                    d.path(),
                    7,
                    VlogFormat::Records,
                    None,
                    &crate::crypto::Keyring::default(),
                )
                .unwrap();
                assert!(
                    matches!(f.read(&p), Err(Error::Corruption { .. })),
                    "byte {i}"
                );
            }
        }
        let (p, _) = ptrs[10];
        // Truncated file.
        std::fs::write(&path, &orig[..(p.offset + p.len / 2) as usize]).unwrap();
        let f = VlogFile::open(
            d.path(),
            7,
            VlogFormat::Records,
            None,
            &crate::crypto::Keyring::default(),
        )
        .unwrap();
        assert!(matches!(f.read(&p), Err(Error::Corruption { .. })));
        assert!(f.read(&ptrs[0].0).is_ok());
    }

    #[test]
    fn obsolete_unlinks_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let mut w = VlogWriter::create(d.path(), 1).unwrap();
        w.add(b"k", b"v", None).unwrap();
        w.finish().unwrap();
        let f = Arc::new(
            VlogFile::open(
                d.path(),
                1,
                VlogFormat::Records,
                None,
                &crate::crypto::Keyring::default(),
            )
            .unwrap(),
        );
        let f2 = f.clone();
        f.mark_obsolete();
        drop(f);
        assert!(vlog_path(d.path(), 1).exists());
        drop(f2);
        assert!(!vlog_path(d.path(), 1).exists());
    }

    #[test]
    fn encrypted_vlog_round_trip_and_key_checks() {
        let (keys, rotate) = crate::crypto::test_keys::keyring();
        let d = tempfile::tempdir().unwrap();
        let alloc = || 9u64;
        let mut vo = VlogOut::new(d.path(), &alloc, Some(10)).encrypted_with(&keys, Some(1));
        let mut ptrs = Vec::new();
        for i in 0..20u32 {
            let v = format!("secret-value-{i}-").repeat(20).into_bytes();
            let p = Ptr::decode(vo.put(format!("secret-key-{i}").as_bytes(), &v).unwrap()).unwrap();
            ptrs.push((p, v));
        }
        let (no, size) = vo.finish().unwrap().unwrap();
        assert_eq!(no, 9);
        let bytes = std::fs::read(vlog_path(d.path(), 9)).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert!(FileCipher::is_header(&bytes));
        assert!(!bytes.windows(6).any(|w| w == b"secret"));
        rotate.add_version(1, 0x42);
        let f = VlogFile::open(d.path(), 9, VlogFormat::Records, None, &keys).unwrap();
        for (p, v) in &ptrs {
            assert_eq!(&*f.read(p).unwrap(), v.as_slice());
        }
        let e = VlogFile::open(d.path(), 9, VlogFormat::Records, None, &Keyring::default())
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::KeyUnavailable {
                    key_id: 1,
                    key_version: 1,
                    ..
                }
            ),
            "{e}"
        );
    }
}
