#!/usr/bin/env python3
"""hf_baseline.py - the Hugging Face transformers reference for frt's model
benchmark (issue 9): the same shape, the same token ids, the same prefix and
suffix lengths, measured the way a transformers user would run them.

  python3 bench/hf_baseline.py --config-dir DIR --ids IDS.json \
      [--prefixes 2048,8192,32768] [--suffix 64] [--repeats 3] \
      [--decode-tokens 16] [--budget-s 150] [--attn sdpa|eager] --json OUT.json

DIR holds config.json (e.g. `frt bench --shape qwen3.5-9b --random-weights
--write-config DIR --no-run`); the weights are random bf16, initialised on
the GPU by transformers (only timing matters). IDS.json is `frt bench
--dump-ids` ({seed, vocab_size, ids}); without it the ids are generated
with frt's generator (xorshift64*, --seed).

Per prefix P (suffix S = the S ids after the prefix):
  cold TTFT      forward(ids[:P+S], use_cache) + argmax       p50/p90/p99
  append         forward(ids[:P]) with a cache, then forward(ids[P:P+S]) on
                 that cache + argmax: the closest transformers analogue of
                 frt's capsule restore + append (there is no restore: the
                 cache is the live one). Timed: the append alone.
  decode         greedy one-token forwards after P + S: median ms/token
Prefixes whose estimated time would pass --budget-s are skipped and listed
in the JSON under "skipped". The JSON labels the transformers and torch
versions, the attention implementation and the linear-attention and conv
kernels in use (flash-linear-attention / causal-conv1d, or the torch
fallback).
"""
import argparse
import json
import os
import sys
import time


def xorshift_ids(seed, n, vocab):
    """frt's token-id generator (tools/bench_model.c, ids_make)."""
    m = (1 << 64) - 1
    x = (seed * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) & m
    out = []
    for _ in range(n):
        x ^= x >> 12
        x ^= (x << 25) & m
        x ^= x >> 27
        out.append((((x * 0x2545F4914F6CDD1D) & m) >> 33) % vocab)
    return out


def pct(v, q):
    s = sorted(v)
    if not s:
        return 0.0
    x = q * (len(s) - 1)
    i = int(x)
    return s[i] + (x - i) * (s[i + 1] - s[i]) if i + 1 < len(s) else s[-1]


def stats(v):
    return {"p50": pct(v, 0.5), "p90": pct(v, 0.9), "p99": pct(v, 0.99), "n": len(v), "samples_ms": v}


