#!/usr/bin/env python3
"""Concurrent autocommit inserts (bench.py's `ins` step) with fsync accounting.

  python3 scripts/ins_probe.py --sock <mysqld.sock> [--engines TidesDB,InnoDB]
      [--durability full|relaxed] [--threads 10] [--per 1000] [--rounds 1]
      [--strace c|T] [--pid <mariadbd pid>]

Per engine and round: ops/s, and the server's counters over the timed part:
TidesDB commits / commit groups / WAL fsyncs, InnoDB fsyncs (log and data files)
(SHOW GLOBAL STATUS deltas). With --strace, strace -f attaches to mariadbd for
the timed part (-c: syscall counts and times; -T: every fsync-like call with
its duration, summarised as count / median / p90 per call name); strace slows
the server, so throughput under --strace is not comparable with plain runs.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn  # noqa: E402
import bench  # noqa: E402

DUR = {
    "full": ["SET GLOBAL innodb_flush_log_at_trx_commit = 1", "SET GLOBAL tidesdb_sync_mode = 'FULL'"],
    "relaxed": ["SET GLOBAL innodb_flush_log_at_trx_commit = 2", "SET GLOBAL tidesdb_sync_mode = 'INTERVAL'"],
}
COUNTERS = ["Tidesdb_commits", "Tidesdb_commit_groups", "Tidesdb_wal_syncs", "Innodb_data_fsyncs", "Innodb_os_log_written", "Tidesdb_wal_bytes_written"]
TRACED = "fsync,fdatasync,sync_file_range,pwrite64,pwritev,write,io_submit,io_uring_enter,futex"


def q(c, sql):
    r = c.query(sql)
    if r.err is not None:
        raise RuntimeError("%s: %s" % (sql, r.show()))
    return r


def status(c):
    r = q(c, "SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join("'%s'" % n for n in COUNTERS))
    return {k.decode().lower(): int(v) for k, v in r.rows}


def run(sock, eng, threads, per, warm):
    t = "insp_" + eng.lower()
    c, conns, ths, barrier, errs = bench.start_inserters(sock, eng, t, warm, threads, per)
    return c, t, conns, ths, barrier, errs


def summarise_T(path):
    per = {}
    # "name(args) = r <secs>" or, for a call another thread interrupted,
    # "<... name resumed>...) = r <secs>"
    pat = re.compile(r"(?:<\.\.\. )?(\w+)(?:\(| resumed>).*<([0-9.]+)>\s*$")
    with open(path, errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if m:
                per.setdefault(m.group(1), []).append(float(m.group(2)) * 1e6)
    out = []
    for name, v in sorted(per.items()):
        v.sort()
        out.append("%s n=%d median=%.0fus p90=%.0fus total=%.0fms" % (
            name, len(v), statistics.median(v), v[int(len(v) * 0.9)], sum(v) / 1e3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sock", required=True)
    ap.add_argument("--engines", default="TidesDB,InnoDB")
    ap.add_argument("--durability", default="full", choices=sorted(DUR))
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--per", type=int, default=1000)
    ap.add_argument("--warm", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--strace", choices=["c", "T"])
    ap.add_argument("--pid", type=int)
    ap.add_argument("--out", default="/tmp/ins_probe")
    a = ap.parse_args()
    admin = Conn(a.sock)
    q(admin, "CREATE DATABASE IF NOT EXISTS bench")
    for s in DUR[a.durability]:
        q(admin, s)
    for rnd in range(a.rounds):
        for eng in a.engines.split(","):
            c, t, conns, ths, barrier, errs = run(a.sock, eng, a.threads, a.per, a.warm)
            st = None
            if a.strace:
                tf = "%s.%s.%d.strace" % (a.out, eng.lower(), rnd)
                args = ["strace", "-f", "-e", "trace=" + TRACED, "-o", tf, "-p", str(a.pid)]
                args[1:1] = ["-c"] if a.strace == "c" else ["-T"]
                st = subprocess.Popen(args, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
            s0 = status(admin)
            barrier.wait()
            t0 = time.perf_counter()
            for th in ths:
                th.join()
            el = time.perf_counter() - t0
            s1 = status(admin)
            if st:
                st.send_signal(signal.SIGINT)
                st.wait()
            for cn in conns:
                cn.close()
            if errs:
                print("ERRORS on %s: %d, first %s" % (eng, len(errs), errs[0]))
            n = a.threads * a.per
            d = {k: s1.get(k, 0) - s0.get(k, 0) for k in s0}
            if eng.lower() == "tidesdb":
                extra = "commits %d groups %d wal_fsyncs %d (%.2f commits/fsync) wal_bytes %d" % (
                    d["tidesdb_commits"], d["tidesdb_commit_groups"], d["tidesdb_wal_syncs"],
                    d["tidesdb_commits"] / max(1, d["tidesdb_wal_syncs"]), d["tidesdb_wal_bytes_written"])
            else:
                # MariaDB 10.11 has no Innodb_os_log_fsyncs: Innodb_data_fsyncs counts the log's too.
                extra = "data_fsyncs %d (%.2f commits/fsync) log_bytes %d" % (
                    d.get("innodb_data_fsyncs", 0), n / max(1, d.get("innodb_data_fsyncs", 0)),
                    d.get("innodb_os_log_written", 0))
            print("round %d %-8s %-7s %8.0f ops/s  %s" % (rnd, eng, a.durability, n / el, extra), flush=True)
            if a.strace == "c":
                print(open(tf).read())
            elif a.strace == "T":
                for line in summarise_T(tf):
                    print("   ", line)
            q(c, "DROP TABLE %s" % t)
            c.close()
    admin.close()


if __name__ == "__main__":
    main()
