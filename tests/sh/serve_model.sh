#!/usr/bin/env bash
# serve_model.sh BUILD_DIR SOURCE_DIR - frt serve end to end over the real
# model layer with the shipped demo model (models/frt-demo, or
# $FRT_DEMO_MODEL): the same scenarios as serve_fake.sh, with exactness
# checked on real tokens (greedy): a restore turn equals a cold prefill of
# the same prompt on a fresh server, an append turn after displacement
# equals the session never displaced, a pinned prefix restored from the disk
# tier after a restart equals a cold prefill. Skips (77) when the model
# layer or the demo model is not available. curl on 127.0.0.1 only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/serve_lib.bash"
source "$HERE/serve_scenarios.bash"
serve_init "$1"
serve_need_model "$2"

C=64
SYS_CHARS=1200
ENGINE=(--backend "${FRT_SERVE_BACKEND:-cpu}" --prefill-chunk $C --max-seq 2048 --threads 2 --quiet)

scenario_basic
scenario_bad_input
scenario_tokens
scenario_sessions
scenario_exact_restore
scenario_exact_append
scenario_fork_rollback
scenario_capsules
scenario_restart
scenario_agent
scenario_cancel
echo "serve_model: ok"
