//! Sorted table files (SST) and the block cache.
//!
//! Owns: the table format (data/index/filter blocks, footer), the builder that
//! writes a table, the reader and iterator that read one (`sst`); the shared
//! block cache of decoded blocks and value log records (`cache`).
//!
//! May use: the foundation modules (`value_ptr`, to count a table's pointers
//! into each value log file). Not the value log, the version set nor the
//! database.

pub(crate) mod cache;
pub(crate) mod sst;
