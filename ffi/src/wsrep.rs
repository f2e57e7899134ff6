//! Galera (wsrep) replication: what the engine decides for the cluster.
//!
//! - **Certification keys.** Galera certifies a transaction against the others in
//!   flight on every node by the keys its rows were given: two transactions whose
//!   keys conflict cannot both commit. [`row_keys`] picks them for one row change
//!   from the ops the shim applied (as InnoDB's `wsrep_append_keys`): the primary
//!   key (or, for a table without one, a hash of the whole row, since the hidden row
//!   id is a per-node counter) and every unique key, old and new values; and
//!   [`parent_key`] the referenced parent row of a foreign key. The shim only
//!   turns them into the server's `wsrep_key` (database, table, this key).
//! - **Cluster position.** The wsrep XID (cluster uuid + seqno) of each replicated
//!   commit is written in that commit's own batch ([`Trx::write_position`]), so it
//!   is durable exactly when the data is; [`checkpoint`] returns the highest one at
//!   start, which is where the node asks the cluster to resume (IST).
//!
//! Position format (column family [`WSREP_CF`]): key `position/<slot>` (slot as 4
//! bytes big-endian), value = the XID as the shim encodes it (`xid_bytes` in
//! tidesdb_plugin.cc: formatID 8 bytes LE, gtrid and bqual lengths, then the
//! data). A commit writes the slot it holds; slots exist so that concurrent
//! committers never write the same key (which the engine would report as a write
//! conflict), and each slot's lock makes its next writer conflict-free.
use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

use parking_lot::Mutex;
use std::collections::HashMap;

use tidesdb_core::{
    CancelHandle, Cf, CfOptions, Db, Isolation, IterOptions, LockMode, Txn, WaiterRole,
};

use crate::engine::engine;
use crate::raw;
use crate::status::{guard, FfiError, FfiResult, Status};

/// The column family of the engine's wsrep state.
pub const WSREP_CF: &str = "wsrep";
const POSITION_PREFIX: &[u8] = b"position/";

/// `enum Wsrep_service_key_type` of the server (service_wsrep.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum KeyType {
    Shared = 0,
    Reference = 1,
    Update = 2,
    Exclusive = 3,
}

/// `enum tdb_wsrep_change`: the row operation the keys are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Insert,
    Update,
    Delete,
}

impl Change {
    fn from_c(v: u32) -> FfiResult<Change> {
        match v {
            0 => Ok(Change::Insert),
            1 => Ok(Change::Update),
            2 => Ok(Change::Delete),
            _ => Err(FfiError::new(
                Status::Invalid,
                format!("unknown row change {v}"),
            )),
        }
    }

    /// As InnoDB: inserted and deleted rows exclusive, updated rows "update"
    /// (which Galera lets coexist with shared references of other nodes' readers
    /// of the same key only as the protocol says).
    fn key_type(self) -> KeyType {
        match self {
            Change::Update => KeyType::Update,
            Change::Insert | Change::Delete => KeyType::Exclusive,
        }
    }
}

/// What an entry of a row change is, as the shim knows it from the table's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryClass {
    /// The row itself, keyed by the primary key.
    Primary,
    /// An entry of a UNIQUE index.
    Unique,
    /// A non-unique index entry, an external value or an online build's entry:
    /// writers of it already certify on the row.
    Other,
}

impl EntryClass {
    fn from_c(v: u8) -> EntryClass {
        match v {
            0 => EntryClass::Primary,
            1 => EntryClass::Unique,
            _ => EntryClass::Other,
        }
    }
}

/// One entry a row change wrote or deleted.
pub struct Entry<'a> {
    pub class: EntryClass,
    /// The server's name of the index ("PRIMARY" for the row).
    pub index_name: &'a [u8],
    pub key: &'a [u8],
}

/// The third part of a certification key (after database and table): the index
/// name, a NUL, then the engine's encoding of the key value. Names, not engine
/// index numbers, because numbers are assigned per node (an index added online
/// on one node and by TOI on another) while the definition is the cluster's.
pub fn key_part(index_name: &[u8], key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(index_name.len() + 1 + key.len());
    k.extend_from_slice(index_name);
    k.push(0);
    k.extend_from_slice(key);
    k
}

/// Index name of the whole-row hash key of a table without a primary key (not a
/// name the server allows for an index, so it cannot collide with one).
const ROW_HASH_NAME: &[u8] = b"#row";

