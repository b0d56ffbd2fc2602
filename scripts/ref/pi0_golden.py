#!/usr/bin/env python3
"""Golden tensors for frt's Pi0 / Pi0.5 policy architecture (src/model/arch/pi0/).

Runs on the GPU machine (torch 2.x, transformers 5.x with models/pi0,
safetensors, numpy; no network; the CPU device is used, fp32, TF32 off):

    python3 scripts/ref/pi0_golden.py OUTDIR

Writes, at small odd shapes (SigLIP width 40, 5 heads of 8, 2 layers, patch 14
on 42x42 images = 9 tokens a camera; Gemma prefix width 48, 3 heads / 1 KV
head of 16, MLP 80, 2 layers, vocabulary 101; action expert width 32, MLP 72,
the same head layout; chunk 5, action_dim 7, max_state_dim 6):

  OUTDIR/pi0/config.json, model.safetensors
      PI0ForConditionalGeneration.save_pretrained of a random-weight model
      (every parameter re-drawn from a seeded normal, norms and biases too).
  OUTDIR/pi0/golden.safetensors
      inputs, exactly as frt takes them:
        pixel_values          F32 [2, 3, 42, 42] in [-1, 1]
        pixel_attention_mask  U8  [2]            camera 1 masked out
        input_ids             I32 [9]            BOS + prompt, 2 right pads
        attention_mask        U8  [9]
        state                 F32 [6]
        noise                 F32 [5, 7]
      outputs:
        actions               F32 [5, 7] transformers' sample_actions
        ref_actions           F32 [5, 7] this script's own reference
                                         (float64, openpi's semantics)
        velocity0             F32 [5, 7] the first Euler step's velocity
        vision_tokens         F32 [2, 9, 48] projected SigLIP tokens (both
                                         cameras, the masked one too)
        prefix_k0, prefix_v0  F32 [27, 1, 16] layer 0 K (after RoPE) and V
                                         of the whole prefix (image tokens
                                         of both cameras, then the prompt)
        prefix_k_last, prefix_v_last     the same for the last layer
        suffix_emb0           F32 [6, 32] the expert input at step 0
                                         (state token, then 5 action tokens)
  OUTDIR/pi05/config.json, model.safetensors, golden.safetensors
      Pi0.5: transformers has no class; the reference below follows openpi's
      PyTorch port (models_pytorch/pi0_pytorch.py, gemma_pytorch.py and its
      transformers_replace/models/gemma/modeling_gemma.py) line by line:
      no state token, the action tokens embedded by action_in_proj alone,
      the timestep through time_mlp_in -> silu -> time_mlp_out -> silu as
      the condition of every expert RMSNorm (adaRMSNorm: dense -> scale,
      shift, gate; x * rsqrt(mean x^2 + eps) * (1 + scale) + shift; the
      residual adds gate * y). Weights use the transformers pi0 layout with
      the Pi0.5 names (config.json model_type "pi05", see docs/policies.md).
      Same inputs and outputs (no state: Pi0.5 takes it in the prompt;
      suffix_emb0 is [5, 32]; time_cond0 F32 [32] the step-0 condition).
  OUTDIR/report.json
      versions, the transformers-vs-reference difference and which reading
      of transformers' semantics (see VARIANTS) it matched.

The reference is float64; transformers runs in float32. Exit status 0 when
both goldens were written; 1 when transformers' PI0 failed: OUTDIR/ERROR.txt
holds the traceback and pi0/ the reference-only golden (ref_actions, no
actions), so the C side can still be checked against the reference.
"""

import inspect
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

SEED = 20
VOCAB = 101
IMAGE_TOKEN = VOCAB
BOS = 2
N_CAM = 2
IMG = 42
PATCH = 14
CHUNK = 5
ACTION_DIM = 7
STATE_DIM = 6
PROMPT = [BOS, 17, 45, 9, 88, 31, 60, 0, 0]
PROMPT_MASK = [1, 1, 1, 1, 1, 1, 1, 0, 0]
CAM_MASK = [1, 0]

VISION = dict(model_type="siglip_vision_model", hidden_size=40, intermediate_size=56,
              num_hidden_layers=2, num_attention_heads=5, patch_size=PATCH, image_size=IMG,
              hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, vision_use_head=False)
TEXT = dict(model_type="gemma", hidden_size=48, intermediate_size=80, num_hidden_layers=2,
            num_attention_heads=3, num_key_value_heads=1, head_dim=16, vocab_size=VOCAB,
            hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6)
