//! Postings of a statement's new documents, written to the transaction in key order.
//!
//! A row's postings are keyed by word first (see `postings`), so a statement that adds
//! many documents (a multi-row INSERT, the row copy of ALTER TABLE ... ADD FULLTEXT)
//! writes keys all over the index. Put at once, each would cost a full skiplist
//! search with a cache miss per step, the largest cost of building an index by copy;
//! they are buffered and written sorted.
//!
//! The buffer is an in-memory inverted index of the statement's documents: each
//! distinct word is interned once (an id), a document adds one entry per stored
//! word (word id, the row's primary key, the encoded positions) with no allocation
//! of its own, and the write-out sorts only the distinct words; a word's entries
//! arrive in row order, which is key order whenever the rows come in primary key
//! order (the row copy of an ALTER TABLE, most multi-row INSERTs), and are sorted
//! by primary key otherwise. The keys and values written are those of `postings`.
//!
//! What keeps reads right: the buffer holds only the postings of documents added by
//! the current statement, after the row's ops all succeeded; it is written to the
//! transaction before anything can read the index through it (a query, CHECK TABLE's
//! count, a settings change), before an index's postings are removed (an UPDATE or
//! DELETE of a document: the removal must come after the adds it follows), when it
//! outgrows [`FLUSH_BYTES`], and at the end of the statement or the commit (or
//! prepare). A statement rolled back drops it.
use tidesdb_core::{Cf, FxHashMap, Txn};

use super::postings::{document_texts, put_varint, DOC_LENGTH_PREFIX};
use super::tokenizer::{words_into, Settings, Span};
use crate::status::{FfiError, FfiResult, Status};

/// Buffered bytes (keys and values) that make the buffer be written out.
pub const FLUSH_BYTES: usize = 4 << 20;

/// Longest word kept inline in a [`ShortWord`].
const SHORT_WORD: usize = 15;

/// A word of up to [`SHORT_WORD`] bytes as a map key held in the map's slot:
/// its bytes zero-padded, its length in the last byte. Most words are that
/// short, and their lookups then compare no bytes outside the table.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct ShortWord(u64, u64);

impl ShortWord {
    fn of(word: &[u8]) -> Option<ShortWord> {
        if word.len() > SHORT_WORD {
            return None;
        }
        let mut b = [0u8; 16];
        b[..word.len()].copy_from_slice(word);
        b[SHORT_WORD] = word.len() as u8;
        let [l0, l1, l2, l3, l4, l5, l6, l7, h0, h1, h2, h3, h4, h5, h6, h7] = b;
        Some(ShortWord(
            u64::from_le_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
            u64::from_le_bytes([h0, h1, h2, h3, h4, h5, h6, h7]),
        ))
    }
}

/// One buffered put: key = word ++ 0x00 ++ `arena[suffix..suffix + suffix_len]`,
/// value = `arena[value..value + value_len]`, into family `family`.
#[derive(Clone, Copy)]
struct Entry {
    family: u32,
    word: u32,
    suffix_len: u32,
    value_len: u32,
    suffix: usize,
    value: usize,
}

/// Where the buffer ends, for [`DeferredPostings::truncate`].
#[derive(Clone, Copy)]
pub struct Mark {
    entries: usize,
    arena: usize,
    bytes: usize,
}

/// Buffered postings, in arrival order until [`DeferredPostings::flush`].
#[derive(Default)]
pub struct DeferredPostings {
    entries: Vec<Entry>,
    /// Primary keys and values of the entries.
    arena: Vec<u8>,
    /// Interned words: id -> (start in `word_bytes`, length); `short_ids` and
    /// `word_ids` the reverse, for words of up to [`SHORT_WORD`] bytes and longer.
    words: Vec<(usize, u32)>,
    /// Per interned word, whether it is a stopword of each family's index, looked
    /// up once per word and family rather than once per occurrence: bit `f` of
    /// `.0` says bit `f` of `.1` is known (families 0-31; an index's settings do
    /// not change while its postings are buffered, see above).
    stop: Vec<(u32, u32)>,
    word_bytes: Vec<u8>,
    short_ids: FxHashMap<ShortWord, u32>,
    word_ids: FxHashMap<Box<[u8]>, u32>,
    /// Keys and values the entries stand for (what a put-by-put buffer would hold).
    bytes: usize,
    /// The families the entries go to (few: one per FULLTEXT index written).
    cfs: Vec<Cf>,
    /// Scratch of one document: its words' folded bytes and spans, and the stored
    /// ones as (word id << 32 | position).
    doc_buf: Vec<u8>,
    doc_spans: Vec<Span>,
    doc_terms: Vec<u64>,
}

impl DeferredPostings {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn family(&mut self, cf: &Cf) -> u32 {
        match self.cfs.iter().position(|c| c.id() == cf.id()) {
            Some(i) => i as u32,
            None => {
                self.cfs.push(cf.clone());
                (self.cfs.len() - 1) as u32
            }
        }
    }

