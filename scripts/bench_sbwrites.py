"""sysbench write workloads at many threads, durable and relaxed (step `sbw` of
scripts/bench.py; issue #21's goals 2, 4 and 6).

For each engine: `oltp_common prepare` of one table, then `oltp_insert`,
`oltp_write_only` and `oltp_update_index` at each of P["sbw_threads"] threads, with
full durability (a flush at every commit: innodb_flush_log_at_trx_commit=1,
rocksdb_flush_log_at_trx_commit=1, tidesdb_sync_mode=FULL) and relaxed, and
`oltp_write_only` with a hot set (`--rand-type=pareto`: sysbench 1.0.20 has no
zipfian) at the largest thread count up to 32. Beside transactions/s and p95: mariadbd's CPU time per transaction
(`/proc/<pid>/stat` utime+stime) and the bytes written to the datadir's block device
per transaction (`/sys/dev/block/<dev>/stat`), both over the measured part of each
run only. Not `/proc/<pid>/io` write_bytes: it counts a page when it is dirtied, and
with large folios (Linux 6.x ext4) a 709-byte WAL append into a region written
before (the WAL's zeros written ahead) counts the whole folio, up to 1 MiB, while
the device writes one 4 KiB block. The device counts everything on the machine, so
run this on a quiet one. One engine runs at a time, and before its first run the
disk is left until quiet (the previous engine's background flushing would count
otherwise); an engine's own background work (flushes, compaction) counts in its later
runs, and what is left after its last one in a total per engine.
"""
import os
import subprocess
import threading
import time

