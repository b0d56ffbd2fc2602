#!/usr/bin/env python3
"""Make frt's golden Qwen3.5 models: tiny random checkpoints plus the
Hugging Face reference outputs that frt's loader and forward pass are
checked against (tests/data/golden/<model>/).

Runs on the GPU machine (torch 2.x, transformers 5.x with Qwen3.5,
safetensors, numpy; no network). From the repository root:

    python3 scripts/ref/make_golden_models.py --out DIR [--archive FILE.tar.gz]

Writes DIR/<model>/ for three models:

  hybrid_v2k_untied   qwen3_5_text (Qwen3_5ForCausalLM, weights under
                      "model."): value heads = 2 x key heads, lm_head untied.
  hybrid_v3k_tied     qwen3_5_text: value heads = 3 x key heads, key head dim
                      16 != value head dim 24, lm_head tied (not stored).
  composite_qwen3_5   qwen3_5 (Qwen3_5ForConditionalGeneration with a tiny
                      vision tower): text weights under
                      "model.language_model.", vision under "model.visual.",
                      lm_head.weight at the top level.

All: vocabulary 4096, partial rotary 0.25 of head_dim 32 (rotary dim 8),
a mixed layer_types list that is not the every-4th pattern.

Each model folder holds:
  config.json, generation_config.json   as saved by transformers (the
                                        generation config is rewritten with
                                        eos_token_id [4095, 4094])
  model.safetensors                     bf16 weights (save_pretrained)
  golden.safetensors                    F32 / I32 reference tensors:
      prompt{k}.ids          I32 [L_k]    k = 0, 1, 2 with L = 7, 100, 1100
      prompt{k}.logits_last  F32 [vocab]  logits at the last position
      hidden.ids             I32 [32]
      hidden.layer{i}        F32 [32, hidden], i = 0 .. n_layers: exactly
                             HF's output_hidden_states tuple: layer0 = the
                             embedding output, layer{i} = the output of
                             decoder layer i-1 for 1 <= i < n_layers, and
                             layer{n_layers} = HF's hidden_states[-1], which
                             transformers 5 replaces by last_hidden_state,
                             i.e. WITH the final RMSNorm applied
                             (golden.json: hidden.last_is_normed checks it)
      hidden.final_prenorm   F32 [32, hidden] the raw output of the last
                             decoder layer (before the final norm)
      greedy.prompt          I32 [16]
      greedy.tokens          I32 [32]    greedy continuation
      greedy.margins         F32 [32]    top1 - top2 logit at each step
  golden.json                          metadata: versions, seeds, errors,
                                       descriptions

References: fp32 on the CPU from the bf16 weights (the saved checkpoint
reloaded with dtype float32, eager attention, no TF32), full recompute
without cache (use_cache=False) for every greedy step. Also recorded:
bf16_logits_rel_err, the norm-wise error ||l_bf16 - l_fp32|| / ||l_fp32||
of transformers' own bf16 run (CUDA when available, else CPU) on the
last-position logits, max over the prompts.

Seeds: a model seed is rejected when its greedy run has a top-2 margin under
1e-3 at any step or fewer than 8 distinct tokens; the next seed is tried.
Exit status 0 when every model was made, 1 otherwise.
"""

import argparse
import json
import math
import os
import shutil
import sys
import tarfile
import tempfile
import time
import traceback

import numpy as np
import torch

VOCAB = 4096
PROMPT_LENS = (7, 100, 1100)
HIDDEN_LEN = 32
GREEDY_PROMPT_LEN = 16
GREEDY_STEPS = 32
MIN_MARGIN = 1e-3
MIN_DISTINCT = 8
MAX_SEED_TRIES = 40
EOS_IDS = [VOCAB - 1, VOCAB - 2]

L, F = "linear_attention", "full_attention"

