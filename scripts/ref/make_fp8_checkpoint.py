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
float32 in that order. --kv-names writes the per-tensor scales under an
older name vLLM still reads (strategy "tensor" only): output_scale gives
PREFIX layers.L.self_attn.k_proj.output_scale / .v_proj.output_scale,
shape [1] (older compressed-tensors, the kv_cache_scheme applied as
output_activations of k_proj and v_proj); kv_scale gives one
PREFIX layers.L.self_attn.kv_scale, shape [], for both K and V: the K
value 0.01 (L + 1). new (the default) writes k_scale / v_scale.

--twin DIR also writes the dequantized twin: the same checkpoint with each
quantized weight replaced by decode(code) * s as F32, a plain float model
whose forward must equal the FP8 checkpoint's bit for bit.

--quantizer numpy (default) does the arithmetic in numpy (runs here with
/usr/bin/python3); when torch >= 2.1 is importable the codes are
cross-checked against torch's float8_e4m3fn conversion.
--quantizer torch does it in torch (torch >= 2.1, on CUDA when available,
--device to choose): amax per tensor / row / block, s = amax / 448 and
1 / s as element-wise IEEE divisions (tensor by tensor: torch turns a
division by a scalar into a multiplication by its reciprocal), x * (1 / s)
clamped to +-448 (satfinite), then x.to(torch.float8_e4m3fn) (round to
nearest even). The codes and scales are the numpy path's bit for bit:
each tensor is checked against it (whole when it has at most 2^22
elements, else on a stripe of its first rows: 128, or one row of blocks;
the per-tensor scale always over the whole tensor); a difference stops
the script (exit status 1).

