//! The database: the `Db` facade and what assembles the concepts below it.
//!
//! Owns: the `Db` facade, column families, reads, memtable rotation and the
//! WAL lifecycle (`database`); opening: manifest recovery, WAL replay,
//! prepared transactions, adoption of WAL segments (`open`); flush and WAL
//! purge (`flush`); the commit of spilled write sets (`spilled`); prepared
//! (2PC) state (`prepared`); the background threads (`jobs`) and their
//! shared state: flush requests, shutdown, the last background failure
//! (`background`); the commit pipeline (group commit into the WAL and
//! memtables, durability, visibility in order: `commit`); statistics read
//! through `Db::metrics` (`statistics`); checkpoints, a consistent image of
//! the database at one commit point (`checkpoint`).
//!
//! May use: every other folder of the crate; nothing below imports `db`.

mod background;
pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod database;
mod encryption;
mod flush;
mod jobs;
mod open;
pub(crate) mod prepared;
mod spilled;
mod statistics;
