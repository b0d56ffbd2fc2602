#!/usr/bin/env bash
# fp8_ckpt_torch.sh BUILD_DIR SOURCE_DIR - scripts/ref/make_fp8_checkpoint.py
# --quantizer torch against the numpy quantizer (docs/fp8.md "Test
# checkpoints"): on a sharded gen-model tiny-dense, every layout (ct-channel,
# ct-tensor with bf16 KV scales, block 128x128 with bf16 scales, block 32x64)
# with --twin, every output file byte for byte the numpy one's; on a tensor
# past 2^22 elements the per-tensor check passes on every layout and a scale
# changed inside the checked stripe stops the script.
# torch >= 2.1 (float8_e4m3fn) is used as it is. With an older torch
# (/usr/bin/python3 here has 1.13) the E4M3 conversion alone, torch_e4m3(),
# is stood in by the numpy encoder, so the rest of the torch path (scales,
# divisions, block padding, expansion, streaming) is still checked; the
# test says which. No torch at all: skipped (77).
set -u
B="$1"
S="$2"
FRT="$B/frt"
PY=/usr/bin/python3
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
"$PY" -c "import torch, numpy" 2>/dev/null || { echo "SKIP: $PY has no torch"; exit 77; }
T="$(mktemp -d /tmp/frt_fp8_torch.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
. "$(dirname "$0")/generate_lib.bash"

cat >"$T/run.py" <<'EOF'
# run.py SCRIPT_DIR ARGS...: make_fp8_checkpoint.main() with ARGS; the E4M3
# conversion stood in by numpy's encoder when torch has no float8_e4m3fn.
import sys, torch
sys.path.insert(0, sys.argv[1])
import make_fp8_checkpoint as m
if not hasattr(torch, "float8_e4m3fn"):
    torch.float8_e4m3fn = None  # torch_device's check; the conversion below replaces its use
    m.torch_e4m3 = lambda x: (lambda c: (c, torch.from_numpy(m.decode(c)).to(x.device)))(m.encode(x.cpu().numpy()))
sys.argv = ["make_fp8_checkpoint.py"] + sys.argv[2:]
m.main()
EOF
"$PY" -c "import torch, sys; sys.exit(not hasattr(torch, 'float8_e4m3fn'))" &&
    echo "torch $("$PY" -c 'import torch; print(torch.__version__)'): its float8_e4m3fn conversion" ||
    echo "torch $("$PY" -c 'import torch; print(torch.__version__)') has no float8_e4m3fn: the conversion is numpy's encoder"

"$FRT" gen-model --shape tiny-dense --seed 4 --out "$T/src" --shard-size 300000 --quiet >/dev/null ||
    { echo "FAIL gen-model"; exit 1; }
n=0
for args in "--layout ct-channel" "--layout ct-tensor --kv-scales bf16" "--layout block --scale-dtype bf16" \
    "--layout block --block 32 64"; do
    n=$((n + 1))
    # shellcheck disable=SC2086 # the layout arguments are words
    "$PY" "$T/run.py" "$S/scripts/ref" "$T/src" "$T/t$n" $args --quantizer torch --device cpu --twin "$T/tt$n" \
        2>"$T/err"
    check "torch $args: exit 0" test $? -eq 0
    # shellcheck disable=SC2086
    "$PY" "$S/scripts/ref/make_fp8_checkpoint.py" "$T/src" "$T/n$n" $args --twin "$T/nt$n" 2>"$T/err"
    same=0
    for f in "$T/n$n"/* "$T/nt$n"/*; do
        g="$T/t$n/$(basename "$f")"
        case "$f" in "$T/nt$n"/*) g="$T/tt$n/$(basename "$f")" ;; esac
        cmp -s "$f" "$g" || { echo "  differs: $g"; same=1; }
    done
    check "torch $args: every file (shards, index, config, twin) == numpy's" test $same -eq 0
done

cat >"$T/big.py" <<'EOF'
import sys, numpy as np, torch
sys.path.insert(0, sys.argv[1])
import make_fp8_checkpoint as m
if not hasattr(torch, "float8_e4m3fn"):
    m.torch_e4m3 = lambda x: (lambda c: (c, torch.from_numpy(m.decode(c))))(m.encode(x.numpy()))
w = np.random.default_rng(2).standard_normal((2100, 2050)).astype(np.float32)  # > 2^22: a stripe is checked
for layout in ["ct-tensor", "ct-channel", "block"]:
    for sd in ["f32", "bf16"]:
        m.check_against_numpy("big", w, layout, [128, 128], sd, m.torch_quantize(w, layout, [128, 128], sd, "cpu"))
print("every layout equal", flush=True)
got = m.torch_quantize(w, "ct-channel", [128, 128], "f32", "cpu")
got[1][1][5] *= 2
m.check_against_numpy("big", w, "ct-channel", [128, 128], "f32", got)
EOF
"$PY" "$T/big.py" "$S/scripts/ref" >"$T/out" 2>"$T/err"
check "a 2100 x 2050 tensor: a changed scale in the stripe stops the script (exit 1)" test $? -eq 1
check "a 2100 x 2050 tensor: every layout equal first" grep -q "every layout equal" "$T/out"
check "a 2100 x 2050 tensor: then the message" \
    grep -q "big: torch's codes or scales differ from numpy's (128 rows checked)" "$T/err"
exit $fail
