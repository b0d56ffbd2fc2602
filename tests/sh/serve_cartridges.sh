#!/usr/bin/env bash
# serve_cartridges.sh BUILD_DIR SOURCE_DIR - cartridges through frt serve
# on a tiny-dense random-weight checkpoint (frt gen-model, with the demo
# model's tokenizer to detokenize what it generates), cpu, prefill
# chunk 64, greedy, prompts as token ids (/v1/completions):
#  - two cartridges exported from capsules of two 64-token documents
#    (test_cartridge_inject --write-capsule, frt cartridge export) and one
#    tampered copy sit in --cartridge-dir: two registered, one refused;
#  - cartridge_id X + prompt gives the tokens of a cold request whose prompt
#    is document X + prompt; cartridge_label and the static mapping
#    (--cartridge-map) route the same way; requests with different
#    cartridges, and a plain request after them, never see each other's KV;
#  - refusals: unknown id / label (404), malformed id, both fields, a
#    wrong type (400), a server without --cartridge-dir (400),
#    a model that takes no KV prefix (the qwen35 `tiny`, 400), the fake
#    engine with --cartridge-dir (refuses to start);
#  - a registry that fails (its tables dropped under the running server):
#    the request runs with a full prefill of its prompt and says so;
#  - /metrics: the exact cache hits / misses / loads / evictions (cache of
#    1) and routing counters of the sequence above, and the device
#    residency (two uploads, four hits, their bytes; listed as capsules of
#    kind cartridge, counted in the device tier);
#  - sessions: a session's first request with a cartridge gives the cold
#    tokens; its later requests (without the field, or naming it again)
#    restore / append its own capsules and give the tokens of a plain
#    session whose prompts hold the document; a fork of it restores its
#    rows and keeps the binding; another cartridge, a cartridge on a
#    session started without, frt_pin_prefix are 400; a session whose
#    capsules were deleted is rebuilt by re-injection (the tokens of its
#    fork, restored);
#  - a device budget of 0: a cartridge request is 503 insufficient_capacity
#    and a plain request after it is served;
#  - starts_with: a cartridge exported from a prefill of BOS + a system
#    turn + a document (the chat template renders {{ bos_token }} and the
#    turns) states BOS + the system turn; a chat request with that system
#    message and the cartridge gives the tokens of a cold completion of
#    cartridge rows + the rendered prompt without its first k tokens (no
#    double BOS, usage counts T + the rest); another system message, or
#    none, is 400 cartridge_mismatch (param messages); a chat session
#    started from it continues after its rows on the next turn and refuses
#    another system message there too.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"
SRC=$2
HOOK="$B/tests/test_cartridge_inject"
[ -x "$HOOK" ] || { echo "SKIP: $HOOK was not built"; exit 77; }

M="$WORK/m"
CD="$WORK/carts"
mkdir -p "$CD"
DEMO="${FRT_DEMO_MODEL:-$SRC/models/frt-demo}"
[ -f "$DEMO/tokenizer.json" ] || { echo "SKIP: no demo tokenizer ($DEMO)"; exit 77; }
"$FRT" gen-model --shape tiny-dense --seed 1 --out "$M" --quiet >/dev/null || fail "gen-model tiny-dense"
# the server detokenizes what it generates: the demo model's tokenizer (4096 ids) covers tiny-dense's 2048
cp "$DEMO/tokenizer.json" "$DEMO/tokenizer_config.json" "$M/"
doc() { python3 -c 'import sys; k=int(sys.argv[1]); print(",".join(str((i * k + 11) % 2000) for i in range(64)))' "$1"; }
DOC_A=$(doc 37)
DOC_B=$(doc 53)
PROMPT=5,17,123,9,1000,42,7
for x in A B; do
    eval "d=\$DOC_$x"
    "$HOOK" --write-capsule "$M" "$d" "$WORK/$x.cap" >/dev/null || fail "capsule of document $x"
    lab=$([ $x = A ] && echo lang:en,doc-a || echo doc-b)
    "$FRT" cartridge export "$WORK/$x.cap" -m "$M" --backend cpu --chunk 64 --max-seq 256 -o "$CD/doc-$x" \
        --labels "$lab" -q || fail "cartridge export $x"
