//! Opening a database: manifest recovery, column families, WAL replay,
//! prepared transactions (WAL and spilled), adoption of WAL segments, and
//! the removal of files no version names.

use super::background::Background;
use super::commit::CommitPipeline;
use super::database::{DbInner, PrepFiles, DB_UID, DEFAULT_SPILL_THRESHOLD, DEFAULT_VLOG_GC_RATIO};
use super::flush::build_table;
use super::prepared::{PreparedEntry, PreparedState};
use crate::error::{Error, Result};
use crate::journal::batch::{self, Op, Record};
use crate::journal::wal::{self, WalWriter};
use crate::key::Kind;
use crate::memtable::buffer::Memtable;
use crate::options::DbOptions;
use crate::table::cache::BlockCache;
use crate::table::sst::{self, Table};
use crate::version::levels::{CfInner, FileHandle, Levels, SuperVersion};
use crate::version::manifest::{self, ManifestWriter, State};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The keys a prepared transaction wrote: (column family id, key).
pub(super) type PreparedKeys = Vec<(u64, Vec<u8>)>;

/// Opens the `.prep` files of one prepared spilled write set and reads the keys
/// they hold (locked again for the prepared transaction).
pub(super) fn open_prepared_spill(
    dir: &Path,
    files: &[(u64, u64)],
    cache: &Arc<BlockCache>,
    keyring: &crate::crypto::Keyring,
) -> Result<(PrepFiles, PreparedKeys)> {
    use crate::iter::InternalIterator;
    let mut tables = Vec::new();
    let mut keys = Vec::new();
    for (cf, no) in files {
        let t = Arc::new(Table::open(
            crate::txn::spill::prep_path(dir, *no),
            *no,
            cache.clone(),
            keyring,
        )?);
        let mut it = crate::table::sst::TableIter::new(t.clone());
        it.seek_to_first();
        while it.valid() {
            keys.push((*cf, it.user_key().to_vec()));
            it.next();
        }
        it.status()?;
        tables.push((*cf, t));
    }
    Ok((tables, keys))
}

pub(super) fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    let mut v = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        if let Some(n) = e.file_name().to_str() {
            v.push(n.to_string());
        }
    }
    Ok(v)
}

/// Unresolved prepares found in the WAL (xid -> write set), in xid order.
pub(super) type WalPrepares = BTreeMap<Vec<u8>, Vec<Op>>;

/// Recovery phase 1: the manifest (salvaged at force_recovery >= 3), or an
/// empty state for a new directory; refuses a directory whose CURRENT is
/// gone while its files are there.
pub(super) fn recover_manifest(
    dir: &Path,
    names: &[String],
    level: u8,
    notes: &mut Vec<String>,
) -> Result<(State, Option<u64>)> {
    let loaded = if level >= 3 {
        manifest::load_salvaging(dir, notes)?
    } else {
        manifest::load(dir)?
    };
    Ok(match loaded {
        Some((s, n)) => (s, Some(n)),
        None => {
            // A manifest alone is an unfinished creation (a crash, or a
            // failed write, before CURRENT first named it: the WAL comes
            // after): nothing in it to lose.
            let has_data = names.iter().any(|n| {
                sst::parse_table_name(n).is_some() || wal::parse_segment_name(n).is_some()
            });
            if has_data && names.iter().any(|n| n.starts_with("MANIFEST-"))
                || names.iter().any(|n| sst::parse_table_name(n).is_some())
            {
                return Err(Error::corruption(
                    dir.join("CURRENT"),
                    0,
                    "CURRENT missing but database files exist",
                ));
            }
            (State::default(), None)
        }
    })
}

/// Highest file number any engine file in the directory carries, so that new
/// files never reuse one (the manifest's counter may lag behind).
pub(super) fn max_file_no_on_disk(names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| {
            wal::parse_segment_name(n)
                .or_else(|| sst::parse_table_name(n))
                .or_else(|| crate::vlog::file::parse_vlog_name(n))
                .or_else(|| crate::txn::spill::parse_spill_name(n))
                .or_else(|| crate::txn::spill::parse_prep_name(n))
                .or_else(|| n.strip_prefix("MANIFEST-").and_then(|s| s.parse().ok()))
        })
        .max()
        .unwrap_or(0)
}

