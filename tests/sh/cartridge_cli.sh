#!/usr/bin/env bash
# cartridge_cli.sh BUILD_DIR SOURCE_DIR - frt cartridge import / export /
# info and frt generate --cartridge on a tiny-dense random-weight checkpoint
# (frt gen-model), cpu, prefill chunk 64:
#  - export: a capsule of a 64-token document (written by
#    test_cartridge_inject --write-capsule), exported as a cartridge, then
#    generate --cartridge DIR --ids PROMPT gives exactly the tokens of
#    generate --ids DOCUMENT,PROMPT (the same pieces: 64 + the prompt);
#  - import: a .pt of the model's shape (scripts/ref/make_pt_like.py, the
#    ParameterList form) imported; generate --cartridge with the .pt and
#    with the imported directory give the same tokens; info reports both;
#  - refusals: a .pt of another shape, a missing cartridge, a tampered
#    payload, an unknown subcommand, import without -m;
#  - starts_with (the manifest's stated start): nothing without a
#    tokenizer; --starts-with-bos refused when the tokenizer names no
#    bos_token; with the demo tokenizer and bos_token <|endoftext|> (id 0):
#    an export whose row 0 is the BOS states [0] by itself, --starts-with-text
#    adds the text's tokens (and is refused when the rows do not begin with
#    them), an import states what the flags say; generate --cartridge drops
#    the stated start from a prompt that repeats it (and refuses a prompt
#    that is only the start).
set -u
B="$1"
SRC="$2"
FRT="$B/frt"
HOOK="$B/tests/test_cartridge_inject"
[ -x "$FRT" ] && [ -x "$HOOK" ] || { echo "no $FRT or $HOOK"; exit 1; }
T="$(mktemp -d /tmp/frt_cart_cli.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
refuse() { # refuse STATUS "MESSAGE" ARGS...: frt ARGS exits STATUS with MESSAGE on stderr
    local st="$1" want="$2"; shift 2
    "$FRT" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq "$st" ] && grep -qF -- "$want" "$T/err"; then
        echo "ok   frt $* -> $st: $want"
    else
        echo "FAIL frt $*: status $rc (want $st), stderr: $(cat "$T/err") (want: $want)"
        fail=1
    fi
}
json_field() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print(" ".join(map(str,v)) if isinstance(v,list) else v)' "$1"; }

"$FRT" gen-model --shape tiny-dense --seed 5 --out "$T/m" --quiet >/dev/null || { echo "FAIL gen-model"; exit 1; }
G=(-m "$T/m" --backend cpu --threads 1 --chunk 64 --max-seq 256 -n 12 --ignore-eos --json)
DOC=$(python3 -c 'print(",".join(str((i * 37 + 11) % 2000) for i in range(64)))')
PROMPT=5,17,123,9,1000,42,7

# export
check "capsule of the document" "$HOOK" --write-capsule "$T/m" "$DOC" "$T/doc.cap"
check "cartridge export" "$FRT" cartridge export "$T/doc.cap" -m "$T/m" --backend cpu --chunk 64 --max-seq 256 \
    -o "$T/doc" --source doc.txt --labels a,b --training-steps 0 -q
"$FRT" cartridge info "$T/doc" --json >"$T/info.json"
check "info: 64 tokens, bound, id from -o" test "$(json_field tokens <"$T/info.json") $(json_field bound <"$T/info.json") $(json_field cartridge_id <"$T/info.json")" = "64 True doc"
check "info: labels and source" test "$(json_field labels <"$T/info.json")|$(json_field source_document <"$T/info.json")" = "a b|doc.txt"
"$FRT" generate "${G[@]}" --ids "$DOC,$PROMPT" >"$T/cold.json" || fail=1
"$FRT" generate "${G[@]}" --cartridge "$T/doc" --ids "$PROMPT" >"$T/inj.json" || fail=1
check "generate --cartridge (export) = cold prefill of document + prompt" \
    test "$(json_field tokens <"$T/inj.json")" = "$(json_field tokens <"$T/cold.json")"
check "cartridge_tokens 64" test "$(json_field cartridge_tokens <"$T/inj.json")" = 64
"$FRT" generate "${G[@]}" --ids "$PROMPT" >"$T/plain.json" || fail=1
check "without the cartridge the tokens differ" \
    test "$(json_field tokens <"$T/plain.json")" != "$(json_field tokens <"$T/cold.json")"

