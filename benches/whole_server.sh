#!/usr/bin/env bash
# Cost per complex_proto request of a whole server: pajamax's grpc_bench
# server (grpc_bench_integration/rust_pajamax_bench) and the original
# Pajamax's (rust_pajamax_upstream_bench), each alone, loaded by h2load over
# one connection with M streams in flight (M=1 and M=100).
#
# Usage: benches/whole_server.sh [--only pajamax|original|tonic] [--tonic]
#                                [--tls] [--rss] [--no-build] [N [WARMUP]]
#        (defaults: N=20000, WARMUP=2000)
#
#   --only KIND  run one server: pajamax (this repository), original or
#                tonic (grpc_bench_integration/rust_tonic_bench).
#   --tonic      run tonic's grpc_bench server too, in a third column (about
#                8 times the instructions: the run takes a few minutes more).
#   --tls        over TLS: a CA and a server certificate (ECDSA P-256,
#                localhost and 127.0.0.1) made with the openssl CLI for the
#                run, given to the servers in GRPC_TLS_CERT and GRPC_TLS_KEY;
#                h2load and nghttp connect over https (TLS 1.3, ALPN h2).
#                pajamax is built with its bench's `tls` feature, into
#                target/tls. The original Pajamax has no TLS: it is skipped.
#   --rss        also the peak resident memory (VmHWM) of each server, run
#                natively, at h2load -c 100 -m 100 and -c 100 -m 1000.
#   --no-build   use the servers already built.
#
# With WHOLE_SERVER_KEEP=DIR in the environment, the run's files (callgrind
# dumps, logs) are kept in DIR, for a breakdown by function with
# callgrind_annotate; WHOLE_SERVER_CALLGRIND_OPTIONS adds options to
# callgrind's (e.g. --dump-instr=yes, for a breakdown by instruction).
#
# Both servers are built with their benches' release profile (LTO, one
# codegen unit) and started with GRPC_SERVER_CPUS=1 on CPU 0; h2load runs on
# CPU 1 and sends the complex_proto request body (tools/encode_payload.py).
#
# Instructions: the server runs under `valgrind --tool=callgrind` (all its
# threads counted, user space only). For each M: a warm-up of WARMUP
# requests, then the counters are zeroed (`callgrind_control -z`), then one
# h2load run of N requests and one of 2N, each followed by a dump
# (`callgrind_control -d`). Each h2load run opens its own connection: the
# difference of the two dumps, divided by N, is the cost per request with
# the connection's set-up and close cancelled out; what is left of the first
# dump is the cost of one connection.
#
# System calls: the server runs natively; after the warm-up, `strace -c -f`
# is attached to all its threads for one run of N requests, then detached.
# The figure per request includes that connection's few calls (accept,
# setsockopt, epoll_ctl, close, the original's thread start: under 0.002
# per request at N=20000).
#
# Every h2load run must answer all its requests with a 2xx status and a
# message as long as the request (an echo); one nghttp call per server checks
# grpc-status 0 and the echoed bytes. Anything else stops the script.
#
# Does nothing (and succeeds) where valgrind or h2load cannot be installed.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_DIR="$ROOT/grpc_bench_integration"

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

KINDS=(pajamax original)
TLS=false
RSS=false
BUILD=true
POSITIONAL=()
while (($#)); do
	case "$1" in
	--only)
		[[ ${2:-} == pajamax || ${2:-} == original || ${2:-} == tonic ]] || {
			echo "--only takes pajamax, original or tonic" >&2
			exit 2
		}
		KINDS=("$2")
		shift
		;;
	--only=*)
		KINDS=("${1#--only=}")
		[[ ${KINDS[0]} == pajamax || ${KINDS[0]} == original || ${KINDS[0]} == tonic ]] || {
			echo "--only takes pajamax, original or tonic" >&2
			exit 2
		}
		;;
	--tonic) KINDS+=(tonic) ;;
	--tls) TLS=true ;;
	--rss) RSS=true ;;
	--no-build) BUILD=false ;;
	-h | --help)
		sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "unknown option $1" >&2
		exit 2
		;;
	*) POSITIONAL+=("$1") ;;
	esac
	shift
