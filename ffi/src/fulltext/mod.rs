//! FULLTEXT indexes, answering every MATCH ... AGAINST as InnoDB does.
//!
//! - [`tokenizer`]: words of a text, which of them an index stores ([`Settings`]).
//! - [`postings`]: the bytes of an index and of a row's document (format).
//! - [`settings`]: an index's settings, fixed when it is built, and where they live.
//! - [`parser`]: the query language, InnoDB's grammar and syntax errors.
//! - [`deferred`]: a statement's new postings, written to the transaction in key order.
//! - [`eval`]: InnoDB's evaluation and relevance.
//! - [`inspect`]: the words of an index, for `INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE`.
//!
//! A query reads postings in the caller's transaction and, for phrases and WITH
//! QUERY EXPANSION, the rows' documents through a callback of the shim (InnoDB
//! reads the rows too).
pub mod deferred;
pub mod eval;
pub mod inspect;
pub mod parser;
pub mod postings;
pub mod settings;
pub mod tokenizer;

use std::cell::OnceCell;
use std::ffi::{c_int, c_void};

use tidesdb_core::{Cf, IterOptions, Txn};

use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};
use crate::table::{prefix_successor, Table};
use crate::trx::Trx;

pub use postings::{apply_document, defer_document};
pub use tokenizer::Settings;
use tokenizer::Word;

/// Query flags (`FT_BOOL`, `FT_SORTED`, `FT_EXPAND` of MariaDB's ft_global.h).
const FT_BOOL: u32 = 1;
const FT_SORTED: u32 = 2;
const FT_EXPAND: u32 = 4;
/// The index's words keep their case (see postings).
const FT_CASE_SENSITIVE: u32 = 0x100;
/// The index has one column.
const FT_SINGLE_COLUMN: u32 = 0x200;
/// Relevance by BM25 instead of InnoDB's (`tidesdb_ft_ranking`).
const FT_RANKING_BM25: u32 = 0x400;
/// Document lengths read to estimate their mean (BM25).
const AVERAGE_SAMPLE: usize = 1024;

/// The shim's callback giving a row's document (postings format): 0 found, 1 the
/// row is gone, anything else an error. The bytes stay valid until the next call.
pub type FetchDoc = unsafe extern "C" fn(
    ctx: *mut c_void,
    pk: *const u8,
    pk_len: usize,
    doc: *mut *const u8,
    doc_len: *mut usize,
) -> c_int;

/// The index as the evaluation reads it.
struct IndexSource<'a> {
    txn: &'a mut Txn,
    cf: Cf,
    fetch: Option<FetchDoc>,
    ctx: *mut c_void,
    single_column: bool,
    doc_lengths: bool,
    /// [`Settings::elision`] of the index.
    elision: bool,
}

/// Postings by word: each row's primary key with what was read of its value.
type ByWord<T> = Vec<(String, Vec<(Vec<u8>, T)>)>;

/// The key prefix of `word`'s postings (of every word starting with it, with
/// `prefix`) and the iterator bounds covering them.
fn word_range(word: &str, prefix: bool) -> (Vec<u8>, IterOptions) {
    let mut start = word.as_bytes().to_vec();
    if !prefix {
        start.push(0);
    }
    let opts = IterOptions {
        lower_bound: Some(start.clone()),
        upper_bound: prefix_successor(&start),
    };
    (start, opts)
}

impl IndexSource<'_> {
    /// Every posting of `word` (or of every word starting with it), by word, each
    /// value read by `decode`.
    fn read_postings<T>(
        &mut self,
        word: &str,
        prefix: bool,
        decode: fn(&[u8]) -> FfiResult<T>,
    ) -> FfiResult<ByWord<T>> {
        let (start, opts) = word_range(word, prefix);
        let mut it = self.txn.iter(&self.cf, opts)?;
        it.seek(&start);
        let mut out: ByWord<T> = Vec::new();
        while it.valid() && it.key().starts_with(&start) {
            let (w, pk) = postings::split_key(it.key())?;
            // The settings key (empty word) is no posting.
            if !w.is_empty() {
                let decoded = decode(it.value())?;
                if out.last().map(|(lw, _)| lw.as_bytes()) != Some(w) {
                    out.push((String::from_utf8_lossy(w).into_owned(), Vec::new()));
                }
                if let Some((_, p)) = out.last_mut() {
                    p.push((pk.to_vec(), decoded));
                }
            }
            it.next();
        }
        it.status()?;
        Ok(out)
    }
}

