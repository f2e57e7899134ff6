#!/usr/bin/env bash
# `make setup MARIADB=11.8`: MariaDB 11.8 LTS beside the system's 10.11, idempotently.
#   - a Debian 13 (trixie) root made by debootstrap in $DEBIAN13_ROOT
#     (default target/debian13-root), with Debian 13's own mariadb-server, mariadb-test
#     (mysql-test-run and the suites), mariadb-plugin-rocksdb (the bench's peer) and
#     libmariadbd-dev / libmariadb-dev (the generated server headers and
#     libmysqlservices.a of that build), all of the newest version for which both the
#     binaries and the source package are served, and held there;
#   - that source package's private headers (include/, sql/, wsrep-lib/...) extracted
#     into $MARIADB_SRC_DIR (default target/mariadb-src-11.8/).
# The 11.8 server runs inside the root (scripts/debian13-run.sh): its binaries, plugins,
# mtr and libraries are Debian 13's, unchanged, as a user on Debian 13 has them.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROOT=${DEBIAN13_ROOT:-$ROOT/target/debian13-root}
SRC_DIR=${MARIADB_SRC_DIR:-$ROOT/target/mariadb-src-11.8}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
STAMP=$SRC_DIR/.complete
LAYOUT=1
PKGS="mariadb-server mariadb-client mariadb-test mariadb-test-data mariadb-plugin-rocksdb
      mariadb-common mariadb-client-core mariadb-server-core libmariadb3 libmariadb-dev
      libmariadbd-dev libmariadbd19t64"
# Tools the tests run inside the root (mtr is Perl; conformance diffs; the bench).
EXTRA="perl patch diffutils procps python3 libdbd-mariadb-perl"
RUN="$ROOT/scripts/debian13-run.sh"
[ "$(id -u)" = 0 ] || { echo "setup-11.8: run as root (debootstrap, chroot)" >&2; exit 1; }

in_root() { DEBIAN13_ROOT=$CHROOT "$RUN" "$@"; }
installed_version() { in_root dpkg-query -W -f='${Version}' mariadb-server 2>/dev/null || true; }

if [ -f "$STAMP" ] && [ -x "$CHROOT/usr/sbin/mariadbd" ] \
   && [ "$(cat "$STAMP")" = "$(installed_version) layout=$LAYOUT" ]; then
  echo "setup-11.8: MariaDB $(installed_version) (Debian 13 root $CHROOT) and its headers are in place"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v debootstrap >/dev/null; then apt-get install -y -qq debootstrap >/dev/null; fi
if [ ! -x "$CHROOT/usr/bin/apt-get" ] || [ ! -f "$CHROOT/.debootstrap-done" ]; then
  rm -rf "$CHROOT"; mkdir -p "$(dirname "$CHROOT")"
  echo "setup-11.8: debootstrap trixie into $CHROOT"
  debootstrap --variant=minbase trixie "$CHROOT" "$MIRROR" > "$CHROOT.debootstrap.log" 2>&1 \
    || { echo "setup-11.8: debootstrap failed, see $CHROOT.debootstrap.log" >&2; exit 1; }
  touch "$CHROOT/.debootstrap-done"
fi
# Binary and source indexes of the same suites; no service may start in the root.
cat > "$CHROOT/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb deb-src
URIs: $MIRROR
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
rm -f "$CHROOT/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' > "$CHROOT/usr/sbin/policy-rc.d"; chmod +x "$CHROOT/usr/sbin/policy-rc.d"
cp -L /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
in_root apt-get update -qq

