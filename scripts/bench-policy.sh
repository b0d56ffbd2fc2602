#!/usr/bin/env bash
# bench-policy.sh - the Pi0.5 policy's speed on the cuda backend in one call
# (issues 20, 21; docs/policies.md "Speed (CUDA)"): writes a random-weight
# Pi0.5 at the real shape (frt gen-model --shape pi05, bf16, ~6.5 GB), then
# `frt bench policy --cfg-beta 1.5` for 2 and 3 cameras at a 200-token prompt:
# baseline, serial CFG and fused CFG rows (p50, p99, denoise-only p50, floor,
# graph nodes), first with cuBLASLt's heuristic GEMM choice, then with
# `--autotune N` (the choice saved to gemm_tune.txt beside the weights and
# reused by later runs). Each step runs under `timeout`; the script goes on
# past failures.
#
# Environment: FRT (default gpu-bundle/frt.sh, else build/frt), MODEL (default
# /tmp/frt-pi05; written when it has no config.json), TOKENS (200), REPEATS
# (100), WARMUP (5), AUTOTUNE (16; 0 skips the autotuned run), BACKEND (cuda),
# STEP_TIMEOUT seconds (300). Writes to $OUT (default ./bench-policy-out):
# heuristic.txt / .json, autotune.txt / .json, gemm_tune.txt and summary.txt.
# Smoke test without a GPU (tiny shape):
#   MODEL=/tmp/pi05t SHAPE=pi05-tiny BACKEND=cpu REPEATS=2 WARMUP=1 TOKENS=9 AUTOTUNE=0 bash scripts/bench-policy.sh
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FRT=${FRT:-}
if [ -z "$FRT" ]; then
    if [ -x "$ROOT/gpu-bundle/frt.sh" ]; then FRT="$ROOT/gpu-bundle/frt.sh"; else FRT="$ROOT/build/frt"; fi
fi
MODEL=${MODEL:-/tmp/frt-pi05}
SHAPE=${SHAPE:-pi05}
TOKENS=${TOKENS:-200}
REPEATS=${REPEATS:-100}
WARMUP=${WARMUP:-5}
AUTOTUNE=${AUTOTUNE:-16}
BACKEND=${BACKEND:-cuda}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
out=${OUT:-$PWD/bench-policy-out}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
status=0
if [ ! -f "$MODEL/config.json" ]; then
    echo "== gen-model $SHAPE -> $MODEL" | tee -a "$summary"
    timeout "$STEP_TIMEOUT" "$FRT" gen-model --shape "$SHAPE" --out "$MODEL" --no-fsync -q >>"$summary" 2>&1 ||
        { echo "FAILED: gen-model" | tee -a "$summary"; exit 1; }
fi
run() { # run NAME [extra bench options...]
    local name="$1"
    shift
    echo "== $name ($(date -u '+%H:%M:%S'))" | tee -a "$summary"
    timeout "$STEP_TIMEOUT" "$FRT" bench policy -m "$MODEL" --backend "$BACKEND" --tokens "$TOKENS" --cfg-beta 1.5 \
        --repeats "$REPEATS" --warmup "$WARMUP" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.err"
    local rc=$?
    [ $rc -eq 0 ] || { echo "FAILED ($rc): see $name.err" | tee -a "$summary"; status=1; }
    cat "$out/$name.txt" | tee -a "$summary"
}
run heuristic
if [ "$AUTOTUNE" -gt 0 ]; then
    run autotune --autotune "$AUTOTUNE" --tune-file "$out/gemm_tune.txt"
fi
exit $status
