#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Encryption at rest through the public API: an encrypted column family's
//! table files, value logs, WAL segments, spill runs and prepared spill files
//! hold none of its strings in the clear; everything reads back after a
//! reopen, after a key rotation (old files keep their version, compaction
//! moves data to the latest), and without the key the family is refused by
//! name while the others work.

mod common;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tidesdb_core::*;

/// Keys by id; version n is `versions[n - 1]`.
#[derive(Default)]
struct Keys(Mutex<BTreeMap<u32, Vec<Vec<u8>>>>);

impl Keys {
    fn with(id: u32, versions: u8) -> Arc<Keys> {
        let k = Arc::new(Keys::default());
        for v in 0..versions {
            k.rotate(id, v);
        }
        k
    }
    fn rotate(&self, id: u32, seed: u8) {
        self.0
            .lock()
            .entry(id)
            .or_default()
            .push((0..32u8).map(|i| i.wrapping_mul(13) ^ seed).collect());
    }
}

impl KeyProvider for Keys {
    fn latest_version(&self, key_id: u32) -> Option<u32> {
        let m = self.0.lock();
        let n = m.get(&key_id)?.len();
        (n > 0).then_some(n as u32)
    }
    fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>> {
        let i = usize::try_from(version).ok()?.checked_sub(1)?;
        self.0.lock().get(&key_id)?.get(i).cloned()
    }
}

fn opts(keys: Option<Arc<Keys>>, log_key: Option<u32>) -> DbOptions {
    DbOptions {
        keys: keys.map_or_else(Keyring::default, |k| Keyring::new(k)),
        log_encryption_key: log_key,
        ..common::opts(SyncMode::None, 256 << 10)
    }
}

fn enc_cf_opts() -> CfOptions {
    CfOptions {
        value_separation_threshold: Some(1024),
        encryption_key: Some(1),
        ..CfOptions::default()
    }
}

const SECRET: &[u8] = b"SECRETROW";
const BIG: &[u8] = b"SECRETBLOB";
const CLEAR: &[u8] = b"CLEARTEXT";

fn row(i: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("{}-key-{i:05}", String::from_utf8_lossy(SECRET)).into_bytes(),
        format!("{}-value-{i}", String::from_utf8_lossy(SECRET)).into_bytes(),
    )
}

fn big(i: u32) -> Vec<u8> {
    let mut v = format!("{}-{i}-", String::from_utf8_lossy(BIG)).into_bytes();
    while v.len() < 4000 {
        v.extend_from_slice(BIG);
    }
    v
}

/// Files of `dir` (name, bytes) holding `needle`.
fn files_with(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if let Ok(bytes) = std::fs::read(e.path()) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn write_rows(db: &Db, enc: &Cf, plain: &Cf, range: std::ops::Range<u32>) {
    for chunk in range.collect::<Vec<_>>().chunks(100) {
        let mut t = db.begin(Isolation::RepeatableRead);
        for &i in chunk {
            let (k, v) = row(i);
            t.put(enc, &k, &v).unwrap();
            if i % 10 == 0 {
                t.put(enc, format!("blob{i:05}").as_bytes(), &big(i))
                    .unwrap();
            }
            t.put(plain, format!("p{i:05}").as_bytes(), CLEAR).unwrap();
        }
        t.commit().unwrap();
    }
}

fn check_rows(db: &Db, enc: &Cf, range: std::ops::Range<u32>) {
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in range {
        let (k, v) = row(i);
        assert_eq!(t.get(enc, &k).unwrap(), Some(v), "row {i}");
        if i % 10 == 0 {
            assert_eq!(
                t.get(enc, format!("blob{i:05}").as_bytes()).unwrap(),
                Some(big(i))
            );
        }
    }
}

#[test]
fn nothing_in_the_clear_and_everything_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let keys = Keys::with(1, 1);
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), Some(1))).unwrap();
        let enc = db.create_cf("enc", enc_cf_opts()).unwrap();
        let plain = db.create_cf("plain", CfOptions::default()).unwrap();
        write_rows(&db, &enc, &plain, 0..2000);
        // A spilled, uncommitted transaction, and a prepared spilled one.
        db.set_spill_threshold(64 << 10);
        let mut open = db.begin(Isolation::RepeatableRead);
        for i in 0..3000u32 {
            open.put(&enc, format!("SECRETSPILL{i:05}").as_bytes(), BIG)
                .unwrap();
        }
        let mut prep = db.begin(Isolation::RepeatableRead);
        for i in 0..3000u32 {
            prep.put(&enc, format!("SECRETPREP{i:05}").as_bytes(), BIG)
                .unwrap();
        }
        prep.prepare(b"xid1").unwrap();
        // Before the flush: the rows are in the WAL only.
        let names = || -> Vec<String> {
            std::fs::read_dir(d.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        for ext in [".wal", ".spill", ".prep"] {
            assert!(names().iter().any(|n| n.ends_with(ext)), "no {ext} file");
        }
        for s in [SECRET, BIG, b"SECRETSPILL", b"SECRETPREP"] {
            assert_eq!(files_with(d.path(), s), Vec::<String>::new(), "{s:?}");
        }
        db.flush().unwrap();
        db.compact_range(&enc, None, None).unwrap();
        for s in [SECRET, BIG, b"SECRETSPILL", b"SECRETPREP"] {
            assert_eq!(files_with(d.path(), s), Vec::<String>::new(), "{s:?}");
        }
        assert!(!files_with(d.path(), CLEAR).is_empty());
        check_rows(&db, &enc, 0..2000);
        drop(open);
        db.close().unwrap();
    }
    let db = Db::open(d.path(), opts(Some(keys), Some(1))).unwrap();
    let enc = db.cf("enc").unwrap();
    db.check_encryption(&enc).unwrap();
    check_rows(&db, &enc, 0..2000);
    assert_eq!(db.recover_prepared().len(), 1);
    db.commit_prepared(b"xid1").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&enc, b"SECRETPREP02999").unwrap(), Some(BIG.to_vec()));
    for s in [SECRET, BIG, b"SECRETPREP"] {
        assert_eq!(files_with(d.path(), s), Vec::<String>::new(), "{s:?}");
    }
}

