//! The value pointer: the value of a table or memtable entry of kind
//! `Kind::ValuePtr`, naming where in a value log file the real value is
//! (what the bytes named are, a record or bare value bytes, is the file's
//! format: see `vlog::file`).
//!
//! ```text
//! pointer = file_no: varint | offset: varint | len: varint | crc: u32 LE
//! ```
//!
//! Here, below both, so that tables (which count their pointers into each
//! value log file) and the value log share it without depending on each
//! other.

use crate::coding::{put_varint, Reader};

/// A decoded value pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ptr {
    pub file: u64,
    pub offset: u64,
    pub len: u64,
    pub crc: u32,
}

impl Ptr {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.file);
        put_varint(out, self.offset);
        put_varint(out, self.len);
        out.extend_from_slice(&self.crc.to_le_bytes());
    }
    pub(crate) fn decode(b: &[u8]) -> Option<Ptr> {
        let mut r = Reader::new(b);
        let file = r.varint()?;
        let offset = r.varint()?;
        let len = r.varint()?;
        let c = r.bytes(4)?;
        if !r.is_empty() {
            return None;
        }
        Some(Ptr {
            file,
            offset,
            len,
            crc: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
        })
    }
}
