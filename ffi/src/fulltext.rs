//! FULLTEXT indexes: tokenizer, postings, ranking and query evaluation.
//!
//! ## Format (one column family per FULLTEXT index, `t<id>.i<n>`)
//!
//! ```text
//! key   = word (UTF-8, case-folded unless case-sensitive) ++ 0x00 ++ primary key encoding
//! value = varint tf ++ tf × varint position delta (first delta from 0)
//! ```
//!
//! A word is a run of letters, digits and `_` (as InnoDB's and MyISAM's default
//! parser: Unicode alphanumerics), folded with Unicode lower-casing (accents are
//! folded before, by the shim, where the column's collation ignores them); no word holds
//! a 0x00 byte, so the separator keeps `ab` before `abc` and a word's postings
//! contiguous. Positions count every word of the document (short words and
//! stopwords too), across the index's columns in order, so a phrase is a run of
//! consecutive positions. Words shorter than `tidesdb_ft_min_token_size` (default
//! 3) or longer than 84 characters, and InnoDB's default stopwords, are not indexed.
//!
//! The document of a row (what the shim passes in an `TDB_OP_FT_*` op) is the
//! index's non-NULL columns converted to UTF-8, each as `u32 LE length ++ bytes`;
//! the length's top bit (`DOC_CASE_SENSITIVE`) says the column's collation sorts
//! by code point (`_bin`, binary): its words keep their case, as InnoDB's FTS
//! compares them with that collation; queries on such an index pass
//! `FT_CASE_SENSITIVE`.
//!
//! There are no per-index counter keys: every writer would update them and so
//! conflict with every other. The document count comes from the rows column
//! family's estimate, a word's document frequency from its postings.
//!
//! ## Relevance
//!
//! TF-IDF as in InnoDB's shape: a matching term adds `tf × idf²` with
//! `idf = ln(1 + N / df)` (N documents, df documents holding the word), so every
//! matching row has a relevance > 0. Values differ from InnoDB's.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use tidesdb_core::{Cf, IterOptions, Txn};

use crate::engine::engine;
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};
use crate::table::{prefix_successor, Table};
use crate::trx::Trx;

/// Longest indexed word, in characters (InnoDB's innodb_ft_max_token_size default).
pub const MAX_TOKEN: usize = 84;
static MIN_TOKEN: AtomicUsize = AtomicUsize::new(3);

/// InnoDB's default stopword list (INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "are", "as", "at", "be", "by", "com", "de", "en", "for", "from", "how",
    "i", "in", "is", "it", "la", "of", "on", "or", "that", "the", "this", "to", "was", "what",
    "when", "where", "who", "will", "with", "und", "www",
];

fn min_token() -> usize {
    MIN_TOKEN.load(Ordering::Relaxed)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A word of a text: its folded form and its position (ordinal among all words).
#[derive(Debug, PartialEq)]
pub struct Word {
    pub text: String,
    pub pos: u32,
}

/// Splits `text` into words starting at position `start`; returns every word
/// (indexable or not, see [`indexable`]) and the next position.
pub fn words(text: &str, start: u32, fold_case: bool) -> (Vec<Word>, u32) {
    let mut out = Vec::new();
    let mut pos = start;
    let mut cur = String::new();
    let mut flush = |cur: &mut String, pos: &mut u32| {
        if !cur.is_empty() {
            out.push(Word {
                text: std::mem::take(cur),
                pos: *pos,
            });
            *pos = pos.saturating_add(1);
        }
    };
    for c in text.chars() {
        if is_word_char(c) {
            if fold_case {
                cur.extend(c.to_lowercase());
            } else {
                cur.push(c);
            }
        } else {
            flush(&mut cur, &mut pos);
        }
    }
    flush(&mut cur, &mut pos);
    (out, pos)
}

/// True if the (folded) word is stored in the index.
pub fn indexable(word: &str) -> bool {
    let n = word.chars().count();
    n >= min_token() && n <= MAX_TOKEN && !STOPWORDS.contains(&word)
}

/// The indexed words of a document (see Format) with their positions.
pub fn document_terms(doc: &[u8]) -> FfiResult<BTreeMap<String, Vec<u32>>> {
    let mut terms: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut pos = 0;
    let mut rest = doc;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| FfiError::new(Status::Invalid, "truncated fulltext document"))?;
        let len = u32::from_le_bytes(*len);
        let fold_case = len & DOC_CASE_SENSITIVE == 0;
        let len = (len & !DOC_CASE_SENSITIVE) as usize;
        let text = tail
            .get(..len)
            .ok_or_else(|| FfiError::new(Status::Invalid, "truncated fulltext document"))?;
        rest = &tail[len..];
        let text = String::from_utf8_lossy(text);
        let (ws, next) = words(&text, pos, fold_case);
        pos = next;
        for w in ws {
            if indexable(&w.text) {
                terms.entry(w.text).or_default().push(w.pos);
            }
        }
    }
    Ok(terms)
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
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

