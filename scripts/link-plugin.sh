#!/usr/bin/env bash
# Links target/plugin/ha_tidesdb.so from the static library cargo built (the Rust
# engine with the C++ shim bundled in), then checks what it exports.
# Why a separate g++ link: docs/ARCHITECTURE.md, "Build chain".
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB=${1:-$ROOT/target/release/libha_tidesdb.a}
OUT=$ROOT/target/plugin/ha_tidesdb.so
mkdir -p "$(dirname "$OUT")"
g++ -shared -o "$OUT.tmp" \
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
