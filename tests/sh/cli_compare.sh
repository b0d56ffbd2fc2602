#!/usr/bin/env bash
# cli_compare.sh BUILD_DIR SOURCE_DIR - frt compare (docs/fp8.md "Accuracy
# runs"), cpu backend:
#   - a model against itself: every error exactly 0, every greedy step
#     agrees, and --max-logit-err 0 passes;
#   - the golden dense_llama3_gqa against its per-channel FP8 checkpoint
#     (scripts/ref/make_fp8_checkpoint.py, numpy, made here): 4 random
#     prompts x 100 tokens, 64 greedy steps; every last-logit error nonzero
#     and within the bound of docs/fp8.md (2^-2), the JSON complete; the same
#     run with a bound below the measured error exits 1 (the test can fail);
#   - the checkpoint against --dtype2 fp8 on its source: 0 (the same codes);
#   - --lm-head-dtype2 fp8 (docs/fp8.md "An FP8 LM head"): the hidden states
#     exactly 0, the last logits nonzero and within 2^-4; the JSON names it;
#   - the script on a sharded source: the single-file source's model;
#   - --ids / --ids-file prompts (comments, blank lines) reach the JSON;
#   - bad arguments exit 2 with a message; models of other shapes exit 1.
set -u
B="$1"
S="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_compare.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"
GOLD="$S/tests/data/golden_dense/dense_llama3_gqa"
C=(--backend cpu --threads 1 -q)
# jtrue EXPR FILE: a python expression over the JSON object `j`, true or false
jtrue() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$2"; }

"$FRT" gen-model --shape tiny-dense --seed 3 --out "$T/d" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }

# ---- a model against itself ------------------------------------------------
"$FRT" compare "${C[@]}" -m "$T/d" --prompts 2 --prompt-len 70 -n 16 --max-logit-err 0 --json "$T/same.json" \
    >"$T/same.txt" 2>"$T/err"
check "itself: exit 0 with --max-logit-err 0" test $? -eq 0
check "itself: the table" grep -q "^prompt tokens" "$T/same.txt"
check "itself: every error 0, 16 of 16 steps agree" jtrue \
    "len(j['prompts']) == 2 and all(p['last_logit_err'] == 0 and set(p['hidden_err']) == {0} and \
     p['greedy']['agreed'] == 16 and p['greedy']['diverged_at'] == -1 and p['tokens'] == 70 for p in j['prompts'])" \
    "$T/same.json"

"$FRT" compare "${C[@]}" -m "$T/d" --prompts 2 --prompt-len 70 -n 0 --json "$T/same2.json" >/dev/null 2>&1
"$FRT" compare "${C[@]}" -m "$T/d" --prompts 2 --prompt-len 70 -n 0 --seed 2 --json "$T/seed2.json" >/dev/null 2>&1
check "random prompts: the same seed gives the same ids, inside the vocabulary" python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ids = [p['ids'] for p in a['prompts']]
sys.exit(not (ids == [p['ids'] for p in b['prompts']] and ids[0] != ids[1] and
              all(0 <= i < a['vocab_size'] for p in ids for i in p)))" "$T/same2.json" \
    "$T/same.json"
check "random prompts: another seed, other ids" jtrue \
    "[p['ids'] for p in j['prompts']] != [p['ids'] for p in json.load(open('$T/same.json'))['prompts']]" \
    "$T/seed2.json"

# ---- the golden model against its FP8 checkpoint ---------------------------
if ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    echo "FAIL /usr/bin/python3 has no numpy (scripts/install-deps.sh installs python3-numpy)"
    exit 1
fi
/usr/bin/python3 "$S/scripts/ref/make_fp8_checkpoint.py" "$GOLD" "$T/q" --layout ct-channel >/dev/null 2>"$T/err"
check "make_fp8_checkpoint.py ct-channel: exit 0" test $? -eq 0
G=("${C[@]}" -m "$GOLD" --model2 "$T/q" --prompts 4 --prompt-len 100 -n 64)
"$FRT" compare "${G[@]}" --max-logit-err 0.25 --json "$T/fp8.json" >"$T/fp8.txt" 2>"$T/err"
check "golden vs FP8 checkpoint: exit 0 within 2^-2" test $? -eq 0
cat "$T/fp8.txt"
check "golden vs FP8 checkpoint: 4 prompts, 5 hidden states each, errors in (0, 0.25]" jtrue \
    "len(j['prompts']) == 4 and j['n_layers'] == 3 and j['pass'] and j['max_logit_err_bound'] == 0.25 and \
     all(len(p['hidden_err']) == 5 and p['hidden_err'][0] == 0 and 0 < p['last_logit_err'] <= 0.25 and \
         0 < p['hidden_err'][4] <= 0.25 and 1 <= p['greedy']['steps'] <= 64 for p in j['prompts'])" "$T/fp8.json"
check "golden vs FP8 checkpoint: a divergence names both tokens and A's margin" jtrue \
    "all(p['greedy']['diverged_at'] == -1 or ('a_top2_margin' in p['greedy'] and \
         p['greedy']['token_a'] != p['greedy']['token_b']) for p in j['prompts'])" "$T/fp8.json"
"$FRT" compare "${G[@]}" --max-logit-err 1e-3 --json "$T/tight.json" >/dev/null 2>"$T/err"
check "a bound below the error: exit 1" test $? -eq 1
check "a bound below the error: the message" grep -q "last-logit error .* exceeds --max-logit-err 0.001" "$T/err"
check "a bound below the error: JSON pass false" jtrue "not j['pass']" "$T/tight.json"
"$FRT" compare "${C[@]}" -m "$T/q" --model2 "$GOLD" --dtype2 fp8 --prompts 2 --prompt-len 100 -n 16 \
    --max-logit-err 0 >/dev/null 2>"$T/err"
