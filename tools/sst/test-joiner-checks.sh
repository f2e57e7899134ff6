#!/usr/bin/env bash
# The joiner's checks of wsrep_sst_tidesdb on received data, without a server (1 s;
# run by make test-galera before the cluster tests): the real mariadb-backup is
# replaced by a recorder, so what is checked is what the script does before it.
#   complete data      moved to <datadir>/#tidesdb (empty directories too), modes
#                      0700/0660, the CHECKPOINT note and the manifest gone, then
#                      the real --move-back runs
#   a file missing     refused (the transfer was cut short), nothing moved, no move-back
#   no manifest        refused (the donor sent no TidesDB data), no move-back
set -euo pipefail
SCRIPT=$(cd "$(dirname "$0")" && pwd)/wsrep_sst_tidesdb
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "test-joiner-checks: FAIL: $*" >&2; exit 1; }
mkdir -p "$T/bin"
ln -s "$SCRIPT" "$T/bin/mariadb-backup"
printf '#!/bin/sh\necho "$@" > "%s/move-back-ran"\n' "$T" > "$T/real-backup"
chmod +x "$T/real-backup"
export TIDESDB_SST_MARIADB_BACKUP=$T/real-backup

received() { # a received .sst with two files; $1: the file count the manifest claims
  rm -rf "$T/data" "$T/move-back-ran"
  mkdir -p "$T/data/.sst/#tidesdb/cf"
  echo a > "$T/data/.sst/#tidesdb/CURRENT"
  echo bb > "$T/data/.sst/#tidesdb/cf/x.sst"
  echo note > "$T/data/.sst/#tidesdb/CHECKPOINT"
  printf 'files %s\nbytes 10\nsequence 7\ndir #tidesdb\ndir #tidesdb/cf\ndir #tidesdb/empty\n' "$1" \
    > "$T/data/.sst/tidesdb_sst_manifest"
}
move_back() { "$T/bin/mariadb-backup" --move-back --target-dir="$T/data/.sst" --datadir="$T/data" 2>"$T/err"; }

received 3
move_back || fail "complete data refused: $(cat "$T/err")"
[ -f "$T/move-back-ran" ] || fail "the real --move-back did not run"
[ -f "$T/data/#tidesdb/cf/x.sst" ] && [ -d "$T/data/#tidesdb/empty" ] || fail "not moved to <datadir>/#tidesdb"
[ ! -e "$T/data/#tidesdb/CHECKPOINT" ] && [ ! -e "$T/data/.sst/tidesdb_sst_manifest" ] || fail "CHECKPOINT or manifest left"
[ "$(stat -c %a "$T/data/#tidesdb/cf")" = 700 ] && [ "$(stat -c %a "$T/data/#tidesdb/cf/x.sst")" = 660 ] ||
  fail "modes not 0700/0660"

received 4
if move_back; then fail "a missing file accepted"; fi
grep -q 'incomplete' "$T/err" || fail "no 'incomplete' message: $(cat "$T/err")"
[ ! -e "$T/move-back-ran" ] && [ ! -e "$T/data/#tidesdb" ] || fail "incomplete data moved or move-back run"

received 3
rm "$T/data/.sst/tidesdb_sst_manifest"
if move_back; then fail "data without manifest accepted"; fi
grep -q 'no TidesDB data received' "$T/err" || fail "no 'no TidesDB data' message: $(cat "$T/err")"
[ ! -e "$T/move-back-ran" ] || fail "move-back run without TidesDB data"
echo "test-joiner-checks: OK (complete data moved; a missing file and a missing manifest refused)"
