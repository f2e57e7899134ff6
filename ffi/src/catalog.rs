//! The table catalog: which column families hold a table's rows and indexes.
//!
//! The server names a table by its path (`./db/t1`, `./db/#sql-alter-1f-2`,
//! `./db/t#P#p0`). Column families are named by a numeric table id instead (`t17`
//! holds the rows of table 17, `t17.i2` its second secondary index), so RENAME TABLE
//! only rewrites one catalog entry and TRUNCATE swaps in fresh families.
//!
//! ## Format
//! The catalog lives in the engine's own column family `__catalog`, changed only inside
//! engine transactions, so every DDL step is atomic and survives a crash:
//!
//! | key | value |
//! |---|---|
//! | `next_table_id` | u64 little-endian: the next table id to hand out |
//! | `autoinc/<table_id u64 BE>` | u64 LE: one past the largest AUTO_INCREMENT value a row was written with (as InnoDB persists it: values reserved but not used are not kept over a restart), written whenever it grows (a deferred put, `Db::put_deferred`: written by the next commit group without waiting, so it is durable no later than the commit of the row, which follows it in the WAL) |
//! | `extent/<table_id u64 BE>` | the largest half-extents of the entries of each SPATIAL index, by index number (format in `spatial.rs`) |
//! | `stats/<table_id u64 BE>` | optimizer statistics written by ANALYZE TABLE, or by the automatic measurement as a deferred put (opaque to the engine: the shim's serialisation of rec_per_key) |
//! | `keys/<name>`, `fk/<name>` | a table's keys and its FOREIGN KEY constraints (format in `foreign_keys.rs`) |
//! | `discarded/<table_id u64 BE>` | empty: the table's data was discarded (`ALTER TABLE ... DISCARD TABLESPACE`); its families are empty and reads fail until an `IMPORT TABLESPACE` (`transport/`) |
//! | `table/<name>` | [`TableMeta`], version 2: `u8 version = 2`, `u64 LE table_id`, `u32 LE n_indexes`, `u64 LE auto_increment` (the AUTO_INCREMENT table option), `u32 LE next_index_no`, then `n_indexes` x `u32 LE index_no` (version 1, written before in-place ALTER existed, stops after `auto_increment`: its index numbers are 1..=n_indexes); version 3 = version 2 with `u8 version = 3`, followed by the table's column definition versions (format in `columns.rs`) |
//!
//! The i-th secondary index of a table (in the server's key order) lives in column
//! family `t<id>.i<index_no[i]>`. Index numbers are never reused within a table id:
//! an in-place ADD INDEX builds `t<id>.i<next_index_no>` before any catalog entry
//! names it, and DROP INDEX removes its number from the list, so the families of the
//! other indexes keep their names (see [`Catalog::alter_indexes`]).
//!
//! Every `table/<name>` entry is also written, in the same transaction, to the column
//! family `__catalog_mirror` (same key and value; plus `mirror_complete` = empty once
//! it holds every entry), the copy `tidesdb_force_recovery` reads the table list from
//! when a file of `__catalog` is damaged.
//!
//! Column families named `t<id>` / `t<id>.i<n>` that no catalog entry references are
//! leftovers of a crash between creating families and committing the entry (or of
//! an index build that never committed); they are dropped when the engine opens.
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tidesdb_core::{Cf, CfOptions, CommitOptions, Db, DeferredPut, Isolation, IterOptions};

use crate::columns::ColumnVersions;
use crate::status::{FfiError, FfiResult, Status};

const CATALOG_CF: &str = "__catalog";
/// A second copy of every `table/<name>` entry, written in the same transactions,
/// in a column family (so in table files) of its own: a damaged catalog file still
/// leaves the engine the table list under `tidesdb_force_recovery`.
const MIRROR_CF: &str = "__catalog_mirror";
/// In the mirror: present once the mirror holds every table entry (its first fill
/// and this key are one transaction).
/// The catalog's families: encrypted with key 1 while `tidesdb_encrypt_tables` is
/// ON or FORCE (`DbOptions::family_encryption`, set at every start).
pub const CATALOG_FAMILIES: [&str; 2] = [CATALOG_CF, MIRROR_CF];
const MIRROR_COMPLETE_KEY: &[u8] = b"mirror_complete";
const NEXT_ID_KEY: &[u8] = b"next_table_id";
const TABLE_PREFIX: &[u8] = b"table/";
const AUTOINC_PREFIX: &[u8] = b"autoinc/";

const STATS_PREFIX: &[u8] = b"stats/";
const EXTENT_PREFIX: &[u8] = b"extent/";
const DISCARDED_PREFIX: &[u8] = b"discarded/";
const ALTERED_PREFIX: &[u8] = b"altered/";

fn discarded_key(table_id: u64) -> Vec<u8> {
    let mut k = DISCARDED_PREFIX.to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn extent_key(table_id: u64) -> Vec<u8> {
    let mut k = EXTENT_PREFIX.to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn stats_key(table_id: u64) -> Vec<u8> {
    let mut k = STATS_PREFIX.to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

/// The record of the last group switch of a partitioned table (by its path):
/// the server's definition version it switched to.
fn altered_key(path: &str) -> Vec<u8> {
    let mut k = ALTERED_PREFIX.to_vec();
    k.extend_from_slice(normalize(path).as_bytes());
    k
}

/// The partitioned table a partition's path (`db/t#P#p0`, `db/t#P#p0#SP#s0`)
/// belongs to.
fn partitioned_table_of(name: &str) -> Option<&str> {
    let base = name.rfind('/').map_or(0, |i| i + 1);
    let at = name[base..]
        .find("#P#")
        .or_else(|| name[base..].find("#p#"))?;
    Some(&name[..base + at])
}

fn autoinc_key(table_id: u64) -> Vec<u8> {
    let mut k = AUTOINC_PREFIX.to_vec();
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}
const META_V1: u8 = 1;
const META_V2: u8 = 2;
const META_V3: u8 = 3;

/// What the catalog stores about one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    pub table_id: u64,
    /// The number in the column family name of each secondary index, in the
    /// server's key order.
    pub index_nos: Vec<u32>,
    /// The next index number an in-place ADD INDEX uses.
    pub next_index_no: u32,
    /// The AUTO_INCREMENT table option: the counter never starts below it.
    pub auto_increment: u64,
    /// The stored columns of each definition version; None for a table created
    /// before versions existed (its rows carry none).
    pub columns: Option<ColumnVersions>,
}

const META_V1_LEN: usize = 21;
const META_V2_HEAD: usize = 25;

impl TableMeta {
    fn new(table_id: u64, n_indexes: u32, auto_increment: u64) -> TableMeta {
        TableMeta {
            table_id,
            index_nos: (1..=n_indexes).collect(),
            next_index_no: n_indexes + 1,
            auto_increment,
            columns: None,
        }
    }

    pub fn n_indexes(&self) -> u32 {
        self.index_nos.len() as u32
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(META_V2_HEAD + 4 * self.index_nos.len());
        v.push(if self.columns.is_some() {
            META_V3
        } else {
            META_V2
        });
        v.extend_from_slice(&self.table_id.to_le_bytes());
        v.extend_from_slice(&self.n_indexes().to_le_bytes());
        v.extend_from_slice(&self.auto_increment.to_le_bytes());
        v.extend_from_slice(&self.next_index_no.to_le_bytes());
        for no in &self.index_nos {
            v.extend_from_slice(&no.to_le_bytes());
        }
        if let Some(columns) = &self.columns {
            columns.encode_into(&mut v);
        }
        v
    }

    fn decode(name: &str, bytes: &[u8]) -> FfiResult<TableMeta> {
        let corrupt = || {
            FfiError::new(
                Status::Corruption,
                format!(
                    "catalog entry of table {name} is damaged ({} bytes)",
                    bytes.len()
                ),
            )
        };
        let u32_at = |at: usize| -> FfiResult<u32> {
            let b = bytes.get(at..at + 4).ok_or_else(corrupt)?;
            Ok(u32::from_le_bytes(b.try_into().map_err(|_| corrupt())?))
        };
        let u64_at = |at: usize| -> FfiResult<u64> {
            let b = bytes.get(at..at + 8).ok_or_else(corrupt)?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| corrupt())?))
        };
        let table_id = u64_at(1)?;
        let n = u32_at(9)?;
        let auto_increment = u64_at(13)?;
        match bytes.first() {
            Some(&META_V1) if bytes.len() == META_V1_LEN => {
                Ok(TableMeta::new(table_id, n, auto_increment))
            }
            Some(&version @ (META_V2 | META_V3))
                if bytes.len() >= META_V2_HEAD + 4 * n as usize =>
            {
                let columns_at = META_V2_HEAD + 4 * n as usize;
                let columns = match version {
                    META_V3 => {
                        Some(ColumnVersions::decode(&bytes[columns_at..]).ok_or_else(corrupt)?)
                    }
                    _ if bytes.len() == columns_at => None,
                    _ => return Err(corrupt()),
                };
                let next_index_no = u32_at(21)?;
                let index_nos = (0..n as usize)
                    .map(|i| u32_at(META_V2_HEAD + 4 * i))
                    .collect::<FfiResult<Vec<u32>>>()?;
                if index_nos.iter().any(|&no| no == 0 || no >= next_index_no) {
                    return Err(corrupt());
                }
                Ok(TableMeta {
                    table_id,
                    index_nos,
                    next_index_no,
                    auto_increment,
                    columns,
                })
            }
            _ => Err(corrupt()),
        }
    }

    /// Identifies the table's stored definition (its families: table id, index
    /// numbers): changed by every committed in-place index change, never 0. The
    /// server keeps it across an in-place ALTER TABLE (`handler::table_version`) to
    /// learn after a crash whether the engine committed the ALTER
    /// (`handlerton::check_version`).
    pub fn definition_version(&self) -> u64 {
        // FNV-1a
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(&self.table_id.to_le_bytes());
        eat(&self.next_index_no.to_le_bytes());
        for no in &self.index_nos {
            eat(&no.to_le_bytes());
        }
        if let Some(columns) = &self.columns {
            eat(&columns.current.to_le_bytes());
        }
        h.max(1)
    }

    fn index_cf_name(&self, no: u32) -> String {
        format!("t{}.i{}", self.table_id, no)
    }

    /// Column family names: the rows first, then each secondary index, then the
    /// large BLOB/TEXT values stored outside the rows ([`TableMeta::blob_cf_name`]).
    pub fn cf_names(&self) -> Vec<String> {
        let mut names = vec![format!("t{}", self.table_id)];
        names.extend(self.index_nos.iter().map(|&no| self.index_cf_name(no)));
        names.push(self.blob_cf_name());
        names
    }

    /// The family of the table's external BLOB/TEXT values (the shim's row format
    /// decides which values go there; key = row key + column number). Tables created
    /// before it existed get it when first opened.
    pub fn blob_cf_name(&self) -> String {
        format!("t{}.b", self.table_id)
    }
}

