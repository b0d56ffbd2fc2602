#!/usr/bin/env bash
# fp8_accuracy_run.sh BUNDLE_DIR - issue 27's FP8 accuracy runs, on the GPU
# machine (docs/fp8.md "Accuracy runs"). Run from the repository root:
#
#     tar xzf gpu-bundle.tgz && bash scripts/ref/fp8_accuracy_run.sh gpu-bundle
#
# (carry: gpu-bundle.tgz, made here by `make gpu-bundle` from a CUDA build).
# Needs a python with numpy and torch >= 2.1 ($PYTHON, else the first of
# python3 on PATH and /usr/bin/python3 that imports them; the GPU machine's
# /usr/bin/python3 has no numpy) (the
# FP8 checkpoints are quantized by torch, on the GPU: make_fp8_checkpoint.py
# --quantizer torch, each tensor checked against the numpy quantizer).
#
# Steps ($STEPS, default "golden llama qwen"), each timed in run.log:
#   golden  every golden model of tests/data (bundle or source tree): torch
#           makes its ct-channel, ct-tensor and block (128x128) FP8
#           checkpoints, which must equal byte for byte those of the numpy
#           quantizer (cmp); then `frt compare` on cpu and cuda: the golden
#           (f32 on cpu, bf16 on cuda) against each checkpoint and against
#           --dtype2 fp8. The hybrid goldens: --dtype2 fp8 only (FP8
#           checkpoints of the hybrid are refused by the loader).
#   llama   frt gen-model llama3.1-8b (random bf16, --no-fsync) into $WORK,
#           its torch ct-channel checkpoint, then on cuda: bf16 against the
#           checkpoint and bf16 against --dtype2 fp8. STEPS "llama_tensor"
#           adds the ct-tensor checkpoint (another ~1 min).
#   qwen    the same for qwen3.5-9b with --dtype2 fp8 only, when the cuda
#           backend takes --dtype fp8 on the hybrid (tried first on the tiny
#           hybrid shape; a "not supported" refusal skips the step, said in
#           summary.tsv).
#   qwen_cpu (not in the default) qwen3.5-9b against --dtype2 fp8 on the
#           cpu backend's FP8 emulation (both models in f32, ~72 GB of host
#           memory; slow: $QWEN_CPU_PROMPTS (1) prompt x 64 tokens,
#           $QWEN_CPU_TOKENS (8) greedy steps): the 9B hybrid's figures
#           while its cuda backend refuses FP8 weights. Its own device call:
#           STEPS=qwen_cpu (a few minutes: gen-model, two f32 loads).
# Knobs (environment): FRT (default BUNDLE/frt.sh), PYTHON, QUANTIZER
# (torch; numpy where torch is missing), OUT, WORK (/tmp/frt-fp8acc),
# PROMPTS, PROMPT_LEN, TOKENS, BACKENDS ("cpu cuda": the golden step's),
# BIG_BACKEND (cuda), LLAMA_SHAPE, QWEN_SHAPE (frt gen-model shapes; a
# dry run here: LLAMA_SHAPE=tiny-dense QWEN_SHAPE=tiny BIG_BACKEND=cpu).
# Every compare: $PROMPTS random prompts (seed 1) of $PROMPT_LEN tokens,
# $TOKENS greedy steps; --max-logit-err is docs/fp8.md's bound: 2^-2 for
# the dense goldens, 2^-2 x sqrt(L / 3) for L layers beyond 3 (the
# hybrid goldens, the 8B / 9B shapes); hybrid_v3k_tied (ill-conditioned)
# is reported with no bound.
#
# Output ($OUT, default ./fp8-acc-out): NAME.txt (the table), NAME.json
# (every figure), NAME.err (progress, errors) per compare; summary.tsv (one
# line per compare: name, status pass / FAIL / skipped, the largest
# last-logit error, the fewest greedy steps agreed, the bound); run.log.
# Time on an H100: the golden step ~1-2 min, llama ~4 min (gen-model ~1,
# quantize ~1-2, two compares ~1.5); two device calls if one is too long
# (STEPS=golden, then STEPS=llama). Exit status: 0 when no compare failed.
set -uo pipefail

