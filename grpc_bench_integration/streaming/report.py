#!/usr/bin/env python3
"""The table of a streaming bench run.

Usage: report.py RESULTS_FILE

RESULTS_FILE holds one line per run, `server=NAME` and the key=value line
of stream-load. For each cell and server: messages per second, server CPU
(percent of one CPU) and the kernel's share of it, messages per server
CPU-second (messages per second / server CPUs), client CPU, the limit
seen, and pajamax's messages per server CPU-second over tonic's. A run is
client-bound when the client used at least 95 % of its CPU and the server
less; server-bound the other way round. Faults (error statuses, bad items,
calls of the wrong length, streams that received nothing in the window)
are printed after the table.
"""

import sys

SATURATED = 0.95


def parse(path):
    runs = []
    with open(path) as f:
        for line in f:
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if fields:
                runs.append(fields)
    return runs


def limit(server_cpu, client_cpu):
    if client_cpu >= SATURATED and server_cpu < SATURATED:
        return "client-bound"
    if server_cpu >= SATURATED and client_cpu < SATURATED:
        return "server-bound"
    if server_cpu >= SATURATED and client_cpu >= SATURATED:
        return "both saturated"
    return ""


def main():
    runs = parse(sys.argv[1])
    cells, by_cell = [], {}
    for r in runs:
        key = (r["mode"], int(r["c"]), int(r["s"]))
        if key not in by_cell:
            cells.append(key)
            by_cell[key] = {}
        by_cell[key][r["server"]] = r

    print(
        "| mode | C | S | server | msg/s | server CPU | of it kernel | msg per server CPU-s "
        "| client CPU | limit | pajamax/tonic per CPU |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---|---:|")
    faults = []
    for key in cells:
        mode, c, s = key
        per_cpu = {}
        rows = []
        for server, r in by_cell[key].items():
            rate = float(r["rate"])
            server_cpu = float(r["server_cpu"])
            client_cpu = float(r["client_cpu"])
            per_cpu[server] = rate / server_cpu if server_cpu > 0 else float("nan")
            kernel = float(r.get("server_system_share", "nan"))
            rows.append((server, rate, server_cpu, kernel, client_cpu))
            bad = {
                k: r[k]
                for k in ("errors", "bad_items", "short_calls", "idle_streams")
                if r.get(k, "0") != "0"
            }
            if bad:
                faults.append(f"{mode} C={c} S={s} {server}: " + ", ".join(f"{k}={v}" for k, v in bad.items()))
        ratio = ""
        if "pajamax" in per_cpu and "tonic" in per_cpu and per_cpu["tonic"] > 0:
            ratio = f"{per_cpu['pajamax'] / per_cpu['tonic']:.2f}x"
        for i, (server, rate, server_cpu, kernel, client_cpu) in enumerate(rows):
            print(
                f"| {mode} | {c} | {s} | {server} | {rate:,.0f} | {100 * server_cpu:.0f} % "
                f"| {100 * kernel:.0f} % "
                f"| {per_cpu[server]:,.0f} | {100 * client_cpu:.0f} % "
                f"| {limit(server_cpu, client_cpu)} | {ratio if i == len(rows) - 1 else ''} |"
            )
    print()
    if faults:
        print("Faults:")
        for line in faults:
            print("  " + line)
    else:
        print("Faults: none (no error status, every item in order and of its size, every call complete, every stream received)")


if __name__ == "__main__":
    main()