done
N=${POSITIONAL[0]:-20000}
WARMUP=${POSITIONAL[1]:-2000}
[[ $N =~ ^[1-9][0-9]*$ && $WARMUP =~ ^[0-9]+$ ]] || {
	echo "N and WARMUP are request counts" >&2
	exit 2
}
if $TLS; then
	if [[ ${KINDS[*]} == original ]]; then
		echo "the original Pajamax cannot serve TLS: --tls runs pajamax and tonic" >&2
		exit 2
	fi
	for i in "${!KINDS[@]}"; do
		if [[ ${KINDS[i]} == original ]]; then
			echo "--tls: the original Pajamax has no TLS, skipped"
			unset 'KINDS[i]'
		fi
	done
	KINDS=("${KINDS[@]}")
	SCHEME=https
else
	# A plain run stays plain whatever the environment holds.
	unset GRPC_TLS_CERT GRPC_TLS_KEY
	SCHEME=http
fi
STREAMS=(1 100)
PORT=50051
URL="$SCHEME://127.0.0.1:$PORT/helloworld.Greeter/SayHello"
SERVER_CPU=0
CLIENT_CPU=1
# Debian bookworm's protoc, as grpc_bench_integration/bench.sh pins it.
PROTOC_DEB_VERSION=${PROTOC_DEB_VERSION:-3.21.12-3+deb12u1}
SCENARIO_DIR="$BENCH_DIR/scenarios/complex_proto"

bench_of() { # KIND -> bench folder
	case "$1" in
	pajamax) echo rust_pajamax_bench ;;
	original) echo rust_pajamax_upstream_bench ;;
	tonic) echo rust_tonic_bench ;;
	esac
}

# The server's build: pajamax's `tls` feature is one of its bench, off by
# default, so its TLS build has a target directory of its own and the plain
# one stays as grpc_bench builds it.
target_of() { # KIND -> target directory, relative to the bench folder
	if $TLS && [[ $1 == pajamax ]]; then echo target/tls; else echo target; fi
}
features_of() { # KIND -> cargo build options
	if $TLS && [[ $1 == pajamax ]]; then echo "--features tls"; fi
}

# ----- tools -----

apt_install() {
	if [[ -z "${APT_UPDATED:-}" ]]; then
		apt-get update >/dev/null 2>&1 || true
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >/dev/null 2>&1 || true
}

if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
	echo "==> installing valgrind"
	apt_install valgrind
fi
if ! command -v h2load >/dev/null || ! command -v nghttp >/dev/null; then
	echo "==> installing nghttp2-client (h2load, nghttp)"
	apt_install nghttp2-client
fi
for tool in valgrind callgrind_control h2load nghttp; do
	command -v "$tool" >/dev/null || {
		echo "$tool not found and not installable: no whole-server figures (apt-get install valgrind nghttp2-client)"
		exit 0
	}
done
if $TLS && ! command -v openssl >/dev/null; then
	echo "==> installing openssl"
	apt_install openssl
fi
if $TLS && ! command -v openssl >/dev/null; then
	echo "openssl not found and not installable: no figures over TLS (apt-get install openssl)"
	exit 0
fi
if ! command -v strace >/dev/null; then
	echo "==> installing strace"
	apt_install strace
fi
HAVE_STRACE=true
command -v strace >/dev/null || {
	echo "strace not found: no system call counts"
	HAVE_STRACE=false
}
if ! command -v protoc >/dev/null; then
	echo "==> installing protobuf-compiler $PROTOC_DEB_VERSION"
	apt_install "protobuf-compiler=$PROTOC_DEB_VERSION"
fi
for tool in protoc taskset python3 cargo; do
	command -v "$tool" >/dev/null || {
		echo "$tool is needed" >&2
		exit 1
	}
done
if (($(nproc --all) < 2)); then
	echo "warning: one CPU: the server and h2load share it" >&2
	CLIENT_CPU=0
fi

# ----- build, request body -----

for kind in "${KINDS[@]}"; do
	bench=$(bench_of "$kind")
	target=$(target_of "$kind")
	read -ra features <<<"$(features_of "$kind")"
	if $BUILD; then
		echo "==> building $bench (release${features[*]:+, ${features[*]}})"
		(cd "$BENCH_DIR/$bench" && env -u CARGO_TARGET_DIR cargo build --release --quiet --target-dir "$target" "${features[@]}")
	fi
	[[ -x "$BENCH_DIR/$bench/$target/release/helloworld-server" ]] || {
		echo "$bench is not built${features[*]:+ with ${features[*]}} (into $target)" >&2
		exit 1
	}
