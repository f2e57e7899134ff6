//! Manifest: the durable log of metadata changes (column families, table files,
//! flushed sequence numbers), plus the `CURRENT` pointer.
//!
//! ## Format
//! `CURRENT` holds the text `MANIFEST-<number:06>\n` and is replaced atomically
//! (write `CURRENT.tmp`, fsync, rename, fsync directory).
//!
//! `MANIFEST-<number:06>` uses the WAL's physical framing (`len: u32 LE`,
//! `crc: u32 LE = crc32(len ++ payload)`, payload; torn final record tolerated,
//! other damage is `Error::Corruption`). Each payload is one atomic *edit*:
//! `count: varint` followed by `count` operations, each `tag: u8` + fields
//! (integers are varints, strings / keys are varint-length-prefixed bytes):
//!
//! | tag | op          | fields |
//! |-----|-------------|--------|
//! | 1   | CreateCf    | id, name, compression u8 (0 none, 1 zstd), zstd level (zigzag varint), bloom_bits, block_size, value_sep (0 = none, else threshold+1) |
//! | 2   | DropCf      | id |
//! | 3   | RenameCf    | id, new name |
//! | 4   | AddFile     | cf, level u8, file_no, size, min_seq, max_seq, num_entries, smallest user key, largest user key |
//! | 5   | RemoveFile  | cf, level u8, file_no |
//! | 6   | FlushedSeq  | cf, seq (all data of the CF with seq <= this is in table files) |
//! | 7   | LastSeq     | seq |
//! | 8   | NextFile    | n (next file number to allocate) |
//! | 9   | NextCfId    | n |
//! | 10  | Prepared    | xid, wal segment number (phase 2: a prepared txn pins its WAL segment) |
//! | 11  | VlogAdd     | cf, file_no, size (a value log file, `vlog.rs`, with `size` bytes of records, no garbage yet) |
//! | 12  | VlogGarbage | file_no, bytes (add `bytes` to the file's garbage: records no table entry points to any more) |
//! | 13  | VlogRemove  | file_no (garbage reached the size: no pointer left; the file is unlinked) |
//! | 14  | PrepareSpilled | xid, count, (cf, file_no)* (2PC prepare of a spilled write set: its `.prep` files, see `spill.rs`) |
//! | 15  | ResolveSpilled | xid (that prepare was committed, in the same edit as its tables, or rolled back) |
//! | 17  | CfEncryption | id, key_id (follows the `CreateCf` of an encrypted column family: `CfOptions::encryption_key`) |
//! | 18  | AddEncryptedFile | as `AddFile` without the two keys: an encrypted table file's key range is not written here (it would be in the clear); it is read from the file's props at open |
//! | 16  | VlogAddWal  | cf, file_no, size, garbage (a sealed WAL segment kept as a value log file: a hard link `<file_no>.vlog` to it, its values read in place, `vlog.rs`; `garbage` = the bytes no pointer of the flush that adopted it references) |
//!
//! `DropCf` also forgets the column family's value log files. An edit naming
//! an unknown value log file in `VlogGarbage` / `VlogRemove` is ignored (its
//! column family was dropped meanwhile).
//!
//! Every manifest has a copy, `MANIFEST-<number:06>.copy`: the same edits
//! written (and fsynced) alike, read only when the manifest is damaged
//! (`DbOptions::force_recovery` 3, `load_salvaging`).
//!
//! A new manifest is started with a full snapshot of the state at every open
//! and when the current one grows past 4 MiB, and after the rewrite of a family
//! whose key was set at open (`DbOptions::family_encryption`, the server's
//! catalog: the snapshot records that key with tag 17 as for a created family;
//! the roll drops the old manifest's key ranges of the rewritten clear files).
//! No tag is specific to that, so the format has no version bump.

use crate::coding::{put_bytes, put_varint, Reader};
use crate::error::{Error, Result};
use crate::options::{CfOptions, Compression};
use crate::vlog::file::VlogFormat;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

pub(crate) const NUM_LEVELS: usize = 7;
const ROLL_SIZE: u64 = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileMeta {
    pub file_no: u64,
    pub size: u64,
    pub min_seq: u64,
    pub max_seq: u64,
    pub num_entries: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// The table file is encrypted: `smallest` / `largest` are not written
    /// to the manifest (tag 18) and are empty after a load until the file
    /// is opened.
    pub encrypted: bool,
}

