#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently:
#   - Debian's MariaDB 10.11 packages, pinned to the newest version for which BOTH the
#     binary packages and the source package can be downloaded, and held there;
#   - the server's private headers (include/, sql/, wsrep-lib/...) extracted from that
#     exact source package into $MARIADB_SRC_DIR (default target/mariadb-src/).
# The plugin loads only into the exact server version whose headers it was built with,
# which is why binaries and sources must match (docs/ARCHITECTURE.md, "Build chain").
set -euo pipefail
# MARIADB=11.8: Debian 13's 11.8 in a root of its own instead.
if [ "${MARIADB:-10.11}" = 11.8 ]; then exec bash "$(dirname "$0")/setup-mariadb-11.8.sh"; fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC_DIR=${MARIADB_SRC_DIR:-$ROOT/target/mariadb-src}
STAMP=$SRC_DIR/.complete
# Bump when the set of extracted folders changes, so that old caches are redone.
LAYOUT=2
PKGS="mariadb-server mariadb-client mariadb-test mariadb-test-data libmariadb-dev
      mariadb-plugin-rocksdb mariadb-common mariadb-client-core
      mariadb-server-core libmariadb3 libmariadbd-dev libmariadbd19 mariadb-backup"
EXTRA="build-essential pkg-config dpkg-dev xz-utils sysbench python3-matplotlib lintian"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

installed_version() { dpkg-query -W -f='${Version}' mariadb-server 2>/dev/null || true; }
header_version() {
  sed -n 's/^#define MYSQL_SERVER_VERSION[[:space:]]*"\([0-9.]*\).*/\1/p' \
    /usr/include/mariadb/server/mysql_version.h 2>/dev/null || true
}

# Fast path: packages installed and held, headers extracted for that version.
# (mariadb-backup, for tidesdb-backup, at the server's exact version.)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(installed_version) layout=$LAYOUT" ] \
   && [ -n "$(installed_version)" ] \
   && [ "$(dpkg-query -W -f='${Version}' mariadb-backup 2>/dev/null)" = "$(installed_version)" ]; then
  echo "setup: MariaDB $(installed_version) and its headers are in place"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# deb-src lines for the same suites as the binary ones.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && \
   ! grep -qs '^deb-src' /etc/apt/sources.list; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | as_root tee /etc/apt/sources.list.d/tidesdb-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
      | as_root tee /etc/apt/sources.list.d/tidesdb-src.list >/dev/null
  fi
fi
as_root apt-get update -qq

# Candidate versions, newest first; keep the first whose source package downloads.
mkdir -p "$SRC_DIR"
DL=$SRC_DIR/download
mkdir -p "$DL"
chosen=""
for v in $(apt-cache madison mariadb-server | awk -F'|' '{gsub(/ /,"",$2); print $2}' | sort -Vru); do
  if ls "$DL"/mariadb_"${v#*:}".dsc >/dev/null 2>&1 || \
     (cd "$DL" && apt-get source --download-only -qq "mariadb=$v" >/dev/null 2>&1); then
    chosen=$v; break
  fi
  echo "setup: source of mariadb $v is not served; trying an older version"
done
[ -n "$chosen" ] || { echo "setup: no MariaDB version has both binaries and source" >&2; exit 1; }
echo "setup: using MariaDB $chosen"

if [ "$(installed_version)" != "$chosen" ]; then
  as_root apt-mark unhold $PKGS >/dev/null 2>&1 || true
  spec=""
  for p in $PKGS; do spec="$spec $p=$chosen"; done
  as_root apt-get install -y -qq --allow-downgrades --no-install-recommends $spec $EXTRA
  as_root apt-mark hold $PKGS >/dev/null
else
  as_root apt-get install -y -qq --no-install-recommends $EXTRA
fi
# A systemd host starts the packaged server; ours runs from var/ instead.
as_root systemctl disable --now mariadb >/dev/null 2>&1 || true

# Extract only the header folders of the exact source.
upstream=${chosen#*:}; upstream=${upstream%%-*}
orig=$(ls "$DL"/mariadb_"$upstream".orig.tar.* | head -n1)
rm -rf "$SRC_DIR/tree"; mkdir -p "$SRC_DIR/tree"
# sql_class.h needs wsrep-lib's headers: Debian builds the server WITH_WSREP.
top=mariadb-$upstream
tar -xf "$orig" -C "$SRC_DIR/tree" --strip-components=1 \
  "$top/include" "$top/sql" "$top/wsrep-lib/include" "$top/wsrep-lib/wsrep-API/v26" \
  "$top/libservices" "$top/VERSION" "$top/storage/example"
mkdir -p "$SRC_DIR/generated"
cp "$SRC_DIR/tree/include/probes_mysql_nodtrace.h.in" "$SRC_DIR/generated/probes_mysql_nodtrace.h"

hv=$(header_version)
sv=$(sed -n 's/^MYSQL_VERSION_\(MAJOR\|MINOR\|PATCH\)=\([0-9]*\)/\2/p' "$SRC_DIR/tree/VERSION" | paste -sd.)
if [ "$hv" != "$sv" ]; then
  echo "setup: installed server headers say $hv but the source says $sv" >&2; exit 1
fi
echo "$chosen layout=$LAYOUT" > "$STAMP"
echo "setup: MariaDB $chosen installed and held; headers in $SRC_DIR/tree"