/// A table's AUTO_INCREMENT counter.
#[derive(Default)]
struct AutoInc {
    /// Next value to hand out; 0 = not yet seeded (the shim seeds it).
    next: u64,
    /// The value in the catalog: one past the largest value a row was written
    /// with (see [`TableShared::persist_autoinc`]).
    saved: u64,
}

/// The live state of a table shared by every handler that has it open.
pub struct TableShared {
    state: RwLock<TableState>,
    /// Next hidden row id for tables without a primary key; 0 = not yet seeded.
    next_rowid: AtomicU64,
    seed_lock: Mutex<()>,
    /// The AUTO_INCREMENT counter and its persisted value.
    autoinc: Mutex<AutoInc>,
    /// `autoinc`'s `next`, stored under its lock whenever it moves: read
    /// without the lock, which a row's `autoinc_observe` holds while its
    /// counter's put waits for the commit queue (every INSERT peeks first).
    autoinc_next: AtomicU64,
    /// The counter's put still waiting for a commit group (rewritten in place
    /// while it waits); guarded by `autoinc`'s lock.
    autoinc_pending: Mutex<Option<DeferredPut>>,
    /// The automatic statistics measurement's deferred put (see `save_stats`).
    stats_pending: Mutex<Option<DeferredPut>>,
    /// Largest half-extents per SPATIAL index (engine index -> (x, y)); None until
    /// loaded from the catalog.
    extents: Mutex<Option<HashMap<u32, (f64, f64)>>>,
    /// The row keys written while an online rebuild of the table runs
    /// (`rebuild.rs`); None when none runs.
    rebuild_log: Mutex<Option<BTreeSet<Vec<u8>>>>,
    /// `rebuild_log` is Some: one load per row change when no rebuild runs.
    rebuild_logging: AtomicBool,
    /// Where the table's families and indexes were last filled (see
    /// [`TableShared::readable_at`]); kept in memory only: after a restart no
    /// snapshot is older.
    defined: Mutex<DefinedAt>,
    /// How often the table was renamed: a FOREIGN KEY check that locked a
    /// family of the table it opened by name sees that name now names another
    /// table (`tdb_fk_probe`).
    renames: AtomicU64,
    db: Db,
    catalog_cf: Cf,
}

/// The sequence numbers from which a snapshot sees every entry of the table's
/// families (an online rebuild's new table) and of each index added in place
/// since (by index number), as InnoDB's `dict_index_t::trx_id`.
#[derive(Default)]
struct DefinedAt {
    table: u64,
    indexes: HashMap<u32, u64>,
}

struct TableState {
    meta: TableMeta,
    /// Rows, then secondary indexes.
    cfs: Vec<Cf>,
    /// External BLOB/TEXT values (engine index [`BLOB_INDEX`]).
    blob_cf: Cf,
    /// The families an online in-place ADD INDEX is building, in slot order
    /// (see [`TableShared::set_building`]); empty otherwise.
    building: Vec<Cf>,
    dropped: bool,
    /// DISCARD TABLESPACE: the families are empty and the table unreadable until
    /// an IMPORT TABLESPACE.
    discarded: bool,
}

/// The engine index of a table's external BLOB/TEXT values (`TDB_BLOB_INDEX`).
pub const BLOB_INDEX: u32 = u32::MAX;

/// Ops of index `BUILDING_INDEX | slot` go to built index `slot` of the table's
/// online in-place ADD INDEX (`TDB_BUILDING_INDEX`; see [`TableShared::set_building`]).
pub const BUILDING_INDEX: u32 = 0x8000_0000;

/// The slot of an op index naming a family being built, or None.
pub fn building_slot(index: u32) -> Option<u32> {
    (index != BLOB_INDEX && index & BUILDING_INDEX != 0).then_some(index & !BUILDING_INDEX)
}

/// Splits the families of [`TableMeta::cf_names`] order into (rows + indexes, blobs).
fn split_blob_cf(mut cfs: Vec<Cf>) -> FfiResult<(Vec<Cf>, Cf)> {
    let blob = cfs
        .pop()
        .ok_or_else(|| FfiError::new(Status::Internal, "a table has no column families"))?;
    Ok((cfs, blob))
}

impl TableShared {
    fn new(
        meta: TableMeta,
        cfs: Vec<Cf>,
        discarded: bool,
        db: Db,
        catalog_cf: Cf,
    ) -> FfiResult<Arc<TableShared>> {
        let (cfs, blob_cf) = split_blob_cf(cfs)?;
        Ok(Arc::new(TableShared {
            state: RwLock::new(TableState {
                meta,
                cfs,
                blob_cf,
                building: Vec::new(),
                dropped: false,
                discarded,
            }),
            next_rowid: AtomicU64::new(0),
            seed_lock: Mutex::new(()),
            autoinc: Mutex::new(AutoInc::default()),
            autoinc_next: AtomicU64::new(0),
            autoinc_pending: Mutex::new(None),
            stats_pending: Mutex::new(None),
            extents: Mutex::new(None),
            rebuild_log: Mutex::new(None),
            rebuild_logging: AtomicBool::new(false),
            defined: Mutex::new(DefinedAt::default()),
            renames: AtomicU64::new(0),
            db,
            catalog_cf,
        }))
    }

    /// The column family of index `index` (0 = rows, [`BLOB_INDEX`] = external values).
    pub fn cf(&self, index: u32) -> FfiResult<Cf> {
        let st = self.state.read();
        if st.dropped {
            return Err(FfiError::new(Status::NoSuchTable, "the table was dropped"));
        }
        if index == BLOB_INDEX {
            return Ok(st.blob_cf.clone());
        }
        st.cfs.get(index as usize).cloned().ok_or_else(|| {
            FfiError::new(
                Status::Invalid,
                format!("index {index} out of range (table has {})", st.cfs.len()),
            )
        })
    }

    /// Publishes the families an online in-place ADD INDEX builds (slot order; an
    /// empty list ends the build): ops of index [`BUILDING_INDEX`] | slot then write
    /// to them (the shim's row changes maintain the new indexes while the build
    /// runs, see `inplace_alter.cc`).
    pub fn set_building(&self, cfs: Vec<Cf>) {
        self.state.write().building = cfs;
    }

    /// The family of built index `slot` of the online build in progress, if any.
    pub fn building_cf(&self, slot: u32) -> Option<Cf> {
        self.state.read().building.get(slot as usize).cloned()
    }

    /// Whether a snapshot at `snapshot_seq` reads engine index `index` (0 = rows,
    /// secondary, [`BLOB_INDEX`]) completely: not if the table was rebuilt, or the
    /// index added, after it. InnoDB then answers a read with "Table definition has
    /// changed, please retry transaction" (`row_merge_is_index_usable`); so does
    /// the caller. The entries a rebuild or an index build writes are committed
    /// under sequences a snapshot that old does not see.
    pub fn readable_at(&self, index: u32, snapshot_seq: u64) -> FfiResult<bool> {
        let defined = self.defined.lock();
        if snapshot_seq < defined.table {
            return Ok(false);
        }
        if index == 0 || index == BLOB_INDEX || building_slot(index).is_some() {
            return Ok(true);
        }
        // An index the table has not (the caller's own error to give) is no
        // newer than the snapshot.
        let Ok(no) = self.index_no(index) else {
            return Ok(true);
        };
        Ok(defined
            .indexes
            .get(&no)
            .is_none_or(|&at| snapshot_seq >= at))
    }