DIT = dict(model_type="gemma", hidden_size=32, intermediate_size=72, num_hidden_layers=2,
           num_attention_heads=3, num_key_value_heads=1, head_dim=16, vocab_size=VOCAB,
           hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6)
EPS = 1e-6
# The checkpoint names: the layout transformers 5.17's
# PI0ForConditionalGeneration.save_pretrained writes (what frt reads).
VT = "paligemma_with_expert.paligemma.model.vision_tower."
PROJ = "paligemma_with_expert.paligemma.model.multi_modal_projector.linear"
LM = "paligemma_with_expert.paligemma.model.language_model.model."
EX = "paligemma_with_expert.gemma_expert.model."
ROPE_THETA = 10000.0
MIN_PERIOD, MAX_PERIOD = 4e-3, 4.0
STEPS = 10

# Readings of transformers' PI0 that differ from openpi, tried in turn when
# its actions do not match the openpi reading (report.json says which one
# matched): the vlm prefix's image tokens scaled by sqrt(width) as well, the
# expert input scaled by sqrt(expert width) (GemmaModel's normalizer), the
# state token seeing the action tokens.
VARIANTS = [dict(img_scale=a, dit_scale=b, state_sees_actions=c)
            for a in (False, True) for b in (False, True) for c in (False, True)]


def load_saved(path):
    """The checkpoint as saved (names as on disk), float64."""
    from safetensors import safe_open
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k).to(torch.float64) for k in f.keys()}


# ---------------------------------------------------------------- reference math

def linear(x, W, name, bias=True):
    y = x @ W[name + ".weight"].T
    if bias:
        y = y + W[name + ".bias"]
    return y


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, W, name):
    return F.layer_norm(x, (x.shape[-1],), W[name + ".weight"], W[name + ".bias"], 1e-6)


def siglip(W, pix):
    """pix [n, 3, H, W] -> [n, patches, text width] (post-LN tokens, projected)."""
    p = VT
    x = F.conv2d(pix, W[p + "embeddings.patch_embedding.weight"],
                 W[p + "embeddings.patch_embedding.bias"], stride=PATCH)
    x = x.flatten(2).transpose(1, 2)
    x = x + W[p + "embeddings.position_embedding.weight"][None]
    heads = VISION["num_attention_heads"]
    hd = VISION["hidden_size"] // heads
    for i in range(VISION["num_hidden_layers"]):
        q = p + f"encoder.layers.{i}."
        h = layer_norm(x, W, q + "layer_norm1")
        n, s, _ = h.shape
        qs = linear(h, W, q + "self_attn.q_proj").view(n, s, heads, hd).transpose(1, 2)
        ks = linear(h, W, q + "self_attn.k_proj").view(n, s, heads, hd).transpose(1, 2)
        vs = linear(h, W, q + "self_attn.v_proj").view(n, s, heads, hd).transpose(1, 2)
        a = torch.softmax(qs @ ks.transpose(-1, -2) / math.sqrt(hd), dim=-1) @ vs
        x = x + linear(a.transpose(1, 2).reshape(n, s, -1), W, q + "self_attn.out_proj")
        h = layer_norm(x, W, q + "layer_norm2")
        x = x + linear(gelu_tanh(linear(h, W, q + "mlp.fc1")), W, q + "mlp.fc2")
    x = layer_norm(x, W, p + "post_layernorm")
    return linear(x, W, PROJ)


def rms(x, w=None, cond=None, dense=None, W=None):
    """Gemma RMSNorm x * (1 + w), or openpi's adaRMSNorm when dense is given:
    returns (normed, gate)."""
    n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    if dense is None:
        return n * (1.0 + w), None
    mod = linear(cond, W, dense)
    scale, shift, gate = torch.chunk(mod, 3, dim=-1)
    return n * (1.0 + scale) + shift, gate


