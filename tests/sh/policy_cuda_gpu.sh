#!/usr/bin/env bash
# policy_cuda_gpu.sh BUILD_DIR SOURCE_DIR (label gpu; skipped without an
# NVIDIA GPU) - the policy command line on the cuda backend: for the small
# policy shapes (frt gen-model --shape pi0-tiny / pi05-tiny, 224 x 224
# cameras), `frt policy run --backend cuda --inputs FILE` (two cameras, the
# second masked, a padded prompt, fixed noise) against `--backend cpu` on the
# same file: the chunk within cosine >= 0.999 and norm-wise rel <= 3e-2;
# then with --cfg-beta 1.5 (serial CFG) the same bar; `frt bench policy
# --backend cuda --cfg-beta 1.5` prints p50 / p99 next to its floor with the
# node count, for the baseline, serial and fused CFG; with --batch 4 the
# batch rows (unguided and fused CFG), each rollout within cosine >= 0.999
# and rel <= 3e-2 of its single run; `--dtype fp8` (the prefix's MLP in
# FP8) within FP8's actions bar (rel <= 3e-2, cosine >= 0.999) of the cpu
# chunk, and its bench run; `--autotune 4 --tune-file F` tunes and saves F,
# a second run loads it and prints the same bytes, a tune file that does not
# parse is refused by name and left alone, and `frt serve --policy
# --policy-autotune 4 --policy-tune-file F` loads with it (--probe).
set -u
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no NVIDIA GPU"; exit 77; }
B="$1"
FRT="$B/frt"
# a python with numpy: Debian's (/usr/bin/python3, CI) or the one on PATH
# (the GPU machine's, which has torch and numpy but no Debian packages)
PY=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: needs a python3 with numpy"; exit 77; }
T=$(mktemp -d /tmp/frt_policy_cuda.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
check() { # check "what" command...
    local what="$1"
    shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
near() { # near LABEL CPU.json CUDA.json: the chunks within rel <= 3e-2 and cosine >= 0.999
    $PY - "$@" <<'PYEOF'
import json, sys
import numpy as np
label, pa, pb = sys.argv[1:]
a, b = (np.array(json.load(open(p))["actions"], np.float64) for p in (pa, pb))
rel = np.linalg.norm(b - a) / np.linalg.norm(a)
cos = float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))
print(f"     {label} vs cpu: rel {rel:.3e} (<= 3e-2), cos {cos:.6f} (>= 0.999)")
sys.exit(0 if a.shape == b.shape and rel <= 3e-2 and cos >= 0.999 else 1)
PYEOF
}

for v in pi0 pi05; do
    M="$T/$v"
    "$FRT" gen-model --shape "$v-tiny" --out "$M" --seed 5 -q >/dev/null 2>&1 || { echo "gen-model $v-tiny failed"; exit 1; }
    $PY - "$T/in_$v.safetensors" "$v" <<'PYEOF'
import sys
import numpy as np
from safetensors.numpy import save_file
path, v = sys.argv[1:]
r = np.random.default_rng(3)
t = {"pixel_values": r.uniform(-1, 1, (2, 3, 224, 224)).astype(np.float32),
     "pixel_attention_mask": np.array([1, 0], np.uint8),
     "input_ids": r.integers(1, 1000, 12).astype(np.int32),
     "attention_mask": np.array([1] * 10 + [0] * 2, np.uint8),
     "input_ids_cond": r.integers(1, 1000, 14).astype(np.int32),
     "noise": r.normal(size=(10, 8)).astype(np.float32)}
if v == "pi0":
    t["state"] = r.uniform(-1, 1, 8).astype(np.float32)
