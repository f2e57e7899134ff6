//! Every workload at a tiny scale on our engine, in process: results are sane
//! and every value read back is the one written (workloads count mismatches
//! and missing keys in `errors`).

use tidesdb_bench::{run_workload, Config, WORKLOADS};

#[test]
fn every_workload_tiny_tidesdb() {
    let cfg = Config::tiny();
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut seen = Vec::new();
    for w in WORKLOADS {
        let results = run_workload("tidesdb", w, &cfg, tmp.path())
            .unwrap_or_else(|e| panic!("workload {w} failed: {e}"));
        assert!(!results.is_empty(), "{w}: no result");
        for r in results {
            assert_eq!(r.engine, "tidesdb");
            assert_eq!(r.errors, 0, "{}: read-back errors ({})", r.workload, r.note);
            assert!(r.ops > 0, "{}: no ops", r.workload);
            assert!(
                r.secs > 0.0 && r.ops_per_sec > 0.0,
                "{}: bad timing {r:?}",
                r.workload
            );
            if let Some(a) = r.write_amp {
                // The WAL alone writes every user byte once.
                assert!(a >= 0.9, "{}: write amp {a} below 1", r.workload);
            }
            seen.push((r.workload, r.ops));
        }
    }
    // Op counts follow the config.
    for (name, want) in [
        ("fillseq", cfg.num),
        ("fillrandom", cfg.num),
        ("overwrite", cfg.num),
        ("readhot", cfg.reads),
        ("readrandom", cfg.reads),
        ("readcold", cfg.cold_reads),
        ("seeknext", cfg.seeks),
        ("scan", cfg.num),
        ("write_1m", cfg.large_count),
        ("read_1m", cfg.large_count),
        ("synctxn", cfg.sync_threads as u64 * cfg.sync_txns),
    ] {
        let got = seen.iter().find(|(s, _)| s == name).map(|(_, n)| *n);
        assert_eq!(got, Some(want), "{name}: ops");
    }
}

#[test]
fn keys_sort_like_indexes() {
    let a = tidesdb_bench::key(9);
    let b = tidesdb_bench::key(10);
    assert!(a < b);
    assert_eq!(a.len(), tidesdb_bench::KEY_LEN);
}
