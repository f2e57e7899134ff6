"""Online ALTER TABLE under a write load (step `oa` of scripts/bench.py).

A table of P["oa_rows"] rows (id PK, k INT with a secondary index, c VARCHAR, pad
TEXT) is written by OA_WRITERS client threads (autocommit UPDATEs of random rows,
INSERTs of new rows, DELETEs of rows they inserted) while one connection runs
`ALTER TABLE ... FORCE, ALGORITHM=INPLACE, LOCK=NONE` (a rebuild of every row, online
on both engines). Reported per engine: the writers' ops/s before the ALTER
(P["oa_base_secs"] seconds) and while it runs, the ALTER's duration, and the longest
single write during it (how long a writer was stalled). At the end the row count
through the table and through the secondary index must equal what the writers did.
InnoDB keeps the writes made during its rebuild in a log of at most
innodb_online_alter_log_max_size bytes (default 128 MiB) and fails the ALTER beyond it
(ER_INNODB_ONLINE_LOG_TOO_BIG), which the full profile's writes exceed: the step sets
it to OA_INNODB_LOG for the run and back after. An ALTER still running after
P["oa_alter_max_s"] seconds has not caught up with the writers: they are stopped (the
figures then say so) and the ALTER's whole duration is reported.
"""
import random
import threading
import time

OA_WRITERS = 4
OA_ENGINES = ["InnoDB", "TidesDB"]  # MyRocks has no online rebuild
ALTER = "ALTER TABLE {t} FORCE, ALGORITHM=INPLACE, LOCK=NONE"
OA_INNODB_LOG = 8 << 30


def load(B, c, t, eng, rows):
    B.q(c, "DROP TABLE IF EXISTS %s" % t)
    B.q(c, "CREATE TABLE %s (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(100) NOT NULL, pad TEXT, "
           "KEY kk (k)) ENGINE=%s" % (t, eng))
    step = 100000
    for lo in range(1, rows + 1, step):
        hi = min(rows, lo + step - 1)
        B.q(c, "INSERT INTO %s SELECT seq, seq MOD 10007, CONCAT('c', seq), REPEAT('p', seq MOD 200) "
               "FROM seq_%d_to_%d" % (t, lo, hi))


class Writer(threading.Thread):
    """Autocommit writes until stop is set; keeps each write's end time and latency."""

    def __init__(self, B, sock, t, rows, no, stop):
        super().__init__(daemon=True)
        self.B, self.sock, self.t, self.rows, self.no, self.stop = B, sock, t, rows, no, stop
        self.done = []  # (end time, latency)
        self.inserted, self.deleted, self.errors = 0, 0, []

    def run(self):
        B, t = self.B, self.t
        c = B.Conn(self.sock, "bench")
        rng = random.Random(B.SEED + 41 + self.no)
        mine = []
        next_id = self.rows + 1 + self.no
        try:
            while not self.stop.is_set():
                r = rng.random()
                if r < 0.6:
                    sql = "UPDATE %s SET k = k + 1, c = CONCAT('u', %d) WHERE id = %d" % (
                        t, rng.randrange(1000), rng.randrange(1, self.rows + 1))
                    kind = "u"
                elif r < 0.85 or not mine:
                    sql = "INSERT INTO %s VALUES (%d, %d, 'new', REPEAT('n', %d))" % (
                        t, next_id, rng.randrange(10007), rng.randrange(200))
                    kind = "i"
                else:
                    sql = "DELETE FROM %s WHERE id = %d" % (t, mine[-1])
                    kind = "d"
                t0 = time.perf_counter()
                res = c.query(sql)
                t1 = time.perf_counter()
                if res.err is not None:
                    self.errors.append(res.show())
                    if len(self.errors) > 20:
                        return
                    continue
                self.done.append((t1, t1 - t0))
                if kind == "i":
                    mine.append(next_id)
                    next_id += OA_WRITERS
                    self.inserted += 1
                elif kind == "d":
                    mine.pop()
                    self.deleted += 1
        finally:
            c.close()


def rate(writers, lo, hi):
    n = sum(1 for w in writers for (e, _) in w.done if lo <= e < hi)
    return n / (hi - lo) if hi > lo else None


def run(B, srv, P, out):
    rows = P.get("oa_rows", 50000)
    base = P.get("oa_base_secs", 3.0)
    max_alter = P.get("oa_alter_max_s", 120.0)
    res = out.setdefault("online_alter", {"rows": rows, "writers": OA_WRITERS,
                                          "statement": ALTER.format(t="t"), "engines": {}})
    admin = B.Conn(srv.sock)
    log_var = "innodb_online_alter_log_max_size"
    saved_log = B.q(admin, "SELECT @@GLOBAL.%s" % log_var).rows[0][0].decode()
    B.q(admin, "SET GLOBAL %s = %d" % (log_var, OA_INNODB_LOG))
    res["innodb_online_alter_log_max_size"] = OA_INNODB_LOG
    res["alter_max_s"] = max_alter
    try:
        for eng in OA_ENGINES:
            run_engine(B, srv, rows, base, max_alter, res, eng)
    finally:
        B.q(admin, "SET GLOBAL %s = %s" % (log_var, saved_log))
        admin.close()


