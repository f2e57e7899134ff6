//! Robustness ("fuzz") tests of every on-disk decoder: random and mutated
//! inputs with a fixed seed must give `None` / `Err`, never a panic.
//! Stable Rust, no cargo-fuzz; iteration counts keep the whole module to a
//! few seconds. `TIDESDB_LONG_TESTS=1` multiplies them by 20.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::iter::InternalIterator;
use crate::journal::batch::{self, Op};
use crate::journal::wal;
use crate::key::Kind;
use crate::options::{CfOptions, Compression};
use crate::table::block::{Block, RawBlock};
use crate::table::cache::BlockCache;
use crate::table::sst::{self, Table, TableBuilder, TableIter};
use crate::version::manifest::{self, EditOp, FileMeta, State};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

fn iters(n: usize) -> usize {
    if std::env::var("TIDESDB_LONG_TESTS").is_ok_and(|v| v == "1") {
        n * 20
    } else {
        n
    }
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.gen_range(0..=max);
    (0..n).map(|_| rng.gen()).collect()
}

/// Flips, overwrites, truncates, inserts or duplicates bytes.
fn mutate(rng: &mut StdRng, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        match rng.gen_range(0..6) {
            0 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !v.is_empty() => {
                let i = rng.gen_range(0..v.len());
                v[i] = rng.gen();
            }
            2 => {
                let n = rng.gen_range(0..=v.len());
                v.truncate(n);
            }
            3 => {
                let i = rng.gen_range(0..=v.len());
                let extra = random_bytes(rng, 16);
                v.splice(i..i, extra);
            }
            4 if !v.is_empty() => {
                // a plausible big varint / length somewhere
                let i = rng.gen_range(0..v.len());
                v[i] = 0xff;
            }
            _ => {
                let i = rng.gen_range(0..=v.len());
                let j = rng.gen_range(i..=v.len());
                let dup = v[i..j].to_vec();
                v.extend_from_slice(&dup);
            }
        }
    }
    v
}

fn sample_ops(rng: &mut StdRng) -> Vec<Op> {
    (0..rng.gen_range(0..8))
        .map(|i| Op {
            cf: rng.gen_range(0..300),
            kind: if i % 3 == 0 { Kind::Delete } else { Kind::Put },
            key: random_bytes(rng, 20),
            value: random_bytes(rng, 40).into(),
            crc: None,
        })
        .collect()
}

#[test]
fn fuzz_wal_batch_payloads() {
    let mut rng = StdRng::seed_from_u64(0xBA7C);
    for _ in 0..iters(5000) {
        let ops = sample_ops(&mut rng);
        let mut valid = Vec::new();
        match rng.gen_range(0..4) {
            0 => batch::encode_commit(&mut valid, rng.gen(), ops.iter()),
            1 => batch::encode_prepare(&mut valid, b"xid", ops.iter()),
            2 => batch::encode_commit_prepared(&mut valid, rng.gen(), b"xid"),
            _ => batch::encode_rollback_prepared(&mut valid, b"xid"),
        }
        assert!(batch::decode(&valid).is_some());
        let _ = batch::decode(&mutate(&mut rng, &valid));
        let _ = batch::decode(&random_bytes(&mut rng, 64));
    }
}

#[test]
fn fuzz_wal_records() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x3A1);
    let mut framed = Vec::new();
    for _ in 0..20 {
        let mut p = Vec::new();
        batch::encode_commit(&mut p, rng.gen(), sample_ops(&mut rng).iter());
        wal::frame_record(&mut framed, &p);
    }
    let path = d.path().join("000001.wal");
    for i in 0..iters(1500) {
        let data = if i % 5 == 0 {
            random_bytes(&mut rng, 256)
        } else {
            mutate(&mut rng, &framed)
        };
        std::fs::write(&path, &data).unwrap();
        for last in [true, false] {
            let _ = wal::read_segment(&path, last, |payload, _| {
                let _ = batch::decode(payload);
                Ok(())
            });
        }
    }
}