save_file(t, path)
PYEOF
    check "$v: inputs written" test -s "$T/in_$v.safetensors"
    for mode in plain cfg; do
        extra=()
        [ "$mode" = cfg ] && extra=(--cfg-beta 1.5)
        for bk in cpu cuda; do
            "$FRT" policy run -m "$M" --backend "$bk" --inputs "$T/in_$v.safetensors" "${extra[@]}" --json \
                >"$T/$v.$mode.$bk.json" 2>"$T/$v.$mode.$bk.err"
            check "$v $mode: policy run --backend $bk: exit 0" test $? -eq 0
        done
        near cuda "$T/$v.$mode.cpu.json" "$T/$v.$mode.cuda.json"
        check "$v $mode: cuda chunk within the bar of the cpu chunk" test $? -eq 0
    done
    "$FRT" policy run -m "$M" --backend cuda --dtype fp8 --inputs "$T/in_$v.safetensors" --json \
        >"$T/$v.fp8.cuda.json" 2>"$T/$v.fp8.cuda.err"
    check "$v: policy run --backend cuda --dtype fp8: exit 0" test $? -eq 0
    near "cuda fp8" "$T/$v.plain.cpu.json" "$T/$v.fp8.cuda.json"
    check "$v: the fp8 chunk within FP8's bar of the cpu chunk (docs/policies.md)" test $? -eq 0
    # --autotune N --tune-file F: tuned and saved by the first run, loaded (nothing timed) by the second, whose
    # chunk is the same bytes; a file that does not parse is refused by name and left as it was
    tf="$T/tune_$v.txt"
    for i in 1 2; do
        "$FRT" policy run -m "$M" --backend cuda --autotune 4 --tune-file "$tf" --inputs "$T/in_$v.safetensors" \
            --json --out "$T/$v.tuned$i.st" >"$T/$v.tuned$i.json" 2>"$T/$v.tuned$i.err"
        check "$v: policy run --autotune 4 --tune-file (run $i): exit 0" test $? -eq 0
    done
    check "$v: the tune file was written" sh -c "head -1 '$tf' | grep -q '^frt-gemm-tune 1'"
    check "$v: the run that loaded the tune file gives the first run's bytes (--out)" \
        cmp -s "$T/$v.tuned1.st" "$T/$v.tuned2.st"
    near "cuda autotuned" "$T/$v.plain.cpu.json" "$T/$v.tuned1.json"
    check "$v: the autotuned chunk within the bar of the cpu chunk" test $? -eq 0
    printf 'frt-gemm-tune 1\ngarbage\n' >"$T/bad_tune.txt"
    cp "$T/bad_tune.txt" "$T/bad_tune.orig"
    "$FRT" policy run -m "$M" --backend cuda --autotune 4 --tune-file "$T/bad_tune.txt" \
        --inputs "$T/in_$v.safetensors" >/dev/null 2>"$T/bad_tune.err"
    rc=$?
    check "$v: a tune file that does not parse: refused (exit 1) by name, left as it was" \
        sh -c "test $rc -eq 1 && grep -q bad_tune.txt '$T/bad_tune.err' && cmp -s '$T/bad_tune.txt' '$T/bad_tune.orig'"
    "$FRT" serve --policy "$M" --robot droid --backend cuda --policy-autotune 4 --policy-tune-file "$tf" --probe \
        >"$T/serve_tuned_$v.txt" 2>&1
    # the probe ends at "policy ready", or, where gen-model's tiny model has no tokenizer.model (no spm_train on
    # the machine), at the service's tokenizer once the model has loaded with the tune file
    check "$v: serve --policy-autotune --policy-tune-file: the policy loads (probe)" \
        sh -c "grep -q 'policy ready' '$T/serve_tuned_$v.txt' ||
               (grep -q 'loaded .* of weights' '$T/serve_tuned_$v.txt' && grep -q 'tokenizer.model' '$T/serve_tuned_$v.txt')"
    "$FRT" bench policy -m "$M" --backend cuda --tokens 12 --repeats 5 --dtype fp8 >"$T/bench_fp8_$v.txt" 2>&1
    check "$v: bench policy --dtype fp8: exit 0, says so" grep -q "dtype fp8: the prefix" "$T/bench_fp8_$v.txt"
    "$FRT" bench policy -m "$M" --backend cuda --tokens 12 --repeats 20 --cfg-beta 1.5 >"$T/bench_$v.txt" 2>&1
    check "$v: bench policy --backend cuda --cfg-beta 1.5: exit 0" test $? -eq 0
    sed 's/^/     /' "$T/bench_$v.txt" | grep -E "on cuda|p50|floor"
    check "$v: bench prints p50, p99 and the floor" grep -q "p99.*floor" "$T/bench_$v.txt"
    check "$v: bench counts the graph nodes" grep -q "cfg fused .*nodes [0-9]" "$T/bench_$v.txt"
    "$FRT" bench policy -m "$M" --backend cuda --cameras 2 --tokens 12 --repeats 20 --batch 4 --cfg-beta 1.5 \
        --cfg-mode fused >"$T/bench_batch_$v.txt" 2>&1
    check "$v: bench policy --backend cuda --batch 4 --cfg-beta 1.5: exit 0" test $? -eq 0
    sed 's/^/     /' "$T/bench_batch_$v.txt" | grep -E "batch"
    check "$v: bench --batch: the batches within the CUDA bar of their single runs" $PY - "$T/bench_batch_$v.txt" <<'PYEOF'
import re, sys
rows = [l for l in open(sys.argv[1]) if re.search(r"cams (cfg )?batch ", l)]
ok = len(rows) == 2
for l in rows:
    m = re.search(r"rel <= ([0-9.e+-]+), cos >= ([0-9.]+)", l)
    ok = ok and m is not None and float(m.group(1)) <= 3e-2 and float(m.group(2)) >= 0.999
sys.exit(0 if ok else 1)
PYEOF
done
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
