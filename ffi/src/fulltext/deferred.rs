//! Postings of a statement's new documents, written to the transaction in key order.
//!
//! A row's postings are keyed by word first (see `postings`), so a statement that adds
//! many documents (a multi-row INSERT, the row copy of ALTER TABLE ... ADD FULLTEXT)
//! writes keys all over the index: each went into the transaction's write set by a
//! full skiplist search with a cache miss per step, the largest cost of building an
//! index by copy. They are buffered instead and written sorted, where the write set
//! places each next to the previous one.
//!
//! What keeps reads right: the buffer holds only the postings of documents added by
//! the current statement, after the row's ops all succeeded; it is written to the
//! transaction before anything can read the index through it (a query, CHECK TABLE's
//! count, a settings change), before an index's postings are removed (an UPDATE or
//! DELETE of a document: the removal must come after the adds it follows), when it
//! outgrows [`FLUSH_BYTES`], and at the end of the statement or the commit (or
//! prepare). A statement rolled back drops it.
use tidesdb_core::{Cf, Txn};

use crate::status::{FfiError, FfiResult, Status};

/// Buffered bytes (keys and values) that make the buffer be written out.
pub const FLUSH_BYTES: usize = 4 << 20;

/// Buffered postings, in arrival order until [`DeferredPostings::flush`].
#[derive(Default)]
pub struct DeferredPostings {
    /// Keys and values, one after the other ...
    bytes: Vec<u8>,
    /// ... and (family, start in `bytes`, key length, value length) of each.
    entries: Vec<(usize, usize, u32, u32)>,
    /// The families the entries go to (few: one per FULLTEXT index written).
    cfs: Vec<Cf>,
}

impl DeferredPostings {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Buffers one posting of `cf`.
    pub fn add(&mut self, cf: &Cf, key: &[u8], value: &[u8]) -> FfiResult<()> {
        let (klen, vlen) = match (u32::try_from(key.len()), u32::try_from(value.len())) {
            (Ok(k), Ok(v)) => (k, v),
            _ => return Err(FfiError::new(Status::Invalid, "fulltext posting too large")),
        };
        let family = match self.cfs.iter().position(|c| c.id() == cf.id()) {
            Some(i) => i,
            None => {
                self.cfs.push(cf.clone());
                self.cfs.len() - 1
            }
        };
        self.entries.push((family, self.bytes.len(), klen, vlen));
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        Ok(())
    }

    /// Where the buffer ends now, for [`DeferredPostings::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes.len())
    }

    /// Drops what was buffered after `mark` (the row's ops failed).
    pub fn truncate(&mut self, mark: (usize, usize)) {
        self.entries.truncate(mark.0);
        self.bytes.truncate(mark.1);
    }

    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Writes the buffered postings to `txn`, each family's in key order (a stable
    /// sort: of two postings of one key the later wins, as written in turn).
    pub fn flush(&mut self, txn: &mut Txn) -> FfiResult<()> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let bytes = &self.bytes;
        let key = |&(_, at, klen, _): &(usize, usize, u32, u32)| &bytes[at..at + klen as usize];
        self.entries
            .sort_by(|a, b| a.0.cmp(&b.0).then_with(|| key(a).cmp(key(b))));
        for &(family, at, klen, vlen) in &self.entries {
            let mid = at + klen as usize;
            txn.put(
                &self.cfs[family],
                &bytes[at..mid],
                &bytes[mid..mid + vlen as usize],
            )?;
        }
        self.clear();
        Ok(())
    }

    /// Forgets the buffered postings (their statement was rolled back).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
        self.cfs.clear();
    }
}
