#!/usr/bin/env python3
"""Tables and the chart of a native grpc_bench run.

Usage:
  report.py table RESULTS_DIR
      grpc_bench's result table for the runs in RESULTS_DIR, then the
      figures grpc_bench has no column for. Writes `runs.csv`.
  report.py sweep RESULTS_DIR
      the sweep: RESULTS_DIR holds one folder per cell, `c{C}_s{S}`. Prints
      and writes `sweep.md` (tables), `sweep.svg` (chart) and `runs.csv`.
  report.py run DIR NAME
      one line on the run NAME in DIR: both CPUs and what limited it.

Each run left, under the bench's name (`rust_pajamax_bench`...):
  NAME.report        the client's output: ghz's summary, or h2load's;
  NAME.stats         the server's samples (tools/procstat.py);
  NAME.client.stats  the client's samples;
  NAME.params        `connections=C streams=S server_cpus=N client_cpus=M`,
                     N and M the CPUs each side can keep busy (runs made
                     before it existed: GRPC_SERVER_CPUS and GRPC_CLIENT_CPUS
                     of bench.params, rounded up).

req/s is as grpc_bench counts it: successful calls over the run's length.
avg. cpu is the server's CPU time over the sampled window (from one second
into the run to its end), in percent of one CPU; avg. memory the mean of
the server's resident set samples. req/s per CPU is req/s / (avg. cpu/100).
client cpu is the client's CPU time over its sampled window, in percent of
one CPU.

limit, for each run:
  client-bound    the client used at least CLIENT_BOUND_CLIENT_PCT (85) % of
                  the CPUs it can keep busy and the server less than
                  CLIENT_BOUND_SERVER_PCT (50) % of one CPU. req/s then
                  measures the client, and req/s per server CPU divides by
                  a small, noisy CPU time: that figure is printed with
                  "(client-bound)", its ratios too, and drawn hollow.
  server-bound    the server used at least 90 % of its CPUs and the client
                  was not saturated: req/s is the server's maximum.
  both saturated  both at once.
  -               neither: bound by latency (few streams), or in between
                  (left empty in runs.csv).
"""

import csv
import math
import os
import re
import sys

PAJAMAX = "rust_pajamax"
TONIC = "rust_tonic"
ORIGINAL = "rust_pajamax_upstream"
LABELS = {PAJAMAX: "pajamax", TONIC: "tonic", ORIGINAL: "original Pajamax"}


def env_pct(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise SystemExit(f"{name} must be a number (percent)")


# Client-bound: the client at CLIENT_SATURATED % of its CPUs or more, the
# server under SERVER_BUSY % of one CPU. Server-bound: the server at
# SERVER_SATURATED % of its CPUs or more.
CLIENT_SATURATED = env_pct("CLIENT_BOUND_CLIENT_PCT", 85)
SERVER_BUSY = env_pct("CLIENT_BOUND_SERVER_PCT", 50)
SERVER_SATURATED = 90
CLIENT_BOUND = "client-bound"


def short_name(bench):
    return bench[: -len("_bench")] if bench.endswith("_bench") else bench


def parse_seconds(value, unit):
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "m": 60.0}.get(unit, 1.0)


def parse_ghz(text):
    r = {"client": "ghz"}
    m = re.search(r"Total:\s*([\d.]+)\s*(\S+)", text)
    if not m:
        return None
    r["total"] = parse_seconds(m.group(1), m.group(2))
    m = re.search(r"\[OK\]\s*(\d+)", text)
    r["ok"] = int(m.group(1)) if m else 0
    r["failed"] = sum(
        int(n) for code, n in re.findall(r"\[(\w+)\]\s*(\d+) responses", text) if code != "OK"
    )
    m = re.search(r"Average:\s*(.*\S)", text)
    r["avg"] = m.group(1) if m else "-"
    for p in ("90", "95", "99"):
        m = re.search(rf"{p} % in\s*(.*\S)", text)
        r[p] = m.group(1) if m else "-"
    r["req_s"] = r["ok"] / r["total"] if r["total"] else 0.0
    return r


def parse_h2load(text):
    m = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", text)
    if not m:
        return None
    r = {"client": "h2load", "total": parse_seconds(m.group(1), m.group(2))}
    m2 = re.search(r"status codes: (\d+) 2xx", text)
    m3 = re.search(r"(\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
    r["ok"] = int(m2.group(1)) if m2 else 0
    r["failed"] = sum(int(x) for x in m3.groups()[1:]) if m3 else 0
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text)
    r["avg"] = m.group(3).replace("us", " µs") if m else "-"
    for p in ("90", "95", "99"):
        r[p] = "n/a"
    r["req_s"] = r["ok"] / r["total"] if r["total"] else 0.0
    m = re.search(r"grpc-status check: (.*)", text)
    r["grpc_status"] = m.group(1).strip() if m else "?"
    return r


