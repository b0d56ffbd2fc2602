#!/usr/bin/env python3
"""Train frt's shipped demo model, models/frt-demo/.

What it makes: a ~5 M parameter causal LM with the Qwen3.5 hybrid text
architecture (transformers `Qwen3_5ForCausalLM`, model_type `qwen3_5_text`):
6 layers [linear, linear, full, linear, linear, full], where "linear" is a
Gated DeltaNet layer (grouped value heads, causal depthwise conv) and "full"
is gated full attention with GQA, partial RoPE and per-head q/k RMSNorm.
It is small enough to ship in the repository (~9.6 MiB of bf16 weights), and
it exercises every buffer kind of frt's live state: KV for the full layers,
recurrent + conv state for the linear layers.

Corpus (nothing is downloaded here): the archive made by
scripts/ref/pack_demo_corpus.py from Debian 12 packages (Python 3.11's
library and its documentation sources, Django, SymPy, pip, Pygments,
setuptools and smaller permissively licensed packages; see its MANIFEST.tsv),
files separated by <|endoftext|>, plus ChatML exchanges generated here from
templates ("write a function that ..." answered with a real function of the
corpus whose docstring is the request), so chat turns end with <|im_end|>. A
fixed share of every batch comes from the chat stream. The archive's
heldout/ packages are never trained on; the held-out loss printed here is
theirs (scripts/ref/eval_demo_model.py measures bits per byte on them).
Windows are 8192 tokens by default, longer than the demo's 6.6k-token prefix.

Runs on the GPU machine (torch 2.x + CUDA, transformers 5, tokenizers,
safetensors, numpy; no network). Usage, from the repository root:

    python3 scripts/ref/train_demo_model.py --tokenizer models/frt-demo \
        --corpus demo-corpus.tar.gz --out W/frt-demo --minutes 5

Writes into --out: config.json, model.safetensors (bf16, tied lm_head not
stored), generation_config.json (eos = [<|im_end|>, <|endoftext|>]), the
tokenizer files copied from --tokenizer, sanity.json (greedy golden tokens
of the reloaded checkpoint in fp32), TRAINING.txt (how it was made).
Exit status: 0 ok; nonzero when training or a sanity check failed (the
files written before the failure stay).
"""

import argparse
import ast
import copy
import datetime
import json
import math
import os
import random
import shutil
import sys
import textwrap
import time
import traceback
import warnings
from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# The architecture. Parameter count (vocab 4096): embed 1,048,576 +
# 4 linear layers x 662,016 + 2 full layers x 656,000 + final norm 256
# = 5,008,896 -> 10.0 MB in bf16.
ARCH = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=6,
    layer_types=["linear_attention", "linear_attention", "full_attention",
                 "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    linear_num_key_heads=4,
    linear_key_head_dim=32,
    linear_num_value_heads=8,
    linear_value_head_dim=32,
    linear_conv_kernel_dim=4,
    hidden_act="silu",
    rms_norm_eps=1e-6,
    max_position_embeddings=32768,
    tie_word_embeddings=True,
    # Partial RoPE on 16 of 64 head dims (8 frequencies). Text positions are
    # the same on the three M-RoPE rows, so the section split has no effect
    # on text; it is set to sum to 8 like Qwen3.5's [11, 11, 10] sums to 32.
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10000000.0,
        "partial_rotary_factor": 0.25,
        "mrope_section": [3, 3, 2],
        "mrope_interleaved": True,
    },
)
MAX_BF16_BYTES = 12 * 1024 * 1024

SYSTEM_PROMPTS = (
    "You are a careful Python coding assistant.",
    "You are frt-demo, a small coding model. Answer with code.",
    "You write clean, readable Python. Keep answers short.",
    "You are a coding agent working in a Python repository. Reply with the code that was asked for.",
)
USER_TEMPLATES = (
    "Write a function that does the following: {doc}",
    "Write a Python function named `{name}`. {doc}",
    "Implement `{name}`: {doc}",
    "I need a helper called {name}. It should do this: {doc}",
    "Please write {name}() for me. Docstring: \"{doc}\"",
    "Can you add a function `{name}` to the module? {doc}",
)
ANSWER_TEMPLATES = (
    "Here is `{name}`:\n\n```python\n{src}\n```",
    "```python\n{src}\n```",
    "Sure. This implements it:\n\n```python\n{src}\n```",
    "Here is an implementation of `{name}`:\n\n```python\n{src}\n```\nIt follows the docstring.",
)


