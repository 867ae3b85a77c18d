#!/usr/bin/env bash
# Makes sure a PostgreSQL server's binaries are on this machine for the SQL adapter's tests (tests/postgres_server.py
# runs initdb and pg_ctl from /usr/lib/postgresql/<version>/bin). `make test` runs it first.
# A quick no-op when they are there (Debian 12 machines of this project have PostgreSQL 15); otherwise it installs
# Debian's `postgresql` package with apt-get, which needs root (scripts/ensure-debian-package.sh). Not root and
# missing: it says so and exits 0; the tests then skip with the reason, or fail when CI is set (a skipped PostgreSQL
# test fails CI).
set -euo pipefail
exec bash "$(dirname "$0")/ensure-debian-package.sh" ensure-postgresql postgresql \
    '/usr/lib/postgresql/*/bin/initdb' "the PostgreSQL tests"
