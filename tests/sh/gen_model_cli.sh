#!/usr/bin/env bash
# frt gen-model + frt inspect from the command line: a tiny checkpoint in
# one file and in shards, what inspect reports about it, the same seed
# giving the same bytes on different thread counts, and the error paths
# (unknown shape, missing arguments, a directory without a model, a broken
# weight file) failing with a message and a nonzero status.
# Usage: bash gen_model_cli.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
FRT="$BUILD/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_gen_cli.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}

out="$("$FRT" gen-model --shape tiny --seed 9 --out "$T/a" --threads 1 2>&1)"
check "gen-model tiny exits 0" test $? -eq 0
check "gen-model prints size and seconds" grep -q "GB in .* s" <<<"$out"
check "config.json written" test -s "$T/a/config.json"
check "generation_config.json written" test -s "$T/a/generation_config.json"
check "model.safetensors written" test -s "$T/a/model.safetensors"

"$FRT" gen-model --shape tiny --seed 9 --out "$T/b" --threads 2 --no-fsync >/dev/null 2>&1
check "same seed, other thread count: same bytes" cmp -s "$T/a/model.safetensors" "$T/b/model.safetensors"
"$FRT" gen-model --shape tiny --seed 10 --out "$T/c" >/dev/null 2>&1
check "other seed: other bytes" bash -c "! cmp -s '$T/a/model.safetensors' '$T/c/model.safetensors'"

ins="$("$FRT" inspect "$T/a" 2>&1)"
check "inspect exits 0" test $? -eq 0
check "inspect: architecture" grep -q "Qwen3_5ForCausalLM (model_type qwen3_5_text)" <<<"$ins"
check "inspect: layer pattern" grep -q "5 (3 linear, 2 full): L F L L F" <<<"$ins"
check "inspect: parameters" grep -q "^parameters *1671592 " <<<"$ins"
check "inspect: dtypes" grep -q "BF16 x67" <<<"$ins"
check "inspect: max context" grep -q "^max context *4096" <<<"$ins"
check "inspect: eos ids" grep -q "^eos ids *2047" <<<"$ins"
check "inspect: weights check" grep -q "all 67 weights" <<<"$ins"
check "inspect: no tokenizer" grep -q "^tokenizer *none" <<<"$ins"

printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}}, "added_tokens": [{"id": 3, "content": "<|x|>"}]}' > "$T/a/tokenizer.json"
ins="$("$FRT" inspect "$T/a" 2>&1)"
check "inspect: tokenizer summary" grep -q "BPE, vocab 3 + 1 added tokens" <<<"$ins"

"$FRT" gen-model --shape tiny --seed 9 --out "$T/s" --shard-size 1MB >/dev/null 2>&1
check "sharded: index written" test -s "$T/s/model.safetensors.index.json"
check "sharded: no single file" test ! -e "$T/s/model.safetensors"
ins="$("$FRT" inspect "$T/s" 2>&1)"
check "sharded: inspect sees 4 files" grep -q "67 tensors in 4 files" <<<"$ins"
check "sharded: weights check" grep -q "all 67 weights" <<<"$ins"

lst="$("$FRT" gen-model --list 2>&1)"
check "list: 9b parameter count" grep -q "qwen3.5-9b *8953803264" <<<"$lst"

err="$("$FRT" gen-model --shape qwen9 --out "$T/x" 2>&1)"; rc=$?
check "unknown shape: status 1" test $rc -eq 1
check "unknown shape: lists shapes" grep -q "qwen3.5-27b, tiny" <<<"$err"
"$FRT" gen-model --shape tiny >/dev/null 2>&1; rc=$?
check "missing --out: usage status 2" test $rc -eq 2
"$FRT" gen-model --shape tiny --out "$T/y" --shard-size lots >/dev/null 2>&1; rc=$?
check "bad --shard-size: status 2" test $rc -eq 2

mkdir -p "$T/empty"
err="$("$FRT" inspect "$T/empty" 2>&1)"; rc=$?
check "inspect without config.json: status 1" test $rc -eq 1
check "inspect without config.json: names the file" grep -q "config.json" <<<"$err"
cp "$T/a/config.json" "$T/empty/"
err="$("$FRT" inspect "$T/empty" 2>&1)"; rc=$?
check "inspect without weights: status 1" test $rc -eq 1
check "inspect without weights: message" grep -q "neither model.safetensors" <<<"$err"
head -c 1000 "$T/a/model.safetensors" > "$T/empty/model.safetensors"
err="$("$FRT" inspect "$T/empty" 2>&1)"; rc=$?
check "inspect of a truncated file: status 1" test $rc -eq 1
check "inspect of a truncated file: names the file" grep -q "model.safetensors" <<<"$err"
# A checkpoint that does not match its config: inspect reports and fails.
sed -i 's/"intermediate_size": 384/"intermediate_size": 400/' "$T/c/config.json"
err="$("$FRT" inspect "$T/c" 2>&1)"; rc=$?
check "mismatched config: status 1" test $rc -eq 1
check "mismatched config: names a tensor" grep -q "mlp.gate_proj.weight: expected \[400, 128\]" <<<"$err"

exit $fail
