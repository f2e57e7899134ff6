#!/usr/bin/env python3
"""Concurrency stress test: many clients running conflicting transactions.

  python3 scripts/stress.py [--engines TidesDB,InnoDB] [--threads 16] [--seconds 20]

Starts its own server (scripts/server.sh with TIDESDB_VAR / TIDESDB_PORT), and for
each engine runs, from --threads client threads for --seconds:
  - transfers: BEGIN; lock two random accounts (SELECT ... FOR UPDATE, in random
    order, so deadlocks happen); move an amount; COMMIT. The total of all balances
    must never change;
  - unique inserts: INSERT a random code from a small range into a UNIQUE column,
    sometimes inside a transaction held open a moment, so duplicates race;
  - readers: a consistent-snapshot transaction summing the balances twice; both
    sums must equal the total;
  - foreign keys: a child row inserted for a random parent in a transaction held
    open a moment, or a random parent deleted (refused while referenced) and
    inserted again, while one more thread changes the parent table's keys over and
    over: an online ADD UNIQUE (before the key the constraint uses: it moves), the
    same with a new index and FORCE (an online rebuild), and DROP INDEX of both (a
    copy on TidesDB): no child may ever lack its parent.
At the end it checks the invariants (total balance, no duplicate codes, no orphan
child, CHECK TABLE) and prints commits, deadlocks, lock wait timeouts, duplicate-key errors and
throughput per engine. Exit status 1 if any invariant broke or an unexpected error
occurred. Deadlocks, timeouts and duplicates are expected outcomes, counted.
"""
import argparse
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ER_DUP_ENTRY, ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK = 1062, 1205, 1213
ER_ROW_IS_REFERENCED_2, ER_NO_REFERENCED_ROW_2 = 1451, 1452
ACCOUNTS, START_BALANCE, CODES, PARENTS = 50, 1000, 400, 100


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.problems = []

    def add(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def problem(self, msg):
        with self.lock:
            self.problems.append(msg)


def q(conn, sql, stats, expected=()):
    r = conn.query(sql)
    if r.err and r.err not in expected:
        stats.problem("%s -> error %d %s" % (sql, r.err, r.errmsg))
    return r


def worker(sock, db, seed, deadline, stats):
    rng = random.Random(seed)
    conn = Conn(sock, db)
    q(conn, "SET SESSION innodb_lock_wait_timeout = 2", stats)
    q(conn, "SET SESSION tidesdb_lock_wait_timeout = 2", stats)
    while time.time() < deadline:
        kind = rng.random()
        if kind < 0.5:
            a, b = rng.sample(range(1, ACCOUNTS + 1), 2)
            amount = rng.randint(1, 50)
            ok = True
            for sql in ("BEGIN",
                        "SELECT balance FROM accounts WHERE id = %d FOR UPDATE" % a,
                        "SELECT balance FROM accounts WHERE id = %d FOR UPDATE" % b,
                        "UPDATE accounts SET balance = balance - %d WHERE id = %d" % (amount, a),
                        "UPDATE accounts SET balance = balance + %d WHERE id = %d" % (amount, b),
                        "COMMIT"):
                r = q(conn, sql, stats, (ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT))
                if r.err:
                    stats.add("deadlock" if r.err == ER_LOCK_DEADLOCK else "lock_timeout")
                    q(conn, "ROLLBACK", stats)
                    ok = False
                    break
            if ok:
                stats.add("transfer")
        elif kind < 0.7:
            code = rng.randint(1, CODES)
            hold = rng.random() < 0.3
            if hold:
                q(conn, "BEGIN", stats)
            r = q(conn, "INSERT INTO codes (code) VALUES (%d)" % code, stats,
                  (ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT))
            if hold:
                time.sleep(0.002)
                q(conn, "ROLLBACK" if r.err else "COMMIT", stats)
            if r.err == ER_DUP_ENTRY:
                stats.add("duplicate")
            elif r.err:
                stats.add("deadlock" if r.err == ER_LOCK_DEADLOCK else "lock_timeout")
            else:
                stats.add("insert")
        elif kind < 0.9:
            parent = rng.randint(1, PARENTS)
            if rng.random() < 0.7:
                q(conn, "BEGIN", stats)
                r = q(conn, "INSERT INTO children (p) VALUES (%d)" % parent, stats,
                      (ER_NO_REFERENCED_ROW_2, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT))
                time.sleep(0.002)
                q(conn, "ROLLBACK" if r.err else "COMMIT", stats)
                what = "child" if not r.err else "no_parent" if r.err == ER_NO_REFERENCED_ROW_2 else None
            else:
                r = q(conn, "DELETE FROM parents WHERE id = %d" % parent, stats,
                      (ER_ROW_IS_REFERENCED_2, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT))
                what = "parent_delete" if not r.err else "referenced" if r.err == ER_ROW_IS_REFERENCED_2 else None
                q(conn, "INSERT IGNORE INTO parents VALUES (%d, %d, %d)" % (parent, parent, parent), stats,
                  (ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT))
            if what is None:
                what = "deadlock" if r.err == ER_LOCK_DEADLOCK else "lock_timeout"
            stats.add(what)
        else:
            q(conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT", stats)
            sums = []
            for _ in range(2):
                r = q(conn, "SELECT SUM(balance) FROM accounts", stats)
                if r.rows:
                    sums.append(int(r.rows[0][0]))
            q(conn, "COMMIT", stats)
            if any(s != ACCOUNTS * START_BALANCE for s in sums):
                stats.problem("snapshot read a total of %s" % sums)
            stats.add("snapshot_read")
    conn.close()


def rebuilder(sock, db, deadline, stats):
    """Changes the parent table's keys until the deadline (see the module's text)."""
    conn = Conn(sock, db)
    q(conn, "SET SESSION innodb_lock_wait_timeout = 5", stats)
    q(conn, "SET SESSION tidesdb_lock_wait_timeout = 5", stats)
    n = 0
    while time.time() < deadline:
        sql = ["ALTER TABLE parents ADD UNIQUE uw (w), ALGORITHM=INPLACE, LOCK=NONE",
               "ALTER TABLE parents DROP INDEX uw",
               "ALTER TABLE parents ADD UNIQUE uw (w), ADD INDEX kw (w), FORCE, ALGORITHM=INPLACE, LOCK=NONE",
               "ALTER TABLE parents DROP INDEX uw, DROP INDEX kw"][n % 4]
        n += 1
        r = q(conn, sql, stats, (ER_LOCK_WAIT_TIMEOUT,))
        stats.add("rebuild" if not r.err else "rebuild_timeout")
    conn.close()


def run_engine(server, engine, threads, seconds, seed):
    db = "stress_" + engine.lower()
    admin = Conn(server.sock)
    stats = Stats()
    for sql in ("DROP DATABASE IF EXISTS %s" % db, "CREATE DATABASE %s" % db, "USE %s" % db,
                "CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL) ENGINE=%s" % engine,
                "CREATE TABLE codes (id INT AUTO_INCREMENT PRIMARY KEY, code INT NOT NULL, "
                "UNIQUE KEY (code)) ENGINE=%s" % engine,
                "INSERT INTO accounts SELECT seq, %d FROM seq_1_to_%d" % (START_BALANCE, ACCOUNTS),
                "CREATE TABLE parents (id INT PRIMARY KEY, v INT NOT NULL, w INT NOT NULL, KEY kv (v)) ENGINE=%s" % engine,
                "CREATE TABLE children (id INT AUTO_INCREMENT PRIMARY KEY, p INT NOT NULL, KEY (p), "
                "FOREIGN KEY (p) REFERENCES parents (v)) ENGINE=%s" % engine,
                "INSERT INTO parents SELECT seq, seq, seq FROM seq_1_to_%d" % PARENTS):
        q(admin, sql, stats)
    deadline = time.time() + seconds
    ts = [threading.Thread(target=worker, args=(server.sock, db, seed * 1000 + i, deadline, stats))
          for i in range(threads)]
    ts.append(threading.Thread(target=rebuilder, args=(server.sock, db, deadline, stats)))
    started = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.time() - started
    total = q(admin, "SELECT SUM(balance), COUNT(*) FROM accounts", stats).rows[0]
    if int(total[0]) != ACCOUNTS * START_BALANCE:
        stats.problem("total balance is %s, expected %d" % (total[0], ACCOUNTS * START_BALANCE))
    dups = q(admin, "SELECT COUNT(*) - COUNT(DISTINCT code) FROM codes", stats).rows[0][0]
    if int(dups) != 0:
        stats.problem("%s duplicate codes were accepted" % dups)
    orphans = q(admin, "SELECT COUNT(*) FROM children c LEFT JOIN parents p ON c.p = p.v "
                "WHERE p.id IS NULL", stats).rows[0][0]
    if int(orphans) != 0:
        stats.problem("%s child rows lack their parent" % orphans)
    for table in ("accounts", "codes", "parents", "children"):
        r = q(admin, "CHECK TABLE %s" % table, stats)
        status = [row[3].decode() for row in (r.rows or []) if row[2] == b"status"]
        if status != ["OK"]:
            stats.problem("CHECK TABLE %s: %s" % (table, r.rows))
    admin.close()
    return stats, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="TidesDB,InnoDB")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=3412)
    ap.add_argument("--var", default=os.path.join(ROOT, "target", "stress", "var"))
    args = ap.parse_args()
    server = Server(args.var, args.port)
    server.start()
    failed = False
    try:
        print("%-8s %8s %9s %9s %8s %9s %8s %10s %8s %8s %8s" % (
            "engine", "threads", "transfer", "insert", "dup", "deadlock", "timeout", "snapshots",
            "children", "rebuilds", "txn/s"))
        for engine in args.engines.split(","):
            stats, elapsed = run_engine(server, engine, args.threads, args.seconds, args.seed)
            c = stats.counts
            done = c.get("transfer", 0) + c.get("insert", 0)
            print("%-8s %8d %9d %9d %8d %9d %8d %10d %8d %8d %8.0f" % (
                engine, args.threads, c.get("transfer", 0), c.get("insert", 0), c.get("duplicate", 0),
                c.get("deadlock", 0), c.get("lock_timeout", 0), c.get("snapshot_read", 0),
                c.get("child", 0), c.get("rebuild", 0), done / elapsed))
            for p in stats.problems[:20]:
                print("  PROBLEM (%s): %s" % (engine, p))
            failed |= bool(stats.problems)
    finally:
        server.stop()
    print("stress: %s" % ("FAILED" if failed else "invariants held"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
