#!/usr/bin/env bash
# grpc_bench's benchmark, run natively: no Docker, CPUs split with taskset.
#
# Usage: bench.sh [--sweep] [--h2load] [--no-build] [BENCH ...]
#
#   BENCH       bench folders next to this script (rust_pajamax_bench,
#               rust_tonic_bench, rust_pajamax_upstream_bench); all *_bench
#               folders by default.
#   --sweep     run the grid of connections C and concurrent streams S
#               (C=1: S=1,10,100,1000; C=10: S=10..10000; C=100:
#               S=100..100000) instead of one run, then print and write the
#               ratio table and the chart. SWEEP_CELLS="C:S C:S ..." picks
#               cells of the grid.
#   --h2load    load with h2load instead of ghz: pre-encoded request bodies,
#               -c C -m S/C, and a check that answers carry grpc-status 0.
#   --no-build  use the servers already built.
#
# grpc_bench's variables, with its defaults:
#   GRPC_BENCHMARK_DURATION=20s GRPC_BENCHMARK_WARMUP=5s GRPC_SERVER_CPUS=1
#   GRPC_SERVER_RAM=512m (not enforced natively) GRPC_CLIENT_CONNECTIONS=50
#   GRPC_CLIENT_CONCURRENCY=1000 GRPC_CLIENT_QPS=0 GRPC_CLIENT_CPUS=1
#   GRPC_REQUEST_SCENARIO=complex_proto
# The server runs on CPUs 0..GRPC_SERVER_CPUS-1 and the client on the next
# GRPC_CLIENT_CPUS. Results go to results/<timestamp>/ (tables, runs.csv).
#
# Each run is marked client-bound when the client used at least
# CLIENT_BOUND_CLIENT_PCT=85 % of the CPUs it can keep busy (GRPC_CLIENT_CPUS
# rounded up; h2load: no more than its threads, one per connection at most)
# and the server under CLIENT_BOUND_SERVER_PCT=50 % of one CPU, both from
# /proc, from one second into the run to its end. req/s then measures the
# client, and req/s per server CPU divides by a small, noisy CPU time: the
# tables print it with "(client-bound)" and the chart draws it hollow.
# server-bound: the server at 90 % of its CPUs or more, the client not
# saturated.

set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

SWEEP=false
CLIENT=ghz
BUILD=true
BENCHES=()
for arg in "$@"; do
	case "$arg" in
	--sweep) SWEEP=true ;;
	--h2load) CLIENT=h2load ;;
	--no-build) BUILD=false ;;
	-h | --help)
		sed -n '2,/^$/p' "$HERE/$(basename "$0")" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "unknown option $arg" >&2
		exit 2
		;;
	*) BENCHES+=("${arg%/}") ;;
	esac