impl eval::Source for IndexSource<'_> {
    fn postings(
        &mut self,
        word: &str,
        prefix: bool,
    ) -> FfiResult<Vec<(String, eval::WordPostings)>> {
        self.read_postings(word, prefix, postings::decode_positions)
    }

    fn frequencies(
        &mut self,
        word: &str,
        prefix: bool,
    ) -> FfiResult<Vec<(String, eval::WordFreqs)>> {
        let (start, opts) = word_range(word, prefix);
        let mut it = self.txn.iter(&self.cf, opts)?;
        it.seek(&start);
        let mut out: Vec<(String, eval::WordFreqs)> = Vec::new();
        while it.valid() && it.key().starts_with(&start) {
            let (w, pk) = postings::split_key(it.key())?;
            // The settings key (empty word) is no posting.
            if !w.is_empty() {
                let tf = postings::term_frequency(it.value())?;
                if out.last().map(|(lw, _)| lw.as_bytes()) != Some(w) {
                    let name = String::from_utf8_lossy(w).into_owned();
                    out.push((name, eval::WordFreqs::new()));
                }
                if let Some((_, f)) = out.last_mut() {
                    f.push(pk, tf);
                }
            }
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    fn document(&mut self, pk: &[u8]) -> FfiResult<Option<Vec<Vec<Word>>>> {
        let Some(fetch) = self.fetch else {
            return Err(FfiError::new(
                Status::Invalid,
                "fulltext query needs the rows' documents",
            ));
        };
        let mut doc: *const u8 = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: the shim's callback, given valid out-pointers and its own context.
        let rc = unsafe { fetch(self.ctx, pk.as_ptr(), pk.len(), &mut doc, &mut len) };
        match rc {
            0 => {
                // SAFETY: the callback returned `len` valid bytes at `doc`.
                let bytes = unsafe { raw::bytes(doc, len) }?;
                Ok(Some(postings::document_columns(bytes, self.elision)?))
            }
            1 => Ok(None),
            _ => Err(FfiError::new(
                Status::Internal,
                "reading a row for a fulltext query failed",
            )),
        }
    }

    fn single_column(&self) -> bool {
        self.single_column
    }

    fn doc_length(&mut self, pk: &[u8]) -> FfiResult<Option<u32>> {
        if !self.doc_lengths {
            return Ok(None);
        }
        match self.txn.get(&self.cf, &postings::doc_length_key(pk))? {
            Some(v) => Ok(Some(postings::decode_doc_length(&v)?)),
            None => Ok(None),
        }
    }

    fn average_doc_length(&mut self) -> FfiResult<Option<f64>> {
        if !self.doc_lengths {
            return Ok(None);
        }
        let prefix = postings::DOC_LENGTH_PREFIX;
        let opts = IterOptions {
            lower_bound: Some(prefix.to_vec()),
            upper_bound: prefix_successor(prefix),
        };
        let mut it = self.txn.iter(&self.cf, opts)?;
        it.seek(prefix);
        let (mut n, mut sum) = (0usize, 0u64);
        while it.valid() && it.key().starts_with(prefix) && n < AVERAGE_SAMPLE {
            sum += u64::from(postings::decode_doc_length(it.value())?);
            n += 1;
            it.next();
        }
        it.status()?;
        Ok((n > 0).then(|| sum as f64 / n as f64))
    }
}

/// `tdb_ft_result` of the header: the rows a query matched.
pub struct FtResult {
    rows: Vec<(Vec<u8>, f32)>,
    /// `rows` are in primary key order (else in relevance order).
    pk_sorted: bool,
    /// Indexes of `rows` in primary key order, for relevance lookups of rows in
    /// relevance order (made on the first lookup).
    by_pk: OnceCell<Vec<usize>>,
    next: usize,
}

impl FtResult {
    /// The relevance of row `pk` (0 if the query did not match it).
    fn relevance(&self, pk: &[u8]) -> f32 {
        let rows = &self.rows;
        let found = if self.pk_sorted {
            rows.binary_search_by(|r| r.0.as_slice().cmp(pk)).ok()
        } else {
            let order = self.by_pk.get_or_init(|| {
                let mut v: Vec<usize> = (0..rows.len()).collect();
                v.sort_by(|&a, &b| rows[a].0.cmp(&rows[b].0));
                v
            });
            order
                .binary_search_by(|&i| rows[i].0.as_slice().cmp(pk))
                .ok()
                .and_then(|i| order.get(i).copied())
        };
        found.and_then(|i| rows.get(i)).map_or(0.0, |r| r.1)
    }
}

/// A query's outcome: its rows, or a refusal InnoDB reports with an error of its own.
pub enum Outcome {
    Rows(FtResult),
    /// The parser's message (ER_PARSE_ERROR).
    SyntaxError(String),
    /// More than InnoDB's nesting of parentheses (its "out of memory").
    TooDeep,
    /// More than InnoDB's 128 stored words in a phrase.
    TooManyPhraseWords,
}

/// The inputs of a query besides the index.
pub struct Query<'a> {
    pub text: &'a str,
    pub flags: u32,
    /// Rows of the table (InnoDB's N in idf).
    pub total_docs: u64,
    /// The rank of each ASCII character in the index's collation (`None`: byte order).
    pub word_order: Option<&'a [u8; 128]>,
    pub fetch: Option<FetchDoc>,
    pub ctx: *mut c_void,
}

