#!/usr/bin/env bash
# policy_server.sh BUILD_DIR SOURCE_DIR - frt serve --policy end to end on the
# cpu backend: small random policies (frt gen-model --shape pi05-tiny /
# pi0-tiny) with a SentencePiece model trained here and a norm_stats.json,
# served over the websocket protocol of docs/policy-server.md and driven by
# tests/sh/policy_server.py (written against that page with Debian's
# python3-websockets 10.4 asyncio API and python3-msgpack): metadata,
# inference equal to `frt policy run` on the same inputs bit for bit, control
# messages, delta actions, bad requests -> text frame + close 1011 with the
# server still serving, the API key, Origin, the session limit, the message
# deadline, /healthz and the JSON endpoint; prints the server's overhead;
# the rollout host behind the server (critic values equal to frt policy
# rollout's on the same observation, a max-chunks and a critic-threshold
# stop reported, recorded episodes read by numpy, episode_start = reset);
# CFG from the command line and by control message against frt policy run
# --cfg-beta. Also the command line's refusals.
set -u
B="$1"
SRC="$2"
source "$(dirname "$0")/policy_lib.bash"
policy_init policy_server "$B"
if ! $PY -c 'import websockets, msgpack' 2>/dev/null; then
    echo "SKIP: needs python3-websockets and python3-msgpack (scripts/install-deps.sh)"; exit 77
fi
policy_spm "$SRC"
cat >"$T/norm_stats.json" <<'JSON'
{"norm_stats": {
 "state": {"mean": [0.1, -0.2, 0.3, 0.0, 0.5, -0.5, 0.2, 0.05], "std": [0.5, 1.5, 2.0, 0.25, 1.0, 0.7, 0.3, 0.9],
           "q01": [-1.0, -2.0, -0.5, -3.0, -1.0, -1.5, -0.2, 0.0], "q99": [1.0, 2.5, 0.5, 3.0, 1.0, 1.5, 0.9, 1.0]},
 "actions": {"mean": [0.5, -0.5, 1.0, 0.0, 2.0, -1.0, 0.3], "std": [2.0, 0.5, 1.0, 3.0, 0.1, 1.0, 0.4],
             "q01": [-2.0, -1.0, 0.0, -5.0, 1.0, -3.0, 0.0], "q99": [2.0, 1.0, 4.0, 5.0, 3.0, 1.0, 1.0]}}}
JSON
for v in pi05 pi0; do
    "$FRT" gen-model --shape "$v-tiny" --out "$T/$v" --seed 7 -q >/dev/null 2>&1 || { echo "gen-model $v-tiny failed"; exit 1; }
    cp "$T/spm.model" "$T/$v/tokenizer.model"
    cp "$T/norm_stats.json" "$T/$v/norm_stats.json"
done
# pi0 as an openpi DROID checkpoint: the robot named by its asset folder, its
# statistics there (8 action values: DROID's DoF)
mkdir -p "$T/pi0/assets/droid"
sed -e 's/"mean": \[0.5, -0.5, 1.0, 0.0, 2.0, -1.0, 0.3\]/"mean": [0.5, -0.5, 1.0, 0.0, 2.0, -1.0, 0.3, 0.1]/' \
    -e 's/"std": \[2.0, 0.5, 1.0, 3.0, 0.1, 1.0, 0.4\]/"std": [2.0, 0.5, 1.0, 3.0, 0.1, 1.0, 0.4, 0.6]/' \
    -e 's/"q01": \[-2.0, -1.0, 0.0, -5.0, 1.0, -3.0, 0.0\]/"q01": [-2.0, -1.0, 0.0, -5.0, 1.0, -3.0, 0.0, 0.0]/' \
    -e 's/"q99": \[2.0, 1.0, 4.0, 5.0, 3.0, 1.0, 1.0\]/"q99": [2.0, 1.0, 4.0, 5.0, 3.0, 1.0, 1.0, 1.0]/' \
    "$T/norm_stats.json" >"$T/pi0/assets/droid/norm_stats.json"
rm "$T/pi0/norm_stats.json"

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

