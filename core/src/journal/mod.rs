//! The journal: the write-ahead log and the batch encoding of its records.
//!
//! Owns: WAL segment files (`<n>.log`), their CRC framing, group-commit
//! writing and replay (`wal`); the encoding of one commit's operations as a
//! WAL payload (`batch`). Formats are documented at the top of each file.
//!
//! May use: the foundation modules (`coding`, `error`, `fsutil`, `key`).
//! Nothing else of the engine: the version set and the database read the
//! journal, never the other way round.

pub(crate) mod batch;
pub(crate) mod wal;
