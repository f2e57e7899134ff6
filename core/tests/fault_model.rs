#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The model test under injected I/O faults (`tidesdb_core::faults`).
//!
//! A seeded workload (commits small and spilled, 2PC prepare + commit,
//! flush, compaction, value-log GC, checkpoint, create/rename/drop of a
//! column family, close + reopen) runs against
//! a BTreeMap of what was acknowledged, with one fault armed: at every call
//! site the fault-free workload reaches in turn (first and last call there),
//! each fault that applies (EIO, ENOSPC, short write, torn write = crash).
//! At the first error the workload stops; the database is dropped without a
//! clean close (after a torn write every later operation fails, as in a dead
//! process); the fault is disarmed and the directory reopened.
//!
//! The contract checked after the reopen:
//! * the open succeeds (no file left behind breaks it);
//! * every acknowledged commit is there, with its values;
//! * a commit (or prepare) that returned an error is either wholly there or
//!   wholly absent: its record may have reached the WAL before the failing
//!   step (a failed fdatasync does not say the bytes are not on disk), so it
//!   is "in doubt"; a prepared transaction found by `recover_prepared` can
//!   only be that one, and the test commits it (what a coordinator would do);
//! * nothing that was never committed is there;
//! * a failed WAL fsync poisons the database: the next commit fails;
//! * nothing panics, in the test thread or in a background thread;
//! * the reopened database takes a commit and keeps it over another reopen.
//!
//! The default run fails each recorded call site of one seed's workload at
//! its first call (about a hundred runs, well under a minute).
//! `FAULT_MODEL_ITERATIONS=N` is the long variant: three seeds, each site
//! at its first and last call, and for every kind of operation and fault
//! the 1st, 2nd, ... Nth operation of that kind, up to N or until a run
//! completes without reaching it.

mod common;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use tidesdb_core::faults::{self, Fault, Op, Plan};
use tidesdb_core::*;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

const STEPS: usize = 40;

/// The first steps of every workload: a commit, a spilled commit, a
/// prepare, a spilled prepare, a flush, a commit, compaction + GC, DDL, a
/// checkpoint, a reopen (see `workload`'s match).
const SCRIPT: [u32; 10] = [0, 55, 60, 63, 65, 1, 77, 91, 87, 94];

static PANICS: AtomicUsize = AtomicUsize::new(0);
/// Runs whose commit failed on the WAL fsync (the poisoning was checked).
static POISON_CHECKS: AtomicUsize = AtomicUsize::new(0);
static CURRENT: Mutex<String> = Mutex::new(String::new());

/// Counts panics on any thread (a background thread's panic would
/// otherwise only print), naming the plan that ran.
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            let cur = CURRENT.lock().map(|c| c.clone()).unwrap_or_default();
            eprintln!("panic under fault plan {cur}");
            prev(info);
        }));
    });
}

/// The tests of this file arm process-wide plans: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn opts() -> DbOptions {
    DbOptions {
        block_cache_size: 1 << 20,
        ..common::opts(SyncMode::Full, 8 << 10)
    }
}

fn cf_opts() -> CfOptions {
    CfOptions {
        block_size: 512,
        value_separation_threshold: Some(32),
        ..CfOptions::default()
    }
}

fn db_dir(root: &Path) -> PathBuf {
    root.join("db")
}

fn open(root: &Path) -> Result<(Db, Cf)> {
    let db = Db::open(db_dir(root), opts())?;
    db.set_vlog_gc_ratio(0.2);
    db.set_spill_threshold(4 << 10);
    let cf = match db.cf("m") {
        Some(cf) => cf,
        None => db.create_cf("m", cf_opts())?,
    };
    Ok((db, cf))
}

