//! Index cursors. The handler's read modes (KEY_EXACT, AFTER_KEY, KEY_OR_PREV, ...)
//! compare only the key parts the server supplied, a prefix of the encoded key; the
//! seek modes here are those prefix comparisons over the engine's byte-ordered keys.
//!
//! Locking cursors in REPEATABLE READ and SERIALIZABLE lock the key ranges they pass
//! (next-key locking, see [`Gap`]), so no other transaction can insert into a range
//! a locking read has scanned until this transaction ends.
use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use tidesdb_core::{Cf, GapLocker, IterOptions, TxnIter};

use crate::catalog::TableShared;
use crate::raw;
use crate::spatial::{Mbr, Mode, SpatialScan};
use crate::status::{guard, FfiError, FfiResult, Status};
use crate::table::{prefix_successor, Table};
use crate::trx::Trx;

/// `tdb_cursor` of the header.
pub struct Cursor {
    iter: TxnIter,
    gap: Option<Gap>,
    shared: Arc<TableShared>,
    index: u32,
    /// The window search `tdb_cursor_next` continues, if the last seek was one
    /// (it takes no gap locks: a locking spatial read locks the rows it returns).
    spatial: Option<SpatialScan>,
}

/// Next-key locking of a locking cursor (as InnoDB in REPEATABLE READ): each move
/// locks the range from where it started to the key it lands on, both included
/// (to the end of the index if it lands nowhere). A seek also covers the gap
/// before its target (from the previous key on), except when it finds the exact
/// primary key it looked for. A range scan thus locks the gaps between its rows
/// and the gap up to and including the first key past its end, which the server
/// reads to see that the range is over.
struct Gap {
    locker: GapLocker,
    cf: Cf,
    timeout: Duration,
    primary: bool,
}

/// A cursor move, in a form that can be repeated with a fresh read.
enum Move {
    Seek(SeekMode, Vec<u8>),
    /// First key > the given one.
    Next(Vec<u8>),
    /// Last key < the given one.
    Prev(Vec<u8>),
}

impl Move {
    fn forward(&self) -> bool {
        match self {
            Move::Seek(m, _) => matches!(m, SeekMode::First | SeekMode::Ge | SeekMode::GtPrefix),
            Move::Next(_) => true,
            Move::Prev(_) => false,
        }
    }

    fn run(&self, iter: &mut TxnIter) {
        match self {
            Move::Seek(mode, key) => seek(iter, *mode, key),
            Move::Next(from) => {
                iter.seek(from);
                if iter.valid() && iter.key() == from.as_slice() {
                    iter.next();
                }
            }
            Move::Prev(from) => seek(iter, SeekMode::Lt, from),
        }
    }
}

/// The current key, if positioned.
fn here(iter: &TxnIter) -> Option<Vec<u8>> {
    iter.valid().then(|| iter.key().to_vec())
}

impl Cursor {
    /// Moves; a locking cursor then locks the range the move passed (see [`Gap`]).
    fn step(&mut self, mv: Move) -> FfiResult<()> {
        let Some(gap) = &self.gap else {
            mv.run(&mut self.iter);
            return Ok(());
        };
        let iter = &mut self.iter;
        // Lower end of a forward seek: the key before the target (for "> t": the
        // last key <= t).
        let before = match &mv {
            Move::Seek(mode @ (SeekMode::Ge | SeekMode::GtPrefix), t) => {
                let back = if *mode == SeekMode::Ge {
                    SeekMode::Lt
                } else {
                    SeekMode::LePrefix
                };
                seek(iter, back, t);
                iter.status()?;
                Some(here(iter).unwrap_or_default())
            }
            _ => None,
        };
        match &mv {
            // Cheap steps first; a repeated move re-seeks.
            Move::Next(_) => iter.next(),
            Move::Prev(_) => iter.prev(),
            Move::Seek(..) => mv.run(iter),
        }
        loop {
            iter.status()?;
            let at = here(iter);
            let (lo, hi): (Vec<u8>, Option<Vec<u8>>) = if mv.forward() {
                let lo = match (&mv, before.as_ref()) {
                    (Move::Seek(SeekMode::Ge, t), _)
                        if gap.primary && at.as_deref() == Some(t.as_slice()) =>
                    {
                        t.clone()
                    }
                    (_, Some(b)) => b.clone(),
                    (Move::Seek(_, t), None) | (Move::Next(t), None) | (Move::Prev(t), None) => {
                        t.clone()
                    }
                };
                (lo, at.clone())
            } else {
                let hi = match &mv {
                    Move::Seek(SeekMode::Last, _) => None,
                    Move::Seek(SeekMode::LePrefix, t) => prefix_successor(t),
                    Move::Seek(_, t) | Move::Prev(t) | Move::Next(t) => Some(t.clone()),
                };
                (at.clone().unwrap_or_default(), hi)
            };
            gap.locker
                .lock_range(&gap.cf, &lo, hi.as_deref(), gap.timeout)?;
            if iter.read_seq() == gap.locker.latest_seq() {
                return Ok(());
            }
            // Commits since the read: read again. Nobody can insert into the
            // locked range any more, so the new position is inside it unless the
            // key it ended at was deleted; then lock on to the new position.
            mv.run(iter);
            iter.status()?;
            let inside = if mv.forward() {
                hi.is_none() || (iter.valid() && hi.as_deref().is_some_and(|h| iter.key() <= h))
            } else if iter.valid() {
                iter.key() >= lo.as_slice()
            } else {
                lo.is_empty()
            };
            if inside {
                return Ok(());
            }
        }
    }
}

