#!/usr/bin/env python3
"""Galera benchmark (make bench-galera): a 3-node cluster on this machine, write
throughput of TidesDB tables vs InnoDB tables through the cluster, and the conflict
rate under a hot set.

The nodes are servers of our own (scripts/server.sh) under target/bench-galera/n1..n3,
client ports 3440-3442, Galera ports 3443/3445/3447 (IST 3444/3446/3448). Node 1
bootstraps the cluster; nodes 2 and 3 start from a copy of its datadir taken at a
clean shutdown (the same cluster state: they join by IST of the few commits made
since, not by a full state transfer).
Every node has wsrep_slave_threads = 4.

Runs (sysbench 1.0.20, each engine in a database of its own, the same settings):
  insert/one      oltp_insert, all clients on node 1
  insert/all      oltp_insert, clients spread over the 3 nodes
  write/one       oltp_write_only on --rows rows, clients on node 1
  write/all       oltp_write_only on --rows rows, clients over the 3 nodes
  hot/all         oltp_write_only on --hot-rows rows, clients over the 3 nodes
A transaction that loses a conflict (ER_LOCK_DEADLOCK: certification failure or
brute-force abort; ER_ERROR_DURING_COMMIT) is retried by sysbench and counted as an
ignored error; the conflict rate is ignored errors / (transactions + ignored errors).
After each engine's runs the tables' checksums must be equal on the 3 nodes.

Prints the figures, writes target/bench/galera.json and, with --docs,
docs/bench/galera.md. Options: --seconds, --threads, --rows, --hot-rows, --keep
(leave the nodes running)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import ROOT, Conn, Server  # noqa: E402

BASE = os.path.join(ROOT, "target", "bench-galera")
PORTS = [3440, 3441, 3442]
GCOMM = [3443, 3445, 3447]
IST = [3444, 3446, 3448]
SST = 3449
ENGINES = ["TidesDB", "InnoDB"]
IGNORE = "1213,1205,1020,1180"


def log(msg):
    print("bench-galera: " + msg, flush=True)


def q(conn, sql):
    r = conn.query(sql)
    if r.err:
        raise RuntimeError("%s -> %d %s" % (sql, r.err, r.errmsg))
    return r


def status(conn, name):
    r = q(conn, "SHOW GLOBAL STATUS LIKE '%s'" % name)
    return r.rows[0][1].decode() if r.rows else None


def node_cnf(i, bootstrap):
    members = ",".join("127.0.0.1:%d" % p for p in GCOMM)
    return "\n".join([
        "wsrep_on = ON",
        "wsrep_provider = /usr/lib/galera/libgalera_smm.so",
        "wsrep_cluster_name = tidesdb-bench",
        "wsrep_node_name = n%d" % (i + 1),
        "wsrep_cluster_address = gcomm://%s" % ("" if bootstrap else members),
        "wsrep_node_address = 127.0.0.1:%d" % GCOMM[i],
        "wsrep_node_incoming_address = 127.0.0.1:%d" % PORTS[i],
        "wsrep_sst_receive_address = 127.0.0.1:%d" % SST,
        'wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;'
        'gcache.size=256M"' % (GCOMM[i], IST[i]),
        "wsrep_slave_threads = 4",
        "wsrep_sst_method = tidesdb",
        "binlog_format = ROW",
        "innodb_autoinc_lock_mode = 2",
        "innodb_buffer_pool_size = 256M",
        "max_connections = 200",
    ])


def server(i, bootstrap=False):
    s = Server(os.path.join(BASE, "n%d" % (i + 1)), PORTS[i])
    s.env["TIDESDB_EXTRA_CNF"] = node_cnf(i, bootstrap)
    # A joiner runs its SST method's script even when it then gets IST.
    s.env["PATH"] = os.path.join(ROOT, "target", "plugin") + os.pathsep + s.env["PATH"]
    return s


def wait_synced(nodes, size, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            ok = True
            for s in nodes:
                c = Conn(s.sock, timeout=10)
                ok = ok and status(c, "wsrep_local_state_comment") == "Synced" \
                    and status(c, "wsrep_cluster_size") == str(size)
                c.close()
            if ok:
                return
        except Exception:  # noqa: BLE001 - a node still starting
            pass
        time.sleep(1)
    raise RuntimeError("the cluster did not reach %d synced nodes in %d s" % (size, timeout))


def start_cluster():
    if os.path.isdir(BASE):
        shutil.rmtree(BASE)
    first = server(0, bootstrap=True)
    first.start()
    wait_synced([first], 1)
    first.stop()
    for i in (1, 2):
        dst = os.path.join(BASE, "n%d" % (i + 1), "data")
        shutil.copytree(os.path.join(BASE, "n1", "data"), dst, symlinks=True)
        for f in ("gvwstate.dat",):
            if os.path.exists(os.path.join(dst, f)):
                os.remove(os.path.join(dst, f))
    nodes = [server(0, bootstrap=True), server(1), server(2)]
    nodes[0].start()
    wait_synced(nodes[:1], 1)
    for s in nodes[1:]:
        s.start()
    wait_synced(nodes, 3)
    return nodes


def parse_sysbench(text):
    m_t = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", text)
    m_e = re.search(r"ignored errors:\s+(\d+)", text)
    m_p = re.search(r"95th percentile:\s+([\d.]+)", text)
    if not m_t:
        return None
    tx = int(m_t.group(1))
    ign = int(m_e.group(1)) if m_e else 0
    return dict(tps=float(m_t.group(2)), transactions=tx, ignored_errors=ign,
                conflict_rate=ign / (tx + ign) if tx + ign else 0.0,
                p95_ms=float(m_p.group(1)) if m_p else None)


def sysbench(db, eng, test, rows, threads, seconds, ports, action="run"):
    cmd = ["sysbench", "--db-driver=mysql", "--mysql-user=root", "--mysql-host=127.0.0.1",
           "--mysql-port=" + ",".join(str(p) for p in ports), "--mysql-db=" + db,
           "--mysql-storage-engine=" + eng.lower(), "--tables=1", "--table-size=%d" % rows,
           "--rand-seed=1", "--mysql-ignore-errors=" + IGNORE, test]
    if action == "run":
        cmd[-1:-1] = ["--threads=%d" % threads, "--time=%d" % seconds]
    cmd.append(action)
    p = subprocess.run(cmd, capture_output=True, text=True, cwd="/usr/share/sysbench")
    if p.returncode != 0:
        raise RuntimeError("sysbench %s %s on %s failed (rc %d): %s" % (
            test, action, eng, p.returncode, (p.stdout + p.stderr)[-800:]))
    return parse_sysbench(p.stdout) if action == "run" else None


def cluster_counters(nodes):
    out = {"cert_failures": 0, "bf_aborts": 0}
    for s in nodes:
        c = Conn(s.sock)
        out["cert_failures"] += int(status(c, "wsrep_local_cert_failures"))
        out["bf_aborts"] += int(status(c, "wsrep_local_bf_aborts"))
        c.close()
    return out


def checksums_equal(nodes, db):
    sums = []
    for s in nodes:
        c = Conn(s.sock)
        q(c, "SET SESSION wsrep_sync_wait = 15")
        sums.append(q(c, "CHECKSUM TABLE %s.sbtest1" % db).rows[0][1])
        c.close()
    return len(set(sums)) == 1, [v.decode() if v else None for v in sums]


def run(args):
    nodes = start_cluster()
    log("3 nodes synced (ports %s)" % ",".join(map(str, PORTS)))
    results = {}
    admin = Conn(nodes[0].sock)
    runs = [("insert/one", "oltp_insert", args.rows, PORTS[:1]),
            ("insert/all", "oltp_insert", args.rows, PORTS),
            ("write/one", "oltp_write_only", args.rows, PORTS[:1]),
            ("write/all", "oltp_write_only", args.rows, PORTS),
            ("hot/all", "oltp_write_only", args.hot_rows, PORTS)]
    for eng in ENGINES:
        res = results.setdefault(eng, {})
        for name, test, rows, ports in runs:
            db = "sbg_" + eng.lower()
            q(admin, "DROP DATABASE IF EXISTS %s" % db)
            q(admin, "CREATE DATABASE %s" % db)
            sysbench(db, eng, "oltp_common", rows, 1, 0, PORTS[:1], action="prepare")
            before = cluster_counters(nodes)
            st = sysbench(db, eng, test, rows, args.threads, args.seconds, ports)
            after = cluster_counters(nodes)
            st.update({k: after[k] - before[k] for k in after})
            equal, sums = checksums_equal(nodes, db)
            st["nodes_equal"] = equal
            if not equal:
                raise RuntimeError("%s %s: the nodes differ after the run: checksums %s" % (eng, name, sums))
            res[name] = st
            log("%-8s %-11s %8.1f tps  p95 %7.2f ms  conflicts %5.1f%% (%d; cert failures %d, bf aborts %d)" % (
                eng, name, st["tps"], st["p95_ms"] or 0, 100 * st["conflict_rate"], st["ignored_errors"],
                st["cert_failures"], st["bf_aborts"]))
            q(admin, "DROP DATABASE %s" % db)
    admin.close()
    return nodes, results


def markdown(args, results):
    names = ["insert/one", "insert/all", "write/one", "write/all", "hot/all"]
    what = {"insert/one": "oltp_insert, clients on node 1",
            "insert/all": "oltp_insert, clients over 3 nodes",
            "write/one": "oltp_write_only (%d rows), clients on node 1" % args.rows,
            "write/all": "oltp_write_only (%d rows), clients over 3 nodes" % args.rows,
            "hot/all": "oltp_write_only, hot set of %d rows, clients over 3 nodes" % args.hot_rows}
    lines = ["# Galera: TidesDB vs InnoDB through a 3-node cluster", "",
             "Generated by `make bench-galera` (scripts/bench-galera.py) on %s." % time.strftime("%Y-%m-%d"),
             "Three nodes on one machine (%d cores), `wsrep_slave_threads = 4`, sysbench 1.0.20 with %d "
             "client threads for %d s per run; each run on a fresh table of its engine. Conflicts: "
             "transactions that lost certification or were brute-force aborted (ER_LOCK_DEADLOCK, "
             "retried by sysbench) over all attempts. The nodes' checksums were equal after every run."
             % (os.cpu_count() or 0, args.threads, args.seconds), "",
             "| run | TidesDB tps | InnoDB tps | TidesDB conflicts | InnoDB conflicts |",
             "|---|---:|---:|---:|---:|"]
    for n in names:
        t = results.get("TidesDB", {}).get(n)
        i = results.get("InnoDB", {}).get(n)

        def fmt(r, key):
            if not r:
                return "-"
            return "%.1f" % r["tps"] if key == "tps" else "%.1f%% (%d)" % (100 * r["conflict_rate"],
                                                                             r["ignored_errors"])
        lines.append("| %s | %s | %s | %s | %s |" % (what[n], fmt(t, "tps"), fmt(i, "tps"), fmt(t, "c"), fmt(i, "c")))
    lines += ["", "All three nodes and the clients share the machine's cores (and other work running on it), "
              "so the figures compare the engines on the same run, not absolute cluster speed. Every "
              "write commits on all nodes through Galera's total order (one replication round trip per "
              "commit), which bounds both engines alike.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--hot-rows", type=int, default=10)
    ap.add_argument("--docs", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    nodes = []
    try:
        nodes, results = run(args)
    finally:
        if not args.keep:
            for s in reversed(nodes or [server(i) for i in range(3)]):
                s.stop()
    os.makedirs(os.path.join(ROOT, "target", "bench"), exist_ok=True)
    with open(os.path.join(ROOT, "target", "bench", "galera.json"), "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)
    md = markdown(args, results)
    print(md)
    if args.docs:
        with open(os.path.join(ROOT, "docs", "bench", "galera.md"), "w") as f:
            f.write(md)
        log("wrote docs/bench/galera.md")


if __name__ == "__main__":
    main()
