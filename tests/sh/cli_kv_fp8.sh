#!/usr/bin/env bash
# cli_kv_fp8.sh BUILD_DIR SOURCE_DIR - frt generate --kv-dtype (docs/fp8.md):
# on a dense checkpoint (frt gen-model --shape tiny-dense) --kv-dtype fp8
# runs, gives the same greedy ids twice, and --kv-dtype default gives the
# ids of a run without the option; on the hybrid (--shape tiny) fp8 runs
# too and gives the same ids twice; an unknown value is refused (exit 2, a
# message). frt bench --kv-dtype fp8 prints the KV bytes per token of
# context, half the bf16 figure (dense and hybrid). frt calibrate writes a
# scales file that generate --kv-scales uses (dense and hybrid); its bad
# uses are refused.
set -u
B="$1"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_kv_fp8.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"

"$FRT" gen-model --shape tiny-dense --seed 3 --out "$T/d" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
"$FRT" gen-model --shape tiny --seed 3 --out "$T/h" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
D=(-m "$T/d" --backend cpu --threads 1 --ids 5,6,7,8,9 -n 8 --ignore-eos --json)

"$FRT" generate "${D[@]}" --kv-dtype fp8 >"$T/a.json" 2>"$T/err"
check "dense, --kv-dtype fp8: exit 0" test $? -eq 0
check "dense, --kv-dtype fp8: 8 ids" test "$(json_ids tokens <"$T/a.json" | wc -w)" -eq 8
"$FRT" generate "${D[@]}" --kv-dtype fp8 >"$T/b.json" 2>/dev/null
check "dense, --kv-dtype fp8: the same ids twice" test "$(json_ids tokens <"$T/a.json")" = "$(json_ids tokens <"$T/b.json")"
"$FRT" generate "${D[@]}" >"$T/f.json" 2>/dev/null
"$FRT" generate "${D[@]}" --kv-dtype default >"$T/g.json" 2>/dev/null
check "--kv-dtype default == no option" test "$(json_ids tokens <"$T/f.json")" = "$(json_ids tokens <"$T/g.json")"

HY=(-m "$T/h" --backend cpu --threads 1 --ids 1,2,3 -n 6 --ignore-eos --json)
"$FRT" generate "${HY[@]}" --kv-dtype fp8 >"$T/h1.json" 2>"$T/err"
check "hybrid, --kv-dtype fp8: exit 0" test $? -eq 0
check "hybrid, --kv-dtype fp8: 6 ids" test "$(json_ids tokens <"$T/h1.json" | wc -w)" -eq 6
"$FRT" generate "${HY[@]}" --kv-dtype fp8 >"$T/h2.json" 2>/dev/null
check "hybrid, --kv-dtype fp8: the same ids twice" test "$(json_ids tokens <"$T/h1.json")" = "$(json_ids tokens <"$T/h2.json")"
refuse "--kv-dtype: 'fp16' is not one of default, fp8" -m "$T/d" --ids 1,2 --kv-dtype fp16

# frt bench --kv-dtype: the KV bytes per token of context from the state table
# (tiny-dense: 4 layers x K and V x 2 KV heads x head_dim 32 = 512 values)
BQ=(bench -m "$T/d" --backend cpu --threads 1 --prefixes 64 --suffix 8 --repeats 1 --decode-tokens 2 --no-tiers
    --no-sampling-costs)
"$FRT" "${BQ[@]}" --kv-dtype fp8 >"$T/bench8" 2>/dev/null
check "bench --kv-dtype fp8: exit 0" test $? -eq 0
check "bench --kv-dtype fp8: 512 bytes per token, half of bf16" grep -q "KV cache F8_E4M3: 512 bytes per token of context (512 values; at bf16 1024 bytes, 0.50x)" "$T/bench8"
"$FRT" "${BQ[@]}" >"$T/bench32" 2>/dev/null
check "bench (cpu default): F32, 2048 bytes per token" grep -q "KV cache F32: 2048 bytes per token" "$T/bench32"
# the hybrid (tiny: layers L F L L F, the 2 full-attention ones x K and V x
# 2 KV heads x head_dim 32 = 256 values; the Gated DeltaNet states are no KV)
"$FRT" bench -m "$T/h" --backend cpu --threads 1 --prefixes 64 --suffix 8 --repeats 1 --decode-tokens 2 --no-tiers \
    --no-sampling-costs --kv-dtype fp8 >"$T/benchh" 2>/dev/null
