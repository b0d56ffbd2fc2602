#!/usr/bin/env bash
# frt demo --backend cuda (label gpu): skipped without an NVIDIA GPU.
# Usage: bash demo_gpu.sh BUILD_DIR SOURCE_DIR
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no NVIDIA GPU"; exit 77; }
FRT_DEMO_BACKEND=cuda exec bash "$(dirname "$0")/demo.sh" "$@"
