#!/usr/bin/env bash
# A datadir fixture for an upgrade test: the engine's files and the tables'
# definitions as an older plugin wrote them.
#   scripts/make-upgrade-fixture.sh <older ha_tidesdb.so> <tables.sql> <out.tar.gz>
# Starts a server of its own with that plugin (scripts/server.sh, port 3461, under a
# temporary folder), runs the SQL (tables in the database `test`), stops the server
# cleanly and packs <datadir>/#tidesdb and test/*.frm. The upgrade test replaces its
# server's #tidesdb with the fixture's and puts the .frm files beside its own, so the
# fixture must hold every TidesDB table of its datadir and nothing else.
# Building the older plugin: `git worktree add <dir> <commit>`, then `make plugin` there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 3 ] || { sed -n 2,10p "$0" >&2; exit 2; }
plugin=$(readlink -f "$1")
sql=$(readlink -f "$2")
out=$(readlink -m "$3")
work=$(mktemp -d "${TMPDIR:-/tmp}/upgrade-fixture.XXXXXX")
export TIDESDB_VAR=$work/var TIDESDB_PORT=3461 TIDESDB_PLUGIN=$plugin
trap 'bash "$ROOT/scripts/server.sh" stop > /dev/null 2>&1 || :; rm -rf "$work"' EXIT
bash "$ROOT/scripts/server.sh" start
mariadb --socket="$work/var/run/mysqld.sock" -uroot < "$sql"
bash "$ROOT/scripts/server.sh" stop
data=$work/var/data
tar -C "$data" -czf "$out" --owner=0 --group=0 --sort=name '#tidesdb' $(cd "$data" && ls test/*.frm)
echo "fixture: $out ($(stat -c %s "$out") bytes)"
tar -tzf "$out" | sed 's/^/  /'
