#!/usr/bin/env bash
# `make test-docker`: builds the image (scripts/docker-image.sh: docker.io installed
# and dockerd started when missing, the Debian 12 base made by debootstrap when there
# is no registry), then, with a container of it:
#   - without a root password setting, the container refuses to initialise, saying why;
#   - with MARIADB_ROOT_PASSWORD and a script in /docker-entrypoint-initdb.d/, it
#     becomes healthy (its HEALTHCHECK), TidesDB is loaded and the default engine, the
#     script's table is a TidesDB table; a client connects over the network (TCP) as
#     root, creates a TidesDB table and writes rows;
#   - `docker restart`: the rows are there (the data volume kept them);
#   - MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_DATABASE and MARIADB_USER work.
# The container and its volume are removed at the end, and dockerd stopped if this
# test started it (DOCKER_KEEP_DAEMON=1 keeps it). Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/target/docker
started=$(date +%s)
say() { echo "test-docker: [+$(( $(date +%s) - started ))s] $*"; }
fail() { echo "test-docker: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (docker)"

was_running=no
if [ -x /usr/bin/docker ] && /usr/bin/docker info > /dev/null 2>&1; then was_running=yes; fi
rm -f "$WORK/dockerd.started"
image=$(bash "$ROOT/scripts/docker-image.sh" | tail -n1)
DOCKER=/usr/bin/docker
built=$(date +%s)
say "image $image ready after $((built - started)) s"

NAME=tidesdb-test-$$
VOL=tidesdb-test-data-$$
INIT=$WORK/test-initdb
PW='s3cret pass'
cleanup() {
  local rc=$?
  set +e
  if [ $rc != 0 ]; then "$DOCKER" logs --tail 40 "$NAME" 2>&1 | sed 's/^/  container: /' >&2; fi
  "$DOCKER" rm -f "$NAME" "$NAME-nopw" "$NAME-app" > /dev/null 2>&1
  "$DOCKER" volume rm -f "$VOL" > /dev/null 2>&1
  if [ $was_running = no ] && [ -z "${DOCKER_KEEP_DAEMON:-}" ] && [ -f "$WORK/dockerd.started" ]; then
    local pid; pid=$(cat "$WORK/dockerd.started")
    kill "$pid" 2> /dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    rm -f "$WORK/dockerd.started"
  fi
  [ $rc = 0 ] && say "PASS in $(( $(date +%s) - started )) s (image build $((built - started)) s)"
  exit $rc
}
trap cleanup EXIT

say "1. no root password setting: the container refuses, saying why"
if out=$("$DOCKER" run --name "$NAME-nopw" --network none "$image" 2>&1); then
  fail "a container without MARIADB_ROOT_PASSWORD & co initialised anyway"
fi
grep -q 'MARIADB_ROOT_PASSWORD' <<<"$out" || fail "no clear message without a password: $out"

say "2. a container with MARIADB_ROOT_PASSWORD and an init script"
rm -rf "$INIT"; mkdir -p "$INIT"
cat > "$INIT/10-schema.sql" <<'SQL'
CREATE DATABASE shop;
CREATE TABLE shop.orders (id INT PRIMARY KEY, item VARCHAR(40), qty INT);
INSERT INTO shop.orders VALUES (1, 'tide table', 2), (2, 'harbour chart', 1);
SQL
"$DOCKER" run -d --name "$NAME" -e MARIADB_ROOT_PASSWORD="$PW" -v "$VOL:/var/lib/mysql" \
  -v "$INIT:/docker-entrypoint-initdb.d:ro" "$image" > /dev/null

wait_healthy() {
  local s c=${1:-$NAME}
  for _ in $(seq 1 120); do
    s=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$c" 2> /dev/null || echo gone)
    case "$s" in healthy) return 0 ;; gone|unhealthy) break ;; esac
    [ "$("$DOCKER" inspect -f '{{.State.Running}}' "$c")" = true ] || break
    sleep 1
  done
  fail "container $c not healthy ($s)"
}
wait_healthy
ip=$("$DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$NAME")
# A client over TCP: from the host where the bridge network gives the container an
# address, else from inside the container (still TCP, to 127.0.0.1).
if [ -n "$ip" ] && mariadb -h "$ip" -uroot -p"$PW" -e 'SELECT 1' > /dev/null 2>&1; then
  sql() { mariadb -h "$ip" -P 3306 -uroot -p"$PW" -N -B -e "$1"; }; via="host -> $ip:3306"
