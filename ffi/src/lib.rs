//! The C ABI over `tidesdb-core`, declared in `include/tidesdb_ffi.h`.
//!
//! This crate is where MariaDB's world of tables, statements and connections meets the
//! engine's world of column families and transactions:
//!
//! - [`checkpoint`]: engine checkpoints for backups (the SQL interface and `tidesdb-backup`);
//! - [`catalog`]: table names (`./db/t1`) to column families, persisted in the engine
//!   itself, so CREATE / DROP / RENAME / TRUNCATE are atomic;
//! - [`columns`]: the definition versions of a table's stored columns (instant ALTER);
//! - [`trx`]: one transaction per connection, with a savepoint per statement so that a
//!   failing statement undoes only itself;
//! - [`table`]: per-handler table handles, atomic multi-index row changes, point reads;
//! - [`foreign_keys`]: FOREIGN KEY constraints: their catalog and the checks' probes;
//! - [`cursor`]: index cursors with the seek modes the handler's read modes need;
//! - [`stats`]: the engine's counters and the text of SHOW ENGINE TIDESDB STATUS;
//! - [`fulltext`]: FULLTEXT indexes answering as InnoDB: tokenizer, postings, parser, evaluation;
//! - [`spatial`]: SPATIAL indexes: Hilbert keys of MBR centres and window searches;
//! - [`status`]: status codes, the thread's last error message, and the guard that keeps
//!   every panic on this side of the boundary.
//!
//! Every `extern "C"` function here runs its body inside [`status::guard`] (or
//! [`status::guard_value`], directly or through a helper such as `with_trx`), so no
//! panic crosses into the server; pointers from the caller are checked for NULL and
//! never kept past the call. One exemption: `tdb_last_error` only reads this thread's
//! last message (it cannot panic, and a guard around it would overwrite that message).
pub mod catalog;
pub mod checkpoint;
pub mod columns;
pub mod cursor;
pub mod encryption;
pub mod engine;
pub mod foreign_keys;
pub mod fulltext;
pub mod index_build;
pub mod optimizer_stats;
pub mod pace;
pub mod rebuild;
pub mod sorted_puts;
pub mod spatial;
pub mod stats;
pub mod status;
pub mod table;
pub mod transport;
pub mod trx;
pub mod wsrep;

mod raw;
