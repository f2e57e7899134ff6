//! Words of a text, as InnoDB's FTS parser splits them, and which of them an index
//! stores (token sizes, stopwords).
//!
//! A word is a run of letters, digits and `_` (InnoDB's `true_word_char`: Unicode
//! alphanumerics), folded with Unicode lower-casing unless the column's collation
//! is case-sensitive (accents are folded before, by the shim, where the collation
//! ignores them).
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Longest word an index may store (InnoDB's innodb_ft_max_token_size maximum).
pub const MAX_TOKEN_LIMIT: usize = 84;
/// Server-wide token sizes for indexes built from now on (the sysvars).
static MIN_TOKEN: AtomicUsize = AtomicUsize::new(3);
static MAX_TOKEN: AtomicUsize = AtomicUsize::new(MAX_TOKEN_LIMIT);

/// InnoDB's default stopword list (INFORMATION_SCHEMA.INNODB_FT_DEFAULT_STOPWORD).
pub const DEFAULT_STOPWORDS: &[&str] = &[
    "a", "about", "an", "are", "as", "at", "be", "by", "com", "de", "en", "for", "from", "how",
    "i", "in", "is", "it", "la", "of", "on", "or", "that", "the", "this", "to", "was", "what",
    "when", "where", "who", "will", "with", "und", "the", "www",
];

pub fn set_min_token(n: usize) {
    MIN_TOKEN.store(n.clamp(1, MAX_TOKEN_LIMIT), Ordering::Relaxed);
}

pub fn set_max_token(n: usize) {
    MAX_TOKEN.store(n.clamp(1, MAX_TOKEN_LIMIT), Ordering::Relaxed);
}

/// What an index stores, fixed when it is built (as InnoDB keeps an index's
/// stopword list in its FTS config; token sizes are server-wide there).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub min_token: usize,
    pub max_token: usize,
    /// None: no stopwords (stopwords disabled when the index was built).
    pub stopwords: Option<HashSet<String>>,
    /// The index keeps each document's length (BM25 ranking, see `postings`).
    pub doc_lengths: bool,
}

impl Settings {
    /// The settings of an index built before they were recorded: the defaults,
    /// with the current minimum token size (what the index was built with when the
    /// server's setting has not changed since).
    pub fn legacy() -> Self {
        Settings {
            min_token: MIN_TOKEN.load(Ordering::Relaxed),
            max_token: MAX_TOKEN_LIMIT,
            stopwords: Some(default_stopwords()),
            doc_lengths: false,
        }
    }

    /// The current server settings with the given stopword list.
    pub fn current(stopwords: Option<HashSet<String>>) -> Self {
        Settings {
            min_token: MIN_TOKEN.load(Ordering::Relaxed),
            max_token: MAX_TOKEN.load(Ordering::Relaxed),
            stopwords,
            doc_lengths: true,
        }
    }

    pub fn is_stopword(&self, word: &str) -> bool {
        self.stopwords.as_ref().is_some_and(|s| s.contains(word))
    }

    pub fn size_in_range(&self, word: &str) -> bool {
        let n = word.chars().count();
        n >= self.min_token && n <= self.max_token
    }

    /// True if the (folded) word is stored in the index.
    pub fn indexable(&self, word: &str) -> bool {
        self.size_in_range(word) && !self.is_stopword(word)
    }
}

pub fn default_stopwords() -> HashSet<String> {
    DEFAULT_STOPWORDS.iter().map(|s| s.to_string()).collect()
}

pub fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A word of a text: its folded form and its position (ordinal among all words).
#[derive(Debug, PartialEq, Clone)]
pub struct Word {
    pub text: String,
    pub pos: u32,
}

/// Folds a word (or a whole query) as the index's documents are folded.
pub fn fold(s: &str, fold_case: bool) -> String {
    if fold_case {
        s.chars().flat_map(char::to_lowercase).collect()
    } else {
        s.to_string()
    }
}

/// Splits `text` into words starting at position `start`; returns every word
/// (stored or not) and the next position. ASCII bytes (most text) take a path of
/// their own: the same classes and folding as the `char` path, without decoding.
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
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() || b == b'_' {
                cur.push(char::from(if fold_case {
                    b.to_ascii_lowercase()
                } else {
                    b
                }));
            } else {
                flush(&mut cur, &mut pos);
            }
            i += 1;
            continue;
        }
        let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
            break;
        };
        if is_word_char(c) {
            if fold_case {
                cur.extend(c.to_lowercase());
            } else {
                cur.push(c);
            }
        } else {
            flush(&mut cur, &mut pos);
        }
        i += c.len_utf8();
    }
    flush(&mut cur, &mut pos);
    (out, pos)
}
