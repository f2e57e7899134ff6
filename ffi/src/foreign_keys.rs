//! FOREIGN KEY constraints: the constraint catalog, the key definitions the
//! constraints are resolved against, and the probes the shim's checks run.
//!
//! The engine keeps what InnoDB keeps in its data dictionary (SYS_FOREIGN): which
//! columns of a child table reference which columns of a parent table, under which
//! name, with which ON DELETE / ON UPDATE rule. To find the index that serves a
//! constraint on either side without the server's table definition, every table
//! also records its keys: per key its engine index, name and parts (column name,
//! a type signature for the compatibility check, and the encoding facts the shim's
//! key codec needs to encode a value in that key's format).
//!
//! ## Format (entries of the catalog family `__catalog`; `str` = u32 LE length + UTF-8)
//!
//! | key | value |
//! |---|---|
//! | `keys/<table name>` | u8 version = 1, u32 LE n_keys, per key: u32 LE engine_index, u32 LE flags ([`KEY_PRIMARY`], [`KEY_UNIQUE`], [`KEY_UNUSABLE`], [`KEY_FULLTEXT`]), str name, u32 LE n_parts, per part: str column, str type signature, u32 LE length (the key part's byte length), u32 LE flags ([`PART_NULLABLE`], [`PART_DESC`], [`PART_PREFIX`]) |
//! | `fk/<child table name>` | u8 version = 1, u32 LE n, per constraint: str name, str parent table name, u32 LE n_cols, n_cols x str child column, n_cols x str parent column, u8 on_delete, u8 on_update (the server's `enum_fk_option`) |
//!
//! Table names are the server's paths without the leading `./` (`db/t1`), as in
//! `table/<name>`. A constraint names its parent by name, so a parent may be
//! dropped and created again (with foreign_key_checks = 0, as in InnoDB) and the
//! constraint applies to the new table. RENAME TABLE moves a table's entries and,
//! between two names that are not temporary (`#sql...`), points the constraints
//! that reference it at the new name and renames generated constraint names
//! (`<table>_ibfk_<n>`), as InnoDB does.
//!
//! ## Locking (the checks, see `tdb_fk_probe`)
//! A child row's check takes a shared lock on the referenced value in the parent's
//! index (the encoded key prefix used as a lock name in that index's family) and
//! then looks for a parent entry in the latest committed state; a parent row whose
//! referenced value goes away takes an exclusive lock on the same name before it
//! looks for child entries. So a child insert and a parent delete of the same value
//! serialise, and whichever comes second sees the first one's committed outcome:
//! no orphan can be committed.
//!
//! A child's check holds no metadata lock on the parent, so an online rebuild of
//! the parent (`rebuild.rs`), which gives it new families, and an in-place index
//! change that moves the parent's kept families (`index_build.rs`: a new UNIQUE
//! key before a non-unique one, which may then serve the constraint instead),
//! wait at their switch for the transactions holding locks in the old families
//! and keep new ones out until the catalog names the new list. A check names the
//! parent's family it resolved the constraint to by the family's id and its
//! position: a check whose family is no longer the parent's or has moved, or
//! that resolved while the parent's keys were being replaced
//! ([`ForeignKeys::keys_pending`]), gets `Status::Stale` and resolves again
//! (`tdb_fk_list_open`, [`parent_family`], [`lock_position`]).
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tidesdb_core::{Cf, Db, Isolation, IterOptions, LockMode, Txn};

use crate::catalog::CatalogWrite;
use crate::engine::engine;
use crate::raw;
use crate::status::{guard, guard_value, FfiError, FfiResult, Status};
use crate::trx::Trx;

const KEYS_PREFIX: &[u8] = b"keys/";
const FK_PREFIX: &[u8] = b"fk/";
const FORMAT_V1: u8 = 1;

pub const KEY_PRIMARY: u32 = 1;
pub const KEY_UNIQUE: u32 = 2;
/// FULLTEXT, SPATIAL and hash keys: never serve a constraint.
pub const KEY_UNUSABLE: u32 = 4;
/// A FULLTEXT key (also [`KEY_UNUSABLE`]): what `INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE`
/// lists. Keys recorded before the flag existed lack it.
pub const KEY_FULLTEXT: u32 = 8;
pub const PART_NULLABLE: u32 = 1;
pub const PART_DESC: u32 = 2;
/// A prefix part (`KEY (a(10))`): never serves a constraint.
pub const PART_PREFIX: u32 = 4;

/// `enum_fk_option` values the engine gives a meaning to.
const FK_OPTION_UNDEF: u8 = 0;
const FK_OPTION_RESTRICT: u8 = 1;
const FK_OPTION_SET_NULL: u8 = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPart {
    pub column: String,
    pub type_sig: String,
    pub length: u32,
    pub flags: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDef {
    pub engine_index: u32,
    pub flags: u32,
    pub name: String,
    pub parts: Vec<KeyPart>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub name: String,
    pub child: String,
    pub parent: String,
    pub child_cols: Vec<String>,
    pub parent_cols: Vec<String>,
    pub on_delete: u8,
    pub on_update: u8,
}

/// Why a constraint cannot be created (the shim reports it as InnoDB's errno 150).
fn malformed(msg: String) -> FfiError {
    FfiError::new(Status::FkMalformed, msg)
}

fn corrupt(what: &str) -> FfiError {
    FfiError::new(
        Status::Corruption,
        format!("catalog entry {what} is damaged"),
    )
}

fn normalize(name: &str) -> &str {
    name.strip_prefix("./").unwrap_or(name)
}

/// `db/#sql-alter-...`: the server's temporary names during ALTER TABLE.
fn is_tmp_name(name: &str) -> bool {
    name.rsplit('/').next().unwrap_or(name).starts_with("#sql")
}

fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn db_of(name: &str) -> &str {
    normalize(name)
        .rsplit_once('/')
        .map(|(d, _)| d)
        .unwrap_or("")
}

// ---- encoding -------------------------------------------------------------------

fn put_u32(v: &mut Vec<u8>, n: u32) {
    v.extend_from_slice(&n.to_le_bytes());
}

fn put_str(v: &mut Vec<u8>, s: &str) {
    put_u32(v, s.len() as u32);
    v.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> FfiResult<u8> {
        let v = *self.b.get(self.at).ok_or_else(|| corrupt(self.what))?;
        self.at += 1;
        Ok(v)
    }
    fn u32(&mut self) -> FfiResult<u32> {
        let s = self
            .b
            .get(self.at..self.at + 4)
            .ok_or_else(|| corrupt(self.what))?;
        self.at += 4;
        Ok(u32::from_le_bytes(
            s.try_into().map_err(|_| corrupt(self.what))?,
        ))
    }
    fn str(&mut self) -> FfiResult<String> {
        let n = self.u32()? as usize;
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or_else(|| corrupt(self.what))?;
        self.at += n;
        String::from_utf8(s.to_vec()).map_err(|_| corrupt(self.what))
    }
    /// A count of items each at least `min` bytes long (bounds the allocation).
    fn count(&mut self, min: usize) -> FfiResult<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.b.len() - self.at {
            return Err(corrupt(self.what));
        }
        Ok(n)
    }
}

fn encode_keys(keys: &[KeyDef]) -> Vec<u8> {
    let mut v = vec![FORMAT_V1];
    put_u32(&mut v, keys.len() as u32);
    for k in keys {
        put_u32(&mut v, k.engine_index);
        put_u32(&mut v, k.flags);
        put_str(&mut v, &k.name);
        put_u32(&mut v, k.parts.len() as u32);
        for p in &k.parts {
            put_str(&mut v, &p.column);
            put_str(&mut v, &p.type_sig);
            put_u32(&mut v, p.length);
            put_u32(&mut v, p.flags);
        }
    }
    v
}

fn decode_keys(what: &str, b: &[u8]) -> FfiResult<Vec<KeyDef>> {
    let mut r = Reader { b, at: 0, what };
    if r.u8()? != FORMAT_V1 {
        return Err(corrupt(what));
    }
    let n = r.count(16)?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let engine_index = r.u32()?;
        let flags = r.u32()?;
        let name = r.str()?;
        let n_parts = r.count(16)?;
        let mut parts = Vec::with_capacity(n_parts);
        for _ in 0..n_parts {
            parts.push(KeyPart {
                column: r.str()?,
                type_sig: r.str()?,
                length: r.u32()?,
                flags: r.u32()?,
            });
        }
        keys.push(KeyDef {
            engine_index,
            flags,
            name,
            parts,
        });
    }
    Ok(keys)
}

