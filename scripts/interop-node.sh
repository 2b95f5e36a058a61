#!/usr/bin/env bash
# gRPC's pure-JavaScript client (@grpc/grpc-js with @grpc/proto-loader, over
# Node's http2 module, which is nghttp2; plaintext) against the
# `interop-server` example: another HTTP/2 and gRPC client implementation
# beside grpc-go's (scripts/conformance.sh), grpc-java's
# (scripts/interop-java.sh) and gRPC's Python package's
# (scripts/interop-python.sh).
#
# The client is ours, scripts/conformance-tools/node/interop_client.js,
# written from gRPC's interop test descriptions; it loads the protos of
# examples/proto/grpc/testing at run time and reads what goes on the wire
# (headers, trailers, each message's compressed flag) as well as what grpc-js
# gives it. Its cases, all run (`interop_client.js --list`): the standard
# interop cases, with all four compression cases, and two of our own: concurrent_calls (100 FullDuplexCall ping-pongs
# and 100 large unary calls at once on one channel) and slow_reader (a 5 MiB
# server stream read with pauses that shut its window, every answer
# checked). Each case runs in a process of its own, for at most 60 s.
#
# Needs cargo, node (18 or later), npm and python3; node and npm are
# installed with apt-get when missing and run as root. The client's packages,
# pinned by scripts/conformance-tools/node/package-lock.json, are installed
# with `npm ci` into ${CARGO_TARGET_DIR:-target}/conformance/node the first
# time, and again only when that lock file changes. Exits non-zero on any
# failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

node_dir="$root/scripts/conformance-tools/node"
client="$node_dir/interop_client.js"
lock="$node_dir/package-lock.json"

log_as interop-node

# ----- tools -----

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install "Node.js and npm" nodejs npm || true
fi
require interop-node cargo node npm python3
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
    echo "interop-node: node $(node --version) is too old (18 or later is needed)" >&2
    exit 1
fi
set_target_dir
cache="$target_dir/conformance/node"

# The packages are current when they were installed from the lock file as it
# is now; the copy of the lock file is made last, once they all are.
if ! { [ -d "$cache/node_modules" ] && cmp -s "$lock" "$cache/package-lock.json"; }; then
    log "installing the client's packages (npm ci) into $cache"
    rm -rf "$cache"
    mkdir -p "$cache/install"
    cp "$node_dir/package.json" "$lock" "$cache/install/"
    # --ignore-scripts: nothing here needs an install script (protobufjs's
    # only checks the versions of its dependents).
    if ! (cd "$cache/install" && npm ci --ignore-scripts --no-audit --no-fund) >"$cache/npm.log" 2>&1; then
        echo "interop-node: npm ci failed:" >&2
        tail -n 40 "$cache/npm.log" >&2
        exit 1
    fi
    mv "$cache/install/node_modules" "$cache/node_modules"
    rm -rf "$cache/install"
    cp "$lock" "$cache/package-lock.json"
fi
export NODE_PATH="$cache/node_modules"
package_version() {
    node -p "require('$cache/node_modules/$1/package.json').version"
}
grpc_js_version=$(package_version @grpc/grpc-js)
proto_loader_version=$(package_version @grpc/proto-loader)
log "node $(node --version), @grpc/grpc-js $grpc_js_version, @grpc/proto-loader $proto_loader_version"

# ----- server -----

use_work_dir

start_interop_server

# ----- cases -----

failures=0
summary=()
listed_cases interop-node node "$client"
run_cases "@grpc/grpc-js $grpc_js_version interop" CASES \
    node "$client" --proto_dir="$root/examples/proto"

if ! kill -0 "$interop_pid" 2>/dev/null; then
    echo "interop-node: interop-server's log:" >&2
    tail -n 30 "$work/interop-server.log" >&2
fi
check_running interop-node "$interop_pid"

print_summary interop-node "interop-node"
