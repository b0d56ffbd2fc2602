#!/usr/bin/env bash
# cli_args.sh BUILD_DIR SOURCE_DIR - the frt command line's shared option
# parser, end to end: every command refuses a malformed or out-of-range
# value, an unknown option and a missing value with exit status 2 and a
# message naming the option and the value; every command's --help lists
# every option it accepts with its default; --version everywhere; --quiet
# and the progress lines of gen-model (plain lines off a terminal, one
# rewritten line on a terminal).
set -u
B="$1"
SRC="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_cli_args.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
# refuse "MESSAGE" frt ARGS...: exit status 2 and MESSAGE on stderr
refuse() {
    local want="$1"; shift
    "$FRT" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" "$T/err"; then
        echo "ok   frt $* -> 2: $want"
    else
        echo "FAIL frt $*: status $rc (want 2), stderr: $(cat "$T/err") (want: $want)"
        fail=1
    fi
}

# ---- version ----------------------------------------------------------------
want_version="$(sed -n 's/^project(frt VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")"
check "project version read from CMakeLists.txt" test -n "$want_version"
check "frt --version" test "$("$FRT" --version)" = "frt $want_version"
for c in generate demo serve bench "bench exec" gen-model inspect tokenize detokenize chat-template selfcheck; do
    # shellcheck disable=SC2086
    check "frt $c --version" test "$("$FRT" $c --version)" = "frt $want_version"
done

# ---- malformed values -------------------------------------------------------
refuse "frt generate: -n/--max-tokens: '4x' is not an integer" generate -n 4x -p hi
refuse "frt generate: -n/--max-tokens: '4x' is not an integer" generate --max-tokens=4x -p hi
refuse "-n/--max-tokens: '-3' is out of range (an integer from 1 to 1048576)" generate -n -3 -p hi
refuse "-n/--max-tokens: '0' is out of range" generate -n 0 -p hi
refuse "-n/--max-tokens: '99999999999999999999' is out of range" generate -n 99999999999999999999 -p hi
refuse "--temperature: 'hot' is not a number" generate --temperature hot -p hi
refuse "--temperature: 'nan' is not a finite number" generate --temperature nan -p hi
refuse "--temperature: '-1' is out of range (a number from 0 to 100)" generate --temperature -1 -p hi
refuse "--top-p: '1.5' is out of range" generate --top-p 1.5 -p hi
refuse "--top-p: '0' is out of range" generate --top-p 0 -p hi
refuse "--top-k: '-1' is out of range" generate --top-k -1 -p hi
refuse "--seed: '-1' is out of range" generate --seed -1 -p hi
refuse "--seed: '12x' is not an integer" generate --seed 12x -p hi
refuse "--chunk: '100' is not a multiple of 64" generate --chunk 100 -p hi
refuse "--backend: 'tpu' is not one of auto, cpu, cuda" generate --backend tpu -p hi
refuse "no prompt: give -p TEXT or --ids" generate
refuse "unknown option --foo" generate --foo
refuse "unknown option -x" generate -x
refuse "-p/--prompt needs a value" generate -p
refuse "--json takes no value" generate --json=yes -p hi
refuse "unexpected argument 'stray'" generate -p hi stray
refuse "--turns: '9' is out of range (an integer from 1 to 8)" demo --turns 9
refuse "--turns: 'three' is not an integer" demo --turns three
refuse "unknown option --bogus" demo --bogus
refuse "--port: '70000' is out of range (an integer from 0 to 65535)" serve --port 70000
refuse "--port: '80a' is not an integer" serve --port 80a
refuse "--engine: 'real' is not one of model, fake" serve --engine real
refuse "--prefill-chunk: '65' is not a multiple of 64" serve --prefill-chunk 65
refuse "unknown option --frobnicate" serve --frobnicate
refuse "--parse-special-in-content: the fake engine's tokenizer has no special tokens" serve --engine fake --parse-special-in-content
refuse "--dtype: the fake engine has no weights" serve --engine fake --dtype fp8
refuse "--kv-dtype: the fake engine has no weights" serve --engine fake --kv-dtype fp8
refuse "--lm-head-dtype: the fake engine has no weights" serve --engine fake --lm-head-dtype fp8
refuse "--dtype: 'fp16' is not one of default, fp8" serve --dtype fp16
refuse "--kv-scales needs --kv-dtype fp8" serve --kv-scales "$T/scales.json"
refuse "--tune-file needs --autotune N" serve --tune-file "$T/tune.txt"
refuse "--autotune: '65' is out of range" serve --autotune 65
refuse "--policy: --dtype is an option of the LLM server" serve --policy "$T/none" --dtype fp8
refuse "--policy: --lm-head-dtype is an option of the LLM server" serve --policy "$T/none" --lm-head-dtype fp8
# an option of one mode is refused in another, never ignored
for o in "--fake-reply hi" "--fake-delay-us 5" "--fake-eos-every 3" --fake-no-chatml --fake-no-tools; do
    # shellcheck disable=SC2086
    refuse "${o%% *}: an option of the fake engine (give --engine fake)" serve -m "$T" $o
