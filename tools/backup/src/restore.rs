//! `--prepare` and `--copy-back`.
use std::path::Path;

use crate::args::Args;
use crate::backup::{run_mariadb_backup, ENGINE_DIR};
use crate::info::{self, INFO_FILE};
use crate::{files, progress, Failure};

/// mariadb-backup's prepare (InnoDB redo applied), then the TidesDB log replayed
/// into its tables (the engine's recovery, run here once instead of at the
/// server's first start; it also proves the checkpoint readable).
pub fn prepare(args: &Args) -> Result<(), Failure> {
    let dir = &args.target_dir;
    let meta = info::read(dir)?;
    progress("running mariadb-backup --prepare");
    run_mariadb_backup(
        args,
        &[
            "--prepare".into(),
            format!("--target-dir={}", dir.display()),
        ],
    )?;
    let engine = dir.join(ENGINE_DIR);
    progress(&format!(
        "replaying the TidesDB log in {}",
        engine.display()
    ));
    let opts = tidesdb_core::DbOptions::default();
    let db = tidesdb_core::Db::open(&engine, opts).map_err(|e| {
        Failure::new(format!(
            "open the TidesDB checkpoint {}: {e}",
            engine.display()
        ))
    })?;
    let seq = db.latest_sequence();
    let damaged = db.quarantined_files();
    db.close()
        .map_err(|e| Failure::new(format!("close the TidesDB checkpoint: {e}")))?;
    if !damaged.is_empty() {
        return Err(Failure::new(format!(
            "{} TidesDB table files of the backup are damaged",
            damaged.len()
        )));
    }
    if let Some(want) = meta
        .get("tidesdb_sequence")
        .and_then(|s| s.parse::<u64>().ok())
    {
        if seq < want {
            return Err(Failure::new(format!(
                "the TidesDB checkpoint recovered to sequence {seq}, below its {want}"
            )));
        }
    }
    info::append(dir, "prepared", "yes")?;
    progress(&format!("prepared OK: {}", dir.display()));
    Ok(())
}

pub fn copy_back(args: &Args) -> Result<(), Failure> {
    let dir = &args.target_dir;
    let Some(datadir) = &args.datadir else {
        return Err(Failure::new("--copy-back needs --datadir=DIR"));
    };
    let meta = info::read(dir)?;
    if meta.get("prepared").map(String::as_str) != Some("yes") {
        return Err(Failure::new(format!(
            "{} is not prepared: run tidesdb-backup --prepare --target-dir={} first",
            dir.display(),
            dir.display()
        )));
    }
    progress(&format!(
        "running mariadb-backup --copy-back into {}",
        datadir.display()
    ));
    run_mariadb_backup(
        args,
        &[
            "--copy-back".into(),
            format!("--target-dir={}", dir.display()),
            format!("--datadir={}", datadir.display()),
        ],
    )?;
    // mariadb-backup copies every file of the backup, #tidesdb/ and ours too.
    let engine = datadir.join(ENGINE_DIR);
    if !engine.join("CURRENT").is_file() {
        return Err(Failure::new(format!(
            "{} has no TidesDB files after the copy",
            engine.display()
        )));
    }
    for name in [INFO_FILE, tidesdb_core::CHECKPOINT_FILE] {
        let p = if name == INFO_FILE {
            datadir.join(name)
        } else {
            engine.join(name)
        };
        remove_if_there(&p)?;
    }
    files::fix_modes(&engine)?;
    progress(&format!(
        "copied back OK into {}; start the server on it{}",
        datadir.display(),
        meta.get("gtid")
            .filter(|g| !g.is_empty())
            .map(|g| format!(" (a replica: SET GLOBAL gtid_slave_pos='{g}')"))
            .unwrap_or_default()
    ));
    Ok(())
}

fn remove_if_there(p: &Path) -> Result<(), Failure> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::new(format!("remove {}: {e}", p.display()))),
    }
}
