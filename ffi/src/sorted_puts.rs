//! Puts buffered and written to a transaction in key order, per family.
//!
//! Entries that arrive in random key order (a secondary index's entries in row order
//! during a build, a statement's FULLTEXT postings keyed by word) each cost a full
//! skiplist search with a cache miss per step when put at once, in the write set and
//! again in the memtable. Sorted first, each lands next to the previous one.
use crate::status::{FfiError, FfiResult, Status};

/// (family slot, start in `bytes`, key length, value length) of one put.
type Entry = (u32, usize, u32, u32);

/// The buffered puts: keys and values one after the other in one allocation.
#[derive(Default)]
pub struct SortedPuts {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl SortedPuts {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of keys and values buffered.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Buffers a put of `key` = `value` into the family the caller numbers `slot`.
    pub fn push(&mut self, slot: u32, key: &[u8], value: &[u8]) -> FfiResult<()> {
        let (klen, vlen) = match (u32::try_from(key.len()), u32::try_from(value.len())) {
            (Ok(k), Ok(v)) => (k, v),
            _ => return Err(FfiError::new(Status::Invalid, "buffered entry too large")),
        };
        self.entries.push((slot, self.bytes.len(), klen, vlen));
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        Ok(())
    }

    /// Where the buffer ends now, for [`SortedPuts::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes.len())
    }

    /// Drops what was buffered after `mark`.
    pub fn truncate(&mut self, mark: (usize, usize)) {
        self.entries.truncate(mark.0);
        self.bytes.truncate(mark.1);
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
    }

    /// Hands every buffered put to `put` ordered by slot, then key, and empties the
    /// buffer. The sort is stable: of two puts of one key the later comes last, so
    /// it wins as it would have written in turn. On an error the buffer is kept.
    pub fn write_sorted(
        &mut self,
        mut put: impl FnMut(u32, &[u8], &[u8]) -> FfiResult<()>,
    ) -> FfiResult<()> {
        let bytes = &self.bytes;
        let key = |&(_, at, klen, _): &Entry| &bytes[at..at + klen as usize];
        self.entries
            .sort_by(|a, b| a.0.cmp(&b.0).then_with(|| key(a).cmp(key(b))));
        for &(slot, at, klen, vlen) in &self.entries {
            let mid = at + klen as usize;
            put(slot, &bytes[at..mid], &bytes[mid..mid + vlen as usize])?;
        }
        self.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn written_by_slot_then_key_later_put_of_a_key_last() {
        let mut b = SortedPuts::default();
        b.push(1, b"b", b"1").unwrap();
        b.push(0, b"z", b"2").unwrap();
        b.push(1, b"a", b"3").unwrap();
        let mark = b.mark();
        b.push(1, b"a", b"dropped").unwrap();
        b.truncate(mark);
        b.push(1, b"b", b"4").unwrap();
        let mut out = Vec::new();
        b.write_sorted(|s, k, v| {
            out.push((s, k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        let want: Vec<(u32, Vec<u8>, Vec<u8>)> = vec![
            (0, b"z".to_vec(), b"2".to_vec()),
            (1, b"a".to_vec(), b"3".to_vec()),
            (1, b"b".to_vec(), b"1".to_vec()),
            (1, b"b".to_vec(), b"4".to_vec()),
        ];
        assert_eq!(out, want);
        assert!(b.is_empty() && b.bytes() == 0);
    }
}