/// 128-bit hash of a row image (two independently keyed SipHash-1-3 passes of
/// std's hasher: stable within a Rust release on every node of one build).
fn row_hash(image: &[u8]) -> [u8; 16] {
    use std::hash::Hasher;
    let mut out = [0u8; 16];
    for (i, seed) in [0x5453_5245_5057_5f31u64, 0x7469_6465_7364_625fu64]
        .iter()
        .enumerate()
    {
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(*seed, !*seed);
        h.write(image);
        out[i * 8..i * 8 + 8].copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// The certification keys of one row change: each primary and unique entry
/// (a delete and a put of the same entry give one key), and for a table
/// without a primary key the hashes of the old and new row images.
pub fn row_keys(
    change: Change,
    entries: &[Entry],
    row_images: &[&[u8]],
) -> Vec<(Vec<u8>, KeyType)> {
    let kind = change.key_type();
    let mut keys: Vec<(Vec<u8>, KeyType)> = Vec::new();
    let mut push = |k: Vec<u8>| {
        if !keys.iter().any(|(have, _)| *have == k) {
            keys.push((k, kind));
        }
    };
    for e in entries {
        if e.class != EntryClass::Other {
            push(key_part(e.index_name, e.key));
        }
    }
    for image in row_images {
        push(key_part(ROW_HASH_NAME, &row_hash(image)));
    }
    keys
}

/// The key a child row's foreign key appends for the parent row it refers to:
/// the parent's own key of that index, as a reference (InnoDB's
/// `wsrep_append_foreign_key`): it conflicts with a delete or key change of the
/// parent on another node, not with other children referring to it.
pub fn parent_key(index_name: &[u8], key: &[u8]) -> (Vec<u8>, KeyType) {
    (key_part(index_name, key), KeyType::Reference)
}

// ------------------------------------------------------------------ position

/// Slots of the position keys: a committer takes the lowest free one.
static SLOTS: Mutex<Vec<bool>> = Mutex::new(Vec::new());

fn take_slot() -> u32 {
    let mut s = SLOTS.lock();
    match s.iter().position(|used| !used) {
        Some(i) => {
            s[i] = true;
            i as u32
        }
        None => {
            s.push(true);
            (s.len() - 1) as u32
        }
    }
}

/// Returns a slot once its holder's transaction ended (committed, rolled back).
pub fn release_slot(slot: u32) {
    if let Some(used) = SLOTS.lock().get_mut(slot as usize) {
        *used = false;
    }
}

fn position_key(slot: u32) -> Vec<u8> {
    let mut k = POSITION_PREFIX.to_vec();
    k.extend_from_slice(&slot.to_be_bytes());
    k
}

/// The wsrep column family, created on first use.
fn wsrep_cf(db: &Db) -> FfiResult<Cf> {
    static CREATE: Mutex<()> = Mutex::new(());
    if let Some(cf) = db.cf(WSREP_CF) {
        return Ok(cf);
    }
    let _g = CREATE.lock();
    match db.cf(WSREP_CF) {
        Some(cf) => Ok(cf),
        None => Ok(db.create_cf(WSREP_CF, CfOptions::default())?),
    }
}

/// How long a committer may wait for its slot's lock: it is free (the slot is
/// this transaction's alone); waiting at all means a detached prepared
/// transaction of an earlier holder still has it.
const SLOT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Writes `xid` as the position in `txn` under a slot of its own; returns the
/// slot, to be released when the transaction ends.
pub fn write_position(txn: &mut Txn, xid: &[u8]) -> FfiResult<u32> {
    let db = engine()?;
    let cf = wsrep_cf(&db.db)?;
    let slot = take_slot();
    let key = position_key(slot);
    let r = txn
        .lock(&cf, &key, LockMode::Exclusive, SLOT_LOCK_TIMEOUT)
        .and_then(|()| txn.put(&cf, &key, xid));
    if let Err(e) = r {
        release_slot(slot);
        return Err(e.into());
    }
    Ok(slot)
}

/// Cluster uuid and seqno of an XID in the shim's encoding, if it is a wsrep
/// XID: formatID 1, no bqual, gtrid = "WSREPXi" + version byte + uuid (16) +
/// seqno (8, LE) [+ the server's gtid], as the server's wsrep_xid.cc lays it out.
pub fn wsrep_seqno(xid: &[u8]) -> Option<(&[u8], i64)> {
    const PREFIX: &[u8] = b"WSREPXi";
    if xid.len() < 10 {
        return None;
    }
    let format = u64::from_le_bytes(xid[0..8].try_into().ok()?);
    let gtrid_len = usize::from(xid[8]);
    let data = &xid[10..];
    if format != 1 || xid[9] != 0 || gtrid_len < 8 + 16 + 8 || data.len() < gtrid_len {
        return None;
    }
    if !data.starts_with(PREFIX) {
        return None;
    }
    let uuid = &data[8..24];
    let seqno = i64::from_le_bytes(data[24..32].try_into().ok()?);
    Some((uuid, seqno))
}

/// The stored position with the highest seqno (the latest commit: replicated
/// commits are applied in seqno order), or None.
pub fn checkpoint(db: &Db) -> FfiResult<Option<Vec<u8>>> {
    let Some(cf) = db.cf(WSREP_CF) else {
        return Ok(None);
    };
    let mut txn = db.begin(Isolation::ReadCommitted);
    let mut it = txn.iter(&cf, IterOptions::default())?;
    it.seek(POSITION_PREFIX);
    let mut best: Option<(i64, Vec<u8>)> = None;
    while it.valid() && it.key().starts_with(POSITION_PREFIX) {
        if let Some((_, seqno)) = wsrep_seqno(it.value()) {
            if best.as_ref().is_none_or(|(s, _)| seqno > *s) {
                best = Some((seqno, it.value().to_vec()));
            }
        }
        it.next();
    }
    it.status()?;
    drop(it);
    txn.rollback();
    Ok(best.map(|(_, xid)| xid))
}

/// Sets the position outright (after a state transfer, or when the server says
/// where the node is): every slot key is replaced by this one XID, in one commit.
pub fn set_checkpoint(db: &Db, xid: &[u8]) -> FfiResult<()> {
    let cf = wsrep_cf(db)?;
    let mut txn = db.begin(Isolation::ReadCommitted);
    let mut stale = Vec::new();
    {
        let mut it = txn.iter_latest(&cf, IterOptions::default())?;
        it.seek(POSITION_PREFIX);
        while it.valid() && it.key().starts_with(POSITION_PREFIX) {
            stale.push(it.key().to_vec());
            it.next();
        }
        it.status()?;
    }
    for k in &stale {
        txn.lock(&cf, k, LockMode::Exclusive, SLOT_LOCK_TIMEOUT)?;
        txn.delete(&cf, k)?;
    }
    let key = position_key(0);
    txn.lock(&cf, &key, LockMode::Exclusive, SLOT_LOCK_TIMEOUT)?;
    txn.put(&cf, &key, xid)?;
    txn.commit()?;
    Ok(())
}

// ------------------------------------------------------- brute-force abort

/// The server's brute-force abort of `victim` by `bf` (both THDs); non-zero if
/// the victim is now aborting (its lock wait must then be woken here: the
/// server wakes only InnoDB's).
pub type AbortFn = unsafe extern "C" fn(bf: *mut c_void, victim: *mut c_void) -> c_int;

/// A transaction of a wsrep session: its THD, whether it is a brute-force one
/// (an applier or TOI), and how to wake its lock wait.
struct Member {
    thd: usize,
    bf: bool,
    cancel: CancelHandle,
}

static MEMBERS: Mutex<Option<HashMap<u64, Member>>> = Mutex::new(None);

/// Records transaction `id` of session `thd` (called at each statement start).
pub fn register(id: u64, thd: usize, bf: bool, cancel: CancelHandle) {
    MEMBERS
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(id, Member { thd, bf, cancel });
}

/// Forgets transaction `id` (it ended).
pub fn unregister(id: u64) {
    if let Some(m) = MEMBERS.lock().as_mut() {
        m.remove(&id);
    }
}

/// The policy, as InnoDB's: a brute-force transaction never waits for a local
/// one; each local holder it waits for is aborted (the server rolls it back and
/// its client gets ER_LOCK_DEADLOCK). A brute-force holder is waited for (two
/// appliers are ordered by the cluster's commit order). A brute-force waiter is
/// never a deadlock victim: a cycle through a local transaction (which waits for
/// the applier while holding what the applier needs) is broken on the local
/// side, since a failed applier would stop the node.
fn on_lock_wait(abort: AbortFn, me: u64, holders: &[u64]) -> WaiterRole {
    // Held across the server call: a member's THD lives while it is listed
    // (a session unregisters before its THD goes away).
    let members = MEMBERS.lock();
    let Some(m) = members.as_ref() else {
        return WaiterRole::Ordinary;
    };
    let Some(waiter) = m.get(&me) else {
        return WaiterRole::Ordinary;
    };
    if !waiter.bf {
        return WaiterRole::Ordinary;
    }
    for h in holders {
        if let Some(victim) = m.get(h) {
            if !victim.bf {
                // SAFETY: the server's callback, on THDs that are alive (above).
                let aborted =
                    unsafe { abort(waiter.thd as *mut c_void, victim.thd as *mut c_void) };
                if aborted != 0 {
                    victim.cancel.cancel();
                }
            }
        }
    }
    WaiterRole::NeverVictim
}

/// # Safety
/// `abort` must be a valid function for the engine's lifetime.
#[no_mangle]
pub unsafe extern "C" fn tdb_wsrep_enable(abort: Option<AbortFn>) -> c_int {
    guard(|| {
        let abort = abort.ok_or_else(|| FfiError::new(Status::Invalid, "no abort callback"))?;
        let observer: tidesdb_core::LockWaitObserver =
            std::sync::Arc::new(move |me: u64, holders: &[u64]| on_lock_wait(abort, me, holders));
        engine()?.db.set_lock_wait_observer(Some(observer));
        Ok(())
    })
}

// ---------------------------------------------------------------------- C ABI

/// `struct tdb_wsrep_entry` of the header.
#[repr(C)]
pub struct CEntry {
    pub cls: u8,
    pub index_name: *const c_char,
    pub key: *const u8,
    pub key_len: usize,
}

/// Receives each certification key: `key` is the key's last part.
pub type KeyCallback =
    unsafe extern "C" fn(ctx: *mut c_void, key: *const u8, key_len: usize, key_type: u32) -> c_int;

fn emit_all(
    keys: &[(Vec<u8>, KeyType)],
    emit: Option<KeyCallback>,
    ctx: *mut c_void,
) -> FfiResult<()> {
    let emit = emit.ok_or_else(|| FfiError::new(Status::Invalid, "no key callback"))?;
    for (k, t) in keys {
        // SAFETY: the shim's callback, called with a buffer valid for the call.
        if unsafe { emit(ctx, k.as_ptr(), k.len(), *t as u32) } != 0 {
            return Err(FfiError::new(
                Status::Internal,
                "appending a wsrep key failed",
            ));
        }
    }
    Ok(())
}

/// # Safety
/// `entries` must point to `n_entries` valid entries (names NUL-terminated,
/// keys valid); the images NULL or valid for their lengths.
#[no_mangle]
pub unsafe extern "C" fn tdb_wsrep_row_keys(
    change: u32,
    entries: *const CEntry,
    n_entries: usize,
    old_image: *const u8,
    old_len: usize,
    new_image: *const u8,
    new_len: usize,
    emit: Option<KeyCallback>,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        let change = Change::from_c(change)?;
        let raw_entries: &[CEntry] = if n_entries == 0 {
            &[]
        } else if entries.is_null() {
            return Err(FfiError::new(Status::Invalid, "NULL entries"));
        } else {
            // SAFETY: n_entries valid entries by contract.
            unsafe { std::slice::from_raw_parts(entries, n_entries) }
        };
        let mut list = Vec::with_capacity(raw_entries.len());
        for e in raw_entries {
            // SAFETY: valid by contract.
            let name = unsafe { raw::str(e.index_name) }?;
            // SAFETY: valid by contract.
            let key = unsafe { raw::bytes(e.key, e.key_len) }?;
            list.push(Entry {
                class: EntryClass::from_c(e.cls),
                index_name: name.as_bytes(),
                key,
            });
        }
        let mut images = Vec::new();
        if !old_image.is_null() {
            // SAFETY: valid for old_len by contract.
            images.push(unsafe { raw::bytes(old_image, old_len) }?);
        }
        if !new_image.is_null() {
            // SAFETY: valid for new_len by contract.
            images.push(unsafe { raw::bytes(new_image, new_len) }?);
        }
        emit_all(&row_keys(change, &list, &images), emit, ctx)
    })
}

