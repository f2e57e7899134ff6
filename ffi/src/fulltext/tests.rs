use super::eval::{Eval, RankingModel, Source, WordPostings};
use super::parser::parse;
use super::postings::*;
use super::tokenizer::{is_word_char, words, Settings, Word};
use crate::status::FfiResult;

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
    let t = document_terms(
        &doc(&["The STRAßE is in Köln, x_y 42 abc", "abc déjà"]),
        &Settings::legacy(),
    )
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
    assert!(document_columns(&[5, 0, 0, 0, b'a'], true).is_err());
}

#[test]
fn case_sensitive_document_columns_keep_case() {
    let mut d = doc(&["Hello hello HELLO", "Hello"]);
    // The second column's length carries the case-sensitive bit.
    let at = 4 + "Hello hello HELLO".len();
    d[at + 3] |= 0x80;
    let t = document_terms(&d, &Settings::legacy()).expect("terms");
    assert_eq!(t["hello"], vec![0, 1, 2]);
    assert_eq!(t["Hello"], vec![3]);
    assert_eq!(t.len(), 2);
}

/// An in-memory index over a few one-column documents.
struct Mem {
    docs: Vec<(Vec<u8>, String)>,
    settings: Settings,
}

impl Source for Mem {
    fn postings(&mut self, word: &str, prefix: bool) -> FfiResult<Vec<(String, WordPostings)>> {
        let mut by_word: std::collections::BTreeMap<String, WordPostings> = Default::default();
        for (pk, text) in &self.docs {
            for (w, pos) in document_terms(&doc(&[text]), &self.settings)? {
                if (prefix && w.starts_with(word)) || w == word {
                    by_word.entry(w).or_default().push((pk.clone(), pos));
                }
            }
        }
        Ok(by_word.into_iter().collect())
    }
    fn document(&mut self, pk: &[u8]) -> FfiResult<Option<Vec<Vec<Word>>>> {
        Ok(self
            .docs
            .iter()
            .find(|(k, _)| k == pk)
            .map(|(_, t)| vec![words(t, 0, true, self.settings.elision).0]))
    }
    fn single_column(&self) -> bool {
        true
    }
    fn doc_length(&mut self, pk: &[u8]) -> FfiResult<Option<u32>> {
        let Some((_, text)) = self.docs.iter().find(|(k, _)| k == pk) else {
            return Ok(None);
        };
        let terms = document_terms(&doc(&[text]), &self.settings)?;
        Ok(Some(terms.values().map(|p| p.len() as u32).sum()))
    }
    fn average_doc_length(&mut self) -> FfiResult<Option<f64>> {
        let pks: Vec<Vec<u8>> = self.docs.iter().map(|(k, _)| k.clone()).collect();
        let mut sum = 0u64;
        for pk in &pks {
            sum += u64::from(self.doc_length(pk)?.unwrap_or(0));
        }
        Ok((!pks.is_empty()).then(|| sum as f64 / pks.len() as f64))
    }
}

/// Runs query `q` over `docs` (row keys 1, 2, ...) with `settings` and `model`.
fn run_with(
    docs: &[&str],
    q: &str,
    boolean: bool,
    settings: Settings,
    model: RankingModel,
) -> Vec<(u8, f32)> {
    let mut m = Mem {
        docs: docs
            .iter()
            .enumerate()
            .map(|(i, t)| (vec![i as u8 + 1], t.to_string()))
            .collect(),
        settings: settings.clone(),
    };
    let mut ast = parse(q, boolean, &settings, true).ok().unwrap_or_default();
    let ev = Eval::new(&mut m, &settings, true, docs.len() as u64, false).with_ranking(model);
    ev.run(&mut ast, false)
        .expect("run")
        .into_iter()
        .map(|(k, r)| (k[0], r))
        .collect()
}

