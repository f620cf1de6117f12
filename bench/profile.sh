#!/usr/bin/env bash
# bench/profile.sh: CPU profile of one proxy under the 1 KiB, 64-connection
# load of bench/run.sh (same origin, same configs, same pinning).
#
# Usage: bench/profile.sh                (profiles sturdy)
# Environment:
#   TARGET=sturdy   sturdy | nginx | haproxy | caddy
#   DURATION=10     seconds of load (perf records the middle part of it)
#   BODY=1k CONNS=64
#   PPROF_ENV=NAME  if sturdy writes a CPU profile to the file named by the
#                   environment variable NAME, also collect that and print
#                   `go tool pprof -top` of it (sturdy has no pprof endpoint)
#   OUT=DIR         where perf.data and the reports are kept
#                   (default /tmp/sturdy-profile-DATE)
#
# Uses `perf` (Debian package linux-perf; installed when missing). Go binaries
# keep frame pointers, so call graphs work without extra flags.
set -euo pipefail

TARGET=${TARGET:-sturdy}
DURATION=${DURATION:-10}
BODY=${BODY:-1k}
CONNS=${CONNS:-64}
PPROF_ENV=${PPROF_ENV:-}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
OUT=${OUT:-/tmp/sturdy-profile-$(date +%Y%m%d-%H%M%S)}
BIND=127.0.0.1 ORIGIN_ADDR=127.0.0.1:18080 PORT=18086

BENCH_TAG=profile
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case $DURATION in '' | *[!0-9]*) die "DURATION must be a whole number of seconds" ;; esac
((DURATION >= 4 && DURATION <= 120)) || die "DURATION must be 4..120"

with_cleanup sturdy-profile
mkdir -p "$OUT"

[[ $(nproc) -ge 2 ]] || die "needs 2 CPUs"
taskset -cp 0 $$ >/dev/null

for t in perf wrk curl "$([[ $TARGET == sturdy ]] && echo go || echo "$TARGET")"; do
	command -v "$t" >/dev/null && continue
	pkg=$t
	[[ $t == perf ]] && pkg=linux-perf
	log "installing $pkg from Debian"
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q "$pkg" >"$OUT/apt.log" 2>&1 ||
		{ DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update -q >>"$OUT/apt.log" 2>&1 &&
			DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q "$pkg" >>"$OUT/apt.log" 2>&1; } ||
		die "$pkg is missing and could not be installed (see $OUT/apt.log)"
done

ports_free 18080 "$PORT"
(cd "$REPO" && go build -o "$TMP/origin" ./bench/origin) || die "cannot build bench/origin"
taskset -c 0 "$TMP/origin" -listen "$ORIGIN_ADDR" >"$OUT/origin.log" 2>&1 &
PIDS+=($!)
wait_ready 18080 $! || die "origin did not start"

case $TARGET in
sturdy)
	(cd "$REPO" && go build -o "$TMP/sturdy" ./cmd/sturdy) || die "./cmd/sturdy does not build"
	render "$BENCH_DIR/conf/sturdy.yaml" "$TMP/sturdy.yaml" "$PORT"
	env_extra=()
	[[ -n $PPROF_ENV ]] && env_extra=("$PPROF_ENV=$OUT/cpu.pprof")
	env GOMAXPROCS=1 "${env_extra[@]}" taskset -c 1 "$TMP/sturdy" run -c "$TMP/sturdy.yaml" >"$OUT/sturdy.log" 2>&1 &
	;;
nginx)
	mkdir -p "$TMP/nginx"
	render "$BENCH_DIR/conf/nginx.conf" "$TMP/nginx.conf" "$PORT"
	taskset -c 1 nginx -p "$TMP/nginx/" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf" >"$OUT/nginx.log" 2>&1 &
	;;
haproxy)
	render "$BENCH_DIR/conf/haproxy.cfg" "$TMP/haproxy.cfg" "$PORT"
	taskset -c 1 haproxy -db -f "$TMP/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
	;;
caddy)
	mkdir -p "$TMP/caddy"
	render "$BENCH_DIR/conf/Caddyfile" "$TMP/Caddyfile" "$PORT"
	GOMAXPROCS=1 XDG_DATA_HOME="$TMP/caddy" XDG_CONFIG_HOME="$TMP/caddy" HOME="$TMP/caddy" \
		taskset -c 1 caddy run --adapter caddyfile --config "$TMP/Caddyfile" >"$OUT/caddy.log" 2>&1 &
	;;
*) die "TARGET must be sturdy, nginx, haproxy or caddy" ;;
esac
TPID=$!
PIDS+=("$TPID")
wait_ready "$PORT" "$TPID" || die "$TARGET did not start (log: $OUT/$TARGET.log)"

