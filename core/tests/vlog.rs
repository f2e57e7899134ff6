#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Key-value separation: value log files, garbage collection, space reclaim,
//! pointers through snapshots / iterators / spilled commits / 2PC, corruption
//! of value log files, direct reads.

mod common;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tidesdb_core::*;

fn opts() -> DbOptions {
    DbOptions {
        block_cache_size: 1 << 20,
        ..common::opts(SyncMode::None, 256 << 10)
    }
}

fn sep_cf(db: &Db, name: &str) -> Cf {
    db.create_cf(
        name,
        CfOptions {
            value_separation_threshold: Some(1024),
            ..CfOptions::default()
        },
    )
    .unwrap()
}

fn val(i: u32, round: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn vlog_files(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e.file_name().to_str()?.to_string();
            n.ends_with(".vlog")
                .then(|| (n, e.metadata().map(|m| m.len()).unwrap_or(0)))
        })
        .collect();
    v.sort();
    v
}

fn vlog_bytes(dir: &Path) -> u64 {
    vlog_files(dir).iter().map(|x| x.1).sum()
}

fn sst_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_name()
                .to_str()?
                .ends_with(".sst")
                .then(|| e.metadata().map(|m| m.len()).unwrap_or(0))
        })
        .sum()
}

fn write(db: &Db, cf: &Cf, keys: impl Iterator<Item = u32>, round: u32, len: usize) {
    for i in keys {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(cf, &key(i), &val(i, round, len)).unwrap();
        t.commit().unwrap();
    }
}

fn check(db: &Db, cf: &Cf, expect: impl Fn(u32) -> Option<Vec<u8>>, n: u32) {
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..n {
        assert_eq!(t.get(cf, &key(i)).unwrap(), expect(i), "key {i}");
    }
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    it.seek_to_first();
    let mut seen = 0;
    while it.valid() {
        let k = it.key().to_vec();
        let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
        assert_eq!(Some(it.value().to_vec()), expect(i));
        seen += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(seen, (0..n).filter(|i| expect(*i).is_some()).count());
}

#[test]
fn large_values_go_to_value_log_and_survive_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = sep_cf(&db, "t");
        // Mixed sizes: only values >= 1024 are separated.
        for i in 0..200u32 {
            let len = if i % 2 == 0 { 4000 } else { 100 };
            let mut t = db.begin(Isolation::RepeatableRead);
            t.put(&cf, &key(i), &val(i, 0, len)).unwrap();
            t.commit().unwrap();
        }
        db.flush().unwrap();
        let st = db.cf_stats(&cf);
        assert!(st.vlog_files >= 1, "{st:?}");
        // 100 separated values of ~4000 bytes each
        assert!(st.vlog_bytes >= 100 * 4000, "{st:?}");
        // Tables hold pointers, not the large values.
        assert!(sst_bytes(d.path()) < 100 * 4000 / 4);
        let exp = |i: u32| Some(val(i, 0, if i % 2 == 0 { 4000 } else { 100 }));
        check(&db, &cf, exp, 200);
        db.compact_range(&cf, None, None).unwrap();
        check(&db, &cf, exp, 200);
        db.close().unwrap();
    }
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    check(
        &db,
        &cf,
        |i| Some(val(i, 0, if i % 2 == 0 { 4000 } else { 100 })),
        200,
    );
    // Backward iteration resolves pointers too.
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    it.seek_to_last();
    let mut n = 199u32;
    while it.valid() {
        assert_eq!(it.key(), key(n).as_slice());
        assert_eq!(
            it.value(),
            val(n, 0, if n % 2 == 0 { 4000 } else { 100 }).as_slice()
        );
        it.prev();
        n = n.wrapping_sub(1);
    }
    it.status().unwrap();
    assert_eq!(n, u32::MAX);
}

