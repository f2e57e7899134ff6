//! The bytes of a FULLTEXT index (one column family per index, `t<id>.i<n>`) and of
//! the documents the shim sends.
//!
//! ```text
//! key   = word (UTF-8, folded as the index folds) ++ 0x00 ++ primary key encoding
//! value = varint tf ++ tf × varint position delta (first delta from 0)
//! ```
//!
//! A document's length (its stored words, counted with repeats), for indexes whose
//! settings say they keep it (BM25 ranking):
//!
//! ```text
//! key   = 0x00 0x01 ++ primary key encoding
//! value = varint length
//! ```
//!
//! written with the document's postings when it has any, removed with them.
//!
//! No word holds a 0x00 byte, so the separator keeps `ab` before `abc` and a word's
//! postings contiguous; the keys with an empty word (lengths, settings) sort first. Positions count every word of the document (short words and
//! stopwords too), across the index's columns in order, so a phrase is a run of
//! consecutive positions. Which words are stored (token sizes, stopwords) is the
//! index's [`Settings`], kept in its settings key (see `settings.rs`).
//!
//! A document (what the shim passes in a `TDB_OP_FT_*` op, and returns when a
//! query asks for a row's text) is the index's non-NULL columns converted to UTF-8,
//! each as `u32 LE length ++ bytes`; the length's top bit (`DOC_CASE_SENSITIVE`) says
//! the column's collation sorts by code point (`_bin`, binary): its words keep their
//! case.
//!
//! There are no per-index counter keys: every writer would update them and so
//! conflict with every other. The document count comes from the shim (the table's
//! row count), a word's document frequency from its postings.
use std::collections::BTreeMap;

use tidesdb_core::{Cf, Txn};

use super::deferred::DeferredPostings;
use super::tokenizer::{words, words_into, Settings, Word};
use crate::status::{FfiError, FfiResult, Status};

/// Top bit of a document column's length: its words keep their case.
pub const DOC_CASE_SENSITIVE: u32 = 1 << 31;

/// The columns of a document: each one's text and whether its words fold case.
pub fn document_texts(doc: &[u8]) -> impl Iterator<Item = FfiResult<(&[u8], bool)>> {
    let mut rest = doc;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let truncated = || FfiError::new(Status::Invalid, "truncated fulltext document");
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            rest = &[];
            return Some(Err(truncated()));
        };
        let len = u32::from_le_bytes(*len);
        let fold_case = len & DOC_CASE_SENSITIVE == 0;
        let len = (len & !DOC_CASE_SENSITIVE) as usize;
        let Some(text) = tail.get(..len) else {
            rest = &[];
            return Some(Err(truncated()));
        };
        rest = &tail[len..];
        Some(Ok((text, fold_case)))
    })
}

/// The columns of a document, each as its words (all of them) with positions.
pub fn document_columns(doc: &[u8], elision: bool) -> FfiResult<Vec<Vec<Word>>> {
    let mut cols = Vec::new();
    let mut pos = 0;
    for col in document_texts(doc) {
        let (text, fold_case) = col?;
        let text = String::from_utf8_lossy(text);
        let (ws, next) = words(&text, pos, fold_case, elision);
        pos = next;
        cols.push(ws);
    }
    Ok(cols)
}

/// The stored words of a document with their positions.
pub fn document_terms(doc: &[u8], settings: &Settings) -> FfiResult<BTreeMap<String, Vec<u32>>> {
    let mut terms: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let (mut buf, mut spans, mut pos) = (Vec::new(), Vec::new(), 0);
    for col in document_texts(doc) {
        let (text, fold_case) = col?;
        pos = words_into(
            &String::from_utf8_lossy(text),
            pos,
            fold_case,
            settings.elision,
            &mut buf,
            &mut spans,
        );
    }
    for s in &spans {
        let w = String::from_utf8_lossy(&buf[s.start..s.start + s.len]);
        if settings.indexable_span(&w, s.chars) {
            match terms.get_mut(w.as_ref()) {
                Some(p) => p.push(s.pos),
                None => {
                    terms.insert(w.into_owned(), vec![s.pos]);
                }
            }
        }
    }
    Ok(terms)
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &mut &[u8]) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u32::from(b & 0x7F).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub fn posting_key(word: &str, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(word.len() + 1 + pk.len());
    k.extend_from_slice(word.as_bytes());
    k.push(0);
    k.extend_from_slice(pk);
    k
}

