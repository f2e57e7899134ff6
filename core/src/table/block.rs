//! A block of a table file: sorted entries with prefix-compressed keys.
//!
//! ## Format
//! A block (uncompressed; a table file adds its trailer, see `sst.rs`):
//! ```text
//! entry*: shared: varint | non_shared: varint | value_len: varint | key[shared..] | value
//! restarts: u32 LE * num_restarts   (offsets of entries with shared == 0, every 16 entries)
//! num_restarts: u32 LE
//! ```
//! Keys are encoded internal keys (see `key.rs`: user key ++ u64 LE tag), sorted
//! by user key asc / seq desc.
use crate::coding::{put_u32, put_varint, u32_at, Reader};
use crate::error::{Error, Result};
use crate::key::{compare_parts, decode_ikey};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

const RESTART_INTERVAL: usize = 16;

pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    pub(crate) fn new() -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let mut shared = 0;
        if self.counter < RESTART_INTERVAL {
            let max = self.last_key.len().min(key.len());
            while shared < max && self.last_key[shared] == key[shared] {
                shared += 1;
            }
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
        }
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
        self.entries += 1;
    }
    pub(crate) fn estimated_size(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            put_u32(&mut out, *r);
        }
        put_u32(&mut out, self.restarts.len() as u32);
        self.restarts = vec![0];
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

#[derive(Clone, Copy)]
struct Ent {
    k_off: u32,
    k_len: u32,
    v_off: u32,
    v_len: u32,
}

/// A block's trailer: `(number of restarts, offset where the entries end and
/// the restart array begins)`, checked against the block's length.
fn restart_layout(data: &[u8], bad: &dyn Fn(&str) -> Error) -> Result<(usize, usize)> {
    if data.len() < 4 {
        return Err(bad("too short"));
    }
    let nr = u32_at(data, data.len() - 4).ok_or_else(|| bad("restart count"))? as usize;
    let restart_bytes = nr
        .checked_mul(4)
        .and_then(|x| x.checked_add(4))
        .ok_or_else(|| bad("restart count"))?;
    if nr == 0 || restart_bytes > data.len() {
        return Err(bad("restart array"));
    }
    Ok((nr, data.len() - restart_bytes))
}

/// A data block as read from its file (checksum verified, decompressed), the
/// form the block cache keeps. Point reads search it in place: a binary search
/// over the restart array (restart entries hold whole keys), then a walk of at
/// most one restart interval. Iterators decode it into a [`Block`] of their
/// own. Why not cache decoded blocks: a decoded block also holds every key
/// restored and an entry table, about twice the raw size (a 4 KiB block of
/// 16 B keys + 100 B values charged ~9 KiB), so the cache held half the
/// blocks and `readcold` (cache 1/4 of the data) went to disk ~8 % more often
/// than fjall, which caches raw blocks.
pub(crate) struct RawBlock {
    data: Vec<u8>,
    /// Where the entries end and the restart array begins.
    entries_end: usize,
    restarts: usize,
}

impl RawBlock {
    /// Checks the restart array's framing (entries are checked as they are
    /// read).
    pub(crate) fn new(data: Vec<u8>, path: &Path, offset: u64) -> Result<RawBlock> {
        let bad = |d: &str| Error::corruption(path, offset, format!("bad block: {d}"));
        let (nr, entries_end) = restart_layout(&data, &bad)?;
        Ok(RawBlock {
            data,
            entries_end,
            restarts: nr,
        })
    }

    pub(crate) fn charge(&self) -> usize {
        self.data.capacity() + 64
    }

    /// The entry at `pos`: `(shared, key delta, value, next entry's pos)`.
    #[inline]
    fn entry(&self, pos: usize) -> Option<(usize, &[u8], &[u8], usize)> {
        let d = self.data.get(pos..self.entries_end)?;
        // Fast path: the three lengths are one-byte varints (the usual case;
        // `Reader::varint` was 16 % of a cache-hit read profile).
        if let Some(&[a, b, c]) = d.get(..3) {
            if (a | b | c) < 0x80 {
                let (non_shared, vlen) = (b as usize, c as usize);
                let delta = d.get(3..3 + non_shared)?;
                let value = d.get(3 + non_shared..3 + non_shared + vlen)?;
                return Some((a as usize, delta, value, pos + 3 + non_shared + vlen));
            }
        }
        let mut r = Reader::new(d);
        let shared = r.varint_usize()?;
        let non_shared = r.varint_usize()?;
        let vlen = r.varint_usize()?;
        let delta = r.bytes(non_shared)?;
        let value = r.bytes(vlen)?;
        Some((shared, delta, value, pos + r.pos()))
    }

