#!/usr/bin/env bash
# Makes sure Debian's Chromium is on this machine for the docs site's browser tests (tests/unit/test_site.py drives
# /usr/bin/chromium with Playwright, pinned in requirements-dev.txt; Playwright's own browser download is not used).
# `make test` runs it first. A quick no-op when /usr/bin/chromium exists; otherwise it installs Debian's `chromium`
# package with apt-get, which needs root (scripts/ensure-debian-package.sh). Not root and missing: it says so and
# exits 0; those tests then skip with the reason, or fail when CI is set.
set -euo pipefail
exec bash "$(dirname "$0")/ensure-debian-package.sh" ensure-chromium chromium /usr/bin/chromium \
    "the docs site's browser tests"
