//! Copying the engine's checkpoint into the backup, with progress, and modes.
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{progress, Failure};

fn io(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::new(format!("{what} {}: {e}", path.display()))
}

/// Creates `dir` (0700) if missing; an existing one is brought to 0700.
pub fn make_dir(dir: &Path) -> Result<(), Failure> {
    if !dir.is_dir() {
        DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)
            .map_err(|e| io("create", dir, e))?;
    }
    set_mode(dir, 0o700)
}

pub fn set_mode(path: &Path, mode: u32) -> Result<(), Failure> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io("chmod", path, e))
}

pub fn sync_dir(dir: &Path) -> Result<(), Failure> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("fsync", dir, e))
}

/// Copies the regular files of `from` into the new or empty directory `to`
/// (0700; files 0660, fsynced), printing progress; returns (files, bytes).
pub fn copy_dir(from: &Path, to: &Path, label: &str) -> Result<(u64, u64), Failure> {
    make_dir(to)?;
    let mut entries = Vec::new();
    for e in std::fs::read_dir(from).map_err(|e| io("list", from, e))? {
        let e = e.map_err(|e| io("list", from, e))?;
        let md = e.metadata().map_err(|er| io("stat", &e.path(), er))?;
        if md.is_file() {
            entries.push((e.file_name(), md.len()));
        }
    }
    entries.sort();
    let total: u64 = entries.iter().map(|(_, n)| n).sum();
    let start = Instant::now();
    let mut last = Instant::now();
    let mut done = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for (name, _) in &entries {
        let src = from.join(name);
        let dst = to.join(name);
        let mut r = File::open(&src).map_err(|e| io("open", &src, e))?;
        let mut w = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o660)
            .open(&dst)
            .map_err(|e| io("create", &dst, e))?;
        loop {
            let n = r.read(&mut buf).map_err(|e| io("read", &src, e))?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n]).map_err(|e| io("write", &dst, e))?;
            done += n as u64;
            if last.elapsed() >= Duration::from_secs(2) {
                last = Instant::now();
                progress(&format!(
                    "{label}: {} of {} MiB copied",
                    done >> 20,
                    total >> 20
                ));
            }
        }
        w.sync_all().map_err(|e| io("fsync", &dst, e))?;
        set_mode(&dst, 0o660)?;
    }
    sync_dir(to)?;
    let secs = start.elapsed().as_secs_f64().max(0.001);
    progress(&format!(
        "{label}: {} files, {:.1} MiB in {secs:.1} s",
        entries.len(),
        total as f64 / 1048576.0
    ));
    Ok((entries.len() as u64, total))
}

/// Regular files directly in `dir` to 0660 and `dir` to 0700.
pub fn fix_modes(dir: &Path) -> Result<(), Failure> {
    for e in std::fs::read_dir(dir).map_err(|e| io("list", dir, e))? {
        let e = e.map_err(|e| io("list", dir, e))?;
        if e.metadata().map(|m| m.is_file()).unwrap_or(false) {
            set_mode(&e.path(), 0o660)?;
        }
    }
    set_mode(dir, 0o700)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn copies_with_modes() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("a");
        std::fs::create_dir(&from).unwrap();
        std::fs::write(from.join("x"), vec![7u8; 3 << 20]).unwrap();
        std::fs::write(from.join("y"), b"y").unwrap();
        let to = d.path().join("b");
        assert_eq!(copy_dir(&from, &to, "t").unwrap(), (2, (3 << 20) + 1));
        assert_eq!(std::fs::read(to.join("y")).unwrap(), b"y");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&to), 0o700);
        assert_eq!(mode(&to.join("x")), 0o660);
        // Never over an existing file.
        assert!(copy_dir(&from, &to, "t").is_err());
    }
}