def rope(x, pos, hd):
    """x [s, heads, hd], pos [s] -> rotate-half RoPE, theta 10000."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = pos.to(torch.float64)[:, None] * inv[None]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def attend(q, k, v, allowed):
    """q [s, H, d], k/v [t, 1, d], allowed [s, t] bool -> [s, H*d]."""
    d = q.shape[-1]
    sc = torch.einsum("shd,td->hst", q, k[:, 0]) / math.sqrt(d)
    sc = sc.masked_fill(~allowed[None], float("-inf"))
    pr = torch.softmax(sc, dim=-1)
    pr = torch.nan_to_num(pr)  # fully masked rows (padding queries) give 0
    o = torch.einsum("hst,td->shd", pr, v[:, 0])
    return o.reshape(q.shape[0], -1)


def gemma_layer(W, p, cfg, x, pos, kv_extra, allowed, cond=None, ada=False):
    """One Gemma decoder layer. kv_extra: (K, V) prepended (the prefix cache)
    or None. Returns (x, K, V) with K, V of this call's tokens."""
    H, d = cfg["num_attention_heads"], cfg["head_dim"]
    s = x.shape[0]
    if ada:
        h, g1 = rms(x, cond=cond, dense=p + "input_layernorm.dense", W=W)
    else:
        h, g1 = rms(x, W[p + "input_layernorm.weight"])
    q = rope(linear(h, W, p + "self_attn.q_proj", False).view(s, H, d), pos, d)
    k = rope(linear(h, W, p + "self_attn.k_proj", False).view(s, 1, d), pos, d)
    v = linear(h, W, p + "self_attn.v_proj", False).view(s, 1, d)
    K, V = (k, v) if kv_extra is None else (torch.cat([kv_extra[0], k]), torch.cat([kv_extra[1], v]))
    a = linear(attend(q, K, V, allowed), W, p + "self_attn.o_proj", False)
    x = x + (a if g1 is None else a * g1)
    if ada:
        h, g2 = rms(x, cond=cond, dense=p + "post_attention_layernorm.dense", W=W)
    else:
        h, g2 = rms(x, W[p + "post_attention_layernorm.weight"])
    m = gelu_tanh(linear(h, W, p + "mlp.gate_proj", False)) * linear(h, W, p + "mlp.up_proj", False)
    m = linear(m, W, p + "mlp.down_proj", False)
    x = x + (m if g2 is None else m * g2)
    return x, k, v


def sincos(t, dim):
    frac = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64)
    period = MIN_PERIOD * (MAX_PERIOD / MIN_PERIOD) ** frac
    ang = (2 * math.pi / period) * t
    return torch.cat([ang.sin(), ang.cos()])


def prefix_pass(W, inp, img_scale=False):
    """The prefix of one observation and prompt, float64: (out with the vision
    tokens and the layer-0 / last-layer K V, the per-layer KV cache, the pad
    mask of the prefix rows)."""
    out = {}
    pix = inp["pixel_values"].to(torch.float64)
    vt = siglip(W, pix)
    out["vision_tokens"] = vt
    ntok = vt.shape[1]
    tw = TEXT["hidden_size"]
    lang = W[LM + "embed_tokens.weight"][inp["input_ids"].long()] * math.sqrt(tw)
    img = vt.reshape(-1, tw) * (math.sqrt(tw) if img_scale else 1.0)
    x = torch.cat([img, lang])
    pad = torch.cat([inp["pixel_attention_mask"].bool().repeat_interleave(ntok),
                     inp["attention_mask"].bool()])
    pos = torch.cumsum(pad.long(), 0) - 1
    allowed = pad[None, :].expand(len(pad), -1) & pad[:, None]
    cache = []
    for i in range(TEXT["num_hidden_layers"]):
        x, k, v = gemma_layer(W, f"{LM}layers.{i}.", TEXT, x, pos, None, allowed)
        cache.append((k, v))
    out["prefix_k0"], out["prefix_v0"] = cache[0]
    out["prefix_k_last"], out["prefix_v_last"] = cache[-1]
    return out, cache, pad