fn encode_fks(fks: &[ForeignKey]) -> Vec<u8> {
    let mut v = vec![FORMAT_V1];
    put_u32(&mut v, fks.len() as u32);
    for f in fks {
        put_str(&mut v, &f.name);
        put_str(&mut v, &f.parent);
        put_u32(&mut v, f.child_cols.len() as u32);
        for c in f.child_cols.iter().chain(&f.parent_cols) {
            put_str(&mut v, c);
        }
        v.push(f.on_delete);
        v.push(f.on_update);
    }
    v
}

fn decode_fks(child: &str, b: &[u8]) -> FfiResult<Vec<ForeignKey>> {
    let what = format!("fk/{child}");
    let mut r = Reader {
        b,
        at: 0,
        what: &what,
    };
    if r.u8()? != FORMAT_V1 {
        return Err(corrupt(&what));
    }
    let n = r.count(14)?;
    let mut fks = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str()?;
        let parent = r.str()?;
        let n_cols = r.count(8)?;
        let child_cols = (0..n_cols).map(|_| r.str()).collect::<FfiResult<_>>()?;
        let parent_cols = (0..n_cols).map(|_| r.str()).collect::<FfiResult<_>>()?;
        fks.push(ForeignKey {
            name,
            child: child.to_string(),
            parent,
            child_cols,
            parent_cols,
            on_delete: r.u8()?,
            on_update: r.u8()?,
        });
    }
    Ok(fks)
}

fn catalog_key(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(normalize(name).as_bytes());
    k
}

// ---- the catalog ------------------------------------------------------------------

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Vec<KeyDef>>,
    /// By child table.
    fks: HashMap<String, Vec<ForeignKey>>,
    /// Tables whose families an ALTER is switching and whose keys are not yet
    /// recorded again ([`ForeignKeys::keys_pending`]): in memory only (a restart
    /// ends every switch).
    pending: HashSet<String>,
}

/// `parent_family` of a constraint whose parent's position-based lookup is all
/// there is (the parent table does not exist): the probe locks by position.
pub const FAMILY_BY_POSITION: u64 = 0;
/// `parent_family` of a constraint resolved while its parent's keys were being
/// replaced: every probe through it is stale.
pub const FAMILY_PENDING: u64 = u64::MAX;

/// The family a child's check of a constraint locks and probes in the parent: the
/// family at the resolved key's position (`engine_index`) of the parent's family
/// ids, read once before (`before`) and once after (`after`) the keys were
/// resolved. None when they differ (a switch happened meanwhile: resolve again).
/// While the keys are `pending` (the families were switched, the keys not yet
/// recorded) the resolution names the old definition's positions:
/// [`FAMILY_PENDING`].
pub fn parent_family(
    before: &[u64],
    after: &[u64],
    engine_index: u32,
    pending: bool,
) -> Option<u64> {
    if before != after {
        return None;
    }
    if pending {
        return Some(FAMILY_PENDING);
    }
    Some(
        after
            .get(engine_index as usize)
            .copied()
            .unwrap_or(FAMILY_PENDING),
    )
}

/// Where family `family` (a `parent_family`, resolved at position `index`) is
/// among the parent's current families `current`: `index`, or None if it is no
/// longer one of them or has moved (the check is stale: a key added before it
/// may now serve the constraint, and the parent's changes lock that key's
/// family). [`FAMILY_BY_POSITION`]: position `index`.
pub fn lock_position<I>(current: I, family: u64, index: u32) -> Option<usize>
where
    I: IntoIterator<Item = u64>,
    I::IntoIter: ExactSizeIterator,
{
    let mut ids = current.into_iter();
    let at = Some(index as usize).filter(|&i| i < ids.len());
    match family {
        FAMILY_BY_POSITION => at,
        FAMILY_PENDING => None,
        f => at.filter(|&i| ids.nth(i) == Some(f)),
    }
}

/// The constraint catalog (loaded from `__catalog` on first use, then kept in
/// memory; every change is written through in one engine transaction).
#[derive(Default)]
pub struct ForeignKeys {
    cache: Mutex<Option<Cache>>,
    /// The loaded catalog holds no constraint at all: `list` answers without
    /// the cache's lock, which every UPDATE and DELETE of every table would
    /// otherwise take (contended at many connections). Set after each use of
    /// the cache, under its lock.
    none_defined: AtomicBool,
    /// Copying ALTER TABLEs of parents between their first rename and the end
    /// of the old table ([`ForeignKeys::fence_rename`]).
    fences: Mutex<Vec<RenameFence>>,
}

/// Table locks on the families of a parent that a copying ALTER TABLE renamed
/// to `backup` (from `original`), held until the copy has the name or the
/// backup is gone.
struct RenameFence {
    backup: String,
    original: String,
    txn: Txn,
}

/// An index that serves one side of a constraint: its engine index and the
/// encoding facts of the parts the constraint covers.
#[derive(Clone, Debug)]
pub struct Side {
    pub engine_index: u32,
    pub key_name: String,
    pub parts: Vec<KeyPart>,
}

/// The first usable key of `keys` whose leading parts are `cols`, in order.
fn find_index(keys: &[KeyDef], cols: &[String]) -> Option<Side> {
    keys.iter()
        .filter(|k| k.flags & KEY_UNUSABLE == 0 && k.parts.len() >= cols.len())
        .find(|k| {
            k.parts
                .iter()
                .zip(cols)
                .all(|(p, c)| p.flags & PART_PREFIX == 0 && p.column.eq_ignore_ascii_case(c))
        })
        .map(|k| Side {
            engine_index: k.engine_index,
            key_name: k.name.clone(),
            parts: k.parts[..cols.len()].to_vec(),
        })
}

/// A new constraint as the shim passes it (`name` empty: generate one).
pub struct NewForeignKey {
    pub name: String,
    pub parent: String,
    pub child_cols: Vec<String>,
    pub parent_cols: Vec<String>,
    pub on_delete: u8,
    pub on_update: u8,
}

impl ForeignKeys {
    fn with<T>(
        &self,
        db: &Db,
        cf: &Cf,
        f: impl FnOnce(&mut Cache) -> FfiResult<T>,
    ) -> FfiResult<T> {
        let mut guard = self.cache.lock();
        if guard.is_none() {
            *guard = Some(Self::load(db, cf)?);
        }
        match guard.as_mut() {
            Some(c) => {
                let out = f(c);
                let none = c.fks.values().all(Vec::is_empty);
                self.none_defined.store(none, Ordering::Release);
                out
            }
            None => Err(FfiError::new(
                Status::Internal,
                "constraint catalog not loaded",
            )),
        }
    }

    fn load(db: &Db, cf: &Cf) -> FfiResult<Cache> {
        let mut cache = Cache::default();
        let mut txn = db.begin(Isolation::ReadCommitted);
        for prefix in [KEYS_PREFIX, FK_PREFIX] {
            let mut it = txn.iter(cf, IterOptions::default())?;
            it.seek(prefix);
            while it.valid() && it.key().starts_with(prefix) {
                let name = String::from_utf8_lossy(&it.key()[prefix.len()..]).into_owned();
                if prefix == KEYS_PREFIX {
                    let keys = decode_keys(&format!("keys/{name}"), it.value())?;
                    cache.keys.insert(name, keys);
                } else {
                    let fks = decode_fks(&name, it.value())?;
                    cache.fks.insert(name, fks);
                }
                it.next();
            }
            it.status()?;
        }
        txn.rollback();
        Ok(cache)
    }

