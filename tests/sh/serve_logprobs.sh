#!/usr/bin/env bash
# serve_logprobs.sh BUILD_DIR SOURCE_DIR - logprobs in the OpenAI answers of
# frt serve (the demo model on the cpu):
#   completions `logprobs: N` -> choices[0].logprobs {tokens, token_logprobs,
#     top_logprobs (dicts), text_offset}; chat `logprobs: true` +
#     `top_logprobs: K` -> choices[0].logprobs.content[] {token, logprob,
#     bytes, top_logprobs: [{token, logprob, bytes}]};
#   every logprob <= 0; the top entries sorted (logprob desc), at most N or K
#     of them, their probabilities summing to <= 1; the sampled token's
#     logprob equals its top entry when it is one; a greedy run's token is
#     the top 1; bytes are the token's UTF-8 (the token string decodes from
#     them, \xHH for a partial character); the tokens' strings make up the
#     text and text_offset counts its characters;
#   the values equal `frt generate --logprobs N --json` for the same prompt
#     (greedy and sampled with a seed);
#   streamed answers carry the same records in their chunks, in order;
#   refusals: top_logprobs 21, top_logprobs without logprobs, completions
#     logprobs 6 or true, logprobs with n > 1 (400 naming the member).
# Skips (77) without the demo model. curl on 127.0.0.1 only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"
serve_need_model "$2"
PY=/usr/bin/python3
ENGINE=(--backend cpu --prefill-chunk 64 --max-seq 512 --threads 2 --quiet)
serve_start lp "${ENGINE[@]}" --branches 2
TEXT='def parse_args(argv):'
PROMPT=$(jstr "$TEXT")

# ---- completions: shape and invariants ------------------------------------------------------------
check_completion() { # check_completion FILE N GREEDY
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, math, sys
o = json.load(open(sys.argv[1])); N = int(sys.argv[2]); greedy = sys.argv[3] == "1"
ch = o["choices"][0]; lp = ch["logprobs"]
toks, vals, tops, offs = lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], lp["text_offset"]
n = len(toks)
assert n >= 1 and n == len(vals) == len(tops) == len(offs), (n, len(vals), len(tops), len(offs))
eos = 1 if ch["finish_reason"] == "stop" and n == o["usage"]["completion_tokens"] - 1 else 0
assert n + eos == o["usage"]["completion_tokens"], (n, o["usage"])
for t, v, top in zip(toks, vals, tops):
    assert v <= 0, v
    assert len(top) == N, (top, N)
    tv = list(top.values())
    assert all(x <= 0 for x in tv) and tv == sorted(tv, reverse=True), tv
    assert sum(math.exp(x) for x in tv) <= 1 + 1e-6, tv
    if t in top: assert abs(top[t] - v) <= 1e-6, (t, top[t], v)
    if greedy and N: assert t == next(iter(top)) and v == tv[0], (t, top)
text = ch["text"]
if all("\\x" not in t for t in toks):
    assert "".join(toks) == text, ("".join(toks), text)
    pos = 0
    for t, off in zip(toks, offs):
        assert off == pos, (off, pos); pos += len(t)
assert offs[0] == 0 and offs == sorted(offs), offs
print(json.dumps({"values": vals, "tops": [list(t.values()) for t in tops], "text": text}))
EOF
}
api lp POST /v1/completions "{\"prompt\":$PROMPT,\"max_tokens\":10,\"temperature\":0,\"logprobs\":5}"
expect_status 200 "completions logprobs 5"
printf '%s' "$BODY" >"$WORK/c_greedy.json"
check "completions logprobs 5 (greedy): $BODY" check_completion "$WORK/c_greedy.json" 5 1 >"$WORK/c_greedy.vals"
api lp POST /v1/completions "{\"prompt\":$PROMPT,\"max_tokens\":10,\"temperature\":0.9,\"seed\":11,\"logprobs\":3}"
expect_status 200 "completions logprobs 3 sampled"
printf '%s' "$BODY" >"$WORK/c_sampled.json"
check "completions logprobs 3 (sampled): $BODY" check_completion "$WORK/c_sampled.json" 3 0 >"$WORK/c_sampled.vals"
api lp POST /v1/completions "{\"prompt\":$PROMPT,\"max_tokens\":4,\"temperature\":0,\"logprobs\":0}"
expect_status 200 "completions logprobs 0"
printf '%s' "$BODY" >"$WORK/c0.json"
check "completions logprobs 0: the sampled token's only: $BODY" check_completion "$WORK/c0.json" 0 1 >/dev/null
api lp POST /v1/completions "{\"prompt\":$PROMPT,\"max_tokens\":4}"
[ "$(jqr '.choices[0].logprobs')" = null ] || fail "logprobs not asked: $BODY"
echo "  completions: shapes and invariants (greedy, sampled, logprobs 0, off)"

