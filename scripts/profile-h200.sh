#!/usr/bin/env bash
# profile-h200.sh [PHASES] - per-kernel time of the model's phases on the GPU
# machine, with Nsight Compute (ncu, one metric: gpu__time_duration.sum).
#
# PHASES: a comma list of cold, decode, append (default all three). Each phase
# is one `frt bench` run on $SHAPE (default qwen3.5-9b, random weights) at
# prefix $PREFIX (default 8192) with FRT_PROFILE=PHASE, so ncu
# (--profile-from-start off) sees only that phase: the last cold prefill of
# P + 64 tokens, the decode steps after it ($DECODE, default 4), or the last
# capsule restore + 64-token append. Writes to $OUT (default ./profile-out):
# PHASE.csv (the raw ncu log), PHASE.txt (scripts/ncu_summary.py's table) and
# PHASE.log (the bench's output). Kernels run serialised under ncu, so the
# sums are kernel time without launch gaps; clocks and caches are left alone
# (--clock-control none --cache-control none). $BENCH_ARGS (default empty)
# goes to the bench as extra options, e.g. BENCH_ARGS="--dtype fp8".
set -u
PHASES=${1:-cold,decode,append}
SHAPE=${SHAPE:-qwen3.5-9b}
PREFIX=${PREFIX:-8192}
DECODE=${DECODE:-4}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$HERE/profile-out}
FRT=${FRT:-$HERE/gpu-bundle/frt.sh}
NCU=${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
[ -x "$NCU" ] || { echo "profile-h200: ncu not found" >&2; exit 1; }
mkdir -p "$OUT"
for ph in ${PHASES//,/ }; do
    echo "profile-h200: $ph (prefix $PREFIX, $SHAPE)" >&2
    FRT_PROFILE=$ph timeout -k 10 "${PHASE_TIMEOUT:-240}" "$NCU" --profile-from-start off \
        --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
        --log-file "$OUT/$ph.csv" "$FRT" bench --shape "$SHAPE" --random-weights --backend cuda \
        --prefixes "$PREFIX" --repeats 1 --decode-tokens "$DECODE" --no-tiers ${BENCH_ARGS:-} >"$OUT/$ph.log" 2>&1
    echo "profile-h200: $ph: exit $?" >&2
    python3 "$HERE/scripts/ncu_summary.py" "$OUT/$ph.csv" --top 30 >"$OUT/$ph.txt" 2>&1
    cat "$OUT/$ph.txt"
done
