//! The version set: which files make up each column family, and its log.
//!
//! Owns: the manifest (version edits, snapshots of the state, `CURRENT`)
//! (`manifest`); the table files of a column family by level, the
//! super-version readers pin, the column family handle (`levels`); the live
//! snapshots whose versions compaction keeps (`snapshots`).
//!
//! May use: the foundation modules, `journal::wal` (the manifest reuses the
//! WAL framing), `memtable`, `table`, `vlog`.

pub(crate) mod levels;
pub(crate) mod manifest;
pub(crate) mod snapshots;
