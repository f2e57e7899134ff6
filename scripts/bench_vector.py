"""Vector search workload of scripts/bench.py (step `vec`, MariaDB 11.8 only).

`VECTOR(n)` columns with a `VECTOR INDEX` (the server's MHNSW graph, which the server
keeps in a table of the same engine: docs/vector-11.8.md) on each engine of the run
that accepts one, in the same server and run.

Data: a generated set, not real embeddings. No Debian or PyPI package ships a
ready-made embedding matrix of a useful size: the word-vector packages (gensim's data,
chakin, embeddings, the spaCy models) download their vectors at run time, the small
spaCy models have none, and scikit-learn's only shipped vector data (digits, 1797 x 64
pixel counts 0..16) is tiny and full of distance ties. So: `vec_clusters` centres
drawn uniformly in [-1, 1]^d, each row a centre plus Gaussian noise (sigma
CLUSTER_SIGMA), fixed seed; queries are new points drawn the same way (not rows of the
table). numpy (Debian's python3-numpy, a dependency of python3-matplotlib that
scripts/setup-mariadb.sh installs) draws them and computes the exact answers.

Steps per engine, for EUCLIDEAN and for COSINE (one index per table, its distance
fixed at creation):
  load      rows without the index, 500-row INSERTs of the float32 bytes
  build     `ALTER TABLE ADD VECTOR INDEX (v) DISTANCE=...` timed on its own
  load+idx  (EUCLIDEAN only) the same rows into a table created with the index
  query     `SELECT id FROM t ORDER BY VEC_DISTANCE_<D>(v, x) LIMIT 10`, the engines
            taking turns on each query vector (same vectors for all), mhnsw_ef_search
            and mhnsw_default_m at the server's defaults, then at ef_search EF_WIDE;
            queries/s = queries / the
            engine's own query time; recall@10 = share of the 10 returned ids among
            the exact 10 nearest (numpy, float64 over the stored float32 values).
An engine that refuses `VECTOR INDEX` is reported as unsupported.
"""
import struct
import time

CLUSTER_SIGMA = 0.15
DISTANCES = ["euclidean", "cosine"]
K = 10
EF_WIDE = 100       # the second pass's mhnsw_ef_search


