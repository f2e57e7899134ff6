#!/usr/bin/env bash
# What the Galera suite (mysql-test/tidesdb_galera) needs besides the server,
# idempotently: mariadb-backup at exactly the server's version (the SST method;
# rsync SST fails on Debian 12, docs: mariadb-build-facts.md), held with it;
# galera-4 and socat come with mariadb-server.
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
v=$(dpkg-query -W -f='${Version}' mariadb-server)
if [ "$(dpkg-query -W -f='${Version}' mariadb-backup 2>/dev/null || true)" != "$v" ]; then
  as_root apt-get install -y -qq --allow-downgrades --no-install-recommends "mariadb-backup=$v"
  as_root apt-mark hold mariadb-backup >/dev/null
fi
echo "setup-galera: mariadb-backup $v, $(dpkg-query -W -f='galera-4 ${Version}' galera-4)"