def parse_list(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config-dir", required=True)
    ap.add_argument("--ids")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefixes", default="2048,8192")
    ap.add_argument("--suffix", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decode-tokens", type=int, default=16)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    t_start = time.time()
    prefixes = parse_list(a.prefixes)
    if not prefixes or a.repeats < 1 or a.suffix < 1 or a.decode_tokens < 1:
        ap.error("prefixes, repeats, suffix and decode-tokens must be positive")

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    if not torch.cuda.is_available():
        sys.exit("hf_baseline: no CUDA device")
    dev = torch.device("cuda")
    res = {"bench": "hf", "transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "suffix": a.suffix, "repeats": a.repeats,
           "budget_s": a.budget_s, "prefixes": [], "skipped": []}

    def flush():
        res["elapsed_s"] = time.time() - t_start
        res["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        res["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
        with open(a.json + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(a.json + ".tmp", a.json)

    def log(msg):
        print(f"hf_baseline [{time.time() - t_start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    cfg = AutoConfig.from_pretrained(a.config_dir)
    if a.ids:
        with open(a.ids) as f:
            ids = json.load(f)["ids"]
    else:
        ids = xorshift_ids(a.seed, max(prefixes) + a.suffix + a.decode_tokens + 1, cfg.vocab_size)
    need = max(prefixes) + a.suffix
    if len(ids) < need:
        sys.exit(f"hf_baseline: {len(ids)} ids, {need} needed (dump more with frt bench --dump-ids)")
    ids_t = torch.tensor(ids, dtype=torch.long, device=dev).unsqueeze(0)

    log(f"building {cfg.model_type} with random bf16 weights on the GPU ({a.attn})...")
    t0 = time.time()
    with dev:
        try:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation=a.attn)
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, attn_implementation=a.attn)
    model.eval()
    torch.cuda.synchronize()
    res["build_s"] = time.time() - t0
    res["params"] = sum(p.numel() for p in model.parameters())
    res["attn_implementation"] = getattr(model.config, "_attn_implementation", a.attn)
    lin = conv = "none found"
    for mod in model.modules():
        fn = getattr(mod, "chunk_gated_delta_rule", None)
        if fn is not None:
            lin = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', type(fn).__name__)}"
            cf = getattr(mod, "causal_conv1d_fn", None)
            conv = "torch fallback (causal_conv1d_fn is None)" if cf is None else \
                f"{getattr(cf, '__module__', '?')}.{getattr(cf, '__name__', '?')}"
            break
    res["linear_attention_kernel"] = lin
    res["conv_kernel"] = conv
    log(f"built in {res['build_s']:.1f} s: {res['params'] / 1e9:.2f}B params; linear attention: {lin}")

    def sync():
        torch.cuda.synchronize()

    @torch.inference_mode()
    def fwd(x, cache=None):
        out = model(input_ids=x, past_key_values=cache, use_cache=True, logits_to_keep=1)
        tok = out.logits[:, -1].argmax(-1)
        return tok, out.past_key_values

    # warm-up: kernels, cuBLAS handles, allocator
    tok, cache = fwd(ids_t[:, :256])
    for _ in range(2):
        tok, cache = fwd(tok.view(1, 1), cache)
    sync()
    del cache
    flush()

    S, R = a.suffix, a.repeats
    last = None  # (P, seconds spent on it)
    for P in prefixes:
        if last:
            est = last[1] * (P / last[0]) ** 1.3
            if time.time() - t_start + est > a.budget_s:
                msg = f"prefix {P}: estimated {est:.0f} s would pass the {a.budget_s:.0f} s budget"
                log("skipping " + msg)
                res["skipped"].append(msg)
                continue
        t_p = time.time()
        row = {"prefix": P, "suffix": S}
        log(f"P={P}: cold TTFT x{R}...")
        cold = []
        for _ in range(R):
            sync()
            t0 = time.perf_counter()
            tok, cache = fwd(ids_t[:, :P + S])
            tok.item()
            cold.append((time.perf_counter() - t0) * 1e3)
            del cache
        row["cold_ttft"] = stats(cold)
        log(f"P={P}: prefix + append x{R}...")
        pre, app = [], []
        for _ in range(R):
            sync()
            t0 = time.perf_counter()
            tok, cache = fwd(ids_t[:, :P])
            tok.item()
            t1 = time.perf_counter()
            tok, cache = fwd(ids_t[:, P:P + S], cache)
            tok.item()
            t2 = time.perf_counter()
            pre.append((t1 - t0) * 1e3)
            app.append((t2 - t1) * 1e3)
        row["prefix_prefill"] = stats(pre)
        row["append_ttft"] = stats(app)
        log(f"P={P}: decode x{a.decode_tokens}...")
        dec = []
        for _ in range(a.decode_tokens):
            t0 = time.perf_counter()
            tok, cache = fwd(tok.view(1, 1), cache)
            tok.item()
            dec.append((time.perf_counter() - t0) * 1e3)
        del cache
        d50 = pct(dec, 0.5)
        row["decode"] = dict(stats(dec), context=P + S, tokens_per_s=1e3 / d50 if d50 > 0 else 0)
        res["prefixes"].append(row)
        last = (P, time.time() - t_p)
        log(f"P={P}: cold p50 {row['cold_ttft']['p50']:.1f} ms, append p50 {row['append_ttft']['p50']:.1f} ms, "
            f"decode {d50:.1f} ms/token ({last[1]:.0f} s)")
        flush()
    flush()
    print(json.dumps({k: res[k] for k in ("transformers", "torch", "attn_implementation",
                                          "linear_attention_kernel", "conv_kernel")}))
    for r in res["prefixes"]:
        print(f"P={r['prefix']:6d}  cold TTFT p50 {r['cold_ttft']['p50']:9.1f} ms  append p50 "
              f"{r['append_ttft']['p50']:8.1f} ms  decode {r['decode']['p50']:7.2f} ms/token")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
