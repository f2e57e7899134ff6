//! Sorted table files ("SSTs"): builder, reader, point lookup and a
//! bidirectional iterator.
//!
//! ## Format
//! File `<number:06>.sst`:
//!
//! ```text
//! [data block 0][trailer] ... [data block n-1][trailer]
//! [filter block][trailer]      (bloom filter over user keys; may be empty)
//! [index block][trailer]
//! [props block][trailer]
//! [footer: 64 bytes]
//! ```
//!
//! *Block trailer* (5 bytes): `type: u8` (0 = raw, 1 = zstd) then
//! `crc: u32 LE = crc32(stored block bytes ++ type)`. A zstd block stores
//! `varint(uncompressed_len) ++ zstd frame`. Blocks are compressed only if that
//! saves at least 1/8.
//!
//! *Data / index block* (uncompressed): the format of `block.rs`. Data block
//! values are the user values (or value pointers). Index block: one entry per
//! data block, key = last internal key of the block, value = `varint(offset) ++
//! varint(size without trailer)`.
//!
//! *Filter block*: bloom bit array (`m` bytes) followed by `k: u8` (probes).
//! Probe i of key: bit `(h1 + i*h2) mod 8m` with `h = hash64(user_key)`,
//! `h1 = h as u32`, `h2 = (h >> 32) as u32 | 1`. Empty block = no filter.
//!
//! *Props block*: varints `num_entries, num_deletes, min_seq, max_seq,
//! raw_key_bytes, raw_value_bytes, num_data_blocks`, then len-prefixed
//! `smallest` and `largest` encoded internal keys, then (optional: absent in
//! tables without value pointers) `count: varint` and `count` varints: the
//! numbers of the value log files its pointers (kind 2 entries, value =
//! pointer, see `vlog.rs`) refer to, ascending.
//!
//! *Footer* (64 bytes): `filter_off, filter_len, index_off, index_len,
//! props_off, props_len` (u64 LE each; lengths exclude trailers), `version: u32
//! LE = 1`, `crc: u32 LE = crc32(previous 52 bytes)`, `magic: u64 LE =
//! 0x5449_4445_5353_5431` ("TIDESST1").
//!
//! *Encrypted table* (its column family's `CfOptions::encryption_key`):
//! footer `version = 2`, and the file's 64-byte encryption header
//! (`crypto/mod.rs`: key id, key version, nonce, key check) sits right
//! before the footer. Every block with its trailer is encrypted in place
//! (AES-CTR at its file offset; the trailer's crc is over the plaintext);
//! the header and the footer (offsets only) are in the clear. Version 1
//! files have no header and are read as before.

use crate::coding::{crc32, put_u32, put_u64, put_varint, u32_at, u64_at, Reader};
use crate::crypto::{FileCipher, Keyring, HEADER_LEN};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{decode_ikey, encode_ikey, Kind};
use crate::options::Compression;
use crate::table::block::{Block, BlockBuilder, RawBlock};
use crate::table::cache::BlockCache;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) const MAGIC: u64 = 0x5449_4445_5353_5431;
pub(crate) const FOOTER: usize = 64;
const TRAILER: usize = 5;
const MAX_BLOCK: u64 = 256 << 20;
/// The upper user key of a quarantined encrypted table whose range cannot be
/// read (longer than any key the server writes: it covers them all).
pub(crate) const UNKNOWN_RANGE_END: [u8; 4096] = [0xFF; 4096];

pub(crate) fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(table_name(number))
}

pub(crate) fn table_name(number: u64) -> String {
    format!("{number:06}.sst")
}

pub(crate) fn parse_table_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".sst")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    pub off: u64,
    pub len: u64,
}

pub(crate) fn decode_handle(v: &[u8]) -> Option<Handle> {
    let mut r = Reader::new(v);
    Some(Handle {
        off: r.varint()?,
        len: r.varint()?,
    })
}

// ---------------------------------------------------------------- bloom

pub(crate) fn bloom_build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    if bits_per_key == 0 || hashes.is_empty() {
        return Vec::new();
    }
    let k = ((f64::from(bits_per_key) * 0.69) as u32).clamp(1, 30);
    let nbits = (hashes.len() as u64 * u64::from(bits_per_key)).max(64);
    let nbytes = nbits.div_ceil(8) as usize;
    let nbits = nbytes as u64 * 8;
    let mut out = vec![0u8; nbytes];
    for &h in hashes {
        let mut h1 = h as u32;
        let h2 = ((h >> 32) as u32) | 1;
        for _ in 0..k {
            let bit = u64::from(h1) % nbits;
            out[(bit / 8) as usize] |= 1 << (bit % 8);
            h1 = h1.wrapping_add(h2);
        }
    }
    out.push(k as u8);
    out
}

pub(crate) fn bloom_may_contain(filter: &[u8], user: &[u8]) -> bool {
    let Some((&k, bits)) = filter.split_last() else {
        return true;
    };
    if bits.is_empty() || k == 0 || k > 30 {
        return true;
    }
    let nbits = bits.len() as u64 * 8;
    let h = crate::coding::hash64(user);
    let mut h1 = h as u32;
    let h2 = ((h >> 32) as u32) | 1;
    for _ in 0..k {
        let bit = u64::from(h1) % nbits;
        match bits.get((bit / 8) as usize) {
            Some(b) if b & (1 << (bit % 8)) != 0 => {}
            _ => return false,
        }
        h1 = h1.wrapping_add(h2);
    }
    true
}

// ---------------------------------------------------------------- props

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Props {
    pub num_entries: u64,
    pub num_deletes: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    pub num_blocks: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// Value log files referenced by the table's pointers (ascending).
    pub vlog_refs: Vec<u64>,
}

impl Props {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [
            self.num_entries,
            self.num_deletes,
            self.min_seq,
            self.max_seq,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.num_blocks,
        ] {
            put_varint(&mut b, v);
        }
        crate::coding::put_bytes(&mut b, &self.smallest);
        crate::coding::put_bytes(&mut b, &self.largest);
        if !self.vlog_refs.is_empty() {
            put_varint(&mut b, self.vlog_refs.len() as u64);
            for v in &self.vlog_refs {
                put_varint(&mut b, *v);
            }
        }
        b
    }
    pub(crate) fn decode(b: &[u8]) -> Option<Props> {
        let mut r = Reader::new(b);
        let mut p = Props {
            num_entries: r.varint()?,
            num_deletes: r.varint()?,
            min_seq: r.varint()?,
            max_seq: r.varint()?,
            raw_key_bytes: r.varint()?,
            raw_value_bytes: r.varint()?,
            num_blocks: r.varint()?,
            smallest: r.len_prefixed()?.to_vec(),
            largest: r.len_prefixed()?.to_vec(),
            vlog_refs: Vec::new(),
        };
        if !r.is_empty() {
            let n = r.varint_usize()?;
            if n > r.remaining() {
                return None;
            }
            for _ in 0..n {
                p.vlog_refs.push(r.varint()?);
            }
            if !r.is_empty() {
                return None;
            }
        }
        Some(p)
    }
    pub(crate) fn smallest_user(&self) -> &[u8] {
        decode_ikey(&self.smallest).map(|x| x.0).unwrap_or(&[])
    }
    pub(crate) fn largest_user(&self) -> &[u8] {
        decode_ikey(&self.largest).map(|x| x.0).unwrap_or(&[])
    }
}