#[derive(Clone, Debug)]
pub(crate) enum EditOp {
    CreateCf {
        id: u64,
        name: String,
        opts: CfOptions,
    },
    DropCf(u64),
    RenameCf(u64, String),
    AddFile {
        cf: u64,
        level: u8,
        meta: FileMeta,
    },
    RemoveFile {
        cf: u64,
        level: u8,
        file_no: u64,
    },
    FlushedSeq(u64, u64),
    LastSeq(u64),
    NextFile(u64),
    NextCfId(u64),
    VlogAdd {
        cf: u64,
        file_no: u64,
        size: u64,
    },
    VlogGarbage(u64, u64),
    VlogRemove(u64),
    VlogAddWal {
        cf: u64,
        file_no: u64,
        size: u64,
        garbage: u64,
    },
    PrepareSpilled {
        xid: Vec<u8>,
        files: Vec<(u64, u64)>,
    },
    ResolveSpilled(Vec<u8>),
}

/// Manifest state of one value log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VlogMeta {
    pub cf: u64,
    pub size: u64,
    pub garbage: u64,
    pub format: VlogFormat,
}

#[derive(Clone, Debug)]
pub(crate) struct CfMeta {
    pub name: String,
    pub opts: CfOptions,
    pub flushed_seq: u64,
    pub levels: Vec<Vec<FileMeta>>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub cfs: BTreeMap<u64, CfMeta>,
    pub last_seq: u64,
    pub next_file: u64,
    pub next_cf_id: u64,
    pub vlog_files: BTreeMap<u64, VlogMeta>,
    /// Unresolved 2PC prepares of spilled write sets: xid -> (cf, file).
    pub prepared_spills: BTreeMap<Vec<u8>, Vec<(u64, u64)>>,
}