#[test]
fn rotation_keeps_old_versions_readable_and_compaction_moves_to_the_latest() {
    let d = tempfile::tempdir().unwrap();
    let keys = Keys::with(1, 1);
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), None)).unwrap();
        let enc = db.create_cf("enc", enc_cf_opts()).unwrap();
        let plain = db.create_cf("plain", CfOptions::default()).unwrap();
        write_rows(&db, &enc, &plain, 0..1000);
        db.flush().unwrap();
        db.close().unwrap();
    }
    keys.rotate(1, 0x5c);
    let db = Db::open(d.path(), opts(Some(keys.clone()), None)).unwrap();
    let enc = db.cf("enc").unwrap();
    let plain = db.cf("plain").unwrap();
    write_rows(&db, &enc, &plain, 1000..2000);
    db.flush().unwrap();
    check_rows(&db, &enc, 0..2000);
    let versions = |dir: &Path| -> Vec<u32> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // A file compaction removed since the listing is no longer the
            // database's: skip it.
            let Ok(b) = std::fs::read(&p) else { continue };
            // Table files: header before the 64-byte footer; value logs: at 0.
            let h = if name.ends_with(".sst") && b.len() >= 128 {
                b.len() - 128
            } else if name.ends_with(".vlog") {
                0
            } else {
                continue;
            };
            if b.get(h..h + 8) == Some(&b"TDBCRYP1"[..]) {
                v.push(u32::from_le_bytes(b[h + 12..h + 16].try_into().unwrap()));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    };
    assert_eq!(versions(d.path()), vec![1, 2]);
    db.optimize(&enc).unwrap();
    db.gc_value_log(&enc).unwrap();
    check_rows(&db, &enc, 0..2000);
    db.close().unwrap();
    drop(db);
    // The rewritten tables are under version 2 (value logs whose values all
    // moved are gone; one still referenced keeps its version).
    let db = Db::open(d.path(), opts(Some(keys), None)).unwrap();
    let enc = db.cf("enc").unwrap();
    check_rows(&db, &enc, 0..2000);
    let sst_versions: Vec<u32> = {
        let mut v = Vec::new();
        for e in std::fs::read_dir(d.path()).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sst") {
                let b = std::fs::read(&p).unwrap();
                let h = b.len() - 128;
                if b.get(h..h + 8) == Some(&b"TDBCRYP1"[..]) {
                    v.push(u32::from_le_bytes(b[h + 12..h + 16].try_into().unwrap()));
                }
            }
        }
        v
    };
    assert!(!sst_versions.is_empty());
    assert!(sst_versions.iter().all(|&v| v == 2), "{sst_versions:?}");
}