/// (word, primary key) of a posting key.
pub fn split_key(key: &[u8]) -> FfiResult<(&[u8], &[u8])> {
    let sep = key
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| FfiError::new(Status::Corruption, "damaged fulltext key"))?;
    Ok((&key[..sep], &key[sep + 1..]))
}

pub fn posting_value(positions: &[u32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + positions.len());
    put_varint(&mut v, positions.len() as u32);
    let mut prev = 0;
    for &p in positions {
        put_varint(&mut v, p - prev);
        prev = p;
    }
    v
}

/// The term frequency of a posting (its first varint), without its positions.
pub fn term_frequency(value: &[u8]) -> FfiResult<u32> {
    let mut buf = value;
    get_varint(&mut buf)
        .ok_or_else(|| FfiError::new(Status::Corruption, "damaged fulltext posting"))
}

pub fn decode_positions(value: &[u8]) -> FfiResult<Vec<u32>> {
    let bad = || FfiError::new(Status::Corruption, "damaged fulltext posting");
    let mut buf = value;
    let n = get_varint(&mut buf).ok_or_else(bad)?;
    let mut out = Vec::with_capacity(n.min(1024) as usize);
    let mut prev: u32 = 0;
    for _ in 0..n {
        prev = prev
            .checked_add(get_varint(&mut buf).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        out.push(prev);
    }
    Ok(out)
}

/// Prefix of the document length keys.
pub const DOC_LENGTH_PREFIX: &[u8] = b"\x00\x01";

pub fn doc_length_key(pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(DOC_LENGTH_PREFIX.len() + pk.len());
    k.extend_from_slice(DOC_LENGTH_PREFIX);
    k.extend_from_slice(pk);
    k
}

pub fn doc_length_value(len: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(5);
    put_varint(&mut v, len);
    v
}

pub fn decode_doc_length(value: &[u8]) -> FfiResult<u32> {
    let mut buf = value;
    get_varint(&mut buf)
        .ok_or_else(|| FfiError::new(Status::Corruption, "damaged fulltext document length"))
}

/// A document's length as the index keeps it: its stored words, with repeats.
fn stored_length(terms: &BTreeMap<String, Vec<u32>>) -> u32 {
    let n: usize = terms.values().map(Vec::len).sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Entries one document adds to an index: a posting per stored word, plus its
/// length where the index keeps lengths.
pub fn document_entries(doc: &[u8], settings: &Settings) -> FfiResult<usize> {
    let terms = document_terms(doc, settings)?;
    Ok(terms.len() + usize::from(settings.doc_lengths && !terms.is_empty()))
}

/// Buffers the postings of one row's new document (see `deferred.rs`).
pub fn defer_document(
    deferred: &mut DeferredPostings,
    cf: &Cf,
    settings: &Settings,
    pk: &[u8],
    doc: &[u8],
) -> FfiResult<()> {
    deferred.add_document(cf, settings, pk, doc)
}

/// Adds (put) or removes (!put) the postings of one row's document.
pub fn apply_document(
    txn: &mut Txn,
    cf: &Cf,
    settings: &Settings,
    pk: &[u8],
    doc: &[u8],
    put: bool,
) -> FfiResult<()> {
    let terms = document_terms(doc, settings)?;
    if settings.doc_lengths && !terms.is_empty() {
        let key = doc_length_key(pk);
        if put {
            txn.put(cf, &key, &doc_length_value(stored_length(&terms)))?;
        } else {
            txn.delete(cf, &key)?;
        }
    }
    for (word, positions) in terms {
        let key = posting_key(&word, pk);
        if put {
            txn.put(cf, &key, &posting_value(&positions))?;
        } else {
            txn.delete(cf, &key)?;
        }
    }
    Ok(())
}