fn zigzag(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}
fn unzigzag(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

pub(crate) fn encode_edit(ops: &[EditOp]) -> Vec<u8> {
    let mut b = Vec::new();
    let extra = ops
        .iter()
        .filter(|op| matches!(op, EditOp::CreateCf { opts, .. } if opts.encryption_key.is_some()))
        .count();
    put_varint(&mut b, (ops.len() + extra) as u64);
    for op in ops {
        match op {
            EditOp::CreateCf { id, name, opts } => {
                b.push(1);
                put_varint(&mut b, *id);
                put_bytes(&mut b, name.as_bytes());
                match opts.compression {
                    Compression::None => {
                        b.push(0);
                        put_varint(&mut b, 0);
                    }
                    Compression::Zstd { level } => {
                        b.push(1);
                        put_varint(&mut b, zigzag(level));
                    }
                }
                put_varint(&mut b, u64::from(opts.bloom_bits_per_key));
                put_varint(&mut b, opts.block_size as u64);
                put_varint(
                    &mut b,
                    opts.value_separation_threshold.map_or(0, |t| t as u64 + 1),
                );
                if let Some(key_id) = opts.encryption_key {
                    b.push(17);
                    put_varint(&mut b, *id);
                    put_varint(&mut b, u64::from(key_id));
                }
            }
            EditOp::DropCf(id) => {
                b.push(2);
                put_varint(&mut b, *id);
            }
            EditOp::RenameCf(id, name) => {
                b.push(3);
                put_varint(&mut b, *id);
                put_bytes(&mut b, name.as_bytes());
            }
            EditOp::AddFile { cf, level, meta } => {
                b.push(if meta.encrypted { 18 } else { 4 });
                put_varint(&mut b, *cf);
                b.push(*level);
                for v in [
                    meta.file_no,
                    meta.size,
                    meta.min_seq,
                    meta.max_seq,
                    meta.num_entries,
                ] {
                    put_varint(&mut b, v);
                }
                if !meta.encrypted {
                    put_bytes(&mut b, &meta.smallest);
                    put_bytes(&mut b, &meta.largest);
                }
            }
            EditOp::RemoveFile { cf, level, file_no } => {
                b.push(5);
                put_varint(&mut b, *cf);
                b.push(*level);
                put_varint(&mut b, *file_no);
            }
            EditOp::FlushedSeq(cf, s) => {
                b.push(6);
                put_varint(&mut b, *cf);
                put_varint(&mut b, *s);
            }
            EditOp::LastSeq(s) => {
                b.push(7);
                put_varint(&mut b, *s);
            }
            EditOp::NextFile(n) => {
                b.push(8);
                put_varint(&mut b, *n);
            }
            EditOp::NextCfId(n) => {
                b.push(9);
                put_varint(&mut b, *n);
            }
            EditOp::VlogAdd { cf, file_no, size } => {
                b.push(11);
                put_varint(&mut b, *cf);
                put_varint(&mut b, *file_no);
                put_varint(&mut b, *size);
            }
            EditOp::VlogGarbage(n, bytes) => {
                b.push(12);
                put_varint(&mut b, *n);
                put_varint(&mut b, *bytes);
            }
            EditOp::VlogRemove(n) => {
                b.push(13);
                put_varint(&mut b, *n);
            }
            EditOp::VlogAddWal {
                cf,
                file_no,
                size,
                garbage,
            } => {
                b.push(16);
                put_varint(&mut b, *cf);
                put_varint(&mut b, *file_no);
                put_varint(&mut b, *size);
                put_varint(&mut b, *garbage);
            }
            EditOp::PrepareSpilled { xid, files } => {
                b.push(14);
                put_bytes(&mut b, xid);
                put_varint(&mut b, files.len() as u64);
                for (cf, no) in files {
                    put_varint(&mut b, *cf);
                    put_varint(&mut b, *no);
                }
            }
            EditOp::ResolveSpilled(xid) => {
                b.push(15);
                put_bytes(&mut b, xid);
            }
        }
    }
    b
}

pub(crate) fn decode_edit(p: &[u8]) -> Option<Vec<EditOp>> {
    let mut r = Reader::new(p);
    let n = r.varint_usize()?;
    let mut ops = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let op = match r.u8()? {
            1 => {
                let id = r.varint()?;
                let name = String::from_utf8(r.len_prefixed()?.to_vec()).ok()?;
                let c = r.u8()?;
                let lvl = unzigzag(r.varint()?);
                let compression = match c {
                    0 => Compression::None,
                    1 => Compression::Zstd { level: lvl },
                    _ => return None,
                };
                let bloom = u32::try_from(r.varint()?).ok()?;
                let block_size = r.varint_usize()?;
                let vs = r.varint()?;
                EditOp::CreateCf {
                    id,
                    name,
                    opts: CfOptions {
                        compression,
                        bloom_bits_per_key: bloom,
                        block_size,
                        value_separation_threshold: if vs == 0 {
                            None
                        } else {
                            Some(usize::try_from(vs - 1).ok()?)
                        },
                        encryption_key: None,
                    },
                }
            }
            2 => EditOp::DropCf(r.varint()?),
            3 => EditOp::RenameCf(
                r.varint()?,
                String::from_utf8(r.len_prefixed()?.to_vec()).ok()?,
            ),
            tag @ (4 | 18) => {
                let cf = r.varint()?;
                let level = r.u8()?;
                let mut meta = FileMeta {
                    file_no: r.varint()?,
                    size: r.varint()?,
                    min_seq: r.varint()?,
                    max_seq: r.varint()?,
                    num_entries: r.varint()?,
                    smallest: Vec::new(),
                    largest: Vec::new(),
                    encrypted: tag == 18,
                };
                if tag == 4 {
                    meta.smallest = r.len_prefixed()?.to_vec();
                    meta.largest = r.len_prefixed()?.to_vec();
                }
                EditOp::AddFile { cf, level, meta }
            }
            17 => {
                let id = r.varint()?;
                let key_id = u32::try_from(r.varint()?).ok()?;
                match ops.iter_mut().rev().find_map(|op| match op {
                    EditOp::CreateCf { id: i, opts, .. } if *i == id => Some(opts),
                    _ => None,
                }) {
                    Some(opts) => opts.encryption_key = Some(key_id),
                    None => return None,
                }
                continue;
            }
            5 => EditOp::RemoveFile {
                cf: r.varint()?,
                level: r.u8()?,
                file_no: r.varint()?,
            },
            6 => EditOp::FlushedSeq(r.varint()?, r.varint()?),
            7 => EditOp::LastSeq(r.varint()?),
            8 => EditOp::NextFile(r.varint()?),
            9 => EditOp::NextCfId(r.varint()?),
            11 => EditOp::VlogAdd {
                cf: r.varint()?,
                file_no: r.varint()?,
                size: r.varint()?,
            },
            12 => EditOp::VlogGarbage(r.varint()?, r.varint()?),
            13 => EditOp::VlogRemove(r.varint()?),
            16 => EditOp::VlogAddWal {
                cf: r.varint()?,
                file_no: r.varint()?,
                size: r.varint()?,
                garbage: r.varint()?,
            },
            14 => {
                let xid = r.len_prefixed()?.to_vec();
                let n = r.varint_usize()?;
                if n > r.remaining() {
                    return None;
                }
                let mut files = Vec::with_capacity(n);
                for _ in 0..n {
                    files.push((r.varint()?, r.varint()?));
                }
                EditOp::PrepareSpilled { xid, files }
            }
            15 => EditOp::ResolveSpilled(r.len_prefixed()?.to_vec()),
            _ => return None,
        };
        ops.push(op);
    }
    if !r.is_empty() {
        return None;
    }
    Some(ops)
}

