#!/usr/bin/env bash
# Takes a PNG of the status page during the scripted incident of the admin
# browser test (a host down, one ejected, a client attributed, a route on stale
# copies), for docs/observability.md. Needs Debian's chromium.
#   internal/ops/status/screenshot.sh [OUT.png]   (default docs/status-page.png)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-docs/status-page.png}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
rm -f "$out"
go test -count=1 -v -run '^TestStatusPageInBrowser$' ./internal/ops/admin -args -screenshot="$out" | grep -E 'SKIP|skipped|screenshot|FAIL' || true
[ -s "$out" ] || { echo "no screenshot written (is chromium installed?)" >&2; exit 1; }
echo "wrote $out"
