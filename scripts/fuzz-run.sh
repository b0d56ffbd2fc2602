#!/usr/bin/env bash
# Runs every libFuzzer target built by `make fuzz` for SECONDS each (one after
# the other, one process each) and prints, per target, the executions, the
# rate, the coverage libFuzzer reached (cov: covered edges; ft: features) and
# the corpus size, then whether it found a crash, a leak or a timeout.
#
# Usage: scripts/fuzz-run.sh [SECONDS] [BUILD_DIR]   (defaults: 60, build-fuzz)
# FUZZ_JOBS=N runs N targets at a time (default 1: one after the other); on a
# machine with at least as many cores as targets, FUZZ_JOBS=0 runs them all
# at once, so every target gets SECONDS of a core of its own.
#
# Each target starts from its seed corpus fuzz/corpus/NAME/ (read only) and
# from BUILD_DIR/fuzz-work/NAME/, where the new inputs it finds are kept (so
# a later run goes on from there; the seeds in the repository stay as they
# are). A crashing input is written to BUILD_DIR/fuzz-artifacts/ and the
# libFuzzer log of every target to BUILD_DIR/fuzz-logs/NAME.log.
# Exits 0 when no target failed, 1 otherwise (2: usage, or nothing built).
set -u

SECONDS_PER="${1:-60}"
BUILD="${2:-build-fuzz}"
case "$SECONDS_PER" in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS] [BUILD_DIR]" >&2; exit 2 ;;
esac
SRC="$(cd "$(dirname "$0")/.." && pwd)"
shopt -s nullglob
targets=("$BUILD"/fuzz/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
    echo "fuzz-run: no fuzz targets in $BUILD/fuzz (run \`make fuzz\` first)" >&2
    exit 2
fi
mkdir -p "$BUILD/fuzz-work" "$BUILD/fuzz-artifacts" "$BUILD/fuzz-logs"

# libFuzzer's own limits: 25 s per input, 2 GiB RSS; allocation failures are
# returned to the code (as under `make asan`), not reported.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1}"

JOBS="${FUZZ_JOBS:-1}"
case "$JOBS" in
    '' | *[!0-9]*) echo "fuzz-run: FUZZ_JOBS must be a number" >&2; exit 2 ;;
esac
[ "$JOBS" -eq 0 ] && JOBS=${#targets[@]}

# fuzz_one BIN: one libFuzzer process; its exit status lands in NAME.rc.
fuzz_one() {
    local bin="$1" name work seeds=()
    name="$(basename "$bin")"
    name="${name#fuzz_}"
    work="$BUILD/fuzz-work/$name"
    mkdir -p "$work"
    [ -d "$SRC/fuzz/corpus/$name" ] && seeds=("$SRC/fuzz/corpus/$name")
    "$bin" -max_total_time="$SECONDS_PER" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$BUILD/fuzz-artifacts/$name-" "$work" "${seeds[@]}" >"$BUILD/fuzz-logs/$name.log" 2>&1
    echo $? >"$BUILD/fuzz-logs/$name.rc"
}

names=()
running=0
for bin in "${targets[@]}"; do
    [ -x "$bin" ] || continue
    name="$(basename "$bin")"
    names+=("${name#fuzz_}")
    rm -f "$BUILD/fuzz-logs/${name#fuzz_}.rc"
    fuzz_one "$bin" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

printf '%-16s %12s %10s %8s %8s %8s  %s\n' target executions exec/s cov ft corpus result
failed=0
for name in "${names[@]}"; do
    log="$BUILD/fuzz-logs/$name.log"
    rc="$(cat "$BUILD/fuzz-logs/$name.rc" 2>/dev/null || echo 255)"
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    # the last status line: "#N  DONE  cov: C ft: F corp: U/S ..." (or pulse/NEW/REDUCE)
    last="$(grep -E '^#[0-9]+' "$log" | grep -E 'cov: [0-9]+' | tail -1)"
    cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
    ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
    corp="$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")"
    rate="$(sed -n 's/.* exec\/s: \([0-9]*\).*/\1/p' <<<"$last")"
    if [ "$rc" -eq 0 ]; then
        result=ok
    else
        failed=1
        result="FAIL rc $rc: $(grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error|SUMMARY' "$log" | cut -c1-120) (log $log)"
    fi
    printf '%-16s %12s %10s %8s %8s %8s  %s\n' "$name" "${execs:--}" "${rate:--}" "${cov:--}" \
        "${ft:--}" "${corp:--}" "$result"
done
exit $failed
