//! Commit of a spilled write set: conflict check, memtables emptied,
//! tables written, one manifest edit installs them.

use super::database::{CheckSeq, DbInner};
use crate::compaction::output::{create_table, finish_table, finish_vlog, VlogOutFile};
use crate::error::{Error, Result};
use crate::key::Kind;
use crate::table::sst::{self, Table, TableBuilder};
use crate::version::levels::{CfInner, FileHandle, SuperVersion};
use crate::version::manifest::{EditOp, FileMeta};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The files a spilled commit has written so far: (cf, meta, table) and
/// (cf, value log file).
#[derive(Default)]
pub(super) struct SpilledTables {
    pub(super) tables: Vec<(u64, FileMeta, Arc<Table>)>,
    pub(super) vlogs: Vec<(u64, VlogOutFile)>,
}

/// Threads checking or writing a spilled commit's parts at most.
const MAX_WRITERS: usize = 2;

/// Threads for `parts` parts: one per part, up to the cores and [`MAX_WRITERS`].
fn writers(parts: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_WRITERS)
        .min(parts)
}

impl SpilledTables {
    /// Deletes them (the commit failed before its manifest edit).
    fn remove(&self, dir: &Path) {
        for (_, fm, _) in &self.tables {
            let _ = crate::io::remove_file(sst::table_path(dir, fm.file_no));
        }
        for (_, (vf, _)) in &self.vlogs {
            vf.mark_obsolete();
        }
    }
}

