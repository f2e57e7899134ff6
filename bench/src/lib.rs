//! db_bench-style workloads run against any [`engines::Engine`].
//!
//! Every workload is a function of (engine, config, directory) that returns one
//! or more [`WorkResult`]s; `core-bench` runs each in a child process so that
//! peak RSS and written bytes are per workload.

pub mod engines;

use engines::{Engine, EngineOpts, Res};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const KEY_LEN: usize = 16;

/// Workloads in run order. Those reading `main` need `fillrandom` to have run.
pub const WORKLOADS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "readhot",
    "readrandom",
    "readcold",
    "seeknext",
    "scan",
    "overwrite",
    "churnscan",
    "large",
    "synctxn",
];

/// Sizes, from environment variables (see `Config::from_env`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    pub scale: f64,
    pub num: u64,
    pub value_size: usize,
    pub batch: usize,
    pub reads: u64,
    pub cold_reads: u64,
    pub cold_drop_every: u64,
    pub seeks: u64,
    pub seek_len: usize,
    pub large_count: u64,
    pub large_size: usize,
    pub sync_threads: usize,
    pub sync_txns: u64,
    pub sync_puts: usize,
    pub cache_bytes: usize,
    pub hot_cache_bytes: usize,
    pub write_buffer_bytes: usize,
    pub max_secs: f64,
    pub seed: u64,
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Config {
    /// `BENCH_SCALE` (default 1) multiplies every count default; each count can
    /// also be set directly (`BENCH_NUM`, `BENCH_READS`, ...).
    pub fn from_env() -> Config {
        let scale = env_f64("BENCH_SCALE", 1.0);
        let sc = |n: f64, min: u64| ((n * scale) as u64).max(min);
        let mib = 1u64 << 20;
        Config {
            scale,
            // 1.1M x (16 + 100) bytes ~ 128 MiB of user data = 4x the 32 MiB cache.
            num: env_u64("BENCH_NUM", sc(1_150_000.0, 100)),
            value_size: env_u64("BENCH_VALUE_SIZE", 100) as usize,
            batch: env_u64("BENCH_BATCH", 1).max(1) as usize,
            reads: env_u64("BENCH_READS", sc(300_000.0, 100)),
            cold_reads: env_u64("BENCH_COLD_READS", sc(15_000.0, 50)),
            cold_drop_every: env_u64("BENCH_COLD_DROP_EVERY", 1000).max(1),
            seeks: env_u64("BENCH_SEEKS", sc(20_000.0, 20)),
            seek_len: env_u64("BENCH_SEEK_LEN", 100) as usize,
            large_count: env_u64("BENCH_LARGE_COUNT", sc(256.0, 4)),
            large_size: env_u64("BENCH_LARGE_SIZE", mib) as usize,
            sync_threads: env_u64("BENCH_SYNC_THREADS", 8).max(1) as usize,
            sync_txns: env_u64("BENCH_SYNC_TXNS", sc(300.0, 5)),
            sync_puts: env_u64("BENCH_SYNC_PUTS", 2).max(1) as usize,
            cache_bytes: (env_u64("BENCH_CACHE_MB", 32) * mib) as usize,
            hot_cache_bytes: (env_u64("BENCH_HOT_CACHE_MB", 512) * mib) as usize,
            write_buffer_bytes: (env_u64("BENCH_WRITE_BUFFER_MB", 16) * mib) as usize,
            max_secs: env_f64("BENCH_MAX_SECS", 8.0),
            seed: env_u64("BENCH_SEED", 0x0716_55db),
        }
    }

    /// A tiny configuration for tests.
    pub fn tiny() -> Config {
        let kib = 1usize << 10;
        Config {
            scale: 0.0,
            num: 3000,
            value_size: 100,
            batch: 1,
            reads: 2000,
            cold_reads: 200,
            cold_drop_every: 50,
            seeks: 50,
            seek_len: 100,
            large_count: 6,
            large_size: 256 * kib,
            sync_threads: 4,
            sync_txns: 10,
            sync_puts: 2,
            cache_bytes: 64 * kib,
            hot_cache_bytes: 8 << 20,
            write_buffer_bytes: 128 * kib,
            max_secs: 60.0,
            seed: 42,
        }
    }
}

