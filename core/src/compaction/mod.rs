//! Compaction: leveled merging of tables, value log garbage collection, and
//! the pacing of background work against foreground reads.
//!
//! Owns: picking jobs, merging, relocation of values (`leveled`); finishing
//! the table and value log files a job writes, also used by flush and spilled
//! commits (`output`); the rate limiter and the retry backoff of background
//! jobs (`pacer`).
//!
//! May use: `table`, `vlog`, `version`, the foundation modules.

pub(crate) mod leveled;
pub(crate) mod output;
pub(crate) mod pacer;
