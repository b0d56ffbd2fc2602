#!/usr/bin/env python3
"""Make a small FP8 E4M3 test checkpoint from a float (bf16 / f16 / f32)
dense or Qwen3.5 hybrid checkpoint, in one of the layouts frt's loaders read
(docs/fp8.md "FP8 weights"):

  ct-tensor   compressed-tensors "float-quantized", weights strategy
              "tensor": X.weight F8_E4M3 + X.weight_scale [1]
  ct-channel  compressed-tensors, strategy "channel": X.weight_scale [out, 1]
  block       transformers "fp8" (FineGrainedFP8Config), weight_block_size
              [bo, bi]: X.weight_scale_inv [ceil(out / bo), ceil(in / bi)]

Every decoder-layer Linear weight (2-d PREFIX layers.N.*_proj.weight, and
the Qwen3.5 hybrid's linear_attn.in_proj_qkv / _z / _b / _a; PREFIX "model."
or "model.language_model.") is quantized: scale s = max|w| / 448 over the tensor, the row or the block
(at least FLT_MIN; 1 for zeros), code = E4M3(w * (1 / s)) rounded to
nearest-even and saturated to +-448 (OCP OFP8 satfinite; with the amax scale
nothing saturates, so this equals torch's tensor.to(torch.float8_e4m3fn)).
All arithmetic is float32, the same operations as frt's
frt_fp8_quantize_rows, so the ct-channel codes equal frt's quantize-at-load
(--dtype fp8) of the same checkpoint bit for bit. Everything else
(embedding, lm_head, norms, biases) is copied unchanged.

  none        nothing quantized (the weights copied as they are); with
              --kv-scales, a kv-only compressed-tensors config

--kv-scales f32|bf16 adds FP8 KV-cache scales (docs/fp8.md "Scales from
the checkpoint"): quantization_config gets kv_cache_scheme {type "float",
num_bits 8, symmetric, dynamic false, strategy "tensor"} and every attention
layer L (a PREFIX layers.L.self_attn.k_proj.weight tensor, PREFIX "model." or
"model.language_model.") gets PREFIX layers.L.self_attn.k_scale = 0.01 (L + 1)
and .v_scale = 0.013 (L + 1), shape [], of that dtype (bf16: rounded to
nearest even). The values are a deterministic function of the layer (tests
compare them bit for bit), not calibrated ones. --kv-strategy attn_head
writes strategy "attn_head" and per-KV-head scales instead: shape
[num_key_value_heads], head j's value the layer's times (1 + 0.125 j), in
float32 in that order.

--twin DIR also writes the dequantized twin: the same checkpoint with each
quantized weight replaced by decode(code) * s as F32, a plain float model
whose forward must equal the FP8 checkpoint's bit for bit.

numpy only (runs here with /usr/bin/python3); when torch is importable the
codes are cross-checked against torch's float8_e4m3fn conversion.

    python3 scripts/ref/make_fp8_checkpoint.py SRC OUT --layout ct-channel \
        [--block 128 128] [--scale-dtype f32|bf16] [--kv-scales f32|bf16]
        [--kv-strategy tensor|attn_head] [--twin TWIN]

Generated checkpoints are test-time artefacts: never commit them.
"""
import argparse
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

E4M3_MAX = np.float32(448.0)
LINEAR = re.compile(r"^model\.(?:language_model\.)?layers\.\d+\."
                    r"(?:.*_proj|linear_attn\.in_proj_(?:qkv|z|b|a))\.weight$")
ATTENTION = re.compile(r"^(model\.(?:language_model\.)?)layers\.(\d+)\.self_attn\.k_proj\.weight$")
KV_SCHEME = {"type": "float", "num_bits": 8, "symmetric": True, "dynamic": False, "strategy": "tensor",
             "group_size": None, "observer": "minmax"}
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F8_E4M3": np.uint8,
          "I32": np.int32, "I64": np.int64, "U8": np.uint8}


