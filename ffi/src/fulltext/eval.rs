//! Query evaluation as InnoDB's (storage/innobase/fts/fts0que.cc): the same walk of
//! the tree, the same result set machine and the same relevance, so every query
//! returns InnoDB's rows with InnoDB's relevance values.
//!
//! The walk (`fts_ast_visit`) takes each list in three passes: first the words
//! without `+`/`-` in order (union; `~` lowers the relevance of rows already found,
//! `<`/`>` add rows and lower/raise it), then the `+` words (intersection), then
//! the `-` words (difference). A sub-expression is evaluated into a set of its own,
//! then merged into the enclosing one with its operator. Each row remembers the
//! words that touched it; its relevance is its operator adjustments (kept within
//! [-1, 1]) plus, for each remembered word, `tf × idf²` with
//! `idf = log10(N / df)` (`log10(1.0001)` when every row holds the word); `df`
//! adds up each time a word is looked up (as InnoDB's).
//!
//! BM25 ([`RankingModel::Bm25`], `tidesdb_ft_ranking`): the same rows and operator
//! adjustments, with each word's `tf × idf²` replaced by its Okapi BM25 weight
//! `idf × tf (k1 + 1) / (tf + k1 (1 - b + b |D| / avgdl))`, `idf = ln(1 + (N - df +
//! 0.5) / (df + 0.5))`, k1 = 1.2, b = 0.75; `|D|` is the row's stored length and
//! `avgdl` their mean over a sample of the index (an index built before lengths were
//! kept ranks without length normalisation, `|D| = avgdl`).
//!
//! Phrases: rows holding every stored word of the phrase, then checked against the
//! row's words (stopwords and short words included, within one column); `@N`: the
//! stored words all within a window of N words.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::parser::{Ast, Kind, Oper};
use super::tokenizer::{words, Settings, Word};
use crate::status::{FfiError, FfiResult, Status};
use tidesdb_core::FxHashMap;

/// Postings of one word: (primary key, positions) in key order.
pub type WordPostings = Vec<(Vec<u8>, Vec<u32>)>;

/// Term frequencies of one word: (primary key, tf) in key order, the keys in one
/// buffer (no allocation per posting).
#[derive(Debug, Default, Clone)]
pub struct WordFreqs {
    keys: Vec<u8>,
    ends: Vec<usize>,
    tfs: Vec<u32>,
    /// Keys pushed in ascending order (what [`WordFreqs::find`] searches by).
    sorted: bool,
}

impl WordFreqs {
    pub fn new() -> Self {
        WordFreqs {
            sorted: true,
            ..Default::default()
        }
    }

    pub fn push(&mut self, pk: &[u8], tf: u32) {
        if self.sorted && !self.is_empty() && self.key(self.len() - 1) >= pk {
            self.sorted = false;
        }
        self.keys.extend_from_slice(pk);
        self.ends.push(self.keys.len());
        self.tfs.push(tf);
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start..self.ends[i]]
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        (0..self.len()).map(|i| (self.key(i), self.tfs[i]))
    }

    /// The tf of row `pk`, if the word is in it.
    fn find(&self, pk: &[u8]) -> Option<u32> {
        if self.sorted {
            let (mut lo, mut hi) = (0, self.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match self.key(mid).cmp(pk) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => return Some(self.tfs[mid]),
                }
            }
            None
        } else {
            self.iter().find(|(k, _)| *k == pk).map(|(_, tf)| tf)
        }
    }
}

/// What the evaluation reads: the index and the rows' documents.
pub trait Source {
    /// The postings of `word`, or with `prefix` of every word starting with it
    /// (in word order).
    fn postings(&mut self, word: &str, prefix: bool) -> FfiResult<Vec<(String, WordPostings)>>;
    /// [`Source::postings`] with each row's term frequency instead of its positions
    /// (what a word outside a phrase needs).
    fn frequencies(&mut self, word: &str, prefix: bool) -> FfiResult<Vec<(String, WordFreqs)>> {
        Ok(self
            .postings(word, prefix)?
            .into_iter()
            .map(|(w, p)| {
                let mut f = WordFreqs::new();
                for (pk, pos) in &p {
                    f.push(pk, pos.len() as u32);
                }
                (w, f)
            })
            .collect())
    }
    /// A row's document as words (all of them, with positions) per column; None if
    /// the row is gone.
    fn document(&mut self, pk: &[u8]) -> FfiResult<Option<Vec<Vec<Word>>>>;
    /// True if the index has one column (a phrase of stored words is then decided
    /// by positions alone).
    fn single_column(&self) -> bool;
    /// A row's stored document length, if the index keeps lengths.
    fn doc_length(&mut self, pk: &[u8]) -> FfiResult<Option<u32>>;
    /// The mean stored document length over (a sample of) the index, if it keeps
    /// lengths and has documents.
    fn average_doc_length(&mut self) -> FfiResult<Option<f64>>;
}

/// How relevance is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankingModel {
    /// InnoDB's (the default): same values as InnoDB.
    Innodb,
    /// Okapi BM25.
    Bm25,
}

