//! Value log (key-value separation). Phase 2; see DESIGN.md.

use crate::error::{Error, Result};
use std::path::Path;

pub(crate) fn parse_vlog_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".vlog")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub(crate) fn read_pointer(dir: &Path, _ptr: &[u8]) -> Result<Vec<u8>> {
    Err(Error::corruption(
        dir,
        0,
        "value pointer found but value log is not supported",
    ))
}
