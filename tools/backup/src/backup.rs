//! `--backup`: mariadb-backup plus the TidesDB checkpoint at the same commit point.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::args::Args;
use crate::client::{quote, Session};
use crate::info::{self, parse_pairs};
use crate::{files, progress, Failure};

/// The engine's directory in a data directory (and in a backup).
pub const ENGINE_DIR: &str = "#tidesdb";
/// The checkpoint the server writes during our backup, inside the engine's
/// directory (same filesystem: hard links), removed once copied.
const CHECKPOINT_NAME: &str = "tidesdb-backup-checkpoint";
/// mariadb-backup runs per backup when it fails only because the redo log was
/// not written far enough in time.
const MARIADB_BACKUP_ATTEMPTS: u32 = 3;
const REDO_TOO_SLOW: &str = "Was only able to copy log";
/// The user lock that keeps a second tidesdb-backup of the same server out.
const LOCK_NAME: &str = "tidesdb-backup";

/// What to undo if the backup fails: nothing may be left that looks complete.
struct Undo<'a> {
    target: &'a Path,
    created_target: bool,
    checkpoint: Option<PathBuf>,
    armed: bool,
}

impl Undo<'_> {
    fn run(&mut self, session: Option<&mut Session>) {
        if self.armed {
            if let Some(s) = session {
                let _ = s.query("SET GLOBAL tidesdb_backup_checkpoint = ''");
            }
        }
        if let Some(c) = &self.checkpoint {
            let _ = std::fs::remove_dir_all(c);
            let _ = std::fs::remove_dir_all(c.with_extension("incomplete"));
        }
        // The whole target if we made it, else what we put into it.
        if self.created_target {
            let _ = std::fs::remove_dir_all(self.target);
        } else if let Ok(rd) = std::fs::read_dir(self.target) {
            for e in rd.flatten() {
                let p = e.path();
                let _ = if p.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
        progress(&format!(
            "removed the incomplete backup in {}",
            self.target.display()
        ));
    }
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let started = Instant::now();
    let target = &args.target_dir;
    if let Ok(mut rd) = std::fs::read_dir(target) {
        if rd.next().is_some() {
            return Err(Failure::new(format!(
                "--target-dir {} is not empty",
                target.display()
            )));
        }
    }
    let mut session = Session::connect(&args.conn)?;
    if session.value(&format!("SELECT GET_LOCK({}, 0)", quote(LOCK_NAME)))? != "1" {
        return Err(Failure::new(
            "another tidesdb-backup of this server is running (user lock 'tidesdb-backup' is held)",
        ));
    }
    let row = session.query("SELECT @@datadir, @@version, @@log_bin")?;
    let row = row.first().cloned().unwrap_or_default();
    let (datadir, version, log_bin) = match row.as_slice() {
        [d, v, l] => (PathBuf::from(d), v.clone(), l == "1"),
        _ => return Err(Failure::new("unexpected answer to SELECT @@datadir")),
    };
    let plugin = session.query(
        "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'TidesDB'",
    )?;
    if plugin.first().and_then(|r| r.first()).map(String::as_str) != Some("ACTIVE") {
        return Err(Failure::new(
            "the TidesDB engine is not loaded in this server (use mariadb-backup alone)",
        ));
    }
    progress(&format!(
        "server {version}, datadir {}{}",
        datadir.display(),
        if log_bin {
            ""
        } else {
            " (no binlog: the backup records no binlog position)"
        }
    ));
    let checkpoint = datadir.join(ENGINE_DIR).join(CHECKPOINT_NAME);
    let mut undo = Undo {
        target,
        created_target: !target.exists(),
        checkpoint: Some(checkpoint.clone()),
        armed: false,
    };
    match backup_steps(args, &mut session, &mut undo, &checkpoint, log_bin, started) {
        Ok(()) => Ok(()),
        Err(e) => {
            undo.run(Some(&mut session));
            Err(e)
        }
    }
}

fn backup_steps(
    args: &Args,
    session: &mut Session,
    undo: &mut Undo<'_>,
    checkpoint: &Path,
    log_bin: bool,
    started: Instant,
) -> Result<(), Failure> {
    let target = &args.target_dir;
    let path = checkpoint
        .to_str()
        .ok_or_else(|| Failure::new("the data directory's path is not UTF-8"))?;
    for attempt in 1..=MARIADB_BACKUP_ATTEMPTS {
        // A checkpoint left by a tidesdb-backup that died, or by the failed
        // attempt before (the user lock says no other backup runs).
        for stale in [
            checkpoint.to_path_buf(),
            checkpoint.with_extension("incomplete"),
        ] {
            if stale.exists() {
                progress(&format!("removing a stale checkpoint {}", stale.display()));
                std::fs::remove_dir_all(&stale)
                    .map_err(|e| Failure::new(format!("remove {}: {e}", stale.display())))?;
            }
        }
        if attempt > 1 {
            let _ = std::fs::remove_dir_all(target);
        }
        files::make_dir(target)?;
        session.query(&format!(
            "SET GLOBAL tidesdb_backup_checkpoint = {}",
            quote(path)
        ))?;
        undo.armed = true;
        progress("running mariadb-backup --backup (InnoDB, Aria, MyISAM, system tables, .frm)");
        let r = run_mariadb_backup(
            args,
            &[
                "--backup".into(),
                format!("--target-dir={}", target.display()),
            ],
        );
        // Consumed at mariadb-backup's BACKUP STAGE START, or disarmed here.
        session.query("SET GLOBAL tidesdb_backup_checkpoint = ''")?;
        undo.armed = false;
        match r {
            Ok(()) => break,
            // mariadb-backup gives up when the server has not yet written the
            // redo log up to the LSN it read under BLOCK_COMMIT within its wait
            // (seen on a loaded machine): the whole copy is taken again.
            Err(e) if e.0.contains(REDO_TOO_SLOW) && attempt < MARIADB_BACKUP_ATTEMPTS => {
                progress(&format!("mariadb-backup: {REDO_TOO_SLOW}...; trying again"));
            }
            Err(e) => return Err(e),
        }
    }

    // The checkpoint the server took at mariadb-backup's BACKUP STAGE END.
    let ck = tidesdb_core::read_checkpoint_info(checkpoint).map_err(|e| {
        Failure::new(format!(
            "the server wrote no TidesDB checkpoint at BACKUP STAGE END ({e}); see its error log"
        ))
    })?;
    let note_text = std::fs::read_to_string(checkpoint.join(tidesdb_core::CHECKPOINT_FILE))
        .map_err(|e| Failure::new(format!("read the checkpoint: {e}")))?;
    let note = parse_pairs(&note_text);
    let (mut bfile, mut bpos, mut gtid) = (String::new(), String::new(), String::new());
    if log_bin {
        let (f, p, g) = info::mariadb_backup_binlog(target).ok_or_else(|| {
            Failure::new("mariadb-backup wrote no xtrabackup_binlog_info although the binlog is on")
        })?;
        // The same commit point: the binlog position mariadb-backup read under
        // BLOCK_COMMIT is the one the engine saw at BACKUP STAGE END.
        let ours = (
            note.get("binlog_file").cloned().unwrap_or_default(),
            note.get("binlog_position").cloned().unwrap_or_default(),
        );
        if ours != (f.clone(), p.clone()) {
            return Err(Failure::new(format!(
                "the TidesDB checkpoint is at binlog {}:{} but mariadb-backup's copy at {f}:{p}: \
                 another backup ran at the same time",
                ours.0, ours.1
            )));
        }
        (bfile, bpos, gtid) = (f, p, g);
        progress(&format!("commit point: binlog {bfile}:{bpos}, GTID {gtid}"));
    }
    progress(&format!(
        "TidesDB checkpoint at sequence {} ({} files, {:.1} MiB, hard links)",
        ck.sequence,
        ck.files,
        ck.bytes as f64 / 1048576.0
    ));
    let engine_dst = target.join(ENGINE_DIR);
    // mariadb-backup may have made an empty #tidesdb/ (it looks like a database).
    if engine_dst.is_dir() {
        let leftover = std::fs::read_dir(&engine_dst)
            .map_err(|e| Failure::new(format!("list {}: {e}", engine_dst.display())))?
            .count();
        if leftover > 0 {
            return Err(Failure::new(format!(
                "mariadb-backup copied files into {}: unexpected",
                engine_dst.display()
            )));
        }
    }
    let (nfiles, nbytes) =
        files::copy_dir(checkpoint, &engine_dst, "copying the TidesDB checkpoint")?;
    std::fs::remove_dir_all(checkpoint)
        .map_err(|e| Failure::new(format!("remove {}: {e}", checkpoint.display())))?;
    undo.checkpoint = None;
    let secs = started.elapsed().as_secs_f64();
    info::write(
        target,
        &[
            ("binlog_file", bfile),
            ("binlog_position", bpos),
            ("gtid", gtid),
            (
                "gtid_binlog_pos",
                note.get("gtid_binlog_pos").cloned().unwrap_or_default(),
            ),
            ("tidesdb_sequence", ck.sequence.to_string()),
            ("tidesdb_files", nfiles.to_string()),
            ("tidesdb_bytes", nbytes.to_string()),
            ("seconds", format!("{secs:.1}")),
        ],
    )?;
    let _ = session.query(&format!("SELECT RELEASE_LOCK({})", quote(LOCK_NAME)));
    progress(&format!(
        "completed OK in {secs:.1} s: {} (restore: --prepare, then --copy-back)",
        target.display()
    ));
    Ok(())
}

/// Runs mariadb-backup with the connection options and `extra`, its log lines
/// passed on to stderr; fails if it does.
pub fn run_mariadb_backup(args: &Args, extra: &[String]) -> Result<(), Failure> {
    let mut cmd = Command::new("mariadb-backup");
    // --defaults-file must come first; the other connection options after the mode.
    let conn = args.conn.client_args();
    let (first, rest): (Vec<String>, Vec<String>) = conn
        .into_iter()
        .partition(|a| a.starts_with("--defaults-file="));
    cmd.args(first)
        .args(extra)
        .args(&args.mariadb_backup_options);
    if extra.iter().any(|a| a == "--backup") {
        cmd.args(rest);
        if let Some(pw) = &args.conn.password {
            cmd.arg(format!("--password={pw}"));
        }
    }
    cmd.stdout(Stdio::inherit()).stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure::new(format!("cannot run mariadb-backup: {e} (install the mariadb-backup package of the server's version)")))?;
    // The last lines that are not per-file progress: the error's context.
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("  mariadb-backup: {line}");
            if !line.contains("Copying ") && !line.trim_end().ends_with("...done") {
                if tail.len() == 3 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| Failure::new(format!("mariadb-backup: {e}")))?;
    if !status.success() {
        return Err(Failure::new(format!(
            "mariadb-backup {} failed ({status}):\n    {}",
            extra.first().map(String::as_str).unwrap_or(""),
            Vec::from(tail).join("\n    ")
        )));
    }
    Ok(())
}