/// BM25's term frequency saturation and length normalisation.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

#[derive(Debug, Clone)]
struct Ranking {
    rank: f32,
    /// Indexes into `word_vector`; None once an intersection took them.
    words: Option<WordSet>,
}

/// A row's matched words (indexes into `word_vector`): the first 64 as bits, the
/// others in a sorted list, so that a row of a few words allocates nothing.
#[derive(Debug, Clone, Default)]
struct WordSet {
    low: u64,
    high: Vec<usize>,
}

impl WordSet {
    fn insert(&mut self, w: usize) {
        if w < 64 {
            self.low |= 1 << w;
        } else if let Err(i) = self.high.binary_search(&w) {
            self.high.insert(i, w);
        }
    }

    /// The words in ascending order.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let mut low = self.low;
        std::iter::from_fn(move || {
            (low != 0).then(|| {
                let b = low.trailing_zeros() as usize;
                low &= low - 1;
                b
            })
        })
        .chain(self.high.iter().copied())
    }
}

/// Bytes of a primary key kept inline in a [`PkKey`].
const INLINE_PK: usize = 22;

/// A primary key as a map key: inline up to [`INLINE_PK`] bytes (no allocation
/// for the usual keys). Hashes and compares as its bytes.
#[derive(Clone)]
enum PkKey {
    Inline { len: u8, bytes: [u8; INLINE_PK] },
    Heap(Box<[u8]>),
}

impl PkKey {
    fn new(pk: &[u8]) -> Self {
        if pk.len() <= INLINE_PK {
            let mut bytes = [0u8; INLINE_PK];
            bytes[..pk.len()].copy_from_slice(pk);
            PkKey::Inline {
                len: pk.len() as u8,
                bytes,
            }
        } else {
            PkKey::Heap(pk.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            PkKey::Inline { len, bytes } => &bytes[..*len as usize],
            PkKey::Heap(b) => b,
        }
    }
}

impl PartialEq for PkKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for PkKey {}

impl std::hash::Hash for PkKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `[u8]` hashes, so that lookups by `&[u8]` find it.
        self.as_slice().hash(state);
    }
}

impl std::borrow::Borrow<[u8]> for PkKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

/// By primary key; nothing depends on the order (results are sorted, each row's
/// relevance sums its words in `word_vector` order).
type Docs = FxHashMap<PkKey, Ranking>;

#[derive(Default)]
struct WordFreq {
    doc_count: u64,
    /// The postings read for the word, in reading order (indexes into
    /// `Eval::freq_lists`): a row's tf is that of the first list holding it.
    lists: Vec<usize>,
    idf: f64,
}