#[test]
fn fuzz_manifest_edits() {
    let mut rng = StdRng::seed_from_u64(0x3A2);
    for _ in 0..iters(5000) {
        let meta = FileMeta {
            file_no: rng.gen_range(0..100),
            size: rng.gen(),
            min_seq: rng.gen_range(0..1000),
            max_seq: rng.gen_range(0..1000),
            num_entries: rng.gen(),
            smallest: random_bytes(&mut rng, 8),
            largest: random_bytes(&mut rng, 8),
            encrypted: false,
        };
        let ops = vec![
            EditOp::CreateCf {
                id: rng.gen_range(1..5),
                name: "t".into(),
                opts: CfOptions {
                    compression: Compression::Zstd { level: -3 },
                    value_separation_threshold: Some(100),
                    ..CfOptions::default()
                },
            },
            EditOp::AddFile {
                cf: 1,
                level: rng.gen_range(0..7),
                meta,
            },
            EditOp::RemoveFile {
                cf: 1,
                level: 0,
                file_no: 3,
            },
            EditOp::FlushedSeq(1, rng.gen()),
            EditOp::LastSeq(rng.gen()),
            EditOp::NextFile(rng.gen()),
            EditOp::NextCfId(rng.gen()),
            EditOp::VlogAdd {
                cf: 1,
                file_no: rng.gen_range(0..1 << 40),
                size: rng.gen_range(0..1 << 30),
            },
            EditOp::VlogGarbage(rng.gen_range(0..1 << 40), rng.gen_range(0..1 << 30)),
            EditOp::VlogRemove(rng.gen_range(0..1 << 40)),
            EditOp::PrepareSpilled {
                xid: b"x1".to_vec(),
                files: vec![(1, rng.gen_range(0..1 << 40))],
            },
            EditOp::ResolveSpilled(b"x1".to_vec()),
            EditOp::RenameCf(1, "u".into()),
            EditOp::DropCf(2),
        ];
        let valid = manifest::encode_edit(&ops);
        assert!(manifest::decode_edit(&valid).is_some());
        for input in [mutate(&mut rng, &valid), random_bytes(&mut rng, 64)] {
            if let Some(ops) = manifest::decode_edit(&input) {
                let mut st = State::default();
                let _ = st.apply(&ops);
            }
        }
    }
}

fn build_table(dir: &std::path::Path, comp: Compression) -> Vec<u8> {
    let p = sst::table_path(dir, 1);
    let _ = std::fs::remove_file(&p);
    let mut b = TableBuilder::create(p.clone(), 256, comp, 10, None).unwrap();
    for i in 0..300u32 {
        let kind = if i % 7 == 0 { Kind::Delete } else { Kind::Put };
        b.add(
            format!("key{i:05}").as_bytes(),
            u64::from(i) + 1,
            kind,
            &[b'x'; 20],
        )
        .unwrap();
    }
    b.finish().unwrap();
    std::fs::read(&p).unwrap()
}

fn exercise_table(path: std::path::PathBuf, no: u64) {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let Ok(t) = Table::open(path, no, cache, &crate::crypto::Keyring::default()) else {
        return;
    };
    let t = Arc::new(t);
    let _ = t.get(b"key00042", u64::MAX >> 8);
    let _ = t.get(b"nope", u64::MAX >> 8);
    let _ = t.approx_entries_in_range(Some(b"key00010"), Some(b"key00200"));
    let mut it = TableIter::new(t.clone());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < 1000 {
        let _ = (it.user_key(), it.seq(), it.kind(), it.value());
        it.next();
        n += 1;
    }
    let _ = it.status();
    it.seek_to_last();
    n = 0;
    while it.valid() && n < 1000 {
        it.prev();
        n += 1;
    }
    it.seek(b"key00100", u64::MAX);
    it.seek_for_prev(b"key00100", 0);
    let _ = it.status();
}

