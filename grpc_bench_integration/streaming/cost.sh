#!/usr/bin/env bash
# Cost per streamed message of each whole server, pajamax against tonic,
# counted rather than timed: user-space instructions (callgrind), system
# calls (strace) and the times the server went to sleep, per message.
#
# Usage: cost.sh [--no-build] [CELL ...]
#
#   CELL        MODE:C:S as in run.sh (subscribe or echo, C connections
#               carrying S streams in all). Default: the seven cells of
#               run.sh.
#   --no-build  use the binaries already built.
#
# Variables (defaults): COST_ITEMS=100000 (messages counted per run, in
# all; S must divide it), COST_WARMUP=20000 (messages before counting),
# COST_NATIVE=10 (the native run counts COST_NATIVE x COST_ITEMS messages),
# STREAM_COUNT, STREAM_SIZE, STREAM_WINDOW, STREAM_CLIENT as in run.sh,
# STREAMING_BENCH_PORT=50061; COST_CALLGRIND_OPTIONS adds options to
# callgrind's (e.g. --dump-instr=yes, for a breakdown by instruction of the
# dumps kept in the results folder).
#
# For each cell and server (one worker, on CPU 0; the load client
# stream-load on CPU 1, each stream receiving exactly its share of the
# messages, see `stream-load --items`):
#
# - instructions: the server under `valgrind --tool=callgrind` (all its
#   threads, user space only); a warm-up, then the counters are zeroed,
#   then one client run of N messages and one of 2N, each followed by a
#   dump. The difference of the dumps over N is the cost per message with
#   the connections' set-up and close cancelled out. Under callgrind the
#   server is tens of times slower than natively and the client outruns
#   it: this is the cost of a busy server, where each read and each write
#   carry many messages.
# - natively: a warm-up, then a counted run of COST_NATIVE x N messages
#   with the server's voluntary context switches (each one a sleep in
#   epoll_wait and a wake-up later: the cost that dominates when client and
#   server take turns) and its CPU time (schedstat) read before and after;
#   then a run of N under `strace -c -f` for the system calls.
# - with Echo cells, the handlers' own work: `handler-floor` on CPU 0,
#   decoding and encoding STREAM_WINDOW items of STREAM_SIZE at a time
#   with nothing else (no I/O, no HTTP/2, no call state). Neither server
#   can spend less per echoed item.
#
# The figures are exact for the instructions (they repeat to a few per
# message); the native ones move with the machine's load. Results go to
# ../results/streaming-cost-<timestamp>/.

set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"

# shellcheck source=grpc_bench_integration/streaming/lib.sh
source "$HERE/lib.sh"
parse_args "$HERE/$(basename "$0")" "$@"

COST_ITEMS=${COST_ITEMS:-100000}
COST_WARMUP=${COST_WARMUP:-20000}
COST_NATIVE=${COST_NATIVE:-10}
export GRPC_SERVER_CPUS=1
SERVER_CPU=0
CLIENT_CPU=1

for cell in "${CELLS[@]}"; do
	IFS=: read -r _ _ s <<<"$cell"
	if ((COST_ITEMS % s != 0 || COST_WARMUP % s != 0)); then
		echo "$cell: $s streams do not divide COST_ITEMS=$COST_ITEMS and COST_WARMUP=$COST_WARMUP" >&2
		exit 2
	fi
done
require cost.sh taskset python3 cargo valgrind callgrind_control strace

build_servers
port_free

OUT="$HERE/../results/streaming-cost-$(date '+%Y%m%dT%H%M%S')"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cat >"$OUT/params" <<PARAMS
streaming cost (grpc_bench_integration/streaming/cost.sh)
$(params_head)
COST_ITEMS=$COST_ITEMS COST_WARMUP=$COST_WARMUP COST_NATIVE=$COST_NATIVE STREAM_COUNT=$STREAM_COUNT STREAM_SIZE=$STREAM_SIZE STREAM_WINDOW=$STREAM_WINDOW STREAM_CLIENT=$STREAM_CLIENT
server on CPU $SERVER_CPU, client on CPU $CLIENT_CPU
machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) CPUs, $(uname -r)
$(rustc --version), $(valgrind --version), $(strace -V | head -1)
load average at start: $(cut -d' ' -f1-3 /proc/loadavg)
PARAMS

# start NAME LOG [WRAPPER ...]: the server on SERVER_CPU, or the script stops.
start() {
	local name=$1 log=$2
	shift 2
	start_server "$SERVER_CPU" "$log" "$name" "$@" || {
		echo "$name server did not start:" >&2
		cat "$log" >&2
		exit 1
	}
	BASE_FDS=$(count_fds)
}

# Sockets only: valgrind opens and closes files of its own.
count_fds() { find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 -lname 'socket:*' | wc -l; }

# Waits until the server has closed the client's connections, so that
# nothing of one run spills into the next.
wait_idle() {
	local i
	for ((i = 0; i < 600; i++)); do
		(($(count_fds) <= BASE_FDS)) && return 0
		sleep 0.05
	done
	echo "the server kept a connection open for 30 s after the client left" >&2
	exit 1
}

