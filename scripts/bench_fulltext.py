"""Full-text workload of scripts/bench.py (step `fts`).

Corpus: real English technical prose installed from Debian's packages (python3.11-doc's
reStructuredText sources and perl-doc's POD pages, installed by `ensure_corpus` when
dpkg does not list them as installed). Files are read in sorted order, split at blank lines into paragraphs, and
paragraphs packed into documents of at least DOC_BYTES bytes, so the corpus and its
documents are the same on every machine with the same package versions.
The larger corpus (`fts_corpus="large"`, profile fts-large: `make bench-fts-large`, a
separate run of this step alone) adds the Linux kernel's documentation (linux-doc-6.1)
and packs documents of at least 256 bytes: about 111k documents, 45 MiB (111,358 with
bookworm's python3.11-doc 3.11.2-6+deb12u9, perl-doc 5.36.0-7+deb12u4 and linux-doc-6.1
6.1.192-3: 25,984 + 21,554 + 63,820); a run that finds fewer than LARGE_MIN_DOCS stops.
Its figures go to docs/bench/fulltext-large.json and section 6.1 of docs/BENCHMARKS.md.

Steps per engine: load the documents (multi-row INSERTs, one transaction per batch),
then `ALTER TABLE ADD FULLTEXT` timed as its own step, then four query types, each with
terms drawn zipfian (frequent terms hot) and uniform over a fixed term list:
  term     SELECT id ... WHERE MATCH(body) AGAINST('t')                 (natural language)
  ranked   SELECT id, MATCH .. AS s ... WHERE MATCH(body) AGAINST('t1 t2') ORDER BY s DESC LIMIT 10
  bool_and SELECT id ... WHERE MATCH(body) AGAINST('+t1 +t2' IN BOOLEAN MODE)
  phrase   SELECT id ... WHERE MATCH(body) AGAINST('"w1 w2"' IN BOOLEAN MODE)
The matching row sets of `term`, `bool_and` and `phrase` are compared with InnoDB's
(relevance values differ between engines by design and are not compared).
An engine that refuses FULLTEXT is reported as unsupported.
"""
import gzip
import json
import os
import random
import re
import subprocess
import time

CORPUS_DIRS = [
    ("python3.11-doc", "/usr/share/doc/python3.11/html/_sources", (".txt",)),
    ("perl-doc", "/usr/share/perl/5.36/pod", (".pod",)),
]
# The larger corpus (profile fts-large): the same two packages and the Linux kernel's
# documentation as Debian ships it (reStructuredText and plain text, gzipped).
CORPUS_DIRS_LARGE = CORPUS_DIRS + [
    ("linux-doc-6.1", "/usr/share/doc/linux-doc-6.1/Documentation", (".rst.gz", ".txt.gz")),
]
DOC_BYTES = 2048
# What the larger corpus must hold (issue 18): a run with fewer measures something else.
LARGE_MIN_DOCS = 100000
QTYPES = ["term", "ranked", "bool_and", "phrase"]
WORD = re.compile(r"[A-Za-z]{4,12}")
# InnoDB's default stopwords and a few markup words that would dominate the term list.
SKIP = set("""about an are as at be by com de en for from how in is it la of on or that the this to was what
when where who will with und www also have been more than then them they their there which would could
should into only other some such these those your yours like just over very code file name none true
false self return class def""".split())


def installed(pkg):
    """True if dpkg has `pkg` installed. A corpus directory can exist without its
    package: /usr/share/perl/5.36/pod holds perl-modules' perldiag.pod (803 of perl-doc's
    21,554 documents) when perl-doc is not installed."""
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.split()[-1:] == ["installed"]


