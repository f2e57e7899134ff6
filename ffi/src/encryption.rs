//! Keys for encryption at rest from the server's key management plugin
//! (`file_key_management`, ...): the shim passes the server's
//! `encryption_key_get_latest_version` / `encryption_key_get` as two
//! callbacks (`struct tdb_engine_options`), which this provider calls.
use std::sync::Arc;

use tidesdb_core::{KeyProvider, Keyring};

/// `key_latest_version(key_id)`: the latest version, or `KEY_VERSION_INVALID`.
pub type LatestVersionFn = unsafe extern "C" fn(key_id: u32) -> u32;
/// `key_get(key_id, version, buf, len)`: 0 and the key in `buf[..*len]`
/// (`*len` = capacity on entry), else non-zero.
pub type KeyGetFn =
    unsafe extern "C" fn(key_id: u32, version: u32, buf: *mut u8, len: *mut u32) -> u32;

/// The server's `ENCRYPTION_KEY_VERSION_INVALID`.
pub const KEY_VERSION_INVALID: u32 = u32::MAX;
/// The server's `ENCRYPTION_KEY_SYSTEM_DATA`: the key of the WAL (as InnoDB's
/// redo log).
pub const LOG_KEY_ID: u32 = 1;

struct ServerKeys {
    latest: LatestVersionFn,
    get: KeyGetFn,
}

impl KeyProvider for ServerKeys {
    fn latest_version(&self, key_id: u32) -> Option<u32> {
        // SAFETY: the shim's callback takes plain integers.
        let v = unsafe { (self.latest)(key_id) };
        (v != KEY_VERSION_INVALID).then_some(v)
    }

    fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>> {
        let mut buf = [0u8; 64];
        let mut len = buf.len() as u32;
        // SAFETY: buf is valid for len bytes; the callback writes at most len.
        let rc = unsafe { (self.get)(key_id, version, buf.as_mut_ptr(), &mut len) };
        if rc != 0 || len as usize > buf.len() {
            return None;
        }
        Some(buf[..len as usize].to_vec())
    }
}

/// The keyring over the server's callbacks (none if either is missing).
pub fn keyring(latest: Option<LatestVersionFn>, get: Option<KeyGetFn>) -> Keyring {
    match (latest, get) {
        (Some(latest), Some(get)) => Keyring::new(Arc::new(ServerKeys { latest, get })),
        _ => Keyring::default(),
    }
}
