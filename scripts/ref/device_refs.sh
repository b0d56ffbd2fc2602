#!/usr/bin/env bash
# Make all of frt's reference data on the GPU machine in one call.
#
# Run from the repository root on the GPU machine (torch + CUDA,
# transformers 5, tokenizers, safetensors, numpy; no network):
#
#     bash scripts/ref/device_refs.sh
#
# Steps, each timed and logged; a failing step is recorded and the next one
# still runs, so one broken script does not lose the others' output:
#   1. scripts/ref/make_tokenizer.py     -> W/tokenizer/{qwen35,qwen2,gpt2}/..., golden.json
#   2. scripts/ref/make_golden_models.py -> W/golden/<model>/...
# (The shipped demo model is made apart, by scripts/ref/device_demo.sh: it
# needs the corpus archive of scripts/ref/pack_demo_corpus.py.)
# then W is packed into $OUT/refs.tar.gz (top folder "refs/").
#
# Output ($OUT, default ./refs-out): refs.tar.gz and refs.log. The device
# tool brings back at most 8 files of 16 MiB each: when the archive is
# larger it is split into refs.tar.gz.part00, part01, ... (15 MiB each;
# rejoin with `cat refs.tar.gz.part* > refs.tar.gz`).
#
# Time: the whole run must end well inside the 600 s limit of one device
# command. REFS_STEPS (default "tokenizer golden") selects steps, e.g.
# REFS_STEPS="tokenizer" to redo only the tokenizers.
# Exit status: 0 when every step succeeded, 1 otherwise (the archive and the
# log are written either way).
set -euo pipefail

export PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export TOKENIZERS_PARALLELISM=true

OUT="${OUT:-$PWD/refs-out}"
mkdir -p "$OUT"
LOG="$OUT/refs.log"
: > "$LOG"
W="$(mktemp -d /tmp/frt-refs.XXXXXX)/refs"
mkdir -p "$W"
REFS_STEPS=" ${REFS_STEPS:-tokenizer golden} "
T0=$(date +%s)
FAILED=()

log() { echo "$*" | tee -a "$LOG"; }

# run_step NAME CMD...: run CMD with its output in the log; record failure.
run_step() {
    local name="$1"; shift
    local t1 rc
    case "$name" in
        tokenizer|golden)
            if [[ "$REFS_STEPS" != *" $name "* ]]; then
                log "=== [$name] not selected (REFS_STEPS=$REFS_STEPS)"
                return 0
            fi;;
    esac
    t1=$(date +%s)
    log ""
    log "=== [$name] start $(date -u +%H:%M:%S) (t+$((t1 - T0))s): $*"
    set +e
    "$@" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    set -e
    log "=== [$name] exit $rc after $(( $(date +%s) - t1 ))s"
    if [ "$rc" -ne 0 ]; then
        FAILED+=("$name(rc=$rc)")
    fi
}

log "frt device_refs: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
log "repo: $PWD  commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
log "work: $W  out: $OUT  steps:$REFS_STEPS"
run_step gpu nvidia-smi -L
run_step versions python3 -c 'import sys, torch, transformers, tokenizers, safetensors, numpy
print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "safetensors", safetensors.__version__, "numpy", numpy.__version__)'

run_step tokenizer python3 scripts/ref/make_tokenizer.py --out "$W/tokenizer"
run_step golden python3 scripts/ref/make_golden_models.py --out "$W/golden"

log ""
log "=== contents of $W"
(cd "$W" && find . -type f -printf '%10s  %p\n' | sort -k2) | tee -a "$LOG"
log "total: $(du -sh "$W" | cut -f1)"
sums=$(cd "$W" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
printf '%s\n' "$sums" > "$W/SHA256SUMS"

tar -C "$(dirname "$W")" -czf "$OUT/refs.tar.gz" refs
size=$(stat -c %s "$OUT/refs.tar.gz")
log "archive: $OUT/refs.tar.gz $size bytes"
limit=$(( 16 * 1024 * 1024 - 4096 ))
if [ "$size" -gt "$limit" ]; then
    split -b 15M -d "$OUT/refs.tar.gz" "$OUT/refs.tar.gz.part"
    rm "$OUT/refs.tar.gz"
    log "archive over 16 MiB: split into $(ls "$OUT"/refs.tar.gz.part* | wc -l) parts;" \
        "rejoin with: cat refs.tar.gz.part* > refs.tar.gz"
fi
ls -l "$OUT" | tee -a "$LOG"

log ""
log "elapsed: $(( $(date +%s) - T0 ))s"
if [ "${#FAILED[@]}" -gt 0 ]; then
    log "FAILED steps: ${FAILED[*]}"
    exit 1
fi
log "all steps ok"
