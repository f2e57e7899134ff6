//! `core-bench`: db_bench-style comparison of tidesdb-core with fjall (and
//! RocksDB with `--features rocksdb`).
//!
//! ```text
//! core-bench [--out FILE] [--tmp DIR]              run everything, write JSON, print a table
//! core-bench --child ENGINE WORKLOAD --tmp DIR     (internal) one workload, results on stdout
//! ```
//! Sizes come from environment variables (`BENCH_SCALE`, `BENCH_NUM`, ... see
//! `Config::from_env`); `BENCH_ENGINES` and `BENCH_WORKLOADS` (comma lists)
//! select a subset.

use serde_json::json;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;
use tidesdb_bench::{engines::ENGINES, peak_rss_kb, run_workload, Config, WorkResult, WORKLOADS};

/// Workloads whose measured phase writes (where fjall's two transaction
/// flavours differ).
const WRITE_WORKLOADS: &[&str] = &["fillseq", "fillrandom", "overwrite", "large", "synctxn"];

const RESULT_PREFIX: &str = "BENCH_RESULT ";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = PathBuf::from("target/bench/core.json");
    let mut tmp = PathBuf::from("target/bench/tmp");
    let mut child: Option<(String, String)> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--out" if i + 1 < args.len() => {
                out = PathBuf::from(&args[i + 1]);
                i += 2;
            }
            "--tmp" if i + 1 < args.len() => {
                tmp = PathBuf::from(&args[i + 1]);
                i += 2;
            }
            "--child" if i + 2 < args.len() => {
                child = Some((args[i + 1].clone(), args[i + 2].clone()));
                i += 3;
            }
            a => {
                eprintln!("core-bench: unknown argument {a:?}\nusage: core-bench [--out FILE] [--tmp DIR]");
                std::process::exit(2);
            }
        }
    }
    let cfg = Config::from_env();
    if let Some((engine, workload)) = child {
        run_child(&engine, &workload, &cfg, &tmp);
    } else {
        run_parent(&cfg, &out, &tmp);
    }
}

fn run_child(engine: &str, workload: &str, cfg: &Config, tmp: &std::path::Path) {
    match run_workload(engine, workload, cfg, tmp) {
        Ok(results) => {
            let rss = peak_rss_kb();
            for mut r in results {
                r.peak_rss_kb = rss;
                println!(
                    "{RESULT_PREFIX}{}",
                    serde_json::to_string(&r).expect("serialize result")
                );
            }
        }
        Err(e) => {
            eprintln!("core-bench: {engine}/{workload} failed: {e}");
            std::process::exit(1);
        }
    }
}

fn list_from_env(name: &str, all: &[&str]) -> Vec<String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        _ => all.iter().map(|s| s.to_string()).collect(),
    }
}

fn machine_info() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let mem_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    json!({ "cpu": cpu, "cores": cores, "mem_gib": mem_kb / (1 << 20), "kernel": kernel })
}

