//! Flush: immutable memtables to L0 tables (and value log files), WAL purge.

use super::database::DbInner;
use super::open::{segments_to_adopt, WalAdoption};
use crate::compaction::output::{finish_table, finish_vlog};
use crate::error::Result;
use crate::journal::wal::{self};
use crate::key::Kind;
use crate::memtable::buffer::Memtable;
use crate::options::CfOptions;
use crate::table::cache::BlockCache;
use crate::table::sst::{self, Table, TableBuilder};
use crate::version::levels::{CfInner, FileHandle, SuperVersion};
use crate::version::manifest::{EditOp, FileMeta};
use parking_lot::MutexGuard;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A value log file a flush produced: written by it (`Records`) or a sealed
/// WAL segment it adopted (`WalSegment`), with the bytes no pointer of the
/// flush's table names (always 0 for a written one).
pub(crate) struct FlushVlog {
    pub file: Arc<crate::vlog::file::VlogFile>,
    pub size: u64,
    pub garbage: u64,
}

impl FlushVlog {
    /// The manifest op that adds the file.
    fn edit(&self, cf: u64) -> EditOp {
        match self.file.format {
            crate::vlog::file::VlogFormat::Records => EditOp::VlogAdd {
                cf,
                file_no: self.file.no,
                size: self.size,
            },
            crate::vlog::file::VlogFormat::WalSegment => EditOp::VlogAddWal {
                cf,
                file_no: self.file.no,
                size: self.size,
                garbage: self.garbage,
            },
        }
    }
}

