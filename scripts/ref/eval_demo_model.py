#!/usr/bin/env python3
"""Measure how well a demo checkpoint writes Python: the two figures of the
demo model's acceptance (issue 18), for one or more checkpoints side by side.

1. Bits per byte on held-out source: every file under heldout/ of the corpus
   archive (scripts/ref/pack_demo_corpus.py; packages never trained on) is
   encoded as the training script does (<|endoftext|> before the file's
   tokens), scored in non-overlapping windows of --window tokens, each window
   after the first conditioned on nothing but itself; the sum of the
   next-token negative log-likelihoods (nats) over all files, divided by
   ln 2 and by the files' UTF-8 byte count.
2. Compiling continuations: 32 function headers (the `def` line through the
   line ending the signature, dedented; decorators and docstrings not
   included) drawn with a fixed seed from the held-out files; for each,
   64 tokens are sampled (temperature --temperature, top-p --top-p, seed
   --seed; a special token ends the continuation early), the continuation is
   cut at its last complete line (its last newline), and header + cut is
   compiled with py_compile. The share that compiles is reported ("strict").
   The same protocol applied to the held-out code itself (the real 64
   tokens after each header) is reported next to it ("oracle"): a body cut
   after 64 tokens is often inside a docstring or right after `if ...:`, so
   even the real code compiles only in a minority of cases. A second figure,
   "valid prefix", asks what the strict one means to ask: is header + cut a
   valid beginning of a Python program (the interactive interpreter's test,
   codeop.compile_command: complete or incomplete, not a syntax error), with
   at least one non-blank body line.

Runs wherever torch + transformers 5 + tokenizers are (the GPU machine; fp32,
TF32 off). Usage, from the repository root:

    python3 scripts/ref/eval_demo_model.py --corpus demo-corpus.tar.gz \\
        --model old=models/frt-demo --model new=W/frt-demo --out eval.json

Prints a table and writes every figure, each sampled continuation and its
compile result into --out. Exit status 0 ok, 1 on failure.
"""

import argparse
import ast
import codeop
import json
import math
import os
import py_compile
import random
import sys
import tarfile
import tempfile
import textwrap
import warnings

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def heldout_files(tar_path):
    out = []
    with tarfile.open(tar_path, "r:gz") as tar:
        for m in sorted((m for m in tar.getmembers() if m.isfile() and m.name.startswith("heldout/")),
                        key=lambda m: m.name):
            raw = tar.extractfile(m).read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if any(s in text for s in SPECIALS):
                continue
            out.append((m.name, text))
    if not out:
        raise RuntimeError(f"{tar_path}: no held-out files")
    return out


def function_headers(files, n, seed):
    """n dedented function headers (each ends with ':\\n') from the files."""
    heads = []
    for name, text in files:
        if not name.endswith(".py"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
        lines = [ln + "\n" for ln in text.split("\n")]
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef) or not node.body:
                continue
            first_body = node.body[0].lineno
            head = "".join(lines[node.lineno - 1:first_body - 1])
            if not head.rstrip().endswith(":") or len(head) > 400:
                continue  # one-line bodies (`def f(): return x`) and huge signatures
            head = textwrap.dedent(head)
            if not head.startswith("def "):
                continue
            try:
                compile(head + "    pass\n", "<header>", "exec")
            except SyntaxError:
                continue
            heads.append((name, node.name, head))
    if len(heads) < n:
        raise RuntimeError(f"only {len(heads)} function headers in the held-out files")
    rng = random.Random(seed)
    return rng.sample(heads, n)


def compiles(src):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
        path = f.name
    try:
        py_compile.compile(path, cfile=path + "c", doraise=True)
        return True, ""
    except py_compile.PyCompileError as e:
        return False, str(e.exc_value).splitlines()[0] if e.exc_value else "error"
    finally:
        for p in (path, path + "c"):
            if os.path.exists(p):
                os.unlink(p)


def valid_prefix(head, cut):
    if not cut.strip():
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            codeop.compile_command(head + cut, symbol="exec")
        return True
    except (SyntaxError, ValueError, OverflowError):
        return False


def cut_at_last_line(text):
    return text[:text.rfind("\n") + 1] if "\n" in text else ""


