#!/usr/bin/env bash
# bench/rss.sh: resident memory of sturdy's release build at idle and under
# the 1 KiB, 64-connection load of bench/run.sh (issue 33's memory targets:
# at most 15 MiB at idle, 20 MiB under load).
#
# Each round starts a fresh sturdy (bench/conf/sturdy.yaml, GOMAXPROCS=1,
# pinned to CPU 1; the origin and wrk on CPU 0), reads /proc/PID/status after
# IDLE seconds (VmRSS, and its split into RssAnon and RssFile: the binary's
# own pages are almost all of RssFile), then runs wrk -t2 -c64 for DURATION
# seconds and reads them again, with VmHWM (the peak).
#
# Usage: bench/rss.sh
# Environment:
#   ROUNDS=2 IDLE=5 DURATION=10 CONNS=64 BODY=1k
#   STURDY=PATH   a sturdy binary to measure instead of building the release
#                 build (CGO_ENABLED=0 go build -trimpath -ldflags "-s -w")
#                 of ./cmd/sturdy
#   GODEBUG, GOGC, GOMEMLIMIT are passed on to sturdy as set
#   SMAPS=1       also print sturdy's /proc/PID/smaps_rollup at idle and
#                 after the load
#
# Loopback only, on ports of its own (origin 127.0.0.1:18180, sturdy
# 127.0.0.1:18181) so that it can run beside bench/run.sh. Every process
# started is stopped by PID on exit.
set -euo pipefail

ROUNDS=${ROUNDS:-2}
IDLE=${IDLE:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
BODY=${BODY:-1k}
STURDY=${STURDY:-}
SMAPS=${SMAPS:-0}
BENCH_TAG=rss
BIND=127.0.0.1
ORIGIN_ADDR=$BIND:18180
PORT=18181
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

for v in ROUNDS IDLE DURATION CONNS; do
	case ${!v} in '' | *[!0-9]*) die "$v must be a whole number" ;; esac
done
((ROUNDS >= 1 && ROUNDS <= 20)) || die "ROUNDS must be 1..20"
((IDLE >= 1 && IDLE <= 120)) || die "IDLE must be 1..120"
((DURATION >= 1 && DURATION <= 120)) || die "DURATION must be 1..120"
((CONNS >= 1 && CONNS <= 1024)) || die "CONNS must be 1..1024"
[[ $BODY == 1k || $BODY == 64k ]] || die "BODY must be 1k or 64k"
command -v wrk >/dev/null || die "wrk is required (Debian package wrk)"

with_cleanup sturdy-rss
PIN_LOAD=() PIN_PROXY=()
if (($(nproc) >= 2)) && command -v taskset >/dev/null; then
	taskset -cp 0 $$ >/dev/null
	PIN_LOAD=(taskset -c 0) PIN_PROXY=(taskset -c 1)
fi
ports_free 18180 "$PORT"

(cd "$REPO" && go build -o "$TMP/origin" ./bench/origin) || die "could not build bench/origin"
if [[ -z $STURDY ]]; then
	log "building the release build of ./cmd/sturdy"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$TMP/sturdy" ./cmd/sturdy) ||
		die "could not build ./cmd/sturdy"
	STURDY=$TMP/sturdy
fi
[[ -x $STURDY ]] || die "STURDY=$STURDY is not an executable"
mkdir -p "$TMP/www/static"
render "$BENCH_DIR/conf/sturdy.yaml" "$TMP/sturdy.yaml" "$PORT"

"${PIN_LOAD[@]}" "$TMP/origin" -listen "$ORIGIN_ADDR" >"$TMP/origin.log" 2>&1 &
PIDS+=($!)
wait_ready 18180 $! || die "origin did not start"

status() { # status PID: "VmRSS RssAnon RssFile VmHWM" in KiB
	awk '$1 ~ /^(VmRSS|RssAnon|RssFile|VmHWM):$/ { v[$1] = $2 }
		END { print v["VmRSS:"], v["RssAnon:"], v["RssFile:"], v["VmHWM:"] }' "/proc/$1/status"
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

log "binary: $STURDY ($(stat -c %s "$STURDY") bytes); rounds=$ROUNDS idle=${IDLE}s load: wrk -t2 -c$CONNS -d${DURATION}s /$BODY"
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rows=()
for ((r = 1; r <= ROUNDS; r++)); do
	GOMAXPROCS=1 "${PIN_PROXY[@]}" "$STURDY" run -c "$TMP/sturdy.yaml" >"$TMP/sturdy.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait_ready "$PORT" "$pid" || { tail -5 "$TMP/sturdy.log" >&2; die "sturdy did not start"; }
	sleep "$IDLE"
	read -r irss ianon ifile _ <<<"$(status "$pid")"
	if ((SMAPS)); then log "idle smaps_rollup:"; sed 1d "/proc/$pid/smaps_rollup" >&2; fi
	reqs=$(timeout $((DURATION + 20)) "${PIN_LOAD[@]}" wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://$BIND:$PORT/$BODY" 2>&1 |
		awk '/requests in/ { print $1 }') || true
	read -r lrss lanon lfile lhwm <<<"$(status "$pid")"
	if ((SMAPS)); then log "after the load smaps_rollup:"; sed 1d "/proc/$pid/smaps_rollup" >&2; fi
	stop_pid "$pid"
	rows+=("| $r | $(mib "$irss") | $(mib "$ianon") | $(mib "$ifile") | $(mib "$lrss") | $(mib "$lanon") | $(mib "$lfile") | $(mib "$lhwm") | ${reqs:-?} |")
	log "round $r: idle VmRSS $(mib "$irss") MiB (anon $(mib "$ianon"), file $(mib "$ifile")); after the load VmRSS $(mib "$lrss") MiB (anon $(mib "$lanon"), file $(mib "$lfile")), VmHWM $(mib "$lhwm") MiB; ${reqs:-?} requests"
done
echo "| round | idle VmRSS MiB | idle anon | idle file | load VmRSS MiB | load anon | load file | VmHWM MiB | requests |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
