#!/bin/sh
# The PgBouncer tests and `npm run faults -- --pgbouncer` run Debian's pgbouncer (transaction mode, started by
# scripts/pgbouncer.ts on a loopback port). Installs it when /usr/sbin/pgbouncer is missing: as root with apt-get
# (CI), otherwise says what to run. The Debian package's own service is left stopped: the tests start their own.
set -e
[ -x /usr/sbin/pgbouncer ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-pgbouncer: /usr/sbin/pgbouncer is missing; install Debian's package: sudo apt-get install pgbouncer" >&2
  exit 1
fi
echo "ensure-pgbouncer: installing Debian's pgbouncer package" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
