#!/usr/bin/env bash
# Soak: 1000 connections x 10 concurrent streams each against helloworld for
# SOAK_SECONDS (default 60). Reports errors (must be 0) and the server's RSS
# at start, middle and end (must level off). Server on CPU 0, client on CPU 1
# when there are two.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${SOAK_SECONDS:-60}"
connections="${SOAK_CONNECTIONS:-1000}"
streams_per_connection="${SOAK_STREAMS:-10}"
GHZ_VERSION=v0.114.0
ghz="$(go env GOPATH)/bin/ghz"
"$ghz" --version 2>/dev/null | grep -q "${GHZ_VERSION#v}" || go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"

target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p pajamax-examples --bin helloworld
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
server_cpu=0
client_cpu=$(( $(nproc) > 1 ? 1 : 0 ))
start_on_free_port "$(mktemp)" taskset -c "$server_cpu" "$target/release/helloworld" "127.0.0.1:{port}"
port=$started_port
server=$started_pid

rss() { awk '/VmRSS/ { print $2 }' "/proc/$server/status"; }
report=$(mktemp)
taskset -c "$client_cpu" "$ghz" --insecure --proto examples/proto/helloworld.proto \
    --call helloworld.Greeter/SayHello -d '{"name":"soak"}' \
    --connections "$connections" --concurrency $((connections * streams_per_connection)) \
    --duration "${seconds}s" --duration-stop wait --format json "127.0.0.1:$port" >"$report" &
client=$!
sleep 2
start_rss=$(rss)
sleep $((seconds / 2 - 2))
middle_rss=$(rss)
wait "$client"
end_rss=$(rss)

python3 - "$report" "$start_rss" "$middle_rss" "$end_rss" "$connections" "$streams_per_connection" "$seconds" <<'PY'
import json, sys
path, start, middle, end, conns, streams, secs = sys.argv[1:]
report = json.load(open(path))
ok = report.get("statusCodeDistribution", {}).get("OK", 0)
errors = report.get("errorDistribution") or {}
print(f"soak: {conns} connections x {streams} streams for {secs}s")
print(f"  calls: {report['count']}, OK: {ok}, errors: {sum(errors.values())}")
for message, count in list(errors.items())[:5]:
    print(f"    {count} x {message}")
print(f"  req/s: {report['rps']:.0f}, average latency: {report['average'] / 1e6:.2f} ms")
print(f"  server RSS (KiB): start {start}, middle {middle}, end {end}")
sys.exit(1 if errors or ok != report["count"] else 0)
PY
