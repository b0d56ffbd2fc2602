#!/usr/bin/env bash
# serve_openai_fields.sh BUILD_DIR SOURCE_DIR - the OpenAI request surface of
# frt serve (issue 19), over the fake engine on 127.0.0.1:
#   never silently ignore: every member of the OpenAI chat and completions
#     request schemas is sent with a value the server cannot honour (400
#     naming the member: unsupported_value, or invalid_type for a wrong
#     type) and with the value it honours (200); an unknown member is 400
#     unsupported_parameter;
#   tools: the schema is in the rendered prompt (frt_return_prompt); a
#     template that ignores tools gets them refused; tool_choice none
#     renders the tools and parses nothing;
#   structured output: response_format json_schema with a keyword outside
#     the subset is 400 naming the keyword (pattern, minimum, oneOf, $ref
#     recursion, additionalProperties true), malformed response_format /
#     tool_choice members are 400 naming them, and the fake engine (which
#     cannot constrain its output) refuses json_object and tool_choice
#     required; serve_agent.sh runs them on real checkpoints;
#   tool calls (the fake engine scripted with --fake-reply): message.tool_calls
#     and finish_reason "tool_calls", streamed as delta.tool_calls chunks that
#     reassemble to the same call; malformed JSON stays content;
#   reasoning: <think>..</think> -> reasoning_content (whole and streamed),
#     chat_template_kwargs.enable_thinking opening <think> in the prompt;
#   an agent turn: the history with the assistant's tool call and the tool
#     result continues the session by append (no rebuild).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"

ENGINE=(--engine fake --prefill-chunk 64 --max-seq 4096 --quiet)
MSG='"messages":[{"role":"user","content":"hi"}]'