def parse_stats(path):
    """(avg cpu %, avg rss MiB) over the samples of `path`, or (None, None)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    ticks_per_s = 100
    rows = []
    for line in lines:
        if line.startswith("#"):
            m = re.search(r"(\d+) ticks per second", line)
            if m:
                ticks_per_s = int(m.group(1))
            continue
        fields = line.split()
        run_ns = int(fields[3]) if len(fields) > 3 else None
        rows.append((float(fields[0]), int(fields[1]), int(fields[2]), run_ns))
    if len(rows) < 2 or rows[-1][0] <= rows[0][0]:
        return None, None
    elapsed = rows[-1][0] - rows[0][0]
    if rows[-1][3] is not None:
        # Nanoseconds on a CPU, followed thread by thread.
        cpu = (rows[-1][3] - rows[0][3]) / 1e9 / elapsed * 100
    else:
        cpu = (rows[-1][1] - rows[0][1]) / ticks_per_s / elapsed * 100
    mem = sum(r[2] for r in rows) / len(rows) / 1024
    return cpu, mem


def read_params(directory, bench):
    """{connections, streams (when known), server_cpus, client_cpus}: the
    cell, and the CPUs each side of the run could keep busy."""
    try:
        with open(os.path.join(directory, bench + ".params")) as f:
            fields = dict(kv.split("=", 1) for kv in f.read().split() if "=" in kv)
        params = {k: int(v) for k, v in fields.items()}
        if "server_cpus" in params and "client_cpus" in params:
            return params
    except (OSError, ValueError):
        pass
    # Older runs: the variables of bench.params, here or a level up (sweeps).
    cpus = {"SERVER": 1, "CLIENT": 1}
    for params in (os.path.join(directory, "bench.params"),
                   os.path.join(os.path.dirname(os.path.abspath(directory)), "bench.params")):
        try:
            with open(params) as f:
                text = f.read()
        except OSError:
            continue
        for side in cpus:
            m = re.search(rf"GRPC_{side}_CPUS=([\d.]+)", text)
            if m:
                cpus[side] = max(1, math.ceil(float(m.group(1))))
        break
    return {"server_cpus": cpus["SERVER"], "client_cpus": cpus["CLIENT"]}


def limit(r):
    """What bounded the run `r` (see the module's doc), "" if neither side."""
    if r["cpu"] is None or r["client_cpu"] is None:
        return ""
    client_saturated = r["client_cpu"] >= CLIENT_SATURATED * r["client_cpus"]
    server_saturated = r["cpu"] >= SERVER_SATURATED * r["server_cpus"]
    if client_saturated and server_saturated:
        return "both saturated"
    if client_saturated and r["cpu"] < SERVER_BUSY:
        return CLIENT_BOUND
    if server_saturated:
        return "server-bound"
    return ""


def load_dir(directory):
    """{short name: result} for the runs in `directory`."""
    results = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".report"):
            continue
        bench = entry[: -len(".report")]
        with open(os.path.join(directory, entry), errors="replace") as f:
            text = f.read()
        r = parse_h2load(text) or parse_ghz(text)
        if r is None:
            r = {"client": "?", "total": 0, "ok": 0, "failed": 0, "avg": "-", "req_s": 0.0}
            r.update({"90": "-", "95": "-", "99": "-"})
        r["cpu"], r["mem"] = parse_stats(os.path.join(directory, bench + ".stats"))
        r["client_cpu"], _ = parse_stats(os.path.join(directory, bench + ".client.stats"))
        r["per_cpu"] = r["req_s"] / (r["cpu"] / 100) if r["cpu"] else None
        params = read_params(directory, bench)
        r["server_cpus"], r["client_cpus"] = params["server_cpus"], params["client_cpus"]
        r["c"], r["s"] = params.get("connections", ""), params.get("streams", "")
        r["limit"] = limit(r)
        results[short_name(bench)] = r
    return results


def fmt_pct(v):
    return "-" if v is None else f"{v:.2f}%"


def fmt_int(v):
    return "-" if v is None else f"{v:,.0f}"


def fmt_per_cpu(r):
    """req/s per server CPU, flagged where the client bounded the run."""
    text = fmt_int(r["per_cpu"])
    if r["per_cpu"] is not None and r["limit"] == CLIENT_BOUND:
        text += f" ({CLIENT_BOUND})"
    return text


