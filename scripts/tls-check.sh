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
#     without: refused); each refusal must be for its own reason (the
#     server's alert, the unknown CA, no HTTP/2 from a TLS port).
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

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

h2spec_timeout=${H2SPEC_TIMEOUT:-5}

log_as tls-check

# ----- tools -----

find_go tls-check
require tls-check python3
need_openssl tls-check
set_target_dir
install_h2spec
install_interop_client
install_grpcurl

# ----- certificates -----

use_work_dir

log "making a CA, a server certificate (localhost, 127.0.0.1) and a client certificate"
certs="$work/certs"
make_certificates "$certs" "pajamax tls-check CA" "tls-check client" client.tls-check.test

# ----- servers -----

log "building the example servers with TLS (release)"
cargo build --release -p pajamax-examples --features tls --bins
helloworld_bin="$target_dir/release/helloworld"
interop_bin="$target_dir/release/interop-server"

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

# As for plain HTTP/2 (scripts/conformance.sh), every case must pass.
run_h2spec tls default
run_h2spec tls strict --strict

# ----- gRPC interop -----

# grpc-go's client reads --ca_file only with --use_test_ca=true: its
# "test CA" is then the run's CA.
run_interop_cases "interop over TLS" --use_tls=true --use_test_ca=true \
    --ca_file="$certs/ca.pem" --server_host_override=localhost

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
# $1: what is checked; $2: "answered", or "refused:REASON" where REASON is
# an extended regular expression that grpcurl's output must match, the
# reason it could not connect; the rest: say_hello's. A refusal must be
# one: grpcurl exits non-zero, failing to connect ("Failed to dial target
# host"), for that reason. grpc-go's warnings are on, since with TLS 1.3
# and when the connection breaks before the server's HTTP/2 preface,
# grpcurl itself only says that its time ran out; the reason is in the
# warnings of the attempts.
grpcurl_check() {
    local what=$1 expect=$2 out="$work/grpcurl.txt" rc=0 reason=""
    shift 2
    case "$expect" in
    answered) ;;
    refused:?*) reason=${expect#refused:} ;;
    *)
        echo "grpcurl_check: bad expectation $expect" >&2
        exit 2
        ;;
    esac
    grpcurl_checks=$((grpcurl_checks + 1))
    GRPC_GO_LOG_SEVERITY_LEVEL=warning say_hello "$@" >"$out" 2>&1 || rc=$?
    if [ "$expect" = answered ] && [ "$rc" -eq 0 ] && grep -q '"message": "Hello tls!"' "$out"; then
        grpcurl_passed=$((grpcurl_passed + 1))
        log "grpcurl $what: answered, as expected"
    elif [ -n "$reason" ] && [ "$rc" -ne 0 ] && grep -q 'Failed to dial target host' "$out" &&
        grep -qE "$reason" "$out"; then
        grpcurl_passed=$((grpcurl_passed + 1))
        log "grpcurl $what: refused, as expected ($(grep -oE "$reason" "$out" | head -n 1))"
    else
        log "grpcurl $what: FAILED (expected ${reason:+refusal for }${reason:-$expect}, exit $rc)"
        cat "$out" >&2
        failures=$((failures + 1))
    fi
}

trust=(-cacert "$certs/ca.pem" -authority localhost)
grpcurl_check "over TLS" answered "$h2_port" "${trust[@]}"
grpcurl_check "over mutual TLS with a client certificate" answered "$mtls_port" "${trust[@]}" \
    -cert "$certs/client.pem" -key "$certs/client.key"
# The server's TLS 1.3 alert: certificate_required.
grpcurl_check "over mutual TLS without a client certificate" \
    "refused:remote error: tls: certificate required" "$mtls_port" "${trust[@]}"
grpcurl_check "over TLS without trusting the CA" \
    "refused:x509: certificate signed by unknown authority" "$h2_port"
# The server answers the plaintext preface with a TLS alert and closes:
# the client never reads HTTP/2 SETTINGS.
grpcurl_check "in plaintext to a TLS server" \
    "refused:error reading server preface: (unexpected )?EOF" "$h2_port" -plaintext
summary+=("grpcurl $GRPCURL_VERSION: $grpcurl_passed/$grpcurl_checks checks passed (TLS, mutual TLS, refusals)")

check_running tls-check "$helloworld_pid" "$mtls_pid" "$interop_pid"

print_summary tls-check "TLS check"