# ---- never silently ignore ------------------------------------------------------------------------
serve_start f "${ENGINE[@]}"
# field  refused-value  honoured-value  (for each endpoint that has it)
CHAT_FIELDS=$(cat <<'EOF'
frequency_penalty	0.5	0
presence_penalty	-1	0
repetition_penalty	1.1	1
min_p	0.05	0
logit_bias	{"5":-100}	{}
logprobs	true	false
top_logprobs	2	0
response_format	{"type":"json_object"}	{"type":"text"}
n	2	1
service_tier	"flex"	"auto"
store	true	false
metadata	{"k":"v"}	{}
modalities	["text","audio"]	["text"]
audio	{"voice":"alloy","format":"wav"}	null
prediction	{"type":"content","content":"x"}	null
reasoning_effort	"low"	null
verbosity	"low"	null
web_search_options	{}	null
prompt_cache_key	"k"	null
functions	[{"name":"f"}]	null
function_call	"auto"	null
tool_choice	"required"	"auto"
parallel_tool_calls	false	true
stream_options	{"include_usage":true}	null
max_tokens	0	2
max_completion_tokens	0	2
temperature	3	0.5
top_p	0	0.9
top_k	-1	5
seed	"x"	7
stop	5	["\n\n"]
stream	"yes"	false
user	5	"u-1"
safety_identifier	5	"s-1"
model	5	"m"
session_id	"bad id"	null
frt_pin_prefix	"x"	false
ignore_eos	"x"	true
chat_template_kwargs	[1]	{"enable_thinking":false}
frt_return_prompt	"x"	true
tools	{}	[]
EOF
)
COMPLETION_FIELDS=$(cat <<'EOF'
frequency_penalty	0.5	0
presence_penalty	-1	0
repetition_penalty	1.1	1
min_p	0.05	0
logit_bias	{"5":-100}	{}
logprobs	2	null
top_logprobs	2	0
response_format	{"type":"json_object"}	{"type":"text"}
n	2	1
best_of	2	1
echo	true	false
suffix	"}"	""
service_tier	"priority"	"default"
store	true	false
metadata	{"k":"v"}	{}
prompt_cache_key	"k"	null
max_tokens	0	2
temperature	-1	0
top_p	1.5	1
seed	1.5	7
stop	["a","b","c","d","e"]	"zz"
stream	1	false
user	[]	"u-1"
EOF
)
walk() { # walk PATH BASE_MEMBERS LIST
    local path=$1 base=$2 list=$3 field bad good code param n=0
    while IFS=$'\t' read -r field bad good; do
        [ -n "$field" ] || continue
        base=$2 # with max_tokens 2, unless that is the member walked (a member given twice is refused)
        [ "$field" = max_tokens ] || base="$base,\"max_tokens\":2"
        api f POST "$path" "{$base,\"$field\":$bad}"
        [ "$STATUS" = 400 ] || fail "$path $field=$bad: HTTP $STATUS, expected 400: $BODY"
        code=$(jqr .error.code)
        param=$(jqr .error.param)
        case "$code" in unsupported_value | invalid_value | invalid_type) ;;
        *) fail "$path $field=$bad: error code $code: $BODY" ;; esac
        [ "${param%%.*}" = "$field" ] || fail "$path $field=$bad: the error names '$param': $BODY"
        api f POST "$path" "{$base,\"$field\":$good}"
        expect_status 200 "$path $field=$good"
        n=$((n + 1))
    done <<<"$list"
    echo "  $path: $n fields refused with a bad value and honoured with a good one"
}
walk /v1/chat/completions "$MSG" "$CHAT_FIELDS"
walk /v1/completions '"prompt":"hi"' "$COMPLETION_FIELDS"
api f POST /v1/chat/completions "{$MSG,\"frobnicate\":1}"
expect_error 400 unsupported_parameter "an unknown chat field"
[ "$(jqr .error.param)" = frobnicate ] || fail "unknown field param: $BODY"
api f POST /v1/completions '{"prompt":"hi","messages":[]}'
expect_error 400 unsupported_parameter "messages in a text completion"
api f POST /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"prompt":"x"}'
expect_error 400 unsupported_parameter "prompt in a chat completion"
# stream_options is read by the streaming path only; include_obfuscation is refused there
api f POST /v1/chat/completions "{$MSG,\"max_tokens\":2,\"stream\":false,\"stream_options\":{\"include_usage\":true}}"
expect_error 400 invalid_value "stream_options with stream false"
[ "$(jqr .error.message)" = "'stream_options' is only allowed when 'stream' is true" ] || fail "stream_options: $BODY"
api f POST /v1/chat/completions "{$MSG,\"max_tokens\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
expect_status 200 "stream_options with stream true"
api f POST /v1/chat/completions \
    "{$MSG,\"max_tokens\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true,\"include_obfuscation\":true}}"
expect_error 400 unsupported_value "include_obfuscation true"
[ "$(jqr .error.param)" = stream_options.include_obfuscation ] || fail "include_obfuscation param: $BODY"
# an empty stop string would never match: refused, naming the element
api f POST /v1/completions '{"prompt":"hi","max_tokens":2,"stop":["x",""]}'
expect_error 400 invalid_value "an empty stop string"
[ "$(jqr .error.param)" = 'stop[1]' ] || fail "empty stop param: $BODY"
api f POST /v1/completions '{"prompt":"hi","max_tokens":2,"stop":""}'
expect_error 400 invalid_value "stop \"\""
# a member given twice would keep only its last value: the body is refused
api f POST /v1/completions '{"prompt":"hi","max_tokens":2,"temperature":0,"temperature":1.5}'
expect_error 400 invalid_json "a member given twice"
check "the message names the duplicate: $BODY" grep -q 'duplicate object key' <<<"$(jqr .error.message)"

# ---- messages: every role and field an agent sends -------------------------------------------------
HIST='[{"role":"developer","content":"Be brief."},
 {"role":"user","content":[{"type":"text","text":"weather "},{"type":"text","text":"in Paris?"}]},
 {"role":"assistant","content":null,"reasoning_content":"need the tool",
  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
 {"role":"tool","tool_call_id":"call_1","content":"18 C, sunny"},
 {"role":"user","content":"thanks","name":"ann"}]'
TOOLS='[{"type":"function","function":{"name":"get_weather","description":"Current weather",
 "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
