#!/usr/bin/env bash
# Makes sure a Debian package a test needs is on this machine (scripts/ensure-postgresql.sh, scripts/ensure-chromium.sh;
# `make test` runs both first). Usage: ensure-debian-package.sh NAME PACKAGE PATH_GLOB WHO
#   NAME: how its lines start; PACKAGE: the Debian package; PATH_GLOB: the file that shows it is there (a glob);
#   WHO: the tests that need it.
# A quick no-op when PATH_GLOB matches; otherwise it installs PACKAGE with apt-get, which needs root. Not root and
# missing: it says so and exits 0; the tests then skip with the reason, or fail when CI is set.
set -euo pipefail
name="$1" package="$2" glob="$3" who="$4"

if compgen -G "$glob" >/dev/null; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "$name: no $glob, and installing Debian's $package package needs root (sudo $0): $who will skip," \
        "or fail under CI" >&2
    exit 0
fi
echo "$name: installing Debian's $package package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends --no-upgrade "$package" >/dev/null
compgen -G "$glob" >/dev/null || {
    echo "$name: $package installed, yet no $glob" >&2
    exit 1
}