def log(*args):
    print(*args, flush=True)


def read_corpus(tar_path, role, max_bytes):
    """The files under ROLE/ of the corpus archive (scripts/ref/pack_demo_corpus.py),
    sorted by path, up to max_bytes of UTF-8.

    Returns (texts, names, stats). Files that are not UTF-8 or that contain a
    special-token string are skipped and counted, never silently.
    """
    import tarfile
    texts, names = [], []
    total = not_utf8 = has_special = candidates = 0
    with tarfile.open(tar_path, "r:gz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.startswith(role + "/")),
                         key=lambda m: m.name)
        for m in members:
            candidates += 1
            raw = tar.extractfile(m).read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                not_utf8 += 1
                continue
            if any(sp in text for sp in SPECIALS):
                has_special += 1
                continue
            if total + len(raw) > max_bytes:
                break
            texts.append(text)
            names.append(m.name)
            total += len(raw)
    stats = dict(archive=str(tar_path), role=role, candidates=candidates, files=len(texts), bytes=total,
                 skipped_not_utf8=not_utf8, skipped_special=has_special)
    if total < 100_000:
        raise RuntimeError(f"corpus part {role} too small: {stats}")
    return texts, names, stats


def function_examples(texts):
    """(name, first docstring paragraph, dedented source) of small documented functions."""
    out = []
    parse_errors = 0
    for text in texts:
        with warnings.catch_warnings():
            # Old escape sequences in stdlib strings warn; they are not errors.
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                tree = ast.parse(text)
            except SyntaxError:
                parse_errors += 1
                continue
        lines = None
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            first = " ".join(doc.strip().split("\n\n")[0].split())
            if not 20 <= len(first) <= 200:
                continue
            if node.end_lineno - node.lineno > 40:
                continue
            if lines is None:
                # Split on "\n" only: ast counts lines that way (form feeds in
                # stdlib sources would shift str.splitlines()).
                lines = [ln + "\n" for ln in text.split("\n")]
            # The def line through the last body line (decorators excluded);
            # whole lines, so dedent restores column 0.
            src = textwrap.dedent("".join(lines[node.lineno - 1:node.end_lineno])).rstrip()
            if not src.startswith("def "):
                continue
            n_lines = src.count("\n") + 1
            if not 4 <= n_lines <= 30:
                continue
            if any(s in src for s in SPECIALS) or "```" in src:
                continue
            out.append((node.name, first, src))
    return out, parse_errors


