#!/usr/bin/env bash
# bench/run.sh: side-by-side benchmark of sturdy, nginx, HAProxy and Caddy
# (issue 7). One fixed loopback Go origin; each proxy on its own core; wrk and
# the origin on the other; rounds interleaved; a markdown table of medians.
#
# Also measures sturdy with its health model on (conf/sturdy-health.yaml) vs
# off (conf/sturdy.yaml), and with net/http's HTTP/1.1 server in front
# (conf/sturdy-nethttp.yaml, frontend: net/http) vs the native one (the
# default). See docs/performance.md for how to read the table,
# and bench/profile.sh for a CPU profile under the same load.
#
# Usage: bench/run.sh            (from anywhere inside the repository)
# Environment:
#   ROUNDS=3        rounds (each round measures every proxy in every cell)
#   DURATION=5      seconds of each measured wrk run
#   WARMUP=1        seconds of unmeasured wrk load before each measured run
#   ONLY=sturdy,nginx   subset of: sturdy,sturdy-health,sturdy-nethttp,nginx,
#                   haproxy,caddy
#                   ("direct" is always measured: it is the baseline)
#   CONNS="64 1"    wrk connection counts (of the 1k, 64k, static, gzip and
#                   tls1k cells)
#   BODIES="1k 64k tls"   cells, of:
#                   1k 64k (proxied), static1k static1m (files the proxy
#                   serves itself; not HAProxy), gzip64k (64 KiB of JSON
#                   proxied and gzipped at level 6 by the proxy; not HAProxy);
#                   and, sturdy and nginx only (conf/sturdy-tls.yaml,
#                   conf/nginx-tls.conf, an ECDSA P-256 certificate made at
#                   start): tls1k (1 KiB over TLS keep-alive, wrk), hsfull and
#                   hsresume (a new TLS 1.3 connection per 1 KiB request, 16
#                   at a time, full or resumed from a ticket: bench/load
#                   handshake), h2tls1k (1 KiB over HTTP/2 over TLS, h2load
#                   -c16 -m32), grpcunary (a 1 KiB unary call, one at a
#                   time; "direct" is the gRPC origin) and grpcstream (a
#                   server-streaming call of 64 x 16 KiB, 4 at a time);
#                   "tls" stands for all six
#   PROCS=1         workers per proxy: 1 pins each proxy to CPU 1 and the load
#                   to CPU 0; 2 (or more) runs everything unpinned with that
#                   many workers each (GOMAXPROCS, nginx worker_processes,
#                   HAProxy nbthread), to see how each proxy scales
#   NO_INSTALL=1    never call apt-get; skip what is missing
#   NICE=-10        run everything at this niceness (root only) so that other
#                   work on a shared machine disturbs the figures less
#   RESULTS=DIR     where raw results and the table are kept
#                   (default /tmp/sturdy-bench-results-DATE)
#
# Loopback only: the origin listens on 127.0.0.1:18080, the proxies on
# 127.0.0.1:18081-18086. Every process started is stopped by PID on exit.
set -euo pipefail

START_TS=$(date +%s)
NCPU=$(nproc) # before this script pins itself to one CPU
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
ONLY=${ONLY:-sturdy,sturdy-health,sturdy-nethttp,nginx,haproxy,caddy}
CONNS=${CONNS:-"64 1"}
BODIES=${BODIES:-"1k 64k tls"}
BODIES=${BODIES/tls/tls1k hsfull hsresume h2tls1k grpcunary grpcstream}
NO_INSTALL=${NO_INSTALL:-0}
NICE=${NICE:-}
PROCS=${PROCS:-1}