def real_continuations(files, heads, tok, n_tokens):
    """For each header, the held-out file's own next n_tokens tokens after it, decoded."""
    by_name = dict(files)
    out = []
    for file, fn, head in heads:
        text = by_name[file]
        # the header as it stands in the file (indented), then what follows it
        first = head.splitlines()[0].strip()
        at = text.find(first)
        lines_in_head = head.count("\n")
        start = at
        for _ in range(lines_in_head):
            start = text.index("\n", start) + 1
        ids = tok.encode(text[start:], add_special_tokens=False).ids[:n_tokens]
        body = tok.decode(ids, skip_special_tokens=False)
        indent = len(text[text.rfind("\n", 0, at) + 1:at])
        # dedent the body by the header's indentation, as the header was
        body = "".join(ln[indent:] if ln[:indent].strip() == "" else ln
                       for ln in body.splitlines(keepends=True))
        out.append(body)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR (repeatable)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import torch.nn.functional as F
    import tokenizers
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device if torch.cuda.is_available() or args.device == "cpu" else "cpu")
    files = heldout_files(args.corpus)
    n_bytes = sum(len(t.encode()) for _, t in files)
    heads = function_headers(files, args.samples, args.seed)
    report = {"oracle": None, "corpus": os.path.basename(args.corpus), "heldout_files": len(files), "heldout_bytes": n_bytes,
              "window": args.window, "sampling": {"temperature": args.temperature, "top_p": args.top_p,
                                                  "new_tokens": args.new_tokens, "seed": args.seed},
              "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "models": {}}
    for spec in args.model:
        name, _, path = spec.partition("=")
        tok = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        eot = tok.token_to_id("<|endoftext|>")
        special_ids = {tok.token_to_id(s) for s in SPECIALS}
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(dev).eval()

        nll = 0.0
        n_tok = 0
        with torch.no_grad():
            for _, text in files:
                ids = [eot] + tok.encode(text, add_special_tokens=False).ids
                for s in range(0, len(ids) - 1, args.window):
                    w = ids[s:s + args.window + 1]
                    if len(w) < 2:
                        continue
                    x = torch.tensor([w], device=dev)
                    logits = model(input_ids=x[:, :-1], use_cache=False).logits[0].float()
                    nll += float(F.cross_entropy(logits, x[0, 1:], reduction="sum"))
                    n_tok += len(w) - 1
        bpb = nll / math.log(2) / n_bytes

        if report["oracle"] is None:
            reals = real_continuations(files, heads, tok, args.new_tokens)
            o_strict = sum(compiles(h + cut_at_last_line(r))[0] for (_, _, h), r in zip(heads, reals))
            o_prefix = sum(valid_prefix(h, cut_at_last_line(r)) for (_, _, h), r in zip(heads, reals))
            report["oracle"] = {"strict": o_strict, "valid_prefix": o_prefix, "n": len(heads),
                                "continuations": reals}
            print(f"oracle (the held-out code's own next {args.new_tokens} tokens): strict {o_strict}/{len(heads)}, "
                  f"valid prefix {o_prefix}/{len(heads)}", flush=True)
        torch.manual_seed(args.seed)
        samples = []
        ok = 0
        okp = 0
        for file, fn, head in heads:
            p_ids = [eot] + tok.encode(head, add_special_tokens=False).ids
            x = torch.tensor([p_ids], device=dev)
            with torch.no_grad():
                out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=True,
                                     temperature=args.temperature, top_p=args.top_p, top_k=0,
                                     max_new_tokens=args.new_tokens, eos_token_id=sorted(special_ids),
                                     pad_token_id=eot)
            new = out[0, len(p_ids):].tolist()
            cut_at = next((i for i, t in enumerate(new) if t in special_ids), len(new))
            cont = tok.decode(new[:cut_at], skip_special_tokens=False)
            cut = cut_at_last_line(cont)
            good, err = compiles(head + cut)
            prefix = valid_prefix(head, cut)
            ok += good
            okp += prefix
            samples.append({"file": file, "function": fn, "header": head, "continuation": cont,
                            "cut": cut, "compiles": good, "error": err, "valid_prefix": prefix})
        report["models"][name] = {"path": path, "tokens": n_tok, "nll_nats": nll,
                                  "nats_per_token": nll / n_tok, "bits_per_byte": bpb,
                                  "compiled": ok, "samples_n": len(heads),
                                  "compile_share": ok / len(heads), "valid_prefix": okp,
                                  "valid_prefix_share": okp / len(heads), "samples": samples}
        print(f"{name:8s} {path}: held-out {n_tok} tokens / {n_bytes} bytes: {nll / n_tok:.4f} nats/token, "
              f"{bpb:.4f} bits/byte; continuations: strict (py_compile) {ok}/{len(heads)}, "
              f"valid prefix {okp}/{len(heads)}", flush=True)
        del model
    names = list(report["models"])
    if len(names) >= 2:
        a, b = report["models"][names[0]], report["models"][names[-1]]
        report["bpb_change"] = b["bits_per_byte"] / a["bits_per_byte"] - 1
        print(f"bits per byte {names[-1]} vs {names[0]}: {100 * report['bpb_change']:+.1f}% "
              f"(target <= -30%); {names[-1]}: strict {100 * b['compile_share']:.0f}%, valid prefix "
              f"{100 * b['valid_prefix_share']:.0f}% (target >= 50%)")
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"eval_demo_model: {e}", file=sys.stderr)
        sys.exit(1)
