# shellcheck shell=bash
# bench/lib.sh: helpers shared by bench/run.sh, bench/profile.sh and bench/instructions.sh.
# Source it after setting BENCH_TAG (the log prefix), BIND, ORIGIN_ADDR and TMP.

log() { printf '[%s %s] %s\n' "$BENCH_TAG" "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

stop_pid() { # stop_pid PID: TERM, wait at most 5 s, then KILL
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop on TERM; sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

render() { # render TEMPLATE OUT PORT: fill a config template
	sed -e "s|@LISTEN@|$BIND:$3|g" -e "s|@PORT@|$3|g" -e "s|@BIND@|$BIND|g" \
		-e "s|@ORIGIN@|$ORIGIN_ADDR|g" -e "s|@TMP@|$TMP|g" -e "s|@WORKERS@|${PROCS:-1}|g" \
		-e "s|@GRPC_LISTEN@|${GRPC_LISTEN:-}|g" -e "s|@GRPC_ORIGIN@|${GRPC_ORIGIN:-}|g" "$1" >"$2"
}

wait_ready() { # wait_ready PORT PID: at most 10 s
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$2" 2>/dev/null || return 1
		curl -s -o /dev/null --max-time 1 "http://$BIND:$1/1k" && return 0
		sleep 0.1
	done
	return 1
}

# with_cleanup PREFIX: makes TMP (/tmp/PREFIX.XXXXXX) and, when the script
# exits, stops every PID appended to PIDS and removes TMP.
with_cleanup() {
	PIDS=()
	trap cleanup_pids EXIT
	trap 'exit 130' INT TERM
	TMP=$(mktemp -d "/tmp/$1.XXXXXX")
}
cleanup_pids() {
	local pid
	for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
	if [[ -n ${TMP:-} ]]; then rm -rf "$TMP"; fi
}

ports_free() { # ports_free PORT...: dies when something answers on one of them
	local port
	for port in "$@"; do
		if curl -s -o /dev/null --max-time 1 "http://$BIND:$port/"; then
			die "port $port is already in use on $BIND (is bench/run.sh running?)"
		fi
	done
}
