#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Damage to the parts of a table file read when the database opens (footer,
//! index block, the whole file) must not stop `Db::open`: the file is
//! quarantined, its key range answers with `Error::Corruption` naming it, every
//! other column family and key range keeps working, compaction leaves it
//! alone, and dropping its column family removes it.

mod common;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tidesdb_core::*;

fn opts() -> DbOptions {
    common::opts(SyncMode::None, 1 << 20)
}

fn put_range(db: &Db, cf: &Cf, prefix: &str, from: u32, to: u32) {
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in from..to {
        t.put(cf, format!("{prefix}{i:03}").as_bytes(), &[i as u8; 30])
            .unwrap();
    }
    t.commit().unwrap();
}

fn l0_files(db: &Db, cf: &Cf) -> Vec<String> {
    db.cf_stats(cf)
        .file_names_per_level
        .first()
        .cloned()
        .unwrap_or_default()
}

/// Column family `t` with two L0 files (keys a000..a199, then m000..m199)
/// and column family `other` (o000..o099). Returns the file holding the
/// m-range.
fn populate(dir: &Path) -> String {
    let db = Db::open(dir, opts()).unwrap();
    let small = CfOptions {
        block_size: 256,
        ..CfOptions::default()
    };
    let t = db.create_cf("t", small.clone()).unwrap();
    let other = db.create_cf("other", small).unwrap();
    put_range(&db, &t, "a", 0, 200);
    put_range(&db, &other, "o", 0, 100);
    db.flush().unwrap();
    let before = l0_files(&db, &t);
    put_range(&db, &t, "m", 0, 200);
    db.flush().unwrap();
    let after = l0_files(&db, &t);
    assert_eq!(after.len(), 2, "{after:?}");
    let m_file = after.iter().find(|f| !before.contains(f)).cloned().unwrap();
    db.close().unwrap();
    m_file
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Truncate,
    OverwriteFooter,
    FlipIndexByte,
    FlipFilterByte,
    Remove,
}

fn damage(path: &Path, how: Damage) {
    let mut data = std::fs::read(path).unwrap();
    let n = data.len();
    let footer = n - 64;
    match how {
        Damage::Truncate => data.truncate(n / 2),
        Damage::OverwriteFooter => {
            for b in &mut data[footer..] {
                *b = 0xab;
            }
        }
        Damage::FlipIndexByte => {
            let (off, len) = (u64_at(&data, footer + 16), u64_at(&data, footer + 24));
            assert!(len > 0);
            data[(off + len / 2) as usize] ^= 0x41;
        }
        Damage::FlipFilterByte => {
            let (off, len) = (u64_at(&data, footer), u64_at(&data, footer + 8));
            assert!(len > 0);
            data[(off + len / 2) as usize] ^= 0x41;
        }
        Damage::Remove => {
            std::fs::remove_file(path).unwrap();
            return;
        }
    }
    std::fs::write(path, &data).unwrap();
}

/// Forward scan of `[lower, upper)`: rows seen before the end or the error.
fn scan(db: &Db, cf: &Cf, lower: Option<&str>, upper: Option<&str>) -> (usize, Result<()>) {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t
        .iter(
            cf,
            IterOptions {
                lower_bound: lower.map(|s| s.as_bytes().to_vec()),
                upper_bound: upper.map(|s| s.as_bytes().to_vec()),
            },
        )
        .unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    (n, it.status())
}

fn scan_back(db: &Db, cf: &Cf, lower: Option<&str>, upper: Option<&str>) -> (usize, Result<()>) {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t
        .iter(
            cf,
            IterOptions {
                lower_bound: lower.map(|s| s.as_bytes().to_vec()),
                upper_bound: upper.map(|s| s.as_bytes().to_vec()),
            },
        )
        .unwrap();
    it.seek_to_last();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.prev();
    }
    (n, it.status())
}

fn assert_damaged(r: Result<()>, file: &str) {
    let e = r.expect_err("expected the damaged range to fail");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(file), "{e}");
}

