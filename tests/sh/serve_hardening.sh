#!/usr/bin/env bash
# serve_hardening.sh BUILD_DIR SOURCE_DIR - frt serve against hostile or
# careless clients (issue 22), over the fake engine on 127.0.0.1:
#   slow clients: 200 half-open connections from one address, then /health
#     and a completion from another still answer; idle connections are closed
#   limits: max_tokens beyond the context (400), the server's token cap (400),
#     the wall-time limit per request (finish "length", frt.time_limited),
#     the queue deadline (503 queue_timeout + Retry-After, queue depth in /metrics)
#   --api-key (401 in the OpenAI shape, never logged), --cors-origin, the Host
#     allow-list of loopback binds, Content-Type: application/json (415),
#     ids in URLs refused, not truncated, the warning for a non-loopback bind.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

ENGINE=(--engine fake --prefill-chunk 64 --max-seq 4096 --quiet)

# curl with extra arguments: raw NAME PATH CURL_ARGS... (status in $STATUS, body in $BODY, headers in $WORK/headers)
raw() {
    local name=$1 path=$2 port
    shift 2
    eval "port=\$PORT_$name"
    STATUS=$(curl -s -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' --max-time 60 "$@" \
        "http://127.0.0.1:$port$path") || STATUS=000
    BODY=$(cat "$WORK/body" 2>/dev/null || true)
}

# ---- slow clients ----------------------------------------------------------------------------
serve_start slow "${ENGINE[@]}" --conn-timeout-s 3
eval "port=\$PORT_slow"
# 200 connections from 127.0.0.2 that send half a request and then nothing;
# the script keeps them open until told to stop, and reports how many the
# server has closed (the per-IP limit refuses most at once, the timeout the rest).
python3 - "$port" "$WORK/slow" <<'EOF' &
import os, socket, sys, time
port, base = int(sys.argv[1]), sys.argv[2]
socks = []
for _ in range(200):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n")
    except OSError:
        pass
    socks.append(s)
open(base + ".opened", "w").write("200\n")
deadline = time.time() + 60
while not os.path.exists(base + ".stop") and time.time() < deadline:
    time.sleep(0.1)
# the server closes idle connections after --conn-timeout-s: wait up to 30 s for all
closed = set()
deadline = time.time() + 30
while len(closed) < len(socks) and time.time() < deadline:
    for i, s in enumerate(socks):
        if i in closed:
            continue
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed.add(i)
        except BlockingIOError:
            pass
        except OSError:
            closed.add(i)
    time.sleep(0.1)
closed = len(closed)
open(base + ".closed", "w").write("%d\n" % closed)
EOF
slow_pid=$!
for _ in $(seq 300); do [ -f "$WORK/slow.opened" ] && break; sleep 0.1; done
[ -f "$WORK/slow.opened" ] || fail "the slow clients did not start"
raw slow /health --max-time 20
expect_status 200 "/health with 200 half-open connections held"
raw slow /v1/completions --max-time 20 -H 'Content-Type: application/json' -d '{"prompt":"still served","max_tokens":4}'
expect_status 200 "a completion with 200 half-open connections held"
touch "$WORK/slow.stop" # the script now waits for the server to close every idle connection
wait "$slow_pid" || fail "the slow-client script failed"
[ "$(cat "$WORK/slow.closed")" = 200 ] || fail "only $(cat "$WORK/slow.closed") of 200 idle connections were closed"
api slow GET /health
expect_status 200 "/health after the slow clients"
serve_stop slow
echo "  slow clients: ok"

# ---- limits on work ----------------------------------------------------------------------------
serve_start lim --engine fake --prefill-chunk 64 --max-seq 256 --max-tokens 40 --quiet
LONG=$(printf 'a%.0s' $(seq 240)) # 240 tokens (the fake tokenizer is byte-level)
api lim POST /v1/completions "{\"prompt\":\"$LONG\",\"max_tokens\":30}"
expect_error 400 context_length_exceeded "max_tokens beyond the context"
[ "$(jqr .error.param)" = max_tokens ] || fail "context error param: $BODY"
api lim POST /v1/completions "{\"prompt\":\"$LONG\",\"max_tokens\":17,\"ignore_eos\":true}"
expect_status 200 "max_tokens that just fits the context (240 + 17 = max_seq + 1)"
[ "$(jqr .usage.completion_tokens)" = 17 ] || fail "completion_tokens at the context's end: $BODY"
api lim POST /v1/completions '{"prompt":"hello","max_tokens":41}'
expect_error 400 invalid_value "max_tokens above --max-tokens"
[ "$(jqr .error.param)" = max_tokens ] || fail "cap error param: $BODY"
api lim POST /v1/completions '{"prompt":"hello","max_tokens":40,"ignore_eos":true}'
expect_status 200 "max_tokens at the cap"
[ "$(jqr .usage.completion_tokens)" = 40 ] || fail "completion_tokens at the cap: $BODY"
api lim POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"ignore_eos":true}'
expect_status 200 "chat without max_tokens"
[ "$(jqr .usage.completion_tokens)" = 40 ] || fail "chat without max_tokens is clamped to the cap: $BODY"
serve_stop lim

