//! # tidesdb-core
//!
//! An LSM-tree storage engine with MVCC transactions, built to sit under the
//! TidesDB MariaDB storage engine (through the `ffi` crate).
//!
//! * WAL with CRC-framed records, group commit, three sync modes (`journal::wal`).
//! * Per-column-family skiplist memtables, flushed to sorted table files with
//!   prefix-compressed blocks, bloom filters, optional zstd.
//! * Manifest of version edits + `CURRENT` pointer.
//! * Snapshot-isolated transactions with savepoints and first-committer-wins
//!   conflict detection.
//!
//! The on-disk formats and the concurrency design: `docs/design.md` (at the
//! repository's root). The map of this crate's folders and the direction of
//! their dependencies: `docs/ARCHITECTURE.md`, "Inside core/".

// Foundation: small modules every concept may use.
mod bytes;
mod coding;
mod crypto;
mod error;
mod fsutil;
mod fxhash;
mod io;
mod iter;
mod key;
mod metrics;
mod options;
mod value_ptr;

// Concepts, from the bottom up (a folder uses only the folders above it in
// this list, and the foundation); see docs/ARCHITECTURE.md.
mod compaction;
mod db;
mod export;
mod journal;
mod memtable;
mod table;
mod txn;
mod version;
mod vlog;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod read_cost_tests;

pub use bytes::SharedBytes;
pub use compaction::pacer::DEFAULT_COMPACTION_RATE;
pub use crypto::{KeyProvider, Keyring};
pub use db::checkpoint::{read_checkpoint_info, CheckpointInfo, CHECKPOINT_FILE};
pub use db::commit::DeferredPut;
pub use db::database::{Db, QuarantinedFile};
pub use db::prepared::PreparedTxn;
pub use error::{Error, Result};
pub use export::{ExportItem, ExportReader, ExportSummary, ExportWriter};
pub use fxhash::{FxBuildHasher, FxHashMap, FxHashSet, FxHasher};
pub use io::faults;
pub use metrics::Metrics;
pub use options::{
    CfOptions, CfStats, CommitOptions, Compression, DbOptions, Isolation, IterOptions, SyncMode,
};
pub use txn::lock::{CancelHandle, LockMode, LockWaitObserver, WaiterRole};
pub use txn::transaction::{GapLocker, Savepoint, Txn, TxnIter};
pub use version::levels::Cf;

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