    /// Writes the given entries (None = delete) in one transaction.
    fn write(db: &Db, cf: &Cf, entries: &[CatalogWrite]) -> FfiResult<()> {
        let mut txn = db.begin(Isolation::ReadCommitted);
        for (k, v) in entries {
            match v {
                Some(v) => txn.put(cf, k, v)?,
                None => txn.delete(cf, k)?,
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Drops the entries of tables the catalog no longer has (a crash between a
    /// DROP TABLE's catalog transaction and this catalog's), so a table created
    /// later under that name starts without them. Run when the engine opens.
    pub fn purge_orphans(&self, db: &Db, cf: &Cf, live: &[String]) -> FfiResult<()> {
        let live: std::collections::HashSet<&str> = live.iter().map(|n| normalize(n)).collect();
        self.with(db, cf, |c| {
            let mut writes = Vec::new();
            for name in c.keys.keys().filter(|n| !live.contains(n.as_str())) {
                writes.push((catalog_key(KEYS_PREFIX, name), None));
            }
            for name in c.fks.keys().filter(|n| !live.contains(n.as_str())) {
                writes.push((catalog_key(FK_PREFIX, name), None));
            }
            if writes.is_empty() {
                return Ok(());
            }
            Self::write(db, cf, &writes)?;
            c.keys.retain(|n, _| live.contains(n.as_str()));
            c.fks.retain(|n, _| live.contains(n.as_str()));
            Ok(())
        })
    }

    /// Records a table's keys (skipped when unchanged).
    pub fn set_keys(&self, db: &Db, cf: &Cf, name: &str, keys: Vec<KeyDef>) -> FfiResult<()> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            c.pending.remove(name);
            if c.keys.get(name) == Some(&keys) {
                return Ok(());
            }
            Self::write(
                db,
                cf,
                &[(catalog_key(KEYS_PREFIX, name), Some(encode_keys(&keys)))],
            )?;
            c.keys.insert(name.to_string(), keys);
            Ok(())
        })
    }

    /// Sets the constraints of table `child` (just created): those of
    /// `inherit_from` (the table a copying ALTER TABLE rebuilds) except the ones
    /// named in `drop`, plus `add`. Generated names are `<display>_ibfk_<n>`.
    /// With `checks`, every constraint must find its indexes and a parent table.
    #[allow(clippy::too_many_arguments)]
    pub fn define(
        &self,
        db: &Db,
        cf: &Cf,
        child: &str,
        display: &str,
        inherit_from: Option<&str>,
        drop: &[String],
        add: Vec<NewForeignKey>,
        checks: bool,
    ) -> FfiResult<()> {
        let child = normalize(child);
        let inherit_from = inherit_from.map(normalize);
        self.with(db, cf, |c| {
            let mut fks: Vec<ForeignKey> = inherit_from
                .and_then(|from| c.fks.get(from))
                .map(|v| {
                    v.iter()
                        .filter(|f| !drop.iter().any(|d| d.eq_ignore_ascii_case(&f.name)))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            for f in &mut fks {
                f.child = child.to_string();
            }
            let inherited = fks.len();
            let prefix = format!("{}_ibfk_", display.to_lowercase());
            let mut next_no = fks
                .iter()
                .filter_map(|f| {
                    f.name
                        .to_lowercase()
                        .strip_prefix(&prefix)?
                        .parse::<u32>()
                        .ok()
                })
                .max()
                .unwrap_or(0);
            for n in add {
                let name = if n.name.is_empty() {
                    next_no += 1;
                    format!("{display}_ibfk_{next_no}")
                } else {
                    n.name
                };
                let rule = |r: u8| {
                    if r == FK_OPTION_UNDEF {
                        FK_OPTION_RESTRICT
                    } else {
                        r
                    }
                };
                fks.push(ForeignKey {
                    name,
                    child: child.to_string(),
                    parent: normalize(&n.parent).to_string(),
                    child_cols: n.child_cols,
                    parent_cols: n.parent_cols,
                    on_delete: rule(n.on_delete),
                    on_update: rule(n.on_update),
                });
            }
            // Names are unique within a database (InnoDB's dictionary key).
            let my_db = db_of(child);
            for (i, f) in fks.iter().enumerate() {
                let dup_here = fks[..i]
                    .iter()
                    .any(|g| g.name.eq_ignore_ascii_case(&f.name));
                let dup_elsewhere = c.fks.iter().any(|(owner, v)| {
                    owner != child
                        && Some(owner.as_str()) != inherit_from
                        && db_of(owner) == my_db
                        && v.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name))
                });
                if dup_here || dup_elsewhere {
                    let place = if dup_here { "this table" } else { "another table" };
                    return Err(FfiError::new(
                        Status::Duplicate,
                        format!(
                            "a foreign key constraint named `{}` already exists on {place}",
                            f.name
                        ),
                    ));
                }
            }
            for (i, f) in fks.iter().enumerate() {
                if i < inherited && !checks {
                    continue;
                }
                Self::validate(c, f, inherit_from, checks)?;
            }
            // A rebuilt parent must keep an index for the constraints referencing it.
            if let (Some(from), true) = (inherit_from, checks) {
                let new_keys = c.keys.get(child).map(Vec::as_slice).unwrap_or(&[]);
                for f in c.fks.values().flatten().filter(|f| f.parent == from && f.child != from) {
                    if find_index(new_keys, &f.parent_cols).is_none() {
                        return Err(malformed(format!(
                            "({}) constraint failed. There is no index in the referenced table where the referenced columns appear as the first columns.",
                            f.child_cols.join(", ")
                        )));
                    }
                }
            }
            if fks.is_empty() && !c.fks.contains_key(child) {
                return Ok(());
            }
            let entry = if fks.is_empty() {
                None
            } else {
                Some(encode_fks(&fks))
            };
            Self::write(db, cf, &[(catalog_key(FK_PREFIX, child), entry)])?;
            if fks.is_empty() {
                c.fks.remove(child);
            } else {
                c.fks.insert(child.to_string(), fks);
            }
            Ok(())
        })
    }

    /// The keys a constraint's parent side resolves against: a self-reference
    /// written against the name of the table an ALTER rebuilds uses the new
    /// definition.
    fn parent_keys<'c>(
        c: &'c Cache,
        f: &ForeignKey,
        renamed_from: Option<&str>,
    ) -> Option<&'c Vec<KeyDef>> {
        if f.parent == f.child || Some(f.parent.as_str()) == renamed_from {
            c.keys.get(&f.child)
        } else {
            c.keys.get(&f.parent)
        }
    }

    /// Checks that `f` can be enforced. The messages are InnoDB's (the shim puts
    /// "Create  table `db`.`t` with foreign key " before them).
    fn validate(
        c: &Cache,
        f: &ForeignKey,
        renamed_from: Option<&str>,
        need_parent: bool,
    ) -> FfiResult<()> {
        let failed = |why: String| {
            malformed(format!(
                "({}) constraint failed. {why}",
                f.child_cols.join(", ")
            ))
        };
        let child_keys = c
            .keys
            .get(&f.child)
            .ok_or_else(|| failed(format!("The keys of table {} are not recorded.", f.child)))?;
        let child_side = find_index(child_keys, &f.child_cols).ok_or_else(|| {
            failed("There is no index in the table which would contain the columns as the first columns.".into())
        })?;
        if f.on_delete == FK_OPTION_SET_NULL || f.on_update == FK_OPTION_SET_NULL {
            if let Some(p) = child_side
                .parts
                .iter()
                .find(|p| p.flags & PART_NULLABLE == 0)
            {
                return Err(failed(format!(
                    "You have defined a SET NULL condition but column '{}' is defined as NOT NULL.",
                    p.column
                )));
            }
        }
        let Some(parent_keys) = Self::parent_keys(c, f, renamed_from) else {
            if need_parent {
                let (db, table) = f.parent.rsplit_once('/').unwrap_or(("", &f.parent));
                return Err(failed(format!(
                    "Referenced table `{db}`.`{table}` not found in the data dictionary."
                )));
            }
            return Ok(());
        };
        let parent_side = find_index(parent_keys, &f.parent_cols).ok_or_else(|| {
            failed("There is no index in the referenced table where the referenced columns appear as the first columns.".into())
        })?;
        for (cp, pp) in child_side.parts.iter().zip(&parent_side.parts) {
            if cp.type_sig != pp.type_sig {
                return Err(failed(format!(
                    "Field type or character set for column '{}' does not match referenced column '{}'.",
                    cp.column, pp.column
                )));
            }
        }
        Ok(())
    }

    /// Moves a table's entries to a new name (see the module's Format).
    /// `commit` writes the entries, with the table's own catalog change in one
    /// transaction (`Catalog::rename_with`); memory follows once it succeeded.
    pub fn rename(
        &self,
        db: &Db,
        cf: &Cf,
        from: &str,
        to: &str,
        commit: impl FnOnce(&[CatalogWrite]) -> FfiResult<()>,
    ) -> FfiResult<()> {
        let (from, to) = (normalize(from), normalize(to));
        let follow = !is_tmp_name(from) && !is_tmp_name(to);
        let result = self.with(db, cf, |c| {
            let mut fks = c.fks.clone();
            let mut touched: Vec<String> = Vec::new();
            if let Some(mut own) = fks.remove(from) {
                let old_prefix = format!("{}_ibfk_", base_name(from));
                let new_prefix = format!("{}_ibfk_", base_name(to));
                for f in &mut own {
                    f.child = to.to_string();
                    if follow {
                        if let Some(rest) = f.name.strip_prefix(&old_prefix) {
                            f.name = format!("{new_prefix}{rest}");
                        }
                    }
                }
                fks.insert(to.to_string(), own);
                touched.push(from.to_string());
                touched.push(to.to_string());
            }
            if follow {
                for (child, v) in fks.iter_mut() {
                    let mut changed = false;
                    for f in v.iter_mut().filter(|f| f.parent == from) {
                        f.parent = to.to_string();
                        changed = true;
                    }
                    if changed {
                        touched.push(child.clone());
                    }
                }
            }
            let mut writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = touched
                .iter()
                .map(|n| (catalog_key(FK_PREFIX, n), fks.get(n).map(|v| encode_fks(v))))
                .collect();
            let keys = c.keys.get(from).cloned();
            if let Some(k) = &keys {
                writes.push((catalog_key(KEYS_PREFIX, from), None));
                writes.push((catalog_key(KEYS_PREFIX, to), Some(encode_keys(k))));
            }
            commit(&writes)?;
            c.fks = fks;
            if let Some(k) = keys {
                c.keys.remove(from);
                c.keys.insert(to.to_string(), k);
            }
            Ok(())
        });
        result
    }

    /// RENAME COLUMN (in place) of table `name`: its constraints and the
    /// constraints referencing it name the column by its new name.
    pub fn rename_column(
        &self,
        db: &Db,
        cf: &Cf,
        name: &str,
        from: &str,
        to: &str,
    ) -> FfiResult<()> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            let mut fks = c.fks.clone();
            let mut writes = Vec::new();
            // Renames `from` among `cols`; true if it was there.
            let rename = |cols: &mut Vec<String>| {
                let mut any = false;
                for col in cols.iter_mut().filter(|c| c.eq_ignore_ascii_case(from)) {
                    *col = to.to_string();
                    any = true;
                }
                any
            };
            for (child, v) in fks.iter_mut() {
                let mut changed = false;
                for f in v.iter_mut() {
                    if f.child == name {
                        changed |= rename(&mut f.child_cols);
                    }
                    if f.parent == name {
                        changed |= rename(&mut f.parent_cols);
                    }
                }
                if changed {
                    writes.push((catalog_key(FK_PREFIX, child), Some(encode_fks(v))));
                }
            }
            if writes.is_empty() {
                return Ok(());
            }
            Self::write(db, cf, &writes)?;
            c.fks = fks;
            Ok(())
        })
    }

    /// Forgets a dropped table's keys and constraints (constraints that reference
    /// it stay, as in InnoDB).
    /// `commit` writes the entries with the table's own catalog change
    /// (`Catalog::drop_table_with`).
    pub fn dropped(
        &self,
        db: &Db,
        cf: &Cf,
        name: &str,
        commit: impl FnOnce(&[CatalogWrite]) -> FfiResult<()>,
    ) -> FfiResult<()> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            let mut writes = Vec::new();
            if c.keys.contains_key(name) {
                writes.push((catalog_key(KEYS_PREFIX, name), None));
            }
            if c.fks.contains_key(name) {
                writes.push((catalog_key(FK_PREFIX, name), None));
            }
            commit(&writes)?;
            c.keys.remove(name);
            c.fks.remove(name);
            Ok(())
        })
    }

    /// Marks table `name`'s keys as being replaced: an ALTER is about to switch
    /// the table to families of a new definition, whose keys it records after
    /// the switch (`tdb_table_set_keys`, which ends the mark). Called before the
    /// switch, so a check that resolves a constraint against the old keys after
    /// it sees the mark.
    pub fn keys_pending(&self, db: &Db, cf: &Cf, name: &str) -> FfiResult<()> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            c.pending.insert(name.to_string());
            Ok(())
        })
    }

    /// The first constraint referencing table `name` from another table that
    /// finds no index among `keys` (a new definition of `name`), by its child
    /// columns; None when every one does.
    pub fn unserved_by(
        &self,
        db: &Db,
        cf: &Cf,
        name: &str,
        keys: &[KeyDef],
    ) -> FfiResult<Option<String>> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            Ok(c.fks
                .values()
                .flatten()
                .filter(|f| f.parent == name && f.child != name)
                .find(|f| find_index(keys, &f.parent_cols).is_none())
                .map(|f| f.child_cols.join(", ")))
        })
    }

    /// Ends the mark of [`ForeignKeys::keys_pending`] without new keys: the
    /// switch did not happen.
    pub fn keys_settled(&self, db: &Db, cf: &Cf, name: &str) -> FfiResult<()> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            c.pending.remove(name);
            Ok(())
        })
    }

    /// The keys recorded for table `name` (empty if none are).
    pub fn keys(&self, db: &Db, cf: &Cf, name: &str) -> FfiResult<Vec<KeyDef>> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            Ok(c.keys.get(name).cloned().unwrap_or_default())
        })
    }

    /// The constraints declared on `name` (child) or referencing it (parent).
    pub fn list(
        &self,
        db: &Db,
        cf: &Cf,
        name: &str,
        as_parent: bool,
    ) -> FfiResult<Vec<ForeignKey>> {
        if self.none_defined.load(Ordering::Acquire) {
            return Ok(Vec::new());
        }
        let name = normalize(name);
        self.with(db, cf, |c| {
            if !as_parent {
                // In name order, as InnoDB keeps a table's constraints: SHOW
                // CREATE TABLE lists them, and the checks run, in that order.
                let mut own = c.fks.get(name).cloned().unwrap_or_default();
                own.sort_by(|a, b| a.name.cmp(&b.name));
                return Ok(own);
            }
            let mut out: Vec<ForeignKey> = c
                .fks
                .values()
                .flatten()
                .filter(|f| f.parent == name)
                .cloned()
                .collect();
            out.sort_by(|a, b| (&a.child, &a.name).cmp(&(&b.child, &b.name)));
            Ok(out)
        })
    }

    /// Before table `from` is renamed to `to`. A copying ALTER TABLE renames
    /// the table to a temporary name, its copy to the table's name, and drops
    /// the old table; a child's check locks the referenced value in the
    /// parent's family without the parent's metadata lock, so a check that
    /// locked a family of the old table would not keep a change of the copy
    /// from removing the value. So the first rename of a table constraints
    /// reference to a temporary name first waits (up to `lock_wait`) for the
    /// checks holding locks in its index families (`families`, read only then)
    /// and keeps new ones out until [`ForeignKeys::end_fences`] (the copy has
    /// the name, or the old table is gone or renamed back): a check that waited
    /// finds the table renamed and resolves again (`tdb_fk_probe`). Returns
    /// the fence to hold once the rename is done ([`ForeignKeys::hold_fence`]).
    pub fn fence_rename(
        &self,
        db: &Db,
        cf: &Cf,
        from: &str,
        to: &str,
        families: impl FnOnce() -> Vec<Cf>,
        lock_wait: Duration,
    ) -> FfiResult<Option<Txn>> {
        let (from, to) = (normalize(from), normalize(to));
        if is_tmp_name(from) || !is_tmp_name(to) || !self.is_referenced(db, cf, from)? {
            return Ok(None);
        }
        let mut txn = db.begin(Isolation::ReadCommitted);
        if let Err(err) = txn.lock_tables(&families(), LockMode::Exclusive, lock_wait) {
            txn.rollback();
            return Err(err.into());
        }
        Ok(Some(txn))
    }

    /// Holds the fence of [`ForeignKeys::fence_rename`] of a table renamed from
    /// `original` to `backup`.
    pub fn hold_fence(&self, original: &str, backup: &str, txn: Txn) {
        self.fences.lock().push(RenameFence {
            backup: normalize(backup).to_string(),
            original: normalize(original).to_string(),
            txn,
        });
    }

    /// Waits while table `name` is renamed away by a copying ALTER TABLE whose
    /// copy is to take the name (a fence of [`ForeignKeys::fence_rename`] held
    /// for it): between the ALTER's two renames no table has the name, and a
    /// child's check resolving its constraint then would find no parent at
    /// all. Returns whether it waited, once no fence names it or after
    /// `limit` (the copy's rename follows the first at once).
    pub fn wait_while_renamed_away(&self, name: &str, limit: Duration) -> bool {
        let name = normalize(name);
        let renamed_away = || self.fences.lock().iter().any(|f| f.original == name);
        if !renamed_away() {
            return false;
        }
        let start = std::time::Instant::now();
        while renamed_away() && start.elapsed() < limit {
            std::thread::sleep(STALE_PAUSE);
        }
        true
    }

    /// Ends the fences that table `gone` (renamed to `renamed_to`, or dropped)
    /// ends: those of the old table renamed or dropped, and those whose name a
    /// table now has again.
    pub fn end_fences(&self, gone: &str, renamed_to: Option<&str>) {
        let (gone, renamed_to) = (normalize(gone), renamed_to.map(normalize));
        let ended: Vec<RenameFence> = {
            let mut fences = self.fences.lock();
            let (ended, kept) = std::mem::take(&mut *fences)
                .into_iter()
                .partition(|f| f.backup == gone || renamed_to == Some(f.original.as_str()));
            *fences = kept;
            ended
        };
        for f in ended {
            f.txn.rollback();
        }
    }

    /// Whether a constraint references table `name` (its own included).
    pub fn is_referenced(&self, db: &Db, cf: &Cf, name: &str) -> FfiResult<bool> {
        let name = normalize(name);
        self.with(db, cf, |c| {
            Ok(c.fks.values().flatten().any(|f| f.parent == name))
        })
    }

    /// The indexes serving both sides of `f` (None for a side whose table or
    /// index is missing), and whether the parent's keys are being replaced
    /// ([`ForeignKeys::keys_pending`]).
    pub fn resolve(
        &self,
        db: &Db,
        cf: &Cf,
        f: &ForeignKey,
    ) -> FfiResult<(Option<Side>, Option<Side>, bool)> {
        self.with(db, cf, |c| {
            let child = c
                .keys
                .get(&f.child)
                .and_then(|k| find_index(k, &f.child_cols));
            let parent = c
                .keys
                .get(&f.parent)
                .and_then(|k| find_index(k, &f.parent_cols));
            Ok((child, parent, c.pending.contains(&f.parent)))
        })
    }
}

