//! Definition versions of a table's stored columns: which columns, in which order, a
//! row written under each version holds (instant ADD / DROP / reorder of columns, as
//! InnoDB's instant ALTER: no row is rewritten, a row is read through the version it
//! was written with).
//!
//! A column is named by a column id that stays with it across versions (RENAME, a
//! move, a change to NULL keep it); DROP COLUMN forgets it, ADD COLUMN takes a new one
//! (so `DROP COLUMN b, ADD b INT` makes a new column: the old rows' `b` is not read as
//! the new one). The shim's row format (`handler-shim/row_codec.h`) writes the version
//! into every row and per column a length, so the columns of a version the current
//! definition no longer has can be stepped over. Ids stay below [`MAX_COLUMN_ID`]: they
//! are two bytes of the key of an external BLOB/TEXT value.
//!
//! ## Format
//! Kept in the table's catalog entry (`TableMeta` version 3, `catalog.rs`), after the
//! version 2 fields, so it changes in the same transaction as the index list:
//!
//! ```text
//! u32 LE current version, u32 LE next column id, u32 LE number of versions,
//! then per version (ascending): u32 LE version, u32 LE number of columns,
//!      then per stored column (in the order the row stores them):
//!      u32 LE column id, u8 flags (bit 0: BLOB/TEXT, whose value may be external)
//! ```
//!
//! Every version is kept: a REPEATABLE READ snapshot older than an OPTIMIZE TABLE can
//! still read rows of an old version. A table whose entry has no columns (created
//! before versions existed) has rows in the older formats and changes columns in place
//! only by adding them last.
use crate::status::{FfiError, FfiResult, Status};

/// The column may hold a BLOB/TEXT value stored outside the row.
pub const COLUMN_BLOB: u8 = 1;

/// Column ids are below this (two bytes in external value keys).
pub const MAX_COLUMN_ID: u32 = 0xFFFF;

/// An ADD COLUMN of `tdb_index_build_set_columns`: the column is new.
pub const NEW_COLUMN: u32 = u32::MAX;

/// One stored column of a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredColumn {
    pub id: u32,
    pub flags: u8,
}

/// The column versions of one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnVersions {
    pub current: u32,
    pub next_id: u32,
    /// (version, its stored columns), ascending by version; the last is `current`.
    pub versions: Vec<(u32, Vec<StoredColumn>)>,
}

fn invalid(what: String) -> FfiError {
    FfiError::new(Status::Invalid, what)
}

impl ColumnVersions {
    /// Version 1 of a new table.
    pub fn initial(columns: Vec<StoredColumn>) -> FfiResult<ColumnVersions> {
        let mut seen = std::collections::HashSet::new();
        for c in &columns {
            if c.id >= MAX_COLUMN_ID || !seen.insert(c.id) {
                return Err(invalid(format!("column id {} invalid or repeated", c.id)));
            }
        }
        let next_id = columns.iter().map(|c| c.id + 1).max().unwrap_or(0);
        Ok(ColumnVersions {
            current: 1,
            next_id,
            versions: vec![(1, columns)],
        })
    }

    /// The stored columns of the current version.
    pub fn current_columns(&self) -> &[StoredColumn] {
        self.versions.last().map_or(&[], |(_, c)| c.as_slice())
    }

    /// The next version: `sources[i]` = (the position among the current version's
    /// stored columns of the new version's i-th stored column, or [`NEW_COLUMN`];
    /// its flags).
    pub fn derive(&self, sources: &[(u32, u8)]) -> FfiResult<ColumnVersions> {
        let cur = self.current_columns();
        let mut next_id = self.next_id;
        let mut used = std::collections::HashSet::new();
        let mut columns = Vec::with_capacity(sources.len());
        for &(src, flags) in sources {
            let id = if src == NEW_COLUMN {
                if next_id >= MAX_COLUMN_ID {
                    return Err(FfiError::new(
                        Status::Invalid,
                        "the table has had too many columns added: rebuild it (OPTIMIZE TABLE \
                         does not; ALTER TABLE ... FORCE does)",
                    ));
                }
                next_id += 1;
                next_id - 1
            } else {
                let old = cur
                    .get(src as usize)
                    .ok_or_else(|| invalid(format!("no stored column {src}")))?;
                if !used.insert(src) {
                    return Err(invalid(format!("stored column {src} used twice")));
                }
                old.id
            };
            columns.push(StoredColumn { id, flags });
        }
        let current = self
            .current
            .checked_add(1)
            .ok_or_else(|| invalid("too many column versions".into()))?;
        let mut versions = self.versions.clone();
        versions.push((current, columns));
        Ok(ColumnVersions {
            current,
            next_id,
            versions,
        })
    }