#[test]
fn without_the_key_the_family_is_refused_and_the_others_work() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts(Some(Keys::with(1, 1)), None)).unwrap();
        let enc = db.create_cf("enc", enc_cf_opts()).unwrap();
        let plain = db.create_cf("plain", CfOptions::default()).unwrap();
        write_rows(&db, &enc, &plain, 0..500);
        db.flush().unwrap();
        db.close().unwrap();
    }
    for keys in [None, Some(Keys::with(2, 1))] {
        let db = Db::open(d.path(), opts(keys, None)).unwrap();
        let enc = db.cf("enc").unwrap();
        let plain = db.cf("plain").unwrap();
        let e = db.check_encryption(&enc).unwrap_err();
        assert!(matches!(e, Error::KeyUnavailable { key_id: 1, .. }), "{e}");
        assert!(e.to_string().contains("encryption key 1"), "{e}");
        db.check_encryption(&plain).unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&plain, b"p00042").unwrap(), Some(CLEAR.to_vec()));
        let err = t.get(&enc, &row(42).0).unwrap_err();
        assert!(err.to_string().contains("encryption key 1"), "{err}");
        // Writing to it cannot make a file either.
        let mut w = db.begin(Isolation::RepeatableRead);
        w.put(&plain, b"after", CLEAR).unwrap();
        w.commit().unwrap();
        db.close().unwrap();
    }
    // With the key back, nothing was lost.
    let db = Db::open(d.path(), opts(Some(Keys::with(1, 1)), None)).unwrap();
    let enc = db.cf("enc").unwrap();
    check_rows(&db, &enc, 0..500);
}

/// Commits of an encrypted family still only in the log when the database stops
/// (a crash) and opened without its key: the open succeeds, that family is refused,
/// the others work and take commits, the log segments holding its commits are kept
/// (over more opens without the key, and in a checkpoint), and with the key back
/// every commit is there.
#[test]
fn unflushed_commits_of_a_family_without_its_key_wait_in_the_log() {
    // Full sync: the log is written ahead with zeros, so a kept segment's tail matters.
    let full = |o: DbOptions| DbOptions {
        sync_mode: SyncMode::Full,
        ..o
    };
    let d = tempfile::tempdir().unwrap();
    let crashed = {
        let db = Db::open(d.path(), full(opts(Some(Keys::with(1, 1)), None))).unwrap();
        let enc = db.create_cf("enc", enc_cf_opts()).unwrap();
        let plain = db.create_cf("plain", CfOptions::default()).unwrap();
        write_rows(&db, &enc, &plain, 0..200);
        db.flush().unwrap();
        write_rows(&db, &enc, &plain, 200..300);
        let copy = common::crash_copy(d.path());
        db.close().unwrap();
        copy
    };
    let cp = tempfile::tempdir().unwrap();
    let cp_dir = cp.path().join("cp");
    for round in 0..2 {
        let db = Db::open(crashed.path(), full(opts(None, None))).unwrap();
        let enc = db.cf("enc").unwrap();
        let plain = db.cf("plain").unwrap();
        let e = db.check_encryption(&enc).unwrap_err();
        assert!(matches!(e, Error::KeyUnavailable { key_id: 1, .. }), "{e}");
        db.check_encryption(&plain).unwrap();
        assert!(
            db.recovery_notes().iter().any(|n| n.contains("are kept")),
            "{:?}",
            db.recovery_notes()
        );
        let mut t = db.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&plain, b"p00250").unwrap(), Some(CLEAR.to_vec()));
        let mut w = db.begin(Isolation::RepeatableRead);
        w.put(&plain, format!("after{round}").as_bytes(), CLEAR)
            .unwrap();
        w.commit().unwrap();
        db.flush().unwrap();
        if round == 1 {
            db.checkpoint(&cp_dir, "test").unwrap();
        }
        db.close().unwrap();
    }
    for dir in [crashed.path(), cp_dir.as_path()] {
        let db = Db::open(dir, opts(Some(Keys::with(1, 1)), None)).unwrap();
        let enc = db.cf("enc").unwrap();
        let plain = db.cf("plain").unwrap();
        db.check_encryption(&enc).unwrap();
        check_rows(&db, &enc, 0..300);
        let mut t = db.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&plain, b"after1").unwrap(), Some(CLEAR.to_vec()));
        assert!(db.recovery_notes().iter().all(|n| !n.contains("are kept")));
        db.close().unwrap();
    }
}

#[test]
fn unencrypted_databases_are_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts(None, None)).unwrap();
    let cf = db
        .create_cf(
            "plain",
            CfOptions {
                value_separation_threshold: Some(1024),
                ..CfOptions::default()
            },
        )
        .unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"k1", CLEAR).unwrap();
    t.put(&cf, b"k2", &big(2)).unwrap();
    t.commit().unwrap();
    db.flush().unwrap();
    assert!(files_with(d.path(), b"TDBCRYP1").is_empty());
    assert!(!files_with(d.path(), CLEAR).is_empty());
    // An encrypted family cannot be created without its key.
    let e = db.create_cf("enc", enc_cf_opts()).unwrap_err();
    assert!(matches!(e, Error::KeyUnavailable { key_id: 1, .. }), "{e}");
    assert!(db.cf("enc").is_none());
}

