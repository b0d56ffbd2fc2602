#!/usr/bin/env bash
# serve_branches.sh BUILD_DIR SOURCE_DIR - OpenAI n and best_of over branch
# slots (frt serve --branches B) with the demo model on the cpu:
#   n = 3 greedy: three identical choices equal to the n = 1 answer;
#   n = 3 sampled with a seed: choice i equals a single-branch request
#     seeded with frt.choices[i].seed (frt_branch_seed(seed, i)), streamed
#     (chunks carry each choice's index) and not;
#   best_of: the returned choices are the forked branches of highest
#     cumulative logprob (checked against n = best_of with the same seed);
#   chat n = 2, whole and streamed; refusals: n > B, best_of < n, best_of
#   with stream, n > 1 on the fake engine (no branch slots), and
#   --branches with the fake engine.
# Skips (77) without the demo model. curl on 127.0.0.1 only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"

# The fake engine has no branch slots: n > 1 is a 400 naming n.
serve_start fake --engine fake --quiet
api fake POST /v1/completions '{"prompt":"abc","max_tokens":3,"n":2}'
expect_error 400 invalid_value "n = 2 on the fake engine"
[ "$(jqr .error.param)" = n ] || fail "n on the fake engine: param $(jqr .error.param)"
jqr .error.message | grep -q 'branch slots' || fail "n on the fake engine: message $BODY"
api fake POST /v1/completions '{"prompt":"abc","max_tokens":3,"n":1,"best_of":1}'
expect_status 200 "n = 1, best_of = 1 on the fake engine"
serve_stop fake
if "$FRT" serve --engine fake --branches 2 --probe >"$WORK/cli.txt" 2>&1; then fail "--branches with the fake engine was accepted"; fi
grep -q -- '--branches' "$WORK/cli.txt" || fail "--branches refusal does not name the flag: $(cat "$WORK/cli.txt")"

serve_need_model "$2"
B=4
serve_start br --backend cpu --prefill-chunk 64 --max-seq 512 --threads 2 --quiet --branches $B
PROMPT=$(jstr 'def parse_args(argv):')
body() { # body MAX_TOKENS EXTRA_MEMBERS
    printf '{"prompt":%s,"max_tokens":%s,%s}' "$PROMPT" "$1" "$2"
}

# n = 3 greedy: three identical choices, each the n = 1 answer.
api br POST /v1/completions "$(body 12 '"temperature":0')"
expect_status 200 "n = 1 greedy"
one=$(jqr '.choices[0].text')
[ -n "$one" ] || fail "n = 1 greedy gave no text"
api br POST /v1/completions "$(body 12 '"temperature":0,"n":3')"
expect_status 200 "n = 3 greedy"
[ "$(jqr '.choices | length')" = 3 ] || fail "n = 3: $(jqr '.choices | length') choices"
[ "$(jqr '[.choices[].index] == [0,1,2]')" = true ] || fail "n = 3: indexes $BODY"
for i in 0 1 2; do
    [ "$(jqr ".choices[$i].text")" = "$one" ] || fail "n = 3 greedy: choice $i differs from n = 1"
done
[ "$(jqr '.usage.completion_tokens == ([.frt.choices[].completion_tokens] | add)')" = true ] ||
    fail "usage does not count every choice's tokens: $BODY"
[ "$(jqr '.frt.branches')" = 3 ] || fail "frt.branches: $BODY"

# n = 3 sampled with a seed: choice i is the single-branch request seeded with its seed.
api br POST /v1/completions "$(body 16 '"temperature":1.0,"seed":7,"ignore_eos":true,"n":3')"
expect_status 200 "n = 3 sampled"
echo "$BODY" >"$WORK/sampled.json"
[ "$(jqr '.frt.fork_seed')" = 7 ] || fail "fork_seed: $BODY"
[ "$(jqr '[.choices[].text] | unique | length')" -ge 2 ] || fail "n = 3 sampled: the choices do not diverge: $BODY"
for i in 0 1 2; do
    # the seeds are 64-bit: read as text (jq's numbers are doubles)
    seed=$(grep -o '"seed":-\?[0-9]*' "$WORK/sampled.json" | sed -n "$((i + 1))s/.*://p")
    want=$(jq -r ".choices[$i].text" "$WORK/sampled.json")
    wtok=$(jq -c ".frt.choices[$i].tokens" "$WORK/sampled.json")
    api br POST /v1/completions "$(body 16 "\"temperature\":1.0,\"seed\":$seed,\"ignore_eos\":true")"
    expect_status 200 "single branch $i"
    [ "$(jqr '.frt.tokens' | jq -c .)" = "$wtok" ] || fail "choice $i: tokens $wtok, alone with seed $seed: $(jqr '.frt.tokens' | jq -c .)"
    [ "$(jqr '.choices[0].text')" = "$want" ] || fail "choice $i: text differs alone"
done

# the same streamed: each choice's chunks carry its index; the texts are the same.
eval "port=\$PORT_br"
curl -sN --max-time 120 -H 'Content-Type: application/json' \
    -d "$(body 16 '"temperature":1.0,"seed":7,"ignore_eos":true,"n":3,"stream":true,"stream_options":{"include_usage":true}')" \
    "http://127.0.0.1:$port/v1/completions" >"$WORK/sse.txt"
