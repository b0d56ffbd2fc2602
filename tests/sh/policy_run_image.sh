#!/usr/bin/env bash
# policy_run_image.sh BUILD_DIR SOURCE_DIR - `frt policy run --image ... -p
# TEXT --state V,..` on the small policy shapes (frt gen-model --shape
# pi0-tiny / pi05-tiny: 224 x 224 cameras) with a SentencePiece model
# trained here as DIR/tokenizer.model and a norm_stats.json beside it: the
# chunk equals `frt policy prepare` + `frt policy run --inputs` followed by
# openpi's un-normalisation (numpy) and the slice to the statistics' action
# length; without statistics the raw chunk, said once; the refusals.
set -u
B="$1"
SRC="$2"
source "$(dirname "$0")/policy_lib.bash"
policy_init policy_run_image "$B"
policy_spm "$SRC"
# statistics: a 4-value state, a 6-value robot action (the model's is 8)
cat >"$T/norm_stats.json" <<'JSON'
{"norm_stats": {
 "state": {"mean": [0.1, -0.2, 0.3, 0.0], "std": [0.5, 1.5, 2.0, 0.25],
           "q01": [-1.0, -2.0, -0.5, -3.0], "q99": [1.0, 2.5, 0.5, 3.0]},
 "actions": {"mean": [0.5, -0.5, 1.0, 0.0, 2.0, -1.0], "std": [2.0, 0.5, 1.0, 3.0, 0.1, 1.0],
             "q01": [-2.0, -1.0, 0.0, -5.0, 1.0, -3.0], "q99": [2.0, 1.0, 4.0, 5.0, 3.0, 1.0]}}}
JSON
IMG=(--image "base_0_rgb=$T/img_rgb_wide.png" --image "right_wrist_0_rgb=$T/img_jpeg_rgb.jpg")
P="pick up the red cup"
S=0.3,-1.1,0.2,2.5

for v in pi0 pi05; do
    M="$T/$v"
    "$FRT" gen-model --shape "$v-tiny" --out "$M" --seed 5 -q >/dev/null 2>&1 || { echo "gen-model $v-tiny failed"; exit 1; }
    cp "$T/spm.model" "$M/tokenizer.model"
    "$FRT" policy run -m "$M" --backend cpu "${IMG[@]}" -p "$P" --state "$S" --noise-seed 9 --json \
        >"$T/raw_$v.json" 2>"$T/raw_$v.err"
    check "$v: --image without statistics: exit 0" test $? -eq 0
    check "$v: without statistics: said once" test "$(grep -c 'raw values' "$T/raw_$v.err")" -eq 1
    cp "$T/norm_stats.json" "$M/norm_stats.json"
    "$FRT" policy run -m "$M" --backend cpu "${IMG[@]}" -p "$P" --state "$S" --noise-seed 9 --json \
        >"$T/img_$v.json" 2>"$T/img_$v.err"
    check "$v: --image with DIR/norm_stats.json: exit 0" test $? -eq 0
    "$FRT" policy prepare "${IMG[@]}" -p "$P" --state "$S" --tokenizer "$M/tokenizer.model" \
        --norm-stats "$M/norm_stats.json" --variant "$v" --max-state-dim 8 -o "$T/in_$v.safetensors" -q
    check "$v: policy prepare: exit 0" test $? -eq 0
    "$FRT" policy run -m "$M" --backend cpu --inputs "$T/in_$v.safetensors" --noise-seed 9 --json >"$T/in_$v.json"
    check "$v: policy run --inputs: exit 0" test $? -eq 0
    $PY - "$T" "$v" <<'PYEOF'
import json, sys
import numpy as np
t, v = sys.argv[1:]
img, raw, ref = (json.load(open(f"{t}/{k}_{v}.json")) for k in ("img", "raw", "in"))
st = json.load(open(f"{t}/norm_stats.json"))["norm_stats"]["actions"]
a = np.array(ref["actions"], np.float64)             # [10, 8]: the model's normalised chunk
if v == "pi0":
    u = a[:, :6] * (np.array(st["std"]) + 1e-6) + np.array(st["mean"])
else:
    q01, q99 = np.array(st["q01"]), np.array(st["q99"])
    u = (a[:, :6] + 1.0) / 2.0 * (q99 - q01 + 1e-6) + q01
got = np.array(img["actions"], np.float64)
errs = []
if got.shape != (10, 6): errs.append(f"--image chunk shape {got.shape}, want (10, 6)")
elif np.abs(got - u).max() > 1e-5 * max(1.0, np.abs(u).max()): errs.append(f"differs from prepare + run + numpy: {np.abs(got - u).max()}")
if np.array(raw["actions"]).shape != (10, 8): errs.append("the raw chunk is not [10, 8]")
print(f"{v}: --image chunk vs prepare + run --inputs + un-normalise: max |d| {np.abs(got - u).max() if got.shape == u.shape else 'n/a'}")
for e in errs: print("FAIL", e)
sys.exit(1 if errs else 0)
PYEOF
    check "$v: --image equals prepare + run --inputs + openpi's un-normalisation" test $? -eq 0
done

M="$T/pi0"
"$FRT" policy run -m "$M" --backend cpu "${IMG[@]}" -p "$P" --state "$S" --inputs "$T/in_pi0.safetensors" \
    >/dev/null 2>"$T/err"
check "--image and --inputs: exit 2" test $? -eq 2
"$FRT" policy run -m "$M" --backend cpu "${IMG[@]}" -p "$P" --state "$S" --tokenizer "$T/missing.model" \
    >/dev/null 2>"$T/err"
check "a missing tokenizer: exit 1 naming it" sh -c "test $? -eq 1 && grep -q missing.model '$T/err'"
"$FRT" policy run -m "$M" --backend cpu --image "nose_cam=$T/img_rgb_wide.png" -p "$P" --state "$S" >/dev/null 2>"$T/err"
check "an unknown camera: exit 1 naming it" sh -c "test $? -eq 1 && grep -q nose_cam '$T/err'"
"$FRT" policy run -m "$M" --backend cpu "${IMG[@]}" -p "$P" --state 1,2,3,4,5,6,7,8,9 >/dev/null 2>"$T/err"
check "a state longer than max_state_dim: exit 1" test $? -eq 1
"$FRT" policy run -m "$SRC/tests/data/pi0/pi0" --backend cpu "${IMG[@]}" -p "$P" --state "$S" >/dev/null 2>"$T/err"
check "a model whose cameras are not 224 x 224: exit 1, says so" sh -c "test $? -eq 1 && grep -q 224 '$T/err'"
[ $fail -eq 0 ] && echo "policy_run_image: all passed" || echo "policy_run_image: FAILED"
exit $fail
