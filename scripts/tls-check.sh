#!/usr/bin/env bash
# Checks the servers over TLS (the `tls` feature), on loopback ports, with
# a CA and certificates made for the run by the openssl CLI:
#   - h2spec v2.2.1 with TLS (-t -k), every case, then again with --strict,
#     against the `helloworld` example;
#   - gRPC's Go interop client v1.85.0 over TLS (trusting the run's CA),
#     the cases scripts/conformance.sh runs in plaintext,
#     against the `interop-server` example;
#   - grpcurl v1.9.3 over TLS, and over mutual TLS against a helloworld
#     that requires client certificates (with a certificate: answered;
#     without: refused).
#
# Needs cargo, go, python3 and openssl (installed with apt-get when missing
# and running as root). The Go tools are built as scripts/conformance.sh and
# scripts/health-check.sh build them, into
# ${CARGO_TARGET_DIR:-target}/conformance/bin, and only rebuilt when missing
# or of another version. Exits non-zero on any failure.
#
# Environment:
#   H2SPEC_TIMEOUT  seconds h2spec waits for an answer per case (default 5)
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

H2SPEC_VERSION=v2.2.1
GRPC_VERSION=v1.85.0
GRPCURL_VERSION=v1.9.3
GRPCURL_MODULE=github.com/fullstorydev/grpcurl
INTEROP_CASES=(
    empty_unary
    large_unary
    client_streaming
    server_streaming
    ping_pong
    empty_stream
    custom_metadata
    status_code_and_message
    special_status_message
    unimplemented_method
    unimplemented_service
    timeout_on_sleeping_server
    cancel_after_begin
    cancel_after_first_response
)
h2spec_timeout=${H2SPEC_TIMEOUT:-5}

started=$(date +%s)
log() { printf '[tls-check %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# ----- tools -----

go_cmd=$(command -v go || true)
if [ -z "$go_cmd" ] && [ -x /usr/local/go/bin/go ]; then
    go_cmd=/usr/local/go/bin/go
fi
if [ -z "$go_cmd" ]; then
    echo "tls-check: go is not installed" >&2
    exit 1
fi
command -v python3 >/dev/null || { echo "tls-check: python3 is not installed" >&2; exit 1; }
if ! command -v openssl >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        log "installing openssl"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null
    else
        echo "tls-check: openssl is not installed" >&2
        exit 1
    fi
fi

target_dir=${CARGO_TARGET_DIR:-target}
case "$target_dir" in
/*) ;;
*) target_dir="$root/$target_dir" ;;
esac
tools_bin="$target_dir/conformance/bin"
mkdir -p "$tools_bin"

# Whether binary $1 was built from module $2 at version $3.
built_from() {
    [ -x "$1" ] && "$go_cmd" version -m "$1" 2>/dev/null |
        awk -v mod="$2" -v ver="$3" '$1 == "mod" && $2 == mod && $3 == ver { found = 1 } END { exit !found }'
}

h2spec="$tools_bin/h2spec"
# Pinned with all its dependencies in scripts/conformance-tools (see
# scripts/conformance.sh).
if ! built_from "$h2spec" github.com/summerwind/h2spec "$H2SPEC_VERSION+incompatible"; then
    log "installing h2spec $H2SPEC_VERSION into $tools_bin"
    (cd scripts/conformance-tools && GOBIN="$tools_bin" GOFLAGS=-mod=readonly "$go_cmd" install tool)
fi

interop_client="$tools_bin/grpc-interop-client"
if ! built_from "$interop_client" google.golang.org/grpc "$GRPC_VERSION"; then
    log "installing the grpc-go interop client $GRPC_VERSION into $tools_bin"
    scratch_bin=$(mktemp -d)
    (cd "$scratch_bin" && GOBIN="$scratch_bin" "$go_cmd" install "google.golang.org/grpc/interop/client@$GRPC_VERSION")
    mv "$scratch_bin/client" "$interop_client"
    rmdir "$scratch_bin"
fi

grpcurl="$tools_bin/grpcurl"
if ! built_from "$grpcurl" "$GRPCURL_MODULE" "$GRPCURL_VERSION"; then
    log "installing grpcurl $GRPCURL_VERSION into $tools_bin"
    scratch=$(mktemp -d)
    (cd "$scratch" && GOBIN="$tools_bin" "$go_cmd" install "$GRPCURL_MODULE/cmd/grpcurl@$GRPCURL_VERSION")
    rmdir "$scratch"
fi

# ----- certificates -----

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

log "making a CA, a server certificate (localhost, 127.0.0.1) and a client certificate"
certs="$work/certs"
mkdir -p "$certs"
(
    cd "$certs"
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=pajamax tls-check CA" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out server.pem -days 2 -extfile server.ext 2>/dev/null
    openssl req "${ec[@]}" -keyout client.key -out client.csr -subj "/CN=tls-check client" 2>/dev/null
    printf '%s\n' "subjectAltName=DNS:client.tls-check.test" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=clientAuth" >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out client.pem -days 2 -extfile client.ext 2>/dev/null
)

# ----- servers -----

log "building the example servers with TLS (release)"
cargo build --release -p pajamax-examples --features tls --bins
helloworld_bin="$target_dir/release/helloworld"
interop_bin="$target_dir/release/interop-server"

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

tls_flags=(--tls-cert "$certs/server.pem" --tls-key "$certs/server.key")
start_on_free_port "$work/helloworld.log" "$helloworld_bin" "127.0.0.1:{port}" "${tls_flags[@]}"
h2_port=$started_port
helloworld_pid=$started_pid
start_on_free_port "$work/helloworld-mtls.log" "$helloworld_bin" "127.0.0.1:{port}" \
    "${tls_flags[@]}" --client-ca "$certs/ca.pem"
mtls_port=$started_port
mtls_pid=$started_pid
start_on_free_port "$work/interop-server.log" "$interop_bin" "--port={port}" --use_tls=true \
    "--tls-cert=$certs/server.pem" "--tls-key=$certs/server.key"
interop_port=$started_port
interop_pid=$started_pid
log "over TLS: helloworld on 127.0.0.1:$h2_port, helloworld (mutual TLS) on 127.0.0.1:$mtls_port," \
    "interop-server on 127.0.0.1:$interop_port"

failures=0
summary=()

# ----- h2spec -----

# Runs h2spec over TLS with extra flags $2..., naming the run $1; adds to
# the summary. As for plain HTTP/2 (scripts/conformance.sh), every case
# must pass.
run_h2spec() {
    local name=$1
    shift
    local out="$work/h2spec-$name.txt" rc=0
    log "h2spec over TLS ($name)"
    "$h2spec" -t -k -h 127.0.0.1 -p "$h2_port" -o "$h2spec_timeout" \
        "$@" >"$out" 2>&1 || rc=$?
    local line
    line=$(grep -E '^[0-9]+ tests, [0-9]+ passed, [0-9]+ skipped, [0-9]+ failed' "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        echo "h2spec ($name) gave no summary (exit $rc):" >&2
        tail -n 40 "$out" >&2
        failures=$((failures + 1))
        summary+=("h2spec TLS $name: no result (exit $rc)")
        return
    fi
    local total passed skipped failed
    read -r total passed skipped failed < <(
        echo "$line" | sed -E 's/^([0-9]+) tests, ([0-9]+) passed, ([0-9]+) skipped, ([0-9]+) failed.*/\1 \2 \3 \4/'
    )
    summary+=("h2spec TLS $name: $passed/$total passed, $failed failed, $skipped skipped")
    if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$passed" -ne "$total" ]; then
        echo "h2spec ($name) failures:" >&2
        sed -n '/^Failures:/,$p' "$out" >&2
        failures=$((failures + 1))
    fi
}

