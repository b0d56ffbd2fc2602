#!/usr/bin/env bash
# policy_prepare.sh BUILD_DIR SOURCE_DIR - `frt policy prepare` end to end:
# two camera images (PNG and JPEG of odd sizes) of three cameras, a prompt, a
# state and norm_stats.json, for Pi0 and Pi0.5, written as safetensors and
# checked by numpy against Pillow's resize_with_pad, openpi's normalisation
# and spm_encode's ids (goldens made here: scripts/ref/policy_io_goldens.py
# and a SentencePiece model trained by spm_train); then every refusal, with
# no output file left behind.
set -u
B="$1"
SRC="$2"
source "$(dirname "$0")/policy_lib.bash"
policy_init policy_prepare "$B"
policy_spm "$SRC"
$PY -c "import json; m = json.load(open('$T/manifest.json')); json.dump(m['norm']['stats'], open('$T/norm_stats.json', 'w'))"
printf 'pick up the cup\n' | spm_encode --model="$T/spm.model" --output_format=id > "$T/prompt.ids"
printf '\n' > "$T/empty.txt"

# verify FILE VARIANT: numpy checks of one inputs file
verify() {
    $PY - "$T" "$1" "$2" <<'PYEOF'
import json, struct, sys
import numpy as np
from PIL import Image
t, path, variant = sys.argv[1:]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = raw[8 + n:]
def tensor(name, dt):
    e = head[name]
    b, f = e["data_offsets"]
    return np.frombuffer(data[b:f], dtype=dt).reshape(e["shape"])
pv, pm = tensor("pixel_values", np.float32), tensor("pixel_attention_mask", np.uint8)
ids, am, st = tensor("input_ids", np.int64), tensor("attention_mask", np.uint8), tensor("state", np.float32)
errs = []
def want_pixels(name):
    rsz = np.frombuffer(open(f"{t}/img_{name}.rsz", "rb").read(), np.uint8).reshape(224, 224, 3)
    return (rsz.astype(np.float32) / 255.0 * 2.0 - 1.0).transpose(2, 0, 1)
if pv.shape != (3, 3, 224, 224): errs.append(f"pixel_values shape {pv.shape}")
else:
    d0 = np.abs(pv[0] - want_pixels("rgb_wide")).max()
    d2 = np.abs(pv[2] - want_pixels("jpeg_rgb")).max()
    if d0 or d2: errs.append(f"pixel_values differ from Pillow's: {d0}, {d2}")
    if not np.all(pv[1] == -1.0): errs.append("the missing camera is not -1")
    print(f"{variant}: pixel_values max |frt - Pillow| {max(d0, d2)}")
if list(pm) != [1, 0, 1]: errs.append(f"pixel_attention_mask {list(pm)}")
stats = json.load(open(f"{t}/norm_stats.json"))["norm_stats"]["state"]
s = np.array([0.5, -1.25, 2.0], np.float32).astype(np.float64)
if variant == "pi0":
    norm = (s - np.array(stats["mean"][:3])) / (np.array(stats["std"][:3]) + 1e-6)
else:
    q01, q99 = np.array(stats["q01"][:3]), np.array(stats["q99"][:3])
    norm = (s - q01) / (q99 - q01 + 1e-6) * 2.0 - 1.0
want_state = np.zeros(32, np.float32)
want_state[:3] = norm.astype(np.float32)
if st.shape != (32,) or not np.array_equal(st, want_state): errs.append(f"state {st[:4]} want {want_state[:4]}")
n_tok = 48 if variant == "pi0" else 200
valid = int(am.sum())
if ids.shape != (n_tok,) or am.shape != (n_tok,): errs.append(f"ids shape {ids.shape}")
if ids[0] != 2 or not np.all(am[:valid] == 1) or np.any(am[valid:]) or np.any(ids[valid:]):
    errs.append("BOS / mask / padding")
if variant == "pi0":
    body = [int(x) for x in open(f"{t}/prompt.ids").read().split()]
    if list(ids[1:1 + len(body)]) != body or valid != len(body) + 2:
        errs.append(f"pi0 ids {list(ids[:valid])} vs [2] + {body} + [nl]")
elif head["__metadata__"].get("frt.policy.variant") != "pi05": errs.append("metadata")
for e in errs: print("FAIL", e)
sys.exit(1 if errs else 0)
PYEOF
}

