"""ADD FULLTEXT build time, TidesDB beside InnoDB, with mariadbd's CPU seconds and the
time its threads waited for a core (docs/PROFILING.md item 26).

  python3 scripts/fts_build_probe.py VAR PORT PLUGIN ROUNDS [PERF_OUT]

Starts a server of our own (scripts/server.sh, bench.py's settings without MyRocks)
under VAR on PORT with the ha_tidesdb.so PLUGIN, loads the larger fts corpus
(bench_fulltext.CORPUS_DIRS_LARGE, 256-byte documents) into a TidesDB and an InnoDB
table once (kept in VAR for the next run), then ROUNDS times: ALTER TABLE ADD FULLTEXT
on each (dropping the index first), printing wall seconds, mariadbd CPU seconds
(/proc/<pid>/stat) and run-queue wait (/proc/<pid>/task/*/schedstat: time runnable
but not running, i.e. waiting for a core other processes held). PERF_OUT: each
TidesDB build under `perf record -F 499` (PERFG: its call-graph options, default -g).
KEEP=1 leaves the server running."""
import os
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, Server  # noqa: E402
import bench_fulltext as bf  # noqa: E402
import bench  # noqa: E402
var, port, plugin, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
perf = sys.argv[5] if len(sys.argv) > 5 else None
os.makedirs(var, exist_ok=True)
srv = Server(var, port)
srv.env["TIDESDB_PLUGIN"] = plugin
srv.env["TIDESDB_EXTRA_CNF"] = "\n".join(l for l in bench.BASE_CNF.splitlines() if "rocksdb" not in l and "blackhole" not in l)
srv.stop()
srv.start()
c = Conn(srv.sock)
bench.q(c, "CREATE DATABASE IF NOT EXISTS b")
bench.q(c, "USE b")
docs = bf.load_corpus(200000, bf.CORPUS_DIRS_LARGE, 256)
print("docs", len(docs), flush=True)
def sched():
    import glob
    run = wait = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % srv.pid()):
        try:
            a = open(f).read().split()
        except OSError:
            continue
        run += int(a[0])
        wait += int(a[1])
    return run / 1e9, wait / 1e9
def cpu():
    with open("/proc/%d/stat" % srv.pid()) as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")
for eng in ("InnoDB", "TidesDB"):
    t = "t_" + eng.lower()
    r = c.query("SELECT COUNT(*) FROM %s" % t)
    if r.err is None and int(r.rows[0][0]) == len(docs):
        continue
    bench.q(c, "DROP TABLE IF EXISTS %s" % t)
    bench.q(c, "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, title VARCHAR(200) NOT NULL, body MEDIUMTEXT NOT NULL) ENGINE=%s DEFAULT CHARSET=utf8mb4" % (t, eng))
    t0 = time.time()
    for i in range(0, len(docs), 50):
        rows = ",".join("(%d, %s, %s)" % (i + j + 1, bf.sql_str(a), bf.sql_str(b)) for j, (a, b) in enumerate(docs[i:i + 50]))
        bench.q(c, "BEGIN")
        bench.q(c, "INSERT INTO %s VALUES %s" % (t, rows))
        bench.q(c, "COMMIT")
    print("loaded", eng, "%.1f s" % (time.time() - t0), flush=True)
for rnd in range(rounds):
    for eng in ("TidesDB", "InnoDB"):
        t = "t_" + eng.lower()
        r = c.query("SHOW INDEX FROM %s WHERE Key_name='ft_body'" % t)
        if r.rows:
            bench.q(c, "ALTER TABLE %s DROP INDEX ft_body" % t)
        p = None
        if perf and eng == "TidesDB":
            p = subprocess.Popen(["perf", "record", "-F", "499"] + os.environ.get("PERFG", "-g").split() + [ "-o", perf, "-p", str(srv.pid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        load = open("/proc/loadavg").read().split()[:3]
        s0 = sched()
        c0, t0 = cpu(), time.perf_counter()
        bench.q(c, "ALTER TABLE %s ADD FULLTEXT INDEX ft_body (body)" % t)
        wall, cp = time.perf_counter() - t0, cpu() - c0
        s1 = sched()
        if p:
            p.send_signal(2)
            p.wait()
        print("round %d %-7s ADD FULLTEXT %.2f s wall, %.2f s mariadbd CPU, %.2f s runqueue wait  (load %s)" % (rnd, eng, wall, cp, s1[1] - s0[1], " ".join(load)), flush=True)
c.close()
if os.environ.get("KEEP") != "1":
    srv.stop()