impl State {
    /// Applies one edit; `Err(detail)` if it is inconsistent with the state.
    pub(crate) fn apply(&mut self, ops: &[EditOp]) -> std::result::Result<(), String> {
        for op in ops {
            match op {
                EditOp::CreateCf { id, name, opts } => {
                    if self.cfs.contains_key(id) {
                        return Err(format!("duplicate column family id {id}"));
                    }
                    self.cfs.insert(
                        *id,
                        CfMeta {
                            name: name.clone(),
                            opts: opts.clone(),
                            flushed_seq: 0,
                            levels: vec![Vec::new(); NUM_LEVELS],
                        },
                    );
                    self.next_cf_id = self.next_cf_id.max(id + 1);
                }
                EditOp::DropCf(id) => {
                    self.cfs.remove(id);
                    self.vlog_files.retain(|_, v| v.cf != *id);
                }
                EditOp::RenameCf(id, name) => match self.cfs.get_mut(id) {
                    Some(c) => c.name = name.clone(),
                    None => return Err(format!("rename of unknown column family {id}")),
                },
                EditOp::AddFile { cf, level, meta } => {
                    // Files of a dropped column family may still be mentioned by
                    // an edit racing with the drop: ignore them.
                    if let Some(c) = self.cfs.get_mut(cf) {
                        let l = c
                            .levels
                            .get_mut(*level as usize)
                            .ok_or_else(|| format!("bad level {level}"))?;
                        l.push(meta.clone());
                    }
                    self.next_file = self.next_file.max(meta.file_no + 1);
                }
                EditOp::RemoveFile { cf, level, file_no } => {
                    if let Some(c) = self.cfs.get_mut(cf) {
                        let l = c
                            .levels
                            .get_mut(*level as usize)
                            .ok_or_else(|| format!("bad level {level}"))?;
                        l.retain(|m| m.file_no != *file_no);
                    }
                }
                EditOp::FlushedSeq(cf, s) => {
                    if let Some(c) = self.cfs.get_mut(cf) {
                        c.flushed_seq = c.flushed_seq.max(*s);
                    }
                    self.last_seq = self.last_seq.max(*s);
                }
                EditOp::LastSeq(s) => self.last_seq = self.last_seq.max(*s),
                EditOp::NextFile(n) => self.next_file = self.next_file.max(*n),
                EditOp::NextCfId(n) => self.next_cf_id = self.next_cf_id.max(*n),
                EditOp::VlogAdd { cf, file_no, size } => {
                    self.add_vlog(*cf, *file_no, *size, 0, VlogFormat::Records)?;
                }
                EditOp::VlogAddWal {
                    cf,
                    file_no,
                    size,
                    garbage,
                } => {
                    self.add_vlog(*cf, *file_no, *size, *garbage, VlogFormat::WalSegment)?;
                }
                EditOp::VlogGarbage(n, bytes) => {
                    if let Some(v) = self.vlog_files.get_mut(n) {
                        v.garbage = v.garbage.saturating_add(*bytes).min(v.size);
                    }
                }
                EditOp::VlogRemove(n) => {
                    self.vlog_files.remove(n);
                }
                EditOp::PrepareSpilled { xid, files } => {
                    if self.prepared_spills.contains_key(xid) {
                        return Err("xid is already prepared".to_string());
                    }
                    for (_, no) in files {
                        self.next_file = self.next_file.max(no + 1);
                    }
                    self.prepared_spills.insert(xid.clone(), files.clone());
                }
                EditOp::ResolveSpilled(xid) => {
                    self.prepared_spills.remove(xid);
                }
            }
        }
        Ok(())
    }

    fn add_vlog(
        &mut self,
        cf: u64,
        file_no: u64,
        size: u64,
        garbage: u64,
        format: VlogFormat,
    ) -> std::result::Result<(), String> {
        if self.cfs.contains_key(&cf) {
            if self.vlog_files.contains_key(&file_no) {
                return Err(format!("duplicate value log file {file_no}"));
            }
            let garbage = garbage.min(size);
            self.vlog_files.insert(
                file_no,
                VlogMeta {
                    cf,
                    size,
                    garbage,
                    format,
                },
            );
        }
        self.next_file = self.next_file.max(file_no + 1);
        Ok(())
    }

