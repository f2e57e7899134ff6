//! Little-endian fixed-width and LEB128 varint encoding, plus a bounds-checked
//! slice reader. Every decode returns `None`/`Err` on short input instead of
//! panicking.

pub(crate) fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

pub(crate) fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put_varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Bounds-checked cursor over a byte slice. All getters return `None` when the
/// input is too short or malformed; callers turn that into `Error::Corruption`.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift >= 64 {
                return None;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
            shift += 7;
        }
    }
    pub(crate) fn varint_usize(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }
    pub(crate) fn len_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = self.varint_usize()?;
        self.bytes(n)
    }
}

pub(crate) fn u32_at(buf: &[u8], pos: usize) -> Option<u32> {
    let b = buf.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn u64_at(buf: &[u8], pos: usize) -> Option<u64> {
    let b = buf.get(pos..pos.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// Adds to `h` a part of `len` bytes whose crc32 is `crc`, as if `h.update`
/// had read the part (a value checksummed once, reused by every record that
/// holds it: see `skiplist::ValueIn`).
pub(crate) fn crc32_combine(h: &mut crc32fast::Hasher, crc: u32, len: usize) {
    h.combine(&crc32fast::Hasher::new_with_initial_len(crc, len as u64));
}

pub(crate) fn crc32(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// 64-bit hash used by bloom filters and lock/caches sharding (FNV-1a followed
/// by a splitmix64 finalizer). Stable across versions: it is part of the table
/// file format (bloom filters).
pub(crate) fn hash64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= data.len() as u64;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip() {
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut buf = Vec::new();
        for v in vals {
            put_varint(&mut buf, v);
        }
        let mut r = Reader::new(&buf);
        for v in vals {
            assert_eq!(r.varint(), Some(v));
        }
        assert!(r.is_empty());
        assert_eq!(r.varint(), None);
    }

    #[test]
    fn reader_short_input() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.bytes(4), None);
        assert_eq!(r.bytes(3), Some(&[1u8, 2, 3][..]));
        let mut r = Reader::new(&[0xff; 11]);
        assert_eq!(r.varint(), None);
        let mut r = Reader::new(&[5, 1]);
        assert_eq!(r.len_prefixed(), None);
    }
}