fn run(q: &str, boolean: bool) -> Vec<(u8, f32)> {
    let docs = [
        "database tutorial for beginners",
        "offset from the start of the database",
        "examples are the best offset",
        "nothing here",
    ];
    run_with(&docs, q, boolean, Settings::legacy(), RankingModel::Innodb)
}

fn ids(q: &str) -> Vec<u8> {
    run(q, true).into_iter().map(|(k, _)| k).collect()
}

#[test]
fn boolean_operators_as_innodb() {
    assert_eq!(ids("+database -tutorial"), vec![2]);
    assert_eq!(ids("database offset"), vec![1, 2, 3]);
    assert_eq!(ids("+database +offset"), vec![2]);
    // `~` only lowers rows found by other words; alone it finds nothing.
    assert_eq!(ids("~database"), Vec::<u8>::new());
    assert_eq!(ids("offset ~database"), vec![2, 3]);
    let r = run("offset ~database", true);
    assert!(r[0].1 < 0.0 && r[1].1 > 0.0, "{r:?}");
    // A stopword or a short word with `+` matches nothing.
    assert_eq!(ids("+the offset"), Vec::<u8>::new());
    // Phrases: stopwords inside are checked against the text.
    assert_eq!(ids("\"offset from\""), vec![2]);
    assert_eq!(ids("\"examples are the\""), vec![3]);
    // "offset from the start of the database": 7 words from one to the other.
    assert_eq!(ids("\"offset database\" @6"), Vec::<u8>::new());
    assert_eq!(ids("\"offset database\" @7"), vec![2]);
    assert_eq!(ids("data*"), vec![1, 2]);
}

#[test]
fn relevance_is_tf_idf_squared() {
    // One term: tf × log10(N/df)².
    let r = run("offset", false);
    let idf = (4.0f64 / 2.0).log10();
    assert_eq!(r, vec![(2, (idf * idf) as f32), (3, (idf * idf) as f32)]);
}

#[test]
fn index_words_count_rows_and_occurrences_and_skip_the_settings_key() {
    use super::inspect::{index_words, WordCount};
    use tidesdb_core::{CfOptions, Db, DbOptions, Isolation};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let cf = db.create_cf("t1.i1", CfOptions::default()).expect("cf");
    let settings = Settings::legacy();
    let mut txn = db.begin(Isolation::ReadCommitted);
    super::settings::set_for_index(&mut txn, &cf, Settings::current(None)).expect("settings");
    apply_document(
        &mut txn,
        &cf,
        &settings,
        b"k1",
        &doc(&["tide tide moon"]),
        true,
    )
    .expect("put");
    apply_document(
        &mut txn,
        &cf,
        &settings,
        b"k2",
        &doc(&["moon", "tide"]),
        true,
    )
    .expect("put");
    apply_document(&mut txn, &cf, &settings, b"k3", &doc(&["sea"]), true).expect("put");
    apply_document(&mut txn, &cf, &settings, b"k3", &doc(&["sea"]), false).expect("delete");
    txn.commit().expect("commit");

    let mut txn = db.begin(Isolation::RepeatableRead);
    let mut out = Vec::new();
    index_words(&mut txn, &cf, |w| {
        out.push(w);
        Ok(())
    })
    .expect("words");
    let w = |word: &str, doc_count, occurrences| WordCount {
        word: word.as_bytes().to_vec(),
        doc_count,
        occurrences,
    };
    assert_eq!(out, vec![w("moon", 2, 2), w("tide", 2, 3)]);
}