/// Writes `mem` to a new table file `no`; values of at least the column
/// family's separation threshold go to a new value log file (numbered by
/// `alloc`), fsynced before the table, or, with `adopt`, stay where they are
/// in sealed WAL segments that become value log files. Of each key only the
/// newest version per snapshot stripe is kept, as compaction does (`snaps`:
/// the live snapshots, ascending): versions no reader can see do not reach the
/// disk, so a row updated many times costs reads one version, not all of
/// them. Tombstones stay (older files may hold the key).
#[allow(clippy::too_many_arguments)] // each is a distinct input of one flush
pub(crate) fn build_table(
    dir: &Path,
    no: u64,
    opts: &CfOptions,
    mem: &Memtable,
    cache: &Arc<BlockCache>,
    snaps: &[u64],
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    alloc: &dyn Fn() -> u64,
    adopt: Option<&WalAdoption>,
    keys: &crate::crypto::Keyring,
) -> Result<(FileMeta, Arc<Table>, Vec<FlushVlog>)> {
    let path = sst::table_path(dir, no);
    let mut vo = crate::vlog::file::VlogOut::new(dir, alloc, opts.value_separation_threshold)
        .encrypted_with(keys, opts.encryption_key);
    // Adopted segments: segment -> (value log file, bytes referenced).
    let mut adopted: BTreeMap<u64, (Arc<crate::vlog::file::VlogFile>, u64)> = BTreeMap::new();
    let drop_adopted = |adopted: &BTreeMap<u64, (Arc<crate::vlog::file::VlogFile>, u64)>| {
        for (f, _) in adopted.values() {
            f.mark_obsolete();
        }
    };
    if let Some(a) = adopt.filter(|_| vo.threshold.is_some() && mem.has_wal_locs()) {
        for seg in segments_to_adopt(dir, mem, &vo, a) {
            match crate::vlog::file::adopt_wal_segment(dir, seg, alloc(), dio, keys) {
                Ok(f) => {
                    adopted.insert(seg, (Arc::new(f), 0));
                }
                // Not adopted: its values are copied as without adoption.
                Err(_) => continue,
            }
        }
        if !adopted.is_empty() {
            if let Err(e) = crate::fsutil::sync_dir(dir) {
                drop_adopted(&adopted);
                return Err(e);
            }
        }
    }
    let mut b = match crate::crypto::FileCipher::for_new_file_if(keys, opts.encryption_key, &path)
        .and_then(|cipher| {
            TableBuilder::create(
                path.clone(),
                opts.block_size,
                opts.compression_at(0),
                opts.bloom_bits_per_key,
                cipher,
            )
        }) {
        Ok(b) => b,
        Err(e) => {
            drop_adopted(&adopted);
            return Err(e);
        }
    };
    let mut ptr_buf = Vec::new();
    // Versions come newest first within a key.
    let mut last: Option<(Vec<u8>, usize)> = None;
    let r = mem.for_each(|e| {
        let (user, seq, value) = (e.user(), e.seq(), e.value());
        let stripe = snaps.partition_point(|&x| x < seq);
        if let Some((last_user, st)) = &mut last {
            if last_user.as_slice() == user {
                if *st == stripe {
                    return Ok(());
                }
                *st = stripe;
            } else {
                last_user.clear();
                last_user.extend_from_slice(user);
                *st = stripe;
            }
        } else {
            last = Some((user.to_vec(), stripe));
        }
        if e.kind() == Kind::Put && vo.separates(value) {
            let in_wal = e
                .wal_loc()
                .zip(e.value_crc())
                .and_then(|(l, crc)| adopted.get_mut(&l.segment).map(|a| (l, crc, a)));
            if let Some((l, crc, (f, used))) = in_wal {
                ptr_buf.clear();
                crate::value_ptr::Ptr {
                    file: f.no,
                    offset: l.offset,
                    len: value.len() as u64,
                    crc,
                }
                .encode(&mut ptr_buf);
                *used += value.len() as u64;
                return b.add(user, seq, Kind::ValuePtr, &ptr_buf);
            }
            // The value's crc from its write, if kept (checksum once).
            let p = vo.put_crc(user, value, e.value_crc())?;
            b.add(user, seq, Kind::ValuePtr, p)
        } else {
            b.add(user, seq, e.kind(), value)
        }
    });
    if let Err(e) = r {
        drop(b);
        vo.abort();
        drop_adopted(&adopted);
        let _ = crate::io::remove_file(&path);
        return Err(e);
    }
    let written = match finish_vlog(vo, dir, dio, keys) {
        Ok(v) => v,
        Err(e) => {
            drop(b);
            drop_adopted(&adopted);
            let _ = crate::io::remove_file(&path);
            return Err(e);
        }
    };
    let mut vlogs: Vec<FlushVlog> = written
        .into_iter()
        .map(|(file, size)| FlushVlog {
            file,
            size,
            garbage: 0,
        })
        .collect();
    for (f, used) in adopted.into_values() {
        if used == 0 {
            // Every value it was adopted for was a version the flush dropped.
            f.mark_obsolete();
            continue;
        }
        let size = f.size();
        vlogs.push(FlushVlog {
            file: f,
            size,
            garbage: size - used.min(size),
        });
    }
    match finish_table(b, no, cache, dio, keys) {
        Ok((fm, t)) => Ok((fm, t, vlogs)),
        Err(e) => {
            for v in &vlogs {
                v.file.mark_obsolete();
            }
            Err(e)
        }
    }
}

impl DbInner {
    /// Flushes the immutable memtables of all column families (oldest
    /// first) that are there when it gets the flush lock.
    pub(crate) fn flush_pending(&self) -> Result<()> {
        let g = self.flush_lock.lock();
        let r = self.flush_pass();
        // Straight to a waiter (`Db::flush`, a spilled commit), not to this
        // thread coming back for its next pass.
        MutexGuard::unlock_fair(g);
        r
    }

    /// The memtables immutable now, and no more: under a steady write load a
    /// new one can come for every one flushed, and a pass going on until none
    /// is left might never end, holding the flush lock all along. One made
    /// meanwhile has requested a flush of its own (`rotate`).
    fn flush_pass(&self) -> Result<()> {
        let cfs: Vec<(Arc<CfInner>, usize)> = self
            .cfs
            .read()
            .values()
            .map(|cf| (cf.clone(), cf.current().imms.len()))
            .collect();
        #[cfg(test)]
        let mut flushed = 0;
        for (cf, n) in cfs {
            for _ in 0..n {
                if !self.flush_one(&cf)? {
                    break;
                }
                #[cfg(test)]
                {
                    flushed += 1;
                    tests::after_flush(self, flushed);
                }
            }
        }
        self.purge_wal();
        Ok(())
    }