fn apply(model: &mut Map, writes: &Writes) {
    for (k, v) in writes {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Where the workload stopped: the error, what it was doing, the commit in
/// doubt (if the error came from one) and the database (if open).
struct Stop {
    err: Error,
    what: String,
    in_doubt: Option<Writes>,
    db: Option<(Db, Cf)>,
}

fn stop(err: Error, what: String, in_doubt: Option<Writes>, db: Option<(Db, Cf)>) -> Box<Stop> {
    Box::new(Stop {
        err,
        what,
        in_doubt,
        db,
    })
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:04}", rng.gen_range(0..200)).into_bytes()
}

fn value(rng: &mut StdRng, step: usize, max: usize) -> Vec<u8> {
    let n = rng.gen_range(4..max);
    let mut v = format!("v{step}-").into_bytes();
    v.resize(v.len() + n, b'a' + (step % 26) as u8);
    v
}

/// Runs the workload; `model` holds every acknowledged commit. Returns the
/// open database when it completes.
fn workload(root: &Path, seed: u64, model: &mut Map) -> std::result::Result<(Db, Cf), Box<Stop>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut db, mut cf) = open(root).map_err(|e| stop(e, "open".into(), None, None))?;
    for step in 0..STEPS {
        // Each kind of step once first (so every seed reaches every kind's
        // file operations), then at random.
        let r = match SCRIPT.get(step) {
            Some(&r) => r,
            None => rng.gen_range(0..100),
        };
        macro_rules! fail {
            ($e:expr, $what:expr, $doubt:expr) => {
                return Err(stop(
                    $e,
                    format!("step {step}: {}", $what),
                    $doubt,
                    Some((db, cf)),
                ))
            };
        }
        match r {
            0..=49 | 55..=64 => {
                // 55..=59 and 63..=64: write sets that spill to files.
                let (n, max) = if (55..=59).contains(&r) || (63..=64).contains(&r) {
                    (60, 120)
                } else {
                    (rng.gen_range(1..5), 80)
                };
                let mut t = db.begin(Isolation::RepeatableRead);
                let mut w: Writes = Vec::new();
                for _ in 0..n {
                    let k = key(&mut rng);
                    let v = if rng.gen_bool(0.2) {
                        None
                    } else {
                        Some(value(&mut rng, step, max))
                    };
                    let res = match &v {
                        Some(v) => t.put(&cf, &k, v),
                        None => t.delete(&cf, &k),
                    };
                    if let Err(e) = res {
                        // A write that spills may fail: nothing is committed.
                        fail!(e, "write", None);
                    }
                    w.push((k, v));
                }
                let mut t = t;
                if r >= 60 {
                    let xid = format!("xid-{seed}-{step}").into_bytes();
                    if let Err(e) = t.prepare(&xid) {
                        fail!(e, "prepare", Some(w));
                    }
                }
                match t.commit() {
                    Ok(()) => apply(model, &w),
                    Err(e) => fail!(e, "commit", Some(w)),
                }
            }
            50..=54 => {
                let k = key(&mut rng);
                let mut t = db.begin(Isolation::RepeatableRead);
                match t.get(&cf, &k) {
                    Ok(v) => assert_eq!(v.as_ref(), model.get(&k), "step {step}: read"),
                    Err(e) => fail!(e, "read", None),
                }
            }
            65..=76 => {
                if let Err(e) = db.flush() {
                    fail!(e, "flush", None);
                }
            }
            77..=86 => {
                if let Err(e) = db.compact_range(&cf, None, None) {
                    fail!(e, "compact", None);
                }
                if let Err(e) = db.gc_value_log(&cf) {
                    fail!(e, "value-log GC", None);
                }
            }
            87..=90 => {
                let dest = root.join(format!("ckpt{step}"));
                if let Err(e) = db.checkpoint(&dest, "") {
                    fail!(e, "checkpoint", None);
                }
            }
            91..=93 => {
                // DDL: manifest edits of a family beside the model's.
                let (x, y) = (format!("x{step}"), format!("y{step}"));
                let r = db
                    .create_cf(&x, cf_opts())
                    .and_then(|_| db.rename_cf(&x, &y))
                    .and_then(|()| db.drop_cf(&y));
                if let Err(e) = r {
                    fail!(e, "create/rename/drop family", None);
                }
            }
            _ => {
                if let Err(e) = db.close() {
                    fail!(e, "close", None);
                }
                drop(db);
                (db, cf) = open(root).map_err(|e| stop(e, "reopen".into(), None, None))?;
            }
        }
    }
    Ok((db, cf))
}

fn read_all(db: &Db, cf: &Cf) -> Map {
    let mut t = db.begin(Isolation::RepeatableRead);
    let mut it = t.iter(cf, IterOptions::default()).unwrap();
    let mut got = Map::new();
    it.seek_to_first();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    got
}

fn show(m: &Map) -> Vec<String> {
    m.iter()
        .map(|(k, v)| format!("{}={}", String::from_utf8_lossy(k), v.len()))
        .collect()
}