# start NAME ARGS...: frt serve in the background; its port in $T/NAME.port
start() {
    local name=$1; shift
    "$FRT" serve --backend cpu --port 0 --port-file "$T/$name.port" "$@" >"$T/$name.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 300); do [ -s "$T/$name.port" ] && return 0; sleep 0.1; done
    echo "server $name did not start:"; cat "$T/$name.log"; return 1
}
start libero --policy "$T/pi05" --robot libero --discrete-state on --api-key sekrit --max-body-mb 1 \
    --conn-timeout-s 5 || exit 1
start libero_auto --policy "$T/pi05" --robot libero || exit 1
start droid --policy "$T/pi0" --delta-actions on --max-conns 1 || exit 1
# the rollout host behind the server: a random critic (scripts/ref/random_critic.py), 3 chunks an episode,
# recorded; a critic threshold above any value; guidance from the start
$PY "$SRC/scripts/ref/random_critic.py" "$T/pi05/config.json" "$T/critic.safetensors" ||
    { echo "cannot write the critic"; exit 1; }
start critic --policy "$T/pi05" --robot libero --discrete-state on --critic "$T/critic.safetensors" \
    --max-chunks 3 --record "$T/rec" || exit 1
start vstop --policy "$T/pi05" --robot libero --discrete-state on --critic "$T/critic.safetensors" \
    --value-threshold 1e30 --record "$T/rec_v" || exit 1
start cfg --policy "$T/pi05" --robot libero --discrete-state on --cfg-beta 1.5 --advantage negative || exit 1

$PY "$SRC/tests/sh/policy_server.py" "$FRT" "$T" "$(cat "$T/libero.port")" "$(cat "$T/droid.port")" \
    "$(cat "$T/libero_auto.port")" "$(cat "$T/critic.port")" "$(cat "$T/vstop.port")" "$(cat "$T/cfg.port")"
check "the python client against docs/policy-server.md" test $? -eq 0

# an LLM (the fake engine) and the policy in one process, each on its port, one API key
start cohost --engine fake --policy "$T/pi05" --robot libero --policy-port 0 --policy-port-file "$T/cohost.pport" \
    --api-key sekrit || exit 1
for _ in $(seq 1 100); do [ -s "$T/cohost.pport" ] && break; sleep 0.1; done
LP=$(cat "$T/cohost.port"); PP=$(cat "$T/cohost.pport")
code=$(curl -s -o "$T/llm.json" -w '%{http_code}' --max-time 60 -H 'Authorization: Bearer sekrit' \
    -H 'Content-Type: application/json' -d '{"prompt":"hello","max_tokens":3}' "http://127.0.0.1:$LP/v1/completions")
check "one process: the LLM answers /v1/completions" sh -c "test '$code' = 200 && grep -q choices '$T/llm.json'"
$PY - "$PP" <<'PYEOF'
import asyncio, sys
import msgpack, websockets
async def main():
    ws = await websockets.connect(f"ws://127.0.0.1:{sys.argv[1]}/", extra_headers={"Authorization": "Api-Key sekrit"},
                                  compression=None)
    meta = msgpack.unpackb(await ws.recv())
    await ws.close()
    sys.exit(0 if meta.get("robot") == "libero" and meta.get("model_type") == "pi05" else 1)
asyncio.run(main())
PYEOF
check "one process: the policy's websocket on --policy-port" test $? -eq 0
check "one process: the policy's /healthz" sh -c "curl -s --max-time 10 http://127.0.0.1:$PP/healthz | grep -q OK"

# the command line
"$FRT" serve --policy "$T/pi05" -m "$T/pi0" --probe >/dev/null 2>"$T/err"
check "--policy with -m and no --policy-port: exit 2 asking for it" \
    sh -c "test $? -eq 2 && grep -q -- '--policy-port' '$T/err'"
