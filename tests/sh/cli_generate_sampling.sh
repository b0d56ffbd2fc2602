#!/usr/bin/env bash
# cli_generate_sampling.sh BUILD_DIR SOURCE_DIR - frt generate's sampling
# fields (include/frt/sampling.h) on a random-weight checkpoint (frt
# gen-model --shape tiny): --logit-bias ID:100 forces ID at temperature 1;
# --min-p 1 at temperature 5 gives the greedy tokens; strong penalties leave
# a greedy run unchanged up to its first repeated token, then change it and
# repeat no token; --logprobs N reports one record per token
# (token = the generated id, N ordered top entries, probabilities <= 1); a
# seeded penalised run is reproducible. Bad values are refused with exit
# status 2 and a message naming the flag.
set -u
B="$1"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_sampling.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"

"$FRT" gen-model --shape tiny --seed 5 --out "$T/m" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
M=(-m "$T/m" --backend cpu --threads 1 --ids 5,6,7,8 -n 12 --ignore-eos --json)

"$FRT" generate "${M[@]}" --temperature 1 --seed 3 --logit-bias 777:100 >"$T/b.json" 2>/dev/null
check "--logit-bias 777:100 forces 777 at temperature 1" test "$(json_ids tokens <"$T/b.json" | tr ' ' '\n' | sort -u)" = "777"

"$FRT" generate "${M[@]}" >"$T/g.json" 2>/dev/null
"$FRT" generate "${M[@]}" --temperature 5 --min-p 1 --seed 9 >"$T/mp.json" 2>/dev/null
check "--min-p 1 at temperature 5 is greedy" test "$(json_ids tokens <"$T/mp.json")" = "$(json_ids tokens <"$T/g.json")"

"$FRT" generate "${M[@]}" -n 24 >"$T/g24.json" 2>/dev/null
"$FRT" generate "${M[@]}" -n 24 --presence-penalty 2 --frequency-penalty 2 --repetition-penalty 1.5 >"$T/p.json" 2>/dev/null
check "greedy without penalties repeats a token within 24 (this checkpoint)" python3 -c "
import json; t = json.load(open('$T/g24.json'))['tokens']; assert len(set(t)) < len(t)"
check "penalties: the same tokens up to the first repeat, then none repeated" python3 -c "
import json
g = json.load(open('$T/g24.json'))['tokens']; p = json.load(open('$T/p.json'))['tokens']
first = next(i for i in range(len(g)) if g[i] in g[:i])
assert p[:first] == g[:first] and p[first] != g[first] and len(set(p)) == len(p)"

"$FRT" generate "${M[@]}" --temperature 0.8 --seed 4 --presence-penalty 1 --min-p 0.05 --logprobs 5 >"$T/l1.json" 2>/dev/null
"$FRT" generate "${M[@]}" --temperature 0.8 --seed 4 --presence-penalty 1 --min-p 0.05 --logprobs 5 >"$T/l2.json" 2>/dev/null
check "a seeded penalised run is reproducible" test "$(json_ids tokens <"$T/l1.json")" = "$(json_ids tokens <"$T/l2.json")"
check "--logprobs 5: one record per token, ordered, sampled token's value" python3 -c "
import json, math
o = json.load(open('$T/l1.json'))
assert len(o['logprobs']) == len(o['tokens']) == 12
for tok, r in zip(o['tokens'], o['logprobs']):
    assert r['token'] == tok and r['logprob'] <= 0 and len(r['top']) == 5
    lps = [e[1] for e in r['top']]
    assert lps == sorted(lps, reverse=True) and sum(math.exp(x) for x in lps) <= 1 + 1e-6
    for i, lp in r['top']:
        if i == tok: assert abs(lp - r['logprob']) < 1e-7
"

refuse "--min-p: '1.5' is out of range" "${M[@]}" --min-p 1.5
refuse "--presence-penalty: '3' is out of range" "${M[@]}" --presence-penalty 3
refuse "--frequency-penalty: '-2.5' is out of range" "${M[@]}" --frequency-penalty -2.5
refuse "--repetition-penalty: '0' is out of range (a number > 0)" "${M[@]}" --repetition-penalty 0
refuse "--logprobs: '21' is out of range" "${M[@]}" --logprobs 21
refuse "--logprobs needs --json" -m "$T/m" --backend cpu --ids 1 --logprobs 2
refuse "-q/--quiet: --json already prints no loading or timing lines" "${M[@]}" -q
refuse "--logit-bias: 'x:1' is not ID:BIAS" "${M[@]}" --logit-bias x:1
refuse "--logit-bias: '5' is not ID:BIAS" "${M[@]}" --logit-bias 3:1,5
refuse "--logit-bias: '3:nan' is not ID:BIAS with a finite BIAS" "${M[@]}" --logit-bias 3:nan
refuse "--logit-bias: '5:1,' has an empty element" "${M[@]}" --logit-bias 5:1,
refuse "--logit-bias: '-4:1' is out of range" "${M[@]}" --logit-bias -4:1
refuse "logit_bias token 4096 is outside the vocabulary" "${M[@]}" --logit-bias 4096:1
refuse "logit_bias of token 3 is 101" "${M[@]}" --logit-bias 3:101
refuse "logit_bias names token 3 twice" "${M[@]}" --logit-bias 3:1,3:2
exit $fail
