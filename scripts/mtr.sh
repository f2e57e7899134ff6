#!/usr/bin/env bash
# Runs the project's mysql-test-run suites against the real server with the freshly
# built plugin, and prints mtr's summary.
#
# mtr cannot take a suite path containing '-' (it splits suite names on it), and it
# discovers plugin suites and overlays only at <mtr root>/plugin/<name>/<suite>. So
# this builds a private mtr root of symlinks in target/mtr-root that mirrors Debian's
# /usr layout, with our plugin in its plugin folder and mysql-test/ mounted as
# plugin/tidesdb/. Usage: scripts/mtr.sh [mtr arguments]; default: our suites.
#
# Environment: MTR_VAR (vardir), MTR_PARALLEL, MTR_SUITES, and, for
# scripts/mtr-vs-innodb.sh and scripts/conformance.sh, MTR_ROOT (the private mtr root
# to build), MTR_TEST_DIR (the folder whose suites are mounted; default mysql-test/)
# and MTR_PREPARE_ONLY (build the root, run nothing).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
R=${MTR_ROOT:-$ROOT/target/mtr-root}
TEST_DIR=${MTR_TEST_DIR:-$ROOT/mysql-test}
MTR_VAR=${MTR_VAR:-$ROOT/target/mtr-var}
PARALLEL=${MTR_PARALLEL:-2}
SUITES=${MTR_SUITES:-tidesdb,tidesdb_rpl}

rm -rf "$R"
mkdir -p "$R/lib/mysql/plugin" "$R/share/mysql"
ln -s /usr/bin "$R/bin"
ln -s /usr/sbin "$R/sbin"
for p in /usr/lib/*; do [ "$(basename "$p")" = mysql ] || ln -s "$p" "$R/lib/"; done
# Debian's plugins, but never an installed ha_tidesdb.so (a package of ours): ours
# is the fresh build below, and copying it over a link would write through it.
for p in /usr/lib/mysql/plugin/*; do
  [ "$(basename "$p")" = ha_tidesdb.so ] || ln -s "$p" "$R/lib/mysql/plugin/"
done
# A copy, not a link: a rebuild during the run (make plugin by someone else) must not
# swap or delete the library under running servers.
cp "$ROOT/target/plugin/ha_tidesdb.so" "$R/lib/mysql/plugin/ha_tidesdb.so"
for p in /usr/share/mysql/*; do [ "$(basename "$p")" = mysql-test ] || ln -s "$p" "$R/share/mysql/"; done
cp -as /usr/share/mysql/mysql-test "$R/share/mysql/mysql-test"
mkdir -p "$R/share/mysql/mysql-test/plugin/tidesdb"
for suite in "$TEST_DIR"/*/; do
  ln -s "${suite%/}" "$R/share/mysql/mysql-test/plugin/tidesdb/$(basename "$suite")"
done

# MTR_PREPARE_ONLY=1: stop here (scripts/conformance.sh adjusts the root first).
if [ -n "${MTR_PREPARE_ONLY:-}" ]; then exit 0; fi

cd "$R/share/mysql/mysql-test"
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--suite="$SUITES"); fi
exec perl mariadb-test-run.pl --vardir="$MTR_VAR" --parallel="$PARALLEL" --force \
  --max-test-fail=0 --retry=0 --testcase-timeout=10 --suite-timeout=60 "${args[@]}"