done
refuse "--fake-reply: an option of the fake engine" serve --engine model --fake-reply hi
refuse "-m/--model: the fake engine loads no model" serve --engine fake -m "$T"
refuse "--cfg-mode picks the guided rows, which only --cfg-beta B (>= 1) runs" bench policy -m "$T" --cfg-mode fused
refuse "--cfg-mode picks the guided rows" bench policy -m "$T" --cfg-beta 0 --cfg-mode serial
refuse "--prompt-len shapes the random prompts and there are none" compare -m "$T" --ids 1,2 --prompt-len 8
refuse "--seed shapes the random prompts and there are none" compare -m "$T" --ids-file "$T/ids.txt" --seed 3
refuse "--seed shapes the random prompts" compare -m "$T" --prompts 0 --ids 1 --seed 3
refuse "--threads: '-2' is out of range" gen-model --shape tiny --out "$T/x" --threads -2
refuse "--shard-size: 'lots' is not a size" gen-model --shape tiny --out "$T/x" --shard-size lots
refuse "--seed: '1.5' is not an integer" gen-model --shape tiny --out "$T/x" --seed 1.5
refuse "--out DIR is required" gen-model --shape tiny
refuse "--shape: --list only prints the shapes (nothing is generated)" gen-model --list --shape tiny
refuse "--quiet: --list only prints the shapes" gen-model --list -q
refuse "--repeats: '0' is out of range" bench --shape tiny --random-weights --repeats 0
refuse "--chunk: '100' is not a multiple of 64" bench --shape tiny --random-weights --chunk 100
refuse "--prefixes: '1,,2' has an empty element" bench --shape tiny --random-weights --prefixes 1,,2
refuse "--chunks: '96' is not a multiple of 64" bench --shape tiny --random-weights --chunks 64,96
refuse "--time-budget: 'soon' is not a number" bench --shape tiny --random-weights --time-budget soon
refuse "unknown benchmark 'nonsense'" bench nonsense
refuse "--backend: 'tpu' is not one of auto, cpu, cuda" bench exec --backend tpu
refuse "unknown option --frobnicate" bench exec --frobnicate
refuse "--seconds: 'x' is not a number" tokenize "$T" hi --seconds x
refuse "missing argument" inspect
refuse "unexpected argument 'b'" inspect a b
refuse "'12abc' is not a token id" detokenize "$T" 12abc
refuse "--parse-special-in-content only changes --chat" tokenize "$T" hi --parse-special-in-content
refuse "--chat: --bench times the plain encode of FILE" tokenize "$T" --bench "$T/f.txt" --chat
refuse "--special: --bench times the plain encode" tokenize "$T" --bench "$T/f.txt" --special
refuse "--parse-special-in-content: --bench times the plain encode" tokenize "$T" --bench "$T/f.txt" --parse-special-in-content
refuse "--seconds only changes --bench" tokenize "$T" hi --seconds 1
refuse "give -m DIR or --tokenizer-config FILE (one of them)" chat-template --messages "$T/m.json"
refuse "give -m DIR or --tokenizer-config FILE (one of them)" chat-template -m "$T" --tokenizer-config "$T/c.json" --messages "$T/m.json"
refuse "--messages FILE.json is required" chat-template -m "$T"
refuse "--ids needs -m DIR (the tokenizer)" chat-template --tokenizer-config "$T/c.json" --messages "$T/m.json" --ids
refuse "--parse-special-in-content only changes --ids" chat-template -m "$T" --messages "$T/m.json" --parse-special-in-content
refuse "unexpected argument 'x'" chat-template -m "$T" --messages "$T/m.json" x
refuse "unknown option --x" selfcheck --x
refuse "unknown command 'frobnicate'" frobnicate
refuse "unknown option --foo" --foo

