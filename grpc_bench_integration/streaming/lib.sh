# What run.sh and cost.sh share: their arguments, the load's parameters,
# the build, the port, the server's start and stop. Sourced, with HERE set
# to this folder; brings in the repository's scripts/lib.sh (require,
# wait_ready, strace_*, stop_server).
# shellcheck shell=bash

# shellcheck source=scripts/lib.sh
source "$HERE/../../scripts/lib.sh"

# The items each Subscribe call sends, their payload size, the items an
# Echo stream keeps in flight; the port; the servers compared.
STREAM_COUNT=${STREAM_COUNT:-10000}
STREAM_SIZE=${STREAM_SIZE:-32}
STREAM_WINDOW=${STREAM_WINDOW:-16}
# The load client: raw (HTTP/2 as bytes, far cheaper per message than
# either server) or tonic (tonic's client on one tokio thread).
STREAM_CLIENT=${STREAM_CLIENT:-raw}
export STREAMING_BENCH_PORT=${STREAMING_BENCH_PORT:-50061}
# shellcheck disable=SC2034 # used by the scripts that source this file
SERVERS=(pajamax tonic)

# parse_args SCRIPT ARG...: BUILD (false with --no-build) and CELLS (the
# MODE:C:S given, or the seven default cells); --help prints the SCRIPT's
# header.
parse_args() {
	local script=$1 arg
	shift
	BUILD=true
	CELLS=()
	for arg in "$@"; do
		case "$arg" in
		--no-build) BUILD=false ;;
		-h | --help)
			sed -n '2,/^$/p' "$script" | sed 's/^# \{0,1\}//'
			exit 0
			;;
		subscribe:*:* | echo:*:*) CELLS+=("$arg") ;;
		*)
			echo "unknown argument $arg (see --help)" >&2
			exit 2
			;;
		esac
	done
	if [[ ${#CELLS[@]} -eq 0 ]]; then
		CELLS=(subscribe:1:1 subscribe:1:100 subscribe:10:100 echo:1:1 echo:1:10 echo:1:100 echo:10:100)
	fi
}

# build_servers: builds (unless BUILD is false) and checks the binaries;
# BIN is where they are.
build_servers() {
	if $BUILD; then
		echo "==> building (release)"
		env -u CARGO_TARGET_DIR cargo build --release --quiet --target-dir target
	fi
	BIN="$HERE/target/release"
	local bin
	for bin in pajamax-server tonic-server stream-load handler-floor; do
		[[ -x "$BIN/$bin" ]] || {
			echo "$bin is not built" >&2
			exit 1
		}
	done
}

# port_free: stops if something listens on STREAMING_BENCH_PORT.
port_free() {
	if (echo >"/dev/tcp/127.0.0.1/$STREAMING_BENCH_PORT") 2>/dev/null; then
		echo "port $STREAMING_BENCH_PORT is taken; set STREAMING_BENCH_PORT" >&2
		exit 1
	fi
}

# What a run's params file starts with: the commit, the cells, the machine.
params_head() {
	git -C "$HERE" log -1 --pretty='%h %cD %s' 2>/dev/null || echo 'no git'
	echo "uncommitted changes under pajamax/: $(git -C "$HERE/../.." status --porcelain -- pajamax 2>/dev/null | wc -l) files"
	echo "cells: ${CELLS[*]}"
}

# start_server CPUS LOG NAME [WRAPPER ...]: NAME's server on CPUS (under
# WRAPPER, e.g. valgrind), its output in LOG; SERVER_PID is its pid. Fails
# when it does not accept connections within 20 s.
start_server() {
	local cpus=$1 log=$2 name=$3
	shift 3
	taskset -c "$cpus" "$@" "$BIN/$name-server" >"$log" 2>&1 &
	SERVER_PID=$!
	wait_ready "$SERVER_PID" "$STREAMING_BENCH_PORT"
}

trap stop_server EXIT
