#!/usr/bin/env bash
# cli_generate_ids.sh BUILD_DIR SOURCE_DIR - frt generate --ids: a prompt
# given as token ids runs a checkpoint without a tokenizer (frt gen-model
# --shape tiny), --json reports the generated ids and the prompt ids, the
# text output is the ids, the same run twice gives the same ids, and on the
# demo model (which has a tokenizer) -p TEXT and --ids of TEXT's tokens give
# the same tokens. Bad id lists, ids outside the vocabulary and a text prompt
# without a tokenizer are refused with exit status 2 and a message.
set -u
B="$1"
SRC="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_ids.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"

"$FRT" gen-model --shape tiny --seed 3 --out "$T/m" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
M=(-m "$T/m" --backend cpu --threads 1)

"$FRT" generate "${M[@]}" --ids 1,2,3 -n 5 --ignore-eos --json >"$T/a.json" 2>"$T/err"
check "--ids on a checkpoint without a tokenizer: exit 0" test $? -eq 0
check "--json: one line" test "$(wc -l <"$T/a.json")" -eq 1
check "--json: prompt_ids echo the prompt" test "$(json_ids prompt_ids <"$T/a.json")" = "1 2 3"
toks="$(json_ids tokens <"$T/a.json")"
check "--json: 5 generated ids" test "$(wc -w <<<"$toks")" -eq 5
check "--json: every id inside the vocabulary (2048)" python3 -c "import sys; sys.exit(not all(0 <= int(t) < 2048 for t in '$toks'.split()))"
check "--json: text is null without a tokenizer" python3 -c "import json; assert json.load(open('$T/a.json'))['text'] is None"
check "--json: nothing on stderr" test ! -s "$T/err"

"$FRT" generate "${M[@]}" --ids 1,2,3 -n 5 --ignore-eos --json >"$T/b.json" 2>/dev/null
check "greedy: the same ids twice" test "$(json_ids tokens <"$T/b.json")" = "$toks"
out="$("$FRT" generate "${M[@]}" --ids '1, 2, 3' -n 5 --ignore-eos --quiet 2>"$T/err")"
check "text mode without a tokenizer prints the ids" test "$out" = "$toks"
check "--quiet: nothing on stderr" test ! -s "$T/err"
"$FRT" generate "${M[@]}" --ids 1,2,3 -n 5 --ignore-eos >/dev/null 2>"$T/err"
check "without --quiet: the loading and timing lines" grep -q "3 prompt tokens, 5 generated" "$T/err"
"$FRT" generate "${M[@]}" --ids 1,2,3 -n 5 --ignore-eos --temperature 1 --seed 7 --json >"$T/s1.json" 2>/dev/null
"$FRT" generate "${M[@]}" --ids 1,2,3 -n 5 --ignore-eos --temperature 1 --seed 7 --json >"$T/s2.json" 2>/dev/null
check "sampling: the same seed gives the same ids" test "$(json_ids tokens <"$T/s1.json")" = "$(json_ids tokens <"$T/s2.json")"
"$FRT" generate "${M[@]}" --ids 2047 -n 1 --json >/dev/null 2>&1
check "the last id of the vocabulary is accepted" test $? -eq 0

refuse "has no tokenizer.json: give the prompt as token ids with --ids" "${M[@]}" -p hello
refuse "--ids: token id 2048 (element 2) is outside the vocabulary [0, 2048)" "${M[@]}" --ids 1,2048
refuse "--ids: '1,,2' has an empty element" "${M[@]}" --ids 1,,2
refuse "--ids: '1,2,' has an empty element" "${M[@]}" --ids 1,2,
refuse "--ids: '' has an empty element" "${M[@]}" --ids ''
refuse "--ids: 'x' is not an integer" "${M[@]}" --ids 1,x,3
refuse "--ids: '3x' is not an integer" "${M[@]}" --ids 3x
refuse "--ids: '-1' is not a token id" "${M[@]}" --ids 4,-1
refuse "--ids: '99999999999' is not a token id" "${M[@]}" --ids 99999999999
refuse "give the prompt once: -p TEXT or --ids, not both" "${M[@]}" --ids 1 -p hi

# -p TEXT and --ids of its tokens: the same generation (demo model, tokenizer).
DEMO="$SRC/models/frt-demo"
if [ -f "$DEMO/tokenizer.json" ]; then
    ids="$("$FRT" tokenize "$DEMO" "def add(a, b):" | tr ' ' ',')"
    "$FRT" generate -m "$DEMO" --backend cpu -p "def add(a, b):" -n 6 --ignore-eos --json >"$T/p.json" 2>/dev/null
    "$FRT" generate -m "$DEMO" --backend cpu --ids "$ids" -n 6 --ignore-eos --json >"$T/i.json" 2>/dev/null
    check "demo: prompt_ids of -p are the tokenizer's ids" test "$(json_ids prompt_ids <"$T/p.json" | tr ' ' ',')" = "$ids"
    check "demo: -p TEXT and --ids give the same tokens" test "$(json_ids tokens <"$T/p.json")" = "$(json_ids tokens <"$T/i.json")"
    check "demo: --ids with a tokenizer still reports the text" python3 -c "import json; assert isinstance(json.load(open('$T/i.json'))['text'], str)"
else
    echo "skip demo-model checks (no $DEMO)"
fi
exit $fail
