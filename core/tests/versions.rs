#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Update churn: few keys with many versions each (more than an iterator steps
//! over before it seeks past them), in the memtable and, after a flush with
//! snapshots open, in tables. Iterators at old and new snapshots, and over a
//! transaction's own repeated writes of one key, must match a model in every
//! direction.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use tidesdb_core::*;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u32 = 12;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:02}", rng.gen_range(0..KEYS)).into_bytes()
}

fn check(rng: &mut StdRng, txn: &mut Txn, cf: &Cf, vis: &Map, what: &str) {
    let mut it = txn.iter(cf, IterOptions::default()).unwrap();
    // Whole scans, both ways.
    let mut got = Vec::new();
    it.seek_to_first();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    let want: Vec<_> = vis.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want, "{what}: forward scan");
    got.clear();
    it.seek_to_last();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    let want: Vec<_> = vis
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want, "{what}: backward scan");
    // Seeks and direction changes.
    let mut cur: Option<Vec<u8>> = None;
    for _ in 0..60 {
        match rng.gen_range(0..6) {
            0 => {
                let k = key(rng);
                it.seek(&k);
                cur = vis.range(k..).next().map(|x| x.0.clone());
            }
            1 => {
                let k = key(rng);
                it.seek_for_prev(&k);
                cur = vis.range(..=k).next_back().map(|x| x.0.clone());
            }
            2 | 3 => {
                if let Some(c) = cur.clone() {
                    it.next();
                    cur = vis
                        .range((Bound::Excluded(c), Bound::Unbounded))
                        .next()
                        .map(|x| x.0.clone());
                }
            }
            _ => {
                if let Some(c) = cur.clone() {
                    it.prev();
                    cur = vis.range(..c).next_back().map(|x| x.0.clone());
                }
            }
        }
        it.status().unwrap();
        match &cur {
            None => assert!(!it.valid(), "{what}: valid, expected the end"),
            Some(k) => {
                assert!(it.valid(), "{what}: invalid, expected {k:?}");
                assert_eq!(it.key(), k.as_slice(), "{what}");
                assert_eq!(it.value(), vis[k].as_slice(), "{what}");
            }
        }
    }
}

fn run(seed: u64, flush_at: Option<usize>) {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(
        d.path(),
        DbOptions {
            sync_mode: SyncMode::None,
            write_buffer_size: 64 << 20,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let cf = db
        .create_cf(
            "c",
            CfOptions {
                block_size: 256,
                ..CfOptions::default()
            },
        )
        .unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Map::new();
    let mut snaps: Vec<(Txn, Map)> = Vec::new();
    for round in 0..600 {
        let k = key(&mut rng);
        let mut t = db.begin(Isolation::RepeatableRead);
        if rng.gen_bool(0.15) {
            t.delete(&cf, &k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{round}").into_bytes();
            t.put(&cf, &k, &v).unwrap();
            model.insert(k, v);
        }
        t.commit().unwrap();
        if rng.gen_bool(0.02) {
            let mut s = db.begin(Isolation::RepeatableRead);
            // Pins the snapshot now (a read starts it).
            s.get(&cf, b"k00").unwrap();
            snaps.push((s, model.clone()));
        }
        if flush_at == Some(round) {
            db.flush().unwrap();
        }
    }
    let mut s = db.begin(Isolation::RepeatableRead);
    s.get(&cf, b"k00").unwrap();
    snaps.push((s, model.clone()));
    assert!(snaps.len() > 3, "too few snapshots for seed {seed}");
    for (i, (t, m)) in snaps.iter_mut().enumerate() {
        check(&mut rng, t, &cf, m, &format!("seed {seed} snapshot {i}"));
    }
    // A transaction's own writes: many versions of one key in its write set.
    let (t, m) = snaps.last_mut().unwrap();
    let mut m = m.clone();
    for i in 0..30 {
        let k = format!("k{:02}", i % 3).into_bytes();
        if i % 7 == 6 {
            t.delete(&cf, &k).unwrap();
            m.remove(&k);
        } else {
            let v = format!("own{i}").into_bytes();
            t.put(&cf, &k, &v).unwrap();
            m.insert(k, v);
        }
    }
    check(&mut rng, t, &cf, &m, &format!("seed {seed} own writes"));
}

#[test]
fn many_versions_in_memtable() {
    for seed in 0..4 {
        run(seed, None);
    }
}

#[test]
fn many_versions_in_memtable_and_tables() {
    for seed in 10..14 {
        run(seed, Some(300));
    }
}