else
  sql() { "$DOCKER" exec "$NAME" mariadb -h 127.0.0.1 --protocol=tcp -uroot -p"$PW" -N -B -e "$1"; }
  via="inside the container -> 127.0.0.1:3306"
fi
say "connected ($via)"
expect() { [ "$2" = "$3" ] || fail "$1: expected '$3', got '$2'"; }
expect "plugin" "$(sql "SELECT plugin_status, plugin_maturity FROM information_schema.plugins WHERE plugin_name = 'TidesDB'")" "ACTIVE	Beta"
expect "default engine" "$(sql "SELECT @@default_storage_engine")" TidesDB
expect "engine of the init script's table" "$(sql "SELECT engine FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = 'orders'")" TidesDB
expect "init script's rows" "$(sql "SELECT COUNT(*), SUM(qty) FROM shop.orders")" "2	3"
sql "USE shop; CREATE TABLE tides (id INT PRIMARY KEY, height DECIMAL(5,2)) ENGINE=TidesDB;
     INSERT INTO tides SELECT seq, seq / 10 FROM seq_1_to_500;"
expect "rows" "$(sql "SELECT COUNT(*), SUM(height) FROM shop.tides")" "500	12525.00"

say "3. docker restart: the rows are there"
"$DOCKER" restart "$NAME" > /dev/null
wait_healthy
if [ -n "$ip" ]; then ip=$("$DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$NAME"); fi
expect "rows after restart" "$(sql "SELECT COUNT(*), SUM(height) FROM shop.tides")" "500	12525.00"
expect "init script's rows after restart" "$(sql "SELECT COUNT(*), SUM(qty) FROM shop.orders")" "2	3"
# The log in a variable first: under pipefail, `docker logs | grep -q` fails whenever
# grep's early exit makes docker logs die of SIGPIPE.
container_log=$("$DOCKER" logs "$NAME" 2>&1)
grep -q "running /docker-entrypoint-initdb.d/10-schema.sql" <<<"$container_log" \
  || fail "the init script was not reported as run"
[ "$("$DOCKER" logs "$NAME" 2>&1 | grep -c 'initialising the data volume')" = 1 ] \
  || fail "the data volume was initialised again on restart"

say "4. MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_DATABASE, MARIADB_USER / MARIADB_PASSWORD"
"$DOCKER" run -d --name "$NAME-app" -e MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1 -e MARIADB_DATABASE=app \
  -e MARIADB_USER=appuser -e MARIADB_PASSWORD=apppw "$image" > /dev/null
wait_healthy "$NAME-app"
app_sql() { "$DOCKER" exec "$NAME-app" mariadb -h 127.0.0.1 --protocol=tcp "$@"; }
app_sql -uappuser -papppw app -e "CREATE TABLE t (a INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)"
expect "the user's table" "$(app_sql -uappuser -papppw -N -B -e "SELECT engine, table_rows > 0 FROM information_schema.tables WHERE table_schema = 'app'")" "TidesDB	1"
expect "root without a password" "$(app_sql -uroot -N -B -e 'SELECT COUNT(*) FROM app.t')" 2
if app_sql -uappuser -papppw -e "CREATE DATABASE other" > /dev/null 2>&1; then
  fail "MARIADB_USER got rights beyond MARIADB_DATABASE"
fi