MODELS = [
    dict(
        name="hybrid_v2k_untied",
        layout="qwen3_5_text",
        description="qwen3_5_text, value heads = 2 x key heads, untied lm_head, layers L F L L F",
        base_seed=1000,
        text=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=5,
            layer_types=[L, F, L, L, F],
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_num_value_heads=4,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=4,
            tie_word_embeddings=False,
        ),
    ),
    dict(
        name="hybrid_v3k_tied",
        layout="qwen3_5_text",
        description="qwen3_5_text, value heads = 3 x key heads, key head dim 16 != value head dim 24, "
        "tied lm_head, layers F L L F L L (full attention first)",
        base_seed=2000,
        embed_std=0.1,
        text=dict(
            hidden_size=96,
            intermediate_size=160,
            num_hidden_layers=6,
            layer_types=[F, L, L, F, L, L],
            num_attention_heads=6,
            num_key_value_heads=2,
            head_dim=32,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_num_value_heads=6,
            linear_value_head_dim=24,
            linear_conv_kernel_dim=4,
            tie_word_embeddings=True,
        ),
    ),
    dict(
        name="composite_qwen3_5",
        layout="qwen3_5",
        description="composite qwen3_5 (Qwen3_5ForConditionalGeneration, tiny vision tower): text under "
        "model.language_model., value heads = 2 x key heads, untied, layers L L F L F L",
        base_seed=3000,
        text=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=6,
            layer_types=[L, L, F, L, F, L],
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=32,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_num_value_heads=4,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=4,
            tie_word_embeddings=False,
        ),
        vision=dict(
            depth=1,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            in_channels=3,
            patch_size=4,
            spatial_merge_size=2,
            temporal_patch_size=2,
            out_hidden_size=64,
            num_position_embeddings=16,
        ),
    ),
]

COMMON_TEXT = dict(
    vocab_size=VOCAB,
    hidden_act="silu",
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
    attention_bias=False,
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10000000.0,
        "partial_rotary_factor": 0.25,
    },
    bos_token_id=None,
    eos_token_id=EOS_IDS[0],
    pad_token_id=None,
)


def log(*a):
    print(*a, flush=True)


def build_config(spec):
    from transformers.models.qwen3_5 import Qwen3_5Config, Qwen3_5TextConfig

    text = dict(COMMON_TEXT)
    text.update(spec["text"])
    text["rope_parameters"] = dict(COMMON_TEXT["rope_parameters"])
    if spec["layout"] == "qwen3_5_text":
        return Qwen3_5TextConfig(**text)
    tie = text.pop("tie_word_embeddings")
    text_cfg = dict(text)
    text_cfg["tie_word_embeddings"] = tie
    return Qwen3_5Config(text_config=text_cfg, vision_config=dict(spec["vision"]), tie_word_embeddings=tie)


def model_class(spec):
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration

    return Qwen3_5ForCausalLM if spec["layout"] == "qwen3_5_text" else Qwen3_5ForConditionalGeneration


def text_prefix(spec):
    return "model." if spec["layout"] == "qwen3_5_text" else "model.language_model."


def inverse_softplus(y):
    return y + torch.log(-torch.expm1(-y))


