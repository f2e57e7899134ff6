"""Online ALTER TABLE under a write load (step `oa` of scripts/bench.py).

A table of P["oa_rows"] rows (id PK, k INT with a secondary index, c VARCHAR, pad
TEXT) is written by OA_WRITERS client threads (autocommit UPDATEs of random rows,
INSERTs of new rows, DELETEs of rows they inserted) while one connection runs
`ALTER TABLE ... FORCE, ALGORITHM=INPLACE, LOCK=NONE` (a rebuild of every row, online
on both engines). Reported per engine: the writers' ops/s before the ALTER
(P["oa_base_secs"] seconds) and while it runs, the ALTER's duration, and the longest
single write during it (how long a writer was stalled). At the end the row count
through the table and through the secondary index must equal what the writers did.
"""
import random
import threading
import time

OA_WRITERS = 4
OA_ENGINES = ["InnoDB", "TidesDB"]  # MyRocks has no online rebuild
ALTER = "ALTER TABLE {t} FORCE, ALGORITHM=INPLACE, LOCK=NONE"


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
    res = out.setdefault("online_alter", {"rows": rows, "writers": OA_WRITERS,
                                          "statement": ALTER.format(t="t"), "engines": {}})
    for eng in OA_ENGINES:
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
            B.q(c, ALTER.format(t=t))
            a1 = time.perf_counter()
            time.sleep(0.5)
            stop.set()
            for w in writers:
                w.join()
            e["ops_s_before"] = rate(writers, b0, a0)
            e["ops_s_during"] = rate(writers, a0, a1)
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
    A("## 8. Online ALTER TABLE under a write load (%d rows, %d writers)" % (oa["rows"], oa["writers"]))
    A("")
    A("`%s` (every row rewritten, readers and writers go on) while %d clients run autocommit UPDATEs, "
      "INSERTs and DELETEs of the table. The row count through the table and its secondary index is "
      "checked against the writes at the end." % (oa["statement"], oa["writers"]))
    A("")
    rows = [("writes/s before the ALTER", {lab: x.get("ops_s_before") for lab, x in eng.items()}),
            ("writes/s during the ALTER", {lab: x.get("ops_s_during") for lab, x in eng.items()}),
            ("ALTER duration, s (lower is better)", {lab: x.get("alter_s") for lab, x in eng.items()}),
            ("longest write during the ALTER, ms (lower is better)",
             {lab: x.get("max_write_ms_during") for lab, x in eng.items()})]
    A(B.engine_table(rows, "figure"))
    A("")
