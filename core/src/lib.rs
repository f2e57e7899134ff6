//! # tidesdb-core
//!
//! An LSM-tree storage engine with MVCC transactions, built to sit under the
//! TidesDB MariaDB storage engine (through the `ffi` crate).
//!
//! * WAL with CRC-framed records, group commit, three sync modes ([`wal`](crate)).
//! * Per-column-family skiplist memtables, flushed to sorted table files with
//!   prefix-compressed blocks, bloom filters, optional zstd.
//! * Manifest of version edits + `CURRENT` pointer.
//! * Snapshot-isolated transactions with savepoints and first-committer-wins
//!   conflict detection.
//!
//! See `DESIGN.md` in the crate directory for the on-disk formats and the
//! concurrency design.

mod batch;
mod bytes;
mod cache;
mod coding;
mod compaction;
mod db;
mod error;
mod fsutil;
#[cfg(test)]
mod fuzz_tests;
mod fxhash;
mod iter;
mod key;
mod lock;
mod manifest;
mod memtable;
mod metrics;
mod options;
mod pacer;
#[cfg(test)]
mod read_cost_tests;
mod skiplist;
mod spill;
mod sst;
mod txn;
mod vlog;
mod wal;

pub use bytes::SharedBytes;
pub use db::{Cf, Db, DeferredPut, PreparedTxn, QuarantinedFile};
pub use error::{Error, Result};
pub use lock::{CancelHandle, LockMode};
pub use metrics::Metrics;
pub use options::{
    CfOptions, CfStats, CommitOptions, Compression, DbOptions, Isolation, IterOptions, SyncMode,
};
pub use pacer::DEFAULT_COMPACTION_RATE;
pub use txn::{GapLocker, Savepoint, Txn, TxnIter};

#[cfg(test)]
mod tests {
    use super::*;
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send + 'static>() {}
    #[test]
    fn marker_traits() {
        assert_send_sync::<Db>();
        assert_send_sync::<Cf>();
        assert_send::<Txn>();
        assert_send::<TxnIter>();
        assert_send_sync::<Error>();
    }
}
