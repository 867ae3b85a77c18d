#!/usr/bin/env bash
# Makes sure a PostgreSQL server's binaries are on this machine for the SQL adapter's tests (tests/postgres_server.py
# runs initdb and pg_ctl from /usr/lib/postgresql/<version>/bin). `make test` runs it first.
# A quick no-op when they are there (Debian 12 machines of this project have PostgreSQL 15); otherwise it installs
# Debian's `postgresql` package with apt-get, which needs root. Not root and missing: it says so and exits 0; the
# tests then skip with the reason, or fail when CI is set (a skipped PostgreSQL test fails CI).
set -euo pipefail

if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-postgresql: no /usr/lib/postgresql/*/bin/initdb, and installing Debian's postgresql package needs" \
        "root (sudo $0): the PostgreSQL tests will skip, or fail under CI" >&2
    exit 0
fi
echo "ensure-postgresql: installing Debian's postgresql package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends --no-upgrade postgresql >/dev/null
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || {
    echo "ensure-postgresql: postgresql installed, yet no /usr/lib/postgresql/*/bin/initdb" >&2
    exit 1
}
