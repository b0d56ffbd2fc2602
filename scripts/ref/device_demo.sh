#!/usr/bin/env bash
# On the GPU machine: retrain the demo model (scripts/ref/train_demo_model.py)
# on the Debian corpus archive and measure it next to the shipped one
# (scripts/ref/eval_demo_model.py). Results: $OUT/demo.tgz (the new
# checkpoint, the logs, eval.json).
# Usage: bash scripts/ref/device_demo.sh CORPUS.tar.gz [MINUTES]
set -euo pipefail
CORPUS="$1"
MIN="${2:-5}"
OUT="${OUT:-/tmp/out}"
W="$(mktemp -d)"
mkdir -p "$W/res"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$W/res/gpu.txt"
rc=0
python3 scripts/ref/train_demo_model.py --tokenizer models/frt-demo --corpus "$CORPUS" \
    --out "$W/res/frt-demo" --minutes "$MIN" >"$W/res/train.log" 2>&1 || rc=$?
tail -n 30 "$W/res/train.log"
if [ -f "$W/res/frt-demo/model.safetensors" ]; then
    python3 scripts/ref/eval_demo_model.py --corpus "$CORPUS" --model shipped=models/frt-demo \
        --model retrained="$W/res/frt-demo" --out "$W/res/eval.json" 2>&1 | tee "$W/res/eval.log" || rc=$?
fi
tar -C "$W/res" -czf "$OUT/demo.tgz" .
exit $rc
