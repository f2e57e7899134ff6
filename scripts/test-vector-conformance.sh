#!/usr/bin/env bash
# make test-vector-conformance (11.8 only): MariaDB's own main.vector test, the one it
# runs per engine (main/vector.combinations: innodb, myisam, aria), run on TidesDB as
# a combination of its own: `[tidesdb]` added to a copy of that file in a private mtr
# root (never the installed tree). The differences from the stored (InnoDB) result
# that are expected live in mysql-test-11.8/main/vector,tidesdb.rdiff, each explained
# in mysql-test-11.8/README.md; any other difference fails, as in mtr's own runs.
# Prints "N passed, N failed" last.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "${MARIADB:-11.8}" != 11.8 ]; then
  echo "vector-conformance: VECTOR exists from MariaDB 11.7 on: run with MARIADB=11.8" >&2
  exit 2
fi
if [ -z "${TIDESDB_IN_DEBIAN13:-}" ]; then
  exec "$ROOT/scripts/debian13-run.sh" MARIADB=11.8 TIDESDB_IN_DEBIAN13=1 \
    MTR_PARALLEL="${MTR_PARALLEL:-1}" /bin/bash "$ROOT/scripts/test-vector-conformance.sh" "$@"
fi
R=$ROOT/target/mtr-root-vector-11.8
OUT=$ROOT/target/vector-conformance-11.8
mkdir -p "$OUT"
MTR_ROOT=$R MTR_PREPARE_ONLY=1 bash "$ROOT/scripts/mtr.sh"
MT=$R/share/mariadb/mariadb-test
MAIN=$MT/main
# main/ is a tree of links to the installed files: replace the links mtr must not
# write through or that we change by real files.
rm -f "$MAIN/vector.combinations" "$MAIN/vector.result" "$MAIN"/vector,tidesdb.*
cp /usr/share/mariadb/mariadb-test/main/vector.combinations "$MAIN/vector.combinations"
cp /usr/share/mariadb/mariadb-test/main/vector.result "$MAIN/vector.result"   # patch refuses links
cat >>"$MAIN/vector.combinations" <<'EOF'

[tidesdb]
plugin-load-add=ha_tidesdb.so
plugin-maturity=experimental
default-storage-engine=tidesdb
EOF
# The test removes the graph table's file (t1#i#01.ibd/.MYD/.MAD) and expects the
# RENAME to fail: TidesDB keeps no file per table in the datadir, so there is no file
# to remove and the RENAME succeeds. That one statement is skipped on TidesDB.
rm -f "$MAIN/vector.test"
sed -e 's/^--error 7,29,ER_ERROR_ON_RENAME$/if (!$MTR_COMBINATION_TIDESDB) {\n&/' \
    -e '/^rename table test1.t1 to test1.t2;$/a }' \
  /usr/share/mariadb/mariadb-test/main/vector.test > "$MAIN/vector.test"
if [ "$(grep -c 'MTR_COMBINATION_TIDESDB' "$MAIN/vector.test")" != 1 ]; then
  echo "vector-conformance: main/vector.test has changed: its RENAME of a removed file is not where expected" >&2
  exit 2
fi
for f in "$ROOT"/mysql-test-11.8/main/*.rdiff; do
  [ -f "$f" ] || continue
  rm -f "$MAIN/$(basename "$f")"
  cp "$f" "$MAIN/"
done

cd "$MT"
status=0
perl mariadb-test-run.pl --vardir="$ROOT/target/mtr-var-vector-11.8" --parallel="${MTR_PARALLEL:-1}" \
  --force --max-test-fail=0 --retry=0 --testcase-timeout=10 --suite-timeout=30 \
  "$@" main.vector,tidesdb > "$OUT/mtr.log" 2>&1 || status=$?
grep -E '^main\.|^Completed|Failed|mysqltest:' "$OUT/mtr.log" || true
# A new .reject is the diff to explain (or fix) before it goes into the .rdiff.
rej=$MAIN/vector,tidesdb.reject
if [ -f "$rej" ]; then
  cp "$rej" "$OUT/vector,tidesdb.reject"
  diff -u --label vector.result --label vector,tidesdb.reject \
    /usr/share/mariadb/mariadb-test/main/vector.result "$rej" >"$OUT/vector,tidesdb.rdiff.new" || true
  echo "vector-conformance: the TidesDB output differs; as an rdiff: $OUT/vector,tidesdb.rdiff.new"
fi
passed=$(grep -c '\[ pass \]' "$OUT/mtr.log" || true)
failed=$(grep -c '\[ fail \]' "$OUT/mtr.log" || true)
echo "vector-conformance: $passed passed, $failed failed"
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then exit 1; fi
exit "$status"
