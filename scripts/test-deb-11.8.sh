#!/usr/bin/env bash
# The 11.8 package in Debian 13's own server, inside the Debian 13 root (this Debian 12
# host has no 11.8 system server): `make test-deb MARIADB=11.8` runs this script through
# scripts/debian13-run.sh. apt install, the package's config loads the plugin, a TidesDB
# table survives a restart, apt remove leaves a server that starts and the engine's
# data, apt purge removes the config. A throwaway datadir and socket, no TCP port.
#   scripts/test-deb-11.8.sh PACKAGE.deb      (inside the root)
set -euo pipefail
DEB=${1:?usage: test-deb-11.8.sh PACKAGE.deb}
D=/tmp/tidesdb-test-deb-11.8
SOCK=$D.sock
PID=
fail() { echo "test-deb-11.8: FAIL: $*" >&2; [ -f "$D/err.log" ] && tail -20 "$D/err.log" >&2; exit 1; }
sql() { mariadb -uroot --socket="$SOCK" -N -B -e "$1"; }
start() {
  mariadbd --user=root --datadir="$D" --socket="$SOCK" --skip-networking \
    --log-error="$D/err.log" &
  PID=$!
  for _ in $(seq 60); do sql 'SELECT 1' >/dev/null 2>&1 && return 0; sleep 1; done
  fail "the server did not start"
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$D" "$SOCK"' EXIT

apt-get install -y -qq "$DEB" >/tmp/tidesdb-test-deb.apt.log 2>&1 ||
  { tail -20 /tmp/tidesdb-test-deb.apt.log; fail "apt install"; }
server=$(dpkg-query -W -f='${Version}' mariadb-server)
depends=$(dpkg-query -W -f='${Depends}' mariadb-plugin-tidesdb)
grep -qF "mariadb-server (= $server)" <<<"$depends" ||
  fail "the package does not depend on exactly mariadb-server $server"
for f in /usr/lib/mysql/plugin/ha_tidesdb.so /etc/mysql/mariadb.conf.d/60-tidesdb.cnf \
         /usr/bin/tidesdb-backup /usr/bin/wsrep_sst_tidesdb; do
  [ -e "$f" ] || fail "$f not installed"
done

rm -rf "$D"; mkdir -p "$D" /run/mysqld
mariadb-install-db --user=root --datadir="$D" >/dev/null 2>&1 || fail "mariadb-install-db"
start
[ "$(sql "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME='TidesDB'")" = ACTIVE ] ||
  fail "the package's config did not load the plugin"
sql "CREATE DATABASE t; CREATE TABLE t.a (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=TidesDB;
     INSERT INTO t.a VALUES (1,'one'),(2,'two')"
stop
start
[ "$(sql "SELECT GROUP_CONCAT(v ORDER BY id) FROM t.a")" = "one,two" ] || fail "rows lost across a restart"
create=$(sql "SHOW CREATE TABLE t.a")
grep -q "ENGINE=TidesDB" <<<"$create" || fail "the table is not TidesDB"
stop

apt-get remove -y -qq mariadb-plugin-tidesdb >/dev/null 2>&1 || fail "apt remove"
start
[ "$(sql "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE='TidesDB'")" = 0 ] ||
  fail "the engine is still loaded after apt remove"
stop
[ -d "$D/#tidesdb" ] || fail "apt remove took the engine's data"
apt-get purge -y -qq mariadb-plugin-tidesdb >/dev/null 2>&1 || fail "apt purge"
[ ! -e /etc/mysql/mariadb.conf.d/60-tidesdb.cnf ] || fail "apt purge left the config"
echo "test-deb-11.8: PASS ($(basename "$DEB") in MariaDB $server)"