def run_engine(B, srv, rows, base, max_alter, res, eng):
    e = res["engines"].setdefault(B.LABEL[eng], {})
    t = "oa_" + eng.lower()
    c = B.Conn(srv.sock, "bench")
    stop = threading.Event()
    writers = []
    try:
        t0 = time.perf_counter()
        load(B, c, t, eng, rows)
        e["load_s"] = time.perf_counter() - t0
        writers = [Writer(B, srv.sock, t, rows, i, stop) for i in range(OA_WRITERS)]
        for w in writers:
            w.start()
        time.sleep(0.5)  # warm-up, not counted
        b0 = time.perf_counter()
        time.sleep(base)
        a0 = time.perf_counter()
        alter_err = []

        def alter():
            try:
                B.q(c, ALTER.format(t=t))
            except Exception as ex:
                alter_err.append(ex)

        th = threading.Thread(target=alter, daemon=True)
        th.start()
        th.join(max_alter)
        e["finished_under_load"] = not th.is_alive()
        w_end = None
        if th.is_alive():
            # The rebuild does not catch up with the writers: stop them, let it end.
            w_end = time.perf_counter()
            stop.set()
            th.join()
        a1 = time.perf_counter()
        if alter_err:
            raise alter_err[0]
        time.sleep(0.5)
        stop.set()
        for w in writers:
            w.join()
        if not e["finished_under_load"]:
            B.problem("online alter %s: the ALTER had not finished after %.0f s under the write load; it "
                      "ended %.1f s after the writers stopped" % (B.LABEL[eng], max_alter, a1 - a0 - max_alter))
        e["ops_s_before"] = rate(writers, b0, a0)
        e["ops_s_during"] = rate(writers, a0, w_end or a1)
        e["alter_s"] = a1 - a0
        during = [lat for w in writers for (end, lat) in w.done if a0 <= end - lat and end - lat < a1]
        e["max_write_ms_during"] = max(during) * 1000 if during else None
        errors = [x for w in writers for x in w.errors]
        e["write_errors"] = len(errors)
        if errors:
            B.problem("online alter %s: %d write errors, first: %s" % (B.LABEL[eng], len(errors), errors[0]))
        want = rows + sum(w.inserted - w.deleted for w in writers)
        n = int(B.q(c, "SELECT COUNT(*) FROM %s" % t).rows[0][0])
        ni = int(B.q(c, "SELECT COUNT(*) FROM %s FORCE INDEX (kk) WHERE k >= 0" % t).rows[0][0])
        if n != want or ni != want:
            B.problem("online alter %s: %d rows (%d through kk) after the run, expected %d" % (
                B.LABEL[eng], n, ni, want))
        for metric, unit in (("ops_s_before", "ops/s"), ("ops_s_during", "ops/s"), ("alter_s", "s"),
                             ("max_write_ms_during", "ms")):
            B.rec("online_alter", eng, "force_%d_rows" % rows, metric, e[metric], unit)
        B.log("online alter %s: %d rows, ALTER %.1f s; writes %.0f ops/s before, %.0f during, "
              "longest write during it %.0f ms" % (B.LABEL[eng], rows, e["alter_s"], e["ops_s_before"] or 0,
                                                   e["ops_s_during"] or 0, e["max_write_ms_during"] or 0))
        B.q(c, "DROP TABLE %s" % t)
    except Exception as ex:  # keep going with the other engine
        B.problem("online alter on %s: %s" % (B.LABEL[eng], ex))
        e["error"] = str(ex)
    finally:
        stop.set()
        for w in writers:
            w.join()
        c.close()


def markdown(B, out, A):
    oa = out.get("online_alter")
    if not oa:
        return
    eng = oa["engines"]
    A("## 11. Online ALTER TABLE under a write load (%d rows, %d writers)" % (oa["rows"], oa["writers"]))
    A("")
    A("`%s` (every row rewritten, readers and writers go on) while %d clients run autocommit UPDATEs, "
      "INSERTs and DELETEs of the table. The row count through the table and its secondary index is "
      "checked against the writes at the end. InnoDB runs with innodb_online_alter_log_max_size = %s MiB "
      "(its default, 128 MiB, is too small for the writes made during its rebuild in the full profile: "
      "the ALTER fails with ER_INNODB_ONLINE_LOG_TOO_BIG)." % (
          oa["statement"], oa["writers"], (oa.get("innodb_online_alter_log_max_size") or 0) >> 20))
    A("")
    rows = [("writes/s before the ALTER", {lab: x.get("ops_s_before") for lab, x in eng.items()}),
            ("writes/s during the ALTER", {lab: x.get("ops_s_during") for lab, x in eng.items()}),
            ("ALTER duration, s (lower is better)", {lab: x.get("alter_s") for lab, x in eng.items()}),
            ("ALTER finished while the writers ran (1 = yes, 0 = they were stopped after %s s)"
             % oa.get("alter_max_s"), {lab: (1 if x.get("finished_under_load") else 0) if "alter_s" in x else None
                                       for lab, x in eng.items()}),
            ("longest write during the ALTER, ms (lower is better)",
             {lab: x.get("max_write_ms_during") for lab, x in eng.items()})]
    A(B.engine_table(rows, "figure"))
    A("")