/// A word's tf per row, over the lists read for it (the first list holding a row
/// wins, as InnoDB keeps the first tf it meets).
enum Freqs<'l> {
    Lists(Vec<&'l WordFreqs>),
    Merged(FxHashMap<&'l [u8], u32>),
}

/// Up to this many lists a row's tf is searched in each; more (a prefix term of
/// many words) are merged into one map.
const SEARCHED_LISTS: usize = 4;

impl<'l> Freqs<'l> {
    fn new(wf: &WordFreq, lists: &'l [WordFreqs]) -> Self {
        let ls: Vec<&WordFreqs> = wf.lists.iter().filter_map(|&i| lists.get(i)).collect();
        if ls.len() <= SEARCHED_LISTS {
            return Freqs::Lists(ls);
        }
        let mut m: FxHashMap<&[u8], u32> = FxHashMap::default();
        for l in ls {
            for (pk, tf) in l.iter() {
                m.entry(pk).or_insert(tf);
            }
        }
        Freqs::Merged(m)
    }

    fn get(&self, pk: &[u8]) -> Option<u32> {
        match self {
            Freqs::Lists(ls) => ls.iter().find_map(|l| l.find(pk)),
            Freqs::Merged(m) => m.get(pk).copied(),
        }
    }

    /// Rows holding the word.
    fn rows(&self) -> usize {
        match self {
            Freqs::Lists(ls) if ls.len() == 1 => ls[0].len(),
            Freqs::Lists(ls) => {
                let mut seen: FxHashMap<&[u8], ()> = FxHashMap::default();
                for l in ls {
                    for (pk, _) in l.iter() {
                        seen.insert(pk, ());
                    }
                }
                seen.len()
            }
            Freqs::Merged(m) => m.len(),
        }
    }

    /// Every row holding the word with its tf, in key order.
    fn sorted_rows(&self) -> Vec<(&'l [u8], u32)> {
        let mut out: Vec<(&[u8], u32)> = match self {
            Freqs::Lists(ls) if ls.len() == 1 && ls[0].sorted => return ls[0].iter().collect(),
            Freqs::Lists(ls) => {
                let mut m: FxHashMap<&[u8], u32> = FxHashMap::default();
                for l in ls {
                    for (pk, tf) in l.iter() {
                        m.entry(pk).or_insert(tf);
                    }
                }
                m.into_iter().collect()
            }
            Freqs::Merged(m) => m.iter().map(|(k, v)| (*k, *v)).collect(),
        };
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flags {
    None,
    /// A single term: relevance straight from its postings.
    OptRanking,
    Phrase,
    Proximity,
}

/// Messages of the two limits InnoDB reports with errors of their own.
pub const TOO_DEEP: &str = "too many nested parentheses in a FULLTEXT query";
pub const TOO_MANY_PHRASE_WORDS: &str = "too many words in a FULLTEXT phrase";

/// The deepest nesting of sub-expressions InnoDB evaluates.
const MAX_SUB_EXP_DEPTH: u32 = 31;
/// Most stored words in a phrase.
const MAX_PHRASE_WORDS: usize = 128;

pub struct Eval<'a> {
    src: &'a mut dyn Source,
    settings: &'a Settings,
    fold_case: bool,
    total_docs: u64,
    doc_ids: Docs,
    intersection: Option<Docs>,
    oper: Oper,
    multi_exist: bool,
    visiting_sub_exp: u32,
    flags: Flags,
    word_map: HashMap<String, usize>,
    word_vector: Vec<String>,
    word_freqs: HashMap<String, WordFreq>,
    /// Every list of postings read, for the words' tf ([`WordFreq::lists`]).
    freq_lists: Vec<WordFreqs>,
    wildcard_words: Option<HashSet<String>>,
    model: RankingModel,
    word_order: Option<&'a [u8; 128]>,
}

/// `word` as it sorts under a collation whose ASCII characters rank as `order`
/// says; other bytes after every ASCII character, in byte order.
fn collation_key(word: &str, order: &[u8; 128]) -> Vec<u16> {
    word.bytes()
        .map(|b| match order.get(b as usize) {
            Some(&r) => r as u16,
            None => 128 + b as u16,
        })
        .collect()
}

/// The place of `word` among the matched words (`pos`, None until it has
/// one): a word gets the next place when it first touches a row, as in
/// InnoDB's word map.
fn word_place(
    word_map: &mut HashMap<String, usize>,
    word_vector: &mut Vec<String>,
    word: &str,
    pos: &mut Option<usize>,
) -> usize {
    *pos.get_or_insert_with(|| {
        let p = word_vector.len();
        word_map.insert(word.to_string(), p);
        word_vector.push(word.to_string());
        p
    })
}

fn clamp(r: f32) -> f32 {
    r.clamp(-1.0, 1.0)
}

impl<'a> Eval<'a> {
    pub fn new(
        src: &'a mut dyn Source,
        settings: &'a Settings,
        fold_case: bool,
        total_docs: u64,
        expand: bool,
    ) -> Self {
        Eval {
            src,
            settings,
            fold_case,
            total_docs,
            doc_ids: Docs::default(),
            intersection: None,
            oper: Oper::None,
            multi_exist: false,
            visiting_sub_exp: 0,
            flags: Flags::None,
            word_map: HashMap::new(),
            word_vector: Vec::new(),
            word_freqs: HashMap::new(),
            freq_lists: Vec::new(),
            wildcard_words: expand.then(HashSet::new),
            model: RankingModel::Innodb,
            word_order: None,
        }
    }

    /// Reads a prefix term's words in the index collation's order (`order`: the
    /// rank of each ASCII character), as InnoDB's index holds them: a row's
    /// frequency for the term is that of the first of its words (under
    /// utf8mb4_general_ci `svc` comes before `s_user`, in bytes after it).
    pub fn with_word_order(mut self, order: Option<&'a [u8; 128]>) -> Self {
        self.word_order = order;
        self
    }

    /// Ranks with `model` instead of InnoDB's relevance.
    pub fn with_ranking(mut self, model: RankingModel) -> Self {
        self.model = model;
        self
    }

    /// Runs the query; returns every matching row with its relevance, in primary
    /// key order.
    pub fn run(mut self, ast: &mut Ast, expand: bool) -> FfiResult<Vec<(Vec<u8>, f32)>> {
        let Some(root) = ast.root else {
            return Ok(Vec::new());
        };
        // fts_query_can_optimize: a lone term.
        if !expand {
            if let Kind::List(v) = &ast.nodes[root].kind {
                if v.len() == 1 && matches!(ast.nodes[v[0]].kind, Kind::Term { .. }) {
                    self.flags = Flags::OptRanking;
                }
            }
        }
        let mut ignored = false;
        self.visit(ast, Oper::None, root, &mut ignored)?;
        if expand {
            self.expand()?;
        }
        self.result()
    }

    // ---- the walk (fts_ast_visit) ----

    fn visit(
        &mut self,
        ast: &mut Ast,
        mut oper: Oper,
        node: usize,
        has_ignore: &mut bool,
    ) -> FfiResult<()> {
        let children = match &ast.nodes[node].kind {
            Kind::List(v) | Kind::SubExp(v) => v.clone(),
            _ => return Ok(()),
        };
        #[derive(PartialEq)]
        enum Pass {
            First,
            Exist,
            Ignore,
        }
        let pass = match oper {
            Oper::ExistSkip => Pass::Exist,
            Oper::IgnoreSkip => Pass::Ignore,
            _ => Pass::First,
        };
        let mut revisit = false;
        let mut will_be_ignored = false;
        for &c in &children {
            match ast.nodes[c].kind {
                Kind::List(_) => {
                    if pass != Pass::First {
                        continue;
                    }
                    self.visit(ast, oper, c, &mut will_be_ignored)?;
                    if will_be_ignored {
                        revisit = true;
                        ast.nodes[c].oper = oper;
                    }
                }
                Kind::Oper => {
                    oper = ast.nodes[c].oper;
                    ast.nodes[c].oper = match oper {
                        Oper::Exist => Oper::ExistSkip,
                        Oper::Ignore => Oper::IgnoreSkip,
                        o => o,
                    };
                }
                _ => {
                    if ast.nodes[c].visited {
                        continue;
                    }
                    if matches!(oper, Oper::Exist | Oper::Ignore) {
                        *has_ignore = true;
                        continue;
                    }
                    let op = match (oper, &pass) {
                        (Oper::ExistSkip, Pass::Exist) => Some(Oper::Exist),
                        (Oper::IgnoreSkip, Pass::Ignore) => Some(Oper::Ignore),
                        (_, Pass::First) => Some(oper),
                        _ => None,
                    };
                    if let Some(op) = op {
                        self.visitor(ast, op, c)?;
                        ast.nodes[c].visited = true;
                    }
                }
            }
        }
        if revisit {
            let mut wbi = false;
            for &c in &children {
                if matches!(ast.nodes[c].kind, Kind::List(_)) && ast.nodes[c].oper != Oper::Ignore {
                    self.visit(ast, Oper::ExistSkip, c, &mut wbi)?;
                }
            }
            for &c in &children {
                if matches!(ast.nodes[c].kind, Kind::List(_)) {
                    self.visit(ast, Oper::IgnoreSkip, c, &mut wbi)?;
                }
            }
        }
        Ok(())
    }

    /// fts_query_visitor: one leaf (term, phrase) or sub-expression.
    fn visitor(&mut self, ast: &mut Ast, oper: Oper, node: usize) -> FfiResult<()> {
        self.oper = oper;
        match ast.nodes[node].kind.clone() {
            Kind::Text { text, distance } => {
                if self.oper == Oper::Exist {
                    self.intersection = Some(Docs::default());
                }
                self.phrase_search(&text, distance)?;
                if self.oper == Oper::Exist {
                    self.doc_ids = self.intersection.take().unwrap_or_default();
                }
            }
            Kind::Term { word, wildcard } => {
                if wildcard {
                    if let Some(w) = self.wildcard_words.as_mut() {
                        w.insert(word.clone());
                    }
                }
                self.word_freqs.entry(word.clone()).or_default();
                self.execute(&word, wildcard)?;
            }
            Kind::SubExp(_) => self.sub_exp(ast, node)?,
            _ => {}
        }
        if self.oper == Oper::Exist {
            self.multi_exist = true;
        }
        Ok(())
    }

    fn sub_exp(&mut self, ast: &mut Ast, node: usize) -> FfiResult<()> {
        if self.visiting_sub_exp > MAX_SUB_EXP_DEPTH {
            return Err(FfiError::new(Status::Invalid, TOO_DEEP));
        }
        self.visiting_sub_exp += 1;
        let cur_oper = self.oper;
        let parent = std::mem::take(&mut self.doc_ids);
        let multi_exist = std::mem::replace(&mut self.multi_exist, false);
        let mut ignored = false;
        let r = self.visit(ast, Oper::None, node, &mut ignored);
        self.multi_exist = multi_exist;
        self.oper = cur_oper;
        self.visiting_sub_exp -= 1;
        let sub = std::mem::replace(&mut self.doc_ids, parent);
        r?;
        self.merge_doc_ids(sub);
        Ok(())
    }

    fn merge_doc_ids(&mut self, sub: Docs) {
        if self.oper == Oper::Exist {
            self.intersection = Some(Docs::default());
        }
        for (pk, r) in sub {
            let pk = pk.as_slice();
            self.process_doc_id(pk, r.rank);
            for w in r.words.iter().flat_map(WordSet::iter) {
                let word = self.word_vector[w].clone();
                self.add_word_to_document(pk, &word);
            }
        }
        if self.oper == Oper::Exist {
            if let Some(i) = self.intersection.take() {
                self.doc_ids = i;
            }
        }
    }

    // ---- one word (union / intersection / difference) ----

    fn execute(&mut self, token: &str, wildcard: bool) -> FfiResult<()> {
        match self.oper {
            Oper::Exist => {
                if !(self.doc_ids.is_empty() && self.multi_exist) {
                    self.intersection = Some(Docs::default());
                    self.read_word(token, wildcard)?;
                    self.doc_ids = self.intersection.take().unwrap_or_default();
                }
            }
            Oper::Ignore => {
                if !self.doc_ids.is_empty() {
                    self.read_word(token, wildcard)?;
                }
            }
            _ => {
                if !token.is_empty() {
                    self.read_word(token, wildcard)?;
                }
            }
        }
        Ok(())
    }

    /// Reads a word's postings (all words with the prefix for a wildcard) and feeds
    /// them through the current operator (fts_query_filter_doc_ids).
    fn read_word(&mut self, token: &str, wildcard: bool) -> FfiResult<()> {
        // The word's lists are kept whole for its tf (the first tf of a row wins,
        // as InnoDB's), its place among matched words looked up once.
        let mut docs = 0u64;
        let mut pos = self.word_map.get(token).copied();
        let mut words = self.src.frequencies(token, wildcard)?;
        if let (true, Some(order)) = (wildcard && words.len() > 1, self.word_order) {
            words.sort_by_cached_key(|(w, _)| collation_key(w, order));
        }
        // A lone term's rows come from its lists alone (see `result`).
        let walk = self.flags != Flags::OptRanking;
        let exist = self.oper == Oper::Exist;
        let first = self.freq_lists.len();
        if let (Oper::Exist, false, Some(inter)) =
            (self.oper, self.multi_exist, self.intersection.as_mut())
        {
            inter.reserve(words.iter().map(|(_, p)| p.len()).sum());
        }
        for (_, postings) in words {
            docs += postings.len() as u64;
            if walk {
                for (pk, _) in postings.iter() {
                    if exist {
                        self.intersect_with_word(pk, token, &mut pos);
                    } else {
                        self.process_doc_id(pk, 0.0);
                        self.add_word_at(pk, token, &mut pos);
                    }
                }
            }
            self.freq_lists.push(postings);
        }
        let last = self.freq_lists.len();
        let wf = self.word_freqs.entry(token.to_string()).or_default();
        wf.doc_count += docs;
        wf.lists.extend(first..last);
        Ok(())
    }

    fn process_doc_id(&mut self, pk: &[u8], rank: f32) {
        if self.flags == Flags::OptRanking {
            return;
        }
        match self.oper {
            Oper::None => self.union_doc_id(pk, rank),
            Oper::Exist => self.intersect_doc_id(pk, rank),
            Oper::Ignore => {
                self.doc_ids.remove(pk);
            }
            Oper::Negate => self.change_ranking(pk, true),
            Oper::DecrRating => {
                self.union_doc_id(pk, rank);
                self.change_ranking(pk, true);
            }
            Oper::IncrRating => {
                self.union_doc_id(pk, rank);
                self.change_ranking(pk, false);
            }
            Oper::ExistSkip | Oper::IgnoreSkip => {}
        }
    }

    fn union_doc_id(&mut self, pk: &[u8], rank: f32) {
        if !self.doc_ids.contains_key(pk) {
            self.doc_ids.insert(
                PkKey::new(pk),
                Ranking {
                    rank,
                    words: Some(WordSet::default()),
                },
            );
        }
    }

    fn change_ranking(&mut self, pk: &[u8], downgrade: bool) {
        if let Some(r) = self.doc_ids.get_mut(pk) {
            r.rank = clamp(r.rank + if downgrade { -1.0 } else { 1.0 });
        }
    }

    fn intersect_doc_id(&mut self, pk: &[u8], mut rank: f32) {
        let taken = match self.doc_ids.get(pk) {
            None => {
                if self.multi_exist {
                    return;
                }
                false
            }
            Some(r) => {
                if r.words.is_none() {
                    return;
                }
                rank = clamp(rank + r.rank);
                true
            }
        };
        let Some(inter) = self.intersection.as_mut() else {
            return;
        };
        if !inter.contains_key(pk) {
            let words = if taken {
                self.doc_ids.get_mut(pk).and_then(|r| r.words.take())
            } else {
                None
            };
            inter.insert(
                PkKey::new(pk),
                Ranking {
                    rank,
                    words: Some(words.unwrap_or_default()),
                },
            );
        }
    }

    /// [`Self::process_doc_id`] then [`Self::add_word_at`] for a row of a `+` word,
    /// looking the row up once in each set.
    fn intersect_with_word(&mut self, pk: &[u8], word: &str, pos: &mut Option<usize>) {
        let Some(inter) = self.intersection.as_mut() else {
            self.process_doc_id(pk, 0.0);
            self.add_word_at(pk, word, pos);
            return;
        };
        let ranking = match self.doc_ids.get_mut(pk) {
            // Not found before: only the first `+` word of a list adds rows.
            None if self.multi_exist => return,
            None => inter.entry(PkKey::new(pk)).or_insert_with(|| Ranking {
                rank: 0.0,
                words: Some(WordSet::default()),
            }),
            // Taken by this intersection already (another word of a prefix).
            Some(Ranking { words: None, .. }) => match inter.get_mut(pk) {
                Some(r) => r,
                None => return,
            },
            Some(r) => {
                let rank = clamp(0.0 + r.rank);
                inter.entry(PkKey::new(pk)).or_insert_with(|| Ranking {
                    rank,
                    words: Some(r.words.take().unwrap_or_default()),
                })
            }
        };
        let Some(w) = ranking.words.as_mut() else {
            return;
        };
        w.insert(word_place(
            &mut self.word_map,
            &mut self.word_vector,
            word,
            pos,
        ));
    }

    fn add_word_to_document(&mut self, pk: &[u8], word: &str) {
        let mut pos = self.word_map.get(word).copied();
        self.add_word_at(pk, word, &mut pos);
    }

    /// Adds `word` (its place in `pos`, see [`word_place`]) to the row's
    /// matched words, if the row is in the current set.
    fn add_word_at(&mut self, pk: &[u8], word: &str, pos: &mut Option<usize>) {
        if self.flags == Flags::OptRanking {
            return;
        }
        let r = match self.intersection.as_mut().and_then(|i| i.get_mut(pk)) {
            Some(r) => Some(r),
            None => self.doc_ids.get_mut(pk),
        };
        let Some(Ranking { words: Some(w), .. }) = r else {
            return;
        };
        w.insert(word_place(
            &mut self.word_map,
            &mut self.word_vector,
            word,
            pos,
        ));
    }

    // ---- phrases and proximity ----

    fn phrase_search(&mut self, text: &str, distance: Option<u64>) -> FfiResult<()> {
        self.flags = match distance {
            Some(d) if d > 0 => Flags::Proximity,
            _ => Flags::Phrase,
        };
        // fts_query_phrase_split: the stored words, and every word from the first
        // stored one on.
        let mut tokens: Vec<String> = Vec::new();
        let mut orig: Vec<String> = Vec::new();
        for w in words(text, 0, self.fold_case, self.settings.elision).0 {
            if self.settings.indexable(&w.text) {
                self.word_freqs.entry(w.text.clone()).or_default();
                tokens.push(w.text.clone());
            }
            if !tokens.is_empty() {
                orig.push(w.text);
            }
        }
        if tokens.len() > MAX_PHRASE_WORDS {
            return Err(FfiError::new(Status::Invalid, TOO_MANY_PHRASE_WORDS));
        }
        if tokens.is_empty() {
            return Ok(());
        }
        // Each stored word's rows with positions.
        let mut lists: Vec<BTreeMap<Vec<u8>, Vec<u32>>> = Vec::with_capacity(tokens.len());
        for t in &tokens {
            let mut m = BTreeMap::new();
            let (first, mut docs) = (self.freq_lists.len(), 0u64);
            for (_, postings) in self.src.postings(t, false)? {
                let mut f = WordFreqs::new();
                for (pk, positions) in postings {
                    docs += 1;
                    f.push(&pk, positions.len() as u32);
                    m.insert(pk, positions);
                }
                self.freq_lists.push(f);
            }
            let last = self.freq_lists.len();
            let wf = self.word_freqs.entry(t.clone()).or_default();
            wf.doc_count += docs;
            wf.lists.extend(first..last);
            if m.is_empty() {
                return Ok(());
            }
            lists.push(m);
        }
        if orig.len() == 1 {
            let last = tokens[tokens.len() - 1].clone();
            let pks: Vec<Vec<u8>> = lists[0].keys().cloned().collect();
            for pk in pks {
                self.process_doc_id(&pk, 0.0);
                self.add_word_to_document(&pk, &last);
            }
            return Ok(());
        }
        let candidates: Vec<Vec<u8>> = lists[0]
            .keys()
            .filter(|pk| lists[1..].iter().all(|l| l.contains_key(*pk)))
            .cloned()
            .collect();
        for pk in candidates {
            let found = match (self.flags, distance) {
                (Flags::Proximity, Some(d)) => {
                    let positions: Vec<&Vec<u32>> =
                        lists.iter().filter_map(|l| l.get(&pk)).collect();
                    within_distance(&positions, d)
                }
                _ => self.phrase_in_document(&pk, &orig, &tokens, &lists)?,
            };
            if found {
                self.process_doc_id(&pk, 0.0);
                for t in &tokens {
                    self.add_word_to_document(&pk, t);
                }
            }
        }
        Ok(())
    }

    /// True if the row holds `orig` as consecutive words of one column, starting at
    /// a position of its first word.
    fn phrase_in_document(
        &mut self,
        pk: &[u8],
        orig: &[String],
        tokens: &[String],
        lists: &[BTreeMap<Vec<u8>, Vec<u32>>],
    ) -> FfiResult<bool> {
        let Some(starts) = lists[0].get(pk) else {
            return Ok(false);
        };
        // Every word of the phrase stored: positions decide, unless the document has
        // several columns (a phrase never spans two).
        if orig.len() == tokens.len() && self.src.single_column() {
            return Ok(starts.iter().any(|&s| {
                lists.iter().enumerate().all(|(k, l)| {
                    l.get(pk)
                        .is_some_and(|p| p.binary_search(&(s + k as u32)).is_ok())
                })
            }));
        }
        let Some(columns) = self.src.document(pk)? else {
            return Ok(false);
        };
        for col in &columns {
            for (i, w) in col.iter().enumerate() {
                if !starts.contains(&w.pos) {
                    continue;
                }
                if col.len() - i >= orig.len()
                    && col[i..i + orig.len()]
                        .iter()
                        .zip(orig)
                        .all(|(a, b)| &a.text == b)
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    // ---- WITH QUERY EXPANSION (fts_expand_query) ----

    fn expand(&mut self) -> FfiResult<()> {
        if self.doc_ids.is_empty() {
            return Ok(());
        }
        let mut tokens: BTreeSet<String> = BTreeSet::new();
        let pks: Vec<Vec<u8>> = self.doc_ids.keys().map(|k| k.as_slice().to_vec()).collect();
        for pk in pks {
            if let Some(cols) = self.src.document(&pk)? {
                for w in cols.into_iter().flatten() {
                    if self.settings.indexable(&w.text) {
                        tokens.insert(w.text);
                    }
                }
            }
        }
        for word in &self.word_vector {
            if self
                .wildcard_words
                .as_ref()
                .is_some_and(|s| s.contains(word))
            {
                tokens.retain(|t| !t.starts_with(word.as_str()));
            } else {
                tokens.remove(word);
            }
        }
        self.oper = Oper::None;
        // InnoDB adds them in its collation's order (a word's weight: its upper
        // case for the ci collations), which sets the order relevance is summed in.
        let mut tokens: Vec<String> = tokens.into_iter().collect();
        tokens.sort_by_cached_key(|t| t.to_uppercase());
        for t in tokens {
            self.word_freqs.entry(t.clone()).or_default();
            self.read_word(&t, false)?;
        }
        Ok(())
    }

    // ---- relevance ----

    fn idf(&self, wf: &WordFreq) -> f64 {
        if wf.doc_count == 0 {
            0.0
        } else if self.total_docs == wf.doc_count {
            1.0001f64.log10()
        } else {
            (self.total_docs as f64 / wf.doc_count as f64).log10()
        }
    }

    fn result(mut self) -> FfiResult<Vec<(Vec<u8>, f32)>> {
        let idfs: HashMap<String, f64> = self
            .word_freqs
            .iter()
            .map(|(w, wf)| (w.clone(), self.idf(wf)))
            .collect();
        for (w, wf) in self.word_freqs.iter_mut() {
            wf.idf = idfs.get(w).copied().unwrap_or(0.0);
        }
        let mut bm25 = match self.model {
            RankingModel::Innodb => None,
            RankingModel::Bm25 => Some(Bm25::new(self.src, self.total_docs)?),
        };
        let lists = std::mem::take(&mut self.freq_lists);
        if self.flags == Flags::OptRanking {
            // The lone term's rows: tf × idf² (or its BM25 weight).
            let Some(wf) = self.word_freqs.values().next() else {
                return Ok(Vec::new());
            };
            let freqs = Freqs::new(wf, &lists);
            let df = if bm25.is_some() { freqs.rows() } else { 0 };
            let rows = freqs.sorted_rows();
            let mut out = Vec::with_capacity(rows.len());
            for (pk, f) in rows {
                let rank = match bm25.as_mut() {
                    Some(b) => b.weight(self.src, df, pk, f)? as f32,
                    None => (f as f32 as f64 * wf.idf * wf.idf) as f32,
                };
                out.push((pk.to_vec(), rank));
            }
            return Ok(out);
        }
        // Each matched word's tf per row, idf and (BM25) document frequency.
        let words: Vec<Option<(Freqs, f64, usize)>> = self
            .word_vector
            .iter()
            .map(|w| {
                self.word_freqs.get(w).map(|wf| {
                    let freqs = Freqs::new(wf, &lists);
                    let df = if bm25.is_some() { freqs.rows() } else { 0 };
                    (freqs, wf.idf, df)
                })
            })
            .collect();
        let mut out = Vec::with_capacity(self.doc_ids.len());
        for (pk, r) in std::mem::take(&mut self.doc_ids) {
            let pk = pk.as_slice().to_vec();
            let mut rank = r.rank;
            for w in r.words.iter().flat_map(WordSet::iter) {
                let Some(Some((freqs, idf, df))) = words.get(w) else {
                    continue;
                };
                let Some(f) = freqs.get(&pk) else {
                    continue;
                };
                match bm25.as_mut() {
                    Some(b) => rank += b.weight(self.src, *df, &pk, f)? as f32,
                    None => {
                        let weight = f as f64 * idf;
                        rank += (weight * idf) as f32;
                    }
                }
            }
            out.push((pk, rank));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// What BM25 needs besides a word's postings: the collection size and the mean
/// document length.
struct Bm25 {
    total_docs: f64,
    avgdl: Option<f64>,
}

impl Bm25 {
    fn new(src: &mut dyn Source, total_docs: u64) -> FfiResult<Self> {
        Ok(Bm25 {
            total_docs: total_docs as f64,
            avgdl: src.average_doc_length()?.filter(|&a| a > 0.0),
        })
    }

    /// The BM25 weight of a word held by `df` rows, occurring `tf` times in row `pk`.
    fn weight(&mut self, src: &mut dyn Source, df: usize, pk: &[u8], tf: u32) -> FfiResult<f64> {
        let df = df as f64;
        let n = self.total_docs.max(df);
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let tf = f64::from(tf);
        let norm = match (self.avgdl, src.doc_length(pk)?) {
            (Some(avgdl), Some(dl)) => 1.0 - BM25_B + BM25_B * f64::from(dl) / avgdl,
            _ => 1.0,
        };
        Ok(idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm))
    }
}

/// `"..." @N`: some window holding one position of each word spans at most N words
/// (fts_proximity_get_positions, then the word count of fts_proximity_is_word_in_range).
fn within_distance(positions: &[&Vec<u32>], distance: u64) -> bool {
    let n = positions.len();
    let mut idx = vec![0usize; n];
    let mut min_idx = 0;
    // Each list ends with an "undefined" marker, as InnoDB's.
    let len = |i: usize| positions[i].len() + 1;
    while idx[min_idx] < len(min_idx) {
        let mut min_pos = u64::MAX;
        let mut max_pos = 0u64;
        let mut complete = true;
        for i in 0..n {
            let Some(&p) = positions[i].get(idx[i]) else {
                complete = false;
                break;
            };
            let p = u64::from(p);
            if p < min_pos {
                min_pos = p;
                min_idx = i;
            }
            if p > max_pos {
                max_pos = p;
            }
        }
        if complete && max_pos - min_pos < distance {
            return true;
        }
        idx[min_idx] += 1;
    }
    false
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    fn list(rows: &[(&[u8], u32)]) -> WordFreqs {
        let mut l = WordFreqs::new();
        for (pk, tf) in rows {
            l.push(pk, *tf);
        }
        l
    }

    #[test]
    fn word_freqs_find_sorted_and_unsorted() {
        let l = list(&[(b"a", 1), (b"ab", 2), (b"b", 3), (b"\xff", 4)]);
        assert!(l.sorted);
        assert_eq!(l.find(b"ab"), Some(2));
        assert_eq!(l.find(b"\xff"), Some(4));
        assert_eq!(l.find(b"aa"), None);
        assert_eq!(l.find(b""), None);
        let u = list(&[(b"b", 3), (b"a", 1)]);
        assert!(!u.sorted);
        assert_eq!(u.find(b"a"), Some(1));
        assert_eq!(u.find(b"c"), None);
        assert_eq!(
            u.iter().collect::<Vec<_>>(),
            vec![(&b"b"[..], 3), (&b"a"[..], 1)]
        );
    }

    #[test]
    fn freqs_first_list_wins_searched_or_merged() {
        let lists: Vec<WordFreqs> = (0..6u32)
            .map(|i| list(&[(b"x", i + 1), (&[b'y', i as u8], 10 + i)]))
            .collect();
        for n in [1usize, 2, SEARCHED_LISTS, SEARCHED_LISTS + 2] {
            let wf = WordFreq {
                lists: (0..n).collect(),
                ..Default::default()
            };
            let f = Freqs::new(&wf, &lists);
            assert_eq!(f.get(b"x"), Some(1), "{n} lists");
            assert_eq!(f.get(&[b'y', (n - 1) as u8]), Some(10 + n as u32 - 1));
            assert_eq!(f.get(b"z"), None);
            assert_eq!(f.rows(), n + 1);
            let rows = f.sorted_rows();
            assert_eq!(rows.len(), n + 1);
            assert!(rows.windows(2).all(|w| w[0].0 < w[1].0));
            assert_eq!(rows[0], (&b"x"[..], 1));
        }
    }

    #[test]
    fn word_set_iterates_in_order() {
        let mut s = WordSet::default();
        for w in [70, 3, 63, 0, 64, 3, 200, 70] {
            s.insert(w);
        }
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63, 64, 70, 200]);
    }

    #[test]
    fn pk_keys_found_by_their_bytes() {
        let long = vec![7u8; INLINE_PK + 5];
        let mut m: Docs = Docs::default();
        for pk in [&b""[..], b"\x80\x00\x00\x01", &long[..INLINE_PK], &long] {
            m.insert(
                PkKey::new(pk),
                Ranking {
                    rank: pk.len() as f32,
                    words: None,
                },
            );
        }
        assert_eq!(m.len(), 4);
        assert_eq!(m.get(&long[..]).map(|r| r.rank), Some(long.len() as f32));
        assert_eq!(
            m.get(&long[..INLINE_PK]).map(|r| r.rank),
            Some(INLINE_PK as f32)
        );
        assert_eq!(m.get(&b"\x80\x00\x00\x01"[..]).map(|r| r.rank), Some(4.0));
        assert_eq!(m.get(&b""[..]).map(|r| r.rank), Some(0.0));
        assert!(!m.contains_key(&long[..3]));
    }
}
