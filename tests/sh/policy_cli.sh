#!/usr/bin/env bash
# frt policy run from the command line on the Pi0 / Pi0.5 goldens
# (tests/data/pi0, scripts/ref/pi0_golden.py): the printed and --json chunk
# and the --out file equal the golden actions (norm-wise rel <= 1e-4); the
# episode noise (--noise-seed) is reproducible; the error paths (missing
# options, --noise-seed with noise in the file, --tokenizer / --norm-stats /
# --cameras with --inputs, --image on a model whose
# cameras are not 224 x 224, a bad input file) fail with a message; a pi05
# given a file with a state (frt policy prepare writes it) says the state is
# not an input (its prompt holds it)
# and a nonzero status. Skipped (77) without the goldens.
# Usage: bash policy_cli.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
FRT="$BUILD/frt"
G="${FRT_PI0_GOLDEN:-$SRC/tests/data/pi0}"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
[ -s "$G/pi0/golden.safetensors" ] || { echo "SKIP: no Pi0 goldens in $G"; exit 77; }
T="$(mktemp -d /tmp/frt_policy_cli.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}

# compare.py KIND FILE GOLDEN: KIND json (stdin) | text (stdin) | st (FILE);
# the golden's ref_actions (and actions when present), rel <= 1e-4.
cat > "$T/compare.py" <<'PY'
import json, math, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        s, e = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
kind, path, gold = sys.argv[1:4]
if kind == "json":
    a = [x for row in json.load(sys.stdin)["actions"] for x in row]
elif kind == "text":
    a = [float(x) for line in sys.stdin for x in line.split()]
else:
    a = list(tensors(path)["actions"])
g = tensors(gold)
ok = True
for name in ("actions", "ref_actions"):
    if name not in g:
        continue
    r = g[name]
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, r)))
    den = math.sqrt(sum(y * y for y in r))
    e = num / den if len(a) == len(r) else float("inf")
    print("%s rel %.3e" % (name, e))
    ok = ok and e <= 1e-4
sys.exit(0 if ok else 1)
PY

for which in pi0 pi05; do
    D="$G/$which"
    out="$("$FRT" policy run -m "$D" --inputs "$D/golden.safetensors" --backend cpu --json --out "$T/$which.st")"
    check "$which: run --json exits 0" test $? -eq 0
    check "$which: --json chunk equals the golden" /usr/bin/python3 "$T/compare.py" json - "$D/golden.safetensors" <<<"$out"
    check "$which: --out file equals the golden" /usr/bin/python3 "$T/compare.py" st "$T/$which.st" "$D/golden.safetensors"
    txt="$("$FRT" policy run -m "$D" --inputs "$D/golden.safetensors" --backend cpu)"
    check "$which: text rows equal the golden" /usr/bin/python3 "$T/compare.py" text - "$D/golden.safetensors" <<<"$txt"
done

# The episode's noise: the inputs without `noise`, a seed.
/usr/bin/python3 - "$G/pi0/golden.safetensors" "$T/nonoise.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
keep = ["pixel_values", "pixel_attention_mask", "input_ids", "attention_mask", "state"]
hdr, blobs, off = {}, [], 0
for k in keep:
    v = h[k]
    s, e = v["data_offsets"]
    blobs.append(b[8 + n + s:8 + n + e])
    hdr[k] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [off, off + e - s]}
    off += e - s