    /// First entry with internal key >= (user, seq): its key is left in
    /// `key`, its value returned; `None` if every key is smaller.
    pub(crate) fn seek<'a>(
        &'a self,
        user: &[u8],
        seq: u64,
        key: &mut Vec<u8>,
        path: &Path,
        offset: u64,
    ) -> Result<Option<&'a [u8]>> {
        let bad = |d: &str| Error::corruption(path, offset, format!("bad block: {d}"));
        let restart = |i: usize| -> Result<usize> {
            u32_at(&self.data, self.entries_end + 4 * i)
                .map(|o| o as usize)
                .filter(|&o| o < self.entries_end)
                .ok_or_else(|| bad("restart offset"))
        };
        let less = |k: &[u8]| -> Result<bool> {
            match decode_ikey(k) {
                Some((u, s, _)) => Ok(compare_parts(u, s, user, seq) == Ordering::Less),
                None => Err(bad("malformed internal key")),
            }
        };
        // Last restart whose key is < the target (or the first).
        let (mut lo, mut hi) = (0, self.restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let (shared, k, _, _) = self
                .entry(restart(mid)?)
                .ok_or_else(|| bad("entry past end"))?;
            if shared != 0 {
                return Err(bad("restart entry shares a prefix"));
            }
            if less(k)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let mut pos = restart(lo)?;
        key.clear();
        while pos < self.entries_end {
            let (shared, delta, value, next) =
                self.entry(pos).ok_or_else(|| bad("entry past end"))?;
            if shared > key.len() {
                return Err(bad("shared prefix longer than previous key"));
            }
            key.truncate(shared);
            key.extend_from_slice(delta);
            if !less(key)? {
                return Ok(Some(value));
            }
            pos = next;
        }
        Ok(None)
    }
}

/// A decoded block: keys restored from prefix compression, values referenced in
/// the raw buffer (an index block, or a data block being iterated).
pub(crate) struct Block {
    data: BlockBytes,
    keys: Vec<u8>,
    ents: Vec<Ent>,
}

/// The bytes a [`Block`] was decoded from.
enum BlockBytes {
    Owned(Vec<u8>),
    /// A cached data block (not copied).
    Raw(Arc<RawBlock>),
}

impl BlockBytes {
    fn get(&self) -> &[u8] {
        match self {
            BlockBytes::Owned(v) => v,
            BlockBytes::Raw(r) => &r.data,
        }
    }
}

impl Block {
    /// A block without entries (the index of a quarantined table).
    pub(crate) fn empty() -> Block {
        Block {
            data: BlockBytes::Owned(Vec::new()),
            keys: Vec::new(),
            ents: Vec::new(),
        }
    }

    pub(crate) fn decode(data: Vec<u8>, path: &Path, offset: u64) -> Result<Block> {
        let (keys, ents) = Block::decode_entries(&data, path, offset)?;
        Ok(Block {
            data: BlockBytes::Owned(data),
            keys,
            ents,
        })
    }

    /// Decodes a cached data block (for an iterator), sharing its bytes.
    pub(crate) fn decode_raw(raw: Arc<RawBlock>, path: &Path, offset: u64) -> Result<Block> {
        let (keys, ents) = Block::decode_entries(&raw.data, path, offset)?;
        Ok(Block {
            data: BlockBytes::Raw(raw),
            keys,
            ents,
        })
    }

    fn decode_entries(data: &[u8], path: &Path, offset: u64) -> Result<(Vec<u8>, Vec<Ent>)> {
        let bad = |d: &str| Error::corruption(path, offset, format!("bad block: {d}"));
        let (_, entries_end) = restart_layout(data, &bad)?;
        let mut keys: Vec<u8> = Vec::with_capacity(entries_end);
        let mut ents = Vec::new();
        let mut r = Reader::new(&data[..entries_end]);
        let mut prev: (usize, usize) = (0, 0);
        while !r.is_empty() {
            let shared = r.varint_usize().ok_or_else(|| bad("entry header"))?;
            let non_shared = r.varint_usize().ok_or_else(|| bad("entry header"))?;
            let vlen = r.varint_usize().ok_or_else(|| bad("entry header"))?;
            if shared > prev.1 {
                return Err(bad("shared prefix longer than previous key"));
            }
            let delta = r.bytes(non_shared).ok_or_else(|| bad("key past end"))?;
            let v_off = r.pos();
            r.bytes(vlen).ok_or_else(|| bad("value past end"))?;
            let k_off = keys.len();
            keys.extend_from_within(prev.0..prev.0 + shared);
            keys.extend_from_slice(delta);
            let k_len = shared + non_shared;
            if decode_ikey(&keys[k_off..k_off + k_len]).is_none() {
                return Err(bad("malformed internal key"));
            }
            ents.push(Ent {
                k_off: k_off as u32,
                k_len: k_len as u32,
                v_off: v_off as u32,
                v_len: vlen as u32,
            });
            prev = (k_off, k_len);
        }
        Ok((keys, ents))
    }

    pub(crate) fn len(&self) -> usize {
        self.ents.len()
    }
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        match self.ents.get(i) {
            Some(e) => self
                .keys
                .get(e.k_off as usize..(e.k_off + e.k_len) as usize)
                .unwrap_or(&[]),
            None => &[],
        }
    }
    pub(crate) fn value(&self, i: usize) -> &[u8] {
        match self.ents.get(i) {
            Some(e) => self
                .data
                .get()
                .get(e.v_off as usize..(e.v_off as usize + e.v_len as usize))
                .unwrap_or(&[]),
            None => &[],
        }
    }
    fn cmp_at(&self, i: usize, user: &[u8], seq: u64) -> Ordering {
        match decode_ikey(self.key(i)) {
            Some((u, s, _)) => compare_parts(u, s, user, seq),
            None => Ordering::Greater,
        }
    }
    /// First index with key >= (user, seq); `len()` if none.
    pub(crate) fn lower_bound(&self, user: &[u8], seq: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_at(mid, user, seq) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
    /// First index with key > (user, seq).
    pub(crate) fn upper_bound(&self, user: &[u8], seq: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_at(mid, user, seq) != Ordering::Greater {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}
