#!/usr/bin/env bash
# Soak: many calls opened and ended on many connections for SOAK_SECONDS
# (default 60). Reports errors (must be 0) and the server's RSS at start,
# middle and end (must level off). Server on CPU 0, client on CPU 1 when
# there are two.
#
#   SOAK_KIND=unary (default): ghz against helloworld's SayHello, 1000
#     connections x 10 concurrent streams each.
#   SOAK_KIND=streams: ghz against interop-server's FullDuplexCall (three
#     requests, four answers per call, bidirectional) with 50 connections x
#     10 concurrent calls each, and against route_guide's ListFeatures
#     (server streaming, 64 features per call) with as many at once.
set -euo pipefail
cd "$(dirname "$0")/.."

kind="${SOAK_KIND:-unary}"
seconds="${SOAK_SECONDS:-60}"
GHZ_VERSION=v0.114.0
ghz="$(go env GOPATH)/bin/ghz"
"$ghz" --version 2>/dev/null | grep -q "${GHZ_VERSION#v}" || go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"

target="${CARGO_TARGET_DIR:-target}"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
server_cpu=0
client_cpu=$(( $(nproc) > 1 ? 1 : 0 ))

# The soaks of this kind: for each, a name, the server's binary and its
# address argument ({port}), and ghz's arguments after the connections.
names=() servers=() addresses=() calls=()
case "$kind" in
    unary)
        connections="${SOAK_CONNECTIONS:-1000}"
        streams_per_connection="${SOAK_STREAMS:-10}"
        names+=(SayHello) servers+=(helloworld) addresses+=("127.0.0.1:{port}")
        calls+=("--proto examples/proto/helloworld.proto --call helloworld.Greeter/SayHello -d {\"name\":\"soak\"}")
        ;;
    streams)
        connections="${SOAK_CONNECTIONS:-50}"
        streams_per_connection="${SOAK_STREAMS:-10}"
        names+=(FullDuplexCall) servers+=(interop-server) addresses+=("--port={port} --use_tls=false")
        calls+=("--import-paths examples/proto --proto examples/proto/grpc/testing/test.proto --call grpc.testing.TestService/FullDuplexCall -d [{\"response_parameters\":[{\"size\":10}],\"payload\":{\"body\":\"AAAA\"}},{\"response_parameters\":[{\"size\":100}]},{\"response_parameters\":[{\"size\":10},{\"size\":20}]}]")
        names+=(ListFeatures) servers+=(route_guide) addresses+=("127.0.0.1:{port}")
        calls+=("--proto examples/proto/route_guide.proto --call routeguide.RouteGuide/ListFeatures -d {\"lo\":{\"latitude\":400000000,\"longitude\":-750000000},\"hi\":{\"latitude\":420000000,\"longitude\":-730000000}}")
        ;;
    *)
        echo "SOAK_KIND is unary or streams, not $kind" >&2
        exit 2
        ;;
esac
for server in $(printf '%s\n' "${servers[@]}" | sort -u); do
    cargo build --release -p pajamax-examples --bin "$server"
done

server_pids=() reports=() clients=()
for i in "${!names[@]}"; do
    # shellcheck disable=SC2086 # the address is one or two arguments
    start_on_free_port "$(mktemp)" taskset -c "$server_cpu" "$target/release/${servers[$i]}" ${addresses[$i]}
    server_pids+=("$started_pid")
    reports+=("$(mktemp)")
    # ghz's arguments, split on spaces and not globbed ([...] is JSON)
    set -f
    # shellcheck disable=SC2086,SC2154 # started_port: start_on_free_port's
    taskset -c "$client_cpu" "$ghz" --insecure ${calls[$i]} \
        --connections "$connections" --concurrency $((connections * streams_per_connection)) \
        --duration "${seconds}s" --duration-stop wait --format json "127.0.0.1:$started_port" >"${reports[$i]}" &
    clients+=("$!")
    set +f
done

rss() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }
all_rss() { for pid in "${server_pids[@]}"; do rss "$pid"; done; }
sleep 2
mapfile -t start_rss < <(all_rss)
sleep $((seconds / 2 - 2))
mapfile -t middle_rss < <(all_rss)
wait "${clients[@]}"
mapfile -t end_rss < <(all_rss)

failed=0
for i in "${!names[@]}"; do
    python3 - "${reports[$i]}" "${start_rss[$i]}" "${middle_rss[$i]}" "${end_rss[$i]}" "$connections" "$streams_per_connection" "$seconds" "${names[$i]}" <<'PY' || failed=1
import json, sys
path, start, middle, end, conns, streams, secs, name = sys.argv[1:]
report = json.load(open(path))
ok = report.get("statusCodeDistribution", {}).get("OK", 0)
errors = report.get("errorDistribution") or {}
print(f"soak, {name}: {conns} connections x {streams} calls at once for {secs}s")
print(f"  calls: {report['count']}, OK: {ok}, errors: {sum(errors.values())}")
for message, count in list(errors.items())[:5]:
    print(f"    {count} x {message}")
print(f"  calls/s: {report['rps']:.0f}, average latency: {report['average'] / 1e6:.2f} ms")
print(f"  server RSS (KiB): start {start}, middle {middle}, end {end}")
sys.exit(1 if errors or ok != report["count"] else 0)
PY
done
exit "$failed"
