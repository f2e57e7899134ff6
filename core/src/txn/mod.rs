//! Transactions: the write set, its spill to disk, and row locks.
//!
//! Owns: the `Txn` handle and its write set, savepoints and iterators
//! (`transaction`); spilling a large write set to sorted runs on disk
//! (`spill`); the lock manager with its wait-for graph (`lock`).
//!
//! May use: `memtable` (a write set is a memtable), `table` (spilled runs are
//! tables), `version`, `journal`, the foundation modules; and, the one arrow
//! up, `db::database::DbInner` through named methods only: a `Txn` reads,
//! commits and resolves 2PC through the database that began it.

pub(crate) mod lock;
pub(crate) mod spill;
pub(crate) mod transaction;