def limit_line(directory, bench):
    """One line on a run: both CPUs, and what limited it."""
    r = load_dir(directory).get(short_name(bench))
    if r is None:
        return "    no report"
    return (
        f"    server cpu {fmt_pct(r['cpu'])} (of {cpus(r['server_cpus'])}), "
        f"client cpu {fmt_pct(r['client_cpu'])} (of {cpus(r['client_cpus'])})"
        f"{': ' + r['limit'] if r['limit'] else ''}"
    )


def cpus(n):
    return f"{n} CPU" if n == 1 else f"{n} CPUs"


CSV_FIELDS = [
    "c", "s", "server", "client", "req_s", "ok", "failed", "avg_latency", "p99",
    "server_cpu_pct", "server_cpus", "client_cpu_pct", "client_cpus",
    "req_s_per_server_cpu", "limit", "state",
]


def write_csv(path, rows):
    """rows: (C, S, short name, result). One line per run; the per-CPU figure
    is left as measured, its `limit` column says whether to trust it."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for c, s, name, r in rows:
            w.writerow([
                c, s, name, r["client"], f"{r['req_s']:.1f}", r["ok"], r["failed"], r["avg"],
                r["99"],
                "" if r["cpu"] is None else f"{r['cpu']:.3f}", r["server_cpus"],
                "" if r["client_cpu"] is None else f"{r['client_cpu']:.3f}", r["client_cpus"],
                "" if r["per_cpu"] is None else f"{r['per_cpu']:.0f}", r["limit"],
                r.get("state", ""),
            ])


def table(directory):
    results = load_dir(directory)
    line = "-" * 137
    out = [line]

    def row(*c):
        out.append(
            f"| {str(c[0]).ljust(27)} |{str(c[1]).rjust(8)} |{str(c[2]).rjust(15)} |"
            f"{str(c[3]).rjust(15)} |{str(c[4]).rjust(15)} |{str(c[5]).rjust(15)} |"
            f"{str(c[6]).rjust(9)} |{str(c[7]).rjust(14)} |"
        )

    row("name", "req/s", "avg. latency", "90 % in", "95 % in", "99 % in", "avg. cpu", "avg. memory")
    out.append(line)
    ranked = sorted(results.items(), key=lambda kv: kv[1]["req_s"], reverse=True)
    for name, r in ranked:
        mem = "-" if r["mem"] is None else f"{r['mem']:.2f} MiB"
        row(name, round(r["req_s"]), r["avg"], r["90"], r["95"], r["99"], fmt_pct(r["cpu"]), mem)
    out.append(line)
    out.append("")
    out.append("| name | client | req/s per server CPU | client cpu | failed calls | limit |")
    out.append("|---|---|---:|---:|---:|---|")
    for name, r in ranked:
        extra = f" (grpc-status check: {r['grpc_status']})" if "grpc_status" in r else ""
        out.append(
            f"| {name} | {r['client']}{extra} | {fmt_per_cpu(r)} | "
            f"{fmt_pct(r['client_cpu'])} | {r['failed']} | {r['limit'] or '-'} |"
        )
    out.append("")
    out.append(limit_note(results.values()))
    return "\n".join(out)


def limit_note(runs):
    """The legend of the limit column, with the CPUs of these runs."""
    runs = list(runs)

    def counts(key):
        ns = sorted({r[key] for r in runs}) or [1]
        return f"{' or '.join(map(str, ns))} CPU{'' if ns == [1] else 's'}"

    return (
        f"limit: `{CLIENT_BOUND}`: the client used at least {CLIENT_SATURATED:g} % of the "
        f"{counts('client_cpus')} it can keep busy and the server under {SERVER_BUSY:g} % of "
        "one CPU; req/s then measures the client, and req/s per server CPU divides by a "
        f"small, noisy CPU time (marked `({CLIENT_BOUND})`). `server-bound`: the server used "
        f"at least {SERVER_SATURATED:g} % of its {counts('server_cpus')} and the client was "
        "not saturated. `both saturated`: both. `-`: neither (latency-bound, or in between)."
    )


def write_table_csv(directory):
    results = load_dir(directory)
    rows = []
    for name, r in sorted(results.items()):
        rows.append((r["c"], r["s"], name, r))
    write_csv(os.path.join(directory, "runs.csv"), rows)


# ----- sweep -----

GRID = [(1, [1, 10, 100, 1000]), (10, [10, 100, 1000, 10000]), (100, [100, 1000, 10000, 100000])]


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(v):
    return "-" if v is None else f"{v:.1f}×"


def load_sweep(directory):
    cells = {}
    for entry in os.listdir(directory):
        m = re.fullmatch(r"c(\d+)_s(\d+)", entry)
        if m and os.path.isdir(os.path.join(directory, entry)):
            cells[(int(m.group(1)), int(m.group(2)))] = load_dir(os.path.join(directory, entry))
    return cells


def judge(cells):
    """Marks the runs where the server failed rather than served: over twice
    as many failed calls as can be in flight when the client stops (S, which
    ghz counts as failed), or a server that stopped working (under 0.2% of a
    CPU while loaded)."""
    for (_, s), results in cells.items():
        for r in results.values():
            if r["failed"] > 2 * s + 10:
                r["state"] = "errors"
            elif r["cpu"] is None or r["cpu"] < 0.2:
                r["state"] = "stalled"
            else:
                r["state"] = "ok"


def cell_ratio(p, other, label):
    if other.get("state") != "ok":
        return f"{label} {other['state']}"
    text = f"{fmt_ratio(ratio(p['per_cpu'], other['per_cpu']))} {label}"
    if CLIENT_BOUND in (p["limit"], other["limit"]):
        text += f" ({CLIENT_BOUND})"
    return text


def sweep_tables(cells):
    judge(cells)
    servers = sorted({name for r in cells.values() for name in r})
    out = ["### Ratio of req/s per server CPU, by cell", ""]
    width = max(len(s) for _, s in GRID)
    out.append("| C | " + " | ".join(f"cell {i + 1}" for i in range(width)) + " |")
    out.append("|---|" + "---|" * width)
    for c, streams in GRID:
        row = []
        for s in streams:
            r = cells.get((c, s))
            if r is None:
                row.append(f"S={s}: not run")
                continue
            p = r.get(PAJAMAX)
            parts = []
            if p is None or p["state"] != "ok":
                parts.append(f"pajamax {p['state'] if p else 'not run'}")
            else:
                if TONIC in r:
                    parts.append(cell_ratio(p, r[TONIC], "tonic"))
                if ORIGINAL in r:
                    parts.append(cell_ratio(p, r[ORIGINAL], "original"))
            row.append(f"S={s}: " + (", ".join(parts) if parts else "-"))
        out.append(f"| {c} | " + " | ".join(row) + " |")
    out.append("")
    out.append(
        "pajamax's req/s per server CPU divided by the other server's, in the same cell; "
        "`errors`: that server failed over twice as many calls as were in flight when "
        "the client stopped; `stalled`: it stopped answering (under 0.2% of a CPU); "
        f"`({CLIENT_BOUND})`: either run was client-bound (see below), so the ratio rests "
        "on a server CPU time too small to trust."
    )
    out.append("")
    out.append("### Every run")
    out.append("")
    out.append(
        "| C | S | S/C | server | client | req/s | avg. latency | 99 % in | server cpu | "
        "req/s per server CPU | client cpu | avg. memory | failed | limit |"
    )
    out.append("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c, streams in GRID:
        for s in streams:
            for name in servers:
                r = cells.get((c, s), {}).get(name)
                if r is None:
                    continue
                mem = "-" if r["mem"] is None else f"{r['mem']:.1f} MiB"
                out.append(
                    f"| {c} | {s} | {s // c} | {LABELS.get(name, name)} | {r['client']} | "
                    f"{fmt_int(r['req_s'])} | {r['avg']} | {r['99']} | {fmt_pct(r['cpu'])} | "
                    f"{fmt_per_cpu(r)} | {fmt_pct(r['client_cpu'])} | {mem} | {r['failed']}"
                    f"{'' if r['state'] == 'ok' else ' (' + r['state'] + ')'} | "
                    f"{r['limit'] or '-'} |"
                )
    out.append("")
    out.append(limit_note([r for results in cells.values() for r in results.values()]))
    return "\n".join(out)


COLORS = {PAJAMAX: "#1f77b4", TONIC: "#d62728", ORIGINAL: "#2ca02c"}
DASHES = {1: "", 10: "6,4", 100: "2,3"}
MARKERS = {1: "circle", 10: "square", 100: "triangle"}


def sweep_svg(cells, title):
    w, h = 820, 480
    left, right, top, bottom = 100, 230, 40, 60
    pw, ph = w - left - right, h - top - bottom
    servers = sorted({name for r in cells.values() for name in r})
    points = {}
    for (c, s), r in cells.items():
        for name in servers:
            v = r.get(name, {}).get("per_cpu")
            if v and r[name].get("state") == "ok":
                hollow = r[name]["limit"] == CLIENT_BOUND
                points.setdefault((name, c), []).append((s / c, v, hollow))
    values = [v for pts in points.values() for _, v, _ in pts]
    if not values:
        return None
    ymin = 10 ** math.floor(math.log10(min(values)))
    ymax = 10 ** math.ceil(math.log10(max(values)))
    if ymax <= ymin:
        ymax = ymin * 10
    xmin, xmax = 1, 1000

    def x(v):
        return left + (math.log10(v) - math.log10(xmin)) / (math.log10(xmax) - math.log10(xmin)) * pw

    def y(v):
        return top + ph - (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin)) * ph

    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
    ]
    for e in range(int(math.log10(ymin)), int(math.log10(ymax)) + 1):
        for k in (1, 2, 5) if e < math.log10(ymax) else (1,):
            v = k * 10**e
            if v < ymin or v > ymax:
                continue
            stroke = "#ccc" if k == 1 else "#eee"
            svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{stroke}"/>')
            if k in (1, 2, 5):
                label = f"{v:,.0f}" if v >= 1 else f"{v}"
                svg.append(
                    f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{label}</text>'
                )
    for v in (1, 10, 100, 1000):
        svg.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top}" y2="{top + ph}" stroke="#ccc"/>')
        svg.append(f'<text x="{x(v):.1f}" y="{top + ph + 18}" text-anchor="middle">{v}</text>')
    svg.append(
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>'
    )
    svg.append(
        f'<text x="{left + pw / 2}" y="{h - 18}" text-anchor="middle">'
        "streams per connection (S/C, log scale)</text>"
    )
    svg.append(
        f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
        "req/s per server CPU (log scale)</text>"
    )

    def marker(kind, px, py, color, hollow=False):
        # Client-bound points are drawn hollow.
        paint = f'fill="white" stroke="{color}" stroke-width="1.5"' if hollow else f'fill="{color}"'
        if kind == "circle":
            return f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" {paint}/>'
        if kind == "square":
            return f'<rect x="{px - 3.5:.1f}" y="{py - 3.5:.1f}" width="7" height="7" {paint}/>'
        return (
            f'<polygon points="{px:.1f},{py - 4.5:.1f} {px - 4:.1f},{py + 3.5:.1f} '
            f'{px + 4:.1f},{py + 3.5:.1f}" {paint}/>'
        )

    legend_y = top + 10
    for (name, c), pts in sorted(points.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        pts.sort()
        color = COLORS.get(name, "#555")
        path = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py, _ in pts)
        dash = f' stroke-dasharray="{DASHES[c]}"' if DASHES.get(c) else ""
        svg.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for px, py, hollow in pts:
            svg.append(marker(MARKERS.get(c, "circle"), x(px), y(py), color, hollow))
        lx = left + pw + 15
        svg.append(
            f'<line x1="{lx}" x2="{lx + 30}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
        )
        svg.append(marker(MARKERS.get(c, "circle"), lx + 15, legend_y, color))
        svg.append(f'<text x="{lx + 38}" y="{legend_y + 4}">{LABELS.get(name, name)}, C={c}</text>')
        legend_y += 20
    if any(hollow for pts in points.values() for _, _, hollow in pts):
        lx = left + pw + 15
        svg.append(marker("circle", lx + 15, legend_y, "#555", True))
        svg.append(f'<text x="{lx + 38}" y="{legend_y + 4}">hollow: {CLIENT_BOUND}</text>')
    svg.append("</svg>")
    return "\n".join(svg) + "\n"


def sweep(directory):
    cells = load_sweep(directory)
    if not cells:
        raise SystemExit(f"no c*_s* cells in {directory}")
    judge(cells)
    client = next(iter(next(iter(cells.values())).values()))["client"]
    text = sweep_tables(cells)
    with open(os.path.join(directory, "sweep.md"), "w") as f:
        f.write(text + "\n")
    rows = [
        (c, s, name, r)
        for (c, s), results in sorted(cells.items())
        for name, r in sorted(results.items())
    ]
    write_csv(os.path.join(directory, "runs.csv"), rows)
    svg = sweep_svg(cells, f"complex_proto, {client}: req/s per server CPU")
    if svg:
        with open(os.path.join(directory, "sweep.svg"), "w") as f:
            f.write(svg)
    return text


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        print(limit_line(sys.argv[2], sys.argv[3]))
        return
    if len(sys.argv) != 3 or sys.argv[1] not in ("table", "sweep"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "table":
        print(table(sys.argv[2]))
        write_table_csv(sys.argv[2])
    else:
        print(sweep(sys.argv[2]))


if __name__ == "__main__":
    main()