def ensure_corpus(B, dirs):
    missing = [pkg for pkg, d, _ in dirs if not installed(pkg) or not os.path.isdir(d)]
    if missing:
        B.log("fts: installing the corpus packages %s" % " ".join(missing))
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        p = subprocess.run(["apt-get", "install", "-y", "-q"] + missing, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError("apt-get install %s failed: %s" % (" ".join(missing), p.stderr[-300:]))


def load_corpus(limit, dirs=None, doc_bytes=DOC_BYTES):
    docs = []
    for _, d, exts in dirs or CORPUS_DIRS:
        for dp, _, files in sorted(os.walk(d)):
            for f in sorted(files):
                if not f.endswith(exts):
                    continue
                with (gzip.open if f.endswith(".gz") else open)(os.path.join(dp, f), "rb") as fh:
                    text = fh.read().decode("utf-8", "replace")
                cur, part = [], 0
                for para in re.split(r"\n\s*\n", text):
                    para = para.strip()
                    if not para:
                        continue
                    cur.append(para)
                    if sum(len(x) for x in cur) >= doc_bytes:
                        docs.append(("%s#%d" % (f, part), "\n\n".join(cur)))
                        cur, part = [], part + 1
                if cur:
                    docs.append(("%s#%d" % (f, part), "\n\n".join(cur)))
                if len(docs) >= limit:
                    return docs[:limit]
    return docs


def vocabulary(docs):
    """Terms with a document frequency between 0.2% and 5%, most frequent first, and
    frequent bigrams for phrase queries."""
    df, bi = {}, {}
    for _, body in docs:
        words = [w.lower() for w in WORD.findall(body)]
        for w in set(words):
            if w not in SKIP:
                df[w] = df.get(w, 0) + 1
        for a, b in set(zip(words, words[1:])):
            if a not in SKIP and b not in SKIP and a != b:
                bi[(a, b)] = bi.get((a, b), 0) + 1
    n = len(docs)
    terms = sorted((w for w, c in df.items() if 0.002 * n <= c <= 0.05 * n), key=lambda w: (-df[w], w))
    pairs = sorted((p for p, c in bi.items() if c >= max(3, 0.001 * n)), key=lambda p: (-bi[p], p))
    return terms[:400], pairs[:200]


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def query_sql(t, qt, rng, pick, terms, pairs):
    if qt == "term":
        return "SELECT id FROM %s WHERE MATCH(body) AGAINST('%s')" % (t, terms[pick(rng)])
    if qt == "ranked":
        a, b = terms[pick(rng)], terms[pick(rng)]
        return ("SELECT id, MATCH(body) AGAINST('%s %s') AS s FROM %s WHERE MATCH(body) AGAINST('%s %s') "
                "ORDER BY s DESC LIMIT 10" % (a, b, t, a, b))
    if qt == "bool_and":
        a, b = terms[pick(rng)], terms[pick(rng)]
        return "SELECT id FROM %s WHERE MATCH(body) AGAINST('+%s +%s' IN BOOLEAN MODE)" % (t, a, b)
    a, b = pairs[pick(rng) % len(pairs)]
    return "SELECT id FROM %s WHERE MATCH(body) AGAINST('\"%s %s\"' IN BOOLEAN MODE)" % (t, a, b)


def run(B, srv, P, out):
    dirs = CORPUS_DIRS_LARGE if P.get("fts_corpus") == "large" else CORPUS_DIRS
    ensure_corpus(B, dirs)
    docs = load_corpus(P.get("fts_docs", 2000), dirs, P.get("fts_doc_bytes", DOC_BYTES))
    if P.get("fts_corpus") == "large" and len(docs) < min(LARGE_MIN_DOCS, P.get("fts_docs", 0)):
        raise RuntimeError("larger corpus: %d documents, fewer than %d (packages %s)" % (
            len(docs), LARGE_MIN_DOCS, " ".join(pkg for pkg, _, _ in dirs)))
    terms, pairs = vocabulary(docs)
    if len(terms) < 20 or len(pairs) < 5:
        raise RuntimeError("corpus too small: %d docs, %d terms, %d bigrams" % (len(docs), len(terms), len(pairs)))
    res = out.setdefault("fulltext", {"docs": len(docs), "bytes": sum(len(b) for _, b in docs),
                                      "terms": len(terms), "bigrams": len(pairs), "engines": {},
                                      "corpus": [pkg for pkg, _, _ in dirs],
                                      "doc_bytes": P.get("fts_doc_bytes", DOC_BYTES)})
    B.log("fts: %d documents, %.1f MiB, %d terms, %d bigrams" % (len(docs), res["bytes"] / B.MiB, len(terms), len(pairs)))
    # one fixed query list per (type, distribution): every engine runs the same statements
    zipf_terms = B.Keys(len(terms), B.SEED + 11)
    plans = {}
    for dist in ("zipfian", "uniform"):
        for qt in QTYPES:
            rng = random.Random("%d-fts-%s-%s" % (B.SEED, dist, qt))
            pick = (lambda r: zipf_terms.zipfian(r) - 1) if dist == "zipfian" else (lambda r: r.randrange(len(terms)))
            plans[(qt, dist)] = [query_sql("{T}", qt, rng, pick, terms, pairs) for _ in range(P.get("fts_queries", 200))]
    answers = {}
    for eng in B.ENGINES:
        e = res["engines"].setdefault(B.LABEL[eng], {})
        t = "fts_" + eng.lower()
        c = B.Conn(srv.sock, "bench")
        try:
            B.q(c, "DROP TABLE IF EXISTS %s" % t)
            B.q(c, "CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, title VARCHAR(200) NOT NULL, body MEDIUMTEXT NOT NULL) "
                   "ENGINE=%s DEFAULT CHARSET=utf8mb4" % (t, eng))
            t0 = time.perf_counter()
            for i in range(0, len(docs), 50):
                rows = ",".join("(%d, %s, %s)" % (i + j + 1, sql_str(title), sql_str(body))
                                for j, (title, body) in enumerate(docs[i:i + 50]))
                B.q(c, "BEGIN")
                B.q(c, "INSERT INTO %s VALUES %s" % (t, rows))
                B.q(c, "COMMIT")
            e["load_s"] = time.perf_counter() - t0
            e["load_docs_s"] = len(docs) / e["load_s"]
            B.rec("fulltext", eng, "load", "docs/s", e["load_docs_s"], "docs/s")
            t0 = time.perf_counter()
            r = c.query("ALTER TABLE %s ADD FULLTEXT INDEX ft_body (body)" % t)
            if r.err is not None:
                e["supported"] = False
                e["error"] = "ERROR %d: %s" % (r.err, r.errmsg)
                B.rec("fulltext", eng, "supported", "supported", 0, "bool")
                B.log("fts %s: unsupported (%s)" % (B.LABEL[eng], e["error"]))
                B.q(c, "DROP TABLE %s" % t)
                continue
            e["supported"] = True
            e["index_build_s"] = time.perf_counter() - t0
            B.rec("fulltext", eng, "add_fulltext_index", "seconds", e["index_build_s"], "s")
            B.log("fts %s: load %.0f docs/s, ADD FULLTEXT %.2f s" % (B.LABEL[eng], e["load_docs_s"], e["index_build_s"]))
            if P.get("fts_build_only"):
                B.q(c, "DROP TABLE %s" % t)
                continue
            e["queries"] = {}
            for (qt, dist), stmts in plans.items():
                stmts = [s.replace("{T}", t) for s in stmts]
                warm = max(1, len(stmts) // 10)
                for s in stmts[:warm]:
                    B.q(c, s)
                lat, got, t_start = [], [], time.perf_counter()
                for s in stmts[warm:]:
                    t0 = time.perf_counter()
                    r = B.q(c, s)
                    lat.append(time.perf_counter() - t0)
                    got.append(sorted(int(row[0]) for row in r.rows) if qt != "ranked" else len(r.rows))
                    if time.perf_counter() - t_start >= P.get("fts_secs", 5.0):
                        break
                st = B.lat_stats(lat, time.perf_counter() - t_start)
                st["avg_rows"] = sum(len(g) if isinstance(g, list) else g for g in got) / max(1, len(got))
                e["queries"]["%s/%s" % (qt, dist)] = st
                for m in ("qps", "p50_ms", "p95_ms", "p99_ms"):
                    B.rec("fulltext", eng, "%s/%s" % (qt, dist), m, st[m], "ops/s" if m == "qps" else "ms")
                B.log("fts %s %-8s %-8s %8.1f qps  p50 %7.2f  p99 %7.2f ms  (%.0f rows/query)" % (
                    B.LABEL[eng], qt, dist, st["qps"], st["p50_ms"], st["p99_ms"], st["avg_rows"]))
                if qt != "ranked":
                    base = answers.setdefault((qt, dist), got)
                    n = min(len(base), len(got))
                    bad = sum(1 for a, b in zip(base[:n], got[:n]) if a != b)
                    if bad:
                        B.problem("fulltext %s %s/%s: %d of %d queries returned other rows than %s" % (
                            B.LABEL[eng], qt, dist, bad, n, B.LABEL[B.ENGINES[0]]))
            B.q(c, "DROP TABLE %s" % t)
        except Exception as ex:  # keep going with the other engines
            B.problem("fulltext on %s: %s" % (B.LABEL[eng], ex))
            e["error"] = str(ex)
        finally:
            c.close()


LARGE_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "bench", "fulltext-large.json")
LARGE_HEADING = "### 6.1 Larger corpus (separate run)"


def markdown(B, out, A):
    ft = out.get("fulltext")
    if ft:
        A("## 6. Full-text search (%d documents, %.1f MiB of Debian's %s text)" % (
            ft["docs"], ft["bytes"] / B.MiB, " and ".join(ft.get("corpus", ["python3.11-doc", "perl-doc"]))))
        A("")
        tables(B, ft, A)
    if os.path.exists(LARGE_JSON):
        with open(LARGE_JSON) as f:
            large_markdown(B, json.load(f), A)


def large_markdown(B, large, A):
    """Section 6.1 from the saved figures of a `make bench-fts-large` run."""
    ft = large["fulltext"]
    A(LARGE_HEADING)
    A("")
    A("A run of its own (`make bench-fts-large`: profile fts-large, the `fts` step alone) on %s, commit %s, load "
      "average at start %s: %d documents, %.1f MiB of %s. Same steps, query lists and checks as above." % (
          large.get("started"), large.get("commit"), " ".join(large.get("machine", {}).get("loadavg_start", [])),
          ft["docs"], ft["bytes"] / B.MiB, ", ".join(ft.get("corpus", []))))
    A("")
    tables(B, ft, A)
    before = large.get("before")
    if before:
        # A change's effect: an earlier run of the same step (figures kept by hand in the json).
        A("Before and after %s: TidesDB / InnoDB in each run (each run has its own InnoDB figures; "
          "qps higher is better, p99 and build time lower)." % before.get("change", "the last change"))
        A("")
        A("| figure | before (%s, %s) | after (%s) |" % (before.get("commit"), before.get("started"), large.get("commit")))
        A("|---|---:|---:|")

        def ratio(f, key, metric):
            e = f.get("engines", {})
            if key is None:
                a, b = e.get("TidesDB", {}).get(metric), e.get("InnoDB", {}).get(metric)
            else:
                a = e.get("TidesDB", {}).get("queries", {}).get(key, {}).get(metric)
                b = e.get("InnoDB", {}).get("queries", {}).get(key, {}).get(metric)
            return "%.2fx" % (a / b) if a and b else "-"
        A("| ADD FULLTEXT s | %s | %s |" % (ratio(before["fulltext"], None, "index_build_s"),
                                           ratio(ft, None, "index_build_s")))
        for metric, name in (("qps", "qps"), ("p99_ms", "p99 ms")):
            for dist in ("zipfian", "uniform"):
                for qt in QTYPES:
                    k = "%s/%s" % (qt, dist)
                    A("| %s %s | %s | %s |" % (k, name, ratio(before["fulltext"], k, metric), ratio(ft, k, metric)))
        A("")


def save_large(B, out):
    """Keeps a fts-large run's figures (docs/bench/fulltext-large.json) and writes its
    section 6.1 into docs/BENCHMARKS.md in place (before section 7)."""
    keep = {k: out.get(k) for k in ("started", "commit", "machine", "server_version", "fulltext")}
    os.makedirs(os.path.dirname(LARGE_JSON), exist_ok=True)
    with open(LARGE_JSON, "w") as f:
        json.dump(keep, f, indent=1, default=str)
    write_large_section(B, keep)


def write_large_section(B, keep):
    """Section 6.1 of docs/BENCHMARKS.md from `keep` (the saved figures), in place."""
    page = os.path.join(os.path.dirname(LARGE_JSON), "..", "BENCHMARKS.md")
    if not os.path.exists(page):
        return
    L = []
    large_markdown(B, keep, L.append)
    text = open(page).read()
    start = text.find(LARGE_HEADING)
    if start < 0:
        start = text.find("\n## 7.")
        start = len(text) if start < 0 else start + 1
        end = start
    else:
        end = text.find("\n## ", start)
        end = len(text) if end < 0 else end + 1
    with open(page, "w") as f:
        f.write(text[:start] + "\n".join(L) + "\n" + text[end:])


def tables(B, ft, A):
    eng = ft["engines"]
    A("Documents of >= %d bytes packed from paragraphs; terms: %d words with a document frequency between 0.2%% and "
      "5%%, phrases: %d frequent bigrams. Load with 50-row INSERTs, then `ALTER TABLE ADD FULLTEXT` timed alone. "
      "Query types: `term` (natural language, all matches), `ranked` (two terms, ORDER BY MATCH DESC LIMIT 10), "
      "`bool_and` (`+a +b` in boolean mode), `phrase` (`\"a b\"` in boolean mode); terms zipfian or uniform over "
      "the term list. Row sets of term/bool_and/phrase are checked against InnoDB's." % (
          ft.get("doc_bytes", DOC_BYTES), ft["terms"], ft["bigrams"]))
    A("")
    unsup = ["%s (`%s`)" % (lab, x.get("error", "")[:80]) for lab, x in eng.items() if x.get("supported") is False]
    if unsup:
        A("**Unsupported:** " + "; ".join(unsup))
        A("")
    rows = [("load (docs/s)", {lab: x.get("load_docs_s") for lab, x in eng.items()}),
            ("ADD FULLTEXT (s, lower is better)", {lab: x.get("index_build_s") for lab, x in eng.items()})]
    for dist in ("zipfian", "uniform"):
        for qt in QTYPES:
            k = "%s/%s" % (qt, dist)
            rows.append(("%s qps" % k, {lab: x.get("queries", {}).get(k, {}).get("qps") for lab, x in eng.items()}))
    A(B.engine_table(rows, "step / query"))
    A("")
    rows = []
    for dist in ("zipfian", "uniform"):
        for qt in QTYPES:
            k = "%s/%s" % (qt, dist)
            rows.append(("%s p99 ms" % k, {lab: x.get("queries", {}).get(k, {}).get("p99_ms") for lab, x in eng.items()}))
    A(B.engine_table(rows, "query (lower is better)"))
    A("")
