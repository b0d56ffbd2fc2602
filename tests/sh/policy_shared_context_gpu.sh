#!/usr/bin/env bash
# policy_shared_context_gpu.sh BUILD_DIR SOURCE_DIR (label gpu; skipped
# without an NVIDIA GPU): policy_shared_context.sh on the cuda backend: the
# demo LLM and a pi05-tiny policy in one process and one CUDA context, the
# two servers taking turns on its stream, every answer equal to the one
# served alone, no recapture.
set -u
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no NVIDIA GPU"; exit 77; }
exec bash "$(dirname "$0")/policy_shared_context.sh" "$1" "$2" cuda
