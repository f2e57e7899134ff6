# The one task runner for people and CI. The README's two commands are
# `make server` and `make test`; everything else is a step of theirs.
SHELL := /bin/bash
CARGO ?= cargo
MTR_PARALLEL ?= 2

.PHONY: test-galera stress all setup plugin server server-stop lint test test-rust test-mtr test-conformance test-diskfull clean bench-core bench-core-quick bench bench-quick

all: plugin

# Debian's MariaDB packages pinned to a version whose source is served, and that
# source's private headers (idempotent; fast once done).
setup:
	@bash scripts/setup-mariadb.sh

# target/plugin/ha_tidesdb.so
plugin: setup
	$(CARGO) build --release -p ha_tidesdb
	@bash scripts/link-plugin.sh

# A server under var/ with TidesDB as the default engine.
server: plugin
	@bash scripts/server.sh start

server-stop:
	@bash scripts/server.sh stop

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

test-rust:
	$(CARGO) test --release -p tidesdb-core -p tidesdb-ffi

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

# Galera clusters (2 nodes, mtr's galera configs) with TidesDB tables: replication,
# conflicts and brute-force aborts, kill -9 + IST (mysql-test/tidesdb_galera; ~1.5 min).
test-galera: plugin
	@bash scripts/setup-galera.sh
	MTR_SUITES=tidesdb_galera MTR_VAR=$(CURDIR)/target/mtr-galera MTR_PARALLEL=1 bash scripts/mtr.sh

# Everything CI checks.
test: lint test-rust test-mtr test-conformance test-diskfull test-galera

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
# size. Writes target/bench/<profile>/results.{json,csv} + charts and regenerates
# docs/BENCHMARKS.md + docs/bench/. BENCH_ARGS=--direct-io for O_DIRECT reads
# (InnoDB, MyRocks). matplotlib comes from Debian's python3-matplotlib.
BENCH_PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
BENCH_ARGS ?=
bench-quick: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile quick --docs $(BENCH_ARGS)

bench: plugin
	$(BENCH_PYTHON) scripts/bench.py --profile full --docs $(BENCH_ARGS)
