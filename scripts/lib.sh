# Shared by the scripts: start a server on a free loopback port.
# shellcheck shell=bash

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