BENCH_TAG=bench
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case $ROUNDS in '' | *[!0-9]*) die "ROUNDS must be a number" ;; esac
case $DURATION in '' | *[!0-9]*) die "DURATION must be a whole number of seconds" ;; esac
case $WARMUP in '' | *[!0-9]*) die "WARMUP must be a whole number of seconds" ;; esac
((ROUNDS >= 1 && ROUNDS <= 50)) || die "ROUNDS must be 1..50"
((DURATION >= 1 && DURATION <= 120)) || die "DURATION must be 1..120"
((WARMUP <= 60)) || die "WARMUP must be 0..60"
case $PROCS in '' | *[!0-9]*) die "PROCS must be a number" ;; esac
((PROCS >= 1 && PROCS <= NCPU)) || die "PROCS must be 1..$NCPU (the CPUs of this machine)"

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
RESULTS=${RESULTS:-/tmp/sturdy-bench-results-$(date +%Y%m%d-%H%M%S)}
TMP=$(mktemp -d /tmp/sturdy-bench.XXXXXX)
mkdir -p "$RESULTS"
# The files of the static cells.
mkdir -p "$TMP/www/static"
head -c 1024 /dev/urandom >"$TMP/www/static/1k"
head -c $((1 << 20)) /dev/urandom >"$TMP/www/static/1m"
chmod -R a+rX "$TMP" # nginx's workers read the files as its unprivileged user

BIND=127.0.0.1
ORIGIN_ADDR=$BIND:18080
declare -A PORT=([direct]=18080 [sturdy]=18081 [sturdy-health]=18082 [nginx]=18083 [haproxy]=18084 [caddy]=18085 [sturdy-nethttp]=18086)
# The TLS, HTTP/2 and gRPC cells: the gRPC origin, and one more process of
# sturdy and of nginx each with a TLS listener and a plain HTTP/2 (gRPC) one.
GRPC_ORIGIN=$BIND:18090
declare -A TLS_PORT=([sturdy]=18091 [nginx]=18093) GRPC_PORT=([direct]=18090 [sturdy]=18092 [nginx]=18094)
tls_cell() { case $1 in tls1k | h2tls1k | hsfull | hsresume | grpcunary | grpcstream) return 0 ;; esac; return 1; }
want_tls=0
for body in $BODIES; do
	case $body in
	1k | 64k | static1k | static1m | gzip64k) ;;
	*) tls_cell "$body" || die "BODIES: unknown cell '$body'"; want_tls=1 ;;
	esac
done


# ---- processes: every PID we start is recorded and stopped on exit ----

declare -A PID=()  # name -> pid
SKIPPED=()         # human-readable notes on what was not measured

