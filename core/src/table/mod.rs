//! Sorted table files (SST) and the block cache.
//!
//! Owns: the block format and its readers (`block`); the table format (blocks,
//! filter, footer), the builder that writes a table, the reader and iterator
//! that read one (`sst`); the shared block cache of blocks and value log
//! records (`cache`). `block` uses neither of the others; `cache` keeps blocks;
//! `sst` reads them through the cache.
//!
//! May use: the foundation modules (`value_ptr`, to count a table's pointers
//! into each value log file). Not the value log, the version set nor the
//! database.

pub(crate) mod block;
pub(crate) mod cache;
pub(crate) mod sst;