/// `Db::optimize` (OPTIMIZE TABLE) leaves no garbage in the value log, even
/// below the GC ratio, and no value is lost or changed.
#[test]
fn optimize_leaves_no_value_log_garbage() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = sep_cf(&db, "t");
    let n = 300u32;
    let len = 8000;
    write(&db, &cf, 0..n, 0, len);
    db.flush().unwrap();
    // 20 % of the values replaced: below the default GC ratio of 0.5.
    write(&db, &cf, (0..n).filter(|i| i % 5 == 0), 1, len);
    db.compact_range(&cf, None, None).unwrap();
    db.gc_value_log(&cf).unwrap();
    let st = db.cf_stats(&cf);
    assert!(
        st.vlog_garbage_bytes > 0,
        "below the ratio, GC keeps it: {st:?}"
    );
    db.optimize(&cf).unwrap();
    let st = db.cf_stats(&cf);
    assert_eq!(st.vlog_garbage_bytes, 0, "{st:?}");
    let live = u64::from(n) * len as u64;
    let on_disk = vlog_bytes(d.path());
    assert_eq!(st.vlog_bytes, on_disk, "{st:?}");
    assert!(on_disk <= live + live / 20, "{on_disk} vs live {live}");
    let exp = |i: u32| Some(val(i, u32::from(i % 5 == 0), len));
    check(&db, &cf, exp, n);
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    check(&db, &cf, exp, n);
}

#[test]
fn gc_reclaims_space() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = sep_cf(&db, "t");
    let n = 300u32;
    let len = 8000;
    // Round 0: everything, one flush.
    write(&db, &cf, 0..n, 0, len);
    db.flush().unwrap();
    let b0 = vlog_bytes(d.path());
    assert!(b0 >= u64::from(n) * len as u64, "{b0}");
    // Round 1: overwrite everything. After compaction every round-0
    // pointer is dropped: their files are all garbage and removed.
    write(&db, &cf, 0..n, 1, len);
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    db.gc_value_log(&cf).unwrap();
    let b1 = vlog_bytes(d.path());
    assert!(b1 <= b0 + b0 / 10, "after full overwrite: {b1} vs {b0}");
    check(&db, &cf, |i| Some(val(i, 1, len)), n);
    // Round 2: overwrite 60 % of the keys. Round-1 files are then 60 %
    // garbage (> default ratio 0.5): GC relocates the live 40 % only.
    write(&db, &cf, (0..n).filter(|i| i % 5 < 3), 2, len);
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let before_gc = vlog_bytes(d.path());
    let st = db.cf_stats(&cf);
    assert!(st.vlog_garbage_bytes > 0, "{st:?}");
    // The handler's per-statement subset agrees on every size it has.
    let sz = db.cf_sizes(&cf);
    assert_eq!(
        (
            sz.approx_keys,
            sz.approx_bytes,
            sz.memtable_bytes,
            sz.table_files
        ),
        (
            st.approx_keys,
            st.approx_bytes,
            st.memtable_bytes,
            st.table_files
        )
    );
    assert_eq!(
        (sz.vlog_files, sz.vlog_bytes, sz.vlog_garbage_bytes),
        (st.vlog_files, st.vlog_bytes, st.vlog_garbage_bytes)
    );
    assert!(sz.file_names_per_level.is_empty() && st.table_files > 0);
    let jobs = db.gc_value_log(&cf).unwrap();
    let after_gc = vlog_bytes(d.path());
    let live = u64::from(n) * len as u64;
    assert!(
        after_gc < before_gc && after_gc <= live + live / 5,
        "gc jobs {jobs}: {before_gc} -> {after_gc} (live {live})"
    );
    let st = db.cf_stats(&cf);
    assert_eq!(st.vlog_bytes, after_gc, "{st:?}");
    let exp = |i: u32| Some(val(i, if i % 5 < 3 { 2 } else { 1 }, len));
    check(&db, &cf, exp, n);
    // Deletes make garbage too.
    for i in 0..n / 2 {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.delete(&cf, &key(i)).unwrap();
        t.commit().unwrap();
    }
    db.compact_range(&cf, None, None).unwrap();
    db.gc_value_log(&cf).unwrap();
    let after_del = vlog_bytes(d.path());
    assert!(after_del <= live / 2 + live / 5, "{after_del}");
    let exp2 = |i: u32| if i < n / 2 { None } else { exp(i) };
    check(&db, &cf, exp2, n);
    // Garbage accounting survives reopen.
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    check(&db, &cf, exp2, n);
    assert_eq!(db.cf_stats(&cf).vlog_bytes, vlog_bytes(d.path()));
}