    /// An online rebuild's families became the table's, every entry committed at
    /// or below `seq`.
    pub fn defined_at(&self, seq: u64) {
        let mut defined = self.defined.lock();
        defined.table = seq;
        defined.indexes.clear();
    }

    /// Indexes `index_nos` were added, every entry committed at or below `seq`.
    pub fn indexes_defined_at(&self, index_nos: &[u32], seq: u64) {
        let mut defined = self.defined.lock();
        for &no in index_nos {
            defined.indexes.insert(no, seq);
        }
    }

    /// Starts recording the row keys every row change writes (an online rebuild,
    /// `rebuild.rs`). One rebuild at a time: the server's metadata lock allows no
    /// second ALTER of the table while one runs.
    pub fn start_rebuild_log(&self) -> FfiResult<()> {
        let mut log = self.rebuild_log.lock();
        if log.is_some() {
            return Err(FfiError::new(
                Status::Invalid,
                "an online rebuild of the table is already running",
            ));
        }
        *log = Some(BTreeSet::new());
        self.rebuild_logging.store(true, Ordering::Release);
        Ok(())
    }

    /// Records row keys written by a row change, if a rebuild is logging. Called
    /// before the change is applied, so a key is logged before it can commit.
    pub fn note_row_writes<'a>(&self, keys: impl Iterator<Item = &'a [u8]>) {
        if !self.rebuild_logging.load(Ordering::Acquire) {
            return;
        }
        if let Some(log) = self.rebuild_log.lock().as_mut() {
            for k in keys {
                if !log.contains(k) {
                    log.insert(k.to_vec());
                }
            }
        }
    }

    /// The keys logged since the last call, in key order (the log goes on).
    pub fn take_rebuild_log(&self) -> Vec<Vec<u8>> {
        self.rebuild_log
            .lock()
            .as_mut()
            .map(|log| std::mem::take(log).into_iter().collect())
            .unwrap_or_default()
    }

    /// Stops the logging.
    pub fn end_rebuild_log(&self) {
        let mut log = self.rebuild_log.lock();
        *log = None;
        self.rebuild_logging.store(false, Ordering::Release);
    }

    /// The order in which `apply` visits ops of engine indexes 0 (rows), 1..n:
    /// the order the indexes were created in (their numbers), as InnoDB checks
    /// unique keys in the order of its dictionary. `None` when that is the key
    /// order (no index was added in place after another that sorts later).
    pub fn creation_ranks(&self) -> Option<Vec<u32>> {
        let st = self.state.read();
        let nos = &st.meta.index_nos;
        if nos.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        Some(nos.clone())
    }

    /// Rows, then secondary indexes (not the external values: see [`Self::blob_cf`]).
    pub fn cfs(&self) -> Vec<Cf> {
        self.state.read().cfs.clone()
    }

    /// How often the table was renamed since it was opened.
    pub fn renames(&self) -> u64 {
        self.renames.load(Ordering::Acquire)
    }

    /// `f` of [`Self::cfs`] without copying them (under the table state's read
    /// lock: `f` must not wait).
    pub fn with_cfs<R>(&self, f: impl FnOnce(&[Cf]) -> R) -> R {
        f(&self.state.read().cfs)
    }

    pub fn blob_cf(&self) -> Cf {
        self.state.read().blob_cf.clone()
    }

    pub fn index_count(&self) -> u32 {
        self.state.read().meta.n_indexes()
    }

    /// The table id in the families' names (changes at TRUNCATE, DISCARD, IMPORT).
    pub fn table_id(&self) -> u64 {
        self.state.read().meta.table_id
    }

    /// True after DISCARD TABLESPACE until IMPORT TABLESPACE.
    pub fn is_discarded(&self) -> bool {
        self.state.read().discarded
    }

    /// Points the open table at `meta`'s families (TRUNCATE, DISCARD, IMPORT) and
    /// forgets the counters seeded from the old ones.
    fn swap_families(&self, meta: TableMeta, cfs: Vec<Cf>, discarded: bool) -> FfiResult<()> {
        let (cfs, blob_cf) = split_blob_cf(cfs)?;
        let mut st = self.state.write();
        st.meta = meta;
        st.cfs = cfs;
        st.blob_cf = blob_cf;
        st.discarded = discarded;
        self.next_rowid.store(0, Ordering::Release);
        {
            let mut c = self.autoinc.lock();
            *c = AutoInc::default();
            self.autoinc_next.store(0, Ordering::Release);
        }
        *self.extents.lock() = None;
        Ok(())
    }

    /// [`TableMeta::definition_version`] of the table as it is now.
    pub fn definition_version(&self) -> u64 {
        self.state.read().meta.definition_version()
    }

    /// The table's column definition versions (None: a table without them).
    pub fn columns(&self) -> Option<ColumnVersions> {
        self.state.read().meta.columns.clone()
    }

    /// The AUTO_INCREMENT counter, 0 if not seeded.
    pub fn autoinc_peek(&self) -> u64 {
        self.autoinc_next.load(Ordering::Acquire)
    }

    /// Seeds the counter unless already seeded: the largest of `next` (one past
    /// the largest value stored), the persisted counter and the table's
    /// AUTO_INCREMENT option. Returns the counter.
    pub fn autoinc_seed(&self, next: u64) -> FfiResult<u64> {
        let mut c = self.autoinc.lock();
        if c.next == 0 {
            let (table_id, option) = {
                let st = self.state.read();
                (st.meta.table_id, st.meta.auto_increment)
            };
            // A put of the counter may still be queued (this table was open
            // before): write it, so the read below sees it.
            self.db.write_deferred();
            let mut txn = self.db.begin(Isolation::ReadCommitted);
            let persisted = match txn.get(&self.catalog_cf, &autoinc_key(table_id))? {
                Some(v) => u64::from_le_bytes(v.as_slice().try_into().map_err(|_| {
                    FfiError::new(Status::Corruption, "damaged AUTO_INCREMENT counter")
                })?),
                None => 0,
            };
            txn.rollback();
            c.saved = persisted;
            c.next = next.max(persisted).max(option).max(1);
            self.autoinc_next.store(c.next, Ordering::Release);
        }
        Ok(c.next)
    }

    /// Saves the table's optimizer statistics: `durable` (ANALYZE TABLE) in a
    /// commit of its own, durable per the sync mode; otherwise (the automatic
    /// measurement of a statement) as a deferred put that the next commit group
    /// writes, so a statement costs no commit group or fsync for it (lost in a
    /// crash before any later commit: the table is then measured again).
    pub fn save_stats(&self, blob: &[u8], durable: bool) -> FfiResult<()> {
        let table_id = self.state.read().meta.table_id;
        if !durable {
            let mut pending = self.stats_pending.lock();
            self.db
                .put_deferred(&self.catalog_cf, &stats_key(table_id), blob, &mut pending)?;
            return Ok(());
        }
        // A queued automatic put first, or it would conflict with this one.
        self.db.write_deferred();
        let mut txn = self.db.begin(Isolation::ReadCommitted);
        txn.put(&self.catalog_cf, &stats_key(table_id), blob)?;
        txn.commit()?;
        Ok(())
    }

    /// The table's saved optimizer statistics, if any.
    pub fn load_stats(&self) -> FfiResult<Option<Vec<u8>>> {
        let table_id = self.state.read().meta.table_id;
        let mut txn = self.db.begin(Isolation::ReadCommitted);
        let v = txn.get(&self.catalog_cf, &stats_key(table_id))?;
        txn.rollback();
        Ok(v)
    }

    fn with_extents<T>(
        &self,
        f: impl FnOnce(&mut HashMap<u32, (f64, f64)>, u64) -> FfiResult<T>,
    ) -> FfiResult<T> {
        let mut guard = self.extents.lock();
        let table_id = self.state.read().meta.table_id;
        if guard.is_none() {
            let mut txn = self.db.begin(Isolation::ReadCommitted);
            let v = txn.get(&self.catalog_cf, &extent_key(table_id))?;
            txn.rollback();
            *guard = Some(match v {
                Some(bytes) => crate::spatial::decode_extents(&bytes)?,
                None => HashMap::new(),
            });
        }
        match guard.as_mut() {
            Some(map) => f(map, table_id),
            None => Err(FfiError::new(
                Status::Internal,
                "spatial extents not loaded",
            )),
        }
    }

    /// The number of engine index `index` (1-based position): extents are kept
    /// by number, which an in-place DROP INDEX of another index does not change.
    fn index_no(&self, index: u32) -> FfiResult<u32> {
        let st = self.state.read();
        index
            .checked_sub(1)
            .and_then(|i| st.meta.index_nos.get(i as usize))
            .copied()
            .ok_or_else(|| FfiError::new(Status::Invalid, format!("no index {index}")))
    }

    /// The largest half-extents of the entries of SPATIAL index `index`.
    pub fn spatial_extent(&self, index: u32) -> FfiResult<(f64, f64)> {
        let no = self.index_no(index)?;
        self.with_extents(|m, _| Ok(m.get(&no).copied().unwrap_or((0.0, 0.0))))
    }

    /// Records that an entry of half-extents `e` goes into SPATIAL index `index`:
    /// a larger extent is persisted (a commit that does not wait for fsync, so it
    /// is durable no later than the row's commit, which follows it in the WAL).
    pub fn note_spatial_extent(&self, index: u32, e: (f64, f64)) -> FfiResult<()> {
        let db = self.db.clone();
        let cf = self.catalog_cf.clone();
        let index = self.index_no(index)?;
        self.with_extents(|m, table_id| {
            let cur = m.get(&index).copied().unwrap_or((0.0, 0.0));
            if e.0 <= cur.0 && e.1 <= cur.1 {
                return Ok(());
            }
            let mut next = m.clone();
            next.insert(index, (cur.0.max(e.0), cur.1.max(e.1)));
            let mut txn = db.begin(Isolation::ReadCommitted);
            txn.put(
                &cf,
                &extent_key(table_id),
                &crate::spatial::encode_extents(&next),
            )?;
            txn.commit_with(CommitOptions { sync: false })?;
            *m = next;
            Ok(())
        })
    }

    /// Persists the counter (caller holds `autoinc`'s lock, so the values
    /// queued only grow). It is one past the largest value a row was written
    /// with, as InnoDB keeps it (10.2.4+): values reserved for a statement but
    /// not used are handed out again after a restart (InnoDB: 100 rows by
    /// INSERT ... SELECT reserve up to 127, and 101 comes next after a
    /// restart). A deferred put: it waits for no commit group, yet the WAL
    /// holds it ahead of the commit of the row that used the value (that
    /// commit is queued after it), so a restart or crash never hands out a
    /// committed value again; puts queued while a group is being written
    /// coalesce into one record.
    fn persist_autoinc(&self, value: u64) -> FfiResult<()> {
        let table_id = self.state.read().meta.table_id;
        let mut pending = self.autoinc_pending.lock();
        self.db.put_deferred(
            &self.catalog_cf,
            &autoinc_key(table_id),
            &value.to_le_bytes(),
            &mut pending,
        )?;
        Ok(())
    }

    /// Reserves `n` values `increment` apart, the first being the smallest value at
    /// or above the counter that is `offset` modulo `increment` (MariaDB's
    /// auto_increment_offset / auto_increment_increment rule). The counter stops at
    /// `max + 1`, one past the column's largest value, as InnoDB's does.
    pub fn autoinc_reserve(&self, n: u64, offset: u64, increment: u64, max: u64) -> FfiResult<u64> {
        let mut c = self.autoinc.lock();
        if c.next == 0 {
            // Seeding failed (its error was reported): never hand out a guess.
            return Err(FfiError::new(
                Status::Invalid,
                "the AUTO_INCREMENT counter is not loaded",
            ));
        }
        let first = align_auto_increment(c.next, offset, increment);
        let next = first.saturating_add(n.max(1).saturating_mul(increment.max(1)));
        // Persisted only when a row uses a value (`autoinc_observe`).
        c.next = next.min(max.saturating_add(1)).max(c.next);
        self.autoinc_next.store(c.next, Ordering::Release);
        Ok(first)
    }

    /// A row was written with `value` (generated or explicit): the counter
    /// moves past it and the persisted counter covers it (values beyond the
    /// column's range are ignored).
    pub fn autoinc_observe(&self, value: u64, max: u64) -> FfiResult<()> {
        self.autoinc_past(value, max, true)
    }

    /// Only the persisted counter moves past `value`: a restart starts there, the
    /// counter in memory stays (InnoDB's, for an insert its clustered index took
    /// before a secondary unique key refused it).
    pub fn autoinc_persist_past(&self, value: u64, max: u64) -> FfiResult<()> {
        self.autoinc_past(value, max, false)
    }

    fn autoinc_past(&self, value: u64, max: u64, in_memory: bool) -> FfiResult<()> {
        let mut c = self.autoinc.lock();
        if c.next == 0 || value > max {
            return Ok(());
        }
        let past = value.saturating_add(1);
        // Under the counter's lock, so these small commits never race.
        if past > c.saved {
            self.persist_autoinc(past)?;
            c.saved = past;
        }
        if in_memory {
            c.next = c.next.max(past);
            self.autoinc_next.store(c.next, Ordering::Release);
        }
        Ok(())
    }

    /// A new hidden row id. The first call after open seeds the counter from the
    /// largest id stored (keys of a table without a primary key are u64 big-endian).
    pub fn next_rowid(&self, db: &Db) -> FfiResult<u64> {
        if self.next_rowid.load(Ordering::Acquire) == 0 {
            let _seeding = self.seed_lock.lock();
            if self.next_rowid.load(Ordering::Acquire) == 0 {
                let cf = self.cf(0)?;
                let mut txn = db.begin(Isolation::ReadCommitted);
                let mut it = txn.iter(&cf, IterOptions::default())?;
                it.seek_to_last();
                it.status()?;
                let last = if it.valid() {
                    let k = it.key();
                    let arr: [u8; 8] = k.try_into().map_err(|_| {
                        FfiError::new(
                            Status::Corruption,
                            format!("hidden row id key of {} bytes, expected 8", k.len()),
                        )
                    })?;
                    u64::from_be_bytes(arr)
                } else {
                    0
                };
                txn.rollback();
                self.next_rowid.store(last + 1, Ordering::Release);
            }
        }
        Ok(self.next_rowid.fetch_add(1, Ordering::AcqRel))
    }
}

