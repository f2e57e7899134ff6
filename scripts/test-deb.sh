#!/usr/bin/env bash
# `make test-deb`: lintian on the .deb of `make deb` (no error or warning), then the
# package in this machine's own MariaDB, the way a user installs it:
# `apt install ./...deb`, the system server restarted the Debian way
# (systemctl where systemd runs, else `service mariadb`, i.e. /etc/init.d/mariadb).
#   an older build (a lower version, built here) installed; ENGINE=TidesDB works and
#   survives a restart; upgraded to the new build; installed a second time; removed
#   (the server still starts, the engine's data directory is left, as MyRocks' package
#   leaves its own); purged (the config goes). After each step the server restarts.
# The system server (port 3306, /run/mysqld, /var/lib/mysql) is started and stopped by
# this test only, and left stopped; the test refuses to run if anything else uses it.
# Other mariadbd processes on the machine are never touched: the server is stopped
# by its own pid file, and /etc/init.d/mariadb stop (which falls back to
# `killall mariadbd` when its shutdown fails) only runs when that shutdown will work.
# Needs root. Usage: scripts/test-deb.sh [new.deb]  (default: the one `make deb` made)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG=mariadb-plugin-tidesdb
SOCK=/run/mysqld/mysqld.sock
PIDFILE=/run/mysqld/mysqld.pid
DATADIR=/var/lib/mysql
CNF=/etc/mysql/mariadb.conf.d/60-tidesdb.cnf
DB=tidesdb_pkg_test
export DEBIAN_FRONTEND=noninteractive
started=$(date +%s)

say() { echo "test-deb: [+$(( $(date +%s) - started ))s] $*"; }
fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (apt, the system server)"

# The newest build for the server series MARIADB names (make-deb's +mariadb<version>).
NEW=${1:-$(ls -t "$ROOT"/target/deb/mariadb-plugin-tidesdb_*+mariadb"${MARIADB:-10.11}".*_amd64.deb 2>/dev/null | head -n1)}
[ -f "$NEW" ] || fail "no .deb (make deb)"
new_version=$(dpkg-deb -f "$NEW" Version)

# --- the package itself: lintian, no error and no warning (make setup installs it)
command -v lintian > /dev/null || apt-get install -y -qq --no-install-recommends lintian > /dev/null
lintian --fail-on error,warning "$NEW" || fail "lintian: $NEW"

# --- the system server: nobody else may be using it
sql() { mariadb -uroot --socket="$SOCK" -N -B -e "$1"; }
alive() { mariadb-admin -uroot --socket="$SOCK" ping >/dev/null 2>&1; }
server_pid() { [ -f "$PIDFILE" ] && cat "$PIDFILE" 2>/dev/null || true; }
if alive || [ -n "$(ss -Hltn 'sport = :3306')" ] || fuser -s "$DATADIR/ibdata1" 2>/dev/null; then
  fail "the system server (port 3306, $SOCK, $DATADIR) is in use: this test starts and stops it itself"
fi
if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'installed\|config-files'; then
  fail "$PKG is installed already; this test installs and purges it (apt purge $PKG first)"
fi
[ ! -e "$DATADIR/#tidesdb" ] || fail "$DATADIR/#tidesdb exists (data of an earlier install?); move it away first"
[ -d "$DATADIR/mysql" ] || fail "$DATADIR has no system tables (is mariadb-server installed?)"

if [ -d /run/systemd/system ]; then how=systemd; else how=sysv; fi
say "system server managed by $how; package $new_version"

svc_start() {
  if [ $how = systemd ]; then systemctl start mariadb; else service mariadb start >/dev/null; fi
  for _ in $(seq 1 60); do alive && return 0; sleep 0.5; done
  fail "the system server did not start"
}
svc_stop() {
  local pid; pid=$(server_pid)
  if [ $how = systemd ]; then systemctl stop mariadb
  elif alive; then service mariadb stop >/dev/null   # its shutdown works: no killall
  elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid"
  fi
  if [ -n "$pid" ]; then
    for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
    fail "the system server (pid $pid) did not stop"
  fi
}
svc_restart() { svc_stop; svc_start; }

cleanup() {
  local rc=$?
  set +e
  if alive; then sql "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1; fi
  svc_stop
  if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'installed\|config-files'; then
    apt-get purge -y -qq "$PKG" >/dev/null 2>&1
  fi
  # With the package gone the database's tables (TidesDB) are unknown to the server:
  # a DROP DATABASE above ran while it was installed where it could.
  rm -rf "${DATADIR:?}/$DB" "${DATADIR:?}/#tidesdb"
  [ $rc = 0 ] && say "PASS in $(( $(date +%s) - started )) s (system server left stopped)"
  exit $rc
}
trap cleanup EXIT