/// One measured phase of one engine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkResult {
    pub workload: String,
    pub engine: String,
    pub ops: u64,
    pub secs: f64,
    pub ops_per_sec: f64,
    /// User bytes (key + value) moved per second; `None` where not meaningful.
    pub mb_per_sec: Option<f64>,
    /// Bytes the process wrote to storage (/proc/self/io write_bytes) from open
    /// to close, flush included; only for write workloads.
    pub write_bytes: Option<u64>,
    pub user_bytes: Option<u64>,
    pub write_amp: Option<f64>,
    /// Time of the final flush + close (not in `secs`).
    pub flush_secs: Option<f64>,
    /// VmHWM of the child process, KiB (filled in by the runner).
    pub peak_rss_kb: Option<u64>,
    /// Values not found or not equal to the ones written.
    pub errors: u64,
    pub note: String,
}

impl WorkResult {
    fn new(workload: &str, engine: &str, ops: u64, secs: f64) -> WorkResult {
        WorkResult {
            workload: workload.into(),
            engine: engine.into(),
            ops,
            secs,
            ops_per_sec: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
            ..WorkResult::default()
        }
    }
    fn with_bytes(mut self, bytes: u64) -> WorkResult {
        if self.secs > 0.0 {
            self.mb_per_sec = Some(bytes as f64 / self.secs / 1e6);
        }
        self
    }
    fn with_amp(mut self, written: u64, user: u64, flush_secs: f64) -> WorkResult {
        self.write_bytes = Some(written);
        self.user_bytes = Some(user);
        if user > 0 {
            self.write_amp = Some(written as f64 / user as f64);
        }
        self.flush_secs = Some(flush_secs);
        self
    }
}

// ---------------------------------------------------------------- data

/// SplitMix64: fixed-seed generator for key orders and value offsets.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng::new(a ^ b.wrapping_mul(0x2545_f491_4f6c_dd1d)).next_u64()
}

