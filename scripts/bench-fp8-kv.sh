#!/usr/bin/env bash
# bench-fp8-kv.sh - the FP8 KV cache against the default (bf16 on cuda) in
# one call on one machine (docs/fp8.md): frt bench twice per shape, the
# same weights seed and token ids, --kv-dtype default then fp8; each run
# prints the KV bytes per token of context next to the bf16 figure, cold
# TTFT, capsule size / restore / TTFT and decode ms/token against their
# floors. Each run is under `timeout` and the script goes on past failures.
#
# Environment: FRT (default gpu-bundle/frt.sh, else build/frt), SHAPES
# (default llama3.1-8b), PREFIXES (default 2048,8192), BACKEND (default
# cuda), REPEATS (default 3), STEP_TIMEOUT seconds (default 240). Writes to
# $OUT (default ./bench-fp8-kv-out): SHAPE-KV.txt and SHAPE-KV.json per run
# and summary.txt (the KV, decode and capsule lines of every run).
# FLAG (default --kv-dtype) is the option that takes default then fp8
# (scripts/bench-fp8-weights.sh runs this with --dtype).
# Smoke test without a GPU:
#   SHAPES=tiny-dense BACKEND=cpu PREFIXES=256 FRT=build/frt bash scripts/bench-fp8-kv.sh
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
STEP_TIMEOUT=${STEP_TIMEOUT:-240}
FLAG=${FLAG:---kv-dtype}
out=${OUT:-$PWD/bench-fp8-kv-out}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
status=0
for shape in ${SHAPES//,/ }; do
    for kv in default fp8; do
        name="$shape-$kv"
        echo "== $name ($(date -u '+%H:%M:%S'))" | tee -a "$summary"
        timeout "$STEP_TIMEOUT" "$FRT" bench --shape "$shape" --random-weights --backend "$BACKEND" "$FLAG" "$kv" \
            --prefixes "$PREFIXES" --repeats "$REPEATS" --decode-tokens 16 --no-sampling-costs \
            --json "$out/$name.json" >"$out/$name.txt" 2>"$out/$name.err"
        rc=$?
        [ $rc -eq 0 ] || { echo "FAILED ($rc): see $name.err" | tee -a "$summary"; status=1; }
        grep -E "^ *prefix|^ *[0-9]+ \||^KV cache|^weights|^floors|FP8 GEMM" "$out/$name.txt" | tee -a "$summary"
    done
done
exit $status
