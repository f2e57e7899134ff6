//! Encryption at rest: AES in CTR mode over the bytes of a file, keyed by a
//! key management plugin's key (through [`KeyProvider`]), located by the
//! file's [`HEADER_LEN`]-byte encryption header.
//!
//! The cipher is positional: the byte at file offset `o` is XORed with byte
//! `o mod 16` of `AES_k(nonce + o / 16)` (128-bit big-endian counter). So a
//! file is encrypted and decrypted piece by piece at the points where its
//! bytes are written and read (an appended record, a block read at its
//! offset), and the formats around it keep their offsets and checksums (the
//! checksums are over the plaintext: a wrong key also fails them). Each file
//! has its own random nonce, so no two files share a keystream.
//!
//! ## Encryption header (64 bytes)
//!
//! ```text
//! magic: 8 bytes "TDBCRYP1" | key_id: u32 LE | key_version: u32 LE |
//! nonce: 16 bytes | key_check: 8 bytes | reserved: 20 zero bytes |
//! crc: u32 LE = crc32(previous 60 bytes)
//! ```
//!
//! `key_check` = the first 8 bytes of `AES_k("TidesDB-keycheck")`: a key that
//! is not the one the file was written with is refused before any byte is
//! decrypted. Where the header sits is the file format's business (a table
//! file: before its footer; a WAL segment or a value log file: at offset 0);
//! an unencrypted file has none and is unchanged. The key id and version in
//! the header are what a reader asks the provider for, so files written
//! before a key rotation stay readable with their version while new files
//! take the latest one (a compaction rewrites data under the latest).

use crate::coding::{crc32, u32_at};
use crate::error::{Error, Result};
use aes::cipher::{BlockEncrypt, InnerIvInit, KeyInit, StreamCipher, StreamCipherSeek};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub(crate) const HEADER_LEN: usize = 64;
const MAGIC: &[u8; 8] = b"TDBCRYP1";
const KEY_CHECK_BLOCK: &[u8; 16] = b"TidesDB-keycheck";

/// Where keys come from (the server's key management plugin through the
/// ffi, or a test's fixed keys).
pub trait KeyProvider: Send + Sync {
    /// The latest version of key `key_id`; `None` if the provider has no
    /// such key.
    fn latest_version(&self, key_id: u32) -> Option<u32>;
    /// The bytes (16, 24 or 32: AES-128/192/256) of key `key_id` version
    /// `version`; `None` if unavailable.
    fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>>;
}

/// The database's key provider (none by default: every encrypted file is
/// then refused with `Error::KeyUnavailable`, unencrypted ones work).
#[derive(Clone, Default)]
pub struct Keyring(Option<Arc<dyn KeyProvider>>);

impl Keyring {
    pub fn new(provider: Arc<dyn KeyProvider>) -> Keyring {
        Keyring(Some(provider))
    }

    pub fn is_configured(&self) -> bool {
        self.0.is_some()
    }

    /// The provider's latest version of `key_id` (`None` without provider).
    pub fn latest_version(&self, key_id: u32) -> Option<u32> {
        self.0.as_ref()?.latest_version(key_id)
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Keyring(provider)"
        } else {
            "Keyring(none)"
        })
    }
}

/// The key id of [`FileCipher::ephemeral`] keys (never a plugin's).
const EPHEMERAL_KEY_ID: u32 = u32::MAX;

struct EphemeralKey(Vec<u8>);

impl KeyProvider for EphemeralKey {
    fn latest_version(&self, key_id: u32) -> Option<u32> {
        (key_id == EPHEMERAL_KEY_ID).then_some(1)
    }
    fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>> {
        (key_id == EPHEMERAL_KEY_ID && version == 1).then(|| self.0.clone())
    }
}

#[derive(Clone)]
enum Aes {
    A128(aes::Aes128),
    A192(aes::Aes192),
    A256(aes::Aes256),
}

impl Aes {
    fn new(key: &[u8]) -> Option<Aes> {
        Some(match key.len() {
            16 => Aes::A128(aes::Aes128::new_from_slice(key).ok()?),
            24 => Aes::A192(aes::Aes192::new_from_slice(key).ok()?),
            32 => Aes::A256(aes::Aes256::new_from_slice(key).ok()?),
            _ => return None,
        })
    }