/// O_DIRECT: on if asked for and the filesystem accepts it (probed on the
/// LOCK file); otherwise reads stay buffered.
pub(super) fn probe_direct_io(
    dir: &Path,
    opts: &DbOptions,
) -> Result<Option<Arc<crate::fsutil::DirectIo>>> {
    Ok(if opts.use_direct_reads {
        crate::fsutil::open_direct(&dir.join("LOCK"))?.map(|_| {
            Arc::new(crate::fsutil::DirectIo {
                enabled: AtomicBool::new(true),
                reads: AtomicU64::new(0),
            })
        })
    } else {
        None
    })
}

/// Recovery phase 2: each column family of the manifest with its table and
/// value log files open (damaged ones quarantined).
pub(super) fn open_column_families(
    dir: &Path,
    state: &State,
    cache: &Arc<BlockCache>,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    uid: u64,
    opts: &DbOptions,
) -> BTreeMap<u64, Arc<CfInner>> {
    let mut cfs = BTreeMap::new();
    for (id, meta) in &state.cfs {
        let mut levels = Levels::new();
        for (lvl, files) in meta.levels.iter().enumerate() {
            for fm in files {
                let path = sst::table_path(dir, fm.file_no);
                // A file whose footer, index, filter or props is damaged
                // (or that is missing) does not stop the engine: it is
                // quarantined, its key range answering with the error
                // (`Db::quarantined_files`). Nothing on disk changes.
                let t = match Table::open_with(
                    path.clone(),
                    fm.file_no,
                    cache.clone(),
                    dio,
                    &opts.keys,
                ) {
                    Ok(t) => t,
                    Err(e) => {
                        // An encrypted file's range is in the file only:
                        // unreadable, it covers every key.
                        let (lo, hi) = match fm.encrypted {
                            true => (&[][..], &sst::UNKNOWN_RANGE_END[..]),
                            false => (&fm.smallest[..], &fm.largest[..]),
                        };
                        Table::quarantined(path, fm.file_no, cache.clone(), lo, hi, &e)
                    }
                };
                let mut meta = fm.clone();
                if fm.encrypted {
                    (meta.smallest, meta.largest) = match &t.broken {
                        None => (
                            t.props.smallest_user().to_vec(),
                            t.props.largest_user().to_vec(),
                        ),
                        Some(b) => (b.smallest.clone(), b.largest.clone()),
                    };
                }
                levels.levels[lvl].push(Arc::new(FileHandle {
                    meta,
                    table: Arc::new(t),
                }));
            }
        }
        for (no, v) in &state.vlog_files {
            if v.cf == *id {
                // A missing or unreadable value log file does not stop
                // the engine: only reads of its values fail (as with a
                // quarantined table file).
                let f = crate::vlog::file::VlogFile::open(dir, *no, v.format, dio, &opts.keys)
                    .unwrap_or_else(|e| {
                        crate::vlog::file::VlogFile::quarantined(dir, *no, v.format, &e)
                    });
                levels.vlogs.insert(*no, Arc::new(f));
            }
        }
        levels.normalize();
        cfs.insert(
            *id,
            Arc::new(CfInner::new(
                *id,
                meta.name.clone(),
                meta.opts.clone(),
                levels,
                uid,
                opts.write_buffer_size,
            )),
        );
    }
    cfs
}

/// What replaying the WAL found.
pub(super) struct Replayed {
    pub(super) last_seq: u64,
    /// Prepares left unresolved.
    pub(super) prepared: WalPrepares,
    /// Segments kept as they are (not removed after the replay): from the first
    /// one holding a commit of a family whose encryption key is unavailable (its
    /// memtable could not be flushed, so those records stay only in the log) to
    /// the last, so every prepare they hold keeps its outcome beside it.
    pub(super) held: Vec<u64>,
}

