#!/usr/bin/env bash
# Screenshot of a run's HTML page (docs/demo.md, "The run's picture") in headless Chromium, Debian's package: installed
# with apt-get when missing (needs root). Offline: the page embeds everything, and Chromium's own calls out
# (background networking, component updates, sync, QUIC) are switched off.
# Usage: scripts/screenshot.sh [PAGE.html] [OUT.png]   (default: reports/demo-report.html -> reports/demo-report.png)
set -euo pipefail
page="$(realpath "${1:-reports/demo-report.html}")"
out="$(realpath -m "${2:-${page%.html}.png}")"
[[ -f "$page" ]] || { echo "no page at $page (run make demo first)" >&2; exit 1; }
if ! command -v chromium >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --screenshot="$out" \
  --window-size=1280,2000 "file://$page" 2>/dev/null
echo "screenshot: $out"
