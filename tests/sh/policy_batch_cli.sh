#!/usr/bin/env bash
# policy_batch_cli.sh BUILD_DIR SOURCE_DIR - `frt policy run` with several
# --inputs (one batch of rollouts, frt_policy_run_batch) on the small
# policy shapes (frt gen-model --shape pi0-tiny / pi05-tiny): three input
# files with random cameras, prompts, states and noise (numpy, written
# here); the batch's chunks equal three single runs bit for bit, without
# and with --cfg-beta; --out writes actions [3, chunk, action_dim]; the
# text output marks each rollout; a bad file names itself. frt bench policy
# --batch 2 (with --cfg-beta): the batch rows, per slot and slots a second
# next to B = 1, equal to their single runs on cpu; a guided batch needing
# more than FRT_POLICY_BATCH_MAX slots refused.
set -u
B="$1"
FRT="$B/frt"
PY=/usr/bin/python3
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
$PY -c 'import numpy' 2>/dev/null || { echo "SKIP: needs /usr/bin/python3 with numpy (scripts/install-deps.sh)"; exit 77; }
T="$(mktemp -d /tmp/frt_policy_batch_cli.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() {
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}

# mk.py DIR PI05: three observations obs0..2.st (pi0-tiny / pi05-tiny:
# 224 x 224 cameras, 1024 ids, chunk 10 x 8, state 8).
cat >"$T/mk.py" <<'PYEOF'
import json, struct, sys
import numpy as np
d, pi05 = sys.argv[1], sys.argv[2] == "1"
rng = np.random.default_rng(21)
def write(path, t):
    h, data = {}, b""
    for k, a in t.items():
        dt = {np.float32: "F32", np.int32: "I32", np.uint8: "U8"}[a.dtype.type]
        raw = a.tobytes()
        h[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + data)
for r in range(3):
    cams, tok = 1 + r % 3, 12 + 3 * r
    t = {"pixel_values": rng.uniform(-1, 1, (cams, 3, 224, 224)).astype(np.float32),
         "input_ids": np.concatenate([[2], rng.integers(4, 1024, tok - 1)]).astype(np.int32),
         "attention_mask": (np.arange(tok) < tok - r).astype(np.uint8),
         "noise": rng.normal(size=(10, 8)).astype(np.float32),
         "input_ids_cond": np.concatenate([[2], rng.integers(4, 1024, tok + 1)]).astype(np.int32)}
    if not pi05:
        t["state"] = rng.uniform(-1, 1, 8).astype(np.float32)
    write(f"{d}/obs{r}.st", t)
PYEOF

run() { "$FRT" policy run --backend cpu "$@"; }
for v in pi0 pi05; do
    M="$T/$v"
    "$FRT" gen-model --shape "$v-tiny" --out "$M" --seed 3 -q >/dev/null 2>&1 || { echo "gen-model $v-tiny failed"; exit 1; }
    $PY "$T/mk.py" "$M" "$([ $v = pi05 ] && echo 1 || echo 0)" || exit 1
    for cfg in "" "--cfg-beta 2"; do
        tag="$v${cfg:+ cfg}"
        for r in 0 1 2; do run -m "$M" --inputs "$M/obs$r.st" --json $cfg >"$M/one$r.json" 2>/dev/null; done
        run -m "$M" --inputs "$M/obs0.st" --inputs "$M/obs1.st" --inputs="$M/obs2.st" --json $cfg --out "$M/b.st" \
            >"$M/batch.json" 2>"$T/err"
        check "$tag: three --inputs: exit 0" test $? -eq 0
        $PY - "$M" <<'PYEOF'
import json, struct, sys
import numpy as np
d = sys.argv[1]
one = [np.array(json.load(open(f"{d}/one{r}.json"))["actions"], np.float32) for r in range(3)]
b = json.load(open(f"{d}/batch.json"))
raw = open(f"{d}/b.st", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])["actions"]
out = np.frombuffer(raw[8 + n + h["data_offsets"][0]:8 + n + h["data_offsets"][1]], np.float32).reshape(h["shape"])
errs = []
if b["rollouts"] != 3 or h["shape"] != [3, 10, 8]: errs.append(f"rollouts {b['rollouts']}, --out shape {h['shape']}")
for r in range(3):
    if not np.array_equal(np.array(b["actions"][r], np.float32), one[r]): errs.append(f"rollout {r} != its single run")
    if not np.array_equal(out[r], one[r]): errs.append(f"--out rollout {r} != its single run")
if np.array_equal(one[0], one[1]): errs.append("two observations gave one chunk")
for e in errs: print("FAIL", e)
sys.exit(1 if errs else 0)
PYEOF
        check "$tag: the batch equals three single runs (json and --out)" test $? -eq 0
    done
    run -m "$M" --inputs "$M/obs0.st" --inputs "$M/obs1.st" >"$M/batch.txt" 2>"$T/err"
    check "$v: text output marks each rollout" sh -c "test \$(grep -c '^# rollout' '$M/batch.txt') -eq 2"
done