/// Runs a query against a FULLTEXT index.
pub fn search(trx: &mut Trx, table: &Table, index: u32, q: &Query) -> FfiResult<Outcome> {
    trx.flush_fulltext()?;
    let cf = table.shared.cf(index)?;
    let txn = trx.txn()?;
    let settings = settings::of_index(txn, &cf)?;
    let fold_case = q.flags & FT_CASE_SENSITIVE == 0;
    let boolean = q.flags & FT_BOOL != 0;
    let expand = q.flags & FT_EXPAND != 0 && !boolean;
    // InnoDB lower-cases the whole query before parsing it.
    let text = tokenizer::fold(q.text, fold_case);
    let mut ast = match parser::parse(&text, boolean, &settings, fold_case) {
        Ok(a) => a,
        Err(parser::SyntaxError(m)) => return Ok(Outcome::SyntaxError(m)),
    };
    let mut src = IndexSource {
        txn,
        cf,
        fetch: q.fetch,
        ctx: q.ctx,
        single_column: q.flags & FT_SINGLE_COLUMN != 0,
        doc_lengths: settings.doc_lengths,
        elision: settings.elision,
    };
    let model = if q.flags & FT_RANKING_BM25 != 0 {
        eval::RankingModel::Bm25
    } else {
        eval::RankingModel::Innodb
    };
    let ev = eval::Eval::new(&mut src, &settings, fold_case, q.total_docs, expand)
        .with_ranking(model)
        .with_word_order(q.word_order);
    let mut rows = match ev.run(&mut ast, expand) {
        Ok(r) => r,
        Err(e) if e.message == eval::TOO_DEEP => return Ok(Outcome::TooDeep),
        Err(e) if e.message == eval::TOO_MANY_PHRASE_WORDS => {
            return Ok(Outcome::TooManyPhraseWords)
        }
        Err(e) => return Err(e),
    };
    let pk_sorted = q.flags & FT_SORTED == 0;
    if !pk_sorted {
        // InnoDB's order: relevance descending, ties in row order.
        rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    } else {
        rows.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(Outcome::Rows(FtResult {
        rows,
        pk_sorted,
        by_pk: OnceCell::new(),
        next: 0,
    }))
}

// ---- C ABI --------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn tdb_ft_set_min_token_size(n: u32) {
    guard(|| {
        tokenizer::set_min_token(n as usize);
        Ok(())
    });
}

#[no_mangle]
pub extern "C" fn tdb_ft_set_max_token_size(n: u32) {
    guard(|| {
        tokenizer::set_max_token(n as usize);
        Ok(())
    });
}

/// # Safety
/// Live handles; `doc` must point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_document_terms(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    doc: *const u8,
    len: usize,
) -> u64 {
    guard_value(0, || {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: valid buffer by contract.
        let doc = unsafe { raw::bytes(doc, len) }?;
        let cf = table.shared.cf(index)?;
        let s = settings::of_index(trx.txn()?, &cf)?;
        Ok(postings::document_entries(doc, &s)? as u64)
    })
}

/// Word `i` of InnoDB's default stopword list: its length (0 past the end).
///
/// # Safety
/// `word` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_default_stopword(i: usize, word: *mut *const u8) -> usize {
    guard_value(0, || {
        let Some(w) = tokenizer::DEFAULT_STOPWORDS.get(i) else {
            return Ok(0);
        };
        // SAFETY: writable by contract; the word is static.
        unsafe { raw::write_out(word, w.as_ptr()) }?;
        Ok(w.len())
    })
}

/// Entries of FULLTEXT index `index` that are no postings (its settings key): CHECK
/// TABLE counts them apart.
///
/// # Safety
/// Live handles.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_meta_entries(trx: *mut Trx, table: *mut Table, index: u32) -> u64 {
    guard_value(0, || {
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        let cf = table.shared.cf(index)?;
        trx.flush_fulltext()?;
        Ok(u64::from(
            trx.txn()?.get(&cf, settings::SETTINGS_KEY)?.is_some(),
        ))
    })
}

