#!/usr/bin/env bash
# bench-fp8-weights.sh - FP8 E4M3 weights against the bf16 ones in one call
# on one machine (docs/fp8.md "FP8 weights"): frt bench twice per shape, the
# same weights seed and token ids, --dtype default then fp8 (quantized at
# load, per output channel); each run prints decode ms/token against its
# floor (the FP8 run counts 1 byte a Linear weight + a 4-byte scale per
# channel, the bf16 lm_head at 2) and the weight bytes a decode step
# streams, cold TTFT, capsule figures. Each run is under `timeout` and the
# script goes on past failures.
#
# Environment: FRT (default gpu-bundle/frt.sh, else build/frt), SHAPES
# (default llama3.1-8b), PREFIXES (default 2048,8192), BACKEND (default
# cuda), REPEATS (default 3), STEP_TIMEOUT seconds (default 300: the
# quantize-at-load of 8B weights runs on the host). Writes to $OUT (default
# ./bench-fp8-weights-out): SHAPE-DTYPE.txt / .json / .err per run and
# summary.txt (the table, weight and KV lines of every run).
# Smoke test without a GPU:
#   SHAPES=tiny-dense BACKEND=cpu PREFIXES=256 FRT=build/frt bash scripts/bench-fp8-weights.sh
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FRT=${FRT:-}
if [ -z "$FRT" ]; then
    if [ -x "$ROOT/gpu-bundle/frt.sh" ]; then FRT="$ROOT/gpu-bundle/frt.sh"; else FRT="$ROOT/build/frt"; fi
fi
SHAPES=${SHAPES:-llama3.1-8b}
PREFIXES=${PREFIXES:-2048,8192}
BACKEND=${BACKEND:-cuda}
REPEATS=${REPEATS:-3}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
out=${OUT:-$PWD/bench-fp8-weights-out}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
status=0
for shape in ${SHAPES//,/ }; do
    for dt in default fp8; do
        name="$shape-$dt"
        echo "== $name ($(date -u '+%H:%M:%S'))" | tee -a "$summary"
        timeout "$STEP_TIMEOUT" "$FRT" bench --shape "$shape" --random-weights --backend "$BACKEND" --dtype "$dt" \
            --prefixes "$PREFIXES" --repeats "$REPEATS" --decode-tokens 16 --no-sampling-costs --no-tiers \
            --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.err"
        rc=$?
        [ $rc -eq 0 ] || { echo "FAILED ($rc): see $name.err" | tee -a "$summary"; status=1; }
        grep -E "^ *prefix|^ *[0-9]+ \||^KV cache|^weights" "$out/$name.txt" | tee -a "$summary"
    done
done
exit $status