// ---------------------------------------------------------------- builder

pub(crate) struct TableBuilder {
    path: PathBuf,
    out: BufWriter<crate::io::Writer>,
    offset: u64,
    block_size: usize,
    compression: Compression,
    bloom_bits: u32,
    block: BlockBuilder,
    index: BlockBuilder,
    last_key: Vec<u8>,
    last_user: Option<Vec<u8>>,
    hashes: Vec<u64>,
    props: Props,
    scratch: Vec<u8>,
    vlog_refs: std::collections::BTreeSet<u64>,
    /// Encrypts the file (version 2) when set.
    cipher: Option<FileCipher>,
    /// Encryption scratch of `write_block`.
    sealed: Vec<u8>,
}

impl TableBuilder {
    pub(crate) fn create(
        path: PathBuf,
        block_size: usize,
        compression: Compression,
        bloom_bits: u32,
        cipher: Option<FileCipher>,
    ) -> Result<TableBuilder> {
        let f = crate::io::open(
            std::fs::OpenOptions::new().write(true).create_new(true),
            &path,
        )
        .map_err(|e| Error::io(format!("create table {}", path.display()), e))?;
        let f = crate::io::Writer::new(f, &path);
        Ok(TableBuilder {
            path,
            out: BufWriter::with_capacity(256 << 10, f),
            offset: 0,
            block_size: block_size.max(256),
            compression,
            bloom_bits,
            block: BlockBuilder::new(),
            index: BlockBuilder::new(),
            last_key: Vec::new(),
            last_user: None,
            hashes: Vec::new(),
            props: Props {
                min_seq: u64::MAX,
                ..Props::default()
            },
            scratch: Vec::new(),
            vlog_refs: std::collections::BTreeSet::new(),
            cipher,
            sealed: Vec::new(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Adds an entry; entries must arrive in internal-key order.
    pub(crate) fn add(&mut self, user: &[u8], seq: u64, kind: Kind, value: &[u8]) -> Result<()> {
        self.scratch.clear();
        encode_ikey(&mut self.scratch, user, seq, kind);
        if self.props.num_entries == 0 {
            self.props.smallest = self.scratch.clone();
        }
        if self.last_user.as_deref() != Some(user) {
            self.hashes.push(crate::coding::hash64(user));
            self.last_user = Some(user.to_vec());
        }
        let key = std::mem::take(&mut self.scratch);
        self.block.add(&key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(&key);
        self.scratch = key;
        self.props.num_entries += 1;
        if kind == Kind::Delete {
            self.props.num_deletes += 1;
        }
        if kind == Kind::ValuePtr {
            if let Some(p) = crate::value_ptr::Ptr::decode(value) {
                self.vlog_refs.insert(p.file);
            }
        }
        self.props.min_seq = self.props.min_seq.min(seq);
        self.props.max_seq = self.props.max_seq.max(seq);
        self.props.raw_key_bytes += user.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        if self.block.estimated_size() >= self.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    pub(crate) fn estimated_size(&self) -> u64 {
        self.offset + self.block.estimated_size() as u64
    }

    pub(crate) fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let raw = self.block.finish();
        let h = self.write_block(&raw, self.compression)?;
        let mut hv = Vec::new();
        put_varint(&mut hv, h.off);
        put_varint(&mut hv, h.len);
        let lk = self.last_key.clone();
        self.index.add(&lk, &hv);
        self.props.num_blocks += 1;
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<Handle> {
        let mut stored: Vec<u8>;
        let mut typ = 0u8;
        let data: &[u8] = match compression {
            Compression::Zstd { level } if raw.len() > 64 => {
                stored = Vec::new();
                put_varint(&mut stored, raw.len() as u64);
                match zstd::bulk::compress(raw, level) {
                    Ok(c) if c.len() + stored.len() < raw.len() - raw.len() / 8 => {
                        stored.extend_from_slice(&c);
                        typ = 1;
                        &stored
                    }
                    _ => raw,
                }
            }
            _ => raw,
        };
        let crc = crc32(&[data, &[typ]]);
        let h = Handle {
            off: self.offset,
            len: data.len() as u64,
        };
        let werr = |e| Error::io(format!("write table {}", self.path.display()), e);
        if let Some(c) = &self.cipher {
            self.sealed.clear();
            self.sealed.extend_from_slice(data);
            self.sealed.push(typ);
            self.sealed.extend_from_slice(&crc.to_le_bytes());
            c.apply(self.offset, &mut self.sealed);
            self.out.write_all(&self.sealed).map_err(werr)?;
        } else {
            self.out.write_all(data).map_err(werr)?;
            self.out.write_all(&[typ]).map_err(werr)?;
            self.out.write_all(&crc.to_le_bytes()).map_err(werr)?;
        }
        self.offset += data.len() as u64 + TRAILER as u64;
        Ok(h)
    }

    /// Writes filter, index, props and footer, then fsyncs. Returns the file size
    /// and properties.
    pub(crate) fn finish(self) -> Result<(u64, Props)> {
        self.finish_inner(true)
    }

    /// `finish` without the fsync (private, non-durable files: spill runs).
    pub(crate) fn finish_unsynced(self) -> Result<(u64, Props)> {
        self.finish_inner(false)
    }

    fn finish_inner(mut self, sync: bool) -> Result<(u64, Props)> {
        self.flush_block()?;
        if self.props.num_entries == 0 {
            self.props.min_seq = 0;
        }
        self.props.largest = self.last_key.clone();
        self.props.vlog_refs = std::mem::take(&mut self.vlog_refs).into_iter().collect();
        let filter = bloom_build(&self.hashes, self.bloom_bits);
        let fh = self.write_block(&filter, Compression::None)?;
        let idx = self.index.finish();
        let ih = self.write_block(&idx, Compression::None)?;
        let pb = self.props.encode();
        let ph = self.write_block(&pb, Compression::None)?;
        let werr = |e| Error::io(format!("write table {}", self.path.display()), e);
        if let Some(c) = &self.cipher {
            self.out.write_all(&c.header()).map_err(werr)?;
            self.offset += HEADER_LEN as u64;
        }
        let mut footer = Vec::with_capacity(FOOTER);
        for v in [fh.off, fh.len, ih.off, ih.len, ph.off, ph.len] {
            put_u64(&mut footer, v);
        }
        put_u32(&mut footer, if self.cipher.is_some() { 2 } else { 1 });
        let c = crc32(&[&footer]);
        put_u32(&mut footer, c);
        put_u64(&mut footer, MAGIC);
        self.out.write_all(&footer).map_err(werr)?;
        self.offset += FOOTER as u64;
        let f = self.out.into_inner().map_err(|e| {
            Error::io(
                format!("flush table {}", self.path.display()),
                e.into_error(),
            )
        })?;
        if sync {
            f.sync_all()
                .map_err(|e| Error::io(format!("fsync table {}", self.path.display()), e))?;
        }
        Ok((self.offset, self.props))
    }
}

// ---------------------------------------------------------------- reader

pub(crate) struct Table {
    pub file_no: u64,
    pub path: PathBuf,
    /// `None` only for a quarantined table whose file could not be opened.
    file: Option<File>,
    pub size: u64,
    index: Block,
    filter: Vec<u8>,
    pub props: Props,
    cache: Arc<BlockCache>,
    /// `O_DIRECT` descriptor for data block reads (`use_direct_reads`).
    direct: Option<(File, Arc<crate::fsutil::DirectIo>)>,
    /// The file's cipher (an encrypted table, version 2).
    cipher: Option<FileCipher>,
    /// Set when the file's footer, index, filter or props could not be read
    /// or verified at open: the table is a placeholder covering the user-key
    /// range the manifest records for it. Every read touching that range
    /// fails with `Error::Corruption`; compaction never takes it.
    pub broken: Option<Broken>,
}

/// Why a table is quarantined, and the user-key range it covers.
#[derive(Debug)]
pub(crate) struct Broken {
    /// The open error without the file name (e.g. "bad magic at offset 1234").
    pub reason: String,
    pub offset: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// `(key id, key version)` when the file was refused for its key.
    pub key: Option<(u32, u32)>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({})", self.file_no)
    }
}

fn read_raw_block(
    file: &File,
    path: &Path,
    h: Handle,
    file_size: u64,
    cipher: Option<&FileCipher>,
) -> Result<Vec<u8>> {
    read_raw_block_with(file, None, path, h, file_size, cipher)
}

/// Reads, verifies and decompresses one block with one positioned read
/// (`O_DIRECT` through `direct` when given).
fn read_raw_block_with(
    file: &File,
    direct: Option<(&File, &crate::fsutil::DirectIo)>,
    path: &Path,
    h: Handle,
    file_size: u64,
    cipher: Option<&FileCipher>,
) -> Result<Vec<u8>> {
    check_handle(path, h, file_size)?;
    let buf = crate::fsutil::read_at(file, direct, h.off, h.len as usize + TRAILER, path)?;
    check_block(buf, path, h, cipher)
}

/// Block `h` (with its trailer) lies inside a file of `file_size` bytes and is
/// no larger than a block can be: checked before any read of it.
fn check_handle(path: &Path, h: Handle, file_size: u64) -> Result<()> {
    if h.len > MAX_BLOCK || h.off.saturating_add(h.len + TRAILER as u64) > file_size {
        return Err(Error::corruption(path, h.off, "block handle out of range"));
    }
    Ok(())
}

/// Decrypts (an encrypted table), verifies and decompresses the stored bytes
/// of block `h` (`h.len` bytes + trailer).
fn check_block(
    mut buf: Vec<u8>,
    path: &Path,
    h: Handle,
    cipher: Option<&FileCipher>,
) -> Result<Vec<u8>> {
    if buf.len() != h.len as usize + TRAILER {
        return Err(Error::corruption(path, h.off, "short block read"));
    }
    if let Some(c) = cipher {
        c.apply(h.off, &mut buf);
    }
    let n = h.len as usize;
    let typ = buf[n];
    let expected = u32_at(&buf, n + 1).unwrap_or(0);
    let got = crc32(&[&buf[..n], &[typ]]);
    if got != expected {
        return Err(Error::ChecksumMismatch {
            file: path.to_path_buf(),
            offset: h.off,
            expected,
            got,
        });
    }
    buf.truncate(n);
    match typ {
        0 => Ok(buf),
        1 => {
            let mut r = Reader::new(&buf);
            let raw_len = r
                .varint()
                .filter(|&l| l <= MAX_BLOCK)
                .ok_or_else(|| Error::corruption(path, h.off, "bad compressed block length"))?;
            let body = &buf[r.pos()..];
            let out = zstd::bulk::decompress(body, raw_len as usize).map_err(|e| {
                Error::corruption(path, h.off, format!("zstd decompress failed: {e}"))
            })?;
            if out.len() as u64 != raw_len {
                return Err(Error::corruption(
                    path,
                    h.off,
                    "decompressed length mismatch",
                ));
            }
            Ok(out)
        }
        t => Err(Error::corruption(
            path,
            h.off,
            format!("unknown block type {t}"),
        )),
    }
}

/// A compaction's sequential reader of one table file: a descriptor of its
/// own, read in [`CHUNK`] preads, with no kernel readahead
/// (`POSIX_FADV_RANDOM`); the next chunk is prefetched with
/// `POSIX_FADV_WILLNEED`. Kernel readahead marks a page of each window
/// (`PG_readahead`), in the page cache shared by every descriptor: when a
/// point read's miss landed on such a page of a file being compacted, the
/// reader started the next readahead window itself. In core-bench
/// `readcold` with a compaction running, readers read 12-14 KiB from disk
/// per block read instead of 8 (the block's two pages); a prefetch sets no
/// mark.
pub(crate) struct ChunkReader {
    file: File,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    off: u64,
}

/// Bytes a compaction reads from an input file at a time.
const CHUNK: u64 = 1 << 20;

impl ChunkReader {
    fn open(path: &Path) -> Option<ChunkReader> {
        use std::os::fd::AsRawFd;
        let file = crate::io::open_read(path).ok()?;
        // SAFETY: plain syscalls on a descriptor we own.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
            libc::posix_fadvise(file.as_raw_fd(), 0, CHUNK as i64, libc::POSIX_FADV_WILLNEED);
        }
        Some(ChunkReader {
            file,
            buf: Vec::new(),
            off: 0,
        })
    }

    /// Block `h` verified (as `read_raw_block`), from the current chunk or
    /// a new one starting at the block.
    fn block(
        &mut self,
        path: &Path,
        h: Handle,
        file_size: u64,
        cipher: Option<&FileCipher>,
    ) -> Result<Vec<u8>> {
        use std::os::fd::AsRawFd;
        let len = h.len + TRAILER as u64;
        check_handle(path, h, file_size)?;
        let buf_end = self.off + self.buf.len() as u64;
        if h.off < self.off || h.off + len > buf_end {
            let n = CHUNK.max(len).min(file_size - h.off);
            self.buf = crate::fsutil::read_at(&self.file, None, h.off, n as usize, path)?;
            self.off = h.off;
            let next = h.off + n;
            if next < file_size {
                // SAFETY: plain syscall on a descriptor we own.
                unsafe {
                    libc::posix_fadvise(
                        self.file.as_raw_fd(),
                        next as i64,
                        CHUNK as i64,
                        libc::POSIX_FADV_WILLNEED,
                    );
                }
            }
        }
        let start = (h.off - self.off) as usize;
        let bytes = self
            .buf
            .get(start..start + len as usize)
            .ok_or_else(|| Error::corruption(path, h.off, "short block read"))?;
        check_block(bytes.to_vec(), path, h, cipher)
    }
}

impl Table {
    pub(crate) fn open(
        path: PathBuf,
        file_no: u64,
        cache: Arc<BlockCache>,
        keys: &Keyring,
    ) -> Result<Table> {
        Table::open_with(path, file_no, cache, None, keys)
    }

    /// `open`; data blocks are read with `O_DIRECT` if `dio` is given and the
    /// filesystem accepts it (else through the page cache). An encrypted
    /// table takes its key from `keys` (`Error::KeyUnavailable` without it).
    pub(crate) fn open_with(
        path: PathBuf,
        file_no: u64,
        cache: Arc<BlockCache>,
        dio: Option<&Arc<crate::fsutil::DirectIo>>,
        keys: &Keyring,
    ) -> Result<Table> {
        let file = crate::io::open_read(&path)
            .map_err(|e| Error::io(format!("open table {}", path.display()), e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io(format!("stat table {}", path.display()), e))?
            .len();
        if size < FOOTER as u64 {
            return Err(Error::corruption(
                &path,
                0,
                "table file shorter than footer",
            ));
        }
        let mut footer = [0u8; FOOTER];
        let foff = size - FOOTER as u64;
        crate::io::read_exact_at(&file, &mut footer, foff, &path)
            .map_err(|e| Error::io(format!("read table {}", path.display()), e))?;
        let bad = |d: &str| Error::corruption(&path, foff, d.to_string());
        if u64_at(&footer, 56) != Some(MAGIC) {
            return Err(bad("bad magic"));
        }
        let expected = u32_at(&footer, 52).ok_or_else(|| bad("footer"))?;
        let got = crc32(&[&footer[..52]]);
        if expected != got {
            return Err(Error::ChecksumMismatch {
                file: path.clone(),
                offset: foff,
                expected,
                got,
            });
        }
        let (cipher, data_end) = match u32_at(&footer, 48) {
            Some(1) => (None, foff),
            Some(2) if foff >= HEADER_LEN as u64 => {
                let hoff = foff - HEADER_LEN as u64;
                let mut header = [0u8; HEADER_LEN];
                crate::io::read_exact_at(&file, &mut header, hoff, &path)
                    .map_err(|e| Error::io(format!("read table {}", path.display()), e))?;
                (
                    Some(FileCipher::from_header(keys, &header, &path, hoff)?),
                    hoff,
                )
            }
            _ => return Err(bad("unsupported table version")),
        };
        let foff = data_end;
        let c = cipher.as_ref();
        let g = |i: usize| u64_at(&footer, i * 8).unwrap_or(0);
        let fh = Handle {
            off: g(0),
            len: g(1),
        };
        let ih = Handle {
            off: g(2),
            len: g(3),
        };
        let ph = Handle {
            off: g(4),
            len: g(5),
        };
        let filter = read_raw_block(&file, &path, fh, foff, c)?;
        let index = Block::decode(read_raw_block(&file, &path, ih, foff, c)?, &path, ih.off)?;
        let props = Props::decode(&read_raw_block(&file, &path, ph, foff, c)?)
            .ok_or_else(|| Error::corruption(&path, ph.off, "bad props block"))?;
        for i in 0..index.len() {
            let h = decode_handle(index.value(i))
                .ok_or_else(|| Error::corruption(&path, ih.off, "bad index entry"))?;
            if h.off.saturating_add(h.len + TRAILER as u64) > foff {
                return Err(Error::corruption(&path, ih.off, "index entry out of range"));
            }
        }
        let direct = match dio {
            Some(d) if d.enabled.load(std::sync::atomic::Ordering::Relaxed) => {
                crate::fsutil::open_direct(&path)?.map(|f| (f, d.clone()))
            }
            _ => None,
        };
        Ok(Table {
            file_no,
            path,
            file: Some(file),
            size,
            index,
            filter,
            props,
            cache,
            direct,
            cipher,
            broken: None,
        })
    }

    /// A placeholder for a table file that `open` refused (`err`): it holds
    /// no data and answers every read in `[smallest, largest]` (user keys,
    /// from the manifest) with `Error::Corruption` naming the file and `err`.
    pub(crate) fn quarantined(
        path: PathBuf,
        file_no: u64,
        cache: Arc<BlockCache>,
        smallest: &[u8],
        largest: &[u8],
        err: &Error,
    ) -> Table {
        let (reason, offset) = match err {
            Error::Corruption { offset, detail, .. } => (detail.clone(), *offset),
            Error::ChecksumMismatch {
                offset,
                expected,
                got,
                ..
            } => (
                format!("checksum mismatch: expected {expected:#010x}, got {got:#010x}"),
                *offset,
            ),
            Error::Io { source, .. } => (source.to_string(), 0),
            Error::KeyUnavailable {
                key_id,
                key_version,
                detail,
                ..
            } => (
                format!("encryption key {key_id} version {key_version} is not available: {detail}"),
                0,
            ),
            e => (e.to_string(), 0),
        };
        let key = match err {
            Error::KeyUnavailable {
                key_id,
                key_version,
                ..
            } => Some((*key_id, *key_version)),
            _ => None,
        };
        Table {
            file_no,
            path,
            file: None,
            size: 0,
            index: Block::empty(),
            filter: Vec::new(),
            props: Props::default(),
            cache,
            direct: None,
            cipher: None,
            broken: Some(Broken {
                reason,
                offset,
                smallest: smallest.to_vec(),
                largest: largest.to_vec(),
                key,
            }),
        }
    }

    /// The error every read of a quarantined table's range gets.
    pub(crate) fn is_encrypted(&self) -> bool {
        self.cipher.is_some()
    }

    /// The key id the file is encrypted with (`None`: in the clear).
    pub(crate) fn encryption_key_id(&self) -> Option<u32> {
        self.cipher.as_ref().map(|c| c.key_id)
    }

    pub(crate) fn broken_error(&self) -> Error {
        match &self.broken {
            Some(b) => Error::corruption(
                &self.path,
                b.offset,
                format!(
                    "table file set aside when the engine opened, its data cannot be read: {}",
                    b.reason
                ),
            ),
            None => Error::corruption(&self.path, 0, "not a quarantined table"),
        }
    }

    /// Data block `i` as cached (read on a miss, and cached if `fill`), with
    /// its offset; read through `own` if given (a compaction's reader).
    fn raw_block(
        &self,
        i: usize,
        fill: bool,
        own: Option<&mut ChunkReader>,
    ) -> Result<(Arc<RawBlock>, u64)> {
        let h = decode_handle(self.index.value(i))
            .ok_or_else(|| Error::corruption(&self.path, 0, "bad index entry"))?;
        if let Some(b) = self.cache.get(self.file_no, h.off) {
            return Ok((b, h.off));
        }
        let Some(file) = &self.file else {
            return Err(self.broken_error());
        };
        let raw = match own {
            Some(r) => r.block(&self.path, h, self.size, self.cipher.as_ref())?,
            // A read or scan through the page cache: whether it waited on
            // the disk is noted (compaction is paced while they do).
            None if fill && self.direct.is_none() => {
                check_handle(&self.path, h, self.size)?;
                let (buf, waited) = crate::fsutil::read_at_noting_disk(
                    file,
                    h.off,
                    h.len as usize + TRAILER,
                    &self.path,
                    crate::fsutil::DISK_READ,
                )?;
                self.cache.note_table_read(waited);
                check_block(buf, &self.path, h, self.cipher.as_ref())?
            }
            None => {
                let raw = read_raw_block_with(
                    file,
                    self.direct.as_ref().map(|(f, d)| (f, &**d)),
                    &self.path,
                    h,
                    self.size,
                    self.cipher.as_ref(),
                )?;
                if fill {
                    // O_DIRECT: always from the disk.
                    self.cache.note_table_read(true);
                }
                raw
            }
        };
        let b = Arc::new(RawBlock::new(raw, &self.path, h.off)?);
        if fill {
            self.cache.insert(self.file_no, h.off, b.clone());
        }
        Ok((b, h.off))
    }

    /// Data block `i` decoded (iterators).
    fn block(&self, i: usize, fill: bool, own: Option<&mut ChunkReader>) -> Result<Arc<Block>> {
        let (raw, off) = self.raw_block(i, fill, own)?;
        Ok(Arc::new(Block::decode_raw(raw, &self.path, off)?))
    }

    pub(crate) fn may_contain(&self, user: &[u8]) -> bool {
        bloom_may_contain(&self.filter, user)
    }

    /// Newest version of `user` with seq <= `snap`.
    pub(crate) fn get(&self, user: &[u8], snap: u64) -> Result<Option<(u64, Kind, Vec<u8>)>> {
        if let Some(b) = &self.broken {
            if b.smallest.as_slice() <= user && user <= b.largest.as_slice() {
                return Err(self.broken_error());
            }
            return Ok(None);
        }
        if !self.may_contain(user) {
            return Ok(None);
        }
        let bi = self.index.lower_bound(user, snap);
        if bi >= self.index.len() {
            return Ok(None);
        }
        let (b, off) = self.raw_block(bi, true, None)?;
        let mut key = Vec::with_capacity(user.len() + 8);
        let Some(value) = b.seek(user, snap, &mut key, &self.path, off)? else {
            return Ok(None);
        };
        match decode_ikey(&key) {
            Some((u, s, k)) if u == user => Ok(Some((s, k, value.to_vec()))),
            _ => Ok(None),
        }
    }

    /// Number of data blocks whose key range intersects [start, end) and the
    /// average entries per block (for range estimates without reading data).
    /// The data blocks `[first, last)` that can hold keys of `[start, end)`.
    fn block_span(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> (usize, usize) {
        let n = self.index.len();
        if n == 0 {
            return (0, 0);
        }
        let first = match start {
            Some(s) => self.index.lower_bound(s, crate::key::MAX_SEQ),
            None => 0,
        };
        let last = match end {
            // first block whose last key >= (end, MAX): the block containing `end`
            Some(e) => self.index.lower_bound(e, crate::key::MAX_SEQ).min(n - 1) + 1,
            None => n,
        };
        (first, last)
    }

    /// Entries in `[start, end)` (user keys; `end` exclusive): counted one by
    /// one when the range lies within at most [`EXACT_COUNT_BLOCKS`] data
    /// blocks (blocks the next read of the range fetches anyway), otherwise
    /// estimated from the block index. Counting matters for small tables: a
    /// block-level estimate makes every range of a one-block table look like
    /// the whole table, so the optimizer would scan where InnoDB, which counts
    /// a small range in its leaf pages, uses the index (regression test
    /// `small_ranges_in_table_files_are_counted`).
    pub(crate) fn entries_in_range(
        t: &Arc<Table>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> u64 {
        let (first, last) = t.block_span(start, end);
        if last <= first {
            return 0;
        }
        if last - first > EXACT_COUNT_BLOCKS {
            return t.approx_entries_in_range(start, end);
        }
        let mut it = TableIter::new(t.clone());
        match start {
            Some(s) => it.seek(s, crate::key::MAX_SEQ),
            None => it.seek_to_first(),
        }
        let mut n = 0u64;
        while it.valid() && end.map_or(true, |e| it.user_key() < e) {
            n += 1;
            it.next();
        }
        if it.status().is_err() {
            return t.approx_entries_in_range(start, end);
        }
        n
    }

    /// The last user keys of about `want` data blocks spread evenly over the
    /// table (every block when it has fewer), with the number of entries each
    /// stands for; from the index block alone (no data read).
    pub(crate) fn spread_keys(&self, want: usize) -> (Vec<&[u8]>, u64) {
        let n = self.index.len();
        if n == 0 {
            return (Vec::new(), 0);
        }
        let step = n.div_ceil(want.max(1));
        let keys: Vec<&[u8]> = (0..n)
            .step_by(step)
            .filter_map(|i| decode_ikey(self.index.key(i)).map(|(u, _, _)| u))
            .collect();
        let per = self.props.num_entries / (keys.len() as u64).max(1);
        (keys, per.max(1))
    }

    pub(crate) fn approx_entries_in_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> u64 {
        let n = self.index.len();
        let (first, last) = self.block_span(start, end);
        if last <= first {
            return 0;
        }
        let blocks = (last - first) as u64;
        let per = self.props.num_entries / (n as u64).max(1);
        if blocks == n as u64 {
            return self.props.num_entries;
        }
        // partially covered edge blocks count half
        (blocks * per).saturating_sub(
            per / 2 * u64::from(start.is_some()) + per / 2 * u64::from(end.is_some()),
        )
    }
}

// ---------------------------------------------------------------- iterator

/// Ranges within this many data blocks of a table are counted exactly by
/// [`Table::entries_in_range`].
pub(crate) const EXACT_COUNT_BLOCKS: usize = 2;

pub(crate) struct TableIter {
    t: Arc<Table>,
    bi: usize,
    block: Option<Arc<Block>>,
    pos: usize,
    err: Option<Error>,
    /// Quarantined table: the encoded internal key of the virtual entry the
    /// iterator sits on (a seq-0 tombstone at the first / last key of its
    /// range the seek reached). The merge sees it as an ordinary entry, so it
    /// is reached only when the scan gets into the damaged range; stepping
    /// past it sets the corruption error. Empty = not positioned.
    virt: Vec<u8>,
    /// Blocks read from the file enter the block cache (false: compaction).
    fill_cache: bool,
    /// A compaction's own reader of the file (see `uncached`).
    own: Option<ChunkReader>,
}

impl TableIter {
    pub(crate) fn new(t: Arc<Table>) -> TableIter {
        TableIter {
            t,
            bi: 0,
            block: None,
            pos: 0,
            err: None,
            virt: Vec::new(),
            fill_cache: true,
            own: None,
        }
    }

    /// An iterator whose misses do not enter the block cache (compaction
    /// inputs, like RocksDB's `fill_cache = false`): a compaction reads every
    /// block of its inputs once, and the files are deleted after it, so
    /// caching them only evicted the blocks readers use. core-bench
    /// `readcold` right after `fillrandom` (an L0 compaction pending at
    /// open, 130 MB read through a 32 MiB cache): 0.67x fjall before.
    ///
    /// It reads through a [`ChunkReader`] of its own (falling back to the
    /// table's descriptor if the file cannot be opened again).
    pub(crate) fn uncached(t: Arc<Table>) -> TableIter {
        let own = match (&t.file, &t.direct) {
            (Some(_), None) => ChunkReader::open(&t.path),
            _ => None,
        };
        TableIter {
            fill_cache: false,
            own,
            ..TableIter::new(t)
        }
    }
    /// Positions a quarantined table's iterator on `user` (clamped into its
    /// range), or nowhere when `None`. Returns false for an intact table.
    fn virt_seek(&mut self, user: Option<&[u8]>) -> bool {
        let Some(b) = &self.t.broken else {
            return false;
        };
        self.err = None;
        self.virt.clear();
        if let Some(u) = user {
            let u = u.clamp(b.smallest.as_slice(), b.largest.as_slice());
            encode_ikey(&mut self.virt, u, 0, Kind::Delete);
        }
        true
    }
    /// Steps off a quarantined table's virtual entry: into its damaged data.
    fn virt_step(&mut self) -> bool {
        if self.t.broken.is_none() {
            return false;
        }
        if !self.virt.is_empty() {
            self.virt.clear();
            self.err = Some(self.t.broken_error());
        }
        true
    }
    fn load(&mut self, bi: usize) -> bool {
        self.bi = bi;
        if bi >= self.t.index.len() {
            self.block = None;
            return false;
        }
        match self.t.block(bi, self.fill_cache, self.own.as_mut()) {
            Ok(b) => {
                self.block = Some(b);
                true
            }
            Err(e) => {
                self.err = Some(e);
                self.block = None;
                false
            }
        }
    }
    fn skip_forward_empty(&mut self) {
        while let Some(b) = &self.block {
            if self.pos < b.len() {
                return;
            }
            let nb = self.bi + 1;
            if !self.load(nb) {
                return;
            }
            self.pos = 0;
        }
    }
    fn cur_key(&self) -> &[u8] {
        if self.t.broken.is_some() {
            return &self.virt;
        }
        match &self.block {
            Some(b) => b.key(self.pos),
            None => &[],
        }
    }
}

impl crate::iter::InternalIterator for TableIter {
    fn valid(&self) -> bool {
        if self.t.broken.is_some() {
            return self.err.is_none() && !self.virt.is_empty();
        }
        self.err.is_none() && self.block.as_ref().is_some_and(|b| self.pos < b.len())
    }
    fn seek(&mut self, user: &[u8], seq: u64) {
        if let Some(b) = &self.t.clone().broken {
            let hit = user <= b.largest.as_slice();
            self.virt_seek(hit.then_some(user));
            return;
        }
        let bi = self.t.index.lower_bound(user, seq);
        if self.load(bi) {
            if let Some(b) = &self.block {
                self.pos = b.lower_bound(user, seq);
            }
            self.skip_forward_empty();
        }
    }
    fn seek_for_prev(&mut self, user: &[u8], seq: u64) {
        if let Some(b) = &self.t.clone().broken {
            // (user, MAX) precedes every version of user: strictly before it.
            let hit = if seq == u64::MAX {
                user > b.smallest.as_slice()
            } else {
                user >= b.smallest.as_slice()
            };
            self.virt_seek(hit.then_some(user));
            return;
        }
        let n = self.t.index.len();
        if n == 0 {
            self.block = None;
            return;
        }
        let bi = self.t.index.lower_bound(user, seq).min(n - 1);
        if !self.load(bi) {
            return;
        }
        let ub = self
            .block
            .as_ref()
            .map(|b| b.upper_bound(user, seq))
            .unwrap_or(0);
        if ub == 0 {
            self.pos = 0;
            self.prev_block();
        } else {
            self.pos = ub - 1;
        }
    }
    fn seek_to_first(&mut self) {
        if let Some(b) = &self.t.clone().broken {
            self.virt_seek(Some(&b.smallest));
            return;
        }
        if self.load(0) {
            self.pos = 0;
            self.skip_forward_empty();
        }
    }
    fn seek_to_last(&mut self) {
        if let Some(b) = &self.t.clone().broken {
            self.virt_seek(Some(&b.largest));
            return;
        }
        let n = self.t.index.len();
        if n == 0 {
            self.block = None;
            return;
        }
        if self.load(n - 1) {
            let len = self.block.as_ref().map(|b| b.len()).unwrap_or(0);
            if len == 0 {
                self.prev_block();
            } else {
                self.pos = len - 1;
            }
        }
    }
    fn next(&mut self) {
        if self.virt_step() {
            return;
        }
        self.pos += 1;
        self.skip_forward_empty();
    }
    fn prev(&mut self) {
        if self.virt_step() {
            return;
        }
        if self.pos > 0 {
            self.pos -= 1;
        } else {
            self.prev_block();
        }
    }
    fn user_key(&self) -> &[u8] {
        decode_ikey(self.cur_key()).map(|x| x.0).unwrap_or(&[])
    }
    fn seq(&self) -> u64 {
        decode_ikey(self.cur_key()).map(|x| x.1).unwrap_or(0)
    }
    fn kind(&self) -> Kind {
        decode_ikey(self.cur_key())
            .map(|x| x.2)
            .unwrap_or(Kind::Delete)
    }
    fn value(&self) -> &[u8] {
        if self.t.broken.is_some() {
            return &[];
        }
        match &self.block {
            Some(b) => b.value(self.pos),
            None => &[],
        }
    }
    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

impl TableIter {
    fn prev_block(&mut self) {
        loop {
            if self.bi == 0 {
                self.block = None;
                return;
            }
            let nb = self.bi - 1;
            if !self.load(nb) {
                return;
            }
            let len = self.block.as_ref().map(|b| b.len()).unwrap_or(0);
            if len > 0 {
                self.pos = len - 1;
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;

    fn build(dir: &Path, n: u64, comp: Compression) -> Arc<Table> {
        build_with(dir, n, comp, &Keyring::default(), None)
    }

    /// `build`, encrypted with key `key` of `keys` if given.
    fn build_with(
        dir: &Path,
        n: u64,
        comp: Compression,
        keys: &Keyring,
        key: Option<u32>,
    ) -> Arc<Table> {
        let p = table_path(dir, n);
        let cipher = FileCipher::for_new_file_if(keys, key, &p).unwrap();
        let mut b = TableBuilder::create(p.clone(), 512, comp, 10, cipher).unwrap();
        for i in 0..1000u32 {
            let k = format!("key{i:05}");
            // two versions each: seq 2000+i (put), and i (older)
            b.add(
                k.as_bytes(),
                2000 + u64::from(i),
                Kind::Put,
                format!("new{i}").as_bytes(),
            )
            .unwrap();
            let kind = if i % 3 == 0 { Kind::Delete } else { Kind::Put };
            b.add(
                k.as_bytes(),
                u64::from(i) + 1,
                kind,
                format!("old{i}").as_bytes(),
            )
            .unwrap();
        }
        let (size, props) = b.finish().unwrap();
        assert_eq!(props.num_entries, 2000);
        let t = Table::open(p, n, Arc::new(BlockCache::new(1 << 20)), keys).unwrap();
        assert_eq!(t.size, size);
        assert_eq!(t.props, props);
        Arc::new(t)
    }

    #[test]
    fn point_and_iter() {
        let d = tempfile::tempdir().unwrap();
        for (n, comp) in [(1, Compression::None), (2, Compression::Zstd { level: 3 })] {
            let t = build(d.path(), n, comp);
            let (s, k, v) = t.get(b"key00010", u64::MAX >> 8).unwrap().unwrap();
            assert_eq!((s, k, v.as_slice()), (2010, Kind::Put, &b"new10"[..]));
            let (s, k, _) = t.get(b"key00012", 1000).unwrap().unwrap();
            assert_eq!((s, k), (13, Kind::Delete));
            assert!(t.get(b"key00012", 5).unwrap().is_none());
            assert!(t.get(b"nokey", 5000).unwrap().is_none());
            let mut it = TableIter::new(t.clone());
            it.seek_to_first();
            let mut c = 0;
            while it.valid() {
                c += 1;
                it.next();
            }
            assert_eq!(c, 2000);
            it.seek_to_last();
            c = 0;
            while it.valid() {
                c += 1;
                it.prev();
            }
            assert_eq!(c, 2000);
            it.seek(b"key00500", u64::MAX >> 8);
            assert_eq!(it.user_key(), b"key00500");
            assert_eq!(it.seq(), 2500);
            it.prev();
            assert_eq!(it.user_key(), b"key00499");
            assert_eq!(it.seq(), 500);
            it.seek_for_prev(b"key00500", 0);
            assert_eq!((it.user_key(), it.seq()), (&b"key00500"[..], 501));
            it.seek_for_prev(b"key00500", 9999);
            assert_eq!((it.user_key(), it.seq()), (&b"key00499"[..], 500));
            it.seek_for_prev(b"a", 0);
            assert!(!it.valid());
            it.seek(b"z", 0);
            assert!(!it.valid());
            assert!(t.approx_entries_in_range(None, None) == 2000);
            let r = t.approx_entries_in_range(Some(b"key00100"), Some(b"key00200"));
            assert!((100..400).contains(&r), "{r}");
        }
    }

    /// The in-place search of a raw block finds what a decoded block's
    /// binary search finds, for blocks of 1..=3 restart intervals and more,
    /// probes on, between, before and after the keys.
    #[test]
    fn raw_block_seek_matches_decoded_lower_bound() {
        let p = Path::new("x");
        for n in [1usize, 2, 15, 16, 17, 33, 100] {
            let mut bb = BlockBuilder::new();
            let mut ikeys = Vec::new();
            for i in 0..n {
                // Varying lengths and shared prefixes; two versions of some.
                let user = format!("k{:05}{}", i * 2, "x".repeat(i % 4)).into_bytes();
                for seq in if i % 3 == 0 { vec![9u64, 4] } else { vec![7] } {
                    let mut ik = Vec::new();
                    encode_ikey(&mut ik, &user, seq, Kind::Put);
                    bb.add(&ik, format!("v{i}-{seq}").as_bytes());
                    ikeys.push((user.clone(), seq));
                }
            }
            let data = bb.finish();
            let dec = Block::decode(data.clone(), p, 0).unwrap();
            let raw = RawBlock::new(data, p, 0).unwrap();
            let mut probes: Vec<(Vec<u8>, u64)> = vec![(b"".to_vec(), 0), (b"zzz".to_vec(), 0)];
            for (u, s) in &ikeys {
                for d in [0i64, -1, 1, 5] {
                    probes.push((u.clone(), (*s as i64 + d).max(0) as u64));
                }
                let mut between = u.clone();
                between.push(b'0');
                probes.push((between, 3));
            }
            let mut key = Vec::new();
            for (u, s) in &probes {
                let i = dec.lower_bound(u, *s);
                let got = raw.seek(u, *s, &mut key, p, 0).unwrap();
                if i >= dec.len() {
                    assert!(got.is_none(), "n={n} {u:?}/{s}");
                } else {
                    assert_eq!(got, Some(dec.value(i)), "n={n} {u:?}/{s}");
                    assert_eq!(key.as_slice(), dec.key(i), "n={n} {u:?}/{s}");
                }
            }
        }
    }

    /// Every entry of a `build` table, in order, through its iterator.
    fn scan(t: &Arc<Table>) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
        let mut it = TableIter::new(t.clone());
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.user_key().to_vec(), it.seq(), it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        out
    }

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn encrypted_table_round_trip_and_nothing_in_the_clear() {
        let (keys, _) = crate::crypto::test_keys::keyring();
        let d = tempfile::tempdir().unwrap();
        for comp in [Compression::None, Compression::Zstd { level: 1 }] {
            let plain = build(d.path(), 1, comp);
            let enc = build_with(d.path(), 2, comp, &keys, Some(1));
            assert_eq!(scan(&plain), scan(&enc));
            assert_eq!(enc.get(b"key00500", 9999).unwrap().unwrap().2, b"new500");
            assert!(enc.get(b"nokey", 9999).unwrap().is_none());
            // Uncached reads (a compaction's own chunk reader) decrypt too.
            let mut it = TableIter::uncached(enc.clone());
            it.seek_to_first();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.next();
            }
            it.status().unwrap();
            assert_eq!(n, 2000);
            let clear = std::fs::read(&plain.path).unwrap();
            let bytes = std::fs::read(&enc.path).unwrap();
            if comp == Compression::None {
                assert!(contains(&clear, b"new500"));
            }
            for s in [&b"key005"[..], b"new50", b"old50"] {
                assert!(!contains(&bytes, s), "{s:?} in the clear");
            }
            // The footer says version 2; the header before it names the key.
            let f = bytes.len() - FOOTER;
            assert_eq!(u32_at(&bytes, f + 48), Some(2));
            assert_eq!(u32_at(&clear, clear.len() - FOOTER + 48), Some(1));
            let h = f - HEADER_LEN;
            assert!(FileCipher::is_header(&bytes[h..]));
            assert_eq!(u32_at(&bytes, h + 8), Some(1));
            assert_eq!(u32_at(&bytes, h + 12), Some(1));
            crate::io::remove_file(&plain.path).unwrap();
            crate::io::remove_file(&enc.path).unwrap();
        }
    }

    #[test]
    fn encrypted_table_without_its_key_is_refused() {
        let (keys, rotate) = crate::crypto::test_keys::keyring();
        let d = tempfile::tempdir().unwrap();
        let t = build_with(d.path(), 3, Compression::None, &keys, Some(1));
        let p = t.path.clone();
        drop(t);
        let cache = || Arc::new(BlockCache::new(1 << 20));
        let e = Table::open(p.clone(), 3, cache(), &Keyring::default()).unwrap_err();
        assert!(
            matches!(&e, Error::KeyUnavailable { file, key_id: 1, key_version: 1, .. } if *file == p),
            "{e}"
        );
        let (other, _) = crate::crypto::test_keys::keyring();
        let wrong = crate::crypto::test_keys::TestKeys::default();
        wrong.add_version(1, 0x5a);
        let e = Table::open(p.clone(), 3, cache(), &Keyring::new(Arc::new(wrong))).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        // A rotation keeps the old version readable; new files take the new one.
        rotate.add_version(1, 0x77);
        let t = Table::open(p.clone(), 3, cache(), &keys).unwrap();
        assert_eq!(t.cipher.as_ref().map(|c| c.key_version), Some(1));
        let t2 = build_with(d.path(), 4, Compression::None, &keys, Some(1));
        assert_eq!(t2.cipher.as_ref().map(|c| c.key_version), Some(2));
        assert_eq!(scan(&Arc::new(t)), scan(&t2));
        drop(other);
    }

    #[test]
    fn corruption_is_error_not_panic() {
        let (keys, _) = crate::crypto::test_keys::keyring();
        for key in [None, Some(1)] {
            corruption_is_error_not_panic_with(&keys, key);
        }
    }

    fn corruption_is_error_not_panic_with(keys: &Keyring, key: Option<u32>) {
        let d = tempfile::tempdir().unwrap();
        let t = build_with(d.path(), 1, Compression::Zstd { level: 1 }, keys, key);
        let p = t.path.clone();
        drop(t);
        let orig = std::fs::read(&p).unwrap();
        let mut rng = 12345u64;
        for _ in 0..300 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut data = orig.clone();
            let pos = (rng >> 33) as usize % data.len();
            data[pos] ^= 1 << ((rng >> 20) % 8);
            let p2 = d.path().join("x.sst");
            std::fs::write(&p2, &data).unwrap();
            if let Ok(t) = Table::open(p2.clone(), 99, Arc::new(BlockCache::new(1 << 20)), keys) {
                let t = Arc::new(t);
                let mut it = TableIter::new(t.clone());
                it.seek_to_first();
                let mut n = 0;
                while it.valid() {
                    n += 1;
                    it.next();
                }
                if it.status().is_ok() {
                    assert_eq!(n, 2000);
                }
                let _ = t.get(b"key00010", 5000);
            }
        }
        // truncation
        for cut in [0, 10, 63, orig.len() / 2, orig.len() - 1] {
            let p2 = d.path().join("y.sst");
            std::fs::write(&p2, &orig[..cut]).unwrap();
            assert!(Table::open(p2, 98, Arc::new(BlockCache::new(1 << 20)), keys).is_err());
        }
    }

    #[test]
    fn bloom_fp_rate() {
        let hashes: Vec<u64> = (0..10000u32)
            .map(|i| crate::coding::hash64(format!("k{i}").as_bytes()))
            .collect();
        let f = bloom_build(&hashes, 10);
        for i in 0..10000u32 {
            assert!(bloom_may_contain(&f, format!("k{i}").as_bytes()));
        }
        let fp = (0..10000u32)
            .filter(|i| bloom_may_contain(&f, format!("x{i}").as_bytes()))
            .count();
        assert!(fp < 300, "fp {fp}");
    }
}
