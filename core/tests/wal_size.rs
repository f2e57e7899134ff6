//! The WAL is bounded by size, not only by the memtables: a column family
//! written once and then left alone would otherwise keep every later segment
//! on disk (a segment goes only once every sequence in it is flushed).

#![allow(clippy::unwrap_used)]

mod common;

use tidesdb_core::{CfOptions, Db, Isolation, SyncMode};

/// Past 64 MiB of closed segments, the memtable holding the oldest
/// segment's writes is flushed (so the segments can go), however little
/// it holds.
#[test]
fn a_quiet_family_is_flushed_once_closed_segments_pass_the_wal_limit() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), common::opts(SyncMode::None, 1 << 20)).unwrap();
    let quiet = db.create_cf("quiet", CfOptions::default()).unwrap();
    let busy = db.create_cf("busy", CfOptions::default()).unwrap();
    let mut t = db.begin(Isolation::ReadCommitted);
    t.put(&quiet, b"only", b"row").unwrap();
    t.commit().unwrap();

    let value = vec![b'v'; 2000];
    let wal_bytes = || -> u64 {
        std::fs::read_dir(d.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
            .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
            .sum()
    };
    let mut i = 0u64;
    // 80 MiB of writes to the other family, one 1 MiB memtable (and one
    // segment) after another.
    while i < 40_000 {
        let mut t = db.begin(Isolation::ReadCommitted);
        for _ in 0..100 {
            t.put(&busy, format!("k{i:08}").as_bytes(), &value).unwrap();
            i += 1;
        }
        t.commit().unwrap();
    }
    // Rotated in the commit path (flushed in the background).
    let s = db.cf_stats(&quiet);
    assert!(
        s.immutable_memtables + s.table_files >= 1,
        "the quiet family's memtable was never rotated: {s:?}"
    );
    db.flush().unwrap();
    // Everything flushed: no closed segment is left holding unflushed writes.
    assert!(wal_bytes() < 64 << 20, "WAL files: {} bytes", wal_bytes());
    let mut r = db.begin(Isolation::RepeatableRead);
    assert_eq!(r.get(&quiet, b"only").unwrap(), Some(b"row".to_vec()));
}