done
cp -r "$CD/doc-A" "$CD/tampered"
printf 'x' | dd of="$CD/tampered/kv.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null

ENGINE=(-m "$M" --backend cpu --prefill-chunk 64 --max-seq 256 --threads 1)
serve_start c "${ENGINE[@]}" --cartridge-dir "$CD" --cartridge-map tiny-mapped=doc-B --cartridge-cache 1
grep -q "cartridges: 2 registered" "$WORK/c.log" || fail "two cartridges registered: $(cat "$WORK/c.log")"
grep -q "tampered refused: .*checksum" "$WORK/c.log" || fail "the tampered cartridge is reported"

# complete NAME EXTRA_JSON PROMPT_IDS -> the generated ids in $TOKENS
complete() {
    local body
    body=$(jq -nc --argjson p "[$3]" --argjson x "$2" '{prompt: $p, max_tokens: 12, temperature: 0,
           ignore_eos: true} + $x')
    api "$1" POST /v1/completions "$body"
    expect_status 200 "completion $2"
    TOKENS=$(jqr '.frt.tokens | map(tostring) | join(",")')
}

complete c '{}' "$DOC_A,$PROMPT"; COLD_A=$TOKENS
complete c '{}' "$DOC_B,$PROMPT"; COLD_B=$TOKENS
complete c '{}' "$PROMPT"; PLAIN=$TOKENS
[ "$COLD_A" != "$COLD_B" ] && [ "$COLD_A" != "$PLAIN" ] || fail "the documents do not change the tokens"

complete c '{"cartridge_id": "doc-A"}' "$PROMPT"
[ "$TOKENS" = "$COLD_A" ] || fail "cartridge doc-A + prompt: $TOKENS, cold document A + prompt: $COLD_A"
[ "$(jqr '.frt.cartridge.id') $(jqr '.frt.cartridge.tokens')" = "doc-A 64" ] || fail "frt.cartridge: $BODY"
[ "$(jqr '.usage.prompt_tokens') $(jqr '.frt.cached_tokens') $(jqr '.frt.prefill_tokens')" = "71 64 7" ] ||
    fail "usage of a cartridge request: $BODY"
complete c '{"cartridge_id": "doc-B"}' "$PROMPT"
[ "$TOKENS" = "$COLD_B" ] || fail "cartridge doc-B after doc-A: $TOKENS, cold: $COLD_B"
complete c '{"cartridge_id": "doc-A"}' "$PROMPT"
[ "$TOKENS" = "$COLD_A" ] || fail "cartridge doc-A after doc-B: $TOKENS, cold: $COLD_A"
complete c '{}' "$PROMPT"
[ "$TOKENS" = "$PLAIN" ] || fail "a plain request after cartridge requests sees their KV: $TOKENS vs $PLAIN"
complete c '{"cartridge_label": "doc-b"}' "$PROMPT"
[ "$TOKENS" = "$COLD_B" ] && [ "$(jqr '.frt.cartridge.id')" = doc-B ] || fail "cartridge_label doc-b: $BODY"
complete c '{"model": "tiny-mapped"}' "$PROMPT"
[ "$TOKENS" = "$COLD_B" ] && [ "$(jqr '.frt.cartridge.id')" = doc-B ] || fail "static mapping: $BODY"
api c POST /v1/completions "$(jq -nc --argjson p "[$PROMPT]" '{prompt: $p, max_tokens: 3, stream: true,
    cartridge_id: "doc-B"}')"
expect_status 200 "a streamed cartridge request"
grep -q '"cartridge": *{"id": *"doc-B"' <<<"$BODY" || fail "streamed: the final chunk names the cartridge: $BODY"