// ---- C ABI --------------------------------------------------------------------------

/// `struct tdb_key_part_def` of the header.
#[repr(C)]
pub struct KeyPartDefC {
    pub column: *const c_char,
    pub type_sig: *const c_char,
    pub length: u32,
    pub flags: u32,
}

/// `struct tdb_key_def` of the header.
#[repr(C)]
pub struct KeyDefC {
    pub engine_index: u32,
    pub flags: u32,
    pub name: *const c_char,
    pub n_parts: u32,
    pub parts: *const KeyPartDefC,
}

/// `struct tdb_fk_def` of the header.
#[repr(C)]
pub struct FkDefC {
    pub name: *const c_char,
    pub parent: *const c_char,
    pub n_cols: u32,
    pub child_cols: *const *const c_char,
    pub parent_cols: *const *const c_char,
    pub on_delete: u32,
    pub on_update: u32,
}

/// # Safety
/// `ptr` must be NULL with n == 0, or point to n readable T.
unsafe fn slice<'a, T>(ptr: *const T, n: usize) -> FfiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::new(Status::Invalid, "NULL array with a length"));
    }
    // SAFETY: non-NULL with n elements by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// # Safety
/// `ptr` must point to n NUL-terminated strings.
unsafe fn strings(ptr: *const *const c_char, n: usize) -> FfiResult<Vec<String>> {
    // SAFETY: by contract.
    let items = unsafe { slice(ptr, n) }?;
    items
        .iter()
        // SAFETY: each a NUL-terminated string by contract.
        .map(|&p| unsafe { raw::str(p) }.map(str::to_string))
        .collect()
}

