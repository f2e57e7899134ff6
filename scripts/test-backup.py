#!/usr/bin/env python3
"""Hot backup consistency under load (make test-backup), on real servers of our own:

primary (target/test-backup/primary, port 3471, binlog + GTID): clients move money
between accounts of a TidesDB table and an InnoDB table in the same transaction (and
log the transfer in a ledger table of each engine), XA transactions do the same, a
DDL client creates, alters and drops tables of both engines. While that runs:
  1. refusals: a second backup (the tool's lock held), a server that is gone, and (if
     a tmpfs can be mounted) a full target disk: each fails and leaves nothing that
     looks complete, and the next backup works;
  2. tidesdb-backup --backup; then --prepare and --copy-back into a new datadir;
  3. mariadb-dump --single-transaction of the same tables.
Then a server on the restored datadir (port 3472) must show: both totals intact;
exactly the transfers whose commit GTID the backup's GTID covers (none after);
the XA transactions prepared at that point still prepared; CHECK TABLE clean. It is
then made a replica of the primary from the backup's GTID, catches up, and must equal
the primary table by table. The dump, loaded into that server, must hold the totals,
in each engine every balance must match that engine's ledger, and both engines'
ledgers must hold the same transfers (one commit point across engines).

Options: --rows N (rows of filler data, for larger backups), --seconds S (load after
the backup), --keep (leave servers running). Prints backup time and throughput."""
import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import ROOT, Conn, Server  # noqa: E402

BASE = os.path.join(ROOT, "target", "test-backup")
TOOL = os.path.join(ROOT, "target", "plugin", "tidesdb-backup")
ACCOUNTS = 100
START = 1000
PRIMARY_PORT, RESTORED_PORT = 3471, 3472


def die(msg):
    print("test-backup: FAIL: " + msg, flush=True)
    sys.exit(1)


def say(msg):
    print("test-backup: " + msg, flush=True)


def q(conn, sql, ok_errors=()):
    r = conn.query(sql)
    if r.err and r.err not in ok_errors:
        raise RuntimeError("%s -> %d %s" % (sql, r.err, r.errmsg))
    return r


def val(conn, sql):
    r = q(conn, sql)
    v = r.rows[0][0]
    return v.decode() if isinstance(v, bytes) else v


def server(name, port, extra):
    var = os.path.join(BASE, name)
    s = Server(var, port)
    s.env["TIDESDB_EXTRA_CNF"] = extra
    return s


def gtid_seq(g):
    """Sequence number of a single-domain GTID position 0-1-N (0 if empty)."""
    g = g.strip()
    if not g:
        return 0
    parts = [p for p in g.split(",") if p.startswith("0-")]
    return int(parts[0].split("-")[2]) if parts else 0


