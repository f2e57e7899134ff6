//! What `INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE` shows (as InnoDB's
//! `INNODB_FT_INDEX_TABLE` for `innodb_ft_aux_table`): the words a table's FULLTEXT
//! indexes hold, each with the number of rows holding it and its occurrences in them,
//! read at one snapshot of committed data.
use std::ffi::{c_char, c_int, c_void};

use tidesdb_core::{Cf, Isolation, IterOptions, Txn};

use super::{postings, settings};
use crate::engine::engine;
use crate::foreign_keys::{KeyDef, KEY_FULLTEXT, KEY_UNUSABLE};
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};

/// One word of one index.
#[derive(Debug, PartialEq, Eq)]
pub struct WordCount {
    pub word: Vec<u8>,
    pub doc_count: u64,
    pub occurrences: u64,
}

/// The words of one FULLTEXT index's family, in word order.
pub fn index_words(
    txn: &mut Txn,
    cf: &Cf,
    mut each: impl FnMut(WordCount) -> FfiResult<()>,
) -> FfiResult<()> {
    let mut it = txn.iter(cf, IterOptions::default())?;
    it.seek(&[]);
    let mut current: Option<WordCount> = None;
    while it.valid() {
        let (word, _pk) = postings::split_key(it.key())?;
        // The settings key (an empty word) is no posting.
        if !word.is_empty() {
            let tf = u64::from(postings::term_frequency(it.value())?);
            match current.as_mut() {
                Some(c) if c.word == word => {
                    c.doc_count += 1;
                    c.occurrences += tf;
                }
                _ => {
                    if let Some(done) = current.take() {
                        each(done)?;
                    }
                    current = Some(WordCount {
                        word: word.to_vec(),
                        doc_count: 1,
                        occurrences: tf,
                    });
                }
            }
        }
        it.next();
    }
    it.status()?;
    if let Some(done) = current {
        each(done)?;
    }
    Ok(())
}

/// The FULLTEXT keys of `keys`: flagged so, or (keys recorded before the flag)
/// unusable for constraints and holding FULLTEXT settings in their family.
fn fulltext_keys(
    txn: &mut Txn,
    keys: Vec<KeyDef>,
    cf_of: impl Fn(u32) -> FfiResult<Cf>,
) -> FfiResult<Vec<(KeyDef, Cf)>> {
    let mut out = Vec::new();
    for k in keys {
        if k.flags & (KEY_FULLTEXT | KEY_UNUSABLE) == 0 || k.engine_index == 0 {
            continue;
        }
        let cf = cf_of(k.engine_index)?;
        if k.flags & KEY_FULLTEXT != 0 || txn.get(&cf, settings::SETTINGS_KEY)?.is_some() {
            out.push((k, cf));
        }
    }
    Ok(out)
}

fn table_fulltext_keys(txn: &mut Txn, name: &str) -> FfiResult<Vec<(KeyDef, Cf)>> {
    let e = engine()?;
    let shared = e.catalog.open_table(&e.db, name)?;
    let keys = e.fks.keys(&e.db, e.catalog.cf(), name)?;
    fulltext_keys(txn, keys, |i| shared.cf(i))
}

/// The shim's row callback (see `tdb_ft_index_words` in the header).
pub type WordCallback = unsafe extern "C" fn(
    ctx: *mut c_void,
    key_name: *const c_char,
    key_name_len: usize,
    word: *const u8,
    word_len: usize,
    doc_count: u64,
    occurrences: u64,
) -> c_int;

/// # Safety
/// `name` NUL-terminated; `cb` callable with `ctx` during the call.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_index_words(
    name: *const c_char,
    cb: WordCallback,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        let e = engine()?;
        let mut txn = e.db.begin(Isolation::RepeatableRead);
        for (key, cf) in table_fulltext_keys(&mut txn, name)? {
            index_words(&mut txn, &cf, |w| {
                // SAFETY: the shim's callback, given buffers valid for the call.
                let rc = unsafe {
                    cb(
                        ctx,
                        key.name.as_ptr().cast(),
                        key.name.len(),
                        w.word.as_ptr(),
                        w.word.len(),
                        w.doc_count,
                        w.occurrences,
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(FfiError::new(
                        Status::Internal,
                        "INFORMATION_SCHEMA row not stored",
                    ))
                }
            })?;
        }
        Ok(())
    })
}

/// # Safety
/// `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tdb_ft_table_has_index(name: *const c_char) -> c_int {
    guard_value(0, || {
        // SAFETY: NUL-terminated by contract.
        let name = unsafe { raw::str(name) }?;
        let e = engine()?;
        let mut txn = e.db.begin(Isolation::ReadCommitted);
        Ok(c_int::from(
            !table_fulltext_keys(&mut txn, name)?.is_empty(),
        ))
    })
}
