#!/usr/bin/env bash
# Server reflection against the example servers with grpcurl v1.9.3, given
# no proto file: every answer comes from the servers' reflection service.
#   - helloworld: list, describe (the Greeter, every service, a method and
#     a message that use the well-known google.protobuf.Empty), a call of
#     helloworld.Greeter/SayHello, and an unknown symbol, which must fail;
#   - route_guide: list, describe, a call of routeguide.RouteGuide/GetFeature;
#   - dict_store: list, describe, Set then Get;
#   - interop-server: list, describe grpc.testing.TestService and the
#     message grpc.testing.Empty, a call of EmptyCall.
#
# Needs cargo, go and python3. grpcurl is built from the Go module proxy
# into ${CARGO_TARGET_DIR:-target}/conformance/bin the first time, and only
# rebuilt when missing or of another version. Prints each command and its
# output; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

log_as reflection-check

# ----- grpcurl -----

find_go reflection-check
require reflection-check python3
set_target_dir
install_grpcurl

# ----- servers -----

log "building the example servers (release)"
cargo build --release -p pajamax-examples --bins

use_work_dir

release="$target_dir/release"
start_on_free_port "$work/helloworld.log" "$release/helloworld" "127.0.0.1:{port}"
helloworld=127.0.0.1:$started_port
start_on_free_port "$work/route_guide.log" "$release/route_guide" "127.0.0.1:{port}"
route_guide=127.0.0.1:$started_port
start_on_free_port "$work/dict_store.log" "$release/dict_store" "127.0.0.1:{port}"
dict_store=127.0.0.1:$started_port
start_on_free_port "$work/interop-server.log" "$release/interop-server" "--port={port}" --use_tls=false
interop=127.0.0.1:$started_port
log "helloworld on $helloworld, route_guide on $route_guide, dict_store on $dict_store, interop-server on $interop"

# ----- checks -----

failures=0

# Runs `grpcurl -plaintext ARGS...` (the arguments after the first two)
# and prints the command and its output. $1 is `ok` when grpcurl must
# succeed, `fails` when it must fail; every line of $2 (fixed strings) must
# be in the output.
check() {
    local want=$1 needles=$2 out rc=0 verdict=ok needle
    shift 2
    out=$("$grpcurl" -plaintext -connect-timeout 5 -max-time 20 "$@" 2>&1) || rc=$?
    if [ "$want" = ok ] && [ "$rc" -ne 0 ]; then
        verdict=FAIL
    elif [ "$want" = fails ] && [ "$rc" -eq 0 ]; then
        verdict=FAIL
    fi
    while IFS= read -r needle; do
        [ -z "$needle" ] && continue
        if ! grep -qF -- "$needle" <<<"$out"; then
            verdict=FAIL
            out+=$'\n'"(missing: $needle)"
        fi
    done <<<"$needles"
    printf '%s $ grpcurl -plaintext' "$verdict"
    local arg
    for arg in "$@"; do
        if [[ "$arg" =~ ^[A-Za-z0-9_./:=-]+$ ]]; then
            printf ' %s' "$arg"
        else
            printf " '%s'" "$arg"
        fi
    done
    printf ' (exit %s)\n' "$rc"
    local lines
    mapfile -t lines <<<"$out"
    printf '    %s\n' "${lines[@]}"
    if [ "$verdict" != ok ]; then
        failures=$((failures + 1))
    fi
}

reflection_services='grpc.reflection.v1.ServerReflection
grpc.reflection.v1alpha.ServerReflection'

log "helloworld"
check ok "helloworld.Greeter
$reflection_services" "$helloworld" list
check ok "helloworld.Greeter is a service:
rpc SayHello ( .helloworld.HelloRequest ) returns ( .helloworld.HelloReply );" \
    "$helloworld" describe helloworld.Greeter
check ok '"message": "Hello x!"' -d '{"name":"x"}' "$helloworld" helloworld.Greeter/SayHello
# Every listed service, the reflection ones included.
check ok "service Greeter {
service ServerReflection {" "$helloworld" describe
check ok "helloworld.HelloRequest is a message:
string name = 1;" "$helloworld" describe helloworld.HelloRequest
# A method and a message of the well-known google/protobuf/empty.proto,
# which echo.proto imports (echo.proto is in the binary's descriptor set).
check ok "rpc Ping ( .google.protobuf.Empty ) returns ( .google.protobuf.Empty );" \
    "$helloworld" describe echo.Echo.Ping
check ok "google.protobuf.Empty is a message:
message Empty {" "$helloworld" describe google.protobuf.Empty
check fails 'Symbol not found: helloworld.Nobody' "$helloworld" describe helloworld.Nobody

log "route_guide"
check ok "routeguide.RouteGuide
$reflection_services" "$route_guide" list
check ok "routeguide.RouteGuide is a service:
rpc RouteChat ( stream .routeguide.RouteNote ) returns ( stream .routeguide.RouteNote );" \
    "$route_guide" describe routeguide.RouteGuide
check ok '"name": "Quarry Lookout"' -d '{"latitude":409146138,"longitude":-746188906}' \
    "$route_guide" routeguide.RouteGuide/GetFeature

log "dict_store"
check ok "dict_store.DictStore
$reflection_services" "$dict_store" list
check ok "dict_store.DictStore is a service:
rpc Get ( .dict_store.Key ) returns ( .dict_store.Value );" "$dict_store" describe dict_store.DictStore
check ok '{' -d '{"key":"reflected","value":1.5}' "$dict_store" dict_store.DictStore/Set
check ok '"value": 1.5' -d '{"key":"reflected"}' "$dict_store" dict_store.DictStore/Get

log "interop-server"
check ok "grpc.testing.TestService
$reflection_services" "$interop" list
check ok "grpc.testing.TestService is a service:
rpc EmptyCall ( .grpc.testing.Empty ) returns ( .grpc.testing.Empty );" \
    "$interop" describe grpc.testing.TestService
check ok "grpc.testing.Empty is a message:
message Empty {" "$interop" describe grpc.testing.Empty
check ok '{}' -d '{}' "$interop" grpc.testing.TestService/EmptyCall

if [ "$failures" -ne 0 ]; then
    echo "reflection-check: FAILED ($failures failing check(s))"
    exit 1
fi
echo "reflection-check: all checks passed ($(($(date +%s) - started)) s)"