/// The smallest v >= current with v = offset (mod increment); offsets above the
/// increment count as 1, as in the server.
pub fn align_auto_increment(current: u64, offset: u64, increment: u64) -> u64 {
    if increment <= 1 {
        return current;
    }
    let offset = if offset == 0 || offset > increment {
        1
    } else {
        offset
    };
    if current <= offset {
        return offset;
    }
    let steps = (current - offset).div_ceil(increment);
    offset.saturating_add(steps.saturating_mul(increment))
}

/// Where an index of a table's new definition lives (see [`Catalog::alter_indexes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexSource {
    /// Secondary index `i` (1-based) of the current definition.
    Existing(u32),
    /// The family at this position of the built list.
    Built(usize),
}

/// The families an IMPORT TABLESPACE fills ([`Catalog::import_begin`]).
pub struct ImportTarget {
    /// The discarded table's entry.
    old: TableMeta,
    meta: TableMeta,
    cfs: Vec<Cf>,
}

impl ImportTarget {
    /// Rows, then secondary indexes, then the external values (as
    /// [`TableMeta::cf_names`]).
    pub fn cfs(&self) -> &[Cf] {
        &self.cfs
    }
}

/// Catalog values of a table that travel with its export.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportedValues {
    pub autoinc: Option<Vec<u8>>,
    pub extent: Option<Vec<u8>>,
}

/// A catalog entry to write (None: delete) in a DDL statement's transaction.
pub type CatalogWrite = (Vec<u8>, Option<Vec<u8>>);

/// The catalog over one database.
pub struct Catalog {
    cf: Cf,
    /// `__catalog_mirror`; `None` only in a read-only engine that has none.
    mirror: Option<Cf>,
    read_only: bool,
    /// What a read-only open read from the mirror instead (one line each, for
    /// the error log).
    notes: Mutex<Vec<String>>,
    /// Serialises DDL: each DDL statement reads and writes `next_table_id`.
    ddl: Mutex<()>,
    open_tables: Mutex<HashMap<String, Arc<TableShared>>>,
}

/// The catalog key of a table name; `./db/t1` and `db/t1` are the same table.
fn normalize(name: &str) -> &str {
    name.strip_prefix("./").unwrap_or(name)
}

/// True for the path of a temporary table (see `Catalog::drop_temporary_tables`).
pub fn is_temporary_table(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    name.starts_with('/') && base.starts_with("#sql")
}

fn table_key(name: &str) -> Vec<u8> {
    let mut k = TABLE_PREFIX.to_vec();
    k.extend_from_slice(normalize(name).as_bytes());
    k
}

fn no_such_table(name: &str) -> FfiError {
    FfiError::new(
        Status::NoSuchTable,
        format!("table {} is not in the TidesDB catalog", normalize(name)),
    )
}

