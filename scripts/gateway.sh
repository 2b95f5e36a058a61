#!/usr/bin/env bash
# pajamax behind nginx (Debian's nginx-light, grpc_pass), with rolling
# restarts under load that must lose no call:
#   - two helloworld upstreams on loopback ports, nginx in front of them
#     (HTTP/2 in cleartext on a loopback port, keepalive connections to the
#     upstreams; the configuration is the one docs/deployment.md explains);
#   - ghz v0.114.0 drives load through nginx (GATEWAY_CONNECTIONS
#     connections, default 2, carrying GATEWAY_CONCURRENCY concurrent calls,
#     default 50, for GATEWAY_SECONDS, default 24) while grpcurl v1.9.3 calls
#     SayHello through nginx in a loop and checks every answer;
#   - meanwhile each upstream in turn gets SIGTERM, must exit 0, is started
#     again on the same port, and the next one is restarted once it is
#     ready (GATEWAY_ROUNDS rounds, default 2);
#   - every call must be OK: ghz's status distribution, the grpcurl answers,
#     and nginx's access log (HTTP status and grpc-status of each call);
#   - nginx's error log may only show the failed attempts that nginx
#     retries on the other upstream (a refused connection: nothing was
#     sent); it tells why a call was lost otherwise.
#
# Modes: `--plain` (nginx -> pajamax in cleartext), `--tls` (nginx ->
# pajamax over TLS: grpcs://, the certificate checked against a CA made
# here with openssl; the examples built with their `tls` feature), or both,
# the default.
#
# nginx runs as the current user with its prefix in a temporary directory;
# no system service is started or changed. When nginx is missing it is
# installed with apt-get (root only). ghz and grpcurl are built from the Go
# module proxy into ${CARGO_TARGET_DIR:-target}/conformance/bin when missing
# or of another version. Needs cargo, go, python3 (and openssl for --tls).
# Exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)

# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

NGINX_PACKAGE="nginx-light"
NGINX_VERSION=1.22.1-9+deb12u11
GHZ_VERSION=v0.114.0
GHZ_MODULE=github.com/bojand/ghz

seconds=${GATEWAY_SECONDS:-24}
connections=${GATEWAY_CONNECTIONS:-2}
concurrency=${GATEWAY_CONCURRENCY:-50}
rounds=${GATEWAY_ROUNDS:-2}

modes=(plain tls)
case "${1:-}" in
"") ;;
--plain) modes=(plain) ;;
--tls) modes=(tls) ;;
*)
    echo "usage: $0 [--plain | --tls]" >&2
    exit 2
    ;;
esac

log_as gateway

# ----- tools -----

find_go gateway
require gateway python3

nginx=$(command -v nginx || true)
if [ -z "$nginx" ] && [ -x /usr/sbin/nginx ]; then
    nginx=/usr/sbin/nginx