#[test]
fn gc_under_concurrent_snapshot_reads() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    db.set_vlog_gc_ratio(0.2);
    let cf = sep_cf(&db, "t");
    let n = 200u32;
    let len = 3000;
    write(&db, &cf, 0..n, 0, len);
    db.flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let db = db.clone();
        let cf = cf.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // A snapshot: every key has the same round, which it must keep
                // seeing while writers overwrite, compact and collect.
                let mut t = db.begin(Isolation::RepeatableRead);
                let first = t.get(&cf, &key(0)).unwrap().unwrap();
                let round: u32 = std::str::from_utf8(&first[6..])
                    .unwrap()
                    .split('-')
                    .nth(1)
                    .unwrap()
                    .parse()
                    .unwrap();
                let mut it = t.iter(&cf, IterOptions::default()).unwrap();
                if r == 0 {
                    it.seek_to_first();
                } else {
                    it.seek_to_last();
                }
                let mut seen = 0;
                while it.valid() {
                    let i: u32 = std::str::from_utf8(&it.key()[3..])
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(it.value(), val(i, round, len).as_slice());
                    seen += 1;
                    if r == 0 {
                        it.next();
                    } else {
                        it.prev();
                    }
                    std::thread::yield_now();
                }
                it.status().unwrap();
                assert_eq!(seen, n);
                for i in (0..n).step_by(7) {
                    assert_eq!(t.get(&cf, &key(i)).unwrap().unwrap(), val(i, round, len));
                }
                checks += 1;
            }
            checks
        }));
    }
    for round in 1..=6u32 {
        // One transaction per round so readers always see a whole round.
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..n {
            t.put(&cf, &key(i), &val(i, round, len)).unwrap();
        }
        t.commit().unwrap();
        db.flush().unwrap();
        db.compact_range(&cf, None, None).unwrap();
        db.gc_value_log(&cf).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Readers gone: everything but the last round is reclaimable.
    db.compact_range(&cf, None, None).unwrap();
    db.gc_value_log(&cf).unwrap();
    let live = u64::from(n) * len as u64;
    let on_disk = vlog_bytes(d.path());
    assert!(on_disk <= live + live / 5, "{on_disk} vs live {live}");
    check(&db, &cf, |i| Some(val(i, 6, len)), n);
}

/// An iterator made before GC relocates the values of a file and drops it
/// keeps reading through the old pointers: the file stays on disk until the
/// iterator is gone.
#[test]
fn iterator_pins_value_log_files() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    db.set_vlog_gc_ratio(1.0); // no background relocation yet
    let cf = sep_cf(&db, "t");
    write(&db, &cf, 0..50, 0, 5000);
    db.flush().unwrap();
    let old_files = vlog_files(d.path());
    assert_eq!(old_files.len(), 1);
    write(&db, &cf, 0..30, 1, 5000);
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    let exp = |i: u32| Some(val(i, u32::from(i < 30), 5000));
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(&cf, IterOptions::default()).unwrap();
    // GC: the first file is 60 % garbage; its 20 live values move.
    db.set_vlog_gc_ratio(0.5);
    assert!(db.gc_value_log(&cf).unwrap() >= 1);
    let now = vlog_files(d.path());
    assert!(now.contains(&old_files[0]), "pinned file unlinked early");
    assert_eq!(db.cf_stats(&cf).vlog_files as usize, now.len() - 1);
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(Some(it.value().to_vec()), exp(n));
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, 50);
    drop(it);
    drop(t);
    let now = vlog_files(d.path());
    assert!(!now.contains(&old_files[0]), "{now:?}");
    check(&db, &cf, exp, 50);
}