# ---- the values of frt generate --------------------------------------------------------------------
same_as_generate() { # same_as_generate VALS_FILE GENERATE_ARGS...
    local vals=$1
    shift
    "$FRT" generate -m "$FRT_DEMO_MODEL" --backend cpu --chunk 64 --max-seq 512 --threads 2 --json -p "$TEXT" \
        -n 10 "$@" >"$WORK/gen.json" 2>/dev/null || fail "frt generate $*"
    "$PY" - "$vals" "$WORK/gen.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); g = json.load(open(sys.argv[2]))
gl = g["logprobs"][:len(s["values"])]
assert len(gl) == len(s["values"]), (len(gl), len(s["values"]))
for a, b, top in zip(s["values"], gl, s["tops"]):
    assert abs(a - b["logprob"]) <= 1e-6, (a, b)
    assert len(top) == len(b["top"]) and all(abs(x - y[1]) <= 1e-6 for x, y in zip(top, b["top"])), (top, b["top"])
assert g["text"].startswith(s["text"]), (g["text"], s["text"])
EOF
}
check "greedy logprobs differ from frt generate --logprobs 5" same_as_generate "$WORK/c_greedy.vals" --temperature 0 --logprobs 5
check "sampled logprobs differ from frt generate --seed 11 --logprobs 3" \
    same_as_generate "$WORK/c_sampled.vals" --temperature 0.9 --seed 11 --logprobs 3
echo "  completions: values equal frt generate --logprobs (greedy and seeded)"

# ---- chat -------------------------------------------------------------------------------------------
MSG='"messages":[{"role":"user","content":"write a function that adds two numbers"}]'
check_chat() { # check_chat FILE K GREEDY
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, math, sys
o = json.load(open(sys.argv[1])); K = int(sys.argv[2]); greedy = sys.argv[3] == "1"
content = o["choices"][0]["logprobs"]["content"]
assert len(content) >= 1
def entry_ok(e):
    b = bytes(e["bytes"])
    try: assert b.decode("utf-8") == e["token"], (b, e["token"])
    except UnicodeDecodeError: assert "\\x" in e["token"], e
    assert e["logprob"] <= 0, e
for e in content:
    entry_ok(e)
    top = e["top_logprobs"]
    assert len(top) == K, (len(top), K)
    for t in top: entry_ok(t)
    tv = [t["logprob"] for t in top]
    assert tv == sorted(tv, reverse=True) and sum(math.exp(x) for x in tv) <= 1 + 1e-6, tv
    same = [t for t in top if t["bytes"] == e["bytes"]]
    if same: assert abs(same[0]["logprob"] - e["logprob"]) <= 1e-6, (same, e)
    if greedy and K: assert top[0]["bytes"] == e["bytes"] and top[0]["logprob"] == e["logprob"], (top[0], e)
print(json.dumps(content))
EOF
}
api lp POST /v1/chat/completions "{$MSG,\"max_tokens\":12,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":4}"
expect_status 200 "chat logprobs greedy"
printf '%s' "$BODY" >"$WORK/ch_greedy.json"
check "chat logprobs (greedy): $BODY" check_chat "$WORK/ch_greedy.json" 4 1 >/dev/null
api lp POST /v1/chat/completions "{$MSG,\"max_tokens\":12,\"temperature\":1,\"seed\":3,\"logprobs\":true,\"top_logprobs\":20}"
expect_status 200 "chat logprobs sampled"
printf '%s' "$BODY" >"$WORK/ch_sampled.json"
check "chat logprobs (sampled, 20): $BODY" check_chat "$WORK/ch_sampled.json" 20 0 >"$WORK/ch_sampled.content"
api lp POST /v1/chat/completions "{$MSG,\"max_tokens\":3,\"logprobs\":true}"
expect_status 200 "chat logprobs without top_logprobs"
printf '%s' "$BODY" >"$WORK/ch0.json"
check "chat logprobs, top_logprobs absent: $BODY" check_chat "$WORK/ch0.json" 0 0 >/dev/null
api lp POST /v1/chat/completions "{$MSG,\"max_tokens\":3,\"logprobs\":false}"
[ "$(jqr '.choices[0].logprobs')" = null ] || fail "chat logprobs false: $BODY"
echo "  chat: shapes and invariants (greedy, sampled with 20 top entries, none, off)"