mkdir -p "$SRC_DIR/download"
# The newest version whose source package downloads; a source tarball of the exact
# version given in MARIADB_SRC_TARBALL (Debian's orig.tar or MariaDB's own
# mariadb-X.Y.Z.tar.gz) stands in for a source package that is not served.
versions=$(in_root apt-cache madison mariadb-server | awk -F'|' '{gsub(/ /,"",$2); print $2}' | sort -Vru)
[ -n "$versions" ] || { echo "setup-11.8: the Debian 13 index has no mariadb-server" >&2; exit 1; }
chosen=""; orig=""
for v in $versions; do
  u=${v#*:}; u=${u%%-*}
  if [ -n "${MARIADB_SRC_TARBALL:-}" ]; then
    case "$(basename "$MARIADB_SRC_TARBALL")" in
      mariadb_"$u".orig.tar.*|mariadb-"${u%+*}".tar.*) chosen=$v; orig=$MARIADB_SRC_TARBALL; break ;;
    esac
    continue
  fi
  if ls "$SRC_DIR/download"/mariadb_"${v#*:}".dsc >/dev/null 2>&1 || \
     in_root /bin/sh -c "cd '$SRC_DIR/download' && apt-get source --download-only -qq 'mariadb=$v'" >/dev/null 2>&1; then
    chosen=$v; orig=$(ls "$SRC_DIR/download"/mariadb_"$u".orig.tar.* | head -n1); break
  fi
  echo "setup-11.8: the source package of mariadb $v is not served (404)"
done
# Without a source the newest binaries are installed all the same (the root is then
# ready but the plugin cannot be built: see the message below).
[ -n "$chosen" ] || chosen=$(head -n1 <<<"$versions")
echo "setup-11.8: using MariaDB $chosen"
if [ "$(installed_version)" != "$chosen" ]; then
  in_root apt-mark unhold $PKGS >/dev/null 2>&1 || true
  spec=""; for p in $PKGS; do spec="$spec $p=$chosen"; done
  in_root apt-get install -y -qq --allow-downgrades --no-install-recommends $spec $EXTRA
  in_root apt-mark hold $PKGS >/dev/null
else
  in_root apt-get install -y -qq --no-install-recommends $EXTRA
fi

if [ -z "$orig" ] && [ -n "${MARIADB_SRC_TARBALL:-}" ]; then
  u=${chosen#*:}; u=${u%%-*}
  echo "setup-11.8: MARIADB_SRC_TARBALL=$MARIADB_SRC_TARBALL is not the source of an offered version; for $chosen give mariadb_$u.orig.tar.* or mariadb-${u%+*}.tar.*" >&2
  exit 3
fi
if [ -z "$orig" ]; then
  u=${chosen#*:}; u=${u%%-*}
  cat >&2 <<MSG
setup-11.8: MariaDB $chosen is installed in $CHROOT, but no version in Debian 13's
  index has its source package served (404), and the plugin needs the private headers
  (sql/handler.h, ...) of exactly the installed server. Give the source tarball of
  that version and rerun:
    make setup MARIADB=11.8 MARIADB_SRC_TARBALL=/path/to/mariadb_$u.orig.tar.xz
  (or MariaDB's own mariadb-${u%+*}.tar.gz).
MSG
  exit 3
fi
rm -rf "$SRC_DIR/tree"; mkdir -p "$SRC_DIR/tree"
# (the listing stops at its first line: tar's SIGPIPE is expected)
top=$( (tar -tf "$orig" || true) | head -n1 | cut -d/ -f1)
# sql/ (handler.h, sql_class.h, vector_mhnsw.h ...), wsrep-lib (Debian builds WITH_WSREP).
tar -xf "$orig" -C "$SRC_DIR/tree" --strip-components=1 \
  "$top/include" "$top/sql" "$top/wsrep-lib/include" "$top/wsrep-lib/wsrep-API/v26" \
  "$top/libservices" "$top/VERSION" "$top/storage/example"
# The generated headers of Debian 13's own build (my_config.h, mysql_version.h, ...).
ln -sfn "$CHROOT/usr/include/mariadb/server" "$SRC_DIR/server-include"

hv=$(sed -n 's/^#define MYSQL_SERVER_VERSION[[:space:]]*"\([0-9.]*\).*/\1/p' "$SRC_DIR/server-include/mysql_version.h")
sv=$(sed -n 's/^MYSQL_VERSION_\(MAJOR\|MINOR\|PATCH\)=\([0-9]*\)/\2/p' "$SRC_DIR/tree/VERSION" | paste -sd.)
if [ "$hv" != "$sv" ]; then
  echo "setup-11.8: the root's server headers say $hv but the source says $sv" >&2; exit 1
fi
echo "$chosen layout=$LAYOUT" > "$STAMP"
echo "setup-11.8: MariaDB $chosen in $CHROOT (held); headers in $SRC_DIR/tree"
