//! Words of a text, as InnoDB's FTS parser splits them, and which of them an index
//! stores (token sizes, stopwords).
//!
//! A word is a run of letters, digits and `_` (InnoDB's `true_word_char`: Unicode
//! alphanumerics), folded with Unicode lower-casing unless the column's collation
//! is case-sensitive (accents are folded before, by the shim, where the collation
//! ignores them).
use std::sync::atomic::{AtomicUsize, Ordering};
use tidesdb_core::FxHashSet;

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

/// A stopword list (folded words).
pub type StopWords = FxHashSet<String>;

/// What an index stores, fixed when it is built (as InnoDB keeps an index's
/// stopword list in its FTS config; token sizes are server-wide there).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub min_token: usize,
    pub max_token: usize,
    /// None: no stopwords (stopwords disabled when the index was built).
    pub stopwords: Option<StopWords>,
    /// The index keeps each document's length (BM25 ranking, see `postings`).
    pub doc_lengths: bool,
    /// A one-character word followed by an apostrophe is no word (InnoDB's
    /// tokenizer, see [`words_into`]). An index without it keeps such words: the
    /// positions it stores count them, so its documents are read the same way.
    pub elision: bool,
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
            elision: false,
        }
    }

    /// The current server settings with the given stopword list.
    pub fn current(stopwords: Option<StopWords>) -> Self {
        Settings {
            min_token: MIN_TOKEN.load(Ordering::Relaxed),
            max_token: MAX_TOKEN.load(Ordering::Relaxed),
            stopwords,
            doc_lengths: true,
            elision: true,
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

    /// [`Settings::indexable`] of a word of `chars` characters.
    pub fn indexable_span(&self, word: &str, chars: usize) -> bool {
        chars >= self.min_token && chars <= self.max_token && !self.is_stopword(word)
    }
}

pub fn default_stopwords() -> StopWords {
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

/// A word of a text in a scratch buffer ([`words_into`]): its folded bytes at
/// `start..start + len`, its length in characters and its position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
    pub chars: usize,
    pub pos: u32,
}

/// Splits `text` into words starting at position `start`; returns every word
/// (stored or not) and the next position. `elision`: see [`words_into`].
pub fn words(text: &str, start: u32, fold_case: bool, elision: bool) -> (Vec<Word>, u32) {
    let mut buf = Vec::new();
    let mut spans = Vec::new();
    let next = words_into(text, start, fold_case, elision, &mut buf, &mut spans);
    let out = spans
        .iter()
        .map(|s| Word {
            text: String::from_utf8_lossy(&buf[s.start..s.start + s.len]).into_owned(),
            pos: s.pos,
        })
        .collect();
    (out, next)
}

/// [`words`] without an allocation per word: appends each word's folded bytes to
/// `buf` (always whole UTF-8 characters) and its [`Span`] to `spans`; returns the
/// next position. ASCII bytes (most text) take a path of their own: the same
/// classes and folding as the `char` path, without decoding.
///
/// `elision` (an index's [`Settings::elision`]): as InnoDB's tokenizer
/// (innobase_mysql_fts_get_token), a one-character word followed by an
/// apostrophe is no word and takes no position (`l'homme`: `homme` alone;
/// `GPL-2'.`: `gpl` alone), in documents and queries alike.
pub fn words_into(
    text: &str,
    start: u32,
    fold_case: bool,
    elision: bool,
    buf: &mut Vec<u8>,
    spans: &mut Vec<Span>,
) -> u32 {
    let mut pos = start;
    // The word being read: where it starts in `buf`, its characters.
    let mut at = buf.len();
    let mut chars = 0usize;
    let mut flush = |buf: &mut Vec<u8>, at: &mut usize, chars: &mut usize, pos: &mut u32| {
        if buf.len() > *at {
            spans.push(Span {
                start: *at,
                len: buf.len() - *at,
                chars: *chars,
                pos: *pos,
            });
            *pos = pos.saturating_add(1);
        }
        *at = buf.len();
        *chars = 0;
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    // Characters of the text in the word being read (folding may change the count).
    let mut read = 0usize;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() || b == b'_' {
                buf.push(if fold_case { b.to_ascii_lowercase() } else { b });
                chars += 1;
                read += 1;
            } else {
                if elision && b == b'\'' && read == 1 {
                    buf.truncate(at);
                    chars = 0;
                }
                flush(buf, &mut at, &mut chars, &mut pos);
                read = 0;
            }
            i += 1;
            continue;
        }
        let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
            break;
        };
        if is_word_char(c) {
            read += 1;
            let mut tmp = [0u8; 4];
            if fold_case {
                for l in c.to_lowercase() {
                    buf.extend_from_slice(l.encode_utf8(&mut tmp).as_bytes());
                    chars += 1;
                }
            } else {
                buf.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                chars += 1;
            }
        } else {
            flush(buf, &mut at, &mut chars, &mut pos);
            read = 0;
        }
        i += c.len_utf8();
    }
    flush(buf, &mut at, &mut chars, &mut pos);
    pos
}