    pub(crate) fn snapshot_ops(&self) -> Vec<EditOp> {
        let mut ops = vec![
            EditOp::NextFile(self.next_file),
            EditOp::NextCfId(self.next_cf_id),
            EditOp::LastSeq(self.last_seq),
        ];
        for (id, c) in &self.cfs {
            ops.push(EditOp::CreateCf {
                id: *id,
                name: c.name.clone(),
                opts: c.opts.clone(),
            });
            ops.push(EditOp::FlushedSeq(*id, c.flushed_seq));
            for (lvl, files) in c.levels.iter().enumerate() {
                for m in files {
                    ops.push(EditOp::AddFile {
                        cf: *id,
                        level: lvl as u8,
                        meta: m.clone(),
                    });
                }
            }
        }
        for (n, v) in &self.vlog_files {
            match v.format {
                VlogFormat::Records => {
                    ops.push(EditOp::VlogAdd {
                        cf: v.cf,
                        file_no: *n,
                        size: v.size,
                    });
                    if v.garbage > 0 {
                        ops.push(EditOp::VlogGarbage(*n, v.garbage));
                    }
                }
                VlogFormat::WalSegment => ops.push(EditOp::VlogAddWal {
                    cf: v.cf,
                    file_no: *n,
                    size: v.size,
                    garbage: v.garbage,
                }),
            }
        }
        for (xid, files) in &self.prepared_spills {
            ops.push(EditOp::PrepareSpilled {
                xid: xid.clone(),
                files: files.clone(),
            });
        }
        ops
    }
}

pub(crate) fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

/// The copy of manifest file `path`: `<name>.copy`, the same bytes.
pub(crate) fn copy_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".copy");
    PathBuf::from(name)
}

fn remove_with_copy(path: &Path) {
    let _ = crate::io::remove_file(path);
    let _ = crate::io::remove_file(copy_path(path));
}

/// Reads CURRENT and replays the manifest it names. `Ok(None)` if no CURRENT.
pub(crate) fn load(dir: &Path) -> Result<Option<(State, u64)>> {
    let Some(num) = current_number(dir)? else {
        return Ok(None);
    };
    let mut st = State::default();
    let records = replay(&dir.join(manifest_name(num)), &mut st, Err)?;
    if records == 0 {
        return Err(Error::corruption(
            dir.join(manifest_name(num)),
            0,
            "empty manifest",
        ));
    }
    st.next_file = st.next_file.max(num + 1);
    Ok(Some((st, num)))
}

/// `load` of a damaged directory (`DbOptions::force_recovery` 3). A damaged or
/// missing CURRENT, or one naming a missing manifest, gives way to the newest
/// `MANIFEST-*` file; a damaged edit ends the replay (the state as of the edit
/// before it); a manifest damaged in its first edit (its snapshot) gives way to
/// the older one kept beside it (the state as of the open before: table files
/// written since are not seen, files removed since are missing). What was
/// skipped goes to `notes`. Writes nothing.
pub(crate) fn load_salvaging(dir: &Path, notes: &mut Vec<String>) -> Result<Option<(State, u64)>> {
    let mut on_disk: Vec<u64> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("list {}", dir.display()), e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("MANIFEST-"))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .collect();
    on_disk.sort_unstable_by(|a, b| b.cmp(a));
    let mut candidates = Vec::new();
    match current_number(dir) {
        Ok(Some(n)) if on_disk.contains(&n) => candidates.push(n),
        Ok(Some(n)) => notes.push(format!(
            "CURRENT names {}, which is missing",
            manifest_name(n)
        )),
        Ok(None) if on_disk.is_empty() => return Ok(None),
        Ok(None) => notes.push("CURRENT is missing".to_string()),
        Err(e) => notes.push(e.to_string()),
    }
    let first = candidates.first().copied();
    candidates.extend(on_disk.iter().copied().filter(|n| Some(*n) != first));
    let paths = candidates.into_iter().flat_map(|num| {
        let path = dir.join(manifest_name(num));
        [(num, path.clone()), (num, copy_path(&path))]
    });
    // The first undamaged one wins (a manifest and its copy hold the same
    // edits); else the one that gives the most edits.
    let mut best: Option<(u64, u64, State, PathBuf, Error)> = None;
    for (num, path) in paths.filter(|(_, p)| p.exists()) {
        let mut st = State::default();
        let mut damage = None;
        let records = replay(&path, &mut st, |e| {
            damage = Some(e);
            Ok(())
        })?;
        match damage {
            None if records > 0 => {
                if best.is_some() || !notes.is_empty() {
                    notes.push(format!(
                        "the engine's state is read from {}",
                        path.display()
                    ));
                }
                st.next_file = st.next_file.max(num + 1);
                return Ok(Some((st, num)));
            }
            None => notes.push(format!("empty manifest {}", path.display())),
            Some(e) => {
                notes.push(format!("damaged manifest ({e})"));
                if records > best.as_ref().map_or(0, |b| b.1) {
                    best = Some((num, records, st, path, e));
                }
            }
        }
    }
    let Some((num, records, mut st, path, _)) = best else {
        return Err(Error::corruption(
            dir.join("CURRENT"),
            0,
            "no readable MANIFEST-* file is left",
        ));
    };
    notes.push(format!(
        "the engine's state is read from {}: its {records} edits before the damage \
         (table files added later are not seen)",
        path.display()
    ));
    st.next_file = st.next_file.max(num + 1);
    Ok(Some((st, num)))
}