api f POST /v1/chat/completions "{\"messages\":$HIST,\"tools\":$TOOLS,\"max_tokens\":2,\"frt_return_prompt\":true}"
expect_status 200 "a history with developer, text parts, a tool call and its result"
P=$(jqr .frt.prompt)
check "developer becomes system: $P" grep -qF '<|im_start|>system' <<<"$P"
check "text parts joined: $P" grep -qF 'weather in Paris?' <<<"$P"
check "the tool call rendered: $P" grep -qF '<tool_call>' <<<"$P"
check "the tool result rendered: $P" grep -qF '<|im_start|>tool' <<<"$P"
check "the tool schema in the prompt: $P" grep -qF '"required": ["city"]' <<<"$P"
check "the tool description in the prompt: $P" grep -qF 'Current weather' <<<"$P"
bad_msg() { # bad_msg MESSAGES CODE PARAM WHAT (CODE "": must be accepted)
    api f POST /v1/chat/completions "{\"messages\":$1,\"max_tokens\":2}"
    if [ -z "$2" ]; then expect_status 200 "accepted messages $1"; return; fi
    expect_error 400 "$2" "$4"
    [ "$(jqr .error.param)" = "$3" ] || fail "$4: param $(jqr .error.param), expected $3: $BODY"
}
bad_msg '[{"role":"user","content":"x","tool_call_id":"a"}]' unsupported_parameter tool_call_id "tool_call_id on a user message"
bad_msg '[{"role":"function","content":"x"}]' invalid_value 'messages[0].role' "the function role"
bad_msg '[{"role":"tool","content":"x"}]' missing_required_parameter 'messages[0].tool_call_id' "a tool result without its call id"
bad_msg '[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]' unsupported_value 'messages[0].content' "an image part"
bad_msg '[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f"}}]}]' missing_required_parameter 'messages[0].tool_calls[0].function.arguments' "a tool call without arguments"
bad_msg '[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"},"x":1}]}]' unsupported_parameter x "an unknown tool call field"
bad_msg '[{"role":"user","content":5}]' invalid_type 'messages[0].content' "a number as content"
bad_msg '[{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}]' unsupported_parameter cache_control "an unknown text part field"
bad_msg '[{"role":"assistant","content":"a","refusal":"no"}]' unsupported_value 'messages[0].refusal' "a refusal sent back"
bad_msg '[{"role":"assistant","content":"a","annotations":[]}, {"role":"user","content":"b"}]' "" "" ""
bad_msg '[{"role":"assistant","content":"a","reasoning_content":5}]' invalid_type 'messages[0].reasoning_content' "a number as reasoning"
bad_msg '[{"role":"assistant","tool_calls":{}}]' invalid_type 'messages[0].tool_calls' "tool_calls not a list"
bad_msg '[{"role":"assistant","tool_calls":[{"id":"a","type":"custom","function":{"name":"f","arguments":"{}"}}]}]' unsupported_value 'messages[0].tool_calls[0]' "a custom tool call"
bad_msg '[{"role":"assistant","tool_calls":[{"id":"a","function":"f"}]}]' invalid_type 'messages[0].tool_calls[0].function' "a tool call function not an object"
bad_msg '[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}","parsed_arguments":{"x":1}}}]}]' unsupported_value 'messages[0].tool_calls[0].function.parsed_arguments' "parsed_arguments sent back"
bad_msg '"hi"' invalid_type messages "messages not a list"
bad_msg '[]' invalid_value messages "no messages"
bad_msg '["hi"]' invalid_type 'messages[0]' "a message not an object"
bad_msg '[{"content":"x"}]' missing_required_parameter 'messages[0].role' "a message without a role"
bad_tool() { # bad_tool TOOLS CODE PARAM WHAT
    api f POST /v1/chat/completions "{$MSG,\"tools\":$1,\"max_tokens\":2}"
    expect_error 400 "$2" "$4"
    [ "$(jqr .error.param)" = "$3" ] || fail "$4: param $(jqr .error.param), expected $3: $BODY"
}
bad_tool '[{"type":"web_search"}]' unsupported_value 'tools[0]' "a non-function tool"
bad_tool '[{"type":"function","function":"f"}]' invalid_type 'tools[0].function' "a tool function not an object"
bad_tool '[{"type":"function","function":{"name":"f","parameters":[]}}]' invalid_type 'tools[0].function.parameters' "parameters not a schema object"
bad_tool '[{"type":"function","function":{"name":"f","strict":"yes"}}]' invalid_type 'tools[0].function.strict' "strict not a boolean"
bad_tool '[{"type":"function","function":{"name":"f","x":1}}]' unsupported_parameter x "an unknown tool function field"
bad_tool '["f"]' invalid_type 'tools[0]' "a tool not an object"
api f POST /v1/chat/completions "{$MSG,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"strict\":true}}]}"
expect_error 400 unsupported_value "a strict tool"
api f POST /v1/chat/completions "{$MSG,\"tools\":[{\"type\":\"function\",\"function\":{\"description\":\"d\"}}]}"
expect_error 400 missing_required_parameter "a tool without a name"
api f POST /v1/chat/completions "{$MSG,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}"
expect_error 400 invalid_value "a named tool_choice without tools"
api f POST /v1/chat/completions "{$MSG,\"tool_choice\":\"sometimes\"}"
expect_error 400 invalid_value "an unknown tool_choice"
api f POST /v1/chat/completions "{$MSG,\"chat_template_kwargs\":{\"messages\":[]}}"
expect_error 400 invalid_value "chat_template_kwargs setting messages"