#[test]
fn drop_cf_frees_value_log_files() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let keep = sep_cf(&db, "keep");
    let gone = sep_cf(&db, "gone");
    write(&db, &keep, 0..20, 0, 4000);
    write(&db, &gone, 0..40, 0, 4000);
    db.flush().unwrap();
    let keep_files = vlog_files(d.path()).len();
    let before = vlog_bytes(d.path());
    db.drop_cf("gone").unwrap();
    let after = vlog_bytes(d.path());
    assert!(
        after < before && after <= 20 * 4200,
        "{before} -> {after} ({keep_files} files)"
    );
    check(&db, &keep, |i| Some(val(i, 0, 4000)), 20);
    db.close().unwrap();
    drop(db);
    let db = Db::open(d.path(), opts()).unwrap();
    let keep = db.cf("keep").unwrap();
    check(&db, &keep, |i| Some(val(i, 0, 4000)), 20);
    assert_eq!(vlog_bytes(d.path()), after);
}

#[test]
fn spilled_commit_and_two_phase_with_large_values() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = sep_cf(&db, "t");
        // A spilled write set: its commit writes tables + a value log directly.
        let mut t = db.begin(Isolation::RepeatableRead);
        t.set_spill_threshold(64 << 10);
        for i in 0..100u32 {
            t.put(&cf, &key(i), &val(i, 0, 3000)).unwrap();
        }
        assert!(t.is_spilled());
        t.commit().unwrap();
        assert!(db.cf_stats(&cf).vlog_files >= 1);
        check(&db, &cf, |i| Some(val(i, 0, 3000)), 100);
        // 2PC: prepared large values live in the WAL until commit; the
        // prepared txn survives a crash-like drop and reopen.
        let mut p = db.begin(Isolation::RepeatableRead);
        for i in 100..110u32 {
            p.put(&cf, &key(i), &val(i, 0, 3000)).unwrap();
        }
        p.prepare(b"xid-1").unwrap();
        drop(p);
        db.close().unwrap();
    }
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(db.recover_prepared().len(), 1);
    db.commit_prepared(b"xid-1").unwrap();
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    check(&db, &cf, |i| Some(val(i, 0, 3000)), 110);
}