/// # Safety
/// Live handles; `words` NULL or pointing to `words_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_index_settings(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    enable: c_int,
    words: *const u8,
    words_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        let stopwords = if enable == 0 {
            None
        } else if words.is_null() {
            Some(tokenizer::default_stopwords())
        } else {
            // SAFETY: valid buffer by contract.
            let mut rest = unsafe { raw::bytes(words, words_len) }?;
            let mut set = tokenizer::StopWords::default();
            while !rest.is_empty() {
                let bad = || FfiError::new(Status::Invalid, "truncated stopword list");
                let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
                let len = u32::from_le_bytes(*len) as usize;
                let w = tail.get(..len).ok_or_else(bad)?;
                let w = String::from_utf8_lossy(w).into_owned();
                // A user's list may be in any case; a case-folding index's words are folded.
                set.insert(tokenizer::fold(&w, true));
                set.insert(w);
                rest = &tail[len..];
            }
            Some(set)
        };
        let cf = table.shared.cf(index)?;
        trx.flush_fulltext()?;
        settings::set_for_index(trx.txn()?, &cf, Settings::current(stopwords))
    })
}

/// # Safety
/// Live handles; `query` points to `len` bytes; out-pointers valid for writes;
/// `fetch` (may be NULL) callable with `ctx` during the call.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_search(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    query: *const u8,
    len: usize,
    flags: u32,
    total_docs: u64,
    word_order: *const u8,
    fetch: Option<FetchDoc>,
    ctx: *mut c_void,
    out: *mut *mut FtResult,
    syntax_error: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let query = unsafe { raw::bytes(query, len) }?;
        let text = String::from_utf8_lossy(query);
        let word_order = if word_order.is_null() {
            None
        } else {
            // SAFETY: 128 readable bytes by contract.
            unsafe { raw::bytes(word_order, 128) }?.try_into().ok()
        };
        let q = Query {
            text: &text,
            flags,
            total_docs,
            word_order,
            fetch,
            ctx,
        };
        match search(trx, table, index, &q)? {
            Outcome::Rows(r) => {
                // SAFETY: writable by contract.
                unsafe { raw::write_out(syntax_error, 0) }?;
                // SAFETY: as above.
                unsafe { raw::write_out(out, Box::into_raw(Box::new(r))) }
            }
            Outcome::SyntaxError(m) => {
                // SAFETY: writable by contract.
                unsafe { raw::write_out(syntax_error, 1) }?;
                Err(FfiError::new(Status::Invalid, m))
            }
            Outcome::TooDeep => {
                // SAFETY: writable by contract.
                unsafe { raw::write_out(syntax_error, 2) }?;
                Err(FfiError::new(Status::Invalid, eval::TOO_DEEP))
            }
            Outcome::TooManyPhraseWords => {
                // SAFETY: writable by contract.
                unsafe { raw::write_out(syntax_error, 3) }?;
                Err(FfiError::new(Status::Invalid, eval::TOO_MANY_PHRASE_WORDS))
            }
        }
    })
}

/// # Safety
/// `res` a live result; out-pointers valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_result_next(
    res: *mut FtResult,
    pk: *mut *const u8,
    pk_len: *mut usize,
    relevance: *mut f32,
) -> c_int {
    guard(|| {
        // SAFETY: live handle by contract.
        let r = unsafe { raw::handle(res) }?;
        let Some((k, rel)) = r.rows.get(r.next) else {
            return Err(FfiError::quiet(Status::End));
        };
        r.next += 1;
        // SAFETY: writable by contract; the bytes live as long as the result.
        unsafe {
            raw::write_out(pk, k.as_ptr())?;
            raw::write_out(pk_len, k.len())?;
            raw::write_out(relevance, *rel)
        }
    })
}

/// # Safety
/// `res` NULL or a live result.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_result_rewind(res: *mut FtResult) {
    guard(|| {
        // SAFETY: NULL or live by contract.
        if let Some(r) = unsafe { res.as_mut() } {
            r.next = 0;
        }
        Ok(())
    });
}

/// # Safety
/// `res` NULL or a live result; `pk` points to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_result_relevance(
    res: *const FtResult,
    pk: *const u8,
    len: usize,
) -> f32 {
    guard_value(0.0, || {
        // SAFETY: NULL or live by contract.
        let Some(r) = (unsafe { res.as_ref() }) else {
            return Ok(0.0);
        };
        // SAFETY: valid buffer by contract.
        let pk = unsafe { raw::bytes(pk, len) }?;
        Ok(r.relevance(pk))
    })
}

/// # Safety
/// `res` NULL or a result not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_result_free(res: *mut FtResult) {
    guard(|| {
        if !res.is_null() {
            // SAFETY: made by Box::into_raw in tdb_ft_search, freed once.
            drop(unsafe { Box::from_raw(res) });
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests;
