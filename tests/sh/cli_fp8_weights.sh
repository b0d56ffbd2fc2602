#!/usr/bin/env bash
# cli_fp8_weights.sh BUILD_DIR SOURCE_DIR - frt generate / bench --dtype
# (docs/fp8.md "FP8 weights"): on a dense checkpoint (gen-model tiny-dense)
# --dtype fp8 runs and gives the same greedy ids twice; --dtype default is
# the run without the option; on the hybrid (tiny) it runs on the cpu
# backend too and gives the same ids twice; an unknown value is refused
# (exit 2). An
# FP8 checkpoint written by scripts/ref/make_fp8_checkpoint.py (per-channel,
# /usr/bin/python3 + numpy) generates the ids of --dtype fp8 on its source.
# frt bench --dtype fp8 prints the weight bytes a decode step streams and
# records weight_dtype in its JSON; so does a bench of the FP8 checkpoint
# (per channel) and of a block-wise one (fp8-block, its block scales).
# --lm-head-dtype fp8 (docs/fp8.md "An FP8 LM head"), dense and hybrid, with
# and without --dtype fp8: runs, the same logprobs twice, other logprobs
# than without it; bench prints the head's line and records lm_head_dtype;
# an unknown value is refused (exit 2).
set -u
B="$1"
S="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_fp8w.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"

"$FRT" gen-model --shape tiny-dense --seed 3 --out "$T/d" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
"$FRT" gen-model --shape tiny --seed 3 --out "$T/h" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
G=(--backend cpu --threads 1 --ids 5,6,7,8,9 -n 8 --ignore-eos --json)

"$FRT" generate -m "$T/d" "${G[@]}" --dtype fp8 >"$T/a.json" 2>"$T/err"
check "dense, --dtype fp8: exit 0" test $? -eq 0
check "dense, --dtype fp8: 8 ids" test "$(json_ids tokens <"$T/a.json" | wc -w)" -eq 8
"$FRT" generate -m "$T/d" "${G[@]}" --dtype fp8 >"$T/b.json" 2>/dev/null
check "dense, --dtype fp8: the same ids twice" test "$(json_ids tokens <"$T/a.json")" = "$(json_ids tokens <"$T/b.json")"
"$FRT" generate -m "$T/d" "${G[@]}" >"$T/f.json" 2>/dev/null
"$FRT" generate -m "$T/d" "${G[@]}" --dtype default >"$T/g.json" 2>/dev/null
check "--dtype default == no option" test "$(json_ids tokens <"$T/f.json")" = "$(json_ids tokens <"$T/g.json")"

"$FRT" generate -m "$T/h" "${G[@]}" --dtype fp8 >"$T/h1.json" 2>"$T/err"
check "hybrid, --dtype fp8: exit 0" test $? -eq 0
check "hybrid, --dtype fp8: 8 ids" test "$(json_ids tokens <"$T/h1.json" | wc -w)" -eq 8
"$FRT" generate -m "$T/h" "${G[@]}" --dtype fp8 >"$T/h2.json" 2>/dev/null
check "hybrid, --dtype fp8: the same ids twice" test "$(json_ids tokens <"$T/h1.json")" = "$(json_ids tokens <"$T/h2.json")"
refuse "--dtype: 'fp16' is not one of default, fp8" -m "$T/d" --ids 1,2 --dtype fp16

# the FP8 LM head: honoured (other logprobs), deterministic
L=(--backend cpu --threads 1 --ids 5,6,7,8,9 -n 4 --ignore-eos --logprobs 1 --json)
lp() { python3 -c "import json,sys; print(json.dumps([t['logprob'] for t in json.load(sys.stdin)['logprobs']]))"; }
for m in d h; do
    for w in default fp8; do
        "$FRT" generate -m "$T/$m" "${L[@]}" --dtype $w | lp >"$T/l0" 2>/dev/null
        "$FRT" generate -m "$T/$m" "${L[@]}" --dtype $w --lm-head-dtype fp8 2>"$T/err" | lp >"$T/l1"
        check "$m --dtype $w --lm-head-dtype fp8: exit 0" test "${PIPESTATUS[0]}" -eq 0
        "$FRT" generate -m "$T/$m" "${L[@]}" --dtype $w --lm-head-dtype fp8 2>/dev/null | lp >"$T/l2"
        check "$m --dtype $w --lm-head-dtype fp8: the same logprobs twice" cmp -s "$T/l1" "$T/l2"
        check "$m --dtype $w --lm-head-dtype fp8: other logprobs than the default head" test -s "$T/l1" -a \
            "$(cat "$T/l1")" != "$(cat "$T/l0")"
    done
