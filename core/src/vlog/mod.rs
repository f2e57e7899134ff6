//! The value log: key-value separation for large values.
//!
//! Owns: value log files (`<n>.vlog`), their record and pointer formats, the
//! writer, the reader, the set of live value log files and the adoption of a
//! WAL segment as a value log (`file`). Garbage accounting is done by
//! compaction (which knows which pointers it drops).
//!
//! May use: the foundation modules, `table::cache` (records are cached with
//! table blocks), `journal::wal` (segment paths, writeback size).

pub(crate) mod file;
