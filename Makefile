# The one task runner for people and CI. The README's two commands are
# `make server` and `make test`; everything else is a step of theirs.
SHELL := /bin/bash
CARGO ?= cargo
MTR_PARALLEL ?= 2
# The server to build for, run and test: 10.11 (Debian 12's, the default) or 11.8
# (Debian 13's, in a Debian 13 root under target/; scripts/setup-mariadb-11.8.sh).
MARIADB ?= 10.11
ifeq ($(MARIADB),11.8)
# The scripts and build.rs read it (unset means 10.11, as before the variable existed).
export MARIADB
# build.rs takes the 11.8 headers from MARIADB; a cargo target folder of its own keeps
# the two builds from rebuilding each other.
PLUGIN_BUILD_ENV := CARGO_TARGET_DIR=$(CURDIR)/target/build-11.8
PLUGIN_OUT := target/plugin-11.8
RUST_OUT := target/build-11.8/release
else ifneq ($(MARIADB),10.11)
$(error MARIADB=$(MARIADB): supported servers are 10.11 and 11.8)
else
PLUGIN_OUT := target/plugin
RUST_OUT := target/release
endif

.PHONY: deb test-deb docker test-docker stress stress-crash test-stress-crash test-force-recovery test-11.8 test-shim-compat test-galera bench-galera all setup plugin server server-stop lint test test-rust test-mtr test-conformance test-diskfull test-backup clean bench-core bench-core-quick bench bench-quick bench-fts-large bench-fts-build

all: plugin

# Debian's MariaDB packages pinned to a version whose source is served, and that
# source's private headers (idempotent; fast once done).
setup:
	@bash scripts/setup-mariadb.sh

# target/plugin/ha_tidesdb.so, target/plugin/tidesdb-backup (tools/backup) and
# target/plugin/wsrep_sst_tidesdb (tools/sst, the Galera SST method)
plugin: setup
ifeq ($(MARIADB),11.8)
	@# The first 11.8 build starts from a copy of the 10.11 build's folder: every crate
	@# but ha_tidesdb (whose build script reruns for MARIADB) is up to date there, which
	@# saves a fresh machine ~4 min of compiling.
	@if [ ! -d $(RUST_OUT) ] && [ -d target/release ]; then \
	  mkdir -p $(dir $(RUST_OUT)) && cp -a target/release $(RUST_OUT); fi
endif
	$(PLUGIN_BUILD_ENV) $(CARGO) build --release -p ha_tidesdb -p tidesdb-backup
	@bash scripts/link-plugin.sh
	@install -m 0755 $(RUST_OUT)/tidesdb-backup $(PLUGIN_OUT)/tidesdb-backup
	@install -m 0755 tools/sst/wsrep_sst_tidesdb $(PLUGIN_OUT)/wsrep_sst_tidesdb

# A server under var/ with TidesDB as the default engine (MARIADB=11.8: Debian 13's
# 11.8 in its root, under var-11.8/, port 3398).
server: plugin
	@bash scripts/server.sh start

server-stop:
	@bash scripts/server.sh stop

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

test-rust:
	$(CARGO) test --profile test-release -p tidesdb-core -p tidesdb-ffi -p tidesdb-backup

# mysql-test-run suites of mysql-test/ against the real server and the fresh plugin.
test-mtr: plugin
	@bash scripts/mtr.sh

# MariaDB's storage_engine suite on TidesDB against InnoDB's results of the same run.
test-conformance: plugin
	@bash scripts/conformance.sh

# A full disk, for real (scripts/test-diskfull.sh): the engine on a small tmpfs,
# filled; writes fail with ER_DISK_FULL, nothing committed is lost, writes work
# again once space is freed. Prints SKIP (and passes) only where mount is refused.
test-diskfull: plugin
	@bash scripts/test-diskfull.sh

# The Debian package: target/deb/mariadb-plugin-tidesdb_<version>_amd64.deb for the
# installed server (MARIADB=11.8: for the Debian 13 root's, from target/plugin-11.8).
deb: plugin
	@bash scripts/make-deb.sh

# The package in this machine's system server: apt install (over an older build, and
# twice), restarts the Debian way, apt remove and purge; the system server is left
# stopped (root; refuses if anything else uses port 3306 or /run/mysqld).
test-deb: deb
ifeq ($(MARIADB),11.8)
	@bash scripts/debian13-run.sh /bin/bash $(CURDIR)/scripts/test-deb-11.8.sh \
	  $$(ls -t $(CURDIR)/target/deb/mariadb-plugin-tidesdb_*+mariadb11.8*_amd64.deb | head -n1)
else
	@bash scripts/test-deb.sh
endif

