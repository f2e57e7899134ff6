//! Logical WAL records.
//!
//! ## Format
//! Payload of one WAL physical record (see `wal.rs` for the framing):
//!
//! ```text
//! type: u8 = 1 (commit)
//! seq: varint                 -- every write of the commit carries this sequence
//! count: varint
//! count * { cf_id: varint, kind: u8 (0 delete, 1 put, 2 value pointer),
//!           key: varint len ++ bytes, value: varint len ++ bytes (empty for delete) }
//! ```
//! A commit touching several column families is one record, so replay applies
//! all of it or nothing.
//!
//! Two-phase commit records (XA):
//!
//! ```text
//! type 2 (prepare):           xid: varint len ++ bytes, count: varint, count * op (as above)
//! type 3 (commit prepared):   seq: varint, xid: varint len ++ bytes
//! type 4 (rollback prepared): xid: varint len ++ bytes
//! ```
//! A prepare record carries the whole write set but no sequence; it is
//! invisible until a type-3 record with the same xid gives it its commit
//! sequence (replay then applies the prepared ops at that sequence). A xid
//! prepared twice (re-logged at open after a crash) denotes the same write set.
//!
//! The bytes are the same whichever way a record is assembled: the commit
//! leader encodes into a `wal::Frames`, which keeps values of at least
//! [`OUT_OF_LINE`] bytes out of its buffer (they are written with
//! `pwritev` straight from the write set's shared buffers, and checksummed in
//! place), other paths into a plain `Vec<u8>`.

use crate::coding::{put_bytes, put_varint, Reader};
use crate::key::Kind;
use std::sync::Arc;

/// Where records are encoded: small fields go to `buf()`, values through
/// `value` (which may keep a large one out of line, see `wal::Frames`).
pub(crate) trait Sink {
    fn buf(&mut self) -> &mut Vec<u8>;
    /// Appends `v` length-prefixed (`varint len ++ bytes`); `crc` is the
    /// crc32 of `v` if known (a checksumming sink need not read `v` again).
    fn value(&mut self, v: &Arc<[u8]>, crc: Option<u32>);
}

impl Sink for Vec<u8> {
    fn buf(&mut self) -> &mut Vec<u8> {
        self
    }
    fn value(&mut self, v: &Arc<[u8]>, _crc: Option<u32>) {
        put_bytes(self, v);
    }
}

pub(crate) const REC_COMMIT: u8 = 1;
pub(crate) const REC_PREPARE: u8 = 2;
pub(crate) const REC_COMMIT_PREPARED: u8 = 3;
pub(crate) const REC_ROLLBACK_PREPARED: u8 = 4;

#[derive(Clone, Debug)]
pub(crate) struct Op {
    pub cf: u64,
    pub kind: Kind,
    pub key: Vec<u8>,
    /// Shared with the write set's memtable and, after the commit, the column
    /// family's memtable (a value is copied once, when it is written).
    pub value: Arc<[u8]>,
    /// crc32 of `value` if computed when it was written (see
    /// `skiplist::ValueIn`); not part of the encoding.
    pub crc: Option<u32>,
}

/// Values at least this long are kept out of a `wal::Frames` buffer (written
/// from their own buffer); shorter ones are cheaper to copy than to give an
/// iovec of their own.
pub(crate) const OUT_OF_LINE: usize = 4096;

/// Upper bound of the bytes `ops` encode into a `wal::Frames` buffer (values
/// kept out of line not counted), for reserving capacity.
pub(crate) fn encoded_size<'a>(ops: impl Iterator<Item = &'a Op>) -> usize {
    ops.map(|o| {
        let v = if o.value.len() >= OUT_OF_LINE {
            0
        } else {
            o.value.len()
        };
        o.key.len() + v + 22
    })
    .sum::<usize>()
        + 24
}

fn encode_ops<'a>(out: &mut impl Sink, ops: impl ExactSizeIterator<Item = &'a Op>) {
    put_varint(out.buf(), ops.len() as u64);
    for op in ops {
        let b = out.buf();
        put_varint(b, op.cf);
        b.push(op.kind as u8);
        put_bytes(b, &op.key);
        out.value(&op.value, op.crc);
    }
}

pub(crate) fn encode_commit<'a>(
    out: &mut impl Sink,
    seq: u64,
    ops: impl ExactSizeIterator<Item = &'a Op>,
) {
    let b = out.buf();
    b.push(REC_COMMIT);
    put_varint(b, seq);
    encode_ops(out, ops);
}

pub(crate) fn encode_prepare<'a>(
    out: &mut impl Sink,
    xid: &[u8],
    ops: impl ExactSizeIterator<Item = &'a Op>,
) {
    let b = out.buf();
    b.push(REC_PREPARE);
    put_bytes(b, xid);
    encode_ops(out, ops);
}

pub(crate) fn encode_commit_prepared(out: &mut impl Sink, seq: u64, xid: &[u8]) {
    let out = out.buf();
    out.push(REC_COMMIT_PREPARED);
    put_varint(out, seq);
    put_bytes(out, xid);
}

pub(crate) fn encode_rollback_prepared(out: &mut impl Sink, xid: &[u8]) {
    let out = out.buf();
    out.push(REC_ROLLBACK_PREPARED);
    put_bytes(out, xid);
}

pub(crate) enum Record {
    Commit { seq: u64, ops: Vec<Op> },
    Prepare { xid: Vec<u8>, ops: Vec<Op> },
    CommitPrepared { seq: u64, xid: Vec<u8> },
    RollbackPrepared { xid: Vec<u8> },
}

fn decode_ops(r: &mut Reader<'_>) -> Option<Vec<Op>> {
    let n = r.varint_usize()?;
    let mut ops = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let cf = r.varint()?;
        let kind = Kind::from_u8(r.u8()?)?;
        let key = r.len_prefixed()?.to_vec();
        let value = Arc::from(r.len_prefixed()?);
        ops.push(Op {
            cf,
            kind,
            key,
            value,
            crc: None,
        });
    }
    Some(ops)
}

/// Decodes one WAL payload; `None` if malformed (never panics).
pub(crate) fn decode(p: &[u8]) -> Option<Record> {
    let mut r = Reader::new(p);
    let rec = match r.u8()? {
        REC_COMMIT => {
            let seq = r.varint()?;
            let ops = decode_ops(&mut r)?;
            Record::Commit { seq, ops }
        }
        REC_PREPARE => {
            let xid = r.len_prefixed()?.to_vec();
            let ops = decode_ops(&mut r)?;
            Record::Prepare { xid, ops }
        }
        REC_COMMIT_PREPARED => {
            let seq = r.varint()?;
            let xid = r.len_prefixed()?.to_vec();
            Record::CommitPrepared { seq, xid }
        }
        REC_ROLLBACK_PREPARED => Record::RollbackPrepared {
            xid: r.len_prefixed()?.to_vec(),
        },
        _ => return None,
    };
    if !r.is_empty() {
        return None;
    }
    Some(rec)
}
