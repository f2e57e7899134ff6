#!/usr/bin/env python3
"""tidesdb_force_recovery, for real: damage each kind of engine file, start the server
with the documented level, save the tables with mariadb-dump, restore the dump into
another server and compare every intact table with what was committed.

  python3 scripts/test-force-recovery.py [--port 3414] [--only catalog,wal,...]

Builds one engine directory (a server of its own, scripts/server.sh): tables in two
databases, small rows (table files), large values (value log), a secondary index,
rows only in the write-ahead log (the server is killed with SIGKILL after writing
them) and an XA transaction left prepared whose write set was spilled (its
prepared-transaction `.prep` files). Then, for each kind of file (catalog, manifest,
WAL, table file, value log, prepared-transaction file), on a fresh copy of that
directory: damages the file(s) (bytes overwritten in the middle), starts the server
with tidesdb_force_recovery at the level README.md gives for it, and checks that
  - the server starts, says in its error log that the engine is read-only, and names
    the damaged file where it skipped it;
  - `mariadb-dump --force` of both databases saves every table not expected to be
    damaged, row for row (restored into a second server and compared with the
    committed contents); a damaged table fails with an error naming the file;
  - writes (INSERT, CREATE TABLE) fail with an error naming tidesdb_force_recovery;
  - nothing in the engine directory changed (read-only at start).
Exit status 1 on any failed check.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mariadb_client import Conn, ConnLost, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = ["fr1.t_rows", "fr1.t_big", "fr2.t_keep", "fr2.t_wal", "fr2.t_xa"]
BASE_CNF = "tidesdb_write_buffer_size = 4M"

# kind -> (tidesdb_force_recovery level, tables whose rows may be lost, what to damage)
SCENARIOS = {
    "table_file": (1, {"fr1.t_rows"}, "the rows table file of fr1.t_rows"),
    "value_log": (1, {"fr1.t_big"}, "every value log file (the large values of fr1.t_big)"),
    "catalog": (1, set(), "every table file of the engine's catalog"),
    "prepared_txn": (1, set(), "every prepared-transaction file (the XA transaction's write set)"),
    "wal": (2, {"fr2.t_wal"}, "the write-ahead log (fr2.t_wal's rows are only there)"),
    "manifest": (3, set(TABLES), "the manifest"),
}


def digest(conn, table):
    """(rows, md5 of every row in id order) of a table."""
    conn.query("SET SESSION group_concat_max_len = 1 << 30")
    r = conn.query("SELECT COUNT(*), MD5(GROUP_CONCAT(CONCAT_WS(',', id, MD5(v)) ORDER BY id "
                   "SEPARATOR ';')) FROM %s" % table)
    if r.err:
        return None, "error %d %s" % (r.err, r.errmsg)
    return (int(r.rows[0][0]), (r.rows[0][1] or b"").decode()), None


def must(conn, sql):
    r = conn.query(sql)
    if r.err:
        raise RuntimeError("%s: error %d %s" % (sql, r.err, r.errmsg))
    return r


def engine_files(status_text):
    """{"db/t part" or the engine's own column family: [file names]} from SHOW
    ENGINE TIDESDB STATUS."""
    out, cur = {}, None
    for line in status_text.splitlines():
        m = re.match(r"(\S.*) \(column family ([^)]+)\)", line)
        if m:
            cur = m.group(2) if m.group(1) == "engine" else m.group(1)
            out[cur] = []
        elif cur and line.startswith("    L") and ": " in line:
            out[cur] += line.rsplit(": ", 1)[1].split()
        elif not line.startswith(" "):
            cur = None
    return out


def build_template(server, log):
    """The engine directory every scenario starts from; returns the committed digests
    and the file names of the parts the scenarios damage."""
    server.start()
    c = Conn(server.sock)
    for sql in [
        "DROP DATABASE IF EXISTS fr1", "DROP DATABASE IF EXISTS fr2",
        "CREATE DATABASE fr1", "CREATE DATABASE fr2", "USE fr1",
        "CREATE TABLE fr1.t_rows (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=TidesDB",
        "INSERT INTO fr1.t_rows SELECT seq, CONCAT('row ', seq) FROM seq_1_to_3000",
        "CREATE TABLE fr1.t_big (id INT PRIMARY KEY, v LONGBLOB) ENGINE=TidesDB VALUE_THRESHOLD=1024",
        "INSERT INTO fr1.t_big SELECT seq, REPEAT(CONCAT('big ', seq, ' '), 2000) FROM seq_1_to_60",
        "CREATE TABLE fr2.t_keep (id INT PRIMARY KEY, v VARCHAR(100), KEY kv (v)) ENGINE=TidesDB",
        "INSERT INTO fr2.t_keep SELECT seq, CONCAT('keep ', seq) FROM seq_1_to_2000",
        "CREATE TABLE fr2.t_wal (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=TidesDB",
        "CREATE TABLE fr2.t_xa (id INT PRIMARY KEY, v LONGBLOB) ENGINE=TidesDB",
        "INSERT INTO fr2.t_xa SELECT seq, CONCAT('xa ', seq) FROM seq_1_to_5",
    ]:
        must(c, sql)
    c.close()
    # A clean restart: every memtable is in table files, the WAL starts afresh.
    server.stop()
    server.start()
    c = Conn(server.sock, "fr2")
    must(c, "INSERT INTO fr2.t_wal SELECT seq, CONCAT('wal ', seq) FROM seq_1_to_2000")
    digests = {}
    for t in TABLES:
        d, err = digest(c, t)
        if err:
            raise RuntimeError("digest of %s: %s" % (t, err))
        digests[t] = d
    files = engine_files(must(c, "SHOW ENGINE TIDESDB STATUS").rows[0][2].decode())
    # An XA transaction whose write set spills (over 32 MiB), left prepared.
    xa = Conn(server.sock)
    must(xa, "XA START 'fr'")
    for i in range(40):
        must(xa, "INSERT INTO fr2.t_xa VALUES (%d, REPEAT('p', 1 << 20))" % (100 + i))
    must(xa, "XA END 'fr'")
    must(xa, "XA PREPARE 'fr'")
    server.kill9()
    xa.close()
    c.close()
    names = os.listdir(engine_dir(server))
    log("template: %d engine files (%d .prep, %d .vlog, %d .wal)" % (
        len(names), sum(n.endswith(".prep") for n in names), sum(n.endswith(".vlog") for n in names),
        sum(n.endswith(".wal") for n in names)))
    return digests, files


def engine_dir(server):
    return os.path.join(server.var, "data", "#tidesdb")


def damage(path):
    """Overwrites 64 bytes in the middle of a file (of its written part: a WAL
    segment ends in zeros written ahead)."""
    with open(path, "rb") as f:
        size = len(f.read().rstrip(b"\0")) or os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(max(0, size // 2 - 32))
        f.write(b"\xab" * min(64, size))


def targets(kind, edir, files):
    names = sorted(os.listdir(edir))
    if kind == "table_file":
        return files["fr1/t_rows rows"]
    if kind == "value_log":
        return [n for n in names if n.endswith(".vlog")]
    if kind == "catalog":
        return files["__catalog"]
    if kind == "prepared_txn":
        return [n for n in names if n.endswith(".prep")]
    if kind == "wal":
        return [n for n in names if n.endswith(".wal")]
    if kind == "manifest":
        with open(os.path.join(edir, "CURRENT")) as f:
            return [f.read().strip()]
    raise ValueError(kind)


def snapshot(edir):
    out = {}
    for n in sorted(os.listdir(edir)):
        if n == "LOCK":
            continue
        with open(os.path.join(edir, n), "rb") as f:
            out[n] = hashlib.md5(f.read()).hexdigest()
    return out


def run_scenario(kind, server, restore, template, digests, files, log):
    level, may_lose, what = SCENARIOS[kind]
    problems = []
    data = os.path.join(server.var, "data")
    shutil.rmtree(data)
    shutil.copytree(template, data, symlinks=True)
    edir = engine_dir(server)
    hit = targets(kind, edir, files)
    if not hit:
        return ["%s: nothing to damage (%s)" % (kind, what)]
    for n in hit:
        damage(os.path.join(edir, n))
    before = snapshot(edir)
    logpath = os.path.join(server.var, "log", "error.log")
    log_start = os.path.getsize(logpath) if os.path.exists(logpath) else 0
    server.env["TIDESDB_EXTRA_CNF"] = BASE_CNF + "\ntidesdb_force_recovery = %d" % level
    try:
        server.start()
    except RuntimeError as e:
        return ["%s: the server did not start with tidesdb_force_recovery=%d: %s" % (kind, level, e)]
    with open(logpath, errors="replace") as f:
        f.seek(log_start)
        start_log = f.read()
    if "tidesdb_force_recovery=%d: the engine is read-only" % level not in start_log:
        problems.append("%s: the error log does not say the engine is read-only" % kind)
    if "TidesDB: cannot open" in start_log:
        problems.append("%s: the engine did not open:\n%s" % (
            kind, "\n".join(ln for ln in start_log.splitlines() if "TidesDB" in ln)))

    # Writes are refused, naming the setting.
    c = Conn(server.sock)
    for sql in ("INSERT INTO fr2.t_keep VALUES (999999, 'new')",
                "CREATE TABLE fr2.t_new (id INT PRIMARY KEY) ENGINE=TidesDB"):
        r = c.query(sql)
        # refused for the setting, or (a damaged catalog) for the damage it names
        if not r.err or not ("tidesdb_force_recovery" in r.errmsg or any(n in r.errmsg for n in hit)):
            problems.append("%s: %s was not refused naming tidesdb_force_recovery: %s %s"
                            % (kind, sql, r.err, r.errmsg))
    c.close()

    # mariadb-dump saves what can be read.
    cnf = os.path.join(server.var, "my.cnf")
    # Table by table (README.md): a table that cannot be read stops the dump of
    # the rest of its database, its error names the file. Each restored apart (a
    # dump cut short ends inside a statement).
    dump_err = ""
    restore_cnf = os.path.join(restore.var, "my.cnf")
    rc = Conn(restore.sock)
    for db in ("fr1", "fr2"):
        must(rc, "DROP DATABASE IF EXISTS %s" % db)
        must(rc, "CREATE DATABASE %s" % db)
    rc.close()
    for t in TABLES:
        db, name = t.split(".")
        dump_path = os.path.join(server.var, "dump-%s-%s.sql" % (kind, t))
        with open(dump_path, "w") as out:
            p = subprocess.run(["mariadb-dump", "--defaults-file=" + cnf, "--force", db, name],
                               stdout=out, stderr=subprocess.PIPE, text=True)
        dump_err += p.stderr
        with open(dump_path, "rb") as f:
            subprocess.run(["mariadb", "--defaults-file=" + restore_cnf, "--force", db], stdin=f,
                           capture_output=True)
    rc = Conn(restore.sock)
    saved, damaged = [], []
    for t in TABLES:
        got, err = digest(rc, t)
        if got == digests[t]:
            saved.append(t)
            continue
        damaged.append(t)
        short = t.split(".")[1]
        named = [ln for ln in dump_err.splitlines() if short in ln and "#tidesdb" in ln]
        if t not in may_lose:
            problems.append("%s: %s was not saved intact (dump %s, restored %s; dump errors: %s)"
                            % (kind, t, got, err, dump_err.strip()[:500]))
        elif not named and got is not None and got[0] > 0 and got[0] == digests[t][0]:
            problems.append("%s: %s was saved with other contents and no error" % (kind, t))
    rc.close()
    if kind in ("table_file", "value_log") and not any(n in dump_err + start_log for n in hit):
        problems.append("%s: neither the dump's errors nor the error log name a damaged file %s:\n%s"
                        % (kind, hit, dump_err[:800]))
    server.stop()
    with open(logpath, errors="replace") as f:
        f.seek(log_start)
        whole_log = f.read()
    if kind in ("catalog", "prepared_txn", "wal", "manifest") and not any(n in whole_log for n in hit):
        problems.append("%s: the error log names none of the damaged files %s:\n%s" % (
            kind, hit, "\n".join(ln for ln in whole_log.splitlines() if "TidesDB" in ln)[:1500]))
    if "got signal" in whole_log or "panicked" in whole_log:
        problems.append("%s: the server crashed:\n%s" % (kind, whole_log[-3000:]))
    after = snapshot(edir)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {n for n in before if n in after and before[n] != after[n]})
        problems.append("%s: the engine directory changed at a read-only start: %s" % (kind, changed))
    log("%-13s level %d, damaged %s: saved %s; lost %s; %s" % (
        kind, level, " ".join(hit), " ".join(saved), " ".join(damaged) or "nothing",
        "OK" if not problems else "%d PROBLEMS" % len(problems)))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=3414)
    ap.add_argument("--var", default=os.path.join(ROOT, "target", "force-recovery"))
    ap.add_argument("--only", default=",".join(SCENARIOS))
    args = ap.parse_args()
    base = os.path.abspath(args.var)
    for sub in ("var", "restore"):
        if os.path.isdir(os.path.join(base, sub)):
            Server(os.path.join(base, sub), args.port).stop()
    shutil.rmtree(base, ignore_errors=True)
    server = Server(os.path.join(base, "var"), args.port)
    server.env["TIDESDB_EXTRA_CNF"] = BASE_CNF
    restore = Server(os.path.join(base, "restore"), args.port + 1)

    def log(msg):
        print(msg, flush=True)

    problems = []
    try:
        digests, files = build_template(server, log)
        template = os.path.join(base, "template")
        shutil.copytree(os.path.join(server.var, "data"), template, symlinks=True)
        restore.start()
        for kind in args.only.split(","):
            try:
                problems += run_scenario(kind, server, restore, template, digests, files, log)
            except (RuntimeError, ConnLost, OSError) as e:
                problems.append("%s: %s\n%s" % (kind, e, server.error_log_tail(20)))
            server.stop()
    finally:
        server.stop()
        restore.stop()
    for p in problems:
        print("PROBLEM " + p)
    print("test-force-recovery: %s" % ("FAILED" if problems else "every intact table saved from each damaged directory"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
