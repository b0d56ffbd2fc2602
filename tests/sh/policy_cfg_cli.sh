#!/usr/bin/env bash
# policy_cfg_cli.sh BUILD_DIR SOURCE_DIR - `frt policy run --cfg-beta B`
# (classifier-free guidance, docs/policies.md) on the small policy shapes
# (frt gen-model --shape pi0-tiny / pi05-tiny) with a SentencePiece model
# trained here: --image -p TEXT builds the conditioned prompt itself and
# equals --inputs with the input_ids_cond / attention_mask_cond of
# `frt policy prepare -p "TEXT Advantage: positive"` merged in (bit for
# bit); beta 1 equals the conditioned prompt alone within 1e-6;
# --advantage negative gives another chunk; the refusals.
set -u
B="$1"
SRC="$2"
source "$(dirname "$0")/policy_lib.bash"
policy_init policy_cfg_cli "$B"
policy_spm "$SRC"
IMG=(--image "base_0_rgb=$T/img_rgb_wide.png" --image "right_wrist_0_rgb=$T/img_jpeg_rgb.jpg")
P="pick up the red_cup"
S=0.3,-1.1,0.2,2.5

# merge.py OUT UNCOND COND: UNCOND's tensors plus COND's prompt as *_cond.
cat >"$T/merge.py" <<'PYEOF'
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
out, unc, cond = sys.argv[1:]
t = read(unc)
c = read(cond)
t["input_ids_cond"], t["attention_mask_cond"] = c["input_ids"], c["attention_mask"]
h, data = {}, b""
for k, (dt, sh, raw) in t.items():
    h[k] = {"dtype": dt, "shape": sh, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(out, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
PYEOF

run() { "$FRT" policy run --backend cpu --noise-seed 9 --json "$@"; }
for v in pi0 pi05; do
    M="$T/$v"
    "$FRT" gen-model --shape "$v-tiny" --out "$M" --seed 5 -q >/dev/null 2>&1 || { echo "gen-model $v-tiny failed"; exit 1; }
    cp "$T/spm.model" "$M/tokenizer.model"
    prep() { "$FRT" policy prepare "${IMG[@]}" -p "$1" --state "$S" --tokenizer "$M/tokenizer.model" --variant "$v" \
        --max-state-dim 8 -o "$2" -q; }
    prep "$P" "$T/u_$v.st" && prep "$P Advantage: positive" "$T/c_$v.st" && prep "$P Advantage: negative" "$T/n_$v.st"
    check "$v: prepare: exit 0" test $? -eq 0
    $PY "$T/merge.py" "$T/uc_$v.st" "$T/u_$v.st" "$T/c_$v.st" && $PY "$T/merge.py" "$T/un_$v.st" "$T/u_$v.st" "$T/n_$v.st"
    run -m "$M" --inputs "$T/uc_$v.st" --cfg-beta 2 >"$T/in2_$v.json" 2>"$T/err"
    check "$v: --inputs with input_ids_cond --cfg-beta 2: exit 0" test $? -eq 0
    run -m "$M" "${IMG[@]}" -p "$P" --state "$S" --cfg-beta 2 >"$T/img2_$v.json" 2>"$T/err"
    check "$v: --image --cfg-beta 2: exit 0" test $? -eq 0
    run -m "$M" "${IMG[@]}" -p "$P" --state "$S" --cfg-beta 2 --advantage negative >"$T/imgn_$v.json" 2>"$T/err"
    run -m "$M" --inputs "$T/un_$v.st" --cfg-beta 2 >"$T/inn_$v.json" 2>"$T/err"
    run -m "$M" --inputs "$T/uc_$v.st" --cfg-beta 1 >"$T/in1_$v.json" 2>"$T/err"
    run -m "$M" --inputs "$T/c_$v.st" >"$T/cond_$v.json" 2>"$T/err"
    run -m "$M" --inputs "$T/u_$v.st" >"$T/unc_$v.json" 2>"$T/err"
    run -m "$M" --inputs "$T/uc_$v.st" >"$T/off_$v.json" 2>"$T/err"
    check "$v: input_ids_cond without --cfg-beta: not used, said" grep -q "input_ids_cond is not used" "$T/err"
    $PY - "$T" "$v" <<'PYEOF'
import json, sys
import numpy as np
t, v = sys.argv[1:]
a = {k: np.array(json.load(open(f"{t}/{k}_{v}.json"))["actions"], np.float64)
     for k in ("in2", "img2", "imgn", "inn", "in1", "cond", "unc", "off")}
rel = lambda x, y: np.linalg.norm(x - y) / np.linalg.norm(y)
errs = []
if not np.array_equal(a["in2"], a["img2"]): errs.append(f"--image vs --inputs (positive): {rel(a['img2'], a['in2'])}")
if not np.array_equal(a["inn"], a["imgn"]): errs.append(f"--image vs --inputs (negative): {rel(a['imgn'], a['inn'])}")
if np.array_equal(a["img2"], a["imgn"]): errs.append("--advantage negative gave the positive chunk")
if np.array_equal(a["in2"], a["unc"]): errs.append("guidance did not change the chunk")
if rel(a["in1"], a["cond"]) > 1e-6: errs.append(f"beta 1 vs the conditioned prompt alone: {rel(a['in1'], a['cond'])}")
if not np.array_equal(a["off"], a["unc"]): errs.append("without --cfg-beta the chunk is not the unguided one")
print(f"{v}: beta 1 vs cond-only rel {rel(a['in1'], a['cond']):.3e}; beta 2 vs unguided rel {rel(a['in2'], a['unc']):.3e}")
for e in errs: print("FAIL", e)
sys.exit(1 if errs else 0)
PYEOF
    check "$v: --image == --inputs, beta 1 == cond-only, negative differs" test $? -eq 0
done

M="$T/pi05"
run -m "$M" --inputs "$T/uc_pi05.st" --cfg-beta 0.5 >/dev/null 2>"$T/err"
check "--cfg-beta 0.5: exit 1 naming [1, inf)" sh -c "test $? -eq 1 && grep -qF '[1, inf)' '$T/err'"
run -m "$M" --inputs "$T/u_pi05.st" --cfg-beta 2 >/dev/null 2>"$T/err"
check "--cfg-beta without input_ids_cond: exit 1 naming it" sh -c "test $? -eq 1 && grep -q input_ids_cond '$T/err'"
run -m "$M" --inputs "$T/uc_pi05.st" --advantage negative >/dev/null 2>"$T/err"
check "--advantage without --cfg-beta: exit 2" test $? -eq 2
run -m "$M" --inputs "$T/uc_pi05.st" --cfg-beta 2 --advantage negative >/dev/null 2>"$T/err"
check "--advantage with --inputs: exit 2" test $? -eq 2
run -m "$M" --inputs "$T/uc_pi05.st" --cfg-beta nan >/dev/null 2>"$T/err"
check "--cfg-beta nan: refused" test $? -ne 0
[ $fail -eq 0 ] && echo "policy_cfg_cli: all passed" || echo "policy_cfg_cli: FAILED"
exit $fail