    fn intern(&mut self, word: &[u8]) -> FfiResult<u32> {
        let short = ShortWord::of(word);
        let found = match short {
            Some(k) => self.short_ids.get(&k),
            None => self.word_ids.get(word),
        };
        if let Some(&id) = found {
            return Ok(id);
        }
        let (id, len) = match (u32::try_from(self.words.len()), u32::try_from(word.len())) {
            (Ok(i), Ok(l)) => (i, l),
            _ => return Err(FfiError::new(Status::Invalid, "fulltext word too large")),
        };
        self.words.push((self.word_bytes.len(), len));
        self.stop.push((0, 0));
        self.word_bytes.extend_from_slice(word);
        match short {
            Some(k) => self.short_ids.insert(k, id),
            None => self.word_ids.insert(word.into(), id),
        };
        Ok(id)
    }

    /// Whether interned word `id` is a stopword of family `family`'s index.
    fn is_stopword(&mut self, id: u32, family: u32, settings: &Settings) -> FfiResult<bool> {
        let lookup = |w: &[u8]| -> FfiResult<bool> {
            // The bytes of whole characters (`words_into`).
            let w = std::str::from_utf8(w)
                .map_err(|_| FfiError::new(Status::Internal, "fulltext word not UTF-8"))?;
            Ok(settings.is_stopword(w))
        };
        let Some(bit) = 1u32.checked_shl(family) else {
            return lookup(self.word(id));
        };
        let (known, stop) = self.stop[id as usize];
        if known & bit != 0 {
            return Ok(stop & bit != 0);
        }
        let is = lookup(self.word(id))?;
        let f = &mut self.stop[id as usize];
        f.0 |= bit;
        if is {
            f.1 |= bit;
        }
        Ok(is)
    }

    fn word(&self, id: u32) -> &[u8] {
        let (at, len) = self.words[id as usize];
        &self.word_bytes[at..at + len as usize]
    }

    /// Buffers one entry whose suffix and value are `arena[suffix..value]` and
    /// `arena[value..]`.
    fn push(&mut self, family: u32, word: u32, suffix: usize, value: usize) -> FfiResult<()> {
        let (suffix_len, value_len) = match (
            u32::try_from(value - suffix),
            u32::try_from(self.arena.len() - value),
        ) {
            (Ok(s), Ok(v)) => (s, v),
            _ => return Err(FfiError::new(Status::Invalid, "buffered entry too large")),
        };
        self.bytes += self.words[word as usize].1 as usize + 1 + (self.arena.len() - suffix);
        self.entries.push(Entry {
            family,
            word,
            suffix_len,
            value_len,
            suffix,
            value,
        });
        Ok(())
    }

    /// Buffers the postings of one row's new document `doc` (primary key `pk`) for
    /// the index in `cf` (see `postings`: a posting per stored word, and the
    /// document's length where the index keeps lengths).
    pub fn add_document(
        &mut self,
        cf: &Cf,
        settings: &Settings,
        pk: &[u8],
        doc: &[u8],
    ) -> FfiResult<()> {
        let family = self.family(cf);
        let mut buf = std::mem::take(&mut self.doc_buf);
        let mut spans = std::mem::take(&mut self.doc_spans);
        let mut terms = std::mem::take(&mut self.doc_terms);
        buf.clear();
        spans.clear();
        terms.clear();
        let result = (|| -> FfiResult<()> {
            let mut pos = 0;
            for col in document_texts(doc) {
                let (text, fold_case) = col?;
                let text = String::from_utf8_lossy(text);
                pos = words_into(
                    &text,
                    pos,
                    fold_case,
                    settings.elision,
                    &mut buf,
                    &mut spans,
                );
            }
            for s in &spans {
                if s.chars < settings.min_token || s.chars > settings.max_token {
                    continue;
                }
                let w = &buf[s.start..s.start + s.len];
                let id = self.intern(w)?;
                if !self.is_stopword(id, family, settings)? {
                    terms.push(u64::from(id) << 32 | u64::from(s.pos));
                }
            }
            if terms.is_empty() {
                return Ok(());
            }
            // By word id, each word's positions ascending.
            terms.sort_unstable();
            if settings.doc_lengths {
                let id = self.intern(b"")?;
                let suffix = self.arena.len();
                self.arena.extend_from_slice(&DOC_LENGTH_PREFIX[1..]);
                self.arena.extend_from_slice(pk);
                let value = self.arena.len();
                put_varint(
                    &mut self.arena,
                    u32::try_from(terms.len()).unwrap_or(u32::MAX),
                );
                self.push(family, id, suffix, value)?;
            }
            let pk_at = self.arena.len();
            self.arena.extend_from_slice(pk);
            let mut i = 0;
            while let Some(&first) = terms.get(i) {
                let id = (first >> 32) as u32;
                let n = terms[i..]
                    .iter()
                    .take_while(|&&t| (t >> 32) as u32 == id)
                    .count();
                // Every entry's suffix is the document's primary key, written once.
                let value = self.arena.len();
                put_varint(&mut self.arena, n as u32);
                let mut prev = 0u32;
                for &t in &terms[i..i + n] {
                    let p = t as u32;
                    put_varint(&mut self.arena, p - prev);
                    prev = p;
                }
                let value_len = u32::try_from(self.arena.len() - value)
                    .map_err(|_| FfiError::new(Status::Invalid, "buffered entry too large"))?;
                self.bytes +=
                    self.words[id as usize].1 as usize + 1 + pk.len() + value_len as usize;
                self.entries.push(Entry {
                    family,
                    word: id,
                    suffix_len: pk.len() as u32,
                    value_len,
                    suffix: pk_at,
                    value,
                });
                i += n;
            }
            Ok(())
        })();
        self.doc_buf = buf;
        self.doc_spans = spans;
        self.doc_terms = terms;
        result
    }