# The image tidesdb/mariadb (docker/): Debian 12, its MariaDB, the package, TidesDB the
# default engine. Installs docker.io and starts dockerd when missing; without
# BASE_IMAGE=debian:bookworm the base is made by debootstrap (cached in target/docker/).
docker: deb
	@bash scripts/docker-image.sh

# A container of the image: initialisation, a TidesDB table, rows kept across a restart.
test-docker: deb
	@bash scripts/test-docker.sh

# Hot backup under load (scripts/test-backup.py): tidesdb-backup of a server whose
# clients move money between a TidesDB and an InnoDB table in one transaction (plus
# XA and DDL); restore, totals, exactly the GTID's transactions, CHECK TABLE, a
# replica from the backup's GTID equal to the primary; mariadb-dump
# --single-transaction under the same load. Ports 3471-3472; ~1-2 min.
test-backup: plugin
	python3 scripts/test-backup.py $(TEST_BACKUP_ARGS)

# Everything CI checks, in this order (scripts/test-all.sh: stops at the first failing
# stage; prints each stage's time and, at the end, all of them).
test:
	@MAKE="$(MAKE)" bash scripts/test-all.sh

# handler-shim/server_compat.h's handlerton adapter on the slot shapes of 10.11 and
# 11.8 (1 s, no server).
test-shim-compat: setup
	@mkdir -p target
	g++ -std=c++17 -Wall -Wextra -Werror -Ihandler-shim -I/usr/include/mariadb/server \
	  handler-shim/tests/server_compat_test.cc -o target/server_compat_test
	target/server_compat_test

# The tidesdb, tidesdb_rpl, storage_engine and tidesdb_galera suites on Debian 13's
# 11.8 (its own plugin build in target/plugin-11.8; see README, Supported servers), the
# tests compared with InnoDB, main.vector on TidesDB. ~9 min on a fresh clone here, the
# Debian 13 root (debootstrap) and the 11.8 plugin build (target/build-11.8, seeded from
# the 10.11 build) included; `make test` prints the figure of each run.
test-11.8:
	$(MAKE) MARIADB=11.8 test-mtr test-conformance test-vs-innodb test-vector-conformance test-galera

# MariaDB's own main.vector as a [tidesdb] combination beside its innodb, myisam and
# aria ones (11.8 only; mysql-test-11.8/main/vector,tidesdb.rdiff; ~40 s).
.PHONY: test-vector-conformance
test-vector-conformance:
	$(MAKE) MARIADB=11.8 plugin
	@MARIADB=11.8 bash scripts/test-vector-conformance.sh

# The tidesdb tests whose result must be InnoDB's (scripts/mtr-vs-innodb.tests), run
# with InnoDB on the same server and compared (~1.5 min on either server).
.PHONY: test-vs-innodb
test-vs-innodb: plugin
	@bash scripts/mtr-vs-innodb.sh --listed

# Galera clusters (2 and 3 nodes, mtr's galera configs) with TidesDB tables:
# replication, conflicts and brute-force aborts, TOI DDL under writes, kill -9 + IST,
# a node joined by SST (wsrep_sst_method=tidesdb) under writes, an SST user of its
# own, a node joined by mysqldump SST under writes, parallel appliers, keys of
# rows changed by foreign key actions
# (mysql-test/tidesdb_galera, 14 tests; ~3 min). MARIADB=11.8 (part of test-11.8): the
# same suite on Debian 13's 11.8 with its galera-4 and mariadb-backup (both in the
# Debian 13 root; ~2.5 min).
test-galera: plugin
ifneq ($(MARIADB),11.8)
	@bash scripts/setup-galera.sh
endif
	@bash tools/sst/test-joiner-checks.sh
	MTR_SUITES=tidesdb_galera MTR_VAR=$(CURDIR)/target/mtr-galera$(if $(filter 11.8,$(MARIADB)),-11.8) MTR_PARALLEL=1 bash scripts/mtr.sh


clean:
	$(CARGO) clean
	rm -rf var

# db_bench-style comparison of core/ with fjall (docs/bench-core.md);
# `--features rocksdb` on the cargo line adds RocksDB (slow C++ build).
bench-core:
	$(CARGO) run --release -p tidesdb-bench --bin core-bench -- --out target/bench/core.json

bench-core-quick:
	BENCH_SCALE=0.1 $(CARGO) run --release -p tidesdb-bench --bin core-bench -- --out target/bench/core.json

# Randomized differential workload, TidesDB vs InnoDB on one server of its own
# (target/random-diff/var, port 3411); exits non-zero on any divergence.
RANDOM_DIFF_ARGS ?=
test-random: plugin
	python3 scripts/random-diff.py --seeds 1-3 --steps 1500 --keep-going $(RANDOM_DIFF_ARGS)

test-random-long: plugin
	python3 scripts/random-diff.py --seeds 1-40 --steps 5000 --restart-every 700 --kill-every 900 --keep-going --shrink $(RANDOM_DIFF_ARGS)