fn posting_key(word: &str, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(word.len() + 1 + pk.len());
    k.extend_from_slice(word.as_bytes());
    k.push(0);
    k.extend_from_slice(pk);
    k
}

fn posting_value(positions: &[u32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + positions.len());
    put_varint(&mut v, positions.len() as u32);
    let mut prev = 0;
    for &p in positions {
        put_varint(&mut v, p - prev);
        prev = p;
    }
    v
}

fn decode_positions(value: &[u8]) -> FfiResult<Vec<u32>> {
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

/// Adds (put) or removes (!put) the postings of one row's document.
pub fn apply_document(txn: &mut Txn, cf: &Cf, pk: &[u8], doc: &[u8], put: bool) -> FfiResult<()> {
    for (word, positions) in document_terms(doc)? {
        let key = posting_key(&word, pk);
        if put {
            txn.put(cf, &key, &posting_value(&positions))?;
        } else {
            txn.delete(cf, &key)?;
        }
    }
    Ok(())
}

// ---- Queries ------------------------------------------------------------------------

/// One leaf or group of a query.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Word(String),
    Prefix(String),
    /// Words of a phrase with their positions relative to the first.
    Phrase(Vec<(String, u32)>),
    Group(Vec<Clause>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Occur {
    Must,
    MustNot,
    Should,
}

#[derive(Debug, Clone, PartialEq)]
struct Clause {
    occur: Occur,
    term: Term,
}

/// Natural language mode: every indexable word of the query, each optional.
fn parse_natural(q: &str, fold_case: bool) -> Vec<Clause> {
    let mut seen = HashSet::new();
    words(q, 0, fold_case)
        .0
        .into_iter()
        .filter(|w| indexable(&w.text) && seen.insert(w.text.clone()))
        .map(|w| Clause {
            occur: Occur::Should,
            term: Term::Word(w.text),
        })
        .collect()
}

/// Boolean mode: `+word` required, `-word` excluded, plain words optional,
/// `word*` prefix, `"a phrase"`, `( ... )` groups. `>`, `<` and `~` are accepted and
/// make the term optional (their weight changes are not applied).
fn parse_boolean(q: &str, fold_case: bool) -> Vec<Clause> {
    let chars: Vec<char> = q.chars().collect();
    let mut i = 0;
    parse_group(&chars, &mut i, 0, fold_case)
}

fn parse_group(c: &[char], i: &mut usize, depth: usize, fold_case: bool) -> Vec<Clause> {
    let mut out = Vec::new();
    let mut occur = Occur::Should;
    while *i < c.len() {
        let ch = c[*i];
        match ch {
            '+' => {
                occur = Occur::Must;
                *i += 1;
            }
            '-' => {
                occur = Occur::MustNot;
                *i += 1;
            }
            '>' | '<' | '~' => {
                *i += 1;
            }
            '(' => {
                *i += 1;
                let g = parse_group(c, i, depth + 1, fold_case);
                if !g.is_empty() {
                    out.push(Clause {
                        occur,
                        term: Term::Group(g),
                    });
                }
                occur = Occur::Should;
            }
            ')' => {
                *i += 1;
                if depth > 0 {
                    return out;
                }
            }
            '"' => {
                *i += 1;
                let start = *i;
                while *i < c.len() && c[*i] != '"' {
                    *i += 1;
                }
                let text: String = c[start..*i].iter().collect();
                *i += 1;
                let ws = words(&text, 0, fold_case).0;
                let phrase: Vec<(String, u32)> = ws
                    .into_iter()
                    .filter(|w| indexable(&w.text))
                    .map(|w| (w.text, w.pos))
                    .collect();
                if let Some(first) = phrase.first().map(|p| p.1) {
                    let phrase = phrase.into_iter().map(|(w, p)| (w, p - first)).collect();
                    out.push(Clause {
                        occur,
                        term: Term::Phrase(phrase),
                    });
                }
                occur = Occur::Should;
            }
            c0 if is_word_char(c0) => {
                let start = *i;
                while *i < c.len() && is_word_char(c[*i]) {
                    *i += 1;
                }
                let raw: String = c[start..*i].iter().collect();
                let word: String = if fold_case {
                    raw.chars().flat_map(char::to_lowercase).collect()
                } else {
                    raw
                };
                let prefix = *i < c.len() && c[*i] == '*';
                if prefix {
                    *i += 1;
                    out.push(Clause {
                        occur,
                        term: Term::Prefix(word),
                    });
                } else if indexable(&word) {
                    out.push(Clause {
                        occur,
                        term: Term::Word(word),
                    });
                }
                occur = Occur::Should;
            }
            _ => {
                *i += 1;
                occur = Occur::Should;
            }
        }
    }
    out
}

type Scores = HashMap<Vec<u8>, f32>;

/// Reads postings of the index: the rows holding a word (or any word with a prefix).
struct Searcher<'a> {
    txn: &'a mut Txn,
    cf: Cf,
    docs: f64,
}

/// The postings of one word: primary key -> positions.
type Postings = HashMap<Vec<u8>, Vec<u32>>;

impl Searcher<'_> {
    /// (word, primary key, positions) of every key starting with `prefix` (a whole
    /// word followed by 0x00, or a word prefix).
    fn scan(&mut self, prefix: &[u8]) -> FfiResult<Vec<(Vec<u8>, Postings)>> {
        let opts = IterOptions {
            lower_bound: Some(prefix.to_vec()),
            upper_bound: prefix_successor(prefix),
        };
        let mut it = self.txn.iter(&self.cf, opts)?;
        it.seek(prefix);
        let mut out: Vec<(Vec<u8>, Postings)> = Vec::new();
        while it.valid() && it.key().starts_with(prefix) {
            let key = it.key();
            let sep = key
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| FfiError::new(Status::Corruption, "damaged fulltext key"))?;
            let (word, pk) = (&key[..sep], &key[sep + 1..]);
            let positions = decode_positions(it.value())?;
            if out.last().map(|(w, _)| w.as_slice()) != Some(word) {
                out.push((word.to_vec(), HashMap::new()));
            }
            if let Some((_, p)) = out.last_mut() {
                p.insert(pk.to_vec(), positions);
            }
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    fn word(&mut self, word: &str) -> FfiResult<Postings> {
        let mut prefix = word.as_bytes().to_vec();
        prefix.push(0);
        Ok(self
            .scan(&prefix)?
            .pop()
            .map(|(_, p)| p)
            .unwrap_or_default())
    }

    fn weight(&self, df: usize) -> f32 {
        let idf = (1.0 + self.docs.max(df as f64) / (df.max(1) as f64)).ln();
        (idf * idf) as f32
    }

    fn score(&self, postings: &Postings, into: &mut Scores) {
        let w = self.weight(postings.len());
        for (pk, pos) in postings {
            *into.entry(pk.clone()).or_insert(0.0) += pos.len() as f32 * w;
        }
    }

    fn term(&mut self, term: &Term) -> FfiResult<Scores> {
        let mut s = Scores::new();
        match term {
            Term::Word(w) => {
                let p = self.word(w)?;
                self.score(&p, &mut s);
            }
            Term::Prefix(w) => {
                for (_, p) in self.scan(w.as_bytes())? {
                    self.score(&p, &mut s);
                }
            }
            Term::Phrase(words) => {
                let mut lists = Vec::with_capacity(words.len());
                for (w, _) in words {
                    lists.push(self.word(w)?);
                }
                let Some(first) = lists.first() else {
                    return Ok(s);
                };
                for (pk, starts) in first {
                    let mut hits = 0u32;
                    for &start in starts {
                        let all = words.iter().zip(&lists).all(|((_, rel), l)| {
                            l.get(pk)
                                .is_some_and(|p| p.binary_search(&(start + rel)).is_ok())
                        });
                        hits += u32::from(all);
                    }
                    if hits > 0 {
                        let w: f32 = lists.iter().map(|l| self.weight(l.len())).sum();
                        s.insert(pk.clone(), hits as f32 * w);
                    }
                }
            }
            Term::Group(clauses) => return self.group(clauses),
        }
        Ok(s)
    }

    /// WITH QUERY EXPANSION: the query again, with every word of the best rows of
    /// its first pass (`first`) added. The words of a row are found by one scan of
    /// the whole index (it keeps no row -> words map): the cost grows with the index.
    fn expand(&mut self, mut clauses: Vec<Clause>, first: &Scores) -> FfiResult<Scores> {
        let mut best: Vec<(&Vec<u8>, &f32)> = first.iter().collect();
        best.sort_by(|a, b| b.1.total_cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let best: HashSet<&[u8]> = best
            .into_iter()
            .take(EXPANSION_ROWS)
            .map(|(pk, _)| pk.as_slice())
            .collect();
        if best.is_empty() {
            return Ok(Scores::new());
        }
        let mut words: HashSet<String> = clauses
            .iter()
            .filter_map(|c| match &c.term {
                Term::Word(w) => Some(w.clone()),
                _ => None,
            })
            .collect();
        let mut it = self.txn.iter(&self.cf, IterOptions::default())?;
        it.seek_to_first();
        while it.valid() {
            let key = it.key();
            if let Some(sep) = key.iter().position(|&b| b == 0) {
                if best.contains(&key[sep + 1..]) {
                    let w = String::from_utf8_lossy(&key[..sep]).into_owned();
                    if words.insert(w.clone()) {
                        clauses.push(Clause {
                            occur: Occur::Should,
                            term: Term::Word(w),
                        });
                    }
                }
            }
            it.next();
        }
        it.status()?;
        self.group(&clauses)
    }

    /// A group: the rows of every Must clause (or, with none, of any Should clause),
    /// minus the rows of MustNot clauses; relevance summed over matching clauses.
    fn group(&mut self, clauses: &[Clause]) -> FfiResult<Scores> {
        let mut must: Option<Scores> = None;
        let mut should = Scores::new();
        let mut excluded: HashSet<Vec<u8>> = HashSet::new();
        for c in clauses {
            let s = self.term(&c.term)?;
            match c.occur {
                Occur::Must => {
                    must = Some(match must.take() {
                        None => s,
                        Some(m) => m
                            .into_iter()
                            .filter_map(|(pk, r)| s.get(&pk).map(|r2| (pk, r + r2)))
                            .collect(),
                    });
                }
                Occur::MustNot => excluded.extend(s.into_keys()),
                Occur::Should => {
                    for (pk, r) in s {
                        *should.entry(pk).or_insert(0.0) += r;
                    }
                }
            }
        }
        let mut out = match must {
            Some(mut m) => {
                for (pk, r) in m.iter_mut() {
                    if let Some(extra) = should.get(pk) {
                        *r += extra;
                    }
                }
                m
            }
            None => should,
        };
        out.retain(|pk, _| !excluded.contains(pk));
        Ok(out)
    }
}

/// Query flags (`FT_BOOL`, `FT_SORTED` of MariaDB's ft_global.h).
const FT_BOOL: u32 = 1;
const FT_SORTED: u32 = 2;
const FT_EXPAND: u32 = 4;
/// The index's words keep their case (see Format).
const FT_CASE_SENSITIVE: u32 = 0x100;
/// Top bit of a document column's length: its words keep their case.
const DOC_CASE_SENSITIVE: u32 = 1 << 31;
/// Rows of the first pass whose words WITH QUERY EXPANSION adds to the query
/// (MariaDB's ft_query_expansion_limit default).
const EXPANSION_ROWS: usize = 20;

/// `tdb_ft_result` of the header: the rows a query matched.
pub struct FtResult {
    rows: Vec<(Vec<u8>, f32)>,
    by_pk: HashMap<Vec<u8>, f32>,
    next: usize,
}

/// Runs a query against a FULLTEXT index.
pub fn search(
    trx: &mut Trx,
    table: &Table,
    index: u32,
    query: &str,
    flags: u32,
) -> FfiResult<FtResult> {
    let cf = table.shared.cf(index)?;
    let rows_cf = table.shared.cf(0)?;
    let docs = engine()?.db.cf_stats(&rows_cf).approx_keys as f64;
    let fold_case = flags & FT_CASE_SENSITIVE == 0;
    let clauses = if flags & FT_BOOL != 0 {
        parse_boolean(query, fold_case)
    } else {
        parse_natural(query, fold_case)
    };
    let mut s = Searcher {
        txn: trx.txn()?,
        cf,
        docs,
    };
    let mut scores = s.group(&clauses)?;
    if flags & FT_EXPAND != 0 && flags & FT_BOOL == 0 {
        scores = s.expand(clauses, &scores)?;
    }
    let mut rows: Vec<(Vec<u8>, f32)> = scores.iter().map(|(k, v)| (k.clone(), *v)).collect();
    if flags & FT_SORTED != 0 {
        rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    } else {
        rows.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(FtResult {
        rows,
        by_pk: scores,
        next: 0,
    })
}

// ---- C ABI --------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn tdb_ft_set_min_token_size(n: u32) {
    guard(|| {
        MIN_TOKEN.store((n as usize).clamp(1, MAX_TOKEN), Ordering::Relaxed);
        Ok(())
    });
}

/// # Safety
/// `doc` must point to `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_document_terms(doc: *const u8, len: usize) -> u64 {
    guard_value(0, || {
        // SAFETY: valid buffer by contract.
        let doc = unsafe { raw::bytes(doc, len) }?;
        Ok(document_terms(doc)?.len() as u64)
    })
}

/// # Safety
/// Live handles; `query` points to `len` bytes; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_search(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    query: *const u8,
    len: usize,
    flags: u32,
    out: *mut *mut FtResult,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and buffers by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: as above.
        let query = unsafe { raw::bytes(query, len) }?;
        let query = String::from_utf8_lossy(query);
        let r = search(trx, table, index, &query, flags)?;
        // SAFETY: writable by contract.
        unsafe { raw::write_out(out, Box::into_raw(Box::new(r))) }
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
        Ok(r.by_pk.get(pk).copied().unwrap_or(0.0))
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
mod tests {
    use super::*;

    fn doc(cols: &[&str]) -> Vec<u8> {
        let mut d = Vec::new();
        for c in cols {
            d.extend_from_slice(&(c.len() as u32).to_le_bytes());
            d.extend_from_slice(c.as_bytes());
        }
        d
    }

    #[test]
    fn tokenizer_folds_case_and_drops_short_and_stop_words() {
        let t = document_terms(&doc(&["The STRAßE is in Köln, x_y 42 abc", "abc déjà"]))
            .expect("terms");
        let words: Vec<&str> = t.keys().map(String::as_str).collect();
        assert_eq!(words, vec!["abc", "déjà", "köln", "straße", "x_y"]);
        // Positions count every word, across columns.
        assert_eq!(t["abc"], vec![7, 8]);
        assert_eq!(t["straße"], vec![1]);
    }

    #[test]
    fn postings_round_trip_and_reject_damage() {
        let v = posting_value(&[0, 5, 300, 70000]);
        assert_eq!(
            decode_positions(&v).expect("positions"),
            vec![0, 5, 300, 70000]
        );
        assert!(decode_positions(&v[..v.len() - 1]).is_err());
        assert!(decode_positions(&[0xFF; 8]).is_err());
        assert!(document_terms(&[5, 0, 0, 0, b'a']).is_err());
    }

    #[test]
    fn boolean_syntax() {
        let q = parse_boolean(
            r#"+apple -Pie juic* "the red  Fruit" (+x_y ~tree) >zz"#,
            true,
        );
        let occ: Vec<Occur> = q.iter().map(|c| c.occur).collect();
        assert_eq!(
            occ,
            vec![
                Occur::Must,
                Occur::MustNot,
                Occur::Should,
                Occur::Should,
                Occur::Should
            ]
        );
        assert_eq!(q[2].term, Term::Prefix("juic".into()));
        assert_eq!(
            q[3].term,
            Term::Phrase(vec![("red".into(), 0), ("fruit".into(), 1)])
        );
        match &q[4].term {
            Term::Group(g) => {
                assert_eq!(g.len(), 2);
                assert_eq!(g[0].occur, Occur::Must);
            }
            other => panic!("not a group: {other:?}"),
        }
        // Short words and stopwords are dropped; "zz" too.
        assert_eq!(parse_natural("the cat, THE Cat and a dog", true).len(), 3);
        // Case-sensitive (a `_bin` column): "Cat" and "cat" are two words, and
        // "THE" is no stopword.
        assert_eq!(parse_natural("the cat, THE Cat and a dog", false).len(), 5);
        let q = parse_boolean(r#"+Apple "Red Fruit""#, false);
        assert_eq!(q[0].term, Term::Word("Apple".into()));
        assert_eq!(
            q[1].term,
            Term::Phrase(vec![("Red".into(), 0), ("Fruit".into(), 1)])
        );
    }

    #[test]
    fn case_sensitive_document_columns_keep_case() {
        let mut d = doc(&["Hello hello HELLO", "Hello"]);
        // The second column's length carries the case-sensitive bit.
        let at = 4 + "Hello hello HELLO".len();
        d[at + 3] |= 0x80;
        let t = document_terms(&d).expect("terms");
        assert_eq!(t["hello"], vec![0, 1, 2]);
        assert_eq!(t["Hello"], vec![3]);
        assert_eq!(t.len(), 2);
    }
}