impl DbInner {
    /// Commits a spilled write set (`parts`: per column family, a merge of
    /// the write set yielding the newest own version of each key, tombstones
    /// included; `check(cf, key)` is the conflict-check sequence of a key).
    ///
    /// Under the flush lock and the commit write lock (so no other commit,
    /// flush or WAL purge interleaves): conflict check of every key, rotate
    /// and flush the touched column families' memtables (so no memtable
    /// holds an older version of a key that will live in an L0 table, and
    /// `FlushedSeq` can move to the commit sequence), write the stream as L0
    /// tables carrying the new sequence, and install them with one manifest
    /// edit (`AddFile`* + `FlushedSeq` + `LastSeq`): the atomic commit point.
    /// A crash before it leaves orphan tables (deleted at open); after it the
    /// whole transaction is in tables. No WAL record is written. Commits
    /// stall while the tables are written.
    pub(crate) fn commit_spilled(
        &self,
        mut parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)>,
        check: Option<&CheckSeq<'_>>,
        extra: Vec<EditOp>,
    ) -> Result<u64> {
        self.check_writable()?;
        // Deferred puts queued before must reach the WAL first.
        self.drain_queue();
        let _fl = self.flush_lock.lock();
        let mut w = self.commit.lock_settled();
        self.check_writable()?;
        // None: commit of a prepared write set (checked at prepare).
        if let Some(check) = check {
            self.check_spilled_conflicts(&mut parts, check)?;
        }
        for (cf, _) in &parts {
            self.empty_memtables(&mut w, cf)?;
        }
        let seq = w.last_seq + 1;
        let mut out = SpilledTables::default();
        if let Err(e) = self.write_spilled_tables(&mut parts, seq, &mut out) {
            out.remove(&self.dir);
            return Err(e);
        }
        if let Err(e) = self.install_spilled(&parts, &out, seq, extra) {
            // Poisoned: the edit may be on disk (see `flush_one`'s discard).
            if !self.is_poisoned() {
                out.remove(&self.dir);
            }
            return Err(e);
        }
        self.commit.publish_settled(&mut w, seq);
        drop(w);
        drop(_fl);
        self.bg.notify();
        self.commit.notify_stall();
        self.purge_wal();
        Ok(seq)
    }

    /// Conflict check of every key of a spilled write set (first committer
    /// wins; keys of prepared transactions conflict).
    pub(super) fn check_spilled_conflicts(
        &self,
        parts: &mut [(Arc<CfInner>, crate::iter::MergeIter)],
        check: &CheckSeq<'_>,
    ) -> Result<()> {
        let prep = self.prepared.lock();
        let prep = &*prep;
        let check_part = |cf: &CfInner, it: &mut crate::iter::MergeIter| -> Result<()> {
            if cf.dropped.load(Ordering::Acquire) {
                return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
            }
            it.seek_to_first();
            while it.valid() {
                let k = it.key();
                if (!prep.keys.is_empty() && prep.keys.contains(&(cf.id, k.to_vec())))
                    || self.newer_than(cf, k, check(cf.id, k))?
                {
                    crate::metrics::WRITE_CONFLICTS.inc();
                    return Err(Error::Conflict);
                }
                it.next();
            }
            it.status()
        };
        let workers = writers(parts.len());
        if workers <= 1 {
            for (cf, it) in parts.iter_mut() {
                check_part(cf, it)?;
            }
            return Ok(());
        }
        // Parts checked side by side, as they are written (`write_spilled_tables`).
        let queue = parking_lot::Mutex::new(parts.iter_mut());
        let failed = parking_lot::Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    if failed.lock().is_some() {
                        return;
                    }
                    let Some((cf, it)) = queue.lock().next() else {
                        return;
                    };
                    if let Err(e) = check_part(cf, it) {
                        failed.lock().get_or_insert(e);
                        return;
                    }
                });
            }
        });
        match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Rotates and flushes the memtables of `cf` (write lock held), so none
    /// holds a version older than the L0 tables a spilled commit adds.
    pub(super) fn empty_memtables(
        &self,
        w: &mut crate::db::commit::WriteState,
        cf: &Arc<CfInner>,
    ) -> Result<()> {
        self.rotate(w, cf)?;
        while self.flush_one(cf)? {}
        if !cf.current().imms.is_empty() {
            return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
        }
        Ok(())
    }

    /// Writes each column family's stream as L0 tables (and value log
    /// files for large values) carrying sequence `seq`, into `out`.
    pub(super) fn write_spilled_tables(
        &self,
        parts: &mut [(Arc<CfInner>, crate::iter::MergeIter)],
        seq: u64,
        out: &mut SpilledTables,
    ) -> Result<()> {
        let workers = writers(parts.len());
        if workers <= 1 {
            for (cf, it) in parts.iter_mut() {
                self.write_spilled_part(cf, it, seq, out)?;
            }
            return Ok(());
        }
        // Parts (column families, or key ranges of one: see `Txn::commit_spilled`)
        // written side by side; each worker takes the next part left.
        let queue = parking_lot::Mutex::new(parts.iter_mut());
        let done = parking_lot::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| loop {
                    let Some((cf, it)) = queue.lock().next() else {
                        return;
                    };
                    let mut mine = SpilledTables::default();
                    let r = self.write_spilled_part(cf, it, seq, &mut mine);
                    let failed = r.is_err();
                    done.lock().push((r, mine));
                    if failed {
                        return;
                    }
                });
            }
        });
        let mut first_err = None;
        for (r, mine) in done.into_inner() {
            // Everything written goes to `out`, so a failure removes it all.
            out.tables.extend(mine.tables);
            out.vlogs.extend(mine.vlogs);
            if let (Err(e), None) = (r, &first_err) {
                first_err = Some(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One part's stream as tables and a value log, into `out`; on an error
    /// its unfinished files are removed (finished ones are in `out`).
    fn write_spilled_part(
        &self,
        cf: &CfInner,
        it: &mut crate::iter::MergeIter,
        seq: u64,
        out: &mut SpilledTables,
    ) -> Result<()> {
        let alloc = || self.next_file.fetch_add(1, Ordering::SeqCst);
        // Large values go to a value log, as in a flush.
        let mut vo =
            crate::vlog::file::VlogOut::new(&self.dir, &alloc, cf.opts.value_separation_threshold)
                .encrypted_with(&self.opts.keys, cf.opts.encryption_key);
        let mut b: Option<(u64, TableBuilder)> = None;
        if let Err(e) = self.write_spilled_cf(cf, it, seq, &mut vo, &mut b, out) {
            vo.abort();
            if let Some((_, tb)) = b.take() {
                let p = tb.path().to_path_buf();
                drop(tb);
                let _ = crate::io::remove_file(p);
            }
            return Err(e);
        }
        // The value log is durable before the tables pointing into it.
        if let Some(v) = finish_vlog(vo, &self.dir, self.dio.as_ref(), &self.opts.keys)? {
            out.vlogs.push((cf.id, v));
        }
        if let Some((no, tb)) = b.take() {
            let (fm, t) = finish_table(tb, no, &self.cache, self.dio.as_ref(), &self.opts.keys)?;
            out.tables.push((cf.id, fm, t));
        }
        Ok(())
    }

    /// One column family's stream: tables of about a write buffer each (the
    /// last one left open in `b`), large values into `vo`.
    pub(super) fn write_spilled_cf(
        &self,
        cf: &CfInner,
        it: &mut crate::iter::MergeIter,
        seq: u64,
        vo: &mut crate::vlog::file::VlogOut<'_>,
        b: &mut Option<(u64, TableBuilder)>,
        out: &mut SpilledTables,
    ) -> Result<()> {
        let target = (self.opts.write_buffer_size as u64).clamp(1 << 20, 64 << 20);
        it.seek_to_first();
        while it.valid() {
            if b.is_none() {
                let no = self.next_file.fetch_add(1, Ordering::SeqCst);
                let tb = create_table(&self.dir, no, &cf.opts, 0, &self.opts.keys)?;
                *b = Some((no, tb));
            }
            if let Some((_, tb)) = b.as_mut() {
                if it.kind() == Kind::Put && vo.separates(it.value()) {
                    let p = vo.put(it.key(), it.value())?;
                    tb.add(it.key(), seq, Kind::ValuePtr, p)?;
                } else {
                    tb.add(it.key(), seq, it.kind(), it.value())?;
                }
                if tb.estimated_size() >= target {
                    if let Some((no, tb)) = b.take() {
                        let (fm, t) =
                            finish_table(tb, no, &self.cache, self.dio.as_ref(), &self.opts.keys)?;
                        out.tables.push((cf.id, fm, t));
                    }
                }
            }
            it.next();
        }
        it.status()
    }

    /// The commit point of a spilled write set: one manifest edit adding its
    /// tables and value logs (`AddFile`* + `FlushedSeq` + `LastSeq`), then
    /// the new files installed into each column family's super-version.
    pub(super) fn install_spilled(
        &self,
        parts: &[(Arc<CfInner>, crate::iter::MergeIter)],
        out: &SpilledTables,
        seq: u64,
        extra: Vec<EditOp>,
    ) -> Result<()> {
        let mut m = self.manifest.lock();
        let (mw, st) = &mut *m;
        if let Some((cf, _)) = parts
            .iter()
            .find(|(c, _)| c.dropped.load(Ordering::Acquire))
        {
            return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
        }
        let mut ops = Vec::new();
        for (cf, (vf, size)) in &out.vlogs {
            ops.push(EditOp::VlogAdd {
                cf: *cf,
                file_no: vf.no,
                size: *size,
            });
        }
        for (cf, fm, _) in &out.tables {
            ops.push(EditOp::AddFile {
                cf: *cf,
                level: 0,
                meta: fm.clone(),
            });
        }
        // A column family may come in several parts (key ranges).
        let mut cfs: Vec<&Arc<CfInner>> = Vec::new();
        for (cf, _) in parts {
            if !cfs.iter().any(|c| c.id == cf.id) {
                cfs.push(cf);
            }
        }
        for cf in &cfs {
            ops.push(EditOp::FlushedSeq(cf.id, seq));
        }
        ops.push(EditOp::LastSeq(seq));
        ops.push(EditOp::NextFile(self.next_file.load(Ordering::SeqCst)));
        ops.extend(extra);
        self.apply_manifest(mw, st, &ops)?;
        for cf in cfs {
            let mut g = cf.sv.write();
            let mut levels = (*g.levels).clone();
            for (id, fm, t) in &out.tables {
                if *id == cf.id {
                    levels.levels[0].push(Arc::new(FileHandle {
                        meta: fm.clone(),
                        table: t.clone(),
                    }));
                }
            }
            for (id, (vf, _)) in &out.vlogs {
                if *id == cf.id {
                    levels.vlogs.insert(vf.no, vf.clone());
                }
            }
            levels.normalize();
            *g = Arc::new(SuperVersion {
                mem: g.mem.clone(),
                imms: g.imms.clone(),
                levels: Arc::new(levels),
            });
        }
        Ok(())
    }
}
