//! Prepared (2PC) transactions: the registry of unresolved ones, and
//! the prepare/resolution of spilled write sets.

use super::commit::{CfOps, ReqKind};
use super::database::DbInner;
use crate::error::{Error, Result};
use crate::journal::batch::Op;
use crate::key::MAX_SEQ;
use crate::options::Compression;
use crate::table::sst::{Table, TableBuilder};
use crate::version::levels::CfInner;
use crate::version::manifest::EditOp;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A prepared (2PC), unresolved transaction known to the database.
pub(crate) struct PreparedEntry {
    /// Lock owner id (the `Txn` id, or a fresh id for recovered ones).
    pub(super) owner: u64,
    /// WAL segment holding its prepare record (pinned until resolution).
    pub(super) segment: u64,
    pub(super) keys: Vec<(u64, Vec<u8>)>,
    /// Write set, once no live `Txn` owns it (recovered after a restart, or
    /// the `Txn` was dropped while prepared). `None` while attached.
    pub(super) ops: Option<Vec<Op>>,
    /// A resolution is in flight.
    pub(super) resolving: bool,
    /// Prepared spilled write set: its durable `.prep` files (cf, table);
    /// empty for a prepare record in the WAL.
    pub(super) spill: Vec<(u64, Arc<Table>)>,
}

#[derive(Default)]
pub(crate) struct PreparedState {
    pub(super) by_xid: HashMap<Vec<u8>, PreparedEntry>,
    /// Keys written by prepared transactions: other commits writing them fail
    /// with `Conflict` (and their locks are held).
    pub(super) keys: HashSet<(u64, Vec<u8>)>,
}

/// A prepared, unresolved transaction (see [`Db::recover_prepared`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedTxn {
    pub(super) xid: Vec<u8>,
    pub(super) writes: usize,
}

impl PreparedTxn {
    /// The XA transaction id given to `Txn::prepare`.
    pub fn xid(&self) -> &[u8] {
        &self.xid
    }
    /// Number of keys it writes.
    pub fn write_count(&self) -> usize {
        self.writes
    }
}

impl DbInner {
    /// Resolves a detached / recovered prepared transaction.
    pub(super) fn resolve_detached(&self, xid: &[u8], commit: bool, wait: Duration) -> Result<()> {
        self.check_writable()?;
        let (owner, keys, ops) = {
            let mut p = self.prepared.lock();
            let deadline = Instant::now() + wait;
            let ops = loop {
                match p.by_xid.get(xid) {
                    Some(e) if !e.resolving => {
                        if let Some(ops) = &e.ops {
                            break ops.clone();
                        }
                    }
                    _ => return Err(Error::UnknownXid(xid.to_vec())),
                }
                if wait.is_zero()
                    || self
                        .prepared_detached
                        .wait_until(&mut p, deadline)
                        .timed_out()
                {
                    return Err(Error::InvalidArgument(
                        "prepared transaction is owned by a live Txn; resolve it through the Txn"
                            .into(),
                    ));
                }
            };
            let e = match p.by_xid.get_mut(xid) {
                Some(e) => e,
                None => return Err(Error::UnknownXid(xid.to_vec())),
            };
            if !e.spill.is_empty() {
                let (owner, keys) = (e.owner, e.keys.clone());
                drop(p);
                self.resolve_spilled(xid, commit)?;
                self.locks.unlock_all(owner, &keys);
                return Ok(());
            }
            e.resolving = true;
            (e.owner, e.keys.clone(), ops)
        };
        let cfs = self.cfs.read().clone();
        let cfops: CfOps = ops
            .into_iter()
            .filter_map(|o| cfs.get(&o.cf).map(|c| (c.clone(), o, 0)))
            .collect();
        let kind = if commit {
            ReqKind::CommitPrepared(xid.to_vec())
        } else {
            ReqKind::RollbackPrepared(xid.to_vec())
        };
        let r = self.submit(cfops, false, true, kind, owner);
        match &r {
            Ok(_) => self.locks.unlock_all(owner, &keys),
            Err(_) => {
                if let Some(e) = self.prepared.lock().by_xid.get_mut(xid) {
                    e.resolving = false;
                }
            }
        }
        r.map(|_| ())
    }