/// `DbOptions::family_encryption` (the server's catalog under
/// `tidesdb_encrypt_tables`): a family written in the clear is rewritten under
/// the key at the open that asks for it (nothing of it left in any file, the
/// manifest's record of its key range included), reads back, needs the key at
/// every later open, and is rewritten in the clear again when the key is taken
/// off it.
#[test]
fn a_family_switched_to_a_key_at_open_is_rewritten() {
    let d = tempfile::tempdir().unwrap();
    let keys = Keys::with(1, 1);
    let with = |key: Option<u32>, keys: Option<Arc<Keys>>| DbOptions {
        family_encryption: vec![("meta".to_string(), key)],
        ..opts(keys, Some(1))
    };
    let check = |db: &Db| {
        let cf = db.cf("meta").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..300u32 {
            let (k, v) = row(i);
            assert_eq!(t.get(&cf, &k).unwrap(), Some(v), "row {i}");
        }
    };
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), Some(1))).unwrap();
        let cf = db.create_cf("meta", CfOptions::default()).unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..300u32 {
            let (k, v) = row(i);
            t.put(&cf, &k, &v).unwrap();
        }
        t.commit().unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    assert!(!files_with(d.path(), SECRET).is_empty());
    {
        let db = Db::open(d.path(), with(Some(1), Some(keys.clone()))).unwrap();
        assert_eq!(files_with(d.path(), SECRET), Vec::<String>::new());
        check(&db);
        // New writes too.
        let cf = db.cf("meta").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"SECRETNEW", b"x").unwrap();
        t.commit().unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    for s in [SECRET, b"SECRETNEW"] {
        assert_eq!(files_with(d.path(), s), Vec::<String>::new(), "{s:?}");
    }
    // Asked for without the key: refused at open, naming the family and key.
    let e = Db::open(d.path(), with(Some(1), None))
        .err()
        .expect("refused");
    assert!(matches!(e, Error::KeyUnavailable { key_id: 1, .. }), "{e}");
    assert!(e.to_string().contains("meta"), "{e}");
    // The setting persists in the manifest (an open without the option reads it).
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), Some(1))).unwrap();
        check(&db);
        let cf = db.cf("meta").unwrap();
        assert_eq!(cf.options().encryption_key, Some(1));
        db.close().unwrap();
    }
    // Taken off: rewritten in the clear.
    {
        let db = Db::open(d.path(), with(None, Some(keys.clone()))).unwrap();
        check(&db);
        assert!(!files_with(d.path(), SECRET).is_empty());
        db.close().unwrap();
    }
    // A listed family created later takes the key too.
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), with(Some(1), Some(keys))).unwrap();
    let cf = db.create_cf("meta", CfOptions::default()).unwrap();
    assert_eq!(cf.options().encryption_key, Some(1));
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"SECRETNEW", b"x").unwrap();
    t.commit().unwrap();
    db.flush().unwrap();
    assert_eq!(files_with(d.path(), b"SECRETNEW"), Vec::<String>::new());
}

/// An encrypted WAL without its key: the open fails naming the segment and the
/// key (its records' families are unknown until it is read); a segment holding
/// no record needs no key.
#[test]
fn an_encrypted_log_without_its_key() {
    let d = tempfile::tempdir().unwrap();
    let keys = Keys::with(1, 1);
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), Some(1))).unwrap();
        let cf = db.create_cf("plain", CfOptions::default()).unwrap();
        db.flush().unwrap();
        db.close().unwrap();
        drop(cf);
    }
    // Only the segment of the last open, without a record: opens without the key.
    let wal_sizes = || -> Vec<u64> {
        std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
            .map(|e| e.metadata().unwrap().len())
            .collect()
    };
    assert_eq!(wal_sizes(), vec![64], "one encrypted segment, header only");
    {
        let db = Db::open(d.path(), opts(None, None)).unwrap();
        db.close().unwrap();
    }
    {
        let db = Db::open(d.path(), opts(Some(keys.clone()), Some(1))).unwrap();
        let cf = db.cf("plain").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, b"k", CLEAR).unwrap();
        t.commit().unwrap();
        db.close().unwrap();
    }
    let e = Db::open(d.path(), opts(None, None)).err().expect("refused");
    assert!(matches!(e, Error::KeyUnavailable { key_id: 1, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(".wal") && msg.contains("encrypted write-ahead log"),
        "{msg}"
    );
    // With the key, the commit is there.
    let db = Db::open(d.path(), opts(Some(keys), None)).unwrap();
    let cf = db.cf("plain").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(t.get(&cf, b"k").unwrap(), Some(CLEAR.to_vec()));
}