done

OUT="$(mktemp -d)"
cleanup() {
	local status=$?
	stop_server
	if ((status == 0)) && [[ -n ${WHOLE_SERVER_KEEP:-} ]]; then
		rm -rf "$WHOLE_SERVER_KEEP"
		mv "$OUT" "$WHOLE_SERVER_KEEP"
		echo "files of the run (callgrind dumps for callgrind_annotate): $WHOLE_SERVER_KEEP"
	elif ((status == 0)); then
		rm -rf "$OUT"
	else
		echo "files of the failed run: $OUT" >&2
	fi
}
trap cleanup EXIT

BODY="$OUT/request.bin"
python3 "$BENCH_DIR/tools/encode_payload.py" "$SCENARIO_DIR/helloworld.proto" \
	helloworld.HelloRequest "$SCENARIO_DIR/payload" "$BODY"
BODY_LEN=$(stat -c %s "$BODY")

# ----- certificates (--tls) -----

# A CA and a server certificate it signs, made by scripts/lib.sh as for
# scripts/tls-check.sh; the servers read them from GRPC_TLS_CERT and
# GRPC_TLS_KEY. h2load and nghttp do not verify the server's certificate.
if $TLS; then
	certs="$OUT/certs"
	make_certificates "$certs" "pajamax whole_server CA"
	export GRPC_TLS_CERT="$certs/server.pem" GRPC_TLS_KEY="$certs/server.key"
	echo "==> over TLS: $(openssl x509 -in "$GRPC_TLS_CERT" -noout -subject), $(openssl x509 -in "$GRPC_TLS_CERT" -noout -text | grep -o 'ASN1 OID: .*'), signed by the run's CA"
fi

# ----- server and client -----