TESTS = ["oltp_insert", "oltp_write_only", "oltp_update_index"]
DURABILITIES = ["full", "relaxed"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU seconds (user + system) of process `pid` so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def device_stat(path):
    """The block device statistics file of the file system holding `path`, or None."""
    st = os.stat(path)
    p = "/sys/dev/block/%d:%d/stat" % (os.major(st.st_dev), os.minor(st.st_dev))
    return p if os.path.exists(p) else None


def device_bytes_written(stat):
    """Bytes written to the device so far (sectors of 512 bytes, field 7)."""
    if stat is None:
        return 0
    with open(stat) as f:
        return int(f.read().split()[6]) * 512


def runs(P):
    """(key, test, threads, durability, extra sysbench args) of every run."""
    out = []
    for dur in DURABILITIES:
        for test in TESTS:
            for th in P["sbw_threads"]:
                out.append(("%s/%d/%s" % (test, th, dur), test, th, dur, []))
        hot = max([t for t in P["sbw_threads"] if t <= 32] or P["sbw_threads"][:1])
        out.append(("oltp_write_only_pareto/%d/%s" % (hot, dur), "oltp_write_only", hot, dur,
                    ["--rand-type=pareto"]))
    return out


def wait_quiet(stat, limit_s=30):
    """Waits until less than 1 MiB is written to the device in half a second (at
    most `limit_s`); returns the seconds waited."""
    t0 = time.perf_counter()
    last = device_bytes_written(stat)
    while stat is not None and time.perf_counter() - t0 < limit_s:
        time.sleep(0.5)
        now = device_bytes_written(stat)
        if now - last < 1 << 20:
            break
        last = now
    return time.perf_counter() - t0


def run(B, srv, P, out):
    res = out.setdefault("sysbench_writes", {"table_size": P["sbw_rows"], "seconds": P["sbw_secs"],
                                            "warmup_seconds": P["sbw_warm"], "results": {}})
    admin = B.Conn(srv.sock)
    stat = device_stat(srv.var + "/data")
    res["device"] = stat
    try:
        for eng in B.ENGINES:
            db = "sbw_" + eng.lower()
            B.q(admin, "DROP DATABASE IF EXISTS %s" % db)
            B.q(admin, "CREATE DATABASE %s" % db)
            base = ["sysbench", "--db-driver=mysql", "--mysql-user=root", "--mysql-socket=" + srv.sock,
                    "--mysql-db=" + db, "--mysql-storage-engine=" + eng.lower(), "--tables=1",
                    "--table-size=%d" % P["sbw_rows"], "--rand-seed=%d" % B.SEED,
                    "--mysql-ignore-errors=1213,1205,1020,1180"]
            p = subprocess.run(base + ["oltp_common", "prepare"], capture_output=True, text=True,
                               cwd="/usr/share/sysbench")
            if p.returncode != 0:
                B.problem("sysbench (writes) prepare on %s failed: %s" % (B.LABEL[eng], (p.stdout + p.stderr)[-600:]))
                continue
            mine = res["results"].setdefault(B.LABEL[eng], {})
            waited = wait_quiet(stat)
            B.log("sysbench writes %s: disk quiet after %.1f s" % (B.LABEL[eng], waited))
            first = device_bytes_written(stat)
            transactions = 0.0
            for key, test, th, dur, extra in runs(P):
                for s in B.DURABILITY[dur]:
                    B.q(admin, s)
                st, output = one_run(B, srv, P, stat, base + extra + [test, "--threads=%d" % th])
                if st is None:
                    B.problem("sysbench (writes) %s on %s failed: %s" % (key, B.LABEL[eng], output[-600:]))
                    continue
                mine[key] = st
                transactions += st["tps"] * (P["sbw_secs"] + P["sbw_warm"])
                B.rec("sysbench_writes", eng, key, "tps", st["tps"], "tx/s")
                B.rec("sysbench_writes", eng, key, "cpu_us_per_tx", st["cpu_us_per_tx"], "us")
                B.rec("sysbench_writes", eng, key, "disk_bytes_per_tx", st["disk_bytes_per_tx"], "bytes")
                B.log("sysbench writes %-8s %-32s %9.1f tps  p95 %.2f ms  cpu %.0f us/tx  disk %.0f B/tx%s" % (
                    B.LABEL[eng], key, st["tps"], st["p95_ms"] or 0, st["cpu_us_per_tx"],
                    st["disk_bytes_per_tx"], "  (%d errors ignored)" % st["ignored_errors"]
                    if st["ignored_errors"] else ""))
            wait_quiet(stat)
            if transactions and stat:
                # every byte written from the engine's first run until quiet after its last
                mine["all_runs_disk_bytes_per_tx"] = (device_bytes_written(stat) - first) / transactions
            B.q(admin, "OPTIMIZE TABLE %s.sbtest1" % db)
            time.sleep(1)
            mine["table_bytes_optimized"] = B.table_bytes(admin, eng, srv.var + "/data", db, "sbtest1")
            if mine["table_bytes_optimized"] is not None:
                B.rec("sysbench_writes", eng, "table_bytes_after_optimize", "MiB",
                      mine["table_bytes_optimized"] / B.MiB, "MiB")
                B.log("sysbench writes %s: table %.1f MiB after OPTIMIZE" % (
                    B.LABEL[eng], mine["table_bytes_optimized"] / B.MiB))
            B.q(admin, "DROP DATABASE %s" % db)
    finally:
        for s in B.DURABILITY["relaxed"]:
            B.q(admin, s)
        admin.close()


def one_run(B, srv, P, stat, cmd):
    """Runs sysbench `cmd`; the figures of its measured part (after the warm-up), and
    its output."""
    pid = srv.pid()
    cmd = cmd + ["--time=%d" % (P["sbw_warm"] + P["sbw_secs"]), "--report-checkpoints=%d" % P["sbw_warm"], "run"]
    marks = {}

    def sample():
        return cpu_seconds(pid), device_bytes_written(stat)

    def sample_after_warmup():
        time.sleep(P["sbw_warm"])
        marks["start"] = sample()

    sampler = threading.Thread(target=sample_after_warmup)
    sampler.start()
    p = subprocess.run(cmd, capture_output=True, text=True)
    end = sample()
    sampler.join()
    st = B.parse_sysbench(p.stdout) if p.returncode == 0 else None
    if st is None or "start" not in marks:
        return None, p.stdout + p.stderr
    tx = st["tps"] * P["sbw_secs"]
    cpu, wrote = end[0] - marks["start"][0], end[1] - marks["start"][1]
    st["cpu_us_per_tx"] = cpu * 1e6 / tx if tx else None
    st["disk_bytes_per_tx"] = wrote / tx if tx and stat else None
    return st, p.stdout


def markdown(B, out, A):
    s = out.get("sysbench_writes")
    if not s:
        return
    res = s["results"]
    P = out["profile"]
    A("## 8. sysbench writes at %s threads, durable and relaxed (1 table x %d rows, %d s per run after %d s warm-up)"
      % (", ".join(str(t) for t in P["sbw_threads"]), s["table_size"], s["seconds"], s["warmup_seconds"]))
    A("")
    A("`oltp_insert`, `oltp_write_only`, `oltp_update_index`; **full** = a flush at every commit on every engine "
      "(`innodb_flush_log_at_trx_commit=1`, `rocksdb_flush_log_at_trx_commit=1`, `tidesdb_sync_mode=FULL`), "
      "**relaxed** = the settings above. `pareto` = `--rand-type=pareto` (a hot set: conflicts; sysbench "
      "1.0.20 has no zipfian). "
      "Errors 1213/1205/1020/1180 are ignored by sysbench and not counted as transactions. "
      "CPU is mariadbd's (`/proc/<pid>/stat`), disk bytes the datadir's block device's "
      "(`/sys/dev/block/<dev>/stat`: everything written to it, so other activity on the machine counts too; "
      "`/proc/<pid>/io` write_bytes is not used: with large folios it counts up to 1 MiB for a small append "
      "into a page cache folio written before), over the measured "
      "part, per transaction; one engine runs at a time, started on a quiet disk (its background writes "
      "count in its own later runs; the last row counts every byte from its first run until it is quiet "
      "again, per transaction of all its runs, warm-ups included). InnoDB runs with `innodb_doublewrite=0` here "
      "(the bench's setting for every step), which lowers its disk bytes against InnoDB as shipped.")
    A("")
    keys = [k for k, *_ in runs(P)]

    def table(metric, header, lower_better=False):
        rows = [(k.replace("/", " ", 1).replace("/", " thr ", 1), {lab: res.get(lab, {}).get(k, {}).get(metric)
                                                                  for lab in res}) for k in keys]
        A(B.engine_table(rows, header, lower_better))
        A("")

    table("tps", "test threads durability (tx/s)")
    A("**mariadbd CPU per transaction, us (lower is better)**")
    A("")
    table("cpu_us_per_tx", "test threads durability", True)
    A("**bytes written to disk per transaction (lower is better)**")
    A("")
    rows = [(k.replace("/", " ", 1).replace("/", " thr ", 1), {lab: res.get(lab, {}).get(k, {}).get("disk_bytes_per_tx")
                                                              for lab in res}) for k in keys]
    rows.append(("all runs, until quiet", {lab: res.get(lab, {}).get("all_runs_disk_bytes_per_tx") for lab in res}))
    A(B.engine_table(rows, "test threads durability", True))
    A("")
    A("**p95 latency, ms (lower is better)**")
    A("")
    table("p95_ms", "test threads durability", True)
    A("**The table after all the runs and OPTIMIZE TABLE, MiB (lower is better)**: InnoDB's .ibd file, "
      "DATA_LENGTH + INDEX_LENGTH of the others; each engine with its default settings (TidesDB: "
      "`tidesdb_compression=ZSTD` on levels 1 and below, InnoDB uncompressed as shipped).")
    A("")
    A(B.engine_table([("sbtest1 after OPTIMIZE", {lab: (res.get(lab, {}).get("table_bytes_optimized") or 0) / B.MiB
                                                   or None for lab in res})], "table", True))
    A("")
