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
LAYOUT=2
PKGS="mariadb-server mariadb-client mariadb-test mariadb-test-data mariadb-plugin-rocksdb
      mariadb-common mariadb-client-core mariadb-server-core libmariadb3 libmariadb-dev
      libmariadbd-dev libmariadbd19t64"
# Tools the tests run inside the root (mtr is Perl; conformance diffs; the bench).
EXTRA="perl patch diffutils procps python3 libdbd-mariadb-perl"
RUN="$ROOT/scripts/debian13-run.sh"
# Versions no longer in the index that Debian's pool still serves whole (source and
# binaries), newest first tried: 11.8.6 is the server of the published benchmark.
POOL_VERSIONS=${MARIADB_POOL_VERSIONS:-1:11.8.6-0+deb13u1}
POOL_URL=${MIRROR}/pool/main/m/mariadb
POOL=${MARIADB_POOL_CACHE:-$ROOT/target/mariadb-pool-11.8}
# The packages of a pool install (the index install's $PKGS and what their exact
# version depends on: compat packages, mariadb-backup, the lz4 provider).
POOL_PKGS="$PKGS mariadb-client-compat mariadb-server-compat mariadb-backup
      mariadb-plugin-provider-lz4"
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
# (the pool download: curl)
if ! command -v curl >/dev/null; then apt-get install -y -qq curl >/dev/null; fi
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