# ---- structured output: what the grammar compiler refuses, at parse time --------------------------
bad_format() { # bad_format EXTRA_MEMBERS STATUS CODE PARAM WHAT
    api f POST /v1/chat/completions "{$MSG,\"max_tokens\":2,$1}"
    expect_error "$2" "$3" "$5"
    [ "$(jqr .error.param)" = "$4" ] || fail "$5: param $(jqr .error.param), expected $4: $BODY"
}
rf() { printf '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":%s}}' "$1"; }
bad_format "$(rf '{"type":"string","pattern":"a+"}')" 400 unsupported_value pattern "a schema with pattern"
bad_format "$(rf '{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}')" 400 unsupported_value minimum \
    "a nested minimum"
bad_format "$(rf '{"type":"object","additionalProperties":true}')" 400 unsupported_value additionalProperties \
    "additionalProperties: true"
bad_format "$(rf '{"$defs":{"n":{"properties":{"n":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}')" 400 unsupported_value \
    '$ref' "a recursive \$ref"
bad_format "$(rf '{"oneOf":[{}]}')" 400 unsupported_value oneOf "oneOf"
bad_format "$(rf '{"type":"strin"}')" 400 invalid_value type "an unknown type"
bad_format '"response_format":{"type":"xml"}' 400 invalid_value response_format.type "an unknown response_format type"
bad_format '"response_format":{"type":"json_schema","json_schema":{"schema":{}}}' 400 missing_required_parameter \
    response_format.json_schema.name "a json_schema without a name"
bad_format '"response_format":{"type":"json_schema","json_schema":{"name":"x"}}' 400 missing_required_parameter \
    response_format.json_schema.schema "a json_schema without a schema"
bad_format '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{},"extra":1}}' 400 \
    unsupported_parameter extra "an unknown json_schema member"
bad_format '"response_format":{"type":"json_object","json_schema":{}}' 400 invalid_value response_format.json_schema \
    "json_schema beside json_object"
bad_format '"tool_choice":"required"' 400 invalid_value tool_choice "tool_choice required without tools"
bad_format "\"tools\":$TOOLS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}" 400 invalid_value \
    tool_choice "a named tool_choice that names no tool"
FMT_TOOLS='[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}]'
bad_format "\"tools\":$FMT_TOOLS,\"tool_choice\":\"required\"" 400 unsupported_value format \
    "tool parameters outside the subset under tool_choice required"
bad_format "\"tools\":$TOOLS,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}" 400 \
    invalid_value response_format "a JSON response_format with a forced tool call"
# the fake engine cannot constrain its output: a well-formed request is refused, naming the member
bad_format '"response_format":{"type":"json_object"}' 400 unsupported_value response_format \
    "json_object on the fake engine"
