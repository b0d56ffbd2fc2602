#!/usr/bin/env bash
# frt policy rollout from the command line on a pi0-tiny random policy
# (frt gen-model) driven by the fake robot: three episodes with a random
# critic give the same values and the same recorded actions (reset is a
# restore; numpy reads the .npz files and compares them), each stop
# predicate (max_chunks, client stop, value, timeout) ends an episode with
# its reason, the planner and an interrupt run, --serial gives the same
# values as the plan, --bench prints its lines, and bad options exit 2 / 1
# with a message (an option that does nothing in the mode chosen among
# them: the hand-off prompt and fake robot's options with --image, the
# episodes' with --bench, the bench's without, the planner's without one).
# Usage: bash policy_rollout.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
FRT="$BUILD/frt"
PY=/usr/bin/python3
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_policy_rollout.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
"$FRT" gen-model --shape pi0-tiny --out "$T/p" >/dev/null 2>&1
check "gen-model pi0-tiny" test $? -eq 0
R=("$FRT" policy rollout -m "$T/p" --fake-robot --random-critic --json)

"${R[@]}" --episodes 3 --max-chunks 3 --record "$T/rec" >"$T/eps.json" 2>"$T/err"
check "three episodes: exit 0" test $? -eq 0
if [ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null; then
    "$PY" - "$T" <<'PYEOF'
import json, sys
import numpy as np
t = sys.argv[1]
eps = [json.loads(l) for l in open(f"{t}/eps.json")]
z = [np.load(e["record"]) for e in eps]
ok = len(eps) == 3 and all(e["chunks"] == 3 and e["stop"] == "max_chunks" for e in eps)
ok = ok and all(x["actions"].shape == (3, 10, 8) for x in z)
ok = ok and all(np.array_equal(z[0]["actions"], x["actions"]) and np.array_equal(z[0]["values"], x["values"]) for x in z)
ok = ok and len({e["value_mean"] for e in eps}) == 1 and not np.array_equal(z[0]["actions"][0], z[0]["actions"][1])
print("episodes:", [(e["chunks"], e["stop"], e["value_mean"]) for e in eps])
sys.exit(0 if ok else 1)
PYEOF
    check "episodes equal byte for byte in their .npz records (numpy)" test $? -eq 0
else
    echo "skip numpy check (no /usr/bin/python3 with numpy)"
fi
stop_of() { sed -n 's/.*"stop": "\([a-z_]*\)".*/\1/p' "$1" | head -1; }
chunks_of() { sed -n 's/.*"chunks": \([0-9]*\).*/\1/p' "$1" | head -1; }
"${R[@]}" --max-chunks 10 --stop-after 2 >"$T/o" 2>&1
check "client stop after 2 chunks" test "$(stop_of "$T/o")/$(chunks_of "$T/o")" = client/2
"${R[@]}" --max-chunks 10 --value-stop 1e30 >"$T/o" 2>&1
check "value stop after 1 chunk" test "$(stop_of "$T/o")/$(chunks_of "$T/o")" = value/1
"${R[@]}" --max-chunks 10 --timeout 1e-9 >"$T/o" 2>&1
check "timeout after 1 chunk" test "$(stop_of "$T/o")/$(chunks_of "$T/o")" = timeout/1
"${R[@]}" --max-chunks 4 >"$T/plan" 2>&1
"${R[@]}" --max-chunks 4 --serial >"$T/serial" 2>&1
check "--serial: the same values as the plan" bash -c "grep -q value_mean '$T/plan' && cmp -s \
    <(sed 's/\"tick_ms_p50\": [0-9.]*, \"reset_ms\": [0-9.]*//' '$T/plan') \
    <(sed 's/\"tick_ms_p50\": [0-9.]*, \"reset_ms\": [0-9.]*//' '$T/serial')" 
"$FRT" policy rollout -m "$T/p" --fake-robot --planner-shape tiny-dense --planner-every 2 --subtask-tokens 4 \
    --interrupt-at 3 --interrupt-ids 2,7,9 --max-chunks 5 >"$T/o" 2>&1
check "planner + interrupt: 5 chunks" grep -q "episode 0: 5 chunks, stop max_chunks" "$T/o"
"$FRT" policy rollout -m "$T/p" --fake-robot --random-critic --bench --ticks 3 --resets 5 >"$T/o" 2>&1
check "--bench prints the plan ratio and the reset floor" sh -c "grep -q 'plan .*x the policy' '$T/o' && grep -q 'floor' '$T/o'"

"$FRT" policy rollout -m "$T/p" >/dev/null 2>"$T/err"
check "no --fake-robot: exit 2" test $? -eq 2
"$FRT" policy rollout -m "$T/p" --fake-robot --value-stop 0 >/dev/null 2>"$T/err"
check "--value-stop without a critic: exit 2" test $? -eq 2
"$FRT" policy rollout -m "$T/p" --fake-robot --prompt-ids 2,99999 >/dev/null 2>"$T/err"
check "an id outside the vocabulary: exit 1 naming it" sh -c "test $? -eq 1 && grep -q 99999 '$T/err'"
"$FRT" policy rollout -m "$T/p" --fake-robot --critic "$T/missing.safetensors" >/dev/null 2>"$T/err"
check "a missing critic file: exit 1 naming it" sh -c "test $? -eq 1 && grep -q missing.safetensors '$T/err'"
"$FRT" policy rollout -m "$T/p" --fake-robot --interrupt-at 2 >/dev/null 2>"$T/err"
check "--interrupt-at without ids: exit 2" test $? -eq 2
"$FRT" policy rollout -m "$T/p" --fake-robot --image base_0_rgb="$T/x.png" -p hi >/dev/null 2>"$T/err"
check "--image with --fake-robot: exit 2" sh -c "test $? -eq 2 && grep -q -- '--image' '$T/err'"
"$FRT" policy rollout -m "$T/p" --fake-robot -p hi >/dev/null 2>"$T/err"
check "--prompt without --image: exit 2" sh -c "test $? -eq 2 && grep -q -- '--prompt' '$T/err'"
"$FRT" policy rollout -m "$T/p" --image base_0_rgb="$T/missing.png" -p hi >/dev/null 2>"$T/err"
check "--image without --state: exit 2 saying so" sh -c "test $? -eq 2 && grep -q -- '--state' '$T/err'"
"$FRT" policy rollout -m "$T/p" --image base_0_rgb="$T/missing.png" -p hi --state 0,0 >/dev/null 2>"$T/err"
check "--image of a missing file (and no tokenizer.model): exit 1" sh -c "test $? -eq 1 && test -s '$T/err'"
# an option that does nothing in the mode chosen: exit 2 naming it
refuse() { # refuse OPTION ARGS..
    local o="$1"; shift
    "$FRT" policy rollout -m "$T/p" "$@" >/dev/null 2>"$T/err"
    local rc=$?
    check "refused, naming --$o: $*" sh -c "test $rc -eq 2 && grep -q -- '--$o' '$T/err'"
}
IMG=(--image base_0_rgb="$T/x.png" -p hi --state 0,0)
refuse prompt-ids "${IMG[@]}" --prompt-ids 2,3
refuse interrupt-at "${IMG[@]}" --interrupt-at 2 --interrupt-ids 2,3
refuse planner-shape "${IMG[@]}" --planner-shape tiny-dense
refuse planner "${IMG[@]}" --planner "$T/p"
refuse robot-seed "${IMG[@]}" --robot-seed 3
refuse cameras "${IMG[@]}" --cameras 1
B=(--fake-robot --random-critic --bench)
refuse episodes "${B[@]}" --episodes 2
refuse max-chunks "${B[@]}" --max-chunks 3
refuse stop-after "${B[@]}" --stop-after 1
refuse interrupt-at "${B[@]}" --interrupt-at 2 --interrupt-ids 2,3
refuse serial "${B[@]}" --serial
refuse json "${B[@]}" --json
refuse record "${B[@]}" --record "$T/brec"
refuse timeout "${B[@]}" --timeout 5
refuse value-stop "${B[@]}" --value-stop 0
refuse serial --fake-robot --serial
refuse ticks --fake-robot --ticks 3
refuse resets --fake-robot --resets 3
refuse planner-every --fake-robot --planner-every 2
refuse subtask-tokens --fake-robot --subtask-tokens 2
"$FRT" policy rollout -m "$T/p" --fake-robot --robot-seed 3 --cameras 1 --prompt-ids 2,3 --max-chunks 1 >"$T/o" 2>&1
check "--robot-seed, --cameras and --prompt-ids with the fake robot: run" grep -q "episode 0: 1 chunks" "$T/o"
: >"$T/file"; "$FRT" policy rollout -m "$T/p" --fake-robot --record "$T/file/sub" >/dev/null 2>"$T/err"
check "an unwritable --record: exit 1" test $? -eq 1
exit $fail