done
if [[ ${#BENCHES[@]} -eq 0 ]]; then
	for dir in *_bench; do BENCHES+=("$dir"); done
fi
for bench in "${BENCHES[@]}"; do
	if [[ ! -f "$bench/Cargo.toml" ]]; then
		echo "no bench named $bench here" >&2
		exit 2
	fi
done

export GRPC_BENCHMARK_DURATION=${GRPC_BENCHMARK_DURATION:-20s}
export GRPC_BENCHMARK_WARMUP=${GRPC_BENCHMARK_WARMUP:-5s}
export GRPC_SERVER_CPUS=${GRPC_SERVER_CPUS:-1}
export GRPC_SERVER_RAM=${GRPC_SERVER_RAM:-512m}
export GRPC_CLIENT_CONNECTIONS=${GRPC_CLIENT_CONNECTIONS:-50}
export GRPC_CLIENT_CONCURRENCY=${GRPC_CLIENT_CONCURRENCY:-1000}
export GRPC_CLIENT_QPS=${GRPC_CLIENT_QPS:-0}
export GRPC_CLIENT_CPUS=${GRPC_CLIENT_CPUS:-1}
export GRPC_REQUEST_SCENARIO=${GRPC_REQUEST_SCENARIO:-complex_proto}
export CLIENT_BOUND_CLIENT_PCT=${CLIENT_BOUND_CLIENT_PCT:-85}
export CLIENT_BOUND_SERVER_PCT=${CLIENT_BOUND_SERVER_PCT:-50}
GHZ_VERSION=v0.114.0
# Debian bookworm's protoc, which the original pajamax-build (prost-build
# 0.13) and the h2load body encoder need.
PROTOC_DEB_VERSION=${PROTOC_DEB_VERSION:-3.21.12-3+deb12u1}
SCENARIO_DIR="$HERE/scenarios/$GRPC_REQUEST_SCENARIO"
PROTO="$SCENARIO_DIR/helloworld.proto"
PAYLOAD="$SCENARIO_DIR/payload"
[[ -f "$PROTO" && -f "$PAYLOAD" ]] || {
	echo "scenario $GRPC_REQUEST_SCENARIO not found in $HERE/scenarios" >&2
	exit 2
}

# ----- tools -----

apt_install() {
	if [[ -z "${APT_UPDATED:-}" ]]; then
		apt-get update >/dev/null
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null
}

need_protoc() {
	command -v protoc >/dev/null || {
		echo "==> installing protobuf-compiler $PROTOC_DEB_VERSION"
		apt_install "protobuf-compiler=$PROTOC_DEB_VERSION"
	}
}

for tool in taskset python3 cargo; do
	command -v "$tool" >/dev/null || {
		echo "$tool is needed" >&2
		exit 1
	}
done
if [[ $CLIENT == ghz ]]; then
	if command -v go >/dev/null; then
		PATH="$PATH:$(go env GOPATH)/bin"
	fi
	if ! command -v ghz >/dev/null; then
		echo "==> installing ghz $GHZ_VERSION"
		go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
		PATH="$PATH:$(go env GOPATH)/bin"
	fi
else
	if ! command -v h2load >/dev/null || ! command -v nghttp >/dev/null; then
		echo "==> installing nghttp2-client (h2load, nghttp)"
		apt_install nghttp2-client
	fi
	need_protoc
fi
for bench in "${BENCHES[@]}"; do
	[[ $bench == rust_pajamax_upstream_bench && $BUILD == true ]] && need_protoc
done

# ----- CPUs -----

NCPU=$(nproc --all)
cpu_span() { # first count -> "a-b" (wrapping around the CPUs there are)
	local first=$1 count=$2 list="" i
	for ((i = 0; i < count; i++)); do
		list+="${list:+,}$(((first + i) % NCPU))"
	done
	echo "$list"
}
ceil() { python3 -c "import math,sys; print(max(1, math.ceil(float(sys.argv[1]))))" "$1"; }
SERVER_N=$(ceil "$GRPC_SERVER_CPUS")
CLIENT_N=$(ceil "$GRPC_CLIENT_CPUS")
SERVER_CPUSET=$(cpu_span 0 "$SERVER_N")
CLIENT_CPUSET=$(cpu_span "$SERVER_N" "$CLIENT_N")
if ((SERVER_N + CLIENT_N > NCPU)); then
	echo "warning: $SERVER_N server + $CLIENT_N client CPUs on a $NCPU-CPU machine: they share CPUs" >&2
fi

# ----- build -----

if $BUILD; then
	for bench in "${BENCHES[@]}"; do
		echo "==> building $bench (release)"
		(cd "$bench" && env -u CARGO_TARGET_DIR cargo build --release --quiet --target-dir target)
	done
fi
for bench in "${BENCHES[@]}"; do
	[[ -x "$bench/target/release/helloworld-server" ]] || {
		echo "$bench is not built" >&2
		exit 1
	}
done

RESULTS_DIR="$HERE/results/$(date '+%Y%m%dT%H%M%S')"
mkdir -p "$RESULTS_DIR"
if [[ $CLIENT == h2load ]]; then
	BODY="$RESULTS_DIR/request.bin"
	python3 tools/encode_payload.py "$PROTO" helloworld.HelloRequest "$PAYLOAD" "$BODY"
fi

# ----- one run -----

trap stop_server EXIT

wait_on_tcp50051() {
	local i
	for ((i = 0; i < 300; i++)); do
		(echo >/dev/tcp/127.0.0.1/50051) 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# client_threads CONNECTIONS: the CPUs the client can keep busy. ghz runs
# on CLIENT_N (--cpus); h2load on one thread per CPU, at most one per
# connection.
client_threads() {
	local c=$1
	if [[ $CLIENT == ghz ]]; then
		echo "$CLIENT_N"
	else
		echo $((CLIENT_N < c ? CLIENT_N : c))
	fi
}

# client DURATION CONNECTIONS CONCURRENCY: the load, on the client CPUs.
client() {
	local duration=$1 c=$2 s=$3
	if [[ $CLIENT == ghz ]]; then
		# grpc_bench divides the rate by the concurrency before giving it to ghz.
		# One difference from grpc_bench's flags: --duration-stop=wait lets the
		# calls in flight when the duration ends finish and count, where ghz's
		# default cuts them and reports each as an error ("use of closed
		# network connection"), which would hide real errors among them.
		taskset -c "$CLIENT_CPUSET" ghz \
			--proto="$PROTO" \
			--call=helloworld.Greeter.SayHello \
			--insecure \
			--concurrency="$s" \
			--connections="$c" \
			--rps="$((GRPC_CLIENT_QPS / s))" \
			--duration "$duration" \
			--duration-stop=wait \
			--data-file "$PAYLOAD" \
			--cpus="$CLIENT_N" \
			127.0.0.1:50051
	else
		# h2load has no request rate: GRPC_CLIENT_QPS applies to ghz only.
		local threads
		threads=$(client_threads "$c")
		taskset -c "$CLIENT_CPUSET" h2load \
			-c "$c" -m "$(((s + c - 1) / c))" -t "$threads" \
			-D "$duration" \
			-d "$BODY" \
			-H 'content-type: application/grpc' -H 'te: trailers' \
			http://127.0.0.1:50051/helloworld.Greeter/SayHello
	fi
}

# The answer to one request must be grpc-status 0, carrying back the
# request's Hello (an echo's reply encodes to the very bytes of the request).
grpc_status_check() {
	local out=$1
	nghttp -nv -d "$BODY" -H 'content-type: application/grpc' -H 'te: trailers' \
		http://127.0.0.1:50051/helloworld.Greeter/SayHello >"$out.nghttp" 2>&1 || true
	nghttp -d "$BODY" -H 'content-type: application/grpc' -H 'te: trailers' \
		http://127.0.0.1:50051/helloworld.Greeter/SayHello >"$out.body" 2>/dev/null || true
	local status echo=no
	status=$(grep -o 'grpc-status: [0-9]*' "$out.nghttp" | tail -1 | cut -d' ' -f2)
	cmp -s "$out.body" "$BODY" && echo=yes
	echo "grpc-status check: grpc-status=${status:-missing}, echo=$echo"
}

# run_one BENCH C S DIR
run_one() {
	local bench=$1 c=$2 s=$3 dir=$4 name
	name=$(basename "$bench")
	mkdir -p "$dir"
	echo "==> $name: C=$c S=$s, server on CPU $SERVER_CPUSET, $CLIENT on CPU $CLIENT_CPUSET"
	# The cell, and the CPUs each side can keep busy: what tools/report.py
	# judges the CPU figures against.
	echo "connections=$c streams=$s server_cpus=$SERVER_N client_cpus=$(client_threads "$c")" \
		>"$dir/$name.params"
	GRPC_SERVER_CPUS=$GRPC_SERVER_CPUS taskset -c "$SERVER_CPUSET" \
		"$bench/target/release/helloworld-server" >"$dir/$name.server.log" 2>&1 &
	SERVER_PID=$!
	if ! wait_on_tcp50051; then
		echo "    server unresponsive" | tee -a "$dir/$name.report"
		stop_server
		return 0
	fi
	local check=""
	[[ $CLIENT == h2load ]] && check=$(grpc_status_check "$dir/$name")
	if [[ $GRPC_BENCHMARK_WARMUP != 0s && $GRPC_BENCHMARK_WARMUP != 0 ]]; then
		client "$GRPC_BENCHMARK_WARMUP" "$c" "$s" >"$dir/$name.warmup" 2>&1 || true
	fi
	client "$GRPC_BENCHMARK_DURATION" "$c" "$s" >"$dir/$name.report" 2>&1 &
	local client_pid=$!
	# As grpc_bench's collect_stats.sh, start sampling a second in.
	sleep 1
	local client_proc
	client_proc=$(pgrep -P "$client_pid" | head -1 || true)
	python3 tools/procstat.py "$SERVER_PID" "$dir/$name.stats" &
	local server_sampler=$!
	python3 tools/procstat.py "${client_proc:-$client_pid}" "$dir/$name.client.stats" &
	local client_sampler=$!
	wait "$client_pid" || true
	kill -TERM "$server_sampler" "$client_sampler" 2>/dev/null || true
	wait "$server_sampler" "$client_sampler" 2>/dev/null || true
	[[ -n $check ]] && echo "$check" >>"$dir/$name.report"
	stop_server
	grep -E "Requests/sec|finished in|grpc-status check" "$dir/$name.report" | sed 's/^ */    /' || true
	python3 tools/report.py run "$dir" "$name" || true
}

write_params() {
	cat >"$RESULTS_DIR/bench.params" <<EOF
Benchmark execution parameters (native run):
$(git -C "$HERE" log -1 --pretty='%h %cD %s' 2>/dev/null || echo 'no git')
- benches: ${BENCHES[*]}
- client: $CLIENT ($(if [[ $CLIENT == ghz ]]; then echo "ghz $GHZ_VERSION"; else h2load --version | head -1; fi))
- GRPC_BENCHMARK_DURATION=$GRPC_BENCHMARK_DURATION
- GRPC_BENCHMARK_WARMUP=$GRPC_BENCHMARK_WARMUP
- GRPC_SERVER_CPUS=$GRPC_SERVER_CPUS (CPU $SERVER_CPUSET)
- GRPC_SERVER_RAM=$GRPC_SERVER_RAM (not enforced natively)
- GRPC_CLIENT_CONNECTIONS=$GRPC_CLIENT_CONNECTIONS
- GRPC_CLIENT_CONCURRENCY=$GRPC_CLIENT_CONCURRENCY
- GRPC_CLIENT_QPS=$GRPC_CLIENT_QPS
- GRPC_CLIENT_CPUS=$GRPC_CLIENT_CPUS (CPU $CLIENT_CPUSET)
- GRPC_REQUEST_SCENARIO=$GRPC_REQUEST_SCENARIO
- client-bound: client >= CLIENT_BOUND_CLIENT_PCT=$CLIENT_BOUND_CLIENT_PCT % of its CPUs, server < CLIENT_BOUND_SERVER_PCT=$CLIENT_BOUND_SERVER_PCT % of one CPU
- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $NCPU CPUs
- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)
EOF
}

write_params
if $SWEEP; then
	CELLS=${SWEEP_CELLS:-"1:1 1:10 1:100 1:1000 10:10 10:100 10:1000 10:10000 100:100 100:1000 100:10000 100:100000"}
	for cell in $CELLS; do
		c=${cell%%:*}
		s=${cell##*:}
		for bench in "${BENCHES[@]}"; do
			run_one "$bench" "$c" "$s" "$RESULTS_DIR/c${c}_s${s}"
		done
	done
	echo "-----"
	echo "Sweep finished. Detailed results are in $RESULTS_DIR"
	python3 tools/report.py sweep "$RESULTS_DIR"
	echo
	echo "Written: $RESULTS_DIR/sweep.md, $RESULTS_DIR/sweep.svg, $RESULTS_DIR/runs.csv"
else
	for bench in "${BENCHES[@]}"; do
		run_one "$bench" "$GRPC_CLIENT_CONNECTIONS" "$GRPC_CLIENT_CONCURRENCY" "$RESULTS_DIR"
	done
	echo "-----"
	echo "Benchmark finished. Detailed results are in $RESULTS_DIR"
	python3 tools/report.py table "$RESULTS_DIR" | tee "$RESULTS_DIR/table.txt"
	echo
	echo "Written: $RESULTS_DIR/table.txt, $RESULTS_DIR/runs.csv"
fi
cat "$RESULTS_DIR/bench.params"
echo "All done."