    fn encrypt_block(&self, block: &mut [u8; 16]) {
        let b = aes::Block::from_mut_slice(block);
        match self {
            Aes::A128(c) => c.encrypt_block(b),
            Aes::A192(c) => c.encrypt_block(b),
            Aes::A256(c) => c.encrypt_block(b),
        }
    }

    fn key_check(&self) -> [u8; 8] {
        let mut b = *KEY_CHECK_BLOCK;
        self.encrypt_block(&mut b);
        let mut out = [0u8; 8];
        out.copy_from_slice(&b[..8]);
        out
    }
}

/// The cipher of one encrypted file: its key (id, version) and nonce.
#[derive(Clone)]
pub(crate) struct FileCipher {
    pub key_id: u32,
    pub key_version: u32,
    nonce: [u8; 16],
    aes: Aes,
}

impl fmt::Debug for FileCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileCipher(key {} v{})", self.key_id, self.key_version)
    }
}

fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut out = [0u8; N];
    let mut got = 0;
    while got < N {
        let rest = &mut out[got..];
        // SAFETY: writes at most rest.len() bytes into rest.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io("getrandom for an encryption nonce", e));
        }
        got += n as usize;
    }
    Ok(out)
}

impl FileCipher {
    /// The cipher of a new file under the latest version of key `key_id`
    /// (random nonce).
    pub(crate) fn for_new_file(keys: &Keyring, key_id: u32, path: &Path) -> Result<FileCipher> {
        let unavailable = |version: u32, detail: &str| Error::KeyUnavailable {
            file: path.to_path_buf(),
            key_id,
            key_version: version,
            detail: detail.to_string(),
        };
        let provider = keys
            .0
            .as_ref()
            .ok_or_else(|| unavailable(0, "no key management plugin"))?;
        let version = provider
            .latest_version(key_id)
            .ok_or_else(|| unavailable(0, "the key management plugin has no such key"))?;
        let key = provider
            .key(key_id, version)
            .ok_or_else(|| unavailable(version, "the key management plugin has no such key"))?;
        let aes = Aes::new(&key)
            .ok_or_else(|| unavailable(version, "the key is not 16, 24 or 32 bytes"))?;
        Ok(FileCipher {
            key_id,
            key_version: version,
            nonce: random_bytes()?,
            aes,
        })
    }

    /// `for_new_file` when `key_id` is set (an encrypted column family or
    /// log), else `None` (a file in the clear).
    pub(crate) fn for_new_file_if(
        keys: &Keyring,
        key_id: Option<u32>,
        path: &Path,
    ) -> Result<Option<FileCipher>> {
        key_id
            .map(|id| FileCipher::for_new_file(keys, id, path))
            .transpose()
    }

    /// A cipher under a random key known only to this process, for files
    /// nobody reads after it ends (spill runs of uncommitted transactions),
    /// and the keyring that opens them.
    pub(crate) fn ephemeral() -> Result<(FileCipher, Keyring)> {
        let key: [u8; 32] = random_bytes()?;
        let aes = Aes::new(&key).ok_or_else(|| Error::InvalidArgument("AES key".into()))?;
        let c = FileCipher {
            key_id: EPHEMERAL_KEY_ID,
            key_version: 1,
            nonce: random_bytes()?,
            aes,
        };
        Ok((c, Keyring::new(Arc::new(EphemeralKey(key.to_vec())))))
    }

