#!/usr/bin/env bash
# gpu-test.sh [BUNDLE_DIR] [--build] [--all] [--bench] [-R REGEX]
#
# Runs frt's GPU tests on a GPU machine and prints a summary (PASS / FAIL /
# SKIP per test, then totals); exits non-zero when a test or the benchmark
# failed.
#
#   BUNDLE_DIR  a folder made by scripts/gpu-bundle.sh (make gpu-bundle):
#               runs its run-tests.sh. Default: ./gpu-bundle when it exists.
#   --build     build from source instead (cmake -DFRT_CUDA=ON, then
#               ctest -L gpu); needs the build dependencies on the machine.
#   --all       every test, not only those labelled gpu.
#   --bench     also run `frt bench exec --backend cuda`, writing
#               bench-exec.txt and bench-exec.json.
#   -R REGEX    only tests whose name matches.
#
# Output (the summary, test logs, nvidia-smi, benchmark results) goes to $OUT
# when it is set (the device tool brings that folder back), else to
# ./gpu-test-out.
#
# The lead's command on the device machine, from the repository root:
#   make gpu-bundle                      # here, before: builds and bundles
#   tar xzf gpu-bundle.tgz && bash scripts/gpu-test.sh gpu-bundle --bench    (carry: gpu-bundle.tgz)
set -uo pipefail

bundle="" build=0 all=0 bench=0 regex=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=1 ;;
    --all) all=1 ;;
    --bench) bench=1 ;;
    -R) regex=$2; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "gpu-test: unknown option $1" >&2; exit 2 ;;
    *) bundle=$1 ;;
    esac
    shift
done
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$PWD/gpu-test-out}
mkdir -p "$out"
summary="$out/gpu-test-summary.txt"
: >"$summary"
log() { echo "$@" | tee -a "$summary"; }

log "gpu-test: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 |
        sed 's/^/gpu: /' | tee -a "$summary"
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
else
    log "gpu: nvidia-smi not found"
fi

status=0
frt=""
if [ $build -eq 1 ]; then
    bdir="$ROOT/build-gpu"
    log "gpu-test: building $ROOT into $bdir"
    if ! cmake -S "$ROOT" -B "$bdir" -DFRT_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 ||
        ! cmake --build "$bdir" -j "$(nproc)" >>"$out/cmake.log" 2>&1; then
        tail -n 40 "$out/cmake.log"
        log "gpu-test: build FAILED (see cmake.log)"
        exit 1
    fi
    args=(--output-on-failure --timeout 1500)
    [ $all -eq 1 ] || args+=(-L gpu)
    [ -n "$regex" ] && args+=(-R "$regex")
    (cd "$bdir" && ctest "${args[@]}") 2>&1 | tee "$out/ctest.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    grep -E '^ *[0-9]+/[0-9]+ Test' "$out/ctest.log" |
        sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+).*$/\3  \1/' >>"$summary"
    grep -E 'tests passed|tests failed' "$out/ctest.log" | tee -a "$summary" >/dev/null
    frt="$bdir/frt"
else
    [ -n "$bundle" ] || bundle="$PWD/gpu-bundle"
    [ -d "$bundle" ] || bundle="$ROOT/gpu-bundle"
    if [ ! -x "$bundle/run-tests.sh" ]; then
        log "gpu-test: no bundle at $bundle (make gpu-bundle, carry it), and --build not given"
        exit 2
    fi
    bundle=$(cd "$bundle" && pwd)
    log "gpu-test: bundle $bundle"
    args=(--logs "$out/test-logs")
    [ $all -eq 1 ] || args+=(-L gpu)
    [ -n "$regex" ] && args+=(-R "$regex")
    "$bundle/run-tests.sh" "${args[@]}" 2>&1 | tee -a "$summary"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    frt="$bundle/frt.sh"
fi

if [ $bench -eq 1 ]; then
    log "gpu-test: frt bench exec --backend cuda"
    if "$frt" bench exec --backend cuda --json "$out/bench-exec.json" 2>&1 | tee "$out/bench-exec.txt"; then
        log "gpu-test: bench exec ok (bench-exec.txt, bench-exec.json)"
    else
        log "gpu-test: bench exec FAILED"
        status=1
    fi
    "$frt" selfcheck 2>&1 | tee "$out/selfcheck.txt" | tail -n 1 | tee -a "$summary"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi

log "gpu-test: $([ $status -eq 0 ] && echo ok || echo FAILED) (output in $out)"
exit $status