    /// The value log GC ratio (`Db::set_vlog_gc_ratio`).
    pub(super) fn vlog_gc_ratio(&self) -> f64 {
        self.vlog_gc_permille.load(Ordering::Relaxed) as f64 / 1000.0
    }

    pub(super) fn flush_one(&self, cf: &Arc<CfInner>) -> Result<bool> {
        let sv = cf.current();
        let Some(imm) = sv.imms.first().cloned() else {
            return Ok(false);
        };
        if cf.dropped.load(Ordering::Acquire) {
            return Ok(false);
        }
        // The groups that wrote it may still be in their fsync: the table
        // and the manifest name only sequences already visible.
        self.commit
            .wait_visible(imm.max_seq(), &|| self.is_poisoned())?;
        let no = self.next_file.fetch_add(1, Ordering::SeqCst);
        let alloc = || self.next_file.fetch_add(1, Ordering::SeqCst);
        let built = if imm.is_empty() {
            None
        } else {
            // Taken after the memtable stopped taking writes: a snapshot made
            // later sees all of it, so it splits no stripe.
            let snaps = self.live_snapshots();
            // The memtable's data is in segments sealed when it was rotated
            // (listed until purged, which waits for this flush).
            let adopt = WalAdoption {
                sealed: self
                    .commit
                    .closed_segments()
                    .iter()
                    .map(|s| s.number)
                    .collect(),
                max_garbage_ratio: self.vlog_gc_ratio(),
            };
            Some(build_table(
                &self.dir,
                no,
                &cf.opts,
                &imm,
                &self.cache,
                &snaps,
                self.dio.as_ref(),
                &alloc,
                // An encrypted family's values must not stay in a WAL
                // segment written in the clear.
                (cf.opts.encryption_key.is_none() || self.opts.log_encryption_key.is_some())
                    .then_some(&adopt),
                &self.opts.keys,
            )?)
        };
        {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            let discard = |built: &Option<(FileMeta, Arc<Table>, Vec<FlushVlog>)>| {
                // A failed manifest fsync (poisoned) may have left the edit naming these fi
                // es on disk: they stay; the next open removes what the manifest does not name.
                if self.is_poisoned() {
                    return;
                }
                if let Some((fm, _, vlogs)) = built {
                    let _ = crate::io::remove_file(sst::table_path(&self.dir, fm.file_no));
                    for v in vlogs {
                        v.file.mark_obsolete();
                    }
                }
            };
            if cf.dropped.load(Ordering::Acquire) {
                discard(&built);
                return Ok(false);
            }
            let mut ops = Vec::new();
            if let Some((fm, _, vlogs)) = &built {
                ops.extend(vlogs.iter().map(|v| v.edit(cf.id)));
                ops.push(EditOp::AddFile {
                    cf: cf.id,
                    level: 0,
                    meta: fm.clone(),
                });
            }
            ops.push(EditOp::FlushedSeq(cf.id, imm.max_seq()));
            ops.push(EditOp::LastSeq(self.commit.visible_seq()));
            ops.push(EditOp::NextFile(self.next_file.load(Ordering::SeqCst)));
            if let Err(e) = self.apply_manifest(w, st, &ops) {
                discard(&built);
                return Err(e);
            }
            let mut g = cf.sv.write();
            let mut levels = (*g.levels).clone();
            if let Some((fm, t, vlogs)) = built {
                for v in vlogs {
                    levels.vlogs.insert(v.file.no, v.file);
                }
                levels.levels[0].push(Arc::new(FileHandle { meta: fm, table: t }));
            }
            levels.normalize();
            let imms: Vec<Arc<Memtable>> = g
                .imms
                .iter()
                .filter(|m| !Arc::ptr_eq(m, &imm))
                .cloned()
                .collect();
            *g = Arc::new(SuperVersion {
                mem: g.mem.clone(),
                imms,
                levels: Arc::new(levels),
            });
        }
        crate::metrics::MEMTABLE_FLUSHES.inc();
        // Writes are coming in: compaction keeps up with them unpaced.
        self.pacer.urge();
        self.commit.notify_stall();
        self.bg.notify();
        Ok(true)
    }

