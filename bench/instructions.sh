#!/usr/bin/env bash
# bench/instructions.sh: user-space instructions per proxied request of
# sturdy, nginx, HAProxy and Caddy, counted by valgrind's callgrind.
#
# Counting instructions instead of timing them gives the same figure on a
# busy machine as on a quiet one (within about 1 %), so the ratios between
# proxies and between two builds of sturdy can be taken while other work
# runs. What it does not see: the kernel's share (loopback TCP, system
# calls), which bench/run.sh's CPU time includes and which is about the same
# per request for every proxy here.
#
# Each proxy, alone in turn, under valgrind, one worker (GOMAXPROCS=1,
# worker_processes 1 with master_process off, nbthread 1), configured from
# bench/conf/ as in bench/run.sh: ab sends WARM keep-alive requests at
# concurrency 8, the counters are zeroed, ab sends N more, the counters are
# dumped. The figure is the dump's total divided by N. The Go proxies
# (sturdy, Caddy) run with GOGC=off: under valgrind Go's collector takes
# several times the share it takes at full speed (perf under wrk puts it at
# about 3-4 % of sturdy's CPU, callgrind at a sixth of its instructions), so
# counting it would mostly count the measurement. Set GOGC to count it.
#
# Usage: bench/instructions.sh
# Environment:
#   ONLY=sturdy,sturdy-nethttp,nginx,haproxy,caddy   which proxies
#                                     (sturdy-nethttp: conf/sturdy-nethttp.yaml,
#                                     net/http's HTTP/1.1 server in front;
#                                     sturdy has the native one, the default)
#   N=4000 WARM=300                   measured and warm-up requests
#   BODY=1k                           1k or 64k
#   STURDY=PATH                       a sturdy binary to count instead of
#                                     building ./cmd/sturdy (to compare builds)
#   OUT=DIR                           where the callgrind files are kept
set -euo pipefail

ONLY=${ONLY:-sturdy,sturdy-nethttp,nginx,haproxy,caddy}
N=${N:-4000}
WARM=${WARM:-300}
BODY=${BODY:-1k}
BENCH_TAG=instructions
BIND=127.0.0.1
ORIGIN_ADDR=$BIND:18080
PORT=18089
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
OUT=${OUT:-/tmp/sturdy-instructions-$(date +%Y%m%d-%H%M%S)}
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

case $N in '' | *[!0-9]*) die "N must be a number" ;; esac
case $WARM in '' | *[!0-9]*) die "WARM must be a number" ;; esac
((N >= 100 && N <= 100000)) || die "N must be 100..100000"
[[ $BODY == 1k || $BODY == 64k ]] || die "BODY must be 1k or 64k"

with_cleanup sturdy-instructions
mkdir -p "$OUT"

for t in valgrind:valgrind ab:apache2-utils curl:curl; do
	command -v "${t%%:*}" >/dev/null && continue
	log "installing ${t#*:} from Debian"
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q "${t#*:}" >>"$OUT/apt.log" 2>&1 ||
		die "${t%%:*} is missing and could not be installed (see $OUT/apt.log)"
done
ports_free 18080 "$PORT"

(cd "$REPO" && go build -o "$TMP/origin" ./bench/origin) || die "cannot build bench/origin"
"$TMP/origin" -listen "$ORIGIN_ADDR" >"$OUT/origin.log" 2>&1 &
PIDS+=($!)
wait_ready 18080 $! || die "origin did not start"

count() { # count NAME CMD...: prints NAME and its instructions per request
	local name=$1 pid f ir failed
	shift
	valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.callgrind" "$@" >"$OUT/$name.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	# Under valgrind a proxy starts in seconds, not milliseconds.
	for ((i = 0; i < 300; i++)); do
		curl -s -o /dev/null --max-time 1 "http://$BIND:$PORT/$BODY" && break
		kill -0 "$pid" 2>/dev/null || { log "SKIP $name: it exited (log: $OUT/$name.log)"; return 0; }
		sleep 0.2
	done
	timeout 300 ab -q -k -n "$WARM" -c 8 "http://$BIND:$PORT/$BODY" >/dev/null 2>&1
	callgrind_control -z "$pid" >/dev/null 2>&1
	timeout 600 ab -q -k -n "$N" -c 8 "http://$BIND:$PORT/$BODY" >"$OUT/$name.ab" 2>&1
	callgrind_control -d "$pid" >/dev/null 2>&1
	sleep 1
	# The dump is all that is wanted: no need to wait for a clean exit.
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	failed=$(awk '/^Failed requests/ { print $3 }' "$OUT/$name.ab")
	f=$(ls -t "$OUT/$name.callgrind".* 2>/dev/null | head -1)
	[[ -n $f ]] || { log "SKIP $name: no dump (log: $OUT/$name.log)"; return 0; }
	ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
	printf '| %s | %d | %s |\n' "$name" "$((ir / N))" "${failed:-?}"
}

want() { [[ ",$ONLY," == *",$1,"* ]]; }

echo "User-space instructions per proxied $BODY request ($N keep-alive requests, ab -c 8, after $WARM; Go proxies with GOGC=${GOGC:-off}; $(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "| proxy | instructions per request | failed |"
echo "|---|---:|---:|"
bin=${STURDY:-}
for name in sturdy sturdy-nethttp; do
	want "$name" || continue
	if [[ -z $bin ]]; then
		(cd "$REPO" && go build -o "$TMP/sturdy" ./cmd/sturdy) || die "./cmd/sturdy does not build"
		bin=$TMP/sturdy
	fi
	render "$BENCH_DIR/conf/$name.yaml" "$TMP/$name.yaml" "$PORT"
	# Asynchronous preemption signals confuse callgrind's signal handling.
	GOGC=${GOGC:-off} GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 count "$name" "$bin" run -c "$TMP/$name.yaml"
done
if want nginx && command -v nginx >/dev/null; then
	mkdir -p "$TMP/nginx"
	render "$BENCH_DIR/conf/nginx.conf" "$TMP/nginx.conf" "$PORT"
	sed -i '1i master_process off;' "$TMP/nginx.conf" # the worker is the process valgrind runs
	count nginx nginx -p "$TMP/nginx/" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf"
fi
if want haproxy && command -v haproxy >/dev/null; then
	render "$BENCH_DIR/conf/haproxy.cfg" "$TMP/haproxy.cfg" "$PORT"
	count haproxy haproxy -db -f "$TMP/haproxy.cfg"
fi
if want caddy && command -v caddy >/dev/null; then
	mkdir -p "$TMP/caddy"
	render "$BENCH_DIR/conf/Caddyfile" "$TMP/Caddyfile" "$PORT"
	GOGC=${GOGC:-off} GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 XDG_DATA_HOME="$TMP/caddy" XDG_CONFIG_HOME="$TMP/caddy" HOME="$TMP/caddy" \
		count caddy caddy run --adapter caddyfile --config "$TMP/Caddyfile"
fi
echo
echo "Callgrind files and logs: $OUT"