# refusals
req() { jq -nc --argjson x "$1" "{prompt: [$PROMPT], max_tokens: 2} + \$x"; }
api c POST /v1/completions "$(req '{"cartridge_id": "nope"}')"
expect_error 404 cartridge_not_found "unknown cartridge_id"
[ "$(jqr '.error.param')" = cartridge_id ] || fail "unknown id names the field: $BODY"
api c POST /v1/completions "$(req '{"cartridge_label": "nope"}')"
expect_error 404 cartridge_not_found "unknown cartridge_label"
api c POST /v1/completions "$(req '{"cartridge_id": "../x"}')"
expect_error 400 invalid_value "a malformed cartridge_id"
api c POST /v1/completions "$(req '{"cartridge_id": 7}')"
expect_error 400 invalid_type "a cartridge_id that is not a string"
api c POST /v1/completions "$(req '{"cartridge_id": "doc-A", "cartridge_label": "doc-b"}')"
expect_error 400 invalid_value "both cartridge fields"

# the counters: cache of 1, sequence A B A label:B map:B stream:B
api c GET /metrics
metric() { awk -v n="$1" '$1 == n { print $2 }' <<<"$BODY"; }
got="$(metric frt_cartridge_cache_hits_total) $(metric frt_cartridge_cache_misses_total) $(metric frt_cartridge_loads_total) $(metric frt_cartridge_evictions_total)"
[ "$got" = "2 4 4 3" ] || fail "cache hits/misses/loads/evictions: $got (want 2 4 4 3)"
got="$(metric frt_cartridge_routed_total) $(metric frt_cartridge_refused_total) $(metric frt_cartridge_registered) $(metric frt_cartridge_loaded)"
[ "$got" = "6 2 2 1" ] || fail "routed/refused/registered/loaded: $got (want 6 2 2 1)"
[ "$(metric frt_cartridge_loaded_bytes)" -gt 0 ] || fail "loaded bytes"
# device residency: A and B uploaded once each (64 rows x 4 layers x 2 x 2 heads x 32 x f32 = 131072 bytes each)
got="$(metric frt_cartridge_resident_misses_total) $(metric frt_cartridge_resident_hits_total) $(metric frt_cartridge_promotions_total) $(metric frt_cartridge_resident) $(metric frt_cartridge_device_bytes) $(metric frt_cartridge_resident_evictions_total)"
[ "$got" = "2 4 2 2 262144 0" ] || fail "resident misses/hits/promotions/resident/bytes/evictions: $got (want 2 4 2 2 262144 0)"
api c GET /v1/capsules
[ "$(jqr '[.data[] | select(.kind == "cartridge")] | length')" = 2 ] || fail "the resident cartridges are listed: $BODY"
[ "$(jqr '.tiers.device.bytes')" -ge 262144 ] || fail "the device tier counts the cartridges: $BODY"

# sessions started from a cartridge: the first request injects and binds, later ones continue from the
# session's state (append / restore of its capsules, which carry the rows) and equal a plain session
# whose prompts hold the document
P2=77,88,99,5
api c POST /v1/sessions '{"id": "cs"}'
api c POST /v1/sessions '{"id": "ps"}'
complete c '{"cartridge_id": "doc-A", "session_id": "cs"}' "$PROMPT"; CS1=$TOKENS
[ "$CS1" = "$COLD_A" ] || fail "a session's first request with a cartridge: $CS1, cold: $COLD_A"
complete c '{"session_id": "ps"}' "$DOC_A,$PROMPT"; PS1=$TOKENS
complete c '{"session_id": "cs"}' "$PROMPT,$CS1,$P2"; CS2=$TOKENS
[ "$(jqr '.frt.prefix_action') $(jqr '.frt.cartridge.id')" = "restore doc-A" ] ||
    fail "the session's second request restores its capsule (the cartridge routed by the binding): $BODY"
