#!/usr/bin/env python3
"""Checks scripts/mariadb_client.py's binary protocol (prepared statements) against
its text protocol on a server of our own with TidesDB, InnoDB and MyRocks:
typed parameters, NULL, empty / 1 MiB / 3 MiB (COM_STMT_SEND_LONG_DATA) BLOBs,
binary result sets of every column type the benchmarks use, an error, UPDATE counts.

  python3 scripts/mariadb-client-check.py --port 3460    (not 3399)
Exit status 0 when every check passes."""
import argparse
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, Server, ROOT  # noqa: E402


def check(sock):
    fails = []
    c = Conn(sock)
    c.query("CREATE DATABASE IF NOT EXISTS client_check")
    c.query("USE client_check")
    rng = random.Random(7)
    for eng in ("InnoDB", "TidesDB", "RocksDB"):
        c.query("DROP TABLE IF EXISTS x")
        r = c.query("CREATE TABLE x (id INT PRIMARY KEY, k BIGINT UNSIGNED, f DOUBLE, s VARCHAR(64), "
                    "d DATETIME(6), tm TIME, dt DATE, dec1 DECIMAL(10,2), ti TINYINT, b LONGBLOB) ENGINE=%s" % eng)
        if r.err is not None:
            fails.append("%s: CREATE TABLE: %s" % (eng, r.show()))
            continue
        ins = c.prepare("INSERT INTO x VALUES (?, ?, ?, ?, '2024-01-02 03:04:05.000007', '-25:01:02', "
                        "'2020-02-29', 12.5, -3, ?)")
        pays = {1: rng.randbytes(1 << 20), 2: b"\0\xff'\\\"", 3: b"", 4: None, 5: rng.randbytes(70000)}
        for i, p in pays.items():
            r = ins.execute(i, (1 << 64) - i, 1.5 * i, "m'\u00e9\\%d" % i, p)
            if r.err is not None or r.affected != 1:
                fails.append("%s: insert %d: %s" % (eng, i, r.show()))
        big = rng.randbytes(3 << 20)
        ins.send_long_data(4, big[:1000])
        ins.send_long_data(4, big[1000:])
        r = ins.execute(6, 0, 0.0, "", None)
        if r.err is not None:
            fails.append("%s: insert with long data: %s" % (eng, r.show()))
        pays[6] = big
        r = ins.execute(1, 0, 0.0, "", b"x")
        if r.err != 1062:
            fails.append("%s: duplicate insert gave %s, expected error 1062" % (eng, r.show()))
        ins.close()
        cols = "id, k, f, s, d, tm, dt, dec1, ti, b"
        sel = c.prepare("SELECT %s FROM x WHERE id = ?" % cols)
        for i in pays:
            rb = sel.execute(i)
            rt = c.query("SELECT %s FROM x WHERE id = %d" % (cols, i))
            if rb.err is not None or len(rb.rows or []) != 1:
                fails.append("%s: select %d: %s" % (eng, i, rb.show()))
                continue
            if rb.rows != rt.rows:
                fails.append("%s: row %d differs: binary %s, text %s" % (eng, i, rb.show(40), rt.show(40)))
            if rb.rows[0][9] != pays[i]:
                fails.append("%s: row %d payload reads back wrong" % (eng, i))
        sel.close()
        up = c.prepare("UPDATE x SET b = ? WHERE id = ?")
        r1, r2 = up.execute(b"new", 2), up.execute(b"", 99)
        if r1.affected != 1 or r2.affected != 0:
            fails.append("%s: UPDATE affected %s and %s, expected 1 and 0" % (eng, r1.affected, r2.affected))
        up.close()
        if c.query("SELECT b FROM x WHERE id = 2").rows != [(b"new",)]:
            fails.append("%s: updated payload reads back wrong" % eng)
    c.query("DROP DATABASE client_check")
    c.close()
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    if a.port == 3399:
        sys.exit("port 3399 belongs to `make server`; pick another")
    var = os.path.join(ROOT, "target", "client-check")
    srv = Server(var, a.port)
    srv.stop()
    shutil.rmtree(var, ignore_errors=True)
    srv.env["TIDESDB_EXTRA_CNF"] = "plugin-load-add = ha_rocksdb.so\nmax_allowed_packet = 64M\n"
    srv.start()
    try:
        fails = check(srv.sock)
    finally:
        srv.stop()
    for f in fails:
        print("FAIL:", f)
    print("mariadb-client-check: %s" % ("all checks passed" if not fails else "%d failures" % len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