# ---- frt chat-template: exactly the rendered bytes; bad files exit 1 ---------
DEMO="$SRC/models/frt-demo"
printf '[{"role": "user", "content": "hi <|im_end|>"}]' >"$T/m.json"
"$FRT" chat-template -m "$DEMO" --messages "$T/m.json" >"$T/out" 2>"$T/err"
check "chat-template: exit 0" test $? -eq 0
printf '<|im_start|>user\nhi <|im_end|><|im_end|>\n<|im_start|>assistant\n' >"$T/want"
check "chat-template: the rendered bytes, no newline added" cmp -s "$T/out" "$T/want"
"$FRT" chat-template -m "$DEMO" --messages "$T/m.json" --no-generation-prompt >"$T/out"
check "chat-template --no-generation-prompt" test "$(cat "$T/out")" = "$(printf '<|im_start|>user\nhi <|im_end|><|im_end|>')"
check "chat-template --ids: the typed <|im_end|> is not id 2, the template's is" \
    test "$("$FRT" chat-template -m "$DEMO" --messages "$T/m.json" --ids | tr ' ' '\n' | grep -cx 2)" = 1
check "chat-template --ids --parse-special-in-content: both are id 2" \
    test "$("$FRT" chat-template -m "$DEMO" --messages "$T/m.json" --ids --parse-special-in-content | tr ' ' '\n' | grep -cx 2)" = 2
fails() { # fails "MESSAGE" ARGS...: exit status 1 and MESSAGE on stderr
    local want="$1"; shift
    "$FRT" chat-template "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$want" "$T/err" && [ ! -s "$T/out" ]; then
        echo "ok   frt chat-template $* -> 1: $want"
    else
        echo "FAIL frt chat-template $*: status $rc (want 1), stderr: $(cat "$T/err") (want: $want)"
        fail=1
    fi
}
printf '{' >"$T/bad.json"
printf '{"role": "user"}' >"$T/obj.json"
printf '[{"role": "user", "content": null}]' >"$T/null.json"
fails "--messages: unable to open $T/none.json" -m "$DEMO" --messages "$T/none.json"
fails "--messages $T/bad.json: line 1:" -m "$DEMO" --messages "$T/bad.json"
fails "--messages $T/obj.json: not a JSON array" -m "$DEMO" --messages "$T/obj.json"
fails "--tools $T/obj.json: not a JSON array" -m "$DEMO" --messages "$T/m.json" --tools "$T/obj.json"
fails "--kwargs: not a JSON object" -m "$DEMO" --messages "$T/m.json" --kwargs '[1]'
fails "--kwargs: line 1:" -m "$DEMO" --messages "$T/m.json" --kwargs '{'
fails "the template kwargs may not set 'messages'" -m "$DEMO" --messages "$T/m.json" --kwargs '{"messages": 1}'
fails "unsupported operand type(s) for +: 'str' and 'NoneType'" -m "$DEMO" --messages "$T/null.json"
fails "has no chat_template" --tokenizer-config "$DEMO/tokenizer_config.json" --messages "$T/m.json"
fails "no such file" --tokenizer-config "$T/none.json" --messages "$T/m.json"
fails "no such directory" -m "$T/none" --messages "$T/m.json"

