#!/usr/bin/env bash
# Drives the helloworld example with ghz 0.114.0: one call, then 200 000
# calls over 10 connections with 1000 concurrent streams. Fails on any error.
set -euo pipefail
cd "$(dirname "$0")/.."

GHZ_VERSION=v0.114.0
gobin="$(go env GOPATH)/bin"
ghz="$gobin/ghz"
if ! "$ghz" --version 2>/dev/null | grep -q "${GHZ_VERSION#v}"; then
    echo "installing ghz $GHZ_VERSION"
    go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
fi

target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p pajamax-examples --bin helloworld
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
start_on_free_port "$(mktemp)" "$target/release/helloworld" "127.0.0.1:{port}"
port=$started_port

run() {
    "$ghz" --insecure --proto examples/proto/helloworld.proto \
        --call helloworld.Greeter/SayHello -d '{"name":"world"}' \
        --format json "$@" "127.0.0.1:$port"
}

check() {
    # $1: label, $2: expected count; JSON report on stdin.
    python3 -c '
import json, sys
label, expected = sys.argv[1], int(sys.argv[2])
report = json.load(sys.stdin)
ok = report.get("statusCodeDistribution", {}).get("OK", 0)
errors = report.get("errorDistribution") or {}
count, rps = report["count"], report["rps"]
print(f"{label}: {count} calls, {ok} OK, {rps:.0f} req/s, errors: {errors or 0}")
sys.exit(0 if ok == expected and not errors else 1)
' "$1" "$2"
}

run -n 1 | check "ghz -n 1" 1
run --connections 10 --concurrency 1000 -n 200000 | check "ghz 10 connections x 1000 streams" 200000
echo "ghz check: 2 passed, 0 failed"
