// encode.mjs TEXTS OUT NAME=DIR... - ids of each text of TEXTS (a JSON list
// of strings) by @lenml/tokenizers (a JavaScript port of Hugging Face
// tokenizers) for the tokenizer.json + tokenizer_config.json of each DIR,
// written to OUT in the format of scripts/ref/make_tokenizer_goldens.py.
// A cross-check for tests/sh/tokenizer_real.sh, not the reference.
import { readFileSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { TokenizerLoader } from "@lenml/tokenizers";

const SPECIAL_TEXTS = 8;
const [textsPath, outPath, ...specs] = process.argv.slice(2);
if (!outPath || specs.length === 0) {
  console.error("usage: node encode.mjs TEXTS OUT NAME=DIR...");
  process.exit(2);
}
const sha256 = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const out = {
  generator: "tests/node/tokenizers-real/encode.mjs (@lenml/tokenizers 3.7.2)",
  texts_sha256: sha256(textsPath),
  special_texts: Math.min(SPECIAL_TEXTS, texts.length),
  tokenizers: {},
};
for (const spec of specs) {
  const eq = spec.indexOf("=");
  const name = spec.slice(0, eq), dir = spec.slice(eq + 1);
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8")),
    tokenizerConfig: JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8")),
  });
  const enc = (t, special) => Array.from(tok.encode(t, { add_special_tokens: special }));
  out.tokenizers[name] = {
    tokenizer_json_sha256: sha256(`${dir}/tokenizer.json`),
    ids: texts.map((t) => enc(t, false)),
    ids_special: texts.slice(0, SPECIAL_TEXTS).map((t) => enc(t, true)),
  };
}
writeFileSync(outPath, JSON.stringify(out) + "\n");