# import
/usr/bin/python3 "$SRC/scripts/ref/make_pt_like.py" "$T" --one c.pt 4 2 32 3 5 f32 params || fail=1
/usr/bin/python3 "$SRC/scripts/ref/make_pt_like.py" "$T" --one wrong.pt 4 1 32 0 5 bf16 || fail=1
check "cartridge import" "$FRT" cartridge import "$T/c.pt" -m "$T/m" --backend cpu -o "$T/c" --id c-1 -q
"$FRT" cartridge info "$T/c.pt" --json >"$T/pt.json"
check "info of the .pt: 8 tokens, 3 frozen, unbound" test "$(json_field tokens <"$T/pt.json") $(json_field frozen_tokens <"$T/pt.json") $(json_field bound <"$T/pt.json")" = "8 3 False"
"$FRT" generate "${G[@]}" --cartridge "$T/c.pt" --ids "$PROMPT" >"$T/pt_gen.json" || fail=1
"$FRT" generate "${G[@]}" --cartridge "$T/c" --ids "$PROMPT" >"$T/dir_gen.json" || fail=1
check "generate: the .pt and its import give the same tokens" \
    test "$(json_field tokens <"$T/pt_gen.json")" = "$(json_field tokens <"$T/dir_gen.json")"

# refusals
refuse 1 "KV heads" cartridge import "$T/wrong.pt" -m "$T/m" --backend cpu -o "$T/w" -q
check "nothing written for a refused import" test ! -e "$T/w/manifest.json"
refuse 1 "no-such" generate "${G[@]}" --cartridge "$T/no-such" --ids "$PROMPT"
refuse 1 "KV heads" generate "${G[@]}" --cartridge "$T/wrong.pt" --ids "$PROMPT"
cp -r "$T/c" "$T/t"
printf 'x' | dd of="$T/t/kv.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
refuse 1 "checksum mismatch" cartridge info "$T/t"
refuse 1 "checksum mismatch" generate "${G[@]}" --cartridge "$T/t" --ids "$PROMPT"
refuse 2 "unknown command 'frobnicate'" cartridge frobnicate
refuse 2 "no model" cartridge import "$T/c.pt" -o "$T/x"

# starts_with
check "no tokenizer: the export states no start" test -z "$(json_field starts_with <"$T/info.json")"
refuse 1 "names no bos_token" cartridge import "$T/c.pt" -m "$T/m" --backend cpu -o "$T/nb" --starts-with-bos -q
DEMO="${FRT_DEMO_MODEL:-$SRC/models/frt-demo}"
if [ -f "$DEMO/tokenizer.json" ]; then
    cp "$DEMO/tokenizer.json" "$T/m/"
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["bos_token"]="<|endoftext|>"; json.dump(c,open(sys.argv[2],"w"))' \
        "$DEMO/tokenizer_config.json" "$T/m/tokenizer_config.json"
    check "capsule of BOS + <|im_start|> + document" "$HOOK" --write-capsule "$T/m" "0,1,$DOC" "$T/bos.cap"
    E=(cartridge export "$T/bos.cap" -m "$T/m" --backend cpu --chunk 64 --max-seq 256 -q)
    check "export (auto BOS)" "$FRT" "${E[@]}" -o "$T/bos"
    check "row 0 is the BOS: starts_with [0]" test "$("$FRT" cartridge info "$T/bos" --json | json_field starts_with)" = 0
    check "export --starts-with-text" "$FRT" "${E[@]}" -o "$T/bos2" --starts-with-text '<|im_start|>'
    check "starts_with [0, 1]" test "$("$FRT" cartridge info "$T/bos2" --json | json_field starts_with)" = "0 1"
    refuse 1 "does not match its tokens" "${E[@]}" -o "$T/bos3" --starts-with-text '<|im_end|>'
    check "import --starts-with-bos --starts-with-text" "$FRT" cartridge import "$T/c.pt" -m "$T/m" --backend cpu \
        -o "$T/cs" --starts-with-bos --starts-with-text '<|im_start|><|im_end|>' -q
    check "import: starts_with [0, 1, 2]" test "$("$FRT" cartridge info "$T/cs" --json | json_field starts_with)" = "0 1 2"
    # generate drops the stated start from a prompt that repeats it
    "$FRT" generate "${G[@]}" --ids "0,1,$DOC,$PROMPT" >"$T/bos_cold.json" || fail=1
    "$FRT" generate "${G[@]}" --cartridge "$T/bos2" --ids "0,1,$PROMPT" >"$T/bos_rep.json" || fail=1
    "$FRT" generate "${G[@]}" --cartridge "$T/bos2" --ids "$PROMPT" >"$T/bos_plain.json" || fail=1
    check "generate: a prompt repeating the stated start = one without it = the cold prefill" \
        test "$(json_field tokens <"$T/bos_rep.json")|$(json_field tokens <"$T/bos_plain.json")" = \
        "$(json_field tokens <"$T/bos_cold.json")|$(json_field tokens <"$T/bos_cold.json")"
    check "generate: cartridge_start_dropped 2" test "$(json_field cartridge_start_dropped <"$T/bos_rep.json")" = 2
    refuse 1 "nothing after the cartridge's stated start" generate "${G[@]}" --cartridge "$T/bos2" --ids 0,1
else
    echo "skip starts_with with a tokenizer: no demo tokenizer ($DEMO)"
fi
exit $fail
