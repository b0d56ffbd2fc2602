#!/usr/bin/env bash
# bench-fp8-weights.sh - FP8 E4M3 weights against the bf16 ones in one call
# on one machine (docs/fp8.md "FP8 weights"): scripts/bench-fp8-kv.sh with
# FLAG=--dtype, so frt bench runs twice per shape, the same weights seed
# and token ids, --dtype default then fp8 (quantized at load, per output
# channel). The fp8 run's decode floor counts 1 byte a Linear weight + a
# 4-byte scale per channel (the bf16 lm_head at 2) and it prints the weight
# bytes a decode step streams ("weights FP8 E4M3 ..." line, in summary.txt).
#
# Environment: as bench-fp8-kv.sh (FRT, SHAPES default llama3.1-8b,
# PREFIXES, BACKEND, REPEATS), STEP_TIMEOUT default 300 (the quantize-at-load
# of 8B weights runs on the host); writes $OUT (default
# ./bench-fp8-weights-out): SHAPE-default|fp8.txt / .json / .err and summary.txt.
# Smoke test without a GPU:
#   SHAPES=tiny-dense BACKEND=cpu PREFIXES=256 FRT=build/frt bash scripts/bench-fp8-weights.sh
OUT=${OUT:-$PWD/bench-fp8-weights-out} STEP_TIMEOUT=${STEP_TIMEOUT:-300} FLAG=--dtype \
    exec bash "$(dirname "${BASH_SOURCE[0]}")/bench-fp8-kv.sh"