# ---- the model benchmark: options checked here, handed on to bench_model.c ----
"$FRT" bench --shape=tiny --random-weights --backend=auto --seed=2 --no-run --write-config="$T/wc" >/dev/null 2>"$T/err"
check "bench: --name=value options reach the benchmark (exit 0)" test $? -eq 0
check "bench: --write-config=DIR wrote config.json" test -s "$T/wc/config.json"
"$FRT" bench --shape tiny --random-weights --no-run --dump-ids "$T/ids.json" --seed 5 --prefixes 64 >/dev/null 2>&1
check "bench: --seed reaches the benchmark" grep -q '"seed": *5' "$T/ids.json"

# ---- --help: every option the command accepts, with its default --------------
# The options a command accepts are the ones its --help lists; each listed
# option must be accepted (not "unknown option"), and every valued option
# shows a default unless it has none.
for c in generate demo serve bench "bench exec" gen-model inspect tokenize detokenize chat-template selfcheck; do
    # shellcheck disable=SC2086
    "$FRT" $c --help >"$T/help" 2>&1; rc=$?
    check "frt $c --help exits 0" test $rc -eq 0
    check "frt $c --help has a usage line" grep -q "^usage: frt $c" "$T/help"
    check "frt $c --help lists --help and --version" grep -q -- "--version" "$T/help"
    for opt in $(grep -oE '^ +(-[a-z], )?--[a-z-]+' "$T/help" | grep -oE -- '--[a-z-]+' | grep -vE -- '^--(help|version)$'); do
        # "1" is the value of a valued option (an operand after a flag); the
        # unknown option after it stops the command before it runs. Accepted:
        # the parser got past $opt (or refused its value "1", naming it).
        # shellcheck disable=SC2086
        timeout 20 "$FRT" $c "$opt" 1 --definitely-unknown >/dev/null 2>"$T/err"
        check "frt $c accepts $opt" grep -qE -- "unknown option --definitely-unknown|$opt: '1'" "$T/err"
    done
done
"$FRT" generate --help >"$T/help"
for want in "-n, --max-tokens N" "(default: 64)" "--temperature T" "(default: 0)" "--top-p P" "--ids ID,ID" \
            "--backend auto|cpu|cuda" "(default: auto: cuda when a CUDA device is present, else cpu)" \
            "-m, --model DIR" "(default: the demo model models/frt-demo)" "--quiet"; do
    check "generate --help shows '$want'" grep -qF -- "$want" "$T/help"
done
for c in demo serve bench; do
    "$FRT" $c --help >"$T/help"
    check "$c --help: the same backend default" grep -qF "(default: auto: cuda when a CUDA device is present, else cpu)" "$T/help"
done
for c in demo serve; do
    "$FRT" $c --help >"$T/help"
    check "$c --help: the same model default" grep -qF "(default: the demo model models/frt-demo)" "$T/help"
done
check "frt help generate = frt generate --help" test "$("$FRT" help generate)" = "$("$FRT" generate --help)"

# ---- progress and --quiet (gen-model) ----------------------------------------
"$FRT" gen-model --shape tiny --out "$T/g1" >"$T/out" 2>"$T/err"
check "gen-model: exit 0" test $? -eq 0
check "gen-model off a terminal: a plain progress line" grep -qE '^gen-model: writing: [0-9.]+ / 3\.4 MB \(100%\)' "$T/err"
check "gen-model off a terminal: no carriage return" bash -c "! grep -q $'\r' '$T/err'"
"$FRT" gen-model --shape tiny --out "$T/g2" --quiet >"$T/out" 2>"$T/err"
check "gen-model --quiet: exit 0" test $? -eq 0
check "gen-model --quiet: nothing on stderr" test ! -s "$T/err"
check "gen-model --quiet: one line, the result" test "$(wc -l <"$T/out")" -eq 1
check "gen-model --quiet: the same bytes" cmp -s "$T/g1/model.safetensors" "$T/g2/model.safetensors"
if command -v script >/dev/null 2>&1; then
    script -qec "'$FRT' gen-model --shape tiny --out '$T/g3'" /dev/null >"$T/tty" 2>&1
    check "gen-model on a terminal: the progress line is rewritten in place" grep -q $'\rgen-model: writing: .*(100%)' "$T/tty"
else
    echo "skip gen-model on a terminal (no script(1))"
fi

exit $fail