check "FP8 checkpoint == --dtype2 fp8 on its source (error 0)" test $? -eq 0

# ---- the FP8 LM head: the layers untouched, the logits within 2^-4 -------------
"$FRT" compare "${C[@]}" -m "$GOLD" --lm-head-dtype2 fp8 --prompts 2 --prompt-len 100 -n 8 --max-logit-err 0.0625 \
    --json "$T/lm.json" >"$T/lm.txt" 2>"$T/err"
check "--lm-head-dtype2 fp8: exit 0 within 2^-4" test $? -eq 0
check "--lm-head-dtype2 fp8: hidden errors 0, logits in (0, 2^-4], named in the JSON" jtrue \
    "j['b']['lm_head_dtype'] == 'fp8' and j['a']['lm_head_dtype'] == 'default' and \
     all(set(p['hidden_err']) == {0} and 0 < p['last_logit_err'] <= 0.0625 for p in j['prompts'])" "$T/lm.json"
check "--lm-head-dtype2 fp8: the table names it" grep -q "lm-head-dtype fp8" "$T/lm.txt"

# ---- a sharded source (streamed shard by shard) gives the single file's checkpoint
"$FRT" gen-model --shape tiny-dense --seed 3 --out "$T/ds" --shard-size 300000 --quiet >/dev/null
/usr/bin/python3 "$S/scripts/ref/make_fp8_checkpoint.py" "$T/d" "$T/q1" --layout ct-tensor >/dev/null 2>"$T/err"
/usr/bin/python3 "$S/scripts/ref/make_fp8_checkpoint.py" "$T/ds" "$T/qs" --layout ct-tensor >/dev/null 2>"$T/err"
check "sharded source: an FP8 checkpoint with an index" test -f "$T/qs/model.safetensors.index.json"
"$FRT" compare "${C[@]}" -m "$T/q1" --model2 "$T/qs" --prompts 2 -n 8 --max-logit-err 0 >/dev/null 2>"$T/err"
check "sharded source: the single file's model (error 0)" test $? -eq 0

# ---- prompts given as ids -------------------------------------------------------
printf '# two prompts\n5,6,7\n\n  \n8, 9,10,11\r\n' >"$T/ids.txt"
"$FRT" compare "${C[@]}" -m "$T/d" --dtype2 fp8 --ids 1,2 --ids-file "$T/ids.txt" -n 4 --json "$T/ids.json" \
    >/dev/null 2>"$T/err"
check "--ids + --ids-file: exit 0" test $? -eq 0
check "--ids + --ids-file: three prompts in order, no random ones" jtrue \
    "[p['ids'] for p in j['prompts']] == [[1, 2], [5, 6, 7], [8, 9, 10, 11]]" "$T/ids.json"

# ---- refusals -------------------------------------------------------------------
printf '1,2\n3,x\n' >"$T/bad.txt"
printf '# nothing\n\n' >"$T/empty.txt"
refuse_cmd compare "no reference: give -m DIR" --prompts 1
refuse_cmd compare "no prompts: give --prompts N" -m "$T/d" --prompts 0
refuse_cmd compare "--dtype2: 'fp16' is not one of default, fp8" -m "$T/d" --dtype2 fp16
refuse_cmd compare "--lm-head-dtype: 'bf16' is not one of default, fp8" -m "$T/d" --lm-head-dtype bf16
refuse_cmd compare "--ids-file: cannot open $T/none.txt" -m "$T/d" --ids-file "$T/none.txt"
refuse_cmd compare "bad.txt line 2: not a comma-separated list" -m "$T/d" --ids-file "$T/bad.txt"
refuse_cmd compare "holds no prompt" -m "$T/d" --ids-file "$T/empty.txt"
refuse_cmd compare "--max-seq 64 cannot hold a prompt of 100 tokens plus -n 16" -m "$T/d" --prompt-len 100 -n 16 \
    --max-seq 64
refuse_cmd compare "prompt 0 (--ids / --ids-file): token id 99999999 is outside the vocabulary" "${C[@]}" -m "$T/d" \
    --ids 1,99999999
printf '1,2\n3,99999999\n' >"$T/oov.txt"
refuse_cmd compare "prompt 1 (--ids / --ids-file): token id 99999999 is outside" "${C[@]}" -m "$T/d" --ids-file "$T/oov.txt"
refuse_cmd compare "--chunk: '100' is not a multiple of 64" -m "$T/d" --chunk 100
refuse_cmd compare "--max-logit-err: '-1'" -m "$T/d" --max-logit-err -1
refuse_cmd compare "unknown option --tokens2" -m "$T/d" --tokens2 4
"$FRT" compare "${C[@]}" -m "$T/d" --model2 "$GOLD" >/dev/null 2>"$T/err"
check "models of other shapes: exit 1" test $? -eq 1
check "models of other shapes: the message" grep -q "the models differ in shape" "$T/err"
"$FRT" compare "${C[@]}" -m "$T/d" --prompts 1 -n 1 --json "$T/no/such/dir.json" >/dev/null 2>"$T/err"
check "a --json FILE that cannot be written: exit 1" test $? -eq 1
check "a --json FILE that cannot be written: the message" grep -q "cannot write $T/no/such/dir.json" "$T/err"
"$FRT" compare "${C[@]}" -m "$T/d" --model2 "$T/absent" >/dev/null 2>"$T/err"
check "a model that does not load: exit 1 with its message" test $? -eq 1 -a -s "$T/err"

exit $fail