mkdir -p "$SRC_DIR/download" "$POOL"
upstream_of() { local u=${1#*:}; echo "${u%%-*}"; }
# Does MARIADB_SRC_TARBALL's name say it is the source of version $1?
tarball_is_of() {
  local u; u=$(upstream_of "$1")
  case "$(basename "$MARIADB_SRC_TARBALL")" in
    mariadb_"$u".orig.tar.*|mariadb-"${u%+*}".tar.*) return 0 ;;
  esac
  return 1
}
# fetch DIR NAME: the pool's file NAME into DIR, unless already there.
fetch() {
  [ -s "$1/$2" ] && return 0
  if curl -sfo "$1/$2.part" "$POOL_URL/$2"; then mv -f "$1/$2.part" "$1/$2"; else rm -f "$1/$2.part"; return 1; fi
}

# A version in Debian's pool but no longer in the index: its source package (.dsc,
# orig, debian tarballs; checked against the .dsc's Checksums-Sha256) and the binary
# packages of $POOL_PKGS, cached in $POOL/<version>/ and checked: each .deb is the
# package, version and architecture its name says, built from this source (the .dsc's
# Binary list), and, where scripts/mariadb-11.8-pool.sha256 lists it, has that sha256.
pool_fetch() {
  local v=$1 d u f p a ok dsc
  d=$POOL/${v#*:}; u=$(upstream_of "$v"); f=${v#*:}; dsc=mariadb_$f.dsc
  mkdir -p "$d"
  fetch "$d" "$dsc" || return 1
  # The source's files, as the .dsc lists them (name, size, sha256).
  sed -n '/^Checksums-Sha256:/,/^[^ ]/{/^ /p}' "$d/$dsc" > "$d/source.sha256"
  while read -r sum _ name; do
    fetch "$d" "$name" || return 1
    [ "$(sha256sum "$d/$name" | cut -d' ' -f1)" = "$sum" ] \
      || { echo "setup-11.8: $name does not match the sha256 of $dsc" >&2; rm -f "$d/$name"; return 1; }
  done < "$d/source.sha256"
  local binaries; binaries=$(sed -n 's/^Binary: //p' "$d/$dsc" | tr -d ' ' | tr ',' '\n')
  for p in $POOL_PKGS; do
    grep -qx "$p" <<<"$binaries" || { echo "setup-11.8: $dsc builds no $p" >&2; return 1; }
    ok=""
    for a in amd64 all; do
      local deb=${p}_${f}_$a.deb
      fetch "$d" "$deb" || continue
      local want; want=$(awk -v n="$deb" '$2==n {print $1}' "$ROOT/scripts/mariadb-11.8-pool.sha256")
      if [ -n "$want" ] && [ "$(sha256sum "$d/$deb" | cut -d' ' -f1)" != "$want" ]; then
        echo "setup-11.8: $deb differs from its sha256 in scripts/mariadb-11.8-pool.sha256" >&2; rm -f "$d/$deb"; return 1
      fi
      local src; src=$(dpkg-deb -f "$d/$deb" Source); src=${src:-$p}
      if [ "$(dpkg-deb -f "$d/$deb" Package) $(dpkg-deb -f "$d/$deb" Version) $(dpkg-deb -f "$d/$deb" Architecture) ${src%% *}" != "$p $v $a mariadb" ]; then
        echo "setup-11.8: $deb is not $p $v ($a) of the mariadb source" >&2; rm -f "$d/$deb"; return 1
      fi
      ok=1; break
    done
    [ -n "$ok" ] || { echo "setup-11.8: $p $v is not in the pool" >&2; return 1; }
  done
  return 0
}

# The version: the newest in Debian 13's index whose source package is served (or
# that MARIADB_SRC_TARBALL is the source of); else the newest of $POOL_VERSIONS whose
# source and binaries the pool still serves (the pool cannot be listed: the mirror
# answers 404 for its folders, so the candidates are named).
versions=$(in_root apt-cache madison mariadb-server | awk -F'|' '{gsub(/ /,"",$2); print $2}' | sort -Vru)
[ -n "$versions" ] || { echo "setup-11.8: the Debian 13 index has no mariadb-server" >&2; exit 1; }
chosen=""; orig=""; from=""
for v in $versions; do
  if [ -n "${MARIADB_SRC_TARBALL:-}" ]; then
    if tarball_is_of "$v"; then chosen=$v; orig=$MARIADB_SRC_TARBALL; from=index; break; fi
    continue
  fi
  if ls "$SRC_DIR/download"/mariadb_"${v#*:}".dsc >/dev/null 2>&1 || \
     in_root /bin/sh -c "cd '$SRC_DIR/download' && apt-get source --download-only -qq 'mariadb=$v'" >/dev/null 2>&1; then
    chosen=$v; orig=$(ls "$SRC_DIR/download"/mariadb_"$(upstream_of "$v")".orig.tar.* | head -n1); from=index; break
  fi
  echo "setup-11.8: the source package of mariadb $v (Debian 13's index) is not served (404)"
done
if [ -z "$chosen" ]; then
  for v in $(printf '%s\n' $POOL_VERSIONS | sort -Vru); do
    if [ -n "${MARIADB_SRC_TARBALL:-}" ] && ! tarball_is_of "$v"; then continue; fi
    echo "setup-11.8: trying mariadb $v from Debian's pool ($POOL_URL)"
    if pool_fetch "$v"; then
      chosen=$v; from=pool
      orig=${MARIADB_SRC_TARBALL:-$(ls "$POOL/${v#*:}"/mariadb_"$(upstream_of "$v")".orig.tar.* | head -n1)}
      break
    fi
  done
fi
if [ -z "$chosen" ]; then
  if [ -n "${MARIADB_SRC_TARBALL:-}" ]; then
    echo "setup-11.8: MARIADB_SRC_TARBALL=$MARIADB_SRC_TARBALL is the source of none of: $versions $POOL_VERSIONS (give mariadb_<upstream>.orig.tar.* or mariadb-X.Y.Z.tar.*)" >&2
  else
    echo "setup-11.8: neither Debian 13's index ($versions) nor the pool ($POOL_VERSIONS) serves an 11.8 whose binaries and source package both download; give MARIADB_POOL_VERSIONS, or MARIADB_SRC_TARBALL for one of them" >&2
  fi
  exit 3
fi
echo "setup-11.8: using MariaDB $chosen (from Debian's $from)"
if [ "$(installed_version)" != "$chosen" ]; then
  in_root apt-mark unhold $PKGS $POOL_PKGS >/dev/null 2>&1 || true
  if [ "$from" = index ]; then
    spec=""; for p in $PKGS; do spec="$spec $p=$chosen"; done
    in_root apt-get install -y -qq --allow-downgrades --no-install-recommends $spec $EXTRA
  else
    # The pool's .debs; their dependencies from trixie's index.
    in_root /bin/sh -c "cd '$POOL/${chosen#*:}' && apt-get install -y -qq --allow-downgrades --no-install-recommends ./*_${chosen#*:}_*.deb $EXTRA"
  fi
else
  in_root apt-get install -y -qq --no-install-recommends $EXTRA
fi
if [ "$from" = index ]; then in_root apt-mark hold $PKGS >/dev/null; else in_root apt-mark hold $POOL_PKGS >/dev/null; fi
[ "$(installed_version)" = "$chosen" ] || { echo "setup-11.8: mariadb-server $chosen did not install" >&2; exit 1; }

# Debian's patches (debian/patches of that source) change no header: the plugin
# compiles against the orig's headers. Refuse a source where one does.
deb_tar=$(ls "$SRC_DIR/download"/mariadb_"${chosen#*:}".debian.tar.* "$POOL/${chosen#*:}"/mariadb_"${chosen#*:}".debian.tar.* 2>/dev/null | head -n1 || true)
if [ -n "$deb_tar" ]; then
  rm -rf "$SRC_DIR/debian"; mkdir -p "$SRC_DIR/debian"
  tar -xf "$deb_tar" -C "$SRC_DIR/debian" debian/patches
  touched=$(cat "$SRC_DIR/debian/debian/patches"/*.patch 2>/dev/null | sed -n 's|^+++ b/||p' | awk '{print $1}' \
            | grep -E '^(include|sql|wsrep-lib|libservices)/.*\.(h|hpp|ic|inl)$' || true)
  if [ -n "$touched" ]; then
    echo "setup-11.8: Debian's patches of $chosen change headers the plugin compiles with: $touched" >&2; exit 1
  fi
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