# load MODE C S MESSAGES LOG: one counted client run; its line in LOG.
# Stops the script unless every stream received its share, in order.
load() {
	local mode=$1 c=$2 s=$3 n=$4 log=$5 line
	line=$(taskset -c "$CLIENT_CPU" "$BIN/stream-load" \
		--addr "127.0.0.1:$STREAMING_BENCH_PORT" --mode "$mode" -c "$c" -s "$s" \
		--count "$STREAM_COUNT" --size "$STREAM_SIZE" --window "$STREAM_WINDOW" --client "$STREAM_CLIENT" \
		--items "$((n / s))" --server-pid "$SERVER_PID" 2>>"$log.err") || {
		echo "client failed ($mode C=$c S=$s, $n messages): $(tail -1 "$log.err")" >&2
		exit 1
	}
	echo "$line" >>"$log"
	[[ $line == *" messages=$n "* && $line == *" errors=0 bad_items=0 short_calls=0 idle_streams=0 "* ]] || {
		echo "faulty run ($mode C=$c S=$s, $n messages): $line" >&2
		exit 1
	}
	wait_idle
}

# Instructions counted since the last zero or dump, in FILE after a dump.
dump() {
	local file=$1
	callgrind_control -d "$SERVER_PID" >>"$OUT/callgrind_control.log" 2>&1
	[[ -s $file ]] || {
		echo "callgrind wrote no $file" >&2
		exit 1
	}
	awk '/^summary:/ { print $2; exit }' "$file"
}

# Voluntary context switches of all the server's threads.
sleeps() {
	cat /proc/"$SERVER_PID"/task/*/status 2>/dev/null |
		awk '/^voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

RESULTS="$OUT/results.txt"
: >"$RESULTS"
for cell in "${CELLS[@]}"; do
	IFS=: read -r mode c s <<<"$cell"
	for server in "${SERVERS[@]}"; do
		name="$mode.c$c.s$s.$server"
		echo "==> $server: $mode C=$c S=$s"

		# shellcheck disable=SC2086 # options, split on purpose
		start "$server" "$OUT/$name.callgrind.log" valgrind --tool=callgrind ${COST_CALLGRIND_OPTIONS:-} \
			--callgrind-out-file="$OUT/$name.callgrind" --log-file="$OUT/$name.valgrind.log"
		load "$mode" "$c" "$s" "$COST_WARMUP" "$OUT/$name.load"
		callgrind_control -z "$SERVER_PID" >>"$OUT/callgrind_control.log" 2>&1
		load "$mode" "$c" "$s" "$COST_ITEMS" "$OUT/$name.load"
		ir1=$(dump "$OUT/$name.callgrind.1")
		load "$mode" "$c" "$s" "$((2 * COST_ITEMS))" "$OUT/$name.load"
		ir2=$(dump "$OUT/$name.callgrind.2")
		stop_server

		start "$server" "$OUT/$name.native.log"
		load "$mode" "$c" "$s" "$COST_WARMUP" "$OUT/$name.load"
		before=$(sleeps)
		native=$((COST_NATIVE * COST_ITEMS))
		load "$mode" "$c" "$s" "$native" "$OUT/$name.native"
		after=$(sleeps)
		line=$(tail -1 "$OUT/$name.native")
		strace_start "$SERVER_PID" "$OUT/$name.strace"
		load "$mode" "$c" "$s" "$COST_ITEMS" "$OUT/$name.load"
		strace_stop
		read -r syscalls reads writes epolls _ < <(strace_counts "$OUT/$name.strace")
		stop_server

		echo "server=$server mode=$mode c=$c s=$s items=$COST_ITEMS ir1=$ir1 ir2=$ir2" \
			"native_items=$native sleeps=$((after - before)) syscalls=$syscalls reads=$reads writes=$writes" \
			"epolls=$epolls $line" >>"$RESULTS"
		tail -1 "$RESULTS"
	done
done

# What an Echo handler's own work costs (see handler-floor), with the
# cells' item size and as many items at once as a stream keeps in flight.
if [[ " ${CELLS[*]}" == *" echo:"* ]]; then
	taskset -c "$SERVER_CPU" "$BIN/handler-floor" --size "$STREAM_SIZE" --batch "$STREAM_WINDOW" >"$OUT/floor"
fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/params"
echo "-----"
python3 "$HERE/cost_report.py" "$RESULTS" | tee "$OUT/table.md"
if [[ -s $OUT/floor ]]; then
	echo
	echo "The Echo handlers' own work, natively (decoding, encoding, allocating;"
	echo "no I/O, no HTTP/2, no call state): $(sed -n 's/.*floor_ns=\([0-9.]*\).*/\1/p' "$OUT/floor") ns per item."
fi
echo
cat "$OUT/params"
echo "Results in $OUT"
