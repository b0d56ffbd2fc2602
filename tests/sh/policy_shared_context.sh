#!/usr/bin/env bash
# policy_shared_context.sh BUILD_DIR SOURCE_DIR [BACKEND] - an LLM and a
# policy in one process and ONE execution context (docs/policy-server.md
# "Beside an LLM"), on BACKEND (cpu, the default; policy_shared_context_gpu.sh
# runs it on cuda): the demo model and a random pi05-tiny policy. `frt serve -m
# DEMO --policy P --policy-port 0` is driven by tests/sh/policy_shared.py with
# completions and policy inferences at the same time, each compared with the
# same request served alone (tokens equal, actions byte-equal); the server's
# lines say the context is the LLM's and give its graph capture count at
# start and at stop (equal: nothing was recaptured) and the turns the two
# servers took (some waited: they did run at the same time).
set -u
B="$1"
SRC="$2"
BACKEND="${3:-cpu}"
BARGS=(--backend "$BACKEND")
[ "$BACKEND" = cpu ] && BARGS+=(--threads 1)
source "$(dirname "$0")/policy_lib.bash"
policy_init policy_shared "$B"
DEMO="$SRC/models/frt-demo"
[ -s "$DEMO/model.safetensors" ] || { echo "SKIP: no demo model in $DEMO"; exit 77; }
policy_spm "$SRC"
"$FRT" gen-model --shape pi05-tiny --out "$T/pi05" --seed 7 -q >/dev/null 2>&1 || { echo "gen-model failed"; exit 1; }
cp "$T/spm.model" "$T/pi05/tokenizer.model"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# start NAME ARGS...: frt serve in the background; its port in $T/NAME.port, its pid in $T/NAME.pid
start() {
    local name=$1; shift
    "$FRT" serve "${BARGS[@]}" --port 0 --port-file "$T/$name.port" -q "$@" >"$T/$name.log" 2>&1 &
    PIDS+=($!)
    echo $! >"$T/$name.pid"
    for _ in $(seq 1 600); do [ -s "$T/$name.port" ] && return 0; sleep 0.1; done
    echo "server $name did not start:"; cat "$T/$name.log"; return 1
}
start llm -m "$DEMO" || exit 1
start pol --policy "$T/pi05" --robot libero || exit 1
start shared -m "$DEMO" --policy "$T/pi05" --robot libero --policy-port 0 --policy-port-file "$T/shared.pport" || exit 1
for _ in $(seq 1 100); do [ -s "$T/shared.pport" ] && break; sleep 0.1; done

$PY "$SRC/tests/sh/policy_shared.py" "$(cat "$T/llm.port")" "$(cat "$T/pol.port")" "$(cat "$T/shared.port")" \
    "$(cat "$T/shared.pport")"
check "the python client: together == alone" test $? -eq 0

pid=$(cat "$T/shared.pid")
kill -TERM "$pid"
wait "$pid" 2>/dev/null
grep 'policy context' "$T/shared.log"
captures() { sed -n "s/.*policy context: shared with the LLM (\([0-9]*\) graph captures $1;.*/\1/p" "$T/shared.log"; }
c0=$(captures "at start"); c1=$(captures "at stop")
check "one context: the policy's is the LLM's (startup line)" test -n "$c0"
# cuda captures a policy graph on the first use of its shape key (one
# observation shape here: one capture, whatever the number of requests);
# the cpu backend records it at load
first_use=0
[ "$BACKEND" = cuda ] && first_use=1
captures_ok() { [ -n "$c0" ] && [ -n "$c1" ] && [ "$c1" -eq $((c0 + first_use)) ]; }
check "one context: captures at stop == at start + $first_use ($c0 / $c1): no recapture" captures_ok
side() { sed -n "s/.*at stop; .*$1 \([0-9]*\) turns, \([0-9]*\) waited.*/\\$2/p" "$T/shared.log"; }
check "the two servers took turns on the context (LLM turns $(side LLM 1), policy turns $(side policy 1))" \
    test "$(side LLM 1)" -gt 0 -a "$(side policy 1)" -ge 12
check "some turns waited (LLM $(side LLM 2), policy $(side policy 2)): they ran at the same time" \
    test $(($(side LLM 2) + $(side policy 2))) -gt 0
grep -q 'policy context: its own' "$T/pol.log"
check "the policy alone: its own context" test $? -eq 0
[ $fail -eq 0 ] && echo "policy_shared_context: all passed" || echo "policy_shared_context: FAILED"
exit $fail