/// `enum tdb_seek_mode` of the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekMode {
    First,
    Last,
    /// First key >= k.
    Ge,
    /// First key > k that does not start with k.
    GtPrefix,
    /// Last key that is < k or starts with k.
    LePrefix,
    /// Last key < k.
    Lt,
}

impl SeekMode {
    fn from_raw(mode: u32) -> FfiResult<SeekMode> {
        Ok(match mode {
            0 => SeekMode::First,
            1 => SeekMode::Last,
            2 => SeekMode::Ge,
            3 => SeekMode::GtPrefix,
            4 => SeekMode::LePrefix,
            5 => SeekMode::Lt,
            other => {
                return Err(FfiError::new(
                    Status::Invalid,
                    format!("unknown seek mode {other}"),
                ))
            }
        })
    }
}

/// Positions `iter` by `mode`.
pub fn seek(iter: &mut TxnIter, mode: SeekMode, key: &[u8]) {
    match mode {
        SeekMode::First => iter.seek_to_first(),
        SeekMode::Last => iter.seek_to_last(),
        SeekMode::Ge => iter.seek(key),
        SeekMode::GtPrefix => match prefix_successor(key) {
            Some(s) => iter.seek(&s),
            // Every key starting with all-0xFF bytes... nothing can follow them.
            None => {
                iter.seek_to_last();
                if iter.valid() {
                    iter.next();
                }
            }
        },
        SeekMode::LePrefix => match prefix_successor(key) {
            Some(s) => {
                iter.seek_for_prev(&s);
                if iter.valid() && iter.key() == s.as_slice() {
                    iter.prev();
                }
            }
            None => iter.seek_to_last(),
        },
        SeekMode::Lt => {
            iter.seek_for_prev(key);
            if iter.valid() && iter.key() == key {
                iter.prev();
            }
        }
    }
}

fn position_status(iter: &TxnIter) -> FfiResult<()> {
    iter.status()?;
    if iter.valid() {
        Ok(())
    } else {
        Err(FfiError::quiet(Status::End))
    }
}

/// Opens a cursor on index `index` of `table`, at the snapshot or at the latest
/// committed state.
///
/// # Safety
/// `trx` and `table` must be live handles; `out` valid for a pointer write.
unsafe fn open_cursor(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    latest: bool,
    out: *mut *mut Cursor,
) -> c_int {
    guard(|| {
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        let cf = table.shared.cf(index)?;
        let gap_locking = latest && trx.gap_locking();
        let timeout = trx.lock_wait_timeout;
        let txn = trx.txn()?;
        let iter = if latest {
            txn.iter_latest(&cf, IterOptions::default())?
        } else {
            txn.iter(&cf, IterOptions::default())?
        };
        let gap = gap_locking.then(|| Gap {
            locker: txn.gap_locker(),
            cf: cf.clone(),
            timeout,
            primary: index == 0,
        });
        let cursor = Box::new(Cursor {
            iter,
            gap,
            shared: table.shared.clone(),
            index,
            spatial: None,
        });
        // SAFETY: valid for a write by contract.
        unsafe { raw::write_out(out, Box::into_raw(cursor)) }
    })
}

