"""What TidesDB's default compression costs and saves (step `cmp` of scripts/bench.py).

TidesDB compresses the files compactions write (levels 1 and below) with zstd by
default (`tidesdb_compression=ZSTD`; level 0, the memtable flushes, stays
uncompressed). This step puts the same sysbench table (P["sbw_rows"] rows) into two
TidesDB tables, one created with the default and one with `tidesdb_compression=NONE`,
runs OPTIMIZE TABLE on both, and reports their sizes and the read rate of each with
sysbench `oltp_point_select` and `oltp_read_only` at 2 threads:
- `cached`: the blocks stay in the block cache (its default size): a block is
  decompressed when it is read into the cache, so compression costs nothing here;
- `uncached`: the block cache set to its minimum (1 MiB) for the run, so nearly every
  block read comes from the OS page cache and is decompressed again (the worst case
  short of the disk itself).
mariadbd CPU per query comes with each rate. Only TidesDB runs here: the other
engines' sizes are in the iibench and sysbench-writes steps.
"""
import subprocess

import bench_sbwrites

KINDS = (("zstd", "ZSTD"), ("none", "NONE"))
TESTS = ("oltp_point_select", "oltp_read_only")
THREADS = 2
MIN_CACHE = 1 << 20


def run(B, srv, P, out):
    if "TidesDB" not in B.ENGINES:
        return
    res = out.setdefault("compression", {"table_size": P["sbw_rows"], "seconds": P["sbw_secs"],
                                         "threads": THREADS, "tables": {}, "reads": {}})
    admin = B.Conn(srv.sock)
    cache = int(B.q(admin, "SELECT @@GLOBAL.tidesdb_block_cache_size").rows[0][0])
    default = B.q(admin, "SELECT @@GLOBAL.tidesdb_compression").rows[0][0]
    default = default.decode() if isinstance(default, bytes) else default
    bases = {}
    try:
        for kind, setting in KINDS:
            db = "cmp_" + kind
            B.q(admin, "DROP DATABASE IF EXISTS %s" % db)
            B.q(admin, "CREATE DATABASE %s" % db)
            # sysbench's connections are new sessions: they take the global value.
            B.q(admin, "SET GLOBAL tidesdb_compression = %s" % setting)
            base = ["sysbench", "--db-driver=mysql", "--mysql-user=root", "--mysql-socket=" + srv.sock,
                    "--mysql-db=" + db, "--mysql-storage-engine=tidesdb", "--tables=1",
                    "--table-size=%d" % P["sbw_rows"], "--rand-seed=%d" % B.SEED]
            p = subprocess.run(base + ["oltp_common", "prepare"], capture_output=True, text=True,
                               cwd="/usr/share/sysbench")
            B.q(admin, "SET GLOBAL tidesdb_compression = %s" % default)
            if p.returncode != 0:
                B.problem("compression: sysbench prepare (%s) failed: %s" % (setting, (p.stdout + p.stderr)[-600:]))
                continue
            B.q(admin, "OPTIMIZE TABLE %s.sbtest1" % db)
            size = B.table_bytes(admin, "TidesDB", srv.var + "/data", db, "sbtest1")
            res["tables"][kind] = size
            B.rec("compression", "TidesDB", "table_bytes/" + kind, "MiB", (size or 0) / B.MiB, "MiB")
            B.log("compression: sbtest1 with %s: %.1f MiB after OPTIMIZE" % (setting, (size or 0) / B.MiB))
            bases[kind] = base
        for cached in ("cached", "uncached"):
            B.q(admin, "SET GLOBAL tidesdb_block_cache_size = %d" % (cache if cached == "cached" else MIN_CACHE))
            for n, test in enumerate(TESTS):
                # Each table goes first in turn: a run right after a load or a
                # change of the cache size pays for warming it.
                for kind, _ in (KINDS if n % 2 == 0 else KINDS[::-1]):
                    if kind not in bases:
                        continue
                    key = "%s/%s/%s" % (test, cached, kind)
                    st = one_run(B, srv, P, bases[kind] + [test, "--threads=%d" % THREADS])
                    if st is None:
                        B.problem("compression: sysbench %s failed" % key)
                        continue
                    res["reads"][key] = st
                    B.rec("compression", "TidesDB", key, "qps", st["qps"], "q/s")
                    B.log("compression: %-40s %9.0f q/s  cpu %.1f us/query" % (key, st["qps"], st["cpu_us_per_q"]))
    finally:
        B.q(admin, "SET GLOBAL tidesdb_block_cache_size = %d" % cache)
        B.q(admin, "SET GLOBAL tidesdb_compression = %s" % default)
        for kind, _ in KINDS:
            B.q(admin, "DROP DATABASE IF EXISTS cmp_%s" % kind)
        admin.close()


def one_run(B, srv, P, cmd):
    """sysbench `cmd` (bench_sbwrites.one_run: the step's time after its warm-up, no
    disk figures), with mariadbd CPU per query rather than per transaction."""
    st, _ = bench_sbwrites.one_run(B, srv, P, None, cmd)
    if st is None:
        return None
    per_tx = st.get("cpu_us_per_tx")
    st["cpu_us_per_q"] = per_tx * st["tps"] / st["qps"] if per_tx is not None and st["qps"] else None
    return st


def markdown(B, out, A):
    c = out.get("compression")
    if not c:
        return
    A("## 12. What TidesDB's default compression costs and saves (sysbench table, %d rows)" % c["table_size"])
    A("")
    A("The same sysbench table in two TidesDB tables, one with the default `tidesdb_compression=ZSTD` (zstd "
      "level 3 on levels 1 and below, level 0 uncompressed) and one with `NONE`, after OPTIMIZE TABLE; reads by "
      "sysbench at %d threads for %d s each. *cached*: the block cache at its configured size (blocks are "
      "decompressed once, when read into it); *uncached*: the block cache at its minimum (1 MiB) during the "
      "run, so nearly every block read decompresses again (from the OS page cache). The size of InnoDB's "
      "table is in sections 7 and 8." % (c["threads"], c["seconds"]))
    A("")
    t = c["tables"]
    if t.get("zstd") and t.get("none"):
        A("| table | ZSTD (default) | NONE | ZSTD / NONE |")
        A("|---|---:|---:|---:|")
        A("| MiB after OPTIMIZE | %.1f | %.1f | %.2fx |" % (t["zstd"] / B.MiB, t["none"] / B.MiB, t["zstd"] / t["none"]))
        A("")
    A("| reads | ZSTD q/s | NONE q/s | ZSTD / NONE | ZSTD CPU us/query | NONE CPU us/query |")
    A("|---|---:|---:|---:|---:|---:|")
    for cached in ("cached", "uncached"):
        for test in TESTS:
            z = c["reads"].get("%s/%s/zstd" % (test, cached))
            n = c["reads"].get("%s/%s/none" % (test, cached))
            if not (z and n):
                continue
            A("| %s %s | %.0f | %.0f | %.2fx | %.1f | %.1f |" % (
                test, cached, z["qps"], n["qps"], z["qps"] / n["qps"] if n["qps"] else 0,
                z["cpu_us_per_q"] or 0, n["cpu_us_per_q"] or 0))
    A("")