# ---- streaming --------------------------------------------------------------------------------------
stream() { # stream PATH BODY OUT
    local port
    eval "port=\$PORT_lp"
    curl -s -N --max-time 120 -H 'Content-Type: application/json' --data-binary "$2" \
        "http://127.0.0.1:$port$1" >"$3" || fail "stream $1"
}
stream /v1/completions "{\"prompt\":$PROMPT,\"max_tokens\":10,\"temperature\":0.9,\"seed\":11,\"logprobs\":3,\"stream\":true}" \
    "$WORK/c_stream.sse"
check "streamed completions logprobs differ from the whole answer" "$PY" - "$WORK/c_stream.sse" "$WORK/c_sampled.json" <<'EOF'
import json, sys
chunks = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
whole = json.load(open(sys.argv[2]))["choices"][0]["logprobs"]
got = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
for c in chunks:
    for ch in c["choices"]:
        if ch.get("logprobs"):
            for k in got: got[k] += ch["logprobs"][k]
assert got == whole, (got, whole)
EOF
stream /v1/chat/completions "{$MSG,\"max_tokens\":12,\"temperature\":1,\"seed\":3,\"logprobs\":true,\"top_logprobs\":20,\"stream\":true}" \
    "$WORK/ch_stream.sse"
check "streamed chat logprobs differ from the whole answer" "$PY" - "$WORK/ch_stream.sse" "$WORK/ch_sampled.content" <<'EOF'
import json, sys
chunks = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
whole = json.load(open(sys.argv[2]))
got = []
for c in chunks:
    for ch in c["choices"]:
        if ch.get("logprobs"): got += ch["logprobs"]["content"]
assert got == whole, (len(got), len(whole))
EOF
echo "  streaming: the chunks carry the whole answer's records, in order"

# ---- refusals ---------------------------------------------------------------------------------------
refuse() { # refuse PATH BODY PARAM WHAT
    api lp POST "$1" "$2"
    expect_status 400 "$4"
    [ "$(jqr .error.param)" = "$3" ] || fail "$4: param $(jqr .error.param): $BODY"
}
refuse /v1/chat/completions "{$MSG,\"logprobs\":true,\"top_logprobs\":21}" top_logprobs "top_logprobs 21"
refuse /v1/chat/completions "{$MSG,\"top_logprobs\":2}" top_logprobs "top_logprobs without logprobs"
refuse /v1/chat/completions "{$MSG,\"logprobs\":1}" logprobs "chat logprobs 1 (a boolean member)"
refuse /v1/completions "{\"prompt\":$PROMPT,\"logprobs\":6}" logprobs "completions logprobs 6"
refuse /v1/completions "{\"prompt\":$PROMPT,\"logprobs\":true}" logprobs "completions logprobs true"
refuse /v1/completions "{\"prompt\":$PROMPT,\"logprobs\":2,\"n\":2}" logprobs "logprobs with n 2"
refuse /v1/completions "{\"prompt\":$PROMPT,\"top_logprobs\":2}" top_logprobs "completions top_logprobs 2"
echo "  refusals: 7 requests, 400 naming the member"
echo "PASS"