class Load:
    """Transfers (plain and XA) and DDL on the primary until stopped."""

    def __init__(self, sock):
        self.sock = sock
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.committed = {}   # transfer id -> GTID seq of its commit
        self.prepared = {}    # XA transfer id -> GTID seq of its XA PREPARE
        self.xa_ids = set()   # every XA transfer id (committed or not)
        self.next_id = 0
        self.count = 0
        self.errors = []
        self.threads = []

    def new_id(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def transfer_sql(self, rng, tid):
        a, b = rng.sample(range(ACCOUNTS), 2)
        x = rng.randint(1, 50)
        return [
            "UPDATE t_acct SET bal = bal - %d WHERE id = %d" % (x, a),
            "UPDATE i_acct SET bal = bal - %d WHERE id = %d" % (x, a),
            "UPDATE t_acct SET bal = bal + %d WHERE id = %d" % (x, b),
            "UPDATE i_acct SET bal = bal + %d WHERE id = %d" % (x, b),
            "INSERT INTO t_ledger VALUES (%d, %d, %d, %d)" % (tid, a, b, x),
            "INSERT INTO i_ledger VALUES (%d, %d, %d, %d)" % (tid, a, b, x),
        ]

    def transfers(self, seed):
        rng = random.Random(seed)
        c = Conn(self.sock, "bank")
        while not self.stop.is_set():
            tid = self.new_id()
            try:
                q(c, "BEGIN")
                for s in self.transfer_sql(rng, tid):
                    q(c, s)
                q(c, "COMMIT")
            except RuntimeError as e:
                if "Deadlock" in str(e) or "try restarting" in str(e) or "Lock wait" in str(e):
                    c.query("ROLLBACK")
                    continue
                self.errors.append(str(e))
                return
            seq = gtid_seq(val(c, "SELECT @@last_gtid"))
            with self.lock:
                self.committed[tid] = seq
                self.count += 1

    def xa(self, seed):
        rng = random.Random(seed)
        c = Conn(self.sock, "bank")
        while not self.stop.is_set():
            tid = self.new_id()
            with self.lock:
                self.xa_ids.add(tid)
            xid = "'xa%d'" % tid
            try:
                q(c, "XA START " + xid)
                for s in self.transfer_sql(rng, tid):
                    q(c, s)
                q(c, "XA END " + xid)
                q(c, "XA PREPARE " + xid)
            except RuntimeError as e:
                c.query("XA END " + xid)
                c.query("XA ROLLBACK " + xid)
                if "Deadlock" in str(e) or "try restarting" in str(e) or "Lock wait" in str(e):
                    continue
                self.errors.append(str(e))
                return
            pseq = gtid_seq(val(c, "SELECT @@last_gtid"))
            with self.lock:
                self.prepared[tid] = pseq
            time.sleep(0.01)
            q(c, "XA COMMIT " + xid)
            seq = gtid_seq(val(c, "SELECT @@last_gtid"))
            with self.lock:
                self.committed[tid] = seq
                self.count += 1

    def ddl(self):
        c = Conn(self.sock, "bank")
        n = 0
        while not self.stop.is_set():
            n += 1
            eng = "TidesDB" if n % 2 else "InnoDB"
            try:
                q(c, "CREATE TABLE ddl_%d (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=%s" % (n, eng))
                q(c, "INSERT INTO ddl_%d VALUES (1,'a'),(2,'b'),(3,'c')" % n)
                q(c, "ALTER TABLE ddl_%d ADD COLUMN w INT DEFAULT 7, ADD INDEX (v)" % n)
                if n > 3:
                    q(c, "DROP TABLE ddl_%d" % (n - 3))
            except RuntimeError as e:
                self.errors.append(str(e))
                return
            time.sleep(0.2)

    def start(self):
        for i in range(3):
            self.threads.append(threading.Thread(target=self.transfers, args=(i,)))
        self.threads.append(threading.Thread(target=self.xa, args=(99,)))
        self.threads.append(threading.Thread(target=self.ddl))
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        if self.errors:
            die("load errors: %s" % self.errors[:3])


def run_tool(*args, expect_ok=True):
    p = subprocess.run([TOOL] + list(args), capture_output=True, text=True)
    log = os.path.join(BASE, "tool.log")
    with open(log, "a") as f:
        f.write("$ tidesdb-backup %s\n%s%s\n" % (" ".join(args), p.stdout, p.stderr))
    if expect_ok and p.returncode != 0:
        die("tidesdb-backup %s failed:\n%s" % (args[0], p.stderr[-3000:]))
    if not expect_ok and p.returncode == 0:
        die("tidesdb-backup %s should have failed" % " ".join(args))
    return p


def looks_complete(d):
    return any(os.path.exists(os.path.join(d, f))
               for f in ("tidesdb_backup_info", "xtrabackup_checkpoints", "#tidesdb/CURRENT"))


def ledger_agrees(conn, acct, ledger):
    """Every balance equals START plus the transfers its ledger has (one snapshot)."""
    bal = {int(r[0]): int(r[1]) for r in q(conn, "SELECT id, bal FROM " + acct).rows}
    want = {i: START for i in range(ACCOUNTS)}
    for a, b, x in q(conn, "SELECT a, b, x FROM " + ledger).rows:
        want[int(a)] -= int(x)
        want[int(b)] += int(x)
    return bal == want


def table_rows(conn, table):
    return q(conn, "SELECT * FROM `%s` ORDER BY 1" % table).rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--keep", action="store_true")
    opts = ap.parse_args()
    t0 = time.time()
    if not os.path.exists(TOOL):
        die("build first: make plugin (%s)" % TOOL)
    for s in (server("primary", PRIMARY_PORT, ""), server("restored", RESTORED_PORT, "")):
        s.stop()
    shutil.rmtree(BASE, ignore_errors=True)
    os.makedirs(BASE)
    primary = server("primary", PRIMARY_PORT,
                     "log-bin=primary-bin\nserver-id=1\nbinlog-format=ROW")
    primary.start()
    cnf = os.path.join(BASE, "primary", "my.cnf")
    c = Conn(primary.sock)
    for s in ("CREATE DATABASE bank", "USE bank",
              "CREATE TABLE t_acct (id INT PRIMARY KEY, bal BIGINT NOT NULL) ENGINE=TidesDB",
              "CREATE TABLE i_acct (id INT PRIMARY KEY, bal BIGINT NOT NULL) ENGINE=InnoDB",
              "CREATE TABLE t_ledger (id BIGINT PRIMARY KEY, a INT, b INT, x INT) ENGINE=TidesDB",
              "CREATE TABLE i_ledger (id BIGINT PRIMARY KEY, a INT, b INT, x INT) ENGINE=InnoDB",
              "CREATE TABLE t_filler (id INT PRIMARY KEY, pad VARCHAR(1000)) ENGINE=TidesDB",
              "CREATE USER repl@'127.0.0.1'", "GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'"):
        q(c, s)
    vals = ",".join("(%d,%d)" % (i, START) for i in range(ACCOUNTS))
    q(c, "INSERT INTO t_acct VALUES " + vals)
    q(c, "INSERT INTO i_acct VALUES " + vals)
    for lo in range(0, opts.rows, 2000):
        q(c, "INSERT INTO t_filler VALUES " + ",".join(
            "(%d, REPEAT(MD5(%d), 30))" % (i, i) for i in range(lo, min(lo + 2000, opts.rows))))

    load = Load(primary.sock)
    load.start()
    time.sleep(1.5)

    # 1. Refusals: each fails loudly and leaves nothing that looks complete.
    holder = Conn(primary.sock)
    q(holder, "SELECT GET_LOCK('tidesdb-backup', 0)")
    d = os.path.join(BASE, "refused-second")
    p = run_tool("--backup", "--target-dir=" + d, "--defaults-file=" + cnf, expect_ok=False)
    if "another tidesdb-backup" not in p.stderr or os.path.exists(d):
        die("second backup: %s" % p.stderr[-500:])
    q(holder, "SELECT RELEASE_LOCK('tidesdb-backup')")
    d = os.path.join(BASE, "refused-gone")
    p = run_tool("--backup", "--target-dir=" + d, "--socket=" + os.path.join(BASE, "no.sock"),
                 "--user=root", expect_ok=False)
    if "connect" not in p.stderr or os.path.exists(d):
        die("server gone: %s" % p.stderr[-500:])
    small = os.path.join(BASE, "small-disk")
    os.makedirs(small)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small],
                             capture_output=True).returncode == 0
    if mounted:
        d = os.path.join(small, "bk")
        p = run_tool("--backup", "--target-dir=" + d, "--defaults-file=" + cnf, expect_ok=False)
        leftover = looks_complete(d)
        subprocess.run(["umount", small])
        if leftover:
            die("full disk: a complete-looking backup was left")
        say("full target disk: refused, nothing complete left (%s)"
            % p.stderr.strip().splitlines()[-1][:160])
    else:
        say("SKIP full-disk case: cannot mount a tmpfs here")
    datadir = os.path.join(BASE, "primary", "data")
    if os.path.exists(os.path.join(datadir, "#tidesdb", "tidesdb-backup-checkpoint")):
        die("a failed backup left its checkpoint in the datadir")

    # 2. The backup, under load; throughput before and during.
    n0, t_before = load.count, time.time()
    time.sleep(2.0)
    rate_before = (load.count - n0) / (time.time() - t_before)
    bk = os.path.join(BASE, "backup")
    n1, tb = load.count, time.time()
    run_tool("--backup", "--target-dir=" + bk, "--defaults-file=" + cnf)
    backup_secs = time.time() - tb
    rate_during = (load.count - n1) / backup_secs
    info = dict(l.split(" ", 1) for l in open(os.path.join(bk, "tidesdb_backup_info")).read()
                .splitlines()[1:] if " " in l)
    backup_gtid = info.get("gtid", "")
    b_seq = gtid_seq(backup_gtid)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(bk) for f in fs)
    say("backup: %.1f s, %.1f MiB (TidesDB %.1f MiB), GTID %s; transfers/s before %.0f, during %.0f"
        % (backup_secs, size / 1048576, int(info["tidesdb_bytes"]) / 1048576, backup_gtid,
           rate_before, rate_during))

    # 3. mariadb-dump --single-transaction under the same load.
    dump = os.path.join(BASE, "dump.sql")
    with open(dump, "w") as f:
        r = subprocess.run(["mariadb-dump", "--defaults-file=" + cnf, "--single-transaction",
                            "bank", "t_acct", "i_acct", "t_ledger", "i_ledger"], stdout=f)
    if r.returncode != 0:
        die("mariadb-dump failed")
    time.sleep(opts.seconds)
    load.finish()
    if not load.committed:
        die("no transfer committed")

    # Restore into a new datadir and start a server on it.
    tr = time.time()
    run_tool("--prepare", "--target-dir=" + bk)
    restored = server("restored", RESTORED_PORT, "log-bin=restored-bin\nserver-id=2\n"
                      "binlog-format=ROW\nskip-slave-start")
    rdata = os.path.join(BASE, "restored", "data")
    run_tool("--copy-back", "--target-dir=" + bk, "--datadir=" + rdata)
    restored.start()
    restore_secs = time.time() - tr
    say("restore (prepare + copy-back + server start): %.1f s" % restore_secs)
    r = Conn(restored.sock, "bank")
    for t in ("t_acct", "i_acct"):
        total = int(val(r, "SELECT SUM(bal) FROM " + t))
        if total != ACCOUNTS * START:
            die("restored %s total %d != %d" % (t, total, ACCOUNTS * START))
    for acct, ledger in (("t_acct", "t_ledger"), ("i_acct", "i_ledger")):
        if not ledger_agrees(r, acct, ledger):
            die("restored %s does not match its ledger %s" % (acct, ledger))
    want = sorted(t for t, s in load.committed.items() if s <= b_seq)
    after = sorted(t for t, s in load.committed.items() if s > b_seq)
    for t in ("t_ledger", "i_ledger"):
        got = sorted(int(x[0]) for x in q(r, "SELECT id FROM " + t).rows)
        if got != want:
            missing = sorted(set(want) - set(got))[:5]
            extra = sorted(set(got) - set(want))[:5]
            die("restored %s: %d transfers, want %d covered by GTID %s (missing %s, extra %s)"
                % (t, len(got), len(want), backup_gtid, missing, extra))
    prepared_at_b = sorted("xa%d" % t for t, ps in load.prepared.items()
                           if ps <= b_seq and load.committed.get(t, 1 << 60) > b_seq)
    xa = sorted(x[3].decode() for x in (q(r, "XA RECOVER").rows or []))
    if xa != prepared_at_b:
        die("restored XA RECOVER %s, want %s" % (xa, prepared_at_b))
    tables = [x[0].decode() for x in q(r, "SHOW TABLES").rows]
    for t in tables:
        for row in q(r, "CHECK TABLE `%s`" % t).rows:
            if row[2] in (b"error", b"warning") or (row[2] == b"status" and row[3] != b"OK"):
                die("CHECK TABLE %s: %s" % (t, row))
    say("restored: totals hold, %d transfers covered by GTID %s present, %d after it absent, "
        "%d XA prepared kept, CHECK TABLE clean on %d tables"
        % (len(want), backup_gtid, len(after), len(xa), len(tables)))

    # The restored server as a replica from the backup's GTID.
    for s in ("SET GLOBAL gtid_slave_pos = '%s'" % backup_gtid,
              "CHANGE MASTER TO master_host='127.0.0.1', master_port=%d, master_user='repl', "
              "master_use_gtid=slave_pos" % PRIMARY_PORT,
              "START SLAVE"):
        q(r, s)
    target = val(c, "SELECT @@gtid_binlog_pos")
    deadline = time.time() + 120
    while val(r, "SELECT @@gtid_slave_pos") != target:
        if time.time() > deadline:
            die("replica did not catch up: %s vs %s; %s" % (
                val(r, "SELECT @@gtid_slave_pos"), target,
                q(r, "SHOW SLAVE STATUS").rows))
        time.sleep(0.2)
    primary_tables = sorted(x[0].decode() for x in q(c, "SHOW TABLES FROM bank").rows)
    replica_tables = sorted(x[0].decode() for x in q(r, "SHOW TABLES").rows)
    if primary_tables != replica_tables:
        die("replica tables %s != primary %s" % (replica_tables, primary_tables))
    q(c, "USE bank")
    for t in primary_tables:
        if table_rows(c, t) != table_rows(r, t):
            die("replica table %s differs from the primary" % t)
    say("replica from GTID %s caught up to %s; %d tables equal to the primary"
        % (backup_gtid, target, len(primary_tables)))
    q(r, "STOP SLAVE")

    # The dump, loaded into a database of its own.
    q(r, "CREATE DATABASE dumped")
    with open(dump) as f:
        p = subprocess.run(["mariadb", "--defaults-file=" + os.path.join(BASE, "restored", "my.cnf"),
                            "dumped"], stdin=f, capture_output=True, text=True)
    if p.returncode != 0:
        die("loading the dump: " + p.stderr[-500:])
    q(r, "USE dumped")
    for t in ("t_acct", "i_acct"):
        total = int(val(r, "SELECT SUM(bal) FROM " + t))
        if total != ACCOUNTS * START:
            die("dump %s total %d != %d" % (t, total, ACCOUNTS * START))
    for acct, ledger in (("t_acct", "t_ledger"), ("i_acct", "i_ledger")):
        if not ledger_agrees(r, acct, ledger):
            die("dump: %s does not match its ledger %s (not one snapshot)" % (acct, ledger))
    tl = set(x[0] for x in q(r, "SELECT id FROM t_ledger").rows)
    il = set(x[0] for x in q(r, "SELECT id FROM i_ledger").rows)
    # One commit point across engines: TidesDB makes a commit visible in
    # commit_ordered(), which the server orders with InnoDB's and the snapshot.
    # XA COMMIT of a prepared transaction is outside that order in the server
    # itself (trans_xa_commit -> ha_commit_one_phase commits the engines one after
    # the other, without LOCK_commit_ordered, for InnoDB as for any engine), so the
    # one XA transfer being committed when the dump starts may be in one engine only.
    split = tl ^ il
    plain_split = sorted(int(t) for t in split if int(t) not in load.xa_ids)
    if plain_split or len(split) > 1:
        die("dump: the TidesDB and InnoDB snapshots differ: %d transfers in one engine's "
            "only (e.g. %s; not XA: %s)" % (len(split), sorted(split)[:5], plain_split[:5]))
    say("mariadb-dump --single-transaction: totals hold, each engine's balances match "
        "its ledger, both engines at one commit point (%d transfers)" % len(tl))

    if not opts.keep:
        restored.stop()
        primary.stop()
    say("OK in %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