def velocity(W, inp, cache, pad, xt, step, pi05=False, dit_scale=False, state_sees_actions=False, out=None):
    """v(x_t, t) of the action expert at Euler step `step` on one prefix
    (cache, pad), float64; at step 0 fills out's suffix_emb0 / time_cond0."""
    n_valid = int(pad.sum())
    dw = DIT["hidden_size"]
    dt = -1.0 / STEPS
    t = torch.tensor(float(torch.tensor(1.0 + step * dt, dtype=torch.float32)), dtype=torch.float64)
    a = linear(xt, W, "action_in_proj")
    cond = None
    if pi05:
        c = sincos(t, dw)
        c = F.silu(linear(c, W, "time_mlp_in"))
        cond = F.silu(linear(c, W, "time_mlp_out"))
        s = a
        ar = [1] + [0] * (CHUNK - 1)
    else:
        te = sincos(t, dw)[None].expand(CHUNK, -1)
        at = torch.cat([a, te], -1)
        at = linear(F.silu(linear(at, W, "action_time_mlp_in")), W,
                    "action_time_mlp_out")
        st = linear(inp["state"].to(torch.float64), W, "state_proj")
        s = torch.cat([st[None], at])
        ar = [1, 1] + [0] * (CHUNK - 1)
        if state_sees_actions:
            ar = [1] + [0] * CHUNK
    if step == 0 and out is not None:
        out["suffix_emb0"] = s
        if pi05:
            out["time_cond0"] = cond
    if dit_scale:
        s = s * math.sqrt(dw)
    ns = s.shape[0]
    cum = torch.cumsum(torch.tensor(ar), 0)
    suf_allowed = cum[None, :] <= cum[:, None]
    allowed = torch.cat([pad[None, :].expand(ns, -1), suf_allowed], 1)
    spos = n_valid + torch.arange(ns)
    h = s
    for i in range(DIT["num_hidden_layers"]):
        h, _, _ = gemma_layer(W, f"{EX}layers.{i}.", DIT, h, spos, cache[i], allowed,
                              cond=cond, ada=pi05)
    if pi05:
        h, _ = rms(h, cond=cond, dense=EX + "norm.dense", W=W)
    else:
        h, _ = rms(h, W[EX + "norm.weight"])
    return linear(h[-CHUNK:], W, "action_out_proj")


def reference(W, inp, pi05=False, img_scale=False, dit_scale=False, state_sees_actions=False):
    """The whole inference, float64, openpi's semantics (batch 1)."""
    out, cache, pad = prefix_pass(W, inp, img_scale)
    xt = inp["noise"].to(torch.float64)
    dt = -1.0 / STEPS
    for step in range(STEPS):
        v = velocity(W, inp, cache, pad, xt, step, pi05, dit_scale, state_sees_actions, out)
        if step == 0:
            out["velocity0"] = v
        xt = xt + dt * v
    out["actions"] = xt
    return out


# ---------------------------------------------------------------- inputs and weights

def make_inputs(g):
    return {
        "pixel_values": torch.rand(N_CAM, 3, IMG, IMG, generator=g) * 2 - 1,
        "pixel_attention_mask": torch.tensor(CAM_MASK, dtype=torch.uint8),
        "input_ids": torch.tensor(PROMPT, dtype=torch.int32),
        "attention_mask": torch.tensor(PROMPT_MASK, dtype=torch.uint8),
        "state": torch.randn(STATE_DIM, generator=g),
        "noise": torch.randn(CHUNK, ACTION_DIM, generator=g),
    }


def redraw(params, g):
    """Every parameter from a seeded normal: matrices scaled by 1/sqrt(fan_in),
    vectors (norm weights, biases) by 0.2, so nothing is zero or one."""
    with torch.no_grad():
        for _, p in params:
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            fan = p[0].numel() if p.dim() >= 2 else 0
            p.copy_((r / math.sqrt(fan) if fan else r * 0.2).to(p.dtype))


