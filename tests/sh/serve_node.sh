#!/usr/bin/env bash
# serve_node.sh BUILD_DIR SOURCE_DIR - frt serve driven by the official
# `openai` client for Node (tests/node/e2e.mjs): completions and chat,
# streamed and not, n = 2 (refused on the fake engine), sessions, fork, checkpoint, rollback, typed errors.
# Runs against the fake engine, and against the demo model when it is
# available. The client is installed from the npm registry into
# BUILD_DIR/node-e2e on the first run (npm install --no-audit --no-fund);
# skips (77) without node/npm or when the install fails; with CI=true it
# fails instead.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
serve_init "$1"
SRC=$2
serve_node_client "$SRC" e2e.mjs

serve_start nf --engine fake --prefill-chunk 64 --quiet
echo "fake engine:"
(cd "$NODE_DIR" && FRT_BASE_URL="http://127.0.0.1:$PORT_nf/v1" node e2e.mjs) || fail "node client against the fake engine"
serve_stop nf

if [ -z "${FRT_DEMO_MODEL:-}" ] && [ -f "$SRC/models/frt-demo/config.json" ]; then export FRT_DEMO_MODEL="$SRC/models/frt-demo"; fi
if "$FRT" serve --probe >/dev/null 2>&1; then
    serve_start nm --prefill-chunk 64 --max-seq 2048 --threads 2 --quiet --branches 2
    echo "demo model:"
    (cd "$NODE_DIR" && FRT_BRANCHES=2 FRT_BASE_URL="http://127.0.0.1:$PORT_nm/v1" node e2e.mjs) || fail "node client against the demo model"
    serve_stop nm
else
    echo "demo model: not available, that part is skipped"
fi
echo "serve_node: ok"