    /// The header recording this cipher (format above).
    pub(crate) fn header(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&self.key_id.to_le_bytes());
        h[12..16].copy_from_slice(&self.key_version.to_le_bytes());
        h[16..32].copy_from_slice(&self.nonce);
        h[32..40].copy_from_slice(&self.aes.key_check());
        let c = crc32(&[&h[..60]]);
        h[60..].copy_from_slice(&c.to_le_bytes());
        h
    }

    /// True if `bytes` begins with an encryption header's magic.
    pub(crate) fn is_header(bytes: &[u8]) -> bool {
        bytes.get(..8) == Some(&MAGIC[..])
    }

    /// The cipher of the file whose header is `header` (read at `offset`
    /// of `path`), with its key from `keys`.
    pub(crate) fn from_header(
        keys: &Keyring,
        header: &[u8],
        path: &Path,
        offset: u64,
    ) -> Result<FileCipher> {
        let bad = |d: &str| Error::corruption(path, offset, d.to_string());
        if header.len() < HEADER_LEN || !FileCipher::is_header(header) {
            return Err(bad("bad encryption header magic"));
        }
        let expected = u32_at(header, 60).ok_or_else(|| bad("short encryption header"))?;
        let got = crc32(&[&header[..60]]);
        if expected != got {
            return Err(Error::ChecksumMismatch {
                file: path.to_path_buf(),
                offset,
                expected,
                got,
            });
        }
        let key_id = u32_at(header, 8).ok_or_else(|| bad("short encryption header"))?;
        let key_version = u32_at(header, 12).ok_or_else(|| bad("short encryption header"))?;
        let unavailable = |detail: &str| Error::KeyUnavailable {
            file: path.to_path_buf(),
            key_id,
            key_version,
            detail: detail.to_string(),
        };
        let provider = keys
            .0
            .as_ref()
            .ok_or_else(|| unavailable("no key management plugin"))?;
        let key = provider
            .key(key_id, key_version)
            .ok_or_else(|| unavailable("the key management plugin has no such key"))?;
        let aes = Aes::new(&key).ok_or_else(|| unavailable("the key is not 16, 24 or 32 bytes"))?;
        if aes.key_check()[..] != header[32..40] {
            return Err(unavailable(
                "the key does not match the one the file was written with",
            ));
        }
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&header[16..32]);
        Ok(FileCipher {
            key_id,
            key_version,
            nonce,
            aes,
        })
    }

    /// Encrypts or decrypts (the same XOR) `buf`, the bytes at file offset
    /// `offset`.
    pub(crate) fn apply(&self, offset: u64, buf: &mut [u8]) {
        let iv = aes::Block::from(self.nonce);
        match &self.aes {
            Aes::A128(c) => {
                let mut s = ctr::Ctr128BE::<aes::Aes128>::from_core(ctr::CtrCore::inner_iv_init(
                    c.clone(),
                    &iv,
                ));
                s.seek(offset);
                s.apply_keystream(buf);
            }
            Aes::A192(c) => {
                let mut s = ctr::Ctr128BE::<aes::Aes192>::from_core(ctr::CtrCore::inner_iv_init(
                    c.clone(),
                    &iv,
                ));
                s.seek(offset);
                s.apply_keystream(buf);
            }
            Aes::A256(c) => {
                let mut s = ctr::Ctr128BE::<aes::Aes256>::from_core(ctr::CtrCore::inner_iv_init(
                    c.clone(),
                    &iv,
                ));
                s.seek(offset);
                s.apply_keystream(buf);
            }
        }
    }

    /// `apply` on a copy.
    #[cfg(test)]
    pub(crate) fn applied(&self, offset: u64, bytes: &[u8]) -> Vec<u8> {
        let mut v = bytes.to_vec();
        self.apply(offset, &mut v);
        v
    }
}

/// Fixed keys for tests: key id -> versions (1-based) of 32-byte keys.
#[cfg(test)]
pub(crate) mod test_keys {
    use super::*;
    use parking_lot::Mutex;
    use std::collections::BTreeMap;

    #[derive(Default)]
    pub(crate) struct TestKeys(pub Mutex<BTreeMap<u32, Vec<Vec<u8>>>>);

    impl TestKeys {
        /// Adds a new version of key `id` (bytes derived from `seed`).
        pub(crate) fn add_version(&self, id: u32, seed: u8) {
            self.0
                .lock()
                .entry(id)
                .or_default()
                .push((0..32u8).map(|i| i.wrapping_mul(7) ^ seed).collect());
        }
    }

    impl KeyProvider for TestKeys {
        fn latest_version(&self, key_id: u32) -> Option<u32> {
            let m = self.0.lock();
            let n = m.get(&key_id)?.len();
            (n > 0).then_some(n as u32)
        }
        fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>> {
            let i = usize::try_from(version).ok()?.checked_sub(1)?;
            self.0.lock().get(&key_id)?.get(i).cloned()
        }
    }

