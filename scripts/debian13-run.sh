#!/usr/bin/env bash
# Runs a command inside the Debian 13 root that scripts/setup-mariadb-11.8.sh made
# (target/debian13-root), in a private mount namespace: /proc, /dev and this checkout
# (at the same absolute path, so paths mean the same inside and outside) are mounted for
# the command only and disappear with it; nothing is left mounted on the host.
#   scripts/debian13-run.sh [NAME=VALUE...] CMD [ARGS...]   (a clean environment + these)
# DEBIAN13_ROOT overrides the root's location.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROOT=${DEBIAN13_ROOT:-$ROOT/target/debian13-root}
[ -x "$CHROOT/usr/bin/env" ] || { echo "debian13-run: no Debian 13 root at $CHROOT (make setup MARIADB=11.8)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debian13-run: needs root (chroot, mount namespace)" >&2; exit 1; }
[ $# -gt 0 ] || set -- /bin/bash
mkdir -p "$CHROOT$ROOT"
# The checkout's target/ holds the root itself; mounting the checkout inside it is fine
# (a bind mount does not recurse into its own copy).
exec unshare --mount --propagation private -- /bin/sh -c '
  set -e
  c=$1; r=$2; shift 2
  mount -t proc proc "$c/proc"
  mount --rbind /dev "$c/dev"
  mount --bind "$r" "$c$r"
  exec chroot "$c" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive \
    "$@"
' sh "$CHROOT" "$ROOT" "$@"