/// The tokenizer's ASCII path splits and folds as the `char` path does (the
/// definition: `is_word_char`, Unicode lower-casing), on texts mixing ASCII,
/// accented and other scripts, digits, `_` and punctuation.
#[test]
fn ascii_path_matches_char_path() {
    fn by_char(
        text: &str,
        start: u32,
        fold_case: bool,
        elision: bool,
    ) -> (Vec<(String, u32)>, u32) {
        let mut out = Vec::new();
        let mut cur = String::new();
        let (mut read, mut pos) = (0, start);
        for c in text.chars() {
            if is_word_char(c) {
                read += 1;
                if fold_case {
                    cur.extend(c.to_lowercase());
                } else {
                    cur.push(c);
                }
                continue;
            }
            if elision && c == '\'' && read == 1 {
                // A one-character word before an apostrophe: no word.
                cur.clear();
            } else if !cur.is_empty() {
                out.push((std::mem::take(&mut cur), pos));
                pos += 1;
            }
            read = 0;
        }
        if !cur.is_empty() {
            out.push((cur, pos));
            pos += 1;
        }
        (out, pos)
    }
    let alphabet: Vec<char> = "aZ09_ .,-'\t\nÉéßİıΣσ日本語\u{300}Ωx€".chars().collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..2000 {
        let mut text = String::new();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 40) as usize;
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            text.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        for (fold_case, elision) in [(true, true), (false, true), (true, false), (false, false)] {
            let (ws, next) = words(&text, 7, fold_case, elision);
            let got: Vec<(String, u32)> = ws.iter().map(|w| (w.text.clone(), w.pos)).collect();
            let (want, want_next) = by_char(&text, 7, fold_case, elision);
            assert_eq!(
                got, want,
                "text {text:?} fold_case {fold_case} elision {elision}"
            );
            assert_eq!(next, want_next);
        }
    }
}

fn run_model(docs: &[&str], q: &str, boolean: bool, model: RankingModel) -> Vec<(u8, f32)> {
    run_with(
        docs,
        q,
        boolean,
        Settings::current(Some(Default::default())),
        model,
    )
}

/// BM25 finds InnoDB's rows; it ranks a word in a short document above the same
/// word once in a long one, more occurrences higher (saturating), and a rarer word
/// above a common one; operators still shift relevance.
#[test]
fn bm25_ranks_by_length_frequency_and_rarity() {
    let docs = [
        "apple banana",
        "apple cherry grape melon peach plum lemon lime mango kiwi",
        "apple apple apple cherry",
        "banana cherry",
        "grape",
    ];
    for (q, boolean) in [
        ("apple", false),
        ("apple cherry", false),
        ("+apple -banana", true),
        ("apple >cherry", true),
    ] {
        let ids = |model| {
            let mut v: Vec<u8> = run_model(&docs, q, boolean, model)
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            ids(RankingModel::Bm25),
            ids(RankingModel::Innodb),
            "rows of {q}"
        );
    }
    let rank = |q: &str, boolean: bool| -> std::collections::HashMap<u8, f32> {
        run_model(&docs, q, boolean, RankingModel::Bm25)
            .into_iter()
            .collect()
    };
    let apple = rank("apple", false);
    assert!(apple[&1] > apple[&2], "short beats long: {apple:?}");
    assert!(
        apple[&3] > apple[&1],
        "three occurrences beat one: {apple:?}"
    );
    assert!(apple.values().all(|&r| r > 0.0));
    // 'melon' (one document) is rarer than 'cherry' (three).
    let melon = rank("melon", false);
    let cherry = rank("cherry", false);
    assert!(melon[&2] > cherry[&2], "{melon:?} {cherry:?}");
    // '>' raises a row's relevance over the same query without it.
    let plain = rank("apple cherry", true);
    let raised = rank("apple >cherry", true);
    assert!(raised[&2] > plain[&2], "{plain:?} {raised:?}");
}