@torch.no_grad()
def randomize(model, spec, seed):
    """Give every text parameter a non-trivial random value (the default init
    leaves zero-centred norms at 0, the gated norm at 1 and dt_bias at 1).
    Scale: embeddings N(0, 1), projections N(0, 1/fan_in), so activations stay
    O(1) through the layers and greedy decoding is not degenerate."""
    g = torch.Generator().manual_seed(seed)
    prefix = text_prefix(spec)
    seen = []
    for name, p in model.named_parameters():
        if name.startswith("model.visual."):
            continue
        t = torch.empty(p.shape, dtype=torch.float32)
        if name.endswith("embed_tokens.weight"):
            # A tied head reads the embedding back: at std 1 the input
            # embedding dominates the residual and greedy repeats the input
            # token, so tied models use a smaller embedding scale.
            t.normal_(0.0, spec.get("embed_std", 1.0), generator=g)
        elif name.endswith("linear_attn.A_log"):
            t = torch.log(torch.empty(p.shape).uniform_(1.0, 16.0, generator=g))
        elif name.endswith("linear_attn.dt_bias"):
            dt = torch.exp(torch.empty(p.shape).uniform_(math.log(1e-3), 0.0, generator=g))
            t = inverse_softplus(dt)
        elif name.endswith("linear_attn.norm.weight"):
            t.uniform_(0.5, 1.5, generator=g)
        elif name.endswith("linear_attn.conv1d.weight"):
            t.uniform_(-0.5, 0.5, generator=g)
        elif name.endswith("layernorm.weight") or name.endswith("q_norm.weight") or name.endswith(
            "k_norm.weight"
        ) or name == prefix + "norm.weight":
            t.normal_(0.0, 0.1, generator=g)
        elif p.ndim == 2 and name.endswith(".weight"):
            t.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=g)
        else:
            raise RuntimeError(f"randomize: no rule for text parameter {name} {tuple(p.shape)}")
        p.copy_(t.to(p.dtype))
        seen.append(name)
    if not any(n.endswith("linear_attn.A_log") for n in seen) or not any("self_attn.q_proj" in n for n in seen):
        raise RuntimeError(f"randomize: unexpected parameter names: {seen[:20]}")
    return seen


