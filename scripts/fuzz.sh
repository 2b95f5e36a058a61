#!/usr/bin/env bash
# Runs every fuzz target under fuzz/ for FUZZ_SECONDS seconds each (default
# 60), starting from the seed corpus in fuzz/corpus/<target>/.
#
# The fuzzer runs on a copy of the seeds in fuzz/scratch/<target>/ (git-
# ignored), so the inputs it generates never land in the repository. Crash
# inputs go to fuzz/scratch/<target>/artifacts/; for each one the script
# prints its path and its bytes in hex, and exits non-zero once all targets
# have run.
#
# Needs a nightly toolchain (`cargo +nightly`); installs the pinned
# cargo-fuzz when it is missing.
#
# Environment:
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_TARGETS  space-separated targets to run (default: all of them)
#   FUZZ_ARGS     extra libFuzzer flags, e.g. "-max_len=8192"
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
ALL_TARGETS="frame_parser hpack_decoder server_connection"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: a nightly toolchain is needed: rustup toolchain install nightly" >&2
    exit 1
fi

installed=$(cargo +nightly fuzz --version 2>/dev/null || true)
if [[ "$installed" != *" $CARGO_FUZZ_VERSION"* ]]; then
    echo "fuzz.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION (found: ${installed:-none})"
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

started=$(date +%s)
echo "fuzz.sh: building the fuzz targets"
if ! cargo +nightly fuzz build; then
    # A build killed by its machine (a tool's SIGBUS on a file that could
    # not be written, as when the disk fills) is tried once more from a
    # clean fuzz/target (where it builds unless CARGO_TARGET_DIR says
    # otherwise; a directory of one's own choosing is left alone); a second
    # failure stops the script.
    echo "fuzz.sh: the build failed; disk space where it builds:"
    df -h "$ROOT/fuzz" || true
    echo "fuzz.sh: building again from a clean fuzz/target"
    rm -rf "$ROOT/fuzz/target"
    cargo +nightly fuzz build
fi

SCRATCH="$ROOT/fuzz/scratch"
failed=()
summary=()
for target in $TARGETS; do
    dir="$SCRATCH/$target"
    rm -rf "$dir"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp "fuzz/corpus/$target/"* "$dir/corpus/"
    log="$dir/log.txt"
    echo
    echo "fuzz.sh: $target for ${SECONDS_PER_TARGET}s (log: ${log#"$ROOT"/})"
    dict=()
    if [[ -f "fuzz/dict/$target.dict" ]]; then
        dict=("-dict=fuzz/dict/$target.dict")
    fi
    status=0
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags.
    cargo +nightly fuzz run "$target" "$dir/corpus" -- \
        -max_total_time="$SECONDS_PER_TARGET" \
        -rss_limit_mb=2048 \
        -timeout=30 \
        -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" \
        "${dict[@]}" \
        ${FUZZ_ARGS:-} >"$log" 2>&1 || status=$?

    # The last status line and the final stats.
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$last")
    summary+=("$(printf '%-18s runs %-9s exec/s %-7s cov %-6s ft %-6s corpus %s' \
        "$target" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")")
    if [[ -n "$last" ]]; then
        echo "fuzz.sh: $last"
    fi

    crashes=$(find "$dir/artifacts" -type f 2>/dev/null | sort)
    if [[ $status -ne 0 || -n "$crashes" ]]; then
        failed+=("$target")
        echo "fuzz.sh: $target FAILED (exit status $status):"
        # The panic message, or the sanitizer's or libFuzzer's verdict.
        grep -A1 -E 'panicked at' "$log" | head -n 20 || true
        grep -E '^==[0-9]+== ?ERROR|^SUMMARY:' "$log" | head -n 5 || true
        echo "fuzz.sh: full log: $log"
        for crash in $crashes; do
            echo
            echo "fuzz.sh: crashing input: $crash"
            od -An -tx1 -v "$crash" | tr -s ' \n' ' ' | fold -w 96
            echo
            echo "fuzz.sh: reproduce with: cargo +nightly fuzz run $target $crash"
        done
    fi
done

echo
echo "fuzz.sh: summary (${SECONDS_PER_TARGET}s per target, $(($(date +%s) - started))s in all)"
for line in "${summary[@]}"; do
    echo "  $line"
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: crashes in: ${failed[*]}"
    exit 1
fi
echo "fuzz.sh: no crashes"