    /// Phase one of 2PC for a spilled write set (`parts`: per column family
    /// the merged write set, as for `commit_spilled`; keys already locked by
    /// the caller). Under the commit write lock: xid unused, conflict check
    /// of every key while writing it to a durable `.prep` file per column
    /// family (fsynced), then one manifest edit `PrepareSpilled` (the
    /// prepare point), then registration (keys conflict for other commits).
    pub(crate) fn prepare_spilled(
        &self,
        xid: &[u8],
        owner: u64,
        mut parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)>,
        check: &dyn Fn(u64, &[u8]) -> u64,
    ) -> Result<()> {
        self.check_writable()?;
        // Deferred puts queued before must be durable with the prepare.
        self.drain_queue();
        let w = self.commit.lock_settled();
        self.check_writable()?;
        let mut files: Vec<(u64, Arc<Table>)> = Vec::new();
        let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut cur: Option<PathBuf> = None;
        let r = (|| -> Result<()> {
            let prep = self.prepared.lock();
            if prep.by_xid.contains_key(xid) {
                return Err(Error::InvalidArgument("xid is already prepared".into()));
            }
            for (cf, it) in parts.iter_mut() {
                if cf.dropped.load(Ordering::Acquire) {
                    return Err(Error::ColumnFamilyNotFound(cf.name.lock().clone()));
                }
                let no = self.next_file.fetch_add(1, Ordering::SeqCst);
                let path = crate::txn::spill::prep_path(&self.dir, no);
                cur = Some(path.clone());
                let cipher = crate::crypto::FileCipher::for_new_file_if(
                    &self.opts.keys,
                    cf.opts.encryption_key.or(self.opts.log_encryption_key),
                    &path,
                )?;
                let mut b =
                    TableBuilder::create(path.clone(), 64 << 10, Compression::None, 10, cipher)?;
                it.seek_to_first();
                while it.valid() {
                    let k = it.key();
                    if prep.keys.contains(&(cf.id, k.to_vec()))
                        || self.newer_than(cf, k, check(cf.id, k))?
                    {
                        return Err(Error::Conflict);
                    }
                    b.add(k, 1, it.kind(), it.value())?;
                    keys.push((cf.id, k.to_vec()));
                    it.next();
                }
                it.status()?;
                if b.num_entries() == 0 {
                    drop(b);
                    let _ = crate::io::remove_file(&path);
                    cur = None;
                    continue;
                }
                b.finish()?;
                let t = Table::open(path, no, self.cache.clone(), &self.opts.keys)?;
                cur = None;
                files.push((cf.id, Arc::new(t)));
            }
            Ok(())
        })();
        let cleanup = |files: &[(u64, Arc<Table>)], cur: &Option<PathBuf>| {
            for (_, t) in files {
                let _ = crate::io::remove_file(&t.path);
            }
            if let Some(p) = cur {
                let _ = crate::io::remove_file(p);
            }
        };
        if let Err(e) = r {
            cleanup(&files, &cur);
            return Err(e);
        }
        {
            let mut m = self.manifest.lock();
            let (mw, st) = &mut *m;
            let op = EditOp::PrepareSpilled {
                xid: xid.to_vec(),
                files: files.iter().map(|(cf, t)| (*cf, t.file_no)).collect(),
            };
            if let Err(e) = self.apply_manifest(mw, st, &[op]) {
                // Poisoned: the edit may be on disk (see `flush_one`'s discard).
                if !self.is_poisoned() {
                    cleanup(&files, &None);
                }
                return Err(e);
            }
        }
        let mut p = self.prepared.lock();
        p.keys.extend(keys.iter().cloned());
        p.by_xid.insert(
            xid.to_vec(),
            PreparedEntry {
                owner,
                segment: u64::MAX,
                keys,
                ops: None,
                resolving: false,
                spill: files,
            },
        );
        drop(w);
        Ok(())
    }

    /// True if `xid` is a prepared spilled write set.
    pub(crate) fn is_spilled_prepare(&self, xid: &[u8]) -> bool {
        self.prepared
            .lock()
            .by_xid
            .get(xid)
            .is_some_and(|e| !e.spill.is_empty())
    }

    /// Resolves a prepared spilled write set: commit streams its `.prep`
    /// files into L0 tables at a new sequence (`commit_spilled` without a
    /// conflict check) with `ResolveSpilled` in the same manifest edit;
    /// rollback is a manifest edit `ResolveSpilled`. Then unregisters it and
    /// deletes its files. Locks are the caller's to release.
    pub(crate) fn resolve_spilled(&self, xid: &[u8], commit: bool) -> Result<()> {
        self.check_writable()?;
        let spill = {
            let mut p = self.prepared.lock();
            match p.by_xid.get_mut(xid) {
                Some(e) if !e.resolving && !e.spill.is_empty() => {
                    e.resolving = true;
                    e.spill.clone()
                }
                _ => return Err(Error::UnknownXid(xid.to_vec())),
            }
        };
        let r = if commit {
            let cfs = self.cfs.read().clone();
            // Column families dropped since the prepare are skipped.
            let parts: Vec<(Arc<CfInner>, crate::iter::MergeIter)> = spill
                .iter()
                .filter_map(|(cf, t)| {
                    let c = cfs.get(cf).filter(|c| !c.dropped.load(Ordering::Acquire))?;
                    let src = crate::iter::Source::new(
                        Box::new(crate::table::sst::TableIter::new(t.clone())),
                        MAX_SEQ,
                    );
                    Some((
                        c.clone(),
                        crate::iter::MergeIter::new(vec![src], None, None, None).keep_deletes(),
                    ))
                })
                .collect();
            self.commit_spilled(parts, None, vec![EditOp::ResolveSpilled(xid.to_vec())])
                .map(|_| ())
        } else {
            let mut m = self.manifest.lock();
            let (mw, st) = &mut *m;
            self.apply_manifest(mw, st, &[EditOp::ResolveSpilled(xid.to_vec())])
        };
        let mut p = self.prepared.lock();
        match r {
            Ok(()) => {
                if let Some(e) = p.by_xid.remove(xid) {
                    for k in &e.keys {
                        p.keys.remove(k);
                    }
                }
                drop(p);
                self.prepared_detached.notify_all();
                for (_, t) in &spill {
                    let _ = crate::io::remove_file(&t.path);
                    self.cache.evict_file(t.file_no);
                }
                Ok(())
            }
            Err(e) => {
                if let Some(en) = p.by_xid.get_mut(xid) {
                    en.resolving = false;
                }
                Err(e)
            }
        }
    }

    /// Hands the write set `ops` of the prepared transaction `xid` to the
    /// database (its `Txn` goes away unresolved). False when `xid` is not
    /// prepared here.
    pub(crate) fn detach_prepared(&self, xid: &[u8], ops: Vec<Op>) -> bool {
        let found = match self.prepared.lock().by_xid.get_mut(xid) {
            Some(e) => {
                e.ops = Some(ops);
                true
            }
            None => false,
        };
        self.prepared_detached.notify_all();
        found
    }
}
