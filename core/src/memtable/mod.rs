//! The memtable: the in-memory write buffer of a column family (and the write
//! set of a transaction).
//!
//! Owns: the lock-free skiplist of internal keys (`skiplist`) and the
//! memtable around it: sizes, key filter, point index, iterator (`buffer`).
//!
//! May use: the foundation modules (`bytes`, `key`, `fxhash`, `iter`) and
//! `journal::wal::WalLoc` (a value may stay in the WAL and be referenced).

pub(crate) mod buffer;
pub(crate) mod skiplist;