def to_f32(d):
    return {k: v.detach().to(torch.float32).contiguous() if v.is_floating_point() else v.contiguous()
            for k, v in d.items()}


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def hf_sample(model, inp):
    """transformers' sample_actions on the golden inputs, whichever keyword
    names this version uses."""
    sig = inspect.signature(model.sample_actions).parameters
    pix = inp["pixel_values"][None].float()
    cam = inp["pixel_attention_mask"].bool()[None]
    ids = inp["input_ids"].long()[None]
    am = inp["attention_mask"].long()[None]
    kw = dict(pixel_values=pix, state=inp["state"][None].float(), noise=inp["noise"][None].float())
    if "pixel_attention_mask" in sig:
        # transformers 5 layout: the prompt carries one image placeholder per
        # token of each present camera, ahead of the text.
        ntok = (IMG // PATCH) ** 2
        n_img = int(cam.sum()) * ntok
        ids = torch.cat([torch.full((1, n_img), IMAGE_TOKEN, dtype=torch.long), ids], 1)
        am = torch.cat([torch.ones(1, n_img, dtype=torch.long), am], 1)
        kw.update(input_ids=ids, attention_mask=am, pixel_attention_mask=cam)
    else:
        kw.update(input_ids=ids, attention_mask=am, image_masks=cam)
    return model.sample_actions(**kw)[0]


def pi0_golden(out_dir, report):
    from transformers import PI0Config, PI0ForConditionalGeneration

    g = torch.Generator().manual_seed(SEED)
    cfg = PI0Config(
        vlm_config=dict(model_type="paligemma", text_config=dict(TEXT), vision_config=dict(VISION),
                        projection_dim=TEXT["hidden_size"], image_token_id=IMAGE_TOKEN),
        dit_config=dict(DIT), chunk_size=CHUNK, max_action_dim=ACTION_DIM, max_state_dim=STATE_DIM,
        num_inference_steps=STEPS)
    model = PI0ForConditionalGeneration(cfg).to(torch.float32).eval()
    redraw(sorted(model.named_parameters()), g)
    d = os.path.join(out_dir, "pi0")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d)
    W = load_saved(os.path.join(d, "model.safetensors"))
    report["pi0_saved_names"] = sorted(W.keys())
    with open(os.path.join(d, "config.json")) as f:
        report["pi0_saved_config"] = json.load(f)
    inp = make_inputs(g)
    ref = reference(W, inp)
    hf = hf_sample(model, inp)
    report["pi0_hf_vs_ref_rel"] = rel(hf, ref["actions"])
    # The reading of transformers' semantics closest to its actions (the
    # openpi one first; the time embedding's fp32 frequencies alone leave
    # ~1e-6 between them).
    best = None
    for var in VARIANTS:
        e = rel(hf, reference(W, inp, **var)["actions"])
        report.setdefault("pi0_variants", []).append(dict(var, rel=e))
        if best is None or e < best[1]:
            best = (var, e)
    matched = best[0] if best[1] < 1e-3 else None
    report["pi0_matched_variant"] = matched
    if matched is not None and any(matched.values()):
        ref = reference(W, inp, **matched)
    gold = dict(inp)
    gold.update({k: v for k, v in ref.items() if k != "actions"})
    gold["ref_actions"] = ref["actions"]
    gold["actions"] = hf
    save(d, gold)
    print(f"pi0: transformers vs reference rel {report['pi0_hf_vs_ref_rel']:.3e}, matched {matched}")


def random_weights(shapes, g):
    W = {}
    for name in sorted(shapes):
        r = torch.randn(shapes[name], generator=g, dtype=torch.float64)
        W[name] = r / math.sqrt(r[0].numel()) if len(shapes[name]) >= 2 else r * 0.2
    # adaRMSNorm's dense layers stay near identity modulation, as trained ones do
    for name in W:
        if name.endswith("layernorm.dense.weight") or name.endswith("norm.dense.weight"):
            W[name] = W[name] * 0.5
    return {k: v.float().double() for k, v in W.items()}  # the f32 weights frt reads