bad_format "\"tools\":$TOOLS,\"tool_choice\":\"required\"" 400 unsupported_value tool_choice \
    "tool_choice required on the fake engine"
api f POST /v1/completions '{"prompt":"hi","max_tokens":2,"response_format":{"type":"json_object"}}'
expect_error 400 unsupported_value "json_object on the fake engine (completions)"
serve_stop f
echo "  messages, tools, tool_choice, chat_template_kwargs, response_format: validated"

# ---- a template that ignores tools gets them refused ----------------------------------------------
serve_start nt "${ENGINE[@]}" --fake-no-tools
api nt POST /v1/chat/completions "{$MSG,\"tools\":$TOOLS,\"max_tokens\":2}"
expect_error 400 unsupported_value "tools the template ignores"
[ "$(jqr .error.param)" = tools ] || fail "ignored tools: param: $BODY"
api nt POST /v1/chat/completions "{$MSG,\"max_tokens\":2}"
expect_status 200 "the same model without tools"
serve_stop nt
echo "  tools a template ignores: refused"

# ---- tool calls parsed from the output, whole and streamed ----------------------------------------
REPLY=$'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'
serve_start tc "${ENGINE[@]}" --fake-reply "$REPLY"
api tc POST /v1/chat/completions "{$MSG,\"tools\":$TOOLS}"
expect_status 200 "a reply with tool calls"
[ "$(jqr .choices[0].finish_reason)" = tool_calls ] || fail "finish_reason: $BODY"
[ "$(jqr .choices[0].message.content)" = Checking. ] || fail "content before the calls: $BODY"
[ "$(jqr '[.choices[0].message.tool_calls[].function.name] | join(",")')" = get_weather,get_time ] || fail "calls: $BODY"
[ "$(jqr '.choices[0].message.tool_calls[0].function.arguments | fromjson | .city')" = Paris ] || fail "arguments: $BODY"
[ "$(jqr '[.choices[0].message.tool_calls[] | (.id | startswith("call_")) and .type == "function"] | all')" = true ] ||
    fail "ids and types: $BODY"
WHOLE=$(jqr '[.choices[0].message.tool_calls[].function | [.name, .arguments]]')
# streamed: reassemble the deltas as the official clients do
curl -sN --max-time 60 -H 'Content-Type: application/json' "http://127.0.0.1:$PORT_tc/v1/chat/completions" \
    -d "{$MSG,\"tools\":$TOOLS,\"stream\":true}" >"$WORK/sse"