done
refuse "--lm-head-dtype: 'bf16' is not one of default, fp8" -m "$T/d" --ids 1,2 --lm-head-dtype bf16

if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    /usr/bin/python3 "$S/scripts/ref/make_fp8_checkpoint.py" "$T/d" "$T/q" --layout ct-channel >/dev/null 2>"$T/err"
    check "make_fp8_checkpoint.py ct-channel: exit 0" test $? -eq 0
    "$FRT" generate -m "$T/q" "${G[@]}" >"$T/q.json" 2>"$T/err"
    check "FP8 checkpoint: exit 0" test $? -eq 0
    check "FP8 checkpoint: the ids of --dtype fp8 on its source" test "$(json_ids tokens <"$T/q.json")" = "$(json_ids tokens <"$T/a.json")"
else
    echo "FAIL /usr/bin/python3 has no numpy (scripts/install-deps.sh installs python3-numpy)"
    fail=1
fi

BQ=(bench -m "$T/d" --backend cpu --threads 1 --prefixes 64 --suffix 8 --repeats 1 --decode-tokens 2 --no-tiers
    --no-sampling-costs)
"$FRT" "${BQ[@]}" --dtype fp8 --json "$T/bench.json" >"$T/bench8" 2>"$T/err"
check "bench --dtype fp8: exit 0" test $? -eq 0
check "bench --dtype fp8: the weight stream line" grep -q "weights FP8 E4M3 (--dtype fp8): a decode step streams" "$T/bench8"
check "bench --dtype fp8 on cpu: says it streams f32" grep -q "this backend emulates FP8 with f32 weights" "$T/bench8"
check "bench --dtype fp8: JSON weight_dtype" python3 -c "import json,sys; sys.exit(json.load(open('$T/bench.json'))['model_info']['weight_dtype'] != 'fp8')"
# an FP8 checkpoint without --dtype: its FP8 weights are counted (per channel; block-wise with its block scales)
if [ -d "$T/q" ]; then
    "$FRT" bench -m "$T/q" "${BQ[@]:3}" --json "$T/benchq.json" >"$T/benchq" 2>"$T/err"
    check "bench of an FP8 checkpoint: the weight stream line" grep -q "weights FP8 E4M3 (the checkpoint): a decode step streams" "$T/benchq"
    check "bench of an FP8 checkpoint: JSON weight_dtype fp8" python3 -c "import json,sys; sys.exit(json.load(open('$T/benchq.json'))['model_info']['weight_dtype'] != 'fp8')"
    /usr/bin/python3 "$S/scripts/ref/make_fp8_checkpoint.py" "$T/d" "$T/qb" --layout block --block 32 32 >/dev/null 2>"$T/err"
    "$FRT" bench -m "$T/qb" "${BQ[@]:3}" --json "$T/benchb.json" >"$T/benchb" 2>"$T/err"
    check "bench of a block-wise checkpoint: exit 0" test $? -eq 0
    check "bench of a block-wise checkpoint: the block line" grep -q "weights FP8 E4M3 (the checkpoint, 32x32 blocks)" "$T/benchb"
    check "bench of a block-wise checkpoint: JSON weight_dtype fp8-block" python3 -c "import json,sys; sys.exit(json.load(open('$T/benchb.json'))['model_info']['weight_dtype'] != 'fp8-block')"
fi
"$FRT" "${BQ[@]}" --lm-head-dtype fp8 --json "$T/benchl.json" >"$T/benchl" 2>"$T/err"
check "bench --lm-head-dtype fp8: exit 0" test $? -eq 0
check "bench --lm-head-dtype fp8: the head's line" grep -q "lm_head FP8 E4M3 (--lm-head-dtype fp8)" "$T/benchl"
check "bench --lm-head-dtype fp8: JSON lm_head_dtype" python3 -c "import json,sys; sys.exit(json.load(open('$T/benchl.json'))['model_info']['lm_head_dtype'] != 'fp8')"
"$FRT" bench -m "$T/d" --lm-head-dtype fp16 >/dev/null 2>"$T/err"
check "bench --lm-head-dtype fp16: exit 2" test $? -eq 2
"$FRT" bench -m "$T/d" --dtype fp16 >/dev/null 2>"$T/err"
check "bench --dtype fp16: exit 2" test $? -eq 2
exit $fail
