#!/usr/bin/env bash
# Health checking against the example servers with grpc-health-probe
# v0.4.61 (grpc-go's health client):
#   - helloworld: the server as a whole ("") and helloworld.Greeter are
#     SERVING, an unknown service is an error (NOT_FOUND);
#   - route_guide, dict_store and interop-server: their service is SERVING;
#   - SIGTERM while a health Watch (grpcurl v1.9.3) and a paced
#     server-streaming call are open: the watcher sees NOT_SERVING, the call
#     gets every answer, and the server exits 0.
#
# Needs cargo, go and python3. The probe and grpcurl are built from the Go
# module proxy into ${CARGO_TARGET_DIR:-target}/conformance/bin the first
# time, and only rebuilt when missing or of another version. Exits non-zero
# on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

PROBE_VERSION=v0.4.61
PROBE_MODULE=github.com/grpc-ecosystem/grpc-health-probe

log_as health-check

# ----- the probe -----

find_go health-check
require health-check python3
set_target_dir
go_tool grpc-health-probe "$PROBE_MODULE" "$PROBE_MODULE" "$PROBE_VERSION" -mod=mod
probe="$tools_bin/grpc-health-probe"
install_grpcurl

# ----- servers -----

log "building the example servers (release)"
cargo build --release -p pajamax-examples --bins

use_work_dir

release="$target_dir/release"
start_on_free_port "$work/helloworld.log" "$release/helloworld" "127.0.0.1:{port}"
helloworld_port=$started_port
start_on_free_port "$work/route_guide.log" "$release/route_guide" "127.0.0.1:{port}"
route_guide_port=$started_port
start_on_free_port "$work/dict_store.log" "$release/dict_store" "127.0.0.1:{port}"
dict_store_port=$started_port
start_on_free_port "$work/interop-server.log" "$release/interop-server" "--port={port}" --use_tls=false
interop_port=$started_port

# ----- checks -----

failures=0

# Probes 127.0.0.1:$1 for service $2 ("" for the server); $3 is the exit
# status expected (0: SERVING).
expect() {
    local port=$1 service=$2 want=$3 out rc=0
    out=$("$probe" -addr="127.0.0.1:$port" -service="$service" -connect-timeout=5s -rpc-timeout=5s 2>&1) || rc=$?
    if [ "$rc" -eq "$want" ]; then
        log "ok   ${service:-(server)} on :$port: $out"
    else
        log "FAIL ${service:-(server)} on :$port: exit $rc, not $want: $out"
        failures=$((failures + 1))
    fi
}

expect "$helloworld_port" "" 0
expect "$helloworld_port" helloworld.Greeter 0
expect "$helloworld_port" grpc.health.v1.Health 0
# grpc-health-probe exits 3 when the RPC fails (here NOT_FOUND).
expect "$helloworld_port" helloworld.Nobody 3
expect "$route_guide_port" routeguide.RouteGuide 0
expect "$dict_store_port" dict_store.DictStore 0
expect "$interop_port" grpc.testing.TestService 0

# ----- SIGTERM: watchers told, calls in flight answered -----

start_on_free_port "$work/drained.log" "$release/interop-server" "--port={port}" --use_tls=false
drained_pid=$started_pid
drained_port=$started_port
"$grpcurl" -plaintext -max-time 30 -d '{"service": ""}' "127.0.0.1:$drained_port" \
    grpc.health.v1.Health/Watch >"$work/watch.out" 2>&1 &
watch_pid=$!
# Five answers 300 ms apart, made on the worker: the call is in flight when
# the signal comes.
parameters=$(printf '{"size": 10, "interval_us": 300000},%.0s' 1 2 3 4)
"$grpcurl" -plaintext -max-time 30 \
    -d "{\"response_type\": \"COMPRESSABLE\", \"response_parameters\": [$parameters {\"size\": 10, \"interval_us\": 300000}]}" \
    "127.0.0.1:$drained_port" grpc.testing.TestService/StreamingOutputCall >"$work/call.out" 2>&1 &
call_pid=$!
# Until the watcher has its first status and the call is under way.
for _ in $(seq 1 50); do
    grep -q SERVING "$work/watch.out" && break
    sleep 0.1
done
sleep 0.5
kill -TERM "$drained_pid"
server_rc=0
wait "$drained_pid" || server_rc=$?
call_rc=0
wait "$call_pid" || call_rc=$?
wait "$watch_pid" || true
answers=$(grep -c '"payload"' "$work/call.out" || true)
if [ "$server_rc" -eq 0 ] && [ "$call_rc" -eq 0 ] && [ "$answers" -eq 5 ] &&
    grep -q '"status": "SERVING"' "$work/watch.out" &&
    grep -q '"status": "NOT_SERVING"' "$work/watch.out"; then
    log "ok   SIGTERM: the watcher saw SERVING then NOT_SERVING, the call in flight got $answers of 5 answers, the server exited 0"
else
    log "FAIL SIGTERM: server exit $server_rc, call exit $call_rc with $answers of 5 answers"
    sed 's/^/    watch: /' "$work/watch.out"
    sed 's/^/    call: /' "$work/call.out"
    sed 's/^/    server: /' "$work/drained.log"
    failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
    echo "health-check: FAILED ($failures failing check(s))"
    exit 1
fi
echo "health-check: all checks passed ($(($(date +%s) - started)) s)"
