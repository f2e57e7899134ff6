#!/usr/bin/env python3
"""Crash stress test with an expected-state oracle (like RocksDB's db_stress), through
the real server.

  python3 scripts/stress-crash.py [--seconds 180] [--clients 4] [--seed 1] [--port 3413]

Starts a server of its own (scripts/server.sh, TIDESDB_VAR / TIDESDB_PORT, 1 MiB
memtables so flushes, compactions and value-log GC happen all the time) and creates
TABLES tables `(id INT PRIMARY KEY, a INT, b VARCHAR, c LONGBLOB)` with a low
VALUE_THRESHOLD, so that large values go to the value log. Then, until --seconds have
passed, runs cycles of:

  1. --clients client threads run random transactions (upserts of small and large
     values, deletes, multi-row updates; one to four statements over one to three
     tables, autocommit or BEGIN ... COMMIT). Each client owns the ids with
     id % clients == its number, so the oracle (the expected committed state, kept
     here in Python) has one writer per key and needs no guess about commit order.
  2. One DDL thread runs ADD INDEX / DROP INDEX (in place and online, and copying),
     a copying ALTER (FORCE), TRUNCATE, RENAME (there and back) and OPTIMIZE TABLE.
     TRUNCATE and RENAME hold the table's lock here, so the oracle knows which
     transactions came before them.
  3. The server is killed with SIGKILL at a random moment (half of the time right
     after a DDL statement started), restarted, and checked:
       - every table equals the oracle's committed state, read through the primary
         key and through each secondary index (index-only reads);
       - a transaction whose COMMIT was in flight at the kill ("pending") is either
         there completely or not at all (never a part of it); a TRUNCATE in flight
         either emptied the table or left it as it was; an index DDL in flight left
         the table with its old or its new set of indexes;
       - CHECK TABLE says OK for every table;
       - the server never went away before we killed it, and its error log shows no
         crash (signal, assertion, Rust panic).
Exit status 1 on any broken expectation (each printed with the cycle and seed).
"""
import argparse
import hashlib
import os
import random
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, ConnLost, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DB = "stress_crash"
TABLES = ["t0", "t1", "t2"]
KEYS = 240                     # ids 1..KEYS per table
VALUE_THRESHOLD = 1024         # rows at least this big go to the value log
C_LENGTHS = [0, 10, 200, 1500, 6000, 30000]
INDEXES = {"ka": "(a)", "kb": "(b)", "kab": "(a, b)"}
ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK = 1205, 1213
SERVER_CNF = "\n".join([
    "tidesdb_write_buffer_size = 1M",
    "tidesdb_sync_mode = FULL",
    "lock_wait_timeout = 20",
])
CRASH_LOG = re.compile(r"got signal|Assertion|panicked|RUST_BACKTRACE|stack_bottom|Segmentation")


def value_of(tag, length):
    """The bytes of c for (tag, length) and the SQL expression that builds them."""
    unit = "%s-" % tag
    reps = length // len(unit) + 1
    data = (unit * reps)[:length].encode()
    sql = "LEFT(REPEAT('%s', %d), %d)" % (unit, reps, length)
    return data, sql


def row_of(a, b, c):
    """A row as the verifying SELECT returns it: (a, b, LENGTH(c), MD5(c))."""
    return (str(a), b, str(len(c)), hashlib.md5(c).hexdigest())