for v in pi0 pi05; do
    out="$T/in_$v.safetensors"
    if "$FRT" policy prepare --image "base_0_rgb=$T/img_rgb_wide.png" --image="right_wrist_0_rgb=$T/img_jpeg_rgb.jpg" \
        -p "pick up the cup" --state 0.5,-1.25,2 --tokenizer "$T/spm.model" --norm-stats "$T/norm_stats.json" \
        --variant $v -o "$out" > "$T/out" 2> "$T/err" && verify "$out" $v; then
        echo "ok   policy prepare $v: $(cat "$T/out")"
    else
        echo "FAIL policy prepare $v: $(cat "$T/out" "$T/err")"; fail=1
    fi
done
# without statistics: raw state, said once on stderr
if "$FRT" policy prepare --image "base_0_rgb=$T/img_gray.png" -p go --state 1,2 --tokenizer "$T/spm.model" \
    -o "$T/raw.safetensors" > "$T/out" 2> "$T/err" && [ "$(grep -c 'raw units' "$T/err")" = 1 ]; then
    echo "ok   no --norm-stats: raw state, said once"
else
    echo "FAIL no --norm-stats: $(cat "$T/err")"; fail=1
fi

# refuse STATUS "MESSAGE" ARGS...: exit status, message, no output file
refuse() {
    local want_rc="$1" want="$2"; shift 2
    rm -f "$T/bad.safetensors"
    "$FRT" policy prepare "$@" -o "$T/bad.safetensors" > "$T/out" 2> "$T/err"
    local rc=$?
    if [ $rc -eq "$want_rc" ] && grep -qF -- "$want" "$T/err" && [ ! -e "$T/bad.safetensors" ]; then
        echo "ok   refused ($rc): $want"
    else
        echo "FAIL $*: status $rc (want $want_rc), stderr: $(cat "$T/err") (want: $want)"; fail=1
    fi
}
IMG="base_0_rgb=$T/img_rgb_small.png"
TOK=(--tokenizer "$T/spm.model")
refuse 2 "--tokenizer and --out are required" --image "$IMG" -p go --state 1
refuse 2 "at least one --image" -p go --state 1 "${TOK[@]}"
refuse 2 "'x' is not a finite number" --image "$IMG" -p go --state 1,x "${TOK[@]}"
refuse 2 "'nan' is not a finite number" --image "$IMG" -p go --state nan "${TOK[@]}"
refuse 2 "expected CAMERA=FILE" --image "$T/img_rgb_small.png" -p go --state 1 "${TOK[@]}"
refuse 2 "--variant" --image "$IMG" -p go --state 1 --variant pi1 "${TOK[@]}"
refuse 1 "unknown camera 'top'" --image "top=$T/img_rgb_small.png" -p go --state 1 "${TOK[@]}"
refuse 1 "given twice" --image "$IMG" --image "$IMG" -p go --state 1 "${TOK[@]}"
refuse 1 "4 images for a model with 3 cameras" --image "$IMG" --image "left_wrist_0_rgb=$T/img_gray.png" \
    --image "right_wrist_0_rgb=$T/img_gray.png" --image "x=$T/img_gray.png" -p go --state 1 "${TOK[@]}"
refuse 1 "the prompt is empty" --image "$IMG" -p "  " --state 1 "${TOK[@]}"
refuse 1 "at most 2" --image "$IMG" -p go --state 1,2,3 --max-state-dim 2 "${TOK[@]}"
refuse 1 "FRT_ERR_NOT_FOUND" --image "base_0_rgb=$T/none.png" -p go --state 1 "${TOK[@]}"
refuse 1 "16-bit" --image "base_0_rgb=$T/img_png16.png" -p go --state 1 "${TOK[@]}"
refuse 1 "not a PNG or JPEG" --image "base_0_rgb=$T/corpus.txt" -p go --state 1 "${TOK[@]}"
refuse 1 "not supported" --image "$IMG" -p go --state 1 --tokenizer "$T/manifest.json"
refuse 1 "not a SentencePiece model" --image "$IMG" -p go --state 1 --tokenizer "$T/corpus.txt"
echo '{"norm_stats": {"state": {"mean": [1], "std": [1]}}}' > "$T/zscore_only.json"
refuse 1 "no q01 / q99" --image "$IMG" -p go --state 1 "${TOK[@]}" --variant pi05 --norm-stats "$T/zscore_only.json"
refuse 1 "norm_stats" --image "$IMG" -p go --state 1 "${TOK[@]}" --norm-stats "$T/corpus.txt"
refuse 1 "the statistics have 7" --image "$IMG" -p go --state 1,2,3,4,5,6,7,8 "${TOK[@]}" \
    --norm-stats "$T/norm_stats.json"
exit $fail