[ $# -eq 1 ] || { sed -n '2,51p' "$0"; exit 2; }
BUNDLE=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FRT=${FRT:-$BUNDLE/frt.sh}
# a python with numpy (and torch for the torch quantizer): $PYTHON, else the
# first of python3 on PATH (the GPU machine's, with torch) and /usr/bin/python3
pick_python() {
    local p mods=numpy
    [ "${QUANTIZER:-torch}" = torch ] && mods=numpy,torch
    for p in python3 /usr/bin/python3; do
        "$p" -c "import $mods" 2>/dev/null && { echo "$p"; return; }
    done
    echo /usr/bin/python3
}
PY=${PYTHON:-$(pick_python)}
QUANTIZER=${QUANTIZER:-torch} # numpy: a machine without torch (the byte comparison then checks nothing new)
MAKE="$ROOT/scripts/ref/make_fp8_checkpoint.py"
OUT=${OUT:-$PWD/fp8-acc-out}
WORK=${WORK:-/tmp/frt-fp8acc}
STEPS=" ${STEPS:-golden llama qwen} "
PROMPTS=${PROMPTS:-4} PROMPT_LEN=${PROMPT_LEN:-128} TOKENS=${TOKENS:-256}
BACKENDS=${BACKENDS:-cpu cuda}                # the golden step's
BIG_BACKEND=${BIG_BACKEND:-cuda}              # the llama and qwen steps
LLAMA_SHAPE=${LLAMA_SHAPE:-llama3.1-8b} QWEN_SHAPE=${QWEN_SHAPE:-qwen3.5-9b}
QWEN_CPU_PROMPTS=${QWEN_CPU_PROMPTS:-1} QWEN_CPU_TOKENS=${QWEN_CPU_TOKENS:-8}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/run.log"
: >"$LOG"
printf 'name\tstatus\tmax_last_logit_err\tmin_agreed\tbound\n' >"$OUT/summary.tsv"
fail=0
DATA="$BUNDLE/tests/data"
[ -d "$DATA/golden_dense" ] || DATA="$ROOT/tests/data"

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

# bound L: 2^-2 x sqrt(max(L, 3) / 3), 3 digits
bound() { python3 -c "import math; print('%.3g' % (0.25 * math.sqrt(max($1, 3) / 3)))"; }

# summary NAME: a line of summary.tsv from NAME.json
summary() {
    python3 - "$OUT/$1.json" "$1" <<'EOF' >>"$OUT/summary.tsv"
import json, sys
j = json.load(open(sys.argv[1]))
errs = [p["last_logit_err"] for p in j["prompts"]]
worst = "nan" if None in errs else "%.3e" % max(errs)
b = j["max_logit_err_bound"]
print("%s\t%s\t%s\t%d/%d\t%s" % (sys.argv[2], "pass" if j["pass"] else "FAIL", worst,
      min(p["greedy"]["agreed"] for p in j["prompts"]), j["greedy_tokens"], "none" if b is None else "%g" % b))
EOF
}

# cmp_run NAME BOUND|none ARGS...: frt compare ARGS into NAME.{txt,json,err};
# a "not supported" refusal is recorded as skipped, any other failure as FAIL.
cmp_run() {
    local name="$1" b="$2"; shift 2
    local extra=(--prompts "$PROMPTS" --prompt-len "$PROMPT_LEN" -n "$TOKENS" --json "$OUT/$name.json")
    [ "$b" = none ] || extra+=(--max-logit-err "$b")
    local t0=$SECONDS
    "$FRT" compare "$@" "${extra[@]}" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    local rc=$?
    if [ -s "$OUT/$name.json" ] && [ $rc -le 1 ]; then
        summary "$name"
        [ $rc -eq 0 ] || fail=1
    elif grep -qiE "not supported|UNSUPPORTED" "$OUT/$name.err"; then
        printf '%s\tskipped: %s\t-\t-\t-\n' "$name" "$(grep -iE 'not supported|UNSUPPORTED' "$OUT/$name.err" | head -1)" \
            >>"$OUT/summary.tsv"
    else
        printf '%s\tFAIL (exit %d)\t-\t-\t-\n' "$name" $rc >>"$OUT/summary.tsv"
        fail=1
    fi
    log "compare $name: exit $rc ($((SECONDS - t0)) s)"
}

# quantize SRC DST LAYOUT [ARGS]: the torch checkpoint (log and time)
quantize() {
    local src="$1" dst="$2" layout="$3" t0=$SECONDS; shift 3
    rm -rf "$dst"
    if ! "$PY" "$MAKE" "$src" "$dst" --layout "$layout" --quantizer "$QUANTIZER" "$@" >>"$LOG" 2>&1; then
        log "FAIL make_fp8_checkpoint $layout $src"
        fail=1
        return 1
    fi
    log "quantized $src -> $layout ($((SECONDS - t0)) s)"
}

# same_bytes A B: every file of A equal to B's (the torch and numpy checkpoints)
same_bytes() {
    local f ok=0
    for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || ok=1; done
    return $ok
}

golden_dense() {
    local dir="$1" name; name=$(basename "$dir")
    local b; b=$(bound "$(python3 -c "import json; print(json.load(open('$dir/config.json'))['num_hidden_layers'])")")
    local layout be
    for layout in ct-channel ct-tensor block; do
        quantize "$dir" "$WORK/g/$name-$layout" "$layout" || continue
        "$PY" "$MAKE" "$dir" "$WORK/g/$name-$layout-np" --layout "$layout" >>"$LOG" 2>&1
        if same_bytes "$WORK/g/$name-$layout" "$WORK/g/$name-$layout-np"; then
            log "$name $layout: the $QUANTIZER checkpoint == the numpy one, byte for byte"
        else
            log "FAIL $name $layout: the $QUANTIZER checkpoint differs from the numpy one"
            fail=1
        fi
        for be in $BACKENDS; do
            cmp_run "$name-$layout-$be" "$b" --backend "$be" -q -m "$dir" --model2 "$WORK/g/$name-$layout"
        done
    done
    for be in $BACKENDS; do cmp_run "$name-dtype-fp8-$be" "$b" --backend "$be" -q -m "$dir" --dtype2 fp8; done
}

golden_hybrid() {
    local dir="$1" name be b; name=$(basename "$dir")
    b=$(bound "$(python3 -c "import json; c=json.load(open('$dir/config.json')); print(c.get('text_config', c)['num_hidden_layers'])")")
    [ "$name" = hybrid_v3k_tied ] && b=none
    for be in $BACKENDS; do cmp_run "$name-dtype-fp8-$be" "$b" --backend "$be" -q -m "$dir" --dtype2 fp8; done
}

step_golden() {
    mkdir -p "$WORK/g"
    local d
    for d in "$DATA"/golden_dense/*/; do golden_dense "${d%/}"; done
    for d in "$DATA"/golden/*/; do golden_hybrid "${d%/}"; done
}

# gen SHAPE DIR: a random bf16 checkpoint
gen() {
    local t0=$SECONDS
    [ -f "$2/config.json" ] || "$FRT" gen-model --shape "$1" --seed 1 --out "$2" --no-fsync -q >>"$LOG" 2>&1 ||
        { log "FAIL gen-model $1"; fail=1; return 1; }
    log "gen-model $1 ($((SECONDS - t0)) s)"
}

# layers DIR: num_hidden_layers of a checkpoint (text_config's for a composite one)
layers() { python3 -c "import json; c=json.load(open('$1/config.json')); print(c.get('text_config', c)['num_hidden_layers'])"; }

step_llama() {
    local src="$WORK/$LLAMA_SHAPE" b layout
    gen "$LLAMA_SHAPE" "$src" || return
    b=$(bound "$(layers "$src")")
    local layouts=(ct-channel)
    [[ "$STEPS" == *" llama_tensor "* ]] && layouts+=(ct-tensor)
    for layout in "${layouts[@]}"; do
        quantize "$src" "$src-$layout" "$layout" || continue
        cmp_run "$LLAMA_SHAPE-$layout-$BIG_BACKEND" "$b" --backend "$BIG_BACKEND" -m "$src" --model2 "$src-$layout"
        rm -rf "$src-$layout"
    done
    cmp_run "$LLAMA_SHAPE-dtype-fp8-$BIG_BACKEND" "$b" --backend "$BIG_BACKEND" -m "$src" --dtype2 fp8
    rm -rf "$src"
}

step_qwen() {
    local tiny="$WORK/tiny-hybrid" src="$WORK/$QWEN_SHAPE" name="$QWEN_SHAPE-dtype-fp8-$BIG_BACKEND"
    gen tiny "$tiny" || return
    if ! "$FRT" compare --backend "$BIG_BACKEND" -q -m "$tiny" --dtype2 fp8 --prompts 1 -n 1 >/dev/null \
        2>"$OUT/qwen-probe.err"; then
        if grep -qiE "not supported|UNSUPPORTED" "$OUT/qwen-probe.err"; then
            printf '%s\tskipped: %s\t-\t-\t-\n' "$name" "$(head -1 "$OUT/qwen-probe.err")" >>"$OUT/summary.tsv"
            log "qwen: skipped, the probe (tiny hybrid, --dtype2 fp8) was refused: $(head -1 "$OUT/qwen-probe.err")"
            return
        fi
        log "FAIL qwen probe: $(head -1 "$OUT/qwen-probe.err")"
        fail=1
        return
    fi
    gen "$QWEN_SHAPE" "$src" || return
    cmp_run "$name" "$(bound "$(layers "$src")")" --backend "$BIG_BACKEND" -m "$src" --dtype2 fp8
    rm -rf "$src"
}

# The 9B hybrid on the cpu backend's FP8 emulation (both models in f32: ~72 GB
# of host memory), a short run: $QWEN_CPU_PROMPTS prompts x 64 tokens, $QWEN_CPU_TOKENS steps.
step_qwen_cpu() {
    local src="$WORK/$QWEN_SHAPE"
    gen "$QWEN_SHAPE" "$src" || return
    PROMPTS=$QWEN_CPU_PROMPTS PROMPT_LEN=64 TOKENS=$QWEN_CPU_TOKENS \
        cmp_run "$QWEN_SHAPE-dtype-fp8-cpu" "$(bound "$(layers "$src")")" --backend cpu -m "$src" --dtype2 fp8
    rm -rf "$src"
}

log "fp8_accuracy_run: steps${STEPS}, $PROMPTS prompts x $PROMPT_LEN tokens, $TOKENS greedy steps, quantizer $QUANTIZER"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >>"$LOG" 2>&1
for s in golden llama qwen qwen_cpu; do
    [[ "$STEPS" == *" $s "* ]] || continue
    t0=$SECONDS
    "step_$s"
    log "step $s: $((SECONDS - t0)) s"
done
{ column -t -s $'\t' "$OUT/summary.tsv" 2>/dev/null || cat "$OUT/summary.tsv"; } | tee -a "$LOG"
exit $fail
