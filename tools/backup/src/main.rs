//! `tidesdb-backup`: a hot, consistent backup of a whole MariaDB server whose
//! tables are in TidesDB and in the server's own engines.
//!
//! `--backup` runs `mariadb-backup` (InnoDB, Aria, MyISAM, system tables, table
//! definitions) after arming the engine's backup checkpoint
//! (`SET GLOBAL tidesdb_backup_checkpoint`): the engine takes it at
//! mariadb-backup's `BACKUP STAGE END`, while `BLOCK_COMMIT` still holds every
//! commit in every engine (handler-shim/backup.cc), inside the data directory
//! (hard links). The tool checks that the checkpoint names the same binlog
//! position as mariadb-backup's `xtrabackup_binlog_info`, copies it into
//! `DIR/#tidesdb/`, removes it, and writes `DIR/tidesdb_backup_info` last: a
//! backup without that file is incomplete and `--prepare` refuses it.
//! `--prepare` runs `mariadb-backup --prepare` and replays the TidesDB log into
//! its tables; `--copy-back` runs `mariadb-backup --copy-back` (which copies
//! `#tidesdb/` too) and sets the engine files' modes.
mod args;
mod backup;
mod client;
mod files;
mod info;
mod restore;

use std::time::SystemTime;

/// An error that ends the run, with the text the user sees.
#[derive(Debug)]
pub struct Failure(pub String);

impl Failure {
    pub fn new(text: impl Into<String>) -> Failure {
        Failure(text.into())
    }
}

/// One progress line on stderr, with the time of day (UTC).
pub fn progress(text: &str) {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    eprintln!("[{h:02}:{m:02}:{s:02}] tidesdb-backup: {text}");
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // As every command-line tool: --help prints the usage on stdout and succeeds
    // (the Debian package's manual page is made from it).
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{}", args::USAGE);
        return;
    }
    let args = match args::parse(&argv) {
        Ok(a) => a,
        Err(text) => {
            eprintln!("{text}");
            std::process::exit(2);
        }
    };
    let r = match args.mode {
        args::Mode::Backup => backup::run(&args),
        args::Mode::Prepare => restore::prepare(&args),
        args::Mode::CopyBack => restore::copy_back(&args),
    };
    if let Err(Failure(text)) = r {
        progress(&format!("FAILED: {text}"));
        std::process::exit(1);
    }
}