/// # Safety
/// `trx` and `table` must be live handles; `out` valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_open(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    out: *mut *mut Cursor,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { open_cursor(trx, table, index, false, out) }
}

/// # Safety
/// `trx` and `table` must be live handles; `out` valid for a pointer write.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_open_latest(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    out: *mut *mut Cursor,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { open_cursor(trx, table, index, true, out) }
}

/// # Safety
/// `cursor` must be NULL or a handle from `tdb_cursor_open`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_close(cursor: *mut Cursor) {
    guard(|| {
        if !cursor.is_null() {
            // SAFETY: made by Box::into_raw in tdb_cursor_open and freed once.
            drop(unsafe { Box::from_raw(cursor) });
        }
        Ok(())
    });
}

/// # Safety
/// `cursor` must be a live handle and `key` point to `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_seek(
    cursor: *mut Cursor,
    mode: u32,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and buffer by contract.
        let cursor = unsafe { raw::handle(cursor) }?;
        // SAFETY: as above.
        let key = unsafe { raw::bytes(key, key_len) }?;
        cursor.spatial = None;
        cursor.step(Move::Seek(SeekMode::from_raw(mode)?, key.to_vec()))?;
        position_status(&cursor.iter)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_next(cursor: *mut Cursor) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let cursor = unsafe { raw::handle(cursor) }?;
        if let Some(scan) = &cursor.spatial {
            scan.next(&mut cursor.iter)?;
        } else if let Some(from) = here(&cursor.iter) {
            if cursor.gap.is_some() {
                cursor.step(Move::Next(from))?;
            } else {
                cursor.iter.next();
            }
        }
        position_status(&cursor.iter)
    })
}

/// # Safety
/// Pointer arguments must be NULL or live handles / valid buffers (see the header).
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_prev(cursor: *mut Cursor) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let cursor = unsafe { raw::handle(cursor) }?;
        if cursor.spatial.is_some() {
            return Err(FfiError::new(
                Status::Invalid,
                "a spatial search only moves forward",
            ));
        }
        if let Some(from) = here(&cursor.iter) {
            if cursor.gap.is_some() {
                cursor.step(Move::Prev(from))?;
            } else {
                cursor.iter.prev();
            }
        }
        position_status(&cursor.iter)
    })
}

/// # Safety
/// The out-pointers must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_entry(
    cursor: *mut Cursor,
    key: *mut *const u8,
    key_len: *mut usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let cursor = unsafe { raw::handle(cursor) }?;
        position_status(&cursor.iter)?;
        let (k, v) = (cursor.iter.key(), cursor.iter.value());
        // SAFETY: writable by contract; the slices live until the next cursor call.
        unsafe {
            raw::write_out(key, k.as_ptr())?;
            raw::write_out(key_len, k.len())?;
            raw::write_out(value, v.as_ptr())?;
            raw::write_out(value_len, v.len())
        }
    })
}

/// Reads the 4 doubles of an MBR the caller passes.
///
/// # Safety
/// `q` must be NULL or point to 4 doubles.
unsafe fn mbr_arg(q: *const f64) -> FfiResult<Mbr> {
    if q.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL MBR"));
    }
    // SAFETY: 4 readable doubles by contract (unaligned reads are fine).
    let a = unsafe { [0, 1, 2, 3].map(|i| q.add(i).read_unaligned()) };
    Ok(Mbr::from_array(a))
}

/// # Safety
/// `cursor` must be a live handle, `q` point to 4 doubles, `after` be NULL or
/// point to `after_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_cursor_spatial_seek(
    cursor: *mut Cursor,
    mode: u32,
    q: *const f64,
    after: *const u8,
    after_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let cursor = unsafe { raw::handle(cursor) }?;
        // SAFETY: 4 doubles by contract.
        let q = unsafe { mbr_arg(q) }?;
        let after = if after.is_null() {
            None
        } else {
            // SAFETY: a valid buffer by contract.
            Some(unsafe { raw::bytes(after, after_len) }?)
        };
        let extent = cursor.shared.spatial_extent(cursor.index)?;
        let scan = SpatialScan::new(Mode::from_raw(mode)?, q, extent);
        cursor.spatial = None;
        scan.start(&mut cursor.iter, after)?;
        cursor.spatial = Some(scan);
        position_status(&cursor.iter)
    })
}

