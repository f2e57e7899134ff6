#!/bin/sh
# The container is healthy when the server answers its health-check account and
# TidesDB is loaded (SUPPORT YES or DEFAULT in information_schema.ENGINES).
set -e
cnf=/var/lib/mysql/.my-healthcheck.cnf
[ -f "$cnf" ] || exit 1
n=$(mariadb --defaults-extra-file="$cnf" -N -B -e \
  "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE = 'TidesDB' AND SUPPORT IN ('YES', 'DEFAULT')")
[ "$n" = 1 ]