impl Catalog {
    /// Opens (creating if needed) the catalog and drops leftover column families.
    /// `read_only` (`tidesdb_force_recovery`): nothing is created or dropped, and
    /// nothing is read at open, so a damaged part of the catalog fails only the
    /// tables whose entries it holds, when they are opened.
    pub fn open(db: &Db, read_only: bool) -> FfiResult<Catalog> {
        let cf = match db.cf(CATALOG_CF) {
            Some(cf) => cf,
            None if read_only => {
                return Err(FfiError::new(
                    Status::Corruption,
                    format!(
                        "the catalog (column family {CATALOG_CF}) is missing from the \
                         engine's manifest in {}",
                        db.path().display()
                    ),
                ))
            }
            None => db.create_cf(CATALOG_CF, CfOptions::default())?,
        };
        let mirror = match db.cf(MIRROR_CF) {
            Some(cf) => Some(cf),
            None if read_only => None,
            None => Some(db.create_cf(MIRROR_CF, CfOptions::default())?),
        };
        let catalog = Catalog {
            cf,
            mirror,
            read_only,
            notes: Mutex::new(Vec::new()),
            ddl: Mutex::new(()),
            open_tables: Mutex::new(HashMap::new()),
        };
        if read_only {
            // Read it all now, so that the error log says at start whether (and
            // why) the table list comes from the mirror.
            let all = |cf: &Cf| -> FfiResult<()> {
                let mut txn = db.begin(Isolation::ReadCommitted);
                let mut keys = Vec::new();
                let mut it = txn.iter(cf, IterOptions::default())?;
                it.seek(b"");
                while it.valid() {
                    keys.push(it.key().to_vec());
                    it.next();
                }
                it.status()?;
                drop(it);
                // point reads too: they use the files' bloom filters, scans do not
                for k in &keys {
                    txn.get(cf, k)?;
                }
                txn.rollback();
                Ok(())
            };
            if let Err(e) = catalog.read_with_mirror(all) {
                catalog.notes.lock().push(format!(
                    "neither the catalog nor its copy {MIRROR_CF} can be read ({}); \
                     TidesDB tables cannot be opened",
                    e.message
                ));
            }
        } else {
            catalog.fill_mirror(db)?;
            catalog.drop_temporary_tables(db)?;
            catalog.drop_orphans(db)?;
        }
        Ok(catalog)
    }

    /// Copies every table entry into a mirror that is not complete (new, or its
    /// first fill was cut short by a crash).
    fn fill_mirror(&self, db: &Db) -> FfiResult<()> {
        let Some(mirror) = &self.mirror else {
            return Ok(());
        };
        let mut txn = db.begin(Isolation::RepeatableRead);
        if txn.get(mirror, MIRROR_COMPLETE_KEY)?.is_some() {
            txn.rollback();
            return Ok(());
        }
        for (k, _) in Self::raw_entries(db, mirror)? {
            txn.delete(mirror, &k)?;
        }
        for (k, v) in Self::raw_entries(db, &self.cf)? {
            txn.put(mirror, &k, &v)?;
        }
        txn.put(mirror, MIRROR_COMPLETE_KEY, b"")?;
        txn.commit()?;
        Ok(())
    }

