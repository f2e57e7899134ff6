#!/usr/bin/env bash
# Proves the tidesdb suite's recorded results against InnoDB.
#
# Copies mysql-test/ to a scratch dir (target/mtr-innodb/tests), switches the suite's
# default storage engine to InnoDB there (the plugin is still loaded, so
# have_tidesdb.inc and tests that name ENGINE=TidesDB on purpose still work), records
# every test -- disabled ones too (--enable-disabled) -- with InnoDB into that
# scratch copy, and diffs InnoDB's results against the recorded TidesDB results of
# mysql-test/tidesdb/r/. Nothing under mysql-test/ is written.
#
# A disabled test's .result is expected to be InnoDB's output (the correct one), so
# a difference there is a failure too.
#
# Usage: scripts/mtr-vs-innodb.sh [test names, e.g. tidesdb.ddl]; default: all.
#        scripts/mtr-vs-innodb.sh --listed: the tests of scripts/mtr-vs-innodb.tests,
#        those whose result must be InnoDB's (`make test-vs-innodb`).
# Exit status: 0 when every result matches InnoDB, 1 otherwise.
# MARIADB=11.8: on the 11.8 server (scripts/mtr.sh), against the 11.8 result where
# mysql-test-11.8/tidesdb/r/ has one.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${MARIADB:-10.11}" in
  10.11) SFX= ;;
  11.8) SFX=-11.8 ;;
  *) echo "mtr-vs-innodb: MARIADB=$MARIADB is not a supported server (10.11, 11.8)" >&2; exit 2 ;;
esac
SCRATCH=$ROOT/target/mtr-innodb$SFX
SUITE=tidesdb
if [ "${1:-}" = --listed ]; then
  shift
  set -- "$@" $(sed -e 's/#.*//' "$ROOT/scripts/mtr-vs-innodb.tests")
fi

rm -rf "$SCRATCH/tests"
mkdir -p "$SCRATCH/tests"
cp -a "$ROOT/mysql-test/." "$SCRATCH/tests/"
S=$SCRATCH/tests/$SUITE
sed -i 's/--default-storage-engine=TidesDB/--default-storage-engine=InnoDB/' "$S/suite.opt"
grep -q -- '--default-storage-engine=InnoDB' "$S/suite.opt" || {
  echo "mtr-vs-innodb: cannot switch the default engine in $S/suite.opt" >&2
  exit 2
}
rm -f "$S"/r/*.result "$S"/r/*.reject

# Options (--mtr-build-thread=N, ...) go to mtr; mtr records only named tests.
opts=()
names=()
for a in "$@"; do
  case $a in --*) opts+=("$a") ;; *) names+=("$a") ;; esac
done
args=("${names[@]}")
if [ ${#args[@]} -eq 0 ]; then
  for t in "$S"/t/*.test; do args+=("$SUITE.$(basename "$t" .test)"); done
fi
MTR_ROOT=$SCRATCH/mtr-root MTR_TEST_DIR=$SCRATCH/tests MTR_VAR=$SCRATCH/var MTR_RESULTS_OVERLAY=none \
  bash "$ROOT/scripts/mtr.sh" --record --enable-disabled "${opts[@]}" "${args[@]}" >"$SCRATCH/mtr.log" 2>&1
mtr_rc=$?
grep -E '^\S+\s+w[0-9]+ \[|^Completed|^Failed|fail' "$SCRATCH/mtr.log" | grep -v '^worker' || true
[ $mtr_rc -eq 0 ] || echo "mtr-vs-innodb: the InnoDB run failed (rc $mtr_rc), see $SCRATCH/mtr.log"

rc=$mtr_rc
n=0
bad=()
for t in "$S"/t/*.test; do
  name=$(basename "$t" .test)
  if [ ${#names[@]} -gt 0 ] && ! printf '%s\n' "${names[@]}" | grep -qx "$SUITE.$name"; then continue; fi
  n=$((n + 1))
  mine=$ROOT/mysql-test/$SUITE/r/$name.result
  if [ -n "$SFX" ] && [ -f "$ROOT/mysql-test$SFX/$SUITE/r/$name.result" ]; then
    mine=$ROOT/mysql-test$SFX/$SUITE/r/$name.result
  fi
  theirs=$S/r/$name.result
  if [ ! -f "$theirs" ]; then
    echo "== $name: no InnoDB result recorded"
    bad+=("$name")
    rc=1
  elif [ ! -f "$mine" ]; then
    echo "== $name: no TidesDB result recorded in mysql-test/$SUITE/r"
    bad+=("$name")
    rc=1
  elif ! diff -u --label "InnoDB/$name.result" --label "TidesDB/$name.result" \
    "$theirs" "$mine" >"$SCRATCH/$name.diff"; then
    echo "== $name: DIFFERS from InnoDB ($SCRATCH/$name.diff)"
    cat "$SCRATCH/$name.diff"
    bad+=("$name")
    rc=1
  else
    reason=$(sed -n "s/^$name *: *//p" "$ROOT/mysql-test/$SUITE/disabled.def" 2>/dev/null)
    echo "== $name: same as InnoDB${reason:+ (disabled in the suite: $reason)}"
    rm -f "$SCRATCH/$name.diff"
  fi
done
# The last lines name what failed: CI shows only the end of a long log.
[ $mtr_rc -eq 0 ] || echo "mtr-vs-innodb: the InnoDB run failed: $(grep -h '^Failing test' "$SCRATCH/mtr.log" || echo "rc $mtr_rc")"
echo "mtr-vs-innodb: $n tests compared; $([ $rc -eq 0 ] && echo 'all match InnoDB' || echo "DIFFERENCES found: ${bad[*]:-none (the InnoDB run failed)}")"
exit $rc