/// Flips / truncates bytes of the value log file and checks reads fail
/// with `Error::Corruption` (never a panic, never a wrong value).
#[test]
fn corrupt_value_log_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let n = 30u32;
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = sep_cf(&db, "t");
        write(&db, &cf, 0..n, 0, 2000);
        db.flush().unwrap();
        db.close().unwrap();
    }
    let files = vlog_files(d.path());
    assert_eq!(files.len(), 1);
    let path = d.path().join(&files[0].0);
    let orig = std::fs::read(&path).unwrap();
    let read_all = |dir: &Path| -> Vec<Result<Option<Vec<u8>>>> {
        let db = Db::open(dir, opts()).unwrap();
        let cf = db.cf("t").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        (0..n).map(|i| t.get(&cf, &key(i))).collect()
    };
    let mut rng = 0x1234_5678u64;
    for round in 0..40 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut data = orig.clone();
        let pos = (rng >> 33) as usize % data.len();
        data[pos] ^= 1 << (round % 8);
        std::fs::write(&path, &data).unwrap();
        let res = read_all(d.path());
        let mut bad = 0;
        for (i, r) in res.into_iter().enumerate() {
            match r {
                Ok(v) => assert_eq!(v, Some(val(i as u32, 0, 2000)), "wrong value at {i}"),
                Err(Error::Corruption { .. }) => bad += 1,
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
        assert_eq!(bad, 1, "flip at {pos}: exactly the record holding it fails");
    }
    // Truncation: the records past the cut fail, the others read fine.
    let cut = orig.len() / 2;
    std::fs::write(&path, &orig[..cut]).unwrap();
    let res = read_all(d.path());
    let bad = res
        .iter()
        .filter(|r| matches!(r, Err(Error::Corruption { .. })))
        .count();
    assert!(bad > 0 && bad < n as usize, "{bad}");
    assert!(res
        .iter()
        .all(|r| matches!(r, Ok(Some(_)) | Err(Error::Corruption { .. }))));
    // A missing file (the manifest names it) does not stop the open: it is
    // quarantined, reads of its values fail with a corruption error naming
    // it, and a restored file is used again at the next open.
    std::fs::write(&path, &orig).unwrap();
    let aside = d.path().join("aside");
    std::fs::rename(&path, &aside).unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let q = db.quarantined_files();
        assert_eq!(q.len(), 1, "{q:?}");
        assert_eq!(q[0].path, path);
        assert_eq!(q[0].cf, "t");
        let cf = db.cf("t").unwrap();
        // Small values live in the table: unaffected.
        let small = db.create_cf("small", CfOptions::default()).unwrap();
        write(&db, &small, 0..3, 0, 10);
        let mut t = db.begin(Isolation::RepeatableRead);
        assert_eq!(t.get(&small, &key(1)).unwrap(), Some(val(1, 0, 10)));
        match t.get(&cf, &key(0)) {
            Err(Error::Corruption { detail, .. }) => {
                assert!(detail.contains("quarantined"), "{detail}")
            }
            r => panic!("{r:?}"),
        }
        // GC and compaction leave the file's entries alone.
        drop(t);
        db.compact_range(&cf, None, None).unwrap();
        db.gc_value_log(&cf).unwrap();
        db.close().unwrap();
    }
    std::fs::rename(&aside, &path).unwrap();
    let res = read_all(d.path());
    for (i, r) in res.into_iter().enumerate() {
        assert_eq!(
            r.unwrap(),
            Some(val(i as u32, 0, 2000)),
            "restored: key {i}"
        );
    }
}

/// Checksum once: a value of at least 4 KiB is checksummed when the
/// transaction writes it, and the WAL record and the value-log record combine
/// that crc instead of reading the value again. The files must still hold
/// checksums of their real bytes: intact copies read back every value, and a
/// flipped byte inside such a value is a corruption error (WAL replay, value
/// log read).
#[test]
fn checksum_once_values_are_still_verified() {
    let n = 6u32;
    let len = 10_000;
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = sep_cf(&db, "t");
    write(&db, &cf, 0..n, 0, len);
    // A crash now: the values are only in the WAL.
    let copy = |src: &Path| {
        let c = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            if e.file_name() != "LOCK" && e.path().is_file() {
                std::fs::copy(e.path(), c.path().join(e.file_name())).unwrap();
            }
        }
        c
    };
    let find = |data: &[u8], pat: &[u8]| {
        data.windows(pat.len())
            .position(|w| w == pat)
            .expect("value bytes in the file")
    };
    let wal_of = |dir: &Path| {
        let mut w: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "wal"))
            .collect();
        w.sort();
        w.pop().unwrap()
    };
    let intact = copy(d.path());
    {
        // Every commit replays: the combined record checksums are right (a
        // wrong one on the last record would silently drop it as a torn tail).
        let db2 = Db::open(intact.path(), opts()).unwrap();
        let cf2 = db2.cf("t").unwrap();
        check(&db2, &cf2, |i| (i < n).then(|| val(i, 0, len)), n);
    }
    let flipped = copy(d.path());
    let wal = wal_of(flipped.path());
    let mut data = std::fs::read(&wal).unwrap();
    let at = find(&data, &val(1, 0, len)[..32]) + len / 2;
    data[at] ^= 0x08;
    std::fs::write(&wal, &data).unwrap();
    match Db::open(flipped.path(), opts()) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("a flipped byte inside a WAL value was not detected"),
    }

    // Flush: the values go to the value log with combined record crcs.
    db.flush().unwrap();
    check(&db, &cf, |i| (i < n).then(|| val(i, 0, len)), n);
    db.close().unwrap();
    let files = vlog_files(d.path());
    assert_eq!(files.len(), 1);
    let path = d.path().join(&files[0].0);
    let mut data = std::fs::read(&path).unwrap();
    let at = find(&data, &val(2, 0, len)[..32]) + len - 1;
    data[at] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in 0..n {
        match t.get(&cf, &key(i)) {
            Ok(v) => {
                assert_ne!(
                    i, 2,
                    "a flipped byte inside a value-log value was not detected"
                );
                assert_eq!(v, Some(val(i, 0, len)), "key {i}");
            }
            Err(e) => assert!(i == 2 && e.is_corruption(), "key {i}: {e}"),
        }
    }
}

