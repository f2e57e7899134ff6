//! `DIR/tidesdb_backup_info`: written last by `--backup` (its presence says the
//! backup is complete), read by `--prepare` and by scripts (seeding a replica).
//!
//! Text, one `key value` per line:
//! ```text
//! tidesdb-backup 1
//! binlog_file <file of the commit point, empty without a binlog>
//! binlog_position <offset in it>
//! gtid <gtid_current_pos at the commit point (mariadb-backup's)>
//! gtid_binlog_pos <the engine's record of @@gtid_binlog_pos there>
//! tidesdb_sequence <the engine's commit sequence of the checkpoint>
//! tidesdb_files <files under #tidesdb/>
//! tidesdb_bytes <their size>
//! seconds <duration of the backup>
//! ```
//! `--prepare` appends `prepared yes` once done.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::Failure;

pub const INFO_FILE: &str = "tidesdb_backup_info";
const MAGIC: &str = "tidesdb-backup 1";

/// Parses `key value` lines (after the first) into a map.
pub fn parse_pairs(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn read(dir: &Path) -> Result<BTreeMap<String, String>, Failure> {
    let p = dir.join(INFO_FILE);
    let text = std::fs::read_to_string(&p).map_err(|e| {
        Failure::new(format!(
            "{} is not a complete tidesdb-backup backup ({}: {e})",
            dir.display(),
            p.display()
        ))
    })?;
    if text.lines().next() != Some(MAGIC) {
        return Err(Failure::new(format!(
            "{} is not a tidesdb-backup info file",
            p.display()
        )));
    }
    Ok(parse_pairs(&text))
}

/// Writes the info file atomically (temp file, fsync, rename, fsync dir).
pub fn write(dir: &Path, pairs: &[(&str, String)]) -> Result<(), Failure> {
    let mut text = format!("{MAGIC}\n");
    for (k, v) in pairs {
        text.push_str(&format!("{k} {v}\n"));
    }
    write_atomic(dir, INFO_FILE, &text)
}

/// Appends one line (rewriting the file atomically).
pub fn append(dir: &Path, key: &str, value: &str) -> Result<(), Failure> {
    let p = dir.join(INFO_FILE);
    let mut text = std::fs::read_to_string(&p)
        .map_err(|e| Failure::new(format!("read {}: {e}", p.display())))?;
    text.push_str(&format!("{key} {value}\n"));
    write_atomic(dir, INFO_FILE, &text)
}

fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<(), Failure> {
    let tmp = dir.join(format!("{name}.tmp"));
    let err = |e: std::io::Error| Failure::new(format!("write {}: {e}", tmp.display()));
    {
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    std::fs::rename(&tmp, dir.join(name)).map_err(err)?;
    crate::files::sync_dir(dir)
}

/// `xtrabackup_binlog_info` of mariadb-backup: `file \t position [\t gtid]`.
pub fn mariadb_backup_binlog(dir: &Path) -> Option<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("xtrabackup_binlog_info")).ok()?;
    let mut f = text.trim_end().split('\t');
    let file = f.next()?.to_string();
    let pos = f.next()?.to_string();
    let gtid = f.next().unwrap_or("").to_string();
    Some((file, pos, gtid))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip() {
        let d = tempfile::tempdir().unwrap();
        assert!(read(d.path()).is_err());
        write(
            d.path(),
            &[("gtid", "0-1-5".into()), ("binlog_file", String::new())],
        )
        .unwrap();
        append(d.path(), "prepared", "yes").unwrap();
        let m = read(d.path()).unwrap();
        assert_eq!(m["gtid"], "0-1-5");
        assert_eq!(m["prepared"], "yes");
        std::fs::write(
            d.path().join("xtrabackup_binlog_info"),
            "b.000001\t846\t0-1-3\n",
        )
        .unwrap();
        assert_eq!(
            mariadb_backup_binlog(d.path()).unwrap(),
            ("b.000001".into(), "846".into(), "0-1-3".into())
        );
    }
}