check "hybrid bench --kv-dtype fp8: exit 0" test $? -eq 0
check "hybrid bench --kv-dtype fp8: 256 bytes per token, half of bf16" grep -q "KV cache F8_E4M3: 256 bytes per token of context (256 values; at bf16 512 bytes, 0.50x)" "$T/benchh"
"$FRT" bench -m "$T/d" --kv-dtype fp16 >/dev/null 2>"$T/err"
check "bench --kv-dtype fp16: exit 2" test $? -eq 2
check "bench --kv-dtype fp16: the message" grep -q "'fp16' is not one of default, fp8" "$T/err"

# frt calibrate -> a scales file; generate --kv-dtype fp8 --kv-scales runs with it, deterministically
"$FRT" calibrate -m "$T/d" --backend cpu --threads 1 --ids 5,6,7,8,9,10,11,12 -o "$T/s.safetensors" -q >"$T/cal" 2>"$T/err"
check "calibrate: exit 0" test $? -eq 0
check "calibrate: the summary line" grep -q "wrote $T/s.safetensors: 8 KV entries, 16 head scales in" "$T/cal"
"$FRT" generate "${D[@]}" --kv-dtype fp8 --kv-scales "$T/s.safetensors" >"$T/c1.json" 2>/dev/null
check "generate --kv-scales: exit 0" test $? -eq 0
"$FRT" generate "${D[@]}" --kv-dtype fp8 --kv-scales "$T/s.safetensors" >"$T/c2.json" 2>/dev/null
check "generate --kv-scales: the same ids twice" test "$(json_ids tokens <"$T/c1.json")" = "$(json_ids tokens <"$T/c2.json")"
# the hybrid: its 4 KV entries (2 full-attention layers), 8 head scales
"$FRT" calibrate -m "$T/h" --backend cpu --threads 1 --ids 5,6,7,8,9,10,11,12 -o "$T/sh.safetensors" -q >"$T/calh" 2>"$T/err"
check "hybrid calibrate: exit 0" test $? -eq 0
check "hybrid calibrate: the summary line" grep -q "wrote $T/sh.safetensors: 4 KV entries, 8 head scales in" "$T/calh"
"$FRT" generate "${HY[@]}" --kv-dtype fp8 --kv-scales "$T/sh.safetensors" >"$T/h3.json" 2>/dev/null
check "hybrid generate --kv-scales: exit 0" test $? -eq 0
check "hybrid generate --kv-scales: 6 ids" test "$(json_ids tokens <"$T/h3.json" | wc -w)" -eq 6
"$FRT" generate "${D[@]}" --kv-scales "$T/s.safetensors" >/dev/null 2>"$T/err"
check "generate --kv-scales without --kv-dtype fp8: exit 1" test $? -eq 1
check "generate --kv-scales without fp8: the message" grep -q "given without kv_dtype FRT_KV_FP8" "$T/err"
"$FRT" generate "${D[@]}" --kv-dtype fp8 --kv-scales "$T/nothing" >/dev/null 2>"$T/err"
check "generate --kv-scales with a missing file: exit 1" test $? -eq 1
"$FRT" calibrate -m "$T/d" --ids 1,2 >/dev/null 2>"$T/err"
check "calibrate without -o: exit 2" test $? -eq 2
check "calibrate without -o: the message" grep -q "no output: give -o FILE" "$T/err"
"$FRT" calibrate -m "$T/d" -o "$T/x" >/dev/null 2>"$T/err"
check "calibrate without a text: exit 2" test $? -eq 2
"$FRT" calibrate -m "$T/d" --backend cpu --ids 1,99999 -o "$T/x" -q >/dev/null 2>"$T/err"
check "calibrate with an id outside the vocabulary: exit 2" test $? -eq 2
check "calibrate: no file after a refusal" test ! -e "$T/x"
"$FRT" calibrate -m "$T/d" --backend cpu --ids 1,2 -o "$T/nodir/x" -q >/dev/null 2>"$T/err"
check "calibrate into a missing directory: exit 1" test $? -eq 1
exit $fail
