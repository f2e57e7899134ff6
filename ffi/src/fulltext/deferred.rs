//! Postings of a statement's new documents, written to the transaction in key order.
//!
//! A row's postings are keyed by word first (see `postings`), so a statement that adds
//! many documents (a multi-row INSERT, the row copy of ALTER TABLE ... ADD FULLTEXT)
//! writes keys all over the index. Put at once, each would cost a full skiplist
//! search with a cache miss per step, the largest cost of building an index by copy;
//! they are buffered and written sorted ([`SortedPuts`]).
//!
//! What keeps reads right: the buffer holds only the postings of documents added by
//! the current statement, after the row's ops all succeeded; it is written to the
//! transaction before anything can read the index through it (a query, CHECK TABLE's
//! count, a settings change), before an index's postings are removed (an UPDATE or
//! DELETE of a document: the removal must come after the adds it follows), when it
//! outgrows [`FLUSH_BYTES`], and at the end of the statement or the commit (or
//! prepare). A statement rolled back drops it.
use tidesdb_core::{Cf, Txn};

use crate::sorted_puts::SortedPuts;
use crate::status::{FfiError, FfiResult, Status};

/// Buffered bytes (keys and values) that make the buffer be written out.
pub const FLUSH_BYTES: usize = 4 << 20;

/// Buffered postings, in arrival order until [`DeferredPostings::flush`].
#[derive(Default)]
pub struct DeferredPostings {
    /// The postings, each with the slot in `cfs` of its family.
    puts: SortedPuts,
    /// The families the entries go to (few: one per FULLTEXT index written).
    cfs: Vec<Cf>,
}

impl DeferredPostings {
    pub fn is_empty(&self) -> bool {
        self.puts.is_empty()
    }

    /// Buffers one posting of `cf`.
    pub fn add(&mut self, cf: &Cf, key: &[u8], value: &[u8]) -> FfiResult<()> {
        let family = match self.cfs.iter().position(|c| c.id() == cf.id()) {
            Some(i) => i,
            None => {
                self.cfs.push(cf.clone());
                self.cfs.len() - 1
            }
        };
        self.puts.push(family as u32, key, value)
    }

    /// Where the buffer ends now, for [`DeferredPostings::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        self.puts.mark()
    }

    /// Drops what was buffered after `mark` (the row's ops failed).
    pub fn truncate(&mut self, mark: (usize, usize)) {
        self.puts.truncate(mark);
    }

    pub fn bytes(&self) -> usize {
        self.puts.bytes()
    }

    /// Writes the buffered postings to `txn`, each family's in key order (of two
    /// postings of one key the later wins, as written in turn).
    pub fn flush(&mut self, txn: &mut Txn) -> FfiResult<()> {
        let cfs = &self.cfs;
        self.puts.write_sorted(|family, key, value| {
            let cf = cfs
                .get(family as usize)
                .ok_or_else(|| FfiError::new(Status::Internal, "posting of no family"))?;
            Ok(txn.put(cf, key, value)?)
        })?;
        self.cfs.clear();
        Ok(())
    }

    /// Forgets the buffered postings (their statement was rolled back).
    pub fn clear(&mut self) {
        self.puts.clear();
        self.cfs.clear();
    }
}