j = json.dumps(hdr).encode()
j += b" " * ((8 - len(j) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b"".join(blobs))
PY
a="$("$FRT" policy run -m "$G/pi0" --inputs "$T/nonoise.st" --backend cpu --noise-seed 7)"
b="$("$FRT" policy run -m "$G/pi0" --inputs "$T/nonoise.st" --backend cpu --noise-seed 7)"
c="$("$FRT" policy run -m "$G/pi0" --inputs "$T/nonoise.st" --backend cpu --noise-seed 8)"
check "same --noise-seed: same chunk" test "$a" = "$b"
check "other --noise-seed: other chunk" test "$a" != "$c"

err="$("$FRT" policy run -m "$G/pi0" --backend cpu 2>&1)"
check "no --inputs: usage error" test $? -eq 2
check "no --inputs: says so" grep -q "inputs FILE (or --image ...) is required" <<<"$err"
err="$("$FRT" policy run -m "$G/pi0" --inputs "$G/pi0/golden.safetensors" --noise-seed 3 --backend cpu 2>&1)"
check "--noise-seed with file noise: usage error" test $? -eq 2
# --tokenizer, --norm-stats and --cameras build --image inputs: an --inputs file is the model's inputs
for o in tokenizer norm-stats cameras; do
    err="$("$FRT" policy run -m "$G/pi0" --inputs "$G/pi0/golden.safetensors" --backend cpu --$o x 2>&1)"
    check "--$o with --inputs: usage error" test $? -eq 2
    check "--$o with --inputs: says it goes with --image" grep -q -- "--$o goes with --image" <<<"$err"
done
err="$("$FRT" policy run -m "$G/pi0" --image base=a.png --prompt hi --backend cpu 2>&1)"
check "--image on a model whose cameras are not 224 x 224: fails" test $? -eq 1
check "--image on a model whose cameras are not 224 x 224: says so" grep -q "224 x 224" <<<"$err"
out="$("$FRT" inspect "$G/pi0" 2>&1)"
check "inspect a Pi0 checkpoint: exit 0" test $? -eq 0
check "inspect a Pi0 checkpoint: the policy's shapes" grep -q "Pi0 (model_type pi0).*policy" <<<"$out"
check "inspect a Pi0 checkpoint: chunk and steps" grep -q "chunk 5 x 7, 10 Euler steps" <<<"$out"
out="$("$FRT" inspect "$G/pi05" 2>&1)"
check "inspect a Pi0.5 checkpoint: adaRMSNorm" grep -q "adaRMSNorm" <<<"$out"
echo junk > "$T/bad.st"
err="$("$FRT" policy run -m "$G/pi0" --inputs "$T/bad.st" --backend cpu 2>&1)"
check "a broken inputs file: fails" test $? -eq 1
err="$("$FRT" policy run -m "$G/pi05" --inputs "$G/pi0/golden.safetensors" --backend cpu 2>&1)"
check "pi05 given a file with a state: runs" test $? -eq 0
check "pi05 given a file with a state: says the state is not an input" grep -q "takes the state in the prompt" <<<"$err"
out="$("$FRT" bench policy -m "$G/pi0" --backend cpu --cameras 2 --tokens 9 --repeats 3 --json "$T/bench.json" 2>/dev/null)"
check "bench policy exits 0" test $? -eq 0
check "bench policy prints p50 and the floor" grep -q "p50 .* floor\|floor .* the floor" <<<"$out"
check "bench policy --json has the latency" /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['rows']; assert d['bench']=='policy' and len(r)==1 and r[0]['what']=='baseline' and r[0]['p50']>0 and r[0]['denoise_p50']>0 and r[0]['floor_ms']>0 and r[0]['cameras']==2 and r[0]['nodes']==-1" "$T/bench.json"
out="$("$FRT" bench policy -m "$G/pi05" --backend cpu --tokens 9 --repeats 2 --cfg-beta 1.5 --json "$T/bench_cfg.json" 2>/dev/null)"
check "bench policy --cfg-beta: exits 0" test $? -eq 0
check "bench policy --cfg-beta: baseline, serial and fused rows for 2 and 3 cameras" /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rows']; w=[(x['cameras'],x['what']) for x in r]; assert w==[(c,k) for c in (2,3) for k in ('baseline','cfg serial','cfg fused')], w; f={x['what']:x['floor_ms'] for x in r if x['cameras']==2}; assert f['cfg serial']>f['baseline'] and f['cfg fused']>f['baseline']" "$T/bench_cfg.json"
check "bench policy --cfg-beta: prints the fused row" grep -q "cfg fused" <<<"$out"
check "bench policy --json: each floor is its cost over the measured rates (a read of N weight bytes takes N / the copy rate)" /usr/bin/python3 -c "
import json, sys
d = json.load(open(sys.argv[1])); f = d['floors']
G, D = f['gemm_TFLOPs'] * 1e12, f['d2d_copy_GBps_read_plus_write'] * 1e9
for x in d['rows']:
    c = x['cost']; k = 1 if x['what'] == 'baseline' else 2; rd = 2 if x['what'] == 'cfg serial' else 1
    e = max(k * c['flops_expert'] / G, rd * c['steps'] * c['expert_params'] * c['weight_bytes_per_param'] / D)
    want = 1e3 * ((c['flops_vision'] + k * c['flops_prefix']) / G + e)
    assert abs(x['floor_ms'] - want) <= 1e-6 * want, (x['what'], x['floor_ms'], want)
" "$T/bench_cfg.json"
err="$("$FRT" bench policy -m "$G/pi05" --backend cpu --cfg-beta 0.5 --repeats 1 2>&1)"
check "bench policy --cfg-beta 0.5: refused" test $? -eq 2
err="$("$FRT" bench policy -m "$G/pi05" --backend cpu --autotune 4 --repeats 1 2>&1)"
check "bench policy --autotune on the cpu backend: fails" test $? -eq 1
check "bench policy --autotune on the cpu backend: says so" grep -q "no GEMM autotune" <<<"$err"
err="$("$FRT" bench policy -m "$G/pi0" --backend cpu --cameras 4 --repeats 1 2>&1)"
check "bench policy, too many cameras: fails" test $? -eq 1
err="$("$FRT" policy 2>&1)"
check "frt policy alone: usage" test $? -eq 2

[ $fail -eq 0 ] && echo "policy_cli: all passed" || echo "policy_cli: FAILED"
exit $fail
