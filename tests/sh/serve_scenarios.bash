# serve_scenarios.bash - end-to-end scenarios of frt serve, shared by
# serve_fake.sh (the fake engine) and serve_model.sh (the demo model).
# Sourced after serve_lib.bash; each scenario starts its own servers with
# "${ENGINE[@]}" (the arguments that select the engine) and stops them.
# Exactness is checked on the generated token ids (frt.tokens), greedy.

# POST a completion; the body must come back 200.
completion() { # completion SERVER JSON WHAT
    api "$1" POST /v1/completions "$2"
    expect_status 200 "${3:-completion}"
}

tokens_of() { jq -c '.frt.tokens' <<<"$BODY"; }

# A prompt body: completion_body PROMPT MAX_TOKENS [EXTRA_JSON_MEMBERS]
# (temperature 0 unless EXTRA sets it: a member given twice is refused)
completion_body() {
    local extra=${3:-} t='"temperature":0'
    [[ $extra == *'"temperature"'* ]] && t=''
    extra=$t${t:+${extra:+,}}$extra
    printf '{"prompt":%s,"max_tokens":%s%s}' "$(jstr "$1")" "$2" "${extra:+,$extra}"
}

# The data: payloads of an SSE stream in $1, one per line, without [DONE].
sse_payloads() { sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' || true; }

scenario_basic() {
    serve_start basic "${ENGINE[@]}"
    api basic GET /health
    expect_status 200 "GET /health"
    [ "$(jqr .status)" = ok ] || fail "health: $BODY"
    api basic GET /v1/models
    expect_status 200 "GET /v1/models"
    local model
    model=$(jqr '.data[0].id')
    [ "$(jqr '.object')" = list ] && [ -n "$model" ] || fail "models: $BODY"
    api basic GET "/v1/models/$model"
    expect_status 200 "GET /v1/models/{id}"

    completion basic "$(completion_body 'def parse_args(argv):' 6)" "plain completion"
    [ "$(jqr .object)" = text_completion ] || fail "completion object: $BODY"
    [ "$(jqr '.choices[0].text | type')" = string ] || fail "completion text: $BODY"
    local fr
    fr=$(jqr '.choices[0].finish_reason')
    [ "$fr" = stop ] || [ "$fr" = length ] || fail "finish_reason $fr"
    [ "$(jqr '.usage.prompt_tokens > 0 and .usage.completion_tokens >= 1 and .usage.completion_tokens <= 6')" = true ] ||
        fail "usage: $BODY"
    [ "$(jqr '.frt | has("prefix_action") and has("cached_tokens") and has("prefill_tokens") and has("restore_ms") and has("ttft_ms")')" = true ] ||
        fail "frt object: $BODY"
    local text
    text=$(jqr '.choices[0].text')

    # the same prompt streamed: SSE chunks, [DONE], the same text (greedy)
    local port
    eval "port=\$PORT_basic"
    curl -sN --max-time 120 -H 'Content-Type: application/json' \
        -d "$(completion_body 'def parse_args(argv):' 6 '"stream":true')" \
        "http://127.0.0.1:$port/v1/completions" >"$WORK/sse.txt"
    grep -v '^$' "$WORK/sse.txt" | grep -qv '^data: ' && fail "a stream line without data: prefix"
    [ "$(grep '^data: ' "$WORK/sse.txt" | tail -n 1)" = "data: [DONE]" ] || fail "stream does not end with [DONE]"
    sse_payloads "$WORK/sse.txt" >"$WORK/chunks.jsonl"
    [ "$(jq -s 'length' "$WORK/chunks.jsonl")" -ge 2 ] || fail "too few stream chunks"
    [ "$(jq -s -r 'map(.choices[0].text) | join("")' "$WORK/chunks.jsonl")" = "$text" ] || fail "streamed text differs"
    [ "$(jq -s -r '.[-1].choices[0].finish_reason' "$WORK/chunks.jsonl")" = "$fr" ] || fail "stream finish_reason"
    [ "$(jq -s '.[-1] | has("usage") and has("frt")' "$WORK/chunks.jsonl")" = true ] || fail "final chunk lacks usage/frt"
    [ "$(jq -s '[.[:-1][] | .choices[0].finish_reason] | all(. == null)' "$WORK/chunks.jsonl")" = true ] ||
        fail "finish_reason before the final chunk"

    # chat, not streamed and streamed with include_usage
    local msgs='[{"role":"system","content":"You write Python."},{"role":"user","content":"Write a function that adds two numbers."}]'
    api basic POST /v1/chat/completions "{\"messages\":$msgs,\"max_tokens\":6,\"temperature\":0}"
    expect_status 200 "chat completion"
    [ "$(jqr '.object + " " + .choices[0].message.role')" = "chat.completion assistant" ] || fail "chat: $BODY"
    local chat_text
    chat_text=$(jqr '.choices[0].message.content')
    curl -sN --max-time 120 -H 'Content-Type: application/json' \
        -d "{\"messages\":$msgs,\"max_tokens\":6,\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
        "http://127.0.0.1:$port/v1/chat/completions" >"$WORK/sse2.txt"
    sse_payloads "$WORK/sse2.txt" >"$WORK/chunks2.jsonl"
    [ "$(jq -s -r '.[0].object + " " + .[0].choices[0].delta.role' "$WORK/chunks2.jsonl")" = "chat.completion.chunk assistant" ] ||
        fail "first chat chunk"
    [ "$(jq -s -r 'map(.choices[0].delta.content // "") | join("")' "$WORK/chunks2.jsonl")" = "$chat_text" ] ||
        fail "streamed chat text differs"
    [ "$(jq -s '.[-1].choices == [] and (.[-1].usage.total_tokens > 0)' "$WORK/chunks2.jsonl")" = true ] ||
        fail "include_usage chunk"
    [ "$(jq -s '.[-2].choices[0].finish_reason != null' "$WORK/chunks2.jsonl")" = true ] || fail "chat finish chunk"

    api basic GET /metrics
    expect_status 200 "GET /metrics"
    local m
    for m in 'frt_ttft_seconds_bucket{le="+Inf"}' frt_ttft_seconds_count 'frt_requests_total{prefix_action="rebuild"}' \
        'frt_requests_total{prefix_action="restore"}' 'frt_requests_total{prefix_action="append"}' \
        frt_prompt_tokens_total frt_generated_tokens_total 'frt_capsule_bytes{tier="device"}' \
        'frt_capsule_bytes{tier="host"}' 'frt_capsule_bytes{tier="disk"}' 'frt_capsule_restores_total{tier="host"}' \
        frt_capsule_evictions_total '# TYPE frt_ttft_seconds histogram'; do
        grep -qF "$m" <<<"$BODY" || fail "metrics lack $m"
    done
    [ "$(grep '^frt_ttft_seconds_count ' <<<"$BODY" | awk '{print $2}')" -ge 4 ] || fail "ttft count"
    serve_stop basic
    echo "  basic: ok"
}

scenario_bad_input() {
    serve_start bad "${ENGINE[@]}"
    api bad GET /v1/models
    local max_seq
    max_seq=$(jqr '.data[0].frt.max_seq')
    api bad POST /v1/completions '{"prompt": "x", "max_tokens": '
    expect_error 400 invalid_json "malformed JSON"
    api bad POST /v1/completions $'{"prompt": "\xff\xfe"}'
    expect_error 400 invalid_json "invalid UTF-8"
    api bad POST /v1/completions '[1, 2]'
    expect_error 400 invalid_type "a body that is not an object"
    api bad POST /v1/completions '{"prompt": "x", "max_tokens": "5"}'
    expect_error 400 invalid_type "max_tokens as a string"
    [ "$(jqr .error.param)" = max_tokens ] || fail "param of the type error: $BODY"
    api bad POST /v1/chat/completions '{"messages": "hello"}'
    expect_error 400 invalid_type "messages as a string"
    api bad POST /v1/chat/completions '{"messages": [{"role": "user", "content": 5}]}'
    expect_error 400 invalid_type "content as a number"
    api bad POST /v1/completions '{"max_tokens": 3}'
    expect_error 400 missing_required_parameter "no prompt"
    api bad POST /v1/completions '{"prompt": "x", "max_tokens": 0}'
    expect_error 400 invalid_value "max_tokens 0"
    api bad POST /v1/completions '{"prompt": "x", "temperature": 7}'
    expect_error 400 invalid_value "temperature 7"
    api bad POST /v1/completions '{"prompt": "x", "n": 2}'
    expect_error 400 invalid_value "n = 2 without branch slots"
    [ "$(jqr .error.param)" = n ] || fail "n = 2 without branch slots: param $(jqr .error.param)"
    api bad POST /v1/completions '{"prompt": "x", "stop": ["a","b","c","d","e"]}'
    expect_error 400 invalid_value "five stop sequences"
    api bad POST /v1/completions '{"prompt": "x", "session_id": "bad id!"}'
    expect_error 400 invalid_value "a malformed session id"
    api bad POST /v1/completions '{"prompt": [1, 2, 99999999], "max_tokens": 2}'
    expect_error 400 invalid_value "a token id outside the vocabulary"
    api bad POST /v1/completions '{"prompt": "x", "session_id": "nobody"}'
    expect_error 404 session_not_found "an unknown session"
    api bad POST /v1/chat/completions '{"messages": [{"role":"user","content":"x"}], "session_id": "nobody", "stream": true}'
    expect_error 404 session_not_found "an unknown session, streamed"
    jq -nc --argjson n $((max_seq + 1)) '{prompt: ([range($n)] | map(10)), max_tokens: 2}' >"$WORK/long.json"
    api bad POST /v1/completions "$(cat "$WORK/long.json")"
    expect_error 400 context_length_exceeded "a prompt longer than the context"
    jq -nc --argjson n $((max_seq + 1)) '{prompt: ([range($n)] | map(10)), max_tokens: 2, stream: true}' >"$WORK/long.json"
    api bad POST /v1/completions "$(cat "$WORK/long.json")"
    expect_error 400 context_length_exceeded "a prompt longer than the context, streamed"
    head -c $((9 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$WORK/big.txt"
    local port
    eval "port=\$PORT_bad"
    STATUS=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
        --data-binary "@$WORK/big.txt" "http://127.0.0.1:$port/v1/completions") || true
    BODY=$(cat "$WORK/body" 2>/dev/null || true)
    expect_error 413 request_too_large "an oversized body"
    api bad GET /v1/nothing/here
    expect_error 404 unknown_url "an unknown endpoint"
    api bad POST /v1/embeddings '{"model": "m", "input": "hello"}'
    expect_error 404 unknown_url "embeddings (not served: docs/serving.md)"
    api bad GET /v1/completions
    expect_error 405 method_not_allowed "GET on a POST endpoint"
    api bad POST /v1/sessions '{"id": "s"}'
    expect_status 200 "create session s"
    api bad POST /v1/sessions '{"id": "s"}'
    expect_error 409 session_exists "a duplicate session id"
    api bad POST /v1/sessions '{"id": 5}'
    expect_error 400 invalid_type "a numeric session id"
    api bad POST /v1/sessions/s/rollback '{"name": "never"}'
    expect_error 404 checkpoint_not_found "an unknown checkpoint"
    api bad POST /v1/sessions/nobody/rollback '{"name": "x"}'
    expect_error 404 session_not_found "rollback of an unknown session"
    api bad POST /v1/sessions/s/checkpoints '{}'
    expect_error 400 missing_required_parameter "a checkpoint without a name"
    api bad POST /v1/sessions/s/fork '{"n": 0}'
    expect_error 400 invalid_value "fork n = 0"
    api bad POST /v1/sessions/nobody/fork '{"n": 1}'
    expect_error 404 session_not_found "fork of an unknown session"
    api bad DELETE /v1/sessions/nobody
    expect_error 404 session_not_found "delete of an unknown session"
    api bad GET /v1/capsules/cap-424242
    expect_error 404 capsule_not_found "an unknown capsule"
    api bad POST /v1/capsules/cap-424242/pin
    expect_error 404 capsule_not_found "pin of an unknown capsule"
    api bad DELETE /v1/capsules/banana
    expect_error 404 capsule_not_found "a malformed capsule id"
    # and the server keeps serving
    api bad GET /health
    expect_status 200 "health after bad input"
    completion bad "$(completion_body 'still serving' 2)" "a completion after bad input"
    serve_stop bad
    echo "  bad input: ok"
}

scenario_sessions() {
    serve_start ses "${ENGINE[@]}"
    api ses POST /v1/sessions '{"id": "alice", "salt": "tenant-a", "pin": true}'
    expect_status 200 "create alice"
    [ "$(jqr '.id + " " + .object + " " + (.pinned|tostring) + " " + (.salted|tostring)')" = "alice session true true" ] ||
        fail "session object: $BODY"
    api ses POST /v1/sessions ''
    expect_status 200 "create a session without a body"
    local gen_id
    gen_id=$(jqr .id)
    [ -n "$gen_id" ] && [ "$gen_id" != null ] || fail "generated id: $BODY"
    api ses GET /v1/sessions
    [ "$(jqr '[.data[].id] | sort | join(",")')" = "$(printf '%s\n' alice "$gen_id" | sort | paste -sd,)" ] ||
        fail "session list: $BODY"
    completion ses "$(completion_body "$(gen_text 300 3)" 4 '"session_id":"alice"')" "completion on alice"
    [ "$(jqr .session_id)" = alice ] && [ "$(jqr .frt.session_id)" = alice ] || fail "session_id in response: $BODY"
    local pos
    pos=$(jqr .frt.position)
    api ses GET /v1/sessions/alice
    [ "$(jqr '.position')" = "$pos" ] && [ "$(jqr .hot)" = true ] && [ "$(jqr .pending)" != null ] ||
        fail "alice after a turn: $BODY"
    # no endpoint takes a query parameter, nor GET / DELETE a body: refused, never ignored
    api ses GET '/v1/sessions?limit=1'
    expect_error 400 unsupported_parameter "a query parameter"
    [ "$(jqr .error.param)" = limit ] || fail "query parameter: param $(jqr .error.param): $BODY"
    api ses DELETE '/v1/sessions/alice?force=true'
    expect_error 400 unsupported_parameter "a query parameter on DELETE"
    api ses DELETE /v1/sessions/alice '{"keep_capsules": true}'
    expect_error 400 unsupported_parameter "a DELETE body"
    [ "$(jqr .error.param)" = keep_capsules ] || fail "DELETE body: param $(jqr .error.param): $BODY"
    api ses GET /v1/sessions/alice '{"x": 1}'
    expect_error 400 unsupported_parameter "a GET body"
    api ses GET /v1/sessions/alice
    expect_status 200 "alice kept after the refusals"
    api ses POST /v1/sessions '{"id": "bob", "ttl": 60}'
    expect_error 400 unsupported_parameter "session create: an unknown member"
    api ses GET /v1/sessions/bob
    expect_error 404 session_not_found "a refused create made no session"
    api ses DELETE /v1/sessions/alice '{}'
    expect_status 200 "delete alice"
    [ "$(jqr .deleted)" = true ] || fail "delete: $BODY"
    api ses GET /v1/sessions/alice
    expect_error 404 session_not_found "a deleted session"
    api ses POST /v1/completions "$(completion_body x 2 '"session_id":"alice"')"
    expect_error 404 session_not_found "a completion on a deleted session"
    serve_stop ses
    echo "  sessions: ok"
}

# A restore turn equals a cold prefill of the same prompt on a fresh server.
scenario_exact_restore() {
    serve_start ra "${ENGINE[@]}"
    serve_start rb "${ENGINE[@]}"
    local sys p2
    sys=$(gen_text "$SYS_CHARS" 11)
    p2="$sys
# question two
def "
    completion ra "$(completion_body "$sys" 1 '"frt_pin_prefix":true')" "pin the prefix"
    [ "$(jqr .frt.prefix_action)" = rebuild ] || fail "first request: $BODY"
    local pinned
    pinned=$(jqr .frt.pinned_capsule)
    [ "$pinned" != null ] || fail "no pinned capsule: $BODY"
    completion ra "$(completion_body "$p2" 8)" "restore turn"
    [ "$(jqr .frt.prefix_action)" = restore ] && [ "$(jqr .frt.restored_capsule)" = "$pinned" ] || fail "restore turn: $BODY"
    [ "$(jqr ".frt.cached_tokens > 0 and .frt.cached_tokens % $C == 0")" = true ] || fail "cached tokens: $BODY"
    [ "$(jqr .usage.prompt_tokens_details.cached_tokens)" = "$(jqr .frt.cached_tokens)" ] || fail "usage cached: $BODY"
    local warm
    warm=$(tokens_of)
    completion rb "$(completion_body "$p2" 8)" "cold prefill on a fresh server"
    [ "$(jqr .frt.prefix_action)" = rebuild ] || fail "cold: $BODY"
    [ "$(tokens_of)" = "$warm" ] || fail "restore turn $warm differs from cold $(tokens_of)"
    serve_stop ra
    serve_stop rb
    echo "  restore equals cold: ok"
}

# An append turn equals the same session had it never been displaced.
scenario_exact_append() {
    serve_start aa "${ENGINE[@]}"
    serve_start ab "${ENGINE[@]}"
    local s
    for s in aa ab; do
        api "$s" POST /v1/sessions '{"id": "s1"}'
        expect_status 200 "create s1 on $s"
    done
    api aa POST /v1/sessions '{"id": "s2"}'
    local p1 t1a t1b text1 pos1
    p1=$(gen_text 500 21)
    completion aa "$(completion_body "$p1" 6 '"session_id":"s1"')" "turn 1 (displaced later)"
    t1a=$(tokens_of)
    text1=$(jqr '.choices[0].text')
    pos1=$(jqr .frt.position)
    completion ab "$(completion_body "$p1" 6 '"session_id":"s1"')" "turn 1 (never displaced)"
    t1b=$(tokens_of)
    [ "$t1a" = "$t1b" ] || fail "turn 1 differs"
    completion aa "$(completion_body "$(gen_text 300 22)" 4 '"session_id":"s2"')" "another session takes the live state"
    local h="$p1$text1
# and more
x = "
    completion aa "$(completion_body "$h" 6 '"session_id":"s1"')" "turn 2 after displacement"
    [ "$(jqr .frt.prefix_action)" = restore ] || fail "turn 2 after displacement: $BODY"
    [ "$(jqr .frt.cached_tokens)" = "$pos1" ] || fail "cached $(jqr .frt.cached_tokens), expected $pos1"
    local t2a
    t2a=$(tokens_of)
    completion ab "$(completion_body "$h" 6 '"session_id":"s1"')" "turn 2 never displaced"
    [ "$(jqr .frt.prefix_action)" = append ] && [ "$(jqr .frt.cached_tokens)" = "$pos1" ] || fail "append: $BODY"
    [ "$(tokens_of)" = "$t2a" ] || fail "turn 2 after displacement $t2a differs from never displaced $(tokens_of)"
    api aa GET /metrics
    grep -q '^frt_session_displacements_total [1-9]' <<<"$BODY" || fail "no displacement counted"
    serve_stop aa
    serve_stop ab
    echo "  append equals never displaced: ok"
}

scenario_fork_rollback() {
    serve_start fr "${ENGINE[@]}"
    api fr POST /v1/sessions '{"id": "root"}'
    local p1 text1 pos1
    p1=$(gen_text 400 31)
    completion fr "$(completion_body "$p1" 4 '"session_id":"root"')" "root turn 1"
    text1=$(jqr '.choices[0].text')
    pos1=$(jqr .frt.position)
    api fr POST /v1/sessions/root/fork '{"n": 2}'
    expect_status 200 "fork"
    [ "$(jqr '.data | length')" = 2 ] || fail "fork answer: $BODY"
    [ "$(jqr "[.data[].position] | all(. == $pos1)")" = true ] || fail "forks start at the boundary: $BODY"
    local kids h t kid first=""
    kids=$(jqr '.data[].id')
    h="$p1$text1 then"
    for kid in $kids; do
        completion fr "$(completion_body "$h" 6 "\"session_id\":\"$kid\",\"temperature\":0.7,\"seed\":7")" "branch $kid"
        [ "$(jqr .frt.prefix_action)" = restore ] && [ "$(jqr .frt.cached_tokens)" = "$pos1" ] || fail "branch: $BODY"
        t=$(tokens_of)
        [ -z "$first" ] && first=$t
        [ "$t" = "$first" ] || fail "fork branches differ: $first vs $t"
    done

    api fr POST /v1/sessions '{"id": "rb"}'
    completion fr "$(completion_body "$p1" 4 '"session_id":"rb"')" "rb turn 1"
    local h2 t2 text2 ck ckpos
    h2="$p1$(jqr '.choices[0].text') and"
    api fr POST /v1/sessions/rb/checkpoints '{"name": "turn1"}'
    expect_status 200 "checkpoint"
    ck=$(jqr .capsule)
    ckpos=$(jqr .position)
    [ "$ck" != null ] && [ "$(jqr .pinned)" = true ] || fail "checkpoint answer: $BODY"
    completion fr "$(completion_body "$h2" 5 '"session_id":"rb"')" "rb turn 2"
    [ "$(jqr .frt.prefix_action)" = append ] || fail "turn 2 appends: $BODY"
    t2=$(tokens_of)
    text2=$(jqr '.choices[0].text')
    completion fr "$(completion_body "$h2$text2 more" 3 '"session_id":"rb"')" "rb turn 3"
    api fr POST /v1/sessions/rb/rollback '{"name": "turn1", "checkpoint": "turn1"}'
    expect_error 400 invalid_value "rollback naming its checkpoint twice"
    [ "$(jqr .error.param)" = checkpoint ] || fail "rollback with name and checkpoint: $BODY"
    api fr POST /v1/sessions/rb/rollback '{"name": "turn1"}'
    expect_status 200 "rollback"
    [ "$(jqr .position)" = "$ckpos" ] && [ "$(jqr .hot)" = false ] || fail "rollback answer: $BODY"
    api fr GET /v1/sessions/rb/checkpoints
    [ "$(jqr '.data[0].name')" = turn1 ] || fail "checkpoint list: $BODY"
    completion fr "$(completion_body "$h2" 5 '"session_id":"rb"')" "rb turn 2 again"
    [ "$(jqr .frt.prefix_action)" = restore ] && [ "$(jqr .frt.restored_capsule)" = "$ck" ] || fail "after rollback: $BODY"
    [ "$(tokens_of)" = "$t2" ] || fail "turn 2 after rollback differs"
    serve_stop fr
    echo "  fork and rollback: ok"
}

scenario_capsules() {
    serve_start cp "${ENGINE[@]}"
    local sys id
    sys=$(gen_text "$SYS_CHARS" 41)
    completion cp "$(completion_body "$sys" 1 '"frt_pin_prefix":true')" "pin"
    id=$(jqr .frt.pinned_capsule)
    api cp GET /v1/capsules
    expect_status 200 "GET /v1/capsules"
    [ "$(jqr "[.data[] | select(.id == \"$id\")][0] | .kind + \" \" + (.pinned|tostring)")" = "prefix true" ] ||
        fail "capsule listing: $BODY"
    [ "$(jqr '.tiers | has("device") and has("host") and has("disk")')" = true ] || fail "tiers: $BODY"
    api cp POST "/v1/capsules/$id/unpin" '{"ttl_s": 60}'
    expect_error 400 unsupported_parameter "unpin with a body member"
    api cp GET "/v1/capsules/$id"
    [ "$(jqr .pinned)" = true ] || fail "a refused unpin changed the pin: $BODY"
    api cp POST "/v1/capsules/$id/unpin" '{}'
    expect_status 200 unpin
    [ "$(jqr .pinned)" = false ] || fail "unpin: $BODY"
    api cp POST "/v1/capsules/$id/pin"
    [ "$(jqr .pinned)" = true ] || fail "pin: $BODY"
    api cp GET "/v1/capsules/$id"
    expect_status 200 "GET one capsule"
    api cp DELETE "/v1/capsules/$id"
    expect_status 200 "delete capsule"
    [ "$(jqr .deleted)" = true ] || fail "delete: $BODY"
    api cp GET "/v1/capsules/$id"
    expect_error 404 capsule_not_found "a deleted capsule"
    completion cp "$(completion_body "$sys more" 2)" "after the delete"
    [ "$(jqr .frt.restored_capsule)" != "$id" ] || fail "restored a deleted capsule"
    serve_stop cp
    echo "  capsules: ok"
}

# Restart: the pinned prefix comes back from the disk tier, token-exact.
scenario_restart() {
    local dir="$WORK/capsules" sys p id warm
    sys=$(gen_text "$SYS_CHARS" 51)
    p="$sys
def main():
    "
    serve_start r1 "${ENGINE[@]}" --capsule-dir "$dir"
    completion r1 "$(completion_body "$sys" 1 '"frt_pin_prefix":true')" "pin before the restart"
    id=$(jqr .frt.pinned_capsule)
    api r1 GET "/v1/capsules/$id"
    [ "$(jqr .persisted)" = true ] || fail "pinned capsule not written through: $BODY"
    serve_stop r1
    ls "$dir"/*.frtc >/dev/null 2>&1 || fail "no capsule file in $dir"
    [ -f "$dir/index.sqlite" ] || fail "no index in $dir"
    serve_start r2 "${ENGINE[@]}" --capsule-dir "$dir"
    api r2 GET "/v1/capsules/$id"
    expect_status 200 "the pinned capsule after the restart"
    [ "$(jqr '.tier + " " + (.pinned|tostring) + " " + (.loaded|tostring)')" = "disk true false" ] ||
        fail "after the restart: $BODY"
    completion r2 "$(completion_body "$p" 8)" "restore from the disk tier"
    [ "$(jqr .frt.prefix_action)" = restore ] && [ "$(jqr .frt.restored_capsule)" = "$id" ] || fail "restart: $BODY"
    warm=$(tokens_of)
    api r2 GET /metrics
    grep -q '^frt_capsule_restores_total{tier="disk"} 1$' <<<"$BODY" || fail "no restore from disk counted"
    serve_start r3 "${ENGINE[@]}"
    completion r3 "$(completion_body "$p" 8)" "cold on a fresh server"
    [ "$(tokens_of)" = "$warm" ] || fail "restored from disk $warm differs from cold $(tokens_of)"
    serve_stop r2
    serve_stop r3
    echo "  restart persistence: ok"
}

# The coding agent: many turns and fresh sessions sharing one large prefix.
# After the first request, every request plans restore or append.
scenario_agent() {
    serve_start ag "${ENGINE[@]}"
    local sys a turn q hist_a hist_b hist_c action n=0
    sys=$(gen_text "$SYS_CHARS" 61)
    completion ag "$(completion_body "$sys" 1 '"frt_pin_prefix":true')" "the agent's first request"
    for a in a b c; do
        api ag POST /v1/sessions "{\"id\": \"agent-$a\"}"
        eval "hist_$a=\$sys"
    done
    for turn in 1 2 3; do
        for a in a b c; do
            q=$(gen_text 60 $((turn * 10 + ${#a})))
            eval "hist_$a=\"\$hist_$a
# turn $turn
\$q\""
            local h
            eval "h=\$hist_$a"
            completion ag "$(completion_body "$h" 4 "\"session_id\":\"agent-$a\"")" "agent $a turn $turn"
            action=$(jqr .frt.prefix_action)
            [ "$action" = restore ] || [ "$action" = append ] || fail "agent $a turn $turn planned $action: $BODY"
            n=$((n + 1))
            eval "hist_$a=\"\$hist_$a\$(jqr '.choices[0].text')\""
        done
    done
    api ag GET /metrics
    grep -q '^frt_requests_total{prefix_action="rebuild"} 1$' <<<"$BODY" || fail "more than one rebuild"
    [ "$n" = 9 ] || fail "ran $n turns"
    serve_stop ag
    echo "  coding agent: ok"
}

# A client that disconnects mid-stream cancels its request; the session
# stays at its last committed token and the server keeps serving.
scenario_cancel() {
    serve_start cx "${ENGINE[@]}" "$@"
    api cx GET /v1/models
    local max_seq port
    max_seq=$(jqr '.data[0].frt.max_seq')
    eval "port=\$PORT_cx"
    api cx POST /v1/sessions '{"id": "c"}'
    local body
    body=$(printf '{"prompt":%s,"max_tokens":%d,"temperature":0,"stream":true,"ignore_eos":true,"session_id":"c"}' \
        "$(jstr "$(gen_text 100 71)")" $((max_seq - 200)))
    set +o pipefail
    curl -sN --max-time 120 -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v1/completions" |
        head -c 1500 >/dev/null
    set -o pipefail
    local busy=true
    for _ in $(seq 600); do
        api cx GET /v1/sessions/c
        busy=$(jqr '.busy or (.requests == 0)')
        [ "$busy" = false ] && break
        sleep 0.1
    done
    [ "$busy" = false ] || fail "the cancelled request did not end"
    local pos pending
    pos=$(jqr .position)
    pending=$(jqr .pending)
    [ "$pos" -lt $((max_seq - 150)) ] && [ "$pending" != null ] || fail "after cancel: $BODY"
    api cx GET /metrics
    grep -q '^frt_requests_cancelled_total 1$' <<<"$BODY" || fail "cancel not counted"
    completion cx "$(completion_body "again" 2 '"session_id":"c"')" "the session after a cancel"
    serve_stop cx
    echo "  cancel: ok"
}

# /tokenize and /detokenize (llama-server's shapes): a round trip, pieces,
# and every refusal.
scenario_tokens() {
    serve_start tok "${ENGINE[@]}"
    local text='def add(a, b): return a + b  # é'
    api tok POST /tokenize "{\"content\": $(jstr "$text")}"
    expect_status 200 "tokenize"
    local ids
    ids=$(jq -c '.tokens' <<<"$BODY")
    check "tokenize: a non-empty array of ids" jq -e '.tokens | length > 0 and all(type == "number")' <<<"$BODY" >/dev/null
    api tok POST /detokenize "{\"tokens\": $ids}"
    expect_status 200 "detokenize"
    [ "$(jqr .content)" = "$text" ] || fail "detokenize(tokenize(text)) != text: $BODY"
    api tok POST /tokenize "{\"content\": $(jstr "$text"), \"with_pieces\": true, \"add_special\": false, \"parse_special\": true}"
    expect_status 200 "tokenize with pieces"
    [ "$(jq -c '[.tokens[].id]' <<<"$BODY")" = "$ids" ] || fail "with_pieces: other ids: $BODY"
    check "pieces: strings or byte arrays" jq -e 'all(.tokens[]; (.piece | type == "string") or (.piece | type == "array" and all(type == "number")))' <<<"$BODY" >/dev/null
    api tok POST /detokenize '{"tokens": []}'
    expect_status 200 "detokenize of nothing"
    [ "$(jqr .content)" = "" ] || fail "detokenize []: $BODY"
    api tok POST /tokenize '{}'
    expect_error 400 missing_required_parameter "tokenize without content"
    api tok POST /tokenize '{"content": 5}'
    expect_error 400 invalid_type "tokenize: content not a string"
    api tok POST /tokenize '{"content": "x", "add_special": true}'
    expect_error 400 unsupported_value "tokenize: add_special true"
    api tok POST /tokenize '{"content": "x", "parse_special": false}'
    expect_error 400 unsupported_value "tokenize: parse_special false"
    api tok POST /tokenize '{"content": "x", "with_pieces": "yes"}'
    expect_error 400 invalid_type "tokenize: with_pieces not a boolean"
    api tok POST /tokenize '{"content": "x", "model": "m"}'
    expect_error 400 unsupported_parameter "tokenize: an unknown member"
    api tok POST /tokenize '{"content": '
    expect_error 400 invalid_json "tokenize: malformed JSON"
    api tok POST /detokenize '{"tokens": [1, -1]}'
    expect_error 400 invalid_value "detokenize: a negative id"
    api tok POST /detokenize '{"tokens": [1, 99999999]}'
    expect_error 400 invalid_value "detokenize: an id outside the vocabulary"
    api tok POST /detokenize '{"tokens": "1,2"}'
    expect_error 400 invalid_type "detokenize: tokens not an array"
    api tok POST /detokenize '{"tokens": [1.5]}'
    expect_error 400 invalid_type "detokenize: a non-integer id"
    api tok GET /tokenize
    expect_error 405 method_not_allowed "GET /tokenize"
    serve_stop tok
    echo "  tokens: ok"
}
