#!/usr/bin/env python3
"""Samples one process's CPU time and resident memory from /proc.

Usage: procstat.py PID OUTFILE [INTERVAL_SECONDS]

Natively there is no `docker stats`: this plays its part. The first line
names the process (`# pid PID (COMM), N ticks per second`). Every INTERVAL
(default 1 s) it appends a line `MONOTONIC_SECONDS CPU_TICKS RSS_KIB RUN_NS` to
OUTFILE, where CPU_TICKS is the process's user + system time (all threads)
in clock ticks, then RUN_NS, nanoseconds on a CPU since sampling began,
from the threads' /proc/PID/task/*/schedstat: far finer than the 10 ms
ticks. RUN_NS adds up each thread's growth between samples, a thread new
since the last sample counting in full, so threads that come and go (one
per connection) are followed; a thread that exits loses at most its last
interval. It stops when the process exits or on SIGTERM/SIGINT,
taking one last sample first, so the file spans the whole sampled window.
"""

import os
import signal
import sys
import time

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def threads_ns(pid):
    """{thread id: nanoseconds on a CPU} of the live threads of `pid`."""
    out = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def sample(pid):
    """(cpu ticks, rss KiB, {thread: run ns}) of `pid`, or None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    rss = 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return ticks, rss, threads_ns(pid)


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def main():
    pid, out = int(sys.argv[1]), sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    stop = False

    def on_signal(_signum, _frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with open(out, "w") as f:
        f.write(f"# pid {pid} ({command_name(pid)}), {TICKS_PER_SECOND} ticks per second\n")
        last, run = None, 0
        while True:
            s = sample(pid)
            if s is None:
                break
            if last is not None:
                run += sum(ns - last.get(tid, 0) for tid, ns in s[2].items())
            last = s[2]
            f.write(f"{time.monotonic():.6f} {s[0]} {s[1]} {run}\n")
            f.flush()
            if stop:
                break
            deadline = time.monotonic() + interval
            while not stop and time.monotonic() < deadline:
                time.sleep(min(0.05, interval))


if __name__ == "__main__":
    main()