cleanup() {
	local name
	for name in "${!PID[@]}"; do
		stop_pid "${PID[$name]}"
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- CPU pinning: proxy on CPU 1, this script, wrk and origin on CPU 0 ----

PIN_LOAD=() PIN_PROXY=()
if ((PROCS > 1)); then
	log "PROCS=$PROCS: unpinned, $PROCS workers per proxy; the load shares the CPUs with the proxy"
elif ((NCPU >= 2)) && command -v taskset >/dev/null; then
	taskset -cp 0 $$ >/dev/null
	PIN_LOAD=(taskset -c 0)
	PIN_PROXY=(taskset -c 1)
else
	log "WARNING: fewer than 2 CPUs or no taskset: running unpinned; figures are not comparable to pinned runs"
	SKIPPED+=("CPU pinning (needs 2 CPUs and taskset)")
fi

if [[ -n $NICE ]]; then
	renice -n "$NICE" -p $$ >/dev/null || die "cannot renice to $NICE"
fi

# ---- selection ----

want() { [[ $1 == direct || ",$ONLY," == *",$1,"* ]]; }
for p in ${ONLY//,/ }; do
	[[ -n ${PORT[$p]:-} ]] || die "ONLY: unknown proxy '$p' (choose from sturdy,sturdy-health,sturdy-nethttp,nginx,haproxy,caddy)"
done

# ---- tools: install from Debian when missing ----

declare -A TOOL_PKG=([wrk]=wrk [nginx]=nginx [haproxy]=haproxy [caddy]=caddy [curl]=curl [h2load]=nghttp2-client)
need_tools=(wrk curl)
if ((want_tls)); then need_tools+=(h2load); fi
for p in nginx haproxy caddy; do
	if want "$p"; then need_tools+=("$p"); fi
done
missing=()
for t in "${need_tools[@]}"; do
	if ! command -v "$t" >/dev/null; then missing+=("${TOOL_PKG[$t]}"); fi
done
if ((${#missing[@]})); then
	if [[ $NO_INSTALL == 1 ]]; then
		log "missing: ${missing[*]} (NO_INSTALL=1: not installing)"
	elif [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
		log "missing: ${missing[*]}; cannot install (needs root and apt-get)"
	else
		log "installing from Debian: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! timeout 300 apt-get update -q >"$RESULTS/apt.log" 2>&1; then
			log "apt-get update failed (see $RESULTS/apt.log)"
		fi
		# One package at a time, so that one failure skips only that tool.
		for pkg in "${missing[@]}"; do
			timeout 300 apt-get install -y -q "$pkg" >>"$RESULTS/apt.log" 2>&1 ||
				log "apt-get install $pkg failed (see $RESULTS/apt.log)"
		done
	fi
fi
command -v wrk >/dev/null || die "wrk is required and could not be installed"
command -v curl >/dev/null || die "curl is required and could not be installed"
for p in nginx haproxy caddy; do
	if want "$p" && ! command -v "$p" >/dev/null; then
		log "SKIP $p: not installed"
		SKIPPED+=("$p: not installed")
	fi
done

# ---- builds ----

log "building origin, report and load"
(cd "$REPO" && go build -o "$TMP/origin" ./bench/origin && go build -o "$TMP/report" ./bench/report &&
	go build -o "$TMP/load" ./bench/load) ||
	die "could not build bench/origin, bench/report or bench/load"
if ((want_tls)); then "$TMP/load" gencert "$TMP" || die "could not make the TLS certificate"; fi

HAVE_STURDY=0
if want sturdy || want sturdy-health || want sturdy-nethttp; then
	log "building sturdy (./cmd/sturdy)"
	if (cd "$REPO" && go build -o "$TMP/sturdy" ./cmd/sturdy) >"$TMP/sturdy-build.log" 2>&1; then
		HAVE_STURDY=1
	else
		log "SKIP sturdy: ./cmd/sturdy does not build yet:"
		head -5 "$TMP/sturdy-build.log" | sed 's/^/    /' >&2
		SKIPPED+=("sturdy: ./cmd/sturdy does not build")
	fi
fi
HEALTH_PENDING=0
if want sturdy-health && ! grep -Eq '^[[:space:]]*health:' "$BENCH_DIR/conf/sturdy-health.yaml"; then
	HEALTH_PENDING=1
	log "health comparison PENDING: bench/conf/sturdy-health.yaml has no 'health:' key yet (TODO placeholder)"
	SKIPPED+=("sturdy-health: health comparison pending (bench/conf/sturdy-health.yaml has no health: key)")
fi

# ---- config files ----

# ---- start / check ----

check_bodies() { # check_bodies PORT [PROXY]: the bodies arrive whole with 200; a proxy (PROXY=1) also serves the file and gzip cells asked for
	local out
	out=$(curl -s -o /dev/null --max-time 2 -w '%{http_code} %{size_download}' "http://$BIND:$1/1k") || return 1
	[[ $out == "200 1024" ]] || { log "  /1k gave '$out'"; return 1; }
	out=$(curl -s -o /dev/null --max-time 2 -w '%{http_code} %{size_download}' "http://$BIND:$1/64k") || return 1
	[[ $out == "200 65536" ]] || { log "  /64k gave '$out'"; return 1; }
	((${2:-0})) || return 0 # the origin: no files, no compression
	if [[ " $BODIES " == *" static"* ]]; then
		out=$(curl -s -o /dev/null --max-time 2 -w '%{http_code} %{size_download}' "http://$BIND:$1/static/1m") || return 1
		[[ $out == "200 1048576" ]] || { log "  /static/1m gave '$out'"; return 1; }
	fi
	if [[ " $BODIES " == *" gzip"* ]]; then
		out=$(curl -s -o /dev/null --max-time 2 -H 'Accept-Encoding: gzip' -w '%{http_code} %header{content-encoding}' "http://$BIND:$1/gz/text64k") || return 1
		[[ $out == "200 gzip" ]] || { log "  /gz/text64k gave '$out' (want 200 gzip)"; return 1; }
	fi
}

wait_ready_tls() { # wait_ready_tls PORT PID: at most 10 s
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$2" 2>/dev/null || return 1
		curl -sk -o /dev/null --max-time 1 "https://$BIND:$1/1k" && return 0
		sleep 0.1
	done
	return 1
}

check_tls() { # check_tls PROXY: 1 KiB over HTTPS with HTTP/1.1 and HTTP/2, a resumed handshake, a gRPC call
	local out
	out=$(curl -sk -o /dev/null --http1.1 --max-time 2 -w '%{http_code} %{size_download} %{http_version}' "https://$BIND:${TLS_PORT[$1]}/1k") || return 1
	[[ $out == "200 1024 1.1" ]] || { log "  https /1k gave '$out'"; return 1; }
	out=$(curl -sk -o /dev/null --http2 --max-time 2 -w '%{http_code} %{size_download} %{http_version}' "https://$BIND:${TLS_PORT[$1]}/1k") || return 1
	[[ $out == "200 1024 2" ]] || { log "  https /1k over HTTP/2 gave '$out'"; return 1; }
	out=$(timeout 10 "$TMP/load" handshake -resume -addr "$BIND:${TLS_PORT[$1]}" -c 1 -d 200ms) || return 1
	[[ $out == *" 0" ]] || { log "  resumed handshakes: '$out' (requests rps p50 p99 errors)"; return 1; }
	out=$(timeout 10 "$TMP/load" grpc-unary -addr "$BIND:${GRPC_PORT[$1]}" -c 1 -d 200ms) || return 1
	[[ $out == *" 0" ]] || { log "  gRPC unary: '$out' (requests rps p50 p99 errors)"; return 1; }
}

start_proxy() { # start_proxy NAME: starts it pinned to the proxy core, records its PID
	local name=$1 port=${PORT[$1]:-} pid
	case $name in
	sturdy | sturdy-health | sturdy-nethttp)
		render "$BENCH_DIR/conf/$name.yaml" "$TMP/$name.yaml" "${PORT[$name]}"
		GOMAXPROCS=$PROCS "${PIN_PROXY[@]}" "$TMP/sturdy" run -c "$TMP/$name.yaml" >"$RESULTS/$name.log" 2>&1 &
		;;
	nginx)
		mkdir -p "$TMP/nginx"
		render "$BENCH_DIR/conf/nginx.conf" "$TMP/nginx.conf" "${PORT[nginx]}"
		"${PIN_PROXY[@]}" nginx -p "$TMP/nginx/" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf" >"$RESULTS/nginx.log" 2>&1 &
		;;
	sturdy-tls)
		GRPC_LISTEN=$BIND:${GRPC_PORT[sturdy]} render "$BENCH_DIR/conf/sturdy-tls.yaml" "$TMP/sturdy-tls.yaml" "${TLS_PORT[sturdy]}"
		GOMAXPROCS=$PROCS "${PIN_PROXY[@]}" "$TMP/sturdy" run -c "$TMP/sturdy-tls.yaml" >"$RESULTS/sturdy-tls.log" 2>&1 &
		;;
	nginx-tls)
		mkdir -p "$TMP/nginx-tls"
		GRPC_LISTEN=$BIND:${GRPC_PORT[nginx]} render "$BENCH_DIR/conf/nginx-tls.conf" "$TMP/nginx-tls.conf" "${TLS_PORT[nginx]}"
		"${PIN_PROXY[@]}" nginx -p "$TMP/nginx-tls/" -e "$TMP/nginx-tls-error.log" -c "$TMP/nginx-tls.conf" >"$RESULTS/nginx-tls.log" 2>&1 &
		;;
	haproxy)
		render "$BENCH_DIR/conf/haproxy.cfg" "$TMP/haproxy.cfg" "${PORT[haproxy]}"
		"${PIN_PROXY[@]}" haproxy -db -f "$TMP/haproxy.cfg" >"$RESULTS/haproxy.log" 2>&1 &
		;;
	caddy)
		mkdir -p "$TMP/caddy"
		render "$BENCH_DIR/conf/Caddyfile" "$TMP/Caddyfile" "${PORT[caddy]}"
		GOMAXPROCS=$PROCS XDG_DATA_HOME="$TMP/caddy" XDG_CONFIG_HOME="$TMP/caddy" HOME="$TMP/caddy" \
			"${PIN_PROXY[@]}" caddy run --adapter caddyfile --config "$TMP/Caddyfile" >"$RESULTS/caddy.log" 2>&1 &
		;;
	esac
	pid=$!
	PID[$name]=$pid
	if [[ $name == *-tls ]]; then
		if ! wait_ready_tls "${TLS_PORT[${name%-tls}]}" "$pid" || ! check_tls "${name%-tls}"; then
			log "SKIP the TLS, HTTP/2 and gRPC cells of ${name%-tls}: did not serve them (log: $RESULTS/$name.log)"
			tail -5 "$RESULTS/$name.log" | sed 's/^/    /' >&2 || true
			stop_pid "$pid"
			unset "PID[$name]"
			SKIPPED+=("$name: did not start or serve correctly")
			return 1
		fi
		return 0
	fi
	if ! wait_ready "$port" "$pid" || ! check_bodies "$port" "$([[ $name == haproxy ]] && echo 0 || echo 1)"; then
		log "SKIP $name: did not serve both bodies on $BIND:$port (log: $RESULTS/$name.log)"
		tail -5 "$RESULTS/$name.log" | sed 's/^/    /' >&2 || true
		stop_pid "$pid"
		unset "PID[$name]"
		SKIPPED+=("$name: did not start or serve correctly")
		return 1
	fi
}

