#!/usr/bin/env bash
# `make server` / `make server-stop`: a MariaDB server of our own under var/, with
# ha_tidesdb.so loaded next to Debian's plugins and TidesDB as the default engine.
#   scripts/server.sh start | stop | status
# Settings (environment): TIDESDB_PORT (default 3399), TIDESDB_VAR (default var/);
# optional: TIDESDB_EXTRA_CNF (lines appended to the [mysqld] section of my.cnf),
# TIDESDB_PLUGIN (the ha_tidesdb.so to load, default target/plugin/ha_tidesdb.so).
# MARIADB=11.8: Debian 13's 11.8 server, run inside its Debian 13 root
# (scripts/debian13-run.sh: its own binaries, libraries and plugins, as on Debian 13;
# this checkout is mounted at the same path inside, so every path here means the same
# inside and out), under var-11.8/, port 3398, with target/plugin-11.8/ha_tidesdb.so.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${MARIADB:-10.11}" in
  10.11) IN_SERVER_ROOT=(); DEFAULT_VAR=$ROOT/var; DEFAULT_PORT=3399
         DEFAULT_PLUGIN=$ROOT/target/plugin/ha_tidesdb.so; SERVER_FS= ;;
  11.8)  IN_SERVER_ROOT=("$ROOT/scripts/debian13-run.sh"); DEFAULT_VAR=$ROOT/var-11.8; DEFAULT_PORT=3398
         DEFAULT_PLUGIN=$ROOT/target/plugin-11.8/ha_tidesdb.so
         SERVER_FS=${DEBIAN13_ROOT:-$ROOT/target/debian13-root} ;;
  *) echo "server: MARIADB=$MARIADB is not a supported server (10.11, 11.8)" >&2; exit 2 ;;
esac
VAR=${TIDESDB_VAR:-$DEFAULT_VAR}
PORT=${TIDESDB_PORT:-$DEFAULT_PORT}
DATA=$VAR/data
SOCK=$VAR/run/mysqld.sock
PIDFILE=$VAR/run/mysqld.pid
CNF=$VAR/my.cnf
PLUGIN_DIR=$VAR/plugin
LOG=$VAR/log/error.log
PLUGIN_SO=${TIDESDB_PLUGIN:-$DEFAULT_PLUGIN}
EXTRA_CNF=${TIDESDB_EXTRA_CNF:-}

# Alive and not a zombie (a killed server whose parent has not reaped it yet).
running() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE")
  kill -0 "$pid" 2>/dev/null && ! grep -qs '^[0-9]* ([^)]*) Z' "/proc/$pid/stat"
}

write_config() {
  mkdir -p "$VAR/run" "$VAR/log" "$PLUGIN_DIR"
  # --plugin-dir takes one folder: give it Debian's plugins and ours side by side.
  # (11.8: the links name the root's own plugins as the server sees them.)
  for p in "$SERVER_FS"/usr/lib/mysql/plugin/*; do ln -sfn "${p#"$SERVER_FS"}" "$PLUGIN_DIR/$(basename "$p")"; done
  ln -sfn "$PLUGIN_SO" "$PLUGIN_DIR/ha_tidesdb.so"
  cat > "$CNF" <<CNF
# Written by scripts/server.sh. The lines a server needs for TidesDB are marked (*).
[client]
socket = $SOCK
user = root

[mysqld]
datadir = $DATA
socket = $SOCK
port = $PORT
bind-address = 127.0.0.1
pid-file = $PIDFILE
log-error = $LOG
plugin-dir = $PLUGIN_DIR
plugin-load-add = ha_tidesdb.so          # (*)
plugin-maturity = beta                   # (*) the plugin declares itself beta
default-storage-engine = TidesDB
default-tmp-storage-engine = MyISAM
CNF
  if [ "$(id -u)" = 0 ]; then echo "user = root" >> "$CNF"; fi
  if [ -n "$EXTRA_CNF" ]; then
    printf '# From TIDESDB_EXTRA_CNF:\n%s\n' "$EXTRA_CNF" >> "$CNF"
  fi
}

start() {
  if running; then echo "server: already running (pid $(cat "$PIDFILE")); connect with: mariadb --defaults-file=$CNF"; return 0; fi
  [ -f "$PLUGIN_SO" ] || { echo "server: build the plugin first (make plugin)" >&2; exit 1; }
  write_config
  if [ ! -d "$DATA/mysql" ]; then
    # System tables are InnoDB/Aria: bootstrap without our plugin. Its own tmpdir:
    # bootstraps running at the same time in a shared /tmp failed now and then
    # ("Could not remove temporary table '/tmp/#sql-temptable-...'").
    mkdir -p "$VAR/tmp"
    "${IN_SERVER_ROOT[@]}" mariadb-install-db --no-defaults --datadir="$DATA" --user="$(id -un)" --tmpdir="$VAR/tmp" \
      --auth-root-authentication-method=normal --skip-test-db > "$VAR/log/install.log" 2>&1 \
      || { echo "server: mariadb-install-db failed, see $VAR/log/install.log" >&2; exit 1; }
  fi
  nohup "${IN_SERVER_ROOT[@]}" mariadbd --defaults-file="$CNF" >> "$VAR/log/stdout.log" 2>&1 &
  for _ in $(seq 1 120); do
    if "${IN_SERVER_ROOT[@]}" mariadb-admin --defaults-file="$CNF" ping >/dev/null 2>&1; then
      echo "server: running (pid $(cat "$PIDFILE")), TidesDB is the default engine."
      echo "  connect: mariadb --defaults-file=$CNF"
      echo "       or: mariadb -uroot --socket=$SOCK    (TCP: -h127.0.0.1 -P$PORT)"
      echo "  stop:    make server-stop${MARIADB:+ MARIADB=$MARIADB}"
      return 0
    fi
    if ! kill -0 "$!" 2>/dev/null; then break; fi
    sleep 0.5
  done
  echo "server: did not start; the end of $LOG:" >&2
  tail -n 30 "$LOG" >&2 || true
  exit 1
}

stop() {
  if ! running; then echo "server: not running"; return 0; fi
  local pid; pid=$(cat "$PIDFILE")
  kill "$pid"
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || { echo "server: stopped"; return 0; }; sleep 0.5; done
  echo "server: pid $pid did not stop in 60 s" >&2; exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running (pid $(cat "$PIDFILE"))"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
