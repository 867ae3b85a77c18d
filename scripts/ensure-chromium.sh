#!/usr/bin/env bash
# Makes sure Debian's Chromium is on this machine for the docs site's browser tests (tests/unit/test_site.py drives
# /usr/bin/chromium with Playwright, pinned in requirements-dev.txt; Playwright's own browser download is not used).
# `make test` runs it first. A quick no-op when /usr/bin/chromium exists; otherwise it installs Debian's `chromium`
# package with apt-get, which needs root. Not root and missing: it says so and exits 0; those tests then skip with
# the reason, or fail when CI is set.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-chromium: no /usr/bin/chromium, and installing Debian's chromium package needs root (sudo $0):" \
        "the docs site's browser tests will skip, or fail under CI" >&2
    exit 0
fi
echo "ensure-chromium: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends --no-upgrade chromium >/dev/null
[ -x /usr/bin/chromium ] || {
    echo "ensure-chromium: chromium installed, yet no /usr/bin/chromium" >&2
    exit 1
}