fn run_parent(cfg: &Config, out: &std::path::Path, tmp: &std::path::Path) {
    let engines = list_from_env("BENCH_ENGINES", ENGINES);
    let workloads = list_from_env("BENCH_WORKLOADS", WORKLOADS);
    let exe = std::env::current_exe().expect("path of the running binary");
    if tmp.exists() {
        std::fs::remove_dir_all(tmp).expect("clear the bench temp dir");
    }
    std::fs::create_dir_all(tmp).expect("create the bench temp dir");
    let started = Instant::now();
    let mut results: Vec<WorkResult> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    // Workload-major order: engines take turns, so a noisy neighbour on the
    // machine hurts them alike.
    for w in &workloads {
        for e in &engines {
            // fjall_sw reads through the same code as fjall: writes only.
            if e == "fjall_sw" && !WRITE_WORKLOADS.contains(&w.as_str()) {
                continue;
            }
            let t = Instant::now();
            eprint!("core-bench: {w:<11} {e:<8} ... ");
            let output = Command::new(&exe)
                .args(["--child", e, w, "--tmp"])
                .arg(tmp)
                .stdin(Stdio::null())
                .stderr(Stdio::inherit())
                .output()
                .expect("spawn a child core-bench");
            let text = String::from_utf8_lossy(&output.stdout);
            let mut got = 0;
            for line in text.lines() {
                if let Some(j) = line.strip_prefix(RESULT_PREFIX) {
                    let r: WorkResult = serde_json::from_str(j).expect("parse child result");
                    eprint!("{} {:.0} ops/s; ", r.workload, r.ops_per_sec);
                    results.push(r);
                    got += 1;
                }
            }
            eprintln!("({:.1}s)", t.elapsed().as_secs_f64());
            if !output.status.success() || got == 0 {
                failures.push(format!("{e}/{w}: child exited with {}", output.status));
            }
        }
    }
    if std::env::var("BENCH_KEEP").is_err() {
        let _ = std::fs::remove_dir_all(tmp);
    }

    // Ratios ours / other per result row name.
    let mut names: Vec<String> = Vec::new();
    for r in &results {
        if !names.contains(&r.workload) {
            names.push(r.workload.clone());
        }
    }
    let find = |w: &str, e: &str| results.iter().find(|r| r.workload == w && r.engine == e);
    let mut ratios = Vec::new();
    for w in &names {
        let mut row = serde_json::Map::new();
        row.insert("workload".into(), json!(w));
        if let Some(ours) = find(w, "tidesdb") {
            for other in engines.iter().filter(|e| *e != "tidesdb") {
                if let Some(o) = find(w, other) {
                    if o.ops_per_sec > 0.0 {
                        row.insert(
                            format!("tidesdb/{other}"),
                            json!(ours.ops_per_sec / o.ops_per_sec),
                        );
                    }
                }
            }
        }
        ratios.push(serde_json::Value::Object(row));
    }
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    let doc = json!({
        "machine": machine_info(),
        "config": cfg,
        "engines": engines,
        "versions": { "fjall": "3.1.13", "rocksdb_crate": if cfg!(feature = "rocksdb") { "0.25" } else { "not built" } },
        "total_secs": started.elapsed().as_secs_f64(),
        "results": results,
        "ratios": ratios,
        "failures": failures,
        "caveats": [
            "ratio = tidesdb ops/s / other ops/s (> 1: tidesdb faster)",
            "readrandom/seeknext/scan: data ~4x the engine block cache, but the OS page cache holds the files; readcold drops them with posix_fadvise(DONTNEED) every BENCH_COLD_DROP_EVERY reads",
            "write_amp = /proc/self/io write_bytes of the child from open to close (WAL + flush + compaction that ran) / user key+value bytes",
            "peak_rss_kb = VmHWM of the child process running that engine+workload",
            "fills use SyncMode::None / fjall PersistMode::Buffer (buffered journal, written at commit only when full) / RocksDB sync=false",
        ],
    });
    if let Some(p) = out.parent() {
        std::fs::create_dir_all(p).expect("create the output dir");
    }
    std::fs::write(
        out,
        serde_json::to_string_pretty(&doc).expect("serialize report"),
    )
    .expect("write the JSON report");

    print_table(&results, &engines, &names);
    println!(
        "\nwrote {} in {:.0}s{}",
        out.display(),
        started.elapsed().as_secs_f64(),
        if errors > 0 {
            format!("; {errors} READ-BACK ERRORS")
        } else {
            String::new()
        }
    );
    for f in &failures {
        println!("FAILED: {f}");
    }
    if !failures.is_empty() || errors > 0 {
        std::process::exit(1);
    }
}

fn print_table(results: &[WorkResult], engines: &[String], names: &[String]) {
    let others: Vec<&String> = engines.iter().filter(|e| *e != "tidesdb").collect();
    print!(
        "\n{:<11} {:<8} {:>12} {:>9} {:>9} {:>8} {:>9}",
        "workload", "engine", "ops/s", "MB/s", "rss MiB", "w-amp", "secs"
    );
    for o in &others {
        print!(" {:>11}", format!("ours/{o}"));
    }
    println!();
    for w in names {
        let ours = results
            .iter()
            .find(|r| &r.workload == w && r.engine == "tidesdb");
        for e in engines {
            let Some(r) = results.iter().find(|r| &r.workload == w && &r.engine == e) else {
                continue;
            };
            let opt = |v: Option<f64>, prec: usize| {
                v.map(|x| format!("{x:.prec$}"))
                    .unwrap_or_else(|| "-".into())
            };
            print!(
                "{:<11} {:<8} {:>12.0} {:>9} {:>9} {:>8} {:>9.2}",
                w,
                e,
                r.ops_per_sec,
                opt(r.mb_per_sec, 1),
                opt(r.peak_rss_kb.map(|k| k as f64 / 1024.0), 0),
                opt(r.write_amp, 2),
                r.secs
            );
            if e == "tidesdb" {
                for o in &others {
                    let ratio =
                        ours.zip(results.iter().find(|r| &r.workload == w && &r.engine == *o));
                    print!(
                        " {:>11}",
                        ratio
                            .filter(|(_, b)| b.ops_per_sec > 0.0)
                            .map(|(a, b)| format!("{:.2}", a.ops_per_sec / b.ops_per_sec))
                            .unwrap_or_else(|| "-".into())
                    );
                }
            }
            if r.errors > 0 {
                print!("  ERRORS: {}", r.errors);
            }
            println!();
        }
    }
}
