//! An index's [`Settings`] (token sizes, stopword list), fixed when the index is
//! built, as InnoDB fixes a FULLTEXT index's stopwords in its config table.
//!
//! They live in the index's own column family, under a key no posting can have
//! (an empty word):
//!
//! ```text
//! key   = 0x00 ++ "settings"
//! value = u8 version (1 or 2) ++ u8 flags (bit 0: stopwords on)
//!         ++ u16 LE min token ++ u16 LE max token
//!         ++ u32 LE n ++ n × (u16 LE length ++ UTF-8 stopword)
//! ```
//!
//! Version 2: the index also keeps each document's length (see `postings`); an
//! index of version 1 does not (BM25 then ranks without length normalisation). An
//! engine that knows only version 1 refuses version 2 (asking for a rebuild) rather
//! than write documents without their lengths.
//!
//! Version 3: as 2, and a one-character word followed by an apostrophe is no word
//! ([`Settings::elision`]), so the index's positions skip it; an engine that knows
//! only versions 1 and 2 refuses it rather than write positions counting it.
//!
//! An index without the key was built before settings were recorded: it is read
//! with the defaults it was built with ([`Settings::legacy`]).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tidesdb_core::{Cf, Txn};

use super::tokenizer::{Settings, StopWords, MAX_TOKEN_LIMIT};
use crate::status::{FfiError, FfiResult, Status};

pub const SETTINGS_KEY: &[u8] = b"\x00settings";
/// Without document lengths.
const VERSION_1: u8 = 1;
/// With document lengths.
const VERSION_2: u8 = 2;
/// With document lengths and elision.
const VERSION_3: u8 = 3;

/// Settings by column family id: read once per index, written when it is built.
fn cache() -> &'static Mutex<HashMap<u64, Arc<Settings>>> {
    static C: OnceLock<Mutex<HashMap<u64, Arc<Settings>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

pub fn encode(s: &Settings) -> Vec<u8> {
    // Elision came after document lengths: an index has it only with them.
    let version = match (s.doc_lengths, s.elision) {
        (true, true) => VERSION_3,
        (true, false) => VERSION_2,
        (false, _) => VERSION_1,
    };
    let mut v = vec![version, u8::from(s.stopwords.is_some())];
    v.extend_from_slice(&(s.min_token as u16).to_le_bytes());
    v.extend_from_slice(&(s.max_token as u16).to_le_bytes());
    let mut words: Vec<&String> = s.stopwords.iter().flatten().collect();
    words.sort();
    v.extend_from_slice(&(words.len() as u32).to_le_bytes());
    for w in words {
        let b = &w.as_bytes()[..w.len().min(u16::MAX as usize)];
        v.extend_from_slice(&(b.len() as u16).to_le_bytes());
        v.extend_from_slice(b);
    }
    v
}

pub fn decode(v: &[u8]) -> FfiResult<Settings> {
    let bad = || FfiError::new(Status::Corruption, "damaged fulltext index settings");
    let (&version, rest) = v.split_first().ok_or_else(bad)?;
    if !(VERSION_1..=VERSION_3).contains(&version) {
        return Err(FfiError::new(
            Status::Invalid,
            format!(
                "FULLTEXT index settings of version {version} are unknown to this engine: \
                 rebuild the index (ALTER TABLE ... FORCE)"
            ),
        ));
    }
    let (&flags, rest) = rest.split_first().ok_or_else(bad)?;
    let (min, rest) = rest.split_first_chunk::<2>().ok_or_else(bad)?;
    let (max, rest) = rest.split_first_chunk::<2>().ok_or_else(bad)?;
    let (n, mut rest) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
    let mut words = StopWords::default();
    for _ in 0..u32::from_le_bytes(*n) {
        let (len, tail) = rest.split_first_chunk::<2>().ok_or_else(bad)?;
        let len = u16::from_le_bytes(*len) as usize;
        let w = tail.get(..len).ok_or_else(bad)?;
        words.insert(String::from_utf8_lossy(w).into_owned());
        rest = &tail[len..];
    }
    Ok(Settings {
        min_token: (u16::from_le_bytes(*min) as usize).clamp(1, MAX_TOKEN_LIMIT),
        max_token: (u16::from_le_bytes(*max) as usize).clamp(1, MAX_TOKEN_LIMIT),
        stopwords: (flags & 1 != 0).then_some(words),
        doc_lengths: version >= VERSION_2,
        elision: version >= VERSION_3,
    })
}

/// The settings of the index in `cf`.
pub fn of_index(txn: &mut Txn, cf: &Cf) -> FfiResult<Arc<Settings>> {
    if let Some(s) = cache().lock().map_err(|_| poisoned())?.get(&cf.id()) {
        return Ok(s.clone());
    }
    let s = Arc::new(match txn.get(cf, SETTINGS_KEY)? {
        Some(v) => decode(&v)?,
        None => Settings::legacy(),
    });
    cache()
        .lock()
        .map_err(|_| poisoned())?
        .insert(cf.id(), s.clone());
    Ok(s)
}

/// Records the settings of an index about to be built (in the building
/// transaction).
pub fn set_for_index(txn: &mut Txn, cf: &Cf, s: Settings) -> FfiResult<()> {
    txn.put(cf, SETTINGS_KEY, &encode(&s))?;
    cache()
        .lock()
        .map_err(|_| poisoned())?
        .insert(cf.id(), Arc::new(s));
    Ok(())
}

fn poisoned() -> FfiError {
    FfiError::new(Status::Internal, "fulltext settings cache poisoned")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_refuse_damage() {
        let s = Settings {
            min_token: 2,
            max_token: 20,
            stopwords: Some(["und", "la"].iter().map(|s| s.to_string()).collect()),
            doc_lengths: true,
            elision: true,
        };
        let v = encode(&s);
        assert_eq!(decode(&v).ok(), Some(s.clone()));
        assert!(decode(&v[..v.len() - 1]).is_err());
        let off = Settings {
            min_token: 3,
            max_token: 84,
            stopwords: None,
            doc_lengths: false,
            elision: false,
        };
        assert_eq!(decode(&encode(&off)).ok(), Some(off));
        let lengths_only = Settings {
            elision: false,
            ..s.clone()
        };
        assert_eq!(decode(&encode(&lengths_only)).ok(), Some(lengths_only));
        let mut future = encode(&Settings::legacy());
        future[0] = 9;
        let e = decode(&future).err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("rebuild"), "{e}");
    }
}
