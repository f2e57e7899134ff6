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
#
# MARIADB=11.8: the same, run inside the Debian 13 root (scripts/debian13-run.sh) with
# its mtr (/usr/share/mariadb/mariadb-test), target/plugin-11.8/ha_tidesdb.so, and the
# 11.8 results of mysql-test-11.8/<suite>/ (README there) in place of those whose
# output differs on 11.8 for reasons outside the engine. Defaults get an -11.8 suffix.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SERIES=${MARIADB:-10.11}
case "$SERIES" in
  10.11) SFX=; SHARE=/usr/share/mysql; MT_NAME=mysql-test; PLUGIN_SO=$ROOT/target/plugin/ha_tidesdb.so ;;
  11.8)  SFX=-11.8; SHARE=/usr/share/mariadb; MT_NAME=mariadb-test; PLUGIN_SO=$ROOT/target/plugin-11.8/ha_tidesdb.so ;;
  *) echo "mtr: MARIADB=$SERIES is not a supported server (10.11, 11.8)" >&2; exit 2 ;;
esac
R=${MTR_ROOT:-$ROOT/target/mtr-root$SFX}
TEST_DIR=${MTR_TEST_DIR:-$ROOT/mysql-test}
MTR_VAR=${MTR_VAR:-$ROOT/target/mtr-var$SFX}
PARALLEL=${MTR_PARALLEL:-2}
SUITES=${MTR_SUITES:-tidesdb,tidesdb_rpl}
# The per-server results; MTR_RESULTS_OVERLAY=none for none (a recording run must not
# write through the links into them).
OVERLAY=${MTR_RESULTS_OVERLAY:-$ROOT/mysql-test$SFX}
if [ "$SERIES" = 11.8 ] && [ -z "${TIDESDB_IN_DEBIAN13:-}" ]; then
  exec "$ROOT/scripts/debian13-run.sh" MARIADB=11.8 TIDESDB_IN_DEBIAN13=1 MTR_ROOT="$R" \
    MTR_TEST_DIR="$TEST_DIR" MTR_VAR="$MTR_VAR" MTR_PARALLEL="$PARALLEL" MTR_SUITES="$SUITES" \
    MTR_PREPARE_ONLY="${MTR_PREPARE_ONLY:-}" MTR_RESULTS_OVERLAY="$OVERLAY" /bin/bash "$ROOT/scripts/mtr.sh" "$@"
fi

rm -rf "$R"
mkdir -p "$R/lib/mysql/plugin" "$R/share/${SHARE##*/}"
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
cp "$PLUGIN_SO" "$R/lib/mysql/plugin/ha_tidesdb.so"
MT=$R/share/${SHARE##*/}/$MT_NAME
for p in "$SHARE"/*; do [ "$(basename "$p")" = "$MT_NAME" ] || ln -s "$p" "$R/share/${SHARE##*/}/"; done
cp -as "$SHARE/$MT_NAME" "$MT"
mkdir -p "$MT/plugin/tidesdb"
for suite in "$TEST_DIR"/*/; do
  name=$(basename "$suite")
  if [ -n "$SFX" ] && [ -d "$OVERLAY/$name" ]; then
    # A suite with results of its own for this server: a linked copy, those replaced.
    cp -as "${suite%/}" "$MT/plugin/tidesdb/$name"
    (cd "$OVERLAY/$name" && find . -type f ! -name README.md) | while read -r f; do
      ln -sfn "$OVERLAY/$name/$f" "$MT/plugin/tidesdb/$name/$f"
    done
  else
    ln -s "${suite%/}" "$MT/plugin/tidesdb/$name"
  fi
done

# MTR_PREPARE_ONLY=1: stop here (scripts/conformance.sh adjusts the root first).
if [ -n "${MTR_PREPARE_ONLY:-}" ]; then exit 0; fi

cd "$MT"
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--suite="$SUITES"); fi
exec perl mariadb-test-run.pl --vardir="$MTR_VAR" --parallel="$PARALLEL" --force \
  --max-test-fail=0 --retry=0 --testcase-timeout=10 --suite-timeout=60 "${args[@]}"
