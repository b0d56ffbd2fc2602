#!/usr/bin/env python3
"""Make frt's torch-made cartridge fixtures (tests/data/cartridges/, read by
tests/test_cartridge_torch.c).

Runs on the GPU machine (torch 2.x, transformers, safetensors; CPU only, no
network). From the repository root:

    python3 scripts/ref/make_cartridge_fixtures.py --out tests/data/cartridges

Writes, each a few KB to ~60 KB:

  recipe_bf16.pt            the Cartridges recipe: torch.save of a dict of
                            plain lists of tensors, trainable_keys /
                            trainable_values and frozen_keys / frozen_values,
                            one [1, H, T, D] bf16 tensor per layer (2 layers,
                            H 2, D 8, frozen 3 + trainable 5 tokens)
  trainable_cache_f32.pt    HazyResearch's TrainableCache.save shape: a dict
                            of nn.ParameterList of nn.Parameter, f32
                            (3 layers, H 1, D 16, frozen 2 + trainable 4)
  fixed_f16.pt              the older fixed_keys / fixed_values spelling, f16,
                            keys as non-contiguous views (a transpose of
                            [1, H, D, T] made contiguous the other way)
  NAME.expected.safetensors the expected K/V in frt's layout: layers.L.k,
                            layers.L.v [T, H, D] F32 (frozen rows first)
  exact/model/              a tiny random-weight llama (vocab 128, hidden 32,
                            MLP 64, 2 layers, 4 heads, 2 KV heads, head_dim 16,
                            default RoPE theta 10000), bf16 weights
                            (save_pretrained, ~70 KB), no tokenizer; weights
                            randomized as make_golden_dense.py does
  exact/doc_cache.pt        the seed's recipe applied to it: transformers
                            prefills a 40-token document on the CPU in f32
                            (weights reloaded as float32, eager attention) and
                            the cache is dumped as the .pt dict (frozen = the
                            first 4 tokens, trainable = the rest)
  exact/golden.safetensors  doc.ids I32 [40], prompt.ids I32 [8],
                            first_logits F32 [vocab]: logits of the prompt's
                            last token when transformers continues the cache,
                            greedy.tokens I32 [16]: its greedy continuation
                            (cache reused, f32 CPU), greedy.margins F32 [16]
  exact/golden.json         versions, seed

Seeds: the exactness model is rejected when a greedy step has a top-2 margin
under 1e-3 or fewer than 6 distinct tokens; the next seed is tried.
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
from safetensors.torch import save_file


def per_layer(L, H, T, D, dtype, gen):
    return [torch.randn(1, H, T, D, generator=gen).to(dtype) for _ in range(L)]


def frt_layout(frozen, trainable):
    """[T, H, D] f32 per layer, frozen rows first."""
    out = []
    for f, t in zip(frozen, trainable):
        x = torch.cat([f, t], dim=2) if f is not None else t
        out.append(x[0].permute(1, 0, 2).contiguous().float())
    return out


def expected(path, fk, fv, tk, tv):
    ks, vs = frt_layout(fk, tk), frt_layout(fv, tv)
    d = {}
    for l in range(len(ks)):
        d["layers.%d.k" % l] = ks[l]
        d["layers.%d.v" % l] = vs[l]
    save_file(d, path)


def make_shapes(out):
    gen = torch.Generator().manual_seed(25)
    # the recipe: plain lists
    L, H, D, Tf, Tt = 2, 2, 8, 3, 5
    fk, fv = per_layer(L, H, Tf, D, torch.bfloat16, gen), per_layer(L, H, Tf, D, torch.bfloat16, gen)
    tk, tv = per_layer(L, H, Tt, D, torch.bfloat16, gen), per_layer(L, H, Tt, D, torch.bfloat16, gen)
    torch.save({"trainable_keys": tk, "trainable_values": tv, "frozen_keys": fk, "frozen_values": fv},
               os.path.join(out, "recipe_bf16.pt"))
    expected(os.path.join(out, "recipe_bf16.expected.safetensors"), fk, fv, tk, tv)
    # TrainableCache.save: nn.ParameterList of nn.Parameter
    L, H, D, Tf, Tt = 3, 1, 16, 2, 4
    fk, fv = per_layer(L, H, Tf, D, torch.float32, gen), per_layer(L, H, Tf, D, torch.float32, gen)
    tk, tv = per_layer(L, H, Tt, D, torch.float32, gen), per_layer(L, H, Tt, D, torch.float32, gen)
    plist = lambda ts, grad: torch.nn.ParameterList([torch.nn.Parameter(t, requires_grad=grad) for t in ts])
    torch.save({"trainable_keys": plist(tk, True), "trainable_values": plist(tv, True),
                "frozen_keys": plist(fk, False), "frozen_values": plist(fv, False)},
               os.path.join(out, "trainable_cache_f32.pt"))
    expected(os.path.join(out, "trainable_cache_f32.expected.safetensors"), fk, fv, tk, tv)
    # older spelling, f16, non-contiguous keys
    L, H, D, Tf, Tt = 2, 2, 4, 1, 3
    nc = lambda T: [torch.randn(1, H, D, T, generator=gen).half().transpose(2, 3) for _ in range(L)]
    fk, tk = nc(Tf), nc(Tt)
    fv, tv = per_layer(L, H, Tf, D, torch.float16, gen), per_layer(L, H, Tt, D, torch.float16, gen)
    assert not tk[0].is_contiguous()
    torch.save({"trainable_keys": tk, "trainable_values": tv, "fixed_keys": fk, "fixed_values": fv},
               os.path.join(out, "fixed_f16.pt"))
    expected(os.path.join(out, "fixed_f16.expected.safetensors"), fk, fv, tk, tv)


def cache_kv(cache, l):
    """Layer l's (keys, values) [1, H, T, D] of a transformers cache (5.x
    cache.layers[l].keys; 4.x cache.key_cache[l]; legacy tuples)."""
    if hasattr(cache, "layers"):
        return cache.layers[l].keys, cache.layers[l].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[l], cache.value_cache[l]
    return cache[l][0], cache[l][1]


@torch.no_grad()
def randomize(model, seed):
    """Embeddings N(0, 1), projections N(0, 1/fan_in), norm weights
    1 + N(0, 0.1) (as scripts/ref/make_golden_dense.py)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        t = torch.empty(p.shape, dtype=torch.float32)
        if name.endswith("embed_tokens.weight"):
            t.normal_(0.0, 1.0, generator=g)
        elif name.endswith("norm.weight"):
            t.normal_(1.0, 0.1, generator=g)
        elif p.ndim == 2:
            t.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=g)
        else:
            raise RuntimeError("randomize: no rule for %s" % name)
        p.copy_(t.to(p.dtype))


