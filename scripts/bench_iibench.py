"""Insert benchmark with three secondary indexes (step `iib` of scripts/bench.py).

iibench-style (Tokutek's iibench / Mark Callaghan's insert benchmark): a table with
an AUTO_INCREMENT primary key and three secondary indexes on random values, filled by
one client with multi-row INSERTs (IIB_BATCH rows per statement, autocommit) until it
holds P["iib_rows"] rows. The rows are random, so every secondary index is updated at
random positions: once the indexes outgrow the cache, a B-tree pays a read per index
per row while an LSM only appends. Reported: overall rows/s and rows/s per interval of
P["iib_rows"] / IIB_INTERVALS rows (the insert rate over time), plus the final size.
"""
import random
import time

IIB_BATCH = 1000
IIB_INTERVALS = 10

DDL = """CREATE TABLE {t} (
  transactionid BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  dateandtime DATETIME NOT NULL,
  cashregisterid INT NOT NULL,
  customerid INT NOT NULL,
  productid INT NOT NULL,
  price FLOAT NOT NULL,
  data VARCHAR(64) NOT NULL,
  KEY marketsegment (price, customerid),
  KEY registersegment (cashregisterid, price, customerid),
  KEY pdc (price, dateandtime, customerid)
) ENGINE={eng}"""


def batch_sql(t, rng, n):
    vals = []
    for _ in range(n):
        vals.append("(NULL, FROM_UNIXTIME(%d), %d, %d, %d, %.2f, '%s')" % (
            1700000000 + rng.randrange(10 ** 7), rng.randrange(1000), rng.randrange(100000),
            rng.randrange(10000), rng.random() * 500, "%032x" % rng.getrandbits(128)))
    return "INSERT INTO %s VALUES %s" % (t, ",".join(vals))


def run(B, srv, P, out):
    total = P.get("iib_rows", 200000)
    per_interval = max(IIB_BATCH, total // IIB_INTERVALS)
    res = out.setdefault("iibench", {"rows": total, "batch": IIB_BATCH, "engines": {}})
    for eng in B.ENGINES:
        e = res["engines"].setdefault(B.LABEL[eng], {})
        t = "iib_" + eng.lower()
        c = B.Conn(srv.sock, "bench")
        try:
            B.q(c, "DROP TABLE IF EXISTS %s" % t)
            B.q(c, DDL.format(t=t, eng=eng))
            rng = random.Random(B.SEED + 23)
            done, spent, mark, intervals = 0, 0.0, 0.0, []
            while done < total:
                n = min(IIB_BATCH, total - done)
                sql = batch_sql(t, rng, n)  # generated outside the timed part
                t0 = time.perf_counter()
                B.q(c, sql)
                el = time.perf_counter() - t0
                spent += el
                mark += el
                done += n
                if done % per_interval == 0 or done == total:
                    intervals.append((done, per_interval / mark if mark else None))
                    mark = 0.0
            e["rows_s"] = total / spent
            e["intervals"] = intervals
            B.rec("iibench", eng, "insert_3_secondary", "rows/s", e["rows_s"], "rows/s")
            for rows_done, rate in intervals:
                B.rec("iibench", eng, "rows_s_at_%d" % rows_done, "rows/s", rate, "rows/s")
            r = B.q(c, "SELECT COUNT(*) FROM %s" % t)
            if int(r.rows[0][0]) != total:
                B.problem("iibench %s: %s rows after the run, expected %d" % (B.LABEL[eng], r.rows[0][0], total))
            r = B.q(c, "SELECT COUNT(*) FROM %s FORCE INDEX (registersegment) WHERE cashregisterid >= 0" % t)
            if int(r.rows[0][0]) != total:
                B.problem("iibench %s: index registersegment holds %s entries, expected %d" % (
                    B.LABEL[eng], r.rows[0][0], total))
            time.sleep(1)
            e["disk_bytes"] = B.engine_bytes(eng, srv.var + "/data", t)
            B.q(c, "OPTIMIZE TABLE %s" % t)
            time.sleep(1)
            e["table_bytes_optimized"] = B.table_bytes(c, eng, srv.var + "/data", "bench", t)
            B.log("iibench %s: %d rows, %.0f rows/s overall, last interval %.0f rows/s, %.0f MiB on disk, "
                  "table %.0f MiB after OPTIMIZE" % (
                      B.LABEL[eng], total, e["rows_s"], intervals[-1][1] or 0, e["disk_bytes"] / B.MiB,
                      (e["table_bytes_optimized"] or 0) / B.MiB))
            B.rec("iibench", eng, "table_bytes_after_optimize", "MiB", (e["table_bytes_optimized"] or 0) / B.MiB,
                  "MiB")
            B.q(c, "DROP TABLE %s" % t)
        except Exception as ex:  # keep going with the other engines
            B.problem("iibench on %s: %s" % (B.LABEL[eng], ex))
            e["error"] = str(ex)
        finally:
            c.close()


def chart(B, out, d, plt):
    ib = out.get("iibench", {}).get("engines", {})
    if not ib:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for eng in B.ENGINES:
        iv = ib.get(B.LABEL[eng], {}).get("intervals") or []
        if iv:
            ax.plot([r for r, _ in iv], [v or 0 for _, v in iv], marker="o", label=B.LABEL[eng], color=B.COLOR[eng])
    ax.set_title("insert benchmark, 3 secondary indexes: rows/s over time")
    ax.set_xlabel("rows in the table")
    ax.set_ylabel("rows/s")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return B.save(fig, d, "iibench.png")


def markdown(B, out, A, charts_made, chart_dir_rel):
    ib = out.get("iibench")
    if not ib:
        return
    eng = ib["engines"]
    A("## 7. Insert benchmark with three secondary indexes (%d rows, %d-row INSERTs)" % (ib["rows"], ib["batch"]))
    A("")
    A("iibench-style table (AUTO_INCREMENT PK; keys (price, customerid), (cashregisterid, price, customerid), "
      "(price, dateandtime, customerid)) filled with random rows by one client; the time counted is the time "
      "inside the statements. Row counts through the table and through one index are checked at the end. "
      "\"On disk at the end\" is the engine's whole directory for TidesDB and MyRocks (their write-ahead log "
      "included) and the .ibd file for InnoDB; \"after OPTIMIZE\" is the table's own files (InnoDB's .ibd, "
      "DATA_LENGTH + INDEX_LENGTH of the others), each engine with its default settings (TidesDB: "
      "`tidesdb_compression=ZSTD` on levels 1 and below).")
    A("")
    rows = [("rows/s overall", {lab: x.get("rows_s") for lab, x in eng.items()})]
    nint = max((len(x.get("intervals") or []) for x in eng.values()), default=0)
    for i in range(nint):
        at = next((x["intervals"][i][0] for x in eng.values() if len(x.get("intervals") or []) > i), None)
        rows.append(("rows/s up to %s rows" % at, {lab: (x.get("intervals") or [(0, None)] * nint)[i][1]
                                                   if len(x.get("intervals") or []) > i else None
                                                   for lab, x in eng.items()}))
    rows.append(("MiB on disk at the end (lower is better)",
                 {lab: (x.get("disk_bytes") or 0) / B.MiB or None for lab, x in eng.items()}))
    rows.append(("MiB of the table after OPTIMIZE TABLE (lower is better)",
                 {lab: (x.get("table_bytes_optimized") or 0) / B.MiB or None for lab, x in eng.items()}))
    A(B.engine_table(rows, "figure"))
    A("")
    if "iibench.png" in charts_made:
        A("![iibench](%s/iibench.png)" % chart_dir_rel)
        A("")