/// The deferred buffer writes exactly the keys and values `apply_document` puts one
/// by one: over random documents (ASCII, accented, case-sensitive columns, repeated
/// words, stopwords), primary keys in ascending and in random order, three indexes
/// (with and without document lengths, one without stopwords: a word is a stopword
/// of one index and not of another), a truncated row and a repeated row.
#[test]
fn deferred_postings_write_what_apply_document_writes() {
    use super::deferred::DeferredPostings;
    use tidesdb_core::{CfOptions, Db, DbOptions, Isolation, IterOptions};
    let vocab = [
        "tide",
        "Tide",
        "moon",
        "the",
        "sea",
        "déjà",
        "Straße",
        "ab",
        "x_y",
        "42",
        "moonlight",
        "ÉCOLE",
        "école",
        "of",
        "tidesdb",
        "a",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let dump = |db: &Db, cf: &tidesdb_core::Cf| {
        let mut txn = db.begin(Isolation::RepeatableRead);
        let mut it = txn.iter(cf, IterOptions::default()).expect("iter");
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    };
    for ordered in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let with_lengths = Settings::current(Some(super::tokenizer::default_stopwords()));
        let legacy = Settings::legacy();
        let no_stopwords = Settings::current(None);
        let cfs: Vec<_> = (0..6)
            .map(|i| {
                db.create_cf(&format!("t1.i{i}"), CfOptions::default())
                    .expect("cf")
            })
            .collect();
        let mut pks: Vec<u32> = (0..300).collect();
        if !ordered {
            for i in (1..pks.len()).rev() {
                pks.swap(i, next(i as u64 + 1) as usize);
            }
        }
        pks.push(pks[7]);
        let mut direct = db.begin(Isolation::ReadCommitted);
        let mut buffered = db.begin(Isolation::ReadCommitted);
        let mut deferred = DeferredPostings::default();
        for (n, &pk) in pks.iter().enumerate() {
            let mut d = Vec::new();
            for col in 0..1 + next(2) {
                let text: Vec<&str> = (0..next(30))
                    .map(|_| vocab[next(vocab.len() as u64) as usize])
                    .collect();
                let text = text.join(if next(2) == 0 { " " } else { ", " });
                let mut len = text.len() as u32;
                if col == 1 && next(3) == 0 {
                    len |= DOC_CASE_SENSITIVE;
                }
                d.extend_from_slice(&len.to_le_bytes());
                d.extend_from_slice(text.as_bytes());
            }
            let key = pk.to_be_bytes();
            for (settings, (dcf, bcf)) in [
                (&with_lengths, (&cfs[0], &cfs[3])),
                (&legacy, (&cfs[1], &cfs[4])),
                (&no_stopwords, (&cfs[2], &cfs[5])),
            ] {
                let mark = deferred.mark();
                if n % 50 == 3 {
                    // A row whose ops failed: buffered, then dropped.
                    deferred
                        .add_document(bcf, settings, &key, &d)
                        .expect("defer");
                    deferred.truncate(mark);
                }
                apply_document(&mut direct, dcf, settings, &key, &d, true).expect("put");
                deferred
                    .add_document(bcf, settings, &key, &d)
                    .expect("defer");
            }
            if n % 97 == 96 {
                deferred.flush(&mut buffered).expect("flush");
            }
        }
        deferred.flush(&mut buffered).expect("flush");
        assert!(deferred.is_empty() && deferred.bytes() == 0);
        direct.commit().expect("commit");
        buffered.commit().expect("commit");
        for i in 0..3 {
            let (a, b) = (dump(&db, &cfs[i]), dump(&db, &cfs[i + 3]));
            assert!(!a.is_empty());
            assert_eq!(a, b, "index {i}, ordered {ordered}");
        }
    }
}

/// A document's buffered bytes are its postings' keys and values, as put one by one.
#[test]
fn deferred_bytes_count_keys_and_values() {
    use super::deferred::DeferredPostings;
    use tidesdb_core::{CfOptions, Db, DbOptions};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let cf = db.create_cf("t1.i1", CfOptions::default()).expect("cf");
    let s = Settings::current(None);
    let d = doc(&["tide moon tide"]);
    let mut deferred = DeferredPostings::default();
    deferred.add_document(&cf, &s, b"pk", &d).expect("defer");
    let terms = document_terms(&d, &s).expect("terms");
    let mut want = doc_length_key(b"pk").len() + doc_length_value(3).len();
    for (w, p) in &terms {
        want += posting_key(w, b"pk").len() + posting_value(p).len();
    }
    assert_eq!(deferred.bytes(), want);
    assert!(document_terms(&[9, 0, 0, 0, b'a'], &s).is_err());
    assert!(deferred
        .add_document(&cf, &s, b"pk", &[9, 0, 0, 0, b'a'])
        .is_err());
}