def pi0_reference_only(out_dir, report):
    """The Pi0 golden without transformers (when its PI0 class failed): the
    same inputs through the reference alone, weights in the transformers
    layout; golden.safetensors then has ref_actions and no actions."""
    g = torch.Generator().manual_seed(SEED)
    W = random_weights(model_shapes(pi05=False), g)
    inp = make_inputs(g)
    ref = reference(W, inp)
    d = os.path.join(out_dir, "pi0")
    os.makedirs(d, exist_ok=True)
    from safetensors.torch import save_file
    save_file(to_f32(W), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = model_config(pi05=False)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    gold = dict(inp)
    gold.update({k: v for k, v in ref.items() if k != "actions"})
    gold["ref_actions"] = ref["actions"]
    save(d, gold)
    report["pi0_reference_only"] = True


def pi05_golden(out_dir, report):
    g = torch.Generator().manual_seed(SEED + 5)
    W = random_weights(model_shapes(pi05=True), g)
    inp = make_inputs(g)
    del inp["state"]
    ref = reference(W, inp, pi05=True)
    d = os.path.join(out_dir, "pi05")
    os.makedirs(d, exist_ok=True)
    from safetensors.torch import save_file
    save_file(to_f32(W), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(model_config(pi05=True), f, indent=2)
    gold = dict(inp)
    gold.update({k: v for k, v in ref.items()})
    gold["ref_actions"] = ref["actions"]
    save(d, gold)
    report["pi05_weights"] = sorted(W.keys())
    print("pi05: written")


def model_config(pi05):
    """config.json in the transformers pi0 layout (model_type pi05 for
    Pi0.5, docs/policies.md)."""
    text = dict(TEXT)
    return {
        "model_type": "pi05" if pi05 else "pi0",
        "architectures": ["PI05ForConditionalGeneration" if pi05 else "PI0ForConditionalGeneration"],
        "vlm_config": {"model_type": "paligemma", "text_config": text, "vision_config": dict(VISION),
                       "projection_dim": TEXT["hidden_size"], "image_token_id": IMAGE_TOKEN},
        "dit_config": dict(DIT),
        "chunk_size": CHUNK, "max_action_dim": ACTION_DIM, "max_state_dim": STATE_DIM,
        "num_inference_steps": STEPS, "min_period": MIN_PERIOD, "max_period": MAX_PERIOD,
    }


def model_shapes(pi05):
    S = {}
    vw, vi = VISION["hidden_size"], VISION["intermediate_size"]
    p = VT
    S[p + "embeddings.patch_embedding.weight"] = (vw, 3, PATCH, PATCH)
    S[p + "embeddings.patch_embedding.bias"] = (vw,)
    S[p + "embeddings.position_embedding.weight"] = ((IMG // PATCH) ** 2, vw)
    for i in range(VISION["num_hidden_layers"]):
        q = p + f"encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            S[q + n + ".weight"] = (vw,)
            S[q + n + ".bias"] = (vw,)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            S[q + "self_attn." + n + ".weight"] = (vw, vw)
            S[q + "self_attn." + n + ".bias"] = (vw,)
        S[q + "mlp.fc1.weight"], S[q + "mlp.fc1.bias"] = (vi, vw), (vi,)
        S[q + "mlp.fc2.weight"], S[q + "mlp.fc2.bias"] = (vw, vi), (vw,)
    S[p + "post_layernorm.weight"] = (vw,)
    S[p + "post_layernorm.bias"] = (vw,)
    tw = TEXT["hidden_size"]
    S[PROJ + ".weight"] = (tw, vw)
    S[PROJ + ".bias"] = (tw,)
    S[LM + "embed_tokens.weight"] = (VOCAB, tw)
    gemma_shapes(S, LM, TEXT, ada=False)
    gemma_shapes(S, EX, DIT, ada=pi05)
    dw = DIT["hidden_size"]
    heads = [("action_in_proj", dw, ACTION_DIM)]
    if pi05:
        heads += [("time_mlp_in", dw, dw), ("time_mlp_out", dw, dw)]
    else:
        heads += [("state_proj", dw, STATE_DIM), ("action_time_mlp_in", dw, 2 * dw), ("action_time_mlp_out", dw, dw)]
    for n, o, i in heads:
        S[f"{n}.weight"] = (o, i)
        S[f"{n}.bias"] = (o,)
    S["action_out_proj.weight"] = (ACTION_DIM, dw)
    S["action_out_proj.bias"] = (ACTION_DIM,)
    return S


def gemma_shapes(S, p, c, ada):
    w, m, H, d = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["head_dim"]

    def norm(n):
        if ada:
            S[n + ".dense.weight"] = (3 * w, w)
            S[n + ".dense.bias"] = (3 * w,)
        else:
            S[n + ".weight"] = (w,)

    for i in range(c["num_hidden_layers"]):
        q = p + f"layers.{i}."
        norm(q + "input_layernorm")
        norm(q + "post_attention_layernorm")
        S[q + "self_attn.q_proj.weight"] = (H * d, w)
        S[q + "self_attn.k_proj.weight"] = (d, w)
        S[q + "self_attn.v_proj.weight"] = (d, w)
        S[q + "self_attn.o_proj.weight"] = (w, H * d)
        S[q + "mlp.gate_proj.weight"] = (m, w)
        S[q + "mlp.up_proj.weight"] = (m, w)
        S[q + "mlp.down_proj.weight"] = (w, m)
    norm(p + "norm")


def save(d, gold):
    from safetensors.torch import save_file
    t = {}
    for k, v in gold.items():
        if k in ("prefix_k0", "prefix_v0", "prefix_k_last", "prefix_v_last"):
            v = v.reshape(v.shape[0], -1, TEXT["head_dim"])
        t[k] = v
    save_file(to_f32(t), os.path.join(d, "golden.safetensors"))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    report = {"torch": torch.__version__, "seed": SEED}
    rc = 0
    try:
        pi05_golden(out_dir, report)
        try:
            import transformers
            report["transformers"] = transformers.__version__
            pi0_golden(out_dir, report)
        except Exception:  # noqa: BLE001 - the reference-only golden still gets written
            import traceback
            err = traceback.format_exc()
            report["pi0_transformers_error"] = err
            with open(os.path.join(out_dir, "ERROR.txt"), "w") as f:
                f.write("transformers' PI0ForConditionalGeneration failed; pi0/ holds the reference-only golden\n")
                f.write(err)
            print(err, file=sys.stderr)
            pi0_reference_only(out_dir, report)
            rc = 1
    finally:
        with open(os.path.join(out_dir, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