URL="http://$BIND:$PORT/$BODY"
log "load: wrk -t2 -c$CONNS -d${DURATION}s $URL; perf records $TARGET (pid $TPID and children) for $((DURATION - 3)) s"
timeout $((DURATION + 30)) taskset -c 0 wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "$URL" >"$OUT/wrk.txt" 2>&1 &
WRK=$!
PIDS+=("$WRK")
sleep 1
# Every process of the target (nginx: master and worker).
ppids=$(
	echo "$TPID"
	pgrep -P "$TPID" || true
)
timeout $((DURATION + 30)) perf record -q -e cpu-clock -F 1999 -g -o "$OUT/perf.data" \
	-p "$(paste -sd, <<<"$ppids")" -- sleep $((DURATION - 3)) >"$OUT/perf-record.log" 2>&1 ||
	log "perf record exited non-zero (see $OUT/perf-record.log)"
wait "$WRK" || true
grep -E 'Requests/sec|requests in' "$OUT/wrk.txt" >&2 || true

# Second, shorter load: system calls per request, counted by perf stat over
# the whole wrk run (tracepoints; no sampling).
SC_EVENTS=raw_syscalls:sys_enter
for sc in read write writev readv recvfrom sendto recvmsg sendmsg sendfile64 epoll_wait epoll_pwait futex nanosleep \
	setsockopt getsockopt accept4 connect close; do
	[[ -e /sys/kernel/tracing/events/syscalls/sys_enter_$sc ]] && SC_EVENTS+=",syscalls:sys_enter_$sc"
done
log "syscalls: wrk -t2 -c$CONNS -d5s under perf stat"
timeout 40 perf stat -x, -e "$SC_EVENTS" -p "$(paste -sd, <<<"$ppids")" -o "$OUT/syscalls.csv" -- sleep 6 >/dev/null 2>&1 &
PSTAT=$!
PIDS+=("$PSTAT")
sleep 0.5
timeout 40 taskset -c 0 wrk -t2 -c"$CONNS" -d5s "$URL" >"$OUT/wrk-syscalls.txt" 2>&1 || true
wait "$PSTAT" || log "perf stat exited non-zero"
sc_reqs=$(awk '/ requests in / { print $1 }' "$OUT/wrk-syscalls.txt")
if [[ -n $sc_reqs && -s $OUT/syscalls.csv ]]; then
	awk -F, -v n="$sc_reqs" '$1 ~ /^[0-9]+$/ && $1 > 0 { sub(/^(raw_)?syscalls:sys_enter_?/, "", $3); printf "%8.2f  %s\n", $1 / n, ($3 == "" ? "all system calls" : $3) }' \
		"$OUT/syscalls.csv" | sort -rn >"$OUT/syscalls-per-request.txt"
fi

stop_pid "$TPID" # lets sturdy flush a CPU profile if PPROF_ENV is supported

report() { perf report -i "$OUT/perf.data" --stdio -g none "$@" 2>/dev/null | grep -v '^#' | grep -v '^$' || true; }
report --no-children --sort dso | head -8 >"$OUT/by-dso.txt" || true
report --no-children --sort dso,sym | grep -v '\[k\]' | head -40 >"$OUT/top-user-self.txt" || true
report --children --sort sym >"$OUT/cumulative-all.txt" || true
head -60 "$OUT/cumulative-all.txt" >"$OUT/top-cumulative.txt"
# Where the time goes, by area: cumulative share of a few well-known frames.
areas='runtime\.gcBgMarkWorker|runtime\.gcAssistAlloc|runtime\.bgsweep|runtime\.mallocgc|runtime\.schedule|runtime\.findRunnable|runtime\.selectgo|runtime\.netpoll'
areas+='|net/http\.\(\*conn\)\.serve|net/http\.\(\*conn\)\.readRequest|net/http\.\(\*response\)\.finishRequest'
areas+='|net/http\.\(\*persistConn\)\.(readLoop|writeLoop|roundTrip)|net/http\.\(\*Transport\)\.roundTrip|net/http\.Header\.writeSubset'
areas+='|proxy\.\(\*Handler\)\.ServeHTTP|syscall\.read|syscall\.write|syscall\.writev|time\.Now'
areas="\\] (github\\.com/sturdyproxy/sturdy/internal/)?($areas)[[:space:]]*\$"
grep -E "$areas" "$OUT/cumulative-all.txt" >"$OUT/areas.txt" || true

echo "== $TARGET, $BODY, $CONNS connections: CPU samples by binary (kernel vs user space) =="
cat "$OUT/by-dso.txt"
echo
echo "== top user-space functions by self time (% of all $TARGET samples) =="
cat "$OUT/top-user-self.txt"
echo
echo "== selected areas (share of all samples, including callees; self) =="
cat "$OUT/areas.txt"
echo
echo "== system calls per request (all threads of $TARGET; $sc_reqs requests) =="
cat "$OUT/syscalls-per-request.txt" 2>/dev/null || echo "(not measured)"
echo
echo "== top functions including callees (user and kernel) =="
cat "$OUT/top-cumulative.txt"
if [[ -n $PPROF_ENV && -s $OUT/cpu.pprof ]]; then
	echo
	echo "== go tool pprof -top (from $PPROF_ENV) =="
	go tool pprof -top -nodecount=30 "$TMP/sturdy" "$OUT/cpu.pprof" 2>/dev/null | tee "$OUT/pprof-top.txt"
fi
echo
echo "perf data and reports: $OUT (perf report -i $OUT/perf.data)"