M="$T/pi0"
printf 'not safetensors' >"$T/bad.st"
run -m "$M" --inputs "$M/obs0.st" --inputs "$T/bad.st" >/dev/null 2>"$T/err"
check "a bad second file: exit 1 naming it" sh -c "test $? -eq 1 && grep -q bad.st '$T/err'"
run -m "$M" --inputs "$M/obs0.st" --inputs "$M/obs1.st" --noise-seed 3 >/dev/null 2>"$T/err"
check "--noise-seed with noise in the files: exit 2" test $? -eq 2
M="$T/pi05"
"$FRT" bench policy -m "$M" --backend cpu --cameras 1 --tokens 9 --repeats 2 --warmup 0 --batch 2 --cfg-beta 1.5 \
    --cfg-mode fused --json "$T/bench.json" >"$T/bench.txt" 2>/dev/null
check "bench policy --batch 2 --cfg-beta: exit 0" test $? -eq 0
$PY - "$T/bench.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))["rows"]
w = [x["what"] for x in r]
assert w == ["baseline", "cfg fused", "batch", "cfg batch"], w
for x in r[2:]:
    assert x["batch"] == 2 and x["p50"] > 0 and x["floor_ms"] > 0, x
    assert abs(x["per_slot_p50"] - x["p50"] / 2) < 1e-9 and abs(x["slots_per_s"] - 2e3 / x["p50"]) < 1e-6, x
    assert x["max_rel"] == 0.0 and x["min_cos"] > 0.999999, x  # the cpu batch equals its single runs
assert r[2]["single_p50"] == r[0]["p50"] and r[3]["single_p50"] == r[1]["p50"], r
PYEOF
check "bench policy --batch: batch rows (per slot, slots/s next to B = 1, equal to single runs on cpu)" test $? -eq 0
$PY - "$T/bench.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1])); f = d["floors"]
G, D = f["gemm_TFLOPs"] * 1e12, f["d2d_copy_GBps_read_plus_write"] * 1e9
for x in d["rows"][2:]:  # a batch of n: n times the vision and prefix (and expert) FLOPs, the weights read once a step
    c, n = x["cost"], x["batch"]; k = 2 if x["what"] == "cfg batch" else 1
    e = max(n * k * c["flops_expert"] / G, c["steps"] * c["expert_params"] * c["weight_bytes_per_param"] / D)
    want = 1e3 * (n * (c["flops_vision"] + k * c["flops_prefix"]) / G + e)
    assert abs(x["floor_ms"] - want) <= 1e-6 * want, (x["what"], x["floor_ms"], want)
PYEOF
check "bench policy --batch: each batch floor is its cost over the measured rates" test $? -eq 0
check "bench policy --batch: prints slots/s" grep -q "slots/s" "$T/bench.txt"
"$FRT" bench policy -m "$M" --backend cpu --batch 40 --cfg-beta 1.5 --repeats 1 >/dev/null 2>"$T/err"
check "bench policy --batch 40 --cfg-beta: 80 slots refused (exit 2)" sh -c "test $? -eq 2 && grep -q 'slots' '$T/err'"
"$FRT" bench policy -m "$M" --backend cpu --cameras 1 --tokens 9 --repeats 1 --warmup 0 --dtype fp8 >"$T/b8.txt" 2>&1
check "bench policy --dtype fp8 on cpu (emulated): exit 0, says so" grep -q "dtype fp8: the prefix" "$T/b8.txt"
run -m "$M" --inputs "$M/obs0.st" --json >"$T/f32.json" 2>/dev/null
run -m "$M" --inputs "$M/obs0.st" --dtype fp8 --json >"$T/fp8.json" 2>"$T/err"
check "policy run --dtype fp8 on cpu (emulated): exit 0" test $? -eq 0
check "policy run --dtype fp8: another chunk than f32's" sh -c "! cmp -s '$T/f32.json' '$T/fp8.json'"
run -m "$M" --inputs "$M/obs0.st" --autotune 4 >/dev/null 2>"$T/err"
check "policy run --autotune on the cpu backend: refused at load, named (exit 1)" \
    sh -c "test $? -eq 1 && grep -q 'no GEMM autotune' '$T/err'"
run -m "$M" --inputs "$M/obs0.st" --tune-file "$T/tune.txt" >/dev/null 2>"$T/err"
check "policy run --tune-file without --autotune: a usage error (exit 2)" \
    sh -c "test $? -eq 2 && grep -q 'needs --autotune' '$T/err' && test ! -e '$T/tune.txt'"
run -m "$M" --inputs "$M/obs0.st" --autotune 65 >/dev/null 2>"$T/err"
check "policy run --autotune 65: out of range (exit 2)" test $? -eq 2
"$FRT" bench policy -m "$M" --backend cpu --repeats 1 --dtype fp16 >/dev/null 2>"$T/err"
check "bench policy --dtype fp16: a usage error (exit 2)" test $? -eq 2
[ $fail -eq 0 ] && echo "policy_batch_cli: all passed" || echo "policy_batch_cli: FAILED"
exit $fail