#[test]
fn result_relevance_by_key_in_either_order() {
    let rows = vec![(vec![3u8], 0.5f32), (vec![1u8], 0.25), (vec![2u8, 0], 0.75)];
    for pk_sorted in [false, true] {
        let mut rows = rows.clone();
        if pk_sorted {
            rows.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let r = super::FtResult {
            rows,
            pk_sorted,
            by_pk: std::cell::OnceCell::new(),
            next: 0,
        };
        assert_eq!(r.relevance(&[3]), 0.5);
        assert_eq!(r.relevance(&[1]), 0.25);
        assert_eq!(r.relevance(&[2, 0]), 0.75);
        assert_eq!(r.relevance(&[2]), 0.0);
    }
}

/// InnoDB's tokenizer drops a one-character word followed by an apostrophe and
/// starts the next word after it; an index built before the rule (no elision)
/// keeps the word.
#[test]
fn one_character_word_before_apostrophe_is_no_word() {
    let text = "l'homme O'Reilly can't GPL-2'. a''b";
    let (ws, next) = words(text, 0, true, true);
    let got: Vec<(&str, u32)> = ws.iter().map(|w| (w.text.as_str(), w.pos)).collect();
    assert_eq!(
        got,
        vec![
            ("homme", 0),
            ("reilly", 1),
            ("can", 2),
            ("t", 3),
            ("gpl", 4),
            ("b", 5)
        ]
    );
    assert_eq!(next, 6);
    let (ws, next) = words(text, 0, true, false);
    let got: Vec<&str> = ws.iter().map(|w| w.text.as_str()).collect();
    assert_eq!(
        got,
        vec!["l", "homme", "o", "reilly", "can", "t", "gpl", "2", "a", "b"]
    );
    assert_eq!(next, 10);
    // Not at the end of a longer word, nor before another character.
    let (ws, _) = words("ab'c 2-x 2\u{2019}s", 0, true, true);
    let got: Vec<&str> = ws.iter().map(|w| w.text.as_str()).collect();
    assert_eq!(got, vec!["ab", "c", "2", "x", "2", "s"]);
}

/// A phrase ending in `GPL-2'.` is InnoDB's `licenses gpl` (so it matches
/// `GPL-1'.` too), `GPL-2` does not match a row's `GPL-2'.`, and a phrase whose
/// words are all stored matches across a dropped word by positions alone.
#[test]
fn phrase_with_one_character_word_before_apostrophe_matches_as_innodb() {
    let docs = [
        "see `/usr/share/common-licenses/GPL-1'.",
        "see `/usr/share/common-licenses/GPL-2'.",
        "see /usr/share/common-licenses/GPL-2 here",
        "my $cred = run_credential(['-f', $netrc, 'get');",
    ];
    let ids = |q: &str, settings: Settings| -> Vec<u8> {
        run_with(&docs, q, true, settings, RankingModel::Innodb)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    let elision = || Settings {
        elision: true,
        ..Settings::legacy()
    };
    assert_eq!(ids("\"common-licenses/gpl-2'.\"", elision()), vec![1, 2, 3]);
    assert_eq!(ids("\"licenses/gpl-2\"", elision()), vec![3]);
    assert_eq!(ids("\"licenses/gpl-2 here\"", elision()), vec![3]);
    let cred = "\"$cred = run_credential(['-f', $netrc,\"";
    assert_eq!(ids(cred, elision()), vec![4]);
    // An index without elision: the one-character words are words.
    assert_eq!(
        ids("\"common-licenses/gpl-2'.\"", Settings::legacy()),
        vec![2, 3]
    );
    assert_eq!(ids(cred, Settings::legacy()), vec![4]);
}