def make_exact(out, seed0):
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    d = os.path.join(out, "exact")
    mdir = os.path.join(d, "model")
    V, T, P, G, F = 128, 40, 8, 16, 4
    for seed in range(seed0, seed0 + 50):
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                          hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          bos_token_id=None, eos_token_id=V - 1, pad_token_id=None)
        m = LlamaForCausalLM(cfg).eval()
        randomize(m, seed)
        shutil.rmtree(mdir, ignore_errors=True)
        m.to(torch.bfloat16).save_pretrained(mdir)
        ref = LlamaForCausalLM.from_pretrained(mdir, dtype=torch.float32, attn_implementation="eager").eval()
        g = torch.Generator().manual_seed(seed)
        doc = torch.randint(0, V - 1, (1, T), generator=g)
        prompt = torch.randint(0, V - 1, (1, P), generator=g)
        with torch.no_grad():
            o = ref(doc, use_cache=True)
            cache = o.past_key_values
            ks = [cache_kv(cache, l)[0].clone() for l in range(cfg.num_hidden_layers)]
            vs = [cache_kv(cache, l)[1].clone() for l in range(cfg.num_hidden_layers)]
            o = ref(prompt, past_key_values=cache, use_cache=True)
            first = o.logits[0, -1].float().clone()
            logits, cache = first, o.past_key_values
            toks, margins = [], []
            for _ in range(G):
                top = torch.topk(logits, 2)
                toks.append(int(top.indices[0]))
                margins.append(float(top.values[0] - top.values[1]))
                o = ref(torch.tensor([[toks[-1]]]), past_key_values=cache, use_cache=True)
                logits, cache = o.logits[0, -1].float(), o.past_key_values
        if min(margins) < 1e-3 or len(set(toks)) < 6:
            continue
        torch.save({"frozen_keys": [k[:, :, :F].clone() for k in ks],
                    "frozen_values": [v[:, :, :F].clone() for v in vs],
                    "trainable_keys": [k[:, :, F:].clone() for k in ks],
                    "trainable_values": [v[:, :, F:].clone() for v in vs]},
                   os.path.join(d, "doc_cache.pt"))
        save_file({"doc.ids": doc[0].to(torch.int32), "prompt.ids": prompt[0].to(torch.int32),
                   "first_logits": first, "greedy.tokens": torch.tensor(toks, dtype=torch.int32),
                   "greedy.margins": torch.tensor(margins, dtype=torch.float32)},
                  os.path.join(d, "golden.safetensors"))
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump({"seed": seed, "torch": torch.__version__, "transformers": transformers.__version__,
                       "document_tokens": T, "frozen_tokens": F, "prompt_tokens": P, "greedy_tokens": G,
                       "min_margin": min(margins)}, f, indent=2)
        return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "exact"), exist_ok=True)
    torch.set_grad_enabled(False)
    make_shapes(a.out)
    if not make_exact(a.out, a.seed):
        print("no seed gave a clear greedy run", file=sys.stderr)
        return 1
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
