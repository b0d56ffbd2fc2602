#!/usr/bin/env python3
"""Golden tensors for frt's RECAP classifier-free guidance of Pi0 / Pi0.5
(docs/policies.md, issue C5): the per-step combine

    v = v_u + beta * (v_c - v_u)        (pi*0.6, arXiv:2511.14759, Appendix E)

over the float64 reference of scripts/ref/pi0_golden.py (openpi's
semantics: prefix_pass + velocity), with fixed noise, for beta 1, 1.5, 2, 2.5.

    python3 scripts/ref/pi0_cfg_golden.py MODEL_DIR [OUT.safetensors]

MODEL_DIR is one of pi0_golden.py's outputs (tests/data/pi0/pi0 or
tests/data/pi0/pi05): its model.safetensors, config.json (model_type) and
golden.safetensors (the inputs: pixel_values, pixel_attention_mask,
input_ids, attention_mask, state for pi0, noise). OUT defaults to
MODEL_DIR/cfg_golden.safetensors and holds:

    input_ids_cond        I32 [10]  the conditioned prompt: the golden's
                                    prompt with two indicator tokens in
                                    place of its pads, then one pad (the
                                    tiny vocabulary has no tokenizer: ids
                                    73, 12 stand for "Advantage: positive")
    attention_mask_cond   U8  [10]
    cond_actions          F32 [chunk, action_dim]  the conditioned prompt alone
    cfg_actions_1_0, cfg_actions_1_5, cfg_actions_2_0, cfg_actions_2_5
                          F32 [chunk, action_dim]  guided, that beta

and prints the float64 check that beta 1 reproduces cond_actions. Needs
torch only (safetensors are read and written here with the standard
library); CPU, float64.
"""

import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pi0_golden as pg  # noqa: E402

BETAS = (1.0, 1.5, 2.0, 2.5)
INDICATOR = [73, 12]
DT = {"F32": (torch.float32, 4), "F64": (torch.float64, 8), "I32": (torch.int32, 4), "I64": (torch.int64, 8),
      "U8": (torch.uint8, 1), "BOOL": (torch.bool, 1), "BF16": (torch.bfloat16, 2)}


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    head.pop("__metadata__", None)
    out = {}
    for k, v in head.items():
        lo, hi = v["data_offsets"]
        dt = DT[v["dtype"]][0]
        out[k] = torch.frombuffer(bytearray(b[8 + n + lo:8 + n + hi]), dtype=dt).reshape(v["shape"]).clone()
    return out


def st_write(path, tensors):
    names = {torch.float32: "F32", torch.int32: "I32", torch.uint8: "U8"}
    head, data = {}, b""
    for k, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        head[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    hb = json.dumps(head).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)


def cfg_reference(W, inp, inp_cond, beta, pi05):
    """The guided inference: the prefix of each prompt, then per Euler step
    the expert on both from the same x_t, combined in float64."""
    _, cache_u, pad_u = pg.prefix_pass(W, inp)
    _, cache_c, pad_c = pg.prefix_pass(W, inp_cond)
    xt = inp["noise"].to(torch.float64)
    dt = -1.0 / pg.STEPS
    for step in range(pg.STEPS):
        v_c = pg.velocity(W, inp_cond, cache_c, pad_c, xt, step, pi05)
        v_u = pg.velocity(W, inp, cache_u, pad_u, xt, step, pi05)
        xt = xt + dt * (v_u + beta * (v_c - v_u))
    return xt


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    d = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(d, "cfg_golden.safetensors")
    torch.set_grad_enabled(False)
    pi05 = json.load(open(os.path.join(d, "config.json")))["model_type"] == "pi05"
    W = {k: v.to(torch.float64) for k, v in st_read(os.path.join(d, "model.safetensors")).items()}
    g = st_read(os.path.join(d, "golden.safetensors"))
    keys = ["pixel_values", "pixel_attention_mask", "input_ids", "attention_mask", "noise"] + ([] if pi05 else ["state"])
    inp = {k: g[k] for k in keys}
    ids, mask = inp["input_ids"].tolist(), inp["attention_mask"].tolist()
    n_valid = sum(mask)
    ids_c = ids[:n_valid] + INDICATOR + [0] * (len(ids) + 1 - n_valid - len(INDICATOR))
    mask_c = [1] * (n_valid + len(INDICATOR)) + [0] * (len(ids_c) - n_valid - len(INDICATOR))
    inp_cond = dict(inp, input_ids=torch.tensor(ids_c, dtype=torch.int32),
                    attention_mask=torch.tensor(mask_c, dtype=torch.uint8))
    # the refactored reference still reproduces the committed golden
    plain = pg.reference(W, inp, pi05=pi05)["actions"]
    print(f"reference vs golden ref_actions: rel {pg.rel(plain, g['ref_actions'].to(torch.float64)):.3e}")
    res = {"input_ids_cond": inp_cond["input_ids"], "attention_mask_cond": inp_cond["attention_mask"]}
    cond = pg.reference(W, inp_cond, pi05=pi05)["actions"]
    res["cond_actions"] = cond.float()
    for beta in BETAS:
        a = cfg_reference(W, inp, inp_cond, beta, pi05)
        res["cfg_actions_%d_%d" % (int(beta), round(beta * 10) % 10)] = a.float()
        print(f"beta {beta}: vs cond-only rel {pg.rel(a, cond):.3e}, vs unguided rel {pg.rel(a, plain):.3e}")
    st_write(out, res)
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