# ---- /proc readings ----

CLK_TCK=$(getconf CLK_TCK)

proc_pids() { # proc_pids PID: the process and its children (nginx master + worker)
	echo "$1"
	pgrep -P "$1" || true
}

cpu_ticks() { # utime+stime of the given PIDs, in clock ticks
	local total=0 pid stat rest
	local -a f
	for pid in "$@"; do
		stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		rest=${stat##*) } # fields from 3 on; comm may contain spaces
		read -r -a f <<<"$rest"
		total=$((total + f[11] + f[12])) # fields 14 and 15
	done
	echo "$total"
}

mem_kib() { # mem_kib FIELD PIDs...: sum of VmRSS or VmHWM
	local field=$1 total=0 pid v
	shift
	for pid in "$@"; do
		v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$pid/status" 2>/dev/null) || continue
		total=$((total + ${v:-0}))
	done
	echo "$total"
}

cpu_busy() { # busy clock ticks since boot of CPU 1 (the proxy core), or of all CPUs when unpinned
	local cpu=cpu1
	((PROCS == 1)) || cpu=cpu
	awk -v c="$cpu" '$1 == c { print $2 + $3 + $4; exit }' /proc/stat
}
bench_ticks() { # sets TICKS: CPU clock ticks used so far by this script's waited children (wrk) and the origin
	# times(1) must run in this shell, not a subshell: a subshell starts its
	# children's count at zero.
	times >"$TMP/times"
	TICKS=$(awk -v o="$(cpu_ticks "${PID[origin]}")" -v hz="$CLK_TCK" 'NR == 2 {
		n = split($0, f, /[ ms]+/); s = 0
		for (i = 1; i + 1 <= n; i += 2) if (f[i] != "") s += f[i] * 60 + f[i + 1]
		printf "%d", s * hz + o }' "$TMP/times")
}
now_ns() { date +%s%N; }

# ---- one measured cell ----

cell_path() { # cell_path BODY: the URL path of a cell
	case $1 in
	static*) echo "/static/${1#static}" ;;
	gzip64k) echo /gz/text64k ;;
	*) echo "/$1" ;;
	esac
}