/// The number of the manifest CURRENT names; `None` if there is no CURRENT.
fn current_number(dir: &Path) -> Result<Option<u64>> {
    let cur = dir.join("CURRENT");
    let text = match crate::io::read(&cur) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read CURRENT", e)),
    };
    let text =
        String::from_utf8(text).map_err(|_| Error::corruption(&cur, 0, "CURRENT is not UTF-8"))?;
    let name = text.trim_end_matches('\n');
    name.strip_prefix("MANIFEST-")
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| Error::corruption(&cur, 0, format!("bad CURRENT contents {name:?}")))
}

/// Applies the edits of manifest `num` to `st`; the number of edits applied.
/// Damage (corruption) goes to `on_damage`, whose `Ok` ends the replay there.
fn replay(
    path: &Path,
    st: &mut State,
    mut on_damage: impl FnMut(Error) -> Result<()>,
) -> Result<u64> {
    let mut records = 0u64;
    let r = crate::journal::wal::read_segment(path, true, |payload, off| {
        let ops = decode_edit(payload)
            .ok_or_else(|| Error::corruption(path, off, "undecodable manifest edit"))?;
        st.apply(&ops)
            .map_err(|d| Error::corruption(path, off, d))?;
        records += 1;
        Ok(())
    });
    match r {
        Ok(_) => {}
        Err(Error::Io { context, source }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::corruption(
                path,
                0,
                format!("manifest named by CURRENT is missing ({context})"),
            ))
        }
        Err(e) if e.is_corruption() => on_damage(e)?,
        Err(e) => return Err(e),
    }
    Ok(records)
}

pub(crate) struct ManifestWriter {
    dir: PathBuf,
    #[allow(dead_code)]
    pub number: u64,
    path: PathBuf,
    /// The manifest and its copy (`<name>.copy`), written alike; none in a
    /// read-only database (`DbOptions::force_recovery`).
    files: Vec<File>,
    size: u64,
    /// An append could not be undone or an fsync failed: the manifest on
    /// disk may not match the state, so no further edit may be written
    /// (the database refuses writes until it is reopened).
    pub broken: bool,
}

impl ManifestWriter {
    /// The writer of a read-only database: it writes nothing.
    pub(crate) fn read_only(dir: &Path, number: u64) -> ManifestWriter {
        ManifestWriter {
            dir: dir.to_path_buf(),
            number,
            path: dir.join(manifest_name(number)),
            files: Vec::new(),
            size: 0,
            broken: false,
        }
    }

    /// Creates a new manifest holding a snapshot of `st` and points CURRENT at it.
    pub(crate) fn create(dir: &Path, number: u64, st: &State) -> Result<ManifestWriter> {
        let w = ManifestWriter::create_unnamed(dir, number, st)?;
        let name = manifest_name(number);
        if let Err(e) = crate::fsutil::atomic_write(dir, "CURRENT", format!("{name}\n").as_bytes())
        {
            // A manifest CURRENT does not name would make the next open
            // refuse the directory ("CURRENT missing but database files
            // exist"): it goes, unless the rename happened (only the
            // directory fsync failed) and CURRENT names it.
            let cur = crate::io::read(dir.join("CURRENT")).unwrap_or_default();
            if cur.strip_suffix(b"\n") != Some(name.as_bytes()) {
                drop(w.files);
                remove_with_copy(&w.path);
            }
            return Err(e);
        }
        Ok(w)
    }

