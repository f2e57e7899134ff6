//! Command line, in mariadb-backup's shape (`--backup --target-dir=DIR`, ...).
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Backup,
    Prepare,
    CopyBack,
}

/// How to reach the server: passed to both `mariadb` and `mariadb-backup`.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    pub defaults_file: Option<String>,
    pub socket: Option<String>,
    pub host: Option<String>,
    pub port: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
}

impl Connection {
    /// Options for the `mariadb` client and `mariadb-backup` (the defaults file
    /// first, as both require). The password goes through the environment.
    pub fn client_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(f) = &self.defaults_file {
            v.push(format!("--defaults-file={f}"));
        }
        for (name, val) in [
            ("socket", &self.socket),
            ("host", &self.host),
            ("port", &self.port),
            ("user", &self.user),
        ] {
            if let Some(val) = val {
                v.push(format!("--{name}={val}"));
            }
        }
        v
    }
}

#[derive(Debug)]
pub struct Args {
    pub mode: Mode,
    pub target_dir: PathBuf,
    pub datadir: Option<PathBuf>,
    pub conn: Connection,
    /// Extra options passed to mariadb-backup as they are (`--mariadb-backup-option=...`).
    pub mariadb_backup_options: Vec<String>,
}

pub const USAGE: &str = "\
usage: tidesdb-backup --backup    --target-dir=DIR [connection options]
       tidesdb-backup --prepare   --target-dir=DIR
       tidesdb-backup --copy-back --target-dir=DIR --datadir=DIR

Backs up a whole running MariaDB server: mariadb-backup copies InnoDB, Aria, MyISAM,
the system tables and the table definitions; the TidesDB checkpoint is taken at the
same commit point (BACKUP STAGE BLOCK_COMMIT). The binlog position and GTID of that
point are in DIR/tidesdb_backup_info.

connection options (as mariadb-backup's):
  --defaults-file=FILE  --socket=PATH  --host=HOST  --port=N  --user=NAME  --password=PW
other:
  --mariadb-backup-option=OPT   passed to mariadb-backup as it is (repeatable)
  --help";

pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut mode = None;
    let mut target_dir = None;
    let mut datadir = None;
    let mut conn = Connection::default();
    let mut extra = Vec::new();
    let set_mode = |m: Mode, mode: &mut Option<Mode>| -> Result<(), String> {
        match mode.replace(m) {
            Some(old) if old != m => {
                Err("give only one of --backup, --prepare, --copy-back".into())
            }
            _ => Ok(()),
        }
    };
    for a in argv {
        let (name, value) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let need =
            |v: Option<String>| v.ok_or_else(|| format!("{name} needs a value ({name}=...)"));
        match name {
            "--backup" => set_mode(Mode::Backup, &mut mode)?,
            "--prepare" => set_mode(Mode::Prepare, &mut mode)?,
            "--copy-back" => set_mode(Mode::CopyBack, &mut mode)?,
            "--target-dir" => target_dir = Some(PathBuf::from(need(value)?)),
            "--datadir" => datadir = Some(PathBuf::from(need(value)?)),
            "--defaults-file" => conn.defaults_file = Some(need(value)?),
            "--socket" | "-S" => conn.socket = Some(need(value)?),
            "--host" => conn.host = Some(need(value)?),
            "--port" => conn.port = Some(need(value)?),
            "--user" => conn.user = Some(need(value)?),
            "--password" => conn.password = Some(need(value)?),
            "--mariadb-backup-option" => extra.push(need(value)?),
            "--help" | "-h" => return Err(USAGE.to_string()),
            _ => return Err(format!("unknown option {a}\n{USAGE}")),
        }
    }
    let mode =
        mode.ok_or_else(|| format!("give one of --backup, --prepare, --copy-back\n{USAGE}"))?;
    let target_dir = target_dir.ok_or_else(|| "--target-dir=DIR is required".to_string())?;
    if mode == Mode::CopyBack && datadir.is_none() {
        return Err("--copy-back needs --datadir=DIR".into());
    }
    Ok(Args {
        mode,
        target_dir,
        datadir,
        conn,
        mariadb_backup_options: extra,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn mariadb_backup_shape() {
        let a = parse(&s(&[
            "--backup",
            "--target-dir=/b",
            "--defaults-file=/etc/my.cnf",
            "--user=root",
            "--password=pw",
            "--socket=/run/s",
        ]))
        .unwrap();
        assert_eq!(a.mode, Mode::Backup);
        assert_eq!(
            a.conn.client_args(),
            s(&[
                "--defaults-file=/etc/my.cnf",
                "--socket=/run/s",
                "--user=root"
            ])
        );
        assert!(parse(&s(&["--copy-back", "--target-dir=/b"])).is_err());
        assert!(parse(&s(&["--backup", "--prepare", "--target-dir=/b"])).is_err());
        assert!(parse(&s(&["--backup"])).is_err());
        assert!(parse(&s(&["--backup", "--target-dir"])).is_err());
        assert!(parse(&s(&["--backup", "--target-dir=/b", "--bogus"])).is_err());
    }
}
