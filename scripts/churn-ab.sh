#!/usr/bin/env bash
# Update churn, A/B: two servers of our own run at once, A with plugin $1 (e.g. a
# saved older build) and B with plugin $2 (default: target/plugin/ha_tidesdb.so),
# each with InnoDB too. Per server and engine: sysbench prepare (1 x 10,000 rows),
# oltp_write_only 8 threads 30 s (with the default 64 MiB write buffer nothing is
# flushed: the memtable holds every version, hot rows ~1000 of them), then
# oltp_read_only 1 and 8 threads 10 s. Prints tx/s. Ports: CHURN_PORTS (default
# "3443 3444"). docs/PROFILING.md (session 4) has a run.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A_SO=$(realpath "${1:?usage: churn-ab.sh <plugin A .so> [plugin B .so]}")
B_SO=$(realpath "${2:-$ROOT/target/plugin/ha_tidesdb.so}")
read -r PA PB <<<"${CHURN_PORTS:-3443 3444}"
cd "$ROOT"
srv() { TIDESDB_PORT=$2 TIDESDB_VAR=$ROOT/target/churn-ab-$1 TIDESDB_PLUGIN=${3:-} bash scripts/server.sh "$4" >/dev/null 2>&1; }
rm -rf target/churn-ab-A target/churn-ab-B
srv A "$PA" "$A_SO" start || { echo "server A did not start"; exit 1; }
srv B "$PB" "$B_SO" start || { echo "server B did not start"; srv A "$PA" "" stop; exit 1; }
sb() { # server engine test threads secs [prepare]
  local S=$ROOT/target/churn-ab-$1/run/mysqld.sock
  local base=(sysbench --db-driver=mysql --mysql-user=root --mysql-socket="$S" --mysql-db="sb_$2"
    --mysql-storage-engine="$2" --tables=1 --table-size=10000 --rand-seed=20240601
    --mysql-ignore-errors=1213,1205,1020,1180)
  if [ "$3" = prepare ]; then "${base[@]}" oltp_common prepare >/dev/null 2>&1; return; fi
  "${base[@]}" --threads="$4" --time="$5" "$3" run | sed -n 's/.*transactions:.*(\(.*\) per sec.*/\1/p'
}
for L in A B; do
  for E in innodb tidesdb; do
    mariadb -uroot --socket="$ROOT/target/churn-ab-$L/run/mysqld.sock" -e "CREATE DATABASE sb_$E"
    sb $L $E prepare
  done
done
for L in A B; do
  for E in innodb tidesdb; do
    w=$(sb $L $E oltp_write_only 8 30); r1=$(sb $L $E oltp_read_only 1 10); r8=$(sb $L $E oltp_read_only 8 10)
    echo "server $L $E: write_only 8 thr $w, then read_only 1 thr $r1, 8 thr $r8 (tx/s)"
  done
done
srv A "$PA" "" stop
srv B "$PB" "" stop
