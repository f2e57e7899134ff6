//! Export files: a self-contained copy of some column families' entries as of one
//! snapshot, written to move a table between databases (the ffi's transportable
//! tables: `FLUSH TABLES t FOR EXPORT`, `ALTER TABLE t IMPORT TABLESPACE`).
//!
//! An export file holds user keys and values only (resolved values: no value-log
//! pointer, no sequence number), so it does not depend on the value log, the
//! manifest or the sequence numbers of the database that wrote it; an import writes
//! its entries as new writes of the importing database, which gives them that
//! database's sequence numbers (visible to every later snapshot there).
//!
//! ## Format
//!
//! ```text
//! magic: 8 bytes "TDBEXPT1" | flags: u32 LE (bit 0: encrypted)
//! [encrypted only: the 64-byte encryption header of crypto/ (key id, version, nonce)]
//! records, each starting with a tag byte:
//!   1 section: u32 LE family number (the caller's numbering)
//!   2 entry:   u32 LE key length, key, u32 LE value length, value
//!   3 end:     u64 LE number of entries, u32 LE crc32 of every record byte before
//!              the end record's tag
//! ```
//!
//! Encrypted files cipher every byte after the encryption header with the
//! positional cipher of `crypto/` (the checksum is over the plaintext). A file
//! without its end record (a copy cut short) is refused, as is one whose checksum
//! or entry count does not match.
use crate::crypto::{FileCipher, Keyring, HEADER_LEN};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TDBEXPT1";
const FLAG_ENCRYPTED: u32 = 1;
const TAG_SECTION: u8 = 1;
const TAG_ENTRY: u8 = 2;
const TAG_END: u8 = 3;

/// What a finished export file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    pub entries: u64,
    pub bytes: u64,
    pub crc: u32,
}

/// Writes an export file (mode 0660).
pub struct ExportWriter {
    path: PathBuf,
    out: BufWriter<File>,
    cipher: Option<FileCipher>,
    offset: u64,
    crc: crc32fast::Hasher,
    entries: u64,
    buf: Vec<u8>,
}

impl ExportWriter {
    /// Creates `path` (which must not exist), encrypted under the latest version
    /// of `key_id` of `keys` when given.
    pub fn create(path: &Path, keys: &Keyring, key_id: Option<u32>) -> Result<ExportWriter> {
        let cipher = FileCipher::for_new_file_if(keys, key_id, path)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o660)
            .open(path)
            .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
                .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
        }
        let mut w = ExportWriter {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            cipher: None,
            offset: 0,
            crc: crc32fast::Hasher::new(),
            entries: 0,
            buf: Vec::new(),
        };
        let mut head = MAGIC.to_vec();
        let flags = if cipher.is_some() { FLAG_ENCRYPTED } else { 0 };
        head.extend_from_slice(&flags.to_le_bytes());
        if let Some(c) = &cipher {
            head.extend_from_slice(&c.header());
        }
        w.raw(&head)?;
        w.cipher = cipher;
        Ok(w)
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(format!("write {}", self.path.display()), e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Writes `self.buf` as record bytes (checksummed, ciphered).
    fn record(&mut self, checksummed: bool) -> Result<()> {
        let mut bytes = std::mem::take(&mut self.buf);
        if checksummed {
            self.crc.update(&bytes);
        }
        if let Some(c) = &self.cipher {
            c.apply(self.offset, &mut bytes);
        }
        let r = self.raw(&bytes);
        bytes.clear();
        self.buf = bytes;
        r
    }

    /// The key id and version the file is encrypted with.
    pub fn encryption(&self) -> Option<(u32, u32)> {
        self.cipher.as_ref().map(|c| (c.key_id, c.key_version))
    }

    /// Starts the entries of family `family`.
    pub fn section(&mut self, family: u32) -> Result<()> {
        self.buf.push(TAG_SECTION);
        self.buf.extend_from_slice(&family.to_le_bytes());
        self.record(true)
    }

    pub fn entry(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let len = |n: usize| {
            u32::try_from(n)
                .map_err(|_| Error::InvalidArgument(format!("export entry of {n} bytes")))
        };
        let (kl, vl) = (len(key.len())?, len(value.len())?);
        self.buf.push(TAG_ENTRY);
        self.buf.extend_from_slice(&kl.to_le_bytes());
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(&vl.to_le_bytes());
        self.buf.extend_from_slice(value);
        self.entries += 1;
        self.record(true)
    }

    /// Writes the end record and makes the file durable.
    pub fn finish(mut self) -> Result<ExportSummary> {
        let crc = self.crc.clone().finalize();
        self.buf.push(TAG_END);
        self.buf.extend_from_slice(&self.entries.to_le_bytes());
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.record(false)?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io(format!("write {}", self.path.display()), e.into_error()))?;
        crate::io::sync_all(&file, &self.path)
            .map_err(|e| Error::io(format!("fsync {}", self.path.display()), e))?;
        Ok(ExportSummary {
            entries: self.entries,
            bytes: self.offset,
            crc,
        })
    }
}