apt_install() { apt-get install -y -qq "$@" >/dev/null 2>"$ROOT/target/deb-test/apt.err" \
  || { cat "$ROOT/target/deb-test/apt.err" >&2; fail "apt-get install $*"; }; }
installed_version() { dpkg-query -W -f='${Version}' "$PKG" 2>/dev/null || true; }
engine_state() { sql "SELECT plugin_status FROM information_schema.plugins WHERE plugin_name = 'TidesDB'"; }
rows() { sql "SELECT COUNT(*), SUM(a) FROM $DB.t"; }
expect() { [ "$2" = "$3" ] || fail "$1: expected '$3', got '$2'"; }

# --- an older build: the same plugin with a lower version
mkdir -p "$ROOT/target/deb-test"
older_version="${new_version%%-*}-0+older"
dpkg --compare-versions "$older_version" lt "$new_version" || fail "$older_version is not older than $new_version"
OLD=$(DEB_VERSION=$older_version DEB_OUT="$ROOT/target/deb-test" bash "$ROOT/scripts/make-deb.sh" | tail -n1)

say "0. a package built for another server version: apt refuses it, nothing changes"
OTHER=$(DEB_VERSION="${new_version%%-*}-0+other" DEB_SERVER_VERSION=1:10.11.99-0+deb12u1 \
  DEB_OUT="$ROOT/target/deb-test/other" bash "$ROOT/scripts/make-deb.sh" | tail -n1)
if apt-get install -y "$OTHER" > "$ROOT/target/deb-test/apt-other.log" 2>&1; then
  fail "apt installed a package that depends on mariadb-server 1:10.11.99"
fi
grep -q "mariadb-server (= 1:10.11.99-0+deb12u1)" "$ROOT/target/deb-test/apt-other.log" \
  || { cat "$ROOT/target/deb-test/apt-other.log" >&2; fail "apt did not say which server it lacks"; }
expect "installed after the refusal" "$(installed_version)" ""

say "1. apt install the older build ($older_version)"
apt_install "$OLD"
expect "installed version" "$(installed_version)" "$older_version"
[ -f /usr/lib/mysql/plugin/ha_tidesdb.so ] && [ -f "$CNF" ] || fail "plugin or config not installed"
svc_start
expect "TidesDB after install" "$(engine_state)" ACTIVE
sql "CREATE DATABASE $DB; USE $DB; CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(100)) ENGINE=TidesDB;
     INSERT INTO t SELECT seq, REPEAT('x', seq) FROM seq_1_to_100"
expect "engine of the table" "$(sql "SELECT engine FROM information_schema.tables WHERE table_schema='$DB'")" TidesDB
expect "rows" "$(rows)" "100	5050"

say "2. restart: the rows are there"
svc_restart
expect "TidesDB after restart" "$(engine_state)" ACTIVE
expect "rows after restart" "$(rows)" "100	5050"

say "3. apt install the new build over it (upgrade to $new_version), restart"
apt_install "$NEW"
expect "installed version" "$(installed_version)" "$new_version"
svc_restart
expect "rows after upgrade" "$(rows)" "100	5050"
sql "INSERT INTO $DB.t VALUES (101, 'after upgrade')"

say "4. install it a second time (apt install, then --reinstall), restart"
apt_install "$NEW"
apt_install --reinstall "$NEW"
expect "installed version" "$(installed_version)" "$new_version"
svc_restart
expect "TidesDB after reinstall" "$(engine_state)" ACTIVE
expect "rows after reinstall" "$(rows)" "101	5151"

say "5. apt remove: the server still starts, the engine's data is left"
svc_stop
apt-get remove -y -qq "$PKG" >/dev/null 2>&1 || fail "apt-get remove"
[ ! -e /usr/lib/mysql/plugin/ha_tidesdb.so ] || fail "the plugin is still there after remove"
[ -f "$CNF" ] || fail "remove must keep the config (a conffile) until purge"
svc_start
expect "TidesDB after remove" "$(engine_state)" ""
[ -d "$DATADIR/#tidesdb" ] && [ -n "$(ls -A "$DATADIR/#tidesdb")" ] || fail "$DATADIR/#tidesdb is gone"

say "6. apt purge: the config goes, the server starts, the data is still left"
apt-get purge -y -qq "$PKG" >/dev/null 2>&1 || fail "apt-get purge"
[ ! -e "$CNF" ] || fail "$CNF is still there after purge"
svc_restart
[ -d "$DATADIR/#tidesdb" ] || fail "$DATADIR/#tidesdb is gone after purge"

say "7. apt install again: the data left behind is the engine's again"
apt_install "$NEW"
svc_restart
expect "rows after a new install" "$(rows)" "101	5151"
