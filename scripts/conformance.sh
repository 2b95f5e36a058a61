#!/usr/bin/env bash
# Conformance checks against real servers on loopback ports:
#   - h2spec v2.2.1 (every case, then again with --strict) against the
#     `helloworld` example;
#   - gRPC's Go interop client v1.85.0 against the `interop-server` example.
#
# Needs cargo, go and python3. The tools are built from the Go module proxy
# into ${CARGO_TARGET_DIR:-target}/conformance/bin the first time, and only
# rebuilt when missing or of another version. Exits non-zero on any failure.
#
# Environment:
#   H2SPEC_TIMEOUT  seconds h2spec waits for an answer per case (default 5)
set -euo pipefail

cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

h2spec_timeout=${H2SPEC_TIMEOUT:-5}

log_as conformance

# ----- tools -----

find_go conformance
require conformance python3
set_target_dir
install_h2spec
install_interop_client

# ----- servers -----

log "building the example servers (release)"
cargo build --release -p pajamax-examples --bins
helloworld_bin="$target_dir/release/helloworld"
interop_bin="$target_dir/release/interop-server"

use_work_dir

start_on_free_port "$work/helloworld.log" "$helloworld_bin" "127.0.0.1:{port}"
h2_port=$started_port
helloworld_pid=$started_pid
start_on_free_port "$work/interop-server.log" "$interop_bin" "--port={port}" --use_tls=false
interop_port=$started_port
interop_pid=$started_pid
log "helloworld on 127.0.0.1:$h2_port, interop-server on 127.0.0.1:$interop_port"

# ----- h2spec -----

failures=0
summary=()

run_h2spec cleartext plain
run_h2spec cleartext strict --strict

# ----- gRPC interop -----

run_interop_cases interop --use_tls=false

check_running conformance "$helloworld_pid" "$interop_pid"

print_summary conformance "conformance"