    /// Deletes closed WAL segments whose every record is in table files and
    /// that hold no unresolved prepare record.
    pub(crate) fn purge_wal(&self) {
        let w = self.commit.lock_write();
        self.purge_wal_locked(&w);
    }

    /// `purge_wal` with the write lock held (so no commit interleaves between
    /// reading the memtables, the prepared pins and the segment list).
    pub(crate) fn purge_wal_locked(&self, _w: &crate::db::commit::WriteState) {
        let pinned: HashSet<u64> = self
            .prepared
            .lock()
            .by_xid
            .values()
            .map(|e| e.segment)
            .collect();
        let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
        let mut min_unflushed = u64::MAX;
        for cf in &cfs {
            let sv = cf.current();
            for m in sv.imms.iter().chain(std::iter::once(&sv.mem)) {
                if !m.is_empty() {
                    min_unflushed = min_unflushed.min(m.min_seq());
                }
            }
        }
        let mut segs = self.commit.closed_segments();
        let mut keep = Vec::new();
        for s in segs.drain(..) {
            if s.max_seq < min_unflushed && !pinned.contains(&s.number) {
                let _ = crate::io::remove_file(wal::segment_path(&self.dir, s.number));
            } else {
                keep.push(s);
            }
        }
        *segs = keep;
    }

    pub(super) fn flush_all(&self) -> Result<()> {
        self.check_writable()?;
        {
            let mut w = self.commit.lock_write();
            let cfs: Vec<Arc<CfInner>> = self.cfs.read().values().cloned().collect();
            for cf in cfs {
                self.rotate(&mut w, &cf)?;
            }
        }
        self.flush_pending()
    }

    pub(crate) fn flush_cf(&self, cf: &Arc<CfInner>) -> Result<()> {
        {
            let mut w = self.commit.lock_write();
            self.rotate(&mut w, cf)?;
        }
        self.flush_pending()
    }
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::DbInner;
    use crate::{CfOptions, Db, DbOptions, Isolation};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Runs on the flushing thread, flush lock held, with how many
    /// memtables this `flush_pending` call has flushed.
    pub(in crate::db) type FlushHook = Arc<dyn Fn(&DbInner, usize) + Send + Sync>;

    pub(super) fn after_flush(db: &DbInner, flushed: usize) {
        let hook = db.flush_hook.lock().clone();
        if let Some(f) = hook {
            f(db, flushed);
        }
    }

    /// Under a steady write load a new immutable memtable can appear for
    /// every one flushed. A flush pass that only ends when none is left
    /// then never ends, and holds the flush lock all along: `Db::flush`
    /// and spilled commits wait on it for ever.
    #[test]
    fn a_flush_pass_ends_while_memtables_keep_coming() {
        let d = tempfile::tempdir().unwrap();
        let db = Db::open(d.path(), DbOptions::default()).unwrap();
        let cf = db.create_cf("t", CfOptions::default()).unwrap();
        // The hook makes a new immutable memtable after each flush, this
        // many times in all (so that the unbounded pass ends too).
        const MORE: usize = 50;
        let made = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let weak = Arc::downgrade(db.inner());
        let (m, mo, c) = (made.clone(), most.clone(), cf.clone());
        let hook: FlushHook = Arc::new(move |_, flushed| {
            mo.fetch_max(flushed, Ordering::SeqCst);
            let n = m.fetch_add(1, Ordering::SeqCst);
            if n >= MORE {
                return;
            }
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let mut t = crate::Txn::new(inner.clone(), Isolation::RepeatableRead);
            t.put(&c, format!("k{n:03}").as_bytes(), b"v").unwrap();
            t.commit().unwrap();
            let mut w = inner.commit.lock_write();
            inner.rotate(&mut w, &c.inner).unwrap();
        });
        *db.inner().flush_hook.lock() = Some(hook);
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"first", b"v").unwrap();
        t.commit().unwrap();
        // Returns once the memtable written before it is flushed; the
        // background flush takes the ones made meanwhile, a pass at a time.
        db.flush().unwrap();
        *db.inner().flush_hook.lock() = None;
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= 2,
            "one flush pass flushed {most} memtables, most made while it ran"
        );
        db.close().unwrap();
    }
}