fi
if [ -z "$nginx" ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        echo "gateway: nginx is not installed (as root: apt-get install $NGINX_PACKAGE=$NGINX_VERSION)" >&2
        exit 1
    fi
    log "installing $NGINX_PACKAGE $NGINX_VERSION"
    # The package would start nginx as a system service (port 80) where
    # services may start: keep it from doing so during the install.
    policy=/usr/sbin/policy-rc.d
    made_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        made_policy=1
    fi
    apt-get update -qq
    install_rc=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "$NGINX_PACKAGE=$NGINX_VERSION" >/dev/null || install_rc=$?
    [ -z "$made_policy" ] || rm -f "$policy"
    if [ "$install_rc" -ne 0 ]; then
        echo "gateway: could not install $NGINX_PACKAGE=$NGINX_VERSION; versions available:" >&2
        apt-cache policy "$NGINX_PACKAGE" >&2
        exit 1
    fi
    nginx=/usr/sbin/nginx
fi
nginx_version=$("$nginx" -v 2>&1 | sed 's:^nginx version\: ::')
if ! "$nginx" -V 2>&1 | grep -q -- --with-http_v2_module; then
    echo "gateway: $nginx ($nginx_version) has no HTTP/2 module" >&2
    exit 1
fi
log "nginx: $nginx ($nginx_version; Debian package $(dpkg-query -W -f '${Version}' "$NGINX_PACKAGE" 2>/dev/null || echo 'not from apt'))"

set_target_dir
go_tool ghz "$GHZ_MODULE" "$GHZ_MODULE/cmd/ghz" "$GHZ_VERSION"
ghz="$tools_bin/ghz"
install_grpcurl

# ----- work directory, processes -----

work=$(mktemp -d)
keep_work=
pids=()
cleanup() {
    stop_pids
    if [ -n "$keep_work" ]; then
        echo "gateway: the logs and configurations are kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

# Prints a free loopback port, never one of those that other checks of this
# repository use.
free_port() {
    python3 -c '
import socket
taken = {50051, *range(50461, 50471)}
while True:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    if port not in taken:
        print(port)
        break
'
}

# ----- builds -----

log "building helloworld (release)"
cargo build --release -p pajamax-examples --bin helloworld
cp "$target_dir/release/helloworld" "$work/helloworld-plain"

if [[ " ${modes[*]} " == *" tls "* ]]; then
    need_openssl gateway
    log "building helloworld with --features tls (release)"
    cargo build --release -p pajamax-examples --features tls --bin helloworld
    cp "$target_dir/release/helloworld" "$work/helloworld-tls"
fi

# ----- one mode -----

# Writes the nginx configuration of mode $1 to $dir/nginx.conf.
write_nginx_conf() {
    local mode=$1 user_line="" scheme=grpc tls_lines=""
    # As root, nginx's workers would run as nobody and could not read $dir.
    if [ "$(id -u)" -eq 0 ]; then
        user_line="user $(id -un) $(id -gn);"
    fi
    if [ "$mode" = tls ]; then
        scheme=grpcs
        tls_lines="
            grpc_ssl_trusted_certificate $dir/ca.pem;
            grpc_ssl_verify on;
            grpc_ssl_verify_depth 2;
            grpc_ssl_name localhost;
            grpc_ssl_server_name on;
            grpc_ssl_protocols TLSv1.2 TLSv1.3;
            grpc_ssl_session_reuse on;"
    fi
    cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log info;

events {
    worker_connections 1024;
}

http {
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;

    log_format grpc '\$status \$sent_trailer_grpc_status "\$upstream_addr" "\$upstream_status" \$request_time';
    access_log $dir/access.log grpc buffer=256k flush=1s;

    upstream greeter {
        server 127.0.0.1:${up_port[0]} max_fails=0;
        server 127.0.0.1:${up_port[1]} max_fails=0;
        keepalive 128;
        keepalive_requests 1000000;
        keepalive_timeout 60s;
    }

    server {
        listen 127.0.0.1:$gw_port http2;

        keepalive_requests 1000000;
        keepalive_timeout 300s;
        http2_max_concurrent_streams 128;
        client_max_body_size 0;
        client_body_timeout 300s;

        location / {
            grpc_pass $scheme://greeter;
            grpc_connect_timeout 2s;
            grpc_read_timeout 300s;
            grpc_send_timeout 300s;
            grpc_next_upstream error timeout;
            grpc_next_upstream_tries 3;
            grpc_next_upstream_timeout 10s;$tls_lines
        }
    }
}
EOF
}

# Starts upstream $1 on its port (${up_port[$1]}); returns 1 if it does not
# become ready.
start_upstream() {
    local i=$1
    "$server_bin" "127.0.0.1:${up_port[i]}" "${server_args[@]}" >>"$dir/upstream$i.log" 2>&1 &
    up_pid[i]=$!
    pids+=("${up_pid[i]}")
    wait_ready "${up_pid[i]}" "${up_port[i]}"
}

# SIGTERM to upstream $1, which must exit 0; then the same port again.
restart_upstream() {
    local i=$1 t0 t1 t2 rc=0
    t0=$(date +%s%N)
    kill -TERM "${up_pid[i]}" 2>/dev/null || true
    wait "${up_pid[i]}" || rc=$?
    t1=$(date +%s%N)
    if [ "$rc" -ne 0 ]; then
        log "FAIL upstream $i (:${up_port[i]}) exited $rc after SIGTERM"
        return 1
    fi
    if ! start_upstream "$i"; then
        log "FAIL upstream $i did not start again on :${up_port[i]}"
        sed 's/^/    upstream: /' "$dir/upstream$i.log"
        return 1
    fi
    t2=$(date +%s%N)
    log "upstream $i (:${up_port[i]}): SIGTERM, exit 0 after $(((t1 - t0) / 1000000)) ms, ready again $(((t2 - t1) / 1000000)) ms later"
}

# grpcurl calls SayHello through nginx until $dir/stop exists, each with
# its own name, and checks each answer; writes "calls wrong" to
# $dir/loop.result and each wrong answer to $dir/loop.wrong.
check_loop() {
    local n=0 wrong=0 name out
    while [ ! -e "$dir/stop" ]; do
        n=$((n + 1))
        name="gateway-$mode-$n"
        out=$("$grpcurl" -plaintext -max-time 10 -import-path "$root/examples/proto" \
            -proto helloworld.proto -d "{\"name\":\"$name\"}" \
            "127.0.0.1:$gw_port" helloworld.Greeter/SayHello 2>&1) || true
        if [ "$out" != "$(printf '{\n  "message": "Hello %s!"\n}' "$name")" ]; then
            wrong=$((wrong + 1))
            printf 'call %s:\n%s\n' "$name" "$out" >>"$dir/loop.wrong"
        fi
    done
    echo "$n $wrong" >"$dir/loop.result"
}

failures=0

fail() {
    log "FAIL $mode: $*"
    failures=$((failures + 1))
}

run_mode() {
    mode=$1
    dir="$work/$mode"
    mkdir -p "$dir/tmp"
    server_bin="$work/helloworld-$mode"
    server_args=()
    if [ "$mode" = tls ]; then
        make_certificates "$dir" "pajamax gateway test CA"
        server_args=(--tls-cert "$dir/server.pem" --tls-key "$dir/server.key")
    fi
    local before=$failures i

    # Two upstreams on ports the OS says are free (tried again elsewhere if
    # another process takes one first).
    up_port=() up_pid=()
    for i in 0 1; do
        up_pid[i]=
        for _ in 1 2 3 4 5; do
            up_port[i]=$(free_port)
            if [ "$i" -eq 1 ] && [ "${up_port[1]}" = "${up_port[0]}" ]; then
                continue
            fi
            start_upstream "$i" && break
            kill "${up_pid[i]}" 2>/dev/null || true
            up_pid[i]=
        done
        if [ -z "${up_pid[i]}" ]; then
            fail "upstream $i did not start"
            sed 's/^/    upstream: /' "$dir/upstream$i.log"
            return
        fi
    done

    local nginx_pid=
    for _ in 1 2 3 4 5; do
        gw_port=$(free_port)
        write_nginx_conf "$mode"
        if ! "$nginx" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -t 2>"$dir/nginx-t.log"; then
            fail "nginx -t rejects the configuration"
            sed 's/^/    nginx: /' "$dir/nginx-t.log" "$dir/nginx.conf"
            return
        fi
        "$nginx" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>>"$dir/nginx.out" &
        nginx_pid=$!
        pids+=("$nginx_pid")
        wait_ready "$nginx_pid" "$gw_port" && break
        kill "$nginx_pid" 2>/dev/null || true
        nginx_pid=
    done
    if [ -z "$nginx_pid" ]; then
        fail "nginx did not start"
        sed 's/^/    nginx: /' "$dir/error.log"
        return
    fi
    log "$mode: nginx on 127.0.0.1:$gw_port -> upstreams 127.0.0.1:${up_port[0]} and 127.0.0.1:${up_port[1]} ($([ "$mode" = tls ] && echo grpcs || echo grpc))"

    # The whole chain answers before the load starts.
    local first
    first=$("$grpcurl" -plaintext -max-time 10 -import-path "$root/examples/proto" \
        -proto helloworld.proto -d '{"name":"gateway"}' "127.0.0.1:$gw_port" \
        helloworld.Greeter/SayHello 2>&1) || true
    if [ "$first" != "$(printf '{\n  "message": "Hello gateway!"\n}')" ]; then
        fail "a first call through nginx failed: $first"
        sed 's/^/    nginx: /' "$dir/error.log"
        return
    fi

    log "$mode: ghz, $connections connections x $concurrency concurrent calls for ${seconds}s; $rounds rolling restart(s) meanwhile"
    "$ghz" --insecure --proto examples/proto/helloworld.proto \
        --call helloworld.Greeter/SayHello -d '{"name":"gateway"}' \
        --connections "$connections" --concurrency "$concurrency" \
        --duration "${seconds}s" --duration-stop wait --format json \
        "127.0.0.1:$gw_port" >"$dir/ghz.json" 2>"$dir/ghz.err" &
    local ghz_pid=$!
    pids+=("$ghz_pid")
    rm -f "$dir/stop"
    check_loop &
    local loop_pid=$!
    pids+=("$loop_pid")

    local restart_failed=
    sleep 3
    for _ in $(seq 1 "$rounds"); do
        for i in 0 1; do
            restart_upstream "$i" || { restart_failed=1; break 2; }
            sleep 3
        done
    done
    if ! kill -0 "$ghz_pid" 2>/dev/null; then
        fail "the load ended before the restarts were done: raise GATEWAY_SECONDS"
    fi
    [ -z "$restart_failed" ] || fail "rolling restart"

    local ghz_rc=0
    wait "$ghz_pid" || ghz_rc=$?
    touch "$dir/stop"
    wait "$loop_pid" || true

    # nginx writes its access log out and exits on SIGQUIT.
    kill -QUIT "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" || true
    for i in 0 1; do
        local rc=0
        kill -TERM "${up_pid[i]}" 2>/dev/null || true
        wait "${up_pid[i]}" || rc=$?
        [ "$rc" -eq 0 ] || fail "upstream $i exited $rc at the end"
    done

    # ghz: every call OK.
    local ghz_count
    if [ "$ghz_rc" -ne 0 ]; then
        fail "ghz exited $ghz_rc"
        sed 's/^/    ghz: /' "$dir/ghz.err"
    fi
    if ghz_count=$(python3 -c '
import json, sys
report = json.load(open(sys.argv[1]))
count = report["count"]
codes = report.get("statusCodeDistribution") or {}
errors = report.get("errorDistribution") or {}
ok, rps = codes.get("OK", 0), report["rps"]
print(f"ghz: {count} calls, {ok} OK, {rps:.0f} calls/s, "
      f"status codes {codes}, errors {errors or 0}", file=sys.stderr)
print(count)
sys.exit(0 if count > 0 and codes == {"OK": count} and not errors else 1)
' "$dir/ghz.json" 2>"$dir/ghz.summary"); then
        log "$mode: ok   $(cat "$dir/ghz.summary")"
    else
        fail "$(cat "$dir/ghz.summary")"
        ghz_count=0
    fi

    # grpcurl: every answer right.
    local loop_calls=0 loop_wrong=0
    read -r loop_calls loop_wrong <"$dir/loop.result" || true
    if [ "${loop_calls:-0}" -gt 0 ] && [ "${loop_wrong:-1}" -eq 0 ]; then
        log "$mode: ok   grpcurl: $loop_calls calls during the restarts, every answer \"Hello gateway-$mode-N!\""
    else
        fail "grpcurl: $loop_wrong of $loop_calls answers wrong"
        head -n 40 "$dir/loop.wrong" 2>/dev/null | sed 's/^/    grpcurl: /'
    fi

    # nginx's access log: one line per call, each 200 with grpc-status 0.
    if python3 -c '
import collections, re, sys
path, expected = sys.argv[1], int(sys.argv[2])
line_re = re.compile(r"(\d+) (\S+) \"([^\"]*)\" \"([^\"]*)\" (\S+)$")
calls = bad = retried = 0
served = collections.Counter()
for line in open(path):
    m = line_re.match(line.strip())
    if not m:
        continue
    calls += 1
    status, grpc_status, addrs, upstream_status, _ = m.groups()
    addrs = [a.strip() for a in addrs.split(",")]
    served[addrs[-1]] += 1
    if len(addrs) > 1:
        retried += 1
    if status != "200" or grpc_status != "0":
        bad += 1
        if bad <= 10:
            print("    bad: " + line.strip(), file=sys.stderr)
print(f"nginx: {calls} calls logged ({expected} made), {bad} not OK, "
      f"{retried} retried on the other upstream, answered by "
      + ", ".join(f"{a}: {n}" for a, n in sorted(served.items())))
sys.exit(0 if calls == expected and bad == 0 else 1)
' "$dir/access.log" $((ghz_count + loop_calls + 1)) >"$dir/access.summary"; then
        log "$mode: ok   $(cat "$dir/access.summary")"
    else
        fail "$(cat "$dir/access.summary")"
    fi

    # Why attempts at an upstream failed: each is one [error] line. nginx
    # tries another upstream only when nothing of the call was sent yet
    # (it streams gRPC request bodies, so it never sends a call twice);
    # the other kinds below are calls lost (502), and any error not listed
    # fails the check too (see docs/deployment.md).
    if python3 -c '
import collections, re, sys
kinds = [
    ("connection refused: retried, the call was not sent", r"connect\(\) failed \(111: "),
    ("connection reset while connecting: retried, not sent", r"connect\(\) failed \(104: "),
    ("LOST: new connection reset after the call was sent (accept queue at close)",
     r"recv\(\) failed \(104: Connection reset by peer\) while reading response header"),
    ("LOST: GOAWAY below the call\x27s stream (refused, not processed)", r"upstream sent goaway with error "),
    ("LOST: REFUSED_STREAM (not processed)", r"upstream rejected request with error 7 "),
]
seen, other = collections.Counter(), []
for line in open(sys.argv[1]):
    if not re.search(r" \[(error|crit|alert|emerg)\] ", line):
        continue
    for label, pattern in kinds:
        if re.search(pattern, line):
            seen[label] += 1
            break
    else:
        other.append(line.rstrip())
for label, _ in kinds:
    if seen[label]:
        print(f"    {seen[label]:6d}  {label}")
if not seen:
    print("    none")
for line in other[:20]:
    print("    UNEXPECTED: " + line)
lost = sum(n for label, n in seen.items() if label.startswith("LOST"))
sys.exit(1 if other or lost else 0)
' "$dir/error.log" >"$dir/retries.summary"; then
        log "$mode: ok   failed attempts at an upstream, by cause:"
        cat "$dir/retries.summary"
    else
        fail "failed attempts at an upstream, by cause:"
        cat "$dir/retries.summary"
    fi

    if [ "$failures" -eq "$before" ]; then
        log "$mode: ok   no call lost across the rolling restarts"
    fi
}

passed=0 failed=0
for mode in "${modes[@]}"; do
    before=$failures
    run_mode "$mode"
    if [ "$failures" -eq "$before" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        keep_work=1
    fi
done

echo "gateway: $passed passed, $failed failed ($(($(date +%s) - started)) s)"
[ "$failed" -eq 0 ]