#[test]
fn fuzz_table_files() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x55);
    let plain = build_table(d.path(), Compression::None);
    let zstd = build_table(d.path(), Compression::Zstd { level: 1 });
    for i in 0..iters(600) {
        let no = 100 + i as u64;
        let src = if i % 2 == 0 { &plain } else { &zstd };
        let data = if i % 10 == 0 {
            random_bytes(&mut rng, 200)
        } else if i % 3 == 0 {
            // damage concentrated in the tail: footer, props, index, filter
            let cut = src.len().saturating_sub(rng.gen_range(1..400));
            let mut v = src[..cut].to_vec();
            let tail = mutate(&mut rng, &src[cut..]);
            v.extend_from_slice(&tail);
            v
        } else {
            mutate(&mut rng, src)
        };
        let p = sst::table_path(d.path(), no);
        std::fs::write(&p, &data).unwrap();
        exercise_table(p.clone(), no);
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn fuzz_blocks_props_handles_filters() {
    let mut rng = StdRng::seed_from_u64(0xB10C);
    let d = tempfile::tempdir().unwrap();
    let table = build_table(d.path(), Compression::None);
    let path = d.path().join("x");
    for _ in 0..iters(5000) {
        // Raw blocks: random, or slices of a real table (data blocks).
        let raw = if rng.gen_bool(0.5) {
            random_bytes(&mut rng, 300)
        } else {
            let a = rng.gen_range(0..table.len());
            let b = rng.gen_range(a..=table.len().min(a + 600));
            mutate(&mut rng, &table[a..b])
        };
        if let Ok(b) = RawBlock::new(raw.clone(), &path, 0) {
            let mut k = Vec::new();
            let _ = b.seek(b"key00010", 5, &mut k, &path, 0);
            let _ = b.seek(b"", 0, &mut k, &path, 0);
        }
        if let Ok(b) = Block::decode(raw.clone(), &path, 0) {
            for i in 0..b.len().min(50) {
                let _ = (b.key(i), b.value(i));
            }
            let _ = b.lower_bound(b"key00010", 5);
            let _ = b.upper_bound(b"key00010", 5);
        }
        let _ = sst::Props::decode(&raw);
        let _ = sst::decode_handle(&raw);
        let _ = sst::bloom_may_contain(&raw, b"key00001");
        let _ = crate::key::decode_ikey(&raw);
    }
}

/// Value log: mutated pointers and mutated record bytes must give an error
/// (or, for an untouched record, the right value), never a panic or a
/// wrong value.
#[test]
fn fuzz_value_log() {
    use crate::value_ptr::Ptr;
    use crate::vlog::file::{VlogFile, VlogWriter};
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x7106);
    let mut w = VlogWriter::create(d.path(), 1).unwrap();
    let mut recs = Vec::new();
    for i in 0..40u32 {
        let v = random_bytes(&mut rng, 3000);
        recs.push((w.add(format!("key{i}").as_bytes(), &v, None).unwrap(), v));
    }
    w.finish().unwrap();
    let path = crate::vlog::file::vlog_path(d.path(), 1);
    let orig = std::fs::read(&path).unwrap();
    let f = VlogFile::open(
        d.path(),
        1,
        crate::vlog::file::VlogFormat::Records,
        None,
        &crate::crypto::Keyring::default(),
    )
    .unwrap();
    for _ in 0..iters(2000) {
        let (p, v) = &recs[rng.gen_range(0..recs.len())];
        let mut enc = Vec::new();
        p.encode(&mut enc);
        let m = mutate(&mut rng, &enc);
        if let Some(q) = Ptr::decode(&m) {
            if let Ok(got) = f.read(&q) {
                // Only a pointer naming the same record can succeed.
                assert_eq!((q.offset, q.len, q.crc), (p.offset, p.len, p.crc));
                assert_eq!(&*got, v.as_slice());
            }
        }
        let _ = Ptr::decode(&random_bytes(&mut rng, 30));
    }
    drop(f);
    for round in 0..iters(200) {
        let data = mutate(&mut rng, &orig);
        let p2 = d.path().join(format!("{:06}.vlog", 2 + round));
        std::fs::write(&p2, &data).unwrap();
        let f = VlogFile::open(
            d.path(),
            2 + round as u64,
            crate::vlog::file::VlogFormat::Records,
            None,
            &crate::crypto::Keyring::default(),
        )
        .unwrap();
        for (p, v) in &recs {
            if let Ok(got) = f.read(p) {
                assert_eq!(&*got, v.as_slice(), "a damaged record was returned");
            }
        }
        drop(f);
        let _ = std::fs::remove_file(&p2);
    }
}

/// A WAL segment kept as a value log (`VlogFormat::WalSegment`): pointers
/// name bare values, checked by their crc only. Mutated pointers and mutated
/// file bytes give an error or the right value, never a panic or a wrong value.
#[test]
fn fuzz_wal_segment_value_log() {
    use crate::value_ptr::Ptr;
    use crate::vlog::file::{VlogFile, VlogFormat};
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x3a1);
    let mut data = Vec::new();
    let mut vals = Vec::new();
    for _ in 0..30 {
        data.extend_from_slice(&random_bytes(&mut rng, 40));
        let v = random_bytes(&mut rng, 5000);
        let p = Ptr {
            file: 1,
            offset: data.len() as u64,
            len: v.len() as u64,
            crc: crc32fast::hash(&v),
        };
        data.extend_from_slice(&v);
        vals.push((p, v));
    }
    std::fs::write(crate::vlog::file::vlog_path(d.path(), 1), &data).unwrap();
    let f = VlogFile::open(
        d.path(),
        1,
        VlogFormat::WalSegment,
        None,
        &crate::crypto::Keyring::default(),
    )
    .unwrap();
    for _ in 0..iters(2000) {
        let (p, v) = &vals[rng.gen_range(0..vals.len())];
        let mut enc = Vec::new();
        p.encode(&mut enc);
        let m = mutate(&mut rng, &enc);
        if let Some(q) = Ptr::decode(&m) {
            if let Ok(got) = f.read(&q) {
                // A crc32 collision on another range is possible in
                // principle; the bytes returned must be the file's.
                let at = q.offset as usize;
                assert_eq!(&*got, &data[at..at + q.len as usize]);
                if (q.offset, q.len) == (p.offset, p.len) {
                    assert_eq!(&*got, v.as_slice());
                }
            }
        }
    }
    drop(f);
    for round in 0..iters(200) {
        let bad = mutate(&mut rng, &data);
        let no = 2 + round as u64;
        std::fs::write(crate::vlog::file::vlog_path(d.path(), no), &bad).unwrap();
        let f = VlogFile::open(
            d.path(),
            no,
            VlogFormat::WalSegment,
            None,
            &crate::crypto::Keyring::default(),
        )
        .unwrap();
        for (p, v) in &vals {
            if let Ok(got) = f.read(&Ptr { file: no, ..*p }) {
                assert_eq!(&*got, v.as_slice(), "a damaged value was returned");
            }
        }
        drop(f);
        let _ = std::fs::remove_file(crate::vlog::file::vlog_path(d.path(), no));
    }
}
