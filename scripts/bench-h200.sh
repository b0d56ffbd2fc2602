#!/usr/bin/env bash
# bench-h200.sh [--budget SEC] [--no-gen-model] [--no-hf] [--no-27b] - the
# model benchmark of issues 8 and 9 on the GPU machine, in one call.
#
# Runs, each step under `timeout` and continuing past failures, within a
# total of --budget seconds (default 500):
#   1. frt bench --no-run: the token ids and config.json of qwen3.5-9b for
#      the transformers baseline;
#   2. frt bench on qwen3.5-9b (random weights, cuda): prefixes 2048, 8192,
#      32768 x 5 repeats, then the prefill-chunk sweep C = 256..2048 at 8192
#      and 32768 (3 repeats) in the same process (one weight build);
#   3. bench/hf_baseline.py on the same shape and ids (2048, 8192, and 32768
#      when its budget allows);
#   4. bench/compare: frt vs transformers;
#   5. frt bench on qwen3.5-27b, prefix 8192, 3 repeats;
#   6. the time of `frt gen-model --shape qwen3.5-9b` to disk (issue 3 asks
#      for under a minute), unless --no-gen-model.
# The frt binary: $FRT, else gpu-bundle/frt.sh, else build/frt. Python: $PYTHON
# or python3. Writes three files to $OUT (default ./bench-out):
#   summary.txt    the tables of every step
#   bench.log      everything, progress included, with step times
#   bench.tar.gz   the JSON files (frt9.json, frt27.json, hf9.json, ids) + logs
# Smoke test without a GPU (what CI can run):
#   SHAPE=tiny SHAPE_BIG=tiny BACKEND=cpu PREFIXES=256,512 SWEEP_PREFIXES=512 \
#   CHUNKS=64,128 FRT=build/frt bash scripts/bench-h200.sh --no-gen-model --budget 120
set -u
SHAPE=${SHAPE:-qwen3.5-9b}
SHAPE_BIG=${SHAPE_BIG:-qwen3.5-27b}
BACKEND=${BACKEND:-cuda}
PREFIXES=${PREFIXES:-2048,8192,32768}
SWEEP_PREFIXES=${SWEEP_PREFIXES:-8192,32768}
CHUNKS=${CHUNKS:-256,512,1024,2048}
BIG_PREFIX=${BIG_PREFIX:-8192}
BUDGET=500
GEN_MODEL=1
HF=1
B27=1
while [ $# -gt 0 ]; do
    case "$1" in
    --budget) BUDGET="$2"; shift 2 ;;
    --no-gen-model) GEN_MODEL=0; shift ;;
    --no-hf) HF=0; shift ;;
    --no-27b) B27=0; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "bench-h200: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$HERE/bench-out}
mkdir -p "$OUT"
if [ -z "${FRT:-}" ]; then
    if [ -x "$HERE/gpu-bundle/frt.sh" ]; then FRT="$HERE/gpu-bundle/frt.sh"
    elif [ -x "$HERE/build/frt" ]; then FRT="$HERE/build/frt"
    else echo "bench-h200: no frt (set FRT, or ship gpu-bundle/ or build/)" >&2; exit 1; fi
fi
PY=${PYTHON:-python3}
W=$(mktemp -d /tmp/frt-bench.XXXXXX)
LOG="$W/bench.log"
SUM="$W/summary.txt"
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
log() { echo "[bench-h200 +$(($(date +%s) - T0))s] $*" | tee -a "$LOG" "$SUM" >&2; }

# step NAME MAX_SECONDS COMMAND...: runs under timeout min(MAX, time left),
# stdout to the summary and the log, stderr to the log.
step() {
    local name="$1" max="$2"; shift 2
    local l; l=$(left)
    [ "$l" -lt "$max" ] && max=$l
    if [ "$max" -lt 10 ]; then
        log "SKIP $name: the budget is spent"
        return 0
    fi
    log "START $name (timeout ${max}s): $*"
    local s; s=$(date +%s)
    timeout -k 10 "$max" "$@" > >(tee -a "$SUM" "$LOG" >/dev/null) 2>>"$LOG"
    local rc=$?
    sleep 0.2
    log "END $name: exit $rc after $(($(date +%s) - s))s$([ $rc -eq 124 ] && echo ' (TIMED OUT)')"
    return 0
}

{
    log "frt: $FRT; budget ${BUDGET}s; work dir $W"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
    echo "host: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM"
} >>"$LOG" 2>&1

step "prepare ids and config" 30 "$FRT" bench --shape "$SHAPE" --random-weights --prefixes "$PREFIXES" \
    --suffix 64 --decode-tokens 32 --dump-ids "$W/ids9.json" --write-config "$W/cfg9" --no-run

# frt on 9B: main run + chunk sweep in one process; its own --time-budget
# skips what is left cleanly (the JSON is rewritten after every step).
step "frt $SHAPE" 240 "$FRT" bench --shape "$SHAPE" --random-weights --backend "$BACKEND" --seed 1 \
    --prefixes "$PREFIXES" --suffix 64 --repeats 5 --decode-tokens 32 \
    --chunks "$CHUNKS" --sweep-prefixes "$SWEEP_PREFIXES" --sweep-repeats 3 \
    --time-budget 215 --tmpdir "$W" --json "$W/frt9.json"

if [ "$HF" = 1 ]; then
    step "transformers $SHAPE" 140 "$PY" "$HERE/bench/hf_baseline.py" --config-dir "$W/cfg9" \
        --ids "$W/ids9.json" --prefixes "$PREFIXES" --suffix 64 --repeats 3 --decode-tokens 16 \
        --budget-s 115 --json "$W/hf9.json"
    if [ -s "$W/frt9.json" ] && [ -s "$W/hf9.json" ]; then
        step "compare" 20 "$PY" "$HERE/bench/compare" "$W/frt9.json" "$W/hf9.json"
    fi
fi
[ -s "$W/frt9.json" ] && step "frt table" 20 "$PY" "$HERE/bench/compare" "$W/frt9.json" --frt-only

if [ "$B27" = 1 ]; then
    l=$(left)
    step "frt $SHAPE_BIG" 100 "$FRT" bench --shape "$SHAPE_BIG" --random-weights --backend "$BACKEND" --seed 1 \
        --prefixes "$BIG_PREFIX" --suffix 64 --repeats 3 --decode-tokens 16 --time-budget $((l < 100 ? l - 15 : 85)) \
        --tmpdir "$W" --json "$W/frt27.json"
fi

if [ "$GEN_MODEL" = 1 ]; then
    if [ "$(left)" -ge 75 ]; then
        df -h /tmp | tail -1 | sed 's/^/disk: /' >>"$LOG"
        step "gen-model $SHAPE (issue 3)" 90 "$FRT" gen-model --shape "$SHAPE" --seed 1 --out "$W/q9"
        du -sh "$W/q9" >>"$LOG" 2>&1
        rm -rf "$W/q9"
    else
        log "SKIP gen-model: $(left)s left, 75s needed (run with --no-gen-model to silence)"
    fi
fi

log "done: $(left)s of the budget left"
rm -f "$W"/*.cap
tar -czf "$OUT/bench.tar.gz" -C "$W" --exclude=q9 . 2>>"$LOG"
cp "$LOG" "$OUT/bench.log"
cp "$SUM" "$OUT/summary.txt"
rm -rf "$W"
echo "bench-h200: wrote $OUT/summary.txt, bench.log, bench.tar.gz" >&2