[ "$(jqr '.usage.prompt_tokens')" = $((64 + 7 + 12 + 4)) ] || fail "the session's prompt counts its rows: $BODY"
complete c '{"session_id": "ps"}' "$DOC_A,$PROMPT,$PS1,$P2"; PS2=$TOKENS
[ "$CS2" = "$PS2" ] || fail "cartridge session, second turn: $CS2; plain session with the document: $PS2"
complete c '{"session_id": "cs", "cartridge_id": "doc-A"}' "$PROMPT,$CS1,$P2,$CS2,$P2"; CS3=$TOKENS
complete c '{"session_id": "ps"}' "$DOC_A,$PROMPT,$PS1,$P2,$PS2,$P2"
[ "$CS3" = "$TOKENS" ] || fail "cartridge session, third turn (naming its cartridge again): $CS3 vs $TOKENS"
# a fork of the cartridge session inherits its rows and its binding: its turn equals the session's own
api c POST /v1/sessions/cs/fork '{"n": 1}'
expect_status 200 "fork of a cartridge session"
KID=$(jqr '.data[0].id')
complete c "{\"session_id\": \"$KID\"}" "$PROMPT,$CS1,$P2,$CS2,$P2,$CS3,$P2"; KID_T=$TOKENS
[ "$(jqr '.frt.prefix_action') $(jqr '.frt.cached_tokens')" = "restore $((64 + 7 + 12 + 4 + 12 + 4 + 11))" ] ||
    fail "the fork restores the boundary, rows included: $BODY"
api c POST /v1/completions "$(req "{\"cartridge_id\": \"doc-B\", \"session_id\": \"$KID\"}")"
expect_error 400 cartridge_mismatch "another cartridge on a fork of a doc-A session"
api c POST /v1/completions "$(req '{"cartridge_id": "doc-B", "session_id": "cs"}')"
expect_error 400 cartridge_mismatch "another cartridge on a session started from doc-A"
[ "$(jqr '.error.param')" = cartridge_id ] || fail "the mismatch names cartridge_id: $BODY"
api c POST /v1/completions "$(req '{"cartridge_id": "doc-A", "session_id": "ps"}')"
expect_error 400 cartridge_mismatch "a cartridge on a session started without one"
api c POST /v1/sessions '{"id": "cp"}'
api c POST /v1/completions "$(req '{"cartridge_id": "doc-A", "session_id": "cp", "frt_pin_prefix": true}')"
expect_error 400 unsupported_value "frt_pin_prefix with a cartridge"
[ "$(jqr '.error.param')" = frt_pin_prefix ] || fail "the pin refusal names frt_pin_prefix: $BODY"
# the session's state lost (its capsules deleted while another session is hot): rebuilt by re-injection
api c GET /v1/capsules
for id in $(jqr '.data[] | select(.owner == "cs") | .id'); do api c DELETE "/v1/capsules/$id"; done
complete c '{"session_id": "cs"}' "$PROMPT,$CS1,$P2,$CS2,$P2,$CS3,$P2"
[ "$(jqr '.frt.prefix_action') $(jqr '.frt.cached_tokens')" = "rebuild 64" ] ||
    fail "a lost cartridge session is rebuilt from its cartridge: $BODY"
# (the rebuild prefills tokens the session had decoded: not the same arithmetic in the last bits, but the
# same greedy tokens on this model, deterministically; a difference here means the rows or the prompt differ)
[ "$TOKENS" = "$KID_T" ] || fail "the rebuilt session: $TOKENS; its fork restored: $KID_T"

# the registry fails under the running server: a full prefill, said so
python3 -c 'import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute("DROP TABLE cartridge_labels"); d.execute("DROP TABLE cartridges"); d.commit()' "$CD/cartridges.sqlite"
complete c '{"cartridge_id": "doc-A"}' "$PROMPT"
[ "$TOKENS" = "$PLAIN" ] || fail "registry failure: a full prefill of the prompt: $TOKENS vs $PLAIN"
jqr '.frt.cartridge.fallback' | grep -q "registry unavailable" || fail "the fallback is reported: $BODY"
api c GET /metrics
[ "$(metric frt_cartridge_fallbacks_total)" = 1 ] || fail "fallbacks counted"
serve_stop c