/// Recovery phase 3: replays the WAL segments into the memtables (records
/// below a column family's flushed sequence skipped); returns the last
/// sequence seen and the prepares left unresolved. At force_recovery >= 2 a
/// damaged segment is noted and its rest skipped. The records of an encrypted
/// family whose key is unavailable are left in the log (`Replayed::held`): the
/// family's table is refused by name until the key is back, the others open.
pub(super) fn replay_wal(
    dir: &Path,
    names: &[String],
    state: &State,
    cfs: &BTreeMap<u64, Arc<CfInner>>,
    level: u8,
    notes: &mut Vec<String>,
    keys: &crate::crypto::Keyring,
) -> Result<Replayed> {
    let keyless: HashSet<u64> = cfs
        .iter()
        .filter(|(_, cf)| {
            cf.opts
                .encryption_key
                .is_some_and(|id| keys.latest_version(id).is_none())
        })
        .map(|(&id, _)| id)
        .collect();
    let mut first_held: Option<usize> = None;
    // Valid bytes of the last segment (its tail may be torn or zero-filled).
    let mut last_len: Option<u64> = None;
    let mut segs: Vec<u64> = names
        .iter()
        .filter_map(|n| wal::parse_segment_name(n))
        .collect();
    segs.sort_unstable();
    let mut last_seq = state.last_seq;
    // Unresolved prepares (xid -> write set), in xid order.
    let mut prepared: WalPrepares = BTreeMap::new();
    for (i, &n) in segs.iter().enumerate() {
        let path = wal::segment_path(dir, n);
        let replayed = wal::read_segment_with(&path, i + 1 == segs.len(), keys, |payload, off| {
            let rec = batch::decode(payload)
                .ok_or_else(|| Error::corruption(&path, off, "undecodable WAL record"))?;
            let mut apply = |seq: u64, ops: Vec<Op>| {
                for op in ops {
                    let Some(cf) = cfs.get(&op.cf) else { continue };
                    let flushed = state.cfs.get(&op.cf).map_or(0, |m| m.flushed_seq);
                    if seq > flushed && keyless.contains(&op.cf) {
                        first_held.get_or_insert(i);
                    } else if seq > flushed {
                        cf.sv
                            .read()
                            .mem
                            .insert_shared(&op.key, seq, op.kind, op.value, None, None);
                    }
                }
            };
            match rec {
                Record::Commit { seq, ops } => {
                    last_seq = last_seq.max(seq);
                    apply(seq, ops);
                }
                Record::Prepare { xid, ops } => {
                    prepared.insert(xid, ops);
                }
                Record::CommitPrepared { seq, xid } => {
                    last_seq = last_seq.max(seq);
                    // Unknown xid: its prepare segment was purged, which
                    // happens only once `seq` is flushed.
                    if let Some(ops) = prepared.remove(&xid) {
                        apply(seq, ops);
                    }
                }
                Record::RollbackPrepared { xid } => {
                    prepared.remove(&xid);
                }
            }
            Ok(())
        });
        match replayed {
            Ok(n) => {
                if i + 1 == segs.len() {
                    last_len = Some(n);
                }
            }
            Err(e) if level >= 2 && e.is_corruption() => notes.push(format!(
                "damaged write-ahead log segment {} ({e}): its records from the damage \
                 on are skipped (the commits they hold are lost)",
                path.display()
            )),
            Err(e) => return Err(e),
        }
    }
    let held: Vec<u64> = first_held.map_or_else(Vec::new, |i| segs[i..].to_vec());
    // A kept segment is no longer the last one at the next open, where only the
    // last may end in a torn or zero-filled tail: cut it back to its records now.
    if let (Some(&last), Some(len), 0) = (held.last(), last_len, level) {
        let path = wal::segment_path(dir, last);
        let f = crate::io::open(std::fs::OpenOptions::new().write(true), &path)
            .and_then(|f| crate::io::set_len(&f, len, &path).map(|()| f))
            .and_then(|f| crate::io::sync_all(&f, &path))
            .map_err(|e| Error::io(format!("cut back {}", path.display()), e));
        f?;
    }
    if let Some(first) = held.first() {
        notes.push(format!(
            "write-ahead log segments from {} on are kept: they hold commits of a table \
             whose encryption key is not available (the table is refused until the key \
             is back; its rows are replayed then)",
            wal::segment_path(dir, *first).display()
        ));
    }
    Ok(Replayed {
        last_seq,
        prepared,
        held,
    })
}

