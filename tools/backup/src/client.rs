//! One session with the server through the `mariadb` command-line client, kept
//! open (user locks such as GET_LOCK live as long as the session).
//!
//! Each query is followed by a marker `SELECT`; its row ends the query's output.
//! An SQL error ends the client (no `--force`): the error is the client's stderr.
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::args::Connection;
use crate::Failure;

pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    queries: u64,
}

impl Session {
    pub fn connect(conn: &Connection) -> Result<Session, Failure> {
        let mut cmd = Command::new("mariadb");
        cmd.args(conn.client_args())
            .args(["--batch", "--raw", "--skip-column-names", "--unbuffered"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(pw) = &conn.password {
            cmd.env("MYSQL_PWD", pw);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Failure::new(format!("cannot run the mariadb client: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Failure::new("the mariadb client has no pipes"));
        };
        let mut s = Session {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            queries: 0,
        };
        s.query("SELECT 1")
            .map_err(|e| Failure::new(format!("cannot connect to the server: {}", e.0)))?;
        Ok(s)
    }

    /// Runs one statement; returns its rows (tab-separated columns).
    pub fn query(&mut self, sql: &str) -> Result<Vec<Vec<String>>, Failure> {
        self.queries += 1;
        let marker = format!("--tidesdb-backup-end-{}--", self.queries);
        let text = format!("{sql};\nSELECT '{marker}';\n");
        if self.stdin.write_all(text.as_bytes()).is_err() || self.stdin.flush().is_err() {
            return Err(self.died(sql));
        }
        let mut rows = Vec::new();
        loop {
            let mut line = String::new();
            match self.stdout.read_line(&mut line) {
                Ok(0) | Err(_) => return Err(self.died(sql)),
                Ok(_) => {}
            }
            let line = line.trim_end_matches('\n');
            if line == marker {
                return Ok(rows);
            }
            rows.push(line.split('\t').map(str::to_string).collect());
        }
    }

    /// The first column of the first row.
    pub fn value(&mut self, sql: &str) -> Result<String, Failure> {
        let rows = self.query(sql)?;
        rows.first()
            .and_then(|r| r.first())
            .cloned()
            .ok_or_else(|| Failure::new(format!("no result from: {sql}")))
    }

    fn died(&mut self, sql: &str) -> Failure {
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let err = err.trim();
        let err = if err.is_empty() {
            "the connection to the server was lost"
        } else {
            err
        };
        Failure::new(format!("{err}\n  (while running: {sql})"))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `'text'` as an SQL string literal.
pub fn quote(text: &str) -> String {
    let mut q = String::from("'");
    for c in text.chars() {
        match c {
            '\'' => q.push_str("''"),
            '\\' => q.push_str("\\\\"),
            _ => q.push(c),
        }
    }
    q.push('\'');
    q
}