/// One run under `plan` (its `dir` is set here); returns whether the fault
/// happened.
fn run_with(seed: u64, plan: Option<Plan>) -> bool {
    let root = tempfile::tempdir().unwrap();
    let plan = plan.map(|p| Plan {
        dir: root.path().to_path_buf(),
        ..p
    });
    let label = format!("{plan:?} seed {seed}");
    *CURRENT.lock().unwrap() = label.clone();
    let panics = PANICS.load(Ordering::SeqCst);
    if let Some(p) = &plan {
        faults::arm(p.clone());
    }
    let mut model = Map::new();
    let mut in_doubt = None;
    match workload(root.path(), seed, &mut model) {
        Ok(db) => drop(db),
        Err(s) => {
            if let Some((db, cf)) = s.db {
                let wal_sync = matches!(&s.err, Error::Io { context, .. }
                    if context.contains("fsync WAL"));
                if wal_sync && s.in_doubt.is_some() {
                    POISON_CHECKS.fetch_add(1, Ordering::SeqCst);
                    let mut t = db.begin(Isolation::RepeatableRead);
                    let again = t.put(&cf, b"after", b"x").and_then(|()| t.commit());
                    assert!(
                        again.is_err(),
                        "{label}: a commit succeeded after a failed WAL fsync ({})",
                        s.err
                    );
                }
                drop((db, cf));
            }
            if plan.is_none() {
                panic!("{label}: {} failed without a fault: {}", s.what, s.err);
            }
            in_doubt = s.in_doubt;
        }
    }
    let fired = faults::fired();
    faults::disarm();
    let (db, cf) = open(root.path())
        .unwrap_or_else(|e| panic!("{label}: reopen without the fault failed: {e}"));
    let mut with_doubt = model.clone();
    if let Some(w) = &in_doubt {
        apply(&mut with_doubt, w);
    }
    for p in db.recover_prepared() {
        assert!(
            in_doubt.is_some(),
            "{label}: prepared {:?} found but none was in doubt",
            String::from_utf8_lossy(p.xid())
        );
        db.commit_prepared(p.xid())
            .unwrap_or_else(|e| panic!("{label}: commit_prepared: {e}"));
    }
    let got = read_all(&db, &cf);
    assert!(
        got == model || (in_doubt.is_some() && got == with_doubt),
        "{label}: after reopen\n got  {:?}\n want {:?}\n or   {:?}",
        show(&got),
        show(&model),
        in_doubt.as_ref().map(|_| show(&with_doubt))
    );
    // Usable: a commit survives a clean reopen.
    let mut t = db.begin(Isolation::RepeatableRead);
    t.put(&cf, b"zz-after-fault", b"ok").unwrap();
    t.commit()
        .unwrap_or_else(|e| panic!("{label}: commit after reopen: {e}"));
    db.close().unwrap();
    drop((db, cf));
    let (db, cf) = open(root.path()).unwrap();
    let mut t = db.begin(Isolation::RepeatableRead);
    assert_eq!(
        t.get(&cf, b"zz-after-fault").unwrap().as_deref(),
        Some(&b"ok"[..]),
        "{label}"
    );
    drop(t);
    drop((db, cf));
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        panics,
        "{label}: a thread panicked"
    );
    fired
}

/// The call sites (and their counts) the fault-free workload reaches.
fn record_sites(seed: u64) -> Vec<faults::SiteCount> {
    let root = tempfile::tempdir().unwrap();
    faults::record(root.path());
    let mut model = Map::new();
    match workload(root.path(), seed, &mut model) {
        Ok(db) => drop(db),
        Err(s) => panic!("fault-free workload failed at {}: {}", s.what, s.err),
    }
    let sites = faults::recorded();
    faults::disarm();
    sites
}

/// `FAULT_MODEL_ITERATIONS=N`: the long variant (see the file's head).
fn iterations() -> Option<u64> {
    std::env::var("FAULT_MODEL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
}

/// Seeds of the workload: one by default, more in the long variant.
fn seeds() -> &'static [u64] {
    if iterations().is_some() {
        &[1, 2, 3]
    } else {
        &[1]
    }
}

/// Every call site the workload reaches, failed in turn with every fault
/// that applies to it, at its first call (and, in the long variant, at its
/// last call too).
#[test]
fn faults_at_every_call_site() {
    let _g = serial();
    count_panics();
    let mut runs = 0;
    let mut hit = 0;
    for &seed in seeds() {
        let sites = record_sites(seed);
        assert!(
            sites.iter().any(|s| s.op == Op::Write) && sites.iter().any(|s| s.op == Op::Sync),
            "no writes or syncs recorded: {sites:?}"
        );
        for s in &sites {
            for fault in Fault::ALL {
                if !fault.applies_to(s.op) {
                    continue;
                }
                let mut nths = vec![1];
                if s.count > 1 && iterations().is_some() {
                    nths.push(s.count);
                }
                for nth in nths {
                    let plan = Plan {
                        dir: PathBuf::new(),
                        op: s.op,
                        fault,
                        nth,
                        site: Some(s.site.clone()),
                    };
                    runs += 1;
                    hit += usize::from(run_with(seed, Some(plan)));
                }
            }
        }
    }
    let poison = POISON_CHECKS.load(Ordering::SeqCst);
    eprintln!(
        "fault model: {runs} runs, {hit} reached their fault, {poison} failed a commit's WAL fsync"
    );
    assert!(poison > 0, "no run failed a commit on its WAL fsync");
    assert!(
        hit * 2 > runs,
        "only {hit} of {runs} runs reached their fault"
    );
}

/// The fault-free workload passes the same checks (the oracle itself).
#[test]
fn workload_without_faults_matches_model() {
    let _g = serial();
    count_panics();
    for &seed in seeds() {
        assert!(!run_with(seed, None));
    }
}

/// `FAULT_MODEL_ITERATIONS=N`: for every kind of operation and every
/// fault, the 1st, 2nd, ... Nth operation of that kind fails (stopping
/// at the first run that does not reach it).
#[test]
fn faults_at_nth_operation_of_each_kind() {
    let Some(max) = iterations() else {
        eprintln!("SKIP: set FAULT_MODEL_ITERATIONS=N for the exhaustive variant");
        return;
    };
    let _g = serial();
    count_panics();
    for &seed in seeds() {
        for op in Op::ALL {
            for fault in Fault::ALL {
                if !fault.applies_to(op) {
                    continue;
                }
                for nth in 1..=max {
                    let plan = Plan {
                        dir: PathBuf::new(),
                        op,
                        fault,
                        nth,
                        site: None,
                    };
                    if !run_with(seed, Some(plan)) {
                        break;
                    }
                }
            }
        }
    }
}
