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

    def table(intro, columns, row):
        """One table: a line per cell, `row(p, t, ratio)` its figures."""
        print(intro)
        print()
        print("| cell | " + " | ".join(columns) + " |")
        print("|---|" + "---:|" * len(columns))
        for cell in cells:
            p, t = figures.get((cell, "pajamax")), figures.get((cell, "tonic"))
            name = f"{cell[0].capitalize()}, C={cell[1]}, S={cell[2]}"
            if not p or not t:
                print(f"| {name} | incomplete |")
                continue

            def ratio(key):
                return f"{t[key] / p[key]:.1f}x" if p[key] else "–"

            print(f"| {name} | " + " | ".join(row(p, t, ratio)) + " |")

    table(
        "Per message, user-space instructions (callgrind) and system calls\n"
        "(strace), and tonic's figure over pajamax's:",
        ["pajamax instr", "tonic instr", "tonic / pajamax",
         "pajamax syscalls", "tonic syscalls", "tonic / pajamax"],
        lambda p, t, ratio: [
            f"{p['instr']:,.0f}", f"{t['instr']:,.0f}", ratio("instr"),
            f"{p['syscalls']:.4f}", f"{t['syscalls']:.4f}", ratio("syscalls"),
        ],
    )
    print()
    table(
        "Natively, per message: the server's sleeps (voluntary context\n"
        "switches), its writes (under strace) and its CPU time (user and\n"
        "kernel):",
        ["pajamax sleeps", "tonic sleeps", "pajamax writes", "tonic writes",
         "pajamax CPU", "tonic CPU", "tonic / pajamax CPU"],
        lambda p, t, ratio: [
            f"{p['sleeps']:.4f}", f"{t['sleeps']:.4f}",
            f"{p['writes']:.4f}", f"{t['writes']:.4f}",
            f"{p['ns']:.0f} ns", f"{t['ns']:.0f} ns", ratio("ns"),
        ],
    )


if __name__ == "__main__":
    main()
