#!/usr/bin/env bash
# Copies the benches into a grpc_bench checkout, so that grpc_bench's own
# scripts build and run them there (on a host with Docker):
#
#   grpc_bench_integration/copy_to_grpc_bench.sh GRPC_BENCH_DIR [BENCH ...]
#   cd GRPC_BENCH_DIR
#   ./build.sh rust_pajamax_bench rust_tonic_bench rust_pajamax_upstream_bench
#   ./bench.sh rust_pajamax_bench rust_tonic_bench rust_pajamax_upstream_bench
#
# BENCH defaults to every *_bench folder here. A bench already in the
# checkout under the same name is replaced.
#
# rust_pajamax_bench depends on this repository's pajamax and pajamax-build
# by path. They are vendored into GRPC_BENCH_DIR/rust_pajamax_bench/vendor/
# with the workspace manifest they inherit from (its member list cut down to
# the two crates); its Dockerfile puts them back where the paths point.

set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
	sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
DEST="$(cd "$1" && pwd)"
shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"

BENCHES=("$@")
if [[ ${#BENCHES[@]} -eq 0 ]]; then
	for dir in "$HERE"/*_bench; do BENCHES+=("$(basename "$dir")"); done
fi
if [[ ! -f "$DEST/bench.sh" || ! -f "$DEST/build.sh" || ! -d "$DEST/scenarios" ]]; then
	echo "warning: $DEST does not look like a grpc_bench checkout (bench.sh, build.sh, scenarios/)" >&2
fi

# copy_tree FROM TO: a source tree without build output.
copy_tree() {
	mkdir -p "$2"
	tar -C "$1" --exclude=./target --exclude=./vendor --exclude=.git -cf - . | tar -C "$2" -xf -
}

for bench in "${BENCHES[@]}"; do
	bench="${bench%/}"
	[[ -f "$HERE/$bench/Dockerfile" ]] || {
		echo "no bench named $bench in $HERE" >&2
		exit 2
	}
	echo "==> $bench -> $DEST/$bench"
	rm -rf "${DEST:?}/$bench"
	copy_tree "$HERE/$bench" "$DEST/$bench"
	if [[ $bench == rust_pajamax_bench ]]; then
		vendor="$DEST/$bench/vendor"
		echo "    vendoring pajamax and pajamax-build into $bench/vendor"
		copy_tree "$REPO/pajamax" "$vendor/pajamax"
		copy_tree "$REPO/pajamax-build" "$vendor/pajamax-build"
		python3 - "$REPO/Cargo.toml" "$vendor/Cargo.toml" <<'EOF'
import re
import sys

text = open(sys.argv[1]).read()
text, n = re.subn(
    r"(?ms)^members\s*=\s*\[.*?\]",
    'members = ["pajamax", "pajamax-build"]',
    text,
    count=1,
)
if n != 1:
    raise SystemExit("no workspace members list in " + sys.argv[1])
open(sys.argv[2], "w").write(text)
EOF
	fi
done

cat <<EOF
Done. In $DEST:
  ./build.sh ${BENCHES[*]}
  ./bench.sh ${BENCHES[*]}
EOF
