#!/usr/bin/env bash
# tokenizer_real_goldens.sh BUILD_DIR SOURCE_DIR - frt's ids of
# tests/data/tokenizer_real/texts.json with the real Llama 3.1 and Qwen3
# tokenizers (npm, tests/sh/tokenizer_real.bash) against the ids Hugging
# Face `tokenizers` gives (tests/data/tokenizer_real/golden.json, made by
# scripts/ref/make_tokenizer_goldens.py on the GPU machine), with and
# without special tokens. Skips (77) while golden.json is absent, and
# without node/npm or network (with CI set the latter fail instead).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/tokenizer_real.bash"
GOLDEN="$(cd "$2" && pwd)/tests/data/tokenizer_real/golden.json"
[ -f "$GOLDEN" ] || { echo "SKIP: $GOLDEN absent (scripts/ref/make_tokenizer_goldens.py makes it)"; exit 77; }
tokreal_init "$1" "$2"
"$B/tests/test_tokenizer_golden" --real "$SRC/tests/data/tokenizer_real/texts.json" "$GOLDEN" "llama3_1=$L3" "qwen3=$Q3"
echo "tokenizer_real_goldens: ok"
