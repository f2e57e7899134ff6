#!/usr/bin/env bash
# `make deb`: target/deb/mariadb-plugin-tidesdb_<version>_amd64.deb, the plugin packaged
# as Debian packages MariaDB's own engines (mariadb-plugin-rocksdb is the model):
#   /usr/lib/mysql/plugin/ha_tidesdb.so        the plugin (stripped)
#   /usr/bin/tidesdb-backup                    when the build made one
#   /usr/bin/wsrep_sst_tidesdb                 Galera SST method (tools/sst), beside the
#                                              server's wsrep_sst_* scripts
#   /etc/mysql/mariadb.conf.d/60-tidesdb.cnf   the load line and the defaults (conffile)
#   /usr/share/doc/mariadb-plugin-tidesdb/     copyright, changelog.Debian.gz
# and Depends: on exactly the server packages it was built against: a plugin loads only
# into the server version whose headers it was compiled with, so apt refuses a
# mismatched server instead of the server refusing the plugin.
#
# Settings (environment), all with defaults for the system's MariaDB 10.11:
#   MARIADB          10.11 (default) or 11.8: picks the two below
#   PLUGIN_BUILD_DIR where ha_tidesdb.so (and tidesdb-backup) are
#                    (10.11: target/plugin, 11.8: target/plugin-11.8)
#   SERVER_ROOT      the system root whose installed mariadb-server the plugin was built
#                    for (10.11: /, 11.8: target/debian13-root); its dpkg database
#                    gives the exact version to depend on
#   DEB_VERSION      the package version (default <Cargo version>-1+mariadb<server>)
#   DEB_OUT          output folder (default target/deb)
#   DEB_SERVER_VERSION  the server version to depend on instead of the installed one
#                    (only for scripts/test-deb.sh's check that apt refuses a mismatch)
# Prints the path of the .deb on its last line.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MARIADB=${MARIADB:-10.11}
case "$MARIADB" in
  10.11) def_build=$ROOT/target/plugin; def_root=/ ;;
  11.8)  def_build=$ROOT/target/plugin-11.8; def_root=$ROOT/target/debian13-root ;;
  *) echo "make-deb: MARIADB=$MARIADB: supported servers are 10.11 and 11.8" >&2; exit 2 ;;
esac
BUILD=${PLUGIN_BUILD_DIR:-$def_build}
SERVER_ROOT=${SERVER_ROOT:-$def_root}
OUT=${DEB_OUT:-$ROOT/target/deb}
PKG=mariadb-plugin-tidesdb
SRC=$ROOT/packaging/deb
# Debian's plugin directory for both series (mariadbd --help --verbose: plugin-dir).
PLUGIN_DIR=/usr/lib/mysql/plugin
CNF_NAME=60-tidesdb.cnf

SO=$BUILD/ha_tidesdb.so
[ -f "$SO" ] || { echo "make-deb: no $SO (make plugin${MARIADB:+ MARIADB=$MARIADB} first)" >&2; exit 1; }

# The exact server this plugin was built for: the installed mariadb-server of that root.
server_version=$(dpkg-query --admindir="$SERVER_ROOT/var/lib/dpkg" -W -f='${Version}' mariadb-server 2>/dev/null || true)
[ -n "$server_version" ] || { echo "make-deb: no mariadb-server installed in $SERVER_ROOT" >&2; exit 1; }
core_version=$(dpkg-query --admindir="$SERVER_ROOT/var/lib/dpkg" -W -f='${Version}' mariadb-server-core 2>/dev/null || true)
[ "$core_version" = "$server_version" ] || {
  echo "make-deb: mariadb-server $server_version but mariadb-server-core '$core_version' in $SERVER_ROOT" >&2; exit 1; }
server_version=${DEB_SERVER_VERSION:-$server_version}
# (That the plugin was compiled with this server's headers is make setup's check:
# it installs the binaries and the headers of one version.)
upstream=${server_version#*:}; upstream=${upstream%%-*}
nm -D --defined-only "$SO" | grep -q _maria_plugin_declarations_ \
  || { echo "make-deb: $SO exports no plugin declaration" >&2; exit 1; }

cargo_version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)
VERSION=${DEB_VERSION:-$cargo_version-1+mariadb$upstream}
series=$(. "$SERVER_ROOT/etc/os-release" 2>/dev/null && echo "${VERSION_CODENAME:-unstable}")
[ -n "$series" ] || series=unstable
MAINT="TidesDB for MariaDB maintainers <maintainers@users.noreply.a-seed-d3f5a23e.example>"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}
commit=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

STAGE=$OUT/.stage-$MARIADB
rm -rf "$STAGE"; mkdir -p "$STAGE/DEBIAN" "$STAGE$PLUGIN_DIR" "$STAGE/etc/mysql/mariadb.conf.d" \
  "$STAGE/usr/share/doc/$PKG"

install -m 0644 "$SO" "$STAGE$PLUGIN_DIR/ha_tidesdb.so"
# Debian ships plugins stripped (debug info goes to -dbgsym packages); the dynamic
# symbols the server looks up stay.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$STAGE$PLUGIN_DIR/ha_tidesdb.so"
nm -D --defined-only "$STAGE$PLUGIN_DIR/ha_tidesdb.so" | grep -q _maria_plugin_declarations_ \
  || { echo "make-deb: stripping lost the plugin symbols" >&2; exit 1; }