    /// The versions an empty table needs (TRUNCATE): only the current one.
    pub fn only_current(&self) -> ColumnVersions {
        ColumnVersions {
            current: self.current,
            next_id: self.next_id,
            versions: self.versions.last().cloned().into_iter().collect(),
        }
    }

    pub fn encode_into(&self, v: &mut Vec<u8>) {
        v.extend_from_slice(&self.current.to_le_bytes());
        v.extend_from_slice(&self.next_id.to_le_bytes());
        v.extend_from_slice(&(self.versions.len() as u32).to_le_bytes());
        for (version, cols) in &self.versions {
            v.extend_from_slice(&version.to_le_bytes());
            v.extend_from_slice(&(cols.len() as u32).to_le_bytes());
            for c in cols {
                v.extend_from_slice(&c.id.to_le_bytes());
                v.push(c.flags);
            }
        }
    }

    /// Decodes the section at the start of `bytes`; None if it is damaged or
    /// does not end exactly at the end of `bytes`.
    pub fn decode(bytes: &[u8]) -> Option<ColumnVersions> {
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
        };
        let current = u32_at(0)?;
        let next_id = u32_at(4)?;
        let n = u32_at(8)? as usize;
        let mut at = 12usize;
        let mut versions = Vec::new();
        for _ in 0..n {
            let version = u32_at(at)?;
            let count = u32_at(at + 4)? as usize;
            at += 8;
            let mut cols = Vec::with_capacity(count.min(4096));
            for _ in 0..count {
                let id = u32_at(at)?;
                let flags = *bytes.get(at + 4)?;
                at += 5;
                cols.push(StoredColumn { id, flags });
            }
            versions.push((version, cols));
        }
        let ascending = versions.windows(2).all(|w| w[0].0 < w[1].0);
        if at != bytes.len() || !ascending || versions.last().map(|v| v.0) != Some(current) {
            return None;
        }
        Some(ColumnVersions {
            current,
            next_id,
            versions,
        })
    }

    /// The form the shim reads (`tdb_table_columns`): current version, number of
    /// versions, then per version: version, number of columns, (id, flags) each.
    pub fn flat(&self) -> Vec<u32> {
        let mut v = vec![self.current, self.versions.len() as u32];
        for (version, cols) in &self.versions {
            v.push(*version);
            v.push(cols.len() as u32);
            for c in cols {
                v.push(c.id);
                v.push(u32::from(c.flags));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(ids: &[u32]) -> Vec<StoredColumn> {
        ids.iter()
            .map(|&id| StoredColumn { id, flags: 0 })
            .collect()
    }

    #[test]
    fn derive_keeps_ids_of_kept_columns_and_numbers_new_ones() {
        let v1 = ColumnVersions::initial(cols(&[0, 1, 2])).expect("initial");
        // DROP COLUMN b (position 1), ADD b (new) last, move c first
        let v2 = v1
            .derive(&[(2, 0), (0, 0), (NEW_COLUMN, COLUMN_BLOB)])
            .expect("derive");
        assert_eq!(v2.current, 2);
        assert_eq!(
            v2.current_columns(),
            &[
                StoredColumn { id: 2, flags: 0 },
                StoredColumn { id: 0, flags: 0 },
                StoredColumn {
                    id: 3,
                    flags: COLUMN_BLOB
                }
            ]
        );
        assert_eq!(v2.versions.len(), 2);
        let mut bytes = Vec::new();
        v2.encode_into(&mut bytes);
        assert_eq!(ColumnVersions::decode(&bytes), Some(v2.clone()));
        assert_eq!(ColumnVersions::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(v2.only_current().versions.len(), 1);
        assert!(v2.derive(&[(0, 0), (0, 0)]).is_err());
        assert!(v2.derive(&[(3, 0)]).is_err());
    }
}
