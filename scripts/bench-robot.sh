#!/usr/bin/env bash
# bench-robot.sh - the robot side's GPU numbers (issue 23; docs/robot.md),
# in one call on the GPU machine:
#   1. frt gen-model --shape $SHAPE (default pi05: the real Pi0.5 shape,
#      random weights);
#   2. frt policy rollout --bench --backend $BACKEND (default cuda) with a
#      random critic, 2 cameras of the fake robot: the policy alone per tick,
#      policy + critic as one plan and serially (target: plan <= 1.05x the
#      policy alone), the critic alone, the episode reset (a capsule restore;
#      target <= 0.1 ms) next to its floor (the state's bytes copied within
#      device memory);
#   3. frt serve --policy (LIBERO, the critic, a SentencePiece model trained
#      here with spm_train) and scripts/bench-robot-ws.py on loopback: the
#      tick, the server's own overhead and the client's round trip minus the
#      tick (target <= 1 ms per tick). Skipped, saying why, without spm_train
#      or python3 websockets / msgpack / numpy.
# Every step runs under `timeout` and the script goes on past a failure.
# The frt binary: $FRT, else gpu-bundle/frt.sh, else build/frt; python:
# $PYTHON, else /usr/bin/python3 or python3 (the one with the modules). Prints everything; with $OUT set, also writes
# $OUT/bench-robot.txt (the summary) and $OUT/bench-robot.log (all output).
# Knobs: SHAPE, BACKEND, TICKS (50), RESETS (1000), WS_N (50).
# Smoke test without a GPU: SHAPE=pi05-tiny BACKEND=cpu TICKS=5 RESETS=50 WS_N=5 bash scripts/bench-robot.sh
set -u
SHAPE=${SHAPE:-pi05}
BACKEND=${BACKEND:-cuda}
TICKS=${TICKS:-50}
RESETS=${RESETS:-1000}
WS_N=${WS_N:-50}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "${FRT:-}" ]; then
    if [ -x "$HERE/gpu-bundle/frt.sh" ]; then FRT="$HERE/gpu-bundle/frt.sh"
    elif [ -x "$HERE/build/frt" ]; then FRT="$HERE/build/frt"
    else echo "bench-robot: no frt (set FRT, or ship gpu-bundle/ or build/)" >&2; exit 1; fi
fi
# python: $PYTHON, else the first of /usr/bin/python3 and python3 that has websockets, msgpack and numpy
PY=${PYTHON:-}
for p in /usr/bin/python3 python3; do
    [ -z "$PY" ] && $p -c 'import websockets, msgpack, numpy' 2>/dev/null && PY=$p
done
PY=${PY:-python3}
W=$(mktemp -d /tmp/frt-bench-robot.XXXXXX)
SUM="$W/summary.txt"
LOG="$W/bench.log"
SRV_PID=""
cleanup() {
    [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
    if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && cp "$SUM" "$OUT/bench-robot.txt" && cp "$LOG" "$OUT/bench-robot.log"; fi
    rm -rf "$W"
}
trap cleanup EXIT
say() { echo "$*" | tee -a "$SUM" "$LOG"; }
# step NAME SECONDS CMD...: runs CMD under timeout, its output into the log and the summary
step() {
    local name=$1 secs=$2; shift 2
    local t0=$(date +%s.%N)
    say "== $name"
    timeout "$secs" "$@" >"$W/step.out" 2>&1
    local rc=$?
    cat "$W/step.out" >>"$LOG"
    grep -v '^loading weights\|^capturing graphs' "$W/step.out" | tee -a "$SUM"
    say "-- $name: exit $rc, $(echo "$(date +%s.%N) - $t0" | bc) s"
    return $rc
}
say "bench-robot: $SHAPE on $BACKEND ($(date -u +%FT%TZ)); $FRT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$SUM" "$LOG"

M="$W/policy"
step "gen-model --shape $SHAPE" 420 "$FRT" gen-model --shape "$SHAPE" --out "$M" -q || { say "no model: stop"; exit 1; }
step "rollout bench: policy alone, policy + critic (plan, serial), episode reset" 420 \
    "$FRT" policy rollout -m "$M" --fake-robot --random-critic --bench --backend "$BACKEND" --cameras 2 \
    --ticks "$TICKS" --resets "$RESETS"

# the websocket round trip
if ! command -v spm_train >/dev/null; then
    say "websocket: skipped (no spm_train to make the server's tokenizer: scripts/install-deps.sh)"; exit 0
fi
if ! $PY -c 'import websockets, msgpack, numpy' 2>/dev/null; then
    say "websocket: skipped ($PY lacks websockets / msgpack / numpy: scripts/install-deps.sh)"; exit 0
fi
for i in $(seq 1 300); do echo "pick up the red cup and put it in the basket number $i"; done >"$W/corpus.txt"
spm_train --input="$W/corpus.txt" --model_prefix="$W/spm" --vocab_size=400 --hard_vocab_limit=false \
    --model_type=unigram --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 --byte_fallback=true --minloglevel=2 \
    >>"$LOG" 2>&1 || { say "websocket: spm_train failed"; exit 1; }
cp "$W/spm.model" "$M/tokenizer.model"
$PY "$HERE/scripts/ref/random_critic.py" "$M/config.json" "$W/critic.safetensors" 64 >>"$LOG" 2>&1 ||
    { say "websocket: cannot write the critic"; exit 1; }
"$FRT" serve --policy "$M" --robot libero --critic "$W/critic.safetensors" --backend "$BACKEND" --port 0 \
    --port-file "$W/port" -q >>"$LOG" 2>&1 &
SRV_PID=$!
for _ in $(seq 1 1200); do [ -s "$W/port" ] && break; kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.25; done
if [ ! -s "$W/port" ]; then say "websocket: the server did not start (bench-robot.log)"; exit 1; fi
step "websocket round trip on loopback (frt serve --policy --critic)" 300 \
    $PY "$HERE/scripts/bench-robot-ws.py" "$(cat "$W/port")" "$WS_N"
