# Shared by the scripts: tools, servers on free loopback ports, certificates,
# h2spec and the Go interop client.
# shellcheck shell=bash

# Names the calling script in its log lines and starts their clock: after
# `log_as NAME`, `log MESSAGE` prints "[NAME  12s] MESSAGE".
log_as() {
    log_name=$1
    started=$(date +%s)
}
log() { printf '[%s %3ss] %s\n' "$log_name" "$(($(date +%s) - started))" "$*"; }

# Waits until the server with pid $1 accepts on port $2.
wait_ready() {
    local pid=$1 port=$2
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# Starts a server on a port the OS says is free; another process may take
# that port before the server binds it, so a server that exits is started
# again on a fresh port. Sets started_pid and started_port. $1 is the log
# file; the rest is the command, with {port} standing for the port.
start_on_free_port() {
    local server_log=$1
    shift
    for _ in 1 2 3 4 5; do
        started_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        "${@//\{port\}/$started_port}" >"$server_log" 2>&1 &
        started_pid=$!
        if wait_ready "$started_pid" "$started_port"; then
            pids+=("$started_pid")
            return 0
        fi
        kill "$started_pid" 2>/dev/null || true
    done
    echo "could not start $1; its log:" >&2
    cat "$server_log" >&2
    return 1
}

# ----- tools -----

# Versions of the tools that several scripts build, one definition each.
# h2spec is pinned with all its dependencies in scripts/conformance-tools.
H2SPEC_VERSION=v2.2.1
GRPC_VERSION=v1.85.0
GRPCURL_VERSION=v1.9.3
GRPCURL_MODULE=github.com/fullstorydev/grpcurl

# The cases of gRPC's Go interop client that scripts/conformance.sh runs in
# plaintext and scripts/tls-check.sh over TLS.
# shellcheck disable=SC2034 # read by name in run_cases
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
    # 100 calls on one channel, each answer naming the same server.
    pick_first_unary
    # Ten large unary calls on one channel (rpc_soak), and each on a
    # channel of its own (channel_soak).
    rpc_soak
    channel_soak
)

# Exits unless every command $2... is installed; $1 names the script in the
# message.
require() {
    local script=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$script: $tool is not installed" >&2; exit 1; }
    done
}

# Sets go_cmd to the go command, also when it is only in /usr/local/go/bin;
# exits when there is none. $1 names the script in the message.
find_go() {
    go_cmd=$(command -v go || true)
    if [ -z "$go_cmd" ] && [ -x /usr/local/go/bin/go ]; then
        go_cmd=/usr/local/go/bin/go
    fi
    if [ -z "$go_cmd" ]; then
        echo "$1: go is not installed" >&2
        exit 1
    fi
}