[ "$(grep '^data: ' "$WORK/sse.txt" | tail -n 1)" = "data: [DONE]" ] || fail "stream does not end with [DONE]"
sed -n 's/^data: //p' "$WORK/sse.txt" | grep -v '^\[DONE\]$' >"$WORK/chunks.jsonl"
for i in 0 1 2; do
    got=$(jq -s -r "map(.choices[] | select(.index == $i) | .text) | join(\"\")" "$WORK/chunks.jsonl")
    [ "$got" = "$(jq -r ".choices[$i].text" "$WORK/sampled.json")" ] || fail "streamed choice $i differs"
    [ "$(jq -s -r "map(.choices[] | select(.index == $i and .finish_reason != null)) | length" "$WORK/chunks.jsonl")" = 1 ] ||
        fail "streamed choice $i: not one finish chunk"
done
[ "$(jq -s -r 'map(select(.usage != null and (.choices | length) == 0)) | .[0].usage.completion_tokens' "$WORK/chunks.jsonl")" = \
  "$(jq -r .usage.completion_tokens "$WORK/sampled.json")" ] || fail "streamed usage differs"

# best_of: the n best of the same branches by cumulative logprob.
api br POST /v1/completions "$(body 10 '"temperature":1.0,"seed":11,"n":4')"
expect_status 200 "n = 4 sampled"
echo "$BODY" >"$WORK/all.json"
api br POST /v1/completions "$(body 10 '"temperature":1.0,"seed":11,"n":2,"best_of":4')"
expect_status 200 "best_of = 4, n = 2"
[ "$(jqr '.choices | length')" = 2 ] || fail "best_of: $(jqr '.choices | length') choices"
want=$(jq -c '[.frt.choices[] | {branch, logprob, tokens}] | sort_by(-.logprob) | .[0:2]' "$WORK/all.json")
got=$(jqr '[.frt.choices[] | {branch, logprob, tokens}]' | jq -c .)
[ "$got" = "$want" ] || fail "best_of: got $got, the two best of n = 4 are $want"
b0=$(jq -r '.[0].branch' <<<"$want")
[ "$(jqr '.choices[0].text')" = "$(jq -r ".choices[$b0].text" "$WORK/all.json")" ] || fail "best_of: choice 0 is not branch $b0's text"
[ "$(jqr '.usage.completion_tokens')" = "$(jq -r .usage.completion_tokens "$WORK/all.json")" ] ||
    fail "best_of: usage does not count all 4 branches"

# refusals
api br POST /v1/completions "$(body 4 '"n":5')"
expect_error 400 invalid_value "n above --branches"
[ "$(jqr .error.param)" = n ] && jqr .error.message | grep -q -- '--branches 5' || fail "n > B: $BODY"
api br POST /v1/completions "$(body 4 '"n":2,"best_of":5')"
expect_error 400 invalid_value "best_of above --branches"
[ "$(jqr .error.param)" = best_of ] || fail "best_of > B: $BODY"
api br POST /v1/completions "$(body 4 '"n":3,"best_of":2')"
expect_error 400 invalid_value "best_of < n"
api br POST /v1/completions "$(body 4 '"best_of":2,"stream":true')"
expect_error 400 unsupported_value "best_of with stream"
api br POST /v1/completions "$(body 4 '"n":0')"
expect_error 400 invalid_value "n = 0"
api br POST /v1/completions "$(body 4 '"n":"2"')"
expect_status 400 "n as a string"
api br POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"best_of":2}'
expect_status 400 "best_of on chat"

# chat: n = 2 greedy, two equal messages; streamed chat with n > 1 is refused.
api br POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0}'
expect_status 200 "chat n = 1"
c1=$(jqr '.choices[0].message.content')
[ -n "$c1" ] || fail "chat n = 1 gave no content"
api br POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0,"n":2}'
expect_status 200 "chat n = 2"
[ "$(jqr '[.choices[].index] == [0,1]')" = true ] || fail "chat n = 2: $BODY"
[ "$(jqr '.choices[1].message.content')" = "$c1" ] && [ "$(jqr '.choices[0].message.content')" = "$c1" ] ||
    fail "chat n = 2 greedy differs from n = 1"
# chat streamed with n = 2: per-index role, content and finish chunks
curl -sN --max-time 120 -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"temperature":0,"n":2,"stream":true}' \
    "http://127.0.0.1:$port/v1/chat/completions" >"$WORK/chat_sse.txt"
[ "$(grep '^data: ' "$WORK/chat_sse.txt" | tail -n 1)" = "data: [DONE]" ] || fail "chat stream does not end with [DONE]"
sed -n 's/^data: //p' "$WORK/chat_sse.txt" | grep -v '^\[DONE\]$' >"$WORK/chat_chunks.jsonl"
for i in 0 1; do
    got=$(jq -s -r "map(.choices[] | select(.index == $i) | .delta.content // empty) | join(\"\")" "$WORK/chat_chunks.jsonl")
    [ "$got" = "$c1" ] || fail "chat stream choice $i: '$got', n = 1 gave '$c1'"
    [ "$(jq -s -r "map(.choices[] | select(.index == $i and .delta.role == \"assistant\")) | length" "$WORK/chat_chunks.jsonl")" = 1 ] ||
        fail "chat stream choice $i: not one role chunk"
    [ "$(jq -s -r "map(.choices[] | select(.index == $i and .finish_reason != null)) | length" "$WORK/chat_chunks.jsonl")" = 1 ] ||
        fail "chat stream choice $i: not one finish chunk"
done
serve_stop br
echo "serve_branches: ok"