serve_start wall --engine fake --prefill-chunk 64 --max-seq 4096 --quiet --fake-delay-us 20000 --request-timeout-s 1
api wall POST /v1/completions '{"prompt":"a long one","max_tokens":1000,"ignore_eos":true}'
expect_status 200 "a request past the wall-time limit"
[ "$(jqr '.choices[0].finish_reason')" = length ] || fail "finish_reason past the time limit: $BODY"
[ "$(jqr .frt.time_limited)" = true ] || fail "frt.time_limited: $BODY"
[ "$(jqr '.usage.completion_tokens < 1000')" = true ] || fail "the time limit did not stop generation: $BODY"
api wall GET /metrics
grep -q '^frt_requests_time_limited_total 1$' <<<"$BODY" || fail "time-limited request not counted"
serve_stop wall

serve_start qd "${ENGINE[@]}" --fake-delay-us 5000 --queue-timeout-s 1
eval "port=\$PORT_qd"
curl -sN --max-time 60 -H 'Content-Type: application/json' \
    -d '{"prompt":"long running","max_tokens":2000,"ignore_eos":true,"stream":true}' \
    "http://127.0.0.1:$port/v1/completions" >/dev/null &
long_pid=$!
for _ in $(seq 300); do
    api qd GET /health
    [ "$(jqr .running)" = true ] && break
    sleep 0.1
done
[ "$(jqr .running)" = true ] || fail "the long request never ran"
curl -s -o "$WORK/wait1.out" -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
    -d '{"prompt":"waits","max_tokens":2}' "http://127.0.0.1:$port/v1/completions" >"$WORK/wait1.status" &
wait1_pid=$!
# while it waits, /metrics shows it in the queue
for _ in $(seq 50); do
    api qd GET /metrics
    grep -q '^frt_queue_depth 1$' <<<"$BODY" && break
    sleep 0.05
done
grep -q '^frt_queue_depth 1$' <<<"$BODY" || fail "queue depth not in /metrics: $(grep queue_depth <<<"$BODY")"
wait "$wait1_pid" || true
[ "$(cat "$WORK/wait1.status")" = 503 ] || fail "the queued request: HTTP $(cat "$WORK/wait1.status"), expected 503"
raw qd /v1/completions -H 'Content-Type: application/json' -d '{"prompt":"waits","max_tokens":2}'
expect_error 503 queue_timeout "a request queued past the deadline"
grep -qi '^Retry-After: [0-9]' "$WORK/headers" || fail "503 queue_timeout without Retry-After"
api qd GET /metrics
grep -q '^frt_http_rejected_queue_timeout_total 2$' <<<"$BODY" || fail "queue timeouts not counted"
kill "$long_pid" 2>/dev/null || true
wait "$long_pid" 2>/dev/null || true
serve_stop qd
echo "  limits: ok"

# ---- API key, CORS, Host, Content-Type --------------------------------------------------------
KEY=sk-test-5f2a9c41d7
serve_start key --engine fake --prefill-chunk 64 --max-seq 4096 --api-key "$KEY" --cors-origin https://app.example
raw key /v1/models
expect_error 401 invalid_api_key "no API key"
raw key /v1/models -H "Authorization: Bearer ${KEY}x"
expect_error 401 invalid_api_key "a wrong API key"
raw key /v1/models -H "Authorization: Bearer ${KEY:0:10}"
expect_error 401 invalid_api_key "a prefix of the API key"
raw key /v1/models -H "Authorization: Bearer $KEY"
expect_status 200 "the right API key"
raw key /health
expect_status 200 "/health without a key"
raw key /v1/completions -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"prompt":"hi","max_tokens":2}'
expect_status 200 "a completion with the key"
raw key /v1/models -H "Authorization: Bearer $KEY" -H 'Origin: https://evil.example'
expect_error 403 origin_not_allowed "another origin"
raw key /v1/models -H "Authorization: Bearer $KEY" -H 'Origin: https://app.example'
expect_status 200 "the allowed origin"
grep -qi '^Access-Control-Allow-Origin: https://app.example' "$WORK/headers" || fail "no Access-Control-Allow-Origin"
raw key /v1/completions -X OPTIONS -H 'Origin: https://app.example' -H 'Access-Control-Request-Method: POST'
expect_status 204 "a CORS preflight"
grep -qi '^Access-Control-Allow-Headers: .*Authorization' "$WORK/headers" || fail "preflight without Allow-Headers"
grep -q "$KEY" "$WORK/key.log" && fail "the API key appears in the log"
serve_stop key
FRT_API_KEY=$KEY serve_start envkey "${ENGINE[@]}"
raw envkey /v1/models
expect_error 401 invalid_api_key "no key with \$FRT_API_KEY set"
raw envkey /v1/models -H "Authorization: Bearer $KEY"
expect_status 200 "the key from \$FRT_API_KEY"
serve_stop envkey