"$FRT" serve --policy-port 0 --probe >/dev/null 2>"$T/err"
check "--policy-port without --policy: exit 2" test $? -eq 2
"$FRT" serve --policy "$T/pi05" --capsule-dir "$T/caps" --probe >/dev/null 2>"$T/err"
check "--policy alone with an LLM option: exit 2 naming it" sh -c "test $? -eq 2 && grep -q -- '--capsule-dir' '$T/err'"
"$FRT" serve --robot libero --probe >/dev/null 2>"$T/err"
check "--robot without --policy: exit 2" test $? -eq 2
"$FRT" serve --policy-dtype fp8 --probe >/dev/null 2>"$T/err"
check "--policy-dtype without --policy: exit 2" sh -c "test $? -eq 2 && grep -q -- '--policy-dtype' '$T/err'"
"$FRT" serve --policy "$T/pi0" --robot droid --policy-dtype fp8 --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--policy-dtype fp8 on the cpu backend (emulated): probe exit 0" test $? -eq 0
"$FRT" serve --policy-autotune 4 --probe >/dev/null 2>"$T/err"
check "--policy-autotune without --policy: exit 2" sh -c "test $? -eq 2 && grep -q -- '--policy-autotune' '$T/err'"
"$FRT" serve --policy "$T/pi0" --robot droid --policy-tune-file "$T/tune.txt" --probe -q >/dev/null 2>"$T/err"
check "--policy-tune-file without --policy-autotune: exit 2" sh -c "test $? -eq 2 && grep -q 'needs --policy-autotune' '$T/err'"
"$FRT" serve --policy "$T/pi0" --robot droid --policy-autotune 4 --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--policy-autotune on the cpu backend: refused at load, named (exit 1)" \
    sh -c "test $? -eq 1 && grep -q 'no GEMM autotune' '$T/err' && test ! -e '$T/tune.txt'"
"$FRT" serve --policy "$T/pi05" --backend cpu --probe >/dev/null 2>"$T/err"
check "no robot named and no asset folder: exit 1, asks for --robot" \
    sh -c "test $? -eq 1 && grep -q -- '--robot' '$T/err'"
"$FRT" serve --policy "$T/pi0" --backend cpu --probe -q >"$T/out" 2>"$T/err"
check "the robot from assets/droid: probe exit 0" test $? -eq 0
"$FRT" serve --policy "$T/pi0" --robot aloha --backend cpu --probe -q >/dev/null 2>"$T/err"
check "aloha (14 actions) on an 8-action model: exit 1, says so" \
    sh -c "test $? -eq 1 && grep -q '14 action values' '$T/err'"
"$FRT" serve --policy "$T/pi0" --robot droid --discrete-state on --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--discrete-state on with Pi0: exit 1, says it is Pi0.5's" sh -c "test $? -eq 1 && grep -q 'Pi0.5' '$T/err'"
"$FRT" serve --policy "$T/pi0" --robot libero --tokenizer "$T/nope.model" --backend cpu --probe -q >/dev/null 2>"$T/err"
check "a missing tokenizer: exit 1 naming it" sh -c "test $? -eq 1 && grep -q nope.model '$T/err'"
"$FRT" serve --policy "$T/pi05" --robot libero --value-threshold 0 --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--value-threshold without --critic: exit 2" sh -c "test $? -eq 2 && grep -q -- '--critic' '$T/err'"
"$FRT" serve --policy "$T/pi05" --robot libero --advantage negative --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--advantage without --cfg-beta: exit 2" sh -c "test $? -eq 2 && grep -q -- '--cfg-beta' '$T/err'"
"$FRT" serve --policy "$T/pi05" --robot libero --cfg-beta 0.5 --backend cpu --probe -q >/dev/null 2>"$T/err"
check "--cfg-beta below 1: exit 2" test $? -eq 2
"$FRT" serve --policy "$T/pi05" --robot libero --critic "$T/nope.safetensors" --backend cpu --probe -q >/dev/null \
    2>"$T/err"
check "a missing critic: exit 1 naming it" sh -c "test $? -eq 1 && grep -q nope.safetensors '$T/err'"
"$FRT" serve --critic "$T/critic.safetensors" --probe >/dev/null 2>"$T/err"
check "--critic without --policy: exit 2" test $? -eq 2
[ $fail -eq 0 ] && echo "policy_server: all passed" || echo "policy_server: FAILED"
exit $fail