def chat_exchanges(texts, n, seed):
    """n ChatML conversations (strings), each ending with <|im_end|>\\n."""
    examples, parse_errors = function_examples(texts)
    if len(examples) < 20:
        raise RuntimeError(f"only {len(examples)} documented functions found for chat data")
    rng = random.Random(seed)
    rng.shuffle(examples)
    convs = []
    for i in range(n):
        name, doc, src = examples[i % len(examples)]
        system = SYSTEM_PROMPTS[rng.randrange(len(SYSTEM_PROMPTS))]
        user = USER_TEMPLATES[rng.randrange(len(USER_TEMPLATES))].format(name=name, doc=doc)
        answer = ANSWER_TEMPLATES[rng.randrange(len(ANSWER_TEMPLATES))].format(name=name, src=src)
        convs.append(
            "<|im_start|>system\n" + system + "<|im_end|>\n"
            "<|im_start|>user\n" + user + "<|im_end|>\n"
            "<|im_start|>assistant\n" + answer + "<|im_end|>\n"
        )
    return convs, dict(functions=len(examples), parse_errors=parse_errors, conversations=len(convs))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="dir with tokenizer.json + tokenizer_config.json")
    ap.add_argument("--out", required=True, help="output checkpoint directory")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step, long phase")
    ap.add_argument("--seq", type=int, default=8192, help="tokens per sequence, long phase (the demo's prefix is 6.6k)")
    ap.add_argument("--batch-short", type=int, default=128, help="sequences per step, short phase")
    ap.add_argument("--seq-short", type=int, default=1024, help="tokens per sequence, short phase")
    ap.add_argument("--long-share", type=float, default=0.15, help="share of the time budget in the long phase")
    ap.add_argument("--lr", type=float, default=1.5e-3, help="peak AdamW learning rate")
    ap.add_argument("--chat", type=int, default=2000, help="ChatML conversations generated")
    ap.add_argument("--chat-share", type=float, default=0.125, help="share of each batch from the chat stream")
    ap.add_argument("--corpus", required=True, help="corpus .tar.gz made by scripts/ref/pack_demo_corpus.py")
    ap.add_argument("--max-bytes", type=int, default=200_000_000, help="training corpus cap")
    ap.add_argument("--device", default="cuda")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    t_start = time.time()
    # No network on the GPU machine: never let the hub client try.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

    import numpy as np
    import torch
    import torch.nn.functional as F
    import tokenizers
    import transformers
    from safetensors import safe_open
    from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    log(f"python {sys.version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}"
        f"  tokenizers {tokenizers.__version__}")
    import transformers.utils as tf_utils
    fla = getattr(tf_utils, "is_flash_linear_attention_available", None)
    log(f"flash-linear-attention available: {fla() if fla is not None else 'unknown'}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("CUDA requested but torch.cuda.is_available() is False")
    dev = torch.device(args.device)
    if dev.type == "cuda":
        log(f"device: {torch.cuda.get_device_name(dev)}")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    # ---- tokenizer -------------------------------------------------------
    tok_dir = Path(args.tokenizer)
    tok = tokenizers.Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    missing = [s for s, i in ids.items() if i is None]
    if missing:
        raise RuntimeError(f"tokenizer lacks special tokens {missing}")
    eot, im_start, im_end = ids["<|endoftext|>"], ids["<|im_start|>"], ids["<|im_end|>"]
    tok_vocab = tok.get_vocab_size(with_added_tokens=True)
    vocab = (tok_vocab + 63) // 64 * 64
    log(f"tokenizer: {tok_vocab} tokens (model vocab {vocab}); specials {ids}")

    # ---- corpus ----------------------------------------------------------
    t0 = time.time()
    texts, names, cstats = read_corpus(args.corpus, "train", args.max_bytes)
    log(f"training corpus: {cstats}  ({time.time() - t0:.1f}s)")
    vtexts, _, vstats = read_corpus(args.corpus, "heldout", args.max_bytes)
    log(f"held-out corpus: {vstats}")
    t0 = time.time()
    convs, chstats = chat_exchanges([t for t, n in zip(texts, names) if n.endswith(".py")], args.chat, args.seed)
    log(f"chat data: {chstats}  ({time.time() - t0:.1f}s)")
    log("example conversation:\n" + convs[0])

    t0 = time.time()
    def stream(docs):
        parts = []
        for e in tok.encode_batch(docs, add_special_tokens=False):
            parts.append(np.asarray(e.ids, dtype=np.int32))
            parts.append(np.asarray([eot], dtype=np.int32))
        return np.concatenate(parts)

    code = stream(texts)
    heldout = stream(vtexts)
    cencs = tok.encode_batch(convs, add_special_tokens=False)
    n_start = sum(e.ids.count(im_start) for e in cencs)
    n_end = sum(e.ids.count(im_end) for e in cencs)
    if n_start != 3 * len(convs) or n_end != 3 * len(convs):
        raise RuntimeError(f"tokenizer does not split ChatML specials out of raw text: "
                           f"{n_start} <|im_start|> and {n_end} <|im_end|> for {len(convs)} conversations")
    chat = np.concatenate([np.asarray(e.ids + [eot], dtype=np.int32) for e in cencs])
    del cencs
    if int(code.max()) >= vocab or int(chat.max()) >= vocab:
        raise RuntimeError("token id out of range of the model vocabulary")
    log(f"tokens: code {code.size:,} ({cstats['bytes'] / code.size:.2f} bytes/token), chat {chat.size:,}"
        f"  ({time.time() - t0:.1f}s)")

    train_code = torch.from_numpy(code.astype(np.int64)).to(dev)
    val_code = torch.from_numpy(heldout.astype(np.int64)).to(dev)
    chat_t = torch.from_numpy(chat.astype(np.int64)).to(dev)
    for name, s in (("train", train_code), ("val", val_code), ("chat", chat_t)):
        if s.numel() <= args.seq + 1:
            raise RuntimeError(f"{name} stream has only {s.numel()} tokens")

    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    # Two phases: short windows (many per step, fast) for most of the budget,
    # then --seq windows (the demo's long prefix) for the last --long-share.
    phases = {"short": (args.batch_short, args.seq_short), "long": (args.batch, args.seq)}

    def windows(stream, n, seq, g):
        starts = torch.randint(0, stream.numel() - seq, (n,), device=dev, generator=g)
        return stream[starts[:, None] + torch.arange(seq, device=dev)[None, :]]

    def next_batch(phase):
        batch, seq = phases[phase]
        n_chat = max(1, int(round(batch * args.chat_share)))
        return torch.cat([windows(train_code, batch - n_chat, seq, gen), windows(chat_t, n_chat, seq, gen)], dim=0)

    # ---- model -----------------------------------------------------------
    config = Qwen3_5TextConfig(
        vocab_size=vocab,
        pad_token_id=eot,
        bos_token_id=None,
        eos_token_id=im_end,
        **copy.deepcopy(ARCH),
    )
    model = Qwen3_5ForCausalLM(config)
    if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        raise RuntimeError("lm_head is not tied to embed_tokens")
    rotary = model.model.rotary_emb.inv_freq.numel()
    if rotary != int(ARCH["head_dim"] * 0.25) // 2:
        raise RuntimeError(f"unexpected rotary frequency count {rotary} (rope_parameters {config.rope_parameters})")
    n_params = sum(p.numel() for p in model.parameters())
    bf16_bytes = 2 * n_params
    log(f"config: {json.dumps(config.to_dict(), sort_keys=True, default=str)}")
    log(f"parameters: {n_params:,}  bf16 {bf16_bytes / 2**20:.2f} MiB  rotary freqs {rotary}")
    if bf16_bytes > MAX_BF16_BYTES:
        raise RuntimeError(f"model too large: {bf16_bytes} bytes of bf16 > {MAX_BF16_BYTES}")
    model.to(dev)
    model.train()

    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=(dev.type == "cuda"),
    )
    budget_s = args.minutes * 60.0
    warmup = 50

    def lr_at(step, frac):
        """Linear warm-up over the first steps, then cosine to 10% over the time budget."""
        if step < warmup:
            return args.lr * (step + 1) / warmup
        return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac))))

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def loss_of(x):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            logits = model(input_ids=x, use_cache=False).logits
        return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    log(f"training: budget {budget_s:.0f}s: batch {args.batch_short} x {args.seq_short} until "
        f"{100 * (1 - args.long_share):.0f}% of it, then {args.batch} x {args.seq}; "
        f"chat share {args.chat_share}, lr {args.lr}, warmup {warmup}")
    t_train = time.time()
    step = 0
    steps_in = {"short": 0, "long": 0}
    loss_sum = torch.zeros((), device=dev)
    loss_n = 0
    last_loss = float("nan")
    history = []
    while True:
        sync()
        frac = (time.time() - t_train) / budget_s
        if frac >= 1.0:
            break
        phase = "short" if frac < 1.0 - args.long_share else "long"
        lr = lr_at(step, frac)
        for g in opt.param_groups:
            g["lr"] = lr
        x = next_batch(phase)
        loss = loss_of(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        steps_in[phase] += 1
        loss_sum += loss.detach()
        loss_n += 1
        if step % 100 == 0:
            last_loss = (loss_sum / loss_n).item()
            if not math.isfinite(last_loss):
                raise RuntimeError(f"non-finite loss at step {step}")
            history.append((step, round(last_loss, 4)))
            log(f"step {step:6d}  {phase:5s}  loss {last_loss:.4f}  lr {lr:.2e}  "
                f"grad_norm {float(grad_norm):.3f}  t {time.time() - t_train:.0f}s")
            loss_sum.zero_()
            loss_n = 0
    sync()
    train_s = time.time() - t_train
    if loss_n > 0:
        last_loss = (loss_sum / loss_n).item()
    log(f"trained {step} steps in {train_s:.1f}s; last loss {last_loss:.4f}")

    model.eval()
    vgen = torch.Generator(device=dev)
    vgen.manual_seed(args.seed + 1)
    with torch.no_grad():
        val_losses = [loss_of(windows(val_code, 4, args.seq, vgen)).item() for _ in range(4)]
        chat_losses = [loss_of(windows(chat_t, 4, args.seq, vgen)).item() for _ in range(2)]
    val_loss = sum(val_losses) / len(val_losses)
    chat_loss = sum(chat_losses) / len(chat_losses)
    log(f"held-out code loss {val_loss:.4f}; chat loss {chat_loss:.4f}")

    # ---- save ------------------------------------------------------------
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.save_pretrained(str(out))
    st_path = out / "model.safetensors"
    if not st_path.is_file():
        raise RuntimeError(f"save_pretrained did not write {st_path}: {sorted(os.listdir(out))}")
    with safe_open(str(st_path), framework="pt") as sf:
        keys = sorted(sf.keys())
        dtypes = sorted({str(sf.get_tensor(k).dtype) for k in keys})
    lm_head_stored = "lm_head.weight" in keys
    log(f"model.safetensors: {st_path.stat().st_size:,} bytes, {len(keys)} tensors, dtypes {dtypes}, "
        f"lm_head.weight stored: {lm_head_stored}")
    gen_cfg = {
        "eos_token_id": [im_end, eot],
        "pad_token_id": eot,
        "do_sample": False,
        "transformers_version": transformers.__version__,
    }
    (out / "generation_config.json").write_text(json.dumps(gen_cfg, indent=2) + "\n")
    copied = []
    # Only the tokenizer's files: --tokenizer may be a whole checkpoint
    # (models/frt-demo), whose weights and config must not overwrite these.
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (tok_dir / name).is_file():
            shutil.copy2(tok_dir / name, out / name)
            copied.append(name)
    log(f"copied tokenizer files: {copied}")
    cfg_json = json.loads((out / "config.json").read_text())
    log(f"config.json: model_type {cfg_json.get('model_type')}, architectures {cfg_json.get('architectures')}, "
        f"tie_word_embeddings {cfg_json.get('tie_word_embeddings')}, dtype {cfg_json.get('dtype')}")

    # ---- sanity check: reload in fp32, compare weights, greedy decode -----
    failures = []
    m2 = Qwen3_5ForCausalLM.from_pretrained(str(out), dtype=torch.float32).to(dev).eval()
    if m2.lm_head.weight.data_ptr() != m2.model.embed_tokens.weight.data_ptr():
        failures.append("reloaded lm_head is not tied")
    sd_saved = model.state_dict()
    sd_loaded = m2.state_dict()
    if sorted(sd_saved) != sorted(sd_loaded):
        failures.append(f"state dict keys differ: {sorted(set(sd_saved) ^ set(sd_loaded))}")
    else:
        worst = max(float((sd_saved[k].float() - sd_loaded[k]).abs().max()) for k in sd_saved)
        log(f"reload: max |saved bf16 - loaded fp32| over all tensors = {worst}")
        if worst != 0.0:
            failures.append(f"reloaded weights differ by {worst}")

    @torch.no_grad()
    def greedy(prompt_ids, n):
        """Greedy decode by full recompute (no cache): the cold reference path."""
        x = torch.tensor([prompt_ids], device=dev)
        first_top = None
        for i in range(n):
            logits = m2(input_ids=x, use_cache=False).logits[0, -1].float()
            if i == 0:
                v, ix = torch.topk(logits, 5)
                first_top = [[int(a), round(float(b), 5)] for a, b in zip(ix.tolist(), v.tolist())]
            nxt = int(torch.argmax(logits))
            x = torch.cat([x, torch.tensor([[nxt]], device=dev)], dim=1)
        return x[0, len(prompt_ids):].tolist(), first_top

    prompts = [
        "def parse_args(",
        "<|im_start|>system\nYou are a careful Python coding assistant.<|im_end|>\n"
        "<|im_start|>user\nWrite a function that returns the sum of the squares of a list of numbers.<|im_end|>\n"
        "<|im_start|>assistant\n",
    ]
    sanity = {"note": "fp32 reload of the bf16 checkpoint; greedy by full recompute without cache; "
                      "generate_ids from model.generate (cached decode, stops at eos)",
              "n_new": 40, "prompts": []}
    for text in prompts:
        p_ids = tok.encode(text, add_special_tokens=False).ids
        g_ids, top5 = greedy(p_ids, 40)
        entry = {"text": text, "prompt_ids": p_ids, "greedy_ids": g_ids,
                 "greedy_text": tok.decode(g_ids, skip_special_tokens=False), "first_top5": top5}
        try:
            x = torch.tensor([p_ids], device=dev)
            with torch.no_grad():
                out_ids = m2.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=40,
                                      do_sample=False)
            gen_ids = out_ids[0, len(p_ids):].tolist()
            entry["generate_ids"] = gen_ids
            entry["generate_matches_greedy"] = gen_ids == g_ids[:len(gen_ids)]
        except Exception:
            tb = traceback.format_exc()
            log("model.generate failed:\n" + tb)
            failures.append("model.generate failed: " + tb.strip().splitlines()[-1])
        sanity["prompts"].append(entry)
        log(f"--- prompt {text!r}\n{entry['greedy_text']!r}\n  ids {g_ids}\n"
            f"  generate matches greedy: {entry.get('generate_matches_greedy')}")
    (out / "sanity.json").write_text(json.dumps(sanity, indent=1) + "\n")

    total_s = time.time() - t_start
    lines = [
        "frt-demo: made by scripts/ref/train_demo_model.py",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"command: {' '.join([sys.executable] + sys.argv)}",
        f"device: {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else dev}",
        f"versions: python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, tokenizers {tokenizers.__version__}",
        f"architecture: Qwen3_5ForCausalLM (qwen3_5_text), {json.dumps(ARCH)}",
        f"vocab: tokenizer {tok_vocab}, model {vocab}",
        f"parameters: {n_params} ({bf16_bytes} bytes bf16); lm_head tied, stored in file: {lm_head_stored}",
        f"corpus: {Path(args.corpus).name} train/: {cstats['files']} files, {cstats['bytes']} bytes, "
        f"{code.size} tokens; held-out/: {vstats['files']} files, {heldout.size} tokens; chat: {chstats['conversations']} conversations from "
        f"{chstats['functions']} functions, {chat.size} tokens, share {args.chat_share} of the rows of every batch",
        f"training: {step} steps ({steps_in['short']} of {args.batch_short} x {args.seq_short}, "
        f"then {steps_in['long']} of {args.batch} x {args.seq}), AdamW lr {args.lr} warmup {warmup} "
        f"cosine to 10% over the time budget, wd 0.1, clip 1.0, bf16 autocast, seed {args.seed}",
        f"final train loss: {last_loss:.4f}; held-out code loss {val_loss:.4f}; chat loss {chat_loss:.4f}",
        f"loss history: {history}",
        f"seconds: training {train_s:.1f}, total {total_s:.1f}",
        f"sanity: {'ok' if not failures else 'FAILED: ' + '; '.join(failures)}",
    ]
    (out / "TRAINING.txt").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))
    if failures:
        log("SANITY CHECK FAILED: " + "; ".join(failures))
        return 3
    log(f"done in {total_s:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
