#!/usr/bin/env bash
# Messages per second per server CPU for streams of small messages, pajamax
# against tonic: server streaming (Subscribe) and bidirectional (Echo).
#
# Usage: run.sh [--no-build] [CELL ...]
#
#   CELL        MODE:C:S, MODE subscribe or echo, C connections carrying S
#               streams in all. Default: subscribe:1:1 subscribe:1:100
#               subscribe:10:100 echo:1:1 echo:1:10 echo:1:100 echo:10:100.
#   --no-build  use the binaries already built.
#
# Variables (defaults): STREAM_DURATION=5 and STREAM_WARMUP=2 (seconds),
# STREAM_COUNT=10000 (items per Subscribe call), STREAM_SIZE=32 (payload
# bytes per item), STREAM_WINDOW=16 (Echo items in flight per stream),
# STREAM_CLIENT=raw (the load client: raw, HTTP/2 written and read as
# bytes, or tonic, tonic's client), GRPC_SERVER_CPUS=1,
# STREAMING_BENCH_PORT=50061.
#
# For each cell and server: a fresh server on CPUs 0..GRPC_SERVER_CPUS-1
# (taskset), the load client (stream-load, one thread) on the next CPU; the client warms up, then counts the items received in the measured
# window and reads the server's CPU time (all threads,
# /proc/PID/task/*/schedstat) and its own at both ends of it. Results go to
# ../results/streaming-<timestamp>/.

set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"

# shellcheck source=grpc_bench_integration/streaming/lib.sh
source "$HERE/lib.sh"
parse_args "$HERE/$(basename "$0")" "$@"

STREAM_DURATION=${STREAM_DURATION:-5}
STREAM_WARMUP=${STREAM_WARMUP:-2}
export GRPC_SERVER_CPUS=${GRPC_SERVER_CPUS:-1}

require run.sh taskset python3 cargo

NCPU=$(nproc --all)
SERVER_N=$(python3 -c "import math,sys; print(max(1, math.ceil(float(sys.argv[1]))))" "$GRPC_SERVER_CPUS")
SERVER_CPUSET=0
for ((i = 1; i < SERVER_N; i++)); do SERVER_CPUSET+=",$((i % NCPU))"; done
CLIENT_CPU=$((SERVER_N % NCPU))
if ((SERVER_N + 1 > NCPU)); then
	echo "warning: $SERVER_N server CPUs + 1 client CPU on a $NCPU-CPU machine: they share CPUs" >&2
fi

build_servers
port_free

RESULTS_DIR="$HERE/../results/streaming-$(date '+%Y%m%dT%H%M%S')"
mkdir -p "$RESULTS_DIR"
RESULTS_DIR="$(cd "$RESULTS_DIR" && pwd)"
cat >"$RESULTS_DIR/params" <<PARAMS
streaming bench (grpc_bench_integration/streaming/run.sh)
$(params_head)
STREAM_DURATION=$STREAM_DURATION STREAM_WARMUP=$STREAM_WARMUP STREAM_COUNT=$STREAM_COUNT STREAM_SIZE=$STREAM_SIZE STREAM_WINDOW=$STREAM_WINDOW STREAM_CLIENT=$STREAM_CLIENT
GRPC_SERVER_CPUS=$GRPC_SERVER_CPUS (CPU $SERVER_CPUSET), client on CPU $CLIENT_CPU
machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $NCPU CPUs, $(uname -r)
$(rustc --version)
load average at start: $(cut -d' ' -f1-3 /proc/loadavg)
PARAMS

RESULTS="$RESULTS_DIR/results.txt"
: >"$RESULTS"
for cell in "${CELLS[@]}"; do
	IFS=: read -r mode c s <<<"$cell"
	for server in "${SERVERS[@]}"; do
		log="$RESULTS_DIR/$mode.c$c.s$s.$server"
		echo "==> $server: $mode C=$c S=$s, server on CPU $SERVER_CPUSET, client on CPU $CLIENT_CPU"
		if ! start_server "$SERVER_CPUSET" "$log.server.log" "$server"; then
			echo "    server unresponsive"
			stop_server
			continue
		fi
		line=$(taskset -c "$CLIENT_CPU" "$BIN/stream-load" \
			--addr "127.0.0.1:$STREAMING_BENCH_PORT" --mode "$mode" -c "$c" -s "$s" \
			--count "$STREAM_COUNT" --size "$STREAM_SIZE" --window "$STREAM_WINDOW" --client "$STREAM_CLIENT" \
			--warmup "$STREAM_WARMUP" --duration "$STREAM_DURATION" \
			--server-pid "$SERVER_PID" 2>"$log.client.log") || {
			echo "    client failed: $(tail -1 "$log.client.log")"
			stop_server
			continue
		}
		stop_server
		echo "server=$server $line" >>"$RESULTS"
		echo "    $line"
	done
done

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS_DIR/params"
echo "-----"
python3 "$HERE/report.py" "$RESULTS" | tee "$RESULTS_DIR/table.md"
echo
cat "$RESULTS_DIR/params"
echo "Results in $RESULTS_DIR"