def expected_weight_names(spec):
    """HF names frt reads (modeling_qwen3_5.py), to check save_pretrained's layout."""
    P = text_prefix(spec)
    t = spec["text"]
    names = [P + "embed_tokens.weight", P + "norm.weight"]
    for i, kind in enumerate(t["layer_types"]):
        pre = f"{P}layers.{i}."
        names += [pre + "input_layernorm.weight", pre + "post_attention_layernorm.weight"]
        names += [pre + f"mlp.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")]
        if kind == L:
            names += [pre + "linear_attn." + x for x in (
                "in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight",
                "conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight")]
        else:
            names += [pre + "self_attn." + x for x in (
                "q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "q_norm.weight", "k_norm.weight")]
    if not t["tie_word_embeddings"]:
        names.append("lm_head.weight")
    return names


def forward_logits(model, ids):
    out = model(input_ids=ids, use_cache=False)
    return out.logits


@torch.no_grad()
def greedy(model, prompt, steps):
    x = torch.tensor([prompt], dtype=torch.long)
    toks, margins = [], []
    for _ in range(steps):
        logits = forward_logits(model, x)[0, -1].float()
        top = torch.topk(logits, 2)
        toks.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        x = torch.cat([x, top.indices[:1].view(1, 1)], dim=1)
    return toks, margins


def last_layers(model, spec):
    if spec["layout"] == "qwen3_5_text":
        return model.model.layers, model.model.norm
    return model.model.language_model.layers, model.model.language_model.norm


def save_bf16(spec, cfg, seed, out_dir):
    torch.manual_seed(seed)
    model = model_class(spec)(cfg).eval()
    names = randomize(model, spec, seed)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out_dir)
    return model, names


def check_saved_layout(spec, out_dir):
    from safetensors import safe_open

    path = os.path.join(out_dir, "model.safetensors")
    if not os.path.isfile(path):
        raise RuntimeError(f"save_pretrained did not write a single model.safetensors: {sorted(os.listdir(out_dir))}")
    with safe_open(path, framework="pt") as f:
        keys = set(f.keys())
        dtypes = sorted({str(f.get_slice(k).get_dtype()) for k in keys})
    missing = [n for n in expected_weight_names(spec) if n not in keys]
    if missing:
        raise RuntimeError(f"saved checkpoint lacks expected names (first 10): {missing[:10]}; "
                           f"it has (first 10): {sorted(keys)[:10]}")
    if spec["text"]["tie_word_embeddings"] and "lm_head.weight" in keys:
        log("  note: tied model stored lm_head.weight too")
    return sorted(keys), dtypes


def rel_err(a, b):
    a = a.double()
    b = b.double()
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def make_model(spec, out_root):
    import transformers
    from safetensors.torch import save_file

    t0 = time.time()
    cls = model_class(spec)
    out_dir = os.path.join(out_root, spec["name"])
    tried = []
    chosen = None
    for k in range(MAX_SEED_TRIES):
        seed = spec["base_seed"] + k
        tried.append(seed)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)
        cfg = build_config(spec)
        save_bf16(spec, cfg, seed, out_dir)
        ref = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
        rng = np.random.default_rng(seed)
        gprompt = [int(x) for x in rng.integers(0, VOCAB, GREEDY_PROMPT_LEN)]
        toks, margins = greedy(ref, gprompt, GREEDY_STEPS)
        mm, nd = min(margins), len(set(toks))
        log(f"  seed {seed}: greedy min margin {mm:.3e}, {nd} distinct tokens")
        if mm >= MIN_MARGIN and nd >= MIN_DISTINCT:
            chosen = (seed, ref, rng, gprompt, toks, margins)
            break
    if chosen is None:
        raise RuntimeError(f"no seed in {tried} passed the greedy checks")
    seed, ref, rng, gprompt, toks, margins = chosen
    keys, dtypes = check_saved_layout(spec, out_dir)

    golden = {}
    prompts_meta = []
    ref_logits = []
    with torch.no_grad():
        for i, n in enumerate(PROMPT_LENS):
            ids = [int(x) for x in rng.integers(0, VOCAB, n)]
            logits = forward_logits(ref, torch.tensor([ids]))[0, -1].float().contiguous()
            golden[f"prompt{i}.ids"] = torch.tensor(ids, dtype=torch.int32)
            golden[f"prompt{i}.logits_last"] = logits
            ref_logits.append((ids, logits))
            prompts_meta.append({"name": f"prompt{i}", "length": n, "argmax": int(torch.argmax(logits))})

        hids = [int(x) for x in rng.integers(0, VOCAB, HIDDEN_LEN)]
        layers, norm = last_layers(ref, spec)
        captured = {}

        def hook(_m, _inp, out):
            captured["last"] = (out[0] if isinstance(out, tuple) else out).detach().clone()

        h = layers[-1].register_forward_hook(hook)
        out = ref(input_ids=torch.tensor([hids]), use_cache=False, output_hidden_states=True)
        h.remove()
        hs = out.hidden_states
        n_layers = spec["text"]["num_hidden_layers"]
        if hs is None or len(hs) != n_layers + 1:
            raise RuntimeError(f"output_hidden_states gave {None if hs is None else len(hs)} tensors, "
                               f"expected {n_layers + 1}")
        golden["hidden.ids"] = torch.tensor(hids, dtype=torch.int32)
        for i, t in enumerate(hs):
            golden[f"hidden.layer{i}"] = t[0].float().contiguous()
        prenorm = captured["last"][0].float().contiguous()
        golden["hidden.final_prenorm"] = prenorm
        normed = norm(captured["last"])[0].float()
        last_is_normed = bool(torch.allclose(hs[-1][0].float(), normed, rtol=1e-5, atol=1e-5))
        last_is_raw = bool(torch.allclose(hs[-1][0].float(), prenorm, rtol=1e-5, atol=1e-5))

    golden["greedy.prompt"] = torch.tensor(gprompt, dtype=torch.int32)
    golden["greedy.tokens"] = torch.tensor(toks, dtype=torch.int32)
    golden["greedy.margins"] = torch.tensor(margins, dtype=torch.float32)
    save_file({k: v.contiguous() for k, v in golden.items()}, os.path.join(out_dir, "golden.safetensors"),
              metadata={"format": "pt"})

    # transformers' own bf16 run against the fp32 reference.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    m16 = cls.from_pretrained(out_dir, dtype=torch.bfloat16).to(dev).eval()
    errs = []
    with torch.no_grad():
        for ids, l32 in ref_logits:
            l16 = forward_logits(m16, torch.tensor([ids], device=dev))[0, -1].float().cpu()
            errs.append(rel_err(l16, l32))
    del m16

    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": EOS_IDS, "do_sample": False,
                   "transformers_version": transformers.__version__}, f, indent=2)
        f.write("\n")

    try:
        from transformers.utils import is_flash_linear_attention_available
        fla = bool(is_flash_linear_attention_available())
    except Exception:  # noqa: BLE001 - only informative
        fla = None
    n_params = sum(p.numel() for p in ref.parameters())
    meta = {
        "model": spec["name"],
        "description": spec["description"],
        "layout": spec["layout"],
        "model_class": cls.__name__,
        "weight_prefix": text_prefix(spec),
        "text_config": spec["text"],
        "vision_config": spec.get("vision"),
        "vocab_size": VOCAB,
        "seed": seed,
        "seeds_tried": tried,
        "parameters": n_params,
        "checkpoint_tensors": len(keys),
        "checkpoint_dtypes": dtypes,
        "prompts": prompts_meta,
        "hidden": {
            "ids_length": HIDDEN_LEN,
            "count": n_layers + 1,
            "convention": "hidden.layer0 = embedding output; hidden.layer{i} (1 <= i < n_layers) = output of "
                          "decoder layer i-1; hidden.layer{n_layers} = HF hidden_states[-1] as transformers "
                          "returns it; hidden.final_prenorm = raw output of the last decoder layer",
            "last_is_normed": last_is_normed,
            "last_is_raw": last_is_raw,
        },
        "greedy": {
            "prompt_length": GREEDY_PROMPT_LEN,
            "steps": GREEDY_STEPS,
            "min_margin": min(margins),
            "distinct_tokens": len(set(toks)),
            "method": "full recompute each step, use_cache=False",
        },
        "bf16_logits_rel_err": max(errs),
        "bf16_logits_rel_err_per_prompt": errs,
        "bf16_device": dev,
        "reference": "fp32 on CPU from the bf16 checkpoint (from_pretrained dtype=float32), eager attention, "
                     "no TF32, use_cache=False",
        "eos_token_id": EOS_IDS,
        "flash_linear_attention_available": fla,
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        "seconds": round(time.time() - t0, 2),
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    sizes = {fn: os.path.getsize(os.path.join(out_dir, fn)) for fn in sorted(os.listdir(out_dir))}
    log(f"  {spec['name']}: seed {seed}, {n_params:,} params, files {sizes}, total {sum(sizes.values()):,} bytes")
    log(f"  greedy min margin {min(margins):.3e}, {len(set(toks))} distinct; bf16 rel err {max(errs):.3e} ({dev}); "
        f"hidden[-1] normed: {last_is_normed}; {meta['seconds']} s")
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (one subfolder per model)")
    ap.add_argument("--archive", help="also pack --out into this .tar.gz")
    ap.add_argument("--only", help="comma-separated model names to make")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.makedirs(args.out, exist_ok=True)

    import transformers
    log(f"make_golden_models: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"cuda {torch.cuda.is_available()}")
    only = set(args.only.split(",")) if args.only else None
    failed = []
    summary = []
    for spec in MODELS:
        if only and spec["name"] not in only:
            continue
        log(f"== {spec['name']}: {spec['description']}")
        try:
            summary.append(make_model(spec, args.out))
        except Exception:  # noqa: BLE001 - report and go on with the next model
            traceback.print_exc()
            failed.append(spec["name"])

    log("")
    log("summary:")
    for m in summary:
        log(f"  {m['model']:<20} seed {m['seed']:<5} params {m['parameters']:>9,}  greedy margin "
            f"{m['greedy']['min_margin']:.2e} distinct {m['greedy']['distinct_tokens']:>2}  "
            f"bf16 rel err {m['bf16_logits_rel_err']:.2e}")
    total = 0
    for root, _dirs, files in os.walk(args.out):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    log(f"  total size {total:,} bytes in {args.out}")
    if args.archive:
        with tarfile.open(args.archive, "w:gz") as tar:
            tar.add(args.out, arcname="golden")
        size = os.path.getsize(args.archive)
        log(f"  archive {args.archive}: {size:,} bytes")
        if size > 16 * 1024 * 1024:
            log("  WARNING: archive over 16 MiB")
            failed.append("archive-size")
    if failed:
        log(f"FAILED: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