/// # Safety
/// `keys` as `tdb_table_set_keys` takes them.
unsafe fn keys_from_c(keys: *const KeyDefC, n_keys: u32) -> FfiResult<Vec<KeyDef>> {
    // SAFETY: by contract.
    let keys_c = unsafe { slice(keys, n_keys as usize) }?;
    let mut keys = Vec::with_capacity(keys_c.len());
    for k in keys_c {
        // SAFETY: by contract.
        let parts_c = unsafe { slice(k.parts, k.n_parts as usize) }?;
        let mut parts = Vec::with_capacity(parts_c.len());
        for p in parts_c {
            parts.push(KeyPart {
                // SAFETY: by contract.
                column: unsafe { raw::str(p.column) }?.to_string(),
                // SAFETY: by contract.
                type_sig: unsafe { raw::str(p.type_sig) }?.to_string(),
                length: p.length,
                flags: p.flags,
            });
        }
        keys.push(KeyDef {
            engine_index: k.engine_index,
            flags: k.flags,
            // SAFETY: by contract.
            name: unsafe { raw::str(k.name) }?.to_string(),
            parts,
        });
    }
    Ok(keys)
}

/// # Safety
/// Arguments as the header says.
#[no_mangle]
pub unsafe extern "C" fn tdb_table_set_keys(
    name: *const c_char,
    keys: *const KeyDefC,
    n_keys: u32,
) -> c_int {
    guard(|| {
        if crate::engine::read_only() {
            // Opening a table registers its keys for FOREIGN KEY checks, which
            // a read-only engine never makes: nothing to keep, nothing to write.
            return Ok(());
        }
        // SAFETY: by contract.
        let name = unsafe { raw::str(name) }?;
        // SAFETY: by contract.
        let keys = unsafe { keys_from_c(keys, n_keys) }?;
        let e = engine()?;
        e.fks.set_keys(&e.db, e.catalog.cf(), name, keys)
    })
}

/// # Safety
/// Arguments as the header says.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_keys_serve(
    name: *const c_char,
    keys: *const KeyDefC,
    n_keys: u32,
) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let name = unsafe { raw::str(name) }?;
        // SAFETY: by contract.
        let keys = unsafe { keys_from_c(keys, n_keys) }?;
        let e = engine()?;
        match e.fks.unserved_by(&e.db, e.catalog.cf(), name, &keys)? {
            None => Ok(()),
            Some(cols) => Err(malformed(format!(
                "({cols}) constraint failed. There is no index in the referenced table where the referenced columns appear as the first columns."
            ))),
        }
    })
}

/// # Safety
/// Arguments as the header says.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_define(
    child: *const c_char,
    display: *const c_char,
    inherit_from: *const c_char,
    drop: *const *const c_char,
    n_drop: u32,
    add: *const FkDefC,
    n_add: u32,
    checks: c_int,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: by contract (each pointer below likewise).
        let child = unsafe { raw::str(child) }?;
        // SAFETY: as above.
        let display = unsafe { raw::str(display) }?;
        let inherit_from = if inherit_from.is_null() {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { raw::str(inherit_from) }?)
        };
        // SAFETY: as above.
        let drop = unsafe { strings(drop, n_drop as usize) }?;
        // SAFETY: as above.
        let add_c = unsafe { slice(add, n_add as usize) }?;
        let mut add = Vec::with_capacity(add_c.len());
        for a in add_c {
            add.push(NewForeignKey {
                name: if a.name.is_null() {
                    String::new()
                } else {
                    // SAFETY: as above.
                    unsafe { raw::str(a.name) }?.to_string()
                },
                // SAFETY: as above.
                parent: unsafe { raw::str(a.parent) }?.to_string(),
                // SAFETY: as above.
                child_cols: unsafe { strings(a.child_cols, a.n_cols as usize) }?,
                // SAFETY: as above.
                parent_cols: unsafe { strings(a.parent_cols, a.n_cols as usize) }?,
                on_delete: u8::try_from(a.on_delete).unwrap_or(FK_OPTION_RESTRICT),
                on_update: u8::try_from(a.on_update).unwrap_or(FK_OPTION_RESTRICT),
            });
        }
        let e = engine()?;
        e.fks.define(
            &e.db,
            e.catalog.cf(),
            child,
            display,
            inherit_from,
            &drop,
            add,
            checks != 0,
        )
    })
}

