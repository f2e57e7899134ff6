//! Leveled compaction.
//!
//! * L0 (overlapping files, newest first) is compacted into L1 when it holds
//!   `L0_TRIGGER` files: all L0 files plus the overlapping L1 files are merged.
//! * Li (i >= 1) is compacted when its size exceeds its target
//!   (`base * 10^(i-1)`, `base = max(4 * write_buffer_size, 1 MiB)`): one file
//!   (round-robin by key) plus the overlapping files of L(i+1). A single file
//!   with no overlap below is moved by a manifest edit only.
//! * Writers are slowed (1 ms per commit group) at `L0_SLOWDOWN` L0 files and
//!   stalled at `L0_STOP`.
//! * Background jobs are paced (`pacer.rs`) while reads wait on the disk and
//!   no write waits for compaction; never from `pacer::L0_PACE_MAX` L0 files.
//!   Inputs are read by a `sst::ChunkReader` of their own (1 MiB reads, no
//!   kernel readahead) and do not fill the block cache.
//! * Garbage collection is snapshot aware: versions of a key are grouped in
//!   "stripes" by the live snapshots (plus "latest"); only the newest version
//!   of each stripe is kept. A tombstone is dropped when it is the oldest kept
//!   version, every live snapshot already sees it, and no deeper level holds
//!   the key range (bottommost). There, such an oldest version that is not a
//!   tombstone is written with sequence number 0 (L1+ only).
//! * Outputs are cut at user-key boundaries so that a user key lives in one
//!   file per level.
//! * Value log (see `vlog.rs`): pointers are copied; a dropped pointer adds
//!   its record length to its value log file's garbage; a kept pointer into a
//!   file whose garbage ratio reached the GC ratio is *relocated* (value
//!   appended to the job's own new value log file, same key, sequence and
//!   kind). When no regular compaction is due, a GC job rewrites in place one
//!   table (L1+; at L0 the whole L0 goes to L1) that still points into such a
//!   file. All of it (tables, new value log, garbage, removal of files left
//!   without pointers) is one manifest edit.

use super::output::{create_table, finish_table, finish_vlog, VlogOutFile};
use super::pacer::Pacer;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::Kind;
use crate::options::DbOptions;
use crate::table::cache::BlockCache;
use crate::table::sst::{TableBuilder, TableIter};
use crate::version::levels::{CfInner, FileHandle, Levels, SuperVersion};
use crate::version::manifest::{EditOp, ManifestWriter, State, NUM_LEVELS};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) const L0_TRIGGER: usize = 4;
pub(crate) const L0_SLOWDOWN: usize = 12;
pub(crate) const L0_STOP: usize = 20;

/// Bytes a paced compaction merges between calls to the pacer.
const PACE_STEP: u64 = 64 << 10;

struct Job {
    level: usize,
    inputs: Vec<Arc<FileHandle>>,
    out_level: usize,
    trivial_move: bool,
    /// Garbage ratio (per mille) from which a kept pointer's value is
    /// relocated; `None` = the configured GC ratio.
    gc_permille: Option<u64>,
}

/// Value log side of a merge: garbage per file, the relocation output.
#[derive(Default)]
struct VlogDelta {
    garbage: BTreeMap<u64, u64>,
    new_file: Option<VlogOutFile>,
}

/// k-way merge of table iterators in internal-key order.
struct Merger {
    its: Vec<TableIter>,
}

