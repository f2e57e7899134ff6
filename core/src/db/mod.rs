//! The database: the `Db` facade and what assembles the concepts below it.
//!
//! Owns: open and recovery, flush, prepared (2PC) transactions, and the
//! statistics read through `Db::metrics` (`database`); the commit pipeline
//! (group commit into the WAL and memtables, durability, visibility in
//! order: `commit`); the background threads' shared
//! state: flush requests, shutdown, the last background failure
//! (`background`); checkpoints, a consistent image of the database at one
//! commit point (`checkpoint`).
//!
//! May use: every other folder of the crate; nothing below imports `db`.

mod background;
pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod database;
mod encryption;
mod statistics;
