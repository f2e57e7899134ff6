#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Model-based randomized test against a BTreeMap. Seeds are fixed; set
//! TIDESDB_LONG_TESTS=1 for many more steps / seeds.

mod common;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use tidesdb_core::*;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn long() -> bool {
    std::env::var("TIDESDB_LONG_TESTS").is_ok_and(|v| v == "1")
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    let n: u32 = rng.gen_range(0..300);
    format!("key{n:04}").into_bytes()
}

fn opts() -> DbOptions {
    DbOptions {
        block_cache_size: 1 << 20,
        ..common::opts(SyncMode::None, 16 << 10)
    }
}

struct ActiveTxn {
    txn: Txn,
    snap: Map,
    overlay: Overlay,
    sps: Vec<(Savepoint, Overlay)>,
    committed_since: BTreeSet<Vec<u8>>,
}

impl ActiveTxn {
    fn view(&self) -> Map {
        let mut m = self.snap.clone();
        for (k, v) in &self.overlay {
            match v {
                Some(v) => {
                    m.insert(k.clone(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        m
    }
}

fn in_bounds(k: &[u8], lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> bool {
    lo.as_ref().map_or(true, |l| k >= l.as_slice())
        && hi.as_ref().map_or(true, |h| k < h.as_slice())
}

fn check_iter(rng: &mut StdRng, a: &mut ActiveTxn, cf: &Cf) {
    let view = a.view();
    let lo = if rng.gen_bool(0.3) {
        Some(key(rng))
    } else {
        None
    };
    let hi = if rng.gen_bool(0.3) {
        Some(key(rng))
    } else {
        None
    };
    let mut it = a
        .txn
        .iter(
            cf,
            IterOptions {
                lower_bound: lo.clone(),
                upper_bound: hi.clone(),
            },
        )
        .unwrap();
    let vis: Map = view
        .into_iter()
        .filter(|(k, _)| in_bounds(k, &lo, &hi))
        .collect();
    let mut cur: Option<Vec<u8>> = None;
    for _ in 0..rng.gen_range(1..40) {
        match rng.gen_range(0..10) {
            0 => {
                it.seek_to_first();
                cur = vis.keys().next().cloned();
            }
            1 => {
                it.seek_to_last();
                cur = vis.keys().next_back().cloned();
            }
            2 => {
                let k = key(rng);
                it.seek(&k);
                cur = vis.range(k..).next().map(|x| x.0.clone());
            }
            3 => {
                let k = key(rng);
                it.seek_for_prev(&k);
                cur = vis.range(..=k).next_back().map(|x| x.0.clone());
            }
            4..=6 => {
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
            None => assert!(
                !it.valid(),
                "iterator valid at {:?}, expected end",
                String::from_utf8_lossy(it.key())
            ),
            Some(k) => {
                assert!(
                    it.valid(),
                    "iterator invalid, expected {:?}",
                    String::from_utf8_lossy(k)
                );
                assert_eq!(it.key(), k.as_slice());
                assert_eq!(it.value(), vis[k].as_slice());
            }
        }
    }
}

/// `sep`: value separation threshold of the column family (values of
/// 6..56 bytes: with a small threshold about half go to the value log, so
/// pointers go through flush, compaction, GC and reopen).
fn run(seed: u64, steps: usize, sep: Option<usize>) {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = Db::open(d.path(), opts()).unwrap();
    db.set_vlog_gc_ratio(0.3);
    let mut cf = db
        .create_cf(
            "m",
            CfOptions {
                block_size: 512,
                compression: if seed % 2 == 0 {
                    Compression::Zstd { level: 1 }
                } else {
                    Compression::None
                },
                value_separation_threshold: sep,
                ..CfOptions::default()
            },
        )
        .unwrap();
    let mut model: Map = Map::new();
    let mut active: Option<ActiveTxn> = None;
    for step in 0..steps {
        if active.is_none() {
            let iso = if rng.gen_bool(0.5) {
                Isolation::RepeatableRead
            } else {
                Isolation::Serializable
            };
            active = Some(ActiveTxn {
                txn: db.begin(iso),
                snap: model.clone(),
                overlay: BTreeMap::new(),
                sps: Vec::new(),
                committed_since: BTreeSet::new(),
            });
        }
        let a = active.as_mut().unwrap();
        let r = rng.gen_range(0..100);
        match r {
            0..=24 => {
                let k = key(&mut rng);
                let v = format!("v{step}-{}", "x".repeat(rng.gen_range(0..50))).into_bytes();
                a.txn.put(&cf, &k, &v).unwrap();
                a.overlay.insert(k, Some(v));
            }
            25..=34 => {
                let k = key(&mut rng);
                a.txn.delete(&cf, &k).unwrap();
                a.overlay.insert(k, None);
            }
            35..=49 => {
                let k = key(&mut rng);
                let got = a.txn.get(&cf, &k).unwrap();
                assert_eq!(
                    got.as_ref(),
                    a.view().get(&k),
                    "step {step} key {:?}",
                    String::from_utf8_lossy(&k)
                );
            }
            50..=59 => check_iter(&mut rng, a, &cf),
            60..=63 => {
                let sp = a.txn.savepoint();
                a.sps.push((sp, a.overlay.clone()));
            }
            64..=66 => {
                if !a.sps.is_empty() {
                    let i = rng.gen_range(0..a.sps.len());
                    let (sp, ov) = a.sps[i].clone();
                    a.txn.rollback_to(sp).unwrap();
                    a.overlay = ov;
                    a.sps.truncate(i + 1);
                }
            }
            67..=74 => {
                // concurrent committer writing a few keys
                let mut o = db.begin(Isolation::RepeatableRead);
                let mut wrote = Vec::new();
                for _ in 0..rng.gen_range(1..4) {
                    let k = key(&mut rng);
                    if rng.gen_bool(0.8) {
                        let v = format!("o{step}").into_bytes();
                        o.put(&cf, &k, &v).unwrap();
                        wrote.push((k, Some(v)));
                    } else {
                        o.delete(&cf, &k).unwrap();
                        wrote.push((k, None));
                    }
                }
                o.commit().unwrap();
                for (k, v) in wrote {
                    a.committed_since.insert(k.clone());
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            75..=86 => {
                let a = active.take().unwrap();
                let conflict = a.overlay.keys().any(|k| a.committed_since.contains(k));
                let res = a.txn.commit();
                if a.overlay.is_empty() {
                    res.unwrap();
                } else if conflict {
                    assert!(
                        matches!(res, Err(Error::Conflict)),
                        "step {step}: expected conflict, got {res:?}"
                    );
                } else {
                    res.unwrap();
                    for (k, v) in a.overlay {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
            }
            87..=91 => {
                active.take().unwrap().txn.rollback();
            }
            92..=94 => db.flush().unwrap(),
            95..=96 => {
                db.compact_range(&cf, None, None).unwrap();
                if sep.is_some() && rng.gen_bool(0.5) {
                    db.gc_value_log(&cf).unwrap();
                }
            }
            _ => {
                // reopen (drops the active txn)
                active = None;
                db.close().unwrap();
                drop(db);
                db = Db::open(d.path(), opts()).unwrap();
                db.set_vlog_gc_ratio(0.3);
                cf = db.cf("m").unwrap();
            }
        }
        if step % 500 == 0 {
            // full check of committed state
            let mut t = db.begin(Isolation::RepeatableRead);
            let mut it = t.iter(&cf, IterOptions::default()).unwrap();
            let mut got = Map::new();
            it.seek_to_first();
            while it.valid() {
                got.insert(it.key().to_vec(), it.value().to_vec());
                it.next();
            }
            it.status().unwrap();
            assert_eq!(got, model, "step {step}");
        }
    }
}

#[test]
fn model_randomized() {
    let (seeds, steps) = if long() { (20, 60_000) } else { (4, 6_000) };
    for seed in 0..seeds {
        run(seed, steps, None);
    }
}

#[test]
fn model_randomized_value_log() {
    let (seeds, steps) = if long() { (20, 60_000) } else { (3, 6_000) };
    for seed in 100..100 + seeds {
        run(seed, steps, Some(24));
    }
}