/// One record of an export file.
#[derive(Debug, PartialEq, Eq)]
pub enum ExportItem {
    Section(u32),
    Entry(Vec<u8>, Vec<u8>),
}

/// Reads an export file record by record; the end record is checked when reached.
pub struct ExportReader {
    path: PathBuf,
    input: BufReader<File>,
    cipher: Option<FileCipher>,
    offset: u64,
    crc: crc32fast::Hasher,
    entries: u64,
    summary: Option<ExportSummary>,
}

impl ExportReader {
    /// Opens `path`; an encrypted file needs its key in `keys`
    /// (`Error::KeyUnavailable` otherwise, before any entry is read).
    pub fn open(path: &Path, keys: &Keyring) -> Result<ExportReader> {
        let file =
            File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
        let mut r = ExportReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(1 << 20, file),
            cipher: None,
            offset: 0,
            crc: crc32fast::Hasher::new(),
            entries: 0,
            summary: None,
        };
        let head = r.raw(12)?;
        r.offset = 12;
        if head[..8] != MAGIC[..] {
            return Err(Error::corruption(path, 0, "not a TidesDB export file"));
        }
        let flags = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if flags & !FLAG_ENCRYPTED != 0 {
            return Err(Error::corruption(
                path,
                8,
                format!("unknown flags {flags:#x}"),
            ));
        }
        if flags & FLAG_ENCRYPTED != 0 {
            let header = r.raw(HEADER_LEN)?;
            r.cipher = Some(FileCipher::from_header(keys, &header, path, 12)?);
            r.offset += HEADER_LEN as u64;
        }
        Ok(r)
    }

    /// The key id and version an encrypted file was written with.
    pub fn encryption(&self) -> Option<(u32, u32)> {
        self.cipher.as_ref().map(|c| (c.key_id, c.key_version))
    }

    fn raw(&mut self, n: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; n];
        self.input.read_exact(&mut v).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corruption(
                    &self.path,
                    self.offset,
                    "the file ends before its end record (an incomplete copy?)",
                )
            } else {
                Error::io(format!("read {}", self.path.display()), e)
            }
        })?;
        Ok(v)
    }

    fn bytes(&mut self, n: usize, checksummed: bool) -> Result<Vec<u8>> {
        let mut v = self.raw(n)?;
        if let Some(c) = &self.cipher {
            c.apply(self.offset, &mut v);
        }
        self.offset += n as u64;
        if checksummed {
            self.crc.update(&v);
        }
        Ok(v)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.bytes(4, true)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next section or entry; `None` after the (checked) end record.
    pub fn next_item(&mut self) -> Result<Option<ExportItem>> {
        if self.summary.is_some() {
            return Ok(None);
        }
        let at = self.offset;
        let tag = self.bytes(1, false)?[0];
        match tag {
            TAG_SECTION => {
                self.crc.update(&[tag]);
                Ok(Some(ExportItem::Section(self.u32()?)))
            }
            TAG_ENTRY => {
                self.crc.update(&[tag]);
                let kl = self.u32()? as usize;
                let key = self.bytes(kl, true)?;
                let vl = self.u32()? as usize;
                let value = self.bytes(vl, true)?;
                self.entries += 1;
                Ok(Some(ExportItem::Entry(key, value)))
            }
            TAG_END => {
                let b = self.bytes(12, false)?;
                let mut n = [0u8; 8];
                n.copy_from_slice(&b[..8]);
                let entries = u64::from_le_bytes(n);
                let expected = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
                let got = self.crc.clone().finalize();
                if got != expected {
                    return Err(Error::ChecksumMismatch {
                        file: self.path.clone(),
                        offset: at,
                        expected,
                        got,
                    });
                }
                if entries != self.entries {
                    return Err(Error::corruption(
                        &self.path,
                        at,
                        format!(
                            "{} entries read, the end record says {entries}",
                            self.entries
                        ),
                    ));
                }
                self.summary = Some(ExportSummary {
                    entries,
                    bytes: self.offset,
                    crc: got,
                });
                Ok(None)
            }
            t => Err(Error::corruption(
                &self.path,
                at,
                format!("unknown record tag {t}"),
            )),
        }
    }

    /// What the file held, once [`Self::next_item`] returned `None`.
    pub fn summary(&self) -> Option<ExportSummary> {
        self.summary
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn roundtrip(keys: &Keyring, key_id: Option<u32>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tdb");
        let mut w = ExportWriter::create(&p, keys, key_id).unwrap();
        w.section(0).unwrap();
        w.entry(b"k1", b"v1").unwrap();
        w.entry(b"k2", &vec![7u8; 100_000]).unwrap();
        w.section(u32::MAX).unwrap();
        w.entry(b"", b"").unwrap();
        let s = w.finish().unwrap();
        assert_eq!(s.entries, 3);
        let mut r = ExportReader::open(&p, keys).unwrap();
        assert_eq!(r.encryption().is_some(), key_id.is_some());
        let mut items = Vec::new();
        while let Some(i) = r.next_item().unwrap() {
            items.push(i);
        }
        assert_eq!(items.len(), 5);
        assert_eq!(
            items[2],
            ExportItem::Entry(b"k2".to_vec(), vec![7u8; 100_000])
        );
        assert_eq!(r.summary(), Some(s));
        // Cut short: refused at the end.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 5]).unwrap();
        let mut r = ExportReader::open(&p, keys).unwrap();
        let err = loop {
            match r.next_item() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("a cut file read to its end"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("end record"), "{err}");
        // A flipped byte: refused.
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let mut r = ExportReader::open(&p, keys).unwrap();
        let failed = loop {
            match r.next_item() {
                Ok(Some(_)) => {}
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        assert!(failed);
    }

    #[test]
    fn export_file_roundtrip_plain() {
        roundtrip(&Keyring::default(), None);
    }

    struct OneKey;
    impl crate::crypto::KeyProvider for OneKey {
        fn latest_version(&self, id: u32) -> Option<u32> {
            (id == 5).then_some(2)
        }
        fn key(&self, id: u32, v: u32) -> Option<Vec<u8>> {
            (id == 5 && v == 2).then(|| vec![9u8; 32])
        }
    }

    #[test]
    fn export_file_roundtrip_encrypted_and_refused_without_key() {
        let keys = Keyring::new(std::sync::Arc::new(OneKey));
        roundtrip(&keys, Some(5));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tdb");
        let mut w = ExportWriter::create(&p, &keys, Some(5)).unwrap();
        w.section(0).unwrap();
        w.entry(b"secret-key", b"secret-value").unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert!(!bytes.windows(6).any(|w| w == b"secret"));
        let err = ExportReader::open(&p, &Keyring::default()).err().unwrap();
        assert!(matches!(err, Error::KeyUnavailable { .. }), "{err}");
    }
}