/// Recovery phase 4: flushes the replayed memtables to level-0 tables so the
/// old WAL segments can go (not called read-only: they stay in memory).
pub(super) fn flush_replayed_memtables(
    dir: &Path,
    cfs: &BTreeMap<u64, Arc<CfInner>>,
    state: &mut State,
    next_file: &AtomicU64,
    cache: &Arc<BlockCache>,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    keys: &crate::crypto::Keyring,
) -> Result<()> {
    for (id, cf) in cfs.iter() {
        let mem = cf.current().mem.clone();
        if mem.is_empty() {
            continue;
        }
        let no = next_file.fetch_add(1, Ordering::SeqCst);
        let alloc = || next_file.fetch_add(1, Ordering::SeqCst);
        let (fm, table, vlogs) =
            build_table(dir, no, &cf.opts, &mem, cache, &[], dio, &alloc, None, keys)?;
        if let Some(m) = state.cfs.get_mut(id) {
            m.levels[0].push(fm.clone());
            m.flushed_seq = m.flushed_seq.max(mem.max_seq());
        }
        let mut levels = (*cf.current().levels).clone();
        for v in vlogs {
            state.vlog_files.insert(
                v.file.no,
                manifest::VlogMeta {
                    cf: *id,
                    size: v.size,
                    garbage: v.garbage,
                    format: v.file.format,
                },
            );
            levels.vlogs.insert(v.file.no, v.file);
        }
        levels.levels[0].push(Arc::new(FileHandle { meta: fm, table }));
        levels.normalize();
        *cf.sv.write() = Arc::new(SuperVersion {
            mem: Arc::new(cf.new_memtable()),
            imms: Vec::new(),
            levels: Arc::new(levels),
        });
    }
    Ok(())
}

/// Recovery phase 5: the unresolved prepares re-logged (fsynced) at the start
/// of the fresh WAL segment, before the replayed segments are deleted.
pub(super) fn relog_prepares(w: Option<&mut WalWriter>, prepared: &WalPrepares) -> Result<()> {
    if let Some(w) = w.filter(|_| !prepared.is_empty()) {
        let mut framed = Vec::new();
        for (xid, ops) in prepared {
            wal::frame_with(&mut framed, |out| {
                batch::encode_prepare(out, xid, ops.iter())
            });
        }
        w.append(&framed)?;
        w.sync()?;
    }
    Ok(())
}

/// Recovery phase 6: removes obsolete files: old manifests, replayed WAL
/// segments, orphan tables, value logs and spill files (not called read-only).
pub(super) fn remove_obsolete_files(
    dir: &Path,
    names: &[String],
    state: &State,
    mnum: u64,
    held: &[u64],
) {
    let live: HashSet<u64> = state
        .cfs
        .values()
        .flat_map(|c| c.levels.iter().flatten().map(|f| f.file_no))
        .collect();
    for n in names.iter() {
        let remove = if let Some(no) = sst::parse_table_name(n) {
            !live.contains(&no)
        } else if let Some(no) = crate::vlog::file::parse_vlog_name(n) {
            !state.vlog_files.contains_key(&no)
        } else if let Some(no) = crate::txn::spill::parse_prep_name(n) {
            !state
                .prepared_spills
                .values()
                .flatten()
                .any(|(_, f)| *f == no)
        } else if let Some(no) = wal::parse_segment_name(n) {
            !held.contains(&no)
        } else if crate::txn::spill::parse_spill_name(n).is_some() {
            true
        } else if let Some(m) = n.strip_prefix("MANIFEST-") {
            // the new one and its copy stay
            let m = m.strip_suffix(".copy").unwrap_or(m);
            m.parse::<u64>().ok() != Some(mnum)
        } else {
            n.ends_with(".tmp")
        };
        if remove {
            let _ = crate::io::remove_file(dir.join(n));
        }
    }
}