/// # Safety
/// `trx` and `table` must be live handles and `q` point to 4 doubles.
#[no_mangle]
pub unsafe extern "C" fn tdb_spatial_estimate(
    trx: *mut Trx,
    table: *mut Table,
    index: u32,
    mode: u32,
    q: *const f64,
    cap: u64,
) -> u64 {
    crate::status::guard_value(u64::MAX, || {
        // SAFETY: live handles by contract.
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: 4 doubles by contract.
        let q = unsafe { mbr_arg(q) }?;
        let cf = table.shared.cf(index)?;
        let extent = table.shared.spatial_extent(index)?;
        let scan = SpatialScan::new(Mode::from_raw(mode)?, q, extent);
        let mut iter = trx.txn()?.iter(&cf, IterOptions::default())?;
        scan.estimate(&mut iter, cap.max(1))
    })
}

/// # Safety
/// `mbr` must point to 4 doubles and `out` to 8 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_spatial_key(mbr: *const f64, out: *mut u8) -> c_int {
    guard(|| {
        // SAFETY: 4 doubles by contract.
        let mbr = unsafe { mbr_arg(mbr) }?;
        if out.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL output"));
        }
        let key = crate::spatial::entry_key(&mbr);
        // SAFETY: 8 writable bytes by contract.
        unsafe { std::ptr::copy_nonoverlapping(key.as_ptr(), out, key.len()) };
        Ok(())
    })
}

/// # Safety
/// `table` must be a live handle and `mbr` point to 4 doubles.
#[no_mangle]
pub unsafe extern "C" fn tdb_spatial_note(table: *mut Table, index: u32, mbr: *const f64) -> c_int {
    guard(|| {
        // SAFETY: a live handle by contract.
        let table = unsafe { raw::handle(table) }?;
        // SAFETY: 4 doubles by contract.
        let mbr = unsafe { mbr_arg(mbr) }?;
        table.shared.note_spatial_extent(index, mbr.half_extent())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidesdb_core::{CfOptions, Db, DbOptions, Isolation};

    const KEYS: &[&[u8]] = &[b"a", b"ab", b"abc", b"b", b"ba", b"c", &[0xFF, 0xFF]];

    fn positioned(mode: SeekMode, key: &[u8]) -> Option<Vec<u8>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let cf = db.create_cf("t", CfOptions::default()).expect("cf");
        let mut txn = db.begin(Isolation::RepeatableRead);
        for k in KEYS {
            txn.put(&cf, k, b"v").expect("put");
        }
        txn.commit().expect("commit");
        let mut txn = db.begin(Isolation::RepeatableRead);
        let mut it = txn.iter(&cf, IterOptions::default()).expect("iter");
        seek(&mut it, mode, key);
        it.status().expect("status");
        it.valid().then(|| it.key().to_vec())
    }

    #[test]
    fn seek_modes_compare_prefixes() {
        use SeekMode::*;
        let k = |s: &[u8]| Some(s.to_vec());
        assert_eq!(positioned(First, b""), k(b"a"));
        assert_eq!(positioned(Last, b""), k(&[0xFF, 0xFF]));
        assert_eq!(positioned(Ge, b"ab"), k(b"ab"));
        assert_eq!(positioned(Ge, b"abd"), k(b"b"));
        // After every key starting with "ab".
        assert_eq!(positioned(GtPrefix, b"ab"), k(b"b"));
        assert_eq!(positioned(GtPrefix, b"a"), k(b"b"));
        assert_eq!(positioned(GtPrefix, b"c"), k(&[0xFF, 0xFF]));
        assert_eq!(positioned(GtPrefix, &[0xFF]), None);
        // The last key starting with the prefix, else the one before it.
        assert_eq!(positioned(LePrefix, b"ab"), k(b"abc"));
        assert_eq!(positioned(LePrefix, b"a"), k(b"abc"));
        assert_eq!(positioned(LePrefix, b"bb"), k(b"ba"));
        assert_eq!(positioned(LePrefix, b"0"), None);
        assert_eq!(positioned(LePrefix, &[0xFF]), k(&[0xFF, 0xFF]));
        // Strictly before the prefix.
        assert_eq!(positioned(Lt, b"ab"), k(b"a"));
        assert_eq!(positioned(Lt, b"b"), k(b"abc"));
        assert_eq!(positioned(Lt, b"a"), None);
    }
}