def generate(P, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    d, n, nq, nc = P["vec_dims"], P["vec_rows"], P["vec_queries"], P["vec_clusters"]
    centres = rng.uniform(-1.0, 1.0, size=(nc, d))

    def draw(m):
        return (centres[rng.integers(0, nc, size=m)] + rng.normal(0.0, CLUSTER_SIGMA, size=(m, d))).astype(np.float32)
    return draw(n), draw(nq)


def exact_top(data, queries, distance):
    """ids (1-based) of the K nearest rows per query, and the K-th distance."""
    import numpy as np
    x = data.astype(np.float64)
    qs = queries.astype(np.float64)
    if distance == "euclidean":
        dist = (qs * qs).sum(1)[:, None] - 2.0 * qs @ x.T + (x * x).sum(1)[None, :]
    else:
        xn = x / np.linalg.norm(x, axis=1)[:, None]
        qn = qs / np.linalg.norm(qs, axis=1)[:, None]
        dist = 1.0 - qn @ xn.T
    top = np.argsort(dist, axis=1)[:, :K]
    return [set(int(i) + 1 for i in row) for row in top]


def hexvec(v):
    return "x'" + struct.pack("<%df" % len(v), *v.tolist()).hex() + "'"


def load(B, c, t, data):
    t0 = time.perf_counter()
    for i in range(0, len(data), 500):
        vals = ",".join("(%d,%s)" % (i + j + 1, hexvec(v)) for j, v in enumerate(data[i:i + 500]))
        B.q(c, "INSERT INTO %s VALUES %s" % (t, vals))
    return time.perf_counter() - t0


def run(B, srv, P, out):
    series = out.get("mariadb", "10.11")
    if series == "10.11":
        reason = ("MariaDB %s has no VECTOR type (VECTOR and VECTOR INDEX came in 11.7): "
                  "run `make bench-quick MARIADB=11.8`" % out.get("server_version", series).split("-")[0])
        out["vector"] = {"skipped": reason}
        B.log("vec: skipped: " + reason)
        return
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise RuntimeError("numpy is missing (Debian's python3-numpy; scripts/setup-mariadb.sh installs it)")
    res = out["vector"] = {"rows": P["vec_rows"], "dims": P["vec_dims"], "clusters": P["vec_clusters"],
                           "queries": P["vec_queries"], "sigma": CLUSTER_SIGMA, "engines": {}}
    data, queries = generate(P, B.SEED + 17)
    truth = {d: exact_top(data, queries, d) for d in DISTANCES}
    c = B.Conn(srv.sock, "bench")
    r = B.q(c, "SELECT @@mhnsw_default_m, @@mhnsw_ef_search, @@mhnsw_max_cache_size")
    res["mhnsw_default_m"], res["mhnsw_ef_search"], res["mhnsw_max_cache_size"] = (int(v) for v in r.rows[0])
    B.log("vec: %d rows x %d dims (%d clusters), %d query vectors, M=%d ef_search=%d" % (
        len(data), data.shape[1], P["vec_clusters"], len(queries), res["mhnsw_default_m"], res["mhnsw_ef_search"]))
    dims = data.shape[1]
    tables = {}     # (eng, distance) -> table
    for eng in B.ENGINES:
        e = res["engines"].setdefault(B.LABEL[eng], {})
        probe = "vec_probe_" + eng.lower()
        c.query("DROP TABLE IF EXISTS %s" % probe)
        r = c.query("CREATE TABLE %s (id INT PRIMARY KEY, v VECTOR(%d) NOT NULL, VECTOR INDEX (v)) ENGINE=%s" % (
            probe, dims, eng))
        if r.err is not None:
            e.update(supported=False, error="ERROR %d: %s" % (r.err, r.errmsg))
            B.rec("vector", eng, "vector_index", "supported", 0, "bool")
            B.log("vec %s: VECTOR INDEX unsupported (%s)" % (B.LABEL[eng], r.errmsg))
            continue
        B.q(c, "DROP TABLE %s" % probe)
        e["supported"] = True
        B.rec("vector", eng, "vector_index", "supported", 1, "bool")
        for dist in DISTANCES:
            t = "vec_%s_%s" % (dist[:3], eng.lower())
            c.query("DROP TABLE IF EXISTS %s" % t)
            B.q(c, "CREATE TABLE %s (id INT PRIMARY KEY, v VECTOR(%d) NOT NULL) ENGINE=%s" % (t, dims, eng))
            x = e.setdefault(dist, {})
            x["load_s"] = load(B, c, t, data)
            t0 = time.perf_counter()
            B.q(c, "ALTER TABLE %s ADD VECTOR INDEX (v) DISTANCE=%s" % (t, dist))
            x["index_build_s"] = time.perf_counter() - t0
            B.rec("vector", eng, "%s/load" % dist, "seconds", x["load_s"], "s")
            B.rec("vector", eng, "%s/index_build" % dist, "seconds", x["index_build_s"], "s")
            B.log("vec %s %s: load %.1f s, ADD VECTOR INDEX %.1f s" % (B.LABEL[eng], dist, x["load_s"], x["index_build_s"]))
            plan = B.q(c, "EXPLAIN SELECT id FROM %s ORDER BY VEC_DISTANCE_%s(v, %s) LIMIT %d" % (
                t, dist.upper(), hexvec(queries[0]), K))
            x["plan"] = " ".join(v.decode() if isinstance(v, bytes) else str(v) for v in plan.rows[0])
            if plan.rows[0][5] != b"v":             # EXPLAIN's `key` column
                B.problem("vec %s %s: the query plan does not use the vector index: %s" % (B.LABEL[eng], dist, x["plan"]))
            tables[(eng, dist)] = t
        # loading into a table that has the index: every INSERT adds to the graph
        t = "vec_idx_" + eng.lower()
        c.query("DROP TABLE IF EXISTS %s" % t)
        B.q(c, "CREATE TABLE %s (id INT PRIMARY KEY, v VECTOR(%d) NOT NULL, VECTOR INDEX (v)) ENGINE=%s" % (
            t, dims, eng))
        e["load_with_index_s"] = load(B, c, t, data)
        B.rec("vector", eng, "euclidean/load_with_index", "seconds", e["load_with_index_s"], "s")
        B.log("vec %s: load with the index %.1f s (%.0f rows/s)" % (
            B.LABEL[eng], e["load_with_index_s"], len(data) / e["load_with_index_s"]))
        B.q(c, "DROP TABLE %s" % t)
    # The server's default ef_search, then a wider search: the graph's shape is random,
    # so at the default each engine's graph may miss a different near row; with a
    # wider search both should come close to the exact answer.
    for ef in (res["mhnsw_ef_search"], EF_WIDE):
        B.q(c, "SET SESSION mhnsw_ef_search = %d" % ef)
        for dist in DISTANCES:
            search(B, c, res, tables, dist, queries, truth[dist], P, ef)
    for t in tables.values():
        B.q(c, "DROP TABLE %s" % t)
    c.close()


def search(B, c, res, tables, dist, queries, truth, P, ef):
    engs = [eng for eng in B.ENGINES if (eng, dist) in tables]
    sql = "SELECT id FROM %%s ORDER BY VEC_DISTANCE_%s(v, %%s) LIMIT %d" % (dist.upper(), K)
    qhex = [hexvec(v) for v in queries]
    # Warm-up: every query once, untimed, so the graph nodes they visit are in the
    # server's graph cache (mhnsw_max_cache_size) and the timed pass is steady state.
    for eng in engs:
        for qh in qhex:
            B.q(c, sql % (tables[(eng, dist)], qh))
    lat = {eng: [] for eng in engs}
    hits = {eng: 0 for eng in engs}
    i, t_start = 0, time.perf_counter()
    while i < len(qhex) and (i < 50 or time.perf_counter() - t_start < P["vec_secs"] * len(engs)):
        for eng in engs:
            t1 = time.perf_counter()
            r = B.q(c, sql % (tables[(eng, dist)], qhex[i]))
            lat[eng].append(time.perf_counter() - t1)
            if len(r.rows) != K:
                B.problem("vec %s %s query %d: %d rows, not %d" % (B.LABEL[eng], dist, i, len(r.rows), K))
            hits[eng] += len(truth[i] & set(int(row[0]) for row in r.rows))
        i += 1
    key = queries_key(ef, res)
    for eng in engs:
        st = B.lat_stats(lat[eng], sum(lat[eng]))
        st["recall_at_10"] = hits[eng] / (K * len(lat[eng]))
        st["ef_search"] = ef
        res["engines"][B.LABEL[eng]][dist][key] = st
        test = "%s/knn10%s" % (dist, key[len("queries"):])
        B.rec("vector", eng, test, "qps", st["qps"], "ops/s")
        B.rec("vector", eng, test, "p99_ms", st["p99_ms"], "ms")
        B.rec("vector", eng, test, "recall_at_10", st["recall_at_10"], "ratio")
        B.log("vec %s %s ef_search %d: %d queries, %.0f qps p50 %.2f p99 %.2f ms, recall@10 %.3f" % (
            B.LABEL[eng], dist, ef, st["ops"], st["qps"], st["p50_ms"], st["p99_ms"], st["recall_at_10"]))


def queries_key(ef, res):
    """"queries" at the server's default ef_search, "queries_ef<N>" otherwise."""
    return "queries" if ef == res["mhnsw_ef_search"] else "queries_ef%d" % ef


def summary_items(out):
    v = out.get("vector", {}).get("engines", {})
    items = [("vec load with index s (lower better)", lambda l: v.get(l, {}).get("load_with_index_s"))]
    for dist in DISTANCES:
        items += [("vec %s ADD VECTOR INDEX s (lower better)" % dist[:3],
                   lambda l, d=dist: v.get(l, {}).get(d, {}).get("index_build_s")),
                  ("vec %s knn10 qps" % dist[:3],
                   lambda l, d=dist: v.get(l, {}).get(d, {}).get("queries", {}).get("qps")),
                  ("vec %s recall@10" % dist[:3],
                   lambda l, d=dist: v.get(l, {}).get(d, {}).get("queries", {}).get("recall_at_10")),
                  ("vec %s knn10 qps ef_search %d" % (dist[:3], EF_WIDE),
                   lambda l, d=dist: v.get(l, {}).get(d, {}).get("queries_ef%d" % EF_WIDE, {}).get("qps")),
                  ("vec %s recall@10 ef_search %d" % (dist[:3], EF_WIDE),
                   lambda l, d=dist: v.get(l, {}).get(d, {}).get("queries_ef%d" % EF_WIDE, {}).get("recall_at_10"))]
    return items


def markdown(B, out, A):
    vec = out.get("vector")
    if not vec:
        return
    A("## 9. Vector search (VECTOR INDEX, MariaDB 11.7 and later)")
    A("")
    if vec.get("skipped"):
        A("Skipped in this run: %s." % vec["skipped"])
        A("")
        return
    eng = vec["engines"]
    A("Generated data, not real embeddings (no Debian or PyPI package ships a usable embedding matrix: the "
      "word-vector packages download theirs at run time): %d rows of `VECTOR(%d)`, %d cluster centres uniform in "
      "[-1, 1]^%d, each row a centre plus Gaussian noise (sigma %.2f), fixed seed; %d query vectors drawn the same "
      "way, not rows of the table. Per engine and distance: load without the index (500-row INSERTs), then "
      "`ALTER TABLE ADD VECTOR INDEX (v) DISTANCE=...` timed alone; for EUCLIDEAN also a load into a table created "
      "with the index. Queries: `SELECT id ... ORDER BY VEC_DISTANCE_EUCLIDEAN(v, x) LIMIT 10` (and `_COSINE` on "
      "the COSINE table), each query once untimed first (the graph into the server's cache), then timed with the "
      "engines taking turns on each query vector, the server's defaults "
      "`mhnsw_default_m=%d`, `mhnsw_ef_search=%d`, `mhnsw_max_cache_size=%d`, then again with `SET SESSION mhnsw_ef_search = %d` (the graph's shape is random, "
      "so at the default each engine's graph may miss different near rows; the wider search shows both graphs "
      "are sound). recall@10: share of the returned ids "
      "among the exact 10 nearest, computed in Python (numpy, float64 over the stored float32 values). Even the "
      "wider search stays below 100%% on both engines: the server's graph compares 16-bit quantized copies of the "
      "vectors (`FVector` in sql/vector_mhnsw.cc), and inside a cluster of this set the distances are close." % (
          vec["rows"], vec["dims"], vec["clusters"], vec["dims"], vec["sigma"], vec["queries"],
          vec["mhnsw_default_m"], vec["mhnsw_ef_search"], vec["mhnsw_max_cache_size"], EF_WIDE))
    A("")
    unsup = ["%s (`%s`)" % (lab, x.get("error", "")[:90]) for lab, x in eng.items() if x.get("supported") is False]
    if unsup:
        A("**VECTOR INDEX unsupported:** " + "; ".join(unsup))
        A("")
    rows = [("load into a table with the index (s, lower is better)", {l: x.get("load_with_index_s") for l, x in eng.items()})]
    for dist in DISTANCES:
        g = {l: x.get(dist, {}) for l, x in eng.items()}
        rows += [("%s: load without the index (s)" % dist, {l: x.get("load_s") for l, x in g.items()}),
                 ("%s: ADD VECTOR INDEX (s, lower is better)" % dist, {l: x.get("index_build_s") for l, x in g.items()})]
        for key, ef in (("queries", vec["mhnsw_ef_search"]), ("queries_ef%d" % EF_WIDE, EF_WIDE)):
            for met, name in (("qps", "queries/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms")):
                rows.append(("%s, ef_search %d: LIMIT 10 %s" % (dist, ef, name),
                             {l: x.get(key, {}).get(met) for l, x in g.items()}))
            rows.append(("%s, ef_search %d: recall@10 (%%)" % (dist, ef),
                         {l: (None if x.get(key, {}).get("recall_at_10") is None
                              else 100.0 * x[key]["recall_at_10"]) for l, x in g.items()}))
    A(B.engine_table(rows, "vector figure"))
    A("")
    A("| engine | plan of the EUCLIDEAN query |")
    A("|---|---|")
    for lab, x in eng.items():
        A("| %s | `%s` |" % (lab, x.get("euclidean", {}).get("plan", x.get("error", "-"))[:120]))
    A("")