/// Recovery phase 7: prepared spilled write sets (manifest) with their files
/// reopened. Their keys are read now: a damaged file stops the open, or with
/// force_recovery leaves that prepared transaction out.
pub(super) fn open_spilled_prepares(
    dir: &Path,
    state: &State,
    cache: &Arc<BlockCache>,
    read_only: bool,
    notes: &mut Vec<String>,
    keys: &crate::crypto::Keyring,
) -> Result<Vec<(Vec<u8>, PrepFiles, PreparedKeys)>> {
    let mut spilled_prepares: Vec<(Vec<u8>, PrepFiles, PreparedKeys)> = Vec::new();
    for (xid, files) in &state.prepared_spills {
        match open_prepared_spill(dir, files, cache, keys) {
            Ok((v, keys)) => spilled_prepares.push((xid.clone(), v, keys)),
            Err(e) if read_only => notes.push(format!(
                "unreadable prepared-transaction file ({e}): that prepared transaction \
                 (xid {xid:02x?}) is left out; its writes were never visible"
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(spilled_prepares)
}

/// What a flush may point into instead of copying values (see `vlog.rs`,
/// "WAL segments kept as value logs").
pub(crate) struct WalAdoption {
    /// Segments no longer written (sealed: fsynced and cut to their records).
    pub sealed: HashSet<u64>,
    /// Garbage ratio the adopted file may start with (the GC ratio: a file at
    /// or above it would be relocated by the next compaction anyway).
    pub max_garbage_ratio: f64,
}

/// Sealed segments worth adopting for `mem`: those where the values the
/// flush separates and whose place in the WAL it knows make up enough of the
/// segment. (An estimate: versions the flush drops are counted; the garbage
/// recorded is exact.)
pub(super) fn segments_to_adopt(
    dir: &Path,
    mem: &Memtable,
    vo: &crate::vlog::file::VlogOut<'_>,
    adopt: &WalAdoption,
) -> Vec<u64> {
    let mut bytes: BTreeMap<u64, u64> = BTreeMap::new();
    let _ = mem.for_each(|e| {
        if let Some(l) = e.wal_loc() {
            if e.kind() == Kind::Put && vo.separates(e.value()) && adopt.sealed.contains(&l.segment)
            {
                *bytes.entry(l.segment).or_default() += e.value().len() as u64;
            }
        }
        Ok(())
    });
    bytes
        .into_iter()
        .filter(|&(seg, used)| {
            std::fs::metadata(wal::segment_path(dir, seg)).is_ok_and(|m| {
                let size = m.len();
                size > 0 && (size - used.min(size)) as f64 / (size as f64) < adopt.max_garbage_ratio
            })
        })
        .map(|(seg, _)| seg)
        .collect()
}

/// A new WAL segment, encrypted with `DbOptions::log_encryption_key` if set.
pub(super) fn new_wal_segment(dir: &Path, no: u64, opts: &DbOptions) -> Result<WalWriter> {
    let path = wal::segment_path(dir, no);
    let cipher =
        crate::crypto::FileCipher::for_new_file_if(&opts.keys, opts.log_encryption_key, &path)?;
    WalWriter::create_encrypted(dir, no, cipher)
}

impl DbInner {
    /// Opens (or creates) the database in `dir`: the recovery phases run in
    /// order, each in its own step below; then the background threads start.
    pub(super) fn open(dir: &Path, opts: DbOptions) -> Result<Arc<DbInner>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let lock = crate::fsutil::lock_dir(dir)?;
        let cache = Arc::new(BlockCache::new(opts.block_cache_size));
        let names = list_dir(dir)?;
        // force_recovery: what a damaged directory made the open skip.
        let level = opts.force_recovery;
        let read_only = level > 0;
        let mut notes = Vec::new();
        let (mut state, old_manifest) = recover_manifest(dir, &names, level, &mut notes)?;
        if !read_only {
            crate::db::encryption::set_family_encryption(dir, &mut state, &opts)?;
        }
        let max_on_disk = max_file_no_on_disk(&names);
        let next_file = AtomicU64::new(state.next_file.max(max_on_disk + 1).max(1));
        let uid = DB_UID.fetch_add(1, Ordering::Relaxed);
        let dio = probe_direct_io(dir, &opts)?;
        let cfs = open_column_families(dir, &state, &cache, dio.as_ref(), uid, &opts);
        let Replayed {
            last_seq,
            prepared,
            held: held_wal,
        } = replay_wal(dir, &names, &state, &cfs, level, &mut notes, &opts.keys)?;
        if !read_only {
            flush_replayed_memtables(
                dir,
                &cfs,
                &mut state,
                &next_file,
                &cache,
                dio.as_ref(),
                &opts.keys,
            )?;
        }
        state.last_seq = last_seq;
        let mnum = next_file.fetch_add(1, Ordering::SeqCst);
        state.next_file = next_file.load(Ordering::SeqCst);
        let mw = if read_only {
            ManifestWriter::read_only(dir, old_manifest.unwrap_or(mnum))
        } else {
            ManifestWriter::create(dir, mnum, &state)?
        };

        // The fresh WAL segment starts with the unresolved prepares (re-logged,
        // fsynced) before the replayed segments are deleted.
        let wal_no = next_file.fetch_add(1, Ordering::SeqCst);
        let mut w = if read_only {
            None
        } else {
            Some(new_wal_segment(dir, wal_no, &opts)?)
        };
        relog_prepares(w.as_mut(), &prepared)?;
        if !read_only {
            remove_obsolete_files(dir, &names, &state, mnum, &held_wal);
        }
        let spilled_prepares =
            open_spilled_prepares(dir, &state, &cache, read_only, &mut notes, &opts.keys)?;

        let inner = Arc::new(DbInner {
            dir: dir.to_path_buf(),
            commit: CommitPipeline::new(w, last_seq, opts.sync_mode),
            opts,
            uid,
            cache,
            cfs: RwLock::new(cfs),
            ddl: Mutex::new(()),
            manifest: Mutex::new((mw, state)),
            next_file,
            snapshots: Arc::default(),
            flush_lock: Mutex::new(()),
            #[cfg(test)]
            flush_hook: Mutex::new(None),
            bg: Background::default(),
            closed: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            recovery_notes: notes,
            held_wal,
            lock_file: Mutex::new(Some(lock)),
            locks: Arc::new(crate::txn::lock::LockManager::new()),
            next_txn_id: AtomicU64::new(1),
            prepared: Mutex::new(PreparedState::default()),
            prepared_detached: parking_lot::Condvar::new(),
            spill_threshold: std::sync::atomic::AtomicUsize::new(DEFAULT_SPILL_THRESHOLD),
            dio,
            vlog_gc_permille: AtomicU64::new((DEFAULT_VLOG_GC_RATIO * 1000.0) as u64),
            pacer: crate::compaction::pacer::Pacer::new(
                crate::compaction::pacer::DEFAULT_COMPACTION_RATE,
            ),
        });
        inner.register_recovered_prepares(prepared, wal_no, spilled_prepares)?;
        if !read_only {
            inner.start_threads()?;
        }
        Ok(inner)
    }

    /// Recovered prepared transactions (WAL and spilled): registered, keys
    /// locked again, so that they wait for the server's commit or rollback.
    pub(super) fn register_recovered_prepares(
        &self,
        prepared: BTreeMap<Vec<u8>, Vec<Op>>,
        wal_no: u64,
        spilled_prepares: Vec<(Vec<u8>, PrepFiles, PreparedKeys)>,
    ) -> Result<()> {
        {
            let mut p = self.prepared.lock();
            let never = AtomicBool::new(false);
            for (xid, ops) in prepared {
                let owner = self.next_txn_id.fetch_add(1, Ordering::Relaxed);
                let mut keys = Vec::new();
                for o in &ops {
                    let k = (o.cf, o.key.clone());
                    self.locks.lock(
                        owner,
                        o.cf,
                        &o.key,
                        crate::txn::lock::LockMode::Exclusive,
                        Duration::ZERO,
                        &never,
                    )?;
                    keys.push(k);
                }
                p.keys.extend(keys.iter().cloned());
                p.by_xid.insert(
                    xid,
                    PreparedEntry {
                        owner,
                        segment: wal_no,
                        keys,
                        ops: Some(ops),
                        resolving: false,
                        spill: Vec::new(),
                    },
                );
            }
            for (xid, spill, keys) in spilled_prepares {
                let owner = self.next_txn_id.fetch_add(1, Ordering::Relaxed);
                for (cf, key) in &keys {
                    self.locks.lock(
                        owner,
                        *cf,
                        key,
                        crate::txn::lock::LockMode::Exclusive,
                        Duration::ZERO,
                        &never,
                    )?;
                }
                p.keys.extend(keys.iter().cloned());
                p.by_xid.insert(
                    xid,
                    PreparedEntry {
                        owner,
                        segment: u64::MAX,
                        keys,
                        ops: Some(Vec::new()),
                        resolving: false,
                        spill,
                    },
                );
            }
        }
        Ok(())
    }
}
