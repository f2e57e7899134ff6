//! The static-library half of `ha_tidesdb.so`.
//!
//! This crate has no code of its own: it exists so that one `staticlib` carries the
//! C ABI of [`tidesdb_ffi`] (and through it the engine in `tidesdb-core`) together with
//! the C++ handler shim that `build.rs` compiles. `make plugin` links the archive into
//! the loadable plugin.
pub use tidesdb_ffi::*;
