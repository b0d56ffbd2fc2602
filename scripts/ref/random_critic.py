#!/usr/bin/python3
"""random_critic.py CONFIG.json OUT.safetensors [HIDDEN [SEED]] - a random value critic for the policy of
CONFIG.json in the layout of docs/robot.md (critic.layers.{0,1}.weight / .bias, F32): layer 0 takes the state
(max_state_dim values) and the pooled vision features (the prefix width, vlm_config.text_config.hidden_size),
HIDDEN (default 16) SiLU units, then one value. Weights uniform in +-0.5, biases in +-0.1 (numpy's default_rng of
SEED, default 3). Written with numpy and the safetensors format by hand (8-byte header length, JSON header,
data), so frt's loader is checked against a file it did not write. Used by tests/sh/policy_server.sh and
scripts/bench-robot.sh."""
import json
import struct
import sys

import numpy as np


def main():
    c = json.load(open(sys.argv[1]))
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    width, sd = c["vlm_config"]["text_config"]["hidden_size"], c["max_state_dim"]
    rng = np.random.default_rng(seed)
    sizes = [sd + width, hidden, 1]
    tensors = {}
    for i in range(2):
        tensors[f"critic.layers.{i}.weight"] = rng.uniform(-0.5, 0.5, (sizes[i + 1], sizes[i])).astype(np.float32)
        tensors[f"critic.layers.{i}.bias"] = rng.uniform(-0.1, 0.1, (sizes[i + 1],)).astype(np.float32)
    head, off, blob = {}, 0, b""
    for k, v in tensors.items():
        head[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
        blob += v.tobytes()
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


if __name__ == "__main__":
    main()