sed -n 's/^data: //p' "$WORK/sse" | grep -v '^\[DONE\]$' | jq -s '.' >"$WORK/chunks.json"
ASM=$(jq -c '[.[].choices[0].delta.tool_calls // [] | .[]] | group_by(.index) |
    map({name: (map(.function.name // "") | add), arguments: (map(.function.arguments // "") | add),
         id: (map(.id // "") | add)}) | map([.name, .arguments])' "$WORK/chunks.json")
[ "$ASM" = "$(jq -c . <<<"$WHOLE")" ] || fail "streamed tool calls reassemble to $ASM, not $WHOLE"
[ "$(jq -r '[.[].choices[0].delta.content // empty] | add' "$WORK/chunks.json")" = Checking. ] || fail "streamed content"
[ "$(jq -r '.[-1].choices[0].finish_reason' "$WORK/chunks.json")" = tool_calls ] || fail "streamed finish_reason"
# tool_choice none: the tools are rendered, the output is not parsed
api tc POST /v1/chat/completions "{$MSG,\"tools\":$TOOLS,\"tool_choice\":\"none\",\"frt_return_prompt\":true}"
expect_status 200 "tool_choice none"
[ "$(jqr .choices[0].finish_reason)" = stop ] || fail "none: finish_reason: $BODY"
[ "$(jqr '.choices[0].message | has("tool_calls")')" = false ] || fail "none: tool calls parsed: $BODY"
check "none: the calls stay content" grep -qF '<tool_call>' <<<"$(jqr .choices[0].message.content)"
check "none: the tools are rendered" grep -qF get_weather <<<"$(jqr .frt.prompt)"
# without tools nothing is parsed either
api tc POST /v1/chat/completions "{$MSG}"
[ "$(jqr '.choices[0].message | has("tool_calls")')" = false ] || fail "no tools: tool calls parsed: $BODY"
serve_stop tc
serve_start mal "${ENGINE[@]}" --fake-reply $'<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'
api mal POST /v1/chat/completions "{$MSG,\"tools\":$TOOLS}"
expect_status 200 "a malformed tool call"
[ "$(jqr .choices[0].finish_reason)" = stop ] || fail "malformed: finish_reason: $BODY"
check "malformed: returned as content" grep -qF '"city": }' <<<"$(jqr .choices[0].message.content)"
serve_stop mal
echo "  tool calls: whole, streamed (reassembled), none, malformed: ok"

# ---- reasoning -------------------------------------------------------------------------------------
serve_start th "${ENGINE[@]}" --fake-reply $'<think>\nThe user greets.\n</think>\n\nHello!'
api th POST /v1/chat/completions "{$MSG}"
jq -e '.choices[0].message.reasoning_content == "\nThe user greets.\n"' <<<"$BODY" >/dev/null || fail "reasoning_content: $BODY"
[ "$(jqr .choices[0].message.content)" = 'Hello!' ] || fail "content after reasoning: $BODY"
curl -sN --max-time 60 -H 'Content-Type: application/json' "http://127.0.0.1:$PORT_th/v1/chat/completions" \
    -d "{$MSG,\"stream\":true}" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -s '.' >"$WORK/chunks.json"
jq -e '[.[].choices[0].delta.reasoning_content // empty] | add == "\nThe user greets.\n"' "$WORK/chunks.json" >/dev/null ||
    fail "streamed reasoning"
[ "$(jq -r '[.[].choices[0].delta.content // empty] | add' "$WORK/chunks.json")" = 'Hello!' ] || fail "streamed content"
serve_stop th
serve_start op "${ENGINE[@]}" --fake-reply $'plan\n</think>\n\nDone.'
api op POST /v1/chat/completions "{$MSG,\"chat_template_kwargs\":{\"enable_thinking\":true},\"frt_return_prompt\":true}"
check "enable_thinking opens <think> in the prompt" grep -qF $'assistant\n<think>' <<<"$(jqr .frt.prompt)"
jq -e '.choices[0].message.reasoning_content == "plan\n"' <<<"$BODY" >/dev/null || fail "opened reasoning: $BODY"
[ "$(jqr .choices[0].message.content)" = Done. ] || fail "content after opened reasoning: $BODY"
api op POST /v1/chat/completions "{$MSG,\"chat_template_kwargs\":{\"enable_thinking\":false},\"frt_return_prompt\":true}"
check "enable_thinking false closes it" grep -qF $'<think>\n\n</think>' <<<"$(jqr .frt.prompt)"
serve_stop op
echo "  reasoning: whole, streamed, opened by the prompt: ok"

# ---- an agent turn continues its session by append --------------------------------------------------
serve_start ag "${ENGINE[@]}" --fake-reply $'<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
api ag POST /v1/sessions '{"id":"agent"}'
expect_status 200 "session"
U='{"role":"user","content":"weather in Paris?"}'
api ag POST /v1/chat/completions "{\"messages\":[$U],\"tools\":$TOOLS,\"session_id\":\"agent\"}"
expect_status 200 "agent turn 1"
CALL=$(jq -c '.choices[0].message' <<<"$BODY")
TURN2="{\"messages\":[$U,$CALL,{\"role\":\"tool\",\"tool_call_id\":$(jqr .choices[0].message.tool_calls[0].id | jq -R .),\"content\":\"18 C\"}],\"tools\":$TOOLS,\"session_id\":\"agent\"}"
api ag POST /v1/chat/completions "$TURN2"
expect_status 200 "agent turn 2"
[ "$(jqr .frt.prefix_action)" = append ] || fail "turn 2 with the tool result: $(jqr .frt.prefix_action), expected append: $BODY"
serve_stop ag
echo "  agent turn with a tool call and its result: append"
echo "PASS serve_openai_fields"