cell_conns() { # cell_conns BODY: the connection counts a cell runs at
	case $1 in
	h2tls1k | hsfull | hsresume) echo 16 ;;
	grpcunary) echo 1 ;;
	grpcstream) echo 4 ;;
	*) echo "$CONNS" ;;
	esac
}

load_cmd() { # load_cmd BODY PORT THREADS CONNS SECONDS: sets LOAD (the command) and PARSE (wrk or line)
	local body=$1 port=$2 threads=$3 conns=$4 secs=$5
	PARSE=line
	case $body in
	tls1k) LOAD=(wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "https://$BIND:$port/1k") PARSE=wrk ;;
	h2tls1k) LOAD=(h2load -t1 -c"$conns" -m32 -D"$secs" "https://$BIND:$port/1k") PARSE=h2load ;;
	hsfull) LOAD=("$TMP/load" handshake -addr "$BIND:$port" -c "$conns" -d "${secs}s") ;;
	hsresume) LOAD=("$TMP/load" handshake -resume -addr "$BIND:$port" -c "$conns" -d "${secs}s") ;;
	grpcunary) LOAD=("$TMP/load" grpc-unary -addr "$BIND:$port" -c "$conns" -d "${secs}s") ;;
	grpcstream) LOAD=("$TMP/load" grpc-stream -addr "$BIND:$port" -c "$conns" -d "${secs}s") ;;
	*) LOAD=(wrk -t"$threads" -c"$conns" -d"${secs}s" --latency "${hdr[@]}" "http://$BIND:$port$(cell_path "$body")") PARSE=wrk ;;
	esac
}