    /// Where the buffer ends now, for [`DeferredPostings::truncate`].
    pub fn mark(&self) -> Mark {
        Mark {
            entries: self.entries.len(),
            arena: self.arena.len(),
            bytes: self.bytes,
        }
    }

    /// Drops what was buffered after `mark` (the row's ops failed). Words interned
    /// since stay interned, without entries.
    pub fn truncate(&mut self, mark: Mark) {
        self.entries.truncate(mark.entries);
        self.arena.truncate(mark.arena);
        self.bytes = mark.bytes;
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Writes the buffered postings to `txn`, each family's in key order (of two
    /// postings of one key the later wins, as written in turn), and empties the
    /// buffer; on an error the buffer is kept.
    pub fn flush(&mut self, txn: &mut Txn) -> FfiResult<()> {
        if self.entries.is_empty() {
            self.clear();
            return Ok(());
        }
        // The words' ranks in byte order. No word holds a 0x00 byte, so ordering
        // by (word, suffix) is ordering by key (word ++ 0x00 ++ suffix).
        let mut order: Vec<u32> = (0..self.words.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.word(a).cmp(self.word(b)));
        let mut rank = vec![0u32; order.len()];
        for (r, &id) in order.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        self.sort_entries(&rank);
        let arena = &self.arena;
        let suffix = |e: &Entry| &arena[e.suffix..e.suffix + e.suffix_len as usize];
        let mut i = 0;
        while let Some(first) = self.entries.get(i).copied() {
            let n = self.entries[i..]
                .iter()
                .take_while(|e| e.family == first.family && e.word == first.word)
                .count();
            let group = &mut self.entries[i..i + n];
            if !group.windows(2).all(|w| suffix(&w[0]) <= suffix(&w[1])) {
                group.sort_by(|a, b| suffix(a).cmp(suffix(b)));
            }
            i += n;
        }
        let mut key = Vec::new();
        for e in &self.entries {
            let cf = self
                .cfs
                .get(e.family as usize)
                .ok_or_else(|| FfiError::new(Status::Internal, "posting of no family"))?;
            let (at, len) = self.words[e.word as usize];
            key.clear();
            key.extend_from_slice(&self.word_bytes[at..at + len as usize]);
            key.push(0);
            key.extend_from_slice(suffix(e));
            txn.put(cf, &key, &arena[e.value..e.value + e.value_len as usize])?;
        }
        self.clear();
        Ok(())
    }

    /// Orders the entries by (family, rank of their word), each word's entries
    /// in arrival order: a counting sort on that pair (a bucket per family and
    /// word), since there are far fewer words than entries.
    fn sort_entries(&mut self, rank: &[u32]) {
        let words = rank.len();
        let buckets = self.cfs.len().max(1) * words;
        let bucket = |e: &Entry| e.family as usize * words + rank[e.word as usize] as usize;
        let mut start = vec![0usize; buckets + 1];
        for e in &self.entries {
            start[bucket(e) + 1] += 1;
        }
        for i in 0..buckets {
            start[i + 1] += start[i];
        }
        let mut sorted = vec![
            Entry {
                family: 0,
                word: 0,
                suffix_len: 0,
                value_len: 0,
                suffix: 0,
                value: 0,
            };
            self.entries.len()
        ];
        for e in &self.entries {
            let b = bucket(e);
            sorted[start[b]] = *e;
            start[b] += 1;
        }
        self.entries = sorted;
    }

    /// Forgets the interned words (no entry may refer to them).
    fn forget_words(&mut self) {
        self.words.clear();
        self.stop.clear();
        self.word_bytes.clear();
        self.short_ids.clear();
        self.word_ids.clear();
    }

    /// Forgets the buffered postings (their statement was rolled back).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.arena.clear();
        self.forget_words();
        self.bytes = 0;
        self.cfs.clear();
    }
}