/// `k` + 15 decimal digits: 16 bytes, ordered like the index.
pub fn key(i: u64) -> [u8; KEY_LEN] {
    let mut k = [b'0'; KEY_LEN];
    k[0] = b'k';
    let mut n = i;
    for b in k[1..].iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// Values are windows of one random buffer (like db_bench), so that a value
/// is a pure function of (key index, generation) and reads can be checked.
pub struct ValueGen {
    buf: Vec<u8>,
    len: usize,
    seed: u64,
}

impl ValueGen {
    pub fn new(len: usize, seed: u64) -> ValueGen {
        let size = (len * 2).max(1 << 20);
        let mut r = Rng::new(seed ^ 0xfeed);
        let mut buf = Vec::with_capacity(size + 8);
        while buf.len() < size {
            buf.extend_from_slice(&r.next_u64().to_le_bytes());
        }
        ValueGen { buf, len, seed }
    }
    pub fn value(&self, i: u64, generation: u64) -> &[u8] {
        let span = (self.buf.len() - self.len) as u64;
        let off = (mix(self.seed ^ generation, i) % span.max(1)) as usize;
        &self.buf[off..off + self.len]
    }
}

// ---------------------------------------------------------------- process stats

/// (VmHWM KiB) of this process.
pub fn peak_rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// write_bytes of /proc/self/io (bytes this process caused to be sent to
/// storage, counted when pages are dirtied).
pub fn io_write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("write_bytes:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

/// Writes back and evicts every file under `dir` from the OS page cache
/// (`posix_fadvise(DONTNEED)`), so reads that miss the engine cache hit disk.
pub fn drop_page_cache(dir: &Path, sync_first: bool) {
    use std::os::fd::AsRawFd;
    let mut files = Vec::new();
    files_under(dir, &mut files);
    for p in files {
        if let Ok(f) = std::fs::File::open(&p) {
            if sync_first {
                // Dirty pages cannot be dropped; errors just leave them cached.
                let _ = f.sync_all();
            }
            // SAFETY: plain syscall on a descriptor we own.
            unsafe {
                libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
    }
}

/// Reads every file under `dir` once so it is in the OS page cache.
pub fn warm_page_cache(dir: &Path) {
    let mut files = Vec::new();
    files_under(dir, &mut files);
    for p in files {
        if let Ok(mut f) = std::fs::File::open(&p) {
            let _ = std::io::copy(&mut f, &mut std::io::sink());
        }
    }
}

// ---------------------------------------------------------------- workloads

/// Directory layout of one engine's runs under the temp root.
pub fn engine_dir(tmp: &Path, engine: &str, which: &str) -> PathBuf {
    tmp.join(engine).join(which)
}

/// Number of keys in `main` (written by fillrandom; fewer than `num` if it hit
/// the time limit).
fn main_count(dir: &Path, cfg: &Config) -> u64 {
    std::fs::read_to_string(dir.join("..").join("main.count"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(cfg.num)
}

fn opts(cfg: &Config, cache: usize, sync: bool) -> EngineOpts {
    EngineOpts {
        cache_bytes: cache,
        write_buffer_bytes: cfg.write_buffer_bytes,
        sync_commits: sync,
        value_separation: None,
    }
}

/// Separation threshold of the large-value workloads (`BENCH_LARGE_SEP`,
/// bytes; 0 = off).
fn large_sep() -> Option<usize> {
    match env_u64("BENCH_LARGE_SEP", 64 << 10) {
        0 => None,
        n => Some(n as usize),
    }
}

struct Deadline(Instant, Duration);
impl Deadline {
    fn new(cfg: &Config) -> Deadline {
        Deadline(Instant::now(), Duration::from_secs_f64(cfg.max_secs))
    }
    fn passed(&self) -> bool {
        self.0.elapsed() > self.1
    }
}

/// Writes keys `order` (indexes) with generation `generation`, `batch` per txn.
/// Returns (ops done, secs, user bytes).
fn write_keys(
    e: &dyn Engine,
    cfg: &Config,
    vg: &ValueGen,
    order: &mut dyn Iterator<Item = u64>,
    generation: u64,
    mut on_write: impl FnMut(u64),
) -> Res<(u64, f64, u64)> {
    let dl = Deadline::new(cfg);
    let t = Instant::now();
    let mut done = 0u64;
    let mut bytes = 0u64;
    let mut keys: Vec<([u8; KEY_LEN], u64)> = Vec::with_capacity(cfg.batch);
    loop {
        keys.clear();
        for i in (&mut *order).take(cfg.batch) {
            keys.push((key(i), i));
        }
        if keys.is_empty() {
            break;
        }
        let kvs: Vec<(&[u8], &[u8])> = keys
            .iter()
            .map(|(k, i)| (&k[..], vg.value(*i, generation)))
            .collect();
        e.write_txn(&kvs)?;
        for (k, v) in &kvs {
            bytes += (k.len() + v.len()) as u64;
        }
        for (_, i) in &keys {
            on_write(*i);
        }
        done += keys.len() as u64;
        if done % 1024 < cfg.batch as u64 && dl.passed() {
            break;
        }
    }
    Ok((done, t.elapsed().as_secs_f64(), bytes))
}

fn permutation(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut r = Rng::new(seed);
    for i in (1..v.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// A write workload: open fresh, write, flush, close; write amp from open to close.
fn fill(
    name: &str,
    engine: &str,
    cfg: &Config,
    dir: &Path,
    order: &mut dyn Iterator<Item = u64>,
    generation: u64,
    on_write: impl FnMut(u64),
) -> Res<(WorkResult, u64)> {
    let vg = ValueGen::new(cfg.value_size, cfg.seed);
    let io0 = io_write_bytes();
    let e = engines::open(engine, dir, &opts(cfg, cfg.cache_bytes, false))?;
    let (ops, secs, bytes) = write_keys(&*e, cfg, &vg, order, generation, on_write)?;
    let t = Instant::now();
    e.flush()?;
    e.close()?;
    let fsecs = t.elapsed().as_secs_f64();
    let written = io_write_bytes() - io0;
    let r = WorkResult::new(name, engine, ops, secs)
        .with_bytes(bytes)
        .with_amp(written, bytes, fsecs);
    Ok((r, ops))
}

/// Random point reads of keys in `main`, checking every value.
fn read_random(
    e: &dyn Engine,
    cfg: &Config,
    n: u64,
    ops: u64,
    seed: u64,
    mut between: impl FnMut(u64),
) -> Res<(u64, f64, u64, u64)> {
    let vg = ValueGen::new(cfg.value_size, cfg.seed);
    let mut r = Rng::new(seed);
    let mut rd = e.reader()?;
    let mut out = Vec::new();
    let (mut errors, mut bytes) = (0u64, 0u64);
    let dl = Deadline::new(cfg);
    let mut paused = Duration::ZERO;
    let t = Instant::now();
    let mut done = 0;
    while done < ops {
        if done > 0 && done % 1024 == 0 && dl.passed() {
            break;
        }
        let i = r.below(n);
        let k = key(i);
        if rd.get(&k, &mut out)? {
            bytes += (KEY_LEN + out.len()) as u64;
            if out != vg.value(i, 0) {
                errors += 1;
            }
        } else {
            errors += 1;
        }
        done += 1;
        let p = Instant::now();
        between(done);
        paused += p.elapsed();
    }
    let secs = (t.elapsed() - paused).as_secs_f64();
    Ok((done, secs, bytes, errors))
}

fn run_reads(name: &str, engine: &str, cfg: &Config, dir: &Path) -> Res<WorkResult> {
    let n = main_count(dir, cfg);
    match name {
        "readhot" => {
            // Cache bigger than the data, warmed by one full scan and one pass.
            let e = engines::open(engine, dir, &opts(cfg, cfg.hot_cache_bytes, false))?;
            e.reader()?.scan(None, usize::MAX, &mut |_, _| {})?;
            read_random(&*e, cfg, n, cfg.reads / 2, cfg.seed ^ 11, |_| {})?;
            let (ops, secs, bytes, errors) =
                read_random(&*e, cfg, n, cfg.reads, cfg.seed ^ 1, |_| {})?;
            let mut r = WorkResult::new(name, engine, ops, secs).with_bytes(bytes);
            r.errors = errors;
            r.note = format!("cache {} MiB > data; warmed", cfg.hot_cache_bytes >> 20);
            Ok(r)
        }
        "readrandom" => {
            warm_page_cache(dir);
            let e = engines::open(engine, dir, &opts(cfg, cfg.cache_bytes, false))?;
            let (ops, secs, bytes, errors) =
                read_random(&*e, cfg, n, cfg.reads, cfg.seed ^ 2, |_| {})?;
            let mut r = WorkResult::new(name, engine, ops, secs).with_bytes(bytes);
            r.errors = errors;
            r.note = format!(
                "cache {} MiB, data ~4x; files in OS page cache",
                cfg.cache_bytes >> 20
            );
            Ok(r)
        }
        "readcold" => {
            drop_page_cache(dir, true);
            let e = engines::open(engine, dir, &opts(cfg, cfg.cache_bytes, false))?;
            drop_page_cache(dir, false);
            let every = cfg.cold_drop_every;
            let (ops, secs, bytes, errors) =
                read_random(&*e, cfg, n, cfg.cold_reads, cfg.seed ^ 3, |done| {
                    if done % every == 0 {
                        drop_page_cache(dir, false);
                    }
                })?;
            let mut r = WorkResult::new(name, engine, ops, secs).with_bytes(bytes);
            r.errors = errors;
            r.note = format!(
                "cache {} MiB, data ~4x; posix_fadvise(DONTNEED) on all files every {every} reads (not timed)",
                cfg.cache_bytes >> 20
            );
            Ok(r)
        }
        "seeknext" => {
            warm_page_cache(dir);
            let e = engines::open(engine, dir, &opts(cfg, cfg.cache_bytes, false))?;
            let vg = ValueGen::new(cfg.value_size, cfg.seed);
            let mut rd = e.reader()?;
            let mut rng = Rng::new(cfg.seed ^ 4);
            let (mut entries, mut bytes, mut errors) = (0u64, 0u64, 0u64);
            let dl = Deadline::new(cfg);
            let t = Instant::now();
            let mut done = 0;
            while done < cfg.seeks && !(done % 256 == 0 && done > 0 && dl.passed()) {
                let start = rng.below(n);
                let mut expect = start;
                let got = rd.scan(Some(&key(start)), cfg.seek_len, &mut |k, v| {
                    if k != key(expect) || v != vg.value(expect, 0) {
                        errors += 1;
                    }
                    expect += 1;
                    bytes += (k.len() + v.len()) as u64;
                })?;
                let want = (cfg.seek_len as u64).min(n - start);
                if got as u64 != want {
                    errors += 1;
                }
                entries += got as u64;
                done += 1;
            }
            let secs = t.elapsed().as_secs_f64();
            let mut r = WorkResult::new(name, engine, done, secs).with_bytes(bytes);
            r.errors = errors;
            r.note = format!(
                "ops = seeks, each + {} next ({} entries read)",
                cfg.seek_len, entries
            );
            Ok(r)
        }
        "scan" => {
            warm_page_cache(dir);
            let e = engines::open(engine, dir, &opts(cfg, cfg.cache_bytes, false))?;
            let vg = ValueGen::new(cfg.value_size, cfg.seed);
            let mut rd = e.reader()?;
            let (mut bytes, mut errors, mut expect) = (0u64, 0u64, 0u64);
            let t = Instant::now();
            let got = rd.scan(None, usize::MAX, &mut |k, v| {
                if k != key(expect) || v != vg.value(expect, 0) {
                    errors += 1;
                }
                expect += 1;
                bytes += (k.len() + v.len()) as u64;
            })?;
            let secs = t.elapsed().as_secs_f64();
            if got as u64 != n {
                errors += 1;
            }
            let mut r = WorkResult::new(name, engine, got as u64, secs).with_bytes(bytes);
            r.errors = errors;
            r.note = "one full forward scan, files in OS page cache".into();
            Ok(r)
        }
        _ => Err(format!("not a read workload: {name}")),
    }
}

/// Runs one workload; `tmp` is the engine-independent temp root.
pub fn run_workload(engine: &str, name: &str, cfg: &Config, tmp: &Path) -> Res<Vec<WorkResult>> {
    let fresh = |which: &str| -> Res<PathBuf> {
        let d = engine_dir(tmp, engine, which);
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| format!("rm {}: {e}", d.display()))?;
        }
        std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        Ok(d)
    };
    let main = engine_dir(tmp, engine, "main");
    match name {
        "fillseq" => {
            let d = fresh("fillseq")?;
            let (r, _) = fill(name, engine, cfg, &d, &mut (0..cfg.num), 0, |_| {})?;
            // Not needed any more: keep the disk footprint small.
            let _ = std::fs::remove_dir_all(&d);
            Ok(vec![r])
        }
        "fillrandom" => {
            let d = fresh("main")?;
            let perm = permutation(cfg.num, cfg.seed);
            let (mut r, ops) = fill(name, engine, cfg, &d, &mut perm.iter().copied(), 0, |_| {})?;
            if ops < cfg.num {
                // Stopped by the time limit: reads must use the keys 0..n that exist,
                // so top up (untimed) the ones not written yet.
                let vg = ValueGen::new(cfg.value_size, cfg.seed);
                let e = engines::open(engine, &d, &opts(cfg, cfg.cache_bytes, false))?;
                let big = Config {
                    batch: 1000,
                    max_secs: 1e9,
                    ..cfg.clone()
                };
                write_keys(
                    &*e,
                    &big,
                    &vg,
                    &mut perm[ops as usize..].iter().copied(),
                    0,
                    |_| {},
                )?;
                e.flush()?;
                e.close()?;
                r.note = format!(
                    "stopped at the time limit; {} keys topped up untimed",
                    cfg.num - ops
                );
            }
            std::fs::write(engine_dir(tmp, engine, "main.count"), cfg.num.to_string())
                .map_err(|e| e.to_string())?;
            Ok(vec![r])
        }
        "readhot" | "readrandom" | "readcold" | "seeknext" | "scan" => {
            Ok(vec![run_reads(name, engine, cfg, &main)?])
        }
        "overwrite" => {
            // Random keys (with repetition) of `main` rewritten with generation 1.
            let n = main_count(&main, cfg);
            let mut rng = Rng::new(cfg.seed ^ 5);
            let total = cfg.num;
            let mut order = (0..total).map(move |_| rng.below(n));
            let mut touched = vec![false; n as usize];
            let (mut r, _) = fill(name, engine, cfg, &main, &mut order, 1, |i| {
                touched[i as usize] = true;
            })?;
            // Check a sample: overwritten keys have the new value, others the old.
            let vg = ValueGen::new(cfg.value_size, cfg.seed);
            let e = engines::open(engine, &main, &opts(cfg, cfg.cache_bytes, false))?;
            let mut rd = e.reader()?;
            let mut out = Vec::new();
            let mut rng = Rng::new(cfg.seed ^ 6);
            for _ in 0..1000.min(n) {
                let i = rng.below(n);
                let g = u64::from(touched[i as usize]);
                if !rd.get(&key(i), &mut out)? || out != vg.value(i, g) {
                    r.errors += 1;
                }
            }
            drop(rd);
            e.close()?;
            r.note = "random keys of the fillrandom data, with repetition".into();
            Ok(vec![r])
        }
        "churnscan" => {
            let d = fresh("churn")?;
            Ok(vec![churn_scan(engine, cfg, &d)?])
        }
        "large" => {
            let d = fresh("large")?;
            let vg = ValueGen::new(cfg.large_size, cfg.seed ^ 7);
            let io0 = io_write_bytes();
            let o = EngineOpts {
                value_separation: large_sep(),
                ..opts(cfg, cfg.cache_bytes, false)
            };
            let e = engines::open(engine, &d, &o)?;
            let n = cfg.large_count;
            let perm = permutation(n, cfg.seed ^ 8);
            let t = Instant::now();
            let mut bytes = 0u64;
            for &i in &perm {
                let k = key(i);
                e.write_txn(&[(&k, vg.value(i, 0))])?;
                bytes += (KEY_LEN + cfg.large_size) as u64;
            }
            let wsecs = t.elapsed().as_secs_f64();
            let t = Instant::now();
            e.flush()?;
            let fsecs = t.elapsed().as_secs_f64();
            let written = io_write_bytes() - io0;
            let w = WorkResult::new("write_1m", engine, n, wsecs)
                .with_bytes(bytes)
                .with_amp(written, bytes, fsecs);
            let mut rd = e.reader()?;
            let mut rng = Rng::new(cfg.seed ^ 9);
            let mut out = Vec::new();
            let (mut errors, mut rbytes) = (0u64, 0u64);
            let t = Instant::now();
            for _ in 0..n {
                let i = rng.below(n);
                if rd.get(&key(i), &mut out)? {
                    rbytes += (KEY_LEN + out.len()) as u64;
                    if out != vg.value(i, 0) {
                        errors += 1;
                    }
                } else {
                    errors += 1;
                }
            }
            let rsecs = t.elapsed().as_secs_f64();
            drop(rd);
            e.close()?;
            let _ = std::fs::remove_dir_all(&d);
            let mut rr = WorkResult::new("read_1m", engine, n, rsecs).with_bytes(rbytes);
            rr.errors = errors;
            let note = format!(
                "{n} values of {} KiB, 1 per txn, separation threshold {}",
                cfg.large_size >> 10,
                large_sep().map_or("off".to_string(), |t| format!("{} KiB", t >> 10))
            );
            let mut w = w;
            w.note = note.clone();
            rr.note = format!("{note}; random reads after flush");
            Ok(vec![w, rr])
        }
        "synctxn" => {
            let d = fresh("synctxn")?;
            let vg = ValueGen::new(cfg.value_size, cfg.seed);
            let io0 = io_write_bytes();
            let e = engines::open(engine, &d, &opts(cfg, cfg.cache_bytes, true))?;
            let threads = cfg.sync_threads as u64;
            let per = cfg.sync_txns;
            let puts = cfg.sync_puts as u64;
            let t = Instant::now();
            let results: Vec<Res<u64>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|th| {
                        let e = &e;
                        let vg = &vg;
                        s.spawn(move || -> Res<u64> {
                            let mut bytes = 0;
                            for j in 0..per {
                                // Each thread writes its own keys: no conflicts.
                                let base = (th * per + j) * puts;
                                let ks: Vec<_> = (base..base + puts).map(key).collect();
                                let kvs: Vec<(&[u8], &[u8])> = ks
                                    .iter()
                                    .zip(base..)
                                    .map(|(k, i)| (&k[..], vg.value(i, 0)))
                                    .collect();
                                e.write_txn(&kvs)?;
                                bytes += kvs
                                    .iter()
                                    .map(|(k, v)| (k.len() + v.len()) as u64)
                                    .sum::<u64>();
                            }
                            Ok(bytes)
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                    .collect()
            });
            let secs = t.elapsed().as_secs_f64();
            let mut bytes = 0;
            for r in results {
                bytes += r?;
            }
            // Every committed txn is readable.
            let mut errors = 0;
            {
                let mut rd = e.reader()?;
                let mut out = Vec::new();
                for i in 0..threads * per * puts {
                    if !rd.get(&key(i), &mut out)? || out != vg.value(i, 0) {
                        errors += 1;
                    }
                }
            }
            let tf = Instant::now();
            e.close()?;
            let fsecs = tf.elapsed().as_secs_f64();
            let written = io_write_bytes() - io0;
            let _ = std::fs::remove_dir_all(&d);
            let mut r = WorkResult::new(name, engine, threads * per, secs)
                .with_bytes(bytes)
                .with_amp(written, bytes, fsecs);
            r.errors = errors;
            r.note = format!(
                "{threads} threads x {per} txns of {puts} puts, fsync on commit; ops = commits"
            );
            Ok(vec![r])
        }
        _ => Err(format!("unknown workload {name:?} (known: {WORKLOADS:?})")),
    }
}

/// `churnscan`: `BENCH_CHURN_KEYS` keys (default 1000) each rewritten
/// `BENCH_CHURN_VERSIONS` times (default 200) into a 256 MiB memtable that is
/// never flushed (the state after sysbench-style update churn), then seeks +
/// `seek_len` next: half through a snapshot taken before the churn (every
/// version of a key is newer than it), half through one taken after (every
/// older version must be skipped). ops = seeks.
fn churn_scan(engine: &str, cfg: &Config, dir: &Path) -> Res<WorkResult> {
    let tiny = cfg.num < 10_000;
    let keys = env_u64("BENCH_CHURN_KEYS", if tiny { 200 } else { 1000 }).max(2);
    let versions = env_u64("BENCH_CHURN_VERSIONS", if tiny { 10 } else { 200 }).max(1);
    let o = EngineOpts {
        write_buffer_bytes: 256 << 20,
        ..opts(cfg, cfg.cache_bytes, false)
    };
    let e = engines::open(engine, dir, &o)?;
    let vg = ValueGen::new(cfg.value_size, cfg.seed);
    let batch = 100usize;
    let write_gen = |g: u64| -> Res<()> {
        let ks: Vec<[u8; KEY_LEN]> = (0..keys).map(key).collect();
        for chunk in (0..keys as usize).collect::<Vec<_>>().chunks(batch) {
            let kvs: Vec<(&[u8], &[u8])> = chunk
                .iter()
                .map(|&i| (&ks[i][..], vg.value(i as u64, g)))
                .collect();
            e.write_txn(&kvs)?;
        }
        Ok(())
    };
    write_gen(0)?;
    let mut old = e.reader()?;
    for g in 1..=versions {
        write_gen(g)?;
    }
    let mut new = e.reader()?;
    let mut rng = Rng::new(cfg.seed ^ 11);
    let (mut bytes, mut errors) = (0u64, 0u64);
    let dl = Deadline::new(cfg);
    let seeks = cfg.seeks.min(20_000);
    let t = Instant::now();
    let mut done = 0;
    while done < seeks && !(done % 64 == 0 && done > 0 && dl.passed()) {
        let start = rng.below(keys);
        let (rd, g) = if done % 2 == 0 {
            (&mut old, 0)
        } else {
            (&mut new, versions)
        };
        let mut expect = start;
        let got = rd.scan(Some(&key(start)), cfg.seek_len, &mut |k, v| {
            if k != key(expect) || v != vg.value(expect, g) {
                errors += 1;
            }
            expect += 1;
            bytes += (k.len() + v.len()) as u64;
        })?;
        if got as u64 != (cfg.seek_len as u64).min(keys - start) {
            errors += 1;
        }
        done += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    drop(old);
    drop(new);
    e.close()?;
    let mut r = WorkResult::new("churnscan", engine, done, secs).with_bytes(bytes);
    r.errors = errors;
    r.note = format!(
        "{keys} keys x {versions} versions in an unflushed memtable; ops = seeks, each + {} next, half at the pre-churn snapshot",
        cfg.seek_len
    );
    Ok(r)
}