#[test]
fn direct_reads() {
    let d = tempfile::tempdir().unwrap();
    let dopts = DbOptions {
        use_direct_reads: true,
        ..opts()
    };
    {
        let db = Db::open(d.path(), dopts.clone()).unwrap();
        if !db.direct_reads_active() {
            println!(
                "direct_reads: skipped: the filesystem of {} refuses O_DIRECT",
                d.path().display()
            );
            return;
        }
        let cf = sep_cf(&db, "t");
        for i in 0..300u32 {
            let len = if i % 3 == 0 { 5000 } else { 200 };
            let mut t = db.begin(Isolation::RepeatableRead);
            t.put(&cf, &key(i), &val(i, 0, len)).unwrap();
            t.commit().unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let db = Db::open(d.path(), dopts).unwrap();
    assert!(db.direct_reads_active());
    let cf = db.cf("t").unwrap();
    let before = db.direct_read_count();
    check(
        &db,
        &cf,
        |i| Some(val(i, 0, if i % 3 == 0 { 5000 } else { 200 })),
        300,
    );
    let reads = db.direct_read_count() - before;
    // at least one per separated value (100) plus the data blocks
    assert!(reads >= 100, "{reads} direct reads");
    assert!(db.direct_reads_active());
    // The block cache still applies: re-reading the small values costs no
    // new direct reads once their blocks are cached.
    let mut t = db.begin(Isolation::RepeatableRead);
    for _ in 0..2 {
        let r0 = db.direct_read_count();
        for i in (1..300u32).filter(|i| i % 3 != 0) {
            assert!(t.get(&cf, &key(i)).unwrap().is_some());
        }
        if db.direct_read_count() == r0 {
            return;
        }
    }
    panic!("block cache not used with direct reads");
}

/// Values read from the value log enter the block cache: reading them again
/// costs no file read (counted by the direct reads), and they still equal
/// what was written; a value larger than a cache shard is never cached.
#[test]
fn value_log_values_are_cached() {
    let d = tempfile::tempdir().unwrap();
    let dopts = DbOptions {
        use_direct_reads: true,
        block_cache_size: 16 << 20,
        ..opts()
    };
    let db = Db::open(d.path(), dopts).unwrap();
    if !db.direct_reads_active() {
        println!("value_log_values_are_cached: skipped: no O_DIRECT here");
        return;
    }
    let cf = sep_cf(&db, "t");
    // 20 values of 64 KiB fit the cache; key 99 (9 MiB) exceeds a shard (the
    // 16 MiB cache has 2 shards of 8 MiB).
    write(&db, &cf, 0..20, 0, 64 << 10);
    write(&db, &cf, 99..100, 0, 9 << 20);
    db.flush().unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    let read_all = |t: &mut Txn| {
        for i in 0..20u32 {
            assert_eq!(t.get(&cf, &key(i)).unwrap(), Some(val(i, 0, 64 << 10)));
        }
    };
    read_all(&mut t);
    let r0 = db.direct_read_count();
    read_all(&mut t);
    assert_eq!(db.direct_read_count(), r0, "cached values were read again");
    for _ in 0..2 {
        let r = db.direct_read_count();
        assert_eq!(t.get(&cf, &key(99)).unwrap(), Some(val(99, 0, 9 << 20)));
        assert!(
            db.direct_read_count() > r,
            "a value beyond a shard is read each time"
        );
    }
}

/// `iter_latest` rebuilds its sources (and its pointer resolver) at each
/// seek: values committed, flushed, compacted and relocated meanwhile are
/// read through the new version's value log files.
#[test]
fn latest_iterator_follows_new_versions() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    db.set_vlog_gc_ratio(0.3);
    let cf = sep_cf(&db, "t");
    write(&db, &cf, 0..40, 0, 3000);
    db.flush().unwrap();
    let mut t = db.begin(Isolation::ReadCommitted);
    let mut it = t.iter_latest(&cf, IterOptions::default()).unwrap();
    for round in 1..4u32 {
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            assert_eq!(it.value(), val(n, round - 1, 3000).as_slice());
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, 40);
        write(&db, &cf, 0..40, round, 3000);
        db.flush().unwrap();
        db.compact_range(&cf, None, None).unwrap();
        db.gc_value_log(&cf).unwrap();
    }
}