The source may be one model.safetensors or shards with
model.safetensors.index.json (frt gen-model's layout at 8B): tensors are
read one at a time (memory-mapped) and written as they are made, one
output shard per input shard with an index, so memory follows the
largest Linear weight, not the model (numpy: 1.3 GB peak on llama3.2-1b's
shape, a few GB at 8B for the encoder's temporaries; torch: under 1 GB).

    python3 scripts/ref/make_fp8_checkpoint.py SRC OUT --layout ct-channel \
        [--block 128 128] [--scale-dtype f32|bf16] [--kv-scales f32|bf16]
        [--kv-strategy tensor|attn_head] [--kv-names new|output_scale|kv_scale]
        [--twin TWIN]
        [--quantizer numpy|torch] [--device auto|cuda|cpu]

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


SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "I32": 4, "I64": 8, "U8": 1}
MMAP_BYTES = 16 << 20  # tensors this large are memory-mapped, smaller ones read


def shards(src):
    """-> ([shard file names], sharded?): model.safetensors.index.json's
    files in order of first appearance, else model.safetensors."""
    idx = os.path.join(src, "model.safetensors.index.json")
    if not os.path.exists(idx):
        return ["model.safetensors"], False
    with open(idx) as f:
        files = []
        for fn in json.load(f)["weight_map"].values():
            if fn not in files:
                files.append(fn)
    return files, True


def read_header(path):
    """-> (data start, [(name, info)] in file order)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return 8 + n, [(k, v) for k, v in header.items() if k != "__metadata__"]


def load_tensor(path, base, info):
    """One tensor as a numpy array (memory-mapped when large)."""
    b, e = info["data_offsets"]
    dt, shape = DTYPES[info["dtype"]], tuple(info["shape"])
    if e - b >= MMAP_BYTES:
        return np.memmap(path, dtype=dt, mode="r", offset=base + b, shape=shape)
    with open(path, "rb") as f:
        f.seek(base + b)
        return np.frombuffer(f.read(e - b), dtype=dt).reshape(shape)


class Writer:
    """A safetensors file written tensor by tensor in the order of its plan
    [(name, dtype, shape)]: the header first, then each put() in turn."""

    def __init__(self, path, plan):
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, dtype, shape in plan:
            n = SIZES[dtype] * int(np.prod(shape, dtype=np.int64))
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        self.plan, self.next, self.total = plan, 0, off
        self.f = open(path, "wb")
        self.f.write(struct.pack("<Q", len(h)))
        self.f.write(h)

    def put(self, name, dtype, arr):
        want = self.plan[self.next]
        if (name, dtype, tuple(arr.shape)) != (want[0], want[1], tuple(want[2])):
            sys.exit("make_fp8_checkpoint: internal: wrote %s %s %s where the plan has %s" %
                     (name, dtype, list(arr.shape), want))
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        for i in range(0, flat.size, 64 << 20):
            self.f.write(flat[i:i + (64 << 20)].tobytes())
        self.next += 1

    def close(self):
        if self.next != len(self.plan):
            sys.exit("make_fp8_checkpoint: internal: %d of %d tensors written" % (self.next, len(self.plan)))
        self.f.close()


def to_f32(dtype, arr):
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np.float32)


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even (finite inputs)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def amax_scales(amax):
    """amax_scale element-wise: max(amax / 448, FLT_MIN) in f32, 1 for 0."""
    amax = np.asarray(amax, np.float32)
    s = np.maximum((amax / E4M3_MAX).astype(np.float32), np.finfo(np.float32).tiny)
    return np.where(amax == 0, np.float32(1.0), s).astype(np.float32)


def stored_scales(w, layout, block):
    """The scale tensor of w [out, in]: [1], [out, 1] or the block grid."""
    o, i = w.shape
    if layout == "ct-tensor":
        return np.array([amax_scale(w)], np.float32)
    a = np.abs(w.astype(np.float32))
    if layout == "ct-channel":
        return amax_scales(a.max(axis=1) if i else np.zeros(o, np.float32)).reshape(o, 1)
    bo, bi = block
    nbo, nbi = (o + bo - 1) // bo, (i + bi - 1) // bi
    a = np.pad(a, ((0, nbo * bo - o), (0, nbi * bi - i)))  # zeros: |w| >= 0 leaves each amax as it is
    return amax_scales(a.reshape(nbo, bo, nbi, bi).max(axis=(1, 3)))


def expand(stored, shape, layout, block):
    """The stored scales as one per element [out, in]."""
    o, i = shape
    if layout == "ct-tensor":
        return np.full(shape, stored.reshape(-1)[0], np.float32)
    if layout == "ct-channel":
        return np.repeat(stored.reshape(o, 1), i, axis=1).astype(np.float32)
    bo, bi = block
    return np.repeat(np.repeat(stored, bo, axis=0)[:o], bi, axis=1)[:, :i].astype(np.float32)


def round_scales(stored, scale_dtype):
    """-> (the f32 scales the loader reads, the stored (dtype, array)): a
    bf16 scale is rounded to nearest even first."""
    if scale_dtype != "bf16":
        return stored, ("F32", stored)
    bits = to_bf16(stored)
    return to_f32("BF16", bits), ("BF16", bits)


def quantize(w, layout, block, scale_dtype, rows=None, check=True):
    """-> (codes, scale tensor (dtype, array), dequantized f32) of w, or of
    its first `rows` rows (the scales of those rows; ct-tensor's one scale
    over the whole of w). A bf16 scale is rounded first: the codes are made
    with the scale the loader reads (values past 448 then saturate)."""
    part = w if rows is None else w[:rows]
    stored, stored_t = round_scales(stored_scales(w if layout == "ct-tensor" else part, layout, block), scale_dtype)
    full = expand(stored, part.shape, layout, block)
    inv = (np.float32(1.0) / full).astype(np.float32)
    codes = encode((part * inv).astype(np.float32))
    if check:
        cross_check_torch(part, inv, codes)
    return codes, stored_t, (decode(codes) * full).astype(np.float32)


def torch_quantize(w, layout, block, scale_dtype, device):
    """quantize() done by torch on `device` (docstring above): -> (codes,
    scale tensor (dtype, array), dequantized f32), numpy arrays."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(device)
    o, i = t.shape
    a = t.abs()
    if layout == "ct-tensor":
        amax = a.amax().reshape(1)
    elif layout == "ct-channel":
        amax = a.amax(dim=1, keepdim=True)
    else:
        bo, bi = block
        nbo, nbi = (o + bo - 1) // bo, (i + bi - 1) // bi
        a = torch.nn.functional.pad(a, (0, nbi * bi - i, 0, nbo * bo - o))
        amax = a.reshape(nbo, bo, nbi, bi).amax(dim=(1, 3))
    s = torch.clamp(amax / torch.full_like(amax, 448.0), min=float(np.finfo(np.float32).tiny))
    s = torch.where(amax == 0, torch.ones_like(s), s)
    if scale_dtype == "bf16":
        stored_t = ("BF16", s.to(torch.bfloat16).view(torch.int16).cpu().numpy().view(np.uint16))
        s = s.to(torch.bfloat16).to(torch.float32)
    else:
        stored_t = ("F32", s.cpu().numpy())
    if layout == "ct-tensor":
        full = s.reshape(1, 1).expand(o, i)
    elif layout == "ct-channel":
        full = s.expand(o, i)
    else:
        full = s.repeat_interleave(block[0], dim=0)[:o].repeat_interleave(block[1], dim=1)[:, :i]
    inv = torch.ones_like(full) / full
    codes, values = torch_e4m3((t * inv).clamp(-448.0, 448.0))
    return codes, stored_t, (values * full).cpu().numpy()


def torch_e4m3(x):
    """f32 tensor (within +-448) -> (E4M3 codes as numpy uint8, their
    values as an f32 tensor on x's device)."""
    import torch
    q = x.to(torch.float8_e4m3fn)
    return q.view(torch.uint8).cpu().numpy(), q.to(torch.float32)


def torch_device(name):
    try:
        import torch
    except ImportError:
        sys.exit("make_fp8_checkpoint: --quantizer torch needs torch (>= 2.1)")
    if not hasattr(torch, "float8_e4m3fn"):
        sys.exit("make_fp8_checkpoint: --quantizer torch needs torch >= 2.1 (float8_e4m3fn); this is %s" %
                 torch.__version__)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit("make_fp8_checkpoint: --device cuda: torch sees no CUDA device")
    return name


def check_against_numpy(name, w, layout, block, scale_dtype, got):
    """Stops the script unless torch's (codes, scales, dequantized) equal
    numpy's on the whole of w (<= 2^22 elements) or on its first rows."""
    o = w.shape[0]
    rows = None if w.size <= (1 << 22) else min(o, block[0] if layout == "block" else 128)
    codes, (sdt, sarr), deq = quantize(w, layout, block, scale_dtype, rows, check=False)
    gc, (gdt, garr), gd = got
    n = codes.shape[0]
    gs = garr if layout == "ct-tensor" else garr[:sarr.shape[0]]
    same = sdt == gdt and np.array_equal(gc[:n], codes) and np.array_equal(gs.view(np.uint8), sarr.view(np.uint8)) \
        and np.array_equal(gd[:n].view(np.uint32), deq.view(np.uint32))
    if not same:
        sys.exit("make_fp8_checkpoint: %s: torch's codes or scales differ from numpy's (%s rows checked)" %
                 (name, "all" if rows is None else rows))


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


# --kv-names: the tensor names (after PREFIX layers.L.self_attn.) of a
# layer's K and V scales, and the shape of a per-tensor one.
KV_NAMES = {"new": ("k_scale", "v_scale", []),
            "output_scale": ("k_proj.output_scale", "v_proj.output_scale", [1]),
            "kv_scale": ("kv_scale", None, [])}


def kv_scale_tensors(tensors, dtype, heads, names):
    """{name: (dtype, array)}: k_scale 0.01 (L + 1), v_scale 0.013 (L + 1)
    for every attention layer L among the tensor names, shape [] (heads
    None) or [heads] (head j times 1 + 0.125 j), under the names of
    KV_NAMES[names] (kv_scale: the K value alone); {} when there is none."""
    out = {}
    kname, vname, shape = KV_NAMES[names]
    for name in tensors:
        m = ATTENTION.match(name)
        if not m:
            continue
        prefix, layer = m.group(1), int(m.group(2))
        for tname, base in ((kname, 0.01), (vname, 0.013)):
            if not tname:
                continue
            v = np.array(np.float32(base) * np.float32(layer + 1), np.float32).reshape(shape)
            if heads:
                v = (v * (np.float32(1) + np.float32(0.125) * np.arange(heads, dtype=np.float32))).astype(np.float32)
            out["%slayers.%d.self_attn.%s" % (prefix, layer, tname)] = \
                ("BF16", to_bf16(v)) if dtype == "bf16" else ("F32", v)
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


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--layout", choices=["ct-tensor", "ct-channel", "block", "none"], required=True)
    ap.add_argument("--block", type=int, nargs=2, default=[128, 128])
    ap.add_argument("--scale-dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--kv-scales", choices=["f32", "bf16"])
    ap.add_argument("--kv-strategy", choices=["tensor", "attn_head"], default="tensor")
    ap.add_argument("--kv-names", choices=sorted(KV_NAMES), default="new")
    ap.add_argument("--twin")
    ap.add_argument("--quantizer", choices=["numpy", "torch"], default="numpy")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    a = ap.parse_args()
    if a.kv_scales and a.layout == "block":
        sys.exit("make_fp8_checkpoint: --kv-scales needs a compressed-tensors layout (ct-tensor, ct-channel, none)")
    if a.kv_names != "new" and (not a.kv_scales or a.kv_strategy != "tensor"):
        sys.exit("make_fp8_checkpoint: --kv-names %s is a per-tensor name: give --kv-scales with --kv-strategy "
                 "tensor" % a.kv_names)
    if a.layout == "none" and not a.kv_scales:
        sys.exit("make_fp8_checkpoint: --layout none is a kv-only checkpoint: give --kv-scales")
    if a.block[0] < 1 or a.block[1] < 1:
        sys.exit("make_fp8_checkpoint: --block sizes must be >= 1")
    a.device = torch_device(a.device) if a.quantizer == "torch" else None
    return a


def quantized(a, name, info):
    return a.layout != "none" and LINEAR.match(name) and len(info["shape"]) == 2


def scale_shape(a, shape):
    o, i = shape
    if a.layout == "ct-tensor":
        return [1]
    if a.layout == "ct-channel":
        return [o, 1]
    return [(o + a.block[0] - 1) // a.block[0], (i + a.block[1] - 1) // a.block[1]]


def plans(a, items, kv):
    """-> (the FP8 shard's plan, the twin's) for a shard's [(name, info)]
    and its kv scale tensors."""
    fp8, twin = [], []
    scale_suffix = "_scale_inv" if a.layout == "block" else "_scale"
    for name, info in items:
        if quantized(a, name, info):
            fp8 += [(name, "F8_E4M3", info["shape"]),
                    (name + scale_suffix, "BF16" if a.scale_dtype == "bf16" else "F32", scale_shape(a, info["shape"]))]
            twin.append((name, "F32", info["shape"]))
        else:
            fp8.append((name, info["dtype"], info["shape"]))
            twin.append((name, info["dtype"], info["shape"]))
    fp8 += [(k, dt, list(v.shape)) for k, (dt, v) in kv.items()]
    return fp8, twin


def quantize_one(a, name, w):
    if a.quantizer == "numpy":
        return quantize(w, a.layout, a.block, a.scale_dtype)
    got = torch_quantize(w, a.layout, a.block, a.scale_dtype, a.device)
    check_against_numpy(name, w, a.layout, a.block, a.scale_dtype, got)
    return got


def convert_shard(a, path, fn, heads):
    """Writes OUT/fn (and TWIN/fn); -> ({name: (dtype, shape)} of the FP8
    shard, of the twin's, the kv scale count)."""
    base, items = read_header(path)
    kv = kv_scale_tensors([n for n, _ in items], a.kv_scales, heads, a.kv_names) if a.kv_scales else {}
    pf, pt = plans(a, items, kv)
    fw = Writer(os.path.join(a.out, fn), pf)
    tw = Writer(os.path.join(a.twin, fn), pt) if a.twin else None
    suffix = "_scale_inv" if a.layout == "block" else "_scale"
    for name, info in items:
        arr = load_tensor(path, base, info)
        if not quantized(a, name, info):
            fw.put(name, info["dtype"], arr)
            if tw:
                tw.put(name, info["dtype"], arr)
            continue
        codes, (sdt, scale), deq = quantize_one(a, name, to_f32(info["dtype"], arr))
        fw.put(name, "F8_E4M3", codes)
        fw.put(name + suffix, sdt, scale)
        if tw:
            tw.put(name, "F32", deq)
    for k, (dt, v) in kv.items():
        fw.put(k, dt, v)
    fw.close()
    if tw:
        tw.close()
    return pf, pt, len(kv)


def write_index(d, plan_by_file):
    weight_map, total = {}, 0
    for fn, plan in plan_by_file.items():
        for name, dtype, shape in plan:
            weight_map[name] = fn
            total += SIZES[dtype] * int(np.prod(shape, dtype=np.int64))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def write_config(d, cfg):
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def main():
    a = parse_args()
    with open(os.path.join(a.src, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    heads = int(text.get("num_key_value_heads", text["num_attention_heads"])) \
        if a.kv_scales and a.kv_strategy == "attn_head" else None
    files, sharded = shards(a.src)
    copy_side_files(a.src, a.out)
    if a.twin:
        copy_side_files(a.src, a.twin)
    fp8_plans, twin_plans, n_kv = {}, {}, 0
    for fn in files:
        fp8_plans[fn], twin_plans[fn], k = convert_shard(a, os.path.join(a.src, fn), fn, heads)
        n_kv += k
    if a.kv_scales and not n_kv:
        sys.exit("make_fp8_checkpoint: no attention layer (layers.N.self_attn.k_proj.weight) for --kv-scales")
    if sharded:
        write_index(a.out, fp8_plans)
        if a.twin:
            write_index(a.twin, twin_plans)
    write_config(a.out, dict(cfg, quantization_config=quant_config(a.layout, a.block, a.kv_scales, a.kv_strategy)))
    if a.twin:
        write_config(a.twin, cfg)


if __name__ == "__main__":
    main()