impl Merger {
    fn current(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, it) in self.its.iter().enumerate() {
            if !it.valid() {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(b) => {
                    let o = crate::key::compare_parts(
                        it.user_key(),
                        it.seq(),
                        self.its[b].user_key(),
                        self.its[b].seq(),
                    );
                    if o == std::cmp::Ordering::Less {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        best
    }
}

/// What a compaction calls back into the database for (the database
/// implements it; compaction does not see the database itself).
pub(crate) trait Host {
    /// Appends `ops` to the manifest (`w`, state `st`, both under
    /// `Ctx::manifest`'s lock); on error the edit did not happen.
    fn apply_manifest(&self, w: &mut ManifestWriter, st: &mut State, ops: &[EditOp]) -> Result<()>;
    /// The database refuses writes after a failure it cannot undo.
    fn is_poisoned(&self) -> bool;
    /// Sequence numbers of the live snapshots (ascending).
    fn live_snapshots(&self) -> Vec<u64>;
    /// The oldest sequence number any reader may still read at.
    fn oldest_snapshot(&self) -> u64;
    /// Wakes writers stalled on the L0 file count.
    fn notify_stall(&self);
    /// The database is closing: background jobs stop.
    fn is_shutdown(&self) -> bool;
}

/// What a compaction job needs of the database: the parts it reads and
/// writes, and the `Host` for the rest. Built for each call.
pub(crate) struct Ctx<'a> {
    pub(crate) opts: &'a DbOptions,
    pub(crate) dir: &'a Path,
    pub(crate) cache: &'a Arc<BlockCache>,
    pub(crate) dio: &'a Option<Arc<crate::fsutil::DirectIo>>,
    /// The file-number allocator (tables and value log files).
    pub(crate) next_file: &'a AtomicU64,
    pub(crate) manifest: &'a Mutex<(ManifestWriter, State)>,
    /// Garbage ratio (per mille) at which a value log file is collected.
    pub(crate) vlog_gc_permille: &'a AtomicU64,
    pub(crate) pacer: &'a Pacer,
    pub(crate) host: &'a dyn Host,
}

/// Target size of level `level` (>= 1): `base * 10^(level-1)`.
pub(crate) fn level_target(opts: &DbOptions, level: usize) -> u64 {
    let base = (opts.write_buffer_size as u64 * 4).max(1 << 20);
    let mut t = base;
    for _ in 1..level {
        t = t.saturating_mul(10);
    }
    t
}

impl Ctx<'_> {
    fn target_file_size(&self) -> u64 {
        (self.opts.write_buffer_size as u64).clamp(1 << 20, 64 << 20)
    }

    fn pick(&self, cf: &CfInner, lv: &Levels) -> Option<Job> {
        // Quarantined tables (`Table::broken`) are never inputs: a job that
        // would need one (its key range overlaps them one level down) is
        // not run. At L0 the intact files go down without them; a
        // quarantined L0 file stays above and keeps answering its range
        // with the error, so nothing it shadows becomes visible.
        let mut best: Option<(f64, usize)> = None;
        let l0 = lv
            .levels
            .first()
            .map_or(0, |l| l.iter().filter(|f| !is_broken(f)).count());
        if l0 >= L0_TRIGGER {
            best = Some((l0 as f64 / L0_TRIGGER as f64, 0));
        }
        for lvl in 1..NUM_LEVELS - 1 {
            let bytes: u64 = lv.levels[lvl].iter().map(|f| f.meta.size).sum();
            let score = bytes as f64 / level_target(self.opts, lvl) as f64;
            if score >= 1.0 && best.map_or(true, |b| score > b.0) {
                best = Some((score, lvl));
            }
        }
        let (_, level) = best?;
        let mut inputs: Vec<Arc<FileHandle>>;
        if level == 0 {
            inputs = lv.levels[0]
                .iter()
                .filter(|f| !is_broken(f))
                .cloned()
                .collect();
        } else {
            let files: Vec<&Arc<FileHandle>> =
                lv.levels[level].iter().filter(|f| !is_broken(f)).collect();
            let ptr = cf
                .compact_ptr
                .lock()
                .get(level)
                .cloned()
                .unwrap_or_default();
            let f = (*files
                .iter()
                .find(|f| f.meta.smallest > ptr)
                .or_else(|| files.first())?)
            .clone();
            if let Some(p) = cf.compact_ptr.lock().get_mut(level) {
                *p = f.meta.largest.clone();
            }
            inputs = vec![f];
        }
        let (lo, hi) = key_range(&inputs)?;
        let n_upper = inputs.len();
        for f in &lv.levels[level + 1] {
            if f.meta.largest.as_slice() >= lo.as_slice()
                && f.meta.smallest.as_slice() <= hi.as_slice()
            {
                if is_broken(f) {
                    return None;
                }
                inputs.push(f.clone());
            }
        }
        let trivial_move = level > 0 && n_upper == 1 && inputs.len() == 1;
        Some(Job {
            level,
            inputs,
            out_level: level + 1,
            trivial_move,
            gc_permille: None,
        })
    }

    /// Runs one compaction for `cf` if one is due. Returns whether it did work.
    pub(crate) fn maybe_compact(&self, cf: &Arc<CfInner>) -> Result<bool> {
        let _g = match cf.compaction_lock.try_lock() {
            Some(g) => g,
            None => return Ok(false),
        };
        if cf.dropped.load(Ordering::Acquire) {
            return Ok(false);
        }
        let sv = cf.current();
        let job = match self.pick(cf, &sv.levels) {
            Some(j) => j,
            None => match self.pick_gc(cf, &sv.levels, None)? {
                Some(j) => j,
                None => return Ok(false),
            },
        };
        // A background job: paced while readers wait on the disk and no
        // write waits for it (pacer.rs).
        self.run_job(cf, &sv.levels, job, true)?;
        Ok(true)
    }

    /// Value log files of `cf` whose garbage ratio reached `permille`
    /// (`None` = the configured GC ratio) and that hold any garbage.
    fn gc_candidates(&self, cf: &CfInner, permille: Option<u64>) -> BTreeSet<u64> {
        let ratio = permille.unwrap_or_else(|| self.vlog_gc_permille.load(Ordering::Relaxed));
        // A file quarantined at open cannot be read: its values stay put.
        let lv = cf.current().levels.clone();
        let readable = |n: &u64| lv.vlogs.get(n).is_some_and(|f| f.broken().is_none());
        let m = self.manifest.lock();
        m.1.vlog_files
            .iter()
            .filter(|(n, v)| {
                v.cf == cf.id
                    && v.garbage > 0
                    && u128::from(v.garbage) * 1000 >= u128::from(v.size) * u128::from(ratio)
                    && readable(n)
            })
            .map(|(n, _)| *n)
            .collect()
    }

    /// A GC job: first, value log files no table of the version points into
    /// any more are removed (manifest edit); then one table pointing into a
    /// GC candidate is rewritten in place (L0: the usual L0 -> L1 job).
    fn pick_gc(
        &self,
        cf: &Arc<CfInner>,
        lv: &Levels,
        permille: Option<u64>,
    ) -> Result<Option<Job>> {
        if lv.vlogs.is_empty() {
            return Ok(None);
        }
        let referenced: BTreeSet<u64> = lv
            .all()
            .flat_map(|f| f.table.props.vlog_refs.iter().copied())
            .collect();
        // A quarantined table's pointers are unknown: keep every file.
        let any_broken = lv.all().any(|f| is_broken(f));
        let orphans: Vec<u64> = lv
            .vlogs
            .keys()
            .filter(|n| !any_broken && !referenced.contains(n))
            .copied()
            .collect();
        if !orphans.is_empty() {
            self.remove_vlogs(cf, &orphans)?;
        }
        let cands = self.gc_candidates(cf, permille);
        if cands.is_empty() {
            return Ok(None);
        }
        let points =
            |f: &Arc<FileHandle>| f.table.props.vlog_refs.iter().any(|n| cands.contains(n));
        if lv.levels[0].iter().any(points) {
            let mut inputs: Vec<Arc<FileHandle>> = lv.levels[0]
                .iter()
                .filter(|f| !is_broken(f))
                .cloned()
                .collect();
            if let Some((lo, hi)) = key_range(&inputs) {
                for f in &lv.levels[1] {
                    if f.meta.largest >= lo && f.meta.smallest <= hi {
                        if is_broken(f) {
                            return Ok(None);
                        }
                        inputs.push(f.clone());
                    }
                }
            }
            return Ok(Some(Job {
                level: 0,
                inputs,
                out_level: 1,
                trivial_move: false,
                gc_permille: permille,
            }));
        }
        for lvl in 1..NUM_LEVELS {
            if let Some(f) = lv.levels[lvl].iter().find(|f| points(f)) {
                return Ok(Some(Job {
                    level: lvl,
                    inputs: vec![f.clone()],
                    out_level: lvl,
                    trivial_move: false,
                    gc_permille: permille,
                }));
            }
        }
        Ok(None)
    }

    /// Removes value log files without pointers from the manifest and the
    /// current version (unlinked when the last older version drops them).
    fn remove_vlogs(&self, cf: &Arc<CfInner>, files: &[u64]) -> Result<()> {
        let mut m = self.manifest.lock();
        let (w, st) = &mut *m;
        if cf.dropped.load(Ordering::Acquire) {
            return Ok(());
        }
        let ops: Vec<EditOp> = files.iter().map(|n| EditOp::VlogRemove(*n)).collect();
        self.host.apply_manifest(w, st, &ops)?;
        let mut g = cf.sv.write();
        let mut levels = (*g.levels).clone();
        for n in files {
            if let Some(v) = levels.vlogs.remove(n) {
                v.mark_obsolete();
                self.cache.evict_file(*n);
            }
        }
        *g = Arc::new(SuperVersion {
            mem: g.mem.clone(),
            imms: g.imms.clone(),
            levels: Arc::new(levels),
        });
        Ok(())
    }

    /// Runs GC jobs for `cf` until no table points into a value log file
    /// above the GC ratio (`permille`, `None` = the configured one; `Some(0)`
    /// = any garbage) and removes files without pointers. Returns the number
    /// of jobs run.
    pub(crate) fn gc_value_log(&self, cf: &Arc<CfInner>, permille: Option<u64>) -> Result<usize> {
        let mut n = 0;
        loop {
            // A background job holding the lock runs unpaced from now on.
            self.pacer.urge();
            let _g = cf.compaction_lock.lock();
            if cf.dropped.load(Ordering::Acquire) {
                return Ok(n);
            }
            let sv = cf.current();
            let Some(job) = self.pick_gc(cf, &sv.levels, permille)? else {
                return Ok(n);
            };
            self.run_job(cf, &sv.levels, job, false)?;
            n += 1;
        }
    }

    /// Manual compaction of the user-key range `[start, end]` (`None` =
    /// unbounded): every file overlapping the range, closed under overlap
    /// (a file overlapping the inputs' key span on any level joins, until
    /// stable), is merged into one sorted run at the deepest level among the
    /// inputs (at least L1). Files outside the range are not touched.
    pub(crate) fn compact_range_files(
        &self,
        cf: &Arc<CfInner>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        gc_permille: Option<u64>,
    ) -> Result<()> {
        // A background job holding the lock runs unpaced from now on.
        self.pacer.urge();
        let _g = cf.compaction_lock.lock();
        let sv = cf.current();
        let overlaps = |f: &FileHandle, lo: Option<&[u8]>, hi: Option<&[u8]>| {
            lo.map_or(true, |l| f.meta.largest.as_slice() >= l)
                && hi.map_or(true, |h| f.meta.smallest.as_slice() <= h)
        };
        let mut picked: Vec<(usize, Arc<FileHandle>)> = Vec::new();
        let (mut lo, mut hi) = (start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec));
        loop {
            let before = picked.len();
            for (lvl, files) in sv.levels.levels.iter().enumerate() {
                for f in files {
                    if !picked.iter().any(|(_, p)| p.meta.file_no == f.meta.file_no)
                        && overlaps(f, lo.as_deref(), hi.as_deref())
                    {
                        picked.push((lvl, f.clone()));
                    }
                }
            }
            if picked.len() == before {
                break;
            }
            let files: Vec<Arc<FileHandle>> = picked.iter().map(|x| x.1.clone()).collect();
            if let Some((l, h)) = key_range(&files) {
                lo = Some(match lo {
                    Some(x) if x <= l => x,
                    _ => l,
                });
                hi = Some(match hi {
                    Some(x) if x >= h => x,
                    _ => h,
                });
            }
        }
        if picked.is_empty() {
            return Ok(());
        }
        // A quarantined table cannot be rewritten: say why (OPTIMIZE TABLE).
        if let Some((_, f)) = picked.iter().find(|(_, f)| is_broken(f)) {
            return Err(f.table.broken_error());
        }
        let deepest = picked.iter().map(|x| x.0).max().unwrap_or(1).max(1);
        let inputs: Vec<Arc<FileHandle>> = picked.into_iter().map(|x| x.1).collect();
        self.run_job(
            cf,
            &sv.levels,
            Job {
                level: 0,
                inputs,
                out_level: deepest,
                trivial_move: false,
                gc_permille,
            },
            false,
        )
    }

