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
root=$(pwd)

H2SPEC_VERSION=v2.2.1
GRPC_VERSION=v1.85.0
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
log() { printf '[conformance %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# ----- tools -----

go_cmd=$(command -v go || true)
if [ -z "$go_cmd" ] && [ -x /usr/local/go/bin/go ]; then
    go_cmd=/usr/local/go/bin/go
fi
if [ -z "$go_cmd" ]; then
    echo "conformance: go is not installed" >&2
    exit 1
fi
command -v python3 >/dev/null || { echo "conformance: python3 is not installed" >&2; exit 1; }

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
# h2spec v2 has no go.mod, so `h2spec@v2.2.1` cannot be resolved and
# `@v2.2.1+incompatible` would take the newest of its dependencies; the
# module in scripts/conformance-tools pins it with all of them.
if ! built_from "$h2spec" github.com/summerwind/h2spec "$H2SPEC_VERSION+incompatible"; then
    log "installing h2spec $H2SPEC_VERSION into $tools_bin"
    (cd scripts/conformance-tools && GOBIN="$tools_bin" GOFLAGS=-mod=readonly "$go_cmd" install tool)
fi

interop_client="$tools_bin/grpc-interop-client"
if ! built_from "$interop_client" google.golang.org/grpc "$GRPC_VERSION"; then
    log "installing the grpc-go interop client $GRPC_VERSION into $tools_bin"
    # The package's binary is called `client`: build it aside, then name it.
    scratch_bin=$(mktemp -d)
    (cd "$scratch_bin" && GOBIN="$scratch_bin" "$go_cmd" install "google.golang.org/grpc/interop/client@$GRPC_VERSION")
    mv "$scratch_bin/client" "$interop_client"
    rmdir "$scratch_bin"
fi

# ----- servers -----

log "building the example servers (release)"
cargo build --release -p pajamax-examples --bins
helloworld_bin="$target_dir/release/helloworld"
interop_bin="$target_dir/release/interop-server"

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

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

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

# Runs h2spec with extra flags $2..., naming the run $1; adds to the summary.
run_h2spec() {
    local name=$1
    shift
    local out="$work/h2spec-$name.txt" rc=0
    log "h2spec ($name)"
    "$h2spec" -h 127.0.0.1 -p "$h2_port" -o "$h2spec_timeout" \
        "$@" >"$out" 2>&1 || rc=$?
    local line
    line=$(grep -E '^[0-9]+ tests, [0-9]+ passed, [0-9]+ skipped, [0-9]+ failed' "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        echo "h2spec ($name) gave no summary (exit $rc):" >&2
        tail -n 40 "$out" >&2
        failures=$((failures + 1))
        summary+=("h2spec $name: no result (exit $rc)")
        return
    fi
    local total passed skipped failed
    read -r total passed skipped failed < <(
        echo "$line" | sed -E 's/^([0-9]+) tests, ([0-9]+) passed, ([0-9]+) skipped, ([0-9]+) failed.*/\1 \2 \3 \4/'
    )
    summary+=("h2spec $name: $passed/$total passed, $failed failed, $skipped skipped")
    if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$passed" -ne "$total" ]; then
        echo "h2spec ($name) failures:" >&2
        sed -n '/^Failures:/,$p' "$out" >&2
        failures=$((failures + 1))
    fi
}

run_h2spec plain
run_h2spec strict --strict

# ----- gRPC interop -----

interop_passed=0
for case_name in "${INTEROP_CASES[@]}"; do
    out="$work/interop-$case_name.txt"
    rc=0
    timeout 60 "$interop_client" --server_host=127.0.0.1 --server_port="$interop_port" \
        --test_case="$case_name" --use_tls=false >"$out" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        interop_passed=$((interop_passed + 1))
        log "interop $case_name: ok"
    else
        log "interop $case_name: FAILED (exit $rc)"
        tail -n 20 "$out" >&2
        failures=$((failures + 1))
    fi
done
summary+=("grpc-go $GRPC_VERSION interop: $interop_passed/${#INTEROP_CASES[@]} cases passed")

for pid in "$helloworld_pid" "$interop_pid"; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "conformance: a server died during the run" >&2
        failures=$((failures + 1))
    fi
done

echo
echo "== conformance summary ($(($(date +%s) - started)) s)"
for line in "${summary[@]}"; do
    echo "  $line"
done
if [ "$failures" -ne 0 ]; then
    echo "conformance: FAILED ($failures failing check(s))"
    exit 1
fi
echo "conformance: all checks passed"