/// # Safety
/// NUL-terminated names.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_rename_column(
    name: *const c_char,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    guard(|| {
        crate::engine::writable()?;
        // SAFETY: by contract.
        let (name, from, to) = unsafe { (raw::str(name)?, raw::str(from)?, raw::str(to)?) };
        let e = engine()?;
        e.fks.rename_column(&e.db, e.catalog.cf(), name, from, to)
    })
}

/// `struct tdb_fk_part` of the header.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FkPartC {
    pub length: u32,
    pub flags: u32,
}

/// `struct tdb_fk_info` of the header.
#[repr(C)]
pub struct FkInfoC {
    pub name: *const c_char,
    pub child: *const c_char,
    pub parent: *const c_char,
    pub n_cols: u32,
    pub child_cols: *const *const c_char,
    pub parent_cols: *const *const c_char,
    pub on_delete: u32,
    pub on_update: u32,
    pub child_index: u32,
    pub parent_index: u32,
    pub parent_key_name: *const c_char,
    pub child_parts: *const FkPartC,
    pub parent_parts: *const FkPartC,
    pub parent_family: u64,
}

/// One constraint of a `tdb_fk_list`, with the strings its `FkInfoC` points at.
struct ListItem {
    strings: Vec<CString>,
    child_cols: Vec<*const c_char>,
    parent_cols: Vec<*const c_char>,
    child_parts: Vec<FkPartC>,
    parent_parts: Vec<FkPartC>,
    info: FkInfoC,
}

/// `tdb_fk_list` of the header.
pub struct FkList {
    items: Vec<ListItem>,
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

fn list_item(
    f: &ForeignKey,
    child: Option<Side>,
    parent: Option<Side>,
    parent_family: u64,
) -> ListItem {
    let mut strings: Vec<CString> = vec![
        cstring(&f.name),
        cstring(&f.child),
        cstring(&f.parent),
        cstring(parent.as_ref().map(|s| s.key_name.as_str()).unwrap_or("")),
    ];
    strings.extend(
        f.child_cols
            .iter()
            .chain(&f.parent_cols)
            .map(|s| cstring(s)),
    );
    let n = f.child_cols.len();
    let child_cols: Vec<*const c_char> = strings[4..4 + n].iter().map(|s| s.as_ptr()).collect();
    let parent_cols: Vec<*const c_char> = strings[4 + n..4 + 2 * n]
        .iter()
        .map(|s| s.as_ptr())
        .collect();
    let parts = |s: &Option<Side>| -> Vec<FkPartC> {
        s.as_ref()
            .map(|s| {
                s.parts
                    .iter()
                    .map(|p| FkPartC {
                        length: p.length,
                        flags: p.flags,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let child_parts = parts(&child);
    let parent_parts = parts(&parent);
    let info = FkInfoC {
        name: strings[0].as_ptr(),
        child: strings[1].as_ptr(),
        parent: strings[2].as_ptr(),
        n_cols: n as u32,
        child_cols: child_cols.as_ptr(),
        parent_cols: parent_cols.as_ptr(),
        on_delete: u32::from(f.on_delete),
        on_update: u32::from(f.on_update),
        child_index: child.as_ref().map_or(u32::MAX, |s| s.engine_index),
        parent_index: parent.as_ref().map_or(u32::MAX, |s| s.engine_index),
        parent_key_name: strings[3].as_ptr(),
        child_parts: if child_parts.is_empty() {
            std::ptr::null()
        } else {
            child_parts.as_ptr()
        },
        parent_parts: if parent_parts.is_empty() {
            std::ptr::null()
        } else {
            parent_parts.as_ptr()
        },
        parent_family,
    };
    // The vectors' heap buffers do not move when the item is moved.
    ListItem {
        strings,
        child_cols,
        parent_cols,
        child_parts,
        parent_parts,
        info,
    }
}

/// # Safety
/// A NUL-terminated name and a writable out-pointer.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_list_open(
    name: *const c_char,
    as_parent: c_int,
    out: *mut *mut FkList,
) -> c_int {
    guard(|| {
        // SAFETY: by contract.
        let name = unsafe { raw::str(name) }?;
        let e = engine()?;
        let fks = e.fks.list(&e.db, e.catalog.cf(), name, as_parent != 0)?;
        let mut items = Vec::with_capacity(fks.len());
        for f in &fks {
            // The parent's families are read before and after its keys: equal,
            // the keys resolved describe those families (parent_family).
            // A parent that does not open (dropped, or its encryption key
            // missing) is looked up by position: the probe reports it.
            let mut parent = e.catalog.open_table(&e.db, &f.parent).ok();
            if parent.is_none() && e.fks.wait_while_renamed_away(&f.parent, RENAMED_AWAY_WAIT) {
                parent = e.catalog.open_table(&e.db, &f.parent).ok();
            }
            let ids = || -> Vec<u64> {
                parent
                    .as_ref()
                    .map(|s| s.cfs().iter().map(Cf::id).collect())
                    .unwrap_or_default()
            };
            let mut resolved = None;
            for _ in 0..RESOLVE_TRIES {
                let before = ids();
                let (c, p, pending) = e.fks.resolve(&e.db, e.catalog.cf(), f)?;
                let family = match (&parent, &p) {
                    (Some(_), Some(side)) => {
                        match parent_family(&before, &ids(), side.engine_index, pending) {
                            Some(family) => family,
                            None => continue,
                        }
                    }
                    _ => FAMILY_BY_POSITION,
                };
                resolved = Some((c, p, family));
                break;
            }
            let (c, p, family) = match resolved {
                Some(r) => r,
                None => {
                    let (c, p, _) = e.fks.resolve(&e.db, e.catalog.cf(), f)?;
                    (c, p, FAMILY_PENDING)
                }
            };
            items.push(list_item(f, c, p, family));
        }
        let list = Box::into_raw(Box::new(FkList { items }));
        // SAFETY: writable by contract.
        unsafe { raw::write_out(out, list) }
    })
}

/// # Safety
/// A list from `tdb_fk_list_open`.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_list_count(list: *const FkList) -> u32 {
    guard_value(0, || {
        // SAFETY: NULL or a live list by contract.
        Ok(unsafe { list.as_ref() }.map_or(0, |l| l.items.len() as u32))
    })
}

/// # Safety
/// A list from `tdb_fk_list_open`; the result lives as long as the list.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_list_get(list: *const FkList, i: u32) -> *const FkInfoC {
    guard_value(std::ptr::null(), || {
        // SAFETY: NULL or a live list by contract.
        Ok(
            match unsafe { list.as_ref() }.and_then(|l| l.items.get(i as usize)) {
                Some(item) => {
                    // Keep the fields alive with the item (read to silence dead-code).
                    debug_assert!(item.strings.len() >= 4);
                    debug_assert!(item.child_cols.len() == item.parent_cols.len());
                    debug_assert!(item.child_parts.len() <= item.child_cols.len());
                    debug_assert!(item.parent_parts.len() <= item.parent_cols.len());
                    &item.info as *const FkInfoC
                }
                None => std::ptr::null(),
            },
        )
    })
}

/// # Safety
/// NULL or a list from `tdb_fk_list_open`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_list_free(list: *mut FkList) {
    guard(|| {
        if !list.is_null() {
            // SAFETY: made by Box::into_raw in tdb_fk_list_open.
            drop(unsafe { Box::from_raw(list) });
        }
        Ok(())
    });
}

/// The lock mode argument of `tdb_fk_probe`: no lock.
const PROBE_NO_LOCK: u32 = u32::MAX;

/// How often `tdb_fk_list_open` resolves a constraint again when the parent's
/// families changed meanwhile, before it gives the check a stale family.
const RESOLVE_TRIES: usize = 3;

/// How long a stale probe waits before it returns: the switch that made it
/// stale records the new keys right after (its ALTER still holds the parent).
const STALE_PAUSE: Duration = Duration::from_millis(1);

/// How long a constraint's resolution waits for a parent renamed away by a
/// copying ALTER TABLE to have its name again
/// ([`ForeignKeys::wait_while_renamed_away`]).
const RENAMED_AWAY_WAIT: Duration = Duration::from_secs(1);

/// Stale probes a child's check goes on after, at least: each pauses
/// [`STALE_PAUSE`], so about a second.
const STALE_MIN_TRIES: u64 = 1000;

/// Whether a child's check whose probe was stale (`Status::Stale`) resolves its
/// constraints again and retries, after `*tries` stale probes so far (counted
/// here). A parent's ALTER ends its switch by recording the new keys, so
/// staleness lasts about as long as a lock wait for the switch: the check goes
/// on for as many stale probes as the statement's lock wait has milliseconds
/// (each probe pauses about one), at least [`STALE_MIN_TRIES`], and then fails as
/// a lock wait that timed out; at once when the statement was killed.
pub fn stale_retry(tries: &mut u64, lock_wait_ms: u64, killed: bool) -> FfiResult<()> {
    *tries = tries.saturating_add(1);
    if killed {
        return Err(FfiError::new(
            Status::LockTimeout,
            "a FOREIGN KEY check was interrupted while an ALTER TABLE replaced the parent's keys",
        ));
    }
    if *tries > lock_wait_ms.max(STALE_MIN_TRIES) {
        return Err(FfiError::new(
            Status::LockTimeout,
            "a FOREIGN KEY check waited for an ALTER TABLE of the parent to record its keys \
             for longer than the lock wait",
        ));
    }
    Ok(())
}

/// `stale_retry` for the shim: TDB_OK to resolve again and retry, else the
/// status to fail the check with.
///
/// # Safety
/// `tries` points at the caller's counter, 0 before the check's first stale probe.
#[no_mangle]
pub unsafe extern "C" fn tdb_fk_stale_retry(
    tries: *mut u64,
    lock_wait_ms: u64,
    killed: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: a live counter by contract.
        let tries = unsafe { tries.as_mut() }
            .ok_or_else(|| FfiError::new(Status::Invalid, "NULL stale probe counter"))?;
        stale_retry(tries, lock_wait_ms, killed != 0)
    })
}

