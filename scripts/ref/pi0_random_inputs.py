#!/usr/bin/env python3
"""Random exact model inputs for `frt policy run --inputs` (docs/policies.md),
at any shape, with the standard library only:

    python3 scripts/ref/pi0_random_inputs.py OUT.safetensors [--cameras 3] [--masked 0]
        [--size 224] [--tokens 48] [--valid 20] [--vocab 257152] [--state 32] [--seed 0]

pixel_values F32 [cameras, 3, size, size] uniform in [-1, 1];
pixel_attention_mask U8 [cameras] (the last --masked cameras 0);
input_ids I32 [tokens] (2 = BOS first, then random ids in [3, vocab), the
slots past --valid padded with 0); attention_mask U8 [tokens];
state F32 [--state] normal (0 = no state, for pi05). No noise: frt draws it
from the episode's stream (--noise-seed).
"""

import argparse
import json
import random
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cameras", type=int, default=3)
    ap.add_argument("--masked", type=int, default=0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--valid", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=257152)
    ap.add_argument("--state", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n_px = a.cameras * 3 * a.size * a.size
    tensors = [
        ("pixel_values", "F32", [a.cameras, 3, a.size, a.size],
         struct.pack("<%df" % n_px, *(rng.uniform(-1, 1) for _ in range(n_px)))),
        ("pixel_attention_mask", "U8", [a.cameras],
         bytes(1 if i < a.cameras - a.masked else 0 for i in range(a.cameras))),
        ("input_ids", "I32", [a.tokens],
         struct.pack("<%di" % a.tokens, *([2] + [rng.randrange(3, a.vocab) if i < a.valid else 0
                                                 for i in range(1, a.tokens)]))),
        ("attention_mask", "U8", [a.tokens], bytes(1 if i < a.valid else 0 for i in range(a.tokens))),
    ]
    if a.state:
        tensors.append(("state", "F32", [a.state],
                        struct.pack("<%df" % a.state, *(rng.gauss(0, 1) for _ in range(a.state)))))
    header, off = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, _, data in tensors:
            f.write(data)


if __name__ == "__main__":
    main()