/// A large value is handed out without a copy: reads of a flushed value
/// return the block cache's buffer (the same bytes each time, through point
/// reads and iterators alike), point reads of a memtable's value its `Arc`; a value
/// still held stays intact after the cache evicts it.
#[test]
fn shared_reads_do_not_copy() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            block_cache_size: 16 << 20,
            ..opts()
        },
    )
    .unwrap();
    let cf = sep_cf(&db, "t");
    write(&db, &cf, 0..8, 0, 256 << 10);
    db.flush().unwrap();
    write(&db, &cf, 50..51, 0, 256 << 10);
    let mut t = db.begin(Isolation::RepeatableRead);
    for i in [0u32, 50] {
        let a = t.get_shared(&cf, &key(i)).unwrap().unwrap();
        let b = t.get_shared(&cf, &key(i)).unwrap().unwrap();
        assert_eq!(&*a, val(i, 0, 256 << 10).as_slice());
        assert_eq!(a.as_ptr(), b.as_ptr(), "key {i}: the value was copied");
        if i == 0 {
            // (An iterator copies a memtable's value; it shares a resolved one.)
            let mut it = t.iter(&cf, IterOptions::default()).unwrap();
            it.seek(&key(i));
            assert!(it.valid());
            assert_eq!(it.value().as_ptr(), a.as_ptr(), "the iterator copied");
        }
    }
    // Evict everything while one value is held; it stays readable and equal.
    let held = t.get_shared(&cf, &key(3)).unwrap().unwrap();
    db.set_block_cache_size(1 << 20);
    for i in 0..8u32 {
        assert_eq!(t.get(&cf, &key(i)).unwrap(), Some(val(i, 0, 256 << 10)));
    }
    assert_eq!(&*held, val(3, 0, 256 << 10).as_slice());
    let again = t.get_shared(&cf, &key(3)).unwrap().unwrap();
    assert_ne!(
        again.as_ptr(),
        held.as_ptr(),
        "evicted: read into a new buffer"
    );
    assert_eq!(again, held);
}