run_h2spec default
run_h2spec strict --strict

# ----- gRPC interop -----

# grpc-go's client reads --ca_file only with --use_test_ca=true: its
# "test CA" is then the run's CA.
interop_passed=0
for case_name in "${INTEROP_CASES[@]}"; do
    out="$work/interop-$case_name.txt"
    rc=0
    timeout 60 "$interop_client" --server_host=127.0.0.1 --server_port="$interop_port" \
        --test_case="$case_name" --use_tls=true --use_test_ca=true \
        --ca_file="$certs/ca.pem" --server_host_override=localhost >"$out" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        interop_passed=$((interop_passed + 1))
        log "interop over TLS $case_name: ok"
    else
        log "interop over TLS $case_name: FAILED (exit $rc)"
        tail -n 20 "$out" >&2
        failures=$((failures + 1))
    fi
done
summary+=("grpc-go $GRPC_VERSION interop over TLS: $interop_passed/${#INTEROP_CASES[@]} cases passed")

# ----- grpcurl -----

# Runs grpcurl with flags $2... against port $1 (SayHello, by reflection);
# prints its output and fails when it does.
say_hello() {
    local port=$1
    shift
    "$grpcurl" -connect-timeout 5 -max-time 30 "$@" -d '{"name": "tls"}' "127.0.0.1:$port" helloworld.Greeter/SayHello
}

grpcurl_checks=0
grpcurl_passed=0
# $1: what is checked; $2: "answered" or "refused"; the rest: say_hello's.
grpcurl_check() {
    local what=$1 expect=$2 out="$work/grpcurl.txt" rc=0
    shift 2
    grpcurl_checks=$((grpcurl_checks + 1))
    say_hello "$@" >"$out" 2>&1 || rc=$?
    if [ "$expect" = answered ] && [ "$rc" -eq 0 ] && grep -q '"message": "Hello tls!"' "$out"; then
        grpcurl_passed=$((grpcurl_passed + 1))
        log "grpcurl $what: answered, as expected"
    elif [ "$expect" = refused ] && [ "$rc" -ne 0 ]; then
        grpcurl_passed=$((grpcurl_passed + 1))
        log "grpcurl $what: refused, as expected ($(tr '\n' ' ' <"$out" | cut -c1-120))"
    else
        log "grpcurl $what: FAILED (expected $expect, exit $rc)"
        cat "$out" >&2
        failures=$((failures + 1))
    fi
}

trust=(-cacert "$certs/ca.pem" -authority localhost)
grpcurl_check "over TLS" answered "$h2_port" "${trust[@]}"
grpcurl_check "over mutual TLS with a client certificate" answered "$mtls_port" "${trust[@]}" \
    -cert "$certs/client.pem" -key "$certs/client.key"
grpcurl_check "over mutual TLS without a client certificate" refused "$mtls_port" "${trust[@]}"
grpcurl_check "over TLS without trusting the CA" refused "$h2_port"
grpcurl_check "in plaintext to a TLS server" refused "$h2_port" -plaintext
summary+=("grpcurl $GRPCURL_VERSION: $grpcurl_passed/$grpcurl_checks checks passed (TLS, mutual TLS, refusals)")

for pid in "$helloworld_pid" "$mtls_pid" "$interop_pid"; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "tls-check: a server died during the run" >&2
        failures=$((failures + 1))
    fi
done

echo
echo "== TLS check summary ($(($(date +%s) - started)) s)"
for line in "${summary[@]}"; do
    echo "  $line"
done
if [ "$failures" -ne 0 ]; then
    echo "tls-check: FAILED ($failures failing check(s))"
    exit 1
fi
echo "tls-check: all checks passed"
