#!/usr/bin/env python3
"""The tables of a streaming cost run (cost.sh).

Usage: cost_report.py RESULTS_FILE

RESULTS_FILE holds one line of key=value per cell and server: `ir1` and
`ir2`, the instructions of the counted runs of `items` and 2 x `items`
messages; `sleeps`, `secs`, `server_cpu`, `server_system_share` of the
native run of `native_items` messages; `syscalls`, `reads`, `writes`,
`epolls` of the run of `items` messages under strace. Prints, per cell,
each server's figures per message and tonic's over pajamax's. (The
kernel's share of the CPU time is left out: the native runs last a
fraction of a second, a few of `/proc/PID/stat`'s clock ticks; run.sh
measures it over seconds.)
"""

import sys

from report import parse


def per_message(run):
    items = int(run["items"])
    native = int(run["native_items"])
    cpu_s = float(run["server_cpu"]) * float(run["secs"])
    return {
        "instr": (int(run["ir2"]) - int(run["ir1"])) / items,
        "syscalls": int(run["syscalls"]) / items,
        "writes": int(run["writes"]) / items,
        "sleeps": int(run["sleeps"]) / native,
        "ns": cpu_s * 1e9 / native,
    }


def main():
    runs = parse(sys.argv[1])
    cells = []
    figures = {}
    for run in runs:
        cell = (run["mode"], int(run["c"]), int(run["s"]))
        if cell not in cells:
            cells.append(cell)
        figures[cell, run["server"]] = per_message(run)

    def ratio(cell, key):
        p, t = figures.get((cell, "pajamax")), figures.get((cell, "tonic"))
        if not p or not t or p[key] == 0:
            return "–"
        return f"{t[key] / p[key]:.1f}x"

    print("Per message, user-space instructions (callgrind) and system calls")
    print("(strace), and tonic's figure over pajamax's:")
    print()
    print("| cell | pajamax instr | tonic instr | tonic / pajamax | pajamax syscalls | tonic syscalls | tonic / pajamax |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cell in cells:
        p, t = figures.get((cell, "pajamax")), figures.get((cell, "tonic"))
        name = f"{cell[0].capitalize()}, C={cell[1]}, S={cell[2]}"
        print(
            f"| {name} | {p['instr']:,.0f} | {t['instr']:,.0f} | {ratio(cell, 'instr')} "
            f"| {p['syscalls']:.4f} | {t['syscalls']:.4f} | {ratio(cell, 'syscalls')} |"
            if p and t
            else f"| {name} | incomplete |"
        )
    print()
    print("Natively, per message: the server's sleeps (voluntary context")
    print("switches), its writes (under strace) and its CPU time (user and")
    print("kernel):")
    print()
    print("| cell | pajamax sleeps | tonic sleeps | pajamax writes | tonic writes | pajamax CPU | tonic CPU | tonic / pajamax CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for cell in cells:
        p, t = figures.get((cell, "pajamax")), figures.get((cell, "tonic"))
        name = f"{cell[0].capitalize()}, C={cell[1]}, S={cell[2]}"
        if not p or not t:
            print(f"| {name} | incomplete |")
            continue
        print(
            f"| {name} | {p['sleeps']:.4f} | {t['sleeps']:.4f} | {p['writes']:.4f} | {t['writes']:.4f} "
            f"| {p['ns']:.0f} ns | {t['ns']:.0f} ns | {ratio(cell, 'ns')} |"
        )


if __name__ == "__main__":
    main()