class Oracle:
    """The expected committed state: table -> {id: row_of(...)}; and what was in
    flight at the kill (resolved after the restart)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.committed = {t: {} for t in TABLES}
        self.indexes = {t: set() for t in TABLES}
        # Python-side table locks: transactions share, TRUNCATE / RENAME exclude.
        self.table_locks = {t: RWLock() for t in TABLES}

    def apply(self, changes):
        with self.lock:
            for (t, i), row in changes.items():
                if row is None:
                    self.committed[t].pop(i, None)
                else:
                    self.committed[t][i] = row


class RWLock:
    def __init__(self):
        self.cond = threading.Condition()
        self.readers = 0
        self.writer = False

    def acquire_shared(self):
        with self.cond:
            while self.writer:
                self.cond.wait()
            self.readers += 1

    def release_shared(self):
        with self.cond:
            self.readers -= 1
            self.cond.notify_all()

    def acquire_exclusive(self):
        with self.cond:
            while self.writer:
                self.cond.wait()
            self.writer = True
            while self.readers:
                self.cond.wait()

    def release_exclusive(self):
        with self.cond:
            self.writer = False
            self.cond.notify_all()


class Run:
    """What one cycle's threads share: the stop flag, the kill flag, problems."""

    def __init__(self, oracle, cycle):
        self.oracle = oracle
        self.cycle = cycle
        self.stop = threading.Event()
        self.killed = threading.Event()
        self.ddl_started = threading.Event()
        self.lock = threading.Lock()
        self.problems = []
        self.counts = {}
        # in flight at the kill: [(changes dict)], [table truncated], {table: (old, new) index sets}
        self.pending_txns = []
        self.pending_truncates = []
        self.pending_index_ddl = {}
        self.renaming = None          # (table, renamed name) while a RENAME pair runs

    def add(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def problem(self, msg):
        with self.lock:
            self.problems.append("cycle %d: %s" % (self.cycle, msg))


def lost(run, who, e, server):
    """A connection was lost: expected once we killed the server, a problem before."""
    if not run.killed.is_set():
        time.sleep(0.5)
        if not run.killed.is_set():
            run.problem("%s lost its connection before the kill (server crash?): %s\n%s"
                        % (who, e, server.error_log_tail(40)))
    run.stop.set()


def client(run, server, idx, nclients, seed):
    rng = random.Random(seed)
    oracle = run.oracle
    my_ids = [i for i in range(1, KEYS + 1) if i % nclients == idx]
    try:
        conn = Conn(server.sock, DB)
        conn.query("SET SESSION tidesdb_lock_wait_timeout = 5")
        conn.query("SET SESSION lock_wait_timeout = 10")
    except (ConnLost, OSError) as e:
        lost(run, "client %d" % idx, e, server)
        return
    while not run.stop.is_set():
        tables = sorted(rng.sample(TABLES, rng.randint(1, 3)))
        nops = rng.randint(1, 4)
        explicit = nops > 1 or rng.random() < 0.3
        for t in tables:
            oracle.table_locks[t].acquire_shared()
        changes = {}
        in_commit = False
        try:
            with oracle.lock:
                view = {t: dict(oracle.committed[t]) for t in tables}

            def cur(t, i):
                return changes[(t, i)] if (t, i) in changes else view[t].get(i)
            stmts = []
            for _ in range(nops):
                t = rng.choice(tables)
                k = rng.random()
                if k < 0.6:
                    i = rng.choice(my_ids)
                    a = rng.randint(-1000, 1000)
                    b = "b%d" % rng.randint(0, 50)
                    length = rng.choice(C_LENGTHS)
                    data, expr = value_of("v%d" % rng.randint(0, 10 ** 6), length)
                    stmts.append("INSERT INTO %s (id, a, b, c) VALUES (%d, %d, '%s', %s) "
                                 "ON DUPLICATE KEY UPDATE a = VALUES(a), b = VALUES(b), c = VALUES(c)"
                                 % (t, i, a, b, expr))
                    changes[(t, i)] = row_of(a, b, data)
                elif k < 0.8:
                    i = rng.choice(my_ids)
                    stmts.append("DELETE FROM %s WHERE id = %d" % (t, i))
                    changes[(t, i)] = None
                else:
                    ids = rng.sample(my_ids, 5)
                    stmts.append("UPDATE %s SET a = a + 1 WHERE id IN (%s)" % (t, ",".join(map(str, ids))))
                    for i in ids:
                        r = cur(t, i)
                        if r is not None:
                            changes[(t, i)] = (str(int(r[0]) + 1),) + r[1:]
            ok = True
            if explicit:
                r = conn.query("BEGIN")
                ok = r.err is None
            for n, sql in enumerate(stmts):
                if not ok:
                    break
                if not explicit:
                    # an autocommit statement is its own commit
                    in_commit = True
                    with run.lock:
                        run.pending_txns.append(changes)
                r = conn.query(sql)
                if r.err:
                    ok = False
                    if r.err not in (ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK):
                        run.problem("client %d: %s -> error %d %s" % (idx, sql[:120], r.err, r.errmsg))
                    run.add("error_%d" % r.err)
            if explicit and ok:
                in_commit = True
                with run.lock:
                    run.pending_txns.append(changes)
                r = conn.query("COMMIT")
                ok = r.err is None
                if not ok:
                    run.add("commit_errors")
            elif explicit:
                conn.query("ROLLBACK")
            if ok:
                oracle.apply(changes)
                run.add("commits")
            if in_commit:
                with run.lock:
                    run.pending_txns.remove(changes)
        except ConnLost as e:
            if not in_commit:
                pass    # never committed: the oracle keeps the old rows
            lost(run, "client %d" % idx, e, server)
            return
        finally:
            for t in tables:
                oracle.table_locks[t].release_shared()
    conn.close()


def ddl(run, server, seed):
    rng = random.Random(seed)
    oracle = run.oracle
    try:
        conn = Conn(server.sock, DB)
        conn.query("SET SESSION lock_wait_timeout = 10")
    except (ConnLost, OSError) as e:
        lost(run, "ddl", e, server)
        return

    def q(sql, what):
        run.ddl_started.set()
        r = conn.query(sql)
        if r.err and r.err not in (ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK):
            run.problem("ddl: %s -> error %d %s" % (sql, r.err, r.errmsg))
        if r.err:
            run.add("ddl_error_%d" % r.err)
        else:
            run.add(what)
        return r

    try:
        while not run.stop.is_set():
            time.sleep(rng.uniform(0, 0.4))
            t = rng.choice(TABLES)
            k = rng.random()
            have = oracle.indexes[t]
            if k < 0.35:
                missing = sorted(set(INDEXES) - have)
                present = sorted(have)
                online = rng.random() < 0.6
                algo = ", ALGORITHM=INPLACE, LOCK=NONE" if online else ", ALGORITHM=COPY"
                if missing and (not present or rng.random() < 0.6):
                    name = rng.choice(missing)
                    sql = "ALTER TABLE %s ADD INDEX %s %s%s" % (t, name, INDEXES[name], algo)
                    new = have | {name}
                else:
                    name = rng.choice(present)
                    sql = "ALTER TABLE %s DROP INDEX %s%s" % (t, name, ", ALGORITHM=COPY" if not online else "")
                    new = have - {name}
                run.pending_index_ddl[t] = (set(have), set(new))
                r = q(sql, "add_index" if len(new) > len(have) else "drop_index")
                if r.err is None:
                    oracle.indexes[t] = new
                del run.pending_index_ddl[t]
            elif k < 0.5:
                q("ALTER TABLE %s FORCE, ALGORITHM=COPY" % t, "copy_alter")
            elif k < 0.65:
                q("OPTIMIZE TABLE %s" % t, "optimize")
            elif k < 0.8:
                lock = oracle.table_locks[t]
                lock.acquire_exclusive()
                try:
                    run.pending_truncates.append(t)
                    r = q("TRUNCATE TABLE %s" % t, "truncate")
                    if r.err is None:
                        with oracle.lock:
                            oracle.committed[t] = {}
                    run.pending_truncates.remove(t)
                finally:
                    lock.release_exclusive()
            else:
                lock = oracle.table_locks[t]
                lock.acquire_exclusive()
                try:
                    run.renaming = (t, t + "_r")
                    r = q("RENAME TABLE %s TO %s_r" % (t, t), "rename")
                    if r.err is None:
                        time.sleep(rng.uniform(0, 0.2))
                        r = q("RENAME TABLE %s_r TO %s" % (t, t), "rename")
                        if r.err:
                            run.problem("ddl: could not rename %s_r back" % t)
                            run.stop.set()
                            return
                    run.renaming = None
                finally:
                    lock.release_exclusive()
    except ConnLost as e:
        lost(run, "ddl", e, server)


def create_schema(server):
    c = Conn(server.sock)
    for sql in ["DROP DATABASE IF EXISTS %s" % DB, "CREATE DATABASE %s" % DB]:
        r = c.query(sql)
        assert r.err is None, r.errmsg
    for t in TABLES:
        r = c.query("CREATE TABLE %s.%s (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(40) NOT NULL, "
                    "c LONGBLOB) ENGINE=TidesDB VALUE_THRESHOLD=%d" % (DB, t, VALUE_THRESHOLD))
        assert r.err is None, r.errmsg
    c.close()


def index_sets(conn):
    r = conn.query("SELECT TABLE_NAME, INDEX_NAME FROM information_schema.STATISTICS "
                   "WHERE TABLE_SCHEMA = '%s' AND INDEX_NAME <> 'PRIMARY'" % DB)
    out = {}
    for tname, iname in r.rows or []:
        out.setdefault(tname.decode(), set()).add(iname.decode())
    return out


def read_table(conn, t):
    r = conn.query("SELECT id, a, b, LENGTH(c), MD5(c) FROM %s ORDER BY id" % t)
    if r.err:
        return None, "SELECT from %s: error %d %s" % (t, r.err, r.errmsg)
    rows = {}
    for rid, a, b, ln, md5 in r.rows:
        rows[int(rid)] = (a.decode(), b.decode(), ln.decode() if ln is not None else "0",
                          md5.decode() if md5 is not None else hashlib.md5(b"").hexdigest())
    return rows, None


def verify(server, oracle, run, log):
    """After the restart: resolve what was in flight, then compare everything."""
    problems = []
    conn = Conn(server.sock, DB)
    # A RENAME pair interrupted between its two statements: the table is under its
    # other name, legitimately; put it back.
    names = {row[0].decode() for row in conn.query("SHOW TABLES").rows or []}
    for t in TABLES:
        if t not in names:
            if run.renaming and run.renaming[0] == t and t + "_r" in names:
                r = conn.query("RENAME TABLE %s_r TO %s" % (t, t))
                if r.err:
                    problems.append("could not rename %s_r back: %s" % (t, r.errmsg))
                log("  rename of %s was in flight: found as %s_r, renamed back" % (t, t))
            else:
                problems.append("table %s is missing after the restart (tables: %s)" % (t, sorted(names)))
    stray = names - set(TABLES) - ({run.renaming[1]} if run.renaming else set())
    if stray:
        problems.append("unexpected tables after the restart: %s" % sorted(stray))

    # Index sets: as acknowledged, or the old/new set of the DDL in flight.
    actual_idx = index_sets(conn)
    for t in TABLES:
        got = actual_idx.get(t, set())
        want = oracle.indexes[t]
        if t in run.pending_index_ddl:
            old, new = run.pending_index_ddl[t]
            if got == new:
                oracle.indexes[t] = new
            elif got != old:
                problems.append("%s has indexes %s; the index DDL in flight went from %s to %s"
                                % (t, sorted(got), sorted(old), sorted(new)))
                oracle.indexes[t] = got
        elif got != want:
            problems.append("%s has indexes %s, expected %s" % (t, sorted(got), sorted(want)))
            oracle.indexes[t] = got

    actual = {}
    for t in TABLES:
        rows, err = read_table(conn, t)
        if err:
            problems.append(err)
            rows = {}
        actual[t] = rows

    committed = oracle.committed
    # A TRUNCATE in flight: empty (done) or untouched (not done).
    for t in run.pending_truncates:
        if not actual[t] and committed[t]:
            committed[t] = {}
            log("  truncate of %s was in flight: done" % t)
    # A commit in flight: all of it or none of it.
    for changes in run.pending_txns:
        new = all(actual[t].get(i) == row for (t, i), row in changes.items())
        old = all(actual[t].get(i) == committed[t].get(i) for (t, i) in changes)
        if new and not old:
            oracle.apply(changes)
            run.add("pending_applied")
        elif old and not new:
            run.add("pending_not_applied")
        elif not new and not old:
            detail = ["%s.%d: got %s, old %s, new %s" % (t, i, actual[t].get(i), committed[t].get(i), row)
                      for (t, i), row in sorted(changes.items())]
            problems.append("a transaction in flight at the kill is there in part:\n    "
                            + "\n    ".join(detail))
            oracle.apply({(t, i): actual[t].get(i) for (t, i) in changes})

    for t in TABLES:
        want, got = committed[t], actual[t]
        if want != got:
            diff = []
            for i in sorted(set(want) | set(got)):
                if want.get(i) != got.get(i):
                    diff.append("id %d: expected %s, got %s" % (i, want.get(i), got.get(i)))
            problems.append("%s differs from the oracle in %d rows:\n    %s"
                            % (t, len(diff), "\n    ".join(diff[:10])))
            committed[t] = dict(got)      # go on from what is there
        # Each secondary index holds exactly the rows (index-only reads).
        for name in sorted(oracle.indexes[t]):
            cols = INDEXES[name].strip("()")
            first = cols.split(",")[0].strip()
            cond = "a >= -2147483648" if first == "a" else "b >= ''"
            r = conn.query("SELECT %s, id FROM %s FORCE INDEX (%s) WHERE %s" % (cols, t, name, cond))
            if r.err:
                problems.append("read of %s through %s: error %d %s" % (t, name, r.err, r.errmsg))
                continue
            ncols = len(cols.split(","))
            got_ix = sorted(tuple(v.decode() for v in row) for row in r.rows)
            want_ix = []
            for i, row in got.items():
                vals = {"a": row[0], "b": row[1]}
                want_ix.append(tuple(vals[c.strip()] for c in cols.split(",")) + (str(i),))
            want_ix.sort()
            if got_ix != want_ix:
                extra = sorted(set(got_ix) - set(want_ix))[:5]
                missing = sorted(set(want_ix) - set(got_ix))[:5]
                problems.append("index %s.%s (%d columns) differs from its rows: extra %s, missing %s"
                                % (t, name, ncols, extra, missing))
        r = conn.query("CHECK TABLE %s" % t)
        status = [row[3].decode() for row in (r.rows or []) if row[2] == b"status"]
        if r.err or status != ["OK"]:
            problems.append("CHECK TABLE %s: %s %s" % (t, r.errmsg, r.rows))
    conn.close()
    return problems


def self_check(server, oracle, log):
    """The check can fail: a row changed behind the oracle's back must be found."""
    conn = Conn(server.sock, DB)
    for t in TABLES:
        if oracle.committed[t]:
            i = min(oracle.committed[t])
            r = conn.query("UPDATE %s SET a = a + 7 WHERE id = %d" % (t, i))
            conn.close()
            if r.err:
                return "self-check: UPDATE failed: %s" % r.errmsg
            found = verify(server, oracle, Run(oracle, 0), log)
            if not any(("%s differs from the oracle in 1 rows" % t) in p for p in found):
                return "self-check: a row changed behind the oracle's back was not found (%s)" % found
            log("self-check: a row changed behind the oracle's back is found")
            return None
    conn.close()
    return "self-check: no rows to change"


def value_log_files(server):
    d = os.path.join(server.var, "data", "#tidesdb")
    try:
        return {f for f in os.listdir(d) if f.endswith(".vlog")}
    except OSError:
        return set()


def crash_lines(server, seen):
    """New lines of the error log that tell of a crash (not of our kill)."""
    path = os.path.join(server.var, "log", "error.log")
    try:
        with open(path, errors="replace") as f:
            f.seek(seen[0])
            text = f.read()
            seen[0] = f.tell()
    except OSError:
        return []
    return [ln for ln in text.splitlines() if CRASH_LOG.search(ln)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("STRESS_CRASH_SECONDS", 180)))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("STRESS_CRASH_SEED", 0)) or None)
    ap.add_argument("--port", type=int, default=3413)
    ap.add_argument("--var", default=os.path.join(ROOT, "target", "stress-crash", "var"))
    ap.add_argument("--max-run", type=float, default=4.0, help="longest run between two kills (seconds)")
    args = ap.parse_args()
    args.var = os.path.abspath(args.var)
    seed = args.seed if args.seed is not None else random.randrange(1, 10 ** 6)
    rng = random.Random(seed)
    print("stress-crash: seed %d (STRESS_CRASH_SEED=%d to repeat), %.0f s, %d clients"
          % (seed, seed, args.seconds, args.clients), flush=True)

    if os.path.isdir(args.var):
        import shutil
        Server(args.var, args.port).stop()
        shutil.rmtree(args.var)
    server = Server(args.var, args.port)
    server.env["TIDESDB_EXTRA_CNF"] = SERVER_CNF
    server.start()
    create_schema(server)
    oracle = Oracle()
    all_problems = []
    totals = {}
    log_seen = [0]
    crash_lines(server, log_seen)
    deadline = time.time() + args.seconds
    cycle = 0
    vlogs_seen = set()

    def log(msg):
        print(msg, flush=True)

    try:
        while time.time() < deadline and not all_problems:
            cycle += 1
            run = Run(oracle, cycle)
            threads = [threading.Thread(target=client, args=(run, server, i, args.clients, rng.randrange(1 << 30)))
                       for i in range(args.clients)]
            threads.append(threading.Thread(target=ddl, args=(run, server, rng.randrange(1 << 30))))
            for th in threads:
                th.start()
            if rng.random() < 0.5:
                mode = "after a DDL started"
                run.ddl_started.clear()
                time.sleep(rng.uniform(0.2, 1.0))
                run.ddl_started.clear()
                run.ddl_started.wait(args.max_run)
                time.sleep(rng.uniform(0, 0.3))
            else:
                mode = "at random"
                time.sleep(rng.uniform(0.2, args.max_run))
            run.killed.set()
            server.kill9()
            run.stop.set()
            for th in threads:
                th.join()
            bad = crash_lines(server, log_seen)
            if bad:
                run.problem("the error log tells of a crash:\n    " + "\n    ".join(bad[:10]))
            try:
                server.start()
            except RuntimeError as e:
                run.problem("the server did not start after the kill: %s\n%s" % (e, server.error_log_tail(40)))
                all_problems += run.problems
                break
            problems = verify(server, oracle, run, log)
            for p in problems:
                run.problem(p)
            bad = crash_lines(server, log_seen)
            if bad:
                run.problem("the error log tells of a crash:\n    " + "\n    ".join(bad[:10]))
            if cycle == 1 and not run.problems:
                err = self_check(server, oracle, log)
                if err:
                    run.problem(err)
            now_vlogs = value_log_files(server)
            vlogs_seen |= now_vlogs
            for k, v in run.counts.items():
                totals[k] = totals.get(k, 0) + v
            rows = sum(len(v) for v in oracle.committed.values())
            log("cycle %3d: killed %s; %s; %d rows; %s" % (
                cycle, mode, ", ".join("%s %d" % kv for kv in sorted(run.counts.items())), rows,
                "OK" if not run.problems else "%d PROBLEMS" % len(run.problems)))
            all_problems += run.problems
    finally:
        server.stop()
    print("stress-crash: %d kills; totals: %s" % (cycle, ", ".join("%s %d" % kv for kv in sorted(totals.items()))))
    gone = vlogs_seen - value_log_files(server)
    print("stress-crash: value log files seen %d, removed again by GC / compaction %d"
          % (len(vlogs_seen), len(gone)))
    for p in all_problems[:30]:
        print("PROBLEM " + p)
    if all_problems:
        print("stress-crash: FAILED (seed %d; the server's files are in %s)" % (seed, args.var))
        return 1
    print("stress-crash: every table equals the oracle after every kill, CHECK TABLE clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