/// # Safety
/// Arguments as the header says.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn tdb_fk_probe(
    trx: *mut Trx,
    lock_table: *const c_char,
    lock_index: u32,
    lock_family: u64,
    lock_key: *const u8,
    lock_key_len: usize,
    lock_mode: u32,
    table: *const c_char,
    index: u32,
    prefix: *const u8,
    prefix_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: live handle and buffers by contract (each below likewise).
        let trx = unsafe { raw::handle(trx) }?;
        // SAFETY: as above.
        let table = unsafe { raw::str(table) }?;
        // SAFETY: as above.
        let prefix = unsafe { raw::bytes(prefix, prefix_len) }?;
        let e = engine()?;
        let timeout = trx.lock_wait_timeout;
        // The family locked, which is also the one probed when the probe is of
        // the locked index (a child's check).
        let mut locked_cf = None;
        if lock_mode != PROBE_NO_LOCK {
            // SAFETY: as above.
            let lock_table = unsafe { raw::str(lock_table) }?;
            // SAFETY: as above.
            let lock_key = unsafe { raw::bytes(lock_key, lock_key_len) }?;
            let locked = e.catalog.open_table(&e.db, lock_table)?;
            let mode = if lock_mode == 0 {
                LockMode::Shared
            } else {
                LockMode::Exclusive
            };
            // An online rebuild of the parent switches it to new families once
            // the locks on the old ones are free (Rebuild::commit_group), and an
            // in-place index change that moves them likewise
            // (IndexBuild::commit): a lock granted on a family the switch
            // replaced or moved meanwhile (or refused because it was dropped)
            // is stale, as is a family that is no longer the parent's. (The
            // families are read in place: this runs for every child row.)
            let renames = locked.renames();
            loop {
                let found = locked.with_cfs(|cfs| {
                    lock_position(cfs.iter().map(Cf::id), lock_family, lock_index)
                        .map(|at| cfs.get(at).cloned())
                });
                let Some(cf) = found else {
                    std::thread::sleep(STALE_PAUSE);
                    return Err(FfiError::quiet(Status::Stale));
                };
                let cf = cf.ok_or_else(|| FfiError::new(Status::Invalid, "no such index"))?;
                let res = trx.txn()?.lock(&cf, lock_key, mode, timeout);
                // A copying ALTER TABLE renamed the table away meanwhile
                // (ForeignKeys::fence_rename): its name is another table's now.
                let still = locked.renames() == renames
                    && locked.with_cfs(|now| {
                        lock_position(now.iter().map(Cf::id), lock_family, lock_index)
                            .and_then(|i| now.get(i))
                            .is_some_and(|c| c.id() == cf.id())
                    });
                if still {
                    res?;
                    if normalize(lock_table) == normalize(table) && lock_index == index {
                        locked_cf = Some(cf);
                    }
                    break;
                }
            }
        }
        let cf = match locked_cf {
            Some(cf) => cf,
            None => {
                let shared = match e.catalog.open_table(&e.db, table) {
                    Ok(s) => s,
                    // A parent dropped with foreign_key_checks = 0 has no rows.
                    Err(err) if err.status == Status::NoSuchTable => {
                        return Err(FfiError::quiet(Status::NotFound))
                    }
                    Err(err) => return Err(err),
                };
                shared.cf(index)?
            }
        };
        let txn = trx.txn()?;
        let mut it = txn.iter_latest(&cf, IterOptions::default())?;
        it.seek(prefix);
        it.status()?;
        if it.valid() && it.key().starts_with(prefix) {
            Ok(())
        } else {
            Err(FfiError::quiet(Status::NotFound))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(c: &str, sig: &str) -> KeyPart {
        KeyPart {
            column: c.into(),
            type_sig: sig.into(),
            length: 4,
            flags: 0,
        }
    }

    #[test]
    fn parent_family_follows_the_keys_families() {
        let ids = [10, 11, 12];
        assert_eq!(parent_family(&ids, &ids, 2, false), Some(12));
        // resolved against the old keys after the switch: stale on every probe
        assert_eq!(parent_family(&ids, &ids, 1, true), Some(FAMILY_PENDING));
        // the families changed while the keys were read: resolve again
        assert_eq!(parent_family(&ids, &[20, 21, 22, 23], 1, false), None);
        // a position the families do not have
        assert_eq!(parent_family(&ids, &ids, 3, false), Some(FAMILY_PENDING));
    }

    #[test]
    fn stale_checks_retry_for_the_lock_wait() {
        let mut tries = 0;
        for _ in 0..5000 {
            assert!(stale_retry(&mut tries, 5000, false).is_ok());
        }
        let err = stale_retry(&mut tries, 5000, false).expect_err("gave up");
        assert_eq!(err.status, Status::LockTimeout);
        // a short lock wait still retries for about a second
        let mut tries = 0;
        for _ in 0..STALE_MIN_TRIES {
            assert!(stale_retry(&mut tries, 0, false).is_ok());
        }
        assert!(stale_retry(&mut tries, 0, false).is_err());
        // a killed statement stops at once
        let mut tries = 0;
        let err = stale_retry(&mut tries, 5000, true).expect_err("killed");
        assert_eq!(err.status, Status::LockTimeout);
        // the counter does not wrap
        let mut tries = u64::MAX;
        assert!(stale_retry(&mut tries, u64::MAX, false).is_ok());
    }

    #[test]
    fn lock_position_wants_the_family_where_it_was_resolved() {
        assert_eq!(lock_position([10, 11, 12], 11, 1), Some(1));
        // an in-place ADD UNIQUE put a new family (13) before family 11, which
        // may now serve the constraint instead: stale
        assert_eq!(lock_position([10, 13, 11], 11, 1), None);
        assert_eq!(lock_position([10], 11, 1), None);
        // a rebuild replaced every family
        assert_eq!(lock_position([20, 21, 22], 11, 1), None);
        assert_eq!(lock_position([10, 11], FAMILY_PENDING, 1), None);
        assert_eq!(lock_position([10, 11], FAMILY_BY_POSITION, 1), Some(1));
        assert_eq!(lock_position([10, 11], FAMILY_BY_POSITION, 2), None);
    }

    #[test]
    fn keys_round_trip() {
        let keys = vec![KeyDef {
            engine_index: 2,
            flags: KEY_UNIQUE,
            name: "k".into(),
            parts: vec![part("a", "3:4:0:0"), part("b", "s:8")],
        }];
        assert_eq!(
            decode_keys("t", &encode_keys(&keys)).expect("decodes"),
            keys
        );
        assert!(decode_keys("t", &encode_keys(&keys)[..9]).is_err());
        assert!(decode_keys("t", &[1, 255, 255, 255, 255]).is_err());
    }

    #[test]
    fn fks_round_trip() {
        let fks = vec![ForeignKey {
            name: "c_ibfk_1".into(),
            child: "db/c".into(),
            parent: "db/p".into(),
            child_cols: vec!["x".into(), "y".into()],
            parent_cols: vec!["a".into(), "b".into()],
            on_delete: 1,
            on_update: 4,
        }];
        assert_eq!(decode_fks("db/c", &encode_fks(&fks)).expect("decodes"), fks);
        let bytes = encode_fks(&fks);
        assert!(decode_fks("db/c", &bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn index_lookup_wants_a_leading_prefix() {
        let keys = vec![
            KeyDef {
                engine_index: 0,
                flags: KEY_PRIMARY,
                name: "PRIMARY".into(),
                parts: vec![part("id", "i")],
            },
            KeyDef {
                engine_index: 1,
                flags: 0,
                name: "ab".into(),
                parts: vec![part("a", "i"), part("b", "i")],
            },
        ];
        assert_eq!(
            find_index(&keys, &["A".into()])
                .expect("found")
                .engine_index,
            1
        );
        assert_eq!(
            find_index(&keys, &["id".into()])
                .expect("found")
                .engine_index,
            0
        );
        assert!(find_index(&keys, &["b".into()]).is_none());
        assert!(find_index(&keys, &["a".into(), "b".into(), "c".into()]).is_none());
    }

    fn int_key(index: u32, name: &str, cols: &[&str], flags: u32) -> KeyDef {
        KeyDef {
            engine_index: index,
            flags,
            name: name.into(),
            parts: cols
                .iter()
                .map(|c| KeyPart {
                    column: (*c).into(),
                    type_sig: "3:4:0:0".into(),
                    length: 4,
                    flags: PART_NULLABLE,
                })
                .collect(),
        }
    }

    fn new_fk(name: &str, parent: &str, col: &str, pcol: &str) -> NewForeignKey {
        NewForeignKey {
            name: name.into(),
            parent: parent.into(),
            child_cols: vec![col.into()],
            parent_cols: vec![pcol.into()],
            on_delete: 0,
            on_update: 0,
        }
    }

    #[test]
    fn resolution_waits_while_a_parent_is_renamed_away() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), tidesdb_core::DbOptions::default()).expect("open");
        let fks = ForeignKeys::default();
        // No fence: no wait.
        assert!(!fks.wait_while_renamed_away("./d/p", Duration::from_secs(5)));
        // A copying ALTER renamed ./d/p away; its copy takes the name 50 ms later.
        fks.hold_fence(
            "./d/p",
            "./d/#sql-backup",
            db.begin(Isolation::ReadCommitted),
        );
        let start = std::time::Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                fks.end_fences("./d/#sql-copy", Some("./d/p"));
            });
            assert!(fks.wait_while_renamed_away("./d/p", Duration::from_secs(5)));
        });
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        // Other names are not held up; a fence that never ends is waited out.
        fks.hold_fence(
            "./d/q",
            "./d/#sql-backup2",
            db.begin(Isolation::ReadCommitted),
        );
        assert!(!fks.wait_while_renamed_away("./d/p", Duration::from_secs(5)));
        let start = std::time::Instant::now();
        assert!(fks.wait_while_renamed_away("./d/q", Duration::from_millis(20)));
        assert!(start.elapsed() >= Duration::from_millis(20));
        fks.end_fences("./d/#sql-backup2", None);
        assert!(!fks.wait_while_renamed_away("./d/q", Duration::from_secs(5)));
    }

    #[test]
    fn catalog_follows_ddl_and_survives_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), tidesdb_core::DbOptions::default()).expect("open");
        let cf = db
            .create_cf("__catalog", tidesdb_core::CfOptions::default())
            .expect("cf");
        let fks = ForeignKeys::default();
        let parent = vec![int_key(0, "PRIMARY", &["id"], KEY_PRIMARY)];
        let child = vec![
            int_key(0, "PRIMARY", &["id"], KEY_PRIMARY),
            int_key(1, "p", &["p"], 0),
        ];
        fks.set_keys(&db, &cf, "./d/p", parent).expect("keys");
        fks.set_keys(&db, &cf, "./d/c", child.clone())
            .expect("keys");
        // A missing parent is refused with checks, accepted without.
        let err = fks
            .define(
                &db,
                &cf,
                "./d/c",
                "c",
                None,
                &[],
                vec![new_fk("", "./d/x", "p", "id")],
                true,
            )
            .expect_err("no parent");
        assert_eq!(err.status, Status::FkMalformed);
        // No index on the referenced column.
        let err = fks
            .define(
                &db,
                &cf,
                "./d/c",
                "c",
                None,
                &[],
                vec![new_fk("", "./d/p", "p", "zz")],
                true,
            )
            .expect_err("no index");
        assert!(err.message.contains("no index in the referenced table"));
        fks.define(
            &db,
            &cf,
            "./d/c",
            "c",
            None,
            &[],
            vec![new_fk("", "./d/p", "p", "id")],
            true,
        )
        .expect("define");
        let listed = fks.list(&db, &cf, "d/p", true).expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "c_ibfk_1");
        assert!(fks.is_referenced(&db, &cf, "./d/p").expect("referenced"));
        assert!(!fks.is_referenced(&db, &cf, "d/c").expect("referenced"));
        let (c_side, p_side, _) = fks.resolve(&db, &cf, &listed[0]).expect("resolve");
        assert_eq!(c_side.map(|s| s.engine_index), Some(1));
        assert_eq!(p_side.map(|s| s.engine_index), Some(0));
        // A copying ALTER: the rebuilt table inherits, adds one, then is renamed in.
        fks.set_keys(&db, &cf, "./d/#sql-alter-1", child)
            .expect("keys");
        fks.define(
            &db,
            &cf,
            "./d/#sql-alter-1",
            "c",
            Some("./d/c"),
            &[],
            vec![new_fk("", "./d/p", "p", "id")],
            true,
        )
        .expect("inherit");
        let write = |w: &[CatalogWrite]| ForeignKeys::write(&db, &cf, w);
        fks.rename(&db, &cf, "./d/c", "./d/#sql-backup-1", write)
            .expect("rename");
        fks.rename(&db, &cf, "./d/#sql-alter-1", "./d/c", write)
            .expect("rename");
        fks.dropped(&db, &cf, "./d/#sql-backup-1", write)
            .expect("drop");
        let names: Vec<String> = fks
            .list(&db, &cf, "d/c", false)
            .expect("list")
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["c_ibfk_1", "c_ibfk_2"]);
        // RENAME TABLE of the parent re-points the child; of the child renames
        // the generated names.
        fks.rename(&db, &cf, "./d/p", "./d/p2", write)
            .expect("rename");
        fks.rename(&db, &cf, "./d/c", "./d/c2", write)
            .expect("rename");
        let reloaded = ForeignKeys::default();
        let f = reloaded.list(&db, &cf, "d/p2", true).expect("list");
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].child, "d/c2");
        assert_eq!(f[0].name, "c2_ibfk_1");
        // Entries of tables the catalog lost are purged.
        reloaded
            .purge_orphans(&db, &cf, &["d/p2".to_string()])
            .expect("purge");
        assert!(reloaded
            .list(&db, &cf, "d/p2", true)
            .expect("list")
            .is_empty());
        assert!(ForeignKeys::default()
            .list(&db, &cf, "d/c2", false)
            .expect("list")
            .is_empty());
    }

    #[test]
    fn temporary_names() {
        assert!(is_tmp_name("db/#sql-alter-1-2"));
        assert!(!is_tmp_name("db/t"));
        assert_eq!(db_of("./db/t"), "db");
    }
}
