#!/usr/bin/env bash
# `make docker`: the image tidesdb/mariadb:<package version> (and :latest) from docker/
# and the .deb of `make deb`.
#   - Docker: docker.io installed if missing, dockerd started if none answers
#     (`scripts/docker-image.sh daemon` does only that; its pid is written to
#     target/docker/dockerd.started when this script started it).
#   - The base: BASE_IMAGE if set (e.g. debian:bookworm from a registry); otherwise
#     Debian 12 made here, `debootstrap --variant=minbase bookworm` then `docker import`,
#     the root's tarball cached in target/docker/ (no registry needed). MARIADB=11.8
#     (a .deb for Debian 13's server): trixie instead (DEBIAN_SUITE overrides).
# Settings (environment): BASE_IMAGE, DEBIAN_MIRROR (default deb.debian.org), DEB (the
# .deb; default the newest in target/deb), IMAGE (default tidesdb/mariadb).
# Prints the image name (name:version) on its last line.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/target/docker
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGE=${IMAGE:-tidesdb/mariadb}
# The Debian release of the server the .deb was built for (MARIADB=11.8: Debian 13).
case "${MARIADB:-10.11}" in 11.8) def_suite=trixie ;; *) def_suite=bookworm ;; esac
SUITE=${DEBIAN_SUITE:-$def_suite}
LOCAL_BASE=tidesdb/debian-base:$SUITE
# docker.io's own client: a newer one found first on the PATH may expect BuildKit.
if [ -x /usr/bin/docker ]; then DOCKER=${DOCKER:-/usr/bin/docker}; else DOCKER=${DOCKER:-docker}; fi
mkdir -p "$WORK"
started=$(date +%s)
say() { echo "docker-image: [+$(( $(date +%s) - started ))s] $*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_daemon() {
  if [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/bin/docker ]; then
    say "installing docker.io"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io > /dev/null
    DOCKER=/usr/bin/docker
  fi
  if "$DOCKER" info > /dev/null 2>&1; then return 0; fi
  say "starting dockerd"
  if [ -d /run/systemd/system ]; then
    as_root systemctl start docker
  else
    # Debian's /etc/init.d/docker stops at `ulimit -n 1048576` where that is not
    # allowed (containers, sandboxes); dockerd itself runs fine.
    as_root setsid nohup dockerd > "$WORK/dockerd.log" 2>&1 < /dev/null &
  fi
  for _ in $(seq 1 60); do
    if "$DOCKER" info > /dev/null 2>&1; then
      # Its own pid file (setsid may fork, so not $!): who started it can stop it.
      [ -d /run/systemd/system ] || cp /var/run/docker.pid "$WORK/dockerd.started"
      return 0
    fi
    sleep 0.5
  done
  echo "docker-image: dockerd did not start; see $WORK/dockerd.log" >&2; exit 1
}

local_base() {
  if "$DOCKER" image inspect "$LOCAL_BASE" > /dev/null 2>&1; then return 0; fi
  local tarball=$WORK/debian-$SUITE-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap > /dev/null || as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends debootstrap > /dev/null
    say "debootstrap of Debian $SUITE (minbase) from $MIRROR"
    local dir=$WORK/rootfs-$SUITE
    as_root rm -rf "$dir"
    as_root debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
      || { tail -n 20 "$WORK/debootstrap.log" >&2; exit 1; }
    # As the official image: no package caches or lists in the base.
    as_root rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    # Not compressed: gzip took longer than docker import saves.
    as_root tar -C "$dir" --numeric-owner -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    as_root rm -rf "$dir"
  fi
  say "docker import of $tarball as $LOCAL_BASE"
  "$DOCKER" import "$tarball" "$LOCAL_BASE" > /dev/null
}

ensure_daemon
[ "${1:-}" = daemon ] && exit 0

# The newest build for the server series MARIADB names (make-deb's +mariadb<version>).
DEB=${DEB:-$(ls -t "$ROOT"/target/deb/mariadb-plugin-tidesdb_*+mariadb"${MARIADB:-10.11}".*_amd64.deb 2>/dev/null | head -n1)}
[ -f "$DEB" ] || { echo "docker-image: no .deb (make deb)" >&2; exit 1; }
version=$(dpkg-deb -f "$DEB" Version)
server=$(dpkg-deb -f "$DEB" Depends | sed -n 's/.*mariadb-server (= \([^)]*\)).*/\1/p')
[ -n "$server" ] || { echo "docker-image: $DEB names no exact mariadb-server" >&2; exit 1; }
if [ -n "${BASE_IMAGE:-}" ]; then base=$BASE_IMAGE; else local_base; base=$LOCAL_BASE; fi

CTX=$WORK/context
rm -rf "$CTX"; mkdir -p "$CTX"
cp "$ROOT"/docker/Dockerfile "$ROOT"/docker/*.sh "$ROOT"/docker/*.cnf "$CTX/"
cp "$DEB" "$CTX/mariadb-plugin-tidesdb.deb"
tag=${version//[^A-Za-z0-9_.-]/_}
say "building $IMAGE:$tag on $base (MariaDB $server)"
# Host networking for the build's apt-get: it works wherever the host's apt does.
"$DOCKER" build --network host --build-arg BASE_IMAGE="$base" --build-arg MARIADB_VERSION="$server" \
  -t "$IMAGE:$tag" -t "$IMAGE:latest" "$CTX" > "$WORK/build.log" 2>&1 \
  || { tail -n 30 "$WORK/build.log" >&2; exit 1; }
say "$IMAGE:$tag ($("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE:$tag" | awk '{printf "%d MB", $1/1e6}'))"
echo "$IMAGE:$tag"
