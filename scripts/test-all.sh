#!/usr/bin/env bash
# `make test`: every check CI runs, one make target after another, stopping at the
# first that fails (as make would). Each stage's wall time is printed when it ends
# and again, all together, at the end (also after a failure), so a CI log shows
# where the time budget goes (`make test` must stay under 40 minutes on CI's
# machine, a fresh one: installs and first builds are part of the first stages).
set -uo pipefail

STAGES=(lint test-rust test-shim-compat test-mtr test-vs-innodb test-conformance
    test-diskfull test-backup test-galera test-stress-crash test-force-recovery
    test-deb test-docker test-11.8)
MAKE_CMD=${MAKE:-make}
summary=()
started=$(date +%s)

print_summary() {
    local total=$(($(date +%s) - started))
    echo
    echo "== make test: stage times (s)"
    printf '%s\n' "${summary[@]}"
    printf '   %-22s %5d\n' total "$total"
}
trap print_summary EXIT

for stage in "${STAGES[@]}"; do
    t0=$(date +%s)
    echo "== make test: $stage ($(date -u +%H:%M:%S) UTC)"
    rc=0
    "$MAKE_CMD" --no-print-directory "$stage" || rc=$?
    took=$(($(date +%s) - t0))
    if [ $rc -ne 0 ]; then
        summary+=("$(printf '   %-22s %5d  FAILED (rc %d)' "$stage" "$took" "$rc")")
        exit $rc
    fi
    summary+=("$(printf '   %-22s %5d' "$stage" "$took")")
    echo "== make test: $stage passed in ${took} s"
done