fn check_quarantined(dir: &Path, m_file: &str, how: Damage) {
    let db = Db::open(dir, opts()).unwrap_or_else(|e| panic!("{how:?}: open failed: {e}"));
    let q = db.quarantined_files();
    assert_eq!(q.len(), 1, "{how:?}: {q:?}");
    assert_eq!(q[0].cf, "t");
    assert!(q[0].path.ends_with(m_file), "{q:?}");
    assert!(q[0].error.contains(m_file), "{q:?}");
    let t = db.cf("t").unwrap();
    let other = db.cf("other").unwrap();

    // The other column family is untouched.
    assert_eq!(scan(&db, &other, None, None).0, 100);
    assert!(scan(&db, &other, None, None).1.is_ok());
    let mut tx = db.begin(Isolation::RepeatableRead);
    assert_eq!(tx.get(&other, b"o042").unwrap(), Some(vec![42u8; 30]));

    // Other key ranges of the damaged family read fine, both directions.
    assert_eq!(tx.get(&t, b"a123").unwrap(), Some(vec![123u8; 30]));
    assert_eq!(tx.get(&t, b"b000").unwrap(), None, "between the files");
    assert_eq!(tx.get(&t, b"z").unwrap(), None, "past the damaged range");
    let (n, st) = scan(&db, &t, Some("a"), Some("b"));
    assert_eq!((n, st.is_ok()), (200, true), "{how:?}");
    let (n, st) = scan_back(&db, &t, Some("a"), Some("b"));
    assert_eq!((n, st.is_ok()), (200, true), "{how:?}");
    let (n, st) = scan(&db, &t, Some("n"), None);
    assert_eq!(
        (n, st.is_ok()),
        (0, true),
        "{how:?}: above the damaged range"
    );

    // The damaged range fails, naming the file.
    assert_damaged(tx.get(&t, b"m050").map(|_| ()), m_file);
    let (n, st) = scan(&db, &t, None, None);
    assert_eq!(n, 200, "{how:?}: rows before the damaged range");
    assert_damaged(st, m_file);
    let (n, st) = scan_back(&db, &t, None, None);
    assert_eq!(n, 0, "{how:?}");
    assert_damaged(st, m_file);
    assert_damaged(scan(&db, &t, Some("m100"), Some("m101")).1, m_file);
    drop(tx);

    // Writes elsewhere work; manual compaction of the damaged range says why.
    put_range(&db, &t, "c", 0, 10);
    assert_damaged(db.compact_range(&t, None, None), m_file);
    db.compact_range(&t, Some(b"a"), Some(b"a999")).unwrap();

    // Background compaction: enough intact L0 files to trigger it; the
    // quarantined file stays where it is, on disk, with its error.
    for round in 0..5u32 {
        put_range(&db, &t, &format!("d{round}"), 0, 50);
        db.flush().unwrap();
    }
    // L0 compaction runs at 4 intact files: wait until fewer are left.
    let deadline = Instant::now() + Duration::from_secs(20);
    while l0_files(&db, &t).len() > 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let l0 = l0_files(&db, &t);
    assert!(l0.len() <= 4, "{how:?}: {l0:?}");
    assert!(l0.contains(&m_file.to_string()), "{how:?}: {l0:?}");
    let l1 = db.cf_stats(&t).file_names_per_level[1].clone();
    assert!(
        !l1.is_empty() && !l1.contains(&m_file.to_string()),
        "{l1:?}"
    );
    assert_eq!(db.quarantined_files().len(), 1);
    let mut tx = db.begin(Isolation::RepeatableRead);
    assert_eq!(tx.get(&t, b"a007").unwrap(), Some(vec![7u8; 30]));
    assert_eq!(tx.get(&t, b"d3049").unwrap(), Some(vec![49u8; 30]));
    assert_damaged(tx.get(&t, b"m199").map(|_| ()), m_file);
    drop(tx);
    db.close().unwrap();

    // Still quarantined after a reopen; dropping the family removes the file.
    let db = Db::open(dir, opts()).unwrap();
    assert_eq!(db.quarantined_files().len(), 1);
    db.drop_cf("t").unwrap();
    assert!(db.quarantined_files().is_empty());
    assert!(!dir.join(m_file).exists(), "{how:?}: file reclaimed");
    let other = db.cf("other").unwrap();
    assert_eq!(scan(&db, &other, None, None).0, 100);
    // The name can be used again.
    let t = db.create_cf("t", CfOptions::default()).unwrap();
    put_range(&db, &t, "m", 0, 5);
    db.close().unwrap();
    let db = Db::open(dir, opts()).unwrap();
    assert!(db.quarantined_files().is_empty());
    let t = db.cf("t").unwrap();
    assert_eq!(scan(&db, &t, None, None).0, 5);
}

#[test]
fn damaged_footer_index_or_file_is_quarantined() {
    let base = tempfile::tempdir().unwrap();
    let m_file = populate(base.path());
    for how in [
        Damage::Truncate,
        Damage::OverwriteFooter,
        Damage::FlipIndexByte,
        Damage::FlipFilterByte,
        Damage::Remove,
    ] {
        let d = tempfile::tempdir().unwrap();
        copy_dir(base.path(), d.path());
        let p: PathBuf = d.path().join(&m_file);
        damage(&p, how);
        check_quarantined(d.path(), &m_file, how);
    }
}

#[test]
fn intact_database_has_no_quarantine() {
    let base = tempfile::tempdir().unwrap();
    populate(base.path());
    let db = Db::open(base.path(), opts()).unwrap();
    assert!(db.quarantined_files().is_empty());
    let t = db.cf("t").unwrap();
    assert_eq!(scan(&db, &t, None, None).0, 400);
}