    /// Runs `job`; `paced`: a background job, held to the pacer's rate while
    /// nothing waits for it (manual compactions are never paced).
    fn run_job(&self, cf: &Arc<CfInner>, lv: &Levels, job: Job, paced: bool) -> Result<()> {
        let mut edit = Vec::new();
        let mut outputs: Vec<Arc<FileHandle>> = Vec::new();
        let mut vd = VlogDelta::default();
        let input_levels: Vec<(usize, u64)> = job
            .inputs
            .iter()
            .map(|f| {
                (
                    level_of(lv, f.meta.file_no).unwrap_or(job.level),
                    f.meta.file_no,
                )
            })
            .collect();
        if job.trivial_move {
            let f = &job.inputs[0];
            outputs.push(f.clone());
        } else {
            let (lo, hi) = key_range(&job.inputs).unwrap_or_default();
            let bottommost = lv.levels[job.out_level + 1..]
                .iter()
                .flatten()
                .all(|f| f.meta.largest < lo || f.meta.smallest > hi);
            let relocate = self.gc_candidates(cf, job.gc_permille);
            (outputs, vd) = self.merge_files(cf, lv, &job, bottommost, &relocate, paced)?;
        }
        if let Some((vf, size)) = &vd.new_file {
            edit.push(EditOp::VlogAdd {
                cf: cf.id,
                file_no: vf.no,
                size: *size,
            });
        }
        for (lvl, no) in &input_levels {
            edit.push(EditOp::RemoveFile {
                cf: cf.id,
                level: *lvl as u8,
                file_no: *no,
            });
        }
        for f in &outputs {
            edit.push(EditOp::AddFile {
                cf: cf.id,
                level: job.out_level as u8,
                meta: f.meta.clone(),
            });
        }
        edit.push(EditOp::NextFile(self.next_file.load(Ordering::SeqCst)));
        let discard = |outputs: &[Arc<FileHandle>], vd: &VlogDelta| {
            // Poisoned: a failed manifest fsync may have left the edit
            // naming the outputs on disk; the next open removes strays.
            if self.host.is_poisoned() {
                return;
            }
            if !job.trivial_move {
                for f in outputs {
                    let _ = crate::io::remove_file(&f.table.path);
                }
            }
            if let Some((vf, _)) = &vd.new_file {
                vf.mark_obsolete();
            }
        };
        let removed: Vec<u64>;
        {
            let mut m = self.manifest.lock();
            let (w, st) = &mut *m;
            if cf.dropped.load(Ordering::Acquire) {
                drop(m);
                discard(&outputs, &vd);
                return Ok(());
            }
            // Garbage; a file whose garbage reaches its size has no pointer left.
            let mut rm = Vec::new();
            for (n, bytes) in &vd.garbage {
                if let Some(v) = st.vlog_files.get(n) {
                    edit.push(EditOp::VlogGarbage(*n, *bytes));
                    if v.garbage.saturating_add(*bytes) >= v.size {
                        edit.push(EditOp::VlogRemove(*n));
                        rm.push(*n);
                    }
                }
            }
            removed = rm;
            if let Err(e) = self.host.apply_manifest(w, st, &edit) {
                drop(m);
                discard(&outputs, &vd);
                return Err(e);
            }
            let mut g = cf.sv.write();
            let mut levels = (*g.levels).clone();
            for l in levels.levels.iter_mut() {
                l.retain(|f| !input_levels.iter().any(|(_, no)| *no == f.meta.file_no));
            }
            levels.levels[job.out_level].extend(outputs.iter().cloned());
            if let Some((vf, _)) = &vd.new_file {
                levels.vlogs.insert(vf.no, vf.clone());
            }
            for n in &removed {
                if let Some(v) = levels.vlogs.remove(n) {
                    v.mark_obsolete();
                    self.cache.evict_file(*n);
                }
            }
            levels.normalize();
            *g = Arc::new(SuperVersion {
                mem: g.mem.clone(),
                imms: g.imms.clone(),
                levels: Arc::new(levels),
            });
        }
        if !job.trivial_move {
            for f in &job.inputs {
                let _ = crate::io::remove_file(&f.table.path);
                self.cache.evict_file(f.meta.file_no);
            }
        }
        crate::metrics::COMPACTIONS.inc();
        self.host.notify_stall();
        Ok(())
    }