port_open() { (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

# start_server KIND [WRAPPER ...]: the server alone on SERVER_CPU.
start_server() {
	local kind=$1 i
	shift
	if port_open; then
		echo "port $PORT is already in use: stop what listens there first" >&2
		exit 1
	fi
	GRPC_SERVER_CPUS=1 taskset -c "$SERVER_CPU" "$@" \
		"$BENCH_DIR/$(bench_of "$kind")/$(target_of "$kind")/release/helloworld-server" \
		>>"$OUT/$kind.server.log" 2>&1 &
	SERVER_PID=$!
	for ((i = 0; i < 600; i++)); do
		port_open && break
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	port_open || {
		echo "$kind server did not start:" >&2
		cat "$OUT/$kind.server.log" >&2
		exit 1
	}
	# What the idle server holds, to tell when a connection is gone; the
	# port opens before the server has started all its threads, so wait
	# until their number holds still.
	BASE_TASKS=$(count_tasks)
	for ((i = 0; i < 100; i++)); do
		sleep 0.3
		local tasks
		tasks=$(count_tasks)
		((tasks == BASE_TASKS)) && break
		BASE_TASKS=$tasks
	done
	BASE_FDS=$(count_fds)
}

# Sockets only: valgrind opens and closes files of its own (dumps, the
# control channel) at any time.
count_fds() { find "/proc/$SERVER_PID/fd" -mindepth 1 -maxdepth 1 -lname 'socket:*' | wc -l; }
count_tasks() { find "/proc/$SERVER_PID/task" -mindepth 1 -maxdepth 1 | wc -l; }

# Waits until the server has closed the last connection (its socket, and for
# the original Pajamax the connection's thread, are gone), so that nothing of
# one phase spills into the next.
wait_idle() {
	local i
	for ((i = 0; i < 600; i++)); do
		if (($(count_fds) <= BASE_FDS && $(count_tasks) <= BASE_TASKS)); then
			return 0
		fi
		sleep 0.05
	done
	echo "the server kept the connection open for 30 s after h2load finished" >&2
	exit 1
}

# load CONNECTIONS STREAMS REQUESTS REPORT [H2LOAD OPTIONS]: h2load on
# CLIENT_CPU; the report in REPORT.
load() {
	local c=$1 m=$2 n=$3 report=$4
	shift 4
	taskset -c "$CLIENT_CPU" h2load -c "$c" -m "$m" -n "$n" -t 1 "$@" \
		-d "$BODY" -H 'content-type: application/grpc' -H 'te: trailers' \
		"$URL" >"$report" 2>&1 || true
}

# answered REPORT REQUESTS: whether every request got a 2xx answer carrying
# a message as long as the request's (an error answer carries none).
answered() {
	local report=$1 n=$2 data
	data=$(sed -n 's/^traffic: .* (\([0-9]*\)) data$/\1/p' "$report")
	grep -q "^requests: $n total, $n started, $n done, $n succeeded, 0 failed, 0 errored, 0 timeout$" "$report" &&
		grep -q "^status codes: $n 2xx, 0 3xx, 0 4xx, 0 5xx$" "$report" &&
		[[ ${data:-0} == "$((n * BODY_LEN))" ]] &&
		{ ! $TLS || grep -q '^Application protocol: h2$' "$report"; }
}

# checked_load KIND STREAMS REQUESTS NAME: one connection; stops the script
# unless every request was answered.
checked_load() {
	local kind=$1 m=$2 n=$3 name=$4
	load 1 "$m" "$n" "$OUT/$kind.$name.h2load"
	answered "$OUT/$kind.$name.h2load" "$n" || {
		echo "FAILED: $kind, h2load -c 1 -m $m -n $n ($name) did not get $n answers of $BODY_LEN bytes$(! $TLS || echo ' over TLS with ALPN h2'):" >&2
		cat "$OUT/$kind.$name.h2load" >&2
		exit 1
	}
	if $TLS && [[ -z ${RESULT["$kind tls"]:-} ]]; then
		# What h2load and the server agreed on: protocol, cipher suite, key exchange.
		RESULT["$kind tls"]=$(awk -F': ' '/^(TLS Protocol|Cipher|Server Temp Key):/ { printf "%s%s", sep, $2; sep = ", " }' "$OUT/$kind.$name.h2load")
		echo "    TLS: ${RESULT["$kind tls"]}"
	fi
	wait_idle
}

# The answer to one request must be grpc-status 0 and the request's bytes.
grpc_check() {
	local kind=$1 status
	nghttp -nv -d "$BODY" -H 'content-type: application/grpc' -H 'te: trailers' \
		"$URL" >"$OUT/$kind.nghttp" 2>&1 || true
	nghttp -d "$BODY" -H 'content-type: application/grpc' -H 'te: trailers' \
		"$URL" >"$OUT/$kind.echo" 2>/dev/null || true
	status=$(grep -o 'grpc-status: [0-9]*' "$OUT/$kind.nghttp" | tail -1 | cut -d' ' -f2)
	if $TLS && ! grep -q 'The negotiated protocol: h2$' "$OUT/$kind.nghttp"; then
		status="$status, not over TLS with ALPN h2"
	fi
	if [[ ${status:-missing} != 0 ]] || ! cmp -s "$OUT/$kind.echo" "$BODY"; then
		echo "FAILED: $kind answered grpc-status=${status:-missing} and $(stat -c %s "$OUT/$kind.echo") bytes to one request:" >&2
		cat "$OUT/$kind.nghttp" >&2
		exit 1
	fi
	wait_idle
}

declare -A RESULT # "KIND what M" -> figure

# ----- instructions (callgrind) -----

# dump KIND: IR = the instructions counted since the last zero or dump.
DUMPS=0
IR=0
dump() {
	local kind=$1 file
	callgrind_control -d "$SERVER_PID" >>"$OUT/$kind.callgrind_control.log" 2>&1
	DUMPS=$((DUMPS + 1))
	file="$OUT/$kind.callgrind.$DUMPS"
	[[ -s $file ]] || {
		echo "callgrind wrote no $file" >&2
		exit 1
	}
	IR=$(awk '/^summary:/ { print $2; exit }' "$file")
}

instructions() {
	local kind=$1 m ir1 ir2
	echo "==> $kind under callgrind: warm-up $WARMUP, then $N and $((2 * N)) requests on one connection, M=${STREAMS[*]}"
	DUMPS=0
	# shellcheck disable=SC2086 # options, split on purpose
	start_server "$kind" valgrind --tool=callgrind ${WHOLE_SERVER_CALLGRIND_OPTIONS:-} \
		--callgrind-out-file="$OUT/$kind.callgrind" --log-file="$OUT/$kind.valgrind.log"
	grpc_check "$kind"
	for m in "${STREAMS[@]}"; do
		if ((WARMUP > 0)); then
			checked_load "$kind" "$m" "$WARMUP" "cg-warmup-m$m"
		fi
		callgrind_control -z "$SERVER_PID" >>"$OUT/$kind.callgrind_control.log" 2>&1
		checked_load "$kind" "$m" "$N" "cg-n-m$m"
		dump "$kind"
		ir1=$IR
		checked_load "$kind" "$m" "$((2 * N))" "cg-2n-m$m"
		dump "$kind"
		ir2=$IR
		RESULT["$kind ir $m"]=$(python3 -c "import sys; a, b, n = map(int, sys.argv[1:]); print((b - a) / n)" "$ir1" "$ir2" "$N")
		RESULT["$kind conn $m"]=$(python3 -c "import sys; a, b, n = map(int, sys.argv[1:]); print(a - (b - a))" "$ir1" "$ir2" "$N")
		RESULT["$kind naive $m"]=$(python3 -c "import sys; print(int(sys.argv[1]) / int(sys.argv[2]))" "$ir1" "$N")
		printf '    M=%-3s %s Ir for %s requests, %s Ir for %s: %.0f per request, %s per connection\n' \
			"$m" "$ir1" "$N" "$ir2" "$((2 * N))" "${RESULT["$kind ir $m"]}" "${RESULT["$kind conn $m"]}"
	done
	stop_server
}

# ----- system calls (strace) -----

syscalls() {
	local kind=$1 m summary strace_pid total reads writes epolls failed
	echo "==> $kind natively, strace -c -f attached for $N requests on one connection, M=${STREAMS[*]}"
	start_server "$kind"
	grpc_check "$kind"
	for m in "${STREAMS[@]}"; do
		if ((WARMUP > 0)); then
			checked_load "$kind" "$m" "$WARMUP" "st-warmup-m$m"
		fi
		summary="$OUT/$kind.strace.m$m"
		strace_start "$SERVER_PID" "$summary"
		checked_load "$kind" "$m" "$N" "st-n-m$m"
		strace_stop
		read -r total reads writes epolls failed < <(strace_counts "$summary")
		RESULT["$kind sys $m"]=$(python3 -c "import sys; print(int(sys.argv[1]) / int(sys.argv[2]))" "$total" "$N")
		RESULT["$kind sysdetail $m"]=$(python3 -c '
import sys
n = int(sys.argv[1])
print(" | ".join(f"{int(v) / n:.4f}" for v in sys.argv[2:]))' "$N" "$total" "$reads" "$writes" "$epolls" "$failed")
		echo "    M=$m: $total system calls ($reads read/recv, $writes write/send, $epolls epoll_wait, $failed failed)"
	done
	stop_server
}

# ----- resident memory -----

rss() {
	local kind=$1 c=100 m report n hwm done_n
	for m in 100 1000; do
		n=$((c * m * 4))
		echo "==> $kind natively: h2load -c $c -m $m -n $n, peak resident memory"
		start_server "$kind"
		report="$OUT/$kind.rss.m$m.h2load"
		load "$c" "$m" "$n" "$report" -N 5s
		hwm=$(awk '/^VmHWM:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$SERVER_PID/status")
		if ! answered "$report" "$n"; then
			done_n=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' "$report")
			if [[ $kind == pajamax ]]; then
				echo "FAILED: pajamax, h2load -c $c -m $m -n $n did not get every answer:" >&2
				cat "$report" >&2
				exit 1
			fi
			hwm="$hwm (${done_n:-0} of $n answered)"
			echo "    $kind answered ${done_n:-0} of $n requests"
		fi
		RESULT["$kind rss $m"]=$hwm
		echo "    VmHWM $hwm, VmRSS after the run $(awk '/^VmRSS:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$SERVER_PID/status")"
		stop_server
	done
}

# ----- runs -----

START=$SECONDS
for kind in "${KINDS[@]}"; do
	instructions "$kind"
	if $HAVE_STRACE; then syscalls "$kind"; fi
	if $RSS; then rss "$kind"; fi
done

# ----- table -----

fmt() { # VALUE DECIMALS
	[[ -z $1 ]] && {
		echo "–"
		return
	}
	python3 -c "import sys; print(f'{float(sys.argv[1]):,.{int(sys.argv[2])}f}')" "$1" "$2"
}
ratio() {
	[[ -z $1 || -z $2 ]] && {
		echo "–"
		return
	}
	python3 -c "import sys; a, b = map(float, sys.argv[1:]); print(f'{a / b:.2f}' if b else '–')" "$1" "$2"
}
WITH_TONIC=false
for kind in "${KINDS[@]}"; do [[ $kind == tonic ]] && WITH_TONIC=true; done
row() { # LABEL KEY DECIMALS
	local p=${RESULT["pajamax $2"]:-} o=${RESULT["original $2"]:-} t=${RESULT["tonic $2"]:-}
	if $TLS; then # no original column
		echo "| $1 | $(fmt "$p" "$3") | $(fmt "$t" "$3") | $(ratio "$t" "$p") |"
	elif $WITH_TONIC; then
		echo "| $1 | $(fmt "$p" "$3") | $(fmt "$o" "$3") | $(ratio "$p" "$o") | $(fmt "$t" "$3") | $(ratio "$t" "$p") |"
	else
		echo "| $1 | $(fmt "$p" "$3") | $(fmt "$o" "$3") | $(ratio "$p" "$o") |"
	fi
}

echo
if $TLS; then
	echo "complex_proto over TLS, one connection, server on CPU $SERVER_CPU, h2load on CPU $CLIENT_CPU;"
	for kind in "${KINDS[@]}"; do echo "$kind: ${RESULT["$kind tls"]:-?}"; done
else
	echo "complex_proto, one connection, server on CPU $SERVER_CPU, h2load on CPU $CLIENT_CPU;"
fi
echo "$N requests counted (instructions: difference of $N and $((2 * N))), after $WARMUP warm-up requests"
echo
if $TLS; then
	echo "| per request, over TLS | pajamax | tonic | tonic / pajamax |"
	echo "|---|---:|---:|---:|"
elif $WITH_TONIC; then
	echo "| per request | pajamax | original | pajamax / original | tonic | tonic / pajamax |"
	echo "|---|---:|---:|---:|---:|---:|"
else
	echo "| per request | pajamax | original | ratio |"
	echo "|---|---:|---:|---:|"
fi
for m in "${STREAMS[@]}"; do row "instructions, M=$m" "ir $m" 0; done
if $HAVE_STRACE; then
	for m in "${STREAMS[@]}"; do row "syscalls, M=$m" "sys $m" 3; done
fi
if $RSS; then
	for m in 100 1000; do
		if $TLS; then
			echo "| VmHWM, 100 connections × $m streams | ${RESULT["pajamax rss $m"]:-–} | ${RESULT["tonic rss $m"]:-–} | |"
		elif $WITH_TONIC; then
			echo "| VmHWM, 100 connections × $m streams | ${RESULT["pajamax rss $m"]:-–} | ${RESULT["original rss $m"]:-–} | | ${RESULT["tonic rss $m"]:-–} | |"
		else
			echo "| VmHWM, 100 connections × $m streams | ${RESULT["pajamax rss $m"]:-–} | ${RESULT["original rss $m"]:-–} | |"
		fi
	done
fi
echo
# tonic's runtime threads do work of their own between runs: its set-up
# cost cannot be told apart, so it has no column here.
if $TLS; then
	echo "| instructions per connection (TLS handshake, set-up and close) | pajamax |"
	echo "|---|---:|"
	for m in "${STREAMS[@]}"; do
		echo "| M=$m | $(fmt "${RESULT["pajamax conn $m"]:-}" 0) |"
	done
else
	echo "| instructions per connection (set-up and close) | pajamax | original |"
	echo "|---|---:|---:|"
	for m in "${STREAMS[@]}"; do
		echo "| M=$m | $(fmt "${RESULT["pajamax conn $m"]:-}" 0) | $(fmt "${RESULT["original conn $m"]:-}" 0) |"
	done
fi
if $HAVE_STRACE; then
	echo
	echo "| syscalls per request | M | total | read/recv | write/send | epoll_wait | failed (EAGAIN) |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for kind in "${KINDS[@]}"; do
		for m in "${STREAMS[@]}"; do
			echo "| $kind | $m | ${RESULT["$kind sysdetail $m"]} |"
		done
	done
fi
echo
echo "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) CPUs, $(rustc --version), $(h2load --version | head -1), $(valgrind --version)$(! $TLS || echo ", $(openssl version | cut -d' ' -f1-2)")"
echo "commit $(git -C "$ROOT" log -1 --pretty=%h 2>/dev/null || echo '?'), load average $(cut -d' ' -f1-3 /proc/loadavg), $((SECONDS - START)) s"
