#!/usr/bin/env bash
# Links target/plugin/ha_tidesdb.so from the static library cargo built (the Rust
# engine with the C++ shim bundled in), then checks what it exports.
# Why a separate g++ link: docs/ARCHITECTURE.md, "Build chain".
# MARIADB=11.8: the build of target/build-11.8 into target/plugin-11.8/, with Debian
# 13's libmysqlservices.a from its root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${MARIADB:-10.11}" in
  10.11)
    LIB=${1:-$ROOT/target/release/libha_tidesdb.a}
    OUT=$ROOT/target/plugin/ha_tidesdb.so
    SERVICES_DIR=/usr/lib/x86_64-linux-gnu
    HEADERS=/usr/include/mariadb/server
    DPKG_ADMIN=/var/lib/dpkg ;;
  11.8)
    D13=${DEBIAN13_ROOT:-$ROOT/target/debian13-root}
    LIB=${1:-$ROOT/target/build-11.8/release/libha_tidesdb.a}
    OUT=$ROOT/target/plugin-11.8/ha_tidesdb.so
    SERVICES_DIR=$D13/usr/lib/x86_64-linux-gnu
    HEADERS=$ROOT/target/mariadb-src-11.8/server-include
    DPKG_ADMIN=$D13/var/lib/dpkg ;;
  *) echo "link-plugin: MARIADB=$MARIADB is not a supported server (10.11, 11.8)" >&2; exit 2 ;;
esac
# The server loads a storage engine only if built for its exact version: say so now,
# not at the server's refused load.
built_for=$(sed -n 's/^#define MYSQL_SERVER_VERSION[[:space:]]*"\([0-9.]*\).*/\1/p' "$HEADERS/mysql_version.h")
server=$(dpkg-query --admindir="$DPKG_ADMIN" -W -f='${Version}' mariadb-server-core 2>/dev/null || true)
server=${server#*:}; server=${server%%[-+]*}
if [ "$built_for" != "$server" ]; then
  echo "link-plugin: the headers are MariaDB $built_for but the installed server (mariadb-server-core in $DPKG_ADMIN) is ${server:-missing}; rerun make setup${MARIADB:+ MARIADB=$MARIADB}" >&2
  exit 1
fi
mkdir -p "$(dirname "$OUT")"
g++ -shared -o "$OUT.tmp" -L"$SERVICES_DIR" \
  -Wl,--version-script="$ROOT/handler-shim/exports.map" \
  -Wl,-u,_maria_plugin_interface_version_ \
  -Wl,-u,_maria_sizeof_struct_st_plugin_ \
  -Wl,-u,_maria_plugin_declarations_ \
  -Wl,--gc-sections -Wl,-O1 \
  "$LIB" -lmysqlservices -lpthread -ldl -lm
mv "$OUT.tmp" "$OUT"

# The server needs the plugin symbols and every service pointer the code uses; no
# Rust (or other internal) symbol may leak into the global table.
exports=$(nm -D --defined-only "$OUT" | awk '{print $3}')
for sym in _maria_plugin_interface_version_ _maria_sizeof_struct_st_plugin_ _maria_plugin_declarations_; do
  grep -qx "$sym" <<<"$exports" || { echo "link-plugin: $sym is not exported" >&2; exit 1; }
done
unexpected=$(grep -v -E '^(_maria_[a-z_]*|.*_service|provider_service_.*|print_check_msg_context)$' <<<"$exports" || true)
if [ -n "$unexpected" ]; then
  echo "link-plugin: unexpected exported symbols:" >&2; echo "$unexpected" >&2; exit 1
fi
# Every engine entry point the shim calls must be defined inside the plugin (the
# server resolves the rest at load time, so a missing one would only fail there).
missing=$(nm -D --undefined-only "$OUT" | awk '{print $2}' | grep '^tdb_' || true)
if [ -n "$missing" ]; then
  echo "link-plugin: engine functions the shim calls are not defined:" >&2; echo "$missing" >&2; exit 1
fi
# A STATIC_TLS library can break other plugins' loading (see the build facts).
if readelf -d "$OUT" | grep -q STATIC_TLS; then
  echo "link-plugin: $OUT has the STATIC_TLS flag" >&2; exit 1
fi
echo "link-plugin: $OUT ($(du -h "$OUT" | cut -f1)), exports: $(tr '\n' ' ' <<<"$exports")"