# apt_install WHAT PACKAGE...: installs the Debian PACKAGEs with apt-get
# (quietly, without recommended packages) when running as root where
# apt-get is, logging "installing WHAT"; returns 1 without doing anything
# otherwise, so that the caller says what is missing.
apt_install() {
    local what=$1
    shift
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        return 1
    fi
    log "installing $what"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Installs openssl with apt-get when it is missing and running as root;
# exits when it is missing otherwise. $1 names the script in the message.
need_openssl() {
    command -v openssl >/dev/null && return 0
    apt_install openssl openssl || {
        echo "$1: openssl is not installed" >&2
        exit 1
    }
}

# Sets target_dir to cargo's target directory (${CARGO_TARGET_DIR:-target},
# made absolute from the repository's root, the current directory) and
# tools_bin to the directory the Go tools are built into.
set_target_dir() {
    target_dir=${CARGO_TARGET_DIR:-target}
    case "$target_dir" in
    /*) ;;
    *) target_dir="$(pwd)/$target_dir" ;;
    esac
    tools_bin="$target_dir/conformance/bin"
}

# Whether binary $1 was built from module $2 at version $3.
built_from() {
    [ -x "$1" ] && "$go_cmd" version -m "$1" 2>/dev/null |
        awk -v mod="$2" -v ver="$3" '$1 == "mod" && $2 == mod && $3 == ver { found = 1 } END { exit !found }'
}

# go_tool NAME MODULE PACKAGE VERSION [GOFLAGS]: builds PACKAGE into
# $tools_bin (as NAME) unless the binary there was built from MODULE at
# VERSION.
go_tool() {
    local name=$1 module=$2 package=$3 version=$4 goflags=${5:-} scratch
    mkdir -p "$tools_bin"
    if ! built_from "$tools_bin/$name" "$module" "$version"; then
        log "installing $name $version into $tools_bin"
        # Outside the repository, so that no go.mod here is looked at.
        scratch=$(mktemp -d)
        (
            cd "$scratch" || exit
            [ -z "$goflags" ] || export GOFLAGS="$goflags"
            GOBIN="$tools_bin" "$go_cmd" install "$package@$version"
        )
        rmdir "$scratch"
    fi
}

# Builds grpcurl $GRPCURL_VERSION into $tools_bin; sets grpcurl to it.
install_grpcurl() {
    go_tool grpcurl "$GRPCURL_MODULE" "$GRPCURL_MODULE/cmd/grpcurl" "$GRPCURL_VERSION"
    # shellcheck disable=SC2034 # for the calling script
    grpcurl="$tools_bin/grpcurl"
}

# Builds h2spec $H2SPEC_VERSION into $tools_bin; sets h2spec to it.
# h2spec v2 has no go.mod, so `h2spec@v2.2.1` cannot be resolved and
# `@v2.2.1+incompatible` would take the newest of its dependencies; the
# module in scripts/conformance-tools pins it with all of them.
install_h2spec() {
    mkdir -p "$tools_bin"
    h2spec="$tools_bin/h2spec"
    if ! built_from "$h2spec" github.com/summerwind/h2spec "$H2SPEC_VERSION+incompatible"; then
        log "installing h2spec $H2SPEC_VERSION into $tools_bin"
        (cd scripts/conformance-tools && GOBIN="$tools_bin" GOFLAGS=-mod=readonly "$go_cmd" install tool)
    fi
}

# Builds gRPC's Go interop client $GRPC_VERSION into $tools_bin; sets
# interop_client to it.
install_interop_client() {
    local scratch_bin
    mkdir -p "$tools_bin"
    interop_client="$tools_bin/grpc-interop-client"
    if ! built_from "$interop_client" google.golang.org/grpc "$GRPC_VERSION"; then
        log "installing the grpc-go interop client $GRPC_VERSION into $tools_bin"
        # The package's binary is called `client`: build it aside, then name it.
        scratch_bin=$(mktemp -d)
        (cd "$scratch_bin" && GOBIN="$scratch_bin" "$go_cmd" install "google.golang.org/grpc/interop/client@$GRPC_VERSION")
        mv "$scratch_bin/client" "$interop_client"
        rmdir "$scratch_bin"
    fi
}

# ----- processes, certificates -----

# Attaches `strace -c -f` to every thread of the process $1, its summary to
# go to the file $2 (what strace says, to $2.log); sets strace_pid once it
# is attached, exits if it does not attach within 10 s.
strace_start() {
    local pid=$1 summary=$2
    strace -c -f -p "$pid" -o "$summary" 2>"$summary.log" &
    strace_pid=$!
    for _ in $(seq 1 200); do
        grep -qs attached "$summary.log" && return 0
        sleep 0.05
    done
    echo "strace did not attach to $pid:" >&2
    cat "$summary.log" >&2
    exit 1
}

# Detaches the strace of strace_start; its summary is then written.
strace_stop() {
    kill -INT "$strace_pid" 2>/dev/null || true
    wait "$strace_pid" 2>/dev/null || true
}

# Prints "total reads writes epoll_waits failed" from the summary $1 of
# `strace -c` (columns: % time, seconds, usecs/call, calls, [errors,]
# syscall).
strace_counts() {
    awk '
        $1 ~ /^[0-9.]+$/ && (NF == 5 || NF == 6) {
            name = $NF; calls = $4; errors = (NF == 6) ? $5 : 0
            if (name == "total") { total = calls; failed = errors; next }
            if (name ~ /^(read|readv|pread64|preadv2?|recvfrom|recvmsg|recvmmsg)$/) reads += calls
            else if (name ~ /^(write|writev|pwrite64|pwritev2?|sendto|sendmsg|sendmmsg)$/) writes += calls
            else if (name ~ /^epoll_(p?wait2?)$/) epolls += calls
        }
        END { print total + 0, reads + 0, writes + 0, epolls + 0, failed + 0 }' "$1"
}

# Stops the processes in pids and waits for them; for the scripts' cleanup
# on exit.
stop_pids() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}

# Stops the one server a bench script runs at a time, SERVER_PID (started
# by the script), and waits for it; nothing if none runs.
SERVER_PID=""
stop_server() {
    if [[ -n $SERVER_PID ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}

# Makes a temporary directory, work, and an empty list of started
# processes, pids; on exit, stops those processes and removes work.
use_work_dir() {
    work=$(mktemp -d)
    pids=()
    trap 'stop_pids; rm -rf "$work"' EXIT
}

# start_interop_server: builds the interop-server example (release) and
# starts it in plaintext on a free port, its log in $work; sets
# interop_port and interop_pid. Needs target_dir (set_target_dir) and work
# (use_work_dir).
# shellcheck disable=SC2154,SC2034 # target_dir and work: the caller's; interop_pid: for the caller
start_interop_server() {
    log "building interop-server (release)"
    cargo build --release -p pajamax-examples --bin interop-server
    start_on_free_port "$work/interop-server.log" "$target_dir/release/interop-server" \
        "--port={port}" --use_tls=false
    interop_port=$started_port
    interop_pid=$started_pid
    log "interop-server on 127.0.0.1:$interop_port"
}

# make_certificates DIR CA_NAME [CLIENT_NAME CLIENT_DNS]: makes in DIR, with
# the openssl CLI, a CA (ca.pem, ca.key) named CA_NAME and a server
# certificate it signs (server.pem, server.key; ECDSA P-256, for localhost
# and 127.0.0.1), all valid for two days. With CLIENT_NAME, also a client
# certificate (client.pem, client.key) for the name CLIENT_DNS.
make_certificates() {
    local dir=$1 ca_name=$2 client_name=${3:-} client_dns=${4:-}
    mkdir -p "$dir"
    (
        cd "$dir" || exit
        ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 \
            -subj "/CN=$ca_name" \
            -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
        printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
            -out server.pem -days 2 -extfile server.ext 2>/dev/null
        if [ -n "$client_name" ]; then
            openssl req "${ec[@]}" -keyout client.key -out client.csr -subj "/CN=$client_name" 2>/dev/null
            printf '%s\n' "subjectAltName=DNS:$client_dns" "basicConstraints=CA:FALSE" \
                "keyUsage=critical,digitalSignature" "extendedKeyUsage=clientAuth" >client.ext
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
                -out client.pem -days 2 -extfile client.ext 2>/dev/null
        fi
    )
}

# ----- h2spec and the Go interop client -----

# run_h2spec TRANSPORT NAME [FLAGS...]: runs $h2spec against 127.0.0.1:$h2_port
# over TRANSPORT (`cleartext` or `tls`) with extra FLAGS, waiting
# $h2spec_timeout seconds per case; names the run NAME. Adds a line to
# summary; every case must pass, else failures is incremented.
# shellcheck disable=SC2154 # work, h2_port and h2spec_timeout: the caller's
run_h2spec() {
    local transport=$1 name=$2
    shift 2
    local out="$work/h2spec-$name.txt" rc=0 tls=() over="" label="h2spec $name"
    if [ "$transport" = tls ]; then
        tls=(-t -k)
        over=" over TLS"
        label="h2spec TLS $name"
    fi
    log "h2spec$over ($name)"
    "$h2spec" "${tls[@]}" -h 127.0.0.1 -p "$h2_port" -o "$h2spec_timeout" \
        "$@" >"$out" 2>&1 || rc=$?
    local line
    line=$(grep -E '^[0-9]+ tests, [0-9]+ passed, [0-9]+ skipped, [0-9]+ failed' "$out" | tail -n 1 || true)
    if [ -z "$line" ]; then
        echo "h2spec ($name) gave no summary (exit $rc):" >&2
        tail -n 40 "$out" >&2
        failures=$((failures + 1))
        summary+=("$label: no result (exit $rc)")
        return
    fi
    local total passed skipped failed
    read -r total passed skipped failed < <(
        echo "$line" | sed -E 's/^([0-9]+) tests, ([0-9]+) passed, ([0-9]+) skipped, ([0-9]+) failed.*/\1 \2 \3 \4/'
    )
    summary+=("$label: $passed/$total passed, $failed failed, $skipped skipped")
    if [ "$total" -eq 0 ] || [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$passed" -ne "$total" ]; then
        echo "h2spec ($name) failures:" >&2
        sed -n '/^Failures:/,$p' "$out" >&2
        failures=$((failures + 1))
    fi
}

# run_cases SUMMARY CASES_NAME COMMAND...: runs COMMAND
# --server_host=127.0.0.1 --server_port=$interop_port --test_case=CASE for
# each CASE of the array named CASES_NAME, at most 60 s each, with its
# output in $work; a case passes when the command exits 0. Logs each
# result, adds "SUMMARY: N/M cases passed" to summary and increments
# failures for each failing case.
# shellcheck disable=SC2154 # work and interop_port: the caller's
run_cases() {
    local title=$1 case_name out rc passed=0
    local -n cases=$2
    shift 2
    for case_name in "${cases[@]}"; do
        out="$work/${title//[^a-zA-Z0-9.-]/_}-$case_name.txt"
        rc=0
        timeout 60 "$@" --server_host=127.0.0.1 --server_port="$interop_port" \
            --test_case="$case_name" >"$out" 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then
            passed=$((passed + 1))
            log "$case_name: ok"
        else
            if [ "$rc" -eq 124 ]; then
                log "$case_name: FAILED (timed out after 60 s)"
            else
                log "$case_name: FAILED (exit $rc)"
            fi
            tail -n 30 "$out" >&2
            failures=$((failures + 1))
        fi
    done
    summary+=("$title: $passed/${#cases[@]} cases passed")
}

# listed_cases SCRIPT COMMAND...: sets CASES to the cases `COMMAND --list`
# prints, one per line (a client of our own runs every case it has); exits,
# naming SCRIPT, when it lists none.
listed_cases() {
    local script=$1
    shift
    mapfile -t CASES < <("$@" --list)
    if [ "${#CASES[@]}" -eq 0 ]; then
        echo "$script: the client lists no case" >&2
        exit 1
    fi
}

# run_interop_cases LABEL [FLAGS...]: runs $interop_client (grpc-go's) with
# FLAGS, once per case of INTEROP_CASES (run_cases).
run_interop_cases() {
    local label=$1
    shift
    run_cases "grpc-go $GRPC_VERSION $label" INTEROP_CASES "$interop_client" "$@"
}

# check_running SCRIPT PID...: increments failures for each server PID
# that is no longer running. SCRIPT names the script in the message.
check_running() {
    local script=$1 pid
    shift
    for pid in "$@"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$script: a server died during the run" >&2
            failures=$((failures + 1))
        fi
    done
}

# print_summary SCRIPT TITLE: prints the lines of summary under the heading
# "== TITLE summary", then whether all checks passed; exits 1 when failures
# is not 0. SCRIPT names the script in the verdict.
# shellcheck disable=SC2154 # started: the caller's
print_summary() {
    local script=$1 title=$2 line
    echo
    echo "== $title summary ($(($(date +%s) - started)) s)"
    for line in "${summary[@]}"; do
        echo "  $line"
    done
    if [ "$failures" -ne 0 ]; then
        echo "$script: FAILED ($failures failing check(s))"
        exit 1
    fi
    echo "$script: all checks passed"
}