def e4m3_values():
    """The 127 non-negative finite E4M3 values, code 0x00..0x7E, ascending."""
    v = []
    for c in range(0x7F):
        e, m = c >> 3, c & 7
        v.append(2.0 ** -6 * (m / 8) if e == 0 else 2.0 ** (e - 7) * (1 + m / 8))
    return np.array(v, dtype=np.float32)


VALUES = e4m3_values()


def encode(x):
    """float32 array -> E4M3 codes (uint8), satfinite, ties to even."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    hi = np.clip(np.searchsorted(VALUES, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    dlo, dhi = a - VALUES[lo], VALUES[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code = np.where(a >= E4M3_MAX, np.uint8(0x7E), code)
    code = np.where(np.signbit(x), code | np.uint8(0x80), code)
    return np.where(np.isnan(x), np.uint8(0x7F), code).astype(np.uint8)


def decode(q):
    v = VALUES[np.minimum(q & 0x7F, 126)]
    return np.where(q & 0x80, -v, v).astype(np.float32)


def amax_scale(block):
    amax = np.float32(np.max(np.abs(block))) if block.size else np.float32(0)
    if amax == 0:
        return np.float32(1.0)
    return np.float32(max(np.float32(amax / E4M3_MAX), np.finfo(np.float32).tiny))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def to_f32(dtype, arr):
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float32)


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even (finite inputs)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def stored_scales(w, layout, block):
    """The scale tensor of w [out, in]: [1], [out, 1] or the block grid."""
    o, i = w.shape
    if layout == "ct-tensor":
        return np.array([amax_scale(w)], np.float32)
    if layout == "ct-channel":
        return np.array([amax_scale(w[r]) for r in range(o)], np.float32).reshape(o, 1)
    bo, bi = block
    nb = np.zeros(((o + bo - 1) // bo, (i + bi - 1) // bi), np.float32)
    for r in range(nb.shape[0]):
        for c in range(nb.shape[1]):
            nb[r, c] = amax_scale(w[r * bo:(r + 1) * bo, c * bi:(c + 1) * bi])
    return nb


def expand(stored, shape, layout, block):
    """The stored scales as one per element [out, in]."""
    o, i = shape
    if layout == "ct-tensor":
        return np.full(shape, stored.reshape(-1)[0], np.float32)
    if layout == "ct-channel":
        return np.repeat(stored.reshape(o, 1), i, axis=1).astype(np.float32)
    bo, bi = block
    return np.repeat(np.repeat(stored, bo, axis=0)[:o], bi, axis=1)[:, :i].astype(np.float32)


def quantize(w, layout, block, scale_dtype):
    """-> (codes, scale tensor (dtype, array), dequantized f32). A bf16
    scale is rounded first: the codes are made with the scale the loader
    reads (values past 448 then saturate)."""
    stored = stored_scales(w, layout, block)
    stored_t = ("F32", stored)
    if scale_dtype == "bf16":
        bits = to_bf16(stored)
        stored, stored_t = to_f32("BF16", bits), ("BF16", bits)
    full = expand(stored, w.shape, layout, block)
    inv = (np.float32(1.0) / full).astype(np.float32)
    codes = encode((w * inv).astype(np.float32))
    cross_check_torch(w, inv, codes)
    return codes, stored_t, (decode(codes) * full).astype(np.float32)


def cross_check_torch(w, inv, codes):
    try:
        import torch
    except ImportError:
        return
    if not hasattr(torch, "float8_e4m3fn"):  # torch < 2.1
        return
    x = (torch.from_numpy(w) * torch.from_numpy(inv)).clamp(-448.0, 448.0)
    t = x.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    if not np.array_equal(t, codes):
        sys.exit("make_fp8_checkpoint: numpy codes differ from torch float8_e4m3fn")


def kv_scale_tensors(tensors, dtype, heads):
    """{name: (dtype, array)}: k_scale 0.01 (L + 1), v_scale 0.013 (L + 1)
    for every attention layer L of tensors, shape [] (heads None) or [heads]
    (head j times 1 + 0.125 j)."""
    out = {}
    for name in tensors:
        m = ATTENTION.match(name)
        if not m:
            continue
        prefix, layer = m.group(1), int(m.group(2))
        for kv, base in (("k", 0.01), ("v", 0.013)):
            v = np.array(np.float32(base) * np.float32(layer + 1), np.float32)
            if heads:
                v = (v * (np.float32(1) + np.float32(0.125) * np.arange(heads, dtype=np.float32))).astype(np.float32)
            out["%slayers.%d.self_attn.%s_scale" % (prefix, layer, kv)] = \
                ("BF16", to_bf16(v)) if dtype == "bf16" else ("F32", v)
    if not out:
        sys.exit("make_fp8_checkpoint: no attention layer (layers.N.self_attn.k_proj.weight) for --kv-scales")
    return out


def quant_config(layout, block, kv, kv_strategy):
    scheme = dict(KV_SCHEME, strategy=kv_strategy)
    if layout == "none":
        return {"quant_method": "compressed-tensors", "format": "dense", "quantization_status": "compressed",
                "config_groups": {}, "kv_cache_scheme": scheme}
    if layout == "block":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": list(block), "modules_to_not_convert": ["lm_head"]}
    return {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "ignore": ["lm_head"], "kv_cache_scheme": scheme if kv else None,
        "config_groups": {"group_0": {
            "targets": ["Linear"], "output_activations": None,
            "weights": {"type": "float", "num_bits": 8, "symmetric": True, "dynamic": False,
                        "strategy": "tensor" if layout == "ct-tensor" else "channel", "group_size": None},
            "input_activations": {"type": "float", "num_bits": 8, "symmetric": True, "dynamic": True,
                                  "strategy": "token"}}},
    }


def copy_side_files(src, dst):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".json") and f not in ("config.json", "golden.json", "model.safetensors.index.json"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--layout", choices=["ct-tensor", "ct-channel", "block", "none"], required=True)
    ap.add_argument("--block", type=int, nargs=2, default=[128, 128])
    ap.add_argument("--scale-dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--kv-scales", choices=["f32", "bf16"])
    ap.add_argument("--kv-strategy", choices=["tensor", "attn_head"], default="tensor")
    ap.add_argument("--twin")
    a = ap.parse_args()
    if a.kv_scales and a.layout == "block":
        sys.exit("make_fp8_checkpoint: --kv-scales needs a compressed-tensors layout (ct-tensor, ct-channel, none)")
    if a.layout == "none" and not a.kv_scales:
        sys.exit("make_fp8_checkpoint: --layout none is a kv-only checkpoint: give --kv-scales")
    tensors = read_safetensors(os.path.join(a.src, "model.safetensors"))
    with open(os.path.join(a.src, "config.json")) as f:
        cfg = json.load(f)
    fp8, twin = {}, {}
    for name, (dtype, arr) in tensors.items():
        if a.layout == "none" or not (LINEAR.match(name) and arr.ndim == 2):
            fp8[name] = twin[name] = (dtype, arr)
            continue
        codes, scale, deq = quantize(to_f32(dtype, arr), a.layout, a.block, a.scale_dtype)
        fp8[name] = ("F8_E4M3", codes)
        fp8[name + ("_scale_inv" if a.layout == "block" else "_scale")] = scale
        twin[name] = ("F32", deq)
    if a.kv_scales:
        text = cfg.get("text_config", cfg)
        heads = int(text.get("num_key_value_heads", text["num_attention_heads"])) \
            if a.kv_strategy == "attn_head" else None
        fp8.update(kv_scale_tensors(tensors, a.kv_scales, heads))
    copy_side_files(a.src, a.out)
    write_safetensors(os.path.join(a.out, "model.safetensors"), fp8)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(dict(cfg, quantization_config=quant_config(a.layout, a.block, a.kv_scales, a.kv_strategy)), f, indent=2)
    if a.twin:
        copy_side_files(a.src, a.twin)
        write_safetensors(os.path.join(a.twin, "model.safetensors"), twin)
        with open(os.path.join(a.twin, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
