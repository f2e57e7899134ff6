//! Internal keys: (user key, sequence number, kind), ordered by user key ascending
//! then sequence descending, so the newest version of a key comes first.
//!
//! ## Format
//! Encoded internal key (in table files): `user_key ++ tag` where `tag` is a
//! little-endian u64 = `seq << 8 | kind`. Kinds: 0 = delete (tombstone),
//! 1 = put, 2 = value pointer (value stored in the value log).

use std::cmp::Ordering;

pub(crate) const MAX_SEQ: u64 = (1 << 56) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Delete = 0,
    Put = 1,
    ValuePtr = 2,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            2 => Some(Kind::ValuePtr),
            _ => None,
        }
    }
}

#[inline]
pub(crate) fn compare_parts(ua: &[u8], sa: u64, ub: &[u8], sb: u64) -> Ordering {
    match ua.cmp(ub) {
        Ordering::Equal => sb.cmp(&sa),
        o => o,
    }
}

pub(crate) fn encode_ikey(buf: &mut Vec<u8>, user: &[u8], seq: u64, kind: Kind) {
    buf.extend_from_slice(user);
    buf.extend_from_slice(&((seq << 8) | kind as u64).to_le_bytes());
}

/// Splits an encoded internal key; `None` if malformed.
pub(crate) fn decode_ikey(k: &[u8]) -> Option<(&[u8], u64, Kind)> {
    let n = k.len().checked_sub(8)?;
    let tag = crate::coding::u64_at(k, n)?;
    let kind = Kind::from_u8((tag & 0xff) as u8)?;
    Some((&k[..n], tag >> 8, kind))
}

/// Smallest byte string strictly greater than `k` in the user-key order.
pub(crate) fn successor(k: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(k.len() + 1);
    v.extend_from_slice(k);
    v.push(0);
    v
}
