//! Compaction: leveled merging of tables, value log garbage collection, and
//! the pacing of background work against foreground reads.
//!
//! Owns: picking jobs, merging, relocation of values (`leveled`); the rate
//! limiter (`pacer`).
//!
//! May use: `table`, `vlog`, `version`, the foundation modules.

pub(crate) mod leveled;
pub(crate) mod pacer;