    /// A keyring with key 1 (one version) and the provider to add more.
    pub(crate) fn keyring() -> (Keyring, Arc<TestKeys>) {
        let k = Arc::new(TestKeys::default());
        k.add_version(1, 0x11);
        (Keyring::new(k.clone()), k)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::test_keys::*;
    use super::*;

    #[test]
    fn round_trip_at_any_offset() {
        let (keys, _) = keyring();
        let p = Path::new("f");
        let c = FileCipher::for_new_file(&keys, 1, p).unwrap();
        let plain: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let whole = c.applied(100, &plain);
        assert_ne!(whole, plain);
        // Pieces encrypted at their own offsets give the same bytes.
        let mut pieces = c.applied(100, &plain[..37]);
        pieces.extend(c.applied(137, &plain[37..]));
        assert_eq!(pieces, whole);
        let back = FileCipher::from_header(&keys, &c.header(), p, 0).unwrap();
        assert_eq!(back.applied(100, &whole), plain);
        assert_eq!(back.applied(137, &whole[37..]), &plain[37..]);
    }

    #[test]
    fn header_records_key_id_and_version() {
        let (keys, tk) = keyring();
        tk.add_version(1, 0x22);
        tk.add_version(5, 0x33);
        let p = Path::new("f");
        let c = FileCipher::for_new_file(&keys, 1, p).unwrap();
        assert_eq!((c.key_id, c.key_version), (1, 2));
        let h = c.header();
        assert_eq!(u32_at(&h, 8), Some(1));
        assert_eq!(u32_at(&h, 12), Some(2));
        let c5 = FileCipher::for_new_file(&keys, 5, p).unwrap();
        assert_eq!((c5.key_id, c5.key_version), (5, 1));
        // Two files never share a nonce (keystream).
        let c2 = FileCipher::for_new_file(&keys, 1, p).unwrap();
        assert_ne!(c.applied(0, &[0; 32]), c2.applied(0, &[0; 32]));
    }

    #[test]
    fn old_version_stays_readable_after_rotation() {
        let (keys, tk) = keyring();
        let p = Path::new("f");
        let c = FileCipher::for_new_file(&keys, 1, p).unwrap();
        let enc = c.applied(0, b"secret");
        tk.add_version(1, 0x44);
        let back = FileCipher::from_header(&keys, &c.header(), p, 0).unwrap();
        assert_eq!(back.key_version, 1);
        assert_eq!(back.applied(0, &enc), b"secret");
        assert_eq!(
            FileCipher::for_new_file(&keys, 1, p).unwrap().key_version,
            2
        );
    }

    #[test]
    fn missing_or_wrong_key_is_a_clear_error() {
        let (keys, _) = keyring();
        let p = Path::new("/d/000007.sst");
        let h = FileCipher::for_new_file(&keys, 1, p).unwrap().header();
        // No provider.
        let e = FileCipher::from_header(&Keyring::default(), &h, p, 0).unwrap_err();
        assert!(matches!(
            e,
            Error::KeyUnavailable {
                key_id: 1,
                key_version: 1,
                ..
            }
        ));
        assert!(e.to_string().contains("000007.sst"), "{e}");
        // The provider does not have that key.
        let (other, _) = keyring();
        let mut h9 = h;
        h9[8..12].copy_from_slice(&9u32.to_le_bytes());
        let c = crc32(&[&h9[..60]]);
        h9[60..].copy_from_slice(&c.to_le_bytes());
        let e = FileCipher::from_header(&other, &h9, p, 0).unwrap_err();
        assert!(matches!(e, Error::KeyUnavailable { key_id: 9, .. }), "{e}");
        // A different key under the same id and version.
        let wrong = Arc::new(TestKeys::default());
        wrong.add_version(1, 0x99);
        let e = FileCipher::from_header(&Keyring::new(wrong), &h, p, 0).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        // No key for a new file.
        let e = FileCipher::for_new_file(&keys, 3, p).unwrap_err();
        assert!(matches!(e, Error::KeyUnavailable { key_id: 3, .. }), "{e}");
        // A damaged header is corruption, not a key error.
        let mut bad = h;
        bad[20] ^= 1;
        assert!(FileCipher::from_header(&keys, &bad, p, 0)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn key_sizes() {
        for len in [16usize, 24, 32] {
            let k = Arc::new(TestKeys::default());
            k.0.lock().insert(2, vec![vec![7u8; len]]);
            let keys = Keyring::new(k);
            let c = FileCipher::for_new_file(&keys, 2, Path::new("f")).unwrap();
            let back = FileCipher::from_header(&keys, &c.header(), Path::new("f"), 0).unwrap();
            assert_eq!(back.applied(5, &c.applied(5, b"abc")), b"abc");
        }
        let k = Arc::new(TestKeys::default());
        k.0.lock().insert(2, vec![vec![7u8; 10]]);
        assert!(FileCipher::for_new_file(&Keyring::new(k), 2, Path::new("f")).is_err());
    }
}