/// Large values (out of line in the WAL, >= 4 KiB) are written once: the
/// flush points into the sealed WAL segment holding them, kept as a value log
/// file (a hard link), instead of copying them to a new one. Reads, reopen,
/// GC of overwritten values, corruption and drop_cf work on such files as on
/// written ones.
#[test]
fn wal_segments_kept_as_value_logs() {
    let d = tempfile::tempdir().unwrap();
    let n = 120u32;
    let len = 9000;
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = sep_cf(&db, "t");
    // A second family written in the same commits, small values only.
    let small = db.create_cf("s", CfOptions::default()).unwrap();
    for i in 0..n {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, &key(i), &val(i, 0, len)).unwrap();
        t.put(&small, &key(i), b"tiny").unwrap();
        t.commit().unwrap();
    }
    db.flush().unwrap();
    let st = db.cf_stats(&cf);
    assert!(st.vlog_wal_files >= 2, "several memtables flushed: {st:?}");
    assert_eq!(st.vlog_files, st.vlog_wal_files, "nothing copied: {st:?}");
    // The WAL segments themselves are gone (purged); the data lives on as
    // the .vlog files, whose garbage is the other family's records and the
    // framing.
    assert!(
        st.vlog_garbage_bytes < st.vlog_bytes / 10,
        "{} of {}",
        st.vlog_garbage_bytes,
        st.vlog_bytes
    );
    assert_eq!(vlog_bytes(d.path()), st.vlog_bytes);
    check(&db, &cf, |i| Some(val(i, 0, len)), n);
    db.close().unwrap();
    drop(db);

    // Reopen: the format comes from the manifest.
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    assert_eq!(db.cf_stats(&cf).vlog_wal_files, st.vlog_wal_files);
    check(&db, &cf, |i| Some(val(i, 0, len)), n);
    db.close().unwrap();
    drop(db);

    // A flipped byte inside one value of an adopted file fails that read
    // only, with a corruption error.
    let victim = 57u32;
    let needle = format!("value-{victim}-0-").into_bytes();
    let (path, orig, at) = vlog_files(d.path())
        .into_iter()
        .find_map(|(name, _)| {
            let path = d.path().join(name);
            let data = std::fs::read(&path).unwrap();
            let at = data.windows(needle.len()).position(|w| w == needle)?;
            Some((path, data, at))
        })
        .expect("the value is in one of the adopted files");
    let mut data = orig.clone();
    data[at + 100] ^= 0x10;
    std::fs::write(&path, &data).unwrap();
    {
        let db = Db::open(d.path(), opts()).unwrap();
        let cf = db.cf("t").unwrap();
        let mut t = db.begin(Isolation::RepeatableRead);
        for i in 0..n {
            match t.get(&cf, &key(i)) {
                Err(Error::Corruption { .. }) if i == victim => {}
                r => assert_eq!(r.unwrap(), Some(val(i, 0, len)), "key {i}"),
            }
        }
        assert!(matches!(
            t.get(&cf, &key(victim)),
            Err(Error::Corruption { .. })
        ));
    }
    std::fs::write(&path, &orig).unwrap();

    // Overwrite 70 %: the adopted files become mostly garbage, GC relocates
    // the live values and removes them.
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = db.cf("t").unwrap();
    write(&db, &cf, (0..n).filter(|i| i % 10 < 7), 1, len);
    db.flush().unwrap();
    db.compact_range(&cf, None, None).unwrap();
    db.gc_value_log(&cf).unwrap();
    let exp = |i: u32| Some(val(i, if i % 10 < 7 { 1 } else { 0 }, len));
    check(&db, &cf, exp, n);
    let live = u64::from(n) * len as u64;
    let after = vlog_bytes(d.path());
    assert!(after <= live + live / 4, "{after} vs live {live}");
    assert_eq!(db.cf_stats(&cf).vlog_bytes, after);

    // Dropping the family removes its value log files.
    db.drop_cf("t").unwrap();
    db.close().unwrap();
    drop(db);
    let _ = Db::open(d.path(), opts()).unwrap();
    assert!(
        vlog_files(d.path()).is_empty(),
        "{:?}",
        vlog_files(d.path())
    );
}

/// A segment mostly made of other data is not adopted (it would start above
/// the GC ratio): its large values are copied as before.
#[test]
fn wal_segment_with_little_separated_data_is_not_adopted() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), opts()).unwrap();
    let cf = sep_cf(&db, "t");
    let other = db.create_cf("o", CfOptions::default()).unwrap();
    for i in 0..40u32 {
        let mut t = db.begin(Isolation::RepeatableRead);
        t.put(&cf, &key(i), &val(i, 0, 5000)).unwrap();
        // 3x as many bytes of another family in the same segments.
        t.put(&other, &key(i), &val(i, 0, 15000)).unwrap();
        t.commit().unwrap();
    }
    db.flush().unwrap();
    let st = db.cf_stats(&cf);
    assert!(st.vlog_files >= 1, "{st:?}");
    assert_eq!(st.vlog_wal_files, 0, "{st:?}");
    check(&db, &cf, |i| Some(val(i, 0, 5000)), 40);
}