# starts_with: BOS + a system turn held by the cartridge, not rendered twice
M2="$WORK/m2"
CD2="$WORK/carts2"
mkdir -p "$CD2"
cp -r "$M" "$M2"
python3 - "$M2/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["bos_token"] = "<|endoftext|>"
c["chat_template"] = ("{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['content'] + "
                      "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>' }}{% endif %}")
json.dump(c, open(sys.argv[1], "w"))
PY
SYS_TURN=$'<|im_start|>Be brief.<|im_end|>\n'
ids_of() { "$FRT" tokenize "$M2" "$1" | tr ' ' ','; }
START=$(ids_of "<|endoftext|>$SYS_TURN")
K=$(tr ',' '\n' <<<"$START" | wc -l)
"$HOOK" --write-capsule "$M2" "$START,$DOC_A" "$WORK/s.cap" >/dev/null || fail "capsule of BOS + system + document"
"$FRT" cartridge export "$WORK/s.cap" -m "$M2" --backend cpu --chunk 64 --max-seq 256 -o "$CD2/sys-doc" \
    --starts-with-text "$SYS_TURN" -q || fail "export with --starts-with-text"
[ "$("$FRT" cartridge info "$CD2/sys-doc" --json | jq -c '.starts_with | map(tostring) | join(",")' -r)" = "$START" ] ||
    fail "the manifest states BOS + the system turn ($START)"
serve_start s "${ENGINE[@]/$M/$M2}" --cartridge-dir "$CD2"
chat() { # chat SYSTEM_JSON_OR_NULL EXTRA_JSON
    jq -nc --argjson s "$1" --argjson x "$2" '{messages: ((if $s then [{role: "system", content: $s}] else [] end)
        + [{role: "user", content: "the cat"}]), max_tokens: 12, temperature: 0, ignore_eos: true,
        frt_return_prompt: true} + $x'
}
api s POST /v1/chat/completions "$(chat '"Be brief."' '{}')"
expect_status 200 "a plain chat request"
FULL=$(ids_of "$(jqr '.frt.prompt')")
[ "${FULL:0:${#START}}" = "$START" ] || fail "the rendered prompt begins with BOS + the system turn: $FULL"
REST=${FULL:${#START}+1}
api s POST /v1/chat/completions "$(chat '"Be brief."' '{"cartridge_id": "sys-doc"}')"
expect_status 200 "a chat request with the cartridge"
GOT=$(jqr '.frt.tokens | map(tostring) | join(",")')
N_REST=$(tr ',' '\n' <<<"$REST" | wc -l)
[ "$(jqr '.usage.prompt_tokens')" = $((K + 64 + N_REST)) ] && [ "$(jqr '.frt.cached_tokens')" = $((K + 64)) ] ||
    fail "usage: the cartridge's $((K + 64)) rows + $N_REST prompt tokens (not $K twice): $BODY"
complete s '{}' "$START,$DOC_A,$REST"
[ "$GOT" = "$TOKENS" ] || fail "chat with the cartridge: $GOT; cold prefill of the same conversation: $TOKENS"
api s POST /v1/chat/completions "$(chat '"Use the text."' '{"cartridge_id": "sys-doc"}')"
expect_error 400 cartridge_mismatch "another system message than the cartridge's"
[ "$(jqr '.error.param')" = messages ] || fail "the refusal names messages: $BODY"
api s POST /v1/chat/completions "$(chat null '{"cartridge_id": "sys-doc"}')"
expect_error 400 cartridge_mismatch "no system message, the cartridge holds one"
# a chat session started from the cartridge: its second turn (the whole conversation again, without the
# cartridge field) loses the stated start and follows the rows; another system message is refused there too
api s POST /v1/sessions '{"id": "chat-s"}'
api s POST /v1/chat/completions "$(chat '"Be brief."' '{"cartridge_id": "sys-doc", "session_id": "chat-s"}')"
expect_status 200 "a chat session's first turn with the cartridge"
[ "$(jqr '.frt.tokens | map(tostring) | join(",")')" = "$GOT" ] || fail "the chat session's first turn: $BODY"
ANSWER=$(jqr '.choices[0].message.content')
turn2() { jq -nc --arg a "$ANSWER" --arg s "$1" '{messages: [{role: "system", content: $s}, {role: "user", content:
    "the cat"}, {role: "assistant", content: $a}, {role: "user", content: "the cat"}], max_tokens: 4,
    temperature: 0, session_id: "chat-s"}'; }
