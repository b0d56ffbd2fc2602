#!/usr/bin/env bash
# serve_fake.sh BUILD_DIR SOURCE_DIR - frt serve end to end over the fake
# engine (a deterministic toy model whose state hash encodes prefill split
# points and decoded tokens): the HTTP API, streaming, bad input, sessions,
# fork, rollback, capsules, restart persistence, the coding-agent scenario,
# exactness of restore and append turns, cancellation, a full queue, a
# non-ChatML template. Runs without the model layer; curl on 127.0.0.1 only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
source "$HERE/serve_scenarios.bash"
serve_init "$1"

C=64
SYS_CHARS=700
ENGINE=(--engine fake --prefill-chunk $C --max-seq 4096 --quiet)

scenario_basic
scenario_bad_input
scenario_tokens
scenario_sessions
scenario_exact_restore
scenario_exact_append
scenario_fork_rollback
scenario_capsules
scenario_restart
scenario_agent
scenario_cancel --fake-delay-us 3000

# A full queue answers 503 with Retry-After, and the server drains afterwards.
serve_start q "${ENGINE[@]}" --queue 1 --fake-delay-us 5000
eval "port=\$PORT_q"
curl -sN --max-time 120 -H 'Content-Type: application/json' \
    -d '{"prompt":"long running","max_tokens":3000,"ignore_eos":true,"stream":true}' \
    "http://127.0.0.1:$port/v1/completions" >"$WORK/long.out" &
long_pid=$!
for _ in $(seq 300); do
    api q GET /health
    [ "$(jqr .running)" = true ] && break
    sleep 0.1
done
[ "$(jqr .running)" = true ] || fail "the long request never ran"
curl -s --max-time 120 -H 'Content-Type: application/json' -d '{"prompt":"queued","max_tokens":2}' \
    "http://127.0.0.1:$port/v1/completions" >"$WORK/queued.out" &
queued_pid=$!
for _ in $(seq 300); do
    api q GET /health
    [ "$(jqr .queue_depth)" = 1 ] && break
    sleep 0.1
done
[ "$(jqr .queue_depth)" = 1 ] || fail "the second request was not queued"
STATUS=$(curl -s -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' --max-time 30 -H 'Content-Type: application/json' \
    -d '{"prompt":"rejected","max_tokens":2}' "http://127.0.0.1:$port/v1/completions")
BODY=$(cat "$WORK/body")
expect_error 503 server_busy "a request on a full queue"
grep -qi '^Retry-After: ' "$WORK/headers" || fail "503 without Retry-After"
kill "$long_pid" 2>/dev/null || true
wait "$long_pid" 2>/dev/null || true
wait "$queued_pid" || fail "the queued request failed"
[ "$(jq -r .object "$WORK/queued.out")" = text_completion ] || fail "queued request answer: $(cat "$WORK/queued.out")"
api q GET /metrics
grep -q '^frt_http_rejected_busy_total 1$' <<<"$BODY" || fail "busy rejection not counted"
serve_stop q
echo "  full queue: ok"

# A chat template that is not ChatML is a clear 400 (completions still work).
serve_start nc "${ENGINE[@]}" --fake-no-chatml
api nc POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
expect_error 400 unsupported_chat_template "a non-ChatML template"
completion nc "$(completion_body "plain" 2)" "a completion with a non-ChatML template"
serve_stop nc
echo "  non-ChatML template: ok"
echo "serve_fake: ok"