    /// Writes the snapshot of `st` to a new manifest file CURRENT does not
    /// name yet (removed again on failure).
    fn create_unnamed(dir: &Path, number: u64, st: &State) -> Result<ManifestWriter> {
        let path = dir.join(manifest_name(number));
        let mut files = Vec::new();
        for p in [path.clone(), copy_path(&path)] {
            let file = crate::io::open(
                OpenOptions::new().create(true).truncate(true).write(true),
                &p,
            )
            .map_err(|e| Error::io(format!("create {}", p.display()), e));
            match file {
                Ok(f) => files.push(f),
                Err(e) => {
                    remove_with_copy(&path);
                    return Err(e);
                }
            }
        }
        let mut w = ManifestWriter {
            dir: dir.to_path_buf(),
            number,
            path,
            files,
            size: 0,
            broken: false,
        };
        if let Err(e) = w.append_raw(&st.snapshot_ops()) {
            remove_with_copy(&w.path);
            return Err(e);
        }
        Ok(w)
    }

    /// Durably appends one framed edit. A failed write (no space, ...) is cut
    /// back off the file, so the manifest still ends with a whole edit and
    /// the caller may go on; a failed fsync, or a cut that fails, makes the
    /// writer `broken`.
    fn append_raw(&mut self, ops: &[EditOp]) -> Result<()> {
        if self.broken {
            return Err(Error::Poisoned);
        }
        if self.files.is_empty() {
            return Err(Error::InvalidArgument(
                "manifest edit of a read-only database".into(),
            ));
        }
        let mut framed = Vec::new();
        crate::journal::wal::frame_record(&mut framed, &encode_edit(ops));
        for file in &self.files {
            if let Err(e) = crate::io::write_all_at(file, &framed, self.size, &self.path) {
                if self
                    .files
                    .iter()
                    .any(|f| crate::io::set_len(f, self.size, &self.path).is_err())
                {
                    self.broken = true;
                }
                return Err(Error::io(format!("write {}", self.path.display()), e));
            }
        }
        for file in &self.files {
            if let Err(e) = crate::io::sync_data(file, &self.path) {
                self.broken = true;
                return Err(Error::io(format!("fsync {}", self.path.display()), e));
            }
        }
        self.size += framed.len() as u64;
        Ok(())
    }

    /// Durably appends an edit (already applied to `st` by the caller), rolling
    /// over to a fresh manifest when this one is large. `alloc` gives a file number.
    /// Once the edit is appended the call succeeds even if the roll-over
    /// cannot be written (it is tried again at the next edit), unless CURRENT
    /// was switched without being made durable (then the writer is `broken`).
    pub(crate) fn append(
        &mut self,
        ops: &[EditOp],
        st: &State,
        alloc: impl FnOnce() -> u64,
    ) -> Result<()> {
        self.append_raw(ops)?;
        if self.size > ROLL_SIZE {
            self.roll(st, alloc())?;
        }
        Ok(())
    }

