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

use crate::coding::{put_bytes, put_varint, Reader};
use crate::key::Kind;

pub(crate) const REC_COMMIT: u8 = 1;

#[derive(Clone, Debug)]
pub(crate) struct Op {
    pub cf: u64,
    pub kind: Kind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

pub(crate) fn encode_commit(out: &mut Vec<u8>, seq: u64, ops: &[Op]) {
    out.push(REC_COMMIT);
    put_varint(out, seq);
    put_varint(out, ops.len() as u64);
    for op in ops {
        put_varint(out, op.cf);
        out.push(op.kind as u8);
        put_bytes(out, &op.key);
        put_bytes(out, &op.value);
    }
}

pub(crate) enum Record {
    Commit { seq: u64, ops: Vec<Op> },
}

pub(crate) fn decode(p: &[u8]) -> Option<Record> {
    let mut r = Reader::new(p);
    match r.u8()? {
        REC_COMMIT => {
            let seq = r.varint()?;
            let n = r.varint_usize()?;
            let mut ops = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let cf = r.varint()?;
                let kind = Kind::from_u8(r.u8()?)?;
                let key = r.len_prefixed()?.to_vec();
                let value = r.len_prefixed()?.to_vec();
                ops.push(Op {
                    cf,
                    kind,
                    key,
                    value,
                });
            }
            if !r.is_empty() {
                return None;
            }
            Some(Record::Commit { seq, ops })
        }
        _ => None,
    }
}
