#!/usr/bin/env bash
# Takes the PNGs of the status page in docs/observability.md with headless
# Chromium (Debian's chromium):
#   docs/status-page.png             the scripted incident of the admin browser
#                                    test (a host down, one ejected, a client
#                                    attributed, a route on stale copies)
#   docs/img/status-healthy.png      the demo's site, all good
#   docs/img/status-one-host-down.png  one redundant backend down: one warning
#   docs/img/status-all-down.png     every backend down: one critical problem each
# The situations are internal/testing/scenes'; the tests that take the
# pictures assert what they show. Run from anywhere:
#   internal/ops/status/screenshot.sh [DOCS_DIR]   (default: the repository's docs)
# PNGs over 200 KB are shrunk with pngquant when it is installed
# (apt-get install -y pngquant).
set -euo pipefail
cd "$(dirname "$0")/../../.."
docs="${1:-docs}"
case "$docs" in /*) ;; *) docs="$PWD/$docs" ;; esac
mkdir -p "$docs/img"
rm -f "$docs/status-page.png" "$docs"/img/status-*.png
go test -count=1 -v -run '^TestStatusPage(InBrowser|SituationsInBrowser)$' ./internal/ops/admin \
  -args -screenshot="$docs/status-page.png" -screenshots="$docs/img" | grep -E 'SKIP|skipped|screenshot|FAIL|^(---|ok)' || true
for f in "$docs/status-page.png" "$docs"/img/status-{healthy,one-host-down,all-down}.png; do
  [ -s "$f" ] || { echo "no screenshot $f (is chromium installed? did the test fail?)" >&2; exit 1; }
  if [ "$(stat -c %s "$f")" -gt 200000 ] && command -v pngquant >/dev/null; then
    pngquant --force --skip-if-larger --strip --quality 70-95 --output "$f" -- "$f" || true
  fi
  echo "wrote $f ($(stat -c %s "$f") bytes)"
done
