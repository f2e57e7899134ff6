#!/usr/bin/env bash
# make test-diskfull: a full disk, for real. Runs the engine's tmpfs tests
# (core/tests/disk_full.rs) and the mtr test tidesdb.disk_full (a real server whose
# engine directory is a 64 MiB tmpfs, filled to the last page). Both mount tmpfs
# (root / CAP_SYS_ADMIN): if mount is refused this prints SKIP and exits 0 --
# only then. A mount left behind by a failed run is removed on exit.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export MTR_VAR=${MTR_VAR:-$ROOT/target/mtr-var-diskfull}
export MTR_ROOT=${MTR_ROOT:-$ROOT/target/mtr-root-diskfull}

cleanup() {
  awk -v v="$MTR_VAR" 'index($2, v) == 1 { print $2 }' /proc/mounts | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT
cleanup

probe=$(mktemp -d)
if ! mount -t tmpfs -o size=1m tidesdb_probe "$probe" 2>/dev/null; then
  rmdir "$probe"
  echo "SKIP: mount -t tmpfs refused here (needs root / CAP_SYS_ADMIN); disk-full tests not run"
  exit 0
fi
umount "$probe"
rmdir "$probe"

${CARGO:-cargo} test --release -p tidesdb-core --test disk_full -- --nocapture 2>&1 |
  grep -E "SKIP|test |test result|panicked|error" || true
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "core disk_full tests FAILED"
  exit "$status"
fi

TIDESDB_DISKFULL=1 MTR_PARALLEL=1 bash scripts/mtr.sh tidesdb.disk_full