serve_start web "${ENGINE[@]}" --allowed-host frt.internal
raw web /v1/completions -H 'Content-Type: text/plain' -d '{"prompt":"hi","max_tokens":2}'
expect_error 415 unsupported_media_type "a text/plain POST"
raw web /v1/completions -d 'prompt=hi'
expect_error 415 unsupported_media_type "a form POST"
raw web /v1/completions -H 'Content-Type: application/json; charset=utf-8' -d '{"prompt":"hi","max_tokens":2}'
expect_status 200 "application/json with a charset"
raw web /v1/models -H 'Origin: https://any.example'
expect_error 403 origin_not_allowed "an Origin without --cors-origin"
raw web /v1/models -H 'Host: evil.example'
expect_error 403 host_not_allowed "a foreign Host on a loopback bind (DNS rebinding)"
raw web /v1/models -H 'Host: frt.internal:8000'
expect_status 200 "an --allowed-host name"
raw web /v1/models -H 'Host: localhost:1234'
expect_status 200 "Host localhost"
echo "  key, CORS, Host, Content-Type: ok"

# ---- ids in URLs ------------------------------------------------------------------------------------
ID63=$(printf 'a%.0s' $(seq 63))
api web POST /v1/sessions "{\"id\":\"$ID63\"}"
expect_status 200 "a session with a 63-character id"
api web DELETE "/v1/sessions/${ID63}b"
expect_error 400 invalid_value "a 64-character session id in the URL"
api web GET "/v1/sessions/$ID63"
expect_status 200 "the 63-character session survives a DELETE of a longer id"
api web POST "/v1/sessions/bad%21id/fork" '{}'
expect_error 400 invalid_value "a session id with a bad character"
api web POST "/v1/sessions/${ID63}b/checkpoints" '{"name":"x"}'
expect_error 400 invalid_value "a long session id in a checkpoint URL"
serve_stop web
echo "  ids in URLs: ok"

# ---- options the server does not implement are refused, never ignored ------------------------------
serve_start opt "${ENGINE[@]}"
api opt POST /v1/completions '{"prompt":"hi","max_tokens":2,"frobnicate":{"5":10}}'
expect_error 400 unsupported_parameter "an unknown completion field"
[ "$(jqr .error.param)" = frobnicate ] || fail "unknown field param: $BODY"
api opt POST /v1/completions '{"prompt":"hi","max_tokens":2,"logit_bias":{"5":10}}'
expect_error 400 unsupported_value "logit_bias (not implemented)"
[ "$(jqr .error.param)" = logit_bias ] || fail "logit_bias param: $BODY"
api opt POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[]}'
expect_status 200 "an empty tools list"
api opt POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi","tool_calls":[]}],"max_tokens":2}'
expect_error 400 unsupported_parameter "a message field its role does not have"
api opt POST /v1/completions '{"prompt":"hi","max_tokens":2,"presence_penalty":0.5}'
expect_error 400 unsupported_value "a nonzero presence_penalty"
api opt POST /v1/completions '{"prompt":"hi","max_tokens":2,"stream":true,"stream_options":{"include_usage":true,"x":1}}'
expect_error 400 unsupported_parameter "an unknown stream option"
api opt POST /v1/sessions '{"id":"s1","ttl":60}'
expect_error 400 unsupported_parameter "an unknown session field"
api opt POST /v1/completions '{"prompt":"hi","max_tokens":2,"presence_penalty":0,"frequency_penalty":0,"user":"u-1"}'
expect_status 200 "zero penalties and user"
serve_stop opt
echo "  unknown options: ok"

# ---- a bind beyond loopback without a key warns on stderr -----------------------------------------
serve_start open "${ENGINE[@]}" --host 0.0.0.0
grep -q 'warning: binding 0.0.0.0 (beyond loopback) without --api-key' "$WORK/open.log" || fail "no warning for 0.0.0.0"
serve_stop open
serve_start closed "${ENGINE[@]}" --host 0.0.0.0 --api-key "$KEY"
grep -q 'warning' "$WORK/closed.log" && fail "a warning although a key is set"
serve_stop closed
echo "  bind warning: ok"
echo "serve_hardening: ok"
