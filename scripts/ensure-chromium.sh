#!/bin/sh
# The dashboard's browser tests drive Debian's Chromium through playwright-core (never a downloaded browser).
# Installs it when /usr/bin/chromium is missing: as root with apt-get (CI), otherwise says what to run.
set -e
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: /usr/bin/chromium is missing; install Debian's package: sudo apt-get install chromium" >&2
  exit 1
fi
echo "ensure-chromium: installing Debian's chromium package" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