# Many clients running conflicting transactions on TidesDB and InnoDB: transfers
# (total must hold), racing unique inserts, snapshot readers; prints throughput,
# deadlocks, timeouts. STRESS_ARGS="--threads 32 --seconds 60" for a longer run.
stress: plugin
	python3 scripts/stress.py $(STRESS_ARGS)

# TidesDB vs InnoDB vs MyRocks on a server of its own (target/bench/<profile>/var,
# port 3420): large values, concurrent inserts, sysbench, spatial/full-text, on-disk
# size, VECTOR INDEX (11.8 only). Writes target/bench/<profile>/results.{json,csv} +
# charts and regenerates docs/BENCHMARKS.md + docs/bench/ (MARIADB=11.8:
# target/bench/<profile>-11.8, docs/BENCHMARKS-11.8.md + docs/bench-11.8/).
# BENCH_ARGS=--direct-io for O_DIRECT reads (InnoDB, MyRocks); BENCH_ARGS="--only vec"
# for one section. matplotlib comes from Debian's python3-matplotlib.
BENCH_PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
BENCH_ARGS ?=
bench-quick: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile quick --docs $(BENCH_ARGS)

bench: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile full --docs $(BENCH_ARGS)
	@if [ -n "$(BENCH_GALERA)" ]; then $(MAKE) bench-galera; fi

# The fts step alone over a larger corpus (~111k documents, 45 MiB: python3.11-doc,
# perl-doc and linux-doc-6.1, installed when missing; ~10 min), a run of its own
# (target/bench/fts-large): its figures become section 6.1 of docs/BENCHMARKS.md
# (kept in docs/bench/fulltext-large.json).
bench-fts-large: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile fts-large --only fts --docs $(BENCH_ARGS)

# Only the load and ADD FULLTEXT steps of bench-fts-large (no queries, docs untouched):
# index build time against InnoDB in ~2 min (target/bench/fts-large-build).
bench-fts-build: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile fts-large-build --only fts $(BENCH_ARGS)

# A 3-node Galera cluster on this machine (ports 3440-3449, target/bench-galera):
# sysbench write throughput of TidesDB vs InnoDB tables through the cluster, to
# one node and to all, and the conflict rate under a hot set; writes
# docs/bench/galera.md (scripts/bench-galera.py; ~6 min). Not in make test;
# `make bench BENCH_GALERA=1` runs it after the single-server bench.
BENCH_GALERA_ARGS ?=
bench-galera: plugin
	@bash scripts/setup-galera.sh
	$(BENCH_PYTHON) scripts/bench-galera.py --docs $(BENCH_GALERA_ARGS)

# FULLTEXT against InnoDB on the same server (scripts/fulltext-diff.py): random
# boolean / natural language / expansion queries over paragraphs of Debian's
# documentation, stopwords on and off, rows and relevance compared (port 3412;
# ~1 min per seed). Not part of `make test`.
test-fulltext-diff: plugin
	python3 scripts/fulltext-diff.py --seed 1 --queries 300 $(FULLTEXT_DIFF_ARGS)
	python3 scripts/fulltext-diff.py --seed 2 --queries 300 $(FULLTEXT_DIFF_ARGS)

# kill -9 at random moments, many times in a row, under random transactions, DDL,
# OPTIMIZE and value-log GC; after each restart every table equals an expected-state
# oracle and CHECK TABLE is clean (scripts/stress-crash.py; port 3413, its own var/).
# STRESS_CRASH_SECONDS=N for the length; STRESS_CRASH_SEED=N repeats a run.
STRESS_CRASH_SECONDS ?= 180
stress-crash: plugin
	STRESS_CRASH_SECONDS=$(STRESS_CRASH_SECONDS) python3 scripts/stress-crash.py

# The short run of `make test` (~75 s).
test-stress-crash: plugin
	STRESS_CRASH_SECONDS=60 python3 scripts/stress-crash.py

# tidesdb_force_recovery on each kind of damaged engine file: mariadb-dump saves every
# intact table (scripts/test-force-recovery.py; ports 3414-3415; ~1 min).
test-force-recovery: plugin
	python3 scripts/test-force-recovery.py

# The fault model test's long variant (core/tests/fault_model.rs): three seeds,
# every call site at its first and last call, the Nth operation of each kind up
# to FAULT_MODEL_ITERATIONS (default 30). Not in `make test` (tens of minutes).
FAULT_MODEL_ITERATIONS ?= 30
.PHONY: test-faults-long
test-faults-long:
	FAULT_MODEL_ITERATIONS=$(FAULT_MODEL_ITERATIONS) $(CARGO) test --profile test-release -p tidesdb-core --test fault_model -- --test-threads=1