run_cell() { # run_cell ROUND NAME BODY CONNS: appends one line to $RESULTS/raw.txt
	local round=$1 name=$2 body=$3 conns=$4 port=${PORT[$2]:-} threads=2 url pids=() out hdr=() proc=$2
	if ((conns < 2)); then threads=1; fi
	if tls_cell "$body"; then
		# sturdy and nginx only; "direct" only for gRPC (the origin speaks no TLS).
		case $name in
		sturdy | nginx) proc=$name-tls ;;
		direct) [[ $body == grpc* ]] || return 0 ;;
		*) return 0 ;;
		esac
		[[ $name == direct ]] || [[ -n ${PID[$proc]:-} ]] || return 0
		if [[ $body == grpc* ]]; then port=${GRPC_PORT[$name]}; else port=${TLS_PORT[$name]}; fi
	fi
	case $body in
	static* | gzip*)
		# HAProxy serves no files and is not set up to compress; the
		# origin ("direct") serves no files.
		[[ $name == haproxy ]] && return 0
		[[ $name == direct && $body == static* ]] && return 0
		;;
	esac
	[[ $body == gzip* ]] && hdr=(-H "Accept-Encoding: gzip")
	if [[ $name != direct ]]; then
		kill -0 "${PID[$proc]}" 2>/dev/null || { log "  $proc is gone; skipping cell"; return 0; }
		mapfile -t pids < <(proc_pids "${PID[$proc]}")
	fi
	if ((WARMUP > 0)); then
		load_cmd "$body" "$port" "$threads" "$conns" "$WARMUP"
		timeout $((WARMUP + 20)) "${PIN_LOAD[@]}" "${LOAD[@]}" >/dev/null 2>&1 || true
	fi
	local cpu0=0 cpu1=0 rss=- hwm=- cpu_us=-
	if ((${#pids[@]})); then
		for p in "${pids[@]}"; do echo 5 >"/proc/$p/clear_refs" 2>/dev/null || true; done # reset VmHWM
		rm -f "$TMP/rss"
		cpu0=$(cpu_ticks "${pids[@]}")
		(sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')" && mem_kib VmRSS "${pids[@]}" >"$TMP/rss") &
		PID[sampler]=$!
	fi
	out="$RESULTS/load-r$round-$name-$body-c$conns.txt"
	local busy0 busy1 t0 t1
	busy0=$(cpu_busy)
	local own0=0 own1=0
	if ((PROCS > 1)); then bench_ticks; own0=$TICKS; fi
	t0=$(now_ns)
	load_cmd "$body" "$port" "$threads" "$conns" "$DURATION"
	timeout $((DURATION + 30)) "${PIN_LOAD[@]}" "${LOAD[@]}" >"$out" 2>&1 || true
	t1=$(now_ns)
	busy1=$(cpu_busy)
	if ((PROCS > 1)); then bench_ticks; own1=$TICKS; fi
	if ((${#pids[@]})); then
		cpu1=$(cpu_ticks "${pids[@]}")
		wait "${PID[sampler]}" 2>/dev/null || true
		unset "PID[sampler]"
		rss=$(cat "$TMP/rss" 2>/dev/null || echo -)
		hwm=$(mem_kib VmHWM "${pids[@]}")
		cpu_us=$(((cpu1 - cpu0) * 1000000 / CLK_TCK))
	fi
	local w
	if ! w=$("$TMP/report" "$PARSE" "$out" 2>&1); then
		log "  $name $body c$conns: ${LOAD[0]##*/} failed: $w"
		return 0
	fi
	read -r reqs rps p50 p99 errs <<<"$w"
	# CPU time on the proxy core not used by the proxy (unpinned: on all
	# CPUs, not used by the proxy, wrk or the origin): other engineers'
	# builds and tests on a shared machine. Figures are suspect when high.
	local other
	other=$(awk -v b="$((busy1 - busy0 - (cpu1 - cpu0) - (own1 - own0)))" -v ns="$((t1 - t0))" -v hz="$CLK_TCK" -v cpus="$PROCS" \
		'BEGIN { v = 100 * b / (ns / 1e9 * hz * (cpus > 1 ? cpus : 1)); if (v < 0) v = 0; printf "%.0f", v }')
	echo "$round $name $body $conns $reqs $rps $p50 $p99 $cpu_us ${rss:--} ${hwm:--} $errs $other" >>"$RESULTS/raw.txt"
	local per=-
	if [[ $cpu_us != - ]]; then per=$(awk -v c="$cpu_us" -v n="$reqs" 'BEGIN { printf "%.1f", c / n }'); fi
	log "  r$round $(printf '%-13s %-3s c%-2s' "$name" "$body" "$conns") $(printf '%9.0f req/s  p50 %7.0fus  p99 %7.0fus  cpu %5s us/req  errors %s  other load on proxy core %s%%' "$rps" "$p50" "$p99" "$per" "$errs" "$other")"
}

# ---- run ----

log "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine skews the figures; see the 'other load' column)"
log "results in $RESULTS; rounds=$ROUNDS duration=${DURATION}s warmup=${WARMUP}s conns='$CONNS' bodies='$BODIES'"
for port in "${PORT[@]}" "${TLS_PORT[@]}" "${GRPC_PORT[@]}"; do
	if (echo >"/dev/tcp/$BIND/$port") 2>/dev/null; then
		die "port $port is already in use on $BIND; stop whatever listens there first"
	fi
done
"${PIN_LOAD[@]}" "$TMP/origin" -listen "$ORIGIN_ADDR" >"$RESULTS/origin.log" 2>&1 &
PID[origin]=$!
if ! wait_ready 18080 "${PID[origin]}" || ! check_bodies 18080; then
	die "origin did not start (log: $RESULTS/origin.log)"
fi
if ((want_tls)); then
	"${PIN_LOAD[@]}" "$TMP/load" grpc-origin -listen "$GRPC_ORIGIN" >"$RESULTS/grpc-origin.log" 2>&1 &
	PID[grpc-origin]=$!
	for ((i = 0; i < 100; i++)); do
		out=$(timeout 10 "$TMP/load" grpc-unary -addr "$GRPC_ORIGIN" -c 1 -d 100ms 2>/dev/null) && [[ $out == *" 0" ]] && break
		kill -0 "${PID[grpc-origin]}" 2>/dev/null || break
		sleep 0.1
	done
	[[ ${out:-} == *" 0" ]] || die "the gRPC origin did not start (log: $RESULTS/grpc-origin.log)"
fi

RUN=(direct)
for name in sturdy sturdy-health sturdy-nethttp nginx haproxy caddy; do
	want "$name" || continue
	case $name in
	sturdy | sturdy-nethttp) ((HAVE_STURDY)) || continue ;;
	sturdy-health) ((HAVE_STURDY && !HEALTH_PENDING)) || continue ;;
	*) command -v "$name" >/dev/null || continue ;;
	esac
	log "starting $name on $BIND:${PORT[$name]}"
	if start_proxy "$name"; then RUN+=("$name"); fi
	if ((want_tls)) && [[ $name == sturdy || $name == nginx ]]; then
		log "starting $name-tls on $BIND:${TLS_PORT[$name]} (TLS) and $BIND:${GRPC_PORT[$name]} (gRPC)"
		start_proxy "$name-tls" || true
	fi
done
log "measuring: ${RUN[*]}"

: >"$RESULTS/raw.txt"
n=${#RUN[@]}
for ((round = 1; round <= ROUNDS; round++)); do
	log "round $round/$ROUNDS"
	for body in $BODIES; do
		for conns in $(cell_conns "$body"); do
			# Rotate the starting proxy each round so that no proxy always runs first.
			for ((i = 0; i < n; i++)); do
				run_cell "$round" "${RUN[$(((i + round - 1) % n))]}" "$body" "$conns"
			done
		done
	done
done

{
	echo "Machine: $NCPU CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), Linux $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "Versions: $(go version | awk '{ print $3 }')$(
		if command -v nginx >/dev/null; then printf ', %s' "$(nginx -v 2>&1 | sed 's/.*version: //')"; fi
		if command -v haproxy >/dev/null; then printf ', HAProxy %s' "$(haproxy -v | awk 'NR == 1 { print $3 }')"; fi
		if command -v caddy >/dev/null; then printf ', Caddy %s' "$(caddy version | awk '{ print $1 }')"; fi
		printf ', %s' "$(wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }')"
	)"
	echo "Command: ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP ONLY=$ONLY CONNS='$CONNS' BODIES='$BODIES' PROCS=$PROCS${NICE:+ NICE=$NICE} bench/run.sh"
	echo
	"$TMP/report" table "$RESULTS/raw.txt"
	if [[ " ${RUN[*]} " == *" sturdy-health "* ]]; then
		echo
		echo "Active health checks received by the origin during the run: $(curl -s --max-time 2 "http://$ORIGIN_ADDR/checks" || echo unknown)"
	fi
} | tee "$RESULTS/table.md"
echo
if ((${#SKIPPED[@]})); then
	echo "Skipped:"
	printf -- '- %s\n' "${SKIPPED[@]}"
	echo
fi
END_TS=$(date +%s)
echo "Total run time: $((END_TS - START_TS)) s (rounds=$ROUNDS, duration=${DURATION}s, warmup=${WARMUP}s; raw results: $RESULTS)"