    /// The `table/` entries of `cf` as stored.
    fn raw_entries(db: &Db, cf: &Cf) -> FfiResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut txn = db.begin(Isolation::ReadCommitted);
        let mut it = txn.iter(cf, IterOptions::default())?;
        it.seek(TABLE_PREFIX);
        let mut out = Vec::new();
        while it.valid() && it.key().starts_with(TABLE_PREFIX) {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// Writes (or with `None` deletes) the entry of table `name` in the catalog
    /// and its mirror, in `txn`.
    fn put_meta(
        &self,
        txn: &mut tidesdb_core::Txn,
        name: &str,
        meta: Option<&TableMeta>,
    ) -> FfiResult<()> {
        let key = table_key(name);
        for cf in std::iter::once(&self.cf).chain(self.mirror.as_ref()) {
            match meta {
                Some(m) => txn.put(cf, &key, &m.encode())?,
                None => txn.delete(cf, &key)?,
            }
        }
        Ok(())
    }

    /// A read of the catalog; in a read-only engine, when the catalog's files
    /// cannot be read, the same read of the mirror (noted for the error log).
    fn read_with_mirror<T>(&self, read: impl Fn(&Cf) -> FfiResult<T>) -> FfiResult<T> {
        match read(&self.cf) {
            Err(e) if self.read_only && e.status == Status::Corruption => {
                let Some(mirror) = &self.mirror else {
                    return Err(e);
                };
                let v = read(mirror)?;
                let note = format!(
                    "the catalog cannot be read ({}); the table list comes from its copy \
                     {MIRROR_CF}",
                    e.message
                );
                let mut notes = self.notes.lock();
                if !notes.contains(&note) {
                    notes.push(note);
                }
                Ok(v)
            }
            r => r,
        }
    }

    /// The lines `read_with_mirror` noted.
    pub fn recovery_notes(&self) -> Vec<String> {
        self.notes.lock().clone()
    }

    /// The catalog's column family (shared with the constraint catalog,
    /// `foreign_keys.rs`).
    pub fn cf(&self) -> &Cf {
        &self.cf
    }

    /// CREATE TEMPORARY TABLE ... ENGINE=TidesDB names the table by a path in the
    /// server's tmpdir (`/tmp/#sql-temptable-...` or `/tmp/#sql...`), never under the
    /// data directory (`./db/...`). Temporary tables do not outlive the server, so
    /// entries of a server that crashed with some open are dropped at the next start.
    fn drop_temporary_tables(&self, db: &Db) -> FfiResult<()> {
        for (name, _) in self.entries(db, b"")? {
            if is_temporary_table(&name) {
                self.drop_table(db, &name)?;
            }
        }
        Ok(())
    }

    fn drop_orphans(&self, db: &Db) -> FfiResult<()> {
        let mut referenced = HashSet::new();
        for (_, meta) in self.entries(db, b"")? {
            referenced.extend(meta.cf_names());
        }
        for name in db.list_cfs() {
            let ours = name.starts_with('t') && name[1..].starts_with(|c: char| c.is_ascii_digit());
            if ours && !referenced.contains(&name) {
                db.drop_cf(&name)?;
            }
        }
        Ok(())
    }

    /// Catalog entries whose table name starts with `prefix`.
    fn entries(&self, db: &Db, prefix: &[u8]) -> FfiResult<Vec<(String, TableMeta)>> {
        self.read_with_mirror(|cf| Self::entries_in(db, cf, prefix))
    }

    fn entries_in(db: &Db, cf: &Cf, prefix: &[u8]) -> FfiResult<Vec<(String, TableMeta)>> {
        let mut lower = TABLE_PREFIX.to_vec();
        lower.extend_from_slice(prefix);
        let mut txn = db.begin(Isolation::ReadCommitted);
        let mut it = txn.iter(cf, IterOptions::default())?;
        it.seek(&lower);
        let mut out = Vec::new();
        while it.valid() && it.key().starts_with(&lower) {
            let name = String::from_utf8_lossy(&it.key()[TABLE_PREFIX.len()..]).into_owned();
            let meta = TableMeta::decode(&name, it.value())?;
            out.push((name, meta));
            it.next();
        }
        it.status()?;
        txn.rollback();
        Ok(out)
    }

    pub fn list_tables(&self, db: &Db) -> FfiResult<Vec<String>> {
        Ok(self.entries(db, b"")?.into_iter().map(|(n, _)| n).collect())
    }

    /// Every table with its column family names (rows first, then its indexes).
    pub fn tables(&self, db: &Db) -> FfiResult<Vec<(String, Vec<String>)>> {
        Ok(self
            .entries(db, b"")?
            .into_iter()
            .map(|(n, meta)| (n, meta.cf_names()))
            .collect())
    }

    /// The options a table's column families were created with (those of its rows
    /// column family).
    fn table_options(db: &Db, meta: &TableMeta) -> FfiResult<CfOptions> {
        let rows = format!("t{}", meta.table_id);
        db.cf(&rows).map(|cf| cf.options()).ok_or_else(|| {
            FfiError::new(
                Status::Corruption,
                format!("column family {rows} of table {} is missing", meta.table_id),
            )
        })
    }

    /// [`TableMeta::definition_version`] of table `name` in the catalog.
    pub fn definition_version(&self, db: &Db, name: &str) -> FfiResult<u64> {
        let meta = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        Ok(meta.definition_version())
    }

    fn lookup(&self, db: &Db, name: &str) -> FfiResult<Option<TableMeta>> {
        self.read_with_mirror(|cf| {
            let mut txn = db.begin(Isolation::ReadCommitted);
            let v = txn.get(cf, &table_key(name))?;
            txn.rollback();
            v.map(|bytes| TableMeta::decode(name, &bytes)).transpose()
        })
    }

    fn create_cfs(db: &Db, meta: &TableMeta, opts: &CfOptions) -> FfiResult<Vec<Cf>> {
        let mut made = Vec::new();
        for name in meta.cf_names() {
            match db.create_cf(&name, opts.clone()) {
                Ok(cf) => made.push(cf),
                Err(e) => {
                    for cf in &made {
                        let _ = db.drop_cf(&cf.name());
                    }
                    return Err(e.into());
                }
            }
        }
        Ok(made)
    }

    fn drop_cfs(db: &Db, meta: &TableMeta) -> FfiResult<()> {
        for name in meta.cf_names() {
            match db.drop_cf(&name) {
                Ok(()) | Err(tidesdb_core::Error::ColumnFamilyNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Allocates a table id, creates its column families (all with `opts`, which
    /// the core keeps in its manifest) and commits `name -> meta` (replacing any
    /// entry of that name) in one transaction.
    fn install(
        &self,
        db: &Db,
        name: &str,
        n_indexes: u32,
        auto_increment: u64,
        opts: &CfOptions,
        columns: Option<ColumnVersions>,
    ) -> FfiResult<(TableMeta, Vec<Cf>)> {
        self.install_with(db, name, n_indexes, auto_increment, opts, columns, |_| {
            Vec::new()
        })
    }

    /// [`Self::install`], writing `extra(table id)` in the same transaction.
    #[allow(clippy::too_many_arguments)]
    fn install_with(
        &self,
        db: &Db,
        name: &str,
        n_indexes: u32,
        auto_increment: u64,
        opts: &CfOptions,
        columns: Option<ColumnVersions>,
        extra: impl FnOnce(u64) -> Vec<CatalogWrite>,
    ) -> FfiResult<(TableMeta, Vec<Cf>)> {
        let mut txn = db.begin(Isolation::RepeatableRead);
        let next = match txn.get(&self.cf, NEXT_ID_KEY)? {
            Some(v) => u64::from_le_bytes(v.as_slice().try_into().map_err(|_| {
                FfiError::new(Status::Corruption, "catalog next_table_id is damaged")
            })?),
            None => 1,
        };
        let mut meta = TableMeta::new(next, n_indexes, auto_increment);
        meta.columns = columns;
        let cfs = Self::create_cfs(db, &meta, opts)?;
        let commit = (|| -> FfiResult<()> {
            txn.put(&self.cf, NEXT_ID_KEY, &(next + 1).to_le_bytes())?;
            self.put_meta(&mut txn, name, Some(&meta))?;
            self.put_extra(&mut txn, &extra(next))?;
            txn.commit()?;
            Ok(())
        })();
        if let Err(e) = commit {
            let _ = Self::drop_cfs(db, &meta);
            return Err(e);
        }
        Ok((meta, cfs))
    }

    /// Creates a table whose column families have the engine's default options.
    pub fn create(
        &self,
        db: &Db,
        name: &str,
        n_indexes: u32,
        auto_increment: u64,
    ) -> FfiResult<()> {
        self.create_with(db, name, n_indexes, auto_increment, &CfOptions::default())
    }

    /// Creates a table whose rows and index column families all get `opts`.
    pub fn create_with(
        &self,
        db: &Db,
        name: &str,
        n_indexes: u32,
        auto_increment: u64,
        opts: &CfOptions,
    ) -> FfiResult<()> {
        self.create_versioned(db, name, n_indexes, auto_increment, opts, None)
    }

    /// Creates a table whose rows are written under column definition versions
    /// (`columns`: its version 1), or without (None).
    pub fn create_versioned(
        &self,
        db: &Db,
        name: &str,
        n_indexes: u32,
        auto_increment: u64,
        opts: &CfOptions,
        columns: Option<ColumnVersions>,
    ) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        // The server creates a table only when its .frm does not exist, so an entry of
        // the same name is a leftover of an interrupted DDL: replace it.
        let old = self.lookup(db, name)?;
        self.install(db, name, n_indexes, auto_increment, opts, columns)?;
        if let Some(old) = old {
            Self::drop_cfs(db, &old)?;
        }
        self.forget(name);
        Ok(())
    }

    pub fn drop_table(&self, db: &Db, name: &str) -> FfiResult<()> {
        self.drop_table_with(db, name, &[])
    }

    /// Drops a table, writing `extra` catalog entries (None = delete) in the same
    /// transaction (the table's constraint entries, `foreign_keys.rs`).
    pub fn drop_table_with(&self, db: &Db, name: &str, extra: &[CatalogWrite]) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let meta = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        // A queued put of the counter (left by a failed INSERT) is written
        // before this transaction's snapshot, or it would conflict with the delete.
        db.write_deferred();
        let mut txn = db.begin(Isolation::RepeatableRead);
        self.put_meta(&mut txn, name, None)?;
        txn.delete(&self.cf, &autoinc_key(meta.table_id))?;
        txn.delete(&self.cf, &stats_key(meta.table_id))?;
        txn.delete(&self.cf, &extent_key(meta.table_id))?;
        txn.delete(&self.cf, &discarded_key(meta.table_id))?;
        if let Some(parent) = partitioned_table_of(name) {
            txn.delete(&self.cf, &altered_key(parent))?;
        }
        self.put_extra(&mut txn, extra)?;
        txn.commit()?;
        self.forget(name);
        Self::drop_cfs(db, &meta)
    }

    fn put_extra(&self, txn: &mut tidesdb_core::Txn, extra: &[CatalogWrite]) -> FfiResult<()> {
        for (k, v) in extra {
            match v {
                Some(v) => txn.put(&self.cf, k, v)?,
                None => txn.delete(&self.cf, k)?,
            }
        }
        Ok(())
    }

    pub fn rename(&self, db: &Db, from: &str, to: &str) -> FfiResult<()> {
        self.rename_with(db, from, to, &[])
    }

    /// Renames a table, writing `extra` catalog entries in the same transaction.
    pub fn rename_with(
        &self,
        db: &Db,
        from: &str,
        to: &str,
        extra: &[CatalogWrite],
    ) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let meta = self.lookup(db, from)?.ok_or_else(|| no_such_table(from))?;
        if self.lookup(db, to)?.is_some() {
            return Err(FfiError::new(
                Status::TableExists,
                format!(
                    "table {} already exists in the TidesDB catalog",
                    normalize(to)
                ),
            ));
        }
        let mut txn = db.begin(Isolation::RepeatableRead);
        self.put_meta(&mut txn, from, None)?;
        self.put_meta(&mut txn, to, Some(&meta))?;
        self.put_extra(&mut txn, extra)?;
        txn.commit()?;
        let mut open = self.open_tables.lock();
        if let Some(shared) = open.remove(normalize(from)) {
            shared.renames.fetch_add(1, Ordering::AcqRel);
            open.insert(normalize(to).to_string(), shared);
        }
        Ok(())
    }

    pub fn truncate(&self, db: &Db, name: &str) -> FfiResult<()> {
        self.reset(db, name, false)
    }

    /// ALTER TABLE ... DISCARD TABLESPACE: the table's rows and indexes are dropped
    /// (fresh empty families, as TRUNCATE) and the table is marked discarded, so
    /// reads and writes fail until IMPORT TABLESPACE ([`Self::import_commit`]).
    pub fn discard(&self, db: &Db, name: &str) -> FfiResult<()> {
        self.reset(db, name, true)
    }

    /// Swaps in fresh families under a new id (TRUNCATE; DISCARD with `discarded`).
    fn reset(&self, db: &Db, name: &str, discarded: bool) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let old = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        // TRUNCATE starts the AUTO_INCREMENT counter again from 1; the new column
        // families get the options of the old ones (the table's options).
        let opts = Self::table_options(db, &old)?;
        // No row is left: only the current column version is needed.
        let columns = old.columns.as_ref().map(ColumnVersions::only_current);
        let (meta, cfs) =
            self.install_with(db, name, old.n_indexes(), 1, &opts, columns, |id| {
                if discarded {
                    vec![(discarded_key(id), Some(Vec::new()))]
                } else {
                    Vec::new()
                }
            })?;
        if let Some(shared) = self.open_tables.lock().get(normalize(name)) {
            shared.swap_families(meta, cfs, discarded)?;
        }
        db.write_deferred(); // as in drop_table
        let mut txn = db.begin(Isolation::RepeatableRead);
        txn.delete(&self.cf, &autoinc_key(old.table_id))?;
        txn.delete(&self.cf, &stats_key(old.table_id))?;
        txn.delete(&self.cf, &extent_key(old.table_id))?;
        txn.delete(&self.cf, &discarded_key(old.table_id))?;
        txn.commit()?;
        Self::drop_cfs(db, &old)
    }

    /// The catalog values a table's export carries besides its families: its
    /// persisted AUTO_INCREMENT counter and its SPATIAL extents (None: absent).
    pub fn export_values(&self, db: &Db, table_id: u64) -> FfiResult<ExportedValues> {
        db.write_deferred();
        let mut txn = db.begin(Isolation::ReadCommitted);
        let autoinc = txn.get(&self.cf, &autoinc_key(table_id))?;
        let extent = txn.get(&self.cf, &extent_key(table_id))?;
        txn.rollback();
        Ok(ExportedValues { autoinc, extent })
    }

    /// IMPORT TABLESPACE, first step: fresh empty families for discarded table
    /// `name` under a new table id (with the table's options), which no catalog
    /// entry names yet (a crash before [`Self::import_commit`] leaves orphans,
    /// dropped at the next start; [`Self::import_abort`] drops them).
    pub fn import_begin(&self, db: &Db, name: &str) -> FfiResult<ImportTarget> {
        let _ddl = self.ddl.lock();
        let old = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        let mut txn = db.begin(Isolation::RepeatableRead);
        if txn.get(&self.cf, &discarded_key(old.table_id))?.is_none() {
            return Err(FfiError::new(
                Status::NotDiscarded,
                format!(
                    "table {} has its data: DISCARD TABLESPACE before IMPORT TABLESPACE",
                    normalize(name)
                ),
            ));
        }
        let opts = Self::table_options(db, &old)?;
        let next = match txn.get(&self.cf, NEXT_ID_KEY)? {
            Some(v) => u64::from_le_bytes(v.as_slice().try_into().map_err(|_| {
                FfiError::new(Status::Corruption, "catalog next_table_id is damaged")
            })?),
            None => 1,
        };
        txn.put(&self.cf, NEXT_ID_KEY, &(next + 1).to_le_bytes())?;
        txn.commit()?;
        let mut meta = TableMeta::new(next, old.n_indexes(), old.auto_increment);
        meta.columns = old.columns.clone();
        let cfs = Self::create_cfs(db, &meta, &opts)?;
        Ok(ImportTarget { old, meta, cfs })
    }

    /// IMPORT TABLESPACE, last step: one transaction points `name` at the filled
    /// families of `target` (no longer discarded) with the exported catalog
    /// values; then the discarded table's empty families are dropped.
    pub fn import_commit(
        &self,
        db: &Db,
        name: &str,
        target: ImportTarget,
        values: &ExportedValues,
    ) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let ImportTarget { old, meta, cfs } = target;
        let current = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        if current != old {
            let _ = Self::drop_cfs(db, &meta);
            return Err(FfiError::new(
                Status::Invalid,
                format!("table {} changed during IMPORT TABLESPACE", normalize(name)),
            ));
        }
        db.write_deferred();
        let commit = (|| -> FfiResult<()> {
            let mut txn = db.begin(Isolation::RepeatableRead);
            self.put_meta(&mut txn, name, Some(&meta))?;
            txn.delete(&self.cf, &discarded_key(old.table_id))?;
            txn.delete(&self.cf, &autoinc_key(old.table_id))?;
            txn.delete(&self.cf, &stats_key(old.table_id))?;
            txn.delete(&self.cf, &extent_key(old.table_id))?;
            if let Some(v) = &values.autoinc {
                txn.put(&self.cf, &autoinc_key(meta.table_id), v)?;
            }
            if let Some(v) = &values.extent {
                txn.put(&self.cf, &extent_key(meta.table_id), v)?;
            }
            txn.commit()?;
            Ok(())
        })();
        if let Err(e) = commit {
            let _ = Self::drop_cfs(db, &meta);
            return Err(e);
        }
        if let Some(shared) = self.open_tables.lock().get(normalize(name)) {
            shared.swap_families(meta, cfs, false)?;
        }
        Self::drop_cfs(db, &old)
    }

    /// Drops the families of an import that failed (the table stays discarded).
    pub fn import_abort(&self, db: &Db, target: ImportTarget) {
        let _ = Self::drop_cfs(db, &target.meta);
    }

    /// Creates `count` empty column families for indexes an in-place ADD INDEX is
    /// about to build, numbered from the table's `next_index_no`. No catalog entry
    /// names them until [`Catalog::alter_indexes`] commits, so a crash before that
    /// leaves families that the next open drops. Returns (index number, family).
    pub fn create_index_cfs(&self, db: &Db, name: &str, count: u32) -> FfiResult<Vec<(u32, Cf)>> {
        let _ddl = self.ddl.lock();
        let meta = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        // new indexes take the table's options (those of its rows family)
        let opts = Self::table_options(db, &meta)?;
        // Families of builds that never committed (numbers from next_index_no on):
        // an online build that failed leaves its families to this point, when no
        // transaction can still hold writes to them (the server runs this step
        // with the table locked exclusively; see IndexBuild::publish).
        let prefix = format!("t{}.i", meta.table_id);
        for cf_name in db.list_cfs() {
            let leftover = cf_name
                .strip_prefix(&prefix)
                .and_then(|no| no.parse::<u32>().ok())
                .is_some_and(|no| no >= meta.next_index_no);
            if leftover {
                db.drop_cf(&cf_name)?;
            }
        }
        let mut made: Vec<(u32, Cf)> = Vec::new();
        for i in 0..count {
            let no = meta.next_index_no + i;
            let cf_name = meta.index_cf_name(no);
            let result = (|| -> FfiResult<Cf> { Ok(db.create_cf(&cf_name, opts.clone())?) })();
            match result {
                Ok(cf) => made.push((no, cf)),
                Err(e) => {
                    for (_, cf) in &made {
                        let _ = db.drop_cf(&cf.name());
                    }
                    return Err(e);
                }
            }
        }
        Ok(made)
    }

    /// Commits a table's new list of secondary indexes in one transaction (the
    /// in-place ALTER's commit point): `layout[i]` says where the i-th index of the
    /// new definition lives, an existing index of the old definition or a family
    /// built by [`Catalog::create_index_cfs`]. The families of old indexes missing
    /// from the layout are dropped after the commit (their space is reclaimed at
    /// once); a crash in between leaves families the next open drops. The table's
    /// saved statistics are discarded (they are per key position).
    pub fn alter_indexes(
        &self,
        db: &Db,
        name: &str,
        layout: &[IndexSource],
        built: &[(u32, Cf)],
    ) -> FfiResult<()> {
        self.alter_table(db, name, layout, built, None)
    }

    /// [`Catalog::alter_indexes`], also committing a new column definition version
    /// (`columns`; None keeps the table's).
    pub fn alter_table(
        &self,
        db: &Db,
        name: &str,
        layout: &[IndexSource],
        built: &[(u32, Cf)],
        columns: Option<ColumnVersions>,
    ) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let old = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        let invalid = |what: String| FfiError::new(Status::Invalid, what);
        let mut nos = Vec::with_capacity(layout.len());
        for src in layout {
            let no = match *src {
                IndexSource::Existing(i) => *i
                    .checked_sub(1)
                    .and_then(|i| old.index_nos.get(i as usize))
                    .ok_or_else(|| invalid(format!("no existing index {i}")))?,
                IndexSource::Built(slot) => {
                    built
                        .get(slot)
                        .ok_or_else(|| invalid(format!("no built index {slot}")))?
                        .0
                }
            };
            if nos.contains(&no) {
                return Err(invalid(format!("index number {no} used twice")));
            }
            nos.push(no);
        }
        let next_index_no = built
            .iter()
            .map(|(no, _)| no + 1)
            .fold(old.next_index_no, u32::max);
        let meta = TableMeta {
            table_id: old.table_id,
            index_nos: nos,
            next_index_no,
            auto_increment: old.auto_increment,
            columns: columns.or_else(|| old.columns.clone()),
        };
        let mut cfs = Vec::with_capacity(meta.index_nos.len() + 1);
        for cf_name in meta.cf_names() {
            cfs.push(db.cf(&cf_name).ok_or_else(|| {
                FfiError::new(
                    Status::Corruption,
                    format!(
                        "column family {cf_name} of table {} is missing",
                        normalize(name)
                    ),
                )
            })?);
        }
        db.write_deferred(); // a queued statistics put, as in drop_table
        let mut txn = db.begin(Isolation::RepeatableRead);
        self.put_meta(&mut txn, name, Some(&meta))?;
        txn.delete(&self.cf, &stats_key(meta.table_id))?;
        txn.commit()?;
        let (cfs, _blob_cf) = split_blob_cf(cfs)?;
        if let Some(shared) = self.open_tables.lock().get(normalize(name)) {
            let mut st = shared.state.write();
            st.meta = meta.clone();
            st.cfs = cfs;
        }
        for no in &old.index_nos {
            if !meta.index_nos.contains(no) {
                match db.drop_cf(&old.index_cf_name(*no)) {
                    Ok(()) | Err(tidesdb_core::Error::ColumnFamilyNotFound(_)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Allocates a new table id for an online rebuild of table `name` and creates
    /// its column families (rows, its indexes, external values) with the table's
    /// options. `sources[i]` is the i-th secondary index of the new definition: an
    /// index of the current one (1-based), whose number it keeps, or 0 for a new
    /// one, numbered after them: an in-place ALTER keeps the order the indexes
    /// were created in (the order `apply` checks unique keys in, as InnoDB's
    /// dictionary). No catalog entry names the families until
    /// [`Catalog::install_rebuilt`]: a crash before leaves families the next open
    /// drops. Returns the meta the rebuilt table will have and its families.
    pub fn create_rebuild_cfs(
        &self,
        db: &Db,
        name: &str,
        sources: &[u32],
        columns: ColumnVersions,
    ) -> FfiResult<(TableMeta, Vec<Cf>)> {
        let _ddl = self.ddl.lock();
        let old = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        let opts = Self::table_options(db, &old)?;
        let mut next_no = old.next_index_no;
        let mut index_nos = Vec::with_capacity(sources.len());
        for &src in sources {
            let no = match src {
                0 => {
                    next_no += 1;
                    next_no - 1
                }
                i => *old.index_nos.get(i as usize - 1).ok_or_else(|| {
                    FfiError::new(Status::Invalid, format!("no existing index {i}"))
                })?,
            };
            if index_nos.contains(&no) {
                return Err(FfiError::new(
                    Status::Invalid,
                    format!("index number {no} used twice"),
                ));
            }
            index_nos.push(no);
        }
        let mut txn = db.begin(Isolation::RepeatableRead);
        let next = match txn.get(&self.cf, NEXT_ID_KEY)? {
            Some(v) => u64::from_le_bytes(v.as_slice().try_into().map_err(|_| {
                FfiError::new(Status::Corruption, "catalog next_table_id is damaged")
            })?),
            None => 1,
        };
        txn.put(&self.cf, NEXT_ID_KEY, &(next + 1).to_le_bytes())?;
        txn.commit()?;
        let meta = TableMeta {
            table_id: next,
            index_nos,
            next_index_no: next_no,
            auto_increment: old.auto_increment,
            columns: Some(columns),
        };
        let cfs = Self::create_cfs(db, &meta, &opts)?;
        Ok((meta, cfs))
    }

    /// The commit point of an online rebuild: table `name` becomes `meta` (the
    /// families of [`Catalog::create_rebuild_cfs`], filled) in one transaction,
    /// which also moves the persisted AUTO_INCREMENT counter to the new table id;
    /// the old families are dropped after it (a crash in between leaves families
    /// the next open drops). The caller holds the table exclusively (no row
    /// change runs). The saved statistics are dropped, as by `alter_table`.
    pub fn install_rebuilt(&self, db: &Db, name: &str, meta: &TableMeta) -> FfiResult<()> {
        self.install_rebuilt_group(db, &[(name, meta)], None)
    }

    /// [`Catalog::install_rebuilt`] of several tables (the partitions of one
    /// partitioned table) in one transaction: all of them switch or none does.
    /// With `marker` (the partitioned table's path and the new definition's
    /// version, the server's `.frm` id), the transaction also records that this
    /// definition's switch committed ([`Catalog::group_switch_committed`]): the
    /// server's DDL recovery asks about the partitioned table by its own path,
    /// which names no catalog entry.
    pub fn install_rebuilt_group(
        &self,
        db: &Db,
        tables: &[(&str, &TableMeta)],
        marker: Option<(&str, &[u8])>,
    ) -> FfiResult<()> {
        let _ddl = self.ddl.lock();
        let mut olds = Vec::with_capacity(tables.len());
        let mut new_cfs = Vec::with_capacity(tables.len());
        let mut shareds = Vec::with_capacity(tables.len());
        for &(name, meta) in tables {
            olds.push(self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?);
            let mut cfs = Vec::new();
            for cf_name in meta.cf_names() {
                cfs.push(db.cf(&cf_name).ok_or_else(|| {
                    FfiError::new(
                        Status::Corruption,
                        format!("column family {cf_name} of a rebuild of {name} is missing"),
                    )
                })?);
            }
            new_cfs.push(cfs);
            shareds.push(self.open_tables.lock().get(normalize(name)).cloned());
        }
        // The counters' queued puts name the old table ids: write them first.
        let _autoinc: Vec<_> = shareds
            .iter()
            .map(|s| s.as_ref().map(|s| s.autoinc.lock()))
            .collect();
        db.write_deferred();
        for s in shareds.iter().flatten() {
            *s.autoinc_pending.lock() = None;
        }
        let mut txn = db.begin(Isolation::RepeatableRead);
        for (&(name, meta), old) in tables.iter().zip(&olds) {
            self.put_meta(&mut txn, name, Some(meta))?;
            if let Some(v) = txn.get(&self.cf, &autoinc_key(old.table_id))? {
                txn.put(&self.cf, &autoinc_key(meta.table_id), &v)?;
            }
            for key in [
                autoinc_key(old.table_id),
                stats_key(old.table_id),
                extent_key(old.table_id),
            ] {
                txn.delete(&self.cf, &key)?;
            }
        }
        if let Some((path, version)) = marker {
            txn.put(&self.cf, &altered_key(path), version)?;
        }
        txn.commit()?;
        for ((&(_, meta), cfs), shared) in tables.iter().zip(new_cfs).zip(&shareds) {
            if let Some(s) = shared {
                let (cfs, blob_cf) = split_blob_cf(cfs)?;
                let mut st = s.state.write();
                st.meta = meta.clone();
                st.cfs = cfs;
                st.blob_cf = blob_cf;
                *s.extents.lock() = None;
            }
        }
        let mut first_err = None;
        for old in &olds {
            if let Err(e) = Self::drop_cfs(db, old) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Whether table `name`'s catalog entry is `meta` (a switch to it committed).
    pub fn is_installed(&self, db: &Db, name: &str, meta: &TableMeta) -> bool {
        matches!(self.lookup(db, name), Ok(Some(m)) if m == *meta)
    }

    /// Whether the switch of partitioned table `path` to the definition of
    /// version `version` committed ([`Catalog::install_rebuilt_group`]).
    pub fn group_switch_committed(&self, db: &Db, path: &str, version: &[u8]) -> FfiResult<bool> {
        self.read_with_mirror(|cf| {
            let mut txn = db.begin(Isolation::ReadCommitted);
            let v = txn.get(cf, &altered_key(path))?;
            txn.rollback();
            Ok(v.is_some_and(|v| v == version))
        })
    }

    /// Drops the families of a rebuild that did not commit.
    pub fn drop_rebuild_cfs(db: &Db, meta: &TableMeta) -> FfiResult<()> {
        Self::drop_cfs(db, meta)
    }

    pub fn drop_database(&self, db: &Db, db_path: &str) -> FfiResult<()> {
        let prefix = normalize(db_path).as_bytes().to_vec();
        for (name, _) in self.entries(db, &prefix)? {
            match self.drop_table(db, &name) {
                Ok(()) => {}
                Err(e) if e.status == Status::NoSuchTable => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The shared state of an open table, loading it on first use.
    pub fn open_table(&self, db: &Db, name: &str) -> FfiResult<Arc<TableShared>> {
        // Looked up by the borrowed name: foreign key checks open the parent
        // table once per probe.
        let key = normalize(name);
        if let Some(shared) = self.open_tables.lock().get(key) {
            return Ok(shared.clone());
        }
        let _ddl = self.ddl.lock();
        let meta = self.lookup(db, name)?.ok_or_else(|| no_such_table(name))?;
        let mut cfs = Vec::new();
        for cf_name in meta.cf_names() {
            if cf_name == meta.blob_cf_name() && db.cf(&cf_name).is_none() {
                // a table created before external values existed
                cfs.push(db.create_cf(&cf_name, CfOptions::default())?);
                continue;
            }
            let cf = db.cf(&cf_name).ok_or_else(|| {
                FfiError::new(
                    Status::Corruption,
                    format!("column family {cf_name} of table {key} is missing"),
                )
            })?;
            // An encrypted table whose key the key management plugin does
            // not have is refused by name; the other tables work.
            db.check_encryption(&cf).map_err(|e| {
                let message = match e {
                    tidesdb_core::Error::KeyUnavailable {
                        file,
                        key_id,
                        key_version,
                        detail,
                    } => format!(
                        "table {key} cannot be opened: encryption key {key_id} version \
                         {key_version} ({}) is not available: {detail}",
                        file.file_name()
                            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                    ),
                    e => format!("table {key} cannot be opened: {e}"),
                };
                FfiError::new(Status::KeyUnavailable, message)
            })?;
            cfs.push(cf);
        }
        let mut open = self.open_tables.lock();
        if let Some(shared) = open.get(key) {
            return Ok(shared.clone());
        }
        let discarded = {
            let mut txn = db.begin(Isolation::ReadCommitted);
            let d = txn.get(&self.cf, &discarded_key(meta.table_id))?.is_some();
            txn.rollback();
            d
        };
        let shared = TableShared::new(meta, cfs, discarded, db.clone(), self.cf.clone())?;
        open.insert(key.to_string(), shared.clone());
        Ok(shared)
    }

    /// Marks a table's shared state dropped and forgets it.
    fn forget(&self, name: &str) {
        if let Some(shared) = self.open_tables.lock().remove(normalize(name)) {
            shared.state.write().dropped = true;
        }
    }
}