/// # Safety
/// `index_name` NUL-terminated, `key` valid for `key_len`.
#[no_mangle]
pub unsafe extern "C" fn tdb_wsrep_parent_key(
    index_name: *const c_char,
    key: *const u8,
    key_len: usize,
    emit: Option<KeyCallback>,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: valid by contract.
        let name = unsafe { raw::str(index_name) }?;
        // SAFETY: valid by contract.
        let key = unsafe { raw::bytes(key, key_len) }?;
        emit_all(&[parent_key(name.as_bytes(), key)], emit, ctx)
    })
}

/// # Safety
/// `out` must be valid for `cap` bytes and `out_len` for a write.
#[no_mangle]
pub unsafe extern "C" fn tdb_wsrep_checkpoint_get(
    out: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> c_int {
    guard(|| {
        let e = engine()?;
        match checkpoint(&e.db)? {
            None => Err(FfiError::new(Status::NotFound, "no wsrep position stored")),
            Some(xid) => {
                if xid.len() > cap || out.is_null() {
                    return Err(FfiError::new(Status::Invalid, "position buffer too small"));
                }
                // SAFETY: out valid for cap >= xid.len() bytes by contract.
                unsafe { std::ptr::copy_nonoverlapping(xid.as_ptr(), out, xid.len()) };
                // SAFETY: valid for a write by contract.
                unsafe { raw::write_out(out_len, xid.len()) }
            }
        }
    })
}

/// # Safety
/// `xid` must be valid for `xid_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn tdb_wsrep_checkpoint_set(xid: *const u8, xid_len: usize) -> c_int {
    guard(|| {
        // SAFETY: valid by contract.
        let xid = unsafe { raw::bytes(xid, xid_len) }?;
        set_checkpoint(&engine()?.db, xid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wsrep_xid(seqno: i64) -> Vec<u8> {
        let mut b = 1u64.to_le_bytes().to_vec();
        let mut gtrid = b"WSREPXif".to_vec();
        gtrid.extend_from_slice(&[7u8; 16]);
        gtrid.extend_from_slice(&seqno.to_le_bytes());
        b.push(gtrid.len() as u8);
        b.push(0);
        b.extend_from_slice(&gtrid);
        b
    }

    #[test]
    fn seqno_of_a_wsrep_xid_and_not_of_others() {
        assert_eq!(wsrep_seqno(&wsrep_xid(42)).map(|(_, s)| s), Some(42));
        let mut other = wsrep_xid(42);
        other[0] = 2;
        assert_eq!(wsrep_seqno(&other), None);
        assert_eq!(wsrep_seqno(&[0u8; 5]), None);
    }

    #[test]
    fn keys_of_an_update_that_moves_a_unique_value() {
        let e = [
            Entry {
                class: EntryClass::Primary,
                index_name: b"PRIMARY",
                key: b"\x01",
            },
            Entry {
                class: EntryClass::Unique,
                index_name: b"u",
                key: b"old",
            },
            Entry {
                class: EntryClass::Unique,
                index_name: b"u",
                key: b"new",
            },
            Entry {
                class: EntryClass::Other,
                index_name: b"k",
                key: b"x\x01",
            },
            Entry {
                class: EntryClass::Primary,
                index_name: b"PRIMARY",
                key: b"\x01",
            },
        ];
        let keys = row_keys(Change::Update, &e, &[]);
        let names: Vec<&[u8]> = keys.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(names, vec![&b"PRIMARY\0\x01"[..], b"u\0old", b"u\0new"]);
        assert!(keys.iter().all(|(_, t)| *t == KeyType::Update));
        let ins = row_keys(Change::Insert, &e[..1], &[]);
        assert_eq!(ins[0].1, KeyType::Exclusive);
    }

    #[test]
    fn rows_without_primary_key_certify_on_their_content() {
        let a = row_keys(Change::Delete, &[], &[b"row one"]);
        let b = row_keys(Change::Delete, &[], &[b"row one"]);
        let c = row_keys(Change::Delete, &[], &[b"row two"]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a[0].0.starts_with(b"#row\0"));
    }

    #[test]
    fn a_parent_reference_matches_the_parents_own_key() {
        let (k, t) = parent_key(b"PRIMARY", b"\x05");
        let own = row_keys(
            Change::Delete,
            &[Entry {
                class: EntryClass::Primary,
                index_name: b"PRIMARY",
                key: b"\x05",
            }],
            &[],
        );
        assert_eq!(k, own[0].0);
        assert_eq!(t, KeyType::Reference);
    }
}