    /// Merges the job's inputs into new tables at its output level (and a
    /// relocation value log file).
    // Long (~180 lines): one loop over the merged stream whose state (open
    // builder, stripe of the current key, garbage, pacing) every step shares.
    fn merge_files(
        &self,
        cf: &Arc<CfInner>,
        lv: &Levels,
        job: &Job,
        bottommost: bool,
        relocate: &BTreeSet<u64>,
        paced: bool,
    ) -> Result<(Vec<Arc<FileHandle>>, VlogDelta)> {
        let alloc = || self.next_file.fetch_add(1, Ordering::SeqCst);
        let mut vo = crate::vlog::file::VlogOut::new(self.dir, &alloc, None)
            .encrypted_with(&self.opts.keys, cf.opts.encryption_key);
        let mut garbage: BTreeMap<u64, u64> = BTreeMap::new();
        let mut snaps = self.host.live_snapshots();
        snaps.push(u64::MAX);
        let oldest = self.host.oldest_snapshot();
        let mut m = Merger {
            its: job
                .inputs
                .iter()
                .map(|f| TableIter::uncached(f.table.clone()))
                .collect(),
        };
        for it in m.its.iter_mut() {
            it.seek_to_first();
        }
        let target = self.target_file_size();
        let out_level = job.out_level;
        let mut outputs = Vec::new();
        let mut builder: Option<(u64, TableBuilder)> = None;
        let mut cur_user: Vec<u8> = Vec::new();
        let mut versions: Vec<(u64, Kind, Vec<u8>)> = Vec::new();
        let mut have_key = false;

        let mut emit = |user: &[u8],
                        versions: &mut Vec<(u64, Kind, Vec<u8>)>,
                        builder: &mut Option<(u64, TableBuilder)>,
                        outputs: &mut Vec<Arc<FileHandle>>|
         -> Result<()> {
            // stripes: keep newest version per snapshot stripe
            let mut kept: Vec<(u64, Kind, Vec<u8>)> = Vec::new();
            let mut last_stripe = usize::MAX;
            let mut dead = |k: Kind, v: &[u8]| {
                if k == Kind::ValuePtr {
                    if let Some(p) = crate::value_ptr::Ptr::decode(v) {
                        *garbage.entry(p.file).or_insert(0) += p.len;
                    }
                }
            };
            for (s, k, v) in versions.drain(..) {
                let stripe = snaps.partition_point(|&x| x < s);
                if stripe == last_stripe {
                    dead(k, &v);
                    continue;
                }
                last_stripe = stripe;
                kept.push((s, k, v));
            }
            if bottommost {
                while matches!(kept.last(), Some((s, Kind::Delete, _)) if *s <= oldest) {
                    kept.pop();
                }
                // The oldest kept version, seen by every live snapshot, with
                // no older version of the key below: its sequence number tells
                // nobody anything any more. Zero compresses (the 8-byte tag
                // becomes the same in every such entry); RocksDB does the
                // same. Not in L0, whose files are ordered by sequence.
                if out_level >= 1 {
                    if let Some(last) = kept.last_mut().filter(|v| v.0 <= oldest) {
                        last.0 = 0;
                    }
                }
            }
            // Relocate kept values out of value log files being collected.
            for (_, k, v) in kept.iter_mut() {
                if *k != Kind::ValuePtr {
                    continue;
                }
                let Some(p) = crate::value_ptr::Ptr::decode(v) else {
                    continue;
                };
                if !relocate.contains(&p.file) {
                    continue;
                }
                // Relocation reads each value once: not through the cache.
                let value = crate::vlog::file::resolve(&lv.vlogs, self.dir, None, v)?;
                let np = vo.put(user, &value)?.to_vec();
                dead(Kind::ValuePtr, v);
                *v = np;
            }
            if kept.is_empty() {
                return Ok(());
            }
            if let Some((_, b)) = builder.as_ref() {
                if b.estimated_size() >= target {
                    if let Some((no, b)) = builder.take() {
                        let (fm, t) =
                            finish_table(b, no, self.cache, self.dio.as_ref(), &self.opts.keys)?;
                        outputs.push(Arc::new(FileHandle { meta: fm, table: t }));
                    }
                }
            }
            if builder.is_none() {
                let no = self.next_file.fetch_add(1, Ordering::SeqCst);
                let b = create_table(self.dir, no, &cf.opts, out_level, &self.opts.keys)?;
                *builder = Some((no, b));
            }
            if let Some((_, b)) = builder.as_mut() {
                for (s, k, v) in kept {
                    b.add(user, s, k, &v)?;
                }
            }
            Ok(())
        };

        // Bytes merged since the last call to the pacer.
        let mut unpaced = 0u64;
        let probe = crate::compaction::pacer::Probe {
            l0_files: &|| cf.current().levels.levels[0].len(),
            disk_reads: &|| self.cache.table_disk_reads.load(Ordering::Relaxed),
            stop: &|| self.host.is_shutdown(),
        };
        let result = (|| -> Result<()> {
            loop {
                if self.host.is_shutdown() {
                    return Err(crate::Error::Closed);
                }
                let Some(i) = m.current() else { break };
                let it = &m.its[i];
                if paced {
                    // Entry size as stored (key, trailer, value, ~3 B of lengths).
                    unpaced += (it.user_key().len() + it.value().len() + 11) as u64;
                    if unpaced >= PACE_STEP {
                        self.pacer.pace(unpaced, &probe);
                        unpaced = 0;
                    }
                }
                if !have_key || it.user_key() != cur_user.as_slice() {
                    if have_key {
                        let u = std::mem::take(&mut cur_user);
                        emit(&u, &mut versions, &mut builder, &mut outputs)?;
                    }
                    cur_user = it.user_key().to_vec();
                    have_key = true;
                }
                versions.push((it.seq(), it.kind(), it.value().to_vec()));
                m.its[i].next();
            }
            for it in &m.its {
                it.status()?;
            }
            if have_key {
                let u = std::mem::take(&mut cur_user);
                emit(&u, &mut versions, &mut builder, &mut outputs)?;
            }
            if let Some((no, b)) = builder.take() {
                if b.num_entries() > 0 {
                    let (fm, t) =
                        finish_table(b, no, self.cache, self.dio.as_ref(), &self.opts.keys)?;
                    outputs.push(Arc::new(FileHandle { meta: fm, table: t }));
                } else {
                    let p = b.path().to_path_buf();
                    drop(b);
                    let _ = crate::io::remove_file(p);
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            if let Some((_, b)) = builder.take() {
                let p = b.path().to_path_buf();
                drop(b);
                let _ = crate::io::remove_file(p);
            }
            for f in &outputs {
                let _ = crate::io::remove_file(&f.table.path);
            }
            vo.abort();
            return Err(e);
        }
        let new_file = match finish_vlog(vo, self.dir, self.dio.as_ref(), &self.opts.keys) {
            Ok(v) => v,
            Err(e) => {
                for f in &outputs {
                    let _ = crate::io::remove_file(&f.table.path);
                }
                return Err(e);
            }
        };
        Ok((outputs, VlogDelta { garbage, new_file }))
    }
}

fn is_broken(f: &FileHandle) -> bool {
    f.table.broken.is_some()
}

fn level_of(lv: &Levels, file_no: u64) -> Option<usize> {
    lv.levels
        .iter()
        .position(|l| l.iter().any(|f| f.meta.file_no == file_no))
}

fn key_range(files: &[Arc<FileHandle>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| &f.meta.smallest).min()?.clone();
    let hi = files.iter().map(|f| &f.meta.largest).max()?.clone();
    Some((lo, hi))
}
