#!/bin/bash
# The image's entrypoint, after the official MariaDB image's: on an empty data volume
# it creates the system tables, sets the root password (MARIADB_ROOT_PASSWORD, or
# MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1, or MARIADB_RANDOM_ROOT_PASSWORD=1, which prints
# it), creates MARIADB_DATABASE and MARIADB_USER / MARIADB_PASSWORD (with all rights
# on that database), runs /docker-entrypoint-initdb.d/*.sql, *.sql.gz and *.sh once,
# then runs the server in the foreground. A data volume that is already initialised
# is used as it is. `docker run IMAGE --some-option` passes options to mariadbd.
set -euo pipefail
shopt -s nullglob

log() { echo "$(date -u '+%F %T') 0 [Note] [Entrypoint]: $*"; }
die() { echo "$(date -u '+%F %T') 0 [ERROR] [Entrypoint]: $*" >&2; exit 1; }

if [ "${1:0:1}" = - ]; then set -- mariadbd "$@"; fi
if [ "$1" != mariadbd ] && [ "$1" != mysqld ]; then exec "$@"; fi
shift
DATADIR=/var/lib/mysql
SOCK=/run/mysqld/mysqld.sock
mkdir -p /run/mysqld
chown mysql:mysql /run/mysqld "$DATADIR"

# VAR or the contents of the file VAR_FILE names (Docker secrets), as the official image.
file_env() {
  local var=$1 file_var="${1}_FILE"
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then die "both $var and $file_var are set"; fi
  if [ -n "${!file_var:-}" ]; then export "$var"="$(< "${!file_var}")"; fi
}
sql_escape() { local s=${1//\\/\\\\}; printf '%s' "${s//\'/\\\'}"; }

init_datadir() {
  file_env MARIADB_ROOT_PASSWORD
  file_env MARIADB_PASSWORD
  if [ -z "${MARIADB_ROOT_PASSWORD:-}" ] && [ -z "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" ] \
     && [ -z "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
    die "the data volume is empty and no root password is given: set one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD"
  fi
  if [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
    MARIADB_ROOT_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    log "GENERATED ROOT PASSWORD: $MARIADB_ROOT_PASSWORD"
  fi
  log "initialising the data volume"
  mariadb-install-db --user=mysql --datadir="$DATADIR" --skip-test-db \
    --auth-root-authentication-method=normal --skip-name-resolve > /dev/null
  # A server only for this: no network, its own socket.
  mariadbd --user=mysql --datadir="$DATADIR" --skip-networking --socket="$SOCK" \
    --default-storage-engine=TidesDB "$@" &
  local pid=$!
  for _ in $(seq 1 60); do
    mariadb-admin --socket="$SOCK" -uroot ping > /dev/null 2>&1 && break
    kill -0 $pid 2> /dev/null || die "the server did not start for the initialisation"
    sleep 0.5
  done
  local root_pw host=${MARIADB_ROOT_HOST:-%} hc_pw
  root_pw=$(sql_escape "${MARIADB_ROOT_PASSWORD:-}")
  hc_pw=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  {
    echo "SET SESSION sql_log_bin = 0;"
    # Only root@localhost of what mariadb-install-db made (it adds root@<hostname>,
    # whose name is the build container's).
    echo "DELETE FROM mysql.global_priv WHERE user = '' OR (user = 'root' AND host <> 'localhost');"
    echo "DELETE FROM mysql.proxies_priv WHERE host <> 'localhost';"
    echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$root_pw';"
    if [ "$host" != localhost ]; then
      echo "CREATE USER 'root'@'$(sql_escape "$host")' IDENTIFIED BY '$root_pw';"
      echo "GRANT ALL ON *.* TO 'root'@'$(sql_escape "$host")' WITH GRANT OPTION;"
    fi
    # The health check's own account: it may connect, nothing else.
    echo "CREATE USER 'healthcheck'@'localhost' IDENTIFIED BY '$hc_pw';"
    if [ -n "${MARIADB_DATABASE:-}" ]; then
      echo "CREATE DATABASE IF NOT EXISTS \`${MARIADB_DATABASE//\`/\`\`}\`;"
    fi
    if [ -n "${MARIADB_USER:-}" ]; then
      echo "CREATE USER '$(sql_escape "$MARIADB_USER")'@'%' IDENTIFIED BY '$(sql_escape "${MARIADB_PASSWORD:-}")';"
      if [ -n "${MARIADB_DATABASE:-}" ]; then
        echo "GRANT ALL ON \`${MARIADB_DATABASE//\`/\`\`}\`.* TO '$(sql_escape "$MARIADB_USER")'@'%';"
      fi
    fi
    echo "FLUSH PRIVILEGES;"
  } | mariadb --socket="$SOCK" -uroot
  printf '[client]\nuser=healthcheck\npassword=%s\nsocket=%s\n' "$hc_pw" "$SOCK" > "$DATADIR/.my-healthcheck.cnf"
  chown mysql:mysql "$DATADIR/.my-healthcheck.cnf"; chmod 0600 "$DATADIR/.my-healthcheck.cnf"

  local client=(mariadb --socket="$SOCK" -uroot --password="${MARIADB_ROOT_PASSWORD:-}")
  [ -n "${MARIADB_DATABASE:-}" ] && client+=("$MARIADB_DATABASE")
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) log "running $f"; . "$f" ;;
      *.sql) log "running $f"; "${client[@]}" < "$f" ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | "${client[@]}" ;;
      *.sql.xz) log "running $f"; xz -dc "$f" | "${client[@]}" ;;
      *) log "ignoring $f" ;;
    esac
  done
  mariadb-admin --socket="$SOCK" -uroot --password="${MARIADB_ROOT_PASSWORD:-}" shutdown
  wait $pid || true
  log "data volume initialised"
}

if [ ! -d "$DATADIR/mysql" ]; then init_datadir "$@"; fi
exec mariadbd --user=mysql "$@"