binaries=()
# tidesdb-backup (the backup tool) ships when the build made it.
if [ -x "$BUILD/tidesdb-backup" ]; then
  mkdir -p "$STAGE/usr/bin"
  install -m 0755 "$BUILD/tidesdb-backup" "$STAGE/usr/bin/tidesdb-backup"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$STAGE/usr/bin/tidesdb-backup"
  binaries+=("$STAGE/usr/bin/tidesdb-backup")
  # Its manual page is its --help (as help2man makes one), so the two never disagree.
  if help_text=$("$BUILD/tidesdb-backup" --help 2>&1) && [ -n "$help_text" ]; then
    mkdir -p "$STAGE/usr/share/man/man1"
    {
      echo ".TH TIDESDB-BACKUP 1 \"$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)\" \"$PKG $VERSION\" \"User Commands\""
      echo ".SH NAME"
      echo "tidesdb-backup \\- online backup and restore of a MariaDB server's TidesDB tables"
      echo ".SH DESCRIPTION"
      echo ".nf"
      sed 's/\\/\\e/g; s/^\([.'"'"']\)/\\\&\1/' <<<"$help_text"
      echo ".fi"
      echo ".SH SEE ALSO"
      echo "/usr/share/doc/$PKG/"
    } | gzip -9n > "$STAGE/usr/share/man/man1/tidesdb-backup.1.gz"
    chmod 0644 "$STAGE/usr/share/man/man1/tidesdb-backup.1.gz"
  fi
fi
# The Galera state transfer method wsrep_sst_method=tidesdb, where the server looks
# for wsrep_sst_<method> (its own scripts' folder).
mkdir -p "$STAGE/usr/bin"
install -m 0755 "$ROOT/tools/sst/wsrep_sst_tidesdb" "$STAGE/usr/bin/wsrep_sst_tidesdb"
mkdir -p "$STAGE/usr/share/man/man1"
gzip -9n < "$SRC/wsrep_sst_tidesdb.1" > "$STAGE/usr/share/man/man1/wsrep_sst_tidesdb.1.gz"
chmod 0644 "$STAGE/usr/share/man/man1/wsrep_sst_tidesdb.1.gz"
install -m 0644 "$SRC/$CNF_NAME" "$STAGE/etc/mysql/mariadb.conf.d/$CNF_NAME"
install -m 0644 "$SRC/copyright" "$STAGE/usr/share/doc/$PKG/copyright"
# Lintian overrides, each with its reason, once there is one (none today).
if [ -f "$SRC/lintian-overrides" ]; then
  mkdir -p "$STAGE/usr/share/lintian/overrides"
  install -m 0644 "$SRC/lintian-overrides" "$STAGE/usr/share/lintian/overrides/$PKG"
fi

# changelog.Debian: this build's entry, then the project's released entries.
date_r=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
{
  echo "$PKG ($VERSION) $series; urgency=medium"
  echo
  echo "  * Built from commit $commit for mariadb-server $server_version."
  echo
  echo " -- $MAINT  $date_r"
  echo
  cat "$SRC/changelog"
} | gzip -9n > "$STAGE/usr/share/doc/$PKG/changelog.Debian.gz"
chmod 0644 "$STAGE/usr/share/doc/$PKG/changelog.Debian.gz"

# Shared library dependencies (libc6, libgcc-s1, libstdc++6, ...) as dpkg-shlibdeps
# computes them for a source package; it needs a debian/control to read.
SHL=$OUT/.shlibdeps-$MARIADB
rm -rf "$SHL"; mkdir -p "$SHL/debian"
printf 'Source: tidesdb\n\nPackage: %s\nArchitecture: amd64\n' "$PKG" > "$SHL/debian/control"
shlibs=$(cd "$SHL" && dpkg-shlibdeps -O -e"$STAGE$PLUGIN_DIR/ha_tidesdb.so" "${binaries[@]/#/-e}" 2>/dev/null \
  | sed -n 's/^shlibs:Depends=//p')
rm -rf "$SHL"
[ -n "$shlibs" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

installed_size=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
cat > "$STAGE/DEBIAN/control" <<CONTROL
Package: $PKG
Version: $VERSION
Architecture: amd64
Maintainer: $MAINT
Installed-Size: $installed_size
Depends: mariadb-server (= $server_version), mariadb-server-core (= $server_version), $shlibs
Suggests: mariadb-backup (= $server_version), galera-4
Section: database
Priority: optional
Description: TidesDB storage engine for MariaDB
 TidesDB is a transactional storage engine for MariaDB: ENGINE=TidesDB tables
 keep their rows in a log-structured merge tree (write-ahead log, memtables,
 sorted table files compacted in the background), written in Rust.
 .
 This package contains the TidesDB plugin for MariaDB $upstream and a
 configuration file that loads it. It works only with that exact server
 version, on which it depends.
CONTROL
echo "/etc/mysql/mariadb.conf.d/$CNF_NAME" > "$STAGE/DEBIAN/conffiles"
(cd "$STAGE" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$STAGE/DEBIAN/md5sums"
chmod 0644 "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/conffiles" "$STAGE/DEBIAN/md5sums"
find "$STAGE" -type d -exec chmod 0755 {} +

DEB=$OUT/${PKG}_${VERSION#*:}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
rm -rf "$STAGE"
echo "make-deb: $DEB (for mariadb-server $server_version$([ ${#binaries[@]} -gt 0 ] && echo ', with tidesdb-backup'))"
echo "$DEB"
