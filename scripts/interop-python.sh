#!/usr/bin/env bash
# gRPC's C-core based Python client (grpcio 1.85.3, plaintext) against the
# `interop-server` example: a third HTTP/2 and gRPC client implementation
# beside grpc-go (scripts/conformance.sh) and grpc-java
# (scripts/interop-java.sh). The client, scripts/conformance-tools/python/
# interop_client.py, is the project's own, written from gRPC's interop test
# descriptions; every case it lists (`interop_client.py --list`) runs, one
# per process:
#   - empty_unary, large_unary, client_streaming, server_streaming,
#     ping_pong, empty_stream, cancel_after_begin,
#     cancel_after_first_response, timeout_on_sleeping_server,
#     custom_metadata, status_code_and_message, special_status_message,
#     unimplemented_method, unimplemented_service;
#   - the four compression cases, with the compressed flag of every message
#     read from the HTTP/2 frames by a proxy inside the client, and
#     deflate_both_ways (requests and an answer compressed with deflate);
#   - concurrent_streams (100 FullDuplexCall ping-pongs and 100 large unary
#     calls at once on one channel) and slow_reader_server_streaming (4 MiB
#     of answers read slowly, a unary call beside them).
#
# Needs cargo and python3 with venv; python3-venv is installed with apt-get
# when missing and run as root. grpcio, grpcio-tools and protobuf, pinned by
# scripts/conformance-tools/python/requirements.txt, are installed from PyPI
# into a virtualenv in ${CARGO_TARGET_DIR:-target}/conformance/python the
# first time, and again only when that file changes. The stubs are made
# from examples/proto/grpc/testing with grpc_tools.protoc at every run.
# Exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

tools="$root/scripts/conformance-tools/python"
requirements="$tools/requirements.txt"

log_as interop-python

# ----- tools -----

require interop-python python3
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    apt_install python3-venv python3-venv || true
    python3 -c 'import ensurepip, venv' 2>/dev/null ||
        { echo "interop-python: python3 has no venv module" >&2; exit 1; }
fi
set_target_dir
cache="$target_dir/conformance/python"
venv="$cache/venv"
python="$venv/bin/python"
grpcio_version=$(sed -n 's/^grpcio==//p' "$requirements")

# The virtualenv is current when it was made from the requirements as they
# are now; the copy of them is written last, so a failed install is made
# again.
if ! { [ -x "$python" ] && cmp -s "$requirements" "$cache/requirements.txt"; }; then
    log "installing grpcio $grpcio_version and grpcio-tools into $venv"
    rm -rf "$cache"
    mkdir -p "$cache"
    if ! { python3 -m venv "$venv" &&
        "$python" -m pip install -q --disable-pip-version-check --no-input \
            -r "$requirements"; } >"$cache/pip.log" 2>&1; then
        echo "interop-python: could not install the client's packages:" >&2
        tail -n 40 "$cache/pip.log" >&2
        exit 1
    fi
    cp "$requirements" "$cache/requirements.txt"
fi
log "grpcio $("$python" -c 'import grpc; print(grpc.__version__)') in $venv"

# ----- server -----

use_work_dir

# The stubs. The protos import each other as grpc/testing/*.proto, from
# which protoc would make a Python package `grpc.testing` that the `grpc`
# of grpcio hides; they are copied side by side, importing each other by
# file name, so that the stubs are modules of their own (empty_pb2,
# messages_pb2, test_pb2, test_pb2_grpc). Packages and names on the wire
# stay as they are.
mkdir -p "$work/proto" "$work/stubs"
for proto in "$root"/examples/proto/grpc/testing/*.proto; do
    sed -E 's:^import "grpc/testing/([a-z_]+\.proto)";:import "\1";:' "$proto" \
        >"$work/proto/$(basename "$proto")"
done
(
    cd "$work/proto"
    "$python" -m grpc_tools.protoc -I . --python_out="$work/stubs" \
        --grpc_python_out="$work/stubs" ./*.proto
)

start_interop_server

# ----- cases -----

failures=0
summary=()
export PYTHONPATH="$work/stubs"
listed_cases interop-python "$python" -B "$tools/interop_client.py"
run_cases "grpcio $grpcio_version interop" CASES "$python" -B "$tools/interop_client.py"

check_running interop-python "$interop_pid"

print_summary interop-python "interop-python"
