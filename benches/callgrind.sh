#!/usr/bin/env bash
# Instructions per complex_proto request through the pipeline of
# benches/benches/pipeline.rs, counted by callgrind.
#
# Usage: benches/callgrind.sh [A B [N]]   (defaults: A=20, B=220, N=100)
#
# Builds src/bin/pipeline_probe.rs (release) and runs it under
# `valgrind --tool=callgrind` for A and for B rounds of N requests. Only
# `pajamax_benches::pipeline::serve` is counted (each round's new
# connection, handshake and warm-up calls are not), and the difference
# between the two runs, divided by (B - A) * N, cancels what does not grow
# with the rounds. The whole program is counted too, the same way, for the
# figure that includes a new, warmed-up connection per round. Then the
# functions that the B run spent its counted instructions in, by self cost.
#
# Does nothing (and succeeds) where valgrind is missing.

set -euo pipefail

A=${1:-20}
B=${2:-220}
N=${3:-100}
if ! command -v valgrind >/dev/null; then
	echo "valgrind not found: no instruction counts (apt-get install valgrind)"
	exit 0
fi
((B > A)) || {
	echo "B must be larger than A" >&2
	exit 2
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# Line tables give callgrind_annotate file names; the code is the same.
CARGO_PROFILE_RELEASE_DEBUG=line-tables-only \
	cargo build --quiet --release --manifest-path "$ROOT/Cargo.toml" \
	-p pajamax-benches --bin pipeline_probe
PROBE="$CARGO_TARGET_DIR/release/pipeline_probe"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

# count ROUNDS NAME [VALGRIND OPTIONS]: instructions counted.
count() {
	local rounds=$1 name=$2
	shift 2
	valgrind --tool=callgrind --callgrind-out-file="$OUT/$name" "$@" \
		"$PROBE" "$rounds" "$N" >/dev/null 2>"$OUT/$name.log"
	awk '/^(summary|totals):/ { print $2; exit }' "$OUT/$name"
}

serve_a=$(count "$A" serve_a --toggle-collect='*pipeline::serve*')
serve_b=$(count "$B" serve_b --toggle-collect='*pipeline::serve*')
all_a=$(count "$A" all_a)
all_b=$(count "$B" all_b)
per() { python3 -c "import sys; a, b, n = map(int, sys.argv[1:]); print(f'{n and (b - a) / n:,.0f}')" "$1" "$2" "$(((B - A) * N))"; }

echo "pipeline_probe: $A and $B rounds of $N complex_proto requests"
echo "instructions per request, recv to answers (serve):        $(per "$serve_a" "$serve_b")"
echo "instructions per request, with a new connection per round: $(per "$all_a" "$all_b") (its warm-up calls included)"
echo
echo "where serve's instructions go ($B rounds, self cost by function, per request):"
callgrind_annotate --auto=no --threshold=100 "$OUT/serve_b" 2>/dev/null | python3 -c '
import re, sys
requests = int(sys.argv[1])
totals = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[.*\])?$", line)
    if not m or m.group(2) == "PROGRAM TOTALS" or m.group(2).endswith("x)"):
        continue
    # "file:function": the file is where inlined code came from; sum by function.
    function = m.group(2).split(":", 1)[1] if ":" in m.group(2).split("(")[0] else m.group(2)
    totals[function] = totals.get(function, 0) + int(m.group(1).replace(",", ""))
whole = sum(totals.values())
for function, ir in sorted(totals.items(), key=lambda kv: -kv[1])[:20]:
    print(f"{ir / requests:8,.0f}  {100 * ir / whole:5.1f}%  {function}")
' "$((B * N))"