api s POST /v1/chat/completions "$(turn2 "Be brief.")"
expect_status 200 "the chat session's second turn"
[ "$(jqr '.frt.cached_tokens')" -ge $((K + 64)) ] && [ "$(jqr '.frt.cartridge.id')" = sys-doc ] ||
    fail "the second turn continues after the cartridge's rows: $BODY"
api s POST /v1/chat/completions "$(turn2 "Use the text.")"
expect_error 400 cartridge_mismatch "another system message in a session started from the cartridge"
serve_stop s

# a server without cartridges, a model that takes none, the fake engine
serve_start plain "${ENGINE[@]}"
api plain POST /v1/completions "$(req '{"cartridge_id": "doc-A"}')"
expect_error 400 unsupported_value "cartridge_id on a server without --cartridge-dir"
serve_stop plain
"$FRT" gen-model --shape tiny --seed 5 --out "$WORK/hybrid" --quiet >/dev/null || fail "gen-model tiny"
cp "$DEMO/tokenizer.json" "$DEMO/tokenizer_config.json" "$WORK/hybrid/"
rm -f "$CD/cartridges.sqlite"
serve_start hybrid -m "$WORK/hybrid" --backend cpu --prefill-chunk 64 --max-seq 256 --threads 1 --cartridge-dir "$CD"
api hybrid POST /v1/completions "$(req '{"cartridge_id": "doc-A"}')"
expect_error 400 unsupported_value "a cartridge on the qwen35 hybrid"
[ "$(jqr '.error.param')" = cartridge_id ] && jqr '.error.message' | grep -q "not a KV cache" ||
    fail "the hybrid's refusal names the field and the reason: $BODY"
api hybrid POST /v1/completions "$(req '{}')"
expect_status 200 "a plain request on the hybrid"
serve_stop hybrid
# a device budget that cannot hold a cartridge: 503 insufficient_capacity, plain requests still served
rm -f "$CD/cartridges.sqlite"
serve_start tight "${ENGINE[@]}" --cartridge-dir "$CD" --device-budget-mb 0
api tight POST /v1/completions "$(req '{"cartridge_id": "doc-A"}')"
expect_error 503 insufficient_capacity "a cartridge larger than the device budget"
jqr '.error.message' | grep -q "device budget is 0" || fail "the 503 says why: $BODY"
api tight POST /v1/completions "$(req '{}')"
expect_status 200 "a plain request after a refused cartridge"
api tight GET /metrics
[ "$(metric frt_cartridge_insufficient_capacity_total) $(metric frt_cartridge_resident)" = "1 0" ] ||
    fail "insufficient capacity counted: $BODY"
serve_stop tight
if timeout 30 "$FRT" serve --engine fake --port 0 --cartridge-dir "$CD" >"$WORK/fake.log" 2>&1; then
    fail "the fake engine started with --cartridge-dir"
fi
grep -q "takes no cartridges" "$WORK/fake.log" || fail "fake engine refusal: $(cat "$WORK/fake.log")"
echo "serve_cartridges: ok"
