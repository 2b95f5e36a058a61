#!/usr/bin/env bash
# gRPC's Java interop client (io.grpc:grpc-interop-testing 1.79.0, over its
# Netty transport, plaintext) against the `interop-server` example, for the
# compression cases the Go client has not:
#   client_compressed_unary, server_compressed_unary,
#   client_compressed_streaming, server_compressed_streaming,
# with large_unary and ping_pong first, as a check of the client itself.
#
# The Java client compares only the payloads it gets back, so for the
# server_compressed_* cases the script also reads the client's HTTP/2 frame
# log and checks the compressed flag of the first response message of each
# call: set for the calls that ask for a compressed response, clear for the
# one that does not.
#
# Needs cargo, java, mvn and python3; java and mvn are installed with apt-get
# when missing and run as root. The client and its runtime dependencies are
# copied from Maven by scripts/conformance-tools/java/pom.xml into
# ${CARGO_TARGET_DIR:-target}/conformance/java the first time, and again only
# when that pom changes. Exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

CASES=(
    large_unary
    ping_pong
    client_compressed_unary
    server_compressed_unary
    client_compressed_streaming
    server_compressed_streaming
)
CLIENT_MAIN=io.grpc.testing.integration.TestServiceClient
pom="$root/scripts/conformance-tools/java/pom.xml"

log_as interop-java

# ----- tools -----

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    apt_install "a Java runtime and Maven" default-jre-headless maven || true
fi
require interop-java java mvn python3
set_target_dir
cache="$target_dir/conformance/java"
grpc_java_version=$(sed -n 's:.*<grpc.version>\(.*\)</grpc.version>.*:\1:p' "$pom")

# The jars are current when they were copied with the pom as it is now.
if ! { [ -d "$cache/lib" ] && cmp -s "$pom" "$cache/pom.xml"; }; then
    log "copying grpc-java $grpc_java_version's interop client and its dependencies into $cache"
    rm -rf "$cache"
    mkdir -p "$cache"
    fresh="$cache/lib.partial"
    if ! mvn -B -q -f "$pom" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$fresh" >"$cache/mvn.log" 2>&1; then
        echo "interop-java: mvn could not copy the client's jars:" >&2
        tail -n 40 "$cache/mvn.log" >&2
        exit 1
    fi
    mv "$fresh" "$cache/lib"
    cp "$pom" "$cache/pom.xml"
fi
log "grpc-java $grpc_java_version client: $(find "$cache/lib" -name '*.jar' | wc -l) jars in $cache/lib"

# ----- server -----

use_work_dir

start_interop_server

# The Netty transport logs every HTTP/2 frame at FINE, with the first bytes
# of each DATA frame.
frames_config="$work/frames.properties"
cat >"$frames_config" <<'EOF'
handlers=java.util.logging.ConsoleHandler
java.util.logging.ConsoleHandler.level=ALL
io.grpc.netty.NettyClientHandler.level=ALL
EOF

# The compressed flag (00 or 01) of the first response message of each call
# in frame log $1, in the order of the calls, separated by spaces.
response_flags() {
    sed -nE 's/.*INBOUND DATA: streamId=([0-9]+) .* bytes=([0-9a-f]{2}).*/\1 \2/p' "$1" |
        awk '!seen[$1]++ { printf "%s%s", sep, $2; sep = " " }'
}

# The response HEADERS frames and the first response DATA frame of each call
# in frame log $1.
response_frames() {
    sed -nE 's/.*(INBOUND (HEADERS|DATA): streamId=([0-9]+) .*)/\3 \1/p' "$1" |
        awk '$3 != "DATA:" || !seen[$1]++ { sub(/^[0-9]+ /, ""); print substr($0, 1, 200) }'
}

# Frame log $1 without the frames, for a failure's output.
without_frames() {
    grep -Ev -e '^FINE(R|ST)?: ' -e '^[A-Z][a-z]{2} [0-9]{1,2}, [0-9]{4} .* io\.(grpc\.)?netty\.' "$1"
}

# ----- cases -----

failures=0
passed=0
for case_name in "${CASES[@]}"; do
    out="$work/$case_name.txt"
    jvm_flags=()
    want_flags=
    case "$case_name" in
    server_compressed_unary)
        # A call asking for a compressed response, then one asking for none.
        jvm_flags=(-Djava.util.logging.config.file="$frames_config")
        want_flags="01 00"
        ;;
    server_compressed_streaming)
        # One call whose first response is asked to be compressed.
        jvm_flags=(-Djava.util.logging.config.file="$frames_config")
        want_flags="01"
        ;;
    esac
    rc=0
    timeout 60 java "${jvm_flags[@]}" -cp "$cache/lib/*" "$CLIENT_MAIN" \
        --server_host=127.0.0.1 --server_port="$interop_port" --use_tls=false \
        --test_case="$case_name" >"$out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q '^Test completed\.$' "$out"; then
        log "$case_name: FAILED (exit $rc)"
        without_frames "$out" | tail -n 30 >&2
        failures=$((failures + 1))
        continue
    fi
    if [ -n "$want_flags" ]; then
        got_flags=$(response_flags "$out")
        if [ "$got_flags" != "$want_flags" ]; then
            log "$case_name: FAILED: compressed flags of the first responses are '$got_flags', not '$want_flags'"
            response_frames "$out" >&2
            failures=$((failures + 1))
            continue
        fi
        log "$case_name: ok (compressed flags of the first responses: $got_flags)"
    else
        log "$case_name: ok"
    fi
    passed=$((passed + 1))
done

if ! kill -0 "$interop_pid" 2>/dev/null; then
    echo "interop-java: interop-server died during the run; its log:" >&2
    tail -n 30 "$work/interop-server.log" >&2
    failures=$((failures + 1))
fi

echo
echo "== interop-java summary ($(($(date +%s) - started)) s)"
echo "  grpc-java $grpc_java_version interop: $passed/${#CASES[@]} cases passed"
if [ "$failures" -ne 0 ]; then
    echo "interop-java: FAILED ($failures failing check(s))"
    exit 1
fi
echo "interop-java: all checks passed"
