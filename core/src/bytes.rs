//! [`SharedBytes`]: a value handed out without copying it.
//!
//! A value read from a value-log file lives in the buffer its read filled
//! (for an `O_DIRECT` read: a range of an aligned, wider buffer). The block
//! cache keeps that buffer, and every read of the value, from the cache or
//! from the file, hands out a reference to it: a large value is copied by
//! none of the engine, the FFI layer or the handler on its way to the server.

use std::ops::{Deref, Range};
use std::sync::Arc;

/// An immutable byte range of a reference-counted buffer. Cloning shares it.
#[derive(Clone)]
pub struct SharedBytes {
    buf: Buf,
    start: usize,
    end: usize,
}

#[derive(Clone)]
enum Buf {
    /// A read's buffer (possibly wider than the bytes, see `from_range`).
    Vec(Arc<Vec<u8>>),
    /// A memtable value.
    Slice(Arc<[u8]>),
}

impl Buf {
    fn bytes(&self) -> &[u8] {
        match self {
            Buf::Vec(v) => v,
            Buf::Slice(s) => s,
        }
    }
}

impl SharedBytes {
    /// Takes `v` as it is (no copy).
    pub fn from_vec(v: Vec<u8>) -> SharedBytes {
        let end = v.len();
        SharedBytes {
            buf: Buf::Vec(Arc::new(v)),
            start: 0,
            end,
        }
    }

    /// Shares `a` (no copy).
    pub(crate) fn from_arc(a: Arc<[u8]>) -> SharedBytes {
        let end = a.len();
        SharedBytes {
            buf: Buf::Slice(a),
            start: 0,
            end,
        }
    }

    /// `range` of `buf`; `None` if it is not inside it.
    pub(crate) fn from_range(buf: Vec<u8>, range: Range<usize>) -> Option<SharedBytes> {
        if range.start > range.end || range.end > buf.len() {
            return None;
        }
        Some(SharedBytes {
            buf: Buf::Vec(Arc::new(buf)),
            start: range.start,
            end: range.end,
        })
    }

    /// The sub-range `range` (relative to this one); `None` if outside it.
    pub(crate) fn slice(&self, range: Range<usize>) -> Option<SharedBytes> {
        if range.start > range.end || range.end > self.len() {
            return None;
        }
        Some(SharedBytes {
            buf: self.buf.clone(),
            start: self.start + range.start,
            end: self.start + range.end,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        // In range by construction (`from_range` / `slice` check it).
        &self.buf.bytes()[self.start..self.end]
    }

    /// The bytes as an owned vector: a read's buffer itself when this is its
    /// only holder and covers it whole, else a copy.
    pub fn into_vec(self) -> Vec<u8> {
        match self.buf {
            Buf::Vec(v) if self.start == 0 && self.end == v.len() => match Arc::try_unwrap(v) {
                Ok(v) => v,
                Err(shared) => shared.to_vec(),
            },
            b => b.bytes()[self.start..self.end].to_vec(),
        }
    }

    /// Memory held by the buffer (what a cache entry costs).
    pub(crate) fn allocated(&self) -> usize {
        match &self.buf {
            Buf::Vec(v) => v.capacity(),
            Buf::Slice(s) => s.len(),
        }
    }
}

impl Default for SharedBytes {
    fn default() -> SharedBytes {
        SharedBytes::from_vec(Vec::new())
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &SharedBytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SharedBytes {}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.len())
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(v: Vec<u8>) -> SharedBytes {
        SharedBytes::from_vec(v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ranges_share_and_unwrap() {
        let whole = SharedBytes::from_vec(b"hello world".to_vec());
        let p = whole.as_slice().as_ptr();
        let w = whole.slice(6..11).unwrap();
        assert_eq!(&*w, b"world");
        assert_eq!(w.as_ptr(), p.wrapping_add(6)); // shared, not copied
        assert!(whole.slice(6..12).is_none());
        #[allow(clippy::reversed_empty_ranges)] // the point of the check
        let backwards = 2..1;
        assert!(w.slice(backwards).is_none());
        assert_eq!(w.clone().into_vec(), b"world".to_vec());
        drop(w);
        // Sole holder of the whole buffer: no copy.
        let v = whole.into_vec();
        assert_eq!(v.as_ptr(), p);
        assert!(SharedBytes::from_range(vec![1, 2, 3], 1..4).is_none());
        let r = SharedBytes::from_range(vec![1, 2, 3], 1..3).unwrap();
        assert_eq!(&*r, &[2, 3]);
        assert_eq!(r.into_vec(), vec![2, 3]);
        assert!(SharedBytes::default().is_empty());
        let a: Arc<[u8]> = Arc::from(&b"memtable"[..]);
        let m = SharedBytes::from_arc(a.clone());
        assert_eq!(m.as_ptr(), a.as_ptr());
        assert_eq!(&*m.slice(3..8).unwrap(), b"table");
        assert_eq!(m.into_vec(), b"memtable".to_vec());
    }
}