    /// Starts manifest `n` with a snapshot of `st`, points CURRENT at it and
    /// removes this one (so records only the old one held, such as the key
    /// ranges of files rewritten since, are gone). If the new one cannot be
    /// written this one stays current (`Ok`: tried again later), unless
    /// CURRENT was switched without being made durable (then `broken`).
    pub(crate) fn roll(&mut self, st: &State, n: u64) -> Result<()> {
        let Ok(mut nw) = ManifestWriter::create_unnamed(&self.dir, n, st) else {
            return Ok(());
        };
        let name = manifest_name(n);
        if let Err(e) =
            crate::fsutil::atomic_write(&self.dir, "CURRENT", format!("{name}\n").as_bytes())
        {
            let cur = crate::io::read(self.dir.join("CURRENT")).unwrap_or_default();
            if cur.strip_suffix(b"\n") == Some(name.as_bytes()) {
                // Renamed, but the directory fsync failed.
                nw.broken = true;
                let old = std::mem::replace(self, nw);
                remove_with_copy(&old.path);
                return Err(e);
            }
            remove_with_copy(&nw.path);
            return Ok(());
        }
        let old = std::mem::replace(self, nw);
        remove_with_copy(&old.path);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn edit_roundtrip_and_state() {
        let ops = vec![
            EditOp::CreateCf {
                id: 1,
                name: "t1".into(),
                opts: CfOptions {
                    compression: Compression::Zstd { level: -3 },
                    value_separation_threshold: Some(100),
                    ..CfOptions::default()
                },
            },
            EditOp::AddFile {
                cf: 1,
                level: 0,
                meta: FileMeta {
                    file_no: 7,
                    size: 100,
                    min_seq: 1,
                    max_seq: 9,
                    num_entries: 3,
                    smallest: b"a".to_vec(),
                    largest: b"z".to_vec(),
                    encrypted: false,
                },
            },
            EditOp::FlushedSeq(1, 9),
            EditOp::RenameCf(1, "t2".into()),
        ];
        let enc = encode_edit(&ops);
        let dec = decode_edit(&enc).unwrap();
        let mut st = State::default();
        st.apply(&dec).unwrap();
        let c = &st.cfs[&1];
        assert_eq!(c.name, "t2");
        assert_eq!(c.opts.compression, Compression::Zstd { level: -3 });
        assert_eq!(c.opts.value_separation_threshold, Some(100));
        assert_eq!(c.levels[0].len(), 1);
        assert_eq!(st.next_file, 8);
        assert_eq!(st.last_seq, 9);
        for cut in 0..enc.len() {
            assert!(decode_edit(&enc[..cut]).is_none());
        }
    }

    #[test]
    fn vlog_and_spilled_prepare_ops() {
        let create = EditOp::CreateCf {
            id: 1,
            name: "t".into(),
            opts: CfOptions::default(),
        };
        let ops = vec![
            create,
            EditOp::VlogAdd {
                cf: 1,
                file_no: 20,
                size: 1000,
            },
            EditOp::VlogAdd {
                cf: 1,
                file_no: 21,
                size: 500,
            },
            EditOp::VlogGarbage(20, 300),
            EditOp::VlogGarbage(21, 100),
            EditOp::VlogGarbage(99, 1),
            EditOp::VlogRemove(21),
            EditOp::VlogAddWal {
                cf: 1,
                file_no: 25,
                size: 4000,
                garbage: 1500,
            },
            EditOp::VlogGarbage(25, 100),
            EditOp::PrepareSpilled {
                xid: b"x".to_vec(),
                files: vec![(1, 30), (1, 31)],
            },
            EditOp::PrepareSpilled {
                xid: b"y".to_vec(),
                files: vec![(1, 32)],
            },
            EditOp::ResolveSpilled(b"y".to_vec()),
        ];
        let dec = decode_edit(&encode_edit(&ops)).unwrap();
        let mut st = State::default();
        st.apply(&dec).unwrap();
        assert_eq!(
            st.vlog_files.get(&20),
            Some(&VlogMeta {
                cf: 1,
                size: 1000,
                garbage: 300,
                format: VlogFormat::Records,
            })
        );
        assert_eq!(
            st.vlog_files.get(&25),
            Some(&VlogMeta {
                cf: 1,
                size: 4000,
                garbage: 1600,
                format: VlogFormat::WalSegment,
            })
        );
        assert!(!st.vlog_files.contains_key(&21));
        assert_eq!(st.prepared_spills.len(), 1);
        assert_eq!(st.prepared_spills[&b"x".to_vec()], vec![(1, 30), (1, 31)]);
        assert_eq!(st.next_file, 33);
        // Duplicates are rejected.
        assert!(st
            .clone()
            .apply(&[EditOp::VlogAdd {
                cf: 1,
                file_no: 20,
                size: 1
            }])
            .is_err());
        assert!(st
            .clone()
            .apply(&[EditOp::PrepareSpilled {
                xid: b"x".to_vec(),
                files: vec![]
            }])
            .is_err());
        // A snapshot rebuilds the same state.
        let mut st2 = State::default();
        st2.apply(&decode_edit(&encode_edit(&st.snapshot_ops())).unwrap())
            .unwrap();
        assert_eq!(st2.vlog_files, st.vlog_files);
        assert_eq!(st2.prepared_spills, st.prepared_spills);
        // Dropping the column family forgets its value log files.
        st.apply(&[EditOp::DropCf(1)]).unwrap();
        assert!(st.vlog_files.is_empty());
    }

    #[test]
    fn create_load_and_corrupt() {
        let d = tempfile::tempdir().unwrap();
        let mut st = State::default();
        let ops = vec![EditOp::CreateCf {
            id: 3,
            name: "x".into(),
            opts: CfOptions::default(),
        }];
        st.apply(&ops).unwrap();
        let mut w = ManifestWriter::create(d.path(), 5, &st).unwrap();
        let ops2 = vec![EditOp::RenameCf(3, "y".into())];
        st.apply(&ops2).unwrap();
        w.append(&ops2, &st, || 99).unwrap();
        let (st2, n) = load(d.path()).unwrap().unwrap();
        assert_eq!(n, 5);
        assert_eq!(st2.cfs[&3].name, "y");
        // corrupt the first record: error, not panic
        let p = d.path().join(manifest_name(5));
        let mut data = crate::io::read(&p).unwrap();
        data[10] ^= 0xff;
        std::fs::write(&p, &data).unwrap();
        assert!(load(d.path()).unwrap_err().is_corruption());
        std::fs::write(d.path().join("CURRENT"), b"garbage").unwrap();
        assert!(load(d.path()).is_err());
    }
}
