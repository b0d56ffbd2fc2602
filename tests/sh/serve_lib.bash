# serve_lib.bash - helpers for the frt serve end-to-end tests (sourced, not a
# test itself). Every server started here listens on 127.0.0.1 on a free
# port and is killed by the EXIT trap; every wait is a bounded loop.
#
#   serve_init BUILD_DIR            work dir, trap, tool checks (exit 77 when curl/jq are missing)
#   serve_need_model SOURCE_DIR     exit 77 unless `frt serve --probe` loads the demo model
#   serve_start NAME ARGS...        start `frt serve ARGS`; sets PORT_<NAME>
#   serve_stop NAME                 SIGTERM and wait
#   api NAME METHOD PATH [BODY]     request; body in $BODY, status in $STATUS
#   expect_status CODE WHAT         fail unless $STATUS is CODE
#   jqr EXPR                        jq -r EXPR on $BODY
#   check COND_MESSAGE CMD...       fail with the message unless CMD succeeds
#   fail MESSAGE
#   serve_skip MESSAGE              exit 77, or fail when CI=true (missing tools or npm data)
#   serve_node_client SRC SCRIPT... the openai Node client in BUILD_DIR/node-e2e; sets NODE_DIR

SERVE_PIDS=()
SERVE_NAMES=()

serve_cleanup() {
    local p
    for p in "${SERVE_PIDS[@]:-}"; do
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${SERVE_PIDS[@]:-}"; do
        [ -n "$p" ] || continue
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    [ -n "${WORK:-}" ] && rm -rf "$WORK"
}

fail() {
    echo "FAIL: $*" >&2
    local n
    for n in "${SERVE_NAMES[@]:-}"; do
        [ -f "$WORK/$n.log" ] && { echo "--- server $n log (tail) ---" >&2; tail -n 30 "$WORK/$n.log" >&2; }
    done
    exit 1
}

serve_init() {
    B=$1
    FRT="$B/frt"
    command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
    command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
    [ -x "$FRT" ] || { echo "SKIP: $FRT was not built"; exit 77; }
    WORK=$(mktemp -d /tmp/frt_serve_test.XXXXXX)
    trap serve_cleanup EXIT
}

# The model engine and the demo model must both be there for the model tests.
serve_need_model() {
    local src=$1 out
    if [ -z "${FRT_DEMO_MODEL:-}" ] && [ -f "$src/models/frt-demo/config.json" ]; then
        export FRT_DEMO_MODEL="$src/models/frt-demo"
    fi
    if ! out=$("$FRT" serve --probe 2>&1); then
        echo "SKIP: frt serve cannot load the demo model (models/frt-demo): $out"
        exit 77
    fi
}

serve_start() {
    local name=$1
    shift
    rm -f "$WORK/$name.port"
    "$FRT" serve --host 127.0.0.1 --port 0 --port-file "$WORK/$name.port" "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    SERVE_PIDS+=("$pid")
    SERVE_NAMES+=("$name")
    eval "PID_$name=$pid"
    for _ in $(seq 600); do
        [ -s "$WORK/$name.port" ] && break
        kill -0 "$pid" 2>/dev/null || fail "server $name exited at start"
        sleep 0.1
    done
    [ -s "$WORK/$name.port" ] || fail "server $name did not start"
    eval "PORT_$name=$(cat "$WORK/$name.port")"
}

serve_stop() {
    local name=$1 pid
    eval "pid=\$PID_$name"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && fail "server $name did not stop on SIGTERM"
    wait "$pid" 2>/dev/null || true
}

# api NAME METHOD PATH [BODY]
api() {
    local name=$1 method=$2 path=$3 body=${4:-} port
    eval "port=\$PORT_$name"
    local args=(-s -o "$WORK/body" -w '%{http_code}' -X "$method" --max-time 120)
    if [ -n "$body" ]; then
        printf '%s' "$body" >"$WORK/req"
        args+=(--data-binary "@$WORK/req")
    fi
    # every POST is JSON (the server refuses other Content-Types with 415)
    [ "$method" = POST ] && args+=(-H 'Content-Type: application/json')
    STATUS=$(curl "${args[@]}" "http://127.0.0.1:$port$path") || STATUS=000
    BODY=$(cat "$WORK/body" 2>/dev/null || true)
}

jqr() { jq -r "$1" <<<"$BODY"; }

expect_status() {
    [ "$STATUS" = "$1" ] || fail "$2: HTTP $STATUS, expected $1: $BODY"
}

# An OpenAI-style error object with this status and code.
expect_error() { # expect_error STATUS CODE WHAT
    expect_status "$1" "$3"
    [ "$(jqr '.error.code')" = "$2" ] || fail "$3: error code $(jqr '.error.code'), expected $2: $BODY"
    [ "$(jqr '.error.message | type')" = string ] || fail "$3: no error message: $BODY"
    [ "$(jqr '.error | has("type") and has("param")')" = true ] || fail "$3: incomplete error object: $BODY"
}

check() {
    local msg=$1
    shift
    "$@" || fail "$msg"
}

# A deterministic text of N characters from a seed (letters, spaces, newlines).
gen_text() { # gen_text N SEED
    awk -v n="$1" -v s="$2" 'BEGIN { srand(s); w = "def class return import self value parse token state cache prefix"; k = split(w, a, " ");
        out = ""; while (length(out) < n) { out = out a[int(rand() * k) + 1] (rand() < 0.1 ? "\n" : " ") } printf "%s", substr(out, 1, n) }'
}

# A test whose tools or npm data are missing: skips (77), or with CI=true fails.
serve_skip() {
    if [ "${CI:-}" = "true" ]; then echo "FAIL (CI): $*"; exit 1; fi
    echo "SKIP: $*"
    exit 77
}

# The official openai client for Node in BUILD_DIR/node-e2e (npm installs
# it on first use, tests/node/package.json), with the scripts named copied
# from tests/node; sets NODE_DIR. Skips (serve_skip) without node/npm or
# when the install fails.
serve_node_client() { # serve_node_client SOURCE_DIR SCRIPT...
    local src=$1
    shift
    command -v node >/dev/null && command -v npm >/dev/null || serve_skip "node/npm are not installed (scripts/install-deps.sh)"
    NODE_DIR=$(cd "$B" && pwd)/node-e2e
    mkdir -p "$NODE_DIR"
    cp "$src/tests/node/package.json" "$NODE_DIR/"
    for f in "$@"; do cp "$src/tests/node/$f" "$NODE_DIR/"; done
    if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ]; then
        (cd "$NODE_DIR" && timeout 600 npm install --no-audit --no-fund --loglevel=error) >"$WORK/npm.log" 2>&1 || {
            tail -n 5 "$WORK/npm.log"
            serve_skip "npm install of the openai client failed (no network?)"
        }
    fi
}

# JSON string of a shell string.
jstr() { printf '%s' "$1" | jq -Rs .; }
